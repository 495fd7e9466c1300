"""Record formats: v2 record batches (`.v2`), v0/v1 message sets
(`.legacy`), batch scanning (`.scan`) and compression codecs
(`.codecs`).

Dispatch on the magic byte at position 16: every format keeps offset and
size at the same place (bytes 0-11; Kafka documentation
https://kafka.apache.org/documentation/#messageformat, "Record Batch" and
"Old Message Format"), so one record set may
even mix formats (a log converted from v1 to v2 keeps its old entries).
"""

from __future__ import annotations

from collections.abc import Iterator

from kclient.errors import CorruptRecordError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.legacy import (
    LegacyEntryInfo,
    LegacyMessage,
    assign_legacy_offsets,
    build_message,
    build_message_set,
    iter_entry_records,
    iter_legacy_records,
    read_message,
    validate_legacy_entry,
)
from kclient.protocol.records.rows import iter_record_rows
from kclient.protocol.records.scan import BatchInfo, read_batch_info, scan_batches
from kclient.protocol.records.v2 import BatchHeader, Header, Record, build_batch, iter_records, validate_batch


def iter_record_set(buf: Buffer) -> Iterator[Record]:
    """Every record of every complete batch in a record set, in any format.

    v2 batches have their control batches skipped; v0/v1 entries have their
    compressed wrappers expanded with absolute offsets (see `.legacy`). A
    partial batch at the end is dropped. The records come from
    `.rows.iter_record_rows`, the one record-set decoder.

    Args:
        buf: The record set bytes (e.g. a Fetch response's ``records``).

    Yields:
        Each `Record`, in offset order within the set.

    Raises:
        CorruptRecordError: A bad batch or entry (CRC mismatch, damaged or
            undecodable data, unknown magic).
    """
    for offsets, rows in iter_record_rows(buf):
        for offset, (key, value, timestamp, headers) in zip(offsets, rows):
            yield Record(offset, timestamp, key, value, headers)


__all__ = [
    "BatchHeader",
    "BatchInfo",
    "CorruptRecordError",
    "Header",
    "LegacyEntryInfo",
    "LegacyMessage",
    "Record",
    "assign_legacy_offsets",
    "build_batch",
    "build_message",
    "build_message_set",
    "iter_entry_records",
    "iter_legacy_records",
    "iter_record_rows",
    "iter_record_set",
    "iter_records",
    "read_batch_info",
    "read_message",
    "scan_batches",
    "validate_batch",
    "validate_legacy_entry",
]
