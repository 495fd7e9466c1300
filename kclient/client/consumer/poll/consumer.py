"""`Consumer`: the blocking poll consumer (Kafka's ``KafkaConsumer``,
https://kafka.apache.org/documentation/#consumerapi; the same names and
semantics), a facade over `kclient.client.consumer.poll.core.TrioConsumer`
on a trio loop in a background thread (`kclient.sync.LoopThread`): each
call crosses into that thread once, while fetches and heartbeats run
there in the background.

```python
from kclient import Consumer

with Consumer({"bootstrap.servers": "localhost:9092", "group.id": "g",
               "auto.offset.reset": "earliest"}) as consumer:
    consumer.subscribe(["events"])
    for record in consumer:                      # or: consumer.poll(timeout_ms=1000)
        print(record.topic, record.partition, record.offset, record.value)
```

Timeouts are in milliseconds (``timeout_ms``, Kafka's and kafka-python's
unit); ``poll`` also takes ``timeout=`` in seconds, confluent-kafka's unit.
The rebalance listener runs inside ``poll``, on the caller's thread, so it
may call the consumer. ``Consumer.create(config)`` still returns the Kafka
0.8 `ConsumerConnector` (``Consumer.create`` of Kafka 0.8's API).
"""

from __future__ import annotations

import collections
import itertools
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kclient.client.cluster import PartitionInfo
from kclient.client.consumer.group.connector import ConsumerConnector
from kclient.client.consumer.poll.arguments import Offsets, Topics, timeout_seconds
from kclient.client.consumer.poll.core import TrioConsumer
from kclient.client.consumer.poll.group import ListenerCall
from kclient.client.consumer.poll.types import ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from kclient.client.consumer.statistics import ConsumerStatistics
from kclient.client.loop_closer import LoopClientCloser
from kclient.config import ConsumerConfig
from kclient.errors import LoopClosedError
from kclient.sync import ClosingClient, LoopThread, track

log = logging.getLogger("kclient.consumer")

_ids = itertools.count(1)

#: How long one step of an iteration waits for records (ms).
_ITERATION_STEP_MS = 1000


