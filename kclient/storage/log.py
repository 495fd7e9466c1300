"""The log of one partition: an ordered list of segments in one directory.

Seed 001 ("The log allows serial appends which always go to the last
file", "Reads are done by giving the 64-bit logical offset ... and an
S-byte max chunk size", copy-on-write segment list, OutOfRangeException)
and Kafka's ``Log`` / ``UnifiedLog``:

* appends go to the last (active) segment, which rolls over to a new file
  named by the next offset when it would grow past ``segment_bytes``;
* the log assigns offsets by overwriting each batch's first 8 bytes;
* reads locate the segment by ``bisect`` over an immutable tuple of base
  offsets (replaced, never mutated, so a reader always searches a
  consistent snapshot while segments are rolled or deleted), then the
  batch by the segment's sparse index.

Plain blocking file I/O; writers are serialised by a ``threading.Lock`` so
the broker may call from worker threads.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from bisect import bisect_right
from pathlib import Path
from typing import Callable

import attrs

from kclient.errors import (
    ConfigError,
    CorruptRecordError,
    InvalidRecordError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from kclient.protocol.records.scan import scan_batches
from kclient.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, LogSegment, parse_base_offset

logger = logging.getLogger(__name__)

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
_INT32_MAX = 2**31 - 1
_OFFSET = struct.Struct(">q")
_V01_ATTRIBUTES_AT = 17  # attributes byte of a v0/v1 entry
_CODEC_MASK = 0x07


def _check_config(instance: LogConfig, attribute: attrs.Attribute, value: int) -> None:
    lows = {"segment_bytes": 14, "index_interval_bytes": 0, "max_message_bytes": 0}
    low = lows[attribute.name]
    if not isinstance(value, int) or not low <= value <= _INT32_MAX:
        raise ConfigError(f"{attribute.name} must be an int in [{low}, {_INT32_MAX}], got {value!r}")


@attrs.frozen
class LogConfig:
    """Per-log settings, all in bytes (Kafka topic configs ``segment.bytes``,
    ``index.interval.bytes``, ``max.message.bytes`` and their defaults).

    ``segment_bytes``: roll the active segment when an append would take it
    past this size (14 .. 2**31-1). ``index_interval_bytes``: add an index
    entry after about this many bytes. ``max_message_bytes``: the largest
    single batch accepted, including its 12-byte log overhead. Raises
    :class:`ConfigError` for a value out of range."""

    segment_bytes: int = attrs.field(default=1073741824, validator=_check_config)
    index_interval_bytes: int = attrs.field(default=4096, validator=_check_config)
    max_message_bytes: int = attrs.field(default=1048588, validator=_check_config)


@attrs.frozen
class AppendResult:
    """Outcome of :meth:`Log.append`: the first and last offsets assigned,
    and the LogAppendTime in ms (-1: the log keeps CreateTime, the only
    mode implemented; Produce responses carry it as ``log_append_time_ms``)."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int = -1


