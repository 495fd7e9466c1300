"""The async producer's per-partition record accumulator and the sticky
partitioner for keyless records.

As Kafka's Java producer (``RecordAccumulator``; the ``Sender`` drains it
per broker) and librdkafka do, the send thread appends each record to the
open batch of its partition instead of sending whatever the queue held:

- a partition's batch is *full* at ``batch.size`` bytes (an estimate of the
  encoded size) or ``batch.num.messages`` records (the seed's count knob,
  kept as an upper bound); the next record then opens a new batch;
- a batch is *ready* when it is full, when ``linger.ms`` passed since its
  first record, or when the producer flushes, closes or holds
  ``queue.buffering.max.messages`` records here, or a ``send`` waits for
  ``buffer.memory`` (the queue then asks for a flush: Kafka's exhausted
  ``buffer.memory`` makes every batch ready);
- `RecordAccumulator.drain` takes the ready batches grouped by the leader
  of their partition, each leader's share bounded by ``max.request.size``
  (a batch larger than that alone still goes, alone), for one Produce
  request per leader.

Keyless records of a producer without a configured partitioner use the
sticky partitioner (KIP-480): a topic's keyless records go to one partition
until that partition's batch is full or drained, then to another one
chosen at random; with KIP-794's adaptive partitioning (the default) the
choice is weighted towards the partitions with the fewest bytes queued
here (`RecordAccumulator.partition_load`), and with
``partitioner.availability.timeout.ms`` a partition whose ready batch
waited that long past its linger is left out.

The accumulator is pure: it holds the items it is given, reads the time
from an injected clock and the leaders from an injected function.
"""

from __future__ import annotations

import bisect
import random
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from kclient._accel import speedups as _speedups
from kclient.protocol.records import v2

__all__ = [
    "ACCUMULATOR_RECORD_OVERHEAD",
    "BATCH_ENTRY_OVERHEAD",
    "REQUEST_HEADER_ROOM",
    "UNKNOWN_PARTITION",
    "Drained",
    "batch_cuts",
    "PartitionBatch",
    "RecordAccumulator",
    "PartitionLoad",
    "StickyPartitioner",
    "estimated_size",
    "weighted_choice",
]

#: Bytes counted per record beyond its key and value when sizing batches
#: against ``batch.size`` and requests against ``max.request.size``: the
#: worst case of a v2 record (`kclient.protocol.records.v2.RECORD_OVERHEAD`),
#: the figure the event handler checks a partition's records against, so a
#: drained partition fits one record batch without measuring each record.
ACCUMULATOR_RECORD_OVERHEAD = v2.RECORD_OVERHEAD
#: Bytes counted per drained batch beyond its records: the v2 batch header
#: and the partition's entry in the Produce request.
BATCH_ENTRY_OVERHEAD = v2.HEADER_SIZE + 16
#: Bytes of ``max.request.size`` left for the Produce request's own header
#: (as the event handler's batch builder does).
REQUEST_HEADER_ROOM = 512

#: The partition of records whose partition the accumulator does not know
#: (a configured partitioner or encoder decides it later, in the event
#: handler): one batch per topic.
UNKNOWN_PARTITION = -1


def estimated_size(key: Any, messages: tuple[Any, ...]) -> int:
    """The bytes ``messages`` (all with ``key``) add to a batch, estimated
    before serialization.

    Args:
        key: The record key, or None.
        messages: The values (bytes-like or str count their length, other
            values nothing).

    Returns:
        The estimate (bytes): per message its value's length, the key's
        length and `ACCUMULATOR_RECORD_OVERHEAD`.
    """
    key_size = len(key) if isinstance(key, (bytes, bytearray, str)) else 0
    total = 0
    for m in messages:
        total += key_size + ACCUMULATOR_RECORD_OVERHEAD + (len(m) if isinstance(m, (bytes, bytearray, str)) else 0)
    return total


