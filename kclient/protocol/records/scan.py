"""Walk the batches of a record set without decoding their records.

Every format puts the same two fields first: offset int64 at byte 0 and a
size int32 at byte 8 (the bytes that follow), and the magic byte at byte 16
(Kafka documentation https://kafka.apache.org/documentation/#messageformat,
"Record Batch" and "Old Message Format"). For a v2 batch the offset is the base
offset and ``lastOffsetDelta`` sits at byte 23; for a v0/v1 entry the offset
is the entry's own (for a compressed wrapper, that of its last inner message).
A v2 header also carries, outside the CRC-32C coverage (which starts at the
attributes, byte 21), the ``partitionLeaderEpoch`` at byte 12 (KIP-101),
and inside it the idempotent producer fields at bytes 43..57 (KIP-98):
`read_v2_producer_fields` reads them, `stamp_partition_leader_epoch`
writes the epoch without touching the CRC.

Pure: used by the broker's log, the dump tool and the consumers.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import attrs

from kclient.errors import CorruptRecordError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.v2 import HEADER_SIZE

LOG_OVERHEAD = 12  # offset int64 + size int32
#: Byte position of the magic byte, the same in every format.
MAGIC_AT = 16
_HEAD = struct.Struct(">qi")
_V2_TAIL = struct.Struct(">iqq")  # lastOffsetDelta @23, baseTimestamp @27, maxTimestamp @35
_V1_TS = struct.Struct(">q")  # timestamp @18 in a v1 entry
#: Byte position of a v2 batch's ``partitionLeaderEpoch`` (int32), before
#: the magic byte and so outside the CRC-32C coverage.
PARTITION_LEADER_EPOCH_AT = 12
_EPOCH = struct.Struct(">i")
#: Byte position of a v2 batch's producerId int64, producerEpoch int16 and
#: baseSequence int32.
PRODUCER_ID_AT = 43
_V2_PRODUCER = struct.Struct(">qhi")
V2_HEADER_SIZE = HEADER_SIZE
#: Smallest v0 / v1 message after the log overhead: crc 4 + magic 1 +
#: attributes 1 + key length 4 + value length 4 (+ timestamp 8 in v1).
MIN_V0_SIZE = 14
MIN_V1_SIZE = 22


@attrs.frozen
class BatchInfo:
    """Where one batch (v2) or entry (v0/v1) sits in a buffer.

    ``position``: byte position of its first byte; ``size``: total bytes
    including the 12-byte log overhead; ``base_offset`` / ``last_offset``:
    its first and last offsets (equal for a v0/v1 entry, whose base is not
    known without decompressing); ``max_timestamp``: ms, -1 for v0.
    """

    position: int
    base_offset: int
    last_offset: int
    size: int
    magic: int
    max_timestamp: int

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def read_batch_info(buf: Buffer, position: int) -> BatchInfo | None:
    """Header facts of the batch or entry at ``position``, in any format.

    Args:
        buf (bytes | bytearray | memoryview): The record data.
        position: Offset of the batch's first byte in ``buf``.

    Returns:
        The batch's facts, or ``None`` if ``buf`` ends before the batch does
            (a partial batch).

    Raises:
        kclient.errors.CorruptRecordError: An impossible size or an unknown
            magic.
    """
    info = read_batch_header(buf, position)
    if info is None or position + info.size > len(buf):
        return None
    return info


#: Bytes from a batch's first byte through its header facts: a v2 batch's
#: maxTimestamp ends at byte 43 (a v0/v1 entry's need fewer).
HEADER_FACTS_BYTES = 43


def read_batch_header(buf: Buffer, position: int) -> BatchInfo | None:
    """`read_batch_info` from the header alone: the batch may end past
    ``buf`` (a reader of headers then skips ``size`` bytes unread).

    Args:
        buf (bytes | bytearray | memoryview): Bytes holding the header.
        position: Offset of the batch's first byte in ``buf``.

    Returns:
        The batch's facts, or ``None`` if ``buf`` ends inside the header
            (`HEADER_FACTS_BYTES` for v2).

    Raises:
        kclient.errors.CorruptRecordError: An impossible size or an unknown
            magic.
    """
    end = len(buf)
    if position + MAGIC_AT + 1 > end:
        return None
    offset, size = _HEAD.unpack_from(buf, position)
    magic = buf[position + MAGIC_AT]
    if magic == 2:
        if size < V2_HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"record batch at byte {position} claims size {size}, below the v2 header size")
        if position + HEADER_FACTS_BYTES > end:
            return None
        delta, _, max_ts = _V2_TAIL.unpack_from(buf, position + 23)
        return BatchInfo(position, offset, offset + delta, size + LOG_OVERHEAD, 2, max_ts)
    if magic in (0, 1):
        minimum = MIN_V0_SIZE if magic == 0 else MIN_V1_SIZE
        if size < minimum:
            raise CorruptRecordError(f"message at byte {position} claims size {size}, below the v{magic} minimum {minimum}")
        if magic == 1 and position + 26 > end:
            return None
        ts = _V1_TS.unpack_from(buf, position + 18)[0] if magic == 1 else -1
        return BatchInfo(position, offset, offset, size + LOG_OVERHEAD, magic, ts)
    raise CorruptRecordError(f"unknown magic byte {magic} at byte {position}")


def scan_batches(buf: Buffer, start: int = 0) -> Iterator[BatchInfo]:
    """Walk the complete batches of ``buf`` from ``start``.

    A partial batch at the end stops the walk silently.

    Args:
        buf (bytes | bytearray | memoryview): The record data.
        start: Byte offset of the first batch.

    Yields:
        The `BatchInfo` of each complete batch.

    Raises:
        kclient.errors.CorruptRecordError: A batch header is impossible.
    """
    pos = start
    while True:
        info = read_batch_info(buf, pos)
        if info is None:
            return
        yield info
        pos += info.size


@attrs.frozen
class ProducerFields:
    """The KIP-101 / KIP-98 fields of one v2 batch header.

    ``partition_leader_epoch``: the leader epoch stamped by the leader that
    appended the batch (-1 if none); ``producer_id`` (-1 = not idempotent),
    ``producer_epoch`` and ``base_sequence`` (-1 = none): the idempotent
    producer's identity and the sequence number of the batch's first record.
    """

    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


def read_v2_producer_fields(buf: Buffer, position: int = 0) -> ProducerFields:
    """Read the leader epoch and producer fields of the v2 batch at ``position``.

    Args:
        buf (bytes | bytearray | memoryview): The record data; the batch's
            61-byte header must be inside it (a `BatchInfo` with magic 2
            guarantees that).
        position: Offset of the batch's first byte in ``buf``.

    Returns:
        The fields.
    """
    epoch = _EPOCH.unpack_from(buf, position + PARTITION_LEADER_EPOCH_AT)[0]
    pid, pepoch, seq = _V2_PRODUCER.unpack_from(buf, position + PRODUCER_ID_AT)
    return ProducerFields(epoch, pid, pepoch, seq)


def stamp_partition_leader_epoch(buf: bytearray, position: int, epoch: int) -> None:
    """Overwrite the ``partitionLeaderEpoch`` of the v2 batch at ``position``.

    The field precedes the CRC-32C coverage, so the batch's CRC stays valid
    (Kafka's ``setPartitionLeaderEpoch``, KIP-101).

    Args:
        buf: The writable record data.
        position: Offset of the batch's first byte in ``buf``.
        epoch: The leader epoch (int32).
    """
    _EPOCH.pack_into(buf, position + PARTITION_LEADER_EPOCH_AT, epoch)
