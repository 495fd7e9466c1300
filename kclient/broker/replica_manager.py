"""The broker's replicas: the controller's requests, ISR upkeep and the
replica fetchers (Kafka's ``ReplicaManager``).

The controller (`kclient.broker.controller`) decides; this module carries
its decisions out on one broker:

- **LeaderAndIsr** (`leader_and_isr`): for each partition state naming
  this broker among the replicas, get or create the partition's log, then
  become its leader (stop fetching it, stamp the new leader epoch at the
  log end offset) or its follower (hand it to the replica fetcher of the
  new leader, which first truncates the log to what the leader has, KIP-101
  / KIP-279). Requests from a controller older than one already seen get
  STALE_CONTROLLER_EPOCH; a partition state whose leader epoch is older than
  the partition's gets STALE_CONTROLLER_EPOCH for that partition and is
  ignored.
- **UpdateMetadata** (`update_metadata`): the `MetadataCache` every
  Metadata request is answered from.
- **StopReplica** (`stop_replica`): stop fetching; with
  ``delete_partitions`` delete the log too (topic deletion).
- **ISR**: every ``replica.lag.time.max.ms / 2`` each led partition drops
  the followers that have not caught up for ``replica.lag.time.max.ms``;
  followers that caught up are added back (`kclient.broker.partition`).
  Each change is first written to the partition's state znode with the
  znode version the controller gave (a conditional write: a deposed leader
  cannot overwrite the controller), then announced with a sequential
  ``/isr_change_notification/isr_change_`` node so the controller sends
  every broker fresh metadata (Kafka's ``IsrChangeNotificationHandler``).
  Without ZooKeeper (a standalone broker) ISR changes apply at once.
- **High watermarks** are checkpointed to each log dir's
  ``replication-offset-checkpoint`` every
  ``replica.high.watermark.checkpoint.interval.ms``.

Trio-thread only; blocking ZooKeeper and file calls run in worker threads.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import trio

from kclient.broker.inter_broker import ControllerRequest
from kclient.broker.log_dir_failure import LOG_DIR_EVENT_PATH, LOG_DIR_EVENT_PREFIX, LogDirFailureChannel, encode_log_dir_event
from kclient.broker.metadata_cache import MetadataCache
from kclient.broker.partition import Partition
from kclient.broker.replica_fetcher import FetcherManager
from kclient.broker.state import TopicOverrides
from kclient.broker.zk_topics import decode_topic_config, topic_config_path
from kclient.clock import now_ms
from kclient.errors import (
    KAFKA_STORAGE_ERROR,
    NONE,
    STALE_CONTROLLER_EPOCH,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    ConfigError,
    KafkaError,
)
from kclient.protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)
from kclient.protocol.messages.stop_replica import (
    StopReplicaPartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
)
from kclient.protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kclient.protocol.partition_states import partition_states
from kclient.zk.paths import PartitionState, partition_state_path

if TYPE_CHECKING:
    from kclient.config import BrokerConfig
    from kclient.storage import LogManager
    from kclient.zk.client import ZkClient

log = logging.getLogger("kclient.broker")

ISR_CHANGE_NOTIFICATION_PREFIX = "/isr_change_notification/isr_change_"


class ReplicaManager:
    """This broker's partitions and what the controller says of them (see
    the module docstring). Run `run` as a task of the broker's nursery.

    Args:
        config: The broker's configuration (``replica.*``,
            ``min.insync.replicas``, the inter-broker listener).
        broker_id: This broker's id.
        logs: The log manager holding the partitions' logs.
        metadata_cache: The cache UpdateMetadata refreshes.
        topic_overrides: The topics' static configs and formats.
        notify: Called with ``(topic, partition)`` when a partition's log end
            offset or high watermark moves (wakes Fetch long polls).
        advertised_address: This broker's ``(host, port)``, published by
            `lead_locally`.
        zk: The ZooKeeper session, or None for a standalone broker.
        clock: The wall clock in ms (ISR lag, leader epoch start times).
    """

    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        logs: LogManager,
        metadata_cache: MetadataCache,
        topic_overrides: TopicOverrides,
        *,
        notify: Callable[[tuple[str, int]], None],
        advertised_address: tuple[str, int],
        zk: ZkClient | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.config = config
        self.clock = clock
        self.broker_id = broker_id
        self.logs = logs
        self.topic_overrides = topic_overrides
        self.notify = notify
        self.advertised_address = advertised_address
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.metadata_cache = metadata_cache
        self.controller_epoch = 0
        self.zk = zk
        self.fetchers = FetcherManager(config, broker_id, notify, self._follower_storage_error)
        self._isr_send, self._isr_receive = trio.open_memory_channel(math.inf)
        self._topic_configs: dict[str, dict[str, str]] = {}
        #: Called as ``listener(partition)`` after a hosted partition became
        #: leader or follower, or was stopped (its ``is_leader`` tells which);
        #: the group coordinator loads and unloads ``__consumer_offsets``
        #: partitions here.
        self.leadership_listeners: list[Callable[[Partition], None]] = []
        #: Failed log directories and their offline partitions (KIP-112).
        self.log_dir_failures = LogDirFailureChannel(logs)
        self.log_dir_failures.listeners.append(self._log_dir_failed)
        self._dir_send, self._dir_receive = trio.open_memory_channel[list[tuple[str, int]]](math.inf)

    # ------------------------------------------------------------ tasks

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the fetchers, the ISR writer and the periodic ISR and
        high-watermark checkpoint jobs until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.fetchers.run)
            task_status.started()
            nursery.start_soon(self._isr_writer)
            nursery.start_soon(self._isr_expiry)
            nursery.start_soon(self._checkpoint_high_watermarks)
            nursery.start_soon(self._log_dir_notifier)

    def _follower_storage_error(self, key: tuple[str, int], exc: OSError) -> None:
        """A follower's write failed (Kafka's ``ReplicaFetcherThread``
        reports it to the ``LogDirFailureChannel``): its log directory goes
        offline as after a failed leader append."""
        self.log_dir_failures.storage_error(key[0], key[1], "follower append", exc)

    def _log_dir_failed(self, log_dir: object, keys: list[tuple[str, int]]) -> None:
        """A log directory went offline (Kafka's
        ``ReplicaManager.handleLogDirFailure``): stop hosting its partitions
        (their fetchers stop, their waiters wake), then tell the controller
        (`_log_dir_notifier`)."""
        for key in keys:
            part = self.partitions.pop(key, None)
            self.fetchers.remove(key)
            if part is not None:
                part.stop()
                self._leadership_changed(part)
        self._dir_send.send_nowait(keys)

    async def _log_dir_notifier(self) -> None:
        """Write a log dir event notification per failed directory (a
        ZooKeeper cluster's controller moves leadership away from it; see
        `kclient.broker.log_dir_failure`)."""
        async for keys in self._dir_receive:
            if self.zk is None:
                continue
            data = encode_log_dir_event(self.broker_id, keys)
            try:
                await trio.to_thread.run_sync(self.zk.create_sequential, f"{LOG_DIR_EVENT_PATH}/{LOG_DIR_EVENT_PREFIX}", data)
            except KafkaError as exc:
                log.error("cannot write a log dir event notification: %s", exc)

    async def _isr_expiry(self) -> None:
        lag = self.config.replica_lag_time_max_ms
        while True:
            await trio.sleep(max(lag / 2, 50) / 1000)
            now = self.clock()
            for part in list(self.partitions.values()):
                if part.isr_change_pending:
                    continue
                out = part.out_of_sync_replicas(now, lag)
                if out:
                    log.info(
                        "%s-%d: shrinking the ISR from %s: replica(s) %s not caught up for %d ms",
                        part.topic, part.partition, list(part.isr), out, lag,
                    )
                    self.request_isr_change(part, tuple(r for r in part.isr if r not in out))

    async def _checkpoint_high_watermarks(self) -> None:
        interval = self.config.replica_high_watermark_checkpoint_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            try:
                await trio.to_thread.run_sync(self.logs.checkpoint_high_watermarks)
            except OSError as exc:
                log.error("cannot write the high watermark checkpoints: %s", exc)

    def request_isr_change(self, part: Partition, isr: tuple[int, ...]) -> None:
        """Queue an ISR change of a led partition (trio thread)."""
        if not part.begin_isr_change(isr):
            return
        self._isr_send.send_nowait((part, part.leader_epoch, tuple(isr)))

    async def _isr_writer(self) -> None:
        async for part, epoch, isr in self._isr_receive:
            try:
                if part.leader_epoch != epoch or not part.is_leader:
                    continue
                if self.zk is None:
                    part.apply_isr(isr, part.zk_version)
                    self._cache_isr(part)
                    continue
                path = partition_state_path(part.topic, part.partition)
                data = PartitionState(self.broker_id, isr, part.leader_epoch, part.controller_epoch).to_json()
                try:
                    version = await trio.to_thread.run_sync(self.zk.set_versioned, path, data, part.zk_version)
                except KafkaError as exc:
                    log.warning("%s-%d: cannot write the ISR %s: %s", part.topic, part.partition, list(isr), exc)
                    continue
                if version is None:
                    # Someone else (the controller) wrote the state: its
                    # LeaderAndIsr will tell us; retry later if still leader.
                    log.info(
                        "%s-%d: ISR change to %s not written: the state znode moved past version %d",
                        part.topic, part.partition, list(isr), part.zk_version,
                    )
                    await self._refresh_zk_version(part)
                    continue
                if part.leader_epoch != epoch:
                    continue
                log.info("%s-%d: ISR is now %s (was %s)", part.topic, part.partition, list(isr), list(part.isr))
                part.apply_isr(isr, version)
                self._cache_isr(part)
                note = json.dumps({"version": 1, "partitions": [{"topic": part.topic, "partition": part.partition}]}).encode()
                try:
                    await trio.to_thread.run_sync(self.zk.create_sequential, ISR_CHANGE_NOTIFICATION_PREFIX, note)
                except KafkaError as exc:
                    log.warning("cannot write an ISR change notification: %s", exc)
            finally:
                part.end_isr_change()

    def _cache_isr(self, part: Partition) -> None:
        """Show this broker's own ISR change in its metadata cache at once
        (the controller's UpdateMetadata follows in a cluster)."""
        meta = self.metadata_cache.partition(part.topic, part.partition)
        if meta is not None and meta.leader_epoch == part.leader_epoch:
            self.metadata_cache.upsert(attrs.evolve(meta, isr=part.isr, zk_version=part.zk_version))

    async def _refresh_zk_version(self, part: Partition) -> None:
        """Re-read a partition's state znode; keep its version if it still
        names this broker as leader with the same epoch."""
        assert self.zk is not None
        path = partition_state_path(part.topic, part.partition)
        try:
            found = await trio.to_thread.run_sync(self.zk.get_versioned, path)
        except KafkaError:
            return
        if found is None:
            return
        data, version = found
        current = PartitionState.from_json(data)
        if current.leader == self.broker_id and current.leader_epoch == part.leader_epoch:
            part.zk_version = version
            part.isr = tuple(current.isr)

    # ------------------------------------------------------------ controller requests

    def _stale(self, body: ControllerRequest, api: str) -> bool:
        epoch = body.controller_epoch
        if epoch < self.controller_epoch:
            log.warning(
                "ignoring %s from controller %d with epoch %d: epoch %d seen", api, body.controller_id, epoch, self.controller_epoch
            )
            return True
        self.controller_epoch = epoch
        return False

    async def leader_and_isr(self, body: LeaderAndIsrRequest, version: int) -> LeaderAndIsrResponse:
        """Answer a LeaderAndIsr request (see the module docstring).

        Args:
            body: The request (v0-3, `kclient.protocol.messages.LEADER_AND_ISR`).
            version: Its version.

        Returns:
            The response: a top-level error and one error per partition.
        """
        states = partition_states(body)
        if self._stale(body, "LeaderAndIsr"):
            return LeaderAndIsrResponse(error_code=STALE_CONTROLLER_EPOCH)
        leaders = {b.broker_id: (b.host_name, b.port) for b in body.live_leaders}
        errors = []
        now = self.clock()
        for topic, s in states:
            index = s.partition_index
            code = NONE
            if self.log_dir_failures.is_offline(topic, index):
                # Kafka's HostedPartition.Offline: the controller marks the
                # replica offline.
                errors.append(LeaderAndIsrPartitionError(topic_name=topic, partition_index=index, error_code=KAFKA_STORAGE_ERROR))
                continue
            try:
                code = await self._apply_partition_state(topic, s, leaders, now)
            except Exception:
                log.exception("LeaderAndIsr for %s-%d failed", topic, index)
                code = UNKNOWN_SERVER_ERROR
            errors.append(LeaderAndIsrPartitionError(topic_name=topic, partition_index=index, error_code=code))
        return LeaderAndIsrResponse(error_code=NONE, partition_errors=errors)

    async def _apply_partition_state(
        self, topic: str, s: LeaderAndIsrPartitionState, leaders: dict[int, tuple[str, int]], now: int
    ) -> int:
        index = s.partition_index
        if self.broker_id not in s.replicas:
            return UNKNOWN_TOPIC_OR_PARTITION
        part = self.partitions.get((topic, index))
        if part is not None and s.leader_epoch < part.leader_epoch:
            log.info(
                "%s-%d: ignoring leader epoch %d from the controller, already at %d", topic, index, s.leader_epoch, part.leader_epoch
            )
            return STALE_CONTROLLER_EPOCH
        if part is None:
            plog = self.logs.get(topic, index)
            if plog is None:
                plog = await trio.to_thread.run_sync(self.logs.create_log, topic, index)
            part = Partition(
                topic,
                index,
                plog,
                self.broker_id,
                request_isr_change=self.request_isr_change,
                notify=self.notify,
            )
            self.partitions[(topic, index)] = part
        part.min_insync_replicas = await self._min_insync_replicas(topic)
        await self._apply_log_config(topic)
        # A follower append still in flight finishes before the role changes
        # (a new leader's epoch starts at its final log end offset).
        async with part.replication_lock:
            if s.leader == self.broker_id:
                self.fetchers.remove(part.key)
                part.make_leader(s, now)
                follow = False
            else:
                follow = part.make_follower(s) or not self.fetchers.has(part.key)
                if follow:
                    self.fetchers.remove(part.key)
        if follow:
            address = leaders.get(s.leader)
            if address is None and s.leader >= 0:
                node = self.metadata_cache.brokers.get(s.leader)
                ep = node.endpoint(self.config.inter_broker_listener_name) if node else None
                address = (ep.host, ep.port) if ep else None
            if s.leader >= 0 and address is not None:
                self.fetchers.add(part, s.leader, address)
            else:
                log.info("%s-%d: no live leader (%d) to follow yet", topic, index, s.leader)
        self._leadership_changed(part)
        return NONE

    def _leadership_changed(self, part: Partition) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(part)
            except Exception:
                log.exception("%s-%d: leadership listener failed", part.topic, part.partition)

    async def _apply_log_config(self, topic: str) -> None:
        """Give ``topic``'s logs its topic-level configs (``cleanup.policy``,
        ``retention.ms``, ``segment.bytes``, ...; see
        `kclient.storage.LogManager.set_topic_config`)."""
        configs = await self.topic_config(topic)
        # message.timestamp.type / message.format.version from ZooKeeper too
        # (a topic created or altered with them through the API).
        self.topic_overrides.format(topic, configs)
        try:
            self.logs.set_topic_config(topic, configs)
        except ConfigError as exc:
            log.warning("topic %s: config not applied to its logs: %s", topic, exc)

    async def topic_config_changed(self, topic: str) -> None:
        """Apply ``topic``'s configs anew after they changed (AlterConfigs,
        IncrementalAlterConfigs, a ``/config/changes`` notification;
        `kclient.broker.config_changes`): its logs' settings, its hosted
        partitions' ``min.insync.replicas`` and its stored format."""
        self.topic_overrides.forget_format(topic)
        await self._apply_log_config(topic)
        min_isr = await self._min_insync_replicas(topic)
        for (name, _), part in list(self.partitions.items()):
            if name == topic:
                part.min_insync_replicas = min_isr

    async def _min_insync_replicas(self, topic: str) -> int:
        configs = await self.topic_config(topic)
        try:
            return max(1, int(configs.get("min.insync.replicas", self.config.min_insync_replicas)))
        except ValueError:
            return self.config.min_insync_replicas

    async def topic_config(self, topic: str) -> dict[str, str]:
        """The topic's overrides: ``topic.config.file`` entries, then
        ZooKeeper's ``/config/topics/<topic>`` (re-read on each call)."""
        configs = self.topic_overrides.get(topic)
        if self.zk is not None:
            try:
                data = await trio.to_thread.run_sync(self.zk.get, topic_config_path(topic))
            except KafkaError as exc:
                log.debug("cannot read the config of topic %s: %s", topic, exc)
                data = None
            if data:
                try:
                    configs.update(decode_topic_config(data))
                except ValueError:
                    log.warning("/config/topics/%s is not valid JSON", topic)
        return configs

    async def update_metadata(self, body: UpdateMetadataRequest, version: int) -> UpdateMetadataResponse:
        """Answer an UpdateMetadata request: refresh the metadata cache."""
        if self._stale(body, "UpdateMetadata"):
            return UpdateMetadataResponse(error_code=STALE_CONTROLLER_EPOCH)
        self.metadata_cache.update(body, version)
        return UpdateMetadataResponse(error_code=NONE)

    async def stop_replica(self, body: StopReplicaRequest, version: int) -> StopReplicaResponse:
        """Answer a StopReplica request: stop fetching the partitions; with
        ``delete_partitions`` delete their logs too."""
        if self._stale(body, "StopReplica"):
            return StopReplicaResponse(error_code=STALE_CONTROLLER_EPOCH)
        keys = [(p.topic_name, p.partition_index) for p in body.ungrouped_partitions]
        for t in body.topics:
            keys.extend((t.name, i) for i in t.partition_indexes)
        errors = []
        for key in keys:
            part = self.partitions.pop(key, None)
            if part is None:
                self.fetchers.remove(key)
            else:
                async with part.replication_lock:  # no follower write still running on it
                    self.fetchers.remove(key)
                    part.stop()
                self._leadership_changed(part)
            code = NONE
            if body.delete_partitions:
                try:
                    await trio.to_thread.run_sync(self.logs.delete_log, *key)
                    log.info("deleted the log of %s-%d", *key)
                except Exception as exc:
                    log.error("cannot delete the log of %s-%d: %s", key[0], key[1], exc)
                    code = UNKNOWN_SERVER_ERROR
            errors.append(StopReplicaPartitionError(topic_name=key[0], partition_index=key[1], error_code=code))
        return StopReplicaResponse(error_code=NONE, partition_errors=errors)

    # ------------------------------------------------------------ standalone

    async def lead_locally(self, topic: str, partitions: range | list[int], *, is_new: bool = False) -> None:
        """Make this broker the only replica and leader of ``partitions``
        of ``topic`` and publish them in the metadata cache, without a
        controller (a standalone broker, no ``zookeeper.connect``)."""
        epoch = max(self.controller_epoch, 1)
        me = self.broker_id
        leading: list[LeaderAndIsrPartitionState] = []
        published: list[UpdateMetadataPartitionState] = []
        for index in partitions:
            part = self.partitions.get((topic, index))
            leader_epoch = 0 if part is None else max(part.leader_epoch, 0)
            leading.append(
                LeaderAndIsrPartitionState(
                    topic_name=topic, partition_index=index, controller_epoch=epoch, leader=me, leader_epoch=leader_epoch,
                    isr=[me], partition_epoch=0, replicas=[me], is_new=is_new,
                )
            )
            published.append(
                UpdateMetadataPartitionState(
                    topic_name=topic, partition_index=index, controller_epoch=epoch, leader=me, leader_epoch=leader_epoch,
                    isr=[me], zk_version=0, replicas=[me], offline_replicas=[],
                )
            )
        host, port = self.advertised_address
        await self.leader_and_isr(LeaderAndIsrRequest(controller_id=me, controller_epoch=epoch, ungrouped_partition_states=leading), 1)
        endpoint = UpdateMetadataEndpoint(host=host, port=port, listener="PLAINTEXT", security_protocol=0)
        await self.update_metadata(
            UpdateMetadataRequest(
                controller_id=me,
                controller_epoch=epoch,
                ungrouped_partition_states=published,
                live_brokers=[UpdateMetadataBroker(id=me, endpoints=[endpoint], rack=None)],
            ),
            4,
        )

    # ------------------------------------------------------------ lookups

    def partition(self, topic: str, index: int) -> Partition | None:
        """The hosted partition, or ``None``."""
        return self.partitions.get((topic, index))

    def shutdown(self) -> None:
        """Stop every fetcher (the broker is stopping)."""
        self.fetchers.remove_all()


__all__ = ["ISR_CHANGE_NOTIFICATION_PREFIX", "ReplicaManager"]
