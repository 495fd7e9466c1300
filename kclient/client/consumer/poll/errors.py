"""The poll consumer's own errors, named after Kafka's exceptions of
``org.apache.kafka.clients.consumer`` (KafkaConsumer javadoc)."""

from __future__ import annotations

from collections.abc import Collection

from kclient.client.consumer.poll.types import TopicPartition
from kclient.errors import KafkaError


class NoOffsetForPartitionError(KafkaError):
    """Kafka's ``NoOffsetForPartitionException``: a partition has no
    committed offset and ``auto.offset.reset=none``.

    Args:
        partitions: The partitions without an offset.
    """

    def __init__(self, partitions: Collection[TopicPartition]) -> None:
        self.partitions = sorted(partitions)
        names = ", ".join(str(tp) for tp in self.partitions)
        super().__init__(f"Undefined offset with no reset policy for partitions: {names} (auto.offset.reset=none)")


class CommitFailedError(KafkaError):
    """Kafka's ``CommitFailedException``: the group rebalanced (this member
    left it or was removed, e.g. after more than ``max.poll.interval.ms``
    between polls) and its partitions may belong to another member now; the
    commit cannot be completed. The member rejoins on its next ``poll``."""


class WakeupError(KafkaError):
    """Kafka's ``WakeupException``: ``wakeup()`` was called (from another
    thread, typically to stop a poll loop); raised once, by the poll under
    way or the next one."""


__all__ = ["CommitFailedError", "NoOffsetForPartitionError", "WakeupError"]
