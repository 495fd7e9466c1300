"""Message sets of message format v0 and v1 (magic 0 / magic 1): build,
parse, validate and re-offset.

Layout of one entry (Kafka documentation
https://kafka.apache.org/documentation/#messageset, "Old Message Format";
KIP-32 added the v1 timestamp), all big-endian:

```text
offset      int64   \\ log overhead, 12 bytes
size        int32   /  (bytes that follow)
crc         uint32  CRC32 (zlib) of magic..end
magic       int8    0 or 1
attributes  int8    bits 0-2 codec; bit 3 LogAppendTime (v1 only)
timestamp   int64   v1 only, ms since the epoch (-1 = none)
key         int32 length (-1 = null) + bytes
value       int32 length (-1 = null) + bytes
```

So an entry is 12 + 14 + len(key) + len(value) bytes in v0 and 8 more in v1
(key "key" and value "value" take 34 bytes in v0 and 42 in v1).

Compression: the entry is a *wrapper* with a null key whose value is the
compressed bytes of an inner message set. v0 inner offsets are absolute;
v1 inner offsets are relative 0..n-1 and the wrapper carries the absolute
offset of the last inner message, so a reader computes
``absolute = wrapper_offset - last_inner_offset + inner_offset`` (KIP-31,
relative offsets in compressed message sets). Like Kafka's
``AbstractLegacyRecordBatch``, the formula is applied only when that base
(``wrapper_offset - last_inner_offset``) is not negative: a set a producer
sends carries wrapper offset 0 and its inner offsets are then used as they
are. A v1 wrapper's timestamp is the max inner timestamp (CreateTime); when
its attributes say LogAppendTime every inner message reports the wrapper's
timestamp instead (Kafka: inner ``LegacyRecord`` built with the wrapper's
timestamp and type). Inner messages are never compressed themselves.

Pure functions; errors: `kclient.errors.CorruptRecordError` for data
that fails a check on read, ``ValueError`` /
`kclient.protocol.records.codecs.CodecError` for bad arguments when
building (zstd with magic 0/1, headers, an empty record list).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from kclient.errors import CorruptRecordError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records import codecs
from kclient.protocol.records.scan import LOG_OVERHEAD, MAGIC_AT, MIN_V0_SIZE, MIN_V1_SIZE, scan_batches
from kclient.protocol.records.v2 import ATTR_TIMESTAMP_TYPE, Record

ATTR_CODEC_MASK = codecs.ATTR_CODEC_MASK
# ATTR_TIMESTAMP_TYPE (bit 3, LogAppendTime) is the same bit as in v2; v1 only.
NO_TIMESTAMP = -1

_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes: 18 bytes
_HEAD_SIZE = _HEAD.size
_OFFSET_SIZE = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_CRC_AT = LOG_OVERHEAD  # crc field of an entry, byte 12
_MAGIC_AT = MAGIC_AT
#: Byte position of an entry's attributes (int8).
ATTRIBUTES_AT = 17
_ATTR_AT = ATTRIBUTES_AT
_TS_AT = 18

#: Smallest message (crc..value, without the 12-byte log overhead): 14 bytes
#: in v0 (crc 4 + magic 1 + attributes 1 + key length 4 + value length 4),
#: 22 in v1 (+ timestamp 8); Kafka's ``LegacyRecord.RECORD_OVERHEAD_V0`` / ``_V1``.
RECORD_OVERHEAD = {0: MIN_V0_SIZE, 1: MIN_V1_SIZE}


def message_size(key: Buffer | None, value: Buffer | None, magic: int) -> int:
    """Bytes of one message (crc..value, without the 12-byte log overhead)
    holding ``key``/``value`` (bytes or None)."""
    return RECORD_OVERHEAD[magic] + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)


def _put_bytes(out: bytearray, data: Buffer | None) -> None:
    if data is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(data))
        out += data


def build_message(key: Buffer | None, value: Buffer | None, *, magic: int, timestamp: int | None = None, attributes: int = 0) -> bytes:
    """Encode one v0/v1 message from ``crc`` to the end of ``value``.

    There is no offset / size prefix (see `build_entry`). The CRC is zlib's
    CRC32 over magic..end.

    Args:
        key (bytes | None): Bytes-like, or ``None`` (written with length -1).
        value (bytes | None): Bytes-like, or ``None`` (written with length -1).
        magic: 0 or 1.
        timestamp: Milliseconds since the epoch, v1 only (``None`` gives -1,
            "no timestamp"); ignored for v0, which has no timestamp field.
        attributes: The attributes byte (codec in bits 0-2, LogAppendTime in
            bit 3).

    Returns:
        The message bytes.

    Raises:
        ValueError: ``magic`` is not 0 or 1.
    """
    if magic not in (0, 1):
        raise ValueError(f"magic {magic} is not a v0/v1 message format")
    body = bytearray()
    body.append(magic)
    body.append(attributes & 0xFF)
    if magic == 1:
        body += _I64.pack(NO_TIMESTAMP if timestamp is None else timestamp)
    _put_bytes(body, key)
    _put_bytes(body, value)
    return _U32.pack(zlib.crc32(body) & 0xFFFFFFFF) + bytes(body)


def build_entry(offset: int, message: bytes) -> bytes:
    """Prefix a message (from `build_message`) with its log overhead:
    ``offset`` int64 and ``size`` int32 (= ``len(message)``)."""
    return _OFFSET_SIZE.pack(offset, len(message)) + message


def _split_record(rec: Any) -> tuple[Any, Any, int | None]:
    key, value = rec[0], rec[1]
    ts = rec[2] if len(rec) > 2 else None
    if len(rec) > 3 and rec[3]:
        raise ValueError("message format v0/v1 cannot carry record headers (they need v2)")
    return key, value, ts


def build_message_set(
    records: Iterable[tuple[Any, ...]],
    *,
    magic: int,
    base_offset: int = 0,
    codec: int = codecs.NONE,
    timestamp_type_log_append: bool = False,
) -> bytes:
    """Encode ``records`` as a v0/v1 message set.

    Uncompressed (``codec`` 0): one entry per record, offsets
    ``base_offset + i``. Compressed: one wrapper entry with a null key whose
    value is the ``codec``-compressed inner set; inner offsets are
    ``base_offset + i`` for v0 and ``i`` for v1; the wrapper's offset is the
    last inner offset (``base_offset + n - 1``); a v1 wrapper's timestamp is
    the max inner timestamp.

    Args:
        records: ``(key, value)``, ``(key, value, timestamp_ms)`` or ``(key,
            value, timestamp_ms, headers)`` tuples (the same tuples as
            `kclient.protocol.records.v2.build_batch`; headers must be
            empty, timestamps are dropped for v0 and ``None`` means -1 for
            v1).
        magic: 0 or 1.
        base_offset: The first record's offset.
        codec: A codec id from `codecs`.
        timestamp_type_log_append: Set attribute bit 3 (LogAppendTime) on v1
            messages (on the wrapper only when compressed; inner messages
            are always CreateTime); ignored for v0.

    Returns:
        The message set bytes.

    Raises:
        ValueError: ``records`` is empty, a record has headers, or ``magic``
            is not 0 or 1.
        codecs.CodecError: zstd (magic 2 only) or an unknown codec.
    """
    if magic not in (0, 1):
        raise ValueError(f"magic {magic} is not a v0/v1 message format")
    if codec:
        codecs.check_legacy_codec(codec, magic)
    items = [_split_record(r) for r in records]
    if not items:
        raise ValueError("a message set needs at least one record")
    ts_bit = ATTR_TIMESTAMP_TYPE if (timestamp_type_log_append and magic == 1) else 0
    if not codec:
        out = bytearray()
        for i, (key, value, ts) in enumerate(items):
            out += build_entry(base_offset + i, build_message(key, value, magic=magic, timestamp=ts, attributes=ts_bit))
        return bytes(out)
    inner = bytearray()
    max_ts = NO_TIMESTAMP
    for i, (key, value, ts) in enumerate(items):
        inner_offset = base_offset + i if magic == 0 else i
        inner += build_entry(inner_offset, build_message(key, value, magic=magic, timestamp=ts))
        if ts is not None and ts > max_ts:
            max_ts = ts
    payload = codecs.compress_legacy(codec, bytes(inner), magic)
    wrapper = build_message(None, payload, magic=magic, timestamp=max_ts, attributes=(codec & ATTR_CODEC_MASK) | ts_bit)
    return build_entry(base_offset + len(items) - 1, wrapper)


# --------------------------------------------------------------------- reading


@attrs.frozen(slots=True)
class LegacyMessage:
    """One v0/v1 entry as stored, fields named as in Kafka's ``LegacyRecord``.

    ``offset``: the entry's offset field (absolute; relative for a v1 inner
    message; for a wrapper, its last inner offset). ``size``: total bytes
    including the 12-byte log overhead. ``crc``: the stored CRC (unsigned);
    ``computed_crc``: CRC32 of magic..end as read. ``timestamp``: ms, -1 for
    v0. ``key``/``value``: bytes or None.
    """

    offset: int
    size: int
    crc: int
    computed_crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> int:
        """Codec id from attribute bits 0-2 (0 = none)."""
        return self.attributes & ATTR_CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        """Whether attribute bit 3 (LogAppendTime) is set on a v1 message."""
        return self.magic > 0 and bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_valid(self) -> bool:
        """Whether the stored CRC matches the bytes (Kafka's ``isValid``)."""
        return self.crc == self.computed_crc

    @property
    def timestamp_type(self) -> str:
        """Kafka's ``TimestampType`` name: ``NoTimestampType`` (v0),
        ``CreateTime`` or ``LogAppendTime``."""
        if self.magic == 0:
            return "NoTimestampType"
        return "LogAppendTime" if self.is_log_append_time else "CreateTime"

    @property
    def key_size(self) -> int:
        """Key length in bytes, -1 for a null key."""
        return -1 if self.key is None else len(self.key)

    @property
    def value_size(self) -> int:
        """Value length in bytes, -1 for a null value."""
        return -1 if self.value is None else len(self.value)


def _read_len_bytes(buf: Buffer, pos: int, end: int, what: str, where: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError(f"message at offset {where}: {what} length runs past the message end")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise CorruptRecordError(f"message at offset {where}: {what} length {n} runs past the message end")
    return bytes(buf[pos : pos + n]), pos + n


def read_message(buf: Buffer, position: int = 0) -> LegacyMessage:
    """Parse the complete v0/v1 entry at ``position`` without judging its CRC.

    See `LegacyMessage.is_valid` for the CRC.

    Args:
        buf (bytes | bytearray | memoryview): The record data.
        position: Offset of the entry's first byte (its offset field).

    Returns:
        The parsed entry.

    Raises:
        kclient.errors.CorruptRecordError: ``buf`` ends inside the entry, the
            size is below the v0/v1 minimum, the magic is not 0/1, or the
            key/value lengths do not add up to the size (the message names
            the offset).
    """
    if position + _HEAD_SIZE > len(buf):
        raise CorruptRecordError(f"message entry at byte {position} is truncated")
    offset, size, crc, magic, attributes = _HEAD.unpack_from(buf, position)
    if magic not in (0, 1):
        raise CorruptRecordError(f"message at offset {offset} has magic {magic}, not a v0/v1 message")
    if size < RECORD_OVERHEAD[magic]:
        raise CorruptRecordError(f"message at offset {offset} claims size {size}, below the v{magic} minimum {RECORD_OVERHEAD[magic]}")
    end = position + LOG_OVERHEAD + size
    if end > len(buf):
        raise CorruptRecordError(f"message at offset {offset} is truncated: needs {size} bytes, {len(buf) - position - LOG_OVERHEAD} left")
    pos = position + _TS_AT
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _I64.unpack_from(buf, pos)
        pos += 8
    key, pos = _read_len_bytes(buf, pos, end, "key", offset)
    value, pos = _read_len_bytes(buf, pos, end, "value", offset)
    if pos != end:
        raise CorruptRecordError(f"message at offset {offset} has {end - pos} bytes after its value")
    computed = zlib.crc32(memoryview(buf)[position + _MAGIC_AT : end]) & 0xFFFFFFFF
    return LegacyMessage(offset, size + LOG_OVERHEAD, crc, computed, magic, attributes, timestamp, key, value)


def _check_crc(msg: LegacyMessage, what: str = "message") -> None:
    if not msg.is_valid:
        raise CorruptRecordError(
            f"{what} at offset {msg.offset} fails its CRC32: stored {msg.crc:#010x}, computed {msg.computed_crc:#010x}"
        )


def decompress_inner(wrapper: LegacyMessage, *, check_crc: bool = True) -> list[LegacyMessage]:
    """The inner messages of a compressed wrapper, as stored.

    Offsets are not made absolute (see `absolute_inner`).

    Args:
        wrapper: A compressed v0/v1 message.
        check_crc: Check every inner message's CRC.

    Returns:
        The inner messages in order.

    Raises:
        kclient.errors.CorruptRecordError: The value does not decompress, the
            inner set is empty, ends with a partial message or holds a
            compressed (nested) message, or (when ``check_crc``) an inner
            message fails its CRC; the message names the wrapper offset.
    """
    where = wrapper.offset
    if wrapper.value is None:
        raise CorruptRecordError(f"compressed message at offset {where} has a null value")
    try:
        data = codecs.decompress_legacy(wrapper.codec, wrapper.value, wrapper.magic)
    except codecs.CodecError as exc:
        raise CorruptRecordError(f"cannot decompress message at offset {where}: {exc}") from None
    inner = []
    pos = 0
    while pos < len(data):
        try:
            msg = read_message(data, pos)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"compressed message at offset {where}: inner message set is damaged: {exc}") from None
        if msg.codec != codecs.NONE:
            raise CorruptRecordError(f"compressed message at offset {where} holds a compressed inner message (nested compression)")
        if check_crc:
            _check_crc(msg, f"inner message of the wrapper at offset {where}, inner")
        inner.append(msg)
        pos += msg.size
    if not inner:
        raise CorruptRecordError(f"compressed message at offset {where} holds no inner messages")
    return inner


def absolute_inner(wrapper: LegacyMessage, inner: list[LegacyMessage]) -> list[tuple[int, int, LegacyMessage]]:
    """``(absolute offset, timestamp, inner message)`` for each inner message
    of a compressed wrapper (``inner`` from `decompress_inner`).

    Offsets: for a v1 wrapper, ``base = wrapper.offset - inner[-1].offset``
    and ``absolute = base + inner.offset`` when ``base >= 0``; otherwise
    (v0, or a producer's set whose wrapper offset is still 0) the inner
    offset as stored. Timestamps: the wrapper's when it says LogAppendTime,
    else the inner message's own (-1 for v0). Source: Kafka's
    ``AbstractLegacyRecordBatch.DeepRecordsIterator``."""
    base = wrapper.offset - inner[-1].offset if wrapper.magic > 0 and inner else -1
    log_append = wrapper.is_log_append_time
    return [
        (base + m.offset if base >= 0 else m.offset, wrapper.timestamp if log_append else m.timestamp, m)
        for m in inner
    ]


def iter_entry_records(entry: Buffer, *, check_crc: bool = True) -> Iterator[Record]:
    """The records of one complete v0/v1 entry, with absolute offsets.

    Uncompressed: one record. Compressed: its inner messages, offsets made
    absolute by Kafka's rule (module docstring), timestamps replaced by the
    wrapper's when the wrapper says LogAppendTime; v0 timestamps are -1.
    Headers are always ``()``.

    Args:
        entry (bytes | bytearray | memoryview): The entry's bytes, log
            overhead (offset and size, 12 bytes) included.
        check_crc: Check the CRCs.

    Yields:
        Each `Record`.

    Raises:
        kclient.errors.CorruptRecordError: A CRC mismatch (when
            ``check_crc``) or damaged data; the message names the offset.
    """
    msg = read_message(entry, 0)
    if check_crc:
        _check_crc(msg)
    if msg.codec == codecs.NONE:
        yield Record(msg.offset, msg.timestamp, msg.key, msg.value, ())
        return
    for offset, ts, m in absolute_inner(msg, decompress_inner(msg, check_crc=check_crc)):
        yield Record(offset, ts, m.key, m.value, ())


def iter_legacy_records(buf: Buffer, *, check_crc: bool = True) -> Iterator[Record]:
    """Every record of every complete v0/v1 entry in a message set.

    A partial entry at the end is dropped, as a fetch may cut one. Use
    `kclient.protocol.records.iter_record_set` for data that may mix formats.

    Args:
        buf (bytes | bytearray | memoryview): The message set, e.g. a Fetch
            v0-3 partition's records.
        check_crc: Check the CRCs.

    Yields:
        Each `Record`, with absolute offsets.

    Raises:
        kclient.errors.CorruptRecordError: A CRC mismatch, a damaged entry, an
            undecodable compressed value or a v2 batch; the message names
            the offset.
    """
    view = memoryview(buf)
    for info in scan_batches(view):
        if info.magic not in (0, 1):
            raise CorruptRecordError(f"record batch v{info.magic} at offset {info.base_offset} in a v0/v1 message set")
        yield from iter_entry_records(view[info.position : info.position + info.size], check_crc=check_crc)


# --------------------------------------------------------------------- broker side


@attrs.frozen(slots=True)
class LegacyEntryInfo:
    """What `validate_legacy_entry` learnt about one v0/v1 entry.

    ``offset``/``size``/``crc``/``magic``/``attributes``/``timestamp``: the
    entry's own fields (``size`` includes the 12-byte log overhead; ``crc``
    unsigned). ``codec``: 0-3. ``log_append_time``: attribute bit 3 (v1).
    ``record_count``: 1, or the number of inner messages. ``max_timestamp``:
    ms, the largest (inner) timestamp, -1 for v0. ``inner_offsets``: the
    stored inner offset fields (empty when uncompressed).
    ``relative_offsets``: for v1, whether the inner offsets are exactly
    ``0..n-1`` (then offsets can be assigned in place, as Kafka's
    ``LogValidator`` does; otherwise the set must be re-compressed).
    """

    offset: int
    size: int
    crc: int
    magic: int
    attributes: int
    timestamp: int
    codec: int
    log_append_time: bool
    record_count: int
    max_timestamp: int
    inner_offsets: tuple[int, ...] = ()
    relative_offsets: bool = True


def validate_legacy_entry(buf: Buffer) -> LegacyEntryInfo:
    """Check one complete v0/v1 entry the way a broker does before appending it.

    Checks: ``len(buf)`` equals 12 + the size field; magic 0/1; key/value
    lengths add up; CRC32; for a compressed wrapper also: codec 1-3 (zstd
    needs v2), the value decompresses, at least one inner message, every
    inner message complete, uncompressed, of the wrapper's magic and with a
    matching CRC.

    Args:
        buf (bytes | bytearray | memoryview): Exactly the entry's bytes.

    Returns:
        A description of the entry.

    Raises:
        kclient.errors.CorruptRecordError: Any check fails; the message names
            the offset. The broker answers CORRUPT_MESSAGE (Kafka also uses
            INVALID_RECORD / UNSUPPORTED_COMPRESSION_TYPE for some of these,
            which the caller may distinguish by inspecting the entry first).
    """
    if len(buf) < _HEAD_SIZE:
        raise CorruptRecordError(f"message entry of {len(buf)} bytes is shorter than its header")
    msg = read_message(buf, 0)
    if msg.size != len(buf):
        raise CorruptRecordError(f"message at offset {msg.offset}: size field says {msg.size} bytes, have {len(buf)}")
    _check_crc(msg)
    codec = msg.codec
    if codec == codecs.NONE:
        return LegacyEntryInfo(
            msg.offset, msg.size, msg.crc, msg.magic, msg.attributes, msg.timestamp, codec,
            msg.is_log_append_time, 1, msg.timestamp,
        )
    if codec not in (codecs.GZIP, codecs.SNAPPY, codecs.LZ4):
        raise CorruptRecordError(f"message at offset {msg.offset} uses codec {codec}, not allowed with message format v{msg.magic}")
    inner = decompress_inner(msg)
    for m in inner:
        if m.magic != msg.magic:
            raise CorruptRecordError(f"compressed message at offset {msg.offset}: inner magic {m.magic} does not match wrapper magic {msg.magic}")
    offsets = tuple(m.offset for m in inner)
    relative = msg.magic == 0 or offsets == tuple(range(len(inner)))
    max_ts = max(m.timestamp for m in inner) if msg.magic == 1 else NO_TIMESTAMP
    return LegacyEntryInfo(
        msg.offset, msg.size, msg.crc, msg.magic, msg.attributes, msg.timestamp, codec,
        msg.is_log_append_time, len(inner), max_ts, offsets, relative,
    )


def _rewrite_header(entry: bytearray, offset: int, *, log_append_time: int | None) -> None:
    """Set the offset and, for v1 with ``log_append_time``, the timestamp and
    LogAppendTime bit of an entry in place; recompute its CRC if needed."""
    _I64.pack_into(entry, 0, offset)
    if log_append_time is not None and entry[_MAGIC_AT] == 1:
        entry[_ATTR_AT] |= ATTR_TIMESTAMP_TYPE
        _I64.pack_into(entry, _TS_AT, log_append_time)
        _U32.pack_into(entry, _CRC_AT, zlib.crc32(memoryview(entry)[_MAGIC_AT:]) & 0xFFFFFFFF)


def assign_legacy_offsets(entry: Buffer, base_offset: int, *, log_append_time: int | None = None) -> tuple[bytes, int]:
    """Give one valid v0/v1 entry its log offsets starting at ``base_offset``.

    Uncompressed: the offset field becomes ``base_offset``. Compressed v1
    with inner offsets ``0..n-1``: only the wrapper offset changes, to
    ``base_offset + n - 1`` (no recompression, as Kafka's in-place
    assignment). Compressed v0 (inner offsets are absolute and inside the
    compressed value) or v1 with other inner offsets: the inner set is
    rebuilt with the right offsets and re-compressed with the same codec.

    Args:
        entry (bytes | bytearray | memoryview): The entry, log overhead
            included.
        base_offset: The first offset to assign.
        log_append_time: Milliseconds since the epoch, for v1 only: the
            (wrapper) timestamp becomes it and attribute bit 3 is set, CRC
            recomputed, as Kafka's broker does for a LogAppendTime topic.

    Returns:
        ``(new entry bytes, last offset)``.

    Raises:
        kclient.errors.CorruptRecordError: The entry is invalid (see
            `validate_legacy_entry`).
    """
    info = validate_legacy_entry(entry)
    out = bytearray(entry)
    if info.codec == codecs.NONE:
        _rewrite_header(out, base_offset, log_append_time=log_append_time)
        return bytes(out), base_offset
    last = base_offset + info.record_count - 1
    if info.magic == 1 and info.relative_offsets:
        _rewrite_header(out, last, log_append_time=log_append_time)
        return bytes(out), last
    msg = read_message(entry, 0)
    inner = decompress_inner(msg)
    new_inner = bytearray()
    for i, m in enumerate(inner):
        new_off = base_offset + i if info.magic == 0 else i
        new_inner += build_entry(new_off, build_message(m.key, m.value, magic=m.magic, timestamp=m.timestamp, attributes=m.attributes))
    payload = codecs.compress_legacy(info.codec, bytes(new_inner), info.magic)
    ts = info.max_timestamp if info.magic == 1 else None
    rebuilt = bytearray(build_entry(last, build_message(None, payload, magic=info.magic, timestamp=ts, attributes=info.attributes)))
    if log_append_time is not None:
        _rewrite_header(rebuilt, last, log_append_time=log_append_time)
    return bytes(rebuilt), last


__all__ = [
    "ATTRIBUTES_AT",
    "ATTR_CODEC_MASK",
    "ATTR_TIMESTAMP_TYPE",
    "LegacyEntryInfo",
    "LegacyMessage",
    "NO_TIMESTAMP",
    "RECORD_OVERHEAD",
    "absolute_inner",
    "assign_legacy_offsets",
    "build_entry",
    "build_message",
    "build_message_set",
    "decompress_inner",
    "iter_entry_records",
    "iter_legacy_records",
    "message_size",
    "read_message",
    "validate_legacy_entry",
]
