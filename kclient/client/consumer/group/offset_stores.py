"""Where the high-level consumer commits its offsets (``offsets.storage``),
as awaitable stores for the connector's trio loop:

- `ZkOffsetStore`: ``/consumers/<group>/offsets/<topic>/<p>`` in ZooKeeper
  (``offsets.storage=zookeeper``; Kafka 0.8 documentation, section 5.5,
  "Consumer Offsets");
- `KafkaOffsetStore`: the group coordinator's ``__consumer_offsets``
  through OffsetCommit / OffsetFetch (``offsets.storage=kafka``; Kafka
  documentation, "Offset management",
  https://kafka.apache.org/documentation/#impl_offsettracking);
- `DualOffsetStore`: both (``offsets.storage=kafka`` with
  ``dual.commit.enabled=true``), the migration step of the Kafka 0.8.2
  documentation ("Migrating offsets from ZooKeeper to Kafka",
  https://kafka.apache.org/082/documentation.html#distributionimpl): a
  commit goes to Kafka, then to ZooKeeper; a read takes, per partition, the
  larger of the two offsets, as Kafka 0.8.2's ``ZookeeperConsumerConnector``
  did, so a group moving from ZooKeeper to Kafka neither re-reads nor skips.

The connector's core picks one from ``offsets.storage`` and
``dual.commit.enabled``
(`kclient.client.consumer.group.core.ConnectorCore`); broker-coordinated
groups always use `KafkaOffsetStore`.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Iterable, Mapping

from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.client.consumer.group.offsets import ZkOffsetStorage
from kclient.zk.client import TrioZk

log = logging.getLogger("kclient.consumer")

TopicPartition = tuple[str, int]


class OffsetStore(abc.ABC):
    """Committed offsets of one group (the next offset to consume per
    partition)."""

    #: ``offsets.storage`` / dual-commit name, for logs and errors.
    name: str = ""

    @abc.abstractmethod
    async def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit offsets.

        Args:
            offsets: ``{(topic, partition): next offset to consume}``.

        Raises:
            KafkaError: the store failed (see the implementations).
        """

    @abc.abstractmethod
    async def read(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Read committed offsets.

        Args:
            keys: ``(topic, partition)`` pairs.

        Returns:
            ``{key: committed offset}`` for the partitions that have one.

        Raises:
            KafkaError: the store failed.
        """


class ZkOffsetStore(OffsetStore):
    """Offsets in ZooKeeper (`ZkOffsetStorage` run in worker threads).

    Args:
        storage: The blocking ZooKeeper storage.
        zk: The connector's trio bridge to kazoo.
    """

    name = "zookeeper"

    def __init__(self, storage: ZkOffsetStorage, zk: TrioZk) -> None:
        self.storage = storage
        self.zk = zk

    async def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit to ZooKeeper; Args as `OffsetStore.write`.

        Raises:
            ZooKeeperError: a write failed.
        """
        await self.zk.run(self.storage.write, dict(offsets))

    async def read(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Read from ZooKeeper; Args and Returns as `OffsetStore.read`.

        Raises:
            ZooKeeperError: a read failed.
        """
        return await self.zk.run(self.storage.read, list(keys))


class KafkaOffsetStore(OffsetStore):
    """Offsets in ``__consumer_offsets`` through the group coordinator.

    Args:
        coordinator: The group's coordinator client.
        member: Returns ``(generation, member id)`` for each commit;
            ``(-1, "")`` (the default) for a group without broker
            membership.
    """

    name = "kafka"

    def __init__(self, coordinator: GroupCoordinator, member: Callable[[], tuple[int, str]] | None = None) -> None:
        self.coordinator = coordinator
        self.member = member or (lambda: (-1, ""))

    async def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit through OffsetCommit (`GroupCoordinator.commit_offsets`);
        Args as `OffsetStore.write`.

        Raises:
            BrokerResponseError: the commit failed (named after the code).
            KafkaConnectionError, KafkaTimeoutError: no coordinator answered.
        """
        generation, member_id = self.member()
        await self.coordinator.commit_offsets(offsets, generation=generation, member_id=member_id)

    async def read(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Fetch through OffsetFetch (`GroupCoordinator.fetch_offsets`);
        Args and Returns as `OffsetStore.read`.

        Raises:
            BrokerResponseError: the fetch failed (named after the code).
            KafkaConnectionError, KafkaTimeoutError: no coordinator answered.
        """
        return await self.coordinator.fetch_offsets(keys)


class DualOffsetStore(OffsetStore):
    """Kafka and ZooKeeper together (``dual.commit.enabled``).

    Args:
        kafka: The store in ``__consumer_offsets``.
        zookeeper: The store in ZooKeeper.
    """

    name = "kafka+zookeeper"

    def __init__(self, kafka: KafkaOffsetStore, zookeeper: ZkOffsetStore) -> None:
        self.kafka = kafka
        self.zookeeper = zookeeper

    async def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit to Kafka, then to ZooKeeper (a failed Kafka commit is not
        written to ZooKeeper either).

        Args:
            offsets: ``{(topic, partition): offset}``.

        Raises:
            KafkaError: either store failed.
        """
        await self.kafka.write(offsets)
        await self.zookeeper.write(offsets)

    async def read(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Per partition, the larger of the Kafka and the ZooKeeper offset.

        Args:
            keys: ``(topic, partition)`` pairs.

        Returns:
            ``{key: offset}`` for partitions with an offset in either store.

        Raises:
            KafkaError: either store failed.
        """
        keys = list(keys)
        from_kafka = await self.kafka.read(keys)
        from_zk = await self.zookeeper.read(keys)
        merged = dict(from_zk)
        for key, offset in from_kafka.items():
            merged[key] = max(offset, merged.get(key, -1))
        if from_zk != from_kafka:
            log.debug("dual commit: kafka offsets %s, zookeeper offsets %s -> %s", from_kafka, from_zk, merged)
        return merged


__all__ = ["DualOffsetStore", "KafkaOffsetStore", "OffsetStore", "ZkOffsetStore"]
