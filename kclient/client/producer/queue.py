"""The async producer's bounded queue, `MessageQueue`.

`MessageQueue` is bounded by a number of *messages*
(``queue.buffering.max.messages``; a ProducerData counts as many messages
as it holds). Putting never waits for the send thread: ``Producer.send`` in
async mode takes one lock and appends, and wakes the consumer (the
`kclient.client.producer.send_thread.ProducerSendThread`) only when it is
idle and a batch may be due: a batch is due when ``batch.num.messages``
messages are waiting or ``queue.buffering.max.ms`` has passed since the
oldest waiting item was enqueued (Kafka 0.8 documentation, section 5.1
"API Design", https://kafka.apache.org/08/documentation.html#apidesign).
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Sequence

import attrs

from kclient.errors import ProducerClosedError, QueueFullError

__all__ = ["MessageQueue", "QueueStatistics"]

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
        """Append one item.

        Args:
            data: The ProducerData to queue.
            n: How many messages it holds (what counts against
                ``max_messages``).
            timeout_ms: How long to wait for room (ms): -1 until there is
                room, 0 not at all.

        Returns:
            False when there was no room in time (nothing enqueued).

        Raises:
            ProducerClosedError: the queue is closed.
            QueueFullError: the queue is full and the caller is the
                consumer thread (waiting would deadlock).
        """
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
        """Append several items in order under one lock, each waiting for
        room as in `put`.

        Args:
            items: The ProducerData to queue (each counts
                ``len(d.messages)`` messages).
            timeout_ms: How long each may wait for room (ms): -1 until
                there is room, 0 not at all.

        Returns:
            How many were enqueued (fewer than ``len(items)`` when the
            queue stayed full).

        Raises:
            ProducerClosedError: the queue is closed.
            QueueFullError: the queue is full and the caller is the
                consumer thread.
        """
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
        """Block until a batch is due, then take it.

        A batch is due when ``batch_messages`` messages are waiting, when
        ``max_wait_ms`` passed since the oldest waiting item was enqueued,
        or when a flush or close was requested.

        Args:
            batch_messages: The batch size (messages, ``batch.num.messages``).
            max_wait_ms: The longest an item waits for a full batch (ms,
                ``queue.buffering.max.ms``).

        Returns:
            ``(items, n_messages)``: whole items holding up to
            ``batch_messages`` messages (at least one item); None once the
            queue is closed and empty.
        """
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
        event loop.

        Args:
            batch_messages: The batch size (messages).
            max_wait_ms: The longest an item waits for a full batch (ms).
            waker: Called at most once, from whichever thread enqueues
                enough messages, flushes or closes, with the queue's lock
                held, so it must only schedule the wake-up (e.g.
                ``TrioToken.run_sync_soon``).

        Returns:
            ``("batch", (items, n_messages))`` when a batch is due (same
            rules as `take_batch`), ``("closed", None)`` once the queue is
            closed and empty, else ``("wait", seconds)``: look again after
            ``seconds`` (None: no deadline) or as soon as ``waker()`` is
            called.
        """
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
        """Mark taken messages as finished (sent or failed).

        Args:
            n_messages: How many messages of taken batches are finished.
        """
        with self._lock:
            self._unfinished -= n_messages
            if self._unfinished <= 0:
                self._all_done.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Ask the consumer to send what is queued now, regardless of the
        batch thresholds, and wait until every message put so far is
        finished.

        Args:
            timeout: The longest to wait (seconds); None waits forever.

        Returns:
            False on timeout.
        """
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

    def abandon(self) -> int:
        """Close the queue and drop what is still waiting in it (a close
        that ran out of time or was interrupted).

        Returns:
            How many messages were dropped (queued, not yet taken by the
            consumer; batches already taken are not counted).
        """
        with self._lock:
            self._closed = True
            dropped = self._count
            self._items.clear()
            self._sizes.clear()
            self._times.clear()
            self._count = 0
            self._unfinished -= dropped
            if self._consumer_waiting:
                self._wake_consumer()
            self._not_full.notify_all()
            if self._unfinished <= 0:
                self._all_done.notify_all()
            return dropped

    @property
    def closed(self) -> bool:
        return self._closed

    def statistics(self) -> QueueStatistics:
        with self._lock:
            return QueueStatistics(self._count, len(self._items), self.max_messages, self._unfinished)
