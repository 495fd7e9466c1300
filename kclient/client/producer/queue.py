"""The async producer's bounded queue, `MessageQueue`.

`MessageQueue` is bounded by a number of *messages*
(``queue.buffering.max.messages``; a ProducerData counts as many messages
as it holds). Putting never waits for the send thread: ``Producer.send`` in
async mode appends in one call of the queue's core (compiled: no lock, the
GIL makes it atomic; pure Python: one lock), and wakes the consumer (the
`kclient.client.producer.send_thread.ProducerSendThread`) only when it is
idle and a batch may be due: a batch is due when ``batch.num.messages``
messages are waiting or ``queue.buffering.max.ms`` has passed since the
oldest waiting item was enqueued (Kafka 0.8 documentation, section 5.1
"API Design", https://kafka.apache.org/08/documentation.html#apidesign).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs

from kclient._accel import speedups as _speedups
from kclient.errors import ProducerClosedError, QueueFullError

__all__ = ["Bundle", "MessageQueue", "PyQueueCore", "QueueStatistics"]

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


class Bundle(list[Any]):
    """Several ProducerData queued as ONE item by one call (a batch-level
    send, ``Producer.send(list)``): one queue entry instead of one per
    record; the consumer gets them back one by one, in order."""

    __slots__ = ()


class PyQueueCore:
    """The queue's state and its atomic steps, in pure Python (each method
    under one lock); ``kclient._speedups.QueueCore`` is its compiled twin,
    where the GIL makes each call atomic. `MessageQueue` adds the waiting.

    Items wait in three parallel lists (the data, its message count, its
    enqueue time in `time.monotonic` seconds), so a queued record costs the
    garbage collector one tracked object, its ProducerData.

    Args:
        max_messages: The bound (messages).
        bundle_type: The type of items that hold several items
            (`Bundle`): taken apart when taken.
    """

    def __init__(self, max_messages: int, bundle_type: type[list[Any]] | None = None) -> None:
        self.max_messages = max_messages
        self._bundle_type = bundle_type
        self._bundles = 0  # bundles queued
        self._items: list[Any] = []
        self._sizes: list[int] = []
        self._times: list[float] = []
        self.count = 0  # messages queued
        self.unfinished = 0  # messages queued or taken and not yet done
        self.flushing = 0  # flush() calls waiting
        self.closed = False
        self._consumer_waiting = False
        self._wake_at = 0
        self._waker: Callable[[], None] | None = None
        self._lock = threading.Lock()

    @property
    def queued_items(self) -> int:
        return len(self._items)

    @property
    def oldest(self) -> float | None:
        """When the oldest queued item was enqueued (monotonic s), or None."""
        times = self._times
        return times[0] if times else None

    def put(self, data: Any, n: int) -> Callable[[], None] | None | Literal[False]:
        """Append ``data`` (``n`` messages) if the queue is open and has
        room (an item larger than the bound fits an empty queue).

        Returns:
            False: not queued (full or closed). None: queued. A callable:
            queued, and the waiting consumer must be woken by calling it
            (outside any lock).
        """
        with self._lock:
            items = self._items
            queued = len(items)
            if self.closed or (self.count + n > self.max_messages and queued):
                return False
            items.append(data)
            self._sizes.append(n)
            self._times.append(_monotonic())
            self.count += n
            self.unfinished += n
            if type(data) is self._bundle_type:
                self._bundles += 1
            if self._consumer_waiting and (queued == 0 or self.count >= self._wake_at):
                return self._release_waker()
            return None

    def _release_waker(self) -> Callable[[], None] | None:
        waker = self._waker
        self._waker = None
        self._consumer_waiting = False
        return waker

    def _take(self, batch_messages: int) -> tuple[list[Any], int]:
        items, sizes = self._items, self._sizes
        queued = len(items)
        k = taken = 0
        while k < queued:
            size = sizes[k]
            if taken and taken + size > batch_messages:
                break
            taken += size
            k += 1
        if k == queued:
            batch = items
            self._items, self._sizes, self._times = [], [], []
        else:
            batch = items[:k]
            del items[:k], sizes[:k], self._times[:k]
        self.count -= taken
        if self._bundles:
            flat: list[Any] = []
            for item in batch:
                if type(item) is self._bundle_type:
                    flat.extend(item)
                    self._bundles -= 1
                else:
                    flat.append(item)
            batch = flat
        return batch, taken

    def poll(self, batch_messages: int, max_wait_s: float, waker: Callable[[], None]) -> tuple[str, Any]:
        """The consumer's step: `MessageQueue.poll_batch`'s result; on
        ``"wait"`` the ``waker`` is registered (atomically with the check)."""
        with self._lock:
            self._consumer_waiting = False
            self._waker = None
            queued = len(self._items)
            if queued and (self.count >= batch_messages or self.closed or self.flushing):
                return "batch", self._take(batch_messages)
            if not queued:
                if self.closed:
                    return "closed", None
                timeout = None
            else:
                timeout = self._times[0] + max_wait_s - _monotonic()
                if timeout <= 0:
                    return "batch", self._take(batch_messages)
            self._consumer_waiting = True
            self._wake_at = batch_messages
            self._waker = waker
            return "wait", timeout

    def flush_requested(self, delta: int) -> Callable[[], None] | None:
        """Count a flush starting (+1) or ending (-1); returns the waker to
        call when a start must wake the consumer."""
        with self._lock:
            self.flushing += delta
            if delta > 0 and self._consumer_waiting:
                return self._release_waker()
            return None

    def close(self) -> Callable[[], None] | None:
        """Refuse further puts; returns the waker to call, if any."""
        with self._lock:
            self.closed = True
            return self._release_waker() if self._consumer_waiting else None

    def abandon(self) -> tuple[int, Callable[[], None] | None]:
        """Close and drop what is queued: ``(messages dropped, waker)``."""
        with self._lock:
            dropped = self.count
            self.closed = True
            self._items, self._sizes, self._times = [], [], []
            self._bundles = 0
            self.count = 0
            self.unfinished -= dropped
            return dropped, (self._release_waker() if self._consumer_waiting else None)

    def task_done(self, n: int) -> bool:
        """Mark ``n`` taken messages finished; True once none is left."""
        with self._lock:
            self.unfinished -= n
            return self.unfinished <= 0


#: The core `MessageQueue` uses: compiled when available.
_QueueCore = _speedups.QueueCore if _speedups is not None else PyQueueCore


class MessageQueue:
    """A bounded FIFO of ProducerData counted in messages, for one consumer
    thread (the ProducerSendThread) and any number of producer threads.

    An item larger than the whole bound is accepted when the queue is empty
    (it could never fit otherwise). Thread-safe.

    Args:
        max_messages: The bound (messages, ``queue.buffering.max.messages``).

    Raises:
        ValueError: ``max_messages`` < 1.
    """

    def __init__(self, max_messages: int) -> None:
        if max_messages < 1:
            raise ValueError(f"queue.buffering.max.messages must be >= 1, got {max_messages}")
        self.max_messages = max_messages
        self._core = core = _QueueCore(max_messages, Bundle)
        #: The producer's per-send call: ``fast_put(data, n)`` returns None
        #: when queued, a callable to call when queued and the consumer
        #: must be woken, False when not queued (full or closed: call `put`,
        #: which waits or raises).
        self.fast_put = core.put
        self._lock = threading.Lock()  # for the conditions only
        self._not_full = threading.Condition(self._lock)
        self._all_done = threading.Condition(self._lock)
        self._putters = 0  # put() calls waiting for room
        self._low_water = max_messages // 2  # wake them at or below this many messages
        self._flushers = 0  # flush() calls waiting
        #: threading.get_ident() of the consumer thread, if known: a put from
        #: it must not wait for room (nothing else would make any).
        self.consumer_ident: int | None = None

    # -- producer side ----------------------------------------------------------

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
        waker = self.fast_put(data, n)
        if waker is False:
            return self._put_waiting(data, n, timeout_ms)
        if waker is not None:
            waker()
        return True

    def _put_waiting(self, data: Any, n: int, timeout_ms: int) -> bool:
        core = self._core
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        with self._lock:
            # Counted before trying: a consumer taking after the try sees
            # the count and notifies (under this lock, so after the wait).
            self._putters += 1
            try:
                first = True
                while True:
                    waker = core.put(data, n)
                    if waker is not False:
                        break
                    if core.closed:
                        raise ProducerClosedError(
                            "the producer is closed" if first else "the producer was closed while send() waited for room in the queue"
                        )
                    if timeout_ms == 0:
                        return False
                    if threading.get_ident() == self.consumer_ident:
                        # Only the consumer makes room: waiting here would never end.
                        raise QueueFullError(
                            "send() from the producer's send thread (a CallbackHandler hook) found the queue full; "
                            "waiting would deadlock: only that thread empties the queue"
                        )
                    if deadline is None:
                        self._not_full.wait()
                    else:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0 and not first:
                            return False
                        # (at the deadline: one more try above, then False)
                        self._not_full.wait(max(0.0, remaining))
                    first = False
            finally:
                self._putters -= 1
        if waker is not None:
            waker()
        return True

    def put_many(self, items: Sequence[Any], timeout_ms: int) -> int:
        """Append several items in order, each waiting for room as in `put`.

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
        put = self.put
        for i, data in enumerate(items):
            if not put(data, len(data.messages), timeout_ms):
                return i
        return len(items)

    # -- consumer side ------------------------------------------------------------

    def take_batch(self, batch_messages: int, max_wait_ms: int) -> list[Any] | None:
        """Block until a batch is due, then take it.

        A batch is due when ``batch_messages`` messages are waiting, when
        ``max_wait_ms`` passed since the oldest waiting item was enqueued,
        or when a flush or close was requested.

        Args:
            batch_messages: The batch size (messages, ``batch.num.messages``).
            max_wait_ms: The longest an item waits for a full batch (ms,
                ``queue.buffering.max.ms``).

        Returns:
            Whole items holding up to ``batch_messages`` messages (at least
            one item); None once the queue is closed and empty.
        """
        while True:
            wake = threading.Event()
            kind, value = self.poll_batch(batch_messages, max_wait_ms, wake.set)
            if kind == "batch":
                batch: list[Any] = value[0]
                return batch
            if kind == "closed":
                return None
            wake.wait(value)

    def poll_batch(self, batch_messages: int, max_wait_ms: int, waker: Callable[[], None]) -> tuple[str, Any]:
        """`take_batch` without blocking, for a consumer running on an
        event loop.

        Args:
            batch_messages: The batch size (messages).
            max_wait_ms: The longest an item waits for a full batch (ms).
            waker: Called at most once, from whichever thread enqueues
                enough messages, flushes or closes, so it must only
                schedule the wake-up (e.g. ``TrioToken.run_sync_soon``).

        Returns:
            ``("batch", (items, n_messages))`` when a batch is due (same
            rules as `take_batch`), ``("closed", None)`` once the queue is
            closed and empty, else ``("wait", seconds)``: look again after
            ``seconds`` (None: no deadline) or as soon as ``waker()`` is
            called.
        """
        core = self._core
        kind, value = core.poll(batch_messages, max_wait_ms / 1000, waker)
        # Putters waiting for room are woken once the queue is down to half
        # (or empty, for an item larger than the rest of the bound): they
        # then queue many items at once instead of trading the processor
        # with this consumer batch by batch. A putter with a deadline tries
        # once more when it passes.
        if kind == "batch" and self._putters and (core.count <= self._low_water or not core.queued_items):
            with self._lock:
                self._not_full.notify_all()
        return kind, value

    def task_done(self, n_messages: int) -> None:
        """Mark taken messages as finished (sent or failed).

        Args:
            n_messages: How many messages of taken batches are finished.
        """
        if self._core.task_done(n_messages) and self._flushers:
            with self._lock:
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
        core = self._core
        with self._lock:
            self._flushers += 1
        try:
            waker = core.flush_requested(1)
            if waker is not None:
                waker()
            with self._lock:
                return self._all_done.wait_for(lambda: core.unfinished <= 0, timeout)
        finally:
            core.flush_requested(-1)
            with self._lock:
                self._flushers -= 1

    def close(self) -> None:
        """Refuse further puts (waiting putters get ProducerClosedError) and
        let the consumer drain what is queued, then get None."""
        waker = self._core.close()
        if waker is not None:
            waker()
        with self._lock:
            self._not_full.notify_all()

    def abandon(self) -> int:
        """Close the queue and drop what is still waiting in it (a close
        that ran out of time or was interrupted).

        Returns:
            How many messages were dropped (queued, not yet taken by the
            consumer; batches already taken are not counted).
        """
        dropped, waker = self._core.abandon()
        if waker is not None:
            waker()
        with self._lock:
            self._not_full.notify_all()
            self._all_done.notify_all()
        return dropped

    @property
    def closed(self) -> bool:
        return self._core.closed

    @property
    def flushing(self) -> bool:
        """Whether a `flush` is waiting (everything taken is then due)."""
        return bool(self._core.flushing)

    def statistics(self) -> QueueStatistics:
        core = self._core
        return QueueStatistics(core.count, core.queued_items, self.max_messages, core.unfinished)
