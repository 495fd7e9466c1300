"""The async producer's bounded queue and its ProducerSendThread.

Source: seed 000, section 5.1 "producer design": in async mode
(``producer.type=async``) the producer "batches together multiple producer
requests ... before serializing and dispatching them"; batching is
controlled by ``queue.time`` / ``batch.size`` (0.8 names
``queue.buffering.max.ms`` / ``batch.num.messages``), and "a background
thread (kafka.producer.async.ProducerSendThread) dequeues batches of data and
lets the kafka.producer.EventHandler serialize and send" them.

:class:`MessageQueue` is bounded by a number of *messages*
(``queue.buffering.max.messages``; a ProducerData counts as many messages
as it holds). Putting never touches the trio loop: ``Producer.send`` in async
mode takes one lock and appends.

:class:`ProducerSendThread` is a real, named, non-daemon
``threading.Thread``, started by the Producer and joined by its ``close()``.
It takes a batch when ``batch.num.messages`` messages are waiting or when
``queue.buffering.max.ms`` has passed since the oldest waiting item was
enqueued, runs the CallbackHandler hooks, and hands the batch to the
producer's send function (one thread crossing into trio per batch).
Failures are never silent: each is logged at ERROR with the topics,
partitions and message count, counted, and passed to
``CallbackHandler.on_send_error``; the producer's ``close()`` raises if any
messages were lost.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

import attrs

from kclient.client.callback_handler import CallbackHandler, overrides
from kclient.errors import ProducerClosedError

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.producer import ProducerData

log = logging.getLogger(__name__)

_monotonic = time.monotonic


@attrs.frozen
class QueueStatistics:
    """A snapshot of a :class:`MessageQueue`: ``queued_messages`` /
    ``queued_items`` waiting now, ``max_messages`` the bound,
    ``unfinished_messages`` queued or being sent."""

    queued_messages: int
    queued_items: int
    max_messages: int
    unfinished_messages: int


class MessageQueue:
    """A bounded FIFO of ProducerData counted in messages, for one consumer
    thread (the ProducerSendThread) and any number of producer threads.

    An item larger than the whole bound is accepted when the queue is empty
    (it could never fit otherwise). Thread-safe.
    """

    def __init__(self, max_messages: int) -> None:
        if max_messages < 1:
            raise ValueError(f"queue.buffering.max.messages must be >= 1, got {max_messages}")
        self.max_messages = max_messages
        self._items: collections.deque = collections.deque()  # (data, n_messages, monotonic time)
        self._count = 0
        self._unfinished = 0
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._all_done = threading.Condition(self._lock)
        self._closed = False
        self._flushing = 0
        self._consumer_waiting = False
        self._wake_at = 0  # message count at which to wake the consumer

    # -- producer side ----------------------------------------------------------

    def _wait_for_room(self, n: int, timeout_ms: int) -> bool:
        # Called with the lock held.
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        if self._count + n <= self.max_messages or not self._items:
            return True
        if timeout_ms == 0:
            return False
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        while self._count + n > self.max_messages and self._items:
            if deadline is None:
                self._not_full.wait()
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._not_full.wait(remaining)
            if self._closed:
                raise ProducerClosedError("the producer was closed while send() waited for room in the queue")
        return True

    def _append(self, data: Any, n: int, now: float) -> None:
        # Called with the lock held and room checked.
        self._items.append((data, n, now))
        self._count += n
        self._unfinished += n
        if self._consumer_waiting and (len(self._items) == 1 or self._count >= self._wake_at):
            self._not_empty.notify()

    def put(self, data: Any, n: int, timeout_ms: int) -> bool:
        """Append ``data`` holding ``n`` messages. ``timeout_ms``: -1 waits
        until there is room, 0 never waits, >0 waits up to that many ms.
        Returns False when there was no room in time (nothing enqueued).
        Raises :class:`ProducerClosedError` once closed."""
        with self._lock:
            # The async producer's per-send path: kept inline and short.
            if self._count + n > self.max_messages and self._items or self._closed:
                if not self._wait_for_room(n, timeout_ms):
                    return False
            items = self._items
            items.append((data, n, _monotonic()))
            self._count += n
            self._unfinished += n
            if self._consumer_waiting and (len(items) == 1 or self._count >= self._wake_at):
                self._not_empty.notify()
            return True

    def put_many(self, items: Sequence[Any], timeout_ms: int) -> int:
        """Append ProducerData ``items`` in order under one lock, each
        waiting per ``timeout_ms`` as in :meth:`put`; returns how many were
        enqueued (fewer than ``len(items)`` when the queue stayed full)."""
        with self._lock:
            now = time.monotonic()
            for i, data in enumerate(items):
                n = len(data.messages)
                if self._count + n > self.max_messages and self._items:
                    if not self._wait_for_room(n, timeout_ms):
                        return i
                    now = time.monotonic()
                elif self._closed:
                    raise ProducerClosedError("the producer is closed")
                self._append(data, n, now)
            return len(items)

    # -- consumer side ------------------------------------------------------------

    def take_batch(self, batch_messages: int, max_wait_ms: int) -> list | None:
        """Block until ``batch_messages`` messages are waiting, or
        ``max_wait_ms`` ms passed since the oldest waiting item was enqueued,
        or a flush or close was requested; then remove and return whole items
        holding up to ``batch_messages`` messages (at least one item).
        Returns None once the queue is closed and empty."""
        with self._lock:
            while True:
                items = self._items
                if items and (self._count >= batch_messages or self._closed or self._flushing):
                    break
                if not items:
                    if self._closed:
                        return None
                    timeout = None
                else:
                    timeout = items[0][2] + max_wait_ms / 1000 - time.monotonic()
                    if timeout <= 0:
                        break
                self._consumer_waiting = True
                self._wake_at = batch_messages
                try:
                    self._not_empty.wait(timeout)
                finally:
                    self._consumer_waiting = False
            batch = []
            taken = 0
            popleft = items.popleft
            while items and (taken == 0 or taken + items[0][1] <= batch_messages):
                data, n, _ = popleft()
                batch.append(data)
                taken += n
            self._count -= taken
            self._not_full.notify_all()
            return batch

    def task_done(self, n_messages: int) -> None:
        """Mark ``n_messages`` taken messages as finished (sent or failed)."""
        with self._lock:
            self._unfinished -= n_messages
            if self._unfinished <= 0:
                self._all_done.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Ask the consumer to send what is queued now, regardless of the
        batch thresholds, and wait until every message put so far is
        finished. Returns False on timeout (seconds)."""
        with self._lock:
            self._flushing += 1
            self._not_empty.notify()
            try:
                return self._all_done.wait_for(lambda: self._unfinished <= 0, timeout)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """Refuse further puts (waiting putters get ProducerClosedError) and
        let the consumer drain what is queued, then get None."""
        with self._lock:
            self._closed = True
            self._not_empty.notify_all()
            self._not_full.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def statistics(self) -> QueueStatistics:
        with self._lock:
            return QueueStatistics(self._count, len(self._items), self.max_messages, self._unfinished)


