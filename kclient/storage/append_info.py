"""What the log knows and checks of a record set it appends.

Kafka validates a Produce record set once (``LogValidator``) and the log
appends the result with a ``LogAppendInfo`` (offsets, max timestamp and the
offset holding it, codecs, counts) instead of reading the batches again.
Here `ValidatedBatch` is one batch's part of that value:
`kclient.broker.convert.prepare_append` makes it while it validates, and
`kclient.storage.log.Log.append` uses it for the size checks, the
idempotent producer checks (KIP-98), the offset assignment and the segment's
indexes. A caller without one (a follower's fetch, the group coordinator's
own batches) gets it from `analyze_records`, Kafka's
``analyzeAndValidateRecords``: one read of each header.

Then, as Kafka: every batch whole, none above ``max.message.bytes``, the set
within ``segment.bytes`` (`check_batches`); a v2 batch gets the next offsets
in its first 8 bytes (`assign_offsets`), a compressed v0/v1 wrapper one
offset per inner message (`assign_with_wrappers`) (Kafka documentation
https://kafka.apache.org/documentation/#messageformat). Pure functions over
bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from kclient.errors import CorruptRecordError, InvalidRecordError, MessageSizeTooLargeError, RecordListTooLargeError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.legacy import ATTR_CODEC_MASK as _CODEC_MASK
from kclient.protocol.records.legacy import ATTRIBUTES_AT as _V01_ATTRIBUTES_AT
from kclient.protocol.records.legacy import assign_legacy_offsets
from kclient.protocol.records.scan import BatchInfo, scan_batches
from kclient.protocol.records.v2 import ATTR_TRANSACTIONAL, HEADER

_OFFSET = struct.Struct(">q")
#: ``pack_offset(buf, position, offset)``: write a batch's base offset (its
#: first 8 bytes, big-endian int64) at ``position`` of ``buf``.
pack_offset = _OFFSET.pack_into
_header_of = HEADER.unpack_from


class ValidatedBatch(NamedTuple):
    """One batch (v2) or entry (v0/v1) of a record set, as validation found it.

    A tuple, so cheap to make on the produce path; read-only.

    Attributes:
        position: Byte position of its first byte in the record set.
        size: Its bytes, including the 12-byte log overhead.
        magic: 0, 1 or 2.
        codec: Compression codec id (0 = none).
        base_offset: The offset in its first 8 bytes: a placeholder in a
            Produce request, the leader's in a follower's fetch; for a v0/v1
            entry its own offset (a compressed wrapper's last inner one).
        last_offset_delta: v2 ``lastOffsetDelta``; 0 for a v0/v1 entry.
        max_timestamp: Largest timestamp in ms (the v1 entry's own, -1 for
            v0).
        partition_leader_epoch: v2 ``partitionLeaderEpoch`` (KIP-101), -1
            for v0/v1.
        producer_id: v2 producer id (KIP-98), -1 when none.
        producer_epoch: v2 producer epoch, -1 when none.
        base_sequence: v2 sequence number of the first record, -1 when none.
        is_transactional: v2 attribute bit 4.
        record_count: Records it holds (1 for an uncompressed v0/v1 entry;
            -1 when unknown: a compressed v0/v1 wrapper `analyze_records`
            read without decompressing).
    """

    position: int
    size: int
    magic: int
    codec: int
    base_offset: int
    last_offset_delta: int
    max_timestamp: int
    partition_leader_epoch: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False
    record_count: int = 1

    @classmethod
    def of_v2(cls, position: int, header: tuple[Any, ...]) -> ValidatedBatch:
        """From a v2 header's 13 fields in wire order (`HEADER`'s unpacking).

        Args:
            position: The batch's byte position in the record set.
            header: ``(baseOffset, batchLength, partitionLeaderEpoch, magic,
                crc, attributes, lastOffsetDelta, baseTimestamp,
                maxTimestamp, producerId, producerEpoch, baseSequence,
                recordsCount)``.

        Returns:
            The batch.
        """
        base, length, epoch, magic, _, attributes, delta, _, max_ts, pid, pepoch, seq, count = header
        return cls(
            position, length + 12, magic, attributes & _CODEC_MASK, base, delta, max_ts, epoch, pid, pepoch, seq,
            bool(attributes & ATTR_TRANSACTIONAL), count,
        )  # fmt: skip

    @property
    def last_offset(self) -> int:
        """``base_offset + last_offset_delta``."""
        return self.base_offset + self.last_offset_delta

    @property
    def is_wrapper(self) -> bool:
        """A compressed v0/v1 wrapper: it carries only its last inner offset
        and takes one offset per inner message."""
        return self.magic != 2 and self.codec != 0

    @property
    def is_idempotent(self) -> bool:
        """A v2 batch with a producer id and a base sequence (KIP-98)."""
        return self.producer_id >= 0 and self.base_sequence >= 0


def analyze_records(buf: Buffer) -> list[ValidatedBatch]:
    """The batches of a record set, one header read each (Kafka's
    ``analyzeAndValidateRecords``; no checksum is checked).

    Args:
        buf (bytes | bytearray | memoryview): The record set.

    Returns:
        Its batches in order.

    Raises:
        CorruptRecordError: An impossible header or a partial trailing batch.
    """
    out = []
    covered = 0
    for info in scan_batches(buf):
        position = info.position
        if info.magic == 2:
            out.append(ValidatedBatch.of_v2(position, _header_of(buf, position)))
        else:
            codec = buf[position + _V01_ATTRIBUTES_AT] & _CODEC_MASK
            count = -1 if codec else 1
            out.append(ValidatedBatch(position, info.size, info.magic, codec, info.base_offset, 0, info.max_timestamp, record_count=count))
        covered += info.size
    if covered != len(buf):
        raise CorruptRecordError(f"record set of {len(buf)} bytes ends with a partial batch of {len(buf) - covered} bytes")
    return out


def check_batches(batches: Sequence[ValidatedBatch], total: int, max_message_bytes: int, segment_bytes: int) -> bool:
    """Check a record set's framing and sizes against the log's limits.

    Args:
        batches: Its batches.
        total: Its length in bytes.
        max_message_bytes: The largest batch allowed, in bytes.
        segment_bytes: The largest set allowed, in bytes.

    Returns:
        Whether it holds compressed v0/v1 wrappers (see
            `assign_with_wrappers`).

    Raises:
        CorruptRecordError: The batches do not cover the set.
        MessageSizeTooLargeError: A batch above ``max_message_bytes``.
        InvalidRecordError: A v2 batch with a negative ``lastOffsetDelta``.
        RecordListTooLargeError: The set is above ``segment_bytes``.
    """
    covered = 0
    wrappers = False
    for batch in batches:
        size = batch.size
        if size > max_message_bytes:
            raise MessageSizeTooLargeError(f"batch at byte {batch.position} is {size} bytes, above max.message.bytes {max_message_bytes}")
        if batch.last_offset_delta < 0:
            raise InvalidRecordError(f"batch at byte {batch.position} has negative lastOffsetDelta")
        if batch.magic != 2 and batch.codec:
            wrappers = True
        covered += size
    if covered != total:
        raise CorruptRecordError(f"record set of {total} bytes ends with a partial batch of {total - covered} bytes")
    if total > segment_bytes:
        raise RecordListTooLargeError(f"record set of {total} bytes is larger than segment.bytes {segment_bytes}")
    return wrappers


def check_batch(batch: ValidatedBatch, total: int, max_message_bytes: int, segment_bytes: int) -> None:
    """`check_batches` of a record set holding exactly one batch (the
    leader's common append): the same checks, errors and messages.

    Args:
        batch: The batch.
        total: The record set's length in bytes.
        max_message_bytes: The largest batch allowed, in bytes.
        segment_bytes: The largest set allowed, in bytes.

    Raises:
        CorruptRecordError: The batch does not cover the set.
        MessageSizeTooLargeError: The batch is above ``max_message_bytes``.
        InvalidRecordError: A negative ``lastOffsetDelta``.
        RecordListTooLargeError: The set is above ``segment_bytes``.
    """
    size = batch.size
    if size > max_message_bytes or batch.last_offset_delta < 0 or size != total or total > segment_bytes:
        check_batches((batch,), total, max_message_bytes, segment_bytes)  # raises, with its message


def assign_offsets(buf: bytearray, batches: Sequence[ValidatedBatch], next_offset: int) -> list[BatchInfo]:
    """Write offsets into a record set without compressed v0/v1 wrappers.

    Args:
        buf: The record set, written in place.
        batches: Its batches.
        next_offset: The first offset to assign.

    Returns:
        The batches with their offsets, for the segment's indexes; the next
            offset is the last one's ``last_offset + 1``.
    """
    placed = []
    pack = _OFFSET.pack_into
    for b in batches:
        pack(buf, b.position, next_offset)
        last = next_offset + b.last_offset_delta
        placed.append(BatchInfo(b.position, next_offset, last, b.size, b.magic, b.max_timestamp))
        next_offset = last + 1
    return placed


def assign_with_wrappers(buf: bytearray, batches: Sequence[ValidatedBatch], next_offset: int) -> tuple[bytearray, int]:
    """Offsets for a record set holding compressed v0/v1 wrappers.

    Each wrapper takes as many offsets as it has inner messages and carries
    the last one (v1 inner offsets stay relative, so only the wrapper header
    is rewritten; v0 inner offsets are absolute, so that set is rebuilt:
    `kclient.protocol.records.legacy.assign_legacy_offsets`).

    Args:
        buf: The record set.
        batches: Its batches.
        next_offset: The first offset to assign.

    Returns:
        The new bytes and the next offset after them.
    """
    out = bytearray()
    for b in batches:
        entry = buf[b.position : b.position + b.size]
        if b.is_wrapper:
            new, last = assign_legacy_offsets(entry, next_offset)
            out += new
            next_offset = last + 1
        else:
            _OFFSET.pack_into(entry, 0, next_offset)
            out += entry
            next_offset += b.last_offset_delta + 1
    return out, next_offset


def placed_batches(batches: Sequence[ValidatedBatch]) -> list[BatchInfo]:
    """The batches of a record set whose offsets are final (a follower's),
    as the segment indexes them."""
    return [BatchInfo(b.position, b.base_offset, b.last_offset, b.size, b.magic, b.max_timestamp) for b in batches]


__all__ = [
    "ValidatedBatch",
    "analyze_records",
    "assign_offsets",
    "assign_with_wrappers",
    "check_batch",
    "check_batches",
    "pack_offset",
    "placed_batches",
]
