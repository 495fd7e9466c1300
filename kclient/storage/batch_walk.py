"""Walking the batches of a segment file with few reads, and checking a
batch's checksum.

A segment's ``.log`` file is the concatenation of its batches (Kafka
documentation https://kafka.apache.org/documentation/#messageformat);
every format starts with the offset int64 and the size int32, so a walk
reads a chunk, takes each complete batch in it
(`kclient.protocol.records.scan`) and reads on from the first one that did
not fit. `walk_batches` reads everything (recovery, index rebuilds),
`walk_headers` only the headers, skipping bodies unread (finding a fetch's
first batch). The descriptor is pinned for each read only, never across a
``yield``. Used by `kclient.storage.segment.LogSegment`.
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from collections.abc import Iterator

import crc32c

from kclient.errors import CorruptRecordError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.scan import HEADER_FACTS_BYTES, LOG_OVERHEAD, MAGIC_AT, BatchInfo, read_batch_header, read_batch_info
from kclient.protocol.records.v2 import CRC_AT as V2_CRC_AT
from kclient.protocol.records.v2 import CRC_START as V2_CRC_START
from kclient.storage.handles import CachedFile

#: Bytes per pread when walking from an index entry.
WALK_CHUNK = 16 * 1024
#: Bytes per pread when walking headers to find a batch.
FIND_CHUNK = 4 * 1024
#: Bytes per pread when walking a whole segment.
RECOVER_CHUNK = 1024 * 1024
_U32 = struct.Struct(">I")
_SIZE = struct.Struct(">i")


def batch_crc_ok(buf: Buffer | mmap.mmap, position: int, info: BatchInfo) -> bool:
    """Whether the batch/entry described by ``info`` carries a matching checksum.

    CRC-32C of bytes 21..end (attributes to the end) for a v2 batch, CRC32
    of bytes 16..end (magic to the end) for a v0/v1 entry (Kafka
    documentation https://kafka.apache.org/documentation/#messageformat,
    "Record Batch" and "Old Message Format"; `kclient.protocol.records.v2`,
    `kclient.protocol.records.legacy`).

    Args:
        buf (bytes | bytearray | memoryview | mmap.mmap): The segment's data.
        position: The batch's byte position in ``buf``.
        info: The batch's facts, from `kclient.protocol.records.scan`.

    Returns:
        Whether the checksum matches.
    """
    view = memoryview(buf)
    end = position + info.size
    if info.magic == 2:
        stored: int = _U32.unpack_from(buf, position + V2_CRC_AT)[0]
        return bool(crc32c.crc32c(view[position + V2_CRC_START : end]) == stored)
    stored = _U32.unpack_from(buf, position + LOG_OVERHEAD)[0]
    return (zlib.crc32(view[position + MAGIC_AT : end]) & 0xFFFFFFFF) == stored


def walk_batches(file: CachedFile, name: object, start: int, end: int, whole: bool = False) -> Iterator[tuple[BatchInfo, bytes, int]]:
    """Walk the complete batches in bytes ``start``..``end`` of a file.

    Reads `WALK_CHUNK` bytes at a time (`RECOVER_CHUNK` with ``whole``),
    more for a batch that does not fit.

    Args:
        file: The ``.log`` file.
        name: What error messages call the file (its path).
        start: A batch start, in bytes.
        end: Where to stop, in bytes.
        whole: The walk covers a whole segment: read larger chunks.

    Yields:
        ``(info with absolute position, chunk, position in chunk)`` per
        batch; a partial batch at ``end`` stops the walk silently.

    Raises:
        kclient.errors.CorruptRecordError: An impossible header; the message
            names the file and the absolute byte position.
    """
    chunk = RECOVER_CHUNK if whole else WALK_CHUNK
    pos = start
    want = chunk
    while pos < end:
        n = min(want, end - pos)
        with file.use() as fd:
            buf = os.pread(fd, n, pos)
        off = 0
        try:
            while True:
                info = read_batch_info(buf, off)
                if info is None:
                    break
                yield (BatchInfo(pos + off, info.base_offset, info.last_offset, info.size, info.magic, info.max_timestamp), buf, off)
                off += info.size
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{name}: impossible batch at byte {pos + off} ({exc})") from exc
        if off == 0:
            # The batch at ``pos`` does not fit in what was read.
            if len(buf) < n or n >= end - pos or len(buf) < LOG_OVERHEAD:
                return  # partial batch at the end
            need = LOG_OVERHEAD + _SIZE.unpack_from(buf, 8)[0]
            if need > end - pos:
                return  # partial batch at the end
            want = max(chunk, need)
        else:
            want = chunk
        pos += off


def walk_headers(file: CachedFile, name: object, start: int, end: int) -> Iterator[BatchInfo]:
    """Walk the batch headers from byte ``start``, reading headers only.

    One header first, then `FIND_CHUNK` bytes at a time; a batch's body is
    skipped unread when the next header lies past what was read (finding a
    fetch's first batch reads a few KB, not the batches before it).

    Args:
        file: The ``.log`` file.
        name: What error messages call the file (its path).
        start: A batch start, in bytes.
        end: The end of the valid bytes.

    Yields:
        The `BatchInfo` (absolute ``position``) of each complete batch; a
        partial batch at the end stops the walk silently.

    Raises:
        kclient.errors.CorruptRecordError: An impossible header; the message
            names the file and the absolute byte position.
    """
    pos = start
    buf = b""
    base = start  # buf holds the file's bytes base .. base + len(buf)
    # The first read takes one header only: the batch an index entry (or a
    # fetch position) names is often the one wanted, and copying 4 KB of
    # cold page cache for 43 bytes costs more than a second pread.
    chunk = HEADER_FACTS_BYTES
    while pos < end:
        try:
            info = read_batch_header(buf, pos - base) if pos - base < len(buf) else None
            if info is None:
                with file.use() as fd:
                    buf = os.pread(fd, min(chunk, end - pos), pos)
                chunk = max(FIND_CHUNK, HEADER_FACTS_BYTES)
                base = pos
                info = read_batch_header(buf, 0)
                if info is None:
                    return  # a partial header at the end
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{name}: impossible batch at byte {pos} ({exc})") from exc
        if pos + info.size > end:
            return  # a partial batch at the end
        yield BatchInfo(pos, info.base_offset, info.last_offset, info.size, info.magic, info.max_timestamp)
        pos += info.size


__all__ = ["FIND_CHUNK", "RECOVER_CHUNK", "WALK_CHUNK", "batch_crc_ok", "walk_batches", "walk_headers"]
