"""Sparse offset index of one log segment (the ``.index`` file).

Layout (PROTOCOL-NOTES "Log files"; Kafka's ``OffsetIndex``): a flat array
of 8-byte big-endian entries, each an int32 offset relative to the
segment's base offset and the int32 byte position in the ``.log`` file of
the batch that starts at that offset. Entries are strictly increasing in
both fields and sparse: the segment adds one about every
``index_interval_bytes`` of log (see :mod:`kclient.storage.segment`).

The index is a pure accelerator: it can always be rebuilt from the
``.log`` file, so writes are buffered in memory and reach the file on
:meth:`OffsetIndex.flush` / :meth:`OffsetIndex.close` (or every 4 KiB of
entries). A crash loses at most the buffered tail, which only makes the
index sparser, never wrong.
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

logger = logging.getLogger(__name__)

ENTRY = struct.Struct(">ii")
ENTRY_SIZE = ENTRY.size  # 8 bytes
_INT32_MAX = 2**31 - 1
_WRITE_BUFFER_BYTES = 4096


class OffsetIndex:
    """In-memory plus on-disk sparse offset index for one segment.

    ``path``: the ``.index`` file (created if missing; a trailing partial
    entry is dropped on load). ``base_offset``: the segment's base offset,
    which the stored relative offsets are added to.

    Entries are kept in two ``array('q')`` columns (absolute offsets, byte
    positions) so :meth:`lookup` is a ``bisect``. Raises ``OSError`` on I/O
    failure and ``ValueError`` for an entry that would break the ordering
    or does not fit the int32 fields.

    Source: Kafka's ``OffsetIndex`` / ``AbstractIndex`` (no mmap or
    preallocation here: the file holds exactly the entries written).
    """

    def __init__(self, path: str | os.PathLike[str], base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = int(base_offset)
        self._offsets = array("q")
        self._positions = array("q")
        self._pending = bytearray()  # encoded entries not yet written
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._load()
        except BaseException:
            os.close(self._fd)
            self._fd = None
            raise

    def _load(self) -> None:
        size = os.fstat(self._fd).st_size
        usable = size - size % ENTRY_SIZE
        if usable != size:
            logger.warning("index %s: dropping %d trailing bytes of a partial entry", self.path, size - usable)
            os.ftruncate(self._fd, usable)
        data = os.pread(self._fd, usable, 0) if usable else b""
        base = self.base_offset
        for rel, pos in ENTRY.iter_unpack(data):
            self._offsets.append(base + rel)
            self._positions.append(pos)
        self._persisted = len(self._offsets)

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        """Number of entries."""
        return len(self._offsets)

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(absolute offset, byte position)`` of the last entry, or
        ``(base_offset, 0)`` when the index is empty."""
        if not self._offsets:
            return (self.base_offset, 0)
        return (self._offsets[-1], self._positions[-1])

    def entries(self) -> list[tuple[int, int]]:
        """All entries as ``(absolute offset, byte position)`` pairs."""
        return list(zip(self._offsets, self._positions))

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset ``<= offset`` as
        ``(absolute offset, byte position)``; ``(base_offset, 0)`` if there
        is none. The caller then walks batches forward from that position."""
        i = bisect_right(self._offsets, offset) - 1
        if i < 0:
            return (self.base_offset, 0)
        return (self._offsets[i], self._positions[i])

    def sanity_check(self, log_size: int) -> bool:
        """True if entries are strictly increasing in offset and position,
        offsets are ``>= base_offset`` and every position is ``< log_size``
        bytes (Kafka's ``sanityCheck``). A failing index should be rebuilt."""
        prev_off, prev_pos = self.base_offset - 1, -1
        for off, pos in zip(self._offsets, self._positions):
            if off <= prev_off or pos <= prev_pos or pos >= log_size:
                return False
            prev_off, prev_pos = off, pos
        return True

    # ------------------------------------------------------------------ updates

    def append(self, offset: int, position: int) -> None:
        """Add the entry ``(offset, position)``: ``offset`` absolute, of the
        batch that starts at byte ``position`` of the ``.log`` file. Both
        must be larger than the last entry's and fit the int32 fields
        (``ValueError`` otherwise)."""
        rel = offset - self.base_offset
        if not (0 <= rel <= _INT32_MAX) or not (0 <= position <= _INT32_MAX):
            raise ValueError(f"index {self.path}: entry ({offset}, {position}) does not fit relative to base {self.base_offset}")
        if self._offsets and (offset <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(
                f"index {self.path}: entry ({offset}, {position}) is not after the last entry "
                f"({self._offsets[-1]}, {self._positions[-1]})"
            )
        self._offsets.append(offset)
        self._positions.append(position)
        self._pending += ENTRY.pack(rel, position)
        if len(self._pending) >= _WRITE_BUFFER_BYTES:
            self._write_pending()

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset`` (Kafka's
        ``truncateTo``), in memory and on disk."""
        keep = bisect_right(self._offsets, offset - 1)
        self._truncate_entries(keep)

    def reset(self) -> None:
        """Remove every entry (before a rebuild)."""
        self._truncate_entries(0)

    def _truncate_entries(self, keep: int) -> None:
        if keep >= len(self._offsets):
            return
        del self._offsets[keep:]
        del self._positions[keep:]
        if keep >= self._persisted:
            del self._pending[(keep - self._persisted) * ENTRY_SIZE :]
        else:
            self._pending.clear()
            os.ftruncate(self._require_fd(), keep * ENTRY_SIZE)
            self._persisted = keep

    def _require_fd(self) -> int:
        if self._fd is None:
            raise ValueError(f"index {self.path} is closed")
        return self._fd

    def _write_pending(self) -> None:
        if not self._pending:
            return
        fd = self._require_fd()
        data = memoryview(bytes(self._pending))
        pos = self._persisted * ENTRY_SIZE
        while data:
            n = os.pwrite(fd, data, pos)
            data = data[n:]
            pos += n
        self._persisted += len(self._pending) // ENTRY_SIZE
        self._pending.clear()

    def flush(self, fsync: bool = True) -> None:
        """Write buffered entries to the file and, if ``fsync``, ``os.fsync``
        it. Raises ``OSError`` on I/O failure."""
        self._write_pending()
        if fsync:
            os.fsync(self._require_fd())

    def close(self) -> None:
        """Write buffered entries (no fsync) and close the file. Idempotent."""
        if self._fd is None:
            return
        try:
            self._write_pending()
        finally:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        """Close and remove the file (missing file is not an error)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._pending.clear()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"OffsetIndex({str(self.path)!r}, base_offset={self.base_offset}, entries={len(self)})"
