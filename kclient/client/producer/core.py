"""The producer's trio core: `TrioProducer`.

Trio applications use it directly:

```python
async with TrioProducer({"metadata.broker.list": "127.0.0.1:9092"}) as p:
    await p.send(ProducerData("events", key=b"k", messages=[b"v1", b"v2"]))
```

``send`` returns once the broker acknowledged the records per
``request.required.acks`` (the sync mode of the Kafka 0.8 documentation,
section 5.1 "API Design", https://kafka.apache.org/08/documentation.html#apidesign), retrying
retriable errors. The blocking `kclient.Producer` runs one TrioProducer
on a trio loop in a background thread (`kclient.sync.LoopThread`) and
adds the async mode's queue and ProducerSendThread in front of it.

The TrioProducer owns the plug-ins named by the config (loaded with
`kclient.plugins.load_plugin`, each given ``config=`` if its
constructor takes it): the value Encoder (``serializer.class``), the key
Encoder (``key.serializer.class``), the Partitioner (``partitioner.class``),
the EventHandler (``event.handler``, default
`DefaultEventHandler`) and the
CallbackHandler (``callback.handler``), and a
`Cluster` (metadata cache and one connection
per broker) opened in a nursery.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import trio

from kclient.client.cluster import Cluster, PartitionInfo
from kclient.client.producer.callbacks import CallbackHandler, overrides
from kclient.client.producer.collate import is_passthrough
from kclient.client.producer.data import ProducerData
from kclient.client.producer.delivery import RecordFuture, RecordMetadata, call_back, settle, track
from kclient.client.producer.event_handler import DefaultEventHandler, EventHandler, ProducerContext
from kclient.client.producer.partitioner import DefaultPartitioner, Partitioner
from kclient.client.producer.settings import settings_from_config
from kclient.client.producer.transaction_client import TransactionClient
from kclient.client.producer.transaction_types import GroupMetadata
from kclient.client.producer.transactions import TransactionManager
from kclient.client.serde import DefaultEncoder, Encoder
from kclient.config import ProducerConfig
from kclient.errors import ConfigError, FailedToSendMessageError, IllegalStateError, InvalidTopicError, KafkaError, ProducerClosedError
from kclient.net.throttle_stats import ThrottleTracker
from kclient.plugins import load_plugin

log = logging.getLogger(__name__)

#: Kafka's legal topic names (``org.apache.kafka.common.internals.Topic``):
#: 1-249 characters from ASCII letters, digits, ``.``, ``_`` and ``-``, and
#: not ``.`` or ``..``.
TOPIC_PATTERN = re.compile(r"[a-zA-Z0-9._-]{1,249}")
MAX_TOPIC_LENGTH = 249


def check_topic(topic: Any) -> None:
    """Check that ``topic`` is a legal Kafka topic name.

    Args:
        topic: The name to check.

    Raises:
        InvalidTopicError: ``topic`` is not a str, or not a legal name
            (Kafka error 17, INVALID_TOPIC_EXCEPTION).
    """
    if not isinstance(topic, str):
        raise InvalidTopicError(f"topic must be a str, not {type(topic).__name__} ({topic!r})")
    if topic in (".", "..") or not TOPIC_PATTERN.fullmatch(topic):
        why = (
            "it is empty"
            if not topic
            else f"it is longer than {MAX_TOPIC_LENGTH} characters"
            if len(topic) > MAX_TOPIC_LENGTH
            else "'.' and '..' are reserved"
            if topic in (".", "..")
            else "legal characters are ASCII letters, digits, '.', '_' and '-'"
        )
        raise InvalidTopicError(f"invalid topic name {topic!r}: {why}")


def as_config(config: ProducerConfig | Mapping[str, Any] | str) -> ProducerConfig:
    """A `ProducerConfig` from any of the forms the producers accept.

    Args:
        config: A `ProducerConfig` (returned as is), a mapping of Kafka
            property names, or a ``.properties`` path.

    Returns:
        The config.

    Raises:
        ConfigError: a missing required property, a bad value or an
            unreadable file.
    """
    return ProducerConfig.from_properties(config)


def _checked_send(check: Callable[[], None], send: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``send`` preceded by ``check`` (the transaction manager's
    `check_send_allowed`): a transactional producer's sends outside a
    transaction raise at once, as Kafka's."""

    @functools.wraps(send)
    async def checked(*args: Any, **kwargs: Any) -> Any:
        check()
        return await send(*args, **kwargs)

    return checked