@attrs.frozen
class SendStatistics:
    """Counters of a ProducerSendThread: ``sent_messages`` / ``sent_batches``
    acknowledged, ``failed_messages`` / ``failed_batches`` lost, and the
    ``first_error`` (or None)."""

    sent_messages: int
    sent_batches: int
    failed_messages: int
    failed_batches: int
    first_error: BaseException | None


def _describe(batch: Sequence["ProducerData"], exc: BaseException) -> str:
    failed = getattr(exc, "failed_partitions", None)
    if failed:
        return ", ".join(f"{t}-{p}" if p >= 0 else t for t, p in list(failed)[:10])
    topics = sorted({getattr(d, "topic", "?") for d in batch})
    return ", ".join(topics[:10])


class ProducerSendThread(threading.Thread):
    """Drains a :class:`MessageQueue` in batches and sends them.

    ``send_batch(batch)`` is a blocking function that sends a list of
    ProducerData (the Producer passes one that crosses into its trio loop
    once per batch) and raises on failure. ``batch_num_messages``:
    batch.num.messages; ``queue_time_ms``: queue.buffering.max.ms (ms).
    The thread ends when the queue is closed and drained, after sending
    ``callback_handler.last_batch_before_close()``.
    """

    def __init__(
        self,
        queue: MessageQueue,
        send_batch: Callable[[list], None],
        *,
        callback_handler: CallbackHandler | None = None,
        batch_num_messages: int = 200,
        queue_time_ms: int = 5000,
        name: str = "kclient-producer-send",
        submit_batch: "Callable[[list, Callable[[BaseException | None], None]], None] | None" = None,
        max_outstanding: int = 1,
    ) -> None:
        super().__init__(name=name, daemon=False)
        self.queue = queue
        self._send_batch = send_batch
        # Pipelined mode: submit_batch(batch, done) hands the batch over and
        # returns; done(exc_or_None) is called later from another thread. At
        # most max_outstanding batches are handed over and not yet done.
        self._submit = submit_batch
        self._max_outstanding = max(1, max_outstanding)
        self._counters = threading.Lock()
        self._idle = threading.Condition()
        self._outstanding = 0
        self._callbacks = callback_handler if callback_handler is not None else CallbackHandler()
        self.batch_num_messages = max(1, batch_num_messages)
        self.queue_time_ms = max(0, queue_time_ms)
        self._after_dequeue = overrides(self._callbacks, "after_dequeuing_existing_data")
        self._before_send = overrides(self._callbacks, "before_sending_data")
        self._sent_messages = 0
        self._sent_batches = 0
        self._failed_messages = 0
        self._failed_batches = 0
        self._first_error: BaseException | None = None

    def run(self) -> None:
        queue = self.queue
        while True:
            items = queue.take_batch(self.batch_num_messages, self.queue_time_ms)
            if items is None:
                break
            taken = sum(len(d.messages) for d in items)
            deferred = False
            try:
                deferred = self._process(items, taken=taken)
            finally:
                if not deferred:
                    queue.task_done(taken)
        try:
            last = self._callbacks.last_batch_before_close() if overrides(self._callbacks, "last_batch_before_close") else None
        except Exception as exc:
            log.exception("CallbackHandler.last_batch_before_close failed")
            self._record_failure([], exc, 0)
            last = None
        if last:
            self._process(list(last), dequeued=False)
        with self._idle:  # pipelined batches still awaiting their acks
            self._idle.wait_for(lambda: self._outstanding == 0)

    def _process(self, items: list, dequeued: bool = True, taken: int = 0) -> bool:
        """Run the hooks and send ``items``; returns True when the batch was
        submitted for a pipelined send whose completion will call
        ``queue.task_done(taken)`` itself."""
        batch = items
        try:
            if dequeued and self._after_dequeue:
                hook = self._callbacks.after_dequeuing_existing_data
                batch = [kept for d in items for kept in (hook(d) or ())]
            if self._before_send:
                batch = list(self._callbacks.before_sending_data(batch) or ())
            if not batch:
                return False
            if self._submit is not None:
                return self._submit_one(batch, taken if dequeued else 0)
            self._send_batch(batch)
        except Exception as exc:
            self._record_failure(batch, exc, sum(len(d.messages) for d in batch))
            return False
        self._count_sent(sum(len(d.messages) for d in batch))
        return False

    def _submit_one(self, batch: list, taken: int) -> bool:
        n = sum(len(d.messages) for d in batch)
        finished = threading.Event()

        def done(exc: BaseException | None) -> None:
            if finished.is_set():
                return
            finished.set()
            try:
                if exc is None:
                    self._count_sent(n)
                else:
                    self._record_failure(batch, exc, n)
            finally:
                if taken:
                    self.queue.task_done(taken)
                with self._idle:
                    self._outstanding -= 1
                    self._idle.notify_all()

        with self._idle:
            while self._outstanding >= self._max_outstanding:
                self._idle.wait()
            self._outstanding += 1
        try:
            self._submit(batch, done)  # type: ignore[misc]
        except Exception as exc:
            done(exc)
        return True

    def _count_sent(self, messages: int) -> None:
        with self._counters:
            self._sent_messages += messages
            self._sent_batches += 1

    def _record_failure(self, batch: list, exc: BaseException, messages: int) -> None:
        lost = getattr(exc, "lost_messages", None)
        lost = messages if lost is None else lost
        self._failed_messages += lost
        self._failed_batches += 1
        self._sent_messages += max(0, messages - lost)
        if self._first_error is None:
            self._first_error = exc
        log.error("async send of %d message(s) to %s failed: %s", lost, _describe(batch, exc), exc)
        try:
            self._callbacks.on_send_error(batch, exc)
        except Exception:
            log.exception("CallbackHandler.on_send_error raised")

    def statistics(self) -> SendStatistics:
        """A snapshot of the counters (exact once the thread has stopped)."""
        return SendStatistics(self._sent_messages, self._sent_batches, self._failed_messages, self._failed_batches, self._first_error)
