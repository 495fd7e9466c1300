"""Message format conversion in the broker: validation and conversion of a
Produce request's record set to the format a topic stores (on append), and
down-conversion of stored data to the format a Fetch version can carry.

Formats: message sets v0 / v1 (magic 0 / 1, KIP-32) and record batches v2
(magic 2, KIP-98); Kafka documentation
https://kafka.apache.org/documentation/#messageformat, "Old Message Format"
and "Record Batch", and `kclient.protocol.records.legacy` /
`kclient.protocol.records.v2`. Which request versions carry which format
(`kclient.protocol.records.formats`): Produce v0-1 and Fetch v0-1 carry
v0, Produce v2 and Fetch v2-3 carry v0 or v1, Produce v3+ and Fetch v4+
carry v2 (and, on Fetch, whatever the log holds). zstd needs Produce v7+ /
Fetch v10+ (KIP-110).

On append (`prepare_append`, Kafka 2.x ``LogValidator``):

- every batch / entry is checked: whole (no partial tail), size <=
  ``message.max.bytes`` (MESSAGE_TOO_LARGE), checksum (CRC-32C for v2,
  CRC32 for v0/v1, inner messages of a compressed wrapper too) and
  structure (CORRUPT_MESSAGE), Produce v3+ carries magic 2 only
  (INVALID_RECORD), zstd only on Produce v7+ and only in v2
  (UNSUPPORTED_COMPRESSION_TYPE), no control batches from clients
  (INVALID_RECORD), no idempotent / transactional batch into a v0/v1 topic
  (UNSUPPORTED_FOR_MESSAGE_FORMAT, as Kafka);
- a batch already in the stored format is kept as it arrived (no
  recompression): a v2 batch byte for byte, a v0/v1 entry byte for byte
  except its offset field, which the log assigns;
- otherwise it is converted: v0/v1 entries into a v2 topic become v2
  batches (one per compressed wrapper with the same codec, consecutive
  uncompressed entries grouped into one uncompressed batch; v0 messages get
  timestamp -1, Kafka's NO_TIMESTAMP); v2 batches into a v0/v1 topic and v0
  <-> v1 become messages of the stored magic (record headers are dropped,
  v0 drops timestamps);
- LogAppendTime (``log.message.timestamp.type`` / topic
  ``message.timestamp.type``) stamps the broker's clock as Kafka does: a v2
  batch gets attribute bit 3 and ``maxTimestamp = now`` (CRC-32C
  recomputed, records untouched), a v1 message gets bit 3 and ``timestamp =
  now`` (CRC32 recomputed); v0 has no timestamp.

A compressed v0/v1 wrapper appended to a topic of its own format is kept
as it came (the log gives it as many offsets as it has inner messages and
writes the last one on the wrapper, rebuilding a v0 set whose inner offsets
are absolute), as Kafka does.

On fetch (`down_convert`, Kafka's ``RecordsUtil.downConvert`` and
``LazyDownConversionRecords``): batches newer than the request can carry
are rewritten with the same codec and exact offsets (a compressed v2 batch
becomes one v1 wrapper with relative inner offsets and the last offset on
the wrapper, or one v0 wrapper with absolute inner offsets), control
batches are dropped, entries already old enough are passed through.

Pure functions over bytes; the clock is passed in.
"""

from __future__ import annotations

import struct

import attrs
import crc32c

