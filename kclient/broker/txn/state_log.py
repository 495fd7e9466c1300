"""The ``__transaction_state`` partitions this broker leads: creating the
topic, loading a partition on leadership, and appending to it (Kafka's
``TransactionStateManager`` I/O half; the cache and decisions are
`kclient.broker.txn.transaction_coordinator.TransactionCoordinator`'s).

As for ``__consumer_offsets``
(`kclient.broker.group.metadata_manager.GroupMetadataManager`):

- the topic is created on first use (FindCoordinator key type 1) with
  ``transaction.state.log.num.partitions`` partitions,
  ``cleanup.policy=compact``, ``transaction.state.log.segment.bytes``,
  ``min.insync.replicas`` = ``transaction.state.log.min.isr`` (capped at
  the replication factor) and
  ``transaction.state.log.replication.factor`` replicas (fewer when fewer
  brokers are alive);
- when this broker becomes leader of a partition, the partition is read
  from its log start to its log end in a worker thread (its ids get
  COORDINATOR_LOAD_IN_PROGRESS meanwhile), then handed to
  `TransactionCoordinator.on_election` with the partition's leader epoch
  as the coordinator epoch; transactions found in PrepareCommit /
  PrepareAbort go to ``on_markers`` (their markers are written again);
- when it stops leading, `TransactionCoordinator.on_resignation`;
- records are appended as the leader and acknowledged once the high
  watermark passed them (acks=all), within ``offsets.commit.timeout.ms``
  (deviation: Kafka waits up to its ``request.timeout.ms``).

Trio-thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from kclient.broker.internal_topic import InternalTopic
from kclient.broker.txn.coordinator import TxnMarkers
from kclient.broker.txn.transaction_coordinator import PendingWrite, TransactionCoordinator
from kclient.clock import now_ms
from kclient.crash_point import crash_point
from kclient.errors import (
    NONE,
    NOT_COORDINATOR,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_SERVER_ERROR,
    BrokerResponseError,
)
from kclient.protocol.records import iter_record_set
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import build_batch

if TYPE_CHECKING:
    from kclient.broker.metadata_cache import MetadataCache
    from kclient.broker.partition import Partition
    from kclient.broker.state import TopicOverrides
    from kclient.broker.topic_admin import TopicAdmin
    from kclient.config import BrokerConfig

log = logging.getLogger("kclient.broker.txn")

#: The internal topic of the transaction coordinators (KIP-98).
TRANSACTION_STATE_TOPIC = "__transaction_state"

#: Bytes read per step while loading a partition.
LOAD_CHUNK_BYTES = 1 << 20


class TransactionStateLog:
    """The ``__transaction_state`` partitions led here (see the module
    docstring). Run `run` in the broker's nursery; the replica manager
    calls `leadership_changed`.

    Args:
        config: The broker's configuration (``transaction.state.log.*``).
        metadata_cache: Whether the topic exists.
        topic_admin: Creates the topic on first use.
        topic_overrides: Gets the topic's own configs.
        coordinator: The transaction coordinator it loads.
        clock: The wall clock in ms (record timestamps).

    Attributes:
        on_markers: Called with the markers of each transaction a loaded
            partition left in PrepareCommit / PrepareAbort, and the
            coordinator epoch.
    """

    def __init__(
        self,
        config: BrokerConfig,
        metadata_cache: MetadataCache,
        topic_admin: TopicAdmin,
        topic_overrides: TopicOverrides,
        coordinator: TransactionCoordinator,
        *,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.config = config
        self.metadata_cache = metadata_cache
        self.topic_admin = topic_admin
        self.coordinator = coordinator
        self.clock = clock
        self.on_markers: list[Callable[[TxnMarkers, int], None]] = []
        #: Partition index -> the `Partition` being loaded / loaded here.
        self.partitions: dict[int, Partition] = {}
        self._nursery: trio.Nursery | None = None
        self._topic = InternalTopic(TRANSACTION_STATE_TOPIC, metadata_cache, topic_admin, "transaction.state.log.replication.factor")
        # Applied on every start; min.insync.replicas only at creation (it
        # depends on the replication factor the topic got).
        topic_overrides.update(TRANSACTION_STATE_TOPIC, self.topic_configs())

    def topic_configs(self, replication_factor: int | None = None) -> dict[str, str]:
        """The topic configs ``__transaction_state`` is created with.

        Args:
            replication_factor: The topic's replication factor: adds
                ``min.insync.replicas`` (``transaction.state.log.min.isr``,
                at most this).

        Returns:
            The configs.
        """
        configs = {"cleanup.policy": "compact", "segment.bytes": str(self.config.transaction_state_log_segment_bytes)}
        if replication_factor is not None:
            configs["min.insync.replicas"] = str(min(self.config.transaction_state_log_min_isr, replication_factor))
        return configs

    async def ensure_topic(self) -> int:
        """Create ``__transaction_state`` if missing.

        Returns:
            NONE when it exists, COORDINATOR_NOT_AVAILABLE while its
            creation goes on (or failed).
        """
        return await self._topic.ensure(
            self.config.transaction_state_log_num_partitions, self.config.transaction_state_log_replication_factor, self.topic_configs
        )

    # ------------------------------------------------------------ leadership

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the loading tasks until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for part in list(self.partitions.values()):
                nursery.start_soon(self._load, part, part.leadership, part.leader_epoch)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def leadership_changed(self, part: Partition) -> None:
        """The replica manager's hook: ``part`` changed role (or stopped)."""
        if part.topic != TRANSACTION_STATE_TOPIC:
            return
        index = part.partition
        if not part.is_leader:
            if self.partitions.pop(index, None) is not None:
                log.info("%s-%d: no longer leader, dropping its transactional ids", TRANSACTION_STATE_TOPIC, index)
            self.coordinator.on_resignation(index)
            return
        manager = self.coordinator.manager
        if self.partitions.get(index) is part and manager.coordinator_epochs.get(index, manager.loading.get(index)) == part.leader_epoch:
            return  # the same term and epoch (an ISR change only)
        self.partitions[index] = part
        manager.begin_loading(index, part.leader_epoch)
        log.info("%s-%d: became leader (epoch %d), loading transactional ids", TRANSACTION_STATE_TOPIC, index, part.leader_epoch)
        if self._nursery is not None:
            self._nursery.start_soon(self._load, part, part.leadership, part.leader_epoch)

    async def _load(self, part: Partition, leadership: int, epoch: int) -> None:
        index = part.partition
        try:
            records = await trio.to_thread.run_sync(read_partition, part)
        except Exception:
            log.exception("%s-%d: loading failed", TRANSACTION_STATE_TOPIC, index)
            return
        if self.partitions.get(index) is not part or part.leadership != leadership or not part.is_leader:
            return  # resigned (or re-elected) meanwhile
        try:
            pending = self.coordinator.on_election(index, epoch, records)
        except Exception:
            log.exception("%s-%d: unreadable records", TRANSACTION_STATE_TOPIC, index)
            return
        log.info("%s-%d: loaded (%d transaction(s) to complete)", TRANSACTION_STATE_TOPIC, index, len(pending))
        for markers in pending:
            for callback in self.on_markers:
                callback(markers, epoch)

    # ------------------------------------------------------------ appends

    async def append(self, write: PendingWrite) -> int:
        """Append ``write``'s record to its partition and wait until the ISR
        has it (acks=all).

        Returns:
            NONE, or the append's error code (NOT_LEADER_OR_FOLLOWER when
            this broker no longer leads the partition, NOT_ENOUGH_REPLICAS,
            REQUEST_TIMED_OUT, ...), which the coordinator maps.
        """
        part = self.partitions.get(write.partition)
        if part is None or not part.is_leader:
            return NOT_LEADER_OR_FOLLOWER
        now = self.clock()
        batch = build_batch([(write.key, write.value, now, ())])
        try:
            part.check_leader()
            part.check_min_isr(-1)
            result = part.log.append(batch, now_ms=now, leader_epoch=part.leader_epoch)
        except BrokerResponseError as exc:
            log.info("%s-%d: append for %r refused: %s", TRANSACTION_STATE_TOPIC, write.partition, write.transactional_id, exc)
            return exc.code if exc.code is not None else UNKNOWN_SERVER_ERROR
        except Exception:
            log.exception("%s-%d: append for %r failed", TRANSACTION_STATE_TOPIC, write.partition, write.transactional_id)
            return UNKNOWN_SERVER_ERROR
        if write.decision.append is not None:
            crash_point("txn_state.appended." + write.decision.append.txn_state.kafka_name)
        part.after_leader_append()
        deadline = trio.current_time() + self.config.offsets_commit_timeout_ms / 1000.0
        code = await part.wait_for_replication(result.base_offset + 1, deadline)
        if code != NONE:
            log.info("%s-%d: record for %r not replicated: error %d", TRANSACTION_STATE_TOPIC, write.partition, write.transactional_id, code)
            return code
        return NONE if self.partitions.get(write.partition) is part else NOT_COORDINATOR


def read_partition(part: Partition) -> list[tuple[bytes, bytes | None]]:
    """Every keyed record of a ``__transaction_state`` partition, from its
    log start to its log end, as ``(key, value)`` in log order (worker
    thread).

    Args:
        part: The partition.

    Returns:
        The records (value None: a tombstone).
    """
    plog = part.log
    out: list[tuple[bytes, bytes | None]] = []
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        data = plog.read(offset, LOAD_CHUNK_BYTES, min_one_batch=True).records
        infos = list(scan_batches(data))
        if not infos:
            break
        complete = memoryview(data)[: infos[-1].position + infos[-1].size]
        for rec in iter_record_set(complete):
            if rec.offset >= offset and rec.key is not None:
                out.append((bytes(rec.key), None if rec.value is None else bytes(rec.value)))
        offset = max(offset, infos[-1].next_offset)
    return out


__all__ = ["LOAD_CHUNK_BYTES", "TRANSACTION_STATE_TOPIC", "TransactionStateLog", "read_partition"]
