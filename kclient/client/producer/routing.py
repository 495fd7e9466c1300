"""Which partition's batch a queued item joins in the
`kclient.client.producer.accumulator.RecordAccumulator`: `PartitionRouter`.

- an item naming its partition joins that partition's batch;
- a keyed item of a producer with the default partitioner and key encoder
  joins ``toPositive(murmur2(key)) % partitions``, the partition the event
  handler's `DefaultPartitioner` gives it later (the accumulator only
  groups: the event handler still decides);
- a keyless item of a producer without a configured partitioner is given
  the topic's sticky partition (KIP-480, `StickyPartitioner`): the item is
  copied with that partition set, so the event handler sends it there;
  with ``partitioner.ignore.keys=true`` (KIP-794) keyed items too;
- any other item (a configured partitioner or key encoder decides its
  partition later) joins its topic's batch of partition -1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from kclient._accel import speedups as _speedups
from kclient.client.producer.accumulator import ACCUMULATOR_RECORD_OVERHEAD, UNKNOWN_PARTITION, PartitionBatch, RecordAccumulator, StickyPartitioner, estimated_size
from kclient.client.producer.collate import DATA_TYPES
from kclient.client.producer.data import new_tuple
from kclient.client.producer.partitioner import fast_murmur2

__all__ = ["PartitionRouter", "route_topic"]

_hash = fast_murmur2
_topic_of = itemgetter(0)
_OVERHEAD = ACCUMULATOR_RECORD_OVERHEAD


def with_partition(d: Any, partition: int) -> Any:
    """A copy of the item ``d`` (a ProducerData or TrackedData tuple) with
    its ``partition`` field (the fifth) set.

    Args:
        d: The item.
        partition: The partition.

    Returns:
        The copy, of ``d``'s type.
    """
    return new_tuple(type(d), (*d[:4], partition, *d[5:]))


def route_topic(
    items: list[Any],
    data_types: frozenset[type],
    n_parts: int,
    hash_keys: bool,
    sticky_keyless: bool,
    sticky_p: int,
    sticky_bytes: int,
    batch_size: int,
    overhead: int,
    next_sticky: Callable[[int], int],
    open_batches: dict[int, PartitionBatch] | None = None,
    batch_messages: int = 0,
    ignore_keys: bool = False,
) -> tuple[dict[int, tuple[list[Any], list[int], list[int]]], int, int, int] | None:
    """One topic's queued items per partition, with their record counts and
    estimated sizes (the pure twin of ``kclient._speedups.route_topic``).

    Per item, in order: an explicit partition is kept; a topic of one
    partition gives 0, of unknown partitions -1; a keyless item with
    ``sticky_keyless`` gets the sticky partition ``sticky_p`` (chosen by
    ``next_sticky(-1)`` when there is none) and is copied with it set, and
    once ``batch_size`` bytes went there ``next_sticky(p)`` moves on
    (KIP-480; KIP-794 counts bytes the same way); a bytes key with
    ``hash_keys`` gives ``toPositive(murmur2(key)) % n_parts``; anything
    else -1 (the event handler decides later). With ``ignore_keys`` and
    ``sticky_keyless`` a keyed item is placed as a keyless one
    (``partitioner.ignore.keys``, KIP-794).

    Args:
        items: The topic's items.
        data_types: The item types taken (ProducerData, TrackedData).
        n_parts: The topic's partition count (0 when not known).
        hash_keys: Keyed items are placed by murmur2 here.
        sticky_keyless: Keyless items get the sticky partition.
        sticky_p: The topic's sticky partition, or -1.
        sticky_bytes: The bytes routed to it so far.
        batch_size: ``batch.size`` (bytes).
        overhead: Bytes counted per record beyond its key and value.
        next_sticky: ``next_sticky(p) -> partition``: the sticky
            partition after moving off ``p`` (-1: the current one, chosen
            when there is none).
        open_batches: The topic's open batches by partition
            (`RecordAccumulator.open_batches`), or None: an item of a
            partition not grouped yet here that fits its open batch
            without filling it (below ``batch_size`` bytes and
            ``batch_messages`` records) is appended to it at once.
        batch_messages: ``batch.num.messages`` (with ``open_batches``).
        ignore_keys: ``partitioner.ignore.keys``: keys do not choose the
            partition.

    Returns:
        ``(groups, sticky_p, sticky_bytes, in_place)``, ``groups`` being
        ``{partition: ([items], [record counts], [sizes])}`` (for
        `RecordAccumulator.append_many`) and ``in_place`` the records
        appended to ``open_batches``; None when an item is not an exact
        instance of ``data_types``, its messages not a tuple or its
        explicit partition not an int (the caller's general loop takes
        them; nothing was appended).
    """
    groups: dict[int, tuple[list[Any], list[int], list[int]]] = {}
    in_place = 0
    for d in items:  # the shapes first: nothing is appended unless all are taken
        if type(d) not in data_types or type(d[2]) is not tuple or (d[4] is not None and type(d[4]) is not int):
            return None
    for d in items:
        key, messages, fixed = d[1], d[2], d[4]
        key_len = len(key) if isinstance(key, (bytes, bytearray, str)) else 0
        size = 0
        for m in messages:
            size += key_len + overhead + (len(m) if isinstance(m, (bytes, bytearray, str)) else 0)
        if fixed is not None:
            p = fixed
        elif n_parts == 1:
            p = 0
        elif n_parts <= 0:
            p = UNKNOWN_PARTITION
        elif key is None or (ignore_keys and sticky_keyless):
            if sticky_keyless:
                if sticky_p < 0 or sticky_p >= n_parts:
                    sticky_p = next_sticky(-1)
                p = sticky_p
                sticky_bytes += size
                if sticky_bytes >= batch_size:
                    sticky_p = next_sticky(p)
                    sticky_bytes = 0
                d = with_partition(d, p)
            else:
                p = UNKNOWN_PARTITION
        elif hash_keys and type(key) is bytes:
            p = (_hash(key) & 0x7FFFFFFF) % n_parts
        else:
            p = UNKNOWN_PARTITION
        group = groups.get(p)
        if group is None:
            batch = None if open_batches is None else open_batches.get(p)
            if batch is not None and batch.size + size < batch_size and batch.messages + len(messages) < batch_messages:
                batch.items.append(d)  # fits the open batch and leaves it open
                batch.size += size
                batch.messages += len(messages)
                in_place += len(messages)
                continue
            group = groups[p] = ([], [], [])
        group[0].append(d)
        group[1].append(len(messages))
        group[2].append(size)
    return groups, sticky_p, sticky_bytes, in_place


#: `route_topic`, compiled when ``kclient._speedups`` is built.
_route_topic = _speedups.route_topic if _speedups is not None else route_topic


class PartitionRouter:
    """Appends queued items to their partition's batch (module docstring).

    Args:
        accumulator: Where the items go.
        partition_count: ``topic -> partitions`` from the cached metadata
            (0 when the topic is not known yet).
        hash_keys: The default partitioner and key encoder are in use:
            keyed items are placed by murmur2 here.
        sticky_keyless: No partitioner is configured: keyless items get
            the sticky partition.
        sticky: The sticky partitioner (a fresh one by default).
        ignore_keys: ``partitioner.ignore.keys`` (KIP-794): with
            ``sticky_keyless``, keyed items get the sticky partition too.
    """

    def __init__(
        self,
        accumulator: RecordAccumulator,
        partition_count: Callable[[str], int],
        *,
        hash_keys: bool,
        sticky_keyless: bool,
        sticky: StickyPartitioner | None = None,
        ignore_keys: bool = False,
    ) -> None:
        self.accumulator = accumulator
        self.partition_count = partition_count
        self.hash_keys = hash_keys
        self.sticky_keyless = sticky_keyless
        self.ignore_keys = ignore_keys and sticky_keyless
        self.sticky = sticky if sticky is not None else StickyPartitioner()
        self._counts: dict[str, int] = {}
        self._sticky_bytes: dict[str, int] = {}
        accumulator.on_batch_closed = self._batch_closed

    def _batch_closed(self, topic: str, partition: int) -> None:
        if self.sticky.current(topic) == partition:
            self._sticky_bytes.pop(topic, None)
            self.sticky.switch(topic, partition, self._counts.get(topic, 0))

    def unknown_topics(self, items: Iterable[Any]) -> set[str]:
        """The topics of ``items`` whose partition count is not known.

        Args:
            items: Queued items.

        Returns:
            Their topics without metadata (load it, then `route`).
        """
        if type(items) is list and set(map(type, items)) <= DATA_TYPES:
            topics = set(map(_topic_of, items))  # two passes at C speed (the usual shape)
        else:
            topics = {d[0] if type(d) in DATA_TYPES else d.topic for d in items}
        return {t for t in topics if self.partition_count(t) <= 0}

    def route(self, items: Iterable[Any]) -> None:
        """Append items to their partitions' batches, each partition's in
        order.

        Args:
            items: Queued items (ProducerData or TrackedData tuples).
        """
        counts = self._counts
        counts.clear()
        if type(items) is list and items and self._route_one_topic(items):
            return
        count_of = self.partition_count
        hash_keys = self.hash_keys
        sticky_keyless = self.sticky_keyless
        ignore_keys = self.ignore_keys
        # Per topic, per partition: the items, their message counts, their sizes.
        groups: dict[str, dict[int, tuple[list[Any], list[int], list[int]]]] = {}
        last_topic: str | None = None  # consecutive records usually share a topic
        by_partition: dict[int, tuple[list[Any], list[int], list[int]]] = {}
        n = 0
        for d in items:
            if type(d) not in DATA_TYPES:  # an item of another type: only its topic is known
                topic, key, messages, fixed = d.topic, d.key, tuple(d.messages), None
                last_topic = None
                by_partition = groups.setdefault(topic, {})
                n = 0
            else:
                topic, key, messages, fixed = d[0], d[1], d[2], d[4]
                if topic is not last_topic:
                    n = counts.get(topic)  # type: ignore[assignment]
                    if n is None:
                        n = counts[topic] = count_of(topic)
                    last_topic = topic
                    by_partition = groups.setdefault(topic, {})
            if len(messages) == 1 and type(m := messages[0]) is bytes and (key is None or type(key) is bytes):
                size = len(m) + _OVERHEAD + (0 if key is None else len(key))
            else:
                size = estimated_size(key, messages)
            if fixed is not None:
                p = fixed
            elif n == 1:
                p = 0  # every partitioner's only choice
            elif n <= 0:
                p = UNKNOWN_PARTITION
            elif key is None or ignore_keys:
                if sticky_keyless:
                    p = self._sticky_partition(topic, n, size)
                    d = with_partition(d, p)
                else:
                    p = UNKNOWN_PARTITION
            elif hash_keys and type(key) is bytes:
                p = (_hash(key) & 0x7FFFFFFF) % n
            else:
                p = UNKNOWN_PARTITION
            group = by_partition.get(p)
            if group is None:
                group = by_partition[p] = ([], [], [])
            group[0].append(d)
            group[1].append(len(messages))
            group[2].append(size)
        append_many = self.accumulator.append_many
        for topic, partitions in groups.items():
            for p, (datas, message_counts, sizes) in partitions.items():
                append_many(topic, p, datas, message_counts, sizes)

    def _route_one_topic(self, items: list[Any]) -> bool:
        """`route` at C speed for the usual shape: ProducerData or
        TrackedData items of one topic (`route_topic`). Returns False
        (nothing appended) for any other shape."""
        if not set(map(type, items)) <= DATA_TYPES:
            return False
        topics = set(map(_topic_of, items))
        if len(topics) != 1:
            return False
        topic = topics.pop()
        n = self.partition_count(topic)
        sticky = self.sticky
        accumulator = self.accumulator
        current = sticky.current(topic)

        def next_sticky(p: int) -> int:
            if p >= 0:
                sticky.switch(topic, p, n)
            return sticky.partition(topic, n)

        routed = _route_topic(
            items,
            DATA_TYPES,
            n,
            self.hash_keys,
            self.sticky_keyless,
            -1 if current is None else current,
            self._sticky_bytes.get(topic, 0),
            accumulator.batch_size,
            _OVERHEAD,
            next_sticky,
            accumulator.open_batches(topic),
            accumulator.batch_messages,
            self.ignore_keys,
        )
        if routed is None:
            return False
        groups, _, sticky_bytes, in_place = routed
        accumulator.appended_in_place(in_place)
        if self.sticky_keyless and n > 1:
            self._sticky_bytes[topic] = sticky_bytes
        self._counts[topic] = n
        append_many = accumulator.append_many
        for p, (datas, message_counts, sizes) in groups.items():
            append_many(topic, p, datas, message_counts, sizes)
        return True

    def _sticky_partition(self, topic: str, num_partitions: int, size: int) -> int:
        """The sticky partition of a keyless record of ``size`` bytes; after
        ``batch.size`` bytes the next one moves on (KIP-794 counts the bytes
        produced to the partition the same way)."""
        sticky = self.sticky
        p = sticky.partition(topic, num_partitions)
        total = self._sticky_bytes.get(topic, 0) + size
        if total >= self.accumulator.batch_size:
            sticky.switch(topic, p, num_partitions)
            total = 0
        self._sticky_bytes[topic] = total
        return p
