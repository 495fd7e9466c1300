"""The `ConsumerConnector`'s state on its trio loop: it runs the
rebalance task, the fetchers and the auto-commit task, and ties together the
parts that each do one job:

- `kclient.client.consumer.group.registration.GroupRegistry`: registration,
  the group's members, the range assignment, partition ownership, leaders
  (blocking ZooKeeper calls, run in worker threads);
- `kclient.client.consumer.group.offsets`: consumed / committed offsets;
- `kclient.client.consumer.group.offset_stores`: where commits go
  (``offsets.storage``: ZooKeeper, Kafka through the group coordinator of
  `kclient.client.consumer.group.coordinator`, or both with
  ``dual.commit.enabled``);
- `kclient.client.consumer.group.streams.StreamQueues`: the streams' queues;
- `kclient.client.consumer.fetcher.FetcherGroup`: one generation's fetch
  loops.

Rebalancing follows the Kafka 0.8 documentation, section 5.5
"Distribution", "Consumer rebalancing algorithm"
(https://kafka.apache.org/08/documentation.html#distributionimpl): stop the
fetchers, clear the queues, commit, release ownership, claim the new
partitions (retried ``rebalance.max.retries`` times, ``rebalance.backoff.ms``
apart, then `ConsumerRebalanceFailedError`), start fetching.
"""

from __future__ import annotations

import logging
from typing import Any

import trio
from kazoo.client import KazooState

from kclient.client.cluster import Cluster
from kclient.client.consumer.group.concurrent_calls import all_of, both
from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.client.consumer.group.core_base import GroupCoreBase
from kclient.client.consumer.group.offset_stores import (
    DualOffsetStore,
    KafkaOffsetStore,
    OffsetStore,
    ZkOffsetStore,
)
from kclient.client.consumer.group.offsets import ZkOffsetStorage
from kclient.client.consumer.group.registration import GroupRegistry
from kclient.client.consumer.partition_topic_info import Leader, TopicPartition
from kclient.config import ConsumerConfig
from kclient.errors import KafkaError, NoBrokersAvailableError
from kclient.zk.client import TrioZk, ZkClient
from kclient.zk.paths import BROKER_IDS_PATH, BROKER_TOPICS_PATH, consumer_ids_path

log = logging.getLogger("kclient.consumer")


