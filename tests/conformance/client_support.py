"""Small helpers the client conformance scenarios share (producer, simple
consumer, admin, security): unique topic names, topics created the same way
on every target, and reading back what a partition holds."""

from __future__ import annotations

import uuid

from helpers.wait import wait_for  # the scenarios import it from here too

from kclient import AdminClient, FetchRequest, NewTopic, OffsetRequest, SimpleConsumer
from kclient.errors import LeaderNotAvailableError, NotLeaderForPartitionError, UnknownTopicOrPartitionError


def unique_topic(prefix: str) -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(target, name: str, partitions: int = 2, config: dict[str, str] | None = None) -> str:
    """Create ``name`` with ``partitions`` partitions and one replica, then
    wait until the target's metadata shows a leader for every partition."""
    with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])

        def ready():
            # Kafka's brokers learn of a new topic from the controller a
            # moment after CreateTopics answers (as Java's describeTopics,
            # kclient's raises UNKNOWN_TOPIC_OR_PARTITION until then).
            try:
                found = admin.describe_topics([name]).get(name)
            except UnknownTopicOrPartitionError:
                return False
            return found is not None and len(found.partitions) == partitions and all(p.leader >= 0 for p in found.partitions)

        wait_for(ready, f"leaders of {name}")
    # Kafka 4 (KRaft) publishes a new topic to its metadata cache a moment
    # before its replica manager leads the partitions: until then a Produce
    # gets NOT_LEADER_OR_FOLLOWER (silently dropped with acks=0). ListOffsets
    # goes through the replica manager: wait until it answers.
    with simple_consumer(target) as consumer:
        for partition in range(partitions):
            wait_for(lambda partition=partition: _leads(consumer, name, partition), f"{name}-{partition} led")
    return name


def _leads(consumer: SimpleConsumer, topic: str, partition: int) -> bool:
    try:
        return log_end(consumer, topic, partition) == 0
    except (NotLeaderForPartitionError, UnknownTopicOrPartitionError, LeaderNotAvailableError):
        return False


def simple_consumer(target, client_id: str = "conformance") -> SimpleConsumer:
    """A SimpleConsumer on the target's PLAINTEXT listener."""
    return SimpleConsumer(target.host, target.port, so_timeout_ms=10_000, buffer_size=1 << 16, client_id=client_id)


def log_end(consumer: SimpleConsumer, topic: str, partition: int) -> int:
    """The partition's log end offset (ListOffsets LATEST)."""
    return consumer.get_offsets_before(topic, partition, OffsetRequest.LATEST_TIME, 1)[0]


def read_partition(consumer: SimpleConsumer, topic: str, partition: int, start: int = 0, end: int | None = None) -> list[tuple]:
    """Every record of a partition from ``start`` up to its log end (or
    ``end``): ``(offset, key, payload, headers)`` tuples, headers as
    ``(key, value)`` pairs."""
    stop = log_end(consumer, topic, partition) if end is None else end
    found: list[tuple] = []
    offset = start
    while offset < stop:
        before = offset
        message_set = consumer.fetch(FetchRequest(topic, partition, offset, 1 << 20))
        for m in message_set:
            if m.offset < offset:
                continue  # a compressed v0/v1 wrapper's earlier messages
            found.append((m.offset, m.message.key, m.message.payload, tuple((h.key, h.value) for h in m.message.headers)))
            offset = m.next_offset
        # Past transaction markers too (control batches hand out no message).
        offset = max(offset, message_set.next_offset)
        assert offset > before, f"no progress reading {topic}-{partition} at {offset} (log end {stop})"
    return found


def read_topic(target, topic: str, partitions: int) -> dict[int, list[tuple]]:
    """`read_partition` for every partition of ``topic``."""
    with simple_consumer(target) as consumer:
        return {p: read_partition(consumer, topic, p) for p in range(partitions)}


def wait_for_log_end(target, topic: str, partition: int, expected: int) -> None:
    """Poll until the partition's log end offset is ``expected`` (for
    writes that get no acknowledgement: acks=0, async sends)."""
    with simple_consumer(target) as consumer:
        wait_for(lambda: log_end(consumer, topic, partition) >= expected, f"{topic}-{partition} log end {expected}")
        assert log_end(consumer, topic, partition) == expected
