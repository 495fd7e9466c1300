"""The blocking Producer of Kafka 0.8's producer API.

Source: the Kafka 0.8 documentation, section 5.1 "API Design", "Producer
APIs" (https://kafka.apache.org/08/documentation.html#apidesign):

```java
class Producer {
  public void send(ProducerData<K,V> producerData);
  public void send(java.util.List<ProducerData<K,V>> producerData);
  public void close();
}
```

with the two modes of ``producer.type``:

- ``sync``: `Producer.send` returns once the broker acknowledged the
  records per ``request.required.acks`` (with 0: once they were written to
  the socket), retrying retriable errors up to ``message.send.max.retries``
  times with ``retry.backoff.ms`` backoff and a metadata refresh between
  tries. One thread crossing into the producer's trio loop per call.
- ``async``: `Producer.send` puts the data on a bounded queue
  (``queue.buffering.max.messages`` messages waiting, and ``buffer.memory``
  bytes of records held until acknowledged: queued, batched or in flight)
  and returns without touching the trio loop. The `ProducerSendThread` moves the queued records into
  per-partition batches and sends a partition's batch when it holds
  ``batch.size`` bytes or ``batch.num.messages`` records or
  ``queue.buffering.max.ms`` (``linger.ms``) passed since its first record,
  one Produce request per leader, from the same thread (it runs the
  producer's trio loop); with a custom ``event.handler`` it takes 0.8's
  batches of ``batch.num.messages`` records across partitions instead.
  When either bound is reached,
  ``queue.enqueue.timeout.ms`` (alias ``max.block.ms``) says: -1 block
  until there is room, 0 raise `QueueFullError` at once, >0 wait that many
  ms and then raise it (its message names the bound). A record larger than
  ``buffer.memory`` alone raises `MessageSizeTooLargeError` at once.
  `Producer.close` sends everything queued first.

Per-record delivery results (Kafka's ``send(record, callback)`` and
``Future<RecordMetadata>``): ``send(data, callback=fn)`` and
``send_with_result(data)`` (`kclient.client.producer.delivery`). Plain
``send(data)`` keeps its path and allocates nothing per record for them.

The Producer owns one thread running a trio loop with a
`TrioProducer` on it: in sync mode a
`kclient.sync.LoopThread` (``...-trio``), in async mode the
ProducerSendThread (``...-send``, a LoopThread that also batches); it is
stopped by ``close()``. Close the Producer (or use it as a context manager).

A Producer that is never closed (see `kclient.sync` for the mechanism):

- does not keep the interpreter alive: its thread is a daemon thread;
- is closed at interpreter exit by kclient's exit hook (registered with
  ``threading._register_atexit``, so it runs before the interpreter joins
  the application's non-daemon threads). In async mode that close first
  flushes the queue for at most ``close.timeout.ms`` (default 5000 ms, as
  Kafka's ``KafkaProducer.close(timeout)``); what is still queued or
  unacknowledged then is abandoned and its count logged at ERROR, as are
  sends that failed earlier. The exit status is not changed;
- Ctrl-C during ``close()`` or during that exit flush abandons the rest:
  the count is logged at ERROR (and, in ``close()``, added as a note to the
  KeyboardInterrupt, which propagates); at exit the process then ends as an
  interrupted program (killed by SIGINT), not with status 0;
- garbage-collected while open, it emits ``ResourceWarning: unclosed
  <Producer ...>`` and is flushed and closed in a background thread.
"""

from __future__ import annotations

import functools
import itertools
import logging
import operator
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from kclient._accel import speedups as _speedups
from kclient.client.cluster import PartitionInfo
from kclient.client.producer.accumulator import ACCUMULATOR_RECORD_OVERHEAD
from kclient.client.producer.callbacks import overrides
from kclient.client.producer.core import TrioProducer
from kclient.client.producer.data import ProducerData, new_tuple
from kclient.client.producer.data import stamped as _stamped
from kclient.client.producer.delivery import DeliveryReport, RecordFuture, RecordMetadata, TrackedData, call_back, settle, track
from kclient.client.producer.queue import Bundle, MessageQueue, RecordTooLargeError
from kclient.client.producer.send_thread import ProducerSendThread
from kclient.clock import now_ms
from kclient.config import ProducerConfig
from kclient.errors import FailedToSendMessageError, IllegalStateError, KafkaError, KafkaTimeoutError, LoopClosedError, ProducerClosedError, QueueFullError
from kclient.protocol.messages import PRODUCE
from kclient.sync import ClosingClient, ExitCloser, LoopThread, untrack
from kclient.sync import track as track_closer

__all__ = ["Producer", "ProducerStatistics"]

log = logging.getLogger(__name__)

_messages_of = operator.itemgetter(2)  # ProducerData.messages
# send(list)'s compiled stamping (None: pure Python).
_c_stamp_all = _speedups.stamp_all if _speedups is not None else None
# send()'s compiled usual call (None: pure Python).
_FastSend = _speedups.FastSend if _speedups is not None else None


_ids = itertools.count(1)

#: The most messages of one `Bundle` queued by ``send(list)`` (fewer when
#: ``batch.num.messages`` is lower): Kafka 0.8's default batch.
BUNDLE_MESSAGES = 200


