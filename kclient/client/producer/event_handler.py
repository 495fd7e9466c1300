"""EventHandler: serialize, partition, group per leader, send (trio side).

Source: the Kafka 0.8 documentation, section 5.1 "API Design"
(https://kafka.apache.org/08/documentation.html#apidesign): "a background thread
(kafka.producer.async.ProducerSendThread) dequeues batches of data and lets
the kafka.producer.EventHandler serialize and send the data to the
appropriate kafka broker partition. A custom event handler can be plugged in
through the event.handler config parameter."

`DefaultEventHandler` is what both producer modes use. For one batch
(a list of `ProducerData`) it

1. looks up each topic's partitions in the cluster metadata cache;
2. serializes keys (``key.serializer.class``) and values
   (``serializer.class``) with ``to_message(value) -> bytes``;
3. picks one partition per ProducerData with ``partitioner.class``
   (``partition(key_bytes_or_None, num_partitions) -> int``), checking that
   the result is in range;
4. splits each partition's records into as few chunks as the size limit
   allows (usually one) and, once the leader's Produce version is known,
   encodes each chunk as ONE record batch v2, or as one message set v0/v1
   when that version cannot carry v2 (below; the whole set is compressed
   into one wrapper message, never message by message), compressed with
   ``compression.codec`` when the topic is in ``compressed.topics`` (all
   topics when that list is empty), with the timestamp recorded when the
   user called ``send``;
5. sends one Produce request per leader broker (several when the batches
   exceed ``max.request.size``), concurrently to different brokers, with the
   highest Produce version both sides support, capped by ``api.version``;
6. retries only the partitions that failed with a retriable error, up to
   ``message.send.max.retries`` times, backing off exponentially from
   ``retry.backoff.ms`` (doubling, capped at ``retry.backoff.max.ms``) and refreshing metadata in between.
   An `AuthenticationError` (TLS handshake, SASL: KIP-43, KIP-152) is not
   retriable: the send raises that error itself (its ``__cause__`` the
   `FailedToSendMessageError` counting the lost messages).

Message format by Produce version (Kafka protocol guide; kafka-python's
``max_usable_produce_magic``): v3+ carries record batch v2 (zstd from v7),
v2 message set v1 (with timestamps), v0-1 message set v0 (no timestamps,
lz4 with the KIP-57 header checksum). The version is the highest both the
broker (ApiVersions) and ``api.version`` allow
(`kclient.client.producer.settings.produce_version_cap`): an old broker or
a cap such as ``api.version=0.10`` gets v0/v1 message sets. Record headers
(``ProducerData.headers``) need v2 (KIP-82): with v0/v1 the partition fails
with UnsupportedForMessageFormatError. zstd needs v7 (KIP-110): below it the
send fails with UnsupportedCompressionTypeError.

The steps live in modules of their own, each given its collaborators by
`DefaultEventHandler.open`: serializing and partitioning (steps 1-3) in
`kclient.client.producer.collate`, chunking and encoding (step 4) in
`kclient.client.producer.batching`, one attempt of writing the requests and
reading the answers (step 5) in `kclient.client.producer.sender`, the errors
of the partitions given up on in `kclient.client.producer.failures`; the
settings in `kclient.client.producer.settings`. This module keeps the
retries (step 6) and the idempotent producer's slots.

Failures raise `FailedToSendMessageError` naming the
topic-partitions and how many messages were lost, with the broker or
connection error chained as ``__cause__``. The error also carries
``lost_messages`` (int) and ``failed_partitions`` (dict of (topic,
partition) -> message count; partition -1 when the topic itself failed).

Of those, ``possibly_written`` (and ``possibly_written_partitions``) counts
the messages whose outcome is unknown: an attempt wrote their Produce
request and then got no answer that settles it (no response within
``request.timeout.ms``, the connection lost after the write, or
REQUEST_TIMED_OUT / NOT_ENOUGH_REPLICAS_AFTER_APPEND from the broker), or a
later request's answer acknowledged them while an earlier batch of their
partition failed. They may be in the log; the rest (``not_sent``) are not:
a failed write (an incomplete frame is never processed), a refused
connection, unknown metadata or a broker error code before the append.
A retry of a possibly-written batch (step 6) may duplicate it, unless
``enable.idempotence`` is set: then the batches carry a producer id and
per-partition sequence numbers (KIP-98), a retry resends the same bytes and
the leader (or a new leader, which copied them) recognises a batch it
already holds. Up to ``max.in.flight.requests.per.connection`` (at most
5) batches per partition are then in flight, numbered in the order they
are written; a retry is resent only once every earlier batch of its
partition is settled, and one answered OUT_OF_ORDER_SEQUENCE_NUMBER that
was written while an earlier batch of its partition was unsettled is
retried after it with the same sequence and bytes
(`kclient.client.producer.idempotence` has the state and the rules after a
final failure).

Every retry refreshes the metadata first (a lost connection, a timeout or
NOT_ENOUGH_REPLICAS may all mean the leader moved). A topic whose metadata
cannot be had because no broker answers (every bootstrap broker down, a
producer started before its cluster) is retried the same way, backing off
from ``retry.backoff.ms`` up to ``message.send.max.retries`` times, then
fails with `NoBrokersAvailableError` as the cause. The failed records
themselves are in ``FailedToSendMessageError.failed_records``.

Records sent with a delivery callback or future arrive as
`kclient.client.producer.delivery.TrackedData`: when their batch is
acknowledged each gets a `RecordMetadata` (offset = the partition's
``base_offset`` + its index in the batch, -1 with acks=0; timestamp = the
``log_append_time_ms`` the broker answered, else its CreateTime); when its
partition finally fails, a `FailedToSendMessageError` naming that partition
(the same error `kclient.client.producer.failures.failure_error` builds,
for that partition alone).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kclient._accel import speedups as _speedups
from kclient.client.producer.batching import BatchBuilder, PartitionSend
from kclient.client.producer.collate import Collator, CompiledCollate, is_passthrough, tracked_of
from kclient.client.producer.data import ProducerData
from kclient.client.producer.delivery import TrackedData
from kclient.client.producer.failures import Failed, PartitionFailure, raise_failure, raiser
from kclient.client.producer.idempotence import RESET_CODES, IdempotentProducerState
from kclient.client.producer.partitioner import DefaultPartitioner
from kclient.client.producer.sender import PARTITION_OVERHEAD, Sender, Written
from kclient.client.producer.settings import ProducerSettings
from kclient.client.producer.transaction_client import TransactionClient
from kclient.client.serde import DefaultEncoder
from kclient.clock import now_ms
from kclient.errors import (
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    FailedToSendMessageError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    UnsupportedForMessageFormatError,
)

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.cluster import Cluster

__all__ = ["PARTITION_OVERHEAD", "DefaultEventHandler", "EventHandler", "ProducerContext"]

log = logging.getLogger(__name__)


@attrs.frozen
class ProducerContext:
    """What a producer hands its EventHandler in `EventHandler.open`:
    the config, its `ProducerSettings`, the trio
    `Cluster` (metadata + connections), and
    the plug-ins (value encoder, key encoder, partitioner)."""

    config: Any
    settings: ProducerSettings
    cluster: Cluster
    encoder: Any
    key_encoder: Any
    partitioner: Any
    #: The transactional producer's `TransactionClient`, or None.
    transactions: Any = None


class EventHandler(abc.ABC):
    """Base class of the producer's event handlers (``event.handler``).

    Lifecycle, all on the producer's trio loop: ``await open(context)`` once,
    then ``await handle(events)`` per batch (possibly concurrently from
    several tasks in sync mode), then ``await aclose()``. Plug one in by
    instance or by dotted class path (built with no arguments). A subclass
    of `DefaultEventHandler` can wrap ``handle`` to add tracing or
    monitoring around the default send path.
    """

    #: The producer's context, from `open` on.
    context: ProducerContext | None

    async def open(self, context: ProducerContext) -> None:
        """Bind to the producer (called once, before the first ``handle``).

        Args:
            context: The producer's config, settings, cluster and plug-ins.
        """
        self.context = context

    @abc.abstractmethod
    async def handle(self, events: list[ProducerData]) -> None:
        """Serialize and send records; return once they are acknowledged
        per ``request.required.acks``.

        Args:
            events: The batch's ProducerData (keys and values not yet
                serialized).

        Raises:
            FailedToSendMessageError: records could not be written.
        """

    async def aclose(self) -> None:  # noqa: B027  an optional hook: by default there is nothing to release
        """Release resources (called once by the producer's close)."""


def compiled_collate(context: ProducerContext) -> CompiledCollate | None:
    """The compiled collate loop for ``context``'s plug-ins, or None.

    ``kclient._speedups.collate_default`` takes the default plug-ins only:
    the `DefaultPartitioner` and, for keys and values, a pass-through
    encoder or the `DefaultEncoder`.

    Args:
        context: The producer's context.

    Returns:
        ``collate(datas, n_parts, now)`` (see
        `kclient.client.producer.collate.CompiledCollate`), or None when
        the compiled module is absent or a plug-in is another one.
    """
    if _speedups is None or type(context.partitioner) is not DefaultPartitioner:
        return None
    if not all(is_passthrough(e) or type(e) is DefaultEncoder for e in (context.key_encoder, context.encoder)):
        return None
    fast = _speedups.collate_default
    random = context.partitioner.random
    bytes_values = not is_passthrough(context.encoder)

    def collate(datas: list[Any], n_parts: int, now: int) -> dict[int, list[Any]] | None:
        grouped: dict[int, list[Any]] | None = fast(datas, ProducerData, n_parts, now, random, bytes_values)
        return grouped

    return collate


class DefaultEventHandler(EventHandler):
    """The default pipeline stage: serialize, partition, build one v2 batch
    per partition, send per leader with retries (module docstring)."""

    def __init__(self) -> None:
        self.context: ProducerContext | None = None

    async def open(self, context: ProducerContext) -> None:
        """Bind to the producer and build the collator, the batch builder
        and the sender.

        Args:
            context: The producer's config, settings, cluster and plug-ins.
        """
        self.context = context
        self._settings = s = context.settings
        self._cluster = context.cluster
        self._collator = Collator(
            context.encoder,
            context.key_encoder,
            context.partitioner,
            compiled=compiled_collate(context),
            compiled_group=_speedups.group_by_topic if _speedups is not None else None,
        )
        self._batches = BatchBuilder(s)
        self._sender = Sender(context.cluster, s, self._batches)
        #: The idempotent producer's state (enable.idempotence), else None.
        self.idempotence: IdempotentProducerState | None = (
            IdempotentProducerState(context.cluster, retries=s.retries, backoff_ms=s.backoff_ms, max_in_flight=s.max_in_flight) if s.idempotence else None
        )
        #: The transactional producer's `TransactionClient` (transactional.id), else None.
        self.transactions: TransactionClient | None = context.transactions

    async def _partitions_for(self, topic: str) -> tuple[Any, ...]:
        """The topic's partitions, retrying an unreachable cluster (every
        bootstrap broker down, a connection lost, no answer) with the send
        retries' backoff, up to ``message.send.max.retries`` times: a
        producer started before its brokers waits for them (Kafka 0.8's
        producer retries its metadata fetch the same way). Broker answers
        (unknown topic, no leader) are not retried here:
        `Cluster.partitions_for` already waits for leaders."""
        s = self._settings
        attempt = 0
        while True:
            try:
                return await self._cluster.partitions_for(topic)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                if attempt >= s.retries:
                    raise
                attempt += 1
                delay = min(s.backoff_ms * (2 ** (attempt - 1)), s.backoff_max_ms)
                log.info("no broker answered for topic %r (%s); retry %d of %d in %d ms", topic, exc, attempt, s.retries, delay)
                await trio.sleep(delay / 1000)

    # -- step 1-3: serialize and partition ---------------------------------

    async def _collate(self, events: list[ProducerData], failed: Failed) -> dict[tuple[str, int], PartitionSend]:
        """Steps 1-3: the batch's records per topic-partition. A topic whose
        metadata cannot be had goes into ``failed`` (partition -1).

        Raises:
            FailedToSendMessageError: a plug-in (encoder, partitioner)
                failed: a programming or data error, so nothing of this
                batch is sent.
        """
        now = now_ms()
        collator = self._collator
        out: dict[tuple[str, int], PartitionSend] = {}
        for topic, datas in collator.group(events).items():
            try:
                parts = await self._partitions_for(topic)
            except KafkaError as exc:
                failed[(topic, -1)] = topic_failure(datas, exc)
                continue
            try:
                by_partition = collator.collate(topic, datas, len(parts), now)
            except Exception as exc:
                lost = sum(len(d.messages) for d in events)
                raise FailedToSendMessageError(
                    f"cannot serialize or partition a message for topic {topic!r}: {exc}",
                    lost_messages=lost,
                    failed_partitions={(topic, -1): lost},
                ) from exc
            for p, target in by_partition.items():
                out[(topic, p)] = target
        return out

    # -- step 4-6: encode, send with retries --------------------------------

    async def handle(self, events: list[ProducerData]) -> None:
        """Serialize, partition and send records with retries (steps 1-6 of
        the module docstring); return once they are acknowledged.

        Args:
            events: The batch's ProducerData.

        Raises:
            FailedToSendMessageError: some partition could not be written
                (``lost_messages``, ``failed_partitions``; the broker or
                connection error as ``__cause__``).
        """
        finish = await self.start(events, busy_poll=True)
        await finish()

    async def start(self, events: list[ProducerData], *, busy_poll: bool = False) -> Callable[[], Awaitable[None]]:
        """The first half of `handle`: serialize, partition, build the
        batches and WRITE the first attempt's Produce requests.

        A producer keeping several batches in flight
        (``max.in.flight.requests.per.connection``) calls ``start`` for each
        batch in order, so every partition's data reaches the broker in order
        (a retry may still reorder, as in Kafka).

        Args:
            events: The batch's ProducerData.
            busy_poll: The caller waits for the acknowledgement at once
                (`handle`): the first responses are awaited with
                ``socket.busy.poll.us`` of polling.

        Returns:
            A coroutine function that awaits the responses and retries, and
            raises `FailedToSendMessageError` as `handle` does.
        """
        if not events:
            return _nothing
        failed: Failed = {}
        parts = await self._collate(events, failed)
        spin = self._settings.busy_poll_us / 1e6 if busy_poll else 0.0
        if self.idempotence is not None and parts:
            return await self._start_idempotent(parts, failed, spin)
        pending = self._build(parts.values(), failed, None)
        plan = await self._sender.write_round(pending) if pending else []

        async def finish() -> None:
            await self._finish(pending, plan, failed, spin)

        return finish

    async def _start_idempotent(self, parts: dict[tuple[str, int], PartitionSend], failed: Failed, spin: float) -> Callable[[], Awaitable[None]]:
        """`start` for the idempotent producer: wait for a free in-flight
        slot of each partition, then number and write the batches (in one
        go, so each partition's batches reach the broker in sequence order).
        """
        idem = self.idempotence
        assert idem is not None
        slots = await idem.acquire(parts)
        try:
            async with idem.ordering():
                if not await self._producer_id(parts, failed):
                    idem.release(slots)
                    return raiser(failed)
                idem.enter(parts.values())
                pending = self._build(parts.values(), failed, idem.stamp)  # no await from the producer id to the last stamp
                idem.writing(pending)
                plan = await self._sender.write_round(pending) if pending else []
        except BaseException:
            self._leave(parts.values(), slots)
            raise

        async def finish() -> None:
            try:
                await self._finish(pending, plan, failed, spin)
            finally:
                self._leave(parts.values(), slots)

        return finish

    def _leave(self, parts: Iterable[PartitionSend], slots: list[Any]) -> None:
        """Take the idempotent ``parts`` out of their partitions' queues (if
        still there) and give back their in-flight slots."""
        idem = self.idempotence
        assert idem is not None
        for part in parts:
            idem.settle(part)
        idem.release(slots)

    async def _producer_id(self, parts: dict[tuple[str, int], PartitionSend], failed: Failed) -> bool:
        """Make sure the idempotent producer has its producer id (KIP-98).
        False: it could not get one; every part went into ``failed``."""
        idem = self.idempotence
        assert idem is not None
        txn = self.transactions
        try:
            if txn is not None:
                # KIP-98: a partition's batches wait until AddPartitionsToTxn
                # put it in the transaction; the manager's producer id is used.
                await txn.add_partitions(parts)
                idem.adopt(txn.manager.producer_id, txn.manager.producer_epoch)
            await idem.ensure_producer_id()
        except KafkaError as exc:
            for part in parts.values():
                failed[(part.topic, part.partition)] = unsent(part, part.records, exc)
            return False
        return True

    def _build(self, parts: Iterable[PartitionSend], failed: Failed, stamp: Callable[[PartitionSend], None] | None) -> list[PartitionSend]:
        """Step 4: chunk and encode each part's records (``stamp``: the
        idempotent producer's numbering); a part that cannot be encoded goes
        into ``failed``. Returns the parts with batches to send."""
        idem = self.idempotence
        pending = []
        for part in parts:
            try:
                self._batches.build(part, stamp=stamp)
            except (MessageSizeTooLargeError, UnsupportedForMessageFormatError, TypeError) as exc:
                records = part.records or [r for c in part.chunks for r in c]
                if idem is not None:
                    idem.rewind(part)  # the last numbered of its partition (in `ordering`)
                    idem.settle(part)
                failed[(part.topic, part.partition)] = unsent(part, records, exc)
                part.clear_batches()
                continue
            if part.batches:
                pending.append(part)
        return pending

    async def _finish(self, pending: list[PartitionSend], plan: list[Written], failed: Failed, spin: float = 0.0) -> None:
        """Step 5-6: read the first attempt's answers, retry the partitions
        that failed with a retriable error, and raise for those given up on."""
        attempt = 0
        if pending:
            await self._sender.read_round(plan, pending, spin)
        while pending:
            retry = self._settle_round(pending, failed, attempt)
            if not retry:
                break
            attempt += 1
            await self._back_off(retry, attempt)
            if self.idempotence is not None:
                retry = await self._await_turns(retry, failed)
                if not retry:
                    break
            pending = retry
            await self._sender.send_round(pending)
        if failed:
            if self.transactions is not None:
                self._fail_transaction(failed)
            raise_failure(failed, attempt)

    def _fail_transaction(self, failed: Failed) -> None:
        """A record of the transaction could not be written: the transaction
        must be aborted (abortable error; fatal for fencing or authorization,
        as Kafka's ``maybeTransitionToErrorState``)."""
        manager = self.transactions.manager  # type: ignore[union-attr]
        if manager.has_error():
            return
        (topic, partition), failure = next(iter(failed.items()))
        err = failure.error
        manager.maybe_transition_to_error_state(err if isinstance(err, KafkaError) else KafkaError(f"{topic}-{partition}: {err}"))

    def _settle_round(self, pending: list[PartitionSend], failed: Failed, attempt: int) -> list[PartitionSend]:
        """After attempt number ``attempt`` (0: the first): the parts to
        retry; the others with batches left failed for good (into
        ``failed``)."""
        retries = self._settings.retries
        idem = self.idempotence
        retry = []
        for part in pending:
            if not part.batches:
                if idem is not None:
                    idem.settle(part)
                continue
            err = part.error
            if idem is not None:
                err, retriable = self._idempotent_verdict(part, err)
            else:
                retriable = err is not None and getattr(err, "retriable", False)
            if retriable and attempt < retries:
                retry.append(part)
                continue
            self._give_up(part, err, failed)
        return retry

    def _give_up(self, part: PartitionSend, err: BaseException | None, failed: Failed) -> None:
        """Record the final failure of ``part``'s pending batches in
        ``failed`` (and keep the idempotent numbering consistent)."""
        possibly = part.possibly_written()
        records = [r for c in part.chunks for r in c]
        failed[(part.topic, part.partition)] = PartitionFailure(part.pending_messages, err, possibly, [(r[0], r[1]) for r in records], tracked_of(part, records))
        if self.idempotence is not None and part.sequences is not None:
            self._after_final_failure(part, err, possibly)

    def _idempotent_verdict(self, part: PartitionSend, err: BaseException | None) -> tuple[BaseException | None, bool]:
        """The error ``part`` fails with and whether it may be retried, for
        the idempotent producer: a part behind an earlier batch of its
        partition that finally failed is never retried (its sequences can
        no longer be appended: it fails with that batch's error); an
        OUT_OF_ORDER_SEQUENCE_NUMBER answer behind an earlier unsettled
        batch is retried (the broker waits for that batch first, Kafka's
        ``TransactionManager.canRetry``; `IdempotentProducerState.behind`)."""
        idem = self.idempotence
        assert idem is not None
        earlier = idem.doomed(part)
        if earlier is not None:
            return earlier, False
        if getattr(err, "code", None) == OUT_OF_ORDER_SEQUENCE_NUMBER and idem.behind(part):
            return err, True
        return err, err is not None and getattr(err, "retriable", False)

    async def _await_turns(self, retry: list[PartitionSend], failed: Failed) -> list[PartitionSend]:
        """Wait until each part to retry is the first unsettled batch of its
        partition (retries are resent in sequence order); the parts doomed
        meanwhile fail (`_give_up`). Returns the parts to resend."""
        idem = self.idempotence
        assert idem is not None
        for part in retry:
            await idem.wait_turn(part)
        out = []
        for part in retry:
            earlier = idem.doomed(part)
            if earlier is None:
                out.append(part)
            else:
                self._give_up(part, earlier, failed)
        idem.writing(out)
        return out

    async def _back_off(self, retry: list[PartitionSend], attempt: int) -> None:
        """Wait before retry number ``attempt`` (exponential from
        ``retry.backoff.ms``, capped at ``retry.backoff.max.ms``) and refresh
        the metadata of the parts' topics: any retry may meet a moved leader
        (a lost connection, a timeout, NOT_ENOUGH_REPLICAS while the ISR
        shrinks)."""
        s = self._settings
        log.debug(
            "retrying %d partition(s) (attempt %d of %d) after %s",
            len(retry),
            attempt,
            s.retries,
            "; ".join(f"{p.topic}-{p.partition}: {p.error}" for p in retry[:5]),
        )
        await trio.sleep(min(s.backoff_ms * (2 ** (attempt - 1)), s.backoff_max_ms) / 1000)
        try:
            await self._cluster.refresh_metadata({p.topic for p in retry})
        except KafkaError as exc:  # the next round fails and is counted
            log.debug("metadata refresh before retry failed: %s", exc)
        for part in retry:
            part.error = None

    def _after_final_failure(self, part: PartitionSend, err: BaseException | None, possibly: int) -> None:
        """Keep the idempotent numbering consistent after ``part``'s pending
        batches finally failed (see `kclient.client.producer.idempotence`):
        rewind when none of them can be in the log and no later batch of the
        partition was numbered, else drop the producer id. A part numbered
        under an older producer id or epoch changes nothing."""
        idem = self.idempotence
        assert idem is not None
        later = idem.settle(part, err if err is not None else KafkaError("an earlier batch failed"))
        if part.producer_id != idem.producer_id or part.producer_epoch != idem.producer_epoch:
            return
        code = getattr(err, "code", None)
        if code in RESET_CODES:
            idem.reset(f"{part.topic}-{part.partition}: {err}")
        elif possibly:
            idem.reset(f"{part.topic}-{part.partition}: {possibly} record(s) failed and may be in the log")
        elif later:
            idem.reset(f"{part.topic}-{part.partition}: failed with later batches in flight")
        else:
            idem.rewind(part)


def topic_failure(datas: list[Any], error: BaseException) -> PartitionFailure:
    """The failure of a whole topic (no metadata) for its items ``datas``."""
    given = [(d.key, m) for d in datas for m in d.messages]
    tracked = [(d.report, j) for d in datas if type(d) is TrackedData for j in range(len(d.messages))]
    return PartitionFailure(len(given), error, 0, given, tracked)


def unsent(part: PartitionSend, records: list[Any], error: BaseException) -> PartitionFailure:
    """The failure of ``part``'s ``records``, none of which was written."""
    return PartitionFailure(len(records), error, 0, [(r[0], r[1]) for r in records], tracked_of(part, records))


async def _nothing() -> None:
    return None
