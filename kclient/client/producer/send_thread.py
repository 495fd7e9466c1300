"""The async producer's ProducerSendThread.

Source: the Kafka 0.8 documentation, section 5.1 "API Design", "Producer
APIs" (https://kafka.apache.org/08/documentation.html#apidesign): in async mode
(``producer.type=async``) the producer "batches together multiple producer
requests ... before serializing and dispatching them"; batching is
controlled by ``queue.time`` / ``batch.size`` (0.8 names
``queue.buffering.max.ms`` / ``batch.num.messages``), and "a background
thread (kafka.producer.async.ProducerSendThread) dequeues batches of data and
lets the kafka.producer.EventHandler serialize and send" them.

With the default event handler the thread batches per partition instead,
as Kafka's modern producers do (`kclient.client.producer.accumulator`): it
moves what is queued into each partition's batch (`PartitionRouter`; keyless
records on the sticky partitioner, KIP-480), and sends the batches that are
ready (``batch.size`` bytes, ``batch.num.messages`` records, ``linger.ms``
since their first record, a flush, a close, ``queue.buffering.max.messages``
records held, or a ``send`` waiting for ``buffer.memory``) grouped by leader, one Produce request per leader within
``max.request.size``. A custom ``event.handler``, or a CallbackHandler with
``after_dequeuing_existing_data``, keeps the 0.8 batches described below.

The bounded queue it drains, `MessageQueue`, lives in
`kclient.client.producer.queue`: putting never waits for the send thread,
which the queue wakes only when it is idle and a batch may be due.

`ProducerSendThread` is a real, named daemon thread, started by
the Producer and joined by its ``close()`` (or by kclient's exit hook, see
`kclient.sync`, for a producer that was never closed). It runs the producer's trio loop
and, on it, the batching task: a batch is taken when ``batch.num.messages``
messages are waiting or when ``queue.buffering.max.ms`` has passed since the
oldest waiting item was enqueued, the CallbackHandler hooks run, and the
EventHandler serializes and sends it on the same thread (no hand-off per
batch). Failures are never silent: each is logged at ERROR with the topics,
partitions and message count, counted, and passed to
``CallbackHandler.on_send_error``; the producer's ``close()`` raises if any
messages were lost whose failure did not reach a future or delivery
callback (each failure is reported once).
"""

from __future__ import annotations

import functools
import logging
import math
import operator
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import attrs
import trio

from kclient.client.producer.accumulator import RecordAccumulator, StickyPartitioner
from kclient.client.producer.callbacks import CallbackHandler, overrides
from kclient.client.producer.data import ProducerData
from kclient.client.producer.delivery import DeliveryReport, reports_of, settle
from kclient.client.producer.queue import MessageQueue, QueueStatistics  # noqa: F401  (QueueStatistics: re-export)
from kclient.client.producer.routing import PartitionRouter
from kclient.errors import ProducerClosedError
from kclient.sync import LoopThread

log = logging.getLogger(__name__)

_topic_of = operator.attrgetter("topic")


class BatchSubmitter(Protocol):
    """What the send thread hands each batch to: the producer's trio core
    (`kclient.client.producer.core.TrioProducer` is one), given to
    `ProducerSendThread.start_sending` so that this module does not import
    the layer above it."""

    def submit_batch(self, events: list[ProducerData], on_done: Callable[[BaseException | None], None]) -> Awaitable[None]:
        """Write one batch's Produce requests and return; call ``on_done``
        later, on the trio thread, with None once acknowledged or with the
        error once given up on.

        Args:
            events: The batch's ProducerData, through the hooks.
            on_done: The completion callback (called once).

        Returns:
            An awaitable that completes once the batch is written (or
            handed to a custom event handler).

        Raises:
            ProducerClosedError: the producer is closed (``on_done`` is then
                not called).
        """
        ...


class PartitionSource(Protocol):
    """What the send thread's per-partition batching reads from the
    producer's trio core (`kclient.client.producer.core.TrioProducer` is
    one): whether it applies, how keys are placed, and the metadata."""

    @property
    def accumulates(self) -> bool:
        """Whether batches may be formed per partition."""
        ...

    @property
    def hashes_keys(self) -> bool:
        """Whether keyed records are placed by murmur2 of their key."""
        ...

    @property
    def sticky_keyless(self) -> bool:
        """Whether keyless records use the sticky partitioner."""
        ...

    def cached_partitions(self, topic: str) -> tuple[Any, ...]:
        """The topic's cached partitions (PartitionInfo, sorted by id)."""
        ...

    async def load_partitions(self, topic: str) -> tuple[Any, ...]:
        """The topic's partitions, fetched when not cached; ``()`` if not to be had."""
        ...


