"""Record batch v2 (magic 2): build and parse, CRC-32C checked on read.

Layout (KIP-98; Kafka documentation
https://kafka.apache.org/documentation/#recordbatch, "Record Batch",
"Record" and "Record Header"; headers are KIP-82), 61-byte header:
baseOffset int64 @0, batchLength int32 @8, partitionLeaderEpoch int32 @12,
magic int8 @16, crc uint32 @17, attributes int16 @21, lastOffsetDelta int32
@23, baseTimestamp int64 @27, maxTimestamp int64 @35, producerId int64 @43,
producerEpoch int16 @51, baseSequence int32 @53, recordsCount int32 @57.
The CRC-32C covers attributes..end. Each record: length varint, attributes
int8, timestampDelta varint, offsetDelta varint, key (varint length, -1 =
null), value (same), headers count varint, each header key (varint length +
UTF-8) and value (varint length, -1 = null). All record varints are zigzag.

Attributes: bits 0-2 codec, bit 3 LogAppendTime, bit 4 transactional, bit 5
control. Only the bytes after recordsCount are compressed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeAlias

import attrs
import crc32c

from kclient._accel import speedups as _speedups
from kclient.errors import CorruptRecordError
from kclient.protocol.primitives import Buffer, read_varint, write_varint
from kclient.protocol.records import codecs

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
#: Byte positions in a batch: crc (uint32), attributes (int16, where the
#: CRC-32C coverage starts) and maxTimestamp (int64).
CRC_AT = 17
ATTRIBUTES_AT = 21
CRC_START = ATTRIBUTES_AT
MAX_TIMESTAMP_AT = 35
_CRC_AT = CRC_AT

#: Bytes a record may take in a batch beyond its key and value, the worst
#: case of: length (3), attributes (1), timestamp delta (10) and offset delta
#: (5) varints, key/value lengths (5 + 5), header count (1). Used to size
#: batches before encoding them.
RECORD_OVERHEAD = 30

ATTR_CODEC_MASK = codecs.ATTR_CODEC_MASK
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
#: v2 attribute bit 6 (KIP-534): the base timestamp holds the delete horizon
#: the log cleaner set on a batch of tombstones or a transaction marker.
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1


@attrs.frozen(slots=True)
class Header:
    """A record header: ``key`` str, ``value`` bytes or None."""

    key: str
    value: bytes | None


#: A decoded record as a row: ``(key, value, timestamp in ms, headers)``;
#: key and value are bytes or None, headers a tuple of `Header` (or of
#: ``(key, value)`` pairs where a caller gives them).
Row: TypeAlias = tuple[Any, Any, int, Any]


@attrs.frozen(slots=True)
class Record:
    """One decoded record: ``offset`` (absolute), ``timestamp`` (ms since the
    epoch), ``key``/``value`` bytes or None, ``headers`` tuple of Header."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@attrs.frozen(slots=True)
class BatchHeader:
    """The 61-byte v2 header, fields named as in Kafka's DefaultRecordBatch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def codec(self) -> int:
        return self.attributes & ATTR_CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (ms since the epoch) the log cleaner set
        (``ATTR_DELETE_HORIZON``, KIP-534: the base timestamp then holds
        it), or None."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte log overhead."""
        return self.batch_length + 12


# The compiled twins of the per-record loops below (None: pure Python only).
_c_encode_records = _speedups.encode_records if _speedups is not None else None
_c_decode_rows = _speedups.decode_rows if _speedups is not None else None
#: True when `decode_rows` takes any buffer (the compiled decoder), so a
#: reader need not copy a received ``bytearray`` into ``bytes`` first.
DECODES_ANY_BUFFER = _c_decode_rows is not None


