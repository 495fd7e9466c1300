"""The offset manager: the ``__consumer_offsets`` partitions this broker
leads, their in-memory cache, and appends to them.

As Kafka's ``GroupMetadataManager`` (Kafka documentation, "Offset
management"):

- the topic is created on first use (FindCoordinator) with
  ``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact``
  and ``offsets.topic.replication.factor`` replicas (fewer when fewer
  brokers are alive; see `kclient.config.BrokerConfig`);
- when this broker becomes leader of a partition (LeaderAndIsr, or
  ``lead_locally`` for a standalone broker) the partition is read from
  its log start to its log end in the background; until that is done its
  groups get COORDINATOR_LOAD_IN_PROGRESS, and groups of partitions led
  elsewhere NOT_COORDINATOR. The last record of each key wins; a null value
  (tombstone) deletes (`kclient.broker.group.offsets_loader`);
- TxnOffsetCommit's offsets are appended in the producer's transaction
  and kept pending until the producer's COMMIT or ABORT marker lands on
  the partition (`txn_completed`, the WriteTxnMarkers hook; Kafka's
  ``handleTxnCompletion``), then applied or dropped
  (`kclient.broker.group.txn_offsets`);
- when it stops leading, the partition's groups and offsets are dropped
  from memory (their pending requests get NOT_COORDINATOR);
- commits and group metadata are appended as the leader with the
  partition's leader epoch and acknowledged once the high watermark passed
  them (every ISR member has them, Kafka's ``acks=-1``), within
  ``offsets.commit.timeout.ms`` (else REQUEST_TIMED_OUT); the cache
  changes only after that;
- every ``offsets.retention.check.interval.ms`` the offsets of groups
  without members whose commit is older than ``offsets.retention.minutes``
  (or whose explicit expire timestamp passed, OffsetCommit v2-4) are
  deleted with tombstones (KIP-211), except where a transaction has an
  offset of the partition pending; a group with pending offsets stays
  (Kafka 4's ``OffsetMetadataManager.cleanupExpiredOffsets``);
- OffsetDelete and DeleteGroups tombstone the pending transactional
  offsets too: the transaction's COMMIT no longer brings them back.

Trio-thread only; log reads while loading run in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import trio

from kclient.broker.group.membership import EMPTY, Group
from kclient.broker.group.offsets_loader import LOAD_CHUNK_BYTES, read_partition
from kclient.broker.group.records import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from kclient.broker.group.txn_offsets import PendingTxnOffsets, TxnOffsets, apply_committed
from kclient.broker.internal_topic import InternalTopic
from kclient.clock import now_ms
from kclient.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    MESSAGE_TOO_LARGE,
    NONE,
    NOT_COORDINATOR,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    BrokerResponseError,
)
from kclient.protocol.records.v2 import build_batch

if TYPE_CHECKING:
    from kclient.broker.metadata_cache import MetadataCache
    from kclient.broker.partition import Partition
    from kclient.broker.state import TopicOverrides
    from kclient.broker.topic_admin import TopicAdmin
    from kclient.config import BrokerConfig

log = logging.getLogger("kclient.broker.group")

#: What an append error becomes for a group request (Kafka's mapping in
#: ``GroupMetadataManager.storeOffsets`` / ``storeGroup``).
_APPEND_ERRORS = {
    UNKNOWN_TOPIC_OR_PARTITION: COORDINATOR_NOT_AVAILABLE,
    NOT_ENOUGH_REPLICAS: COORDINATOR_NOT_AVAILABLE,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: COORDINATOR_NOT_AVAILABLE,
    NOT_LEADER_OR_FOLLOWER: NOT_COORDINATOR,
    MESSAGE_TOO_LARGE: 28,  # INVALID_COMMIT_OFFSET_SIZE
}


class GroupMetadataManager:
    """The offsets partitions led here and their cache (see the module
    docstring). Run `run` in the broker's nursery; the replica manager
    calls `leadership_changed`.

    Args:
        config: The broker's configuration (``offsets.*``).
        metadata_cache: Whether ``__consumer_offsets`` exists.
        topic_admin: Creates ``__consumer_offsets`` on first use.
        topic_overrides: Gets ``__consumer_offsets``' own topic configs.
        clock: The wall clock in ms (record timestamps, offset expiry).

    Attributes:
        groups: group id -> `Group`, for the loaded partitions.
        offsets: group id -> ``{(topic, partition): OffsetAndMetadata}``.
        pending_txn: The transactional offsets (TxnOffsetCommit) whose
            transaction has not ended (`kclient.broker.group.txn_offsets`).
        on_unload: called with each `Group` dropped from memory (the
            coordinator fails its parked requests).
        on_load: called with a partition's index and its records of other
            key versions (the consumer group protocol's, KIP-848), in log
            order, once it is loaded.
        in_use: predicates saying a group id has members elsewhere than in
            `groups` (a consumer-protocol group): its offsets do not expire.
    """

    def __init__(
        self,
        config: BrokerConfig,
        metadata_cache: MetadataCache,
        topic_admin: TopicAdmin,
        topic_overrides: TopicOverrides,
        *,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.config = config
        self.clock = clock
        self.metadata_cache = metadata_cache
        self.topic_admin = topic_admin
        self.num_partitions = self.config.offsets_topic_num_partitions
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        #: group id -> ``{(topic, partition): log offset}`` of the record
        #: of each committed offset (which of a plain and a transactional
        #: commit is later).
        self.positions: dict[str, dict[tuple[str, int], int]] = {}
        #: Transactional offsets waiting for their producer's marker.
        self.pending_txn = PendingTxnOffsets()
        #: Partition index -> markers ``(producer id, COMMIT?)`` written
        #: while it loads (applied once loaded: the load may have read
        #: the log before them).
        self._deferred_markers: dict[int, list[tuple[int, bool]]] = {}
        #: Partition index -> the `Partition` being loaded / loaded here.
        self.loading: dict[int, Partition] = {}
        self.loaded: dict[int, Partition] = {}
        self.on_unload: list[Callable[[Group], None]] = []
        self.on_load: list[Callable[[int, list[tuple[bytes, bytes | None]]], None]] = []
        self.in_use: list[Callable[[str], bool]] = []
        self._nursery: trio.Nursery | None = None
        self._topic = InternalTopic(OFFSETS_TOPIC, metadata_cache, topic_admin, "offsets.topic.replication.factor")
        #: Partition index -> the `Partition.leadership` term loaded.
        self._terms: dict[int, int] = {}
        # The topic's configs apply on every start, standalone included.
        topic_overrides.update(OFFSETS_TOPIC, self.topic_configs())

    def topic_configs(self) -> dict[str, str]:
        """The topic configs ``__consumer_offsets`` is created with."""
        return {"cleanup.policy": "compact", "segment.bytes": str(self.config.offsets_topic_segment_bytes)}

    # ------------------------------------------------------------ placement

    def partition_for(self, group: str) -> int:
        """The offsets partition of ``group``."""
        return partition_for(group, self.num_partitions)

    def status(self, group: str) -> int:
        """NONE if this broker coordinates ``group`` and has loaded its
        partition, COORDINATOR_LOAD_IN_PROGRESS while loading it, else
        NOT_COORDINATOR."""
        index = self.partition_for(group)
        part = self.loaded.get(index)
        if part is not None and part.is_leader:
            return NONE
        if index in self.loading:
            return COORDINATOR_LOAD_IN_PROGRESS
        return NOT_COORDINATOR

    def loading_any(self) -> bool:
        return bool(self.loading)

    async def ensure_topic(self) -> int:
        """Create ``__consumer_offsets`` if missing (see the module
        docstring). Returns NONE when it exists (standalone: just created),
        COORDINATOR_NOT_AVAILABLE while its creation goes on."""
        return await self._topic.ensure(self.num_partitions, self.config.offsets_topic_replication_factor, lambda rf: self.topic_configs())

    # ------------------------------------------------------------ leadership

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the loading tasks and the offset expiry until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            # Partitions led since before the broker ran (a standalone broker
            # leads its logs' partitions at start-up) load now.
            for part in list(self.loading.values()):
                nursery.start_soon(self._load, part, part.leadership)
            task_status.started()
            nursery.start_soon(self._expire_periodically)
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def leadership_changed(self, part: Partition) -> None:
        """The replica manager's hook: ``part`` changed role (or stopped)."""
        if part.topic != OFFSETS_TOPIC:
            return
        if part.is_leader:
            self.became_leader(part)
        else:
            self.resigned(part.partition)

    def became_leader(self, part: Partition) -> None:
        """Start loading ``part`` (unless already loaded for this term)."""
        index = part.partition
        current = self.loaded.get(index) or self.loading.get(index)
        if current is part and self._terms.get(index) == part.leadership:
            return  # the same term (a new leader epoch or ISR only)
        self._unload(index)
        self._terms[index] = part.leadership
        self.loading[index] = part
        log.info("%s-%d: became leader, loading groups and offsets", OFFSETS_TOPIC, index)
        if self._nursery is None:
            log.warning("%s-%d: no task to load it in (broker not running)", OFFSETS_TOPIC, index)
            return
        self._nursery.start_soon(self._load, part, part.leadership)

    def resigned(self, index: int) -> None:
        """No longer the leader of partition ``index``: drop its groups."""
        if index in self.loading or index in self.loaded:
            log.info("%s-%d: no longer leader, dropping its groups and offsets", OFFSETS_TOPIC, index)
        self._unload(index)

    def _unload(self, index: int) -> None:
        self.loading.pop(index, None)
        self._deferred_markers.pop(index, None)
        self.loaded.pop(index, None)
        self.pending_txn.drop_groups(lambda g: self.partition_for(g) == index)
        for group_id in [g for g in set(self.groups) | set(self.offsets) if self.partition_for(g) == index]:
            self.offsets.pop(group_id, None)
            self.positions.pop(group_id, None)
            group = self.groups.pop(group_id, None)
            if group is not None:
                for callback in self.on_unload:
                    callback(group)

    async def _load(self, part: Partition, leadership: int) -> None:
        index = part.partition
        try:
            loaded = await trio.to_thread.run_sync(read_partition, part)
        except Exception:
            log.exception("%s-%d: loading failed", OFFSETS_TOPIC, index)
            self.loading.pop(index, None)
            self._deferred_markers.pop(index, None)
            return
        if self.loading.get(index) is not part or part.leadership != leadership or not part.is_leader:
            return  # resigned (or re-elected) meanwhile
        now = trio.current_time()
        for group_id, record in loaded.groups.items():
            self.groups[group_id] = Group.from_record(group_id, record, now)
        for group_id, committed in loaded.offsets.items():
            if committed:
                self.offsets[group_id] = committed
                self.positions[group_id] = loaded.positions.get(group_id, {})
                self.groups.setdefault(group_id, Group(group_id, EMPTY))
        for producer_id, pending in loaded.pending.by_producer.items():
            for group_id, txn_offsets in pending.items():
                self.pending_txn.add(producer_id, group_id, txn_offsets)
                self.groups.setdefault(group_id, Group(group_id, EMPTY))
        del self.loading[index]
        self.loaded[index] = part
        for producer_id, commit in self._deferred_markers.pop(index, []):
            self._complete_txn(index, producer_id, commit)
        for callback in self.on_load:
            callback(index, loaded.others)
        log.info(
            "%s-%d: loaded %d group(s), %d committed offset(s)",
            OFFSETS_TOPIC, index, len(loaded.groups), sum(len(c) for c in loaded.offsets.values()),
        )

    # ------------------------------------------------------------ appends

    async def append(self, group: str, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Append ``records`` (key, value) to ``group``'s partition and wait
        until they are replicated.

        Returns:
            NONE, or the error for the group request (NOT_COORDINATOR,
                COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT, ...).
        """
        code, _ = await self.append_batch(group, records)
        return code

    async def append_batch(
        self,
        group: str,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        on_appended: Callable[[int], None] | None = None,
    ) -> tuple[int, int]:
        """Append ``records`` (key, value) to ``group``'s partition as one
        batch, transactional when ``producer_id`` is given (TxnOffsetCommit,
        as Kafka writes it: the producer's id and epoch, sequence 0), and
        wait until they are replicated.

        Args:
            group: The group whose partition is written.
            records: ``(key, value)`` pairs.
            producer_id: The transactional producer's id, or -1.
            producer_epoch: Its epoch, or -1.
            on_appended: Called with the first record's log offset once
                the batch is in the local log (before the ISR has it).

        Returns:
            ``(NONE or the error for the group request, the log offset of
            the first record)``.
        """
        index = self.partition_for(group)
        part = self.loaded.get(index)
        if part is None or not part.is_leader:
            return NOT_COORDINATOR, -1
        now = self.clock()
        txn = producer_id >= 0
        batch = build_batch(
            [(key, value, now, ()) for key, value in records],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0 if txn else -1,
            is_transactional=txn,
        )
        try:
            part.check_leader()
            part.check_min_isr(-1)
            result = part.log.append(batch, now_ms=now, leader_epoch=part.leader_epoch)
        except BrokerResponseError as exc:
            log.info("%s-%d: append for group %r refused: %s", OFFSETS_TOPIC, index, group, exc)
            code = exc.code if exc.code is not None else UNKNOWN_SERVER_ERROR
            return _APPEND_ERRORS.get(code, code), -1
        except Exception:
            log.exception("%s-%d: append for group %r failed", OFFSETS_TOPIC, index, group)
            return UNKNOWN_SERVER_ERROR, -1
        part.after_leader_append()
        if on_appended is not None:
            on_appended(result.base_offset)
        required = result.base_offset + len(records)
        deadline = trio.current_time() + self.config.offsets_commit_timeout_ms / 1000.0
        code = await part.wait_for_replication(required, deadline)
        if code != NONE:
            log.info("%s-%d: records for group %r not replicated: error %d", OFFSETS_TOPIC, index, group, code)
            return _APPEND_ERRORS.get(code, code), -1
        if self.loaded.get(index) is not part:
            return NOT_COORDINATOR, -1
        return NONE, result.base_offset

    async def store_offsets(self, group: str, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> int:
        """Commit ``offsets`` of ``group``; the cache changes once they are
        replicated. Returns the error code for every partition."""
        if not offsets:
            return NONE
        records = [(encode_offset_key(group, t, p), encode_offset_value(v)) for (t, p), v in offsets.items()]
        code, base = await self.append_batch(group, records)
        if code == NONE:
            self.offsets.setdefault(group, {}).update(offsets)
            self.positions.setdefault(group, {}).update({tp: base + i for i, tp in enumerate(offsets)})
        return code

    async def store_txn_offsets(self, group: str, producer_id: int, producer_epoch: int, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> int:
        """Append ``offsets`` of ``group`` in a transactional batch of
        ``producer_id`` (TxnOffsetCommit, KIP-98); once replicated they are
        pending from their local append on (a marker written meanwhile finds
        them, as Kafka's ``prepareTxnOffsetCommit``) until that producer's
        marker lands (`txn_completed`); if the append is not replicated
        they are taken back (Kafka 4 reverts a failed write).

        Args:
            group: The group.
            producer_id: The transactional producer's id.
            producer_epoch: Its epoch.
            offsets: The validated partitions' offsets.

        Returns:
            The error code for every partition.
        """
        if not offsets:
            return NONE
        records = [(encode_offset_key(group, t, p), encode_offset_value(v)) for (t, p), v in offsets.items()]

        previous = self.pending_txn.pending_of(producer_id, group)
        added: TxnOffsets = {}

        def appended(base: int) -> None:
            added.update({tp: (v, base + i) for i, (tp, v) in enumerate(offsets.items())})
            self.pending_txn.add(producer_id, group, added)

        code, _ = await self.append_batch(group, records, producer_id=producer_id, producer_epoch=producer_epoch, on_appended=appended)
        if code != NONE and added:  # not replicated: taken back, as Kafka 4 reverts a failed write
            self.pending_txn.revert(producer_id, group, added, previous)
        return code

    def txn_completed(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
        """The marker hook (Kafka's ``handleTxnCompletion``): a COMMIT
        (``committed``) or ABORT marker of ``producer_id`` is replicated on
        ``topic``-``partition``; for an offsets partition this broker
        loaded, that producer's pending offsets of its groups become
        committed offsets or are dropped.

        Args:
            topic: The marker's topic.
            partition: Its partition.
            producer_id: The producer whose transaction ended.
            committed: COMMIT (True) or ABORT (False).
        """
        if topic != OFFSETS_TOPIC:
            return
        if partition in self.loading:
            self._deferred_markers.setdefault(partition, []).append((producer_id, committed))
        elif partition in self.loaded:
            self._complete_txn(partition, producer_id, committed)

    def _complete_txn(self, partition: int, producer_id: int, committed: bool) -> None:
        done = self.pending_txn.complete(producer_id, lambda g: self.partition_for(g) == partition)
        for group_id, offsets in done.items():
            if committed:
                apply_committed(self.offsets.setdefault(group_id, {}), self.positions.setdefault(group_id, {}), offsets)
                self.groups.setdefault(group_id, Group(group_id, EMPTY))
            log.info(
                "group %r: %d transactional offset(s) of producer %d %s",
                group_id, len(offsets), producer_id, "committed" if committed else "aborted",
            )

    async def store_group(self, group: Group) -> int:
        """Write ``group``'s metadata record (its current generation)."""
        return await self.append(group.group_id, [(encode_group_key(group.group_id), encode_group_value(group.to_record()))])

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> int:
        """Tombstone ``group_id``'s offsets of ``partitions`` and forget
        them (OffsetDelete, KIP-496), the transactions' pending ones too
        (Kafka 4's ``OffsetMetadataManager.deleteOffsets``); the group
        stays."""
        if not partitions:
            return NONE
        code = await self.append(group_id, [(encode_offset_key(group_id, t, p), None) for t, p in partitions])
        if code == NONE:
            committed = self.offsets.get(group_id, {})
            for tp in partitions:
                committed.pop(tp, None)
            self.pending_txn.remove(group_id, partitions)
        return code

    async def delete_group(self, group_id: str) -> int:
        """Tombstone ``group_id``'s metadata and offsets, committed or
        pending in a transaction (Kafka 4's ``deleteAllOffsets``), and
        forget them."""
        committed = self.offsets.get(group_id, {})
        pending = self.pending_txn.partitions(group_id)
        records: list[tuple[bytes, bytes | None]] = [(encode_offset_key(group_id, t, p), None) for t, p in sorted(set(committed) | pending)]
        records.append((encode_group_key(group_id), None))
        code = await self.append(group_id, records)
        if code == NONE:
            self.offsets.pop(group_id, None)
            self.groups.pop(group_id, None)
            self.pending_txn.remove(group_id, pending)
        return code

    # ------------------------------------------------------------ expiry

    async def _expire_periodically(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000.0
        while True:
            await trio.sleep(interval)
            try:
                await self.expire_offsets(self.clock())
            except Exception:
                log.exception("offset expiry failed")

    def _has_members(self, group_id: str, group: Group | None) -> bool:
        """Whether ``group_id`` has members (classic ones in ``group``, or
        elsewhere as `in_use` says): its offsets do not expire."""
        return (group is not None and bool(group.members)) or any(check(group_id) for check in self.in_use)

    async def expire_offsets(self, now: int) -> int:
        """Delete the expired offsets (see the module docstring); returns
        how many were deleted."""
        retention = self.config.offsets_retention_minutes * 60_000
        removed = 0
        for group_id, committed in list(self.offsets.items()):
            if self.status(group_id) != NONE:
                continue
            group = self.groups.get(group_id)
            if self._has_members(group_id, group):
                continue
            pending = self.pending_txn.partitions(group_id)
            expired = [
                tp
                for tp, v in committed.items()
                if tp not in pending  # Kafka 4 keeps it while a transaction has one pending
                and ((v.expire_timestamp >= 0 and now >= v.expire_timestamp) or (v.expire_timestamp < 0 and now - v.commit_timestamp >= retention))
            ]
            if not expired:
                continue
            records: list[tuple[bytes, bytes | None]] = [(encode_offset_key(group_id, t, p), None) for t, p in expired]
            keep_group = bool(pending)  # ongoing transactions with offsets of the group: it stays
            if len(expired) == len(committed) and (group is None or not group.members) and not keep_group:
                records.append((encode_group_key(group_id), None))
            code = await self.append(group_id, records)
            if code != NONE:
                continue
            for tp in expired:
                committed.pop(tp, None)
            removed += len(expired)
            log.info("group %r: %d expired offset(s) deleted", group_id, len(expired))
            if not committed:
                self.offsets.pop(group_id, None)
                if group is not None and not group.members and not keep_group:
                    self.groups.pop(group_id, None)
        return removed


__all__ = ["LOAD_CHUNK_BYTES", "GroupMetadataManager"]
