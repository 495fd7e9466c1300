"""What the log checks and rewrites of a record set it appends.

Kafka's ``UnifiedLog.analyzeAndValidateRecords`` (framing and sizes, giving
a ``LogAppendInfo``) and the offset assignment of its ``LogValidator``:
every batch whole, none above ``max.message.bytes``, the set within
``segment.bytes``; a v2 batch gets the next offsets in its first 8 bytes, a
compressed v0/v1 wrapper one offset per inner message (Kafka documentation
https://kafka.apache.org/documentation/#messageformat). Used by
`kclient.storage.log.Log`; pure functions over bytes.
"""

from __future__ import annotations

import struct
from typing import Iterator

from kclient.errors import CorruptRecordError, InvalidRecordError, MessageSizeTooLargeError, RecordListTooLargeError
from kclient.protocol.records.legacy import ATTR_CODEC_MASK as _CODEC_MASK
from kclient.protocol.records.legacy import ATTRIBUTES_AT as _V01_ATTRIBUTES_AT
from kclient.protocol.records.legacy import assign_legacy_offsets
from kclient.protocol.records.scan import BatchInfo, ProducerFields, read_v2_producer_fields, scan_batches

_OFFSET = struct.Struct(">q")


def is_wrapper(buf, info: BatchInfo) -> bool:
    """Whether ``info`` is a compressed v0/v1 wrapper (it carries only its
    last inner offset).

    Args:
        buf (bytes | bytearray | memoryview): The record set.
        info: One of its batches.
    """
    return info.magic != 2 and bool(buf[info.position + _V01_ATTRIBUTES_AT] & _CODEC_MASK)


def validate_record_set(buf, max_message_bytes: int, segment_bytes: int) -> tuple[list[BatchInfo], bool]:
    """Check a record set's framing and sizes.

    Args:
        buf (bytes | bytearray | memoryview): The record set.
        max_message_bytes: The largest batch allowed, in bytes.
        segment_bytes: The largest set allowed, in bytes.

    Returns:
        Its batches, and whether it holds compressed v0/v1 wrappers.

    Raises:
        CorruptRecordError: An impossible header or a partial trailing batch.
        MessageSizeTooLargeError: A batch above ``max_message_bytes``.
        InvalidRecordError: A v2 batch with a negative ``lastOffsetDelta``.
        RecordListTooLargeError: The set is above ``segment_bytes``.
    """
    total = len(buf)
    infos = list(scan_batches(buf))
    covered = sum(i.size for i in infos)
    if covered != total:
        raise CorruptRecordError(f"record set of {total} bytes ends with a partial batch of {total - covered} bytes")
    wrappers = False  # compressed v0/v1 wrappers, whose inner messages own several offsets
    for info in infos:
        if info.size > max_message_bytes:
            raise MessageSizeTooLargeError(f"batch at byte {info.position} is {info.size} bytes, above max.message.bytes {max_message_bytes}")
        if info.magic == 2:
            if info.last_offset < info.base_offset:
                raise InvalidRecordError(f"batch at byte {info.position} has negative lastOffsetDelta")
        elif is_wrapper(buf, info):
            wrappers = True
    if total > segment_bytes:
        raise RecordListTooLargeError(f"record set of {total} bytes is larger than segment.bytes {segment_bytes}")
    return infos, wrappers


def assign_offsets(buf: bytearray, infos: list[BatchInfo], next_offset: int) -> int:
    """Write offsets into a record set without compressed v0/v1 wrappers,
    from ``next_offset`` on; returns the next offset after it."""
    for info in infos:
        _OFFSET.pack_into(buf, info.position, next_offset)
        next_offset += info.last_offset - info.base_offset + 1
    return next_offset


def assign_with_wrappers(buf: bytearray, infos: list[BatchInfo], next_offset: int) -> tuple[bytearray, int]:
    """Offsets for a record set holding compressed v0/v1 wrappers.

    Each wrapper takes as many offsets as it has inner messages and carries
    the last one (v1 inner offsets stay relative, so only the wrapper header
    is rewritten; v0 inner offsets are absolute, so that set is rebuilt:
    `kclient.protocol.records.legacy.assign_legacy_offsets`).

    Args:
        buf: The record set.
        infos: Its batches.
        next_offset: The first offset to assign.

    Returns:
        The new bytes and the next offset after them.
    """
    out = bytearray()
    for info in infos:
        entry = buf[info.position : info.position + info.size]
        if info.magic != 2 and entry[_V01_ATTRIBUTES_AT] & _CODEC_MASK:
            new, last = assign_legacy_offsets(entry, next_offset)
            out += new
            next_offset = last + 1
        else:
            _OFFSET.pack_into(entry, 0, next_offset)
            out += entry
            next_offset += info.last_offset - info.base_offset + 1
    return out, next_offset


def producer_fields(buf, infos: list[BatchInfo], all_v2: bool = False) -> Iterator[tuple[BatchInfo, ProducerFields]]:
    """The v2 batches of ``buf`` with their header fields.

    Args:
        buf (bytes | bytearray | memoryview): The record set.
        infos: Its batches.
        all_v2: Every v2 batch, not only those with a producer id and a
            base sequence (idempotent, KIP-98).

    Yields:
        ``(info, fields)`` per batch.
    """
    for info in infos:
        if info.magic == 2:
            fields = read_v2_producer_fields(buf, info.position)
            if all_v2 or (fields.producer_id >= 0 and fields.base_sequence >= 0):
                yield info, fields


__all__ = ["assign_offsets", "assign_with_wrappers", "is_wrapper", "producer_fields", "validate_record_set"]
