"""Request time for ``request_percentage`` quotas (KIP-124).

Kafka counts the time each request spends on its network and request
handler threads. The bundled broker serves each connection from one trio
task, so the equivalent is the time that task runs on the broker's trio
thread (reading, decoding, handling, encoding; not the time it waits,
such as a Fetch long poll, nor work done in worker threads).
`RequestTimeMeter` is a trio instrument summing each task's run time; it
is installed once a ``request_percentage`` quota exists.
"""

from __future__ import annotations

import time

import trio

__all__ = ["RequestTimeMeter"]


class RequestTimeMeter(trio.abc.Instrument):
    """Run time per trio task (seconds), taken by `take`."""

    def __init__(self) -> None:
        self._spent: dict[trio.lowlevel.Task, float] = {}
        self._task: trio.lowlevel.Task | None = None
        self._started = time.perf_counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._task = task
        self._started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self._spent[task] = self._spent.get(task, 0.0) + time.perf_counter() - self._started

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self._spent.pop(task, None)

    def take(self) -> float:
        """The current task's run time since the last `take` (seconds),
        its current step so far included."""
        now = time.perf_counter()
        task = trio.lowlevel.current_task()
        spent = self._spent.pop(task, 0.0)
        if task is self._task:  # (a step begun before the meter was installed is not counted)
            spent += now - self._started
            self._started = now
        return spent