@attrs.frozen
class ProducerStatistics:
    """A snapshot of a Producer (see `Producer.statistics`).

    ``queued_messages``: waiting in the async queue now;
    ``sent_messages`` / ``sent_batches``: acknowledged (async: batches the
    send thread sent; sync: ``send`` calls); ``failed_messages`` /
    ``failed_batches``: given up on; ``first_error``: the first failure.
    ``produce_throttle_time_avg`` / ``produce_throttle_time_max``: the
    average and longest ``throttle_time_ms`` (ms) of the Produce responses
    over the last 2 windows of 30 s (Kafka's ``produce-throttle-time-avg``
    / ``-max``; non-zero when a quota throttled the producer, KIP-13);
    `metrics` gives them by Kafka's names.
    """

    producer_type: str
    queued_messages: int
    sent_messages: int
    sent_batches: int
    failed_messages: int
    failed_batches: int
    first_error: BaseException | None
    produce_throttle_time_avg: float = 0.0
    produce_throttle_time_max: float = 0.0

    def metrics(self) -> dict[str, float]:
        """The throttle times by Kafka's producer metric names.

        Returns:
            ``{"produce-throttle-time-avg": ms, "produce-throttle-time-max": ms}``.
        """
        return {"produce-throttle-time-avg": self.produce_throttle_time_avg, "produce-throttle-time-max": self.produce_throttle_time_max}


