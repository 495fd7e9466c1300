"""Steps 1-3 of the event handler's send path: group a batch's
`ProducerData` by topic, serialize keys (``key.serializer.class``) and values
(``serializer.class``), and choose each item's partition
(``partitioner.class``, or the item's explicit ``partition``).

Source: the Kafka 0.8 documentation, section 5.1 "API Design"
(https://kafka.apache.org/08/documentation.html#apidesign): the
``kafka.producer.EventHandler`` serializes the data and sends it "to the
appropriate kafka broker partition". The result is one `PartitionSend` per
topic-partition holding ``(key, value, timestamp_ms)`` records (plus the
record headers, KIP-82, when an item has some), ready for
`kclient.client.producer.batching.BatchBuilder`.

`Collator` is given its collaborators: the encoders, the partitioner and,
for the default plug-ins, the compiled loops of ``kclient._speedups``
(``collate_default``, ``group_by_topic``), whose pure twins are
`Collator.collate_general` and `group_by_topic` here
(``tests/test_speedups.py`` compares them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from kclient.client.producer.batching import PartitionSend, headers_size
from kclient.client.producer.data import ProducerData
from kclient.client.producer.delivery import TrackedData

__all__ = ["DATA_TYPES", "Collator", "CompiledCollate", "add_plain", "add_tracked", "add_with_headers", "fields_of", "group_by_topic", "is_passthrough", "tracked_of"]

#: The producer's item types whose topic is their first field.
DATA_TYPES = frozenset((ProducerData, TrackedData))

#: ``compiled(datas, n_parts, now)``: one topic's items as ``{partition:
#: [(key, value, timestamp_ms), ...]}``, or None when some item needs the
#: general loop (see ``kclient._speedups.collate_default``).
CompiledCollate = Callable[[list[Any], int, int], "dict[int, list[Any]] | None"]


def group_by_topic(events: Sequence[Any], data_types: Collection[type] = DATA_TYPES) -> dict[str, list[Any]]:
    """The items of a batch per topic, in order (the pure twin of
    ``kclient._speedups.group_by_topic``).

    Args:
        events: The batch's items.
        data_types: Types whose topic is their first field (ProducerData
            tuples); any other item's topic is its ``topic`` attribute.

    Returns:
        ``{topic: [items in order]}``, topics in order of first appearance.
    """
    by_topic: dict[str, list[Any]] = {}
    for d in events:
        topic = d[0] if type(d) in data_types else d.topic
        lst = by_topic.get(topic)
        if lst is None:
            by_topic[topic] = [d]
        else:
            lst.append(d)
    return by_topic


def fields_of(d: Any) -> tuple[Any, ...]:
    """The fields the send path reads from an item.

    Args:
        d: A `ProducerData`, a `TrackedData` (sent with a delivery callback
            or futures) or any object with ProducerData's attributes.

    Returns:
        ``(key, messages, timestamp_ms, partition, headers, report)``;
        ``report`` is the item's `DeliveryReport`, or None when untracked.
    """
    if type(d) is TrackedData:
        _, key, messages, ts, fixed, headers, report = d
        return key, messages, ts, fixed, headers, report
    if type(d) is ProducerData:
        _, key, messages, ts, fixed, headers = d
        return key, messages, ts, fixed, headers, None
    return d.key, d.messages, d.timestamp_ms, getattr(d, "partition", None), getattr(d, "headers", ()), None


def add_plain(records: list[Any], key: Any, messages: Sequence[Any], ts: int, encode: Callable[[Any], bytes] | None) -> None:
    """Append one untracked item's records without headers.

    Args:
        records: The partition's records list.
        key: The serialized key, or None.
        messages: The values, before ``encode``.
        ts: Their timestamp (ms since the epoch).
        encode: The value encoder, or None to pass values as they are (a
            None value is never encoded).
    """
    if len(messages) == 1:
        m = messages[0]
        records.append((key, m if encode is None or m is None else encode(m), ts))
    elif encode is None:
        records.extend([(key, m, ts) for m in messages])
    else:
        records.extend([(key, None if m is None else encode(m), ts) for m in messages])


def add_with_headers(part: PartitionSend, key: Any, messages: Sequence[Any], ts: int, headers: Sequence[Any], encode: Callable[[Any], bytes] | None) -> None:
    """Append one untracked item's records, each with the item's headers
    (KIP-82), and count the headers' size in ``part.header_bytes``.

    Args:
        part: The partition.
        key: The serialized key, or None.
        messages: The values, before ``encode``.
        ts: Their timestamp (ms since the epoch).
        headers: The record headers.
        encode: The value encoder, or None.
    """
    part.header_bytes += headers_size(headers) * len(messages)
    part.records.extend([(key, m if encode is None or m is None else encode(m), ts, headers) for m in messages])


def add_tracked(part: PartitionSend, key: Any, messages: Sequence[Any], ts: int, headers: Sequence[Any], encode: Any, report: Any) -> None:
    """Append the records of an item sent with a delivery callback or
    futures to ``part`` and remember which report and index each is.

    Args:
        part: The partition.
        key: The serialized key, or None.
        messages: The values, before ``encode``.
        ts: Their timestamp (ms since the epoch).
        headers: The record headers (may be empty).
        encode: The value encoder, or None.
        report: The item's `DeliveryReport`.
    """
    records = part.records
    tracked = part.tracked
    if tracked is None:
        tracked = part.tracked = {}
    if headers:
        part.header_bytes += headers_size(headers) * len(messages)
    for j, m in enumerate(messages):
        value = m if encode is None or m is None else encode(m)
        r = (key, value, ts, headers) if headers else (key, value, ts)
        records.append(r)
        tracked[id(r)] = (report, j)


def tracked_of(part: PartitionSend, records: Sequence[Any]) -> list[tuple[Any, int]]:
    """The ``(DeliveryReport, index)`` of the tracked ones among ``records``.

    Args:
        part: The partition the records belong to.
        records: Some of its record tuples.

    Returns:
        One pair per tracked record, in order (empty when none is).
    """
    tracked = part.tracked
    if not tracked:
        return []
    return [t for r in records if (t := tracked.get(id(r))) is not None]


class Collator:
    """Serializes and partitions a batch's items (steps 2-3).

    Args:
        encoder: The value Encoder (``serializer.class``).
        key_encoder: The key Encoder (``key.serializer.class``).
        partitioner: The Partitioner (``partitioner.class``).
        compiled: The compiled loop for the default plug-ins, or None (see
            `CompiledCollate`).
        compiled_group: The compiled ``group_by_topic``, or None.
    """

    def __init__(
        self,
        encoder: Any,
        key_encoder: Any,
        partitioner: Any,
        *,
        compiled: CompiledCollate | None = None,
        compiled_group: Callable[[list[Any], Collection[type]], dict[str, list[Any]]] | None = None,
    ) -> None:
        self._encode = None if is_passthrough(encoder) else encoder.to_message
        self._encode_key = None if is_passthrough(key_encoder) else key_encoder.to_message
        self._partitioner = partitioner
        self._choose = partitioner.partition
        self._compiled = compiled
        self._compiled_group = compiled_group

    def group(self, events: Sequence[Any]) -> dict[str, list[Any]]:
        """The items per topic, in order (step 1's grouping).

        Args:
            events: The batch's items.

        Returns:
            ``{topic: [items]}``.
        """
        if self._compiled_group is not None and type(events) is list:
            return self._compiled_group(events, DATA_TYPES)
        return group_by_topic(events)

    def collate(self, topic: str, datas: list[Any], n_parts: int, now: int) -> dict[int, PartitionSend]:
        """One topic's items as records per partition.

        Args:
            topic: The topic.
            datas: Its items, in order.
            n_parts: Its partition count.
            now: The timestamp (ms since the epoch) of items without one.

        Returns:
            ``{partition: PartitionSend}`` (partitions that get records).

        Raises:
            Exception: whatever an encoder or the partitioner raised;
                ValueError for a partition outside ``range(n_parts)``.
        """
        if self._compiled is not None:
            grouped = self._compiled(datas, n_parts, now)
            if grouped is not None:
                return {p: PartitionSend(topic, p, records) for p, records in grouped.items()}
        return self.collate_general(topic, datas, n_parts, now)

    def collate_general(self, topic: str, datas: Sequence[Any], n_parts: int, now: int) -> dict[int, PartitionSend]:
        """`collate` in Python, for any plug-ins and items (the pure twin of
        the compiled loop); Args, Returns and Raises as `collate`.
        """
        encode = self._encode
        encode_key = self._encode_key
        choose = self._choose
        parts: dict[int, PartitionSend] = {}
        lists: dict[int, list[Any]] = {}  # each partition's records list, by number
        for d in datas:
            if type(d) is ProducerData:  # the usual item: unpack inline
                _, key, messages, ts, fixed, headers = d
                report = None
            else:
                key, messages, ts, fixed, headers, report = fields_of(d)
            if not messages:
                continue
            if key is not None and encode_key is not None:
                key = encode_key(key)
            p = choose(key, n_parts) if fixed is None else fixed
            records = lists.get(p)
            if records is None:
                records = lists[p] = self._new_partition(parts, topic, p, fixed is None, n_parts).records
            if ts is None:
                ts = now
            if report is not None:
                add_tracked(parts[p], key, messages, ts, headers, encode, report)
            elif headers:
                add_with_headers(parts[p], key, messages, ts, headers, encode)
            elif len(messages) == 1:  # the usual item: append inline
                m = messages[0]
                records.append((key, m if encode is None or m is None else encode(m), ts))
            else:
                add_plain(records, key, messages, ts, encode)
        return parts

    def _new_partition(self, parts: dict[int, PartitionSend], topic: str, p: Any, chosen: bool, n_parts: int) -> PartitionSend:
        """Check partition ``p`` (``chosen`` by the partitioner, else given
        by the item) and add its PartitionSend to ``parts``."""
        if type(p) is not int or not 0 <= p < n_parts:
            chooser = f"partitioner {type(self._partitioner).__qualname__} returned" if chosen else "ProducerData names partition"
            raise ValueError(f"{chooser} {p!r} for topic {topic!r}, which has {n_parts} partitions: expected an int in [0, {n_parts})")
        part = parts[p] = PartitionSend(topic, p)
        return part


def is_passthrough(encoder: Any) -> bool:
    """Whether an Encoder passes values through untouched (its
    ``passthrough`` class attribute): the send path then skips calling it.

    Args:
        encoder: An Encoder plug-in.

    Returns:
        True when ``encoder.passthrough`` is true.
    """
    return bool(getattr(encoder, "passthrough", False))
