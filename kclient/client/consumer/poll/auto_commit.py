"""Commits in the background: the auto-commit of the positions every
``auto.commit.interval.ms`` (``enable.auto.commit``; Kafka's
``ConsumerCoordinator.maybeAutoCommitOffsetsAsync``, run from ``poll`` so
that only what earlier polls handed out is committed: at-least-once), and
asynchronous commits (``commitAsync``), whose failures are logged and
passed to the caller's callback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from kclient.client.consumer.poll.types import OffsetAndMetadata, TopicPartition
from kclient.errors import KafkaError

log = logging.getLogger("kclient.consumer")

Offsets = Mapping[TopicPartition, OffsetAndMetadata]


async def commit_logged(commit: Callable[[Offsets], Awaitable[None]], offsets: Offsets, callback: Callable[[Offsets, KafkaError | None], Any] | None) -> None:
    """Commit, logging a failure instead of raising it.

    Args:
        commit: The synchronous commit.
        offsets: What to commit.
        callback: Called with ``(offsets, error or None)`` when done, or
            None.
    """
    error: KafkaError | None = None
    try:
        await commit(offsets)
    except KafkaError as exc:
        error = exc
        log.warning("asynchronous commit of %s failed: %s", ", ".join(map(str, sorted(offsets))), exc)
    if callback is not None:
        callback(offsets, error)


class AutoCommitter:
    """The auto-commit timer.

    Args:
        interval_ms: ``auto.commit.interval.ms`` (ms).
        positions: The offsets to commit now (the positions).
        commit: The synchronous commit.
    """

    def __init__(self, interval_ms: int, positions: Callable[[], Offsets], commit: Callable[[Offsets], Awaitable[None]]) -> None:
        self.interval = interval_ms / 1000
        self._positions = positions
        self._commit = commit
        self._next = trio.current_time() + self.interval

    def maybe_commit(self, nursery: trio.Nursery) -> bool:
        """Start an asynchronous commit of the positions if one is due.

        Args:
            nursery: Runs the commit.

        Returns:
            True if a commit was started.
        """
        now = trio.current_time()
        if now < self._next:
            return False
        self._next = now + self.interval
        offsets = self._positions()
        if not offsets:
            return False
        nursery.start_soon(commit_logged, self._commit, offsets, None)
        return True


__all__ = ["AutoCommitter", "commit_logged"]
