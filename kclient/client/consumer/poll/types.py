"""The value types of the poll consumer, named as Kafka's KafkaConsumer
names them (javadoc of ``org.apache.kafka.clients.consumer`` and
``org.apache.kafka.common``, https://kafka.apache.org/documentation/#consumerapi):
`TopicPartition` (with an optional offset, as confluent-kafka's),
`OffsetAndMetadata`, `OffsetAndTimestamp`, `ConsumerRecord` with its
`TimestampType`, and the `ConsumerRebalanceListener` callbacks.

Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import Any

import attrs

from kclient.client.value_tuple import ValueTuple, tuplegetter
from kclient.protocol.records import Header

#: "No offset": the offset of a `TopicPartition` that names a partition only
#: (confluent-kafka's ``OFFSET_INVALID``).
OFFSET_INVALID = -1001
#: The log start offset, for `TopicPartition.offset` in ``seek``
#: (ListOffsets' ``EARLIEST_TIMESTAMP``).
OFFSET_BEGINNING = -2
#: The log end offset (ListOffsets' ``LATEST_TIMESTAMP``).
OFFSET_END = -1


@attrs.frozen(order=True)
class TopicPartition:
    """A topic's partition, with an optional offset (Kafka's
    ``TopicPartition``; the offset as in confluent-kafka's, for calls that
    take partitions with offsets: ``commit``, ``seek``, ``assign``).

    Equal and hashed by ``(topic, partition)`` only, so that one with an
    offset finds the same partition in an assignment.

    Attributes:
        topic: The topic.
        partition: The partition id.
        offset: An offset (`OFFSET_INVALID`, -1001, when none).
    """

    topic: str
    partition: int
    offset: int = attrs.field(default=OFFSET_INVALID, eq=False, order=False)

    @property
    def key(self) -> tuple[str, int]:
        """``(topic, partition)``, as the group coordinator client takes it."""
        return (self.topic, self.partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def as_topic_partition(value: TopicPartition | tuple[str, int]) -> TopicPartition:
    """A `TopicPartition` from one or a ``(topic, partition)`` pair.

    Args:
        value: The partition.

    Returns:
        The `TopicPartition` (``value`` itself when it is one).

    Raises:
        TypeError: ``value`` is neither.
    """
    if isinstance(value, TopicPartition):
        return value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int):
        return TopicPartition(value[0], value[1])
    raise TypeError(f"expected a TopicPartition or a (topic, partition) pair, not {value!r}")


@attrs.frozen
class OffsetAndMetadata:
    """A committed offset (Kafka's ``OffsetAndMetadata``): the offset of
    the next record to consume, the metadata string stored with it, and the
    leader epoch of the last consumed record when known (KIP-320).

    Attributes:
        offset: The next offset to consume.
        metadata: Stored with the offset (``""`` when none).
        leader_epoch: The leader epoch, or None.
    """

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


@attrs.frozen
class ConsumerGroupMetadata:
    """Where a consumer stands in its group (Kafka's
    ``ConsumerGroupMetadata``, what ``groupMetadata()`` returns): the
    group, the member's generation (classic protocol) or member epoch
    (``group.protocol=consumer``, KIP-848), its member id and its static
    ``group.instance.id`` (KIP-345).

    Attributes:
        group_id: ``group.id``.
        generation_id: The generation or member epoch; -1 when the member
            is not in the group.
        member_id: The member id (``""`` before the first join with the
            classic protocol).
        group_instance_id: ``group.instance.id``, or None for a dynamic
            member.
    """

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@attrs.frozen
class OffsetAndTimestamp:
    """An answer of ``offsets_for_times`` (Kafka's ``OffsetAndTimestamp``):
    the earliest offset whose timestamp is at least the one asked for, and
    that record's timestamp (ms since the epoch).

    Attributes:
        offset: The offset.
        timestamp: Its record's timestamp (ms since the epoch).
        leader_epoch: The leader epoch, or None.
    """

    offset: int
    timestamp: int
    leader_epoch: int | None = None


class TimestampType(enum.IntEnum):
    """What a record's timestamp means (Kafka's ``TimestampType``, with its
    ids: kafka-python uses the same numbers)."""

    #: A v0 message: no timestamp.
    NO_TIMESTAMP_TYPE = -1
    #: Set by the producer (``message.timestamp.type=CreateTime``).
    CREATE_TIME = 0
    #: Set by the broker when it appended the batch (``LogAppendTime``).
    LOG_APPEND_TIME = 1


class ConsumerRecord(ValueTuple):
    """One record handed out by ``poll`` (Kafka's ``ConsumerRecord``).

    An immutable value, a tuple underneath (one allocation per record, as
    the other per-record values of kclient); equal to a ConsumerRecord with
    the same fields.

    Attributes:
        topic: Its topic.
        partition: Its partition.
        offset: Its offset in the partition.
        timestamp: ms since the epoch (-1 for a v0 message).
        timestamp_type: What the timestamp means (`TimestampType`).
        key: The key (bytes, or what ``key.deserializer`` made of them; None
            for no key).
        value: The value (bytes or deserialized; None for a tombstone).
        headers: The record headers, a tuple of `kclient.Header`
            (``key``, ``value``).
        leader_epoch: The partition leader epoch of its batch (KIP-101),
            None when the batch has none.
    """

    __slots__ = ()

    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        timestamp_type: TimestampType,
        key: Any,
        value: Any,
        headers: tuple[Header, ...] = (),
        leader_epoch: int | None = None,
    ) -> ConsumerRecord:
        return tuple.__new__(cls, (topic, partition, offset, timestamp, timestamp_type, key, value, headers, leader_epoch))

    topic = tuplegetter(0, "Its topic (str).")
    partition = tuplegetter(1, "Its partition.")
    offset = tuplegetter(2, "Its offset in the partition.")
    timestamp = tuplegetter(3, "ms since the epoch (-1 for a v0 message).")
    timestamp_type = tuplegetter(4, "What the timestamp means (TimestampType).")
    key = tuplegetter(5, "The key (bytes or deserialized; None for no key).")
    value = tuplegetter(6, "The value (bytes or deserialized; None for a tombstone).")
    headers = tuplegetter(7, "The record headers (tuple of Header).")
    leader_epoch = tuplegetter(8, "The partition leader epoch of its batch, or None.")

    @property
    def topic_partition(self) -> TopicPartition:
        """Its `TopicPartition` (no offset)."""
        return TopicPartition(self[0], self[1])

    def __repr__(self) -> str:
        return (
            f"ConsumerRecord(topic={self[0]!r}, partition={self[1]}, offset={self[2]}, timestamp={self[3]}, "
            f"timestamp_type={self[4]!r}, key={self[5]!r}, value={self[6]!r}, headers={self[7]!r}, leader_epoch={self[8]!r})"
        )


class ConsumerRebalanceListener:
    """Callbacks around a rebalance of a subscribed consumer (Kafka's
    ``ConsumerRebalanceListener``). They run inside ``poll``, on the thread
    that called it, so they may call the consumer (``commit``, ``seek``,
    ``position``...). An exception raised by one propagates from ``poll``.

    Subclass it and override what you need; the defaults do nothing (and
    `on_partitions_lost` calls `on_partitions_revoked`, as Kafka's default
    does).
    """

    def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> Any:
        """Called before the member rejoins its group (eager rebalancing:
        every owned partition), after the auto-commit of its positions: the
        place to commit offsets or flush state.

        Args:
            revoked: The partitions taken away, sorted.
        """

    def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> Any:
        """Called after a rebalance with the member's new partitions (maybe
        none), before their first records are fetched: the place to
        ``seek``.

        Args:
            assigned: The partitions given, sorted.
        """

    def on_partitions_lost(self, lost: Collection[TopicPartition]) -> Any:
        """Called instead of `on_partitions_revoked` when the member found it
        was no longer in the group (its session expired, or it stopped
        polling past ``max.poll.interval.ms``): other members may own these
        partitions already, so committing their offsets would fail.

        Args:
            lost: The partitions lost, sorted.
        """
        return self.on_partitions_revoked(lost)


__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "TimestampType",
    "TopicPartition",
    "as_topic_partition",
]
