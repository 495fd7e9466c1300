"""The one record-set decoder: a Fetch response's records, in any message
format, as chunks of plain rows.

`iter_record_rows` is what every reader of fetched data uses (the
consumer's `ByteBufferMessageSet`, the high-level consumer's fetcher and
`kclient.protocol.records.iter_record_set`). It yields ``(offsets, rows)``
pairs of lists: the absolute offsets, and one ``(key, value, timestamp,
headers)`` tuple per record (see `kclient.protocol.records.v2.decode_rows`).

Fast path for v2 record batches (Kafka protocol guide, "Record Batch"): each
61-byte header unpacked once, the CRC-32C checked in C over the batch, and
the records of consecutive batches decoded by `decode_rows` straight from
the fetched buffer (no per-batch copy) into shared lists, handed out about
``chunk_rows`` at a time (whole batches). Where ``kclient._speedups`` is
built, runs of plain batches (uncompressed, whole, at or after the start
offset) are walked by its ``decode_batches`` in one call, with no Python
code per batch (1000 B records come about 16 to a 16 KB batch, so the
per-batch work counts). Anything unusual (v0/v1 entries,
an impossible header, a CRC mismatch) goes through the general readers
(`scan_batches`, `validate_batch`, `iter_entry_records`), which raise the
precise error after the rows before it were yielded.
"""

from __future__ import annotations

from typing import Iterator

from crc32c import crc32c

from kclient._accel import speedups as _speedups
from kclient.errors import CorruptRecordError
from kclient.protocol.records.legacy import iter_entry_records
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import (
    ATTR_CONTROL,
    DECODES_ANY_BUFFER,
    ATTR_TIMESTAMP_TYPE,
    BatchHeader,
    CRC_START,
    HEADER as _V2_HEADER,
    HEADER_SIZE as _V2_HEADER_SIZE,
    decode_rows,
    records_section,
    validate_batch,
)

#: The compiled fast path (None: pure Python only).
_c_decode_batches = _speedups.decode_batches if _speedups is not None else None

#: Rows per chunk handed out (whole batches, so a chunk may be larger):
#: small batches share the per-chunk cost and few objects are alive at
#: once (measured: decoding a whole 1 MB fetch before yielding is slower
#: for 100 B records).
CHUNK_ROWS = 256


