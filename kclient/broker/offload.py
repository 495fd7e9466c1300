"""CPU work on client input, run in a worker thread instead of the event loop.

Parsing a large request frame or evaluating a SASL token costs CPU in
proportion to what the client sent (about 0.5 s per MiB of small structs,
2.5 us per character of a SCRAM user name); on the broker's event loop that
would stall every other connection. `run_in_worker` runs such a call in a
worker thread (``trio.to_thread.run_sync``) under a limiter.

An exception raised in the worker comes back *without* its traceback and
chained exceptions, and no frame keeps a reference to it: their frames
would hold the client's bytes (the frame, the token) and, through
reference cycles, keep them alive until the cyclic garbage collector runs
(the broker raises its thresholds, `kclient.broker.gc_tuning`), which a
flood of malformed frames would otherwise turn into gigabytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import trio

__all__ = ["run_in_worker"]

_T = TypeVar("_T")


def _detached(fn: Callable[..., _T], args: tuple[Any, ...]) -> tuple[_T | None, Exception | None]:
    """``(fn(*args), None)``, or ``(None, the exception)`` stripped of its
    traceback and chained exceptions."""
    try:
        return fn(*args), None
    except Exception as exc:
        exc.__traceback__ = None
        exc.__context__ = None
        exc.__cause__ = None
        return None, exc


async def run_in_worker(fn: Callable[..., _T], *args: Any, limiter: trio.CapacityLimiter | None = None) -> _T:
    """``fn(*args)`` in a worker thread.

    Args:
        fn: A function of the client's input, safe to run in another thread.
        *args: Its arguments.
        limiter: Bounds the worker threads (``None``: trio's default).

    Returns:
        What ``fn`` returned.

    Raises:
        Exception: What ``fn`` raised, without its traceback or chained
            exceptions.
    """
    result, error = await trio.to_thread.run_sync(_detached, fn, args, limiter=limiter)
    if error is not None:
        try:
            raise error
        finally:
            # No local may keep the exception: its traceback holds this
            # frame, a cycle that would keep ``args`` alive until the
            # cyclic collector runs.
            del error, args
    return result  # type: ignore[return-value]