from kclient.errors import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    MESSAGE_TOO_LARGE,
    UNSUPPORTED_COMPRESSION_TYPE,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    CorruptRecordError,
)
from kclient.protocol.primitives import Buffer
from kclient.protocol.records import codecs
from kclient.protocol.records.formats import (
    PRODUCE_MAGIC2_MIN_VERSION,
    ZSTD_MIN_FETCH_VERSION,
    ZSTD_MIN_PRODUCE_VERSION,
    fetch_magic,
    produce_magic_max,
)
from kclient.protocol.records.legacy import (
    ATTR_TIMESTAMP_TYPE,
    NO_TIMESTAMP,
    LegacyMessage,
    absolute_inner,
    assign_legacy_offsets,
    build_entry,
    build_message,
    decompress_inner,
    read_message,
    validate_legacy_entry,
)
from kclient.protocol.records.legacy import (
    ATTRIBUTES_AT as _V01_ATTRIBUTES_AT,
)
from kclient.protocol.records.scan import MAGIC_AT, BatchInfo, scan_batches
from kclient.protocol.records.v2 import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    HEADER_SIZE,
    BatchHeader,
    Row,
    build_batch,
    compute_crc,
    decode_records,
    read_header,
)
from kclient.protocol.records.v2 import (
    ATTRIBUTES_AT as _V2_ATTRIBUTES_AT,
)
from kclient.protocol.records.v2 import (
    CRC_AT as _V2_CRC_AT,
)
from kclient.protocol.records.v2 import (
    CRC_START as _V2_CRC_START,
)
from kclient.protocol.records.v2 import (
    HEADER as _V2_HEADER,
)
from kclient.protocol.records.v2 import (
    MAX_TIMESTAMP_AT as _V2_MAX_TIMESTAMP_AT,
)
from kclient.protocol.records.v2 import (
    RECORD_OVERHEAD as _V2_RECORD_OVERHEAD,
)
from kclient.storage.append_info import ValidatedBatch, analyze_records

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


