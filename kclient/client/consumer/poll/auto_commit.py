"""Commits in the background: the auto-commit of the positions every
``auto.commit.interval.ms`` (``enable.auto.commit``; Kafka's
``ConsumerCoordinator.maybeAutoCommitOffsetsAsync``, run from ``poll`` so
that only what earlier polls handed out is committed: at-least-once), and
asynchronous commits (``commitAsync``), whose failures are logged and
passed to the caller's callback.
"""

from __future__ import annotations

import collections
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from kclient.client.consumer.poll.types import OffsetAndMetadata, TopicPartition
from kclient.errors import KafkaError, RebalanceInProgressError

log = logging.getLogger("kclient.consumer")

Offsets = Mapping[TopicPartition, OffsetAndMetadata]


async def commit_logged(
    commit: Callable[[Offsets], Awaitable[None]], offsets: Offsets, callback: Callable[[Offsets, KafkaError | None], Any] | None, *, auto: bool = False
) -> None:
    """Commit, logging a failure instead of raising it.

    Args:
        commit: The synchronous commit.
        offsets: What to commit.
        callback: Called with ``(offsets, error or None)`` when done, or
            None.
        auto: The auto-commit: REBALANCE_IN_PROGRESS is logged at INFO,
            not WARNING (a member keeping its partitions through a
            cooperative rebalance meets it at every interval until the
            rebalance ends, and the next auto-commit covers the same
            positions, as Kafka's consumer logs it quietly).
    """
    error: KafkaError | None = None
    try:
        await commit(offsets)
    except KafkaError as exc:
        error = exc
        level = logging.INFO if auto and isinstance(exc, RebalanceInProgressError) else logging.WARNING
        log.log(level, "%scommit of %s failed: %s", "auto-" if auto else "asynchronous ", ", ".join(map(str, sorted(offsets))), exc)
    if callback is not None:
        callback(offsets, error)


class PendingCommits:
    """The asynchronous commits under way (``commitAsync``, the
    auto-commit), sent one after the other in the order they were asked
    for, so that an older commit never lands after a newer one; a
    synchronous commit and ``close`` wait for them first, as Kafka's
    consumer does (none is dropped at close).
    """

    def __init__(self) -> None:
        self._queue: collections.deque[tuple[Callable[[Offsets], Awaitable[None]], Offsets, Callable[[Offsets, KafkaError | None], Any] | None, bool]] = (
            collections.deque()
        )
        self._working = False
        self._idle = trio.Event()
        self._idle.set()

    @property
    def in_flight(self) -> int:
        """How many asynchronous commits have not finished (queued or sent)."""
        return len(self._queue)  # the one being sent stays at the head until it is done

    def start(
        self,
        nursery: trio.Nursery,
        commit: Callable[[Offsets], Awaitable[None]],
        offsets: Offsets,
        callback: Callable[[Offsets, KafkaError | None], Any] | None,
        *,
        auto: bool = False,
    ) -> None:
        """Queue a commit (run as `commit_logged`), after those queued before.

        Args:
            nursery: Runs the commits.
            commit: The synchronous commit.
            offsets: What to commit.
            callback: Called with ``(offsets, error or None)``, or None.
            auto: An auto-commit (see `commit_logged`).
        """
        self._queue.append((commit, offsets, callback, auto))
        if not self._working:
            self._working = True
            self._idle = trio.Event()
            nursery.start_soon(self._drain)

    async def _drain(self) -> None:
        try:
            while self._queue:
                commit, offsets, callback, auto = self._queue[0]
                try:
                    await commit_logged(commit, offsets, callback, auto=auto)
                finally:
                    self._queue.popleft()
        finally:
            self._working = False
            self._idle.set()

    async def wait(self, timeout_s: float) -> bool:
        """Wait until every commit queued so far has finished.

        Args:
            timeout_s: Longest wait (seconds).

        Returns:
            True if none is left, False if some still wait after
            ``timeout_s``.
        """
        with trio.move_on_after(timeout_s):
            await self._idle.wait()
        return self.in_flight == 0


class AutoCommitter:
    """The auto-commit timer.

    Args:
        interval_ms: ``auto.commit.interval.ms`` (ms).
        positions: The offsets to commit now (the positions).
        commit: The synchronous commit.
        pending: Counts the commits under way (so that ``close`` waits
            for them), or None.
    """

    def __init__(
        self, interval_ms: int, positions: Callable[[], Offsets], commit: Callable[[Offsets], Awaitable[None]], pending: PendingCommits | None = None
    ) -> None:
        self.interval = interval_ms / 1000
        self._positions = positions
        self._commit = commit
        self._pending = pending
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
        if self._pending is not None:
            self._pending.start(nursery, self._commit, offsets, None, auto=True)
        else:
            nursery.start_soon(functools.partial(commit_logged, self._commit, offsets, None, auto=True))
        return True


__all__ = ["AutoCommitter", "PendingCommits", "commit_logged"]
