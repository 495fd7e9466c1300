"""One log segment: a ``.log`` file of record batches plus its ``.index``.

Files are named by the segment's base offset zero-padded to 20 digits
(``00000000000000000000.log`` / ``.index``; PROTOCOL-NOTES "Log files").
The ``.log`` file is the exact concatenation of the batches appended, each
already carrying its final offsets, so a fetch can send its bytes as they
are (seed 001: "transferred ... without recopying or conversion").

Recovery follows seed 001 ("On startup a log recovery process ... verifies
that each message entry is valid"): a batch is valid if it lies wholly
inside the file, its header is possible (size, magic), its offsets follow
the previous batch and its CRC matches (CRC-32C for v2 over attributes..end,
CRC32 over magic..end for v0/v1). The file is truncated at the first
invalid batch, which handles both a lost tail and a nonsense block added by
a crash. Modelled on Kafka's ``LogSegment``.

Plain blocking file I/O (``os.pread`` / ``os.pwrite``); no trio.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path
from typing import Iterator

import crc32c

from kclient.errors import CorruptRecordError
from kclient.protocol.records.scan import LOG_OVERHEAD, BatchInfo, read_batch_info, scan_batches
from kclient.storage.index import OffsetIndex

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
_INT32_MAX = 2**31 - 1
_U32 = struct.Struct(">I")
_WALK_CHUNK = 16 * 1024  # bytes per pread when walking from an index entry
_RECOVER_CHUNK = 1024 * 1024  # bytes per pread when walking a whole segment


def file_stem(base_offset: int) -> str:
    """The 20-digit zero-padded file name stem for ``base_offset``."""
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    return f"{base_offset:020d}"


def parse_base_offset(name: str) -> int | None:
    """Base offset from a segment file name such as
    ``00000000000000000042.log``; ``None`` if the name is not one."""
    stem, dot, _ = name.partition(".")
    if not dot or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def batch_crc_ok(buf, position: int, info: BatchInfo) -> bool:
    """Whether the batch/entry described by ``info`` at ``position`` of
    ``buf`` carries a matching checksum: CRC-32C of bytes 21..end for a v2
    batch, CRC32 of bytes 16..end (magic to the end) for a v0/v1 entry
    (PROTOCOL-NOTES "Records")."""
    view = memoryview(buf)
    end = position + info.size
    if info.magic == 2:
        stored = _U32.unpack_from(buf, position + 17)[0]
        return crc32c.crc32c(view[position + 21 : end]) == stored
    stored = _U32.unpack_from(buf, position + LOG_OVERHEAD)[0]
    return (zlib.crc32(view[position + 16 : end]) & 0xFFFFFFFF) == stored


class LogSegment:
    """One ``.log`` + ``.index`` pair holding offsets ``base_offset`` ..
    ``last_offset``.

    Build with :meth:`create` (new empty segment) or :meth:`open` (existing
    files; call :meth:`recover` for the active segment after a restart).
    ``size`` is the number of valid bytes in the ``.log`` file. An index
    entry ``(batch base offset, byte position)`` is added before a batch
    when more than ``index_interval_bytes`` bytes were appended since the
    last entry (Kafka's rule).

    Not thread-safe for concurrent writers; reads (``read``,
    ``find_position``) may run alongside one writer because they never
    look past ``size``. Raises ``OSError`` on I/O failure.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int,
        index: OffsetIndex,
        size: int,
        index_interval_bytes: int,
        last_offset: int | None,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / (file_stem(base_offset) + LOG_SUFFIX)
        self.index = index
        self.index_interval_bytes = index_interval_bytes
        self._fd: int | None = fd
        self._size = size
        self._last_offset = last_offset  # None = not computed yet (lazy)
        self._bytes_since_index = 0
        self.deleted = False

    # ------------------------------------------------------------ construction

    @classmethod
    def create(cls, directory: str | os.PathLike[str], base_offset: int, index_interval_bytes: int = 4096) -> LogSegment:
        """Create a new empty segment in ``directory`` starting at
        ``base_offset``. Raises ``FileExistsError`` if its ``.log`` file
        exists already (an existing ``.index`` without its log is reset)."""
        directory = Path(directory)
        stem = file_stem(base_offset)
        fd = os.open(directory / (stem + LOG_SUFFIX), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            index = OffsetIndex(directory / (stem + INDEX_SUFFIX), base_offset)
            index.reset()
        except BaseException:
            os.close(fd)
            raise
        return cls(directory, base_offset, fd, index, 0, index_interval_bytes, base_offset - 1)

    @classmethod
    def open(cls, directory: str | os.PathLike[str], base_offset: int, index_interval_bytes: int = 4096) -> LogSegment:
        """Open the existing segment ``base_offset`` in ``directory``
        without validating its batches (see :meth:`recover`). ``size`` is
        the file length. A missing index, or one that fails
        :meth:`OffsetIndex.sanity_check`, is rebuilt from the log. Raises
        ``FileNotFoundError`` if the ``.log`` file is missing."""
        directory = Path(directory)
        stem = file_stem(base_offset)
        fd = os.open(directory / (stem + LOG_SUFFIX), os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            index_path = directory / (stem + INDEX_SUFFIX)
            had_index = index_path.exists()
            index = OffsetIndex(index_path, base_offset)
        except BaseException:
            os.close(fd)
            raise
        seg = cls(directory, base_offset, fd, index, size, index_interval_bytes, None if size else base_offset - 1)
        if size and (not had_index or not index.sanity_check(size)):
            if had_index:
                logger.warning("segment %s: index %s is corrupt, rebuilding it", seg.log_path, index_path)
            try:
                seg._rebuild_index()
            except BaseException:
                seg.close()
                raise
        else:
            seg._bytes_since_index = size - index.last_entry[1]
        return seg

    # ------------------------------------------------------------ properties

    @property
    def size(self) -> int:
        """Bytes of valid batches in the ``.log`` file."""
        return self._size

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`delete` was called."""
        return self._fd is None

    @property
    def last_offset(self) -> int:
        """Last offset held (``base_offset - 1`` when empty). Computed on
        first use for a segment opened without :meth:`recover` by walking
        from the last index entry."""
        if self._last_offset is None:
            last = self.base_offset - 1
            try:
                for info in self.iter_batches(self.index.last_entry[1]):
                    last = info.last_offset
            except CorruptRecordError as exc:
                logger.warning("segment %s: %s", self.log_path, exc)
            self._last_offset = last
        return self._last_offset

    @property
    def next_offset(self) -> int:
        """``last_offset + 1``: the offset the next batch appended would get."""
        return self.last_offset + 1

    @property
    def mtime(self) -> int:
        """Modification time of the ``.log`` file in ms since the epoch
        (what ListOffsets v0 pairs with the segment's base offset)."""
        return os.fstat(self._require_fd()).st_mtime_ns // 1_000_000

    def _require_fd(self) -> int:
        if self._fd is None:
            raise ValueError(f"segment {self.log_path} is closed")
        return self._fd

    # ------------------------------------------------------------ walking

    def _walk(self, start: int, end: int, chunk: int | None = None) -> Iterator[tuple[BatchInfo, bytes, int]]:
        """Yield ``(info with absolute position, chunk, position in chunk)``
        for each complete batch in bytes ``start``..``end`` of the file,
        pread-ing ``chunk`` bytes at a time (more for a batch that does not
        fit). Stops silently at a partial batch at ``end``; raises
        :class:`CorruptRecordError` naming the file and absolute byte
        position at an impossible header."""
        fd = self._require_fd()
        if chunk is None:
            chunk = _WALK_CHUNK
        pos = start
        want = chunk
        while pos < end:
            n = min(want, end - pos)
            buf = os.pread(fd, n, pos)
            off = 0
            try:
                while True:
                    info = read_batch_info(buf, off)
                    if info is None:
                        break
                    yield (
                        BatchInfo(pos + off, info.base_offset, info.last_offset, info.size, info.magic, info.max_timestamp),
                        buf,
                        off,
                    )
                    off += info.size
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"{self.log_path}: impossible batch at byte {pos + off} ({exc})") from exc
            if off == 0:
                # The batch at ``pos`` does not fit in what was read.
                if len(buf) < n or n >= end - pos or len(buf) < LOG_OVERHEAD:
                    return  # partial batch at the end
                need = LOG_OVERHEAD + struct.unpack_from(">i", buf, 8)[0]
                if need > end - pos:
                    return  # partial batch at the end
                want = max(chunk, need)
            else:
                want = chunk
            pos += off

    def iter_batches(self, position: int = 0) -> Iterator[BatchInfo]:
        """Yield :class:`BatchInfo` (absolute ``position``) for each batch
        from byte ``position`` (a batch start) to ``size``. Raises
        :class:`CorruptRecordError` at an impossible header."""
        for info, _, _ in self._walk(position, self._size):
            yield info

    def find_batch(self, offset: int) -> BatchInfo | None:
        """The first batch whose ``last_offset >= offset``, found by an
        index lookup and a walk over batch headers; ``None`` if every
        batch of the segment ends before ``offset``."""
        _, start = self.index.lookup(offset)
        for info in self.iter_batches(start):
            if info.last_offset >= offset:
                return info
        return None

    def find_position(self, offset: int) -> int | None:
        """Byte position of the batch holding ``offset`` (the first batch
        whose last offset is ``>= offset``), or ``None`` if the segment ends
        before ``offset``. Kafka's ``LogSegment.translateOffset``."""
        info = self.find_batch(offset)
        return None if info is None else info.position

    def read(self, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` bytes from byte ``position``, never past
        ``size`` (the tail may cut a batch). Empty at or past the end."""
        end = min(self._size, position + max(0, max_bytes))
        if position < 0 or position >= end:
            return b""
        return os.pread(self._require_fd(), end - position, position)

    # ------------------------------------------------------------ writing

    def _index_batch(self, offset: int, position: int, size: int) -> None:
        if self._bytes_since_index > self.index_interval_bytes:
            self.index.append(offset, position)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def append(self, data, first_offset: int, last_offset: int) -> None:
        """Write ``data`` (bytes-like: one or more complete batches already
        carrying offsets ``first_offset``..``last_offset``) at the end of
        the ``.log`` file and index it. Raises ``ValueError`` if the data
        is not whole batches, the offsets do not match it or do not follow
        ``last_offset``, or the segment would outgrow the int32 positions /
        relative offsets; ``OSError`` (after truncating back) if the write
        fails."""
        view = memoryview(data).cast("B")
        n = len(view)
        if not n:
            return
        if first_offset <= self.last_offset or last_offset < first_offset:
            raise ValueError(f"segment {self.log_path}: offsets {first_offset}..{last_offset} do not follow {self.last_offset}")
        if last_offset - self.base_offset > _INT32_MAX or self._size + n > _INT32_MAX:
            raise ValueError(f"segment {self.log_path}: append of {n} bytes at {first_offset}..{last_offset} overflows the segment")
        infos = list(scan_batches(view))
        covered = sum(i.size for i in infos)
        if covered != n:
            raise ValueError(f"segment {self.log_path}: append data holds {n - covered} bytes of a partial batch")
        if infos[0].base_offset != first_offset or infos[-1].last_offset != last_offset:
            raise ValueError(
                f"segment {self.log_path}: batches hold {infos[0].base_offset}..{infos[-1].last_offset}, "
                f"not {first_offset}..{last_offset}"
            )
        fd = self._require_fd()
        start = self._size
        try:
            written = 0
            while written < n:
                written += os.pwrite(fd, view[written:], start + written)
        except BaseException:
            try:
                os.ftruncate(fd, start)
            except OSError:
                logger.exception("segment %s: could not truncate back to %d bytes after a failed write", self.log_path, start)
            raise
        for info in infos:
            self._index_batch(info.base_offset, start + info.position, info.size)
        self._size = start + n
        self._last_offset = last_offset

    # ------------------------------------------------------------ recovery

    def _rebuild_index(self) -> None:
        """Rebuild the index from the batches in bytes 0..size."""
        self.index.reset()
        self._bytes_since_index = 0
        last = self.base_offset - 1
        for info, _, _ in self._walk(0, self._size, _RECOVER_CHUNK):
            self._index_batch(info.base_offset, info.position, info.size)
            last = info.last_offset
        self._last_offset = last

    def recover(self) -> int:
        """Validate every batch from byte 0 (complete, possible header,
        offsets increasing from ``base_offset``, CRC), truncate the ``.log``
        file after the last valid batch, rebuild the index and set ``size``
        and ``last_offset``. Returns the number of bytes truncated (logged at
        WARNING when non-zero). Seed 001 "log recovery"; Kafka's
        ``LogSegment.recover``."""
        fd = self._require_fd()
        file_size = os.fstat(fd).st_size
        self.index.reset()
        self._bytes_since_index = 0
        valid_end = 0
        expected = self.base_offset
        last = self.base_offset - 1
        reason = None
        try:
            for info, buf, off in self._walk(0, file_size, _RECOVER_CHUNK):
                if info.base_offset < expected:
                    reason = f"batch at byte {info.position} has offset {info.base_offset}, expected >= {expected}"
                elif info.last_offset < info.base_offset:
                    reason = f"batch at byte {info.position} has last offset {info.last_offset} below its base {info.base_offset}"
                elif info.last_offset - self.base_offset > _INT32_MAX:
                    reason = f"batch at byte {info.position} has offset {info.last_offset}, too far from base {self.base_offset}"
                elif not batch_crc_ok(buf, off, info):
                    reason = f"batch at byte {info.position} (offset {info.base_offset}) fails its CRC"
                if reason:
                    break
                self._index_batch(info.base_offset, info.position, info.size)
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
            os.ftruncate(fd, valid_end)
        self._size = valid_end
        self._last_offset = last
        return truncated

    # ------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        """Write buffered index entries and ``os.fsync`` the log and index."""
        self.index.flush(fsync=True)
        os.fsync(self._require_fd())

    def close(self) -> None:
        """Close both files (buffered index entries are written, nothing is
        fsync-ed). Idempotent."""
        try:
            self.index.close()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def delete(self) -> None:
        """Close and remove both files (seed 001: "Data is deleted one log
        segment at a time")."""
        self.close()
        self.deleted = True
        self.index.delete()
        try:
            self.log_path.unlink()
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"LogSegment({str(self.log_path)!r}, size={self._size})"