def _zigzag_bytes(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


# zigzag varint encodings of 0..16383, the sizes, deltas and lengths most
# records use, so the batch builder's hot loop does no arithmetic for them.
_ZIGZAG_LIMIT = 1 << 14
_ZIGZAG = [_zigzag_bytes(n) for n in range(_ZIGZAG_LIMIT)]


def _write_bytes_varint(out: bytearray, data: Buffer | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        write_varint(out, len(data))
        out += data


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: Buffer | None, value: Buffer | None, headers: Sequence[Any] = ()) -> None:
    """Append one record (length-prefixed) to ``out``."""
    body = bytearray(b"\x00")  # attributes
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_bytes_varint(body, key)
    _write_bytes_varint(body, value)
    write_varint(body, len(headers))
    for h in headers:
        hk, hv = (h.key, h.value) if isinstance(h, Header) else h
        kb = hk.encode("utf-8")
        write_varint(body, len(kb))
        body += kb
        _write_bytes_varint(body, hv)
    write_varint(out, len(body))
    out += body


def _encode_records_py(records: Sequence[Row], base_ts: int) -> tuple[bytes, int, int]:
    """The records section of an uncompressed v2 batch (pure Python; the
    compiled ``kclient._speedups.encode_records`` must give the same bytes).

    Args:
        records: ``(key, value, timestamp_ms[, headers])`` tuples.
        base_ts: The batch's first timestamp (ms).

    Returns:
        ``(body, count, max_timestamp)``: the encoded records, how many,
        and the largest timestamp (-1 if every one is negative).
    """
    parts: list[bytes] = []
    append = parts.append
    extend = parts.extend
    zz = _ZIGZAG
    limit = _ZIGZAG_LIMIT
    max_ts = -1
    count = 0
    for rec in records:
        if len(rec) == 3:
            key, value, ts = rec
            headers = ()
        else:
            key, value, ts, headers = rec
        if ts > max_ts:
            max_ts = ts
        delta = ts - base_ts
        if headers or not (0 <= delta < limit and count < limit):
            one = bytearray()
            encode_record(one, count, delta, key, value, headers)
            append(bytes(one))
            count += 1
            continue
        # Fast path, no headers: length, attributes 0, timestamp delta,
        # offset delta, key, value, header count 0 (all zigzag varints).
        td = zz[delta]
        od = zz[count]
        if key is None:
            kl = b"\x01"
            klen = 0
            key = b""
        else:
            klen = len(key)
            kl = zz[klen] if klen < limit else _zigzag_bytes(klen)
        if value is None:
            vl = b"\x01"
            vlen = 0
            value = b""
        else:
            vlen = len(value)
            vl = zz[vlen] if vlen < limit else _zigzag_bytes(vlen)
        size = 2 + len(td) + len(od) + len(kl) + klen + len(vl) + vlen
        # One extend per record (a null key/value adds an empty piece).
        extend((zz[size] if size < limit else _zigzag_bytes(size), b"\x00", td, od, kl, key, vl, value, b"\x00"))
        count += 1
    return b"".join(parts), count, max_ts


def build_batch(
    records: Iterable[Row],
    *,
    base_offset: int = 0,
    codec: int = codecs.NONE,
    timestamp_type_log_append: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """Encode one v2 record batch.

    Args:
        records: ``(key, value, timestamp_ms)`` or ``(key, value,
            timestamp_ms, headers)`` tuples; key and value are bytes or
            ``None``, headers a sequence of ``(str, bytes | None)`` or
            `Header`. Record ``i`` gets offset ``base_offset + i``.
        base_offset: The first record's offset.
        codec: One of `codecs`' ids; the records section is compressed as a
            whole.
        timestamp_type_log_append: Set the LogAppendTime attribute bit.
        producer_id: Idempotent/transactional producer id, -1 for none.
        producer_epoch: That producer's epoch, -1 for none.
        base_sequence: The first record's sequence number, -1 for none.
        partition_leader_epoch: Written by the broker on append; -1 from a
            client.
        is_transactional: Set the transactional attribute bit.
        is_control: Set the control-batch attribute bit.

    Returns:
        The batch bytes with the CRC-32C filled in.

    Raises:
        ValueError: ``records`` is empty.
    """
    records = records if isinstance(records, (list, tuple)) else list(records)
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_ts = records[0][2]
    encoded = _c_encode_records(records, base_ts) if _c_encode_records is not None and type(records) is list else None
    body, count, max_ts = encoded if encoded is not None else _encode_records_py(records, base_ts)
    payload = codecs.compress(codec, body) if codec else body
    attributes = (codec & ATTR_CODEC_MASK) | (ATTR_TIMESTAMP_TYPE if timestamp_type_log_append else 0)
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    header = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        header,
        0,
        base_offset,
        HEADER_SIZE - 12 + len(payload),
        partition_leader_epoch,
        2,
        0,
        attributes,
        count - 1,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    # CRC-32C from the attributes to the end, header part then payload
    # (running value): the payload is copied once, into the result.
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[CRC_START:]))
    struct.pack_into(">I", header, _CRC_AT, crc)
    return b"".join((header, payload))


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte batch header at ``pos``.

    Args:
        buf (bytes | bytearray | memoryview): The record data.
        pos: Offset of the batch's first byte.

    Returns:
        The decoded header.

    Raises:
        kclient.errors.CorruptRecordError: ``buf`` is too short or the magic
            is not 2.
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"record batch header truncated at byte {pos}")
    fields = HEADER.unpack_from(buf, pos)
    if fields[3] != 2:
        raise CorruptRecordError(f"magic {fields[3]} at byte {pos} is not a v2 record batch")
    return BatchHeader(*fields)


