"""The records of ``__transaction_state``, byte for byte Kafka's. Source:
``TransactionLogKey.json`` / ``TransactionLogValue.json`` (Kafka's
``transaction-coordinator`` module); see KIP-98 (exactly-once delivery and
transactional messaging) and KIP-915 (the flexible value, version 1).

Every key and value starts with its int16 schema version, then the struct:

- key, version 0 (not flexible): ``transactional_id`` string;
- value, version 0 (not flexible) or 1 (flexible, KIP-482): ``producer_id``
  int64, ``producer_epoch`` int16, ``transaction_timeout_ms`` int32,
  ``transaction_status`` int8 (the state's id, 0 Empty .. 7
  PrepareEpochFence), ``transaction_partitions`` (a nullable array of
  ``topic`` string and ``partition_ids`` int32 array; null when the state
  is Empty), ``transaction_last_update_timestamp_ms`` int64 and
  ``transaction_start_timestamp_ms`` int64. Version 1 adds tagged fields,
  written only when they differ from their defaults: tag 0
  ``previous_producer_id`` (default -1), tag 1 ``next_producer_id``
  (default -1), tag 2 ``client_transaction_version`` int16 (default 0).

A null value is a tombstone: the transactional id expired (the topic is
compacted). Unknown tagged fields are skipped when read.

Pure: no I/O.
"""

from __future__ import annotations

import struct

import attrs

from kclient.errors import ProtocolError
from kclient.protocol import primitives as p
from kclient.protocol.primitives import Buffer
from kclient.protocol.schema import Field, StructCodec
from kclient.protocol.types import Int8, Int16, Int32, Int64, String

#: The internal topic of the transaction coordinators' state.
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: The one key version.
KEY_VERSION = 0
#: The highest value version (flexible; Kafka writes it from
#: ``transaction.version`` 1).
VALUE_VERSION = 1

#: The tags of the value's tagged fields (version 1).
PREVIOUS_PRODUCER_ID_TAG = 0
NEXT_PRODUCER_ID_TAG = 1
CLIENT_TRANSACTION_VERSION_TAG = 2

_VERSION = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_INT16 = struct.Struct(">h")
#: ``producer_id``, ``producer_epoch``, ``transaction_timeout_ms``,
#: ``transaction_status``: the fields before the partitions.
_HEAD = struct.Struct(">qhib")
#: The two timestamps after the partitions.
_TAIL = struct.Struct(">qq")
#: A null array in a non-flexible version.
_INT32_NULL = struct.pack(">i", -1)


@attrs.define(kw_only=True)
class TransactionLogKey:
    """A ``__transaction_state`` record key (``TransactionLogKey``)."""

    transactional_id: String = ""


@attrs.define(kw_only=True)
class TransactionLogPartitions:
    """One topic's partitions in a transaction (``PartitionsSchema``)."""

    topic: String = ""
    partition_ids: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class TransactionLogValue:
    """A ``__transaction_state`` record value (``TransactionLogValue``).

    Timestamps are milliseconds since the epoch, -1 when unset. Encode and
    decode it with `encode_value` / `decode_value`: three of its fields are
    tagged fields, which `kclient.protocol.schema` codecs do not write.
    """

    producer_id: Int64 = 0
    #: Tagged (tag 0, version 1+): the producer id before the last change.
    previous_producer_id: Int64 = -1
    #: Tagged (tag 1, version 1+): the producer id to use after an epoch
    #: overflow (transactions v2).
    next_producer_id: Int64 = -1
    producer_epoch: Int16 = 0
    transaction_timeout_ms: Int32 = 0
    #: The `kclient.broker.txn.metadata.TransactionState` id.
    transaction_status: Int8 = 0
    #: The transaction's partitions; None (null) in state Empty.
    transaction_partitions: list[TransactionLogPartitions] | None = None
    transaction_last_update_timestamp_ms: Int64 = -1
    transaction_start_timestamp_ms: Int64 = -1
    #: Tagged (tag 2, version 1+): the client's transaction version.
    client_transaction_version: Int16 = 0


_KEY = StructCodec((Field("transactional_id", "string"),), KEY_VERSION, False)
_PARTITIONS_FIELDS = (Field("topic", "string"), Field("partition_ids", ("array", "int32")))
#: The partitions struct, per value version (v1 is flexible).
_PARTITIONS = [StructCodec(_PARTITIONS_FIELDS, v, v >= 1) for v in range(VALUE_VERSION + 1)]


def encode_key(transactional_id: str) -> bytes:
    """The record key of ``transactional_id`` (version 0).

    Args:
        transactional_id: The producer's ``transactional.id``.

    Returns:
        The key bytes.
    """
    return _VERSION.pack(KEY_VERSION) + _KEY.encode({"transactional_id": transactional_id})


