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

from collections.abc import Iterator

from crc32c import crc32c

from kclient._accel import speedups as _speedups
from kclient.errors import CorruptRecordError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.legacy import iter_entry_records
from kclient.protocol.records.scan import BatchInfo, scan_batches
from kclient.protocol.records.v2 import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    CRC_START,
    DECODES_ANY_BUFFER,
    BatchHeader,
    Row,
    decode_rows,
    records_section,
    validate_batch,
)
from kclient.protocol.records.v2 import (
    HEADER as _V2_HEADER,
)
from kclient.protocol.records.v2 import (
    HEADER_SIZE as _V2_HEADER_SIZE,
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
) -> Iterator[tuple[list[int], list[Row]]]:
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
    fast = _FastPath(buf, start_offset, where, chunk_rows)
    yield from fast.run(position)
    if fast.error is not None:
        raise fast.error
    yield from _general_path(buf, fast.position, start_offset, where)


class _FastPath:
    """The v2 fast path of `iter_record_rows`: whole plain batches decoded
    into shared lists, handed out a chunk at a time. It stops at the first
    batch it does not take (a partial or impossible header, another magic,
    a CRC mismatch), leaving ``position`` there for `_general_path`, or at
    a record that does not decode (``error``)."""

    def __init__(self, buf: bytes | bytearray | memoryview, start: int, where: str | None, chunk_rows: int) -> None:
        self.buf = buf
        self.view = memoryview(buf)
        self.start = start
        self.where = where
        self.chunk_rows = chunk_rows
        self.offsets: list[int] = []
        self.rows: list[Row] = []
        self.position = 0
        self.error: CorruptRecordError | None = None

    def _take(self) -> tuple[list[int], list[Row]]:
        chunk = (self.offsets, self.rows)
        self.offsets, self.rows = [], []
        return chunk

    def run(self, pos: int) -> Iterator[tuple[list[int], list[Row]]]:
        """Decode from byte ``pos``; yields full chunks, then what is left."""
        while True:
            if _c_decode_batches is not None:
                # Every plain batch from here on, until a chunk is full, in
                # one compiled call; what it stops at is taken below.
                pos = _c_decode_batches(self.buf, pos, self.start, self.offsets, self.rows, self.chunk_rows, crc32c)
                if self.rows and len(self.rows) >= self.chunk_rows:
                    yield self._take()
                    continue
            end = self._batch(pos)
            if end is None:
                break
            if len(self.rows) >= self.chunk_rows:
                yield self._take()
            pos = end
        self.position = pos
        if self.rows:
            yield self._take()

    def _batch(self, pos: int) -> int | None:
        """Decode the v2 batch at ``pos`` (if it holds offsets wanted);
        its end, or None where the fast path stops."""
        buf = self.buf
        if not (pos + _V2_HEADER_SIZE <= len(buf) and buf[pos + 16] == 2):
            return None
        base_offset: int
        batch_length: int
        last_delta: int
        count: int
        base_offset, batch_length, _, _, crc, attributes, last_delta, base_ts, max_ts, _, _, _, count = _V2_HEADER.unpack_from(buf, pos)
        end: int = pos + 12 + batch_length
        if end > len(buf) or batch_length < _V2_HEADER_SIZE - 12 or count < 0 or last_delta < 0:
            return None  # partial or impossible: the general path decides
        if base_offset + last_delta < self.start:
            return end
        if crc32c(self.view[pos + CRC_START : end]) != crc:
            return None  # the general path raises the CRC error
        if attributes & ATTR_CONTROL:  # transaction markers: checked, not delivered
            return end
        done = len(self.rows)
        try:
            data, first, stop = records_section(buf, pos, end, attributes, base_offset)
            if not isinstance(data, bytes) and not DECODES_ANY_BUFFER:
                data = bytes(data)
            decode_rows(data, first, stop, count, base_offset, base_ts, max_ts if attributes & ATTR_TIMESTAMP_TYPE else None, self.offsets, self.rows)
        except CorruptRecordError as exc:
            del self.offsets[done:], self.rows[done:]
            self.error = _located(exc, self.where, base_offset)
            return None
        if base_offset < self.start:  # the batch holding the start offset began earlier
            self._drop_before_start(done)
        return end

    def _drop_before_start(self, done: int) -> None:
        offsets, rows, start = self.offsets, self.rows, self.start
        keep = [i for i in range(done, len(rows)) if offsets[i] >= start]
        offsets[done:] = [offsets[i] for i in keep]
        rows[done:] = [rows[i] for i in keep]


def _general_path(buf: Buffer, pos: int, start: int, where: str | None) -> Iterator[tuple[list[int], list[Row]]]:
    """What the fast path left, batch by batch through the general readers
    (any magic, any codec), which raise the precise error."""
    view = memoryview(buf)
    for info in scan_batches(view, pos):
        if info.last_offset < start:
            continue
        try:
            records = _batch_records(buf, view, info)
        except CorruptRecordError as exc:
            raise _located(exc, where, info.base_offset) from None
        if records is None:
            continue
        if info.base_offset < start:
            records = [(o, r) for o, r in records if o >= start]
        if records:
            yield [o for o, _ in records], [r for _, r in records]


def _batch_records(buf: Buffer, view: memoryview, info: BatchInfo) -> list[tuple[int, Row]] | None:
    """``[(offset, row)]`` of one scanned batch or v0/v1 entry; None for a
    control batch."""
    if info.magic != 2:
        batch = view[info.position : info.position + info.size]
        return [(r.offset, (r.key, r.value, r.timestamp, r.headers)) for r in iter_entry_records(batch)]
    offsets: list[int] = []
    rows: list[Row] = []
    if decode_batch_rows(buf, info.position, info.size, offsets, rows) is None:
        return None
    return list(zip(offsets, rows))


def _located(exc: CorruptRecordError, where: str | None, base_offset: int) -> CorruptRecordError:
    if where is None:
        return exc
    return CorruptRecordError(f"{where} offset {base_offset}: {exc}")


__all__ = ["CHUNK_ROWS", "iter_record_rows"]


def decode_batch_rows(buf: Buffer, position: int, size: int, offsets: list[int], rows: list[Row]) -> BatchHeader | None:
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
