"""Control records of the v2 record format: the transaction markers.

A transaction ends with a COMMIT or ABORT marker in every partition it
wrote to (KIP-98): a control batch (attributes: control and transactional
bits set, `kclient.protocol.records.v2`) of the producer's id and epoch,
holding one record whose key and value are these (Kafka documentation,
https://kafka.apache.org/documentation/#controlbatch, "Control Batches";
Kafka's ``ControlRecordType`` and ``EndTransactionMarker``):

* key, 4 bytes: version int16 (0), type int16 (0 ABORT, 1 COMMIT; Kafka's
  KRaft metadata log uses other types);
* value of a marker, 6 bytes: version int16 (0), coordinator_epoch int32
  (the epoch of the transaction coordinator's ``__transaction_state``
  partition that wrote it, WriteTxnMarkers).

As Kafka does, a reader takes a newer version by its version-0 fields
(the bytes after them are ignored) and refuses a negative version or a
key or value too short for version 0.

Pure: no I/O.
"""

from __future__ import annotations

import struct

import attrs

from kclient.errors import CorruptRecordError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.v2 import NO_PARTITION_LEADER_EPOCH, BatchHeader, build_batch, decode_rows, read_header, records_section

#: Control record type of an ABORT marker.
ABORT = 0
#: Control record type of a COMMIT marker.
COMMIT = 1
#: The control record key version kclient writes.
CONTROL_RECORD_KEY_VERSION = 0
#: The end transaction marker value version kclient writes.
END_TXN_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")
#: Bytes of a version-0 control record key.
CONTROL_RECORD_KEY_SIZE = _KEY.size
#: Bytes of a version-0 end transaction marker value.
END_TXN_MARKER_VALUE_SIZE = _MARKER.size

_INT16 = range(-(1 << 15), 1 << 15)
_INT32 = range(-(1 << 31), 1 << 31)


@attrs.frozen(slots=True)
class ControlRecordKey:
    """A decoded control record key."""

    version: int
    #: The control record type (`ABORT`, `COMMIT`, or another of Kafka's).
    type: int

    @property
    def is_transaction_marker(self) -> bool:
        """Whether the record is a COMMIT or ABORT marker."""
        return self.type in (ABORT, COMMIT)


@attrs.frozen(slots=True)
class EndTransactionMarker:
    """A transaction marker: its type and the coordinator epoch that wrote it."""

    #: `COMMIT` or `ABORT`.
    control_type: int
    #: The epoch of the coordinator's ``__transaction_state`` partition.
    coordinator_epoch: int

    @property
    def committed(self) -> bool:
        """True for a COMMIT marker, False for an ABORT one."""
        return self.control_type == COMMIT


def _check(value: int, valid: range, what: str) -> None:
    if value not in valid:
        raise ValueError(f"{what} {value} is out of range")


def encode_control_key(control_type: int, version: int = CONTROL_RECORD_KEY_VERSION) -> bytes:
    """The key of a control record.

    Args:
        control_type: `ABORT`, `COMMIT` or another int16 type.
        version: The key version (0 is the only one Kafka defines).

    Returns:
        The 4-byte key.

    Raises:
        ValueError: A value that is no int16.
    """
    _check(control_type, _INT16, "control record type")
    _check(version, _INT16, "control record key version")
    return _KEY.pack(version, control_type)


def decode_control_key(key: Buffer | None) -> ControlRecordKey:
    """Read the key of a control record.

    Args:
        key (bytes | bytearray | memoryview | None): The record's key.

    Returns:
        Its version and type.

    Raises:
        kclient.errors.CorruptRecordError: The key is null, shorter than 4
            bytes or of a negative version.
    """
    if key is None or len(key) < CONTROL_RECORD_KEY_SIZE:
        size = "null" if key is None else f"{len(key)} bytes"
        raise CorruptRecordError(f"control record key must have at least {CONTROL_RECORD_KEY_SIZE} bytes, found {size}")
    version, control_type = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    return ControlRecordKey(version, control_type)