def decode_key(data: Buffer) -> TransactionLogKey | None:
    """Decode a record key.

    Args:
        data: The key bytes.

    Returns:
        The key; None for a key version this module does not know (Kafka's
        loader skips such records, leftovers of an aborted upgrade).

    Raises:
        kclient.errors.ProtocolError: Too short or malformed bytes.
    """
    if data is None or len(data) < 2:
        raise ProtocolError("transaction log key too short for its version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version != KEY_VERSION:
        return None
    return TransactionLogKey(**_KEY.decode(memoryview(data)[2:]))


def _write_partitions(out: bytearray, partitions: list[TransactionLogPartitions] | None, version: int) -> None:
    flexible = version >= 1
    if partitions is None:
        if flexible:
            p.write_uvarint(out, 0)
        else:
            out += _INT32_NULL
        return
    if flexible:
        p.write_uvarint(out, len(partitions) + 1)
    else:
        out += struct.pack(">i", len(partitions))
    codec = _PARTITIONS[version]
    for entry in partitions:
        codec.write(out, {"topic": entry.topic, "partition_ids": list(entry.partition_ids)})


def _tagged_fields(value: TransactionLogValue) -> dict[int, bytes]:
    """The value's tagged fields that differ from their defaults."""
    tags: dict[int, bytes] = {}
    if value.previous_producer_id != -1:
        tags[PREVIOUS_PRODUCER_ID_TAG] = _INT64.pack(value.previous_producer_id)
    if value.next_producer_id != -1:
        tags[NEXT_PRODUCER_ID_TAG] = _INT64.pack(value.next_producer_id)
    if value.client_transaction_version != 0:
        tags[CLIENT_TRANSACTION_VERSION_TAG] = _INT16.pack(value.client_transaction_version)
    return tags


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    """A record value.

    Args:
        value: The transaction's state.
        version: 0 (Kafka's ``transaction.version`` 0: no tagged fields, so
            the previous and next producer ids and the client's transaction
            version are not kept) or 1 (flexible, the default).

    Returns:
        The value bytes.

    Raises:
        ValueError: An unknown version, or a field out of its range.
    """
    if version not in (0, 1):
        raise ValueError(f"unknown transaction log value version {version}")
    out = bytearray(_VERSION.pack(version))
    try:
        out += _HEAD.pack(value.producer_id, value.producer_epoch, value.transaction_timeout_ms, value.transaction_status)
        _write_partitions(out, value.transaction_partitions, version)
        out += _TAIL.pack(value.transaction_last_update_timestamp_ms, value.transaction_start_timestamp_ms)
    except struct.error as exc:
        raise ValueError(f"transaction log value: {exc}") from None
    if version >= 1:
        p.write_tagged_fields(out, _tagged_fields(value))
    return bytes(out)


def _read_partitions(buf: Buffer, pos: int, version: int) -> tuple[list[TransactionLogPartitions] | None, int]:
    if version >= 1:
        n, pos = p.read_uvarint(buf, pos)
        n -= 1
    else:
        _need(buf, pos, 4)
        (n,) = struct.unpack_from(">i", buf, pos)
        pos += 4
    if n < 0:
        return None, pos
    if n > len(buf) - pos:
        raise ProtocolError(f"transaction log value: {n} partition entries in {len(buf) - pos} bytes")
    codec = _PARTITIONS[version]
    out = []
    for _ in range(n):
        fields, pos = codec.read(buf, pos)
        out.append(TransactionLogPartitions(topic=fields["topic"], partition_ids=list(fields["partition_ids"])))
    return out, pos


def _need(buf: Buffer, pos: int, size: int) -> None:
    if len(buf) - pos < size:
        raise ProtocolError("transaction log value truncated")


def _apply_tags(value: TransactionLogValue, tags: dict[int, bytes]) -> None:
    """Set the known tagged fields of ``value`` from ``tags`` (others are
    skipped, as Kafka's readers skip unknown tags)."""
    for tag, raw in tags.items():
        if tag in (PREVIOUS_PRODUCER_ID_TAG, NEXT_PRODUCER_ID_TAG):
            if len(raw) != 8:
                raise ProtocolError(f"transaction log value: tag {tag} of {len(raw)} bytes, not 8")
            (number,) = _INT64.unpack(raw)
            if tag == PREVIOUS_PRODUCER_ID_TAG:
                value.previous_producer_id = number
            else:
                value.next_producer_id = number
        elif tag == CLIENT_TRANSACTION_VERSION_TAG:
            if len(raw) != 2:
                raise ProtocolError(f"transaction log value: tag {tag} of {len(raw)} bytes, not 2")
            (value.client_transaction_version,) = _INT16.unpack(raw)


def decode_value(data: Buffer | None) -> TransactionLogValue | None:
    """Decode a record value.

    Args:
        data: The value bytes, None for a tombstone.

    Returns:
        The value (the tagged fields of version 0 at their defaults), or
        None for a tombstone.

    Raises:
        kclient.errors.ProtocolError: An unknown version, or truncated or
            malformed bytes.
    """
    if data is None:
        return None
    if len(data) < 2:
        raise ProtocolError("transaction log value too short for its version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version not in (0, 1):
        raise ProtocolError(f"unknown transaction log value version {version}")
    pos = 2
    _need(data, pos, _HEAD.size)
    producer_id, epoch, timeout_ms, status = _HEAD.unpack_from(data, pos)
    partitions, pos = _read_partitions(data, pos + _HEAD.size, version)
    _need(data, pos, _TAIL.size)
    last_update, start = _TAIL.unpack_from(data, pos)
    pos += _TAIL.size
    value = TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=epoch,
        transaction_timeout_ms=timeout_ms,
        transaction_status=status,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=last_update,
        transaction_start_timestamp_ms=start,
    )
    if version >= 1:
        tags, pos = p.read_tagged_fields(data, pos)
        _apply_tags(value, tags)
    if pos != len(data):
        raise ProtocolError(f"transaction log value: {len(data) - pos} unexpected trailing bytes")
    return value


__all__ = [
    "CLIENT_TRANSACTION_VERSION_TAG",
    "KEY_VERSION",
    "NEXT_PRODUCER_ID_TAG",
    "PREVIOUS_PRODUCER_ID_TAG",
    "TRANSACTION_STATE_TOPIC",
    "TransactionLogKey",
    "TransactionLogPartitions",
    "TransactionLogValue",
    "VALUE_VERSION",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]