class AppendRejected(Exception):
    """A Produce record set fails validation. ``code`` is the Kafka error
    code to answer with (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
    UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_COMPRESSION_TYPE or
    INVALID_RECORD); the message says why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@attrs.frozen
class PreparedAppend:
    """What `prepare_append` made of a Produce record set.

    Attributes:
        records: Bytes-like (a view of the request when nothing changed)
            for `kclient.storage.Log.append`, every batch in the stored
            format (offset fields are placeholders the log overwrites).
        record_count: Records in it.
        log_append_time_ms: The LogAppendTime stamped (ms), -1 for
            CreateTime (or a v0 topic, which has no timestamps), for the
            Produce response.
        converted: Whether any batch was re-encoded (False: the input bytes
            are stored as they came, offsets aside).
        batches: What validation found of each batch of ``records``
            (positions, offset deltas, max timestamp, producer id / epoch /
            sequence, transactional bit, record count, codec), for
            ``Log.append(batches=...)``: Kafka's ``LogValidator`` result,
            handed down once so the log reads no header again.
    """

    records: bytes | memoryview
    record_count: int
    log_append_time_ms: int = -1
    converted: bool = False
    batches: tuple[ValidatedBatch, ...] | None = None


# --------------------------------------------------------------------- stamping


def stamp_v2_log_append_time(batch: Buffer, now_ms: int) -> bytes:
    """A copy of one complete v2 batch stamped with LogAppendTime.

    Attribute bit 3 is set and ``maxTimestamp = now_ms``, CRC-32C
    recomputed; records (and ``baseTimestamp``) are untouched, as Kafka's
    ``DefaultRecordBatch.setMaxTimestamp`` does. Readers then report
    ``now_ms`` for every record.

    Args:
        batch (bytes | bytearray | memoryview): Exactly one v2 batch.
        now_ms: The broker's clock in ms since the epoch.

    Returns:
        The stamped batch.
    """
    out = bytearray(batch)
    (attributes,) = _I16.unpack_from(out, _V2_ATTRIBUTES_AT)
    _I16.pack_into(out, _V2_ATTRIBUTES_AT, attributes | ATTR_TIMESTAMP_TYPE)
    _I64.pack_into(out, _V2_MAX_TIMESTAMP_AT, now_ms)
    _U32.pack_into(out, _V2_CRC_AT, crc32c.crc32c(memoryview(out)[_V2_CRC_START:]))
    return bytes(out)


def _legacy_entry(magic: int, key: Buffer | None, value: Buffer | None, timestamp: int, log_append_time_ms: int | None, offset: int = 0) -> bytes:
    """One uncompressed v0/v1 entry; LogAppendTime (v1) replaces the
    timestamp and sets attribute bit 3."""
    attributes = 0
    if magic == 1 and log_append_time_ms is not None:
        timestamp = log_append_time_ms
        attributes = ATTR_TIMESTAMP_TYPE
    return build_entry(offset, build_message(key, value, magic=magic, timestamp=timestamp, attributes=attributes))


# --------------------------------------------------------------------- append


def _codec_of(view: Buffer, info: BatchInfo) -> int:
    if info.magic == 2:
        attributes: int = _I16.unpack_from(view, info.position + _V2_ATTRIBUTES_AT)[0]
        return attributes & ATTR_CODEC_MASK
    return view[info.position + _V01_ATTRIBUTES_AT] & ATTR_CODEC_MASK


def _framing(view: memoryview) -> list[BatchInfo]:
    """The batches of a non-empty record set that ends with a whole batch."""
    if not len(view):
        raise AppendRejected(INVALID_RECORD, "empty record set")
    try:
        infos = list(scan_batches(view))
    except CorruptRecordError as exc:
        raise AppendRejected(CORRUPT_MESSAGE, f"impossible batch header: {exc}") from None
    covered = sum(i.size for i in infos)
    if covered != len(view):
        raise AppendRejected(CORRUPT_MESSAGE, f"record set ends with a partial batch of {len(view) - covered} bytes")
    return infos


def _check_format(view: memoryview, info: BatchInfo, produce_version: int, max_message_bytes: int) -> int:
    """The checks every batch / entry passes; returns its codec."""
    if produce_version >= PRODUCE_MAGIC2_MIN_VERSION and info.magic != 2:
        raise AppendRejected(
            INVALID_RECORD, f"Produce v{produce_version} may only carry record batches v2, not message format v{info.magic}"
        )
    codec = _codec_of(view, info)
    if codec == codecs.ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
        raise AppendRejected(UNSUPPORTED_COMPRESSION_TYPE, f"zstd needs Produce v{ZSTD_MIN_PRODUCE_VERSION}+, got v{produce_version}")
    if info.size > max_message_bytes:
        raise AppendRejected(
            MESSAGE_TOO_LARGE, f"batch at offset {info.base_offset} is {info.size} bytes, above message.max.bytes {max_message_bytes}"
        )
    return codec


def _validate_v2(raw: memoryview, position: int, codec: int, stored_magic: int) -> ValidatedBatch:
    # `validate_batch`'s checks on the header's fields as unpacked, without
    # building a BatchHeader (this is the Produce hot path). The walk that
    # found the batch guarantees magic 2, a whole header and a length field
    # that matches len(raw).
    fields = _V2_HEADER.unpack_from(raw)
    if fields[12] < 0 or fields[6] < 0:
        raise AppendRejected(CORRUPT_MESSAGE, "corrupt record batch: negative record count or last offset delta")
    actual = compute_crc(raw)
    if actual != fields[4]:
        raise AppendRejected(
            CORRUPT_MESSAGE,
            f"corrupt record batch: CRC-32C mismatch at base offset {fields[0]}: stored {fields[4]:#010x}, computed {actual:#010x}",
        )
    if codec > codecs.ZSTD:
        raise AppendRejected(CORRUPT_MESSAGE, f"unknown compression codec {codec}")
    if fields[5] & ATTR_CONTROL:
        raise AppendRejected(INVALID_RECORD, "clients may not write control batches")
    batch = ValidatedBatch.of_v2(position, fields)
    if stored_magic < 2:
        if batch.producer_id >= 0 or batch.is_transactional:
            raise AppendRejected(
                UNSUPPORTED_FOR_MESSAGE_FORMAT,
                f"an idempotent or transactional batch cannot be stored in message format v{stored_magic}",
            )
        if codec == codecs.ZSTD:
            raise AppendRejected(UNSUPPORTED_COMPRESSION_TYPE, f"zstd cannot be stored in message format v{stored_magic}")
    return batch


def _validate_legacy(raw: memoryview, info: BatchInfo, codec: int) -> ValidatedBatch:
    if codec == codecs.ZSTD:
        raise AppendRejected(UNSUPPORTED_COMPRESSION_TYPE, f"message format v{info.magic} cannot carry zstd")
    try:
        entry = validate_legacy_entry(raw)
    except CorruptRecordError as exc:
        raise AppendRejected(CORRUPT_MESSAGE, f"corrupt message: {exc}") from None
    return ValidatedBatch(info.position, info.size, info.magic, codec, info.base_offset, 0, info.max_timestamp, record_count=entry.record_count)


def _validate(view: memoryview, produce_version: int, stored_magic: int, max_message_bytes: int) -> list[ValidatedBatch]:
    """Every check of the module docstring, batch by batch; returns what
    each batch is (Kafka's ``LogValidator``: the log reads no header again)."""
    n = len(view)
    if n >= HEADER_SIZE and view[MAGIC_AT] == 2 and _I32.unpack_from(view, 8)[0] + 12 == n:
        # One v2 batch, the common case (a producer sends one batch per
        # partition): the checks of the walk below without walking.
        codec = _I16.unpack_from(view, _V2_ATTRIBUTES_AT)[0] & ATTR_CODEC_MASK
        if codec == codecs.ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
            raise AppendRejected(UNSUPPORTED_COMPRESSION_TYPE, f"zstd needs Produce v{ZSTD_MIN_PRODUCE_VERSION}+, got v{produce_version}")
        if n > max_message_bytes:
            raise AppendRejected(
                MESSAGE_TOO_LARGE, f"batch at offset {_I64.unpack_from(view)[0]} is {n} bytes, above message.max.bytes {max_message_bytes}"
            )
        return [_validate_v2(view, 0, codec, stored_magic)]
    batches = []
    for info in _framing(view):
        codec = _check_format(view, info, produce_version, max_message_bytes)
        raw = view[info.position : info.position + info.size]
        if info.magic == 2:
            batches.append(_validate_v2(raw, info.position, codec, stored_magic))
        else:
            batches.append(_validate_legacy(raw, info, codec))
    return batches


def _legacy_messages(raw: Buffer) -> tuple[LegacyMessage, list[tuple[int, LegacyMessage]]]:
    """The entry and its ``(timestamp, message)`` list: itself when
    uncompressed, else its inner messages (timestamps per Kafka's rule:
    the wrapper's when it says LogAppendTime)."""
    msg = read_message(raw, 0)
    if msg.codec == codecs.NONE:
        return msg, [(msg.timestamp, msg)]
    return msg, [(ts, m) for _, ts, m in absolute_inner(msg, decompress_inner(msg))]


def _recompressed(raw: Buffer, header: BatchHeader, codec: int, log_append_time: bool) -> bytes:
    """One v2 batch rewritten with ``codec``: the same records (timestamps,
    keys, values, headers), producer id, epoch, base sequence and
    transactional bit."""
    rows = decode_records(raw, header, check_crc=False)
    return build_batch(
        [(key, value, ts, headers) for _, ts, key, value, headers in rows],
        codec=codec,
        timestamp_type_log_append=log_append_time,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
    )


def _stored_as_is(batches: list[ValidatedBatch], stored_magic: int, lat: int | None, codec: int | None) -> bool:
    """Whether every batch is already in the stored format, codec included,
    with nothing to stamp (the common case)."""
    if lat is not None:
        return False
    if stored_magic == 2:
        return all(b.magic == 2 for b in batches) and (codec is None or all(b.codec == codec for b in batches))
    return all(b.magic == stored_magic and b.codec == codecs.NONE for b in batches)


def _v2_into_v2(view: memoryview, batches: list[ValidatedBatch], lat: int | None, codec: int | None) -> tuple[bytearray, bool, list[ValidatedBatch]]:
    """v2 batches into a v2 topic: each recompressed when the topic's codec
    differs, stamped with LogAppendTime when the topic says so. Returns the
    bytes, whether any batch was re-encoded, and the batches of the bytes."""
    out = bytearray()
    converted = False
    stamped = []  # stamped only: the same sizes and positions, maxTimestamp = now
    make = ValidatedBatch._make
    for b in batches:
        raw: Buffer = view[b.position : b.position + b.size]
        if codec is not None and b.codec != codec:
            converted = True
            raw = _recompressed(raw, read_header(raw), codec, lat is not None)
        if lat is None:
            out += raw
        else:
            out += stamp_v2_log_append_time(raw, lat)
            stamped.append(make(b[:6] + (lat,) + b[7:]))
    if converted or lat is None:
        return out, converted, analyze_records(out)
    return out, False, stamped


class _Converter:
    """Converts a record set batch by batch into the stored format (the
    module docstring's rules), into ``out``."""

    def __init__(self, stored_magic: int, lat: int | None, codec: int | None, max_message_bytes: int) -> None:
        self.stored_magic = stored_magic
        self.lat = lat
        self.codec = codec
        self.max_message_bytes = max_message_bytes
        self.out = bytearray()
        self.count = 0
        self.converted = False
        self._group: list[Row] = []  # uncompressed legacy records waiting for one v2 batch
        self._group_bytes = HEADER_SIZE

    def _append_v2(self, batch: Buffer) -> None:
        self.out += batch if self.lat is None else stamp_v2_log_append_time(batch, self.lat)

    def flush_group(self) -> None:
        """Close the v2 batch gathering uncompressed legacy records."""
        if self._group:
            self._append_v2(build_batch(self._group, codec=self.codec or codecs.NONE, timestamp_type_log_append=self.lat is not None))
            self._group = []
            self._group_bytes = HEADER_SIZE

    def add(self, view: memoryview, b: ValidatedBatch) -> None:
        """Convert one validated batch / entry."""
        raw = view[b.position : b.position + b.size]
        if b.magic == 2:
            self._add_v2(raw)
        elif b.magic == self.stored_magic and b.codec == codecs.NONE:
            self._add_same_legacy(raw)
        else:
            self._add_other_legacy(raw, b)

    def _add_v2(self, raw: Buffer) -> None:
        header = read_header(raw)
        self.count += header.records_count
        if self.stored_magic == 2:
            self.flush_group()
            if self.codec is not None and header.codec != self.codec:
                self.converted = True
                raw = _recompressed(raw, header, self.codec, self.lat is not None)
            self._append_v2(raw)
            return
        self.converted = True
        for _, ts, key, value, _headers in decode_records(raw, header, check_crc=False):
            self.out += _legacy_entry(self.stored_magic, key, value, ts, self.lat)

    def _add_same_legacy(self, raw: Buffer) -> None:
        """An uncompressed entry of the stored format: kept, or stamped (v1)."""
        self.count += 1
        if self.lat is not None and self.stored_magic == 1:
            stamped_entry, _ = assign_legacy_offsets(raw, 0, log_append_time=self.lat)
            self.out += stamped_entry
        else:
            self.out += raw

    def _add_other_legacy(self, raw: Buffer, b: ValidatedBatch) -> None:
        _, messages = _legacy_messages(raw)
        self.count += len(messages)
        if self.stored_magic == 2:
            self.converted = True
            self._legacy_into_v2(messages, b.codec)
        elif b.magic == self.stored_magic and self.lat is None:
            self.out += raw  # a compressed wrapper kept as it came; the log assigns its inner offsets
        elif b.magic == self.stored_magic == 1:
            stamped_entry, _ = assign_legacy_offsets(raw, 0, log_append_time=self.lat)
            self.out += stamped_entry
        else:
            # Into a v0/v1 topic of the other format: one uncompressed entry per message.
            self.converted = self.converted or b.magic != self.stored_magic or b.codec != codecs.NONE
            self._legacy_into_legacy(messages)

    def _legacy_into_v2(self, messages: list[tuple[int, LegacyMessage]], entry_codec: int) -> None:
        items: list[Row] = [(m.key, m.value, ts if m.magic > 0 else NO_TIMESTAMP, ()) for ts, m in messages]
        if entry_codec != codecs.NONE:
            self.flush_group()
            codec = entry_codec if self.codec is None else self.codec
            self._append_v2(build_batch(items, codec=codec, timestamp_type_log_append=self.lat is not None))
            return
        for item in items:
            size = _V2_RECORD_OVERHEAD + len(item[0] or b"") + len(item[1] or b"")
            if self._group and self._group_bytes + size > self.max_message_bytes:
                self.flush_group()
            self._group.append(item)
            self._group_bytes += size

    def _legacy_into_legacy(self, messages: list[tuple[int, LegacyMessage]]) -> None:
        magic, lat = self.stored_magic, self.lat
        for ts, m in messages:
            if m.magic == magic and lat is None:
                self.out += build_entry(0, build_message(m.key, m.value, magic=m.magic, timestamp=m.timestamp, attributes=m.attributes))
            else:
                self.out += _legacy_entry(magic, m.key, m.value, ts if m.magic > 0 else NO_TIMESTAMP, lat)


def prepare_append(
    records: Buffer,
    *,
    produce_version: int,
    stored_magic: int = 2,
    log_append_time_ms: int | None = None,
    max_message_bytes: int = 1048588,
    codec: int | None = None,
) -> PreparedAppend:
    """Validate one partition's Produce record set and convert it to the stored format.

    See the module docstring. All or nothing: nothing of the set may be
    appended once a batch fails.

    Args:
        records (bytes | bytearray | memoryview): The partition's record set.
        produce_version: The request's version (decides which formats and
            codecs are allowed).
        stored_magic: 0, 1 or 2, from ``log.message.format.version`` / topic
            ``message.format.version``.
        log_append_time_ms: The broker's clock (ms) when the topic uses
            LogAppendTime, ``None`` for CreateTime.
        max_message_bytes: ``message.max.bytes``, checked on each incoming
            batch / entry (the log checks the stored ones again).
        codec: The topic's ``compression.type`` as a codec id (``uncompressed``
            is `codecs.NONE`), or None for ``producer``: into a v2 topic,
            a batch in another codec is rewritten with this one (same
            records, producer id, epoch and sequence), as Kafka's
            LogValidator recompresses.

    Returns:
        The converted record set, what the append needs to know of it, and
            its validated batches for ``Log.append(batches=...)``.

    Raises:
        AppendRejected: A batch fails; it carries the Kafka error code for
            the first failing batch.
    """
    view = memoryview(records).cast("B")
    batches = _validate(view, produce_version, stored_magic, max_message_bytes)
    lat = log_append_time_ms
    if _stored_as_is(batches, stored_magic, lat, codec):
        count = sum(b.record_count for b in batches)
        return PreparedAppend(records if isinstance(records, bytes) else view, count, batches=tuple(batches))  # the log copies it once
    stamped = -1 if lat is None or stored_magic == 0 else lat
    try:
        if stored_magic == 2 and all(b.magic == 2 for b in batches):
            out, converted, placed = _v2_into_v2(view, batches, lat, codec)
            return PreparedAppend(bytes(out), sum(b.record_count for b in batches), stamped, converted, tuple(placed))
        conv = _Converter(stored_magic, lat, codec, max_message_bytes)
        for b in batches:
            conv.add(view, b)
        conv.flush_group()
    except CorruptRecordError as exc:  # a compressed payload that does not decode
        raise AppendRejected(CORRUPT_MESSAGE, f"corrupt records: {exc}") from None
    except codecs.CodecError as exc:
        raise AppendRejected(CORRUPT_MESSAGE, f"cannot re-encode records: {exc}") from None
    stored = bytes(conv.out)
    return PreparedAppend(stored, conv.count, stamped, conv.converted, tuple(analyze_records(stored)))


# --------------------------------------------------------------------- fetch


def has_zstd(data: Buffer) -> bool:
    """Whether any complete v2 batch of ``data`` is zstd-compressed.

    Such a batch has no v0/v1 form: a Fetch v0-3 answers
    UNSUPPORTED_COMPRESSION_TYPE.

    Args:
        data (bytes | bytearray | memoryview): Whole batches, maybe a partial
            one at the end.

    Raises:
        kclient.errors.CorruptRecordError: An impossible batch header.
    """
    view = memoryview(data)
    for info in scan_batches(view):
        if info.magic == 2 and _codec_of(view, info) == codecs.ZSTD:
            return True
    return False


def _v2_to_legacy(raw: Buffer, to_magic: int, fetch_offset: int) -> bytes:
    header = read_header(raw)
    if header.is_control:
        return b""  # control batches have no v0/v1 form; old clients never see them
    rows = decode_records(raw, header, check_crc=False)
    if not rows:
        return b""
    lat = header.is_log_append_time
    ts_bit = ATTR_TIMESTAMP_TYPE if (lat and to_magic == 1) else 0
    codec = header.codec
    if codec == codecs.NONE:
        out = bytearray()
        for offset, ts, key, value, _ in rows:
            if offset < fetch_offset:
                continue  # as Kafka: uncompressed records before the fetch offset are left out
            out += build_entry(offset, build_message(key, value, magic=to_magic, timestamp=ts, attributes=ts_bit))
        return bytes(out)
    first = rows[0][0]
    last = rows[-1][0]
    inner = bytearray()
    max_ts = NO_TIMESTAMP
    for offset, ts, key, value, _ in rows:
        inner += build_entry(offset - first if to_magic == 1 else offset, build_message(key, value, magic=to_magic, timestamp=ts))
        max_ts = max(max_ts, ts)
    if lat:
        max_ts = header.max_timestamp
    payload = codecs.compress_legacy(codec, bytes(inner), to_magic)
    return build_entry(last, build_message(None, payload, magic=to_magic, timestamp=max_ts, attributes=codec | ts_bit))


def _v1_to_v0(raw: Buffer) -> bytes:
    msg = read_message(raw, 0)
    if msg.codec == codecs.NONE:
        return build_entry(msg.offset, build_message(msg.key, msg.value, magic=0))
    rows = absolute_inner(msg, decompress_inner(msg))
    inner = bytearray()
    for offset, _, m in rows:
        inner += build_entry(offset, build_message(m.key, m.value, magic=0))
    payload = codecs.compress_legacy(msg.codec, bytes(inner), 0)
    return build_entry(rows[-1][0], build_message(None, payload, magic=0, attributes=msg.codec))


def convert_batch(raw: Buffer, to_magic: int, fetch_offset: int = 0) -> bytes:
    """One complete stored batch / entry in message format ``to_magic``, offsets exact.

    See the module docstring.

    Args:
        raw (bytes | bytearray | memoryview): The batch or entry.
        to_magic: 0 or 1, below the batch's own.
        fetch_offset: The Fetch request's offset for this partition.

    Returns:
        The converted bytes; ``raw`` unchanged if it is not newer than
            ``to_magic``; ``b""`` for a control batch.

    Raises:
        kclient.errors.CorruptRecordError: The data does not decode.
        codecs.CodecError: zstd (no v0/v1 form).
    """
    magic = raw[MAGIC_AT]
    if magic <= to_magic:
        return bytes(raw)
    if magic == 2:
        return _v2_to_legacy(raw, to_magic, fetch_offset)
    return _v1_to_v0(raw)


def down_convert(data: Buffer, to_magic: int, *, fetch_offset: int = 0, max_bytes: int = 0x7FFFFFFF) -> bytes:
    """The records of a Fetch read in a format a Fetch response of magic ``to_magic`` can carry.

    If no complete batch is newer than ``to_magic`` the bytes are returned
    unchanged. Otherwise every batch is converted (`convert_batch`), the
    partial tail is dropped (it cannot be converted; the client asks again
    from there), and whole converted batches are kept while the total stays
    within ``max_bytes``, always at least the first (KIP-74). Offsets are
    those stored.

    Args:
        data (bytes | bytearray | memoryview): Whole batches, maybe a partial
            one at the end.
        to_magic: 0 or 1.
        fetch_offset: The Fetch request's offset for this partition.
        max_bytes: The most bytes to return (at least one batch is).

    Returns:
        The converted record set.

    Raises:
        kclient.errors.CorruptRecordError: As `convert_batch`.
        codecs.CodecError: As `convert_batch`.
    """
    view = memoryview(data)
    infos = list(scan_batches(view))
    if all(info.magic <= to_magic for info in infos):
        return bytes(data)
    out = bytearray()
    for info in infos:
        piece = convert_batch(view[info.position : info.position + info.size], to_magic, fetch_offset)
        if out and len(out) + len(piece) > max_bytes:
            break
        out += piece
    return bytes(out)


__all__ = [
    "AppendRejected",
    "PreparedAppend",
    "ZSTD_MIN_FETCH_VERSION",
    "ZSTD_MIN_PRODUCE_VERSION",
    "convert_batch",
    "down_convert",
    "fetch_magic",
    "has_zstd",
    "prepare_append",
    "produce_magic_max",
    "stamp_v2_log_append_time",
]