@attrs.frozen
class SendStatistics:
    """Counters of a ProducerSendThread: ``sent_messages`` / ``sent_batches``
    acknowledged, ``failed_messages`` / ``failed_batches`` lost, the
    ``first_error`` (or None), and ``possibly_written``: how many of
    ``failed_messages`` may be in the log anyway (see
    `kclient.errors.FailedToSendMessageError`).

    ``reported_messages``: how many of ``failed_messages`` had their error
    delivered to the application (a `RecordFuture` or a delivery callback:
    the producer's ``close()`` does not raise those again);
    ``unreported_batches`` and ``first_unreported_error``: the failures
    nobody was told about, which ``close()`` raises."""

    sent_messages: int
    sent_batches: int
    failed_messages: int
    failed_batches: int
    first_error: BaseException | None
    possibly_written: int = 0
    reported_messages: int = 0
    unreported_batches: int = 0
    first_unreported_error: BaseException | None = None


def _failures_of(reports: Sequence[DeliveryReport] | None) -> int:
    """How many records of ``reports`` failed into their futures or callbacks."""
    return sum(r.failures for r in reports) if reports else 0


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

    A named daemon thread running the producer's trio loop (it is a
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
    any messages were lost whose failure did not reach a future or delivery
    callback. Once the queue is closed and drained the task
    sends ``callback_handler.last_batch_before_close()``, waits for every
    batch in flight, and ends (`join` waits for that).
    """

    def __init__(
        self,
        queue: MessageQueue,
        *,
        callback_handler: CallbackHandler | None = None,
        batch_num_messages: int = 200,
        queue_time_ms: int = 5,
        batch_size: int | None = None,
        max_request_size: int = 1_048_576,
        max_in_flight: int = 1,
        ignore_keys: bool = False,
        adaptive_partitioning: bool = True,
        availability_timeout_ms: int = 0,
        name: str = "kclient-producer-send",
    ) -> None:
        super().__init__(name=name)
        #: ``partitioner.adaptive.partitioning.enable`` and
        #: ``partitioner.availability.timeout.ms`` (KIP-794, ms).
        self.adaptive_partitioning = adaptive_partitioning
        self.availability_timeout_ms = availability_timeout_ms
        #: ``partitioner.ignore.keys`` (KIP-794): with the built-in
        #: partitioning, keyed records are placed as keyless ones (sticky).
        self.ignore_keys = ignore_keys
        #: ``batch.size`` (bytes): batch per partition (`RecordAccumulator`)
        #: when the producer allows it; None keeps Kafka 0.8's batches of
        #: ``batch.num.messages`` across partitions.
        self.batch_size = batch_size
        self.max_request_size = max_request_size
        #: ``max.in.flight.requests.per.connection``: with every slot taken
        #: the per-partition loop keeps batching instead of draining.
        self.max_in_flight = max(1, max_in_flight)
        self.queue = queue
        self._callbacks = callback_handler if callback_handler is not None else CallbackHandler()
        self.batch_num_messages = max(1, batch_num_messages)
        self.queue_time_ms = max(0, queue_time_ms)
        self._after_dequeue = overrides(self._callbacks, "after_dequeuing_existing_data")
        self._before_send = overrides(self._callbacks, "before_sending_data")
        self._on_send_error = overrides(self._callbacks, "on_send_error")
        self._finished = threading.Event()
        self._outstanding = 0
        #: The per-partition loop's accumulator, once it runs (`unsent_messages`).
        self._accumulator: RecordAccumulator | None = None
        #: Records of batches the closed producer refused (never written).
        self._refused_messages = 0
        #: Set when a batch completes (the per-partition loop waits on it
        #: while every in-flight slot is taken).
        self._slot_freed: trio.Event | None = None
        self._idle: trio.Event | None = None
        self._sent_messages = 0
        self._sent_batches = 0
        self._failed_messages = 0
        self._failed_batches = 0
        self._first_error: BaseException | None = None
        self._reported_messages = 0
        self._unreported_batches = 0
        self._first_unreported_error: BaseException | None = None
        self._possibly_written = 0
        #: Set by the Producer once a record was sent with a delivery
        #: callback or future: batches then look for their reports.
        self.tracking = False

    def start_sending(self, producer: BatchSubmitter) -> None:
        """Start the batching task on this thread's loop. Call once.

        Args:
            producer: Where batches go (the producer's `TrioProducer`,
                already opened on this loop; any `BatchSubmitter`).
        """
        loop = self._send_loop
        if self.batch_size is not None and not self._after_dequeue and getattr(producer, "accumulates", False):
            loop = self._accumulate_loop
        self.call_sync(self.nursery.start_soon, loop, producer)
        self.queue.consumer_ident = self.ident

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the batching task ended (the queue was closed, drained
        and every batch acknowledged or failed).

        Args:
            timeout: The longest to wait (seconds); None waits forever.

        Returns:
            False on timeout.
        """
        return self._finished.wait(timeout)

    async def _send_loop(self, producer: BatchSubmitter) -> None:
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
            await self._close_sending(producer)
        finally:
            self._finished.set()

    async def _accumulate_loop(self, producer: Any) -> None:
        """The batching task with per-partition batches (module
        `kclient.client.producer.accumulator`): everything queued is moved
        into its partition's batch; ready batches are drained per leader
        and submitted as one batch of the event handler (one Produce
        request per leader)."""
        queue = self.queue
        token = trio.lowlevel.current_trio_token()
        accumulator = RecordAccumulator(
            batch_size=self.batch_size or 16384,
            batch_messages=self.batch_num_messages,
            linger_ms=self.queue_time_ms,
            max_request_size=self.max_request_size,
            buffer_messages=queue.max_messages,
            availability_timeout_ms=self.availability_timeout_ms,
        )
        self._accumulator = accumulator
        source: PartitionSource = producer
        router = PartitionRouter(
            accumulator,
            lambda topic: len(source.cached_partitions(topic)),
            hash_keys=source.hashes_keys,
            sticky_keyless=source.sticky_keyless,
            ignore_keys=self.ignore_keys,
            sticky=StickyPartitioner(load=accumulator.partition_load if self.adaptive_partitioning else None),
        )

        def leader_of(topic: str, partition: int) -> int | None:
            parts = source.cached_partitions(topic)
            return parts[partition].leader if 0 <= partition < len(parts) else None

        closed = False
        try:
            while True:
                wake = trio.Event()
                kind = "full"
                if not closed and not accumulator.exhausted:
                    room = max(1, accumulator.buffer_messages - accumulator.messages)
                    kind, value = queue.poll_batch(room, 0, functools.partial(_wake_soon, token, wake.set))
                    if kind == "batch":
                        for topic in router.unknown_topics(value[0]):
                            await source.load_partitions(topic)
                        router.route(value[0])
                    closed = kind == "closed"
                if closed and not accumulator.messages:
                    break
                if self._outstanding >= self.max_in_flight:
                    # Every slot is taken (Kafka's Sender drains only for a
                    # node it may send to): keep filling the batches while the
                    # broker works, looking at the queue every linger.ms,
                    # until a batch completes.
                    if kind == "batch":
                        await trio.lowlevel.checkpoint()  # let the connections' tasks run
                    else:
                        slot = self._slot_freed = trio.Event()
                        with trio.move_on_after(max(0.001, accumulator.linger_s)):
                            await slot.wait()
                    continue
                drained = accumulator.drain(leader_of, flush=closed or queue.flushing)
                if drained.items:
                    await self._process(producer, drained.items, drained.messages, drained.size)
                elif kind == "wait":
                    timeout = accumulator.next_ready_in()
                    with trio.move_on_after(math.inf if timeout is None else timeout):
                        await wake.wait()
            await self._close_sending(producer)
        finally:
            self._finished.set()

    async def _close_sending(self, producer: BatchSubmitter) -> None:
        """Send ``last_batch_before_close`` and wait for every batch in flight."""
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

    async def _process(self, producer: BatchSubmitter, items: list[Any], taken: int, taken_bytes: int = 0, *, dequeued: bool = True) -> None:
        """Run the hooks on ``items`` (holding ``taken`` messages of
        ``taken_bytes`` estimated bytes taken off the queue) and submit
        them; the queue's ``task_done(taken, taken_bytes)`` follows once the
        batch is acknowledged or failed (freeing ``buffer.memory``)."""
        batch = items
        # Records sent with a delivery callback or future: whatever the event
        # handler did not resolve (a hook replaced or dropped it, a custom
        # event.handler, a batch-wide error) is settled when the batch ends.
        reports = reports_of(items) if self.tracking else None
        try:
            if dequeued and self._after_dequeue:
                hook = self._callbacks.after_dequeuing_existing_data
                batch = [kept for d in items for kept in (hook(d) or ())]
            if self._before_send:
                batch = list(self._callbacks.before_sending_data(batch) or ())
        except Exception as exc:
            if reports:
                settle(reports, exc)
            self._record_failure(batch, exc, sum(len(d.messages) for d in batch), _failures_of(reports))
            if taken:
                self.queue.task_done(taken, taken_bytes)
            return
        if not batch:
            if reports:
                settle(reports, None)
            if taken:
                self.queue.task_done(taken, taken_bytes)
            return
        n = taken if dequeued and batch is items else sum(len(d.messages) for d in batch)
        self._outstanding += 1
        # Keep the ProducerData of a batch in flight only for an on_send_error
        # hook; otherwise a failure is described by its topics. (Tens of
        # thousands of ProducerData held until acknowledged made every
        # garbage collection pass walk them: ~30 % of the CPU with 1 MB
        # batches.)
        kept = batch if self._on_send_error else sorted(set(map(_topic_of, batch)))

        def done(exc: BaseException | None) -> None:  # on this loop, once
            try:
                if reports:
                    settle(reports, exc)
                if exc is None:
                    self._sent_messages += n
                    self._sent_batches += 1
                else:
                    self._record_failure(kept, exc, n, _failures_of(reports))
            finally:
                if taken:
                    self.queue.task_done(taken, taken_bytes)
                self._outstanding -= 1
                if not self._outstanding and self._idle is not None:
                    self._idle.set()
                if self._slot_freed is not None:
                    self._slot_freed.set()

        try:
            await producer.submit_batch(batch, done)
        except Exception as exc:  # closed before it could be written
            if isinstance(exc, ProducerClosedError):
                self._refused_messages += n
            done(exc)

    def _record_failure(self, batch: list[Any], exc: BaseException, messages: int, reported: int = 0) -> None:
        """Count a failed batch of ``messages``, of which ``reported`` failed
        into their futures or callbacks; log it and call ``on_send_error``."""
        lost = getattr(exc, "lost_messages", None)
        lost = messages if lost is None else lost
        self._failed_messages += lost
        reported = min(reported, lost)
        self._reported_messages += reported
        if not lost or reported < lost:  # someone still has to be told: close() raises it
            self._unreported_batches += 1
            if self._first_unreported_error is None:
                self._first_unreported_error = exc
        possibly = getattr(exc, "possibly_written", 0) or 0
        self._possibly_written += possibly
        self._failed_batches += 1
        self._sent_messages += max(0, messages - lost)
        if self._first_error is None:
            self._first_error = exc
        log.error(
            "async send of %d message(s) to %s failed (%s): %s",
            lost,
            _describe(batch, exc),
            f"{possibly} possibly written, {lost - possibly} not sent" if possibly else "not sent",
            exc,
        )
        if not self._on_send_error:
            return
        try:
            self._callbacks.on_send_error(batch, exc)
        except Exception:
            log.exception("CallbackHandler.on_send_error raised")

    @property
    def unsent_messages(self) -> int:
        """Records taken off the queue that were never written to a broker:
        still in the per-partition batches, or in batches the closed
        producer refused (`ProducerClosedError`). Exact once the loop
        stopped; a snapshot while it runs."""
        accumulator = self._accumulator
        return self._refused_messages + (accumulator.messages if accumulator is not None else 0)

    def statistics(self) -> SendStatistics:
        """A snapshot of the counters (exact once `join` returned)."""
        return SendStatistics(
            self._sent_messages,
            self._sent_batches,
            self._failed_messages,
            self._failed_batches,
            self._first_error,
            self._possibly_written,
            self._reported_messages,
            self._unreported_batches,
            self._first_unreported_error,
        )


def _wake_soon(token: trio.lowlevel.TrioToken, wake: Callable[[], None]) -> None:
    # The queue's waker: schedule ``wake`` on the loop from any thread.
    try:
        token.run_sync_soon(wake)
    except trio.RunFinishedError:
        pass


# MessageQueue and QueueStatistics (now in kclient.client.producer.queue)
# stay importable from here, where they lived before.
__all__ = ["BatchSubmitter", "PartitionSource", "ProducerSendThread", "SendStatistics"]
