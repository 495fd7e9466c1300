"""Sparse offset index of one log segment (the ``.index`` file).

Layout (Kafka's ``OffsetIndex``, the ``.index`` file of a segment): a flat array
of 8-byte big-endian entries, each an int32 offset relative to the
segment's base offset and the int32 byte position in the ``.log`` file of
the batch that starts at that offset. Entries are strictly increasing in
both fields and sparse: the segment adds one about every
``index_interval_bytes`` of log (see `kclient.storage.segment`).

The index is a pure accelerator: it can always be rebuilt from the
``.log`` file, so writes are buffered in memory and reach the file on
`OffsetIndex.flush` / `OffsetIndex.close` (or every 4 KiB of
entries). A crash loses at most the buffered tail, which only makes the
index sparser, never wrong.

`IndexFile` holds what the offset index and the time index
(`kclient.storage.timeindex`) share: two int64 columns in memory, a
buffered append-only file, truncation, flush and close.

Indexes are lazy, as Kafka's ``LazyIndex`` is since 2.x (KAFKA-7283):
the entries are read on the first lookup or append, not when the segment
is opened, and the file is a `kclient.storage.handles.CachedFile` that
holds a descriptor only while it is read or written (and while it stays
among the recently used files of the process-wide cache).
"""

from __future__ import annotations

import abc
import logging
import os
import struct
import threading
from array import array
from bisect import bisect_right
from pathlib import Path

from kclient.storage.handles import CachedFile

logger = logging.getLogger(__name__)

ENTRY = struct.Struct(">ii")
ENTRY_SIZE = ENTRY.size  # 8 bytes
_INT32_MAX = 2**31 - 1
_WRITE_BUFFER_BYTES = 4096


