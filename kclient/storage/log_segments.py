"""An immutable snapshot of a log's segments and the reads made over one.

Kafka's ``LogSegments`` holds a log's segments by base offset; here the list
is copy-on-write: `kclient.storage.log.Log` replaces its `LogSegments`
(after a roll, a deletion, a truncation or a cleaning), never mutates it, so
a reader without the writer's lock always searches one consistent view
(Kafka documentation https://kafka.apache.org/documentation/#log, "Reads").
A segment of a snapshot may be deleted meanwhile: a reader takes a
reference on each segment it reads (`LogSegment.try_acquire`) and, when that
fails, gets `StaleSegments` and takes a new snapshot.

The reads over a snapshot: the byte range for a fetch (`LogSegments.slice_at`),
ListOffsets by timestamp (`LogSegments.offset_for_timestamp`, KIP-79 /
KIP-734) and ListOffsets v0's candidates (`LogSegments.base_offset_times`,
`offsets_before`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kclient.storage.fileslice import FileSlice
from kclient.storage.segment import LogSegment


class StaleSegments(Exception):
    """A segment of a snapshot was deleted meanwhile: take a new snapshot."""


def holds_offsets_from(segments: Sequence[LogSegment], i: int, offset: int) -> bool:
    """Whether ``segments[i]`` holds an offset ``>= offset``.

    Answered from the next segment's base offset when that suffices, so a
    flush or a close does not open every old segment (their files open
    lazily).

    Args:
        segments: The log's segments, oldest first.
        i: The index of the segment asked about.
        offset: An absolute offset.

    Returns:
        Whether the segment's next offset is above ``offset``.
    """
    if i + 1 < len(segments) and segments[i + 1].base_offset <= offset:
        return False
    return segments[i].next_offset > offset


class LogSegments:
    """Immutable snapshot of a log's segment list, oldest first (the last is
    the active segment).

    Attributes:
        segments: The segments.
        bases: Their base offsets, for ``bisect``.

    The running maximum of the sealed (non-active) segments' largest
    timestamps is computed once per snapshot.
    """

    __slots__ = ("bases", "segments", "_prefix")

    def __init__(self, segments: Sequence[LogSegment]) -> None:
        self.segments: tuple[LogSegment, ...] = tuple(segments)
        self.bases: tuple[int, ...] = tuple(s.base_offset for s in self.segments)
        self._prefix: list[int] | None = None

    def index_of(self, offset: int) -> int:
        """The index of the segment that holds ``offset`` (the last whose
        base offset is at or below it; 0 below the first)."""
        return max(0, bisect_right(self.bases, offset) - 1)

    def sealed_timestamp_prefix(self) -> list[int]:
        """``prefix[i]`` = largest timestamp of segments ``0..i`` (all but
        the active one); non-decreasing, so it can be bisected.

        Raises:
            StaleSegments: A segment was deleted meanwhile.
        """
        prefix = self._prefix
        if prefix is None:
            prefix = []
            running = -1
            for seg in self.segments[:-1]:
                if not seg.try_acquire():
                    raise StaleSegments
                try:
                    running = max(running, seg.max_timestamp)
                finally:
                    seg.release()
                prefix.append(running)
            self._prefix = prefix
        return prefix

    # ------------------------------------------------------------ fetch

    def slice_at(
        self, offset: int, max_bytes: int, min_one_batch: bool, max_offset: int | None, offsets: tuple[int, int, int]
    ) -> FileSlice:
        """The byte range a fetch at ``offset`` returns, from the segment
        holding it (or the next one when that one ends before it).

        Args:
            offset: The fetch offset, within the log's range.
            max_bytes: The most bytes to return (the last batch may be cut).
            min_one_batch: Return the whole first batch even past
                ``max_bytes`` (KIP-74).
            max_offset: Stop before the batch holding this offset, or
                ``None``.
            offsets: ``(high watermark, log start offset, log end offset)``
                the slice reports.

        Returns:
            The slice, holding a reference on its segment; an empty slice
                when no segment holds ``offset`` or later.

        Raises:
            StaleSegments: A segment was deleted meanwhile.
            kclient.errors.CorruptRecordError: A segment holds an impossible
                header.
        """
        for seg in self.segments[self.index_of(offset) :]:
            if not seg.try_acquire():
                raise StaleSegments
            result = None
            try:
                result = _slice_of(seg, offset, max_bytes, min_one_batch, max_offset, offsets)
            finally:
                if result is None:
                    seg.release()
            if result is not None:
                return result
            # this segment ends before ``offset``: continue in the next one
        return FileSlice.empty(*offsets)

    # ------------------------------------------------------------ by time

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """ListOffsets v1+ for a timestamp other than latest / earliest
        (see `kclient.storage.log.Log.offset_for_timestamp`).

        Args:
            timestamp_ms: A timestamp (ms), ``MAX_TIMESTAMP`` (-3, KIP-734) or
                another negative value (a scan from the start).

        Returns:
            ``(base offset, largest timestamp)`` of the batch found, or
                ``None``.

        Raises:
            StaleSegments: A segment was deleted meanwhile.
        """
        if timestamp_ms == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        if timestamp_ms < 0:
            return self._scan_for_timestamp(timestamp_ms)
        prefix = self.sealed_timestamp_prefix()
        i = bisect_left(prefix, timestamp_ms)
        seg = self.segments[i] if i < len(prefix) else self.segments[-1]
        if not seg.try_acquire():
            raise StaleSegments
        try:
            info = seg.find_offset_by_timestamp(timestamp_ms)
        finally:
            seg.release()
        return None if info is None else (info.base_offset, info.max_timestamp)

    def _scan_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        for seg in self.segments:
            if not seg.try_acquire():
                raise StaleSegments
            try:
                for info in seg.iter_batches():
                    if info.max_timestamp >= timestamp_ms:
                        return (info.base_offset, info.max_timestamp)
            finally:
                seg.release()
        return None

    def _max_timestamp_offset(self) -> tuple[int, int] | None:
        best: LogSegment | None = None
        best_ts = -1
        for seg in self.segments:
            if not seg.try_acquire():
                raise StaleSegments
            try:
                if seg.max_timestamp > best_ts:
                    best, best_ts = seg, seg.max_timestamp
            finally:
                seg.release()
        if best is None:
            return None
        if not best.try_acquire():
            raise StaleSegments
        try:
            info = best.find_batch(best.offset_of_max_timestamp)
        finally:
            best.release()
        return None if info is None else (info.base_offset, best_ts)

    def base_offset_times(self) -> list[tuple[int, int]]:
        """``(base offset, .log file mtime in ms)`` of each segment still
        there (ListOffsets v0's candidates, Kafka 0.8's
        ``Log.getOffsetsBefore``)."""
        candidates = []
        for seg in self.segments:
            if not seg.try_acquire():
                continue  # deleted meanwhile
            try:
                candidates.append((seg.base_offset, seg.mtime))
            finally:
                seg.release()
        return candidates


def _slice_of(
    seg: LogSegment, offset: int, max_bytes: int, min_one_batch: bool, max_offset: int | None, offsets: tuple[int, int, int]
) -> FileSlice | None:
    """The slice of ``seg`` for a fetch at ``offset`` (the caller holds a
    reference, which the slice takes over), or ``None`` when every batch of
    ``seg`` ends before ``offset``."""
    # A fetch from where a batch is known to begin that takes the rest of
    # the segment (a consumer reading from the start, or one that has read
    # everything appended so far) needs no header: no batch is cut, none
    # passes max_offset. As in the walk below, the size and the next offset
    # are read without the writer's lock (the broker appends to a partition
    # it leads and reads it on its one trio thread).
    position = seg.batch_start(offset)
    if position is not None:
        size = seg.size
        if 0 < size - position <= max_bytes and (max_offset is None or max_offset >= seg.next_offset):
            return FileSlice(seg, position, size - position, *offsets)
    info = seg.find_batch(offset)
    if info is None:
        return None
    want = info.size if (min_one_batch and info.size > max_bytes) else max(0, max_bytes)
    length = max(0, min(seg.size - info.position, want))
    if max_offset is not None and info.last_offset >= max_offset:
        length = 0  # the first batch reaches past max_offset
    elif max_offset is not None and seg.next_offset > max_offset:
        stop = seg.find_batch(max_offset)
        if stop is not None:
            length = min(length, stop.position - info.position)
    return FileSlice(seg, info.position, length, *offsets)


def offsets_before(candidates: Sequence[tuple[int, int]], timestamp_ms: int, max_num_offsets: int) -> list[int]:
    """ListOffsets v0's answer from its candidates (Kafka 0.8's
    ``Log.getOffsetsBefore``).

    Args:
        candidates: ``(offset, time in ms)`` pairs, oldest first.
        timestamp_ms: ``LATEST_TIMESTAMP`` (-1) starts from the last
            candidate, ``EARLIEST_TIMESTAMP`` (-2) from the first; any other
            value from the last candidate whose time is ``<= timestamp_ms``.
        max_num_offsets: The most offsets to return.

    Returns:
        Offsets from the start going back, descending (empty when no
            candidate is old enough).
    """
    if timestamp_ms == LATEST_TIMESTAMP:
        start = len(candidates) - 1
    elif timestamp_ms == EARLIEST_TIMESTAMP:
        start = 0
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp_ms:
            start -= 1
    count = max(0, min(max_num_offsets, start + 1))
    return sorted((candidates[start - j][0] for j in range(count)), reverse=True)


__all__ = ["LogSegments", "StaleSegments", "holds_offsets_from", "offsets_before"]
