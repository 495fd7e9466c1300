"""The records half of one ``poll`` step: give partitions without a
position one (committed offset or reset), look up missing partition
leaders (at most every ``retry.backoff.ms``), hand out the buffered
records (at most ``max.poll.records``), send the next fetches so they
arrive while the application works, and otherwise wait for a fetch, a
group event or the timeout (Kafka's ``KafkaConsumer.pollForFetches``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from kclient.client.cluster import Cluster
from kclient.client.consumer.poll.fetcher import Fetcher
from kclient.client.consumer.poll.positions import PositionUpdater
from kclient.client.consumer.poll.subscription import SubscriptionState
from kclient.client.consumer.poll.types import ConsumerRecord
from kclient.config import ConsumerConfig
from kclient.errors import KafkaError, UnstableOffsetCommitError

log = logging.getLogger("kclient.consumer")


class Wakeup:
    """Ends a wait of `RecordPoller.poll` early: a fetch answered, the
    group needs a step, a partition was resumed or sought, the consumer
    closed."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        """Wake the waiting poll (or let the next wait end at once)."""
        self._event.set()

    def arm(self) -> None:
        """Start a new wait period: what happened before is seen by the
        checks that follow, not by the wait."""
        self._event = trio.Event()

    async def wait(self, timeout: float) -> None:
        """Wait for `set`, at most ``timeout`` seconds.

        Args:
            timeout: Seconds.
        """
        with trio.move_on_after(timeout):
            await self._event.wait()


class RecordPoller:
    """Records for ``poll``.

    Args:
        cluster: Metadata (partition leaders).
        fetcher: The fetches.
        positions: Fills in missing positions.
        subscriptions: The assignment.
        config: ``max.poll.records``, ``retry.backoff.ms``,
            ``default.api.timeout.ms``.
        wakeup: Ends a wait early.
        group_step_due: Whether the group needs a step first (then no
            wait: ``poll`` goes back to its rebalance steps).
    """

    def __init__(
        self,
        cluster: Cluster,
        fetcher: Fetcher,
        positions: PositionUpdater,
        subscriptions: SubscriptionState,
        config: ConsumerConfig,
        wakeup: Wakeup,
        group_step_due: Callable[[], bool],
    ) -> None:
        self.cluster = cluster
        self.fetcher = fetcher
        self.positions = positions
        self.subscriptions = subscriptions
        self.config = config
        self.wakeup = wakeup
        self._group_step_due = group_step_due
        self._metadata_refreshed = -1e18

    async def poll(self, nursery: trio.Nursery, timeout: float) -> list[ConsumerRecord]:
        """The records that are buffered or arrive within ``timeout``.

        Args:
            nursery: Runs the fetches.
            timeout: Longest wait (seconds).

        Returns:
            At most ``max.poll.records`` records (maybe none).

        Raises:
            NoOffsetForPartitionError, OffsetOutOfRangeError: with
                ``auto.offset.reset=none``.
            KafkaError: a partition's error a refetch cannot fix.
        """
        fetcher = self.fetcher
        limit = self.config.max_poll_records
        self.wakeup.arm()
        if self.subscriptions.missing_positions() or self.subscriptions.awaiting_reset():
            try:
                await self.positions.update(self.config.default_api_timeout_ms / 1000)
            except UnstableOffsetCommitError as exc:  # a transaction still holds the offset: ask again next poll, as Kafka's consumer
                log.info("committed offsets not stable yet, retrying on the next poll: %s", exc)
                return []
        if fetcher.metadata_needed:
            await self._refresh_metadata()
        records = fetcher.fetched_records(limit)
        # Fetch the next records while the application handles these.
        fetcher.send_fetches(nursery)
        if fetcher.metadata_needed:
            # A partition's leader is not known yet (the first poll after
            # assign): look it up now, not after a backoff
            # (_refresh_metadata keeps lookups retry.backoff.ms apart).
            await self._refresh_metadata()
            fetcher.send_fetches(nursery)
        if records or timeout <= 0 or self._group_step_due():
            return records
        # A partition without a known leader: look again after the backoff.
        await self.wakeup.wait(min(timeout, self.config.retry_backoff_ms / 1000) if fetcher.metadata_needed else timeout)
        return fetcher.fetched_records(limit) if fetcher.has_completed else []

    async def _refresh_metadata(self) -> None:
        """Refresh the leaders of the assigned partitions, at most every
        ``retry.backoff.ms``."""
        now = trio.current_time()
        if now - self._metadata_refreshed < self.config.retry_backoff_ms / 1000:
            return
        self._metadata_refreshed = now
        self.fetcher.metadata_needed = False
        try:
            await self.cluster.refresh_metadata({tp.topic for tp in self.subscriptions.assigned()}, allow_auto_create=False)
        except KafkaError as exc:
            log.info("metadata refresh failed, retrying after retry.backoff.ms: %s", exc)
            self.fetcher.metadata_needed = True


__all__ = ["RecordPoller", "Wakeup"]
