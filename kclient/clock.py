"""The one wall clock every layer of kclient reads, in milliseconds.

Kafka timestamps (record CreateTime and LogAppendTime, segment roll and
retention times, ZooKeeper registration times) are milliseconds since the
Unix epoch. This module is the single place that reads the clock for them,
so that every layer agrees on how (``time.time_ns() // 1_000_000``: integer
arithmetic, no float rounding) and a test can see one definition.

It lives at the top of the package, not in `kclient.protocol`, because the
protocol layer stays pure (bytes in, values out, no clock reads): a record
timestamp is always passed into it. The broker, the storage layer, the
clients and the tools may all import it; it imports nothing from kclient.
Code that must be testable with a fake clock takes a ``clock`` callable
defaulting to `now_ms` (as `kclient.storage.Log` does).
"""

from __future__ import annotations

import time

__all__ = ["now_ms"]


def now_ms() -> int:
    """Milliseconds since the Unix epoch, from the system wall clock.

    Returns:
        The current time as an integer number of milliseconds, truncated
            (``time.time_ns() // 1_000_000``).
    """
    return time.time_ns() // 1_000_000
