"""Compression codecs for record batches and message sets, by Kafka's codec id.

0 none, 1 gzip (stdlib), 2 snappy (python-snappy; written with xerial
framing like the Java client, read framed or raw since librdkafka writes
raw), 3 lz4 (LZ4 frame, independent blocks), 4 zstd (zstandard, decoded as a
stream so several frames may follow each other). The id sits in attributes
bits 0-2 of every message format (Kafka documentation
https://kafka.apache.org/documentation/#messageformat, "Record Batch" and
"Old Message Format"; zstd is KIP-110).

Message format v0/v1 differences (`compress_legacy` /
`decompress_legacy`):

* zstd needs message format v2; a v0/v1 message cannot carry it (Kafka's
  broker answers UNSUPPORTED_COMPRESSION_TYPE).
* lz4 in a magic 0 message keeps the KIP-57 / KAFKA-3160 quirk: before
  Kafka 0.10 the Java client computed the frame descriptor checksum byte
  ``HC`` over the 4-byte frame magic number *and* the descriptor, instead
  of over the descriptor (``FLG``, ``BD`` [, content size]) alone, and did
  not know the content-size field. Kafka keeps that broken ``HC`` as part of
  message format v0: writers use it (``useBrokenFlagDescriptorChecksum =
  magic == 0``) and readers of magic 0 ignore ``HC`` altogether
  (``ignoreFlagDescriptorChecksum``). `compress_lz4_magic0` and
  `decompress_lz4_magic0` do the same. ``HC`` is the second byte of
  the xxHash32 (seed 0) of the covered bytes: ``(xxh32(...) >> 8) & 0xFF``
  (LZ4 frame format specification, "Header Checksum").

Pure: bytes in, bytes out. Every decode failure (corrupt or truncated
payload, unsupported codec) raises `CodecError` (a ``ValueError``)
whose message names the codec; record readers turn it into
`kclient.errors.CorruptRecordError` with the batch offset.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable
from typing import Any

from kclient.protocol.primitives import Buffer

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
#: Attributes bits 0-2 hold the codec id, in every message format (v0, v1 and v2).
ATTR_CODEC_MASK = 0x07
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {v: k for k, v in NAMES.items()}
#: Kafka's ``CompressionType`` enum names, as tools such as DumpLogSegments print them.
JAVA_NAMES = {NONE: "NONE", GZIP: "GZIP", SNAPPY: "SNAPPY", LZ4: "LZ4", ZSTD: "ZSTD"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian
_LZ4_FLG_CONTENT_SIZE = 0x08


class CodecError(ValueError):
    """A payload could not be compressed or decompressed with a codec: the
    data is corrupt or truncated, or the codec is unknown or not allowed for
    the message format. The message names the codec (``"gzip: ..."``)."""


def codec_id(name_or_id: str | int) -> int:
    """Normalise a codec given by name or id to its id.

    Args:
        name_or_id (str | int): ``"gzip"``, ``"snappy"``, ``"lz4"``,
            ``"zstd"``, ``"none"`` or their ids (``1`` for gzip...).

    Returns:
        The codec id (bits 0-2 of the attributes).

    Raises:
        ValueError: Neither a known name nor a known id.
    """
    if isinstance(name_or_id, int) and name_or_id in NAMES:
        return name_or_id
    key = str(name_or_id).strip().lower()
    if key in BY_NAME:
        return BY_NAME[key]
    if key.isdigit() and int(key) in NAMES:
        return int(key)
    raise ValueError(f"unknown compression codec {name_or_id!r} (expected one of {', '.join(BY_NAME)})")


def _snappy() -> Any:
    import snappy

    return snappy


# --------------------------------------------------------------------- xxh32

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """xxHash32 of ``data`` (bytes-like) as an unsigned 32-bit int, written
    from the xxHash specification (used for the LZ4 frame header checksum;
    only a few bytes are ever hashed, so pure Python is enough)."""
    data = bytes(data)
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (w,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + w * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_descriptor_end(frame: bytes) -> int:
    """Index of the HC byte of an LZ4 frame (7, or 15 with a content size)."""
    if len(frame) < 7 or frame[:4] != LZ4_FRAME_MAGIC:
        raise CodecError("lz4: not an LZ4 frame (bad magic number or truncated header)")
    end = 6 + (8 if frame[4] & _LZ4_FLG_CONTENT_SIZE else 0)
    if len(frame) <= end:
        raise CodecError("lz4: truncated frame header")
    return end


def lz4_header_checksum(frame: Buffer, *, broken: bool = False) -> int:
    """The HC byte an LZ4 frame header should carry: over the descriptor
    (correct, LZ4 spec) or, with ``broken``, over magic number + descriptor
    (Kafka < 0.10 and message format v0, KAFKA-3160)."""
    frame = bytes(frame)
    end = _lz4_descriptor_end(frame)
    return (xxh32(frame[0 if broken else 4 : end]) >> 8) & 0xFF


# --------------------------------------------------------------------- compress


def compress(codec: int, data: bytes) -> bytes:
    """Compress ``data`` the way the Java client does for message format v1/v2.

    gzip with mtime 0; xerial-framed snappy in 32 KiB chunks; one LZ4 frame
    with independent blocks; one zstd frame.

    Args:
        codec: The codec id.
        data: The uncompressed bytes.

    Returns:
        The compressed bytes.

    Raises:
        ValueError: ``codec`` is not a known id.
    """
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

        compressed: bytes = lz4.frame.compress(data, block_linked=False, content_checksum=False)
        return compressed
    if codec == ZSTD:
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(f"unknown codec id {codec}")


# --------------------------------------------------------------------- decompress


def _gunzip(data: bytes) -> bytes:
    try:
        return gzip.decompress(data)
    except EOFError:
        raise CodecError(f"gzip: truncated payload ({len(data)} bytes)") from None
    except (OSError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise CodecError(f"gzip: corrupt payload: {exc}") from None


def _unsnappy(data: bytes) -> bytes:
    snappy = _snappy()
    try:
        if data[:8] != XERIAL_MAGIC:
            raw: bytes = snappy.decompress(data)
            return raw
        if len(data) < _XERIAL_HEADER.size:
            raise CodecError("snappy: truncated xerial header")
        out = bytearray()
        pos = _XERIAL_HEADER.size
        while pos < len(data):
            if pos + 4 > len(data):
                raise CodecError(f"snappy: truncated xerial block length at byte {pos}")
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if n < 0 or pos + n > len(data):
                raise CodecError(f"snappy: xerial block of {n} bytes at byte {pos} runs past the payload ({len(data)} bytes)")
            out += snappy.decompress(data[pos : pos + n])
            pos += n
        return bytes(out)
    except CodecError:
        raise
    except Exception as exc:  # snappy.UncompressError and friends
        raise CodecError(f"snappy: corrupt payload: {exc or type(exc).__name__}") from None


def _frames(name: str, data: bytes, new_decoder: Callable[[], Any], errors: type[BaseException] | tuple[type[BaseException], ...]) -> bytes:
    """Decompress one or more frames that follow each other in ``data``
    (a streaming decoder per frame, ``new_decoder()``; its ``eof`` and
    ``unused_data`` say where the frame ended). A frame cut short or any
    ``errors`` raised by the library become `CodecError` naming the codec."""
    out = bytearray()
    rest = data
    try:
        while rest:
            dec = new_decoder()
            out += dec.decompress(rest)
            if not dec.eof:
                raise CodecError(f"{name}: truncated frame ({len(data)} bytes)")
            rest = dec.unused_data
    except CodecError:
        raise
    except errors as exc:
        raise CodecError(f"{name}: corrupt payload: {exc}") from None
    return bytes(out)


def _unlz4(data: bytes) -> bytes:
    import lz4.frame

    # RuntimeError is what liblz4 raises for a corrupt frame.
    return _frames("lz4", data, lz4.frame.LZ4FrameDecompressor, Exception)


def _unzstd(data: bytes) -> bytes:
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    return _frames("zstd", data, dctx.decompressobj, zstandard.ZstdError)


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress ``data`` written with ``codec``.

    Snappy: xerial framing (Java) or a raw block (librdkafka). LZ4 and zstd:
    one or more whole frames one after another.

    Args:
        codec: The codec id.
        data (bytes | bytearray | memoryview): The compressed bytes.

    Returns:
        The uncompressed bytes.

    Raises:
        CodecError: A corrupt or truncated payload (the message names the
            codec) or an unknown id.
    """
    data = bytes(data)
    if codec == NONE:
        return data
    if codec == GZIP:
        return _gunzip(data)
    if codec == SNAPPY:
        return _unsnappy(data)
    if codec == LZ4:
        return _unlz4(data)
    if codec == ZSTD:
        return _unzstd(data)
    raise CodecError(f"unknown codec id {codec}")


