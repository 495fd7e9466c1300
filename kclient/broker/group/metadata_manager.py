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
  (tombstone) deletes;
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
  deleted with tombstones (KIP-211).

Trio-thread only; log reads while loading run in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import trio

from kclient.broker.group.membership import EMPTY, Group
from kclient.broker.group.records import (
    OFFSETS_TOPIC,
    GroupKey,
    GroupRecord,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
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
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    BrokerResponseError,
    ProtocolError,
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

log = logging.getLogger("kclient.broker.group")

#: Bytes read per step while loading a partition.
LOAD_CHUNK_BYTES = 1 << 20

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
        #: Partition index -> the `Partition` being loaded / loaded here.
        self.loading: dict[int, Partition] = {}
        self.loaded: dict[int, Partition] = {}
        self.on_unload: list[Callable[[Group], None]] = []
        self.on_load: list[Callable[[int, list[tuple[bytes, bytes | None]]], None]] = []
        self.in_use: list[Callable[[str], bool]] = []
        self._nursery: trio.Nursery | None = None
        self._creating = False
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
        if self.metadata_cache.has_topic(OFFSETS_TOPIC):
            return NONE
        if self._creating:
            return COORDINATOR_NOT_AVAILABLE
        self._creating = True
        try:
            live = await self.topic_admin.live_brokers()
            rf = self.config.offsets_topic_replication_factor
            if len(live) < rf:
                log.warning(
                    "creating %s with replication factor %d: only %d live broker(s) (offsets.topic.replication.factor=%d)",
                    OFFSETS_TOPIC, max(1, len(live)), len(live), rf,
                )
                rf = max(1, len(live))
            code, message = await self.topic_admin.create(OFFSETS_TOPIC, self.num_partitions, rf, self.topic_configs())
        finally:
            self._creating = False
        if code == TOPIC_ALREADY_EXISTS or (code == NONE and self.topic_admin.zk is not None):
            return NONE if self.metadata_cache.has_topic(OFFSETS_TOPIC) else COORDINATOR_NOT_AVAILABLE
        if code != NONE:
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, message)
            return COORDINATOR_NOT_AVAILABLE
        log.info("created %s with %d partition(s), replication factor %d", OFFSETS_TOPIC, self.num_partitions, rf)
        return NONE

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
        self.loaded.pop(index, None)
        for group_id in [g for g in set(self.groups) | set(self.offsets) if self.partition_for(g) == index]:
            self.offsets.pop(group_id, None)
            group = self.groups.pop(group_id, None)
            if group is not None:
                for callback in self.on_unload:
                    callback(group)

    async def _load(self, part: Partition, leadership: int) -> None:
        index = part.partition
        try:
            groups, offsets, others = await trio.to_thread.run_sync(_read_partition, part)
        except Exception:
            log.exception("%s-%d: loading failed", OFFSETS_TOPIC, index)
            self.loading.pop(index, None)
            return
        if self.loading.get(index) is not part or part.leadership != leadership or not part.is_leader:
            return  # resigned (or re-elected) meanwhile
        now = trio.current_time()
        for group_id, record in groups.items():
            self.groups[group_id] = Group.from_record(group_id, record, now)
        for group_id, committed in offsets.items():
            if committed:
                self.offsets[group_id] = committed
                self.groups.setdefault(group_id, Group(group_id, EMPTY))
        del self.loading[index]
        self.loaded[index] = part
        for callback in self.on_load:
            callback(index, others)
        log.info(
            "%s-%d: loaded %d group(s), %d committed offset(s)",
            OFFSETS_TOPIC, index, len(groups), sum(len(c) for c in offsets.values()),
        )

    # ------------------------------------------------------------ appends

    async def append(self, group: str, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Append ``records`` (key, value) to ``group``'s partition and wait
        until they are replicated.

        Returns:
            NONE, or the error for the group request (NOT_COORDINATOR,
                COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT, ...).
        """
        index = self.partition_for(group)
        part = self.loaded.get(index)
        if part is None or not part.is_leader:
            return NOT_COORDINATOR
        now = self.clock()
        batch = build_batch([(key, value, now, ()) for key, value in records])
        try:
            part.check_leader()
            part.check_min_isr(-1)
            result = part.log.append(batch, now_ms=now, leader_epoch=part.leader_epoch)
        except BrokerResponseError as exc:
            log.info("%s-%d: append for group %r refused: %s", OFFSETS_TOPIC, index, group, exc)
            code = exc.code if exc.code is not None else UNKNOWN_SERVER_ERROR
            return _APPEND_ERRORS.get(code, code)
        except Exception:
            log.exception("%s-%d: append for group %r failed", OFFSETS_TOPIC, index, group)
            return UNKNOWN_SERVER_ERROR
        part.after_leader_append()
        required = result.base_offset + len(records)
        deadline = trio.current_time() + self.config.offsets_commit_timeout_ms / 1000.0
        code = await part.wait_for_replication(required, deadline)
        if code != NONE:
            log.info("%s-%d: records for group %r not replicated: error %d", OFFSETS_TOPIC, index, group, code)
            return _APPEND_ERRORS.get(code, code)
        if self.loaded.get(index) is not part:
            return NOT_COORDINATOR
        return NONE

    async def store_offsets(self, group: str, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> int:
        """Commit ``offsets`` of ``group``; the cache changes once they are
        replicated. Returns the error code for every partition."""
        if not offsets:
            return NONE
        records = [(encode_offset_key(group, t, p), encode_offset_value(v)) for (t, p), v in offsets.items()]
        code = await self.append(group, records)
        if code == NONE:
            self.offsets.setdefault(group, {}).update(offsets)
        return code

    async def store_group(self, group: Group) -> int:
        """Write ``group``'s metadata record (its current generation)."""
        return await self.append(group.group_id, [(encode_group_key(group.group_id), encode_group_value(group.to_record()))])

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> int:
        """Tombstone ``group_id``'s committed offsets of ``partitions`` and
        forget them (OffsetDelete, KIP-496); the group stays."""
        if not partitions:
            return NONE
        code = await self.append(group_id, [(encode_offset_key(group_id, t, p), None) for t, p in partitions])
        if code == NONE:
            committed = self.offsets.get(group_id, {})
            for tp in partitions:
                committed.pop(tp, None)
        return code

    async def delete_group(self, group_id: str) -> int:
        """Tombstone ``group_id``'s metadata and offsets and forget them."""
        committed = self.offsets.get(group_id, {})
        records: list[tuple[bytes, bytes | None]] = [(encode_offset_key(group_id, t, p), None) for t, p in committed]
        records.append((encode_group_key(group_id), None))
        code = await self.append(group_id, records)
        if code == NONE:
            self.offsets.pop(group_id, None)
            self.groups.pop(group_id, None)
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
            expired = [
                tp
                for tp, v in committed.items()
                if (v.expire_timestamp >= 0 and now >= v.expire_timestamp)
                or (v.expire_timestamp < 0 and now - v.commit_timestamp >= retention)
            ]
            if not expired:
                continue
            records: list[tuple[bytes, bytes | None]] = [(encode_offset_key(group_id, t, p), None) for t, p in expired]
            if len(expired) == len(committed) and (group is None or not group.members):
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
                if group is not None and not group.members:
                    self.groups.pop(group_id, None)
        return removed


def _read_partition(
    part: Partition,
) -> tuple[dict[str, GroupRecord], dict[str, dict[tuple[str, int], OffsetAndMetadata]], list[tuple[bytes, bytes | None]]]:
    """Read an offsets partition from its log start to its log end (worker
    thread): ``({group: GroupRecord}, {group: {(topic, partition): OffsetAndMetadata}},
    [(key, value)] of the key versions from 3 on)`` (the last: the consumer
    group protocol's records, read by its coordinator)."""
    plog = part.log
    groups: dict[str, GroupRecord] = {}
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
    others: list[tuple[bytes, bytes | None]] = []
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        data = plog.read(offset, LOAD_CHUNK_BYTES, min_one_batch=True).records
        infos = list(scan_batches(data))
        if not infos:
            break
        complete = memoryview(data)[: infos[-1].position + infos[-1].size]
        for rec in iter_record_set(complete):
            if rec.offset < offset or rec.key is None:
                continue
            if len(rec.key) >= 2 and int.from_bytes(bytes(rec.key[:2]), "big", signed=True) >= 3:
                others.append((bytes(rec.key), None if rec.value is None else bytes(rec.value)))
                continue
            try:
                key = decode_key(bytes(rec.key))
                if isinstance(key, OffsetKey):
                    tp = (key.topic, key.partition)
                    if rec.value is None:
                        offsets.get(key.group, {}).pop(tp, None)
                    else:
                        offsets.setdefault(key.group, {})[tp] = decode_offset_value(bytes(rec.value))
                elif isinstance(key, GroupKey):
                    if rec.value is None:
                        groups.pop(key.group, None)
                    else:
                        groups[key.group] = decode_group_value(bytes(rec.value))
            except (ProtocolError, ValueError, UnicodeDecodeError) as exc:  # unreadable: skip it, as Kafka warns and goes on
                log.warning("%s-%d: unreadable record at offset %d: %s", OFFSETS_TOPIC, part.partition, rec.offset, exc)
        offset = max(offset, infos[-1].next_offset)
    return groups, offsets, others


__all__ = ["LOAD_CHUNK_BYTES", "GroupMetadataManager"]