def batch_cuts(messages: list[int], sizes: list[int], count: int, size: int, held: bool, most: int, limit: int) -> tuple[list[int], int, int]:
    """Where a partition's batches close as items are appended to its open
    batch, as `RecordAccumulator.append` closes them one item at a time (the
    pure twin of ``kclient._speedups.batch_cuts``).

    An item that would take the open batch past ``limit`` bytes or ``most``
    records starts a new batch (unless the batch is empty: an item larger
    than ``batch.size`` goes alone); a batch reaching either bound closes.

    Args:
        messages: The items' record counts.
        sizes: The items' estimated sizes (bytes).
        count: Records in the open batch so far.
        size: Its estimated bytes so far.
        held: Whether it has items.
        most: ``batch.num.messages``.
        limit: ``batch.size`` (bytes).

    Returns:
        ``(cuts, count, size)``: the item indexes before which a batch
        closes, in order, then the records and bytes of the last, open
        batch.
    """
    cuts: list[int] = []
    for i, (k, b) in enumerate(zip(messages, sizes, strict=True)):
        if held and (size + b > limit or count + k > most):
            cuts.append(i)
            size = count = 0
        size += b
        count += k
        held = True
        if size >= limit or count >= most:
            cuts.append(i + 1)
            size = count = 0
            held = False
    return cuts, count, size


#: `batch_cuts`, compiled when ``kclient._speedups`` is built.
_batch_cuts = _speedups.batch_cuts if _speedups is not None else batch_cuts


class PartitionBatch:
    """One partition's batch: the items appended to it, in order.

    Attributes:
        topic: The topic.
        partition: The partition, or -1 when not known yet.
        items: The queued items (ProducerData), in append order.
        messages: How many records they hold.
        size: Their estimated size (bytes, see `estimated_size`).
        created: The clock's time of the first append (seconds).
        full: No further record is appended (``batch.size`` or
            ``batch.num.messages`` reached).
    """

    __slots__ = ("created", "full", "items", "messages", "partition", "size", "topic")

    def __init__(self, topic: str, partition: int, created: float) -> None:
        self.topic = topic
        self.partition = partition
        self.items: list[Any] = []
        self.messages = 0
        self.size = 0
        self.created = created
        self.full = False


class Drained:
    """What one `RecordAccumulator.drain` took: the items of the drained
    batches (each partition's in order) and how many records they hold.

    Attributes:
        items: The items, grouped by leader, each partition's in append
            order.
        messages: How many records they hold.
        size: Their estimated bytes (the drained batches' sizes; what they
            free of ``buffer.memory`` once finished).
        batches: How many batches were drained.
    """

    __slots__ = ("batches", "items", "messages", "size")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.messages = 0
        self.size = 0
        self.batches = 0


#: ``load(topic, num_partitions) -> (partitions, queued bytes)``: the
#: partitions a sticky partition may be chosen among and the bytes queued
#: for each (`RecordAccumulator.partition_load`).
PartitionLoad = Callable[[str, int], tuple[list[int], list[int]]]


def weighted_choice(partitions: list[int], queued: list[int], r: float) -> int | None:
    """KIP-794's adaptive choice among ``partitions``: each is weighted by
    ``max(queued) + 1 - its queued`` (the less queued, the likelier; Kafka's
    BuiltInPartitioner folds the same weights into a cumulative frequency
    table).

    Args:
        partitions: The candidate partitions.
        queued: Their queued load (bytes here; Kafka counts batches).
        r: A uniform random number in [0, 1).

    Returns:
        The chosen partition, or None when there is no candidate or every
        load is the same (the caller then chooses uniformly).
    """
    if not partitions or (len(partitions) > 1 and min(queued) == max(queued)):
        return None
    top = max(queued) + 1
    cumulative: list[int] = []
    total = 0
    for q in queued:
        total += top - q
        cumulative.append(total)
    return partitions[bisect.bisect_right(cumulative, int(r * total))]