@attrs.frozen
class ReadResult:
    """Outcome of :meth:`Log.read`: ``records`` holds whole batches from the
    one containing the requested offset (the last may be cut short, as in
    Kafka); the offsets are those of the log when the read was made."""

    records: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class Log:
    """The log of one partition, stored in ``directory``
    (``<log_dir>/<topic>-<partition>/``).

    ``Log(directory, config)`` (or :meth:`open`) loads every
    ``<20 digits>.log`` segment found, sorted by base offset; the last one
    is recovered (validated and truncated after its last valid batch, see
    :meth:`LogSegment.recover`) and gives the log end offset. An empty
    directory (created if missing) gets a first segment at offset 0.

    Errors: :class:`OffsetOutOfRangeError` on reads outside
    ``[log_start_offset, log_end_offset]``; :class:`MessageSizeTooLargeError`,
    :class:`RecordListTooLargeError`, :class:`InvalidRecordError`,
    :class:`CorruptRecordError` on appends; ``OSError`` on I/O failure.
    """

    def __init__(self, directory: str | os.PathLike[str], config: LogConfig | None = None) -> None:
        self.directory = Path(directory)
        self.config = config if config is not None else LogConfig()
        self._lock = threading.Lock()
        self._closed = False
        self.directory.mkdir(parents=True, exist_ok=True)
        bases = sorted(
            b for name in os.listdir(self.directory) if name.endswith(LOG_SUFFIX) and (b := parse_base_offset(name)) is not None
        )
        self._remove_orphan_indexes(set(bases))
        segments: list[LogSegment] = []
        try:
            for base in bases:
                segments.append(LogSegment.open(self.directory, base, self.config.index_interval_bytes))
            if segments:
                segments[-1].recover()
            else:
                segments.append(LogSegment.create(self.directory, 0, self.config.index_interval_bytes))
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        # Copy-on-write view: (base offsets, segments), replaced as a whole.
        self._view: tuple[tuple[int, ...], tuple[LogSegment, ...]] = (
            tuple(s.base_offset for s in segments),
            tuple(segments),
        )
        self._log_end_offset = segments[-1].next_offset
        logger.debug(
            "loaded log %s: %d segment(s), offsets %d..%d", self.directory, len(segments), self.log_start_offset, self._log_end_offset
        )

    @classmethod
    def open(cls, directory: str | os.PathLike[str], config: LogConfig | None = None) -> Log:
        """Load (or create) the log in ``directory``; same as the constructor."""
        return cls(directory, config)

    def _remove_orphan_indexes(self, bases: set[int]) -> None:
        for name in os.listdir(self.directory):
            if name.endswith(INDEX_SUFFIX):
                base = parse_base_offset(name)
                if base is not None and base not in bases:
                    logger.info("log %s: removing index %s without its log file", self.directory, name)
                    (self.directory / name).unlink(missing_ok=True)

    # ------------------------------------------------------------ offsets

    @property
    def name(self) -> str:
        """The directory name, ``<topic>-<partition>``."""
        return self.directory.name

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """Snapshot of the segments, oldest first (the last is active)."""
        return self._view[1]

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._view[1][-1]

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record will get."""
        return self._log_end_offset

    @property
    def log_start_offset(self) -> int:
        """The first offset still held: the base offset of the oldest segment."""
        return self._view[0][0]

    @property
    def high_watermark(self) -> int:
        """Offset up to which consumers may read; equal to the log end offset
        (single broker, no replication)."""
        return self._log_end_offset

    @property
    def size_bytes(self) -> int:
        """Total bytes of all segments' ``.log`` files."""
        return sum(s.size for s in self._view[1])

    # ------------------------------------------------------------ append

    def append(self, records) -> AppendResult:
        """Assign offsets to ``records`` and append them; return the offsets.

        ``records``: bytes / bytearray / memoryview holding one or more
        complete batches (v2) or entries (v0/v1, uncompressed), validated by
        the caller. The input is copied, never modified: a v2 batch gets base
        offset = log end offset and consumes ``lastOffsetDelta + 1`` offsets;
        a v0/v1 entry gets one offset. Nothing else is rewritten (the v2 CRC
        does not cover the base offset). The active segment is rolled first
        if it is non-empty and the append would take it past
        ``segment_bytes``.

        All-or-nothing per call. Raises :class:`MessageSizeTooLargeError` if
        one batch is larger than ``max_message_bytes``;
        :class:`RecordListTooLargeError` if the whole set is larger than
        ``segment_bytes``; :class:`InvalidRecordError` for a negative
        ``lastOffsetDelta`` or a compressed v0/v1 wrapper (whose inner
        offsets would need re-encoding); :class:`CorruptRecordError` for an
        impossible header or a partial trailing batch. An empty ``records``
        writes nothing and returns ``(log_end_offset, log_end_offset - 1)``.
        """
        buf = bytearray(records)
        total = len(buf)
        with self._lock:
            self._check_open()
            next_offset = self._log_end_offset
            if not total:
                return AppendResult(next_offset, next_offset - 1)
            infos = list(scan_batches(buf))
            covered = sum(i.size for i in infos)
            if covered != total:
                raise CorruptRecordError(f"record set of {total} bytes ends with a partial batch of {total - covered} bytes")
            limit = self.config.max_message_bytes
            for info in infos:
                if info.size > limit:
                    raise MessageSizeTooLargeError(
                        f"batch at byte {info.position} is {info.size} bytes, above max.message.bytes {limit}"
                    )
                if info.magic == 2:
                    if info.last_offset < info.base_offset:
                        raise InvalidRecordError(f"batch at byte {info.position} has negative lastOffsetDelta")
                elif buf[info.position + _V01_ATTRIBUTES_AT] & _CODEC_MASK:
                    raise InvalidRecordError(
                        f"compressed v{info.magic} message at byte {info.position}: the log cannot assign its inner offsets"
                    )
            if total > self.config.segment_bytes:
                raise RecordListTooLargeError(f"record set of {total} bytes is larger than segment.bytes {self.config.segment_bytes}")
            first = next_offset
            for info in infos:
                _OFFSET.pack_into(buf, info.position, next_offset)
                next_offset += info.last_offset - info.base_offset + 1
            last = next_offset - 1
            active = self.active_segment
            if active.size and (
                active.size + total > self.config.segment_bytes or last - active.base_offset > _INT32_MAX
            ):
                active = self._roll(first)
            active.append(buf, first, last)
            self._log_end_offset = next_offset
        return AppendResult(first, last, -1)

    def _roll(self, base_offset: int) -> LogSegment:
        """Start a new active segment at ``base_offset`` (lock held)."""
        old = self.active_segment
        old.flush()  # a rolled segment is never written again: make it durable now
        seg = LogSegment.create(self.directory, base_offset, self.config.index_interval_bytes)
        bases, segs = self._view
        self._view = (bases + (base_offset,), segs + (seg,))
        logger.info("log %s: rolled new segment at offset %d (previous %d bytes)", self.directory, base_offset, old.size)
        return seg

    def roll(self) -> LogSegment:
        """Force a new active segment at the log end offset unless the active
        one is empty; returns the active segment."""
        with self._lock:
            self._check_open()
            if self.active_segment.size:
                return self._roll(self._log_end_offset)
            return self.active_segment

    # ------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True) -> ReadResult:
        """Read batches starting with the one that holds ``offset``.

        Returns up to ``max_bytes`` bytes from one segment (the last batch
        may be partial; the client detects that by its size field, seed 001
        "Reads"). If ``min_one_batch`` and the first batch is larger than
        ``max_bytes``, the whole first batch is returned (KIP-74). An offset
        equal to the log end offset gives empty records. Raises
        :class:`OffsetOutOfRangeError` if ``offset`` is below
        ``log_start_offset`` or above ``log_end_offset``, and
        :class:`CorruptRecordError` if a segment holds an impossible header.
        """
        bases, segs = self._view  # one consistent snapshot
        end = self._log_end_offset
        start = bases[0]
        if offset == end:
            return ReadResult(b"", end, start, end)
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.name}: valid offsets are {start}..{end} (log end offset {end})"
            )
        i = max(0, bisect_right(bases, offset) - 1)
        while i < len(segs):
            seg = segs[i]
            try:
                info = seg.find_batch(offset)
                if info is not None:
                    want = info.size if (min_one_batch and info.size > max_bytes) else max_bytes
                    return ReadResult(seg.read(info.position, want), end, start, end)
            except (OSError, ValueError):
                if seg.deleted or seg.closed:
                    raise OffsetOutOfRangeError(
                        f"offset {offset} of {self.name} was deleted while being read; log start offset is now {self.log_start_offset}"
                    ) from None
                raise
            i += 1  # this segment ends before ``offset``: continue in the next one
        return ReadResult(b"", end, start, end)

    # ------------------------------------------------------------ offsets by time

    def offsets_before(self, timestamp_ms: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0 (getOffsetsBefore), Kafka 0.8's
        ``Log.getOffsetsBefore``: candidates are every segment's base offset
        paired with its file mtime (ms) and, if the active segment is
        non-empty, the log end offset paired with now. ``timestamp_ms`` -1
        (latest) starts from the last candidate, -2 (earliest) from the
        first; any other value starts from the last candidate whose time is
        ``<= timestamp_ms`` (none: empty list). Returns at most
        ``max_num_offsets`` offsets from the start going back, descending."""
        segs = self._view[1]
        candidates = [(s.base_offset, s.mtime) for s in segs]
        if segs[-1].size > 0:
            candidates.append((self._log_end_offset, int(time.time() * 1000)))
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

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """ListOffsets v1+: ``(offset, timestamp_ms)``. -1 gives
        ``(log_end_offset, -1)``, -2 gives ``(log_start_offset, -1)``;
        otherwise the first batch whose max timestamp is ``>= timestamp_ms``
        gives ``(its base offset, its max timestamp)``, found by scanning
        batch headers (no time index yet); ``None`` if there is none."""
        if timestamp_ms == LATEST_TIMESTAMP:
            return (self._log_end_offset, -1)
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return (self.log_start_offset, -1)
        for seg in self._view[1]:
            for info in seg.iter_batches():
                if info.max_timestamp >= timestamp_ms:
                    return (info.base_offset, info.max_timestamp)
        return None

    # ------------------------------------------------------------ deletion

    def delete_old_segments(self, should_delete: Callable[[LogSegment], bool]) -> int:
        """Delete segments from the oldest while ``should_delete(segment)``
        is true, never the active one (seed 001: "Data is deleted one log
        segment at a time"; the segment list is replaced copy-on-write, so
        concurrent reads keep a consistent view). The log start offset
        becomes the base of the oldest remaining segment. Returns the number
        of segments deleted."""
        with self._lock:
            self._check_open()
            bases, segs = self._view
            n = 0
            while n < len(segs) - 1 and should_delete(segs[n]):
                n += 1
            if not n:
                return 0
            self._view = (bases[n:], segs[n:])
            for seg in segs[:n]:
                logger.info("log %s: deleting segment %s", self.directory, seg.log_path.name)
                seg.delete()
            return n

    # ------------------------------------------------------------ lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")

    def flush(self) -> None:
        """``os.fsync`` the active segment's log and index (older segments
        were fsync-ed when they were rolled). Seed 001's flush guarantee:
        what is flushed survives a crash."""
        with self._lock:
            self._check_open()
            self.active_segment.flush()

    def close(self) -> None:
        """Flush and close every segment. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            segs = self._view[1]
            try:
                segs[-1].flush()
            finally:
                for seg in segs:
                    seg.close()

    def __repr__(self) -> str:
        return f"Log({str(self.directory)!r}, offsets={self.log_start_offset}..{self._log_end_offset})"
