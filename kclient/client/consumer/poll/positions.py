"""Where each assigned partition starts (Kafka's
``KafkaConsumer.updateFetchPositions``): partitions without a position
take their group's committed offset (OffsetFetch); those without one, and
those ``seek_to_beginning`` / ``seek_to_end`` asked to move, are reset to
the log start or end looked up with ListOffsets, per ``auto.offset.reset``
(``earliest`` / ``latest``; ``none`` raises `NoOffsetForPartitionError`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping

from kclient.client.consumer.poll.errors import NoOffsetForPartitionError
from kclient.client.consumer.poll.list_offsets import OffsetLookup
from kclient.client.consumer.poll.subscription import EARLIEST, SubscriptionState
from kclient.client.consumer.poll.types import OffsetAndMetadata, TopicPartition
from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

log = logging.getLogger("kclient.consumer")

#: Fetches committed offsets: ``await fetch(partitions) -> {partition: OffsetAndMetadata}``.
CommittedFetch = Callable[[list[TopicPartition]], Awaitable[Mapping[TopicPartition, OffsetAndMetadata]]]


class PositionUpdater:
    """Fills in missing positions.

    Args:
        subscriptions: The assignment and positions.
        lookup: ListOffsets.
        committed: Fetches committed offsets, or None without a group.
        offset_reset: ``earliest``, ``latest`` or ``none``.
    """

    def __init__(self, subscriptions: SubscriptionState, lookup: OffsetLookup, committed: CommittedFetch | None, offset_reset: str) -> None:
        self.subscriptions = subscriptions
        self.lookup = lookup
        self.committed = committed
        self.offset_reset = offset_reset

    async def update(self, timeout: float, only: Iterable[TopicPartition] | None = None) -> None:
        """Give every assigned partition (or those of ``only``) a position.

        Args:
            timeout: Longest wait for the ListOffsets answers (seconds).
            only: Just these partitions (None: every assigned one).

        Raises:
            NoOffsetForPartitionError: partitions without a committed offset
                and ``auto.offset.reset=none``.
            KafkaError: OffsetFetch or ListOffsets failed.
        """
        wanted = None if only is None else set(only)
        missing = [tp for tp in self.subscriptions.missing_positions() if wanted is None or tp in wanted]
        if missing:
            await self._take_committed_or_reset(missing)
        resets = {tp: where for tp, where in self.subscriptions.awaiting_reset().items() if wanted is None or tp in wanted}
        if resets:
            await self._reset(resets, timeout)

    async def _take_committed_or_reset(self, missing: list[TopicPartition]) -> None:
        subs = self.subscriptions
        if self.committed is not None:
            committed = await self.committed(missing)
            for tp, om in committed.items():
                if subs.is_assigned(tp) and subs.state(tp).position is None:
                    subs.seek(tp, om.offset)
                    subs.state(tp).leader_epoch = om.leader_epoch
            missing = [tp for tp in missing if tp not in committed]
        if missing and self.offset_reset == "none":
            raise NoOffsetForPartitionError(missing)
        for tp in missing:
            subs.request_reset(tp, self.offset_reset)

    async def _reset(self, resets: dict[TopicPartition, str], timeout: float) -> None:
        subs = self.subscriptions
        times = {tp: EARLIEST_TIMESTAMP if where == EARLIEST else LATEST_TIMESTAMP for tp, where in resets.items()}
        found = await self.lookup.offsets(times, timeout)
        for tp, where in resets.items():
            answer = found.get(tp)
            if answer is not None and subs.is_assigned(tp) and subs.state(tp).reset == where:
                log.debug("%s: reset to the %s offset %d", tp, where, answer.offset)
                subs.seek(tp, answer.offset)


__all__ = ["CommittedFetch", "PositionUpdater"]
