"""Named crash points for crash tests: a process started with
``KCLIENT_CRASH_POINT=<name>`` (or ``<name>:<n>``, the ``n``-th time, 1 by
default) kills itself with SIGKILL when it reaches `crash_point` with that
name, so a test can stop a broker at an exact write stage (a batch written
but its index entry not, a ``__transaction_state`` record appended but not
acknowledged, ...) and check what recovery makes of the files. Off by
default: without the variable a crash point is one comparison.

The points (``name``: where the process dies):

* ``txn.data.appended``: a transactional data batch is in the segment,
  the transaction state and ``.txnindex`` not yet updated;
* ``txn.marker.appended``: a COMMIT / ABORT marker is in the segment, the
  ``.txnindex`` entry of an ABORT not yet written;
* ``txn.index.appended``: an ABORT's ``.txnindex`` entry is written, the
  producer state snapshot not yet taken;
* ``log.rolled``: a new segment (with its ``.txnindex``) exists, the
  producer state snapshot of the roll not yet taken;
* ``txn_state.appended.<State>``: a ``__transaction_state`` record of the
  transition to ``<State>`` (Kafka's name: ``Ongoing``, ``PrepareCommit``,
  ``CompleteAbort``, ...) is appended, not yet acknowledged.
"""

from __future__ import annotations

import os
import signal

#: The environment variable arming a crash point.
CRASH_POINT_ENV = "KCLIENT_CRASH_POINT"


def _parse(spec: str | None) -> tuple[str | None, int]:
    if not spec:
        return None, 0
    name, _, count = spec.partition(":")
    return name, int(count) if count else 1


_target, _remaining = _parse(os.environ.get(CRASH_POINT_ENV))


def crash_point(name: str) -> None:
    """Die with SIGKILL here if ``name`` is the armed crash point (and this
    is its ``n``-th hit); do nothing otherwise.

    Args:
        name: The crash point's name (see the module docstring).
    """
    global _remaining
    if _target is None or name != _target:
        return
    _remaining -= 1
    if _remaining <= 0:
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["CRASH_POINT_ENV", "crash_point"]
