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
  (``queue.buffering.max.messages`` messages) and returns without touching
  the trio loop. The `ProducerSendThread`
  takes a batch when ``batch.num.messages`` messages are waiting or
  ``queue.buffering.max.ms`` passed since the oldest waiting one was queued,
  and sends it from the same thread (it runs the producer's trio loop).
  When the queue is full,
  ``queue.enqueue.timeout.ms`` says: -1 block until there is room, 0 raise
  `QueueFullError` at once, >0 wait that many ms and
  then raise it. `Producer.close` sends everything queued first.

The Producer owns one thread running a trio loop with a
`TrioProducer` on it: in sync mode a
`kclient.sync.LoopThread` (``...-trio``), in async mode the
ProducerSendThread (``...-send``, a LoopThread that also batches); it is
non-daemon and stopped by ``close()``. Always close the Producer (or use it as
a context manager): there
is no ``__del__``/``atexit`` cleanup.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any, Iterable, Mapping

import attrs

from kclient.client.producer.callbacks import overrides
from kclient.client.producer.data import ProducerData, _new_tuple
from kclient.client.producer.core import TrioProducer
from kclient.client.producer.queue import MessageQueue
from kclient.client.producer.send_thread import ProducerSendThread
from kclient.clock import now_ms
from kclient.config import ProducerConfig
from kclient.errors import FailedToSendMessageError, IllegalStateError, KafkaTimeoutError, LoopClosedError, ProducerClosedError, QueueFullError
from kclient.sync import LoopThread

__all__ = ["Producer", "ProducerStatistics"]

log = logging.getLogger(__name__)

_ids = itertools.count(1)


@attrs.frozen
class ProducerStatistics:
    """A snapshot of a Producer (see `Producer.statistics`).

    ``queued_messages``: waiting in the async queue now;
    ``sent_messages`` / ``sent_batches``: acknowledged (async: batches the
    send thread sent; sync: ``send`` calls); ``failed_messages`` /
    ``failed_batches``: given up on; ``first_error``: the first failure.
    """

    producer_type: str
    queued_messages: int
    sent_messages: int
    sent_batches: int
    failed_messages: int
    failed_batches: int
    first_error: BaseException | None


class Producer:
    """The blocking producer: ``Producer(config).send(ProducerData(...))``.

    Use as a context manager or call `close`. Thread-safe: several
    threads may call `send` at once.

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

    def __init__(self, config: "ProducerConfig | Mapping[str, Any] | str", *, event_handler: Any = None, callback_handler: Any = None) -> None:
        self._core = TrioProducer(config, event_handler=event_handler, callback_handler=callback_handler)
        self.config = cfg = self._core.config
        self._callbacks = self._core.callback_handler
        self._before_enqueue = overrides(self._callbacks, "before_enqueue")
        self._after_enqueue = overrides(self._callbacks, "after_enqueue")
        self._before_send = overrides(self._callbacks, "before_sending_data")
        self._on_error = overrides(self._callbacks, "on_send_error")
        self._async = cfg.producer_type == "async"
        self._close_lock = threading.Lock()
        self._closed = False
        self._stats_lock = threading.Lock()
        self._sync_sent = [0, 0]  # messages, calls
        self._sync_failed = [0, 0]
        self._sync_first_error: BaseException | None = None
        number = next(_ids)
        label = cfg.client_id or str(number)
        self._queue: MessageQueue | None = None
        self._thread: ProducerSendThread | None = None
        self._plain_enqueue = self._async and not (self._before_enqueue or self._after_enqueue)
        self._valid_topics = self._core.valid_topics  # filled by prepare()
        self._enqueue_timeout_ms = cfg.queue_enqueue_timeout_ms
        if self._async:
            # The send thread runs the trio loop: batches go from the queue
            # to the sockets on one thread.
            self._queue = MessageQueue(cfg.queue_buffering_max_messages)
            self._thread = ProducerSendThread(
                self._queue,
                callback_handler=self._callbacks,
                batch_num_messages=cfg.batch_num_messages,
                queue_time_ms=cfg.queue_buffering_max_ms,
                name=f"kclient-producer-{label}-send",
            )
            self._loop: LoopThread = self._thread
        else:
            self._loop = LoopThread(name=f"kclient-producer-{label}-trio")
        with self._loop.closing_on_error():
            self._loop.call(self._core.open, self._loop.nursery)
            if self._thread is not None:
                self._thread.start_sending(self._core)

    @property
    def producer_type(self) -> str:
        """``"sync"`` or ``"async"`` (``producer.type``)."""
        return self.config.producer_type

    @property
    def closed(self) -> bool:
        """True once `close` was called."""
        return self._closed

    @property
    def trio_producer(self) -> TrioProducer:
        """The TrioProducer running on this producer's loop thread."""
        return self._core

    def send(self, data_or_list: "ProducerData | Iterable[ProducerData]") -> None:
        """Send one `ProducerData` or a list of them.

        sync mode: returns once acknowledged. async mode: returns once
        queued; send errors surface later through the log, the
        CallbackHandler's ``on_send_error``, `statistics` and `close`.

        Args:
            data_or_list: a ProducerData or an iterable of them.

        Raises:
            FailedToSendMessageError: sync mode: a non-retriable error, or
                retries ran out (cause chained, topic-partitions named,
                ``lost_messages`` set).
            QueueFullError: async mode: the queue stayed full for
                ``queue.enqueue.timeout.ms`` (``not_enqueued`` lists the
                ProducerData that were not queued; the ones before them
                were).
            InvalidTopicError: an illegal topic name (nothing is sent or
                queued).
            ProducerClosedError: the producer was closed.
        """
        if self._closed:
            raise ProducerClosedError("send() called after the producer was closed")
        if type(data_or_list) is ProducerData and self._plain_enqueue:
            # The common async case, one ProducerData and no enqueue hooks:
            # validate the topic once, stamp, append (about 1 us).
            d = data_or_list
            if d[0] not in self._valid_topics:
                self._core.prepare(d)
            if d[3] is None:
                d = _new_tuple(ProducerData, (d[0], d[1], d[2], now_ms(), d[4], d[5]))
            if not self._queue.put(d, len(d[2]), self._enqueue_timeout_ms):  # type: ignore[union-attr]
                raise self._queue_full([d], 1, self._enqueue_timeout_ms)
            return
        events = self._core.prepare(data_or_list)
        if self._async:
            self._enqueue(events)
            return
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

    def _enqueue(self, events: list) -> None:
        queue = self._queue
        assert queue is not None
        timeout = self.config.queue_enqueue_timeout_ms
        now = now_ms()
        if not (self._before_enqueue or self._after_enqueue):
            stamped = [d if d.timestamp_ms is not None else d._stamped(now) for d in events]
            done = queue.put_many(stamped, timeout)
            if done < len(stamped):
                raise self._queue_full(stamped[done:], len(stamped), timeout)
            return
        callbacks = self._callbacks
        for i, d in enumerate(events):
            if self._before_enqueue:
                d = callbacks.before_enqueue(d)
                if d is None:
                    continue
            if d.timestamp_ms is None:
                d = d._stamped(now)
            added = queue.put(d, len(d.messages), timeout)
            if self._after_enqueue:
                callbacks.after_enqueue(d, added)
            if not added:
                raise self._queue_full([d, *events[i + 1 :]], len(events), timeout)

    def _queue_full(self, rest: list, total: int, timeout: int) -> QueueFullError:
        n_messages = sum(len(d.messages) for d in rest)
        topics = ", ".join(sorted({d.topic for d in rest})[:5])
        waited = "did not wait (queue.enqueue.timeout.ms=0)" if timeout == 0 else f"waited queue.enqueue.timeout.ms={timeout} ms"
        return QueueFullError(
            f"the async producer's queue is full (queue.buffering.max.messages={self.config.queue_buffering_max_messages}); "
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
        if self._queue is None:
            return
        if self._thread is not None and self._thread.in_loop_thread:
            raise IllegalStateError("flush() cannot be called from the producer's send thread (a CallbackHandler hook)")
        if not self._queue.flush(None if timeout_ms is None else timeout_ms / 1000):
            raise KafkaTimeoutError(f"flush() did not finish within {timeout_ms} ms")

    def statistics(self) -> ProducerStatistics:
        """Counters of what was sent and lost so far (see
        `ProducerStatistics`)."""
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
            )
        with self._stats_lock:
            return ProducerStatistics(
                "sync", 0, self._sync_sent[0], self._sync_sent[1], self._sync_failed[0], self._sync_failed[1], self._sync_first_error
            )

    def close(self) -> None:
        """Send everything queued (async), stop the send thread, call the
        CallbackHandler's ``close``, close the connections and stop the trio
        loop thread. Idempotent. Sends from other threads that are blocked
        on a full queue get `ProducerClosedError`.

        Raises:
            FailedToSendMessageError: an async send failed since the
                producer started (the first send error chained;
                ``lost_messages`` counts the messages lost).
            IllegalStateError: called from the producer's send thread (a
                CallbackHandler hook).
        """
        if self._thread is not None and self._thread.in_loop_thread:
            raise IllegalStateError("close() cannot be called from the producer's send thread (a CallbackHandler hook)")
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            if self._queue is not None and self._thread is not None:
                self._queue.close()
                self._thread.join()
            try:
                self._callbacks.close()
            finally:
                try:
                    self._loop.call(self._core.aclose)
                finally:
                    self._loop.close()
        finally:
            log.debug("producer closed: %s", self.statistics())
        if self._thread is not None:
            stats = self._thread.statistics()
            if stats.failed_messages or stats.failed_batches:
                raise FailedToSendMessageError(
                    f"{stats.failed_messages} message(s) in {stats.failed_batches} batch(es) could not be sent by the "
                    f"async producer ({stats.sent_messages} were sent); first error: {stats.first_error}",
                    lost_messages=stats.failed_messages,
                ) from stats.first_error

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Producer {self.config.producer_type} {state} {self.config.metadata_broker_list}>"
