"""Per-record delivery results: `RecordMetadata` and `RecordFuture`.

What Kafka's ``KafkaProducer.send(record, callback)`` gives an application
(the producer API of KIP-8 / Kafka 0.8.1's new producer,
https://kafka.apache.org/documentation/#producerapi): per record, once the
broker answered, the topic, partition, offset and timestamp it got
(``RecordMetadata``), or the error that made the producer give up on it,
either as a future or through a callback ``on_completion(metadata,
exception)``.

kclient's ``send`` keeps the Kafka 0.8 signature and returns None; results
are asked for per call:

- ``Producer.send(data, callback=fn)`` calls ``fn(metadata, None)`` or
  ``fn(None, error)`` once per record;
- ``Producer.send_with_result(data)`` returns one `RecordFuture` per record.

The bookkeeping behind both is a `DeliveryReport` per ProducerData, carried
through the async queue and the event handler inside a `TrackedData` (a
ProducerData that also holds its report). The event handler resolves a
record when its batch is acknowledged (offset = the partition's
``base_offset`` in the ProduceResponse + the record's index in the batch;
timestamp = ``log_append_time_ms`` when the topic uses LogAppendTime, else
the record's CreateTime) or fails it with a `FailedToSendMessageError`
naming its partition when the batch finally fails. Records sent without a
callback or future are plain ProducerData and never meet any of this.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any

from kclient.client.producer.data import ProducerData, new_tuple
from kclient.client.value_tuple import ValueTuple

__all__ = ["DeliveryReport", "RecordFuture", "RecordMetadata", "TrackedData"]

log = logging.getLogger(__name__)

#: Guards the state of every RecordFuture and DeliveryReport: resolving
#: (the producer's trio thread) against waiting and add_done_callback (any
#: thread). Held for a few attribute writes only.
_lock = threading.Lock()

_PENDING = 0
_DONE = 1
_FAILED = 2


class RecordMetadata(ValueTuple):
    """Where the broker put one record (Kafka's ``RecordMetadata``).

    ``topic`` and ``partition``; ``offset``: its offset in the partition
    (-1 when not known: ``request.required.acks=0``, or a record a
    CallbackHandler hook replaced or dropped, or one sent by a custom
    ``event.handler``; ``partition`` is then -1 too unless known);
    ``timestamp``: the broker's LogAppendTime when the topic's
    ``message.timestamp.type`` is LogAppendTime, else the record's
    CreateTime (ms since the epoch; -1 if not known);
    ``serialized_key_size`` / ``serialized_value_size``: the encoded key
    and value in bytes, -1 for a null key or value (as Kafka's).

    An immutable value (a tuple underneath, like `ProducerData`, so that
    resolving a record costs one small allocation).
    """

    __slots__ = ()

    def __new__(cls, topic: str, partition: int, offset: int, timestamp: int, serialized_key_size: int = -1, serialized_value_size: int = -1) -> RecordMetadata:
        return tuple.__new__(cls, (topic, partition, offset, timestamp, serialized_key_size, serialized_value_size))

    topic = property(itemgetter(0), doc="The topic (str).")
    partition = property(itemgetter(1), doc="The partition, -1 if not known.")
    offset = property(itemgetter(2), doc="The record's offset, -1 if not known (acks=0).")
    timestamp = property(itemgetter(3), doc="LogAppendTime or CreateTime, ms since the epoch (-1: not known).")
    serialized_key_size = property(itemgetter(4), doc="Encoded key size in bytes, -1 for a null key.")
    serialized_value_size = property(itemgetter(5), doc="Encoded value size in bytes, -1 for a null value.")

    def __repr__(self) -> str:
        return (
            f"RecordMetadata(topic={self[0]!r}, partition={self[1]}, offset={self[2]}, timestamp={self[3]}, "
            f"serialized_key_size={self[4]}, serialized_value_size={self[5]})"
        )


class RecordFuture:
    """The delivery result of one record, from ``send_with_result``.

    The interface of `concurrent.futures.Future` (``result(timeout)``,
    ``exception(timeout)``, ``done()``, ``add_done_callback(fn)``, ...),
    resolved by the producer: with a `RecordMetadata` once the broker
    acknowledged the record, or failed with the error that made the
    producer give up on it (a `FailedToSendMessageError` naming the
    partition, the broker's error such as `MessageSizeTooLargeError` as
    its ``__cause__``). A record cannot be called back once queued, so
    ``cancel()`` returns False.

    Threads: ``add_done_callback`` functions run on the thread that
    resolves the future, the producer's send thread in async mode (keep
    them short: they hold up the producer's I/O, as Kafka's callbacks do),
    or at once on the calling thread when the future is already done
    (always the case in sync mode and with `TrioProducer`, whose sends
    return once acknowledged). Do not wait on a pending future from a
    callback: the send thread that would resolve it is the one waiting.
    """

    __slots__ = ("_state", "_value", "_event", "_callbacks")

    def __init__(self) -> None:
        self._state = _PENDING
        self._value: Any = None
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[RecordFuture], Any]] | None = None

    def done(self) -> bool:
        """Whether the record was acknowledged or failed."""
        return self._state != _PENDING

    def running(self) -> bool:
        """Whether the record is still on its way (queued or in flight)."""
        return self._state == _PENDING

    def cancelled(self) -> bool:
        """Always False: a queued record cannot be cancelled."""
        return False

    def cancel(self) -> bool:
        """Records cannot be cancelled once handed to ``send``.

        Returns:
            False.
        """
        return False

    def _wait(self, timeout: float | None) -> None:
        if self._state != _PENDING:
            return
        with _lock:
            if self._state != _PENDING:
                return
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        if not event.wait(timeout):
            raise concurrent.futures.TimeoutError(f"the record's delivery result did not arrive within {timeout} s")

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for the result.

        Args:
            timeout: The longest to wait (seconds); None waits as long as
                it takes (every record is resolved by the producer's
                retries or its ``close()``).

        Returns:
            The record's `RecordMetadata`.

        Raises:
            FailedToSendMessageError: the record was not delivered (see the
                class docstring); any other error the producer gave it.
            concurrent.futures.TimeoutError: ``timeout`` ran out (the
                record may still be delivered).
        """
        self._wait(timeout)
        if self._state == _FAILED:
            raise self._value
        metadata: RecordMetadata = self._value
        return metadata

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait for the result and return the error, or None if delivered.

        Args:
            timeout: As in `result`.

        Returns:
            The error the record failed with, or None.

        Raises:
            concurrent.futures.TimeoutError: ``timeout`` ran out.
        """
        self._wait(timeout)
        return self._value if self._state == _FAILED else None

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        """Call ``fn(future)`` once the future is done (at once, on this
        thread, if it already is). An exception from ``fn`` is logged and
        ignored.

        Args:
            fn: The function to call.
        """
        with _lock:
            if self._state == _PENDING:
                if self._callbacks is None:
                    self._callbacks = [fn]
                else:
                    self._callbacks.append(fn)
                return
        _call(fn, self)

    def __repr__(self) -> str:
        state = ("pending", "done", "failed")[self._state]
        value = "" if self._state == _PENDING else f" {self._value!r}"
        return f"<RecordFuture {state}{value}>"


def _call(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("a delivery callback raised (ignored)")


class DeliveryReport:
    """The delivery bookkeeping of one ProducerData sent with a callback or
    futures (internal): resolves each of its records exactly once.

    Args:
        data: The ProducerData (its topic and timestamp name leftovers).
        callback: ``callback(metadata, exception)`` per record, or None.
        futures: One `RecordFuture` per record, or None.
        registry: A set the report stays in while records are pending (the
            Producer's: ``close()`` fails whatever is left there), or None.
    """

    __slots__ = ("topic", "timestamp", "callback", "futures", "states", "pending", "failures", "registry")

    def __init__(
        self,
        data: ProducerData,
        callback: Callable[[RecordMetadata | None, BaseException | None], Any] | None,
        futures: list[RecordFuture] | None,
        registry: set[DeliveryReport] | None,
    ) -> None:
        self.topic = data[0]
        self.timestamp = data[3]
        self.callback = callback
        self.futures = futures
        n = len(data[2])
        # Callback-only reports keep one state byte per record.
        self.states = bytearray(n) if futures is None else None
        self.pending = n
        #: Records failed so far: their error reached the application (a
        #: future or the callback), so close() does not raise it again.
        self.failures = 0
        self.registry = registry
        if registry is not None and n:
            registry.add(self)

    def _settle_one(self, index: int, state: int, value: Any) -> tuple[threading.Event | None, list[Callable[[RecordFuture], Any]] | None] | None:
        # With _lock held: mark record ``index``; None if it was done already.
        futures = self.futures
        if futures is None:
            states = self.states
            if states[index]:  # type: ignore[index]
                return None
            states[index] = state  # type: ignore[index]
            event = callbacks = None
        else:
            f = futures[index]
            if f._state != _PENDING:
                return None
            f._state = state
            f._value = value
            event, callbacks = f._event, f._callbacks
            f._callbacks = None
        self.pending -= 1
        if state == _FAILED:
            self.failures += 1
        return event, callbacks

    def _fire(self, index: int, woken: tuple[threading.Event | None, list[Callable[[RecordFuture], Any]] | None], metadata: Any, error: Any) -> None:
        event, callbacks = woken
        if event is not None:
            event.set()
        if callbacks:
            f = self.futures[index]  # type: ignore[index]
            for fn in callbacks:
                _call(fn, f)
        if self.callback is not None:
            _call(self.callback, metadata, error)
        if not self.pending and self.registry is not None:
            self.registry.discard(self)

    def succeeded(self, index: int, metadata: RecordMetadata) -> None:
        """Resolve record ``index`` with ``metadata`` (no-op if resolved).

        Args:
            index: The record's index in its ProducerData's messages.
            metadata: Where the broker put it.
        """
        if self.futures is None:
            # callback only (the common async case): inline
            states = self.states
            with _lock:
                if states[index]:  # type: ignore[index]
                    return
                states[index] = _DONE  # type: ignore[index]
                self.pending -= 1
            try:
                self.callback(metadata, None)  # type: ignore[misc]
            except Exception:
                log.exception("a delivery callback raised (ignored)")
            if not self.pending and self.registry is not None:
                self.registry.discard(self)
            return
        with _lock:
            woken = self._settle_one(index, _DONE, metadata)
        if woken is not None:
            self._fire(index, woken, metadata, None)

    def failed(self, index: int, error: BaseException) -> None:
        """Fail record ``index`` with ``error`` (no-op if resolved).

        Args:
            index: The record's index in its ProducerData's messages.
            error: Why it was not delivered.
        """
        with _lock:
            woken = self._settle_one(index, _FAILED, error)
        if woken is not None:
            self._fire(index, woken, None, error)

    def settle(self, error: BaseException | None) -> None:
        """Resolve every record still pending: fail it with ``error``, or,
        when ``error`` is None (its batch was sent, but the event handler
        could not tell where this record went: a hook replaced or dropped
        it, or a custom ``event.handler`` sent it), give it a
        `RecordMetadata` with partition and offset -1.

        Args:
            error: The batch's error, or None.
        """
        if not self.pending:
            return
        unknown = RecordMetadata(self.topic, -1, -1, -1 if self.timestamp is None else self.timestamp)
        n = len(self.futures) if self.futures is not None else len(self.states)  # type: ignore[arg-type]
        for i in range(n):
            if error is None:
                self.succeeded(i, unknown)
            else:
                self.failed(i, error)


class TrackedData(ProducerData):
    """A ProducerData that carries its `DeliveryReport` (internal): a
    7-tuple whose first six items are the ProducerData's. Compares and
    hashes like the plain ProducerData."""

    __slots__ = ()

    report = property(itemgetter(6), doc="The DeliveryReport.")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProducerData) and tuple.__eq__(self[:6], other[:6])

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self[:6])

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self[:6])

    def __reduce__(self) -> Any:
        return (ProducerData, tuple(self[:6]))

    def _stamped(self, timestamp_ms: int) -> TrackedData:
        self[6].timestamp = timestamp_ms
        return new_tuple(TrackedData, (self[0], self[1], self[2], timestamp_ms, self[4], self[5], self[6]))

    def untracked(self) -> ProducerData:
        """The plain ProducerData."""
        return new_tuple(ProducerData, self[:6])


def track(events: Sequence[ProducerData], callback: Any, want_futures: bool, registry: set[DeliveryReport] | None) -> tuple[list[ProducerData], list[DeliveryReport], list[RecordFuture] | None]:
    """Wrap ``events`` for delivery results.

    Args:
        events: The ProducerData of one ``send`` call (already through
            ``prepare``).
        callback: ``callback(metadata, exception)`` per record, or None.
        want_futures: Make one `RecordFuture` per record.
        registry: Where pending reports are kept (see `DeliveryReport`).

    Returns:
        ``(tracked, reports, futures)``: the wrapped ProducerData, their
        reports, and the futures in record order (None unless
        ``want_futures``).
    """
    tracked: list[ProducerData] = []
    reports = []
    futures: list[RecordFuture] | None = [] if want_futures else None
    for d in events:
        if isinstance(d, TrackedData):
            d = d.untracked()
        elif type(d) is not ProducerData:
            d = ProducerData(d.topic, d.key, d.messages, d.timestamp_ms, getattr(d, "partition", None), getattr(d, "headers", ()))
        mine = [RecordFuture() for _ in d[2]] if want_futures else None
        if mine:
            futures.extend(mine)  # type: ignore[union-attr]
        report = DeliveryReport(d, callback, mine, registry)
        reports.append(report)
        tracked.append(new_tuple(TrackedData, (*d, report)))
    return tracked, reports, futures


def settle(reports: Iterable[DeliveryReport], error: BaseException | None) -> None:
    """`DeliveryReport.settle` each report.

    Args:
        reports: The reports of a finished batch or send.
        error: The batch's error, or None.
    """
    for r in reports:
        if r.pending:
            r.settle(error)


def call_back(futures: Sequence[RecordFuture], callback: Callable[[RecordMetadata | None, BaseException | None], Any]) -> None:
    """Call ``callback(metadata, exception)`` for each done future, on this
    thread (sync mode's and TrioProducer's callbacks).

    Args:
        futures: Resolved futures, in record order.
        callback: The application's callback.
    """
    for f in futures:
        if f._state == _FAILED:
            _call(callback, None, f._value)
        else:
            _call(callback, f._value, None)


def reports_of(items: Iterable[Any]) -> list[DeliveryReport]:
    """The reports of the TrackedData among ``items``.

    Args:
        items: ProducerData, tracked or not.

    Returns:
        Their reports, in order.
    """
    return [d[6] for d in items if type(d) is TrackedData]


def record_sizes(key: Any, value: Any) -> tuple[int, int]:
    """Kafka's serialized sizes: -1 for None, else ``len``.

    Args:
        key: Encoded key or None.
        value: Encoded value or None.

    Returns:
        ``(key_size, value_size)``.
    """
    return (-1 if key is None else len(key)), (-1 if value is None else len(value))


def wait_all(futures: Sequence[RecordFuture], timeout: float | None = None) -> bool:
    """Wait until every future is done (a helper for tests and examples).

    Args:
        futures: The futures.
        timeout: The longest to wait overall (seconds), None for no limit.

    Returns:
        False if the timeout ran out first.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    for f in futures:
        try:
            f._wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError:
            return False
    return True
