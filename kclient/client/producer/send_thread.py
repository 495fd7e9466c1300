"""The async producer's bounded queue and its ProducerSendThread.

Source: the Kafka 0.8 documentation, section 5.1 "API Design", "Producer
APIs" (https://kafka.apache.org/08/documentation.html#apidesign): in async mode
(``producer.type=async``) the producer "batches together multiple producer
requests ... before serializing and dispatching them"; batching is
controlled by ``queue.time`` / ``batch.size`` (0.8 names
``queue.buffering.max.ms`` / ``batch.num.messages``), and "a background
thread (kafka.producer.async.ProducerSendThread) dequeues batches of data and
lets the kafka.producer.EventHandler serialize and send" them.

`MessageQueue` is bounded by a number of *messages*
(``queue.buffering.max.messages``; a ProducerData counts as many messages
as it holds). Putting never waits for the send thread: ``Producer.send`` in
async mode takes one lock and appends, and wakes the send thread only when it
is idle and a batch may be due.

`ProducerSendThread` is a real, named, non-daemon thread, started by
the Producer and joined by its ``close()``. It runs the producer's trio loop
and, on it, the batching task: a batch is taken when ``batch.num.messages``
messages are waiting or when ``queue.buffering.max.ms`` has passed since the
oldest waiting item was enqueued, the CallbackHandler hooks run, and the
EventHandler serializes and sends it on the same thread (no hand-off per
batch). Failures are never silent: each is logged at ERROR with the topics,
partitions and message count, counted, and passed to
``CallbackHandler.on_send_error``; the producer's ``close()`` raises if any
messages were lost.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

import attrs
import trio

from kclient.client.producer.callbacks import CallbackHandler, overrides
from kclient.errors import ProducerClosedError, QueueFullError
from kclient.sync import LoopThread

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.producer.producer import ProducerData
    from kclient.client.producer.core import TrioProducer

log = logging.getLogger(__name__)

_monotonic = time.monotonic


@attrs.frozen
class QueueStatistics:
    """A snapshot of a `MessageQueue`: ``queued_messages`` /
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
        # Parallel deques (not one tuple per entry): a queued record then
        # costs the garbage collector one tracked object, its ProducerData.
        self._items: collections.deque = collections.deque()  # the data
        self._sizes: collections.deque = collections.deque()  # its message counts
        self._times: collections.deque = collections.deque()  # when enqueued (monotonic s)
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
        # A consumer on an event loop (poll_batch) registers a thread-safe
        # callable instead of waiting on _not_empty; it is called once.
        self._waker: Callable[[], None] | None = None
        #: threading.get_ident() of the consumer thread, if known: a put from
        #: it must not wait for room (nothing else would make any).
        self.consumer_ident: int | None = None

    # -- producer side ----------------------------------------------------------

    def _wait_for_room(self, n: int, timeout_ms: int) -> bool:
        # Called with the lock held.
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        if self._count + n <= self.max_messages or not self._items:
            return True
        if timeout_ms == 0:
            return False
        if threading.get_ident() == self.consumer_ident:
            # Only the consumer makes room: waiting here would never end.
            raise QueueFullError(
                "send() from the producer's send thread (a CallbackHandler hook) found the queue full; "
                "waiting would deadlock: only that thread empties the queue"
            )
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
        self._items.append(data)
        self._sizes.append(n)
        self._times.append(now)
        self._count += n
        self._unfinished += n
        if self._consumer_waiting and (len(self._items) == 1 or self._count >= self._wake_at):
            self._wake_consumer()

    def put(self, data: Any, n: int, timeout_ms: int) -> bool:
        """Append ``data`` holding ``n`` messages. ``timeout_ms``: -1 waits
        until there is room, 0 never waits, >0 waits up to that many ms.
        Returns False when there was no room in time (nothing enqueued).
        Raises `ProducerClosedError` once closed."""
        with self._lock:
            # The async producer's per-send path: kept inline and short.
            if self._count + n > self.max_messages and self._items or self._closed:
                if not self._wait_for_room(n, timeout_ms):
                    return False
            items = self._items
            items.append(data)
            self._sizes.append(n)
            self._times.append(_monotonic())
            self._count += n
            self._unfinished += n
            if self._consumer_waiting and (len(items) == 1 or self._count >= self._wake_at):
                self._wake_consumer()
            return True

    def put_many(self, items: Sequence[Any], timeout_ms: int) -> int:
        """Append ProducerData ``items`` in order under one lock, each
        waiting per ``timeout_ms`` as in `put`; returns how many were
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
                    timeout = self._times[0] + max_wait_ms / 1000 - time.monotonic()
                    if timeout <= 0:
                        break
                self._consumer_waiting = True
                self._wake_at = batch_messages
                try:
                    self._not_empty.wait(timeout)
                finally:
                    self._consumer_waiting = False
            return self._take(batch_messages)[0]

    def poll_batch(self, batch_messages: int, max_wait_ms: int, waker: Callable[[], None]) -> "tuple[str, Any]":
        """`take_batch` without blocking, for a consumer running on an
        event loop. Returns ``("batch", (items, n_messages))`` when a batch is
        due (same rules as `take_batch`), ``("closed", None)`` once the queue is
        closed and empty, else ``("wait", seconds)``: look again after
        ``seconds`` (None: no deadline) or as soon as ``waker()`` is called.
        ``waker`` is called at most once, from whichever thread enqueues
        enough messages, flushes or closes, with the queue's lock held, so it
        must only schedule the wake-up (e.g. ``TrioToken.run_sync_soon``)."""
        with self._lock:
            items = self._items
            if items and (self._count >= batch_messages or self._closed or self._flushing):
                return "batch", self._take(batch_messages)
            if not items:
                if self._closed:
                    return "closed", None
                timeout = None
            else:
                timeout = self._times[0] + max_wait_ms / 1000 - time.monotonic()
                if timeout <= 0:
                    return "batch", self._take(batch_messages)
            self._consumer_waiting = True
            self._wake_at = batch_messages
            self._waker = waker
            return "wait", timeout

    def _wake_consumer(self) -> None:
        # Called with the lock held when the waiting consumer should look again.
        waker = self._waker
        if waker is None:
            self._not_empty.notify()
            return
        self._waker = None
        self._consumer_waiting = False
        waker()

    def _take(self, batch_messages: int) -> tuple[list, int]:
        # Called with the lock held and at least one item queued.
        items = self._items
        sizes = self._sizes
        batch = []
        append = batch.append
        pop_item = items.popleft
        pop_size = sizes.popleft
        pop_time = self._times.popleft
        taken = 0
        while items and (taken == 0 or taken + sizes[0] <= batch_messages):
            append(pop_item())
            taken += pop_size()
            pop_time()
        self._count -= taken
        self._not_full.notify_all()
        return batch, taken

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
            if self._consumer_waiting:
                self._wake_consumer()
            try:
                return self._all_done.wait_for(lambda: self._unfinished <= 0, timeout)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """Refuse further puts (waiting putters get ProducerClosedError) and
        let the consumer drain what is queued, then get None."""
        with self._lock:
            self._closed = True
            if self._consumer_waiting:
                self._wake_consumer()
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


def _describe(batch: Sequence[Any], exc: BaseException) -> str:
    # ``batch``: the ProducerData, or just their topic names.
    failed = getattr(exc, "failed_partitions", None)
    if failed:
        return ", ".join(f"{t}-{p}" if p >= 0 else t for t, p in list(failed)[:10])
    topics = sorted({d if isinstance(d, str) else getattr(d, "topic", "?") for d in batch})
    return ", ".join(topics[:10])


class ProducerSendThread(LoopThread):
    """The async producer's send thread (Kafka 0.8 documentation, section
    5.1: "a background thread
    (kafka.producer.async.ProducerSendThread) dequeues batches of data and
    lets the kafka.producer.EventHandler serialize and send" them).

    A named, non-daemon thread running the producer's trio loop (it is a
    `LoopThread`): the connections, the EventHandler
    and the batching task all live there, so a batch goes from the queue to
    the socket without another thread hand-off. `start_sending` starts
    the batching task: it takes a batch when ``batch_num_messages`` messages
    are waiting or ``queue_time_ms`` (ms) passed since the oldest waiting item
    was enqueued (or on flush/close), runs the CallbackHandler's
    ``after_dequeuing_existing_data`` and ``before_sending_data`` hooks (on
    this thread: keep them short, they hold up the producer's I/O as they did
    in Kafka 0.8), and hands the batch to ``TrioProducer.submit_batch``, which
    keeps up to ``max.in.flight.requests.per.connection`` batches in flight.
    Putting into the queue never waits for this thread; the queue wakes it
    (``TrioToken.run_sync_soon``) only when it is idle and a batch may be due.

    Failures are never silent: each is logged at ERROR with the topics,
    partitions and message count, counted (`statistics`), and passed to
    ``CallbackHandler.on_send_error``; the producer's ``close()`` raises if
    any messages were lost. Once the queue is closed and drained the task
    sends ``callback_handler.last_batch_before_close()``, waits for every
    batch in flight, and ends (`join` waits for that).
    """

    def __init__(
        self,
        queue: MessageQueue,
        *,
        callback_handler: CallbackHandler | None = None,
        batch_num_messages: int = 200,
        queue_time_ms: int = 5000,
        name: str = "kclient-producer-send",
    ) -> None:
        super().__init__(name=name)
        self.queue = queue
        self._callbacks = callback_handler if callback_handler is not None else CallbackHandler()
        self.batch_num_messages = max(1, batch_num_messages)
        self.queue_time_ms = max(0, queue_time_ms)
        self._after_dequeue = overrides(self._callbacks, "after_dequeuing_existing_data")
        self._before_send = overrides(self._callbacks, "before_sending_data")
        self._on_send_error = overrides(self._callbacks, "on_send_error")
        self._finished = threading.Event()
        self._outstanding = 0
        self._idle: trio.Event | None = None
        self._sent_messages = 0
        self._sent_batches = 0
        self._failed_messages = 0
        self._failed_batches = 0
        self._first_error: BaseException | None = None

    def start_sending(self, producer: "TrioProducer") -> None:
        """Start the batching task on this thread's loop, sending through
        ``producer`` (already opened on this loop). Call once."""
        self.call_sync(self.nursery.start_soon, self._send_loop, producer)
        self.queue.consumer_ident = self.ident

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the batching task ended (the queue was closed, drained
        and every batch acknowledged or failed); False on timeout (s)."""
        return self._finished.wait(timeout)

    async def _send_loop(self, producer: "TrioProducer") -> None:
        queue = self.queue
        token = trio.lowlevel.current_trio_token()
        batch_messages = self.batch_num_messages
        linger_ms = self.queue_time_ms
        try:
            while True:
                wake = trio.Event()
                kind, value = queue.poll_batch(batch_messages, linger_ms, functools.partial(_wake_soon, token, wake.set))
                if kind == "batch":
                    await self._process(producer, *value)
                elif kind == "closed":
                    break
                elif value is None:
                    await wake.wait()
                else:
                    with trio.move_on_after(value):
                        await wake.wait()
            try:
                last = self._callbacks.last_batch_before_close() if overrides(self._callbacks, "last_batch_before_close") else None
            except Exception as exc:
                log.exception("CallbackHandler.last_batch_before_close failed")
                self._record_failure([], exc, 0)
                last = None
            if last:
                await self._process(producer, list(last), 0, dequeued=False)
            if self._outstanding:
                self._idle = trio.Event()
                await self._idle.wait()
        finally:
            self._finished.set()

    async def _process(self, producer: "TrioProducer", items: list, taken: int, dequeued: bool = True) -> None:
        """Run the hooks on ``items`` (holding ``taken`` messages taken off
        the queue) and submit them; the queue's ``task_done(taken)`` follows
        once the batch is acknowledged or failed."""
        batch = items
        try:
            if dequeued and self._after_dequeue:
                hook = self._callbacks.after_dequeuing_existing_data
                batch = [kept for d in items for kept in (hook(d) or ())]
            if self._before_send:
                batch = list(self._callbacks.before_sending_data(batch) or ())
        except Exception as exc:
            self._record_failure(batch, exc, sum(len(d.messages) for d in batch))
            if taken:
                self.queue.task_done(taken)
            return
        if not batch:
            if taken:
                self.queue.task_done(taken)
            return
        n = taken if dequeued and batch is items else sum(len(d.messages) for d in batch)
        self._outstanding += 1
        # Keep the ProducerData of a batch in flight only for an on_send_error
        # hook; otherwise a failure is described by its topics. (Tens of
        # thousands of ProducerData held until acknowledged made every
        # garbage collection pass walk them: ~30 % of the CPU with 1 MB
        # batches.)
        kept = batch if self._on_send_error else sorted({d.topic for d in batch})

        def done(exc: BaseException | None) -> None:  # on this loop, once
            try:
                if exc is None:
                    self._sent_messages += n
                    self._sent_batches += 1
                else:
                    self._record_failure(kept, exc, n)
            finally:
                if taken:
                    self.queue.task_done(taken)
                self._outstanding -= 1
                if not self._outstanding and self._idle is not None:
                    self._idle.set()

        try:
            await producer.submit_batch(batch, done)
        except Exception as exc:  # closed before it could be written
            done(exc)

    def _record_failure(self, batch: list, exc: BaseException, messages: int) -> None:
        lost = getattr(exc, "lost_messages", None)
        lost = messages if lost is None else lost
        self._failed_messages += lost
        self._failed_batches += 1
        self._sent_messages += max(0, messages - lost)
        if self._first_error is None:
            self._first_error = exc
        log.error("async send of %d message(s) to %s failed: %s", lost, _describe(batch, exc), exc)
        if not self._on_send_error:
            return
        try:
            self._callbacks.on_send_error(batch, exc)
        except Exception:
            log.exception("CallbackHandler.on_send_error raised")

    def statistics(self) -> SendStatistics:
        """A snapshot of the counters (exact once `join` returned)."""
        return SendStatistics(self._sent_messages, self._sent_batches, self._failed_messages, self._failed_batches, self._first_error)


def _wake_soon(token: "trio.lowlevel.TrioToken", wake: Callable[[], None]) -> None:
    # The queue's waker: schedule ``wake`` on the loop from any thread.
    try:
        token.run_sync_soon(wake)
    except trio.RunFinishedError:
        pass