# --------------------------------------------------------------------- message format v0/v1


def compress_lz4_magic0(data: bytes) -> bytes:
    """LZ4-compress ``data`` for a magic 0 message as Kafka 0.8/0.9 (and
    Kafka's v0 writer since) frame it: one frame, independent blocks, no
    content size, no checksums, and the broken header checksum over
    magic + FLG + BD (KAFKA-3160). With 64 KiB blocks the header is
    ``04 22 4D 18 60 40 1A`` (Kafka's ``testLZ4FramingV0``)."""
    import lz4.frame

    frame = bytearray(lz4.frame.compress(data, block_linked=False, content_checksum=False, store_size=False))
    end = _lz4_descriptor_end(bytes(frame[:16]))
    frame[end] = lz4_header_checksum(bytes(frame[: end + 1]), broken=True)
    return bytes(frame)


def decompress_lz4_magic0(data: Buffer) -> bytes:
    """Decompress the LZ4 value of a magic 0 message.

    The header checksum byte is ignored, as Kafka's reader does for magic 0,
    so both the broken KAFKA-3160 checksum and a correct one are accepted.

    Args:
        data (bytes | bytearray | memoryview): The message value.

    Returns:
        The uncompressed bytes.

    Raises:
        CodecError: Anything else about the frame is wrong.
    """
    frame = bytearray(data)
    end = _lz4_descriptor_end(bytes(frame[:16]))
    frame[end] = lz4_header_checksum(bytes(frame[: end + 1]))
    return _unlz4(bytes(frame))


