"""The Produce check of compacted topics: every record needs a key.

Kafka documentation, "Log Compaction": compaction keeps the last record of
each key, so a compacted topic (``cleanup.policy`` holding ``compact``)
refuses a record without a key, as Kafka's ``LogValidator`` does: with
INVALID_RECORD and the culprit's index in ``record_errors`` (Produce v8+,
KIP-467), with CORRUPT_MESSAGE on older Produce versions, which predate
that error code.

Pure functions over bytes.
"""

from __future__ import annotations

from kclient.errors import CORRUPT_MESSAGE, INVALID_RECORD
from kclient.protocol.messages.produce import BatchIndexAndErrorMessage
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.legacy import iter_entry_records
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import decode_records, read_header

#: First Produce version with INVALID_RECORD and ``record_errors`` (KIP-467).
RECORD_ERRORS_VERSION = 8


def first_keyless_record(records: Buffer) -> int | None:
    """Index of the first record without a key in a record set.

    Control batches are skipped (they are never produced by clients anyway).

    Args:
        records (bytes | bytearray | memoryview): One partition's validated
            record set.

    Returns:
        The record's index counted over the whole set (the ``batch_index`` of
            Kafka's ``record_errors``), or ``None`` when every record has a key.
    """
    view = memoryview(records).cast("B")
    index = 0
    for info in scan_batches(view):
        raw = bytes(view[info.position : info.position + info.size])
        if info.magic == 2:
            header = read_header(raw)
            if header.is_control:
                continue
            keys = [row[2] for row in decode_records(raw, header, check_crc=False)]
        else:
            keys = [r.key for r in iter_entry_records(raw, check_crc=False)]
        for key in keys:
            if key is None:
                return index
            index += 1
    return None


def keyless_error(topic: str, produce_version: int, index: int) -> tuple[int, str, list[BatchIndexAndErrorMessage]]:
    """The Produce partition error for a keyless record at ``index``.

    Args:
        topic: The compacted topic.
        produce_version: The request's version.
        index: From `first_keyless_record`.

    Returns:
        ``(error code, error message, record_errors)``.
    """
    message = f"Compacted topic {topic} cannot accept a record without a key"
    if produce_version >= RECORD_ERRORS_VERSION:
        return INVALID_RECORD, message, [BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=message)]
    return CORRUPT_MESSAGE, message, []


__all__ = ["RECORD_ERRORS_VERSION", "first_keyless_record", "keyless_error"]
