"""Rewriting one stored batch without some of its records, for the log
cleaner (Kafka's ``MemoryRecords.filterTo``).

Kafka documentation, "Log Compaction": compaction keeps the offset of
every retained record; so a v2 batch (Kafka documentation, "Record
Batch") is rebuilt with the same base offset, each retained record with
its own offset delta, the same attributes (codec, timestamp type,
transactional and control bits), partition leader epoch, producer id,
producer epoch and base sequence, and the same ``lastOffsetDelta`` as the
original (Kafka keeps it so that the producer's last sequence survives
cleaning). A batch keeping every record is returned byte for byte; one
keeping none is dropped, or, when it is the last batch of a live
idempotent producer, kept as an empty batch (Kafka's ``RETAIN_EMPTY``:
header only, no records) so the producer state survives; such an empty
batch goes in a later cleaning once it is no longer that last batch.

v0/v1 entries: an uncompressed message is kept or dropped whole; a
compressed wrapper is kept whole if any inner message is kept (its inner
messages are not rewritten).

Pure functions over bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import attrs
import crc32c

from kclient.protocol.records import codecs
from kclient.protocol.records.legacy import iter_entry_records
from kclient.protocol.records.v2 import (
    ATTR_DELETE_HORIZON,
    CRC_AT,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    BatchHeader,
    decode_records,
    encode_record,
    read_header,
)

#: ``keep(offset, key, value) -> bool``: whether the record stays.
KeepRecord = Callable[[int, "bytes | None", "bytes | None"], bool]

_LOG_OVERHEAD = 12


@attrs.frozen
class Filtered:
    """Result of filtering one batch.

    Attributes:
        data: The bytes to write (the original, a rebuilt or an empty
            batch), or ``None`` to drop the batch.
        records: How many records the original held.
        kept: How many of them stay.
    """

    data: bytes | None
    records: int
    kept: int


def _pack(header: BatchHeader, payload: bytes, *, last_offset_delta: int, base_ts: int, max_ts: int, count: int, attributes: int) -> bytes:
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out,
        0,
        header.base_offset,
        HEADER_SIZE - _LOG_OVERHEAD + len(payload),
        header.partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
    )
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(out)[CRC_START:]))
    struct.pack_into(">I", out, CRC_AT, crc)
    return bytes(out) + payload


def empty_batch(header: BatchHeader) -> bytes:
    """The header-only batch that stands for ``header``'s batch once all its
    records are gone (Kafka's ``writeEmptyHeader``): same base offset,
    ``lastOffsetDelta``, producer fields, epoch and attributes minus the
    codec, no records, both timestamps the original maximum."""
    attributes = header.attributes & ~codecs.ATTR_CODEC_MASK
    return _pack(header, b"", last_offset_delta=header.last_offset_delta, base_ts=header.max_timestamp, max_ts=header.max_timestamp, count=0, attributes=attributes)


def filter_v2(batch: bytes, keep: KeepRecord, *, retain_empty: bool = False) -> Filtered:
    """Keep the records of one v2 batch for which ``keep`` is true.

    Args:
        batch: Exactly one v2 batch.
        keep: Called for each record, in offset order.
        retain_empty: Keep an empty batch rather than dropping it when no
            record stays.

    Returns:
        The `Filtered` result (see the module docstring).

    Raises:
        kclient.errors.CorruptRecordError: Malformed records.
    """
    header = read_header(batch)
    rows = decode_records(batch, header, check_crc=False)
    retained = [r for r in rows if keep(r[0], r[2], r[3])]
    if not rows:  # (an empty batch an earlier cleaning left goes once it is no longer needed)
        return Filtered(batch if retain_empty else None, 0, 0)
    if len(retained) == len(rows):
        return Filtered(batch, len(rows), len(rows))
    if not retained:
        return Filtered(empty_batch(header) if retain_empty else None, len(rows), 0)
    log_append = header.is_log_append_time
    horizon = header.delete_horizon_ms  # (a delete horizon stays: the base timestamp keeps holding it)
    base_ts = retained[0][1] if horizon is None else horizon
    body = bytearray()
    max_ts = -1
    for offset, ts, key, value, headers in retained:
        max_ts = max(max_ts, ts)
        encode_record(body, offset - header.base_offset, 0 if log_append else ts - base_ts, key, value, headers)
    if log_append:
        max_ts = header.max_timestamp
    payload = codecs.compress(header.codec, bytes(body)) if header.codec else bytes(body)
    data = _pack(
        header,
        payload,
        last_offset_delta=header.last_offset_delta,
        base_ts=base_ts,
        max_ts=max_ts,
        count=len(retained),
        attributes=header.attributes,
    )
    return Filtered(data, len(rows), len(retained))


def stamp_delete_horizon(batch: bytes, horizon_ms: int) -> bytes:
    """``batch`` (one v2 batch) with every record kept and its delete
    horizon set (KIP-534; Kafka's ``MemoryRecords.filterTo`` when a batch
    holds a tombstone or a marker of a transaction with no data left): the
    ``ATTR_DELETE_HORIZON`` attribute bit set, the base timestamp set to
    the horizon and each record's timestamp delta taken from it, so every
    record keeps its timestamp; the other header fields stay.

    Args:
        batch: Exactly one v2 batch.
        horizon_ms: The delete horizon, ms since the epoch (the cleaning
            time plus ``delete.retention.ms``).

    Returns:
        The rewritten batch.

    Raises:
        kclient.errors.CorruptRecordError: Malformed records.
    """
    header = read_header(batch)
    log_append = header.is_log_append_time
    body = bytearray()
    for offset, ts, key, value, headers in decode_records(batch, header, check_crc=False):
        encode_record(body, offset - header.base_offset, 0 if log_append else ts - horizon_ms, key, value, headers)
    payload = codecs.compress(header.codec, bytes(body)) if header.codec else bytes(body)
    return _pack(
        header,
        payload,
        last_offset_delta=header.last_offset_delta,
        base_ts=horizon_ms,
        max_ts=header.max_timestamp,
        count=header.records_count,
        attributes=header.attributes | ATTR_DELETE_HORIZON,
    )


def filter_legacy(entry: bytes, keep: KeepRecord) -> Filtered:
    """Keep or drop one v0/v1 entry (see the module docstring).

    Args:
        entry: Exactly one entry, log overhead included.
        keep: Called for each (inner) message, in offset order.

    Returns:
        The `Filtered` result: the entry as it is, or ``None``.
    """
    records = list(iter_entry_records(entry, check_crc=False))
    kept = sum(1 for r in records if keep(r.offset, r.key, r.value))
    if len(records) == 1 or kept == 0:
        return Filtered(entry if kept else None, len(records), kept)
    return Filtered(entry, len(records), len(records))


__all__ = ["Filtered", "KeepRecord", "empty_batch", "filter_legacy", "filter_v2", "stamp_delete_horizon"]