def check_legacy_codec(codec: int, magic: int) -> None:
    """Check that ``codec`` may compress a message of format ``magic``.

    zstd is v2 only; ids above 4 are unknown.

    Args:
        codec: The codec id.
        magic: The message format, 0 or 1.

    Raises:
        CodecError: ``codec`` is not allowed for ``magic``.
    """
    if magic not in (0, 1):
        raise CodecError(f"magic {magic} is not a v0/v1 message format")
    if codec == ZSTD:
        raise CodecError(
            f"zstd: message format v{magic} cannot carry zstd (codec 4 needs magic 2; "
            "Kafka answers UNSUPPORTED_COMPRESSION_TYPE)"
        )
    if codec not in NAMES:
        raise CodecError(f"unknown codec id {codec}")


def compress_legacy(codec: int, data: bytes, magic: int) -> bytes:
    """Compress the inner message set of a v0/v1 wrapper message.

    As `compress`, except lz4 for magic 0 (`compress_lz4_magic0`).

    Args:
        codec: The codec id.
        data: The inner message set bytes.
        magic: The wrapper's format, 0 or 1.

    Returns:
        The wrapper message's value.

    Raises:
        CodecError: zstd (v2 only) or an unknown codec.
    """
    check_legacy_codec(codec, magic)
    if codec == LZ4 and magic == 0:
        return compress_lz4_magic0(data)
    return compress(codec, data)


def decompress_legacy(codec: int, data: Buffer, magic: int) -> bytes:
    """Decompress a v0/v1 wrapper message's value.

    As `decompress`, except lz4 for magic 0 (`decompress_lz4_magic0`).

    Args:
        codec: The codec id.
        data (bytes | bytearray | memoryview): The wrapper's value.
        magic: The wrapper's format, 0 or 1.

    Returns:
        The inner message set bytes.

    Raises:
        CodecError: zstd, an unknown codec or a bad payload.
    """
    check_legacy_codec(codec, magic)
    if codec == LZ4 and magic == 0:
        return decompress_lz4_magic0(data)
    return decompress(codec, data)