class Producer(ClosingClient):
    """The blocking producer: ``Producer(config).send(ProducerData(...))``.

    Use as a context manager or call `close`. Thread-safe: several
    threads may call `send` at once. One never closed is closed at
    interpreter exit (async: flushed for at most ``close.timeout.ms``, the
    records it could not deliver counted in an ERROR log) and warns
    ``ResourceWarning`` if garbage-collected open: see the module docstring.

    Args:
        config: a `ProducerConfig`, a mapping of Kafka property names
            (``{"metadata.broker.list": "host:9092", "producer.type":
            "async", ...}``) or a ``.properties`` path.
        event_handler: overrides ``event.handler`` (instance, class or
            dotted path).
        callback_handler: overrides ``callback.handler`` (likewise).

    Raises:
        ConfigError: a bad config or plug-in.
    """

    _closer: _ProducerCloser

    def __init__(self, config: ProducerConfig | Mapping[str, Any] | str, *, event_handler: Any = None, callback_handler: Any = None) -> None:
        self._core = TrioProducer(config, event_handler=event_handler, callback_handler=callback_handler)
        manager = self._core.transaction_manager
        if manager is not None:
            # Sends outside a transaction raise at once (as Kafka's); a
            # producer without transactional.id keeps the unchecked methods.
            self.send = _checked_send(manager.check_send_allowed, self.send)  # type: ignore[method-assign]
            self.send_with_result = _checked_send(manager.check_send_allowed, self.send_with_result)  # type: ignore[method-assign]
        self.config = cfg = self._core.config
        self._callbacks = self._core.callback_handler
        self._before_enqueue = overrides(self._callbacks, "before_enqueue")
        self._after_enqueue = overrides(self._callbacks, "after_enqueue")
        self._before_send = overrides(self._callbacks, "before_sending_data")
        self._on_error = overrides(self._callbacks, "on_send_error")
        self._async = cfg.producer_type == "async"
        self._stats_lock = threading.Lock()
        self._sync_sent = [0, 0]  # messages, calls
        self._sync_failed = [0, 0]
        self._sync_first_error: BaseException | None = None
        number = next(_ids)
        label = cfg.client_id or str(number)
        self._queue: MessageQueue | None = None
        self._thread: ProducerSendThread | None = None
        # DeliveryReports of async records sent with a callback or future and
        # not resolved yet: close() fails whatever is left.
        self._reports: set[DeliveryReport] = set()
        self._plain_enqueue = self._async and not (self._before_enqueue or self._after_enqueue)
        self._valid_topics = self._core.valid_topics  # filled by prepare()
        self._enqueue_timeout_ms = cfg.queue_enqueue_timeout_ms
        if self._async:
            # The send thread runs the trio loop: batches go from the queue
            # to the sockets on one thread.
            self._queue = MessageQueue(cfg.queue_buffering_max_messages, cfg.buffer_memory, ACCUMULATOR_RECORD_OVERHEAD)
            # send()'s per-record call (see MessageQueue.fast_put).
            self._fast_put = self._queue.fast_put
            # send(list) queues bundles of up to this many messages: at most
            # batch.num.messages, and small against the queue's bound, so
            # that putting and taking overlap.
            self._bundle_messages = max(1, min(cfg.batch_num_messages, BUNDLE_MESSAGES))
            self._thread = ProducerSendThread(
                self._queue,
                callback_handler=self._callbacks,
                batch_num_messages=cfg.batch_num_messages,
                queue_time_ms=cfg.queue_buffering_max_ms,
                batch_size=cfg.batch_size,
                max_request_size=cfg.max_request_size,
                max_in_flight=cfg.max_in_flight_requests_per_connection,
                ignore_keys=cfg.partitioner_ignore_keys,
                adaptive_partitioning=cfg.partitioner_adaptive_partitioning_enable,
                availability_timeout_ms=cfg.partitioner_availability_timeout_ms,
                name=f"kclient-producer-{label}-send",
            )
            self._loop: LoopThread = self._thread
        else:
            self._loop = LoopThread(name=f"kclient-producer-{label}-trio")
        with self._loop.closing_on_error():
            self._loop.call(self._core.open, self._loop.nursery)
            if self._thread is not None:
                self._thread.start_sending(self._core)
        description = f"<Producer {cfg.producer_type} {label} {cfg.metadata_broker_list}>"
        self._closer = _ProducerCloser(description, cfg.close_timeout_ms, self._loop, self._core, self._callbacks, self._queue, self._thread, self._reports)
        track_closer(self._closer)
        if self._plain_enqueue and _FastSend is not None and "send" not in vars(self):
            # send()'s usual call at C speed (its twin is send's first
            # branch); everything else goes to send() itself. The fallback
            # holds the producer weakly: no reference cycle.
            self.send = _FastSend(ProducerData, self._valid_topics, self._fast_put, _send_of(weakref.ref(self)))  # type: ignore[method-assign]

    @property
    def producer_type(self) -> str:
        """``"sync"`` or ``"async"`` (``producer.type``)."""
        return self.config.producer_type

    @property
    def _closed(self) -> bool:
        closer = getattr(self, "_closer", None)
        return closer is not None and closer.closed

    def _closed_error(self) -> ProducerClosedError:
        """What a send to a closed producer raises.

        Raises:
            ClientForkedError: in a process forked after the producer was
                created (there it counts as closed).
        """
        self._closer.check_not_forked()
        return ProducerClosedError("send() called after the producer was closed")

    @property
    def trio_producer(self) -> TrioProducer:
        """The TrioProducer running on this producer's loop thread."""
        return self._core

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        """The partitions of a topic (Kafka's ``Producer.partitionsFor``),
        from the producer's metadata, refreshed when stale. As in Kafka, a
        missing topic is created if the broker auto-creates topics.

        Args:
            topic: Topic name.

        Returns:
            Its partitions sorted by id (``partition``, ``leader``,
            ``replicas``, ``isr``).

        Raises:
            ProducerClosedError: after `close`.
            BrokerResponseError: e.g. `UnknownTopicOrPartitionError`, or
                `LeaderNotAvailableError` while a partition has no leader.
            NoBrokersAvailableError: no broker answered.
        """
        if self._closer.closed:
            raise ProducerClosedError("the producer is closed")
        partitions: tuple[PartitionInfo, ...] = self._loop.call(self._core.cluster.partitions_for, topic)
        return partitions

    def send(self, data_or_list: ProducerData | Iterable[ProducerData], *, callback: Callable[[RecordMetadata | None, BaseException | None], Any] | None = None) -> None:
        """Send one `ProducerData` or a list of them.

        sync mode: returns once acknowledged. async mode: returns once
        queued; send errors surface later through the log, the
        CallbackHandler's ``on_send_error``, `statistics`, `close` and,
        for records sent with a ``callback``, that callback.

        With ``callback`` (Kafka's ``send(record, callback)``, whose
        ``onCompletion(metadata, exception)`` it mirrors), every record
        (each message of each ProducerData) gets exactly one call
        ``callback(metadata, None)`` with its `RecordMetadata` once the
        broker acknowledged it, or ``callback(None, error)`` once the
        producer gave up on it: a `FailedToSendMessageError` naming its
        partition (``__cause__``: the broker's error, e.g.
        `MessageSizeTooLargeError`), a `QueueFullError` for the records
        this call could not queue, or a `FailedToSendMessageError` from
        ``close()`` for records abandoned there. Only a call that raises
        before queuing anything (`InvalidTopicError`, `ProducerClosedError`,
        TypeError) makes no calls. The callback runs on:

        - async mode: the producer's send thread (``...-send``), as Kafka's
          callbacks run on its I/O thread: keep it short (it holds up the
          sending), and do not call `flush` or `close` from it (they raise
          `IllegalStateError`); the records not queued (`QueueFullError`)
          are called back on the thread calling ``send``, before it raises;
        - sync mode: the thread calling ``send``, before ``send`` returns or
          raises.

        An exception raised by the callback is logged and ignored. Without
        a callback nothing per record is kept or allocated.

        Args:
            data_or_list: a ProducerData or an iterable of them.
            callback: ``callback(metadata, exception)`` per record, or None.

        Raises:
            FailedToSendMessageError: sync mode: a non-retriable error, or
                retries ran out (cause chained, topic-partitions named,
                ``lost_messages`` set).
            QueueFullError: async mode: the queue stayed full
                (``queue.buffering.max.messages`` or ``buffer.memory``, as
                its message says) for ``queue.enqueue.timeout.ms``
                (``not_enqueued`` lists the ProducerData that were not
                queued; the ones before them were).
            MessageSizeTooLargeError: async mode: a record is larger than
                ``buffer.memory`` (a `RecordTooLargeError`; nothing from its
                ProducerData on is queued, ``not_enqueued`` lists them when
                several were given).
            InvalidTopicError: an illegal topic name (nothing is sent or
                queued).
            ProducerClosedError: the producer was closed.
            ClientForkedError: called in a process forked after the
                producer was created (create producers after fork).
        """
        if callback is None and type(data_or_list) is ProducerData and self._plain_enqueue:
            # The common async case, one ProducerData and no enqueue hooks:
            # validate the topic once, stamp, append (one call of the queue's
            # core; a closed producer has a closed queue, which refuses it).
            d = data_or_list
            if d[0] not in self._valid_topics:
                if self._closed:
                    raise self._closed_error()
                self._core.prepare(d)
            if d[3] is None:
                d = _stamped(d)
            waker = self._fast_put(d, len(d[2]))
            if waker is None:
                return
            if waker is not False:
                waker()
                return
            if self._closed:
                raise self._closed_error()
            if not self._queue.put(d, len(d[2]), self._enqueue_timeout_ms):  # type: ignore[union-attr]
                raise self._queue_full([d], 1, self._enqueue_timeout_ms)
            return
        if self._closed:
            raise self._closed_error()
        if callback is None and type(data_or_list) is list and self._plain_enqueue and _c_stamp_all is not None:
            # A batch-level send: stamped in one compiled pass (None: an item
            # or topic the general path must check first), queued as bundles.
            stamped = _c_stamp_all(data_or_list, ProducerData, self._valid_topics)
            if stamped is not None:
                self._enqueue_bundles(stamped[0])
                return
        if callback is not None:
            if type(data_or_list) is ProducerData and self._plain_enqueue:
                self._put_tracked(data_or_list, callback, None)
            else:
                self._send_tracked(data_or_list, callback, want_futures=False)
            return
        events = self._core.prepare(data_or_list)
        if self._async:
            self._enqueue(events)
            return
        self._send_sync(events)

    def send_with_result(self, data_or_list: ProducerData | Iterable[ProducerData]) -> list[RecordFuture]:
        """Send like `send` and return one `RecordFuture` per record (each
        message of each ProducerData, in order): Kafka's
        ``Future<RecordMetadata> send(record)``.

        A future is resolved with the record's `RecordMetadata` (topic,
        partition, offset, timestamp, serialized sizes) once the broker
        acknowledged it, or failed with the error the producer gave up on
        it with (see `send`'s ``callback``). Delivery errors go into the
        futures, never raised here (as in Kafka, where a full buffer fails
        the returned future): records the async queue had no room for
        (``queue.enqueue.timeout.ms``) get a failed future holding the
        `QueueFullError`. ``close()`` resolves or fails every future it
        leaves behind.

        sync mode: returns once every record was acknowledged or failed, so
        every future is done. async mode: returns once queued; the futures
        are resolved on the send thread (see `RecordFuture` for where
        ``add_done_callback`` functions run).

        Args:
            data_or_list: a ProducerData or an iterable of them.

        Returns:
            The futures, one per record.

        Raises:
            InvalidTopicError: an illegal topic name (nothing is sent or
                queued).
            ProducerClosedError: the producer was closed before the call.
        """
        if self._closed:
            raise ProducerClosedError("send_with_result() called after the producer was closed")
        if type(data_or_list) is ProducerData and self._plain_enqueue:
            futures = [RecordFuture() for _ in data_or_list[2]]
            self._put_tracked(data_or_list, None, futures)
            return futures
        return self._send_tracked(data_or_list, None, want_futures=True)  # type: ignore[return-value]

    def _put_tracked(self, d: ProducerData, callback: Any, futures: list[RecordFuture] | None) -> None:
        # The async fast path with a delivery result: one ProducerData, no
        # enqueue hooks (as `send`'s, plus the report).
        if d[0] not in self._valid_topics:
            self._core.prepare(d)
        ts = d[3] if d[3] is not None else now_ms()
        n = len(d[2])
        report = DeliveryReport(d, callback, futures, self._reports)
        report.timestamp = ts
        self._thread.tracking = True  # type: ignore[union-attr]
        exc: QueueFullError | RecordTooLargeError | None
        try:
            added = self._queue.put(new_tuple(TrackedData, (d[0], d[1], d[2], ts, d[4], d[5], report)), n, self._enqueue_timeout_ms)  # type: ignore[union-attr]
        except RecordTooLargeError as too_large:
            added, exc = False, too_large
        else:
            exc = None if added else self._queue_full([new_tuple(ProducerData, (d[0], d[1], d[2], ts, d[4], d[5]))], 1, self._enqueue_timeout_ms)
        if exc is not None:
            report.settle(exc)
            if futures is None:
                raise exc

    def _send_tracked(self, data_or_list: Any, callback: Any, *, want_futures: bool) -> list[RecordFuture] | None:
        events = self._core.prepare(data_or_list)
        if not self._async:
            # Futures resolved on the trio thread; callbacks called here.
            tracked, reports, futures = track(events, None, True, None)
            error: Exception | None = None
            try:
                self._send_sync(tracked)
            except Exception as exc:
                error = exc
            settle(reports, error)
            if callback is not None:
                call_back(futures, callback)  # type: ignore[arg-type]
            if error is not None and not want_futures:
                raise error
            return futures
        tracked, reports, futures = track(events, callback, want_futures, self._reports)
        self._thread.tracking = True  # type: ignore[union-attr]
        try:
            self._enqueue(tracked)
        except (QueueFullError, RecordTooLargeError) as exc:
            rest = exc.not_enqueued
            exc.not_enqueued = [d.untracked() if isinstance(d, TrackedData) else d for d in rest]
            for d in rest:
                if isinstance(d, TrackedData):
                    d.report.settle(exc)
            if not want_futures:
                raise
        return futures

    def _send_sync(self, events: list[ProducerData]) -> None:
        if self._before_send:
            events = list(self._callbacks.before_sending_data(events) or ())
        try:
            self._loop.call(self._core.send_batch, events)
        except Exception as exc:
            lost = getattr(exc, "lost_messages", None)
            with self._stats_lock:
                n = sum(len(d.messages) for d in events)
                lost = n if lost is None else lost
                self._sync_failed[0] += lost
                self._sync_failed[1] += 1
                self._sync_sent[0] += n - lost
                if self._sync_first_error is None:
                    self._sync_first_error = exc
            if self._on_error:
                self._callbacks.on_send_error(events, exc)
            if isinstance(exc, LoopClosedError) and self._closed:
                raise ProducerClosedError("the producer was closed during send()") from exc
            raise
        with self._stats_lock:
            self._sync_sent[0] += sum(len(d.messages) for d in events)
            self._sync_sent[1] += 1

    def _enqueue(self, events: Sequence[ProducerData]) -> None:
        queue = self._queue
        assert queue is not None
        timeout = self.config.queue_enqueue_timeout_ms
        now = now_ms()
        if not (self._before_enqueue or self._after_enqueue):
            self._enqueue_bundles([d if d.timestamp_ms is not None else d._stamped(now) for d in events])
            return
        callbacks = self._callbacks
        for i, given in enumerate(events):
            d = given
            if self._before_enqueue:
                replaced = callbacks.before_enqueue(given)
                if type(given) is TrackedData and replaced is not given:
                    replaced = _retrack(given, replaced)
                if replaced is None:
                    continue
                d = replaced
            if d.timestamp_ms is None:
                d = d._stamped(now)
            try:
                added = queue.put(d, len(d.messages), timeout)
            except RecordTooLargeError as exc:
                exc.not_enqueued = [d, *events[i + 1 :]]
                raise
            if self._after_enqueue:
                callbacks.after_enqueue(d, added)
            if not added:
                raise self._queue_full([d, *events[i + 1 :]], len(events), timeout)

    def _enqueue_bundles(self, stamped: list[ProducerData]) -> None:
        # send(list) without enqueue hooks: the items go into the queue as
        # `Bundle` entries of up to batch.num.messages messages each (one
        # entry per batch instead of one per record; the send thread gets
        # the items back in order).
        queue = self._queue
        assert queue is not None
        timeout = self._enqueue_timeout_ms
        limit = self._bundle_messages
        total = len(stamped)
        counts = list(map(len, map(_messages_of, stamped)))
        if sum(counts) == total:  # one message each: cut by position
            cuts = [(start, min(total, start + limit), min(total, start + limit) - start) for start in range(0, total, limit)]
        else:  # whole items of up to ``limit`` messages (a larger item alone)
            cuts = []
            start = n = 0
            for i, c in enumerate(counts):
                if n and n + c > limit:
                    cuts.append((start, i, n))
                    start, n = i, 0
                n += c
            cuts.append((start, total, n))
        for start, end, n in cuts:
            try:
                if end - start == 1:
                    added = queue.put(stamped[start], n, timeout)
                else:
                    added = queue.put(Bundle(stamped[start:end]), n, timeout)
            except RecordTooLargeError as exc:
                exc.not_enqueued = stamped[start:]
                raise
            if not added:
                raise self._queue_full(stamped[start:], total, timeout)

    def _queue_full(self, rest: list[ProducerData], total: int, timeout: int) -> QueueFullError:
        n_messages = sum(len(d.messages) for d in rest)
        topics = ", ".join(sorted({d.topic for d in rest})[:5])
        waited = "did not wait (queue.enqueue.timeout.ms=0)" if timeout == 0 else f"waited queue.enqueue.timeout.ms={timeout} ms"
        bound = self._queue.last_full_bound if self._queue is not None else ""
        if not bound:
            bound = f"queue.buffering.max.messages={self.config.queue_buffering_max_messages}"
        return QueueFullError(
            f"the async producer's queue is full ({bound}); "
            f"{waited}: {len(rest)} of {total} ProducerData ({n_messages} message(s), topic {topics}) were NOT enqueued",
            not_enqueued=rest,
        )

    def flush(self, timeout_ms: int | None = None) -> None:
        """Async mode: send everything queued now, ignoring the batch
        thresholds, and wait until it was sent or failed. Sync mode: nothing
        to do.

        Args:
            timeout_ms: how long to wait; None waits as long as it takes.

        Raises:
            KafkaTimeoutError: the timeout ran out.
            IllegalStateError: called from the producer's send thread (a
                CallbackHandler hook).
        """
        self._closer.check_not_forked()
        if self._queue is None:
            return
        if self._thread is not None and self._thread.in_loop_thread:
            raise IllegalStateError("flush() cannot be called from the producer's send thread (a CallbackHandler hook)")
        if not self._queue.flush(None if timeout_ms is None else timeout_ms / 1000):
            raise KafkaTimeoutError(f"flush() did not finish within {timeout_ms} ms")

    def statistics(self) -> ProducerStatistics:
        """Counters of what was sent and lost so far (see
        `ProducerStatistics`)."""
        throttles = self._core.throttles
        throttle = (throttles.avg(PRODUCE.key), throttles.max(PRODUCE.key))
        if self._thread is not None and self._queue is not None:
            s = self._thread.statistics()
            return ProducerStatistics(
                "async",
                self._queue.statistics().queued_messages,
                s.sent_messages,
                s.sent_batches,
                s.failed_messages,
                s.failed_batches,
                s.first_error,
                *throttle,
            )
        with self._stats_lock:
            return ProducerStatistics(
                "sync", 0, self._sync_sent[0], self._sync_sent[1], self._sync_failed[0], self._sync_failed[1], self._sync_first_error, *throttle
            )

    # -- transactions (KIP-98; see TrioProducer for the details) -------------

    def init_transactions(self, timeout_ms: int | None = None) -> None:
        """Get the ``transactional.id``'s producer id and epoch, fencing any
        older producer with the same id (`TrioProducer.init_transactions`).

        Args:
            timeout_ms: The longest wait (ms); None: no bound.

        Raises:
            IllegalStateError: No ``transactional.id``, or called twice.
            KafkaTimeoutError: Not done in time (the call may be repeated).
            ProducerFencedError: A newer producer has the id (fatal).
        """
        self._transactional_call(self._core.init_transactions, timeout_ms)

    def begin_transaction(self) -> None:
        """Start a transaction.

        Raises:
            IllegalStateError: Not initialised, or a transaction is open.
            KafkaError: The producer is in an error state.
        """
        self._loop.call_sync(self._core.begin_transaction)

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_metadata: Any, timeout_ms: int | None = None) -> None:
        """Commit a consumer group's offsets with the transaction (KIP-447):
        ``group_metadata`` is `kclient.Consumer.group_metadata()`.

        Args:
            offsets: ``{TopicPartition or (topic, partition): next offset}``.
            group_metadata: The consumer's group metadata.
            timeout_ms: The longest wait (ms); None: no bound.

        Raises:
            IllegalStateError: No transaction in progress.
            KafkaTimeoutError: Not done in time.
            KafkaError: The coordinator refused (see `commit_transaction`).
        """
        self._transactional_call(self._core.send_offsets_to_transaction, offsets, group_metadata, timeout_ms)

    def commit_transaction(self, timeout_ms: int | None = None) -> None:
        """Send everything queued, wait for its acknowledgement, then commit
        the transaction (EndTxn).

        Args:
            timeout_ms: The longest wait (ms), for the flush and for the
                commit each; None: no bound.

        Raises:
            IllegalStateError: No transaction in progress.
            KafkaTimeoutError: Not done in time (the call may be repeated).
            KafkaError: An abortable error (call `abort_transaction`) or a
                fatal one (`ProducerFencedError`: close the producer).
        """
        self.flush(timeout_ms)
        self._transactional_call(self._core.commit_transaction, timeout_ms)

    def abort_transaction(self, timeout_ms: int | None = None) -> None:
        """Abort the transaction (also after an abortable error): what was
        queued is still sent, inside the aborted transaction, and is never
        seen by read_committed consumers.

        Args:
            timeout_ms: The longest wait (ms), for the flush and for the
                abort each; None: no bound.

        Raises:
            IllegalStateError: No transaction in progress.
            KafkaTimeoutError: Not done in time.
            KafkaError: A fatal error (`ProducerFencedError`).
        """
        self.flush(timeout_ms)
        self._transactional_call(self._core.abort_transaction, timeout_ms)

    def _transactional_call(self, call: Callable[..., Any], *args: Any) -> None:
        """Run a transactional call on the loop. An error it raises that
        ends the transaction (fatal or abortable, not a timeout or a call
        in the wrong state) reports its records' failure to the
        application: `close` then logs, rather than raises, the records
        that transaction could not deliver (Kafka's ``close()`` after a
        ``ProducerFencedException`` does not throw either)."""
        try:
            self._loop.call(call, *args)
        except (IllegalStateError, KafkaTimeoutError):
            raise
        except KafkaError:
            self._closer.transaction_failure_reported = True
            raise

    def close(self, timeout_ms: int | None = None) -> None:
        """Send everything queued (async), stop the send thread, call the
        CallbackHandler's ``close``, close the connections and stop the trio
        loop thread. Idempotent. Sends from other threads that are blocked
        on a full queue get `ProducerClosedError`.

        As Kafka's ``KafkaProducer.close(timeout)``: with ``timeout_ms`` the
        async flush waits at most that long; what is then still queued or
        unacknowledged is abandoned, its count logged at ERROR and counted
        in the raised error's ``lost_messages``. Without it, close waits
        until every record is acknowledged or failed (each bounded by the
        retries). Ctrl-C (KeyboardInterrupt) while close waits abandons the
        rest the same way: the count is logged at ERROR and added as a note
        to the KeyboardInterrupt, which propagates.

        Args:
            timeout_ms: The longest the async flush may take (ms); None
                waits as long as it takes. (At interpreter exit, for a
                producer that was never closed, ``close.timeout.ms`` is
                used.)

        Each failure is reported once: a record whose error went into its
        `RecordFuture` (``send_with_result``) or its delivery callback
        (``send(..., callback=...)``) is not raised again here; a failure
        nobody was told about (a plain ``send``, a CallbackHandler hook
        that raised) is.

        Raises:
            FailedToSendMessageError: an async send of records without a
                future or callback failed since the producer started, or
                records were abandoned at the timeout (the first such send
                error chained; ``lost_messages`` counts the messages lost
                and not reported otherwise).
            IllegalStateError: called from the producer's send thread (a
                CallbackHandler hook).
        """
        if self._thread is not None and self._thread.in_loop_thread:
            raise IllegalStateError("close() cannot be called from the producer's send thread (a CallbackHandler hook)")
        self._closer.close(None if timeout_ms is None else max(0, timeout_ms) / 1000)

    def __repr__(self) -> str:
        return f"<Producer {self.config.producer_type} {self._state()} {self.config.metadata_broker_list}>"


