"""A base for broker components that start background tasks on demand
(one per destination broker, one per leader, ...): `TaskHost.run` opens
the nursery they are started in and hosts them until cancelled."""

from __future__ import annotations

import trio


class TaskHost:
    """Hosts the tasks a component starts in ``_nursery`` (None until
    `run` has started)."""

    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the component's tasks until cancelled.

        Args:
            task_status: Told once the nursery is open (``nursery.start``).
        """
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()


__all__ = ["TaskHost"]
