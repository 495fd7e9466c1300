"""The log of one partition: an ordered list of segments in one directory.

Kafka documentation https://kafka.apache.org/documentation/#log ("Log":
"Writes", "Reads", "Deletes", "Guarantees") and Kafka's ``UnifiedLog``,
split as Kafka split it: `kclient.storage.loader.LogLoader` loads and
recovers the directory, `kclient.storage.local_log.LocalLog` (which `Log`
holds, as ``UnifiedLog`` holds its ``localLog``) keeps the segments and
their offsets (roll, flush, reads), and `Log` adds appends, the
replication state, truncation, retention and close:

* appends go to the last (active) segment, which rolls over to a new file
  named by the next offset when it would grow past ``segment_bytes``, when
  its first batch is older than ``roll_ms`` or when an index is full;
* the log assigns offsets by overwriting each batch's first 8 bytes
  (`kclient.storage.append_info`);
* flush policy: after ``flush_interval_messages`` unflushed messages (M,
  as the "Writes" section calls it) the log and its indexes are fsync-ed;
  `Log.flush_if_due` does the same once the oldest unflushed append is
  ``flush_interval_ms`` old (S). A system crash loses at most M messages
  or S ms of appends;
* reads locate the segment by ``bisect`` over an immutable snapshot of the
  segment list (`kclient.storage.log_segments.LogSegments`, replaced, never
  mutated, so a reader always searches a consistent view while segments
  are rolled or deleted), then the batch by the segment's sparse index;
  `Log.read_slice` returns the byte range for ``os.sendfile`` while holding
  the segment open;
* ListOffsets by timestamp bisects the segments' largest timestamps, then
  uses the segment's time index;
* retention (`kclient.storage.retention`) deletes whole segments, oldest
  first, below the high watermark, the active one too once it holds
  records (a new one is rolled first);
* loading and recovery after an unclean shutdown are the loader's;
* replication (Kafka documentation, "Replication"; KIP-101, KIP-98): a
  follower appends the leader's batches as they are
  (`Log.append_as_follower`) and truncates its log to a batch boundary
  (`Log.truncate_to`) when it diverged; the leader stamps its leader epoch
  into each batch; the high watermark is stored; the leader epoch cache
  (`kclient.storage.leader_epoch`) and the idempotent producer state
  (`kclient.storage.producer_state`) follow every append, truncation and
  retention.

Plain blocking file I/O; writers are serialised by a ``threading.Lock`` so
the broker may call from worker threads. Readers take no lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from kclient.clock import now_ms
from kclient.errors import InvalidTxnStateError, UnexpectedAppendOffsetError
from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.scan import BatchInfo, stamp_partition_leader_epoch
from kclient.storage.append_info import (
    ValidatedBatch,
    analyze_records,
    assign_offsets,
    assign_with_wrappers,
    check_batch,
    check_batches,
    pack_offset,
    placed_batches,
)
from kclient.storage.delegation import Forwarded, constructor, forwarded
from kclient.storage.leader_epoch import LeaderEpochCache
from kclient.storage.loader import LogLoader, replay_producer_state
from kclient.storage.local_log import LocalLog, ReadResult
from kclient.storage.log_config import CLEANUP_POLICIES, LONG_MAX, LogConfig, parse_cleanup_policy
from kclient.storage.producer_state import ProducerBatch, ProducerStateManager
from kclient.storage.retention import segments_to_delete
from kclient.storage.segment import LogSegment
from kclient.storage.txn_index import AbortedTxn
from kclient.storage.txn_log import apply_txn_batch, load_txn_state, log_aborted_txns
from kclient.storage.txn_state import TxnState

logger = logging.getLogger(__name__)


class AppendResult(NamedTuple):
    """Outcome of `Log.append` / `Log.append_as_follower`: the first and
    last offsets assigned, and the LogAppendTime in ms. `Log.append` always
    reports -1: it stores batches as given, and a LogAppendTime topic's
    batches arrive already stamped (`kclient.broker.convert.prepare_append`,
    whose ``log_append_time_ms`` the Produce response carries).

    ``duplicate``: the records were a retried idempotent batch already in
    the log (KIP-98): nothing was written and the offsets are those the
    batch got the first time.

    A tuple (one is made per partition of every Produce request); read-only.
    """

    base_offset: int
    last_offset: int
    log_append_time_ms: int = -1
    duplicate: bool = False


class Log:
    """The log of one partition, stored in ``directory``
    (``<log_dir>/<topic>-<partition>/``).

    ``Log(directory, config)`` (or `open`) loads the directory with
    `kclient.storage.loader.LogLoader` (created if missing; an empty one
    gets a first segment at offset 0): leftovers of a crash settled, every
    ``<20 digits>.log`` segment opened, sorted by base offset.

    Recovery (Kafka documentation, "Log", "Guarantees"; see the loader):
    with ``clean_shutdown`` the segments are trusted; otherwise every
    segment from the one holding ``recovery_point`` (an offset; every offset
    below it was fsync-ed) onwards is validated and cut after its last valid
    batch, or only the last segment when ``recovery_point`` is ``None``.
    `recovery_truncated_bytes` tells how many bytes that removed (also
    logged at WARNING), `recovered_segments` how many segments were
    validated.

    ``clock``: a function returning the time in ms (default: wall clock);
    used for time-based roll and flush when no ``now_ms`` is passed.
    ``offset_gaps`` (default: the config's policy holds ``compact``) lets
    recovery and follower appends accept offsets that skip values, as
    cleaned segments have (Kafka documentation, "Log Compaction"; the
    cleaner is `kclient.storage.cleaner`).

    Replication state (KIP-101, KIP-98): ``high_watermark`` is the
    checkpointed high watermark (``None``: the log end offset); the
    `leader_epoch_cache` and the `producer_state` are those the loader
    rebuilt.

    The segments and their offsets are a `LocalLog`'s, held (as Kafka's
    ``UnifiedLog`` holds its ``localLog``): `directory`, `config`, `name`,
    `segments`, `active_segment`, the offsets (`log_end_offset`,
    `log_start_offset`, `high_watermark`, `recovery_point`), `flush`,
    `roll`, the reads (`read_slice`, `read`, `offsets_before`,
    `offset_for_timestamp`), `update_config` and `replace_segments` are
    its members, documented there.

    Args:
        directory: The partition's directory.
        config: The log config (default: `LogConfig()`).
        recovery_point: Every offset below it was fsync-ed; recovery
            validates from the segment holding it (``None``: the last
            segment only).
        clean_shutdown: The log was closed cleanly: its segments are
            trusted.
        clock: Returns the time in ms (default: the wall clock).
        high_watermark: The checkpointed high watermark (``None``: the log
            end offset).
        offset_gaps: Whether offsets may skip values (default: the
            config's cleanup policy holds ``compact``).

    Errors: `OffsetOutOfRangeError` on reads outside
    ``[log_start_offset, log_end_offset]``; `MessageSizeTooLargeError`,
    `RecordListTooLargeError`, `InvalidRecordError`,
    `CorruptRecordError` on appends; ``OSError`` on I/O failure;
    ``ValueError`` when used after `close`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        recovery_point: int | None = None,
        clean_shutdown: bool = False,
        clock: Callable[[], int] | None = None,
        high_watermark: int | None = None,
        offset_gaps: bool | None = None,
    ) -> None:
        config = config if config is not None else LogConfig()
        clock = clock if clock is not None else now_ms
        path = Path(directory)
        loaded = LogLoader(
            path,
            config,
            recovery_point=recovery_point,
            clean_shutdown=clean_shutdown,
            clock=clock,
            offset_gaps=config.compact if offset_gaps is None else offset_gaps,
        ).load()
        self._clock = clock
        self._producer_state = loaded.producer_state
        self._epoch_cache = loaded.leader_epoch_cache
        # A roll snapshots the producer state up to the new segment (KIP-98):
        # recovery after a crash replays only the batches after the newest.
        self._local = LocalLog(
            path,
            config,
            clock,
            loaded.segments,
            offset_gaps=loaded.offset_gaps,
            dir_dirty=loaded.dir_dirty,
            high_watermark=high_watermark,
            on_roll=loaded.producer_state.take_snapshot,
        )
        # The open transactions and the last stable offset (KIP-98), from
        # the producer state snapshot plus a replay; snapshots save them.
        self._txn_state = TxnState()
        load_txn_state(self._txn_state, loaded.producer_state.loaded_snapshot, self._local.view, self._local.log_start_offset)
        loaded.producer_state.ongoing_txns = self._txn_state.ongoing
        #: Bytes removed by recovery when the log was opened: the truncated
        #: tail of the damaged segment plus every later segment deleted.
        self.recovery_truncated_bytes = loaded.recovery_truncated_bytes
        #: Number of segments validated batch by batch when the log was opened.
        self.recovered_segments = loaded.recovered_segments
        logger.debug("loaded log %s: %d segment(s), offsets %d..%d", path, len(loaded.segments.segments), self.log_start_offset, self.log_end_offset)

    open = constructor(__init__)
    """Load (or create) the log in ``directory``: the constructor, with its
    parameters (``Log.open(directory, config, clock=...)``)."""

    def _reload_producer_state(self) -> None:
        """Rebuild the producer state for the current log end offset from
        the newest snapshot at or below it plus a replay (lock held)."""
        local = self._local
        replay_producer_state(self._producer_state, local.view, local.log_start_offset, local.log_end_offset)
        load_txn_state(self._txn_state, self._producer_state.loaded_snapshot, local.view, local.log_start_offset)

    # ------------------------------------------------------------ the segments and their offsets (`LocalLog`)

    directory = Forwarded[Path]()
    config = Forwarded[LogConfig]()
    name = Forwarded[str]()
    segments = Forwarded[tuple[LogSegment, ...]]()
    active_segment = Forwarded[LogSegment]()
    log_end_offset = Forwarded[int]()
    log_start_offset = Forwarded[int]()
    high_watermark = Forwarded[int]()
    high_watermark_follows_log_end = Forwarded[bool]()
    recovery_point = Forwarded[int]()
    unflushed_messages = Forwarded[int]()
    flush_count = Forwarded[int]()
    offset_gaps = Forwarded[bool]()
    size_bytes = Forwarded[int]()
    closed = Forwarded[bool]()
    update_high_watermark = forwarded(LocalLog.update_high_watermark)
    roll = forwarded(LocalLog.roll)  # the producer state snapshot follows (``on_roll``)
    flush = forwarded(LocalLog.flush)
    flush_if_due = forwarded(LocalLog.flush_if_due)
    read_slice = forwarded(LocalLog.read_slice)
    read = forwarded(LocalLog.read)
    offsets_before = forwarded(LocalLog.offsets_before)
    offset_for_timestamp = forwarded(LocalLog.offset_for_timestamp)
    update_config = forwarded(LocalLog.update_config)
    replace_segments = forwarded(LocalLog.replace_segments)

    def __repr__(self) -> str:
        return f"Log({str(self.directory)!r}, offsets={self.log_start_offset}..{self.log_end_offset})"

    # ------------------------------------------------------------ replication state

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        """The partition's `LeaderEpochCache` (KIP-101): ``(leader epoch,
        start offset)`` entries, persisted in ``leader-epoch-checkpoint``."""
        return self._epoch_cache

    @property
    def latest_epoch(self) -> int:
        """The latest leader epoch in the leader epoch cache, -1 if none."""
        return self._epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The OffsetsForLeaderEpoch answer for ``epoch`` (KIP-101, KIP-279).

        Args:
            epoch: The requested leader epoch.

        Returns:
            ``(leader epoch, end offset)``; see
                `LeaderEpochCache.end_offset_for` (the latest epoch ends at the
                log end offset; ``(-1, -1)`` when unknown).
        """
        local = self._local
        with local.lock:
            return self._epoch_cache.end_offset_for(epoch, local.log_end_offset)

    @property
    def producer_state(self) -> ProducerStateManager:
        """The idempotent producer state (KIP-98). Callers outside the log
        use its queries only: ``last_sequence(producer_id)``,
        ``epoch(producer_id)``, ``batches(producer_id)``,
        ``producer_ids()``."""
        return self._producer_state

    # ------------------------------------------------------------ transactions (KIP-98)

    @property
    def last_stable_offset(self) -> int:
        """The last stable offset: the first offset of the oldest
        transaction not yet decided by a marker below the high watermark,
        else the high watermark (Kafka's ``lastStableOffset``); a
        read_committed fetch reads up to it."""
        local = self._local
        with local.lock:
            high_watermark = local.high_watermark
            self._txn_state.on_high_watermark_updated(high_watermark)
            return self._txn_state.last_stable_offset(high_watermark, local.log_start_offset)

    def ongoing_transactions(self) -> list[tuple[int, int]]:
        """The open transactions as ``(producer_id, first_offset)``, oldest first."""
        with self._local.lock:
            return self._txn_state.ongoing()

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[fetch_offset,
        upper_bound_offset)`` from the segments' ``.txnindex`` files (a
        read_committed fetch's ``aborted_transactions``; Kafka's
        ``collectAbortedTransactions``).

        Args:
            fetch_offset: The first offset fetched.
            upper_bound_offset: The end of the range (exclusive), at most
                the last stable offset.

        Returns:
            The entries, by marker offset.
        """
        return log_aborted_txns(self._local.segments, fetch_offset, upper_bound_offset)

    # ------------------------------------------------------------ append

    def append(
        self,
        records: Buffer,
        now_ms: int | None = None,
        *,
        leader_epoch: int | None = None,
        validate_producer_state: bool = False,
        batches: Sequence[ValidatedBatch] | None = None,
        high_watermark_to_end: bool = False,
    ) -> AppendResult:
        """Assign offsets to ``records`` and append them as the leader; return the offsets.

        The input is copied, never modified: a v2 batch gets base offset =
        log end offset and consumes ``lastOffsetDelta + 1`` offsets; an
        uncompressed v0/v1 entry gets one offset; a compressed v0/v1 wrapper
        gets one offset per inner message and carries the last (a v1
        wrapper's header is rewritten, a v0 set is rebuilt with absolute
        inner offsets). Nothing else is rewritten (the v2 CRC does not
        cover the base offset) except, with ``leader_epoch``, each v2
        batch's ``partitionLeaderEpoch`` (not covered by the CRC either).

        The active segment is rolled first if it is non-empty and the append
        would take it past ``segment_bytes``, its first batch is older than
        ``roll_ms``, or an index is full. After the append, if
        ``flush_interval_messages`` or more messages are unflushed, the log
        is fsync-ed before returning. All-or-nothing per call.

        Every v2 batch with a producer id >= 0 is recorded in the
        `producer_state` (KIP-98). While `high_watermark_follows_log_end`
        the high watermark moves to the new log end offset.

        A Produce request's common case, one non-transactional v2 batch
        handed down with its ``batches``, takes a fused path
        (`LocalLog.append_batch_locked`, `LogSegment.append_batch`) with the
        same effects and errors.

        Args:
            records (bytes | bytearray | memoryview): One or more
                complete batches (v2) or entries (v0/v1), validated by the
                caller.
            now_ms: The append time (default: the log's clock).
            leader_epoch: The leader's epoch (KIP-101): stamped into every v2
                batch and, when above the latest epoch of the
                `leader_epoch_cache`, recorded there as starting at this
                append's first offset. ``None``: batches are stored as given.
            validate_producer_state: Check the sequence numbers of every v2
                batch with a producer id >= 0 against the `producer_state`
                before writing anything (KIP-98). A retried batch already
                written (same producer epoch, first and last sequence as one
                of the producer's last 5 batches) writes nothing and returns
                its original offsets with ``duplicate=True``.
            batches: What validation found of each batch of ``records``
                (`kclient.broker.convert.prepare_append` hands it down, as
                Kafka's ``LogValidator`` result): the log then reads no
                header. ``None``: `analyze_records` reads them once.
            high_watermark_to_end: Also set the high watermark to the new
                log end offset under the same lock, as
                `update_high_watermark` would after the append (the leader
                alone in its ISR: Kafka's ``maybeIncrementLeaderHW`` then
                gives the log end offset).

        Returns:
            The offsets assigned. An empty ``records`` writes nothing and
                returns ``(log_end_offset, log_end_offset - 1)``.

        Raises:
            MessageSizeTooLargeError: One batch is larger than
                ``max_message_bytes``.
            RecordListTooLargeError: The whole set is larger than
                ``segment_bytes``.
            InvalidRecordError: A batch has a negative ``lastOffsetDelta``.
            CorruptRecordError: An impossible header or a partial trailing
                batch.
            InvalidProducerEpochError: (``validate_producer_state``) a
                producer epoch below the known one.
            OutOfOrderSequenceNumberError: (``validate_producer_state``) a
                sequence number that does not follow the producer's last one,
                or a new producer epoch not starting at 0.
            UnknownProducerIdError: (``validate_producer_state``) no state for
                the producer id and the batch does not start at sequence 0.
            OSError: The write failed, or the policy flush failed (the
                records are then appended but not known to be durable).
        """
        if batches is not None and len(batches) == 1 and batches[0].magic == 2 and not batches[0].is_transactional:
            return self._append_batch(records, batches[0], now_ms, leader_epoch, validate_producer_state, high_watermark_to_end)
        buf = bytearray(records)
        local = self._local
        with local.lock:
            local.check_open()
            next_offset = local.log_end_offset
            if not buf:
                return AppendResult(next_offset, next_offset - 1)
            if not batches:
                batches = analyze_records(buf)
            config = local.config
            wrappers = check_batches(batches, len(buf), config.max_message_bytes, config.segment_bytes)
            if validate_producer_state and self._txn_state:
                self._check_txn_writes(batches)
            if validate_producer_state and any(b.producer_id >= 0 for b in batches):
                duplicate = self._producer_state.check(
                    ProducerBatch(b.producer_id, b.producer_epoch, b.base_sequence, b.last_offset_delta)
                    for b in batches
                    if b.magic == 2 and b.is_idempotent
                )
                if duplicate is not None:
                    logger.debug("log %s: duplicate batch, already at offsets %d..%d", self.directory, duplicate.first_offset, duplicate.last_offset)
                    return AppendResult(duplicate.first_offset, duplicate.last_offset, -1, duplicate=True)
            now = self._clock() if now_ms is None else now_ms
            first = next_offset
            if wrappers:
                buf, _ = assign_with_wrappers(buf, batches, next_offset)
                batches = analyze_records(buf)
                placed = placed_batches(batches)
            else:
                placed = assign_offsets(buf, batches, next_offset)
            last = placed[-1].last_offset
            if leader_epoch is not None:
                for b in batches:
                    if b.magic == 2:
                        stamp_partition_leader_epoch(buf, b.position, leader_epoch)
            flush_due = self._write_locked(buf, batches, placed, first, last, now, leader_epoch=leader_epoch, to_end=high_watermark_to_end)
        if flush_due:
            local.flush(now_ms=now)
        return AppendResult(first, last, -1)

    def _append_batch(
        self, records: Buffer, batch: ValidatedBatch, now_ms: int | None, leader_epoch: int | None, validate_producer_state: bool, to_end: bool
    ) -> AppendResult:
        """`append` of a record set of exactly one v2 batch (a Produce
        request's common case), fused: the same checks, producer state,
        offsets, leader epoch, roll, indexes, flush policy and result,
        through `LocalLog.append_batch_locked`, with no per-append list or
        `BatchInfo`."""
        buf = bytearray(records)
        local = self._local
        with local.lock:
            local.check_open()
            first = local.log_end_offset
            if not buf:
                return AppendResult(first, first - 1)
            config = local.config
            check_batch(batch, len(buf), config.max_message_bytes, config.segment_bytes)
            idempotent = batch.producer_id >= 0 and batch.base_sequence >= 0
            if validate_producer_state and self._txn_state and batch.producer_id >= 0:
                self._check_txn_writes((batch,))
            if idempotent:
                producer_batch = ProducerBatch(batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_offset_delta)
                duplicate = self._producer_state.check((producer_batch,)) if validate_producer_state else None
                if duplicate is not None:
                    logger.debug("log %s: duplicate batch, already at offsets %d..%d", self.directory, duplicate.first_offset, duplicate.last_offset)
                    return AppendResult(duplicate.first_offset, duplicate.last_offset, -1, duplicate=True)
            now = self._clock() if now_ms is None else now_ms
            last = first + batch.last_offset_delta
            position = batch.position
            pack_offset(buf, position, first)
            if leader_epoch is not None:
                stamp_partition_leader_epoch(buf, position, leader_epoch)
            flush_due = local.append_batch_locked(buf, first, last, now, batch.max_timestamp, to_end)
            cache = self._epoch_cache
            if leader_epoch is not None and leader_epoch > cache.latest_epoch():
                cache.assign(leader_epoch, first)
            if idempotent:
                self._producer_state.update(producer_batch, first, last)
        if flush_due:
            local.flush(now_ms=now)
        return AppendResult(first, last, -1)

    def _check_txn_writes(self, batches: Sequence[ValidatedBatch]) -> None:
        """A leader append of a non-transactional batch from a producer with
        an open transaction fails before anything is written (Kafka's
        ``InvalidTxnStateException``; lock held)."""
        for b in batches:
            if b.magic == 2 and b.producer_id >= 0 and not b.is_transactional:
                first = self._txn_state.current_txn_first_offset(b.producer_id)
                if first is not None:
                    raise InvalidTxnStateError(
                        f"{self.name}: non-transactional write from producer {b.producer_id}, whose transaction from offset {first} is open"
                    )

    def append_as_follower(self, records: Buffer, now_ms: int | None = None) -> AppendResult:
        """Append batches whose offsets the leader assigned (a follower's
        fetch result), as they are.

        No offset or field is rewritten. The records must start at the log
        end offset and each batch must start right after the previous one
        (with `offset_gaps`, as a compacted leader's batches: at or after).
        The `leader_epoch_cache` records each v2 batch's
        ``partitionLeaderEpoch`` above its latest epoch (KIP-101) and the
        `producer_state` each batch with a producer id >= 0, without
        sequence checks (the leader made them). Roll, indexing and the flush
        policy are those of `append`; the high watermark does not move (the
        follower takes it from the leader with `update_high_watermark`).

        Args:
            records (bytes | bytearray | memoryview): Complete batches with
                their final offsets.
            now_ms: The append time (default: the log's clock).

        Returns:
            The first and last offsets appended; an empty ``records`` gives
                ``(log_end_offset, log_end_offset - 1)``.

        Raises:
            UnexpectedAppendOffsetError: The first batch does not start at
                the log end offset, or a batch does not start right after the
                previous one (nothing is written).
            MessageSizeTooLargeError: As `append`; likewise
                ``RecordListTooLargeError``, ``InvalidRecordError`` and
                ``CorruptRecordError``.
            OSError: The write failed, or the policy flush failed.
        """
        buf = records if isinstance(records, (bytes, bytearray)) else bytes(records)
        local = self._local
        with local.lock:
            local.check_open()
            end = local.log_end_offset
            if not buf:
                return AppendResult(end, end - 1)
            batches = analyze_records(buf)
            check_batches(batches, len(buf), local.config.max_message_bytes, local.config.segment_bytes)
            self._check_follower_offsets(batches, end)
            now = self._clock() if now_ms is None else now_ms
            last = batches[-1].last_offset
            first = end if batches[0].is_wrapper else batches[0].base_offset
            flush_due = self._write_locked(buf, batches, placed_batches(batches), first, last, now, epochs_from_batches=True)
        if flush_due:
            local.flush(now_ms=now)
        return AppendResult(first, last, -1)

    def _check_follower_offsets(self, batches: Sequence[ValidatedBatch], end: int) -> None:
        """Each batch of a follower append starts at the log end offset,
        then right after the previous one (at or after it with
        `offset_gaps`); a compressed v0/v1 wrapper, which carries its last
        inner offset only, ends at or after that."""
        expected = end
        for b in batches:
            if b.is_wrapper:
                ok = b.last_offset >= expected
            elif self._local.offset_gaps:
                ok = b.base_offset >= expected  # a compacted leader's log skips offsets
            else:
                ok = b.base_offset == expected
            if not ok:
                where = "the log end offset" if expected == end else "the end of the previous batch"
                raise UnexpectedAppendOffsetError(
                    f"{self.name}: batch at byte {b.position} starts at offset {b.base_offset}, "
                    f"expected {expected} ({where}); nothing appended",
                    first_offset=batches[0].base_offset,
                    expected_offset=expected,
                )
            expected = b.last_offset + 1

    def _write_locked(
        self,
        buf: Buffer,
        batches: Sequence[ValidatedBatch],
        placed: list[BatchInfo],
        first: int,
        last: int,
        now: int,
        *,
        leader_epoch: int | None = None,
        epochs_from_batches: bool = False,
        to_end: bool = False,
    ) -> bool:
        """Write batches carrying offsets ``first``..``last`` at the log end
        (lock held; ``placed``: the batches with their final offsets) with
        `LocalLog.append_locked` (a leader append moves the high watermark
        there), then record the leader epoch (``leader_epoch`` for a leader
        append, or each batch's own ``partitionLeaderEpoch`` with
        ``epochs_from_batches`` for a follower append) and the producer
        state (``to_end``: `append`'s ``high_watermark_to_end``). Returns
        whether the message-count flush policy is due."""
        flush_due = self._local.append_locked(
            buf, first, last, now, placed, move_high_watermark=not epochs_from_batches, high_watermark_to_end=to_end
        )
        cache = self._epoch_cache
        if leader_epoch is not None and leader_epoch > cache.latest_epoch():
            cache.assign(leader_epoch, first)
        if not epochs_from_batches and all(b.producer_id < 0 for b in batches):
            return flush_due  # (a leader append of no idempotent batch: nothing more to record)
        segment = self._local.active_segment
        completed = False
        for b, info in zip(batches, placed):
            if b.magic != 2:
                continue
            if b.producer_id >= 0 and (b.is_transactional or self._txn_state):  # (a marker is transactional too)
                try:
                    completed |= apply_txn_batch(self._txn_state, segment, buf, info.position).completed is not None
                except InvalidTxnStateError as exc:  # (a leader checks before writing: `_check_txn_writes`)
                    logger.warning("log %s: %s", self.directory, exc)
            if epochs_from_batches and b.partition_leader_epoch > cache.latest_epoch():
                cache.assign(b.partition_leader_epoch, info.base_offset)
            if b.is_idempotent:
                self._producer_state.update(
                    ProducerBatch(b.producer_id, b.producer_epoch, b.base_sequence, b.last_offset_delta), info.base_offset, info.last_offset
                )
        if completed:  # (completed transactions the high watermark passed are forgotten: the state stays small)
            self._txn_state.on_high_watermark_updated(self._local.high_watermark)
        return flush_due

    # ------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> int:
        """Remove every record at or above ``offset`` (a follower whose log
        diverged from the leader's; Kafka's ``truncateTo``, KIP-101).

        The cut falls on a batch boundary: a batch holding ``offset`` is
        removed whole, so the new log end offset may be below ``offset``.
        Later segments are deleted, the segment holding the cut becomes the
        active one (its ``.log`` file truncated and fsync-ed, its indexes
        cut); the recovery point and the high watermark are lowered to the
        new log end offset, the leader epoch cache loses the epochs starting
        at or after it, producer snapshots above it are deleted and the
        producer state is rebuilt. Readers holding a `FileSlice` of a
        deleted segment keep their bytes. An ``offset`` below the log start
        offset empties the log (`truncate_fully_and_start_at`).

        Args:
            offset: The first offset to remove.

        Returns:
            The new log end offset (unchanged when ``offset >=
                log_end_offset``).

        Raises:
            ValueError: The log is closed, or ``offset`` is negative.
            OSError: An I/O failure.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to negative offset {offset}")
        local = self._local
        with local.lock:
            local.check_open()
            old_end = local.log_end_offset
            if offset >= old_end:
                return old_end
            if offset < local.log_start_offset:
                self._truncate_fully_locked(offset)
                return local.log_end_offset
            removed, deleted = local.truncate_segments_locked(offset)
            end = local.log_end_offset
            self._epoch_cache.truncate_from_end(end)
            self._reload_producer_state()
            local.sync_dir_locked()
            logger.warning(
                "log %s: truncated to offset %d (asked %d): removed offsets %d..%d, %d bytes, %d segment(s) deleted",
                local.directory,
                end,
                offset,
                end,
                old_end - 1,
                removed,
                deleted,
            )
            return end

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset`` (a
        follower whose log end offset is below the leader's log start
        offset; Kafka's ``truncateFullyAndStartAt``).

        The log start offset, log end offset, recovery point and high
        watermark all become ``offset``; the leader epoch cache is emptied;
        every producer snapshot is deleted and the producer state cleared.

        Args:
            offset: The new log start offset.

        Raises:
            ValueError: The log is closed, or ``offset`` is negative.
            OSError: An I/O failure.
        """
        if offset < 0:
            raise ValueError(f"cannot start {self.name} at negative offset {offset}")
        with self._local.lock:
            self._local.check_open()
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        count = self._local.replace_all_segments_locked(offset)
        self._epoch_cache.clear()
        self._txn_state.reset()
        self._producer_state.delete_all_snapshots()
        self._local.sync_dir_locked(force=True)
        logger.warning("log %s: deleted all %d segment(s); the log now starts at offset %d", self.directory, count, offset)

    # ------------------------------------------------------------ deletion

    def _delete_prefix(self, n: int, reason: str) -> None:
        """`LocalLog.delete_prefix_locked`, then the epoch cache and the
        producer snapshots follow the new log start offset (lock held)."""
        self._local.delete_prefix_locked(n, reason)
        start = self._local.log_start_offset
        self._epoch_cache.truncate_from_start(start)
        self._producer_state.delete_snapshots_below(start)
        self._txn_state.on_log_start_offset_incremented(start)

    def delete_old_segments(self, should_delete: Callable[[LogSegment], bool]) -> int:
        """Delete segments from the oldest while ``should_delete(segment)`` is true.

        The active segment is never deleted. As in Kafka's "Deletes", whole
        segments go, and the segment list is replaced copy-on-write, so
        concurrent reads keep a consistent view. The log start offset becomes
        the base of the oldest remaining segment.

        Args:
            should_delete: Called on each segment, oldest first.

        Returns:
            The number of segments deleted.
        """
        local = self._local
        with local.lock:
            local.check_open()
            segs = local.view.segments
            n = 0
            while n < len(segs) - 1 and should_delete(segs[n]):
                n += 1
            if n:
                self._delete_prefix(n, "delete policy")
            return n

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Retention (``log.retention.ms`` / ``log.retention.bytes``), Kafka's rules.

        Only for a cleanup policy holding ``delete`` (a ``compact``-only log
        keeps every segment; its cleaner removes records instead). Delete
        whole segments, oldest first, while the segment's largest timestamp
        (its file mtime when it has no timestamps) is more than
        ``retention_ms`` before ``now_ms``, or while the log minus that
        segment still holds ``retention_bytes`` or more, and only segments
        wholly below the high watermark. As in Apache Kafka
        (``UnifiedLog.deleteOldSegments``), the active segment is no
        exception once it holds records: when every segment is to go, a new
        empty active segment is rolled at the log end first, so the log
        start offset becomes the log end offset. Otherwise the log start
        offset advances to the oldest remaining segment. Later reads below it
        raise `OffsetOutOfRangeError`. Also rebuilds indexes that readers
        found inconsistent.

        Args:
            now_ms: The time in ms (default: the log's clock).

        Returns:
            The number of segments deleted.
        """
        now = self._clock() if now_ms is None else now_ms
        local = self._local
        cfg = local.config
        with local.lock:
            if local.closed:
                return 0
            segs = local.view.segments
            for seg in segs:
                if seg.index_suspect:
                    seg.rebuild_indexes()
            if not cfg.delete:
                return 0
            end = local.log_end_offset
            n, why = segments_to_delete(segs, end, local.high_watermark, cfg, now)
            if n:
                if n == len(segs):
                    # Every segment goes, the active one too: a log always has
                    # one, so roll an empty one at the log end first.
                    local.roll_locked(end, now, reason="retention deletes every segment")
                self._delete_prefix(n, "retention: " + why)
            return n

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Flush (fsync) and close every segment, after a last producer
        state snapshot and the leader epoch checkpoint if it was never
        written; the recovery point then equals the log end offset. Files
        still used by a `FileSlice` close when it is released. Idempotent."""
        self._local.close(self._flush_state)

    def abandon(self) -> None:
        """Close the log's files without writing anything (no flush, no
        producer snapshot): its log directory failed (KIP-112; Kafka's
        ``LogManager.handleLogDirFailure`` closes the logs of the failed
        directory). Reads and appends then raise ``ValueError``.
        Idempotent."""
        self._local.abandon()

    def _flush_state(self) -> None:
        """The producer snapshot and the epoch checkpoint at close (lock
        held; the directory fsync follows)."""
        self._producer_state.take_snapshot(self._local.log_end_offset)
        if not self._epoch_cache.path.exists():
            self._epoch_cache.flush()


__all__ = [
    "CLEANUP_POLICIES",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "LONG_MAX",
    "MAX_TIMESTAMP",
    "AppendResult",
    "Log",
    "LogConfig",
    "ReadResult",
    "parse_cleanup_policy",
]
