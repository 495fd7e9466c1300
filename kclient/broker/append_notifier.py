"""Wakes Fetch long polls when a partition they wait on grows.

Kafka parks a Fetch that has fewer than ``min_bytes`` to answer in its
fetch purgatory (``DelayedFetch``) and completes it when an append (or a
high watermark move) reaches one of its partitions; `AppendNotifier` is
that wake-up, keyed by ``(topic, partition)``.
"""

from __future__ import annotations

import trio

__all__ = ["AppendNotifier"]


class AppendNotifier:
    """Wakes Fetch long polls when a partition they wait on is appended to.

    A waiter registers one `trio.Event` under every ``(topic,
    partition)`` it reads; `notify` sets (and forgets) the events
    registered for a partition. Trio-thread only.
    """

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[trio.Event]] = {}

    def register(self, keys: list[tuple[str, int]]) -> trio.Event:
        """A new event set by the next append to any of ``keys``.

        Args:
            keys: The ``(topic, partition)`` pairs to wait on.

        Returns:
            The event; `unregister` it once it fired or the wait ended.
        """
        event = trio.Event()
        for key in keys:
            self._waiters.setdefault(key, set()).add(event)
        return event

    def unregister(self, keys: list[tuple[str, int]], event: trio.Event) -> None:
        """Forget ``event`` (after it fired or the wait timed out).

        Args:
            keys: The keys it was registered under.
            event: The event `register` returned.
        """
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[key]

    def notify(self, key: tuple[str, int]) -> None:
        """Wake every waiter of partition ``key``.

        Args:
            key: The ``(topic, partition)`` appended to.
        """
        waiters = self._waiters.pop(key, None)
        if waiters:
            for event in waiters:
                event.set()