class StickyPartitioner:
    """KIP-480's sticky partitioner for keyless records: each topic keeps
    one partition until `switch` is called for it (its batch became full or
    was drained).

    Args:
        rng: ``random()`` in [0, 1) (inject a seeded one in tests).
        load: KIP-794's adaptive partitioning
            (``partitioner.adaptive.partitioning.enable``): the partitions
            to choose among and their queued bytes (`PartitionLoad`); the
            next partition is then chosen by `weighted_choice`. None:
            uniformly, as KIP-480.
    """

    def __init__(self, rng: Callable[[], float] = random.random, load: PartitionLoad | None = None) -> None:
        self._rng = rng
        self._load = load
        self._current: dict[str, int] = {}

    def _adaptive(self, topic: str, num_partitions: int) -> int | None:
        # The weighted choice, or None for the uniform one (no load known,
        # or every candidate equally loaded).
        if self._load is None or num_partitions < 2:
            return None
        # As Kafka's, the partition being left stays a candidate: its
        # queued bytes (the batch just closed) make it less likely.
        partitions, queued = self._load(topic, num_partitions)
        if not queued or min(queued) == max(queued):
            if len(partitions) == num_partitions:
                return None  # nothing left out and all equal: KIP-480's uniform choice
            return partitions[int(self._rng() * len(partitions))] if partitions else None
        return weighted_choice(partitions, queued, self._rng())

    def partition(self, topic: str, num_partitions: int) -> int:
        """The topic's sticky partition, chosen at random when it has none.

        Args:
            topic: The topic.
            num_partitions: Its partition count (>= 1).

        Returns:
            A partition in ``range(num_partitions)``.
        """
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            chosen = self._adaptive(topic, num_partitions)
            p = self._current[topic] = int(self._rng() * num_partitions) if chosen is None else chosen
        return p

    def current(self, topic: str) -> int | None:
        """The topic's sticky partition now, or None when it has none.

        Args:
            topic: The topic.

        Returns:
            The partition, or None.
        """
        return self._current.get(topic)

    def switch(self, topic: str, partition: int, num_partitions: int) -> None:
        """Move the topic off ``partition`` if it is the sticky one: the
        next keyless record picks another partition (a different one when
        the topic has several and the choice is uniform; the adaptive,
        weighted choice may pick it again, as Kafka's does, when it is the
        least loaded).

        Args:
            topic: The topic.
            partition: The partition whose batch became full or was sent.
            num_partitions: The topic's partition count, or 0 when not known.
        """
        if self._current.get(topic) != partition:
            return
        if num_partitions > 1:
            chosen = self._adaptive(topic, num_partitions)
            if chosen is not None:
                self._current[topic] = chosen
                return
            p = int(self._rng() * (num_partitions - 1))
            self._current[topic] = p + 1 if p >= partition else p
        else:
            del self._current[topic]


