"""Producing test records with kclient's own synchronous Producer
(`produce`), reading a partition back (`partition_messages`), the offsets a
broker holds (`log_end_offsets`, `committed_to_log_end`), and sentinels:
records produced after the ones a test reads, so that a reader that has
read every sentinel has read everything before them.

A partition is delivered in offset order, so once a consumer has read the
sentinel of every partition it has read every earlier record of the topic:
"nothing more arrives" becomes a condition to wait for (all sentinels
read) instead of a fixed pause. A sentinel's value starts with `SENTINEL`;
`without_sentinels` drops them before a test compares what it read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kclient import AdminClient, FetchRequest, OffsetRequest, Producer, ProducerData, SimpleConsumer
from kclient.errors import UnknownTopicOrPartitionError

#: The prefix of every sentinel value.
SENTINEL = "sentinel-"

#: A record as the tests write it: a value, a ``(key, value)`` pair (``str``
#: is sent UTF-8 encoded, as ``kclient.StringEncoder`` does; a ``None`` key
#: is no key) or a whole `ProducerData` (sent as it is).
Record = bytes | str | tuple[Any, Any] | ProducerData


def bootstrap_of(target: Any) -> str:
    """The bootstrap address of ``target``.

    Args:
        target: A ``host:port[,...]`` string, or anything with a
            ``bootstrap`` attribute (`kclient.testing.BrokerProcess`, a
            cluster, a conformance target).

    Returns:
        The ``host:port[,...]`` string.
    """
    return target if isinstance(target, str) else target.bootstrap


def _encoded(value: Any) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _data(topic: str, record: Record, partition: int | None) -> ProducerData:
    if isinstance(record, ProducerData):
        return record
    key, value = record if isinstance(record, tuple) else (None, record)
    return ProducerData(topic, _encoded(key), [_encoded(value)], partition=partition)


def produce(
    target: Any,
    topic: str,
    records: Iterable[Record],
    *,
    partition: int | None = None,
    acks: int = 1,
    per_send: int | None = 1,
    config: dict[str, Any] | None = None,
) -> None:
    """Produce ``records`` to ``topic`` with a synchronous kclient Producer:
    every ``send`` returns once the broker acknowledged it (``acks`` 1 or
    -1), so the records are in the log, in order, when this returns.

    Args:
        target: The broker(s): a bootstrap string or anything with a
            ``bootstrap`` attribute.
        topic: The topic of every record given as a value or a pair.
        records: Values, ``(key, value)`` pairs or `ProducerData` (see
            `Record`).
        partition: The partition of every record given as a value or a
            pair; None lets the default partitioner choose (murmur2 of the
            key, a random partition without one).
        acks: ``request.required.acks``.
        per_send: Records per ``send`` call (each call is one request per
            partition leader); None sends them all in one call.
        config: More producer properties, applied last (e.g. security
            properties, ``compression.type``); its ``bootstrap.servers``,
            if any, is used instead of ``target``'s address.
    """
    data = [_data(topic, r, partition) for r in records]
    properties = {"producer.type": "sync", "request.required.acks": acks, **(config or {})}
    if "bootstrap.servers" not in properties:
        properties.setdefault("metadata.broker.list", bootstrap_of(target))
    step = per_send or max(len(data), 1)
    with Producer(properties) as producer:
        for i in range(0, len(data), step):
            producer.send(data[i : i + step])


def numbered(values: Iterable[Any], prefix: str = "k") -> list[tuple[str, Any]]:
    """``values`` as ``(key, value)`` pairs keyed ``k0``, ``k1``, ... in
    order (keyed records spread over the partitions by murmur2).

    Args:
        values: The record values.
        prefix: The keys' prefix.

    Returns:
        The pairs.
    """
    return [(f"{prefix}{i}", v) for i, v in enumerate(values)]


def produce_sentinels(target: Any, topic: str, partitions: Iterable[int], *, acks: int = 1, config: dict[str, Any] | None = None) -> set[str]:
    """Produce one sentinel to each of ``partitions`` of ``topic``, after
    every record a test produced there.

    Args:
        target: The broker(s), as for `produce`.
        topic: The topic.
        partitions: Its partitions (every one a reader may own).
        acks: ``request.required.acks``.
        config: More producer properties, as for `produce`.

    Returns:
        The sentinel values (``str``; UTF-8 in the log), one per partition:
        wait until a reader has read them all.
    """
    run = uuid.uuid4().hex[:8]
    values = {p: f"{SENTINEL}{run}-{p}" for p in partitions}
    produce(target, topic, [ProducerData(topic, None, [v.encode()], partition=p) for p, v in values.items()], acks=acks, config=config)
    return set(values.values())


def is_sentinel(value: Any) -> bool:
    """Whether ``value`` (``str`` or bytes) is a sentinel's."""
    return (value.decode(errors="replace") if isinstance(value, (bytes, bytearray)) else str(value)).startswith(SENTINEL)


