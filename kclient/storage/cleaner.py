"""Log compaction: the log cleaner (Kafka's ``LogCleaner`` / ``Cleaner`` /
``LogCleanerManager``).

Kafka documentation, "Log Compaction" (https://kafka.apache.org/documentation/#compaction):
a log whose ``cleanup.policy`` holds ``compact`` keeps at least the last
record of each key. The log has a *clean* head (already compacted, below
the *first dirty offset* kept per partition in the log dir's
``cleaner-offset-checkpoint``) and a *dirty* tail. One cleaning
(`clean_log`):

1. picks the dirty segments: from the first dirty offset up to the first
   uncleanable offset, the lowest of the active segment's base offset (the
   active segment is never cleaned), the last stable offset (below the high
   watermark, no undecided transaction: KIP-98) and the base of the
   first segment holding records newer than ``min.compaction.lag.ms``; it
   cleans only when dirty bytes / (clean + dirty bytes) exceeds
   ``min.cleanable.dirty.ratio``;
2. builds an `kclient.storage.offset_map.OffsetMap` (key -> offset of its
   last record) over those segments, whole segments only, as far as the
   map holds;
3. rewrites every segment below the end of the mapped range, in groups whose
   total size fits ``segment.bytes`` (small cleaned segments are merged),
   keeping a record unless the map holds a later offset for its key. A
   tombstone (null value) that was already cleaned once (it lies below the
   previous first dirty offset) is dropped once its segment's newest record
   is older than ``delete.retention.ms``. Records keep their offsets and
   order (`kclient.storage.batch_filter`); a batch left empty is dropped
   unless it is the last batch of an idempotent producer still known to the
   log (KIP-98). Records without a key are dropped, as Kafka's cleaner
   does (Produce refuses them on a compacted topic). Committed
   transactional records are compacted like the others; control batches
   and the batches of aborted transactions (the segments' ``.txnindex``,
   KIP-98) are not mapped, and the latter are removed (an empty batch stays
   for a producer's last one). A COMMIT / ABORT marker stays while a batch
   of its transaction is in the log; once a round finds none, it gets a
   delete horizon (that round's time plus ``delete.retention.ms``, stored
   in the batch as KIP-534's ``deleteHorizonMs``) and the first round at or
   after the horizon drops it; an aborted transaction stays in the cleaned
   segment's ``.txnindex`` while its data does
   (`kclient.storage.cleaner_txn`, Kafka's ``CleanedTransactionMetadata``);
4. each group is written as ``<base>.log.cleaned`` (with its indexes) and
   fsync-ed, renamed to ``.swap`` (the commit point), then swapped in by
   `kclient.storage.Log.replace_segments`; a crash anywhere in between is
   settled when the log is next opened (`kclient.storage.swap`);
5. the new first dirty offset (the end of the mapped range) is written to
   the checkpoint by the caller (`LogCleaner`).

`LogCleaner` runs that for every compacted log of a `LogManager`; the
broker calls `LogCleaner.clean_all` from a background task every
``log.cleaner.backoff.ms`` when ``log.cleaner.enable`` is true. A group
coordinator keeping ``__consumer_offsets`` compacted only needs that topic
to have ``cleanup.policy=compact``: the same task cleans it; tests and
tools may call `clean_log` (one log) or `LogCleaner.clean_all` directly.

Plain blocking file I/O; run it in a worker thread.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import attrs

from kclient.clock import now_ms as wall_clock_ms
from kclient.errors import CorruptRecordError
from kclient.protocol.records.control import control_type_of
from kclient.protocol.records.scan import BatchInfo
from kclient.protocol.records.v2 import BatchHeader, decode_records, read_header
from kclient.storage.batch_filter import Filtered, KeepRecord, filter_legacy, filter_v2, stamp_delete_horizon
from kclient.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, CheckpointError, read_checkpoint, write_checkpoint
from kclient.storage.cleaner_txn import CleanedTxnMetadata
from kclient.storage.log_files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX, file_stem, fsync_dir
from kclient.storage.offset_map import DEFAULT_DEDUPE_BUFFER_SIZE, OffsetMap
from kclient.storage.segment import LogSegment
from kclient.storage.swap import CLEANED_SUFFIX, SCRATCH_DIR, SWAP_SUFFIX
from kclient.storage.txn_log import log_aborted_txns

if TYPE_CHECKING:
    from kclient.storage.log import Log

logger = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1
_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX)

#: ``hook(stage)`` called at ``"cleaned"`` (a group's ``.cleaned`` files are
#: written) and ``"swap"`` (renamed to ``.swap``, not swapped in yet); tests
#: raise there to leave the files a crash would leave.
StageHook = Callable[[str], None]


@attrs.frozen
class Cleanable:
    """The cleanable part of a log at one moment.

    Attributes:
        first_dirty_offset: Where the dirty section starts.
        first_uncleanable_offset: Where cleaning must stop (see the module
            docstring).
        clean_bytes: Bytes of the segments below the first dirty offset.
        dirty_segments: The whole segments of the dirty section, oldest first.
    """

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_segments: tuple[LogSegment, ...]

    @property
    def dirty_bytes(self) -> int:
        """Bytes of the dirty segments."""
        return sum(s.size for s in self.dirty_segments)

    @property
    def dirty_ratio(self) -> float:
        """Dirty bytes over clean plus dirty bytes (0 for an empty log)."""
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@attrs.frozen
class CleanResult:
    """What one `clean_log` did.

    Attributes:
        first_dirty_offset: The dirty section's start before cleaning.
        end_offset: The new first dirty offset (the end of the mapped range).
        segments_read: Segments rewritten.
        segments_written: Cleaned segments swapped in.
        bytes_read: Bytes of the rewritten segments.
        bytes_written: Bytes of the cleaned segments.
        records_read: Records in the rewritten segments.
        records_removed: Records dropped (superseded, expired tombstones,
            null keys).
        tombstones_removed: Tombstones among them dropped for being older
            than ``delete.retention.ms``.
        markers_removed: Transaction markers dropped (their transaction
            had no batch left and their delete horizon passed).
    """

    first_dirty_offset: int
    end_offset: int
    segments_read: int
    segments_written: int
    bytes_read: int
    bytes_written: int
    records_read: int
    records_removed: int
    tombstones_removed: int
    markers_removed: int = 0


def cleanable(log: Log, first_dirty_offset: int | None, now_ms: int) -> Cleanable:
    """Find the clean and dirty sections of ``log`` (module docstring, step 1).

    Args:
        log: A log.
        first_dirty_offset: From the checkpoint; ``None`` or out of the
            log's range means the log start offset (never cleaned).
        now_ms: The time, for ``min.compaction.lag.ms``.

    Returns:
        The `Cleanable` view.
    """
    segs = log.segments
    start, end = log.log_start_offset, log.log_end_offset
    first_dirty = first_dirty_offset if first_dirty_offset is not None and start <= first_dirty_offset <= end else start
    uncleanable = min(segs[-1].base_offset, log.last_stable_offset)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for seg in segs[:-1]:
            if seg.next_offset > first_dirty and now_ms - seg.largest_timestamp < lag:
                uncleanable = min(uncleanable, seg.base_offset)
                break
    clean_bytes = 0
    dirty: list[LogSegment] = []
    for i, seg in enumerate(segs[:-1]):
        following = segs[i + 1].base_offset
        if following <= first_dirty:
            clean_bytes += seg.size
        elif seg.base_offset >= first_dirty and following <= uncleanable:
            dirty.append(seg)
        elif seg.base_offset < first_dirty:
            clean_bytes += seg.size  # a checkpoint inside a segment: count it clean
        else:
            break
    return Cleanable(first_dirty, uncleanable, clean_bytes, tuple(dirty))


def _segment_batches(seg: LogSegment) -> Iterator[tuple[BatchInfo, bytes]]:
    """``(info, batch bytes)`` for each batch of an inactive segment
    (holding a reference; ``ValueError`` if it was deleted meanwhile)."""
    with seg.reference():
        for info in seg.iter_batches(0):
            yield info, seg.read(info.position, info.size)


def _drop(offset: int, key: bytes | None, value: bytes | None) -> bool:
    """`KeepRecord` of an aborted batch: no record stays."""
    return False


def _build_offset_map(dirty: Sequence[LogSegment], offset_map: OffsetMap, txns: CleanedTxnMetadata) -> int:
    """Map the keys of ``dirty``, whole segments only, while the map has
    room; returns how many segments were mapped (at least one). Control
    batches and the batches of aborted transactions (``txns``) are not
    mapped (Kafka's ``buildOffsetMapForSegment``)."""
    mapped = 0
    for seg in dirty:
        keys: list[tuple[bytes, int]] = []
        for info, batch in _segment_batches(seg):
            if info.magic == 2:
                header = read_header(batch)
                if header.is_control:
                    txns.on_control_batch_read(header.producer_id, header.last_offset, _control_type(batch, header), header.records_count)
                    continue
                if txns.on_batch_read(header.producer_id, header.is_transactional, header.last_offset):
                    continue
                for offset, _ts, key, _value, _headers in decode_records(batch, check_crc=False):
                    if key is not None:
                        keys.append((key, offset))
            else:
                from kclient.protocol.records.legacy import iter_entry_records

                for rec in iter_entry_records(batch, check_crc=False):
                    if rec.key is not None:
                        keys.append((rec.key, rec.offset))
        if mapped and len(offset_map) + len({OffsetMap.digest(k) for k, _ in keys}) > offset_map.capacity:
            break  # this segment would not fit: leave it for the next round
        for key, offset in keys:
            offset_map.put(key, offset)
        mapped += 1
        if offset_map.full:
            break
    return mapped


def _group_by_size(segments: Sequence[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments whose total size stays within ``max_bytes`` and
    whose offsets fit one segment (Kafka's ``groupSegmentsBySize``)."""
    groups: list[list[LogSegment]] = []
    for seg in segments:
        group = groups[-1] if groups else None
        if (
            group is not None
            and sum(s.size for s in group) + seg.size <= max_bytes
            and seg.next_offset - 1 - group[0].base_offset <= _INT32_MAX
        ):
            group.append(seg)
        else:
            groups.append([seg])
    return groups


class _Counts:
    def __init__(self) -> None:
        self.read = 0
        self.removed = 0
        self.tombstones = 0
        self.markers = 0


def _control_type(batch: bytes, header: BatchHeader) -> int | None:
    """A control batch's type (COMMIT / ABORT), None when it holds no record."""
    return control_type_of(batch, 0, header) if header.records_count else None


def _clean_marker(batch: bytes, header: BatchHeader, txns: CleanedTxnMetadata, now_ms: int, retention_ms: int, counts: _Counts) -> Filtered:
    """A control batch in a cleaning round (Kafka's ``Cleaner.cleanInto``
    with KIP-534's delete horizon): kept while its transaction has batches
    in the log; once it has none, stamped with a delete horizon of
    ``now_ms + retention_ms`` (``delete.retention.ms``) the first time and
    dropped by a round at or after that horizon. An empty control batch is
    dropped."""
    n = header.records_count
    if not txns.on_control_batch_read(header.producer_id, header.last_offset, _control_type(batch, header), n):
        return Filtered(batch, n, n)
    horizon = header.delete_horizon_ms
    if n and horizon is None:
        return Filtered(stamp_delete_horizon(batch, now_ms + retention_ms), n, n)
    if n and horizon is not None and horizon > now_ms:
        return Filtered(batch, n, n)
    counts.markers += 1
    return Filtered(None, n, 0)


def _clean_v2(
    batch: bytes, info: BatchInfo, keep: KeepRecord, txns: CleanedTxnMetadata, producer_last: dict[int, int], now_ms: int, retention_ms: int, counts: _Counts
) -> Filtered:
    """One v2 batch in a cleaning round: a marker by `_clean_marker`; the
    records of a data batch of an aborted transaction all go, the others
    are filtered by ``keep``; a batch left empty stays (header only) when it
    is the last batch of a producer the log still knows (KIP-98)."""
    header = read_header(batch)
    if header.is_control:
        return _clean_marker(batch, header, txns, now_ms, retention_ms, counts)
    aborted = header.producer_id >= 0 and txns.on_batch_read(header.producer_id, header.is_transactional, header.last_offset)
    retain_empty = header.producer_id >= 0 and producer_last.get(header.producer_id) == info.last_offset
    return filter_v2(batch, _drop if aborted else keep, retain_empty=retain_empty)


def _keep_latest(offset_map: OffsetMap, drop_tombstones: bool, counts: _Counts) -> KeepRecord:
    """The record filter for one segment: keep a keyed record unless a later
    offset holds its key, and drop tombstones when ``drop_tombstones``
    (counting them in ``counts``)."""

    def keep(offset: int, key: bytes | None, value: bytes | None) -> bool:
        if key is None:
            return False
        if offset < offset_map.get(key):
            return False
        if value is None and drop_tombstones:
            counts.tombstones += 1
            return False
        return True

    return keep


def _clean_group(
    log: Log,
    group: Sequence[LogSegment],
    offset_map: OffsetMap,
    first_dirty: int,
    producer_last: dict[int, int],
    txns: CleanedTxnMetadata,
    now_ms: int,
    counts: _Counts,
    hook: StageHook | None,
) -> LogSegment | None:
    """Write the cleaned copy of ``group`` and swap it in (steps 3-4)."""
    directory = log.directory
    base = group[0].base_offset
    sizes = [s.size for s in group]
    horizon = now_ms - log.config.delete_retention_ms
    scratch = directory / SCRATCH_DIR
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    out = LogSegment.create(scratch, base, log.config.index_interval_bytes, now_ms=now_ms)
    retention = log.config.delete_retention_ms
    try:
        for seg in group:
            drop_tombstones = seg.next_offset <= first_dirty and seg.largest_timestamp < horizon
            keep = _keep_latest(offset_map, drop_tombstones, counts)
            for info, batch in _segment_batches(seg):
                if info.magic == 2:
                    result = _clean_v2(batch, info, keep, txns, producer_last, now_ms, retention, counts)
                else:
                    result = filter_legacy(batch, keep)
                counts.read += result.records
                counts.removed += result.records - result.kept
                if result.data is not None:
                    out.append(result.data, info.base_offset, info.last_offset, now_ms=now_ms)
        for txn in txns.take_retained():  # (the aborted transactions with data left stay indexed, KIP-98)
            out.txn_index.append(txn)
        out.mark_inactive()
        out.flush()
    finally:
        out.close()
    stem = file_stem(base)
    (scratch / (stem + TXN_INDEX_SUFFIX)).touch()  # (created on a first entry only)
    for suffix in _SUFFIXES:
        os.replace(scratch / (stem + suffix), directory / (stem + suffix + CLEANED_SUFFIX))
    shutil.rmtree(scratch, ignore_errors=True)
    fsync_dir(directory)
    if hook is not None:
        hook("cleaned")
    for suffix in _SUFFIXES:
        os.replace(directory / (stem + suffix + CLEANED_SUFFIX), directory / (stem + suffix + SWAP_SUFFIX))
    fsync_dir(directory)
    if hook is not None:
        hook("swap")
    return log.replace_segments(group, sizes, directory / stem)


def clean_log(
    log: Log,
    first_dirty_offset: int | None = None,
    *,
    now_ms: int | None = None,
    force: bool = False,
    offset_map: OffsetMap | None = None,
    hook: StageHook | None = None,
) -> CleanResult | None:
    """Clean one log once (the module docstring's steps 1-4).

    The synchronous entry point: `LogCleaner` calls it for each compacted
    log; tests and tools may call it directly. It does not check the cleanup
    policy and does not write the checkpoint.

    Args:
        log: The log.
        first_dirty_offset: Where the previous cleaning stopped (``None``:
            never cleaned).
        now_ms: The time in ms (default: the wall clock), for
            ``delete.retention.ms`` and ``min.compaction.lag.ms``.
        force: Clean even when the dirty ratio is not above
            ``min.cleanable.dirty.ratio`` (there must still be dirty segments).
        offset_map: The map to fill (default: a 128 MiB one, Kafka's
            ``log.cleaner.dedupe.buffer.size``); cleared first.
        hook: Test hook (see `StageHook`).

    Returns:
        What was done, or ``None`` when there was nothing to clean (or the
            log changed under the cleaner; it retries next time).

    Raises:
        OSError: An I/O failure (the files left are settled on the next
            open of the log).
        kclient.errors.CorruptRecordError: A segment holds damaged records.
    """
    now = wall_clock_ms() if now_ms is None else now_ms
    view = cleanable(log, first_dirty_offset, now)
    if not view.dirty_segments:
        return None
    ratio = view.dirty_ratio
    if not force and ratio <= log.config.min_cleanable_dirty_ratio:
        logger.debug("log %s: dirty ratio %.3f not above %.3f; not cleaning", log.directory, ratio, log.config.min_cleanable_dirty_ratio)
        return None
    if offset_map is None:
        offset_map = OffsetMap.for_buffer_size(DEFAULT_DEDUPE_BUFFER_SIZE)
    offset_map.clear()
    segs = log.segments
    dirty_start = view.dirty_segments[0].base_offset
    dirty_end = segs[segs.index(view.dirty_segments[-1]) + 1].base_offset
    mapped = _build_offset_map(view.dirty_segments, offset_map, CleanedTxnMetadata(log_aborted_txns(segs, dirty_start, dirty_end)))
    last_mapped = view.dirty_segments[mapped - 1]
    end_offset = segs[segs.index(last_mapped) + 1].base_offset
    to_clean = [s for s in segs[:-1] if s.base_offset < end_offset]
    producer_state = log.producer_state
    producer_last = {}
    for pid in producer_state.producer_ids():
        batches = producer_state.batches(pid)
        if batches:
            producer_last[pid] = batches[-1].last_offset
    counts = _Counts()
    groups = _group_by_size(to_clean, log.config.segment_bytes)
    bytes_read = sum(s.size for s in to_clean)
    written = 0
    bytes_written = 0
    logger.info(
        "log %s: cleaning offsets %d..%d (dirty %d..%d, ratio %.3f, %d key(s) mapped) in %d group(s)",
        log.directory,
        log.log_start_offset,
        end_offset - 1,
        view.first_dirty_offset,
        end_offset - 1,
        ratio,
        len(offset_map),
        len(groups),
    )
    txns = CleanedTxnMetadata(log_aborted_txns(segs, log.log_start_offset, end_offset))  # (carried across the groups)
    for group in groups:
        new = _clean_group(log, group, offset_map, view.first_dirty_offset, producer_last, txns, now, counts, hook)
        if new is None:
            return None
        written += 1
        bytes_written += new.size
    result = CleanResult(
        view.first_dirty_offset,
        end_offset,
        len(to_clean),
        written,
        bytes_read,
        bytes_written,
        counts.read,
        counts.removed,
        counts.tombstones,
        counts.markers,
    )
    logger.info(
        "log %s: cleaned %d segment(s) into %d: %d -> %d bytes, %d of %d record(s) removed (%d expired tombstone(s))",
        log.directory,
        result.segments_read,
        result.segments_written,
        result.bytes_read,
        result.bytes_written,
        result.records_removed,
        result.records_read,
        result.tombstones_removed,
    )
    return result


class CleanableLogs(Protocol):
    """What the cleaner needs of the logs it cleans: the part of
    `kclient.storage.LogManager` it uses (Kafka's ``LogCleaner`` is
    likewise handed the logs, not the manager)."""

    def logs(self) -> Mapping[tuple[str, int], Log]:
        """Snapshot ``{(topic, partition): Log}`` of every hosted log."""
        ...

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding ``topic``/``partition``, or ``None``."""
        ...


class LogCleaner:
    """Cleans the compacted logs of a `kclient.storage.LogManager` and keeps
    each log dir's ``cleaner-offset-checkpoint`` (``<topic> <partition>
    <first dirty offset>`` lines, the recovery point checkpoint's format).

    Args:
        manager: The logs to clean (a `kclient.storage.LogManager`, or
            anything with its `CleanableLogs` methods).
        dedupe_buffer_size: ``log.cleaner.dedupe.buffer.size``: the offset
            map's memory budget in bytes.
        clock: ms clock (default: wall clock).
    """

    def __init__(
        self,
        manager: CleanableLogs,
        *,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.manager = manager
        self._clock = clock if clock is not None else wall_clock_ms
        self._map = OffsetMap.for_buffer_size(dedupe_buffer_size)
        self._lock = threading.Lock()

    def checkpoint(self, log_dir: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
        """The first dirty offsets recorded in ``log_dir`` (``{}`` if the
        file is missing or unreadable)."""
        try:
            return read_checkpoint(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT)
        except (CheckpointError, OSError, UnicodeDecodeError) as exc:
            logger.warning("log dir %s: unreadable %s (%s); cleaning from the log starts", log_dir, CLEANER_OFFSET_CHECKPOINT, exc)
            return {}

    def _update_checkpoint(self, log_dir: Path, key: tuple[str, int], offset: int) -> None:
        entries = self.checkpoint(log_dir)
        live = self.manager.logs()
        entries = {k: v for k, v in entries.items() if k in live}
        entries[key] = offset
        write_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, entries)

    def clean_all(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Clean each log whose policy holds ``compact`` and whose dirty
        ratio is high enough (`clean_log`), then record its new first dirty
        offset. The entry of a log is written before its first cleaning, so
        that a restart knows its offsets may have gaps.

        Args:
            now_ms: The time in ms (default: the clock).
            force: Ignore ``min.cleanable.dirty.ratio``.

        Returns:
            How many logs were cleaned.
        """
        now = self._clock() if now_ms is None else now_ms
        cleaned = 0
        with self._lock:
            for key, plog in sorted(self.manager.logs().items()):
                if not plog.config.compact or plog.closed:
                    continue
                log_dir = self.manager.log_dir_of(*key)
                if log_dir is None:
                    continue
                points = self.checkpoint(log_dir)
                first_dirty = points.get(key)
                try:
                    view = cleanable(plog, first_dirty, now)
                    if not view.dirty_segments or (not force and view.dirty_ratio <= plog.config.min_cleanable_dirty_ratio):
                        continue
                    if key not in points:
                        self._update_checkpoint(log_dir, key, view.first_dirty_offset)
                    result = clean_log(plog, first_dirty, now_ms=now, force=force, offset_map=self._map)
                except (OSError, CorruptRecordError, ValueError) as exc:
                    if self.manager.log_dir_of(*key) is None:  # deleted, or its dir went offline (KIP-112)
                        logger.warning("cleaning %s-%d stopped: the log was deleted or its log dir went offline (%s)", *key, exc)
                    else:
                        logger.exception("cleaning %s-%d failed", *key)
                    continue
                if result is not None:
                    self._update_checkpoint(log_dir, key, result.end_offset)
                    cleaned += 1
        return cleaned


__all__ = ["CLEANER_OFFSET_CHECKPOINT", "Cleanable", "CleanableLogs", "CleanResult", "LogCleaner", "StageHook", "clean_log", "cleanable"]