class _ProducerCloser(ExitCloser):
    """Closes a Producer's send thread, queue, loop and connections; holds no
    reference to the Producer (see `kclient.sync.ExitCloser`)."""

    def __init__(
        self,
        description: str,
        close_timeout_ms: int,
        loop: LoopThread,
        core: TrioProducer,
        callbacks: Any,
        queue: MessageQueue | None,
        thread: ProducerSendThread | None,
        reports: set[DeliveryReport] | None = None,
    ) -> None:
        super().__init__(description, close_timeout_ms / 1000)
        self._reports = reports if reports is not None else set()
        self.close_timeout_ms = close_timeout_ms
        self._loop = loop
        self._core = core
        self._callbacks = callbacks
        self._queue = queue
        self._thread = thread
        self._failed_before_abort = 0
        self._reported_before_abort = 0
        #: A transactional call raised an error ending a transaction: the
        #: records that failed were reported to the application by it.
        self.transaction_failure_reported = False
        # At an abort: failed records possibly written before it, and the
        # records in flight (taken for sending, not acknowledged: possibly
        # written too).
        self._possibly_before_abort = 0
        self._in_flight_abandoned = 0

    def after_fork_in_child(self) -> None:
        """In a forked child: close this copy of the queue, so that an
        async ``send`` reaches the checks that raise `ClientForkedError`
        instead of queuing records no thread would send."""
        if self._queue is not None:
            self._queue.close_in_forked_child()

    def close(self, timeout: float | None = None) -> None:
        """The Producer's ``close``: flush (at most ``timeout`` seconds),
        then close; raises as `Producer.close`."""
        if not self._begin():
            return
        try:
            self._shutdown(timeout, f"not delivered within close(timeout_ms={None if timeout is None else round(timeout * 1000)})", at_exit=False)
        finally:
            untrack(self)

    def _close(self) -> None:
        # The base class's close() without a timeout; `close` above
        # replaces it to take one.
        self._shutdown(None, "not delivered by close()", at_exit=False)

    def close_at_exit(self) -> None:
        """Flush for at most ``close.timeout.ms``, close, and log (never
        raise) what could not be delivered. KeyboardInterrupt propagates
        after the abandoned records were counted and logged."""
        if not self._begin():
            return
        try:
            self._shutdown(self.exit_timeout, f"not delivered within close.timeout.ms={self.close_timeout_ms} at exit", at_exit=True)
        finally:
            untrack(self)

    def _shutdown(self, timeout: float | None, why: str, *, at_exit: bool) -> None:
        try:
            self._stop(timeout, why, at_exit=at_exit)
        finally:
            self._fail_leftovers(why)

    def _fail_leftovers(self, why: str) -> None:
        """Fail the delivery results still pending (records abandoned at an
        aborted close, or whose batch never finished): nothing stays
        pending after close."""
        left = list(self._reports)
        if not left:
            return
        n = sum(r.pending for r in left)
        error = FailedToSendMessageError(f"{self.description}: record {why} (the producer was closed)", lost_messages=n)
        for report in left:
            report.settle(error)
        self._reports.clear()

    def _stop(self, timeout: float | None, why: str, *, at_exit: bool) -> None:
        abandoned = 0
        if self._queue is not None and self._thread is not None:
            self._queue.close()
            try:
                finished = self._thread.join(timeout)
            except KeyboardInterrupt as exc:
                n = self._abort("interrupted by KeyboardInterrupt")
                if sys.version_info >= (3, 11):  # exception notes (PEP 678)
                    exc.add_note(f"kclient: {self.description}: {n} record(s) abandoned, not delivered")
                raise
            if not finished:
                abandoned = self._abort(why)
        if not abandoned:
            try:
                self._callbacks.close()
            finally:
                try:
                    if timeout is None and not at_exit:
                        self._loop.call(self._core.aclose)
                    elif not self._loop.run_bounded(self._core.aclose, timeout=max(1.0, timeout or 0.0)):
                        log.error("%s: closing the connections did not finish in time", self.description)
                finally:
                    self._loop.close(timeout=30.0 if timeout is None and not at_exit else 5.0)
        self._report(abandoned, at_exit)

    def _abort(self, why: str) -> int:
        """Drop what is queued, close the connections (failing what is in
        flight) and stop the loop, each briefly; log at ERROR and return
        how many records were not delivered."""
        dropped = in_flight = 0
        if self._thread is not None:
            before = self._thread.statistics()
            self._failed_before_abort = before.failed_messages
            self._reported_before_abort = before.reported_messages
            self._possibly_before_abort = before.possibly_written
        if self._queue is not None:
            dropped = self._queue.abandon()
            in_flight = max(0, self._queue.statistics().unfinished_messages)
        try:
            self._callbacks.close()
        except Exception:
            log.exception("CallbackHandler.close failed")
        try:
            self._loop.run_bounded(self._core.aclose, timeout=1.0)
        finally:
            try:
                self._loop.close(timeout=1.0)
            except Exception as exc:
                log.debug("%s: loop ended with %r", self.description, exc)
        # Of the records taken off the queue, those still in the
        # per-partition batches were never written (read once the loop
        # stopped): not sent. Only the rest may be in the log.
        held = min(in_flight, self._thread.unsent_messages) if self._thread is not None else 0
        total = dropped + in_flight
        self._in_flight_abandoned = in_flight - held
        log.error(
            "%s: %d record(s) abandoned, not delivered (%d still queued, %d batched and never sent, %d sent and not acknowledged): %s",
            self.description, total, dropped, held, in_flight - held, why,
        )
        return total

    def _report(self, abandoned: int, at_exit: bool) -> None:
        if self._thread is None:
            return
        stats = self._thread.statistics()
        # Batches in flight at the abort are in ``abandoned``; do not count
        # their failure (closed connection) a second time.
        failed = self._failed_before_abort if abandoned else stats.failed_messages
        # Failures already delivered into a future or a delivery callback
        # were reported once; close() raises the others (issue 27).
        reported = min(failed, self._reported_before_abort if abandoned else stats.reported_messages)
        failed -= reported
        if failed and self.transaction_failure_reported:
            log.warning(
                "%s: %d record(s) of failed transactions were not delivered (reported by the transactional call that raised): %s",
                self.description, failed, stats.first_unreported_error,
            )
            if not abandoned:
                return
            failed = 0
        if not (failed or stats.unreported_batches or abandoned):
            return
        lost = failed + abandoned
        possibly = self._possibly_before_abort + self._in_flight_abandoned if abandoned else stats.possibly_written
        possibly = min(possibly, lost)
        also = f"; {reported} more failed into their futures or callbacks" if reported else ""
        message = (
            f"{failed} message(s) in {stats.unreported_batches} batch(es) could not be sent by the async producer "
            f"({stats.sent_messages} were sent{also}); first error: {stats.first_unreported_error}"
        )
        if abandoned:
            message = f"{lost} message(s) were not delivered: {abandoned} abandoned at close, " + message
        # possibly written: may be in the log (see FailedToSendMessageError)
        outcome = f"{possibly} possibly written, {lost - possibly} not sent" if possibly else "none written"
        message = f"{message} [{outcome}]"
        if at_exit:
            log.error("%s at exit: %s", self.description, message)
            return
        raise FailedToSendMessageError(message, lost_messages=lost, possibly_written=possibly) from stats.first_unreported_error


