"""A fetched partition as `ConsumerRecord`\\ s: the records come from
`kclient.client.consumer.message_set.ByteBufferMessageSet` (the consumer's
one record decoder, `kclient.protocol.records.iter_record_rows`
underneath); what a record does not carry itself, its timestamp type and
its batch's partition leader epoch (KIP-101), is read from the batch
headers (Kafka documentation, "Record Batch" and "Old Message Format",
https://kafka.apache.org/documentation/#messageformat).

Pure: no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import attrs

from kclient.client.consumer.message_set import ByteBufferMessageSet
from kclient.client.consumer.poll.types import ConsumerRecord, TimestampType
from kclient.protocol.records import scan_batches
from kclient.protocol.records.legacy import ATTRIBUTES_AT as V1_ATTRIBUTES_AT
from kclient.protocol.records.scan import PARTITION_LEADER_EPOCH_AT
from kclient.protocol.records.v2 import ATTR_TIMESTAMP_TYPE
from kclient.protocol.records.v2 import ATTRIBUTES_AT as V2_ATTRIBUTES_AT

_EPOCH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")


@attrs.frozen
class BatchFacts:
    """What every record of one batch shares.

    Attributes:
        last_offset: The batch's last offset.
        timestamp_type: Its records' `TimestampType`.
        leader_epoch: Its partition leader epoch (None for none or v0/v1).
    """

    last_offset: int
    timestamp_type: TimestampType
    leader_epoch: int | None


def batch_facts(buffer: Any) -> list[BatchFacts]:
    """The facts of each complete batch of a fetched record set, in order.

    Args:
        buffer: The record bytes (bytes, bytearray or memoryview).

    Returns:
        One `BatchFacts` per batch (v2) or entry (v0/v1).
    """
    out: list[BatchFacts] = []
    for info in scan_batches(buffer):
        at = info.position
        epoch: int | None = None
        if info.magic >= 2:
            attributes = _ATTRIBUTES.unpack_from(buffer, at + V2_ATTRIBUTES_AT)[0]
            raw_epoch = _EPOCH.unpack_from(buffer, at + PARTITION_LEADER_EPOCH_AT)[0]
            epoch = raw_epoch if raw_epoch >= 0 else None
        elif info.magic == 1:
            attributes = buffer[at + V1_ATTRIBUTES_AT]
        else:
            out.append(BatchFacts(info.last_offset, TimestampType.NO_TIMESTAMP_TYPE, None))
            continue
        kind = TimestampType.LOG_APPEND_TIME if attributes & ATTR_TIMESTAMP_TYPE else TimestampType.CREATE_TIME
        out.append(BatchFacts(info.last_offset, kind, epoch))
    return out


def consumer_records(message_set: ByteBufferMessageSet, key_decoder: Callable[[Any], Any] | None, value_decoder: Callable[[Any], Any] | None) -> list[ConsumerRecord]:
    """Every record of a fetched partition from its fetch offset on.

    Args:
        message_set: The partition's fetched set (error code 0).
        key_decoder: Applied to each key (None keeps bytes).
        value_decoder: Applied to each value (None keeps bytes).

    Returns:
        The records, in offset order.

    Raises:
        MessageSizeTooLargeError: the first batch does not fit
            ``max.partition.fetch.bytes``.
        CorruptRecordError: a bad batch (after nothing: the whole set is
            decoded before any record is handed out).
        Exception: what a decoder raised.
    """
    facts = batch_facts(message_set.buffer)
    topic = message_set.topic
    partition = message_set.partition
    out: list[ConsumerRecord] = []
    new = tuple.__new__
    index = 0
    last = len(facts) - 1
    for message, offset in message_set:
        while index < last and offset > facts[index].last_offset:
            index += 1
        fact = facts[index] if facts else BatchFacts(offset, TimestampType.CREATE_TIME, None)
        key, value, timestamp, headers = message
        if key_decoder is not None:
            key = key_decoder(key)
        if value_decoder is not None:
            value = value_decoder(value)
        out.append(new(ConsumerRecord, (topic, partition, offset, timestamp, fact.timestamp_type, key, value, headers, fact.leader_epoch)))
    return out


__all__ = ["BatchFacts", "batch_facts", "consumer_records"]