def compute_crc(batch: Buffer) -> int:
    """CRC-32C of a whole batch's bytes from ``attributes`` to the end."""
    return crc32c.crc32c(memoryview(batch)[CRC_START:])


def validate_batch(batch: Buffer) -> BatchHeader:
    """Check one complete batch's size and CRC-32C.

    Args:
        batch (bytes | bytearray | memoryview): Exactly one batch.

    Returns:
        The batch's header.

    Raises:
        kclient.errors.CorruptRecordError: A bad size or a CRC mismatch (the
            message names the expected and actual CRC).
    """
    header = read_header(batch)
    if header.size != len(batch):
        raise CorruptRecordError(f"batch length field says {header.size} bytes, have {len(batch)}")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError("negative record count or last offset delta")
    actual = compute_crc(batch)
    if actual != header.crc:
        raise CorruptRecordError(f"CRC-32C mismatch at base offset {header.base_offset}: stored {header.crc:#010x}, computed {actual:#010x}")
    return header


def _read_nullable(buf: Buffer, pos: int) -> tuple[Any, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise CorruptRecordError("record field runs past the end of the batch")
    return bytes(buf[pos:end]), end


def _zigzag_decode_table() -> list[int]:
    """Zigzag varints of one or two bytes, decoded: index ``b`` for a
    one-byte varint ``b`` (< 0x80), index ``(c << 7) + b`` for a two-byte
    varint ``b c`` (b >= 0x80 > c; the raw value is ``(b - 0x80) | c << 7``).
    The two ranges do not overlap (the second starts at 128)."""
    table = [0] * ((0x7F << 7) + 0xFF + 1)
    for b in range(0x80):
        table[b] = (b >> 1) ^ -(b & 1)
        for c in range(0x80):
            u = b | (c << 7)
            table[(c << 7) + b + 0x80] = (u >> 1) ^ -(u & 1)
    return table


# Record lengths, deltas and key/value lengths below 8192 (one or two varint
# bytes) decode with one table lookup in the hot loop below.
_ZZ = _zigzag_decode_table()


def records_section(buf: Buffer, pos: int, end: int, attributes: int, base_offset: int) -> tuple[Buffer, int, int]:
    """The records section of the batch whose bytes are ``buf[pos:end]``.

    Args:
        buf (bytes | bytearray | memoryview): The batch's buffer.
        pos: The batch's first byte in ``buf``.
        end: The byte after the batch.
        attributes: The batch's attributes (codec in bits 0-2).
        base_offset: The batch's base offset, for error messages.

    Returns:
        ``(data, start, stop)``: the batch's own buffer and bounds when it is
            uncompressed (no copy), else the decompressed bytes and their
            bounds.

    Raises:
        kclient.errors.CorruptRecordError: Decompression fails.
    """
    codec = attributes & ATTR_CODEC_MASK
    if not codec:
        return buf, pos + HEADER_SIZE, end
    try:
        data = codecs.decompress(codec, memoryview(buf)[pos + HEADER_SIZE : end])
    except Exception as exc:
        raise CorruptRecordError(f"cannot decompress batch at offset {base_offset}: {exc}") from None
    return data, 0, len(data)


def decode_rows(
    data: Buffer,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None = None,
    offsets: list[int] | None = None,
    rows: list[Row] | None = None,
) -> tuple[list[int], list[Row]]:
    """Decode ``count`` records from a batch's uncompressed records section.

    The consumer's hot loop: one iteration per record, so it is written for
    the common shape (one- and two-byte varints looked up in ``_ZZ``, null
    key, no headers) with the general case in the ``else`` branches. Rows
    have the field order of the consumer's Message, which builds its objects
    from them in C (see `kclient.client.consumer.message_set.ByteBufferMessageSet`).

    Args:
        data: The records section (see `records_section`): ``bytes``, or
            any buffer when the compiled decoder is in use
            (``DECODES_ANY_BUFFER``); keys and values are ``bytes``.
        pos: The first record's byte in ``data``.
        end: The byte after the last record.
        count: The batch's record count.
        base_offset: The batch's base offset.
        base_timestamp: The batch's base timestamp (ms); each record's is
            ``base_timestamp + delta``.
        fixed_timestamp: For LogAppendTime, the timestamp (ms) of every
            record.
        offsets: A list to append the offsets to (several batches into one
            pair); a new one by default.
        rows: A list to append the rows to; a new one by default.

    Returns:
        ``(offsets, rows)``: the absolute offsets and one ``(key, value,
            timestamp, headers)`` tuple per record. On an error the lists
            passed in may hold part of this batch.

    Raises:
        kclient.errors.CorruptRecordError: Malformed records.
    """
    if offsets is None:
        offsets = []
    if rows is None:
        rows = []
    if _c_decode_rows is not None:
        # The compiled loop takes the common shape (no headers, well formed)
        # from any buffer and backs out of anything else, which the loop
        # below then decodes or reports (from bytes: its keys and values are
        # slices).
        if _c_decode_rows(data, pos, end, count, base_offset, base_timestamp, fixed_timestamp, offsets, rows):
            return offsets, rows
    if not isinstance(data, bytes):
        data, pos, end = bytes(memoryview(data)[pos:end]), 0, end - pos
    return _decode_rows_py(data, pos, end, count, base_offset, base_timestamp, fixed_timestamp, offsets, rows)


def _decode_rows_py(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None = None,
    offsets: list[int] | None = None,
    rows: list[Row] | None = None,
) -> tuple[list[int], list[Row]]:
    """`decode_rows` in pure Python: the definition the compiled
    ``kclient._speedups.decode_rows`` is tested against. Same arguments,
    result and errors."""
    zz = _ZZ
    rv = read_varint
    if offsets is None:
        offsets = []
    if rows is None:
        rows = []
    first_row = len(rows)
    add_offset = offsets.append
    add_row = rows.append
    try:
        for _ in range(count):
            # length varint
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    length = zz[(c << 7) + b]
                    pos += 2
                else:
                    length, pos = rv(data, pos)
            # (a negative length or a record running past ``end`` is caught
            # by the checks after its fields and after the loop)
            rec_end = pos + length
            # attributes int8 (unused, as in Kafka), then timestampDelta
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            else:
                c = data[pos + 2]
                if c < 0x80:
                    ts_delta = zz[(c << 7) + b]
                    pos += 3
                else:
                    ts_delta, pos = rv(data, pos + 1)
            # offsetDelta
            b = data[pos]
            if b < 0x80:
                off_delta = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    off_delta = zz[(c << 7) + b]
                    pos += 2
                else:
                    off_delta, pos = rv(data, pos)
            # key: 0x01 is zigzag(-1), a null key
            if data[pos] == 1:
                key = None
                pos += 1
            else:
                n, pos = rv(data, pos)
                if n < 0:
                    key = None
                else:
                    key = data[pos : pos + n]
                    pos += n
            # value
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    n = zz[(c << 7) + b]
                    pos += 2
                else:
                    n, pos = rv(data, pos)
            if n < 0:
                value = None
            else:
                value = data[pos : pos + n]
                pos += n
            # headers: count 0 is the common case
            if data[pos] == 0:
                headers: Any = ()
                pos += 1
            else:
                n_headers, pos = rv(data, pos)
                hs = []
                for _ in range(n_headers):
                    hk, pos = _read_nullable(data, pos)
                    hv, pos = _read_nullable(data, pos)
                    hs.append(Header(hk.decode("utf-8") if hk is not None else "", hv))
                headers = tuple(hs)
            # every field stayed inside the record (a field running past it
            # would read the next record's bytes, never raise, so check here)
            if pos != rec_end:
                raise CorruptRecordError(f"record at offset {base_offset + off_delta} has {rec_end - pos} stray bytes")
            add_offset(base_offset + off_delta)
            add_row((key, value, base_timestamp + ts_delta, headers))
        if pos > end:
            raise CorruptRecordError(f"records run past the end of the batch at offset {base_offset}")
    except CorruptRecordError:
        raise
    except Exception as exc:  # ProtocolError from varints, IndexError, UnicodeDecodeError, ...
        raise CorruptRecordError(f"malformed record in batch at offset {base_offset}: {exc}") from None
    if fixed_timestamp is not None:  # LogAppendTime: the batch's time for every record
        rows[first_row:] = [(key, value, fixed_timestamp, headers) for key, value, _, headers in rows[first_row:]]
    return offsets, rows


def decode_records(batch: Buffer, header: BatchHeader | None = None, *, check_crc: bool = True) -> list[tuple[int, int, Any, Any, Any]]:
    """Decode one complete v2 batch into plain tuples.

    Same checks and errors as `iter_records`.

    Args:
        batch (bytes | bytearray | memoryview): Exactly one batch.
        header: The batch's header if already decoded.
        check_crc: Verify the CRC-32C first.

    Returns:
        ``(offset, timestamp, key, value, headers)`` per record, in offset
            order.
    """
    if header is None:
        header = validate_batch(batch) if check_crc else read_header(batch)
    if not isinstance(batch, bytes):
        batch = bytes(memoryview(batch)[: header.size])
    data, start, stop = records_section(batch, 0, header.size, header.attributes, header.base_offset)
    if not isinstance(data, bytes):
        data = bytes(data)
    fixed_ts = header.max_timestamp if header.is_log_append_time else None
    offsets, rows = decode_rows(data, start, stop, header.records_count, header.base_offset, header.base_timestamp, fixed_ts)
    return [(offset, ts, key, value, headers) for offset, (key, value, ts, headers) in zip(offsets, rows)]


def iter_records(batch: Buffer, header: BatchHeader | None = None, *, check_crc: bool = True) -> Iterator[Record]:
    """The records of one complete v2 batch, with absolute offsets and timestamps.

    LogAppendTime batches report ``max_timestamp`` for every record, as Kafka
    does.

    Args:
        batch (bytes | bytearray | memoryview): Exactly one batch.
        header: The batch's header if already decoded.
        check_crc: Verify the CRC-32C first.

    Yields:
        Each `Record`, in offset order.

    Raises:
        kclient.errors.CorruptRecordError: A CRC mismatch (when
            ``check_crc``) or malformed records.
    """
    for t in decode_records(batch, header, check_crc=check_crc):
        yield Record(*t)