def encode_end_txn_marker_value(coordinator_epoch: int, version: int = END_TXN_MARKER_VERSION) -> bytes:
    """The value of a transaction marker record.

    Args:
        coordinator_epoch: The coordinator epoch (int32).
        version: The value version (0 is the only one Kafka defines).

    Returns:
        The 6-byte value.

    Raises:
        ValueError: A value out of its type's range.
    """
    _check(coordinator_epoch, _INT32, "coordinator epoch")
    _check(version, _INT16, "end transaction marker version")
    return _MARKER.pack(version, coordinator_epoch)


def decode_end_txn_marker(key: Buffer | None, value: Buffer | None) -> EndTransactionMarker:
    """Read a transaction marker from its control record's key and value.

    Args:
        key (bytes | bytearray | memoryview | None): The record's key.
        value (bytes | bytearray | memoryview | None): The record's value.

    Returns:
        The marker.

    Raises:
        kclient.errors.CorruptRecordError: The key is no COMMIT or ABORT
            control key, or the value is null, shorter than 6 bytes or of
            a negative version.
    """
    control = decode_control_key(key)
    if not control.is_transaction_marker:
        raise CorruptRecordError(f"control record type {control.type} is no transaction marker")
    if value is None or len(value) < END_TXN_MARKER_VALUE_SIZE:
        size = "null" if value is None else f"{len(value)} bytes"
        raise CorruptRecordError(f"end transaction marker must have at least {END_TXN_MARKER_VALUE_SIZE} bytes, found {size}")
    version, coordinator_epoch = _MARKER.unpack_from(value, 0)
    if version < 0:
        raise CorruptRecordError(f"invalid end transaction marker version {version}")
    return EndTransactionMarker(control.type, coordinator_epoch)


def build_end_txn_marker_batch(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch holding one transaction marker, as Kafka's
    ``MemoryRecords.withEndTransactionMarker`` builds it: uncompressed,
    CreateTime, transactional and control bits set, no base sequence, one
    record with no headers.

    Args:
        marker: The marker.
        producer_id: The transaction's producer id.
        producer_epoch: That producer's epoch.
        timestamp_ms: The record's timestamp, in ms since the epoch.
        base_offset: The record's offset.
        partition_leader_epoch: The leader epoch the broker appends it in.

    Returns:
        The batch bytes (CRC-32C filled in).

    Raises:
        ValueError: A marker field out of its type's range.
    """
    key = encode_control_key(marker.control_type)
    value = encode_end_txn_marker_value(marker.coordinator_epoch)
    return build_batch(
        [(key, value, timestamp_ms, ())],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


def control_type_of(buf: Buffer, position: int = 0, header: BatchHeader | None = None) -> int | None:
    """The control record type of the v2 control batch at ``position``.

    Args:
        buf (bytes | bytearray | memoryview): Bytes holding the whole batch.
        position: The batch's first byte in ``buf``.
        header: Its header, if already read.

    Returns:
        The type of its first record's key (`ABORT`, `COMMIT` or another),
            ``None`` for a batch with no record or no control batch.

    Raises:
        kclient.errors.CorruptRecordError: A malformed batch or control key.
    """
    if header is None:
        header = read_header(buf, position)
    if not header.is_control or header.records_count <= 0:
        return None
    end = position + header.size
    if end > len(buf):
        raise CorruptRecordError(f"control batch at offset {header.base_offset} is incomplete")
    data, start, stop = records_section(buf, position, end, header.attributes, header.base_offset)
    _, rows = decode_rows(data, start, stop, header.records_count, header.base_offset, header.base_timestamp)
    return decode_control_key(rows[0][0]).type


__all__ = [
    "ABORT",
    "COMMIT",
    "CONTROL_RECORD_KEY_SIZE",
    "CONTROL_RECORD_KEY_VERSION",
    "END_TXN_MARKER_VALUE_SIZE",
    "END_TXN_MARKER_VERSION",
    "ControlRecordKey",
    "EndTransactionMarker",
    "build_end_txn_marker_batch",
    "control_type_of",
    "decode_control_key",
    "decode_end_txn_marker",
    "encode_control_key",
    "encode_end_txn_marker_value",
]
