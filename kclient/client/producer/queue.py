"""The async producer's bounded queue, `MessageQueue`.

`MessageQueue` is bounded by a number of *messages*
(``queue.buffering.max.messages``; a ProducerData counts as many messages
as it holds) waiting in it, and by the *bytes* of the records the async
producer holds (``buffer.memory``, Kafka's producer property): queued here,
in the send thread's per-partition batches and in flight, until each batch
is acknowledged or failed (`MessageQueue.task_done`). A record's bytes are
`kclient.client.producer.accumulator.estimated_size`'s estimate (its key,
its value and the record overhead); the queue measures each item as it is
put, the send thread reports the bytes of each finished batch. Putting never waits for the send thread: ``Producer.send`` in
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
from kclient.client.producer.accumulator import ACCUMULATOR_RECORD_OVERHEAD
from kclient.errors import MessageSizeTooLargeError, ProducerClosedError, QueueFullError

__all__ = ["BUFFER_MEMORY", "Bundle", "MessageQueue", "PyQueueCore", "QueueStatistics", "RecordTooLargeError"]

#: Kafka's default ``buffer.memory`` (bytes).
BUFFER_MEMORY = 33_554_432

_monotonic = time.monotonic


@attrs.frozen
class QueueStatistics:
    """A snapshot of a `MessageQueue`: ``queued_messages`` /
    ``queued_items`` waiting now, ``max_messages`` the bound,
    ``unfinished_messages`` queued or being sent; ``unfinished_bytes`` the
    estimated bytes of the records queued or being sent (until acknowledged
    or failed), ``max_bytes`` their bound (``buffer.memory``)."""

    queued_messages: int
    queued_items: int
    max_messages: int
    unfinished_messages: int
    unfinished_bytes: int = 0
    max_bytes: int = BUFFER_MEMORY


class RecordTooLargeError(MessageSizeTooLargeError):
    """A record is larger than the async producer's whole ``buffer.memory``
    (Kafka's ``RecordTooLargeException`` for such records): it could never
    be queued, so ``send`` fails at once.

    Attributes:
        not_enqueued: The ProducerData that were not queued (from the one
            holding the record on; the ones before were), when the producer
            knows them.
    """

    def __init__(self, message: str = "", *, not_enqueued: list[Any] | None = None) -> None:
        super().__init__(message)
        self.not_enqueued: list[Any] = [] if not_enqueued is None else not_enqueued


def measure(data: Any, bundle_type: type[list[Any]] | None, overhead: int) -> tuple[int, int]:
    """The estimated bytes of an item and of its largest record (the pure
    rule of both queue cores; `kclient.client.producer.accumulator.estimated_size`
    per record).

    Args:
        data: A ProducerData (or TrackedData) tuple, a ``bundle_type`` of
            them, or an object with ``key`` and ``messages``; anything
            else counts 0.
        bundle_type: The type of items holding several items (`Bundle`).
        overhead: Bytes counted per record beyond its key and value.

    Returns:
        ``(total bytes, bytes of the largest record)``.
    """
    if type(data) is bundle_type:
        total = largest = 0
        for item in data:
            b, top = measure(item, None, overhead)
            total += b
            largest = max(largest, top)
        return total, largest
    if isinstance(data, tuple):
        if len(data) < 3:
            return 0, 0
        key, messages = data[1], data[2]
    else:
        key, messages = getattr(data, "key", None), getattr(data, "messages", ())
    key_size = len(key) if isinstance(key, (bytes, bytearray, str)) else 0
    total = largest = 0
    for m in messages:
        b = key_size + overhead + (len(m) if isinstance(m, (bytes, bytearray, str)) else 0)
        total += b
        if b > largest:
            largest = b
    return total, largest


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
    garbage collector one tracked object, its ProducerData; their bytes are
    summed (``queued_bytes``), and a take of only some items measures them
    again.

    Args:
        max_messages: The bound on queued messages.
        bundle_type: The type of items that hold several items
            (`Bundle`): taken apart when taken.
        max_bytes: The bound on the estimated bytes queued or taken and
            not yet done (``buffer.memory``, bytes; see `measure`).
        record_overhead: Bytes counted per record beyond its key and value.
    """

    def __init__(self, max_messages: int, bundle_type: type[list[Any]] | None = None, max_bytes: int = BUFFER_MEMORY, record_overhead: int = 0) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.record_overhead = record_overhead
        self._bundle_type = bundle_type
        self._bundles = 0  # bundles queued
        self._items: list[Any] = []
        self._sizes: list[int] = []
        self._times: list[float] = []
        self.count = 0  # messages queued
        self.unfinished = 0  # messages queued or taken and not yet done
        self.unfinished_bytes = 0  # their estimated bytes
        self.queued_bytes = 0  # the estimated bytes of the queued items
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

    def measure(self, data: Any) -> tuple[int, int]:
        """``(bytes, bytes of its largest record)`` of an item (`measure`)."""
        return measure(data, self._bundle_type, self.record_overhead)

    def put(self, data: Any, n: int) -> Callable[[], None] | None | Literal[False]:
        """Append ``data`` (``n`` messages) if the queue is open and has
        room for its messages and bytes (an item larger than a bound fits
        when nothing is held against that bound, unless one of its records
        alone is larger than ``max_bytes``).

        Returns:
            False: not queued (full, closed, or a record larger than
            ``max_bytes``). None: queued. A callable: queued, and the
            waiting consumer must be woken by calling it (outside any
            lock).
        """
        size, largest = measure(data, self._bundle_type, self.record_overhead)
        with self._lock:
            items = self._items
            queued = len(items)
            held = self.unfinished_bytes
            if self.closed or (self.count + n > self.max_messages and queued) or largest > self.max_bytes or (held + size > self.max_bytes and held):
                return False
            items.append(data)
            self._sizes.append(n)
            self._times.append(_monotonic())
            self.count += n
            self.unfinished += n
            self.unfinished_bytes = held + size
            self.queued_bytes += size
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

    def _take(self, batch_messages: int) -> tuple[list[Any], int, int]:
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
            taken_bytes = self.queued_bytes
            self._items, self._sizes, self._times = [], [], []
        else:
            batch = items[:k]
            # measured again (the same estimate): no per-item list on put
            taken_bytes = sum(measure(item, self._bundle_type, self.record_overhead)[0] for item in batch)
            del items[:k], sizes[:k], self._times[:k]
        self.queued_bytes -= taken_bytes
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
        return batch, taken, taken_bytes

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

    def renew_lock(self) -> None:
        """A new lock, in a forked child (a parent thread may have held the
        old one at the fork)."""
        self._lock = threading.Lock()

    def abandon(self) -> tuple[int, Callable[[], None] | None]:
        """Close and drop what is queued: ``(messages dropped, waker)``."""
        with self._lock:
            dropped = self.count
            self.closed = True
            self.unfinished_bytes -= self.queued_bytes
            self.queued_bytes = 0
            self._items, self._sizes, self._times = [], [], []
            self._bundles = 0
            self.count = 0
            self.unfinished -= dropped
            return dropped, (self._release_waker() if self._consumer_waiting else None)

    def task_done(self, n: int, n_bytes: int = 0) -> bool:
        """Mark ``n`` taken messages (``n_bytes`` estimated bytes) finished;
        True once no message is left."""
        with self._lock:
            self.unfinished -= n
            self.unfinished_bytes -= n_bytes
            if self.unfinished <= 0:
                self.unfinished_bytes = 0  # nothing held: no estimate drift can outlive it
                return True
            return False


#: The core `MessageQueue` uses: compiled when available.
_QueueCore = _speedups.QueueCore if _speedups is not None else PyQueueCore


class MessageQueue:
    """A bounded FIFO of ProducerData counted in messages and bytes, for one
    consumer thread (the ProducerSendThread) and any number of producer
    threads.

    Two bounds: ``max_messages`` messages waiting in the queue, and
    ``max_bytes`` estimated bytes of the records queued or taken and not
    yet finished (`task_done`: acknowledged or failed). An item larger than
    a bound is accepted when nothing is held against that bound (it could
    never fit otherwise), except that a record larger than ``max_bytes``
    is refused (`RecordTooLargeError`). Thread-safe.

    Args:
        max_messages: The bound on queued messages
            (``queue.buffering.max.messages``).
        max_bytes: The bound on the bytes held (``buffer.memory``, bytes).
        record_overhead: Bytes counted per record beyond its key and value
            (`kclient.client.producer.accumulator.ACCUMULATOR_RECORD_OVERHEAD`,
            so that the send thread's batch sizes add up to the same bytes).

    Raises:
        ValueError: ``max_messages`` or ``max_bytes`` < 1.
    """

    def __init__(self, max_messages: int, max_bytes: int = BUFFER_MEMORY, record_overhead: int = ACCUMULATOR_RECORD_OVERHEAD) -> None:
        if max_messages < 1:
            raise ValueError(f"queue.buffering.max.messages must be >= 1, got {max_messages}")
        if max_bytes < 1:
            raise ValueError(f"buffer.memory must be >= 1, got {max_bytes}")
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._core = core = _QueueCore(max_messages, Bundle, max_bytes, record_overhead)
        #: The producer's per-send call: ``fast_put(data, n)`` returns None
        #: when queued, a callable to call when queued and the consumer
        #: must be woken, False when not queued (full, closed or a record
        #: too large: call `put`, which waits or raises).
        self.fast_put = core.put
        self._lock = threading.Lock()  # for the conditions only
        self._not_full = threading.Condition(self._lock)
        self._all_done = threading.Condition(self._lock)
        self._putters = 0  # put() calls waiting for room
        self._low_water = max_messages // 2  # wake them at or below this many messages
        self._low_bytes = max_bytes // 2  # or at or below this many bytes held
        self._flushers = 0  # flush() calls waiting
        #: Which bound the last `put` that found no room in time hit (for
        #: the producer's `QueueFullError` message).
        self.last_full_bound = ""
        #: threading.get_ident() of the consumer thread, if known: a put from
        #: it must not wait for room (nothing else would make any).
        self.consumer_ident: int | None = None

    # -- producer side ----------------------------------------------------------

    def put(self, data: Any, n: int, timeout_ms: int) -> bool:
        """Append one item.

        Args:
            data: The ProducerData (or `Bundle` of them) to queue.
            n: How many messages it holds (what counts against
                ``max_messages``).
            timeout_ms: How long to wait for room (ms): -1 until there is
                room, 0 not at all.

        Returns:
            False when there was no room in time (nothing enqueued;
            `last_full_bound` says which bound).

        Raises:
            ProducerClosedError: the queue is closed.
            RecordTooLargeError: a record of ``data`` is larger than
                ``max_bytes`` (nothing enqueued).
            QueueFullError: the queue is full and the caller is the
                consumer thread (waiting would deadlock).
        """
        waker = self.fast_put(data, n)
        if waker is False:
            return self._put_waiting(data, n, timeout_ms)
        if waker is not None:
            waker()
        return True

    def full_bound(self, n: int, size: int) -> str:
        """Which bound refuses an item of ``n`` messages and ``size`` bytes
        now (``"buffer.memory"`` or ``"queue.buffering.max.messages"``), as
        a phrase naming the bound and the state."""
        core = self._core
        held = core.unfinished_bytes
        if held and held + size > self.max_bytes:
            return f"buffer.memory={self.max_bytes} bytes ({held} bytes held unacknowledged, {size} more needed)"
        return f"queue.buffering.max.messages={self.max_messages} ({core.count} messages queued, {n} more)"

    def _put_waiting(self, data: Any, n: int, timeout_ms: int) -> bool:
        core = self._core
        size, largest = core.measure(data)
        if largest > self.max_bytes:
            raise RecordTooLargeError(
                f"a record of {largest} bytes (estimated: key, value and record overhead) is larger than "
                f"buffer.memory={self.max_bytes} bytes: it can never be queued"
            )
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        forcing = False  # whether this put asked the consumer to send every batch (flush)
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
                    self.last_full_bound = self.full_bound(n, size)
                    if timeout_ms == 0:
                        return False
                    if threading.get_ident() == self.consumer_ident:
                        # Only the consumer makes room: waiting here would never end.
                        raise QueueFullError(
                            "send() from the producer's send thread (a CallbackHandler hook) found the queue full "
                            f"({self.last_full_bound}); waiting would deadlock: only that thread empties the queue"
                        )
                    if not forcing and self.last_full_bound.startswith("buffer.memory"):
                        # Kafka's exhausted buffer makes every batch ready:
                        # what lingers in the batches goes now, freeing room.
                        forcing = True
                        wake = core.flush_requested(1)
                        if wake is not None:
                            wake()
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
                if forcing:
                    core.flush_requested(-1)
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
            ``("batch", (items, n_messages, n_bytes))`` when a batch is due (same
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

    def task_done(self, n_messages: int, n_bytes: int = 0) -> None:
        """Mark taken messages as finished (sent or failed): their bytes
        no longer count against ``max_bytes``.

        Args:
            n_messages: How many messages of taken batches are finished.
            n_bytes: Their estimated bytes (as `poll_batch` returned them,
                or the sum of the batch sizes the accumulator drained).
        """
        core = self._core
        if core.task_done(n_messages, n_bytes) and self._flushers:
            with self._lock:
                self._all_done.notify_all()
        if n_bytes and self._putters and core.unfinished_bytes <= self._low_bytes:
            # Putters waiting for bytes wake once half the bound is free.
            with self._lock:
                self._not_full.notify_all()

    @property
    def putters_waiting(self) -> bool:
        """Whether a `put` waits for room."""
        return bool(self._putters)

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

    def close_in_forked_child(self) -> None:
        """Close this process's copy of the queue after ``os.fork`` (the
        child has no send thread to drain it): puts are refused from now
        on. The locks are new, since a parent thread may have held one at
        the fork; no consumer is woken (it lives in the parent)."""
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._all_done = threading.Condition(self._lock)
        core = self._core
        if isinstance(core, PyQueueCore):
            core.renew_lock()
        core.close()

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
        return QueueStatistics(core.count, core.queued_items, self.max_messages, core.unfinished, core.unfinished_bytes, self.max_bytes)
