"""What the poll consumer reads and where it stands (Kafka's
``SubscriptionState``): the subscription (topics, a pattern, or partitions
assigned by hand), the assigned partitions and, for each, the fetch
position, a pending reset (``seek_to_beginning`` / ``seek_to_end`` or
``auto.offset.reset``), the paused flag and the last high watermark.

Pure: no I/O. Used on the consumer's trio loop only.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

import attrs

from kclient.client.consumer.poll.types import OffsetAndMetadata, TopicPartition
from kclient.errors import IllegalStateError

#: A pending reset to the log start / the log end.
EARLIEST = "earliest"
LATEST = "latest"


class SubscriptionType(enum.Enum):
    """How the partitions were chosen (at most one way at a time, as in
    Kafka: mixing raises `IllegalStateError`)."""

    NONE = "none"
    AUTO_TOPICS = "topics"
    AUTO_PATTERN = "pattern"
    USER_ASSIGNED = "assigned"


@attrs.define
class PartitionState:
    """One assigned partition's fetch state.

    Attributes:
        position: The offset of the next record to hand out (None until
            known: the committed offset or a reset decides it).
        reset: A pending reset (`EARLIEST` / `LATEST`), or None.
        paused: ``pause``-d: not fetched, nothing handed out.
        high_watermark: The last high watermark a fetch reported (-1).
        leader_epoch: The leader epoch of the last record handed out.
    """

    position: int | None = None
    reset: str | None = None
    paused: bool = False
    high_watermark: int = -1
    leader_epoch: int | None = None

    @property
    def has_valid_position(self) -> bool:
        """A position is known and no reset is pending."""
        return self.position is not None and self.reset is None


class SubscriptionState:
    """The consumer's subscription and assigned partitions."""

    def __init__(self) -> None:
        self.type = SubscriptionType.NONE
        #: Subscribed topics (``subscribe(topics)``), or the topics the
        #: pattern matched when the group was last joined.
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self._assignment: dict[TopicPartition, PartitionState] = {}

    # ------------------------------------------------------------ subscription

    def _set_type(self, wanted: SubscriptionType) -> None:
        if self.type not in (SubscriptionType.NONE, wanted):
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        self.type = wanted

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to ``topics`` (replacing an earlier topic list).

        Args:
            topics: Topic names.

        Returns:
            True when the topic set changed.

        Raises:
            IllegalStateError: the consumer has partitions assigned by hand.
        """
        wanted = set(topics)
        self._set_type(SubscriptionType.AUTO_TOPICS)
        self.pattern = None
        changed = wanted != self.topics
        self.topics = wanted
        return changed

    def subscribe_pattern(self, pattern: re.Pattern[str]) -> None:
        """Subscribe to every topic matching ``pattern`` (``re.fullmatch``,
        as Java's ``Pattern.matcher(topic).matches()``).

        Raises:
            IllegalStateError: the consumer has partitions assigned by hand.
        """
        self._set_type(SubscriptionType.AUTO_PATTERN)
        self.pattern = pattern
        self.topics = set()

    def matches(self, topic: str) -> bool:
        """Whether a pattern subscription takes ``topic``."""
        return self.pattern is not None and self.pattern.fullmatch(topic) is not None

    @property
    def auto_assigned(self) -> bool:
        """True for a subscription whose partitions the group assigns."""
        return self.type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        """``assign``: exactly these partitions (positions of ones already
        assigned are kept).

        Raises:
            IllegalStateError: the consumer is subscribed.
        """
        wanted = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        if not wanted:
            self.unsubscribe()
            return
        self._set_type(SubscriptionType.USER_ASSIGNED)
        self._assignment = {tp: self._assignment.get(tp) or PartitionState() for tp in sorted(wanted)}
        self.topics = {tp.topic for tp in wanted}

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment: these partitions, every one starting
        without a position (eager rebalancing)."""
        self._assignment = {TopicPartition(tp.topic, tp.partition): PartitionState() for tp in sorted(partitions)}

    def assign_incrementally(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment after a cooperative rebalance (KIP-429):
        these partitions; those already assigned keep their state
        (position, pause), the added ones start without a position.

        Args:
            partitions: The whole new assignment.
        """
        old = self._assignment
        self._assignment = {
            key: old.get(key) or PartitionState() for key in (TopicPartition(tp.topic, tp.partition) for tp in sorted(partitions))
        }

    def unsubscribe(self) -> None:
        """Forget the subscription and every assigned partition."""
        self.type = SubscriptionType.NONE
        self.topics = set()
        self.pattern = None
        self._assignment = {}

    # ------------------------------------------------------------ partitions

    def assigned(self) -> list[TopicPartition]:
        """The assigned partitions, sorted."""
        return list(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is assigned."""
        return tp in self._assignment

    def state(self, tp: TopicPartition) -> PartitionState:
        """The state of an assigned partition.

        Raises:
            IllegalStateError: ``tp`` is not assigned.
        """
        state = self._assignment.get(tp)
        if state is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return state

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` next (a pending reset is dropped).

        Raises:
            IllegalStateError: ``tp`` is not assigned.
        """
        state = self.state(tp)
        state.position = offset
        state.reset = None

    def request_reset(self, tp: TopicPartition, where: str) -> None:
        """Move ``tp`` to the log start (`EARLIEST`) or end (`LATEST`),
        looked up before its next fetch.

        Raises:
            IllegalStateError: ``tp`` is not assigned.
        """
        self.state(tp).reset = where

    def set_paused(self, tp: TopicPartition, paused: bool) -> None:
        """``pause`` / ``resume`` one partition.

        Raises:
            IllegalStateError: ``tp`` is not assigned.
        """
        self.state(tp).paused = paused

    def paused(self) -> list[TopicPartition]:
        """The paused partitions, sorted."""
        return [tp for tp, s in self._assignment.items() if s.paused]

    def missing_positions(self) -> list[TopicPartition]:
        """Partitions with neither a position nor a pending reset."""
        return [tp for tp, s in self._assignment.items() if s.position is None and s.reset is None]

    def awaiting_reset(self) -> dict[TopicPartition, str]:
        """Partitions with a pending reset, and where to."""
        return {tp: s.reset for tp, s in self._assignment.items() if s.reset is not None}

    def fetchable(self) -> list[TopicPartition]:
        """Partitions to fetch: a position known, not paused."""
        return [tp for tp, s in self._assignment.items() if s.has_valid_position and not s.paused]

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions to commit: every assigned partition with a known
        position (the offset after the last record handed out)."""
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, s in self._assignment.items():
            if s.has_valid_position:
                assert s.position is not None
                out[tp] = OffsetAndMetadata(s.position, "", s.leader_epoch)
        return out


__all__ = ["EARLIEST", "LATEST", "PartitionState", "SubscriptionState", "SubscriptionType"]
