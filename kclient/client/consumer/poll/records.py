"""A fetched partition as `ConsumerRecord` objects: the records come from
`kclient.client.consumer.message_set.ByteBufferMessageSet` (the consumer's
one record decoder, `kclient.protocol.records.iter_record_rows`
underneath); what a record does not carry itself, its timestamp type and
its batch's partition leader epoch (KIP-101), is read from the batch
headers (Kafka documentation, "Record Batch" and "Old Message Format",
https://kafka.apache.org/documentation/#messageformat).

Pure: no I/O.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import itemgetter
from typing import Any

import attrs

from kclient.client.consumer.message_set import ByteBufferMessageSet
from kclient.client.consumer.poll.types import ConsumerRecord, TimestampType
from kclient.protocol.records import iter_record_rows, scan_batches
from kclient.protocol.records.legacy import ATTRIBUTES_AT as V1_ATTRIBUTES_AT
from kclient.protocol.records.scan import PARTITION_LEADER_EPOCH_AT
from kclient.protocol.records.v2 import ATTR_TIMESTAMP_TYPE
from kclient.protocol.records.v2 import ATTRIBUTES_AT as V2_ATTRIBUTES_AT

_EPOCH = struct.Struct(">i")
_key = itemgetter(0)
_value = itemgetter(1)
_timestamp = itemgetter(2)
_headers = itemgetter(3)
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


def _decoded(column: Iterable[Any], decoder: Callable[[Any], Any] | None) -> Iterable[Any]:
    return column if decoder is None else map(decoder, column)


def _facts_of_chunk(facts: list[BatchFacts], first: int, last: int) -> BatchFacts | None:
    """The one `BatchFacts` every record from offset ``first`` to ``last``
    shares, or None when their batches differ."""
    index = bisect.bisect_left([f.last_offset for f in facts], first)
    if index >= len(facts):
        return None
    shared = facts[index]
    while facts[index].last_offset < last:
        index += 1
        if index >= len(facts):
            return None
        other = facts[index]
        if (other.timestamp_type, other.leader_epoch) != (shared.timestamp_type, shared.leader_epoch):
            return None
    return shared


def consumer_records(message_set: ByteBufferMessageSet, key_decoder: Callable[[Any], Any] | None, value_decoder: Callable[[Any], Any] | None) -> list[ConsumerRecord]:
    """Every record of a fetched partition from its fetch offset on,
    decoded by `kclient.protocol.records.iter_record_rows` (as
    ``ByteBufferMessageSet`` decodes its messages) a chunk of whole
    batches at a time; each chunk's records are built by C-level
    ``map`` / ``zip`` (no Python bytecode per record) when its batches share
    a timestamp type and leader epoch, as a producer's batches do.

    Args:
        message_set: The partition's fetched set (error code 0).
        key_decoder: Applied to each key (None keeps bytes).
        value_decoder: Applied to each value (None keeps bytes).

    Returns:
        The records, in offset order.

    Raises:
        MessageSizeTooLargeError: the first batch does not fit
            ``max.partition.fetch.bytes``.
        CorruptRecordError: a bad batch (the whole set is decoded before
            any record is handed out).
        Exception: what a decoder raised.
    """
    message_set.check_fits()
    facts = batch_facts(message_set.buffer)
    topic = message_set.topic
    partition = message_set.partition
    out: list[ConsumerRecord] = []
    new = tuple.__new__
    where = f"{topic}-{partition}"
    # without the aborted transactions' batches under read_committed (KIP-98)
    for offsets, rows in iter_record_rows(message_set.visible_buffer, message_set.start_offset, where=where):
        if not offsets:
            continue
        shared = _facts_of_chunk(facts, offsets[0], offsets[-1])
        if shared is not None:
            out += map(
                new,
                repeat(ConsumerRecord),
                zip(
                    repeat(topic),
                    repeat(partition),
                    offsets,
                    map(_timestamp, rows),
                    repeat(shared.timestamp_type),
                    _decoded(map(_key, rows), key_decoder),
                    _decoded(map(_value, rows), value_decoder),
                    map(_headers, rows),
                    repeat(shared.leader_epoch),
                ),
            )
            continue
        for offset, (key, value, timestamp, headers) in zip(offsets, rows):
            fact = _facts_of_chunk(facts, offset, offset) or BatchFacts(offset, TimestampType.CREATE_TIME, None)
            key = key if key_decoder is None else key_decoder(key)
            value = value if value_decoder is None else value_decoder(value)
            out.append(new(ConsumerRecord, (topic, partition, offset, timestamp, fact.timestamp_type, key, value, headers, fact.leader_epoch)))
    return out


__all__ = ["BatchFacts", "batch_facts", "consumer_records"]
