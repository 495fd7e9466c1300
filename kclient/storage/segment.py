"""One log segment: a ``.log`` file of record batches plus its ``.index``,
``.timeindex`` and ``.txnindex`` (`kclient.storage.txn_index`).

Files are named by the segment's base offset zero-padded to 20 digits
(``00000000000000000000.log`` / ``.index`` / ``.timeindex``, as Kafka
names them; `kclient.storage.log_files`). The ``.log`` file is the exact concatenation of the batches
appended, each already carrying its final offsets, so a fetch can send its
bytes as they are (Kafka documentation
https://kafka.apache.org/documentation/#maximizingefficiency, "Efficiency":
one format shared by producer, broker and consumer), with ``os.sendfile`` (see `kclient.storage.FileSlice`).

Recovery follows the "Guarantees" part of the Kafka documentation's "Log"
section (https://kafka.apache.org/documentation/#log: at startup the
newest segment is scanned and every entry checked): a batch is valid if it lies wholly
inside the file, its header is possible (size, magic), its offsets follow
the previous batch and its CRC matches (CRC-32C for v2 over attributes..end,
CRC32 over magic..end for v0/v1). The file is truncated at the first
invalid batch, which handles both a lost tail and a nonsense block added by
a crash. Modelled on Kafka's ``LogSegment``.

Lifetime: readers take a reference (`LogSegment.try_acquire` /
`LogSegment.release`) for as long as they use the segment's bytes.
`LogSegment.delete` renames the files to ``*.deleted`` at once (so a
restart never loads them again) but unlinks them only when the last
reference is released, so a pending ``sendfile`` still finds its bytes.

Descriptors: none is held for long. The ``.log`` file and both indexes are
`kclient.storage.handles.CachedFile` objects, opened when used and pinned
only for the duration of each read, write or sync; an idle ``.log``
descriptor stays open while it is among the process's most recently used
(a bounded cache), index descriptors close after each use and the index
entries are read on the first lookup (Kafka's lazy indexes, KAFKA-7283).
A rolled segment drops its descriptor at once (`drop_descriptors`).

Plain blocking file I/O (``os.pread`` / ``os.pwrite``); no trio. The
walks over a segment's batches are `kclient.storage.batch_walk`'s.

One module of about 1,000 lines (half of them docstrings): the three files
must agree, and recovery, lookups, roll and deletion all rely on that.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from kclient import clock
from kclient.errors import CorruptRecordError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.legacy import ATTR_CODEC_MASK
from kclient.protocol.records.legacy import ATTRIBUTES_AT as V01_ATTRIBUTES_AT
from kclient.protocol.records.scan import BatchInfo, ProducerFields, read_v2_producer_fields, scan_batches
from kclient.storage.batch_walk import batch_crc_ok, walk_batches, walk_headers
from kclient.storage.handles import CachedFile, default_cache
from kclient.storage.index import OffsetIndex
from kclient.storage.log_config import LogConfig
from kclient.storage.log_files import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX, file_stem, fsync_dir, parse_base_offset
from kclient.storage.timeindex import TimeIndex
from kclient.storage.txn_index import TransactionIndex

logger = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1
_RECENT_STARTS = 64  # positions of the last v2 batches appended, kept per segment


class _BadIndex(Exception):
    """An index entry does not point at the batch it names."""


class LogSegment:
    """One ``.log`` + ``.index`` + ``.timeindex`` triple holding offsets
    ``base_offset`` .. ``last_offset``.

    Build with `create` (new empty segment) or `open` (existing
    files; call `recover` for a segment that may hold unflushed data
    after a crash). ``size`` is the number of valid bytes in the ``.log``
    file. An offset index entry ``(batch base offset, byte position)`` is
    added before a batch when more than ``index_interval_bytes`` bytes were
    appended since the last entry (Kafka's rule); at the same moment a time
    index entry ``(largest timestamp so far, last offset of the batch that
    first reached it)`` is added if that timestamp grew.

    Not thread-safe for concurrent writers; reads (``read``,
    ``find_batch``, ``find_offset_by_timestamp``) may run alongside one
    writer because they never look past ``size``, and they should hold a
    reference (`try_acquire`) so the files stay readable, even once deleted. Raises
    ``OSError`` on I/O failure.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int | None,
        index: OffsetIndex,
        size: int,
        index_interval_bytes: int,
        last_offset: int | None,
        timeindex: TimeIndex | None = None,
        created_ms: int | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.base_offset = base_offset
        stem = file_stem(base_offset)
        self.log_path = self.directory / (stem + LOG_SUFFIX)
        self.index = index
        if timeindex is None:
            timeindex = TimeIndex(self.directory / (stem + TIMEINDEX_SUFFIX), base_offset)
        self.timeindex = timeindex
        #: The aborted transactions whose ABORT marker this segment holds (KIP-98).
        self.txn_index = TransactionIndex(self.directory / (stem + TXN_INDEX_SUFFIX), base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = clock.now_ms() if created_ms is None else created_ms
        # The .log file, opened on demand through the process-wide cache.
        self._log = CachedFile(self.log_path, fd=fd)
        self._size = size
        # Tail state, computed lazily for a segment opened without recovery.
        self._last_offset = last_offset  # None = not computed yet
        self._max_timestamp = -1
        self._offset_of_max = base_offset - 1
        self._tail_known = last_offset is not None and size == 0
        self._bytes_since_index: int | None = 0  # None = from the index, on the first append
        # Time of the first append (ms), None = unknown yet (see rolling_base_ms).
        self._rolling_base_ms: int | None = None
        self.index_suspect = False
        self._index_room_for = -1  # index_max_bytes both indexes were last found below (roll_due); -1: an entry added since
        # Where the v2 batches appended last begin: base offset -> byte
        # position, the last _RECENT_STARTS of them (see batch_start).
        self._recent_starts: dict[int, int] = {}
        self.deleted = False
        self._renamed = False  # files renamed *.deleted by delete()
        self._ref_lock = threading.Lock()
        self._refs = 0
        self._retired = False  # close() or delete() was called
        self._released = False  # descriptors closed

    # ------------------------------------------------------------ construction

    @classmethod
    def create(
        cls,
        directory: str | os.PathLike[str],
        base_offset: int,
        index_interval_bytes: int = 4096,
        *,
        now_ms: int | None = None,
    ) -> LogSegment:
        """Create a new empty segment in ``directory`` starting at ``base_offset``.

        Existing ``.index`` / ``.timeindex`` files without their log are reset.

        Args:
            directory: The partition directory.
            base_offset: The segment's first offset (names its files).
            index_interval_bytes: Bytes of log between offset index entries.
            now_ms: Creation time in ms (default: wall clock).

        Returns:
            The open segment.

        Raises:
            FileExistsError: The segment's ``.log`` file exists already.
        """
        directory = Path(directory)
        stem = file_stem(base_offset)
        fd = default_cache().open_new(directory / (stem + LOG_SUFFIX), os.O_RDWR | os.O_CREAT | os.O_EXCL)
        index = timeindex = None
        try:
            index = OffsetIndex(directory / (stem + INDEX_SUFFIX), base_offset)
            index.reset()
            timeindex = TimeIndex(directory / (stem + TIMEINDEX_SUFFIX), base_offset)
            timeindex.reset()
            TransactionIndex(directory / (stem + TXN_INDEX_SUFFIX), base_offset).delete()
        except BaseException:
            for ix in (index, timeindex):
                if ix is not None:
                    ix.close()
            os.close(fd)
            raise
        return cls(directory, base_offset, fd, index, 0, index_interval_bytes, base_offset - 1, timeindex, now_ms)

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        base_offset: int,
        index_interval_bytes: int = 4096,
        *,
        check_indexes: bool = True,
        now_ms: int | None = None,
    ) -> LogSegment:
        """Open the existing segment ``base_offset`` in ``directory``.

        Its batches are not validated (see `recover`); ``size`` is the file
        length. No descriptor stays open: the files are opened when used
        (see `kclient.storage.handles`) and the indexes read on their first
        lookup, unless ``check_indexes`` reads them now.

        Args:
            directory: The partition directory.
            base_offset: The segment's first offset (names its files).
            index_interval_bytes: Bytes of log between offset index entries.
            check_indexes: Rebuild from the log a missing ``.index`` or
                ``.timeindex``, or one that fails its sanity check (WARNING for a
                corrupt one); pass ``False`` when `recover` follows (it rebuilds
                both anyway).
            now_ms: When the segment was loaded, in ms (default: wall clock).

        Returns:
            The open segment.

        Raises:
            FileNotFoundError: The ``.log`` file is missing.
        """
        directory = Path(directory)
        stem = file_stem(base_offset)
        size = os.stat(directory / (stem + LOG_SUFFIX)).st_size
        index_path = directory / (stem + INDEX_SUFFIX)
        time_path = directory / (stem + TIMEINDEX_SUFFIX)
        had_index = index_path.exists()
        had_timeindex = time_path.exists()
        index = OffsetIndex(index_path, base_offset)
        timeindex = TimeIndex(time_path, base_offset)
        seg = cls(
            directory, base_offset, None, index, size, index_interval_bytes, None if size else base_offset - 1, timeindex, now_ms
        )
        seg._bytes_since_index = None
        if not check_indexes or not size:
            if not size:
                index.reset()
                timeindex.reset()
                seg.txn_index.reset()
            return seg
        problems = []
        if not had_index:
            problems.append("index is missing")
        elif not index.sanity_check(size):
            problems.append("index is corrupt")
        if not had_timeindex:
            problems.append("time index is missing")
        elif not timeindex.sanity_check():
            problems.append("time index is corrupt")
        if problems:
            level = logging.INFO if all("missing" in p for p in problems) else logging.WARNING
            logger.log(level, "segment %s: %s; rebuilding the indexes", seg.log_path, ", ".join(problems))
            try:
                seg.rebuild_indexes()
            except BaseException:
                seg.close()
                raise
        return seg

    # ------------------------------------------------------------ properties

    @property
    def size(self) -> int:
        """Bytes of valid batches in the ``.log`` file."""
        return self._size

    @property
    def closed(self) -> bool:
        """Whether `close` or `delete` was called (the files may
        stay open a little longer for readers holding a reference)."""
        return self._retired or self._released

    @property
    def last_offset(self) -> int:
        """Last offset held (``base_offset - 1`` when empty). Computed on
        first use for a segment opened without `recover` by walking
        from the last index entries."""
        self._ensure_tail()
        assert self._last_offset is not None  # _ensure_tail computed it
        return self._last_offset

    @property
    def next_offset(self) -> int:
        """``last_offset + 1``: the offset the next batch appended would get."""
        return self.last_offset + 1

    @property
    def max_timestamp(self) -> int:
        """Largest batch timestamp in the segment (ms), -1 if none (empty or
        v0 entries only)."""
        self._ensure_tail()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        """Last offset of the first batch holding `max_timestamp`
        (``base_offset - 1`` if there is none)."""
        self._ensure_tail()
        return self._offset_of_max

    @property
    def largest_timestamp(self) -> int:
        """What time-based retention compares with (Kafka's
        ``largestTimestamp``): `max_timestamp`, or the ``.log``
        file's mtime (ms) when the segment has no timestamps."""
        ts = self.max_timestamp
        return ts if ts >= 0 else self.mtime

    @property
    def rolling_base_ms(self) -> int | None:
        """Time (ms) the segment's age is measured from for ``roll_ms``:
        the clock time of its first append when that happened in this
        process; for a segment loaded from disk, the largest timestamp of
        its first batch (Kafka's ``rollingBasedTimestamp``) capped at the
        load time, or the load time when the batch has none. ``None`` for
        an empty segment."""
        if self._rolling_base_ms is None and self._size:
            first = self._first_batch()
            ts = first.max_timestamp if first is not None else -1
            self._rolling_base_ms = min(ts, self.created_ms) if ts >= 0 else self.created_ms
        return self._rolling_base_ms

    @property
    def mtime(self) -> int:
        """Modification time of the ``.log`` file in ms since the epoch
        (what ListOffsets v0 pairs with the segment's base offset)."""
        with self._log.use() as fd:
            return os.fstat(fd).st_mtime_ns // 1_000_000

    @property
    def log_file(self) -> CachedFile:
        """The ``.log`` file: `CachedFile.use` (or ``pin`` / ``unpin``)
        gives a descriptor that stays valid while it is pinned."""
        return self._log

    @property
    def has_open_files(self) -> bool:
        """Whether a descriptor of the ``.log`` file or an index is open now."""
        return self._log.is_open or self.index._file.is_open or self.timeindex._file.is_open

    # ------------------------------------------------------------ references

    def try_acquire(self) -> bool:
        """Take a reference that keeps the files readable (a deleted
        segment's are unlinked only after the last one; no descriptor is
        held, see `log_file`); ``False`` if the segment is closed or deleted already (the caller should take a new
        snapshot of the log). Pair with `release`."""
        with self._ref_lock:
            if self._retired or self._released:
                return False
            self._refs += 1
            return True

    def release(self) -> None:
        """Drop a reference taken with `try_acquire`; the last one
        after `close` / `delete` closes the files (and for a deleted
        segment unlinks them)."""
        with self._ref_lock:
            if self._refs <= 0:
                raise RuntimeError(f"segment {self.log_path}: release without acquire")
            self._refs -= 1
            finish = self._refs == 0 and self._retired and not self._released
            if finish:
                self._released = True
        if finish:
            self._release_files()

    @property
    def references(self) -> int:
        """Number of references currently held."""
        return self._refs

    @contextmanager
    def reference(self) -> Iterator[LogSegment]:
        """Hold a reference on the segment for a ``with`` block.

        Use as ``with seg.reference():``.

        Raises:
            ValueError: The segment is closed or deleted.
        """
        if not self.try_acquire():
            raise ValueError(f"segment {self.log_path} is closed")
        try:
            yield self
        finally:
            self.release()

    # ------------------------------------------------------------ walking

    def iter_batches(self, position: int = 0) -> Iterator[BatchInfo]:
        """Walk the batch headers of the segment.

        Args:
            position: A batch start, in bytes from the start of the ``.log``
                file; the walk goes to ``size``.

        Yields:
            A `BatchInfo` (with its absolute ``position``) for each batch.

        Raises:
            kclient.errors.CorruptRecordError: A batch header is impossible.
        """
        for info, _, _ in walk_batches(self._log, self.log_path, position, self._size):
            yield info

    def iter_batch_fields(self, position: int = 0) -> Iterator[tuple[BatchInfo, ProducerFields | None]]:
        """Walk the batch headers with their KIP-101 / KIP-98 fields.

        Args:
            position: A batch start, in bytes from the start of the ``.log``
                file; the walk goes to ``size``.

        Yields:
            ``(info, fields)`` for each batch: ``fields`` (leader epoch,
            producer id, producer epoch, base sequence) for a v2 batch,
            ``None`` for a v0/v1 entry.

        Raises:
            kclient.errors.CorruptRecordError: A batch header is impossible.
        """
        for info, buf, off in walk_batches(self._log, self.log_path, position, self._size, whole=True):
            yield info, (read_v2_producer_fields(buf, off) if info.magic == 2 else None)

    def _first_batch(self) -> BatchInfo | None:
        for info in self.iter_batches(0):
            return info
        return None

    def _scan_for(self, wanted: Callable[[BatchInfo], bool]) -> BatchInfo | None:
        """The first batch from byte 0 that is ``wanted``, or None: the walk
        used when an index cannot be trusted."""
        for info in self.iter_batches(0):
            if wanted(info):
                return info
        return None

    def _suspect(self, what: str, detail: str) -> None:
        if not self.index_suspect:
            logger.warning("segment %s: %s is inconsistent with the log (%s); scanning instead, rebuild pending", self.log_path, what, detail)
        self.index_suspect = True

    def find_batch(self, offset: int) -> BatchInfo | None:
        """The first batch whose ``last_offset >= offset``.

        Found by an index lookup and a walk over batch headers. An index entry
        that does not name the batch at its position marks the index suspect
        (see `index_suspect`) and the walk restarts from byte 0.

        Args:
            offset: The offset to look for.

        Returns:
            That batch, or ``None`` if every batch of the segment ends before
                ``offset``.
        """
        entry_offset, start = self.index.lookup(offset)
        if start > 0:
            try:
                first = True
                for info in walk_headers(self._log, self.log_path, start, self._size):
                    if first and info.base_offset != entry_offset:
                        raise _BadIndex(f"entry ({entry_offset}, {start}) points at a batch with offset {info.base_offset}")
                    first = False
                    if info.last_offset >= offset:
                        return info
                return None
            except (_BadIndex, CorruptRecordError) as exc:
                self._suspect("offset index", str(exc))
        for info in walk_headers(self._log, self.log_path, 0, self._size):
            if info.last_offset >= offset:
                return info
        return None

    def batch_start(self, offset: int) -> int | None:
        """Byte position of the batch that begins at ``offset``, when it is
        known without reading the file: 0 for the segment's base offset
        (its first batch holds it, or the first offset after it), the
        position a v2 batch was appended at for one of the last
        `_RECENT_STARTS` appended (where a consumer that has read
        everything fetches next).

        Args:
            offset: An absolute offset.

        Returns:
            The position, or None when unknown (use `find_batch`).
        """
        if offset == self.base_offset:
            return 0
        return self._recent_starts.get(offset)

    def find_position(self, offset: int) -> int | None:
        """Byte position of the batch holding ``offset``.

        Kafka's ``LogSegment.translateOffset``.

        Args:
            offset: An absolute offset.

        Returns:
            The position of the first batch whose last offset is ``>= offset``,
                or ``None`` if the segment ends before ``offset``.
        """
        info = self.find_batch(offset)
        return None if info is None else info.position

    def find_offset_by_timestamp(self, timestamp: int) -> BatchInfo | None:
        """The first batch whose largest timestamp is ``>= timestamp``.

        Time index lookup (largest entry ``<= timestamp``), offset index lookup of
        that entry's offset, then a walk over batch headers (Kafka's
        ``LogSegment.findOffsetByTimestamp``, at batch level). A time index entry
        that does not match its batch marks the index suspect and the walk
        restarts from byte 0.

        Args:
            timestamp: Milliseconds since the epoch.

        Returns:
            That batch, or ``None``.
        """
        entry = self.timeindex.lookup(timestamp)
        if entry is not None:
            entry_ts, entry_offset = entry
            _, start = self.index.lookup(entry_offset)
            try:
                checked = False
                for info in self.iter_batches(start):
                    if not checked and info.last_offset >= entry_offset:
                        checked = True
                        if info.max_timestamp != entry_ts or info.base_offset > entry_offset:
                            raise _BadIndex(
                                f"entry ({entry_ts}, {entry_offset}) but that batch has largest timestamp {info.max_timestamp}"
                            )
                    if checked and info.max_timestamp >= timestamp:
                        return info
                if not checked:
                    raise _BadIndex(f"entry ({entry_ts}, {entry_offset}) is past the end of the segment")
                return None
            except (_BadIndex, CorruptRecordError) as exc:
                self._suspect("time index", str(exc))
        return self._scan_for(lambda info: info.max_timestamp >= timestamp)

    def read(self, position: int, max_bytes: int) -> bytes:
        """Read the ``.log`` file from byte ``position``, never past ``size``.

        Args:
            position: Where to start, in bytes from the start of the file.
            max_bytes: The most bytes to return; the tail may cut a batch.

        Returns:
            The bytes; empty at or past the end.
        """
        end = min(self._size, position + max(0, max_bytes))
        if position < 0 or position >= end:
            return b""
        with self._log.use() as fd:
            out = os.pread(fd, end - position, position)
            while len(out) < end - position:  # short read (rare on regular files)
                more = os.pread(fd, end - position - len(out), position + len(out))
                if not more:
                    break
                out += more
        return out

    # ------------------------------------------------------------ tail state

    def _ensure_tail(self) -> None:
        """Compute last offset, largest timestamp and its offset of a
        segment opened without recovery, by walking from the last index
        entries to the end of the file."""
        if self._tail_known:
            return
        t_ts, t_off = self.timeindex.last_entry
        start = self.index.last_entry[1]
        max_ts, off_max = -1, self.base_offset - 1
        if t_ts >= 0:
            start = min(start, self.index.lookup(t_off)[1])
            max_ts, off_max = t_ts, t_off
        last = self.base_offset - 1
        try:
            for info in self.iter_batches(start):
                last = info.last_offset
                if info.max_timestamp > max_ts:
                    max_ts, off_max = info.max_timestamp, info.last_offset
        except CorruptRecordError as exc:
            logger.warning("segment %s: %s", self.log_path, exc)
        if self._last_offset is None:
            self._last_offset = last
        self._max_timestamp, self._offset_of_max = max_ts, off_max
        self._tail_known = True

    # ------------------------------------------------------------ writing

    def roll_due(self, total: int, last_offset: int, now_ms: int, config: LogConfig) -> bool:
        """Whether an append of ``total`` bytes ending at ``last_offset`` must
        go to a new segment (Kafka's ``LogSegment.shouldRoll``): this one holds
        data and would pass ``segment_bytes``, its relative offsets would
        overflow, an index reached ``index_max_bytes``, or its first batch is
        older than ``roll_ms`` at ``now_ms`` (``config``: the log's
        `LogConfig`). Returns whether to roll first (the log says why)."""
        size = self._size
        if not size:
            return False
        if size + total > config.segment_bytes or last_offset - self.base_offset > _INT32_MAX:
            return True
        max_bytes = config.index_max_bytes
        if self._index_room_for != max_bytes:
            if self.index.is_full(max_bytes) or self.timeindex.is_full(max_bytes):
                return True
            self._index_room_for = max_bytes
        base = self.rolling_base_ms if self._rolling_base_ms is None else self._rolling_base_ms
        return base is not None and now_ms - base > config.roll_ms

    def _index_batch(self, base_offset: int, last_offset: int, position: int, size: int, max_timestamp: int) -> None:
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max = last_offset
        if self._bytes_since_index is None:
            self._bytes_since_index = position - self.index.last_entry[1]
        if self._bytes_since_index > self.index_interval_bytes:
            self._index_room_for = -1
            self.index.append(base_offset, position)
            self.timeindex.maybe_append(self._max_timestamp, self._offset_of_max)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def append(
        self, data: Buffer, first_offset: int, last_offset: int, now_ms: int | None = None, batches: Sequence[BatchInfo] | None = None
    ) -> None:
        """Write whole batches at the end of the ``.log`` file and index them.

        Args:
            data (bytes | bytearray | memoryview): One or more complete batches
                already carrying offsets ``first_offset``..``last_offset``.
            first_offset: The first offset in ``data``.
            last_offset: The last offset in ``data``.
            now_ms: The append time in ms, for `rolling_base_ms` (default: wall
                clock).
            batches: The batches of ``data`` with their offsets and positions
                in ``data``, as the log placed them (``None``: read from
                ``data``).

        Raises:
            ValueError: ``data`` is not whole batches, the offsets do not match
                it or do not follow the segment's last offset, or the segment
                would outgrow the int32 positions / relative offsets.
            OSError: The write failed (the file is truncated back first).
        """
        view = memoryview(data).cast("B")
        n = len(view)
        if not n:
            return
        if batches is None:
            batches = list(scan_batches(view))
        self._check_append(view, batches, first_offset, last_offset)
        start = self._size
        self._log.write_at(view, start)
        if start == 0:
            self._rolling_base_ms = clock.now_ms() if now_ms is None else now_ms
        recent = self._recent_starts
        for info in batches:
            self._index_batch(info.base_offset, info.last_offset, start + info.position, info.size, info.max_timestamp)
            if info.magic == 2:
                recent[info.base_offset] = start + info.position
        while len(recent) > _RECENT_STARTS:
            del recent[next(iter(recent))]
        self._size = start + n
        self._last_offset = last_offset

    def append_batch(self, data: bytearray, base_offset: int, last_offset: int, max_timestamp: int, now_ms: int) -> None:
        """`append` of exactly one v2 batch (the leader's common Produce append,
        `kclient.storage.log.Log.append`) without a `BatchInfo`: the same checks,
        write, indexes and tail state. ``data``: the whole batch, with offsets
        ``base_offset``..``last_offset``; ``now_ms``: the append time (ms)."""
        n = len(data)
        start = self._size
        previous = self._last_offset if self._tail_known and self._last_offset is not None else self.last_offset
        if base_offset <= previous or last_offset < base_offset:
            raise ValueError(f"segment {self.log_path}: offsets {base_offset}..{last_offset} do not follow {previous}")
        if last_offset - self.base_offset > _INT32_MAX or start + n > _INT32_MAX:
            raise ValueError(f"segment {self.log_path}: append of {n} bytes at {base_offset}..{last_offset} overflows the segment")
        self._log.write_at(data, start)
        if start == 0:
            self._rolling_base_ms = now_ms
        self._index_batch(base_offset, last_offset, start, n, max_timestamp)
        recent = self._recent_starts
        recent[base_offset] = start
        if len(recent) > _RECENT_STARTS:
            del recent[next(iter(recent))]
        self._size = start + n
        self._last_offset = last_offset

    def _check_append(self, view: memoryview, batches: Sequence[BatchInfo], first_offset: int, last_offset: int) -> None:
        """The checks of `append`: ``batches`` cover ``view`` and hold
        ``first_offset``..``last_offset``, which follow the segment's last
        offset and fit its int32 positions and relative offsets."""
        n = len(view)
        if first_offset <= self.last_offset or last_offset < first_offset:
            raise ValueError(f"segment {self.log_path}: offsets {first_offset}..{last_offset} do not follow {self.last_offset}")
        if last_offset - self.base_offset > _INT32_MAX or self._size + n > _INT32_MAX:
            raise ValueError(f"segment {self.log_path}: append of {n} bytes at {first_offset}..{last_offset} overflows the segment")
        covered = batches[0].size if len(batches) == 1 else sum(i.size for i in batches)
        if covered != n:
            raise ValueError(f"segment {self.log_path}: append data holds {n - covered} bytes of a partial batch")
        head, tail = batches[0], batches[-1]
        # (a compressed v0/v1 wrapper shows only its last inner offset)
        first_wrapper = head.magic != 2 and view[head.position + V01_ATTRIBUTES_AT] & ATTR_CODEC_MASK
        if (head.base_offset != first_offset and not (first_wrapper and head.last_offset >= first_offset)) or tail.last_offset != last_offset:
            raise ValueError(
                f"segment {self.log_path}: batches hold {head.base_offset}..{tail.last_offset}, not {first_offset}..{last_offset}"
            )

    def truncate_to(self, offset: int) -> int:
        """Remove every batch that holds an offset ``>= offset``, whole.

        The cut falls at the start of the batch holding ``offset``, so a batch
        straddling it goes entirely (Kafka truncates to batch boundaries;
        ``LogSegment.truncateTo``). The ``.log`` file is truncated and
        fsync-ed, the index entries at or after the cut are removed, and the
        last offset and largest timestamp are recomputed from what is left.

        Args:
            offset: An absolute offset.

        Returns:
            The number of bytes removed (0 if the segment ends before
                ``offset``).

        Raises:
            OSError: An I/O failure.
        """
        info = self.find_batch(offset)
        if info is None:
            return 0
        position = info.position
        removed = self._size - position
        # Entries name batches by the offset they carry (a compressed v0/v1
        # wrapper carries its last inner offset), so every entry at or after
        # the cut names an offset >= that of the batch at the cut, and every
        # entry before it a lower one.
        self.index.truncate_to(info.base_offset)
        self.timeindex.truncate_to(info.base_offset)
        self.txn_index.truncate_to(info.base_offset)
        self._recent_starts = {o: p for o, p in self._recent_starts.items() if p < position}
        with self._log.use() as fd:
            os.ftruncate(fd, position)
        self._size = position
        self._last_offset = None
        self._tail_known = False
        self._ensure_tail()  # walks from the last index entries, as after open
        self._bytes_since_index = position - self.index.last_entry[1]
        if not position:
            self._rolling_base_ms = None
        self.flush()
        logger.info("segment %s: truncated %d bytes at byte %d; last offset is now %d", self.log_path, removed, position, self._last_offset)
        return removed

    def mark_inactive(self) -> None:
        """Called when the segment stops being the active one (rolled):
        add the final time index entry so its last entry carries the
        segment's largest timestamp (Kafka's ``onBecomeInactiveSegment``)."""
        self._ensure_tail()
        self._index_room_for = -1
        self.timeindex.maybe_append(self._max_timestamp, self._offset_of_max)

    def drop_descriptors(self) -> bool:
        """Close the segment's descriptors that no one uses now; the
        segment stays usable and opens its files again when read (called
        for a segment that has just become inactive).

        Returns:
            Whether a descriptor was closed.
        """
        return self._log.drop()

    # ------------------------------------------------------------ recovery

    def rebuild_indexes(self) -> None:
        """Rebuild the ``.index`` and ``.timeindex`` from the batches in
        bytes 0..size, at the usual cadence plus a final time index entry.
        The index arrays are replaced, so concurrent readers keep a
        consistent (if temporarily sparser) view, and the tail state is
        assigned only at the end. Clears `index_suspect`."""
        self._index_room_for = -1
        self.index.reset()
        self.timeindex.reset()
        interval = self.index_interval_bytes
        since = 0
        max_ts, off_max = -1, self.base_offset - 1
        last = self.base_offset - 1
        for info, _, _ in walk_batches(self._log, self.log_path, 0, self._size, whole=True):
            if info.max_timestamp > max_ts:
                max_ts, off_max = info.max_timestamp, info.last_offset
            if since > interval:
                self.index.append(info.base_offset, info.position)
                self.timeindex.maybe_append(max_ts, off_max)
                since = 0
            since += info.size
            last = info.last_offset
        self.timeindex.maybe_append(max_ts, off_max)
        self.index.flush(fsync=False)
        self.timeindex.flush(fsync=False)
        self._bytes_since_index = since
        self._max_timestamp, self._offset_of_max = max_ts, off_max
        if self._last_offset is None or last > self._last_offset:
            self._last_offset = last
        self._tail_known = True
        self.index_suspect = False

    def recover(self, allow_gaps: bool = False) -> int:
        """Validate every batch from byte 0 and cut the file after the last valid one.

        A batch is valid when complete, with a possible header, offsets
        contiguous from ``base_offset`` (with ``allow_gaps``, as in a
        compacted log: increasing from ``base_offset``) and a matching CRC.
        Both indexes are rebuilt and ``size``, ``last_offset`` and the
        largest timestamp set. Kafka's ``LogSegment.recover``.

        Args:
            allow_gaps: Accept a batch starting above the previous batch's
                end (Kafka documentation, "Log Compaction": cleaned
                segments keep each retained record's offset).

        Returns:
            The number of bytes truncated (logged at WARNING when non-zero).
        """
        with self._log.use() as fd:
            file_size = os.fstat(fd).st_size
        self._index_room_for = -1
        self.index.reset()
        self.timeindex.reset()
        self._bytes_since_index = 0
        self._max_timestamp, self._offset_of_max = -1, self.base_offset - 1
        valid_end = 0
        expected = self.base_offset
        last = self.base_offset - 1
        reason = None
        try:
            for info, buf, off in walk_batches(self._log, self.log_path, 0, file_size, whole=True):
                wrapper = info.magic != 2 and buf[off + V01_ATTRIBUTES_AT] & ATTR_CODEC_MASK
                if wrapper and info.last_offset < expected:
                    # A compressed v0/v1 wrapper carries its last inner offset only.
                    reason = f"message set at byte {info.position} ends at offset {info.last_offset}, expected at least {expected}"
                elif not wrapper and (info.base_offset < expected if allow_gaps else info.base_offset != expected):
                    # Offsets are contiguous in this log (no compaction), so a
                    # gap means damage to the base offset, which no CRC covers.
                    reason = f"batch at byte {info.position} has offset {info.base_offset}, expected {expected}"
                elif info.last_offset < info.base_offset:
                    reason = f"batch at byte {info.position} has last offset {info.last_offset} below its base {info.base_offset}"
                elif info.last_offset - self.base_offset > _INT32_MAX:
                    reason = f"batch at byte {info.position} has offset {info.last_offset}, too far from base {self.base_offset}"
                elif not batch_crc_ok(buf, off, info):
                    reason = f"batch at byte {info.position} (offset {info.base_offset}) fails its CRC"
                if reason:
                    break
                self._index_batch(info.base_offset, info.last_offset, info.position, info.size, info.max_timestamp)
                valid_end = info.position + info.size
                expected = info.last_offset + 1
                last = info.last_offset
        except CorruptRecordError as exc:
            reason = str(exc)
        truncated = file_size - valid_end
        if truncated:
            reason = reason or f"partial batch at byte {valid_end}"
            logger.warning(
                "segment %s: recovery truncated %d bytes at byte %d (last valid offset %d): %s",
                self.log_path,
                truncated,
                valid_end,
                last,
                reason,
            )
            with self._log.use() as fd:
                os.ftruncate(fd, valid_end)
        self._size = valid_end
        self._last_offset = last
        self._tail_known = True
        self._rolling_base_ms = None
        self.timeindex.maybe_append(self._max_timestamp, self._offset_of_max)
        self.index.flush(fsync=False)
        self.timeindex.flush(fsync=False)
        self.index_suspect = False
        return truncated

    def verify_tail(self) -> bool:
        """Cheap check of a segment trusted after a clean shutdown: the
        batches from the last index entry end exactly at the end of the
        file and the last one's CRC matches. ``False`` means the segment
        should be recovered."""
        start = self.index.last_entry[1]
        last = None
        try:
            for info, buf, off in walk_batches(self._log, self.log_path, start, self._size):
                last = (info, bytes(memoryview(buf)[off : off + info.size]))
        except CorruptRecordError:
            return False
        if last is None:
            return self._size == 0
        info, data = last
        return info.position + info.size == self._size and batch_crc_ok(data, 0, info)

    # ------------------------------------------------------------ lifecycle

    def prepare_flush(self) -> None:
        """Write buffered index entries to their files (no fsync); call
        under the writer's lock before `sync`."""
        self.index.flush(fsync=False)
        self.timeindex.flush(fsync=False)

    def sync(self) -> None:
        """``os.fsync`` the log, index and time index files (safe alongside
        appends; the caller holds a reference)."""
        with self._log.use() as fd:
            os.fsync(fd)
        self.index.sync()
        self.timeindex.sync()
        self.txn_index.flush()

    def flush(self) -> None:
        """Write buffered index entries and ``os.fsync`` the log and both
        indexes."""
        self.prepare_flush()
        self.sync()

    def close(self) -> None:
        """Write buffered index entries (nothing is fsync-ed) and close the
        files, at once or, if readers hold references, when the last one is
        released. Idempotent."""
        with self._ref_lock:
            if self._retired:
                return
            self._retired = True
            finish = self._refs == 0 and not self._released
            if finish:
                self._released = True
        if finish:
            self._release_files()

    def _release_files(self) -> None:
        """Close the descriptors (and unlink the files of a deleted segment)."""
        try:
            for ix in (self.index, self.timeindex, self.txn_index):
                ix.delete() if self.deleted else ix.close()
        finally:
            self._log.close()
            if self.deleted:
                # Once renamed, the original name may already belong to a new
                # segment (a truncated log re-rolls at the same offset).
                deleted_name = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
                for path in (deleted_name,) if self._renamed else (self.log_path, deleted_name):
                    try:
                        path.unlink()
                    except FileNotFoundError:
                        pass

    def delete(self) -> None:
        """Delete the segment (Kafka's "Deletes": data is deleted one log
        segment at a time): its files are renamed ``*.deleted`` at once (a restart
        removes such files instead of loading them) and closed and unlinked
        when no reader holds a reference any more. Idempotent."""
        with self._ref_lock:
            if self.deleted:
                return
            self.deleted = True
            self._retired = True
            if self._refs > 0:
                # Readers still use the files: rename them now (the open
                # descriptors stay valid); the last release unlinks them.
                self._log.rename(self.log_path.with_name(self.log_path.name + DELETED_SUFFIX))
                self._renamed = self._log.path != self.log_path
                for ix in (self.index, self.timeindex, self.txn_index):
                    ix.rename(ix.path.with_name(ix.path.name + DELETED_SUFFIX))
                return
            already_released = self._released
            self._released = True
        if not already_released:
            self._release_files()
            return
        for path in (self.log_path, self.index.path, self.timeindex.path, self.txn_index.path):  # closed before: just unlink
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment({str(self.log_path)!r}, size={self._size})"


__all__ = [
    "DELETED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "TIMEINDEX_SUFFIX",
    "LogSegment",
    "batch_crc_ok",
    "file_stem",
    "fsync_dir",
    "parse_base_offset",
]
