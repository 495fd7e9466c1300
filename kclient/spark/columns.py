"""Fetched record sets decoded into columns, the shape Spark wants.

Pure: no pyspark, no pyarrow, no sockets. `decode_columns` walks the
batches of one partition's fetched bytes with the protocol layer's readers
(`scan_batches`, and `kclient.protocol.records.rows.decode_batch_rows` for v2;
`iter_entry_records` for v0/v1) and returns parallel lists, one per column
of the Spark Kafka source schema, plus the offset to fetch next. Turning the
lists into Arrow arrays is `kclient.spark.reader`'s job.
"""

from __future__ import annotations

from bisect import bisect_left

import attrs

from kclient.errors import CorruptRecordError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records import iter_entry_records, read_message, scan_batches
from kclient.protocol.records.rows import decode_batch_rows
from kclient.protocol.records.v2 import Header, Row

__all__ = ["Columns", "TIMESTAMP_TYPE_CREATE", "TIMESTAMP_TYPE_LOG_APPEND", "TIMESTAMP_TYPE_NONE", "decode_columns"]

#: Kafka's `TimestampType` ids, the `timestampType` column of Spark's schema.
TIMESTAMP_TYPE_NONE = -1
TIMESTAMP_TYPE_CREATE = 0
TIMESTAMP_TYPE_LOG_APPEND = 1


@attrs.define
class Columns:
    """Decoded records of one partition, column by column (equal lengths).

    `timestamps` are ms since the epoch; `headers` holds one tuple of
    `Header` per record. `next_offset` is where the next fetch should start:
    one past the last complete batch seen (so compaction gaps and control
    batches are stepped over), never less than the offset asked for.
    """

    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps: list[int]
    timestamp_types: list[int]
    headers: list[tuple[Header, ...]]
    next_offset: int

    def __len__(self) -> int:
        return len(self.offsets)


def decode_columns(buf: Buffer, start: int, until: int, where: str = "") -> Columns:
    """Decode the records with offsets in `[start, until)` from `buf`, the
    record bytes a Fetch returned for one partition (a partial batch at the
    end is left for the next fetch).

    Args:
        buf: the fetched record set (any message format).
        start: first offset wanted (a batch may begin before it).
        until: offset past the last one wanted.
        where: `topic-partition`, for error messages.

    Returns:
        The columns and the next offset to fetch.

    Raises:
        CorruptRecordError: a batch fails its CRC or is malformed (naming
            `where` and the batch's offset).
    """
    if not isinstance(buf, bytes):
        buf = bytes(buf)
    view = memoryview(buf)
    offsets: list[int] = []
    rows: list[Row] = []
    types: list[int] = []
    next_offset = start
    for info in scan_batches(view):
        next_offset = max(next_offset, info.last_offset + 1)
        if info.last_offset < start:
            continue
        if info.base_offset >= until:
            break
        batch = view[info.position : info.position + info.size]
        try:
            if info.magic == 2:
                done = len(rows)
                header = decode_batch_rows(buf, info.position, info.size, offsets, rows)
                if header is None:
                    continue
                types.extend([TIMESTAMP_TYPE_LOG_APPEND if header.is_log_append_time else TIMESTAMP_TYPE_CREATE] * (len(rows) - done))
            else:
                wrapper = read_message(batch, 0)
                kind = TIMESTAMP_TYPE_NONE if wrapper.magic == 0 else TIMESTAMP_TYPE_LOG_APPEND if wrapper.is_log_append_time else TIMESTAMP_TYPE_CREATE
                for r in iter_entry_records(batch):
                    offsets.append(r.offset)
                    rows.append((r.key, r.value, r.timestamp, r.headers))
                    types.append(kind)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{where} offset {info.base_offset}: {exc}") from None
    lo = bisect_left(offsets, start)
    hi = bisect_left(offsets, until)
    if lo or hi < len(offsets):
        offsets, rows, types = offsets[lo:hi], rows[lo:hi], types[lo:hi]
    if rows:
        keys, values, timestamps, headers = map(list, zip(*rows))
    else:
        keys, values, timestamps, headers = [], [], [], []
    return Columns(offsets, keys, values, timestamps, types, headers, next_offset)