def without_sentinels(values: Iterable[Any]) -> list[Any]:
    """``values`` without the sentinels' (order kept)."""
    return [v for v in values if not is_sentinel(v)]


def log_end_offsets(target: Any, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """Each partition's log end offset, asked of the first broker of
    ``target`` (ListOffsets, latest): the partitions' leader, as on a
    single broker.

    Args:
        target: The broker, as for `produce`.
        topic: The topic.
        partitions: Its partitions to ask about.

    Returns:
        ``{partition: log end offset}``.
    """
    host, port = bootstrap_of(target).split(",")[0].rsplit(":", 1)
    with SimpleConsumer(host, int(port), so_timeout_ms=10_000, client_id="test-log-end") as consumer:
        return {p: consumer.get_offsets_before(topic, p, OffsetRequest.LATEST_TIME, 1)[0] for p in partitions}


def committed_to_log_end(target: Any, group: str, topic: str, partitions: Iterable[int]) -> bool:
    """Whether ``group`` has committed, for every one of ``partitions``, the
    partition's log end offset: a member that starts from the commits reads
    only what is produced after this holds.

    Args:
        target: The broker, as for `log_end_offsets`.
        group: The consumer group.
        topic: The topic.
        partitions: Its partitions.

    Returns:
        True once every commit is at the log end.
    """
    partitions = list(partitions)
    with AdminClient({"bootstrap.servers": bootstrap_of(target)}) as admin:
        committed = admin.list_consumer_group_offsets(group)
    ends = log_end_offsets(target, topic, partitions)
    return all(committed.get((topic, p)) == ends[p] for p in partitions)


def partition_messages(target: Any, topic: str, partition: int, *, client_id: str = "test-reader") -> list[Any]:
    """Every message of a partition, from its log start offset up to its
    log end offset (asked first: a bound, not "until a fetch comes back
    empty"), read with kclient's SimpleConsumer from the first broker of
    ``target`` (the partition's leader, as on a single broker).

    Args:
        target: The broker, as for `produce`.
        topic: The topic.
        partition: The partition.
        client_id: The consumer's client id.

    Returns:
        The `kclient.MessageAndOffset` items in offset order; none for an
        unknown topic or partition.
    """
    host, port = bootstrap_of(target).split(",")[0].rsplit(":", 1)
    with SimpleConsumer(host, int(port), 10_000, 1 << 20, client_id) as consumer:
        try:
            offset = consumer.get_offsets_before(topic, partition, OffsetRequest.EARLIEST_TIME, 1)[0]
            end = consumer.get_offsets_before(topic, partition, OffsetRequest.LATEST_TIME, 1)[0]
        except UnknownTopicOrPartitionError:
            return []
        out: list[Any] = []
        while offset < end:
            got = [m for m in consumer.fetch(FetchRequest(topic, partition, offset, 4 << 20)) if m.offset >= offset]
            assert got, f"no progress reading {topic}-{partition} at offset {offset} of {end}"
            out += got
            offset = got[-1].next_offset
        return out