class TrioProducer:
    """A producer for trio code: ``async with TrioProducer(config) as p``.

    Plug-ins are loaded in the constructor. No connection is made until
    the first send. To run it inside an existing nursery instead of
    ``async with``, call ``await p.open(nursery)`` and later
    ``await p.aclose()``.

    Args:
        config: a `ProducerConfig`, a mapping of Kafka property names, or a
            ``.properties`` path (``producer.type`` and the queue settings
            are ignored here: every ``send`` is sent at once).
        event_handler: overrides the config's ``event.handler`` (instance,
            class or dotted path).
        callback_handler: overrides the config's ``callback.handler``
            (likewise).

    Raises:
        ConfigError: a bad config or a plug-in that cannot be loaded.
    """

    def __init__(self, config: ProducerConfig | Mapping[str, Any] | str, *, event_handler: Any = None, callback_handler: Any = None) -> None:
        cfg = as_config(config)
        self.config = cfg
        self.settings = settings_from_config(cfg)
        # The plug-in bases are abstract classes (mypy's type-abstract: python/mypy#4717).
        self.encoder = load_plugin(cfg.serializer_class, Encoder, property_name="serializer.class", config=cfg)  # type: ignore[type-abstract]
        if cfg.key_serializer_class is cfg.serializer_class or cfg.key_serializer_class == cfg.serializer_class:
            self.key_encoder = self.encoder
        else:
            self.key_encoder = load_plugin(cfg.key_serializer_class, Encoder, property_name="key.serializer.class", config=cfg)  # type: ignore[type-abstract]
        self.partitioner = load_plugin(cfg.partitioner_class, Partitioner, property_name="partitioner.class", config=cfg)  # type: ignore[type-abstract]
        handler = event_handler if event_handler is not None else cfg.event_handler
        self.event_handler: EventHandler = load_plugin(
            handler if handler is not None else DefaultEventHandler, EventHandler, property_name="event.handler", config=cfg  # type: ignore[type-abstract]
        )
        callbacks = callback_handler if callback_handler is not None else cfg.callback_handler
        self.callback_handler: CallbackHandler = load_plugin(
            callbacks if callbacks is not None else CallbackHandler, CallbackHandler, property_name="callback.handler", config=cfg
        )
        self._before_send = overrides(self.callback_handler, "before_sending_data")
        self._on_error = overrides(self.callback_handler, "on_send_error")
        self._cluster: Cluster | None = None
        #: The Produce responses' ``throttle_time_ms`` (quotas), for
        #: `kclient.ProducerStatistics`.
        self.throttles = ThrottleTracker()
        self._nursery_manager: Any = None
        self._nursery: trio.Nursery | None = None
        self._closed = False
        self._completions: trio.MemorySendChannel[tuple[Any, Any]] | None = None
        #: Topic names `prepare` has checked (read by the blocking
        #: Producer's fast path; only ever grows).
        self.valid_topics: set[str] = set()
        #: The transaction manager (``transactional.id``), else None.
        self.transaction_manager: TransactionManager | None = (
            TransactionManager(cfg.transactional_id, transaction_timeout_ms=cfg.transaction_timeout_ms, retry_backoff_ms=cfg.retry_backoff_ms)
            if cfg.transactional_id is not None
            else None
        )
        self._transactions: TransactionClient | None = None
        if self.transaction_manager is not None:
            check = self.transaction_manager.check_send_allowed
            self.send = _checked_send(check, self.send)  # type: ignore[method-assign,assignment]
            self.send_with_result = _checked_send(check, self.send_with_result)  # type: ignore[method-assign,assignment]
        if self.transaction_manager is not None and not isinstance(self.event_handler, DefaultEventHandler):
            raise ConfigError(
                f"Cannot set transactional.id={cfg.transactional_id!r} with event.handler={type(self.event_handler).__name__}: "
                "only the default event handler (or a subclass of DefaultEventHandler) adds partitions to the transaction"
            )

    @property
    def cluster(self) -> Cluster:
        """The `Cluster` (metadata cache, connections).

        Raises:
            ProducerClosedError: before `open`.
        """
        if self._cluster is None:
            raise ProducerClosedError("the producer is not open")
        return self._cluster

    @property
    def closed(self) -> bool:
        """True once `aclose` was called."""
        return self._closed

    @property
    def accumulates(self) -> bool:
        """Whether the async send thread may batch per partition
        (`kclient.client.producer.accumulator`): the default event handler
        (its pipelined ``start``) is in use. A custom ``event.handler`` gets
        the queue's batches as before."""
        handler = self.event_handler
        return type(handler).handle is DefaultEventHandler.handle and hasattr(handler, "start")

    @property
    def sticky_keyless(self) -> bool:
        """Whether keyless records use the sticky partitioner (KIP-480): no
        ``partitioner.class`` other than the default is configured."""
        return type(self.partitioner) is DefaultPartitioner

    @property
    def hashes_keys(self) -> bool:
        """Whether a keyed record's partition is murmur2 of its key as given
        (the default partitioner, and a pass-through or default key encoder)."""
        key_encoder = self.key_encoder
        return self.sticky_keyless and (is_passthrough(key_encoder) or type(key_encoder) is DefaultEncoder)

    def cached_partitions(self, topic: str) -> tuple[PartitionInfo, ...]:
        """A topic's partitions in the cached metadata (no request).

        Args:
            topic: The topic.

        Returns:
            Its partitions sorted by id; ``()`` when not known (or not open).
        """
        cluster = self._cluster
        return cluster.metadata.partitions_for(topic) if cluster is not None else ()

    async def load_partitions(self, topic: str) -> tuple[PartitionInfo, ...]:
        """A topic's partitions, fetching its metadata when not cached.

        Args:
            topic: The topic.

        Returns:
            Its partitions; ``()`` when they cannot be had now (the send
            path retries and reports that later).
        """
        if self._cluster is None:
            return ()
        try:
            return await self._cluster.partitions_for(topic, retries=0)
        except KafkaError:
            return ()

    async def open(self, nursery: trio.Nursery) -> None:
        """Create the Cluster and open the EventHandler (``async with`` calls
        this). Connects lazily, on the first send.

        Args:
            nursery: where the Cluster's connection readers and the batch
                completer run; it must outlive the producer (close the
                producer with `aclose` before it exits).
        """
        cfg = self.config
        refresh = cfg.topic_metadata_refresh_interval_ms
        self._nursery = nursery
        self._in_flight = trio.Semaphore(max(1, cfg.max_in_flight_requests_per_connection))
        self._cluster = Cluster(
            nursery,
            cfg.metadata_broker_list,
            client_id=cfg.client_id or "kclient-producer",
            # The broker may take request.timeout.ms to gather acks; give the
            # response a little longer to arrive before giving up on it.
            request_timeout_ms=cfg.request_timeout_ms + 1000,
            retry_backoff_ms=max(1, cfg.retry_backoff_ms),
            metadata_max_age_ms=refresh if refresh >= 0 else 2**62,
            security=cfg.security,
        )
        self._cluster.throttles = self.throttles
        if self.transaction_manager is not None:
            self._transactions = TransactionClient(self.transaction_manager, self._cluster)
        context = ProducerContext(
            config=cfg,
            settings=self.settings,
            cluster=self._cluster,
            encoder=self.encoder,
            key_encoder=self.key_encoder,
            partitioner=self.partitioner,
            transactions=self._transactions,
        )
        await self.event_handler.open(context)
        # Batches in flight are completed in submission order by one task
        # (cheaper than a task per batch; bounded by the in-flight semaphore).
        self._completions, completions = trio.open_memory_channel(math.inf)
        nursery.start_soon(self._completer, completions)

    async def __aenter__(self) -> TrioProducer:
        self._nursery_manager = trio.open_nursery()
        nursery = await self._nursery_manager.__aenter__()
        try:
            await self.open(nursery)
        except BaseException as exc:
            manager, self._nursery_manager = self._nursery_manager, None
            if not await manager.__aexit__(type(exc), exc, exc.__traceback__):
                raise
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        manager, self._nursery_manager = self._nursery_manager, None
        try:
            await self.aclose()
        except BaseException as exc:
            if manager is not None:
                await manager.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        if manager is not None:
            suppress: bool | None = await manager.__aexit__(*exc_info)
            return suppress
        return None

    def prepare(self, data_or_list: ProducerData | Iterable[ProducerData]) -> list[ProducerData]:
        """Normalize ``send``'s argument and check every topic name. Plain
        function, safe from any thread.

        Args:
            data_or_list: One ProducerData or an iterable of them.

        Returns:
            The ProducerData as a list (``data_or_list`` itself when it is
            a list).

        Raises:
            InvalidTopicError: an illegal topic name.
            TypeError: something that is not ProducerData.
        """
        events: list[Any]
        if hasattr(data_or_list, "messages") and hasattr(data_or_list, "topic"):
            events = [data_or_list]
        elif isinstance(data_or_list, list):
            events = data_or_list
        else:
            try:
                events = list(data_or_list)
            except TypeError:
                raise TypeError(f"send() takes a ProducerData or a list of them, not {type(data_or_list).__name__}") from None
        valid = self.valid_topics
        for d in events:
            try:
                topic = d.topic
            except AttributeError:
                raise TypeError(f"send() takes ProducerData items, not {type(d).__name__}") from None
            if topic not in valid:
                check_topic(topic)
                valid.add(topic)
        return events

    async def send(self, data_or_list: ProducerData | Iterable[ProducerData], *, callback: Callable[[RecordMetadata | None, BaseException | None], Any] | None = None) -> None:
        """Send records and wait for the acknowledgements
        (``request.required.acks``; with 0, until written).

        Calls the CallbackHandler's ``before_sending_data`` first and its
        ``on_send_error`` on failure (both on this task).

        Args:
            data_or_list: One ProducerData or an iterable of them.
            callback: ``callback(metadata, exception)``, called once per
                record on this task before ``send`` returns or raises, as
                `Producer.send`'s: `RecordMetadata` and None once
                acknowledged, None and the error (a
                `FailedToSendMessageError` naming the record's partition)
                if not.

        Raises:
            InvalidTopicError: an illegal topic name (nothing is sent).
            FailedToSendMessageError: records could not be written (after
                ``message.send.max.retries`` retries for retriable errors);
                the broker or connection error is its ``__cause__``.
            ProducerClosedError: the producer is closed or not open.
        """
        if self._closed or self._cluster is None:
            raise ProducerClosedError("the producer is closed" if self._closed else "the producer is not open")
        events = self.prepare(data_or_list)
        if callback is not None:
            futures, error = await self._send_tracked(events)
            call_back(futures, callback)
            if error is not None:
                raise error
            return
        await self._send_hooked(events)

    async def send_with_result(self, data_or_list: ProducerData | Iterable[ProducerData]) -> list[RecordFuture]:
        """Send records, wait until each is acknowledged or failed, and
        return their results: one done `RecordFuture` per record (each
        message of each ProducerData, in order), as `Producer.send_with_result`.
        Delivery errors are in the futures, not raised.

        Args:
            data_or_list: One ProducerData or an iterable of them.

        Returns:
            The futures, all done: ``f.result()`` is the record's
            `RecordMetadata` or raises its error.

        Raises:
            InvalidTopicError: an illegal topic name (nothing is sent).
            ProducerClosedError: the producer is closed or not open.
        """
        if self._closed or self._cluster is None:
            raise ProducerClosedError("the producer is closed" if self._closed else "the producer is not open")
        futures, _ = await self._send_tracked(self.prepare(data_or_list))
        return futures

    async def _send_tracked(self, events: list[ProducerData]) -> tuple[list[RecordFuture], Exception | None]:
        tracked, reports, futures = track(events, None, True, None)
        error: Exception | None = None
        try:
            await self._send_hooked(tracked)
        except Exception as exc:
            error = exc
        except BaseException as exc:  # cancelled: the outcome is not known
            settle(reports, FailedToSendMessageError(f"the send was interrupted ({type(exc).__name__}) before it was acknowledged; the record may be in the log"))
            raise
        settle(reports, error)
        return futures, error  # type: ignore[return-value]

    async def _send_hooked(self, events: list[ProducerData]) -> None:
        if self._before_send:
            events = list(self.callback_handler.before_sending_data(events) or ())
        try:
            await self.send_batch(events)
        except Exception as exc:
            if self._on_error:
                self.callback_handler.on_send_error(events, exc)
            raise

    async def send_batch(self, events: list[ProducerData]) -> None:
        """Hand prepared records to the EventHandler and wait until they are
        acknowledged (the blocking Producer's path into trio; no hooks run).

        Args:
            events: ProducerData already through `prepare` and the
                ``before_sending_data`` hook.

        Raises:
            FailedToSendMessageError: records could not be written.
            ProducerClosedError: the producer is closed or not open.
        """
        if self._closed or self._cluster is None:
            raise ProducerClosedError("the producer is closed" if self._closed else "the producer is not open")
        if events:
            await self.event_handler.handle(events)

    async def submit_batch(self, events: list[ProducerData], on_done: Callable[[BaseException | None], None]) -> None:
        """Pipelined `send_batch` (``max.in.flight.requests.per.connection``
        > 1): wait for a free in-flight slot, write the batch's Produce
        requests, and return.

        Batches submitted one after another reach each broker in that
        order. An ``event.handler`` that replaces ``handle`` is called one
        batch at a time instead (its ``handle`` runs before this returns).

        Args:
            events: ProducerData already through `prepare` and the hooks.
            on_done: called later, on the trio thread, once the broker
                answered or the retries ran out: with None on success, with
                the error (e.g. `FailedToSendMessageError`) otherwise.

        Raises:
            ProducerClosedError: the producer is closed or not open
                (``on_done`` is then not called).
        """
        if self._closed or self._cluster is None or self._nursery is None:
            raise ProducerClosedError("the producer is closed" if self._closed else "the producer is not open")
        handler = self.event_handler
        if not events:
            on_done(None)
            return
        if type(handler).handle is not DefaultEventHandler.handle or not hasattr(handler, "start"):
            try:
                await handler.handle(events)
            except Exception as exc:
                on_done(exc)
            else:
                on_done(None)
            return
        try:
            self._in_flight.acquire_nowait()  # a free slot: no trip through the scheduler
        except trio.WouldBlock:
            await self._in_flight.acquire()
        try:
            finish = await handler.start(events)
        except Exception as exc:
            self._in_flight.release()
            on_done(exc)
            return
        except BaseException:
            self._in_flight.release()
            raise
        try:
            self._completions.send_nowait((finish, on_done))  # type: ignore[union-attr]
        except trio.ClosedResourceError:  # closing: complete it here
            await self._complete(finish, on_done)

    async def _completer(self, completions: trio.MemoryReceiveChannel[tuple[Any, Any]]) -> None:
        async with completions:
            async for finish, on_done in completions:
                await self._complete(finish, on_done)

    async def _complete(self, finish: Callable[[], Awaitable[None]], on_done: Callable[[BaseException | None], None]) -> None:
        error: BaseException | None = None
        try:
            await finish()
        except Exception as exc:
            error = exc
        finally:
            self._in_flight.release()
        on_done(error)

    # -- transactions (KIP-98) ------------------------------------------------

    def _transactional(self) -> TransactionClient:
        if self.transaction_manager is None:
            raise IllegalStateError("Cannot use a transactional method without setting transactional.id")
        if self._transactions is None:
            raise ProducerClosedError("the producer is not open")
        return self._transactions

    async def _drain_in_flight(self) -> None:
        """Wait until every batch `submit_batch` wrote was answered."""
        slots = max(1, self.config.max_in_flight_requests_per_connection)
        for _ in range(slots):
            await self._in_flight.acquire()
        for _ in range(slots):
            self._in_flight.release()

    async def init_transactions(self, timeout_ms: int | None = None) -> None:
        """Get the transactional id's producer id and epoch (InitProducerId,
        KIP-98): the coordinator fences any older producer with the same
        ``transactional.id`` and completes its open transaction. Call once,
        before the first transaction.

        Args:
            timeout_ms: The longest wait (ms); None: no bound. After a
                timeout the call may be made again.

        Raises:
            IllegalStateError: No ``transactional.id``, or called twice.
            KafkaTimeoutError: Not done in time.
            ProducerFencedError: A newer producer has the id (fatal).
            KafkaError: Another error of the coordinator.
        """
        client = self._transactional()
        await client.wait(client.manager.init_transactions(), timeout_ms)

    def begin_transaction(self) -> None:
        """Start a transaction (local: partitions are added as records are sent).

        Raises:
            IllegalStateError: `init_transactions` not done, or a
                transaction is already in progress.
            KafkaError: The producer is in an error state (fatal errors such
                as `ProducerFencedError` are raised by every later call).
        """
        self._transactional().manager.begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_metadata: GroupMetadata, timeout_ms: int | None = None) -> None:
        """Commit a consumer group's offsets with the transaction (KIP-98,
        KIP-447): they become the group's committed offsets only if the
        transaction commits.

        Args:
            offsets: ``{TopicPartition or (topic, partition): next offset to
                consume}`` (an int or an `OffsetAndMetadata`).
            group_metadata: The consumer's ``group_metadata()``.
            timeout_ms: The longest wait (ms); None: no bound.

        Raises:
            IllegalStateError: No transaction in progress.
            KafkaTimeoutError: Not done in time.
            KafkaError: The coordinator refused (abortable: call
                `abort_transaction`; fatal: close the producer).
        """
        client = self._transactional()
        await client.wait(client.manager.send_offsets_to_transaction(offsets, group_metadata), timeout_ms)

    async def commit_transaction(self, timeout_ms: int | None = None) -> None:
        """Wait until every record sent in the transaction is acknowledged,
        then commit it (EndTxn): read_committed consumers see its records.

        Args:
            timeout_ms: The longest wait (ms); None: no bound. After a
                timeout the call may be made again.

        Raises:
            IllegalStateError: No transaction in progress.
            KafkaTimeoutError: Not done in time.
            KafkaError: An abortable error (call `abort_transaction`) or a
                fatal one (`ProducerFencedError`: close the producer).
        """
        client = self._transactional()
        result = client.manager.commit_transaction()
        await self._drain_in_flight()
        await client.wait(result, timeout_ms)

    async def abort_transaction(self, timeout_ms: int | None = None) -> None:
        """Abort the transaction (also after an abortable error): its records
        are never seen by read_committed consumers.

        Args:
            timeout_ms: The longest wait (ms); None: no bound.

        Raises:
            IllegalStateError: No transaction in progress.
            KafkaTimeoutError: Not done in time.
            KafkaError: A fatal error (`ProducerFencedError`).
        """
        client = self._transactional()
        result = client.manager.abort_transaction()
        await self._drain_in_flight()
        await client.wait(result, timeout_ms)

    async def aclose(self) -> None:
        """Close the EventHandler and every broker connection (idempotent).

        Sends after this raise `ProducerClosedError`; batches still in flight
        complete with the connection error through their ``on_done``.
        """
        if self._closed:
            return
        self._closed = True
        try:
            await self.event_handler.aclose()
        finally:
            try:
                if self._cluster is not None:
                    with trio.CancelScope(shield=True):
                        await self._cluster.aclose()
            finally:
                # The completer finishes what is left (failed by the closed
                # connections), then ends.
                if self._completions is not None:
                    self._completions.close()