def _send_of(ref: Callable[[], Producer | None]) -> Callable[..., None]:
    """``Producer.send`` of the producer behind the weak reference ``ref``
    (the compiled fast path's fallback)."""

    def send(data_or_list: Any, *, callback: Any = None) -> None:
        producer = ref()
        if producer is None:
            raise ProducerClosedError("send() called after the producer was garbage-collected")
        Producer.send(producer, data_or_list, callback=callback)

    return send


def _checked_send(check: Callable[[], None], send: Callable[..., Any]) -> Callable[..., Any]:
    """``send`` preceded by ``check`` (the transaction manager's
    `check_send_allowed`)."""

    @functools.wraps(send)
    def checked(*args: Any, **kwargs: Any) -> Any:
        check()
        return send(*args, **kwargs)

    return checked


def _retrack(given: TrackedData, data: Any) -> Any:
    """After a ``before_enqueue`` hook replaced a tracked ProducerData: keep
    its DeliveryReport on the replacement when it holds as many records;
    else resolve the report now (partition and offset unknown) and queue
    the replacement untracked."""
    report = given.report
    if isinstance(data, ProducerData) and len(data.messages) == len(given.messages):
        plain = data.untracked() if isinstance(data, TrackedData) else tuple(data)[:6]
        return new_tuple(TrackedData, (*plain, report))
    report.settle(None)
    return data