def iter_record_rows(
    buf: bytes | bytearray | memoryview, start_offset: int = 0, *, where: str | None = None, chunk_rows: int = CHUNK_ROWS, position: int = 0
) -> Iterator[tuple[list[int], list[tuple]]]:
    """Decode the record set ``buf`` into ``(offsets, rows)`` chunks.

    Records before ``start_offset`` are skipped (the batch holding it may
    begin earlier), control batches (transaction markers) are checked and
    skipped, and a partial batch at the end (a fetch may cut one) is
    dropped.

    Args:
        buf: the record bytes; anything but ``bytes`` (or, with the
            compiled decoder, a ``bytearray`` or ``memoryview`` that is not
            changed afterwards) is copied once, so that keys and values are
            ``bytes``.
        start_offset: the first offset wanted.
        where: a label such as ``"topic-0"``; when given, a
            `CorruptRecordError` is re-raised as ``"<where> offset <batch
            base offset>: <reason>"``.
        chunk_rows: hand out the rows once about this many were decoded.
        position: the byte of ``buf`` the first batch starts at (bytes
            before it are not read); errors name byte positions in ``buf``.

    Yields:
        ``(offsets, rows)``: two lists of the same length, offsets
        ascending, rows ``(key, value, timestamp, headers)``.

    Raises:
        CorruptRecordError: a batch or entry fails its CRC, is malformed or
            undecodable, or has an unknown magic byte; raised after every
            record before that batch was yielded.
    """
    if not isinstance(buf, bytes) and not (DECODES_ANY_BUFFER and isinstance(buf, (bytearray, memoryview))):
        buf = bytes(buf)
    view = memoryview(buf)
    size = len(buf)
    unpack = _V2_HEADER.unpack_from
    start = start_offset
    offsets: list[int] = []
    rows: list[tuple] = []
    error = None
    pos = position
    while True:
        if _c_decode_batches is not None:
            # Every plain batch from here on, until a chunk is full, in one
            # compiled call; what it stops at is taken by the loop below.
            pos = _c_decode_batches(buf, pos, start, offsets, rows, chunk_rows, crc32c)
            if rows and len(rows) >= chunk_rows:
                yield offsets, rows
                offsets, rows = [], []
                continue
        if not (pos + _V2_HEADER_SIZE <= size and buf[pos + 16] == 2):
            break
        base_offset, batch_length, _, _, crc, attributes, last_delta, base_ts, max_ts, _, _, _, count = unpack(buf, pos)
        end = pos + 12 + batch_length
        if end > size or batch_length < _V2_HEADER_SIZE - 12 or count < 0 or last_delta < 0:
            break  # partial or impossible: the general path below decides
        if base_offset + last_delta >= start:
            if crc32c(view[pos + CRC_START : end]) != crc:
                break  # the general path raises the CRC error
            if attributes & ATTR_CONTROL:  # transaction markers: checked, not delivered
                pos = end
                continue
            done = len(rows)
            try:
                data, first, stop = records_section(buf, pos, end, attributes, base_offset)
                if not isinstance(data, bytes) and not DECODES_ANY_BUFFER:
                    data = bytes(data)
                decode_rows(data, first, stop, count, base_offset, base_ts, max_ts if attributes & ATTR_TIMESTAMP_TYPE else None, offsets, rows)
            except CorruptRecordError as exc:
                del offsets[done:], rows[done:]
                error = _located(exc, where, base_offset)
                break
            if base_offset < start:  # the batch holding start_offset began earlier
                keep = [i for i in range(done, len(rows)) if offsets[i] >= start]
                offsets[done:] = [offsets[i] for i in keep]
                rows[done:] = [rows[i] for i in keep]
            if len(rows) >= chunk_rows:
                yield offsets, rows
                offsets, rows = [], []
        pos = end
    if rows:
        yield offsets, rows
    if error is not None:
        raise error
    for info in scan_batches(view, pos):
        if info.last_offset < start:
            continue
        batch = view[info.position : info.position + info.size]
        try:
            if info.magic != 2:
                records = [(r.offset, (r.key, r.value, r.timestamp, r.headers)) for r in iter_entry_records(batch)]
            else:
                o, r = [], []
                if decode_batch_rows(buf, info.position, info.size, o, r) is None:
                    continue
                records = list(zip(o, r))
        except CorruptRecordError as exc:
            raise _located(exc, where, info.base_offset) from None
        if info.base_offset < start:
            records = [(o, r) for o, r in records if o >= start]
        if records:
            yield [o for o, _ in records], [r for _, r in records]


def _located(exc: CorruptRecordError, where: str | None, base_offset: int) -> CorruptRecordError:
    if where is None:
        return exc
    return CorruptRecordError(f"{where} offset {base_offset}: {exc}")


__all__ = ["CHUNK_ROWS", "iter_record_rows"]


def decode_batch_rows(buf: bytes, position: int, size: int, offsets: list, rows: list) -> BatchHeader | None:
    """Check and decode the v2 record batch at ``buf[position:position +
    size]`` (the general path: any codec), appending its absolute offsets
    and ``(key, value, timestamp, headers)`` rows to ``offsets`` / ``rows``.

    Args:
        buf: The record set, as ``bytes`` (keys and values of uncompressed
            batches are slices of it).
        position: Byte position of the batch.
        size: The batch's size in bytes (from `scan_batches`).
        offsets: List the offsets are appended to.
        rows: List the rows are appended to.

    Returns:
        The batch header (its ``is_log_append_time`` says which timestamps
            the rows carry), or None for a control batch (a transaction
            marker), which adds no row.

    Raises:
        CorruptRecordError: The CRC does not match, or the header or a
            record is malformed.
        CodecError: The records section does not decompress.
    """
    header = validate_batch(memoryview(buf)[position : position + size])
    if header.is_control:
        return None
    data, first, stop = records_section(buf, position, position + size, header.attributes, header.base_offset)
    if not isinstance(data, bytes):
        data = bytes(data)
    fixed = header.max_timestamp if header.is_log_append_time else None
    decode_rows(data, first, stop, header.records_count, header.base_offset, header.base_timestamp, fixed, offsets, rows)
    return header
