"""Compression codecs for record batches, by Kafka's codec id.

0 none, 1 gzip (stdlib), 2 snappy (python-snappy; written with xerial
framing like the Java client, read framed or raw since librdkafka writes
raw), 3 lz4 (LZ4 frame, independent blocks), 4 zstd (zstandard, decoded as a
stream so several frames may follow each other). Source: PROTOCOL-NOTES
"Codecs"; seed 002 attributes bits 0-2.

Pure: bytes in, bytes out. Errors from the libraries propagate; callers turn
them into :class:`kclient.errors.CorruptRecordError` with a position.
"""

from __future__ import annotations

import gzip
import io
import struct

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {v: k for k, v in NAMES.items()}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024


def codec_id(name_or_id) -> int:
    """Accept ``"gzip"`` or ``1``; raise ValueError for anything else."""
    if isinstance(name_or_id, int) and name_or_id in NAMES:
        return name_or_id
    key = str(name_or_id).strip().lower()
    if key in BY_NAME:
        return BY_NAME[key]
    if key.isdigit() and int(key) in NAMES:
        return int(key)
    raise ValueError(f"unknown compression codec {name_or_id!r} (expected one of {', '.join(BY_NAME)})")


def _snappy():
    import snappy

    return snappy


def compress(codec: int, data: bytes) -> bytes:
    """Compress ``data`` with ``codec`` (an id)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == SNAPPY:
        snappy = _snappy()
        out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1))
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = snappy.compress(bytes(view[start : start + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block))
            out += block
        return bytes(out)
    if codec == LZ4:
        import lz4.frame

        return lz4.frame.compress(data, block_linked=False, content_checksum=False)
    if codec == ZSTD:
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(f"unknown codec id {codec}")


def decompress(codec: int, data) -> bytes:
    """Decompress ``data`` (bytes-like) written with ``codec``."""
    data = bytes(data)
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.decompress(data)
    if codec == SNAPPY:
        snappy = _snappy()
        if data[:8] == XERIAL_MAGIC:
            out = bytearray()
            pos = 16
            while pos < len(data):
                if pos + 4 > len(data):
                    raise ValueError("truncated xerial snappy block length")
                (n,) = struct.unpack_from(">i", data, pos)
                pos += 4
                if n < 0 or pos + n > len(data):
                    raise ValueError("truncated xerial snappy block")
                out += snappy.decompress(data[pos : pos + n])
                pos += n
            return bytes(out)
        return snappy.decompress(data)
    if codec == LZ4:
        import lz4.frame

        return lz4.frame.decompress(data)
    if codec == ZSTD:
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
            return reader.read()
    raise ValueError(f"unknown codec id {codec}")
