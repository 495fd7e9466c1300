"""Kafka protocol primitive types: fixed-width integers, varints, strings,
bytes and their compact (flexible-version) forms.

Pure functions over ``bytes``/``bytearray``/``memoryview``: encoders append to
a ``bytearray``; decoders take ``(buf, pos)`` and return ``(value, new_pos)``.
Truncated input raises `kclient.errors.ProtocolError`.

Source: Kafka protocol guide, "Protocol Primitive Types"; record varints are
zigzag encoded (Kafka documentation
https://kafka.apache.org/documentation/#record, "Record"), protocol varints
are unsigned.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from collections.abc import Callable
from typing import Any, TypeAlias

from kclient.errors import ProtocolError

#: What the decoders read from: a whole frame or a slice of one.
Buffer: TypeAlias = bytes | bytearray | memoryview
#: A decoder: ``(buf, pos) -> (value, position after it)``.
Reader: TypeAlias = Callable[[Buffer, int], "tuple[Any, int]"]
#: An encoder: appends a value's bytes to ``out``.
Writer: TypeAlias = Callable[[bytearray, Any], None]

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")


def _fixed(st: struct.Struct) -> tuple[Writer, Reader]:
    size = st.size
    pack = st.pack
    unpack_from = st.unpack_from

    def write(out: bytearray, value: float) -> None:
        out += pack(value)

    def read(buf: Buffer, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise ProtocolError(f"truncated: need {size} bytes at {pos}, have {len(buf) - pos}")
        return unpack_from(buf, pos)[0], pos + size

    return write, read


write_int8, read_int8 = _fixed(INT8)
write_int16, read_int16 = _fixed(INT16)
write_int32, read_int32 = _fixed(INT32)
write_int64, read_int64 = _fixed(INT64)
write_uint32, read_uint32 = _fixed(UINT32)
write_float64, read_float64 = _fixed(FLOAT64)


def write_bool(out: bytearray, value: bool) -> None:
    """Append a BOOLEAN: one byte, 1 for true, 0 for false."""
    out.append(1 if value else 0)


def read_bool(buf: Buffer, pos: int) -> tuple[bool, int]:
    """Read a BOOLEAN (any non-zero byte is true); ProtocolError if truncated."""
    if pos >= len(buf):
        raise ProtocolError(f"truncated: need a boolean at {pos}")
    return buf[pos] != 0, pos + 1


# --- varints --------------------------------------------------------------


def write_uvarint(out: bytearray, value: int) -> None:
    """Append ``value`` as an unsigned LEB128 varint (7 bits a byte).

    Args:
        out: The buffer to append to.
        value: The integer to write; must be >= 0.

    Raises:
        ValueError: ``value`` is negative.
    """
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes for 32 bits, 10 for 64).

    Args:
        buf (bytes | bytearray | memoryview): The bytes to read from.
        pos: Offset of the varint's first byte in ``buf``.

    Returns:
        (tuple[int, int]): The value and the offset just after the varint.

    Raises:
        kclient.errors.ProtocolError: The varint is truncated or longer
            than 10 bytes.
    """
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise ProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtocolError("varint longer than 10 bytes")