class ConnectorCore(GroupCoreBase):
    """The connector's state on its trio loop (everything but the blocking
    facade). Its public methods are what `ConsumerConnector` and the
    fetchers use; not part of kclient's public API.

    Args:
        config: the connector's config.
        consumer_id: this consumer's id.
    """

    def __init__(self, config: ConsumerConfig, consumer_id: str) -> None:
        super().__init__(config, consumer_id)
        assert config.zookeeper_connect is not None  # ConsumerConfig requires it for group.coordination=zookeeper
        self.zk_client = ZkClient(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        )
        self.registry = GroupRegistry(self.zk_client, config, consumer_id)
        self.storage = ZkOffsetStorage(self.zk_client, self.group)
        #: The group's coordinator, with ``offsets.storage=kafka``.
        self.coordinator: GroupCoordinator | None = None
        self._cluster: Cluster | None = None
        self._owned_threads: dict[TopicPartition, str] = {}
        self._zk: TrioZk | None = None
        self._session_lost = False

    # ------------------------------------------------------------ start / stop

    async def start(self, nursery: trio.Nursery) -> None:
        """Connect to ZooKeeper and start the background tasks.

        Args:
            nursery: The loop thread's nursery (the fetchers run there too).
        """
        self._begin(nursery)
        self._zk = TrioZk(self.zk_client)
        await trio.to_thread.run_sync(self.zk_client.start)
        self.zk_client.add_state_listener(self._on_zk_state)
        self.store = self._make_store(nursery)
        nursery.start_soon(self._background)

    def _make_store(self, nursery: trio.Nursery) -> OffsetStore:
        assert self._zk is not None
        zk_store = ZkOffsetStore(self.storage, self._zk)
        if self.config.offsets_storage == "zookeeper":
            return zk_store
        config = self.config

        async def make_cluster() -> Cluster:
            bootstrap = list(config.bootstrap_servers or ())
            if not bootstrap:
                assert self._zk is not None
                bootstrap = await self._zk.run(self.registry.broker_addresses)
            if not bootstrap:
                raise NoBrokersAvailableError("no broker is registered in ZooKeeper to find the group coordinator with")
            self._cluster = self._open_cluster(nursery, bootstrap, config.offsets_channel_socket_timeout_ms)
            return self._cluster

        self.coordinator = self._group_coordinator(make_cluster)
        kafka_store = KafkaOffsetStore(self.coordinator)
        if config.dual_commit_enabled:
            return DualOffsetStore(kafka_store, zk_store)
        return kafka_store

    def _on_zk_state(self, state: KazooState) -> None:
        # kazoo's connection thread: never block.
        if self.closed:
            return
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("consumer %s lost its ZooKeeper session; re-registering when reconnected", self.consumer_id)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            assert self._zk is not None
            self._zk.deliver(self.request_rebalance)

    async def _leave_locked(self) -> None:
        """Release ownership of the partitions in ZooKeeper."""
        try:
            await trio.to_thread.run_sync(self.registry.release, self._owned_threads)
        except KafkaError as exc:
            log.warning("releasing partitions at shutdown failed: %s", exc)

    async def _close_connections(self) -> None:
        """Close the broker connections and end the ZooKeeper session."""
        if self._cluster is not None:
            await self._cluster.aclose()
        await trio.to_thread.run_sync(self.zk_client.close)

    # ------------------------------------------------------------ subscription

    def subscribe(self, *args: Any) -> None:
        """Set what this consumer reads (the arguments of
        `kclient.client.consumer.group.core_base.GroupCoreBase.subscribe`)
        and tell the ZooKeeper registry."""
        super().subscribe(*args)
        self.registry.subscription = dict(self.subscription)
        self.registry.topic_filter = self.topic_filter

    # ------------------------------------------------------------ registration and watches

    async def register_and_rebalance(self) -> None:
        """Kafka's "Consumer registration algorithm": register, watch the
        group's ids, the brokers and the topics, rebalance now."""
        assert self._zk is not None
        assert self._lock is not None
        # Under the lock from the start: the watches' first calls wake the
        # rebalance task, which would otherwise rebalance while the watches
        # are still being set, and this one again right after (the first
        # calls of the later watches arrive during its pass).
        async with self._lock:
            zk = self._zk
            await zk.run(self.registry.register)
            # The three watches are set at once (each is a round trip).
            await all_of(
                zk.watch_children(consumer_ids_path(self.group), self._on_consumers_changed),
                zk.watch_children(BROKER_IDS_PATH, self._on_brokers_changed),
                zk.watch_children(BROKER_TOPICS_PATH, self._on_topics_changed),
            )
            await self._rebalance()

    def _on_consumers_changed(self, children: list[str]) -> None:
        log.debug("group %s consumers: %s", self.group, sorted(children))
        self.request_rebalance()

    def _on_brokers_changed(self, children: list[str]) -> None:
        log.debug("brokers: %s", sorted(children))
        self.request_rebalance()

    def _on_topics_changed(self, children: list[str]) -> None:
        if self.registry.topics_changed(children):
            log.debug("subscribed topics now %s", sorted(self.registry.relevant(children)))
            self.request_rebalance()

    # ------------------------------------------------------------ rebalance

    def _rebalance_failure(self, attempts: int, last_error: BaseException | None) -> str:
        return (
            f"{self.consumer_id} can't rebalance after {attempts} attempts (rebalance.max.retries="
            f"{self.config.rebalance_max_retries}, rebalance.backoff.ms={self.config.rebalance_backoff_ms}): "
            + (f"{last_error}" if last_error else "partitions still owned by other consumers")
        )

    async def _rebalance_once(self) -> bool:
        assert self._zk is not None
        registry = self.registry
        partitions, threads, brokers = await self._zk.run(registry.read_group)
        if brokers:
            wanted = registry.assign(partitions, threads)
        else:
            wanted = {}
            log.warning("no broker is registered in ZooKeeper; consumer %s owns nothing until one is", self.consumer_id)
        if wanted == self._owned_threads and self._fetch_scope is not None:
            if await self._zk.run(registry.still_own, wanted):
                log.debug("rebalance of %s: assignment unchanged", self.consumer_id)
                return True
        log.info(
            "rebalancing consumer %s: %d partition(s) -> %s",
            self.consumer_id,
            len(wanted),
            ", ".join(f"{t}-{p}:{th.rsplit('-', 1)[1]}" for (t, p), th in sorted(wanted.items())) or "none",
        )
        # Stop, commit, release, claim.
        await self._stop_and_commit()
        await self._zk.run(registry.release, self._owned_threads)
        previous = self._forget_owned()
        self._owned_threads = {}
        if not await self._zk.run(registry.claim, wanted):
            return False
        # The committed offsets and the leaders are read at once.
        assert self.store is not None
        committed, leaders = await both(self.store.read(list(wanted)), self._zk.run(self.registry.leaders, list(wanted)))
        streams = {key: registry.stream_of(key[0], int(thread.rsplit("-", 1)[1])) for key, thread in wanted.items()}
        self._owned_threads = dict(wanted)
        await self._take_partitions(streams, committed, leaders, previous)
        return True

    async def find_leaders(self, keys: list[TopicPartition]) -> dict[TopicPartition, Leader]:
        """Partition leaders from ZooKeeper (`GroupRegistry.leaders`; see
        `kclient.client.consumer.fetcher.FetcherOwner.find_leaders`)."""
        assert self._zk is not None
        return await self._zk.run(self.registry.leaders, keys)


__all__ = ["ConnectorCore"]