class Consumer(ClosingClient):
    """The poll consumer: ``Consumer(config)``, then `subscribe` (or
    `assign`) and `poll` (Kafka's ``KafkaConsumer``).

    Use as a context manager or call `close`. Not thread-safe, as Kafka's
    (one thread polls; `close` from another thread is fine). One never
    closed is closed at interpreter exit and warns ``ResourceWarning`` if
    garbage-collected open (its listener is not called then).

    Args:
        config: Kafka consumer properties: ``bootstrap.servers`` (required),
            ``group.id`` (to subscribe or commit), ``client.id``,
            ``enable.auto.commit``, ``auto.commit.interval.ms``,
            ``auto.offset.reset`` (``earliest`` / ``latest`` / ``none``),
            ``max.poll.records``, ``max.poll.interval.ms``,
            ``session.timeout.ms``, ``heartbeat.interval.ms``,
            ``partition.assignment.strategy`` (``range`` / ``roundrobin``),
            ``fetch.min.bytes``, ``fetch.max.wait.ms``,
            ``max.partition.fetch.bytes``, ``key.deserializer`` /
            ``value.deserializer``, the security properties...; or a
            `ConsumerConfig`. See `kclient.client.consumer.poll.config`
            for the defaults that differ from the 0.8 connector's.

    Raises:
        ConfigError: a missing or bad property.
    """

    _closer: LoopClientCloser

    def __init__(self, config: ConsumerConfig | Mapping[str, Any]) -> None:
        core = TrioConsumer(config)  # ConfigError before a thread starts
        self._core = core
        self.config = core.config
        self._listener: Any = None
        #: Finished asynchronous commits whose callbacks are due on the
        #: application's thread (deque appends and pops are thread-safe).
        self._commit_callbacks: collections.deque[tuple[Any, Any, Any]] = collections.deque()
        label = f"{core.config.client_id}-{next(_ids)}"
        self._loop = LoopThread(name=f"kclient-consumer-{label}")
        with self._loop.closing_on_error():
            self._loop.call(core.open, self._loop.nursery)
        bootstrap = ",".join(f"{h}:{p}" for h, p in core.config.bootstrap_servers or ())
        self._closer = LoopClientCloser(
            f"<Consumer {label} group.id={core.group_id} {bootstrap}>",
            max(1.0, core.config.socket_timeout_ms / 1000),
            self._loop,
            core.aclose,
            ignore=(LoopClosedError,),
            logger=log,
        )
        track(self._closer)

    @staticmethod
    def create(config: ConsumerConfig | Mapping[str, Any], **kwargs: Any) -> ConsumerConnector:
        """Kafka 0.8's ``Consumer.create``: the high-level
        `ConsumerConnector` (streams), not a poll consumer.

        Args:
            config: A `ConsumerConfig` or Kafka property names (see
                `ConsumerConnector`).
            **kwargs: Passed to `ConsumerConnector`.

        Returns:
            The `ConsumerConnector`.
        """
        return ConsumerConnector(config, **kwargs)

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: Topics, listener: Any = None) -> None:
        """Subscribe to topics or a pattern, partitions assigned by the
        group (Kafka's ``subscribe``); joined on the next `poll`.

        Args:
            topics: Topic names, one name, or a pattern (``re.Pattern`` or
                a string starting with ``^``, matched against whole names).
                An empty list is `unsubscribe`, as in Kafka's consumer.
            listener: A `kclient.ConsumerRebalanceListener`, called inside
                `poll` on the polling thread.

        Raises:
            InvalidGroupIdError: no ``group.id``.
            IllegalStateError: partitions were assigned with `assign`.
        """
        if isinstance(topics, (list, tuple, set, frozenset)) and not topics:
            self.unsubscribe()
            return
        self._loop.call_sync(self._core.subscribe, topics, None)
        self._listener = listener

    def subscription(self) -> set[str]:
        """The subscribed topics.

        Returns:
            Topic names (for a pattern: those it matched when the group was
            last joined); empty when not subscribed.
        """
        result: set[str] = self._loop.call_sync(self._core.subscription)
        return result

    def unsubscribe(self) -> None:
        """Stop reading: the revoke (or lost) listener, LeaveGroup, and no
        subscription or assignment any more."""
        call: ListenerCall | None = self._loop.call_sync(self._core.prepare_unsubscribe)
        if call is not None:
            call.invoke(self._listener)
        self._loop.call(self._core.finish_unsubscribe)

    def assign(self, partitions: Iterable[Any]) -> None:
        """Read exactly these partitions, no group management (Kafka's
        ``assign``); see `TrioConsumer.assign`.

        Args:
            partitions: `TopicPartition` objects (with an offset to start
                there) or ``(topic, partition)`` pairs.
        """
        self._loop.call_sync(self._core.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        """The partitions read now.

        Returns:
            The set (empty during a rebalance).
        """
        result: set[TopicPartition] = self._loop.call_sync(self._core.assignment)
        return result

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Where this consumer stands in its group (Kafka's
        ``groupMetadata()``; see `TrioConsumer.group_metadata`).

        Returns:
            Group id, generation or member epoch (-1 when not in the
            group), member id and ``group.instance.id``.

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        result: ConsumerGroupMetadata = self._loop.call_sync(self._core.group_metadata)
        return result

    # ------------------------------------------------------------ poll

    def poll(self, timeout_ms: float | None = None, *, timeout: float | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions (Kafka's ``poll``; see
        `TrioConsumer.poll`): rebalances, the listener (on this thread)
        and the auto-commit happen here.

        Args:
            timeout_ms: Longest wait for records (ms; default 0).
            timeout: The same in seconds, instead of ``timeout_ms``.

        Returns:
            At most ``max.poll.records`` records; empty when none came in
            time.

        Raises:
            LoopClosedError: after `close`.
            IllegalStateError: neither subscribed nor assigned.
            NoOffsetForPartitionError: no committed offset and
                ``auto.offset.reset=none``.
            KafkaError: a partition's or the group's error; what the
                listener raised.
        """
        deadline = time.monotonic() + timeout_seconds(timeout_ms, timeout, 0)
        while True:
            self._run_commit_callbacks()
            step = self._loop.call(self._core.poll_once, max(0.0, deadline - time.monotonic()))
            if isinstance(step, ListenerCall):
                step.invoke(self._listener)
                continue
            records: list[ConsumerRecord] = step
            if records or time.monotonic() >= deadline:
                return records

    def wakeup(self) -> None:
        """Make the poll under way (on another thread), or the next one,
        raise `kclient.WakeupError` (Kafka's ``wakeup``, the one method
        meant for another thread: the way to end a poll loop)."""
        self._loop.call_sync(self._core.wakeup)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Every record, as `poll` hands them out, until the consumer is
        closed, or for ``consumer.timeout.ms`` (if not -1) no record came
        (kafka-python's ``consumer_timeout_ms``)."""
        limit = self.config.consumer_timeout_ms
        quiet_since = time.monotonic()
        while not self.closed:
            try:
                records = self.poll(timeout_ms=_ITERATION_STEP_MS if limit < 0 else min(_ITERATION_STEP_MS, limit))
            except LoopClosedError:
                return
            if records:
                yield from records
                quiet_since = time.monotonic()
            elif limit >= 0 and (time.monotonic() - quiet_since) * 1000 >= limit:
                return

    # ------------------------------------------------------------ commits

    def commit(self, offsets: Offsets | None = None, asynchronous: bool = False, *, callback: Any = None) -> None:
        """Commit offsets (Kafka's ``commitSync`` / ``commitAsync``; see
        `TrioConsumer.commit`).

        Args:
            offsets: None for the current positions, ``{partition:
                OffsetAndMetadata or offset}``, or partitions carrying the
                offset.
            asynchronous: Return at once; a failure is logged and passed
                to ``callback``.
            callback: ``callback(offsets, error or None)`` for an
                asynchronous commit, called on the application's thread
                inside a later `poll`, `commit` or `close` (Kafka's
                ``OffsetCommitCallback``); what it raises comes out of
                that call.

        Raises:
            CommitFailedError: the member is no longer in the group.
            InvalidGroupIdError: no ``group.id``.
        """
        relay = None
        if callback is not None:

            def relay(done: Any, error: Any, callback: Any = callback) -> None:
                self._commit_callbacks.append((callback, done, error))

        try:
            self._loop.call(lambda: self._core.commit(offsets, asynchronous, callback=relay))
        finally:
            self._run_commit_callbacks()

    def _run_commit_callbacks(self) -> None:
        """Call the callbacks of the asynchronous commits that finished."""
        while self._commit_callbacks:
            callback, done, error = self._commit_callbacks.popleft()
            callback(done, error)

    def committed(self, partitions: Iterable[Any] | TopicPartition, timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (see `TrioConsumer.committed`).

        Args:
            partitions: The partitions (or one).
            timeout_ms: Longest wait (ms).

        Returns:
            ``{partition: OffsetAndMetadata or None}``.
        """
        parts = partitions if isinstance(partitions, TopicPartition) else list(partitions)
        result: dict[TopicPartition, OffsetAndMetadata | None] = self._loop.call(self._core.committed, parts, timeout_ms)
        return result

    # ------------------------------------------------------------ positions

    def position(self, partition: TopicPartition | tuple[str, int], timeout_ms: float | None = None) -> int:
        """The offset of the next record `poll` hands out for an assigned
        partition (see `TrioConsumer.position`).

        Args:
            partition: The partition.
            timeout_ms: Longest wait (ms).

        Returns:
            The offset.
        """
        result: int = self._loop.call(self._core.position, partition, timeout_ms)
        return result

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int | None = None) -> None:
        """Read an assigned partition from ``offset`` on the next `poll`.

        Args:
            partition: The partition (carrying the offset when ``offset``
                is None).
            offset: The offset.
        """
        self._loop.call_sync(self._core.seek, partition, offset)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        """Read from each partition's log start (looked up on the next
        `poll` or `position`).

        Args:
            partitions: Assigned partitions; None or empty: all of them.

        Raises:
            IllegalStateError: a partition is not assigned.
        """
        self._loop.call_sync(self._core.seek_to_beginning, None if partitions is None else list(partitions))

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        """Read from each partition's log end: only records produced from
        now on (looked up on the next `poll` or `position`).

        Args:
            partitions: Assigned partitions; None or empty: all of them.

        Raises:
            IllegalStateError: a partition is not assigned.
        """
        self._loop.call_sync(self._core.seek_to_end, None if partitions is None else list(partitions))

    def offsets_for_times(self, timestamps: Mapping[Any, int], timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset at or after each time (ms since the epoch;
        see `TrioConsumer.offsets_for_times`).

        Args:
            timestamps: ``{partition: ms since the epoch}``.
            timeout_ms: Longest wait (ms).

        Returns:
            ``{partition: OffsetAndTimestamp or None}``.
        """
        result: dict[TopicPartition, OffsetAndTimestamp | None] = self._loop.call(self._core.offsets_for_times, dict(timestamps), timeout_ms)
        return result

    def beginning_offsets(self, partitions: Iterable[Any], timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """Each partition's log start offset (Kafka's ``beginningOffsets``).

        Args:
            partitions: The partitions.
            timeout_ms: Longest wait (ms; default ``default.api.timeout.ms``).

        Returns:
            ``{partition: offset}``.
        """
        result: dict[TopicPartition, int] = self._loop.call(self._core.beginning_offsets, list(partitions), timeout_ms)
        return result

    def end_offsets(self, partitions: Iterable[Any], timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """Each partition's log end offset, the offset its next record
        will get (Kafka's ``endOffsets``).

        Args:
            partitions: The partitions.
            timeout_ms: Longest wait (ms; default ``default.api.timeout.ms``).

        Returns:
            ``{partition: offset}``.
        """
        result: dict[TopicPartition, int] = self._loop.call(self._core.end_offsets, list(partitions), timeout_ms)
        return result

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        """A topic's partitions (Kafka's ``partitionsFor``).

        Args:
            topic: The topic.

        Returns:
            Its partitions sorted by id (``partition``, ``leader``,
            ``replicas``, ``isr``).
        """
        result: tuple[PartitionInfo, ...] = self._loop.call(self._core.partitions_for, topic)
        return result

    def list_topics(self, timeout_ms: float | None = None) -> dict[str, tuple[PartitionInfo, ...]]:
        """Every topic the cluster has, with its partitions (Kafka's
        ``listTopics``).

        Args:
            timeout_ms: Longest wait (ms).

        Returns:
            ``{topic: partitions sorted by id}``.
        """
        result: dict[str, tuple[PartitionInfo, ...]] = self._loop.call(self._core.list_topics, timeout_ms)
        return result

    def statistics(self) -> ConsumerStatistics:
        """What this consumer fetched so far, and each assigned partition's
        lag (see `TrioConsumer.statistics`); callable from any thread, also
        after `close`.

        Returns:
            A `kclient.ConsumerStatistics`.
        """
        return self._core.statistics()

    # ------------------------------------------------------------ flow control

    def pause(self, partitions: Iterable[Any]) -> None:
        """Stop fetching these assigned partitions (`poll` hands out none
        of their records) until `resume`; the group membership is kept.

        Args:
            partitions: The partitions.

        Raises:
            IllegalStateError: a partition is not assigned.
        """
        self._loop.call_sync(self._core.pause, list(partitions))

    def resume(self, partitions: Iterable[Any]) -> None:
        """Fetch paused partitions again.

        Args:
            partitions: The partitions.

        Raises:
            IllegalStateError: a partition is not assigned.
        """
        self._loop.call_sync(self._core.resume, list(partitions))

    def paused(self) -> set[TopicPartition]:
        """The paused partitions.

        Returns:
            The set.
        """
        result: set[TopicPartition] = self._loop.call_sync(self._core.paused)
        return result

    # ------------------------------------------------------------ close

    def close(self) -> None:
        """Commit the positions (``enable.auto.commit``), run the revoke
        listener, leave the group and close every connection; idempotent."""
        if self.closed:
            return
        try:
            call: ListenerCall | None = self._loop.call(self._core.prepare_close)
            if call is not None:
                call.invoke(self._listener)
        except LoopClosedError:
            pass
        finally:
            self._closer.close()
            self._run_commit_callbacks()

    def __repr__(self) -> str:
        return f"<Consumer group.id={self._core.group_id} {self._state()}>"


__all__ = ["Consumer"]
