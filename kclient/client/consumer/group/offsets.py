"""The high-level consumer's offsets: what the application consumed, what was
committed, and their storage in ZooKeeper.

Offsets live in ``/consumers/<group>/offsets/<topic>/<partition>`` as the
decimal next offset to consume (Kafka 0.8 documentation, section 5.5
"Distribution", "Consumer Offsets":
https://kafka.apache.org/08/documentation.html#distributionimpl).
`ZkOffsetStorage` reads and writes them (blocking: run it in a worker
thread); `ConsumedOffsets` tracks, per owned partition, the offset after the
last message handed to the application and the last one committed, so a
commit writes only what changed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from kclient.zk.client import ZkClient
from kclient.zk.paths import decode_offset, encode_offset, offset_path

log = logging.getLogger("kclient.consumer")

TopicPartition = tuple[str, int]


class ZkOffsetStorage:
    """Offset commit and fetch for consumer group ``group`` in ZooKeeper.

    Args:
        zk: the connector's ZooKeeper client.
        group: the ``group.id``.
    """

    def __init__(self, zk: ZkClient, group: str) -> None:
        self.zk = zk
        self.group = group

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Blocking: commit offsets.

        Args:
            offsets: ``{(topic, partition): next offset to consume}``.

        Raises:
            ZooKeeperError: a ZooKeeper write failed.
        """
        for (topic, partition), offset in offsets.items():
            self.zk.write_persistent(offset_path(self.group, topic, partition), encode_offset(offset))

    def read(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Blocking: read committed offsets.

        Args:
            keys: ``(topic, partition)`` pairs.

        Returns:
            ``{(topic, partition): committed offset}``; partitions without
            one, or with a malformed one, are left out.

        Raises:
            ZooKeeperError: a ZooKeeper read failed.
        """
        committed: dict[TopicPartition, int] = {}
        keys = list(keys)
        for (topic, partition), data in zip(keys, self.zk.get_many([offset_path(self.group, t, p) for t, p in keys])):
            if data:
                try:
                    committed[(topic, partition)] = decode_offset(data)
                except ValueError:
                    log.warning("ignoring malformed offset %r of %s-%d", data, topic, partition)
        return committed


class ConsumedOffsets:
    """Per partition: ``consumed`` (the offset after the last message handed
    to the application; written by stream threads and the loop) and
    ``committed`` (the last offset written to storage)."""

    def __init__(self) -> None:
        self.consumed: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}

    def record(self, key: TopicPartition, offset: int) -> None:
        """Record consumption (never moves back).

        Args:
            key: ``(topic, partition)``.
            offset: The next offset to consume there.
        """
        if self.consumed.get(key, -1) < offset:
            self.consumed[key] = offset

    def reset(self, key: TopicPartition, offset: int) -> None:
        """The fetcher moved a partition (``auto.offset.reset``).

        Args:
            key: ``(topic, partition)``.
            offset: Where it fetches from now.
        """
        self.consumed[key] = offset

    def snapshot(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The consumed offsets of some partitions.

        Args:
            keys: ``(topic, partition)`` pairs.

        Returns:
            ``{key: consumed offset, or -1 for none}``.
        """
        return {key: self.consumed.get(key, -1) for key in keys}

    def to_commit(self, owned: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """What a commit must write.

        Args:
            owned: The partitions this consumer owns.

        Returns:
            Their consumed offsets that differ from the committed ones.
        """
        todo = {}
        for key in owned:
            offset = self.consumed.get(key, -1)
            if offset >= 0 and self.committed.get(key) != offset:
                todo[key] = offset
        return todo

    def mark_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Note offsets as written to storage.

        Args:
            offsets: ``{(topic, partition): committed offset}``.
        """
        self.committed.update(offsets)

    def reassign(self, keys: Iterable[TopicPartition], committed: Mapping[TopicPartition, int], previous: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Start the partitions a rebalance gave this consumer; the others
        are forgotten.

        Args:
            keys: The partitions now owned.
            committed: Their committed offsets (from storage).
            previous: What this consumer had consumed before the rebalance.

        Returns:
            ``{key: start}``: the later of the committed and the previously
            consumed offset, -1 for neither (``auto.offset.reset`` decides).
        """
        starts: dict[TopicPartition, int] = {}
        for key in keys:
            start = max(committed.get(key, -1), previous.get(key, -1))
            starts[key] = start
            self.consumed[key] = start
            if key in committed:
                self.committed[key] = committed[key]
        for key in list(self.consumed):
            if key not in starts:
                del self.consumed[key]
                self.committed.pop(key, None)
        return starts


__all__ = ["ConsumedOffsets", "ZkOffsetStorage"]
