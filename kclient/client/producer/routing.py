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
- any other item (a configured partitioner or key encoder decides its
  partition later) joins its topic's batch of partition -1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from kclient.client.producer.accumulator import ACCUMULATOR_RECORD_OVERHEAD, UNKNOWN_PARTITION, RecordAccumulator, StickyPartitioner, estimated_size
from kclient.client.producer.collate import DATA_TYPES
from kclient.client.producer.data import new_tuple
from kclient.client.producer.partitioner import fast_murmur2

__all__ = ["PartitionRouter"]

_hash = fast_murmur2
_topic_of = itemgetter(0)
_messages_of = itemgetter(2)
_partition_of = itemgetter(4)
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
    """

    def __init__(
        self,
        accumulator: RecordAccumulator,
        partition_count: Callable[[str], int],
        *,
        hash_keys: bool,
        sticky_keyless: bool,
        sticky: StickyPartitioner | None = None,
    ) -> None:
        self.accumulator = accumulator
        self.partition_count = partition_count
        self.hash_keys = hash_keys
        self.sticky_keyless = sticky_keyless
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
        if type(items) is list and items and self._route_single(items):
            return
        count_of = self.partition_count
        hash_keys = self.hash_keys
        sticky_keyless = self.sticky_keyless
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
            if len(messages) == 1 and type(m := messages[0]) is bytes:
                size = len(m) + _OVERHEAD + (len(key) if type(key) is bytes else 0)
            else:
                size = estimated_size(key, messages)
            if fixed is not None:
                p = fixed
            elif n == 1:
                p = 0  # every partitioner's only choice
            elif n <= 0:
                p = UNKNOWN_PARTITION
            elif key is None:
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

    def _route_single(self, items: list[Any]) -> bool:
        """`route` for the usual shape at C speed where it can be: items of
        one topic of one partition, none naming another partition. Returns
        False (nothing appended) for any other shape."""
        if not set(map(type, items)) <= DATA_TYPES:
            return False
        topics = set(map(_topic_of, items))
        if len(topics) != 1:
            return False
        topic = topics.pop()
        if self.partition_count(topic) != 1 or any(map(_partition_of, items)):  # (partition 0 is 0)
            return False
        self._counts[topic] = 1
        messages = list(map(len, map(_messages_of, items)))
        sizes = [
            len(d[2][0]) + _OVERHEAD + (len(d[1]) if type(d[1]) is bytes else 0) if n == 1 and type(d[2][0]) is bytes else estimated_size(d[1], d[2])
            for d, n in zip(items, messages, strict=True)
        ]
        self.accumulator.append_many(topic, 0, items, messages, sizes)
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