class RecordAccumulator:
    """Per-partition batches of queued items (see the module docstring).

    Args:
        batch_size: ``batch.size``: a batch is full at this many estimated
            bytes (>= 1).
        batch_messages: ``batch.num.messages``: a batch is full at this many
            records (>= 1).
        linger_ms: ``linger.ms``: a batch is ready this long after its first
            record (ms).
        max_request_size: ``max.request.size``: the bytes one drain takes
            per leader (bytes), less `REQUEST_HEADER_ROOM`, each batch
            counting `BATCH_ENTRY_OVERHEAD` more.
        buffer_messages: ``queue.buffering.max.messages``: holding this many
            records makes every batch ready.
        clock: Returns the time in seconds (monotonic); injected in tests.
    """

    def __init__(
        self,
        *,
        batch_size: int = 16384,
        batch_messages: int = 10_000,
        linger_ms: int = 5,
        max_request_size: int = 1_048_576,
        buffer_messages: int = 10_000,
        availability_timeout_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.batch_size = max(1, batch_size)
        self.batch_messages = max(1, batch_messages)
        self.linger_s = max(0, linger_ms) / 1000
        self.max_request_size = max(1, max_request_size)
        self._request_room = max(1024, self.max_request_size - REQUEST_HEADER_ROOM)
        self.buffer_messages = max(1, buffer_messages)
        #: ``partitioner.availability.timeout.ms`` in seconds (0: off).
        self.availability_timeout_s = max(0, availability_timeout_ms) / 1000
        self.clock = clock
        #: (topic, partition) -> its batches, oldest first (the last is the open one).
        self._batches: dict[tuple[str, int], deque[PartitionBatch]] = {}
        #: Records held (in every batch).
        self.messages = 0
        #: topic -> partition -> its open batch (not full, with items): where
        #: the router may append an item that fits without filling it
        #: (`open_batches`).
        self._open: dict[str, dict[int, PartitionBatch]] = {}
        #: Called with (topic, partition) when a batch becomes full or is
        #: drained (the sticky partitioner's cue).
        self.on_batch_closed: Callable[[str, int], None] | None = None
        #: topic -> partition -> bytes in its closed (full) batches not
        #: drained yet (`partition_load`'s running sums).
        self._closed_bytes: dict[str, dict[int, int]] = {}

    def __len__(self) -> int:
        """How many batches are held."""
        return sum(len(q) for q in self._batches.values())

    @property
    def exhausted(self) -> bool:
        """Whether ``buffer_messages`` records are held (every batch is then ready)."""
        return self.messages >= self.buffer_messages

    def open_batches(self, topic: str) -> dict[int, PartitionBatch]:
        """The topic's open batches by partition, for appending in place.

        An item may be appended to ``open_batches(topic)[p].items`` by the
        caller only when it leaves the batch below ``batch_size`` bytes and
        ``batch_messages`` records (it then joins the batch `append` would
        have put it in, which stays open); the caller updates the batch's
        ``size`` and ``messages`` and reports the records with
        `appended_in_place`.

        Args:
            topic: The topic.

        Returns:
            ``{partition: PartitionBatch}`` (live: kept up to date here).
        """
        open_ = self._open.get(topic)
        if open_ is None:
            open_ = self._open[topic] = {}
        return open_

    def partition_load(self, topic: str, num_partitions: int) -> tuple[list[int], list[int]]:
        """The topic's partitions a sticky partition may be chosen among and
        the bytes queued here for each (KIP-794's load statistics).

        With ``availability_timeout_ms`` (``partitioner.availability.timeout.ms``)
        a partition whose oldest batch is ready and waited that long past
        its linger (its leader is not taking data) is left out, unless that
        leaves none.

        Args:
            topic: The topic.
            num_partitions: Its partition count.

        Returns:
            ``(partitions, queued bytes)``, in partition order.
        """
        queued = [0] * num_partitions
        late = self.availability_timeout_s
        if not late:
            # The usual case (Kafka's default timeout is 0): the closed
            # batches' bytes are kept per partition as they close and drain,
            # the open batch's are read live; no walk over the batches.
            for p, size in self._closed_bytes.get(topic, {}).items():
                if p < num_partitions:
                    queued[p] += size
            for p, batch in self._open.get(topic, {}).items():
                if 0 <= p < num_partitions:
                    queued[p] += batch.size
            return list(range(num_partitions)), queued
        stale_before = self.clock() - self.linger_s - late if late else 0.0
        excluded: list[int] = []
        for (t, p), queue in self._batches.items():  # only the partitions holding batches
            if t != topic or not 0 <= p < num_partitions or not queue:
                continue
            if late and queue[0].created < stale_before:
                excluded.append(p)
            queued[p] = sum(b.size for b in queue)
        if not excluded or len(excluded) == num_partitions:
            return list(range(num_partitions)), queued
        out = set(excluded)
        partitions = [p for p in range(num_partitions) if p not in out]
        return partitions, [queued[p] for p in partitions]

    def appended_in_place(self, messages: int) -> None:
        """Count records a caller appended to `open_batches` itself.

        Args:
            messages: How many.
        """
        self.messages += messages

    def _track_open(self, batch: PartitionBatch) -> None:
        # After an append: the partition's last batch is open (or not).
        open_ = self._open.get(batch.topic)
        if batch.full or not batch.items:
            if open_ is not None and open_.get(batch.partition) is batch:
                del open_[batch.partition]
        else:
            if open_ is None:
                open_ = self._open[batch.topic] = {}
            open_[batch.partition] = batch

    def append(self, topic: str, partition: int, item: Any, messages: int, size: int) -> PartitionBatch:
        """Append an item to its partition's open batch, opening a new one
        when the open one is full or this item would overflow it (an item
        larger than ``batch.size`` goes alone).

        Args:
            topic: The topic.
            partition: The partition, or -1 when not known.
            item: The item (a ProducerData).
            messages: How many records it holds.
            size: Its estimated size (bytes).

        Returns:
            The batch it went into.
        """
        key = (topic, partition)
        queue = self._batches.get(key)
        if queue is None:
            queue = self._batches[key] = deque()
        batch = queue[-1] if queue else None
        if batch is None or batch.full or (batch.items and (batch.size + size > self.batch_size or batch.messages + messages > self.batch_messages)):
            if batch is not None and not batch.full:
                self._close(batch)
            batch = PartitionBatch(topic, partition, self.clock())
            queue.append(batch)
        batch.items.append(item)
        batch.messages += messages
        batch.size += size
        self.messages += messages
        if batch.size >= self.batch_size or batch.messages >= self.batch_messages:
            self._close(batch)
        else:
            self._track_open(batch)
        return batch

    def append_many(self, topic: str, partition: int, items: list[Any], messages: list[int], sizes: list[int]) -> None:
        """`append` of several items of one partition, in order (the same
        batches as appending them one by one).

        Args:
            topic: The topic.
            partition: The partition, or -1 when not known.
            items: The items.
            messages: How many records each holds.
            sizes: The estimated size of each (bytes).
        """
        if not items:
            return
        key = (topic, partition)
        queue = self._batches.get(key)
        if queue is None:
            queue = self._batches[key] = deque()
        batch = queue[-1] if queue else None
        if batch is None or batch.full:
            batch = PartitionBatch(topic, partition, self.clock())
            queue.append(batch)
        added = sum(messages)
        self.messages += added
        size = batch.size + sum(sizes)
        count = batch.messages + added
        if size < self.batch_size and count < self.batch_messages:
            # The usual case: everything joins the open batch, which stays open.
            batch.items += items
            batch.size, batch.messages = size, count
            self._track_open(batch)
            return
        cuts, count, size = _batch_cuts(messages, sizes, batch.messages, batch.size, bool(batch.items), self.batch_messages, self.batch_size)
        start = 0
        for cut in cuts:
            if cut > start:
                batch.items += items[start:cut]
                batch.messages += sum(messages[start:cut])
                batch.size += sum(sizes[start:cut])
                start = cut
            self._close(batch)
            batch = PartitionBatch(topic, partition, self.clock())
            queue.append(batch)
        if start < len(items):
            batch.items += items[start:]
        if batch.items:
            batch.messages, batch.size = count, size
            self._track_open(batch)
        else:
            queue.pop()  # the empty batch opened last
            if not queue:
                del self._batches[key]

    def _close(self, batch: PartitionBatch) -> None:
        batch.full = True
        closed = self._closed_bytes.get(batch.topic)
        if closed is None:
            closed = self._closed_bytes[batch.topic] = {}
        closed[batch.partition] = closed.get(batch.partition, 0) + batch.size
        open_ = self._open.get(batch.topic)
        if open_ is not None and open_.get(batch.partition) is batch:
            del open_[batch.partition]
        if self.on_batch_closed is not None:
            self.on_batch_closed(batch.topic, batch.partition)

    def _is_ready(self, queue: deque[PartitionBatch], now: float, flush: bool) -> bool:
        head = queue[0]
        return flush or head.full or len(queue) > 1 or now - head.created >= self.linger_s

    def next_ready_in(self) -> float | None:
        """Seconds until the next batch's linger expires (0 when one is
        ready now), or None when nothing is held."""
        if not self._batches:
            return None
        if self.exhausted:
            return 0.0
        now = self.clock()
        soonest: float | None = None
        for queue in self._batches.values():
            if self._is_ready(queue, now, False):
                return 0.0
            wait = queue[0].created + self.linger_s - now
            if soonest is None or wait < soonest:
                soonest = wait
        return soonest

    def drain(self, leader_of: Callable[[str, int], Hashable], *, flush: bool = False) -> Drained:
        """Take the ready batches, grouped by leader, each leader's share
        bounded by ``max.request.size`` (its first batch goes even when it
        is larger). Of one partition, ready batches are taken in order
        while they fit and hold at most ``batch.num.messages`` records
        together (the seed's count knob bounds a partition's share of a
        request; Kafka's Java producer takes one batch per partition).

        Args:
            leader_of: ``(topic, partition) -> leader`` (any hashable; the
                unknown partition -1 may map to anything).
            flush: Every batch is ready (flush, close).

        Returns:
            The drained items.
        """
        out = Drained()
        if not self._batches:
            return out
        flush = flush or self.exhausted
        now = self.clock()
        per_leader: dict[Hashable, list[Any]] = {}
        used: dict[Hashable, int] = {}
        emptied = []
        for key, queue in self._batches.items():
            if not self._is_ready(queue, now, flush):
                continue
            leader = leader_of(*key)
            room = self._request_room - used.get(leader, 0)
            items = per_leader.get(leader)
            if items is None:
                items = per_leader[leader] = []
            for batch in self._take(queue, now, flush, room, not used.get(leader), self.batch_messages):
                items.extend(batch.items)
                used[leader] = used.get(leader, 0) + batch.size + BATCH_ENTRY_OVERHEAD
                out.messages += batch.messages
                out.size += batch.size
                out.batches += 1
                if batch.full:
                    self._drained_closed(batch)
                else:
                    open_ = self._open.get(batch.topic)
                    if open_ is not None and open_.get(batch.partition) is batch:
                        del open_[batch.partition]
                    if self.on_batch_closed is not None:
                        self.on_batch_closed(batch.topic, batch.partition)
            if not queue:
                emptied.append(key)
        for key in emptied:
            del self._batches[key]
        for items in per_leader.values():
            out.items.extend(items)
        self.messages -= out.messages
        return out

    def _drained_closed(self, batch: PartitionBatch) -> None:
        # A closed batch left: its bytes leave the partition's running sum.
        closed = self._closed_bytes[batch.topic]
        left = closed[batch.partition] - batch.size
        if left:
            closed[batch.partition] = left
        else:
            del closed[batch.partition]
            if not closed:
                del self._closed_bytes[batch.topic]

    def _take(self, queue: deque[PartitionBatch], now: float, flush: bool, room: int, first: bool, most: int) -> Iterator[PartitionBatch]:
        """The ready batches at the head of ``queue`` that fit ``room``
        bytes and ``most`` records (the first one always when ``first``),
        removed from it."""
        taken = 0
        while queue and self._is_ready(queue, now, flush):
            batch = queue[0]
            if taken and taken + batch.messages > most:
                return
            if batch.size + BATCH_ENTRY_OVERHEAD > room and not first:
                return
            queue.popleft()
            room -= batch.size + BATCH_ENTRY_OVERHEAD
            taken += batch.messages
            first = False
            yield batch

    def batches(self) -> Iterator[PartitionBatch]:
        """Every held batch (partition by partition, oldest first)."""
        for queue in self._batches.values():
            yield from queue
