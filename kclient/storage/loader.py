"""Loading a log from disk: `LogLoader`, Kafka's ``LogLoader``.

Apache Kafka split the loading of a partition's log out of ``UnifiedLog``
(KAFKA-12552, ``LogLoader``): it settles what a crash left in the
directory, opens the segments, recovers them after an unclean shutdown,
rebuilds indexes, and rebuilds the producer state and the leader epoch
cache, then hands the result to the log it builds. Here `LogLoader.load`
returns a `LoadedLog`, from which `kclient.storage.log.Log` is constructed:

* leftovers first (Kafka's ``removeTempFilesAndCollectSwapFiles`` /
  ``completeSwapOperations``): a cleaning cut by a crash is settled by
  `kclient.storage.swap.recover_swaps` (``.cleaned`` files are deleted,
  ``.swap`` files replace the segments they cover); ``*.deleted`` and
  ``*.tmp`` files and indexes without their ``.log`` are removed;
* recovery (Kafka documentation https://kafka.apache.org/documentation/#log,
  "Guarantees"): after a clean shutdown the segments are trusted (indexes
  sanity-checked, the last batch of the last segment verified, a failure
  there recovers that segment); otherwise every segment from the one
  holding the recovery point on (only the last one when there is no
  recovery point) is validated batch by batch (`LogSegment.recover`: size,
  offsets, CRC), the first invalid batch truncates its segment and every
  later segment is deleted. A segment that does not start where the
  previous one ends (without offset gaps, which a compacted log has) is
  deleted with every later one. Missing or corrupt indexes are rebuilt;
* replication state (KIP-101, KIP-98): the leader epoch cache is loaded
  from ``leader-epoch-checkpoint`` (rebuilt from the batches'
  ``partitionLeaderEpoch`` when the file is missing) and extended from the
  batches recovery validated; the producer state is loaded from the newest
  ``<offset>.snapshot`` at or below the log end offset plus a replay of the
  batch headers after it (`replay_producer_state`, which the log also uses
  after a truncation).
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from kclient.protocol.records.scan import BatchInfo, ProducerFields
from kclient.storage.leader_epoch import LeaderEpochCache
from kclient.storage.log_config import LogConfig
from kclient.storage.log_files import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX, file_stem, fsync_dir, parse_base_offset
from kclient.storage.log_segments import LogSegments
from kclient.storage.producer_state import ProducerBatch, ProducerStateManager
from kclient.storage.segment import LogSegment
from kclient.storage.swap import recover_swaps

logger = logging.getLogger(__name__)

_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".tmp")  # ".tmp": a checkpoint or snapshot write cut by a crash


@attrs.frozen
class LoadedLog:
    """What `LogLoader.load` found and built (Kafka's ``LoadedLogOffsets``
    plus the state a ``UnifiedLog`` is constructed with).

    Attributes:
        segments: The segments, oldest first; the last is the active one.
        offset_gaps: Whether offsets may skip values (a compacted log, or a
            cleaner ran here).
        dir_dirty: Whether the directory changed and is not fsync-ed yet.
        recovered_segments: Segments validated batch by batch.
        recovery_truncated_bytes: Bytes recovery removed (the damaged tail
            plus every later segment deleted).
        leader_epoch_cache: The leader epoch cache (KIP-101).
        producer_state: The idempotent producer state (KIP-98).
    """

    segments: LogSegments
    offset_gaps: bool
    dir_dirty: bool
    recovered_segments: int
    recovery_truncated_bytes: int
    leader_epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager


def batch_fields_from(view: LogSegments, from_offset: int) -> Iterator[tuple[BatchInfo, ProducerFields | None]]:
    """Batch headers with their v2 leader epoch / producer fields.

    Args:
        view: The log's segments.
        from_offset: Every batch whose last offset is at or above this one
            is walked.

    Yields:
        ``(info, fields)`` in log order; ``fields`` is ``None`` for a v0/v1
        entry.
    """
    for seg in view.segments[view.index_of(from_offset) :]:
        position = 0
        if from_offset > seg.base_offset:
            info = seg.find_batch(from_offset)
            if info is None:
                continue
            position = info.position
        yield from seg.iter_batch_fields(position)


def _producer_batch(info: BatchInfo, fields: ProducerFields) -> ProducerBatch:
    return ProducerBatch(fields.producer_id, fields.producer_epoch, fields.base_sequence, info.last_offset - info.base_offset)


def replay_producer_state(state: ProducerStateManager, view: LogSegments, log_start_offset: int, log_end_offset: int) -> int:
    """Rebuild the producer state for ``log_end_offset`` from the newest
    snapshot at or below it plus a replay of the batch headers after it.

    Args:
        state: The producer state to rebuild.
        view: The log's segments.
        log_start_offset: The log start offset.
        log_end_offset: The log end offset.

    Returns:
        The number of idempotent batches replayed.
    """
    snapshot = state.load_latest_snapshot(log_end_offset)
    start = log_start_offset if snapshot is None else max(snapshot, log_start_offset)
    replayed = 0
    if start < log_end_offset:
        for info, fields in batch_fields_from(view, start):
            if fields is not None and fields.producer_id >= 0 and fields.base_sequence >= 0:
                state.update(_producer_batch(info, fields), info.base_offset, info.last_offset)
                replayed += 1
    return replayed


class LogLoader:
    """Loads (or creates) the log of one partition directory.

    Args:
        directory: The partition directory (created if missing).
        config: The log's configuration.
        recovery_point: Every offset below it was fsync-ed; recovery starts
            at the segment holding it (``None``: only the last segment is
            recovered).
        clean_shutdown: The broker shut down cleanly: the segments are
            trusted (see the module docstring).
        clock: A function returning the time in ms.
        offset_gaps: Whether offsets may skip values between batches (turned
            on when a cleaning cut by a crash is found).
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int | None,
        clean_shutdown: bool,
        clock: Callable[[], int],
        offset_gaps: bool,
    ) -> None:
        self.directory = directory
        self.config = config
        self.recovery_point = recovery_point
        self.clean_shutdown = clean_shutdown
        self.offset_gaps = offset_gaps
        self._clock = clock
        self._dir_dirty = False
        self._recovered: list[LogSegment] = []
        self._truncated = 0

    def load(self) -> LoadedLog:
        """Settle leftovers, open and recover the segments, and load the
        replication state.

        Returns:
            The loaded log.

        Raises:
            OSError: An I/O failure (every segment opened is closed again).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        view = LogSegments(self._load_segments())
        try:
            producer_state = ProducerStateManager(self.directory)
            cache = self._load_replication_state(view, producer_state)
        except BaseException:
            for seg in view.segments:
                seg.close()
            raise
        return LoadedLog(
            view, self.offset_gaps, self._dir_dirty, len(self._recovered), self._truncated, cache, producer_state
        )

    # ------------------------------------------------------------ segments

    def _remove_leftovers(self, bases: set[int]) -> None:
        for name in os.listdir(self.directory):
            path = self.directory / name
            if name.endswith(_LEFTOVER_SUFFIXES):
                logger.info("log %s: removing leftover file %s", self.directory, name)
                path.unlink(missing_ok=True)
                self._dir_dirty = True
            elif name.endswith((INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                base = parse_base_offset(name)
                if base is not None and base not in bases:
                    logger.info("log %s: removing index %s without its log file", self.directory, name)
                    path.unlink(missing_ok=True)
                    self._dir_dirty = True

    def _delete_segment_files(self, base: int) -> int:
        """Remove the files of segment ``base`` (not opened); returns the
        size of its ``.log`` file."""
        stem = file_stem(base)
        size = 0
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX):
            path = self.directory / (stem + suffix)
            try:
                if suffix == LOG_SUFFIX:
                    size = path.stat().st_size
                path.unlink()
            except FileNotFoundError:
                pass
        self._dir_dirty = True
        return size

    def _first_to_recover(self, bases: list[int]) -> int:
        """The index of the first segment to validate batch by batch."""
        if self.clean_shutdown:
            return len(bases)
        if self.recovery_point is None:
            return len(bases) - 1
        return max(0, bisect_right(bases, self.recovery_point) - 1)

    def _load_segments(self) -> list[LogSegment]:
        now = self._clock()
        if recover_swaps(self.directory):
            self._dir_dirty = True
            self.offset_gaps = True  # a cleaner ran here
        names = os.listdir(self.directory)
        bases = sorted(b for name in names if name.endswith(LOG_SUFFIX) and (b := parse_base_offset(name)) is not None)
        self._remove_leftovers(set(bases))
        interval = self.config.index_interval_bytes
        if not bases:
            self._dir_dirty = True
            return [LogSegment.create(self.directory, 0, interval, now_ms=now)]
        segments: list[LogSegment] = []
        try:
            self._open_segments(bases, now, segments)
            if self.clean_shutdown and not segments[-1].verify_tail():
                last = segments[-1]
                logger.warning("log %s: clean shutdown marker found but segment %d ends badly; recovering it", self.directory, last.base_offset)
                self._truncated += last.recover(allow_gaps=self.offset_gaps)
                self._recovered.append(last)
            if not segments:  # every segment overlapped (impossible unless files were renamed)
                segments.append(LogSegment.create(self.directory, bases[0], interval, now_ms=now))
            segments[-1].last_offset  # noqa: B018  the property computes the active segment's tail state: do it now, single-threaded
            for seg in self._recovered:
                seg.flush()
            if self._recovered and self._dir_dirty:
                fsync_dir(self.directory)
                self._dir_dirty = False
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        if self._truncated:
            logger.warning(
                "log %s: recovery truncated %d bytes; log end offset is now %d", self.directory, self._truncated, segments[-1].next_offset
            )
        return segments

    def _open_segments(self, bases: list[int], now: int, segments: list[LogSegment]) -> None:
        """Open the segments into ``segments``, recovering those from
        `_first_to_recover` on; stop at the first one damaged or out of
        place, deleting every later one."""
        interval = self.config.index_interval_bytes
        first_recover = self._first_to_recover(bases)
        for i, base in enumerate(bases):
            if i < first_recover:
                segments.append(LogSegment.open(self.directory, base, interval, now_ms=now))
                continue
            prev = segments[-1] if segments else None
            if prev is not None and (base < prev.next_offset or (base > prev.next_offset and not self.offset_gaps)):
                # Each segment starts where the previous one ends (rolls
                # happen at the log end offset and nothing is compacted): a
                # gap means the previous segment lost its tail, an overlap
                # means damaged names. Later data cannot be kept.
                dropped = self._delete_segments(bases[i:])
                logger.warning(
                    "log %s: segment %d does not start where the previous one ends (offset %d); "
                    "deleted it and every later segment (%d segment(s), %d bytes)",
                    self.directory,
                    base,
                    prev.next_offset,
                    len(bases) - i,
                    dropped,
                )
                return
            seg = LogSegment.open(self.directory, base, interval, check_indexes=False, now_ms=now)
            segments.append(seg)
            self._recovered.append(seg)
            cut = seg.recover(allow_gaps=self.offset_gaps)
            if cut:
                self._truncated += cut
                self._dir_dirty = True
                self._delete_after_damage(base, bases[i + 1 :])
                return

    def _delete_segments(self, bases: list[int]) -> int:
        """Delete the files of the segments ``bases`` (not opened); returns
        their ``.log`` bytes, counted as truncated."""
        dropped = sum(self._delete_segment_files(b) for b in bases)
        self._truncated += dropped
        return dropped

    def _delete_after_damage(self, base: int, later: list[int]) -> None:
        if later:
            dropped = self._delete_segments(later)
            logger.warning(
                "log %s: deleted %d segment(s) (%d bytes) after the damaged segment %d: %s",
                self.directory,
                len(later),
                dropped,
                base,
                ", ".join(str(b) for b in later),
            )

    # ------------------------------------------------------------ replication state

    def _load_replication_state(self, view: LogSegments, producer_state: ProducerStateManager) -> LeaderEpochCache:
        """Load the leader epoch cache and the producer state."""
        start, end = view.bases[0], view.segments[-1].next_offset
        cache = LeaderEpochCache.load(self.directory)
        rebuild_epochs = cache is None
        if cache is None:
            cache = LeaderEpochCache(self.directory)
            epochs_from: int | None = start
        else:
            cache.truncate_from_end(end)
            cache.truncate_from_start(start)
            # Batches recovery validated may carry epochs written after the
            # last checkpoint write.
            epochs_from = self._recovered[0].base_offset if self._recovered else None
        snapshot = producer_state.load_latest_snapshot(end)
        producers_from = start if snapshot is None else max(snapshot, start)
        entries = cache.entries()
        replayed = self._replay(view, producer_state, entries, epochs_from, producers_from, end)
        if rebuild_epochs:
            cache = LeaderEpochCache(self.directory, entries)
            if end > start:  # a new, empty log gets its file at the first epoch or at close
                cache.flush()
                logger.info("log %s: rebuilt the leader epoch cache from the log: %s", self.directory, entries)
        else:
            for epoch, offset in entries[len(cache.entries()) :]:
                cache.assign(epoch, offset)
        if replayed:
            logger.info("log %s: producer state from snapshot %s plus %d replayed batch(es)", self.directory, snapshot, replayed)
        return cache

    @staticmethod
    def _replay(
        view: LogSegments,
        producer_state: ProducerStateManager,
        entries: list[tuple[int, int]],
        epochs_from: int | None,
        producers_from: int,
        end: int,
    ) -> int:
        """One walk over the batch headers from the lower of
        ``epochs_from`` and ``producers_from``: new leader epochs are
        appended to ``entries``, idempotent batches replayed into
        ``producer_state``; returns how many were replayed."""
        scan_from = producers_from if epochs_from is None else min(producers_from, epochs_from)
        replayed = 0
        if scan_from >= end:
            return 0
        for info, fields in batch_fields_from(view, scan_from):
            if fields is None:
                continue
            epoch = fields.partition_leader_epoch
            if epochs_from is not None and info.base_offset >= epochs_from and epoch >= 0:
                if not entries or epoch > entries[-1][0]:
                    entries.append((epoch, info.base_offset))
            if info.base_offset >= producers_from and fields.producer_id >= 0 and fields.base_sequence >= 0:
                producer_state.update(_producer_batch(info, fields), info.base_offset, info.last_offset)
                replayed += 1
        return replayed


__all__ = ["LoadedLog", "LogLoader", "batch_fields_from", "replay_producer_state"]