class IndexFile(abc.ABC):
    """Base of the segment index files.

    Entries of two integer columns are kept in memory (``array('q')``) and
    appended to a file in a fixed binary layout. Subclasses set `ENTRY` (a
    ``struct.Struct`` of one entry) and implement `_decode` (file fields ->
    column values) and `_encode` (column values -> file bytes). Not
    thread-safe for writers; readers only touch the in-memory columns.

    Entries are read from the file on first use (`loaded`); the file is
    opened only to read, write, truncate or sync it.

    Args:
        path: The index file; created if missing when first used. A
            trailing partial entry is dropped (WARNING) on load.
        base_offset: The segment's base offset.

    Raises:
        OSError: An I/O failure.
    """

    ENTRY: struct.Struct = ENTRY
    KIND = "index"

    def __init__(self, path: str | os.PathLike[str], base_offset: int) -> None:
        # Written a few times per index_interval_bytes * 512 bytes of log and
        # read once: no descriptor lingers after use.
        self._file = CachedFile(path, create=True, linger=False)
        self.base_offset = int(base_offset)
        # Both columns in one tuple, replaced as a whole on truncation so a
        # lock-free reader always bisects a consistent pair of arrays;
        # appends grow the current arrays in place. ``None`` until the
        # file is first needed (Kafka's ``LazyIndex``, KAFKA-7283).
        self._loaded: tuple[array[int], array[int]] | None = None
        self._load_lock = threading.Lock()
        self._pending = bytearray()  # encoded entries not yet written
        self._persisted = 0

    @property
    def path(self) -> Path:
        """The index file's current name."""
        return self._file.path

    @property
    def loaded(self) -> bool:
        """Whether the entries were read from the file (on first use)."""
        return self._loaded is not None

    @property
    def _cols(self) -> tuple[array[int], array[int]]:
        cols = self._loaded
        if cols is None:
            with self._load_lock:
                cols = self._loaded
                if cols is None:
                    cols = self._loaded = self._load()
        return cols

    @_cols.setter
    def _cols(self, cols: tuple[array[int], array[int]]) -> None:
        self._loaded = cols

    # ------------------------------------------------------------ codec

    @abc.abstractmethod
    def _decode(self, x: int, y: int) -> tuple[int, int]:
        """An entry's two stored ints as (key, value)."""

    @abc.abstractmethod
    def _encode(self, a: int, b: int) -> bytes:
        """An entry's bytes on disk."""

    def _load(self) -> tuple[array[int], array[int]]:
        col_a, col_b = array("q"), array("q")
        try:
            fd = self._file.pin()
        except ValueError:
            return (col_a, col_b)  # closed or deleted: nothing left to read
        try:
            size = os.fstat(fd).st_size
            entry_size = self.ENTRY.size
            usable = size - size % entry_size
            if usable != size:
                logger.warning("%s %s: dropping %d trailing bytes of a partial entry", self.KIND, self.path, size - usable)
                os.ftruncate(fd, usable)
            data = os.pread(fd, usable, 0) if usable else b""
        finally:
            self._file.unpin()
        if len(data) != usable:
            raise OSError(f"{self.KIND} {self.path}: short read ({len(data)} of {usable} bytes)")
        for x, y in self.ENTRY.iter_unpack(data):
            a, b = self._decode(x, y)
            col_a.append(a)
            col_b.append(b)
        self._persisted = len(col_a)
        return (col_a, col_b)

    # ------------------------------------------------------------ queries

    def __len__(self) -> int:
        """Number of entries."""
        return len(self._a)

    @property
    def size_bytes(self) -> int:
        """Bytes the entries take in the file (written or still buffered)."""
        return len(self._a) * self.ENTRY.size

    def is_full(self, max_bytes: int) -> bool:
        """Whether the segment must roll because its index is full.

        Kafka's ``isFull`` against ``segment.index.bytes``.

        Args:
            max_bytes: The index size limit in bytes.

        Returns:
            Whether the index holds ``max_bytes // entry size`` entries or more.
        """
        cols = self._loaded  # (loaded on first use: `_cols`)
        return len((cols if cols is not None else self._cols)[0]) >= max(1, max_bytes // self.ENTRY.size)

    # ------------------------------------------------------------ updates

    @property
    def _a(self) -> array[int]:
        return self._cols[0]

    @property
    def _b(self) -> array[int]:
        return self._cols[1]

    def _add(self, a: int, b: int) -> None:
        col_a, col_b = self._cols
        col_a.append(a)
        col_b.append(b)
        self._pending += self._encode(a, b)
        if len(self._pending) >= _WRITE_BUFFER_BYTES:
            self._write_pending()

    def reset(self) -> None:
        """Remove every entry (before a rebuild); creates the file if missing."""
        if self._loaded is None:
            with self._load_lock:
                if self._loaded is None:  # nothing to read: just empty the file
                    self._pending.clear()
                    with self._file.use() as fd:
                        os.ftruncate(fd, 0)
                    self._persisted = 0
                    self._loaded = (array("q"), array("q"))
                    return
        self._truncate_entries(0)

    def _truncate_entries(self, keep: int) -> None:
        col_a, col_b = self._cols
        if keep >= len(col_a):
            return
        self._cols = (col_a[:keep], col_b[:keep])  # new arrays: readers keep the old pair
        size = self.ENTRY.size
        if keep >= self._persisted:
            del self._pending[(keep - self._persisted) * size :]
        else:
            self._pending.clear()
            with self._file.use() as fd:
                os.ftruncate(fd, keep * size)
            self._persisted = keep

    def _write_pending(self) -> None:
        if not self._pending:
            return
        data = memoryview(bytes(self._pending))
        pos = self._persisted * self.ENTRY.size
        with self._file.use() as fd:
            while data:
                n = os.pwrite(fd, data, pos)
                data = data[n:]
                pos += n
        self._persisted += len(self._pending) // self.ENTRY.size
        self._pending.clear()

    def flush(self, fsync: bool = True) -> None:
        """Write buffered entries to the file.

        Args:
            fsync: Also ``os.fsync`` the file.

        Raises:
            OSError: An I/O failure.
        """
        self._write_pending()
        if fsync:
            self.sync()

    def sync(self) -> None:
        """``os.fsync`` the file without writing buffered entries (call
        ``flush(fsync=False)`` first, under the writer's lock).

        The file is opened for it if no descriptor is open (``fsync``
        flushes the file, whichever descriptor wrote the data).
        """
        with self._file.use() as fd:
            os.fsync(fd)

    @property
    def closed(self) -> bool:
        """Whether `close` or `delete` was called."""
        return self._file.closed

    def close(self) -> None:
        """Write buffered entries (no fsync) and close the file. Idempotent."""
        if self._file.closed:
            return
        try:
            self._write_pending()
        finally:
            self._file.close()

    def abandon(self) -> None:
        """Close the file without writing the buffered entries (its log
        directory failed, KIP-112: nothing is written there again).
        Idempotent."""
        self._pending.clear()
        self._file.close()

    def delete(self) -> None:
        """Close and remove the file (missing file is not an error)."""
        self._file.close()
        self._pending.clear()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def rename(self, path: str | os.PathLike[str]) -> None:
        """Rename the file; an open descriptor stays valid and later opens
        use the new name.

        Used to mark a deleted segment's files ``.deleted``.

        Args:
            path: The new path.
        """
        self._file.rename(path)


class OffsetIndex(IndexFile):
    """In-memory plus on-disk sparse offset index for one segment.

    Entries are kept in two ``array('q')`` columns (absolute offsets, byte
    positions) so `lookup` is a ``bisect``. ``append`` raises ``ValueError``
    for an entry that would break the ordering or does not fit the int32
    fields.

    Source: Kafka's ``OffsetIndex`` / ``AbstractIndex`` (no mmap or
    preallocation here: the file holds exactly the entries written).

    Args:
        path: The ``.index`` file (created if missing; a trailing partial
            entry is dropped on load).
        base_offset: The segment's base offset, which the stored relative
            offsets are added to.

    Raises:
        OSError: An I/O failure.
    """

    ENTRY = ENTRY
    KIND = "index"

    def _decode(self, rel: int, pos: int) -> tuple[int, int]:
        return self.base_offset + rel, pos

    def _encode(self, offset: int, position: int) -> bytes:
        return ENTRY.pack(offset - self.base_offset, position)

    # ------------------------------------------------------------------ queries

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(absolute offset, byte position)`` of the last entry, or
        ``(base_offset, 0)`` when the index is empty."""
        offsets, positions = self._cols
        if not offsets:
            return (self.base_offset, 0)
        return (offsets[-1], positions[-1])

    def entries(self) -> list[tuple[int, int]]:
        """All entries as ``(absolute offset, byte position)`` pairs."""
        offsets, positions = self._cols
        return list(zip(offsets, positions))

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset ``<= offset``.

        The caller then walks batches forward from the returned position.

        Args:
            offset: An absolute offset.

        Returns:
            ``(absolute offset, byte position)``; ``(base_offset, 0)`` if there
                is no such entry.
        """
        offsets, positions = self._cols
        i = bisect_right(offsets, offset) - 1
        if i < 0:
            return (self.base_offset, 0)
        return (offsets[i], positions[i])

    def sanity_check(self, log_size: int) -> bool:
        """Check the index the way Kafka's ``sanityCheck`` does.

        Args:
            log_size: Size of the segment's ``.log`` file in bytes.

        Returns:
            True if entries strictly increase in offset and position, offsets
                are ``>= base_offset`` and every position is ``< log_size``. A
                failing index should be rebuilt.
        """
        prev_off, prev_pos = self.base_offset - 1, -1
        for off, pos in zip(self._a, self._b):
            if off <= prev_off or pos <= prev_pos or pos >= log_size:
                return False
            prev_off, prev_pos = off, pos
        return True

    # ------------------------------------------------------------------ updates

    def append(self, offset: int, position: int) -> None:
        """Add an entry for the batch that starts at byte ``position``.

        Args:
            offset: The batch's absolute offset.
            position: The batch's byte position in the ``.log`` file.

        Raises:
            ValueError: ``offset`` or ``position`` is not larger than the last
                entry's, or does not fit the int32 fields.
        """
        rel = offset - self.base_offset
        if not (0 <= rel <= _INT32_MAX) or not (0 <= position <= _INT32_MAX):
            raise ValueError(f"index {self.path}: entry ({offset}, {position}) does not fit relative to base {self.base_offset}")
        if self._a and (offset <= self._a[-1] or position <= self._b[-1]):
            raise ValueError(
                f"index {self.path}: entry ({offset}, {position}) is not after the last entry "
                f"({self._a[-1]}, {self._b[-1]})"
            )
        self._add(offset, position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset``, in memory and on disk.

        Kafka's ``truncateTo``.

        Args:
            offset: An absolute offset.
        """
        keep = bisect_right(self._a, offset - 1)
        self._truncate_entries(keep)

    def __repr__(self) -> str:
        return f"OffsetIndex({str(self.path)!r}, base_offset={self.base_offset}, entries={len(self)})"
