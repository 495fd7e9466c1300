"""The segments of one partition in its directory: `LocalLog`, Kafka's ``LocalLog``.

Apache Kafka split its ``Log`` into ``LocalLog`` (the segments on local
disk: roll, flush, reads, deletion and truncation of segments, the
recovery point) and ``UnifiedLog`` (KAFKA-12554), which adds what
replication and idempotence need, and holds a ``LocalLog``.
`kclient.storage.log.Log` is the second and holds one of these (as
``UnifiedLog`` holds its ``localLog``): it adds appends with their
validation, producer state and leader epochs, truncation and retention,
and calls the ``*_locked`` methods here with `LocalLog.lock` held.

Kafka documentation https://kafka.apache.org/documentation/#log: appends
go to the last (active) segment, rolled over when it would grow past
``segment_bytes``, when its first batch is older than ``roll_ms`` or when
an index is full ("Writes"); the flush policy fsyncs after
``flush_interval_messages`` unflushed messages or once the oldest is
``flush_interval_ms`` old; reads search an immutable snapshot of the
segment list (`kclient.storage.log_segments.LogSegments`), replaced under
the writer's lock, never mutated ("Reads"); whole segments are deleted
("Deletes").

Not for use on its own: `kclient.storage.log.Log` constructs it from what
`kclient.storage.loader.LogLoader` loaded. Writers hold `LocalLog.lock`;
readers take none.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from kclient.crash_point import crash_point
from kclient.errors import OffsetOutOfRangeError
from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.scan import BatchInfo
from kclient.storage.fileslice import FileSlice
from kclient.storage.log_config import INT32_MAX, LogConfig
from kclient.storage.log_files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX, file_stem, fsync_dir
from kclient.storage.log_segments import LogSegments, StaleSegments, holds_offsets_from, offsets_before
from kclient.storage.segment import LogSegment
from kclient.storage.swap import SWAP_SUFFIX

logger = logging.getLogger(__name__)

_SNAPSHOT_RETRIES = 16


@attrs.frozen
class ReadResult:
    """Outcome of `LocalLog.read`: ``records`` holds whole batches from the
    one containing the requested offset (the last may be cut short, as in
    Kafka); the offsets are those of the log when the read was made."""

    records: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class LocalLog:
    """The segments of one partition in ``directory``, with the offsets
    that describe them: log start and end offsets, recovery point and high
    watermark.

    Args:
        directory: The partition directory (``<log_dir>/<topic>-<partition>/``).
        config: The log's configuration.
        clock: A function returning the time in ms.
        segments: The loaded segments (at least one; the last is active).
        offset_gaps: Whether offsets may skip values between batches.
        dir_dirty: Whether the directory changed since its last fsync.
        high_watermark: The checkpointed high watermark (``None``: the log
            end offset); clamped to the log's offsets.
        on_roll: Called with the log end offset after every roll, lock held
            (the owner's producer state snapshot, KIP-98).
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Callable[[], int],
        segments: LogSegments,
        *,
        offset_gaps: bool,
        dir_dirty: bool,
        high_watermark: int | None = None,
        on_roll: Callable[[int], object] | None = None,
    ) -> None:
        self.directory = directory
        self.config = config
        self._clock = clock
        self._on_roll = on_roll
        #: The writers' lock: every change of the segments or offsets holds
        #: it (the owning `kclient.storage.log.Log` across its whole append
        #: or truncation). Readers take none.
        self.lock = threading.Lock()
        self._closed = False
        #: Number of flushes (fsync rounds) done since the log was opened.
        self.flush_count = 0
        #: Whether offsets may skip values between batches (a compacted log,
        #: Kafka documentation "Log Compaction": cleaning removes records but
        #: keeps the offsets of the others). Recovery then accepts a batch or
        #: segment that starts above the previous one's end, not only at it.
        self.offset_gaps = offset_gaps
        self._dir_dirty = dir_dirty
        self._view = segments
        self._log_end_offset = segments.segments[-1].next_offset
        # Everything loaded was validated or trusted and is on disk.
        self._recovery_point = self._log_end_offset
        self._first_unflushed_ms: int | None = None
        #: While true, every leader append moves the high watermark to the
        #: log end offset (a partition whose ISR is the leader alone, as with
        #: no replication). The first `update_high_watermark` call sets it to
        #: false: from then on the replication layer moves the high watermark.
        self.high_watermark_follows_log_end = True
        self._high_watermark = self._log_end_offset
        if high_watermark is not None:
            self._high_watermark = max(self.log_start_offset, min(high_watermark, self._log_end_offset))

    # ------------------------------------------------------------ offsets

    @property
    def name(self) -> str:
        """The directory name, ``<topic>-<partition>``."""
        return self.directory.name

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """Snapshot of the segments, oldest first (the last is active)."""
        return self._view.segments

    @property
    def view(self) -> LogSegments:
        """The current immutable snapshot of the segments (replaced, never
        mutated, by the writers)."""
        return self._view

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._view.segments[-1]

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record will get."""
        return self._log_end_offset

    @property
    def log_start_offset(self) -> int:
        """The first offset still held: the base offset of the oldest segment."""
        return self._view.bases[0]

    @property
    def high_watermark(self) -> int:
        """The high watermark: the offset below which every record is
        replicated to the whole ISR ("committed"), up to which consumers may
        read (Kafka documentation, "Replication"). Stored, not derived: the
        replication layer moves it with `update_high_watermark`; until then
        (`high_watermark_follows_log_end`) leader appends move it to the log
        end offset."""
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (the leader after the ISR caught up, a
        follower from the leader's fetch response).

        Also turns `high_watermark_follows_log_end` off.

        Args:
            offset: The new high watermark; clamped to ``[log_start_offset,
                log_end_offset]``.

        Returns:
            The high watermark now in effect.
        """
        with self.lock:
            self.high_watermark_follows_log_end = False
            self._high_watermark = max(self.log_start_offset, min(offset, self._log_end_offset))
            return self._high_watermark

    @property
    def recovery_point(self) -> int:
        """Every offset below this one is fsync-ed (what the recovery point
        checkpoint records; recovery after a crash starts from here)."""
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        """Messages appended but not yet fsync-ed (``log_end_offset -
        recovery_point``)."""
        return self._log_end_offset - self._recovery_point

    @property
    def size_bytes(self) -> int:
        """Total bytes of all segments' ``.log`` files."""
        return sum(s.size for s in self._view.segments)

    # ------------------------------------------------------------ roll

    def _roll_reason(self, active: LogSegment, total: int, last: int, now: int) -> str | None:
        size = active.size
        if not size:
            return None
        cfg = self.config
        if size + total > cfg.segment_bytes:
            return f"segment would grow past segment.bytes {cfg.segment_bytes}"
        if last - active.base_offset > INT32_MAX:
            return "relative offsets would overflow"
        if active.index.is_full(cfg.index_max_bytes) or active.timeindex.is_full(cfg.index_max_bytes):
            return f"an index reached {cfg.index_max_bytes} bytes"
        base = active.rolling_base_ms
        if base is not None and now - base > cfg.roll_ms:
            return f"first batch is {now - base} ms old, above roll.ms {cfg.roll_ms}"
        return None

    def roll_locked(self, base_offset: int, now: int | None = None, reason: str = "forced") -> LogSegment:
        """Start a new active segment at ``base_offset`` (lock held), then
        call ``on_roll``.

        Args:
            base_offset: The new segment's base offset.
            now: The time in ms (default: the log's clock).
            reason: Why, for the log line.

        Returns:
            The new active segment.
        """
        old = self.active_segment
        old.mark_inactive()
        old.flush()  # a rolled segment is never written again: make it durable now
        old.drop_descriptors()  # and it holds no descriptor until it is read
        if old.next_offset > self._recovery_point:
            self._recovery_point = old.next_offset
            if self._recovery_point >= self._log_end_offset:
                self._first_unflushed_ms = None
        seg = LogSegment.create(
            self.directory, base_offset, self.config.index_interval_bytes, now_ms=self._clock() if now is None else now
        )
        self._view = LogSegments(self._view.segments + (seg,))
        self._dir_dirty = True
        logger.info("log %s: rolled new segment at offset %d (previous %d bytes; %s)", self.directory, base_offset, old.size, reason)
        crash_point("log.rolled")
        if self._on_roll is not None:
            self._on_roll(self._log_end_offset)
        return seg

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Force a new active segment at the log end offset.

        Nothing happens when the active segment is empty.

        Args:
            now_ms: The time in ms (default: the log's clock).

        Returns:
            The active segment.
        """
        with self.lock:
            self.check_open()
            if self.active_segment.size:
                return self.roll_locked(self._log_end_offset, now_ms)
            return self.active_segment

    # ------------------------------------------------------------ append

    def append_locked(
        self, buf: Buffer, first: int, last: int, now: int, placed: list[BatchInfo], *, move_high_watermark: bool, high_watermark_to_end: bool = False
    ) -> bool:
        """Write batches carrying offsets ``first``..``last`` at the log end
        (lock held): rebuild the active segment's indexes if a reader found
        them inconsistent, roll if due (``segment_bytes``, ``roll_ms``, a
        full index, relative offsets), append to the active segment and
        move the log end offset.

        Args:
            buf (bytes | bytearray | memoryview): The batches, with their
                final offsets.
            first: The first offset they carry.
            last: The last offset they carry.
            now: The append time in ms.
            placed: The batches' positions and offsets in ``buf``.
            move_high_watermark: A leader append: the high watermark
                follows the log end offset while
                `high_watermark_follows_log_end`.
            high_watermark_to_end: Set the high watermark to the new log
                end offset, as `update_high_watermark` would, under the
                same lock (a leader alone in its ISR).

        Returns:
            Whether the message-count flush policy
                (``flush_interval_messages``) is due.
        """
        self._active_for(len(buf), first, last, now).append(buf, first, last, now_ms=now, batches=placed)
        return self._appended(last, now, move_high_watermark, high_watermark_to_end)

    def append_batch_locked(self, buf: bytearray, first: int, last: int, now: int, max_timestamp: int, high_watermark_to_end: bool) -> bool:
        """`append_locked` of exactly one v2 batch as the leader (lock
        held): the same roll, write (`LogSegment.append_batch`), indexing,
        log end offset and high watermark, without a `BatchInfo`.

        Args:
            buf: The whole batch, carrying offsets ``first``..``last``.
            first: Its base offset (the log end offset).
            last: Its last offset.
            now: The append time in ms.
            max_timestamp: Its ``maxTimestamp`` (ms).
            high_watermark_to_end: As `append_locked`'s.

        Returns:
            Whether the message-count flush policy
                (``flush_interval_messages``) is due.
        """
        self._active_for(len(buf), first, last, now).append_batch(buf, first, last, max_timestamp, now)
        return self._appended(last, now, True, high_watermark_to_end)

    def _active_for(self, total: int, first: int, last: int, now: int) -> LogSegment:
        """The segment an append of ``total`` bytes at ``first``..``last``
        goes to (lock held): the active one, its indexes rebuilt if a
        reader found them inconsistent, or a new one if a roll is due."""
        active = self._view.segments[-1]
        if active.index_suspect:
            active.rebuild_indexes()
        if not active.roll_due(total, last, now, self.config):
            return active
        reason = self._roll_reason(active, total, last, now)
        return self.roll_locked(first, now, reason) if reason else active

    def _appended(self, last: int, now: int, move_high_watermark: bool, to_end: bool) -> bool:
        """Offsets up to ``last`` were appended (lock held): move the log
        end offset (and the high watermark: ``to_end``, or a leader append
        while it follows the log end); True if the message-count flush is
        due."""
        end = self._log_end_offset = last + 1
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now
        if to_end:
            self.high_watermark_follows_log_end = False
            self._high_watermark = end
        elif move_high_watermark and self.high_watermark_follows_log_end:
            self._high_watermark = end
        return end - self._recovery_point >= self.config.flush_interval_messages

    def sync_dir_locked(self, *, force: bool = False) -> None:
        """Fsync the directory if a file was created, renamed or deleted
        since its last fsync (lock held).

        Args:
            force: Fsync it anyway.

        Raises:
            OSError: The fsync failed.
        """
        if force or self._dir_dirty:
            fsync_dir(self.directory)
            self._dir_dirty = False

    # ------------------------------------------------------------ flush

    def flush(self, now_ms: int | None = None) -> bool:
        """Make everything appended so far durable.

        ``os.fsync`` every segment holding unflushed data (log, index and time
        index files) and, after a roll or deletion, the directory; then the
        recovery point becomes the log end offset seen at the start. The fsyncs
        run outside the writer lock, so appends continue meanwhile. Seed 001's
        guarantee: what is flushed survives a system crash.

        Args:
            now_ms: The time in ms (default: the log's clock).

        Returns:
            ``False`` if there was nothing to flush.

        Raises:
            OSError: An fsync failed.
        """
        with self.lock:
            self.check_open()
            for seg in self._view.segments:
                if seg.index_suspect:
                    seg.rebuild_indexes()
            target = self._log_end_offset
            rp = self._recovery_point
            dir_dirty = self._dir_dirty
            if target <= rp and not dir_dirty:
                return False
            started = self._clock() if now_ms is None else now_ms
            held = []
            segs = self._view.segments
            for i, seg in enumerate(segs):
                if seg.size and holds_offsets_from(segs, i, rp):
                    seg.prepare_flush()
                    if seg.try_acquire():
                        held.append(seg)
            self._dir_dirty = False
        try:
            for seg in held:
                seg.sync()
            if dir_dirty:
                fsync_dir(self.directory)
        except BaseException:
            with self.lock:
                self._dir_dirty = self._dir_dirty or dir_dirty
            raise
        finally:
            for seg in held:
                seg.release()
        with self.lock:
            if target > self._recovery_point:
                self._recovery_point = target
            if self._recovery_point >= self._log_end_offset:
                self._first_unflushed_ms = None
            elif self._first_unflushed_ms is None or self._first_unflushed_ms < started:
                # Appends made during the fsync: they are no older than ``started``.
                self._first_unflushed_ms = started
            self.flush_count += 1
        return True

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """Time-based flush policy (``flush_interval_ms``).

        Flush if messages are unflushed and the oldest of them was appended
        ``flush_interval_ms`` or more ago. The broker calls this periodically
        (``log.flush.scheduler.interval.ms``).

        Args:
            now_ms: The time in ms (default: the log's clock).

        Returns:
            Whether it flushed.

        Raises:
            OSError: An fsync failed.
        """
        interval = self.config.flush_interval_ms
        if interval is None:
            return False
        now = self._clock() if now_ms is None else now_ms
        with self.lock:
            if self._closed:
                return False
            first = self._first_unflushed_ms
            due = first is not None and self._log_end_offset > self._recovery_point and now - first >= interval
        if due:
            return self.flush(now_ms=now)
        return False

    # ------------------------------------------------------------ read

    def read_slice(self, offset: int, max_bytes: int, min_one_batch: bool = True, max_offset: int | None = None) -> FileSlice:
        """Locate the bytes to return for a fetch at ``offset`` without
        reading them.

        Args:
            offset: The offset to read from; the slice starts at the batch
                that holds it.
            max_bytes: The most bytes to return; the last batch may be cut,
                as the "Reads" part of Kafka's "Log" documentation describes.
            min_one_batch: Return the whole first batch even if it is larger
                than ``max_bytes`` (KIP-74).
            max_offset: Stop before the batch holding this offset (a
                consumer's fetch passes the high watermark, a follower's
                passes ``None``: up to the log end offset). An ``offset`` at
                or above it gives an empty slice.

        Returns:
            A `FileSlice` of one segment file. An offset equal to the log end
                offset (or in a segment rolled after the snapshot) gives an empty
                slice. The slice keeps the segment open until released, even if
                retention deletes it meanwhile.

        Raises:
            OffsetOutOfRangeError: ``offset`` is below ``log_start_offset``
                or above ``log_end_offset`` (also when its segment is deleted
                while being located).
            CorruptRecordError: A segment holds an impossible header.
            ValueError: The log is closed.
        """
        for _ in range(_SNAPSHOT_RETRIES):
            end = self._log_end_offset
            view = self._view  # one consistent snapshot
            hw = min(self._high_watermark, end)
            start = view.bases[0]
            if offset == end or (max_offset is not None and start <= offset <= end and offset >= max_offset):
                return FileSlice.empty(hw, start, end)
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range for {self.name}: valid offsets are {start}..{end} (log end offset {end})"
                )
            try:
                return view.slice_at(offset, max_bytes, min_one_batch, max_offset, (hw, start, end))
            except StaleSegments:
                if self._closed:
                    raise ValueError(f"log {self.directory} is closed") from None
                self._await_writer()
        raise OffsetOutOfRangeError(
            f"offset {offset} of {self.name} was deleted while being read; log start offset is now {self.log_start_offset}"
        )

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True, max_offset: int | None = None) -> ReadResult:
        """Read batches starting with the one that holds ``offset``, as
        bytes (`read_slice` then ``pread``).

        Args:
            offset: The offset to read from.
            max_bytes: The most bytes to return, from one segment; the last
                batch may be partial (the client detects that by its size
                field, as Kafka's "Reads" describes).
            min_one_batch: Return the whole first batch even if it is larger
                than ``max_bytes`` (KIP-74).
            max_offset: Stop before the batch holding this offset (see
                `read_slice`).

        Returns:
            The bytes with the partition's offsets at read time. An offset
                equal to the log end offset gives empty records.

        Raises:
            OffsetOutOfRangeError: ``offset`` is below ``log_start_offset``
                or above ``log_end_offset``.
            CorruptRecordError: A segment holds an impossible header.
        """
        with self.read_slice(offset, max_bytes, min_one_batch, max_offset) as piece:
            data = piece.read()
        return ReadResult(data, piece.high_watermark, piece.log_start_offset, piece.log_end_offset)

    def offsets_before(self, timestamp_ms: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0 (getOffsetsBefore), as Kafka 0.8's
        ``Log.getOffsetsBefore``.

        Candidates are every segment's base offset paired with its file
        mtime (ms) and, if the active segment is non-empty, the log end
        offset paired with now.

        Args:
            timestamp_ms: ``LATEST_TIMESTAMP`` (-1) starts from the last
                candidate, ``EARLIEST_TIMESTAMP`` (-2) from the first; any
                other value from the last candidate whose time is
                ``<= timestamp_ms`` (none: empty list).
            max_num_offsets: The most offsets to return.

        Returns:
            Offsets from the start going back, descending.
        """
        end = self._log_end_offset
        view = self._view
        candidates = view.base_offset_times()
        if view.segments[-1].size > 0:
            candidates.append((end, self._clock()))
        return offsets_before(candidates, timestamp_ms, max_num_offsets)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """ListOffsets v1+: the offset for a timestamp.

        Args:
            timestamp_ms: A timestamp (ms), or ``LATEST_TIMESTAMP`` (-1),
                ``EARLIEST_TIMESTAMP`` (-2) or ``MAX_TIMESTAMP`` (-3,
                KIP-734), from `kclient.protocol.messages.list_offsets`.

        Returns:
            ``(offset, timestamp_ms)``: -1 gives ``(log_end_offset, -1)``,
                -2 gives ``(log_start_offset, -1)``, -3 gives the batch holding
                the largest timestamp as ``(its base offset, that timestamp)``;
                otherwise the first batch whose largest timestamp is
                ``>= timestamp_ms`` gives ``(its base offset, its largest
                timestamp)`` (batch granularity). ``None`` if there is none.

        Found by lookup: bisect over the running maximum of the segments'
        largest timestamps picks the segment, then its time index, its
        offset index and a short walk over batch headers."""
        if timestamp_ms == LATEST_TIMESTAMP:
            return (self._log_end_offset, -1)
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return (self.log_start_offset, -1)
        for _ in range(_SNAPSHOT_RETRIES):
            try:
                return self._view.offset_for_timestamp(timestamp_ms)
            except StaleSegments:
                self._await_writer()
        raise OffsetOutOfRangeError(f"segments of {self.name} were deleted while looking up timestamp {timestamp_ms}")

    def _await_writer(self) -> None:
        """A reader that met a deleted segment waits for the writer holding
        the lock to publish the new view before taking a new snapshot."""
        with self.lock:
            pass

    # ------------------------------------------------------------ segment deletion and truncation

    def delete_prefix_locked(self, n: int, reason: str) -> None:
        """Drop the ``n`` oldest segments (lock held): swap in the shorter
        view first, then delete the files (deferred while readers hold
        them). The recovery point and the high watermark rise to the new
        log start offset.

        Args:
            n: How many segments, fewer than the log holds.
            reason: Why, for the log lines.
        """
        old = self._view
        self._view = LogSegments(old.segments[n:])
        self._dir_dirty = True
        for seg in old.segments[:n]:
            logger.info(
                "log %s: deleting segment %s (offsets %d..%d, %d bytes): %s",
                self.directory,
                seg.log_path.name,
                seg.base_offset,
                seg.last_offset,
                seg.size,
                reason,
            )
            seg.delete()
        start = self.log_start_offset
        if self._recovery_point < start:
            self._recovery_point = start
        if self._high_watermark < start:
            self._high_watermark = start

    def truncate_segments_locked(self, offset: int) -> tuple[int, int]:
        """Cut the segments at the batch holding ``offset`` (lock held):
        later segments are deleted, the one holding the cut becomes the
        active one; the log end offset, the recovery point and the high
        watermark come down to the cut.

        Args:
            offset: The first offset to remove, with ``log_start_offset <=
                offset < log_end_offset``.

        Returns:
            ``(bytes removed, segments deleted)``.
        """
        view = self._view
        i = view.index_of(offset)
        seg = view.segments[i]
        later = view.segments[i + 1 :]
        removed = 0
        if later:
            self._view = LogSegments(view.segments[: i + 1])
            self._dir_dirty = True
            for dead in later:
                removed += dead.size
                dead.delete()
        removed += seg.truncate_to(offset)
        self._lower_offsets_to(seg.next_offset)
        return removed, len(later)

    def _lower_offsets_to(self, end: int) -> None:
        """Bring the log end offset, the recovery point and the high
        watermark down to ``end`` (lock held)."""
        self._log_end_offset = end
        if self._recovery_point > end:
            self._recovery_point = end
        if self._recovery_point >= end:
            self._first_unflushed_ms = None
        if self._high_watermark > end:
            self._high_watermark = end

    def replace_all_segments_locked(self, offset: int) -> int:
        """Delete every segment and start an empty one at ``offset``, every
        offset moved there (lock held).

        Args:
            offset: The new log start (and end) offset.

        Returns:
            How many segments went.
        """
        old = self._view.segments
        for seg in old:
            seg.delete()
        seg = LogSegment.create(self.directory, offset, self.config.index_interval_bytes, now_ms=self._clock())
        self._view = LogSegments((seg,))
        self._log_end_offset = offset
        self._recovery_point = offset
        self._high_watermark = offset
        self._first_unflushed_ms = None
        return len(old)

    # ------------------------------------------------------------ configuration and compaction

    def update_config(self, config: LogConfig) -> None:
        """Replace the log's configuration (a topic's configs changed or
        became known; Kafka's ``updateConfig``). Appends, rolls, retention
        and the cleaner use it from their next call. A ``compact`` policy
        turns `offset_gaps` on for good.

        Args:
            config: The new configuration.
        """
        with self.lock:
            self.config = config
            if config.compact:
                self.offset_gaps = True

    def replace_segments(self, old: Sequence[LogSegment], sizes: Sequence[int], swap_stem: Path) -> LogSegment | None:
        """Swap cleaned segment files in for ``old`` (Kafka's
        ``replaceSegments``; used by `kclient.storage.cleaner`).

        ``swap_stem`` names ``<stem>.log.swap`` (and its ``.index.swap`` /
        ``.timeindex.swap``), fsync-ed, whose base offset is that of
        ``old[0]``. Under the writer lock: if ``old`` are still consecutive,
        inactive segments of the log with the ``sizes`` seen when cleaning
        began, they are deleted (readers keep their open files), the swap
        files take their names, the new segment is opened and a new view
        published; else the swap files are deleted and nothing changes. A
        crash at any point leaves files `kclient.storage.swap.recover_swaps`
        settles.

        Args:
            old: The segments the cleaned one replaces, oldest first.
            sizes: Their sizes when cleaning read them.
            swap_stem: The path of the swap files without their suffixes.

        Returns:
            The new segment, or ``None`` if the log changed meanwhile.

        Raises:
            OSError: An I/O failure.
        """
        base = old[0].base_offset
        swaps = [swap_stem.with_name(swap_stem.name + suffix + SWAP_SUFFIX) for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX)]
        with self.lock:
            segs = self._view.segments
            ok = not self._closed and old[0] in segs
            if ok:
                i = segs.index(old[0])
                ok = (
                    i + len(old) < len(segs)
                    and all(a is b and not a.deleted and a.size == n for a, b, n in zip(old, segs[i : i + len(old)], sizes))
                )
            if not ok:
                for path in swaps:
                    path.unlink(missing_ok=True)
                logger.info("log %s: cleaned segment %d dropped: the log changed while it was cleaned", self.directory, base)
                return None
            self.offset_gaps = True
            for seg in old:
                seg.delete()
            stem = self.directory / file_stem(base)
            for path, suffix in zip(swaps, (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                if path.exists():
                    os.replace(path, stem.with_name(stem.name + suffix))
            new = LogSegment.open(self.directory, base, self.config.index_interval_bytes, now_ms=self._clock())
            self._view = LogSegments(segs[:i] + (new,) + segs[i + len(old) :])
            fsync_dir(self.directory)
            self._dir_dirty = False
        return new

    # ------------------------------------------------------------ lifecycle

    def close(self, flush_state: Callable[[], object] | None = None) -> None:
        """Flush (fsync) and close every segment; the recovery point then
        equals the log end offset. Files still used by a `FileSlice` close
        when it is released. Idempotent.

        Args:
            flush_state: Called (lock held) once the segments are flushed and
                before the directory is: the owner writes its own files
                there (producer snapshot, leader epoch checkpoint).

        Raises:
            OSError: An fsync failed (the segments are closed all the same).
        """
        with self.lock:
            if self._closed:
                return
            self._closed = True
            segs = self._view.segments
            try:
                active = segs[-1]
                active.mark_inactive()
                for i, seg in enumerate(segs):
                    if seg is active or (seg.size and holds_offsets_from(segs, i, self._recovery_point)):
                        seg.flush()
                if flush_state is not None:
                    flush_state()
                self.sync_dir_locked()
                self._recovery_point = self._log_end_offset
                self._first_unflushed_ms = None
            finally:
                for seg in segs:
                    seg.close()

    def abandon(self) -> None:
        """Close every segment's files without writing anything (no flush,
        no index entry): the log directory failed (KIP-112); what was
        written stays for the recovery of the next start. Idempotent."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            segs = self._view.segments
        for seg in segs:
            # Buffered index entries are dropped, not written; files still
            # used by readers close when the last one is released.
            seg.index.abandon()
            seg.timeindex.abandon()
            seg.close()

    def check_open(self) -> None:
        """Raise ``ValueError`` once the log is closed."""
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r}, offsets={self.log_start_offset}..{self._log_end_offset})"


__all__ = ["LocalLog", "ReadResult"]