def zigzag_encode(value: int) -> int:
    """Map a signed 64-bit int to an unsigned one (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    return (value << 1) ^ (value >> 63)


def zigzag_decode(value: int) -> int:
    """Inverse of `zigzag_encode`."""
    return (value >> 1) ^ -(value & 1)


def write_varint(out: bytearray, value: int) -> None:
    """Append a signed zigzag varint (the varints of a v2 record)."""
    write_uvarint(out, zigzag_encode(value))


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a signed zigzag varint."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def uvarint_size(value: int) -> int:
    """Bytes taken by ``value`` (>= 0) as an unsigned varint (7 bits a byte)."""
    return 1 if value < 0x80 else 2 if value < 0x4000 else 3 if value < 0x200000 else (value.bit_length() + 6) // 7


def varint_size(value: int) -> int:
    """Bytes taken by ``value`` as a zigzag varint."""
    return uvarint_size(zigzag_encode(value))


# --- strings and bytes -------------------------------------------------------


def _take(buf: Buffer, pos: int, length: int) -> tuple[Buffer, int]:
    end = pos + length
    if end > len(buf):
        raise ProtocolError(f"truncated: need {length} bytes at {pos}, have {len(buf) - pos}")
    return buf[pos:end], end


def write_string(out: bytearray, value: str | None) -> None:
    """Append a (NULLABLE_)STRING: int16 length + UTF-8 bytes.

    Args:
        out: The buffer to append to.
        value: The string; ``None`` is written as length -1.

    Raises:
        ValueError: The UTF-8 encoding is longer than 32767 bytes.
    """
    if value is None:
        out += b"\xff\xff"
        return
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes exceeds 32767")
    out += INT16.pack(len(data))
    out += data


def _utf8(raw: Buffer) -> str:
    """``raw`` decoded as UTF-8; ProtocolError if it is not UTF-8."""
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"string is not UTF-8: {exc}") from None


def read_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    """Read an int16-length (NULLABLE_)STRING.

    Args:
        buf (bytes | bytearray | memoryview): The bytes to read from.
        pos: Offset of the length field in ``buf``.

    Returns:
        (tuple[str | None, int]): The string (``None`` for length -1) and the
            offset just after it.

    Raises:
        kclient.errors.ProtocolError: Truncated input, a negative length
            other than -1, or bytes that are not UTF-8.
    """
    length, pos = read_int16(buf, pos)
    if length < 0:
        if length != -1:
            raise ProtocolError(f"bad string length {length}")
        return None, pos
    raw, pos = _take(buf, pos, length)
    return _utf8(raw), pos


def write_bytes(out: bytearray, value: Buffer | None) -> None:
    """int32 length + bytes; ``None`` is length -1 (NULLABLE_BYTES)."""
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(value))
    out += value


def read_bytes(buf: Buffer, pos: int) -> tuple[Buffer | None, int]:
    """Read int32-length (NULLABLE_)BYTES.

    Args:
        buf (bytes | bytearray | memoryview): The bytes to read from.
        pos: Offset of the length field in ``buf``.

    Returns:
        (tuple[bytes | memoryview | None, int]): A slice of ``buf`` (a
            memoryview if ``buf`` is one, so large record sets are not
            copied; ``None`` for length -1) and the offset after it.

    Raises:
        kclient.errors.ProtocolError: Truncated input or a negative length
            other than -1.
    """
    length, pos = read_int32(buf, pos)
    if length < 0:
        if length != -1:
            raise ProtocolError(f"bad bytes length {length}")
        return None, pos
    return _take(buf, pos, length)


def write_compact_string(out: bytearray, value: str | None) -> None:
    """Unsigned varint length+1 (0 = null) + UTF-8 bytes."""
    write_compact_bytes(out, None if value is None else value.encode("utf-8"))


def read_compact_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    """Read a COMPACT_(NULLABLE_)STRING (uvarint length+1, 0 = None).

    Returns:
        (tuple[str | None, int]): The string or ``None``, and the offset after
            it.

    Raises:
        kclient.errors.ProtocolError: Truncated input or bytes that are not
            UTF-8.
    """
    raw, pos = read_compact_bytes(buf, pos)
    if raw is None:
        return None, pos
    return _utf8(raw), pos


def write_compact_bytes(out: bytearray, value: Buffer | None) -> None:
    """Append COMPACT_(NULLABLE_)BYTES (uvarint length+1, 0 = None)."""
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    out += value


def read_compact_bytes(buf: Buffer, pos: int) -> tuple[Buffer | None, int]:
    """Read COMPACT_(NULLABLE_)BYTES (uvarint length+1, 0 = None).

    Returns:
        (tuple[bytes | memoryview | None, int]): A slice of ``buf`` or
            ``None``, and the offset after it.

    Raises:
        kclient.errors.ProtocolError: Truncated input.
    """
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return _take(buf, pos, n - 1)


def write_uuid(out: bytearray, value: _uuid.UUID | bytes | None) -> None:
    """Append a UUID (16 bytes).

    Args:
        out: The buffer to append to.
        value (uuid.UUID | bytes | None): A UUID, its 16 raw bytes, or
            ``None`` for the all-zero UUID.
    """
    if value is None:
        out += bytes(16)
    elif isinstance(value, _uuid.UUID):
        out += value.bytes
    else:
        out += bytes(value)


def read_uuid(buf: Buffer, pos: int) -> tuple[_uuid.UUID, int]:
    """Read a 16-byte UUID as `uuid.UUID`."""
    raw, pos = _take(buf, pos, 16)
    return _uuid.UUID(bytes=bytes(raw)), pos


def write_tagged_fields(out: bytearray, fields: dict[int, bytes] | None = None) -> None:
    """Write a tagged-field section (flexible versions).

    Args:
        out: The buffer to append to.
        fields: Raw field bytes by tag; written in ascending tag order.
            Empty or ``None`` is written as a single 0 byte.
    """
    if not fields:
        out.append(0)
        return
    write_uvarint(out, len(fields))
    for tag in sorted(fields):
        write_uvarint(out, tag)
        write_uvarint(out, len(fields[tag]))
        out += fields[tag]


def read_tagged_fields(buf: Buffer, pos: int) -> tuple[dict[int, bytes], int]:
    """Read a tagged-field section (flexible versions).

    Returns:
        (tuple[dict[int, bytes], int]): The raw bytes of every tagged field by
            tag (unknown tags included) and the offset after the section.

    Raises:
        kclient.errors.ProtocolError: Truncated input.
    """
    count, pos = read_uvarint(buf, pos)
    fields: dict[int, bytes] = {}
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        raw, pos = _take(buf, pos, size)
        fields[tag] = bytes(raw)
    return fields, pos
