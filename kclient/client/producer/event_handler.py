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
send fails with UnsupportedCompressionTypeError. Chunking and encoding live
in `kclient.client.producer.batching`, the settings in
`kclient.client.producer.settings`.

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
already holds. One batch per partition is then in flight at a time
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
(the same error `_failure` builds, for that partition alone).
"""

from __future__ import annotations

import abc
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

import attrs
import trio

from kclient._accel import speedups as _speedups
from kclient.client.producer.batching import BatchBuilder, PartitionSend, headers_size
from kclient.client.producer.data import ProducerData
from kclient.client.producer.delivery import RecordMetadata, TrackedData
from kclient.client.producer.partitioner import DefaultPartitioner
from kclient.client.serde import DefaultEncoder
from kclient.client.producer.settings import ProducerSettings
from kclient.clock import now_ms
from kclient.client.producer.idempotence import RESET_CODES, IdempotentProducerState
from kclient.errors import (
    DUPLICATE_SEQUENCE_NUMBER,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    REQUEST_TIMED_OUT,
    AuthenticationError,
    FailedToSendMessageError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    MessageSizeTooLargeError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
    error_for_code,
)
from kclient.protocol.messages import PRODUCE
from kclient.protocol.records import codecs as _codecs
from kclient.protocol.records.formats import ZSTD_MIN_PRODUCE_VERSION, produce_magic_max

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.cluster import Cluster

log = logging.getLogger(__name__)

# The producer's item types whose topic is their first field (compiled
# grouping by topic; None: pure Python).
_DATA_TYPES = frozenset((ProducerData, TrackedData))
_c_group_by_topic = _speedups.group_by_topic if _speedups is not None else None


#: Per-partition overhead of a Produce request besides the batch (bytes).
PARTITION_OVERHEAD = 16
#: Produce error codes that the broker sends after (possibly) appending.
_APPENDED_CODES = frozenset((REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND))


@attrs.frozen
class ProducerContext:
    """What a producer hands its EventHandler in `EventHandler.open`:
    the config, its `ProducerSettings`, the trio
    `Cluster` (metadata + connections), and
    the plug-ins (value encoder, key encoder, partitioner)."""

    config: Any
    settings: ProducerSettings
    cluster: "Cluster"
    encoder: Any
    key_encoder: Any
    partitioner: Any


class EventHandler(abc.ABC):
    """Base class of the producer's event handlers (``event.handler``).

    Lifecycle, all on the producer's trio loop: ``await open(context)`` once,
    then ``await handle(events)`` per batch (possibly concurrently from
    several tasks in sync mode), then ``await aclose()``. Plug one in by
    instance or by dotted class path (built with no arguments). A subclass
    of `DefaultEventHandler` can wrap ``handle`` to add tracing or
    monitoring around the default send path.
    """

    async def open(self, context: ProducerContext) -> None:
        """Bind to the producer (called once, before the first ``handle``).

        Args:
            context: The producer's config, settings, cluster and plug-ins.
        """
        self.context = context

    @abc.abstractmethod
    async def handle(self, events: "list[ProducerData]") -> None:
        """Serialize and send records; return once they are acknowledged
        per ``request.required.acks``.

        Args:
            events: The batch's ProducerData (keys and values not yet
                serialized).

        Raises:
            FailedToSendMessageError: records could not be written.
        """

    async def aclose(self) -> None:
        """Release resources (called once by the producer's close)."""


def _is_passthrough(encoder: Any) -> bool:
    return bool(getattr(encoder, "passthrough", False))


class DefaultEventHandler(EventHandler):
    """The default pipeline stage: serialize, partition, build one v2 batch
    per partition, send per leader with retries (module docstring)."""

    def __init__(self) -> None:
        self.context: ProducerContext | None = None

    async def open(self, context: ProducerContext) -> None:
        """Bind to the producer and build the batch builder.

        Args:
            context: The producer's config, settings, cluster and plug-ins.
        """
        self.context = context
        self._settings = context.settings
        self._cluster = context.cluster
        self._encode = None if _is_passthrough(context.encoder) else context.encoder.to_message
        self._encode_key = None if _is_passthrough(context.key_encoder) else context.key_encoder.to_message
        self._partition = context.partitioner.partition
        # The compiled collate step takes the default plug-ins only.
        self._c_collate = None
        self._random = None
        plain_keys = self._encode_key is None or type(context.key_encoder) is DefaultEncoder
        if _speedups is not None and plain_keys and type(context.partitioner) is DefaultPartitioner:
            if self._encode is None or type(context.encoder) is DefaultEncoder:
                self._c_collate = _speedups.collate_default
                self._random = context.partitioner.random
                self._bytes_values = self._encode is not None
        self._batches = BatchBuilder(context.settings)
        s = context.settings
        #: The idempotent producer's state (enable.idempotence), else None.
        self.idempotence: IdempotentProducerState | None = (
            IdempotentProducerState(context.cluster, retries=s.retries, backoff_ms=s.backoff_ms) if s.idempotence else None
        )

    async def _partitions_for(self, topic: str) -> tuple:
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

    async def _collate(self, events: Sequence["ProducerData"], failed: dict) -> dict[tuple[str, int], PartitionSend]:
        now = now_ms()
        if _c_group_by_topic is not None and type(events) is list:
            by_topic: dict[str, list] = _c_group_by_topic(events, _DATA_TYPES)
        else:
            by_topic = {}
            for d in events:
                lst = by_topic.get(d.topic)
                if lst is None:
                    by_topic[d.topic] = [d]
                else:
                    lst.append(d)
        fast = self._c_collate
        encode = self._encode
        encode_key = self._encode_key
        choose = self._partition
        out: dict[tuple[str, int], PartitionSend] = {}
        for topic, datas in by_topic.items():
            try:
                parts = await self._partitions_for(topic)
            except KafkaError as exc:
                n = sum(len(d.messages) for d in datas)
                given = [(d.key, m) for d in datas for m in d.messages]
                failed[(topic, -1)] = (n, exc, 0, given, [(d[6], j) for d in datas if type(d) is TrackedData for j in range(len(d[2]))])
                continue
            n_parts = len(parts)
            if fast is not None:
                # The compiled loop (pass-through encoders, DefaultPartitioner,
                # plain ProducerData); None: some item needs the loop below.
                grouped = fast(datas, ProducerData, n_parts, now, self._random, self._bytes_values)
                if grouped is not None:
                    for p, records in grouped.items():
                        target = out[(topic, p)] = PartitionSend(topic, p)
                        target.records = records
                    continue
            by_partition: dict[int, PartitionSend] = {}
            # One records list per partition, looked up by partition number.
            lists: dict[int, list] = {}
            try:
                for d in datas:
                    # ProducerData is a (topic, key, messages, timestamp_ms,
                    # partition, headers) tuple; other objects only need the
                    # attributes.
                    if type(d) is ProducerData:
                        _, key, messages, ts, fixed, headers = d
                        report = None
                    elif type(d) is TrackedData:  # sent with a delivery callback or futures
                        _, key, messages, ts, fixed, headers, report = d
                    else:
                        key, messages, ts = d.key, d.messages, d.timestamp_ms
                        fixed, headers = getattr(d, "partition", None), getattr(d, "headers", ())
                        report = None
                    if not messages:
                        continue
                    if key is not None and encode_key is not None:
                        key = encode_key(key)
                    p = choose(key, n_parts) if fixed is None else fixed
                    records = lists.get(p)
                    if records is None:
                        if type(p) is not int or not 0 <= p < n_parts:
                            chooser = f"partitioner {type(self.context.partitioner).__qualname__} returned" if fixed is None else "ProducerData names partition"
                            raise ValueError(
                                f"{chooser} {p!r} for topic {topic!r}, which has {n_parts} partitions: "
                                f"expected an int in [0, {n_parts})"
                            )
                        target = by_partition[p] = PartitionSend(topic, p)
                        records = lists[p] = target.records
                    if ts is None:
                        ts = now
                    if report is not None:
                        _add_tracked(by_partition[p], key, messages, ts, headers, encode, report)
                        continue
                    if headers:
                        by_partition[p].header_bytes += headers_size(headers) * len(messages)
                        records.extend([(key, m if encode is None or m is None else encode(m), ts, headers) for m in messages])
                        continue
                    if len(messages) == 1:
                        m = messages[0]
                        records.append((key, m if encode is None or m is None else encode(m), ts))
                    elif encode is None:
                        records.extend([(key, m, ts) for m in messages])
                    else:
                        records.extend([(key, None if m is None else encode(m), ts) for m in messages])
            except Exception as exc:
                # A plug-in (encoder, partitioner) failed: a programming or
                # data error, so nothing of this batch is sent.
                lost = sum(len(d.messages) for d in events)
                raise FailedToSendMessageError(
                    f"cannot serialize or partition a message for topic {topic!r}: {exc}",
                    lost_messages=lost,
                    failed_partitions={(topic, -1): lost},
                ) from exc
            for p, target in by_partition.items():
                out[(topic, p)] = target
        return out

    # -- step 5-6: send with retries ------------------------------------------

    async def handle(self, events: "list[ProducerData]") -> None:
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

    async def start(self, events: "list[ProducerData]", *, busy_poll: bool = False) -> "Callable[[], Awaitable[None]]":
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
        failed: dict[tuple[str, int], tuple] = {}
        parts = await self._collate(events, failed)
        idem = self.idempotence
        slots: list = []
        stamp = None
        if idem is not None and parts:
            # One batch in flight per partition: wait for the previous one.
            slots = await idem.acquire(parts)
            try:
                await idem.ensure_producer_id()
            except KafkaError as exc:
                idem.release(slots)
                for part in parts.values():
                    failed[(part.topic, part.partition)] = (len(part.records), exc, 0, [(r[0], r[1]) for r in part.records], _tracked_of(part, part.records))
                return _raiser(failed)
            except BaseException:
                idem.release(slots)
                raise
            stamp = idem.stamp  # no await from here to the last stamp
        try:
            for part in parts.values():
                try:
                    self._batches.build(part, stamp=stamp)
                except (MessageSizeTooLargeError, UnsupportedForMessageFormatError, TypeError) as exc:
                    records = part.records or [r for c in part.chunks for r in c]
                    if idem is not None:
                        idem.rewind(part)
                    failed[(part.topic, part.partition)] = (len(records), exc, 0, [(r[0], r[1]) for r in records], _tracked_of(part, records))
                    part.batches = []
                    part.chunks = []
                    part.counts = []
                    part.sequences = None
            pending = [p for p in parts.values() if p.batches]
            plan = await self._write_round(pending) if pending else []
        except BaseException:
            if slots:
                idem.release(slots)  # type: ignore[union-attr]
            raise

        spin = self._settings.busy_poll_us / 1e6 if busy_poll else 0.0

        async def finish() -> None:
            try:
                await self._finish(pending, plan, failed, spin)
            finally:
                if slots:
                    idem.release(slots)  # type: ignore[union-attr]

        return finish

    # -- step 5-6: send with retries ------------------------------------------

    async def _finish(self, pending: list[PartitionSend], plan: list, failed: dict, spin: float = 0.0) -> None:
        s = self._settings
        attempt = 0
        first = True
        while pending:
            if first:
                await self._read_round(plan, pending, spin)
                first = False
            else:
                await self._send_round(pending)
            retry = []
            for part in pending:
                if not part.batches:
                    continue
                err = part.error
                if err is not None and getattr(err, "retriable", False) and attempt < s.retries:
                    retry.append(part)
                else:
                    possibly = _possibly_written(part)
                    failed[(part.topic, part.partition)] = (
                        part.pending_messages, err, possibly, [(r[0], r[1]) for c in part.chunks for r in c],
                        _tracked_of(part, [r for c in part.chunks for r in c]),
                    )
                    if self.idempotence is not None and part.sequences is not None:
                        self._after_final_failure(part, err, possibly)
            if not retry:
                break
            attempt += 1
            # Any retry may meet a moved leader (a lost connection, a
            # timeout, NOT_ENOUGH_REPLICAS while the ISR shrinks): look the
            # leaders up again every time.
            refresh = True
            log.debug(
                "retrying %d partition(s) (attempt %d of %d) after %s",
                len(retry),
                attempt,
                s.retries,
                "; ".join(f"{p.topic}-{p.partition}: {p.error}" for p in retry[:5]),
            )
            await trio.sleep(min(s.backoff_ms * (2 ** (attempt - 1)), s.backoff_max_ms) / 1000)
            if refresh:
                try:
                    await self._cluster.refresh_metadata({p.topic for p in retry})
                except KafkaError as exc:  # the next round fails and is counted
                    log.debug("metadata refresh before retry failed: %s", exc)
            for part in retry:
                part.error = None
            pending = retry
        if failed:
            error = _failure(failed, attempt)
            _fail_tracked(failed, attempt)
            auth = next((v[1] for v in failed.values() if isinstance(v[1], AuthenticationError)), None)
            if auth is not None:
                # The typed error itself (Kafka's producer fails the send
                # with the AuthenticationException): never retried.
                raise auth from error
            raise error

    def _after_final_failure(self, part: PartitionSend, err: BaseException | None, possibly: int) -> None:
        """Keep the idempotent numbering consistent after ``part``'s pending
        batches finally failed (see `kclient.client.producer.idempotence`):
        rewind when none of them can be in the log, else drop the producer
        id."""
        idem = self.idempotence
        assert idem is not None
        code = getattr(err, "code", None)
        if code in RESET_CODES:
            idem.reset(f"{part.topic}-{part.partition}: {err}")
        elif possibly:
            idem.reset(f"{part.topic}-{part.partition}: {possibly} record(s) failed and may be in the log")
        else:
            idem.rewind(part)

    async def _send_round(self, parts: list[PartitionSend]) -> None:
        """One attempt: write every request, then read every response;
        per-partition errors are recorded on the parts."""
        await self._read_round(await self._write_round(parts), parts)

    async def _write_round(self, parts: list[PartitionSend]) -> list:
        """Group ``parts`` by leader and write their Produce requests (each
        request takes the next batch of each partition while it stays within
        max.request.size), leader by leader; returns the plan of
        ``(node_id, [(part, batch_index), ...], PendingResponse | None)``."""
        by_leader: dict[int, list[PartitionSend]] = {}
        metadata = self._cluster.metadata
        for part in parts:
            leader = -1
            for info in metadata.partitions_for(part.topic):
                if info.partition == part.partition:
                    leader = info.leader
                    break
            if leader < 0:
                _fail(part, 0, LeaderNotAvailableError(f"topic {part.topic!r} partition {part.partition} has no leader"))
                continue
            by_leader.setdefault(leader, []).append(part)
        plan: list = []
        for node, group in by_leader.items():
            plan.extend(await self._write_to_leader(node, group))
        return plan

    async def _write_to_leader(self, node_id: int, parts: list[PartitionSend]) -> list:
        """Write the batches of ``parts`` to broker ``node_id`` in as few
        Produce requests as max.request.size allows, back to back (the
        broker answers a connection's requests in order)."""
        s = self._settings
        try:
            conn = await self._cluster.broker_connection(node_id)
            version = conn.version_for(PRODUCE, ceiling=s.max_produce_version)
        except KafkaError as exc:
            for part in parts:
                _fail(part, 0, exc)
            return []
        if s.codec == _codecs.ZSTD and version < ZSTD_MIN_PRODUCE_VERSION and any(p.codec for p in parts):
            cap = "" if s.max_produce_version is None else f" (api.version caps it at v{s.max_produce_version})"
            exc = UnsupportedCompressionTypeError(f"zstd needs Produce v{ZSTD_MIN_PRODUCE_VERSION}+, broker {node_id} supports v{version}{cap}")
            for part in parts:
                if part.codec:
                    _fail(part, 0, exc)
            parts = [p for p in parts if not p.codec]
            if not parts:
                return []
        magic = produce_magic_max(version)
        for part in parts:
            try:
                self._batches.use_magic(part, magic)
            except (MessageSizeTooLargeError, UnsupportedForMessageFormatError, TypeError) as exc:
                _fail(part, 0, exc)
        parts = [p for p in parts if p.error is None]
        cursor = {id(part): 0 for part in parts}
        active = list(parts)
        requests: list = []
        while active:
            budget = s.max_request_bytes
            chosen: list[tuple[PartitionSend, int]] = []
            for part in active:
                i = cursor[id(part)]
                n = len(part.batches[i]) + PARTITION_OVERHEAD + len(part.topic)
                if chosen and n > budget:
                    continue
                chosen.append((part, i))
                budget -= n
            topics: dict[str, list] = {}
            for part, i in chosen:
                topics.setdefault(part.topic, []).append({"index": part.partition, "records": part.batches[i]})
            body = {
                "transactional_id": None,
                "acks": s.acks,
                "timeout_ms": s.timeout_ms,
                "topic_data": [{"name": t, "partition_data": pd} for t, pd in topics.items()],
            }
            try:
                handle = await conn.start_request(PRODUCE, body, version=version, expect_response=s.acks != 0)
            except KafkaError as exc:
                for part in active:
                    _fail(part, cursor[id(part)], exc)
                break
            requests.append((node_id, chosen, handle))
            for part, _ in chosen:
                cursor[id(part)] += 1
            active = [part for part in active if cursor[id(part)] < len(part.batches)]
        return requests

    async def _read_round(self, plan: list, parts: list[PartitionSend], spin: float = 0.0) -> None:
        """Await every response of ``plan`` in order, record per-partition
        errors, then drop each part's acknowledged batches (everything before
        its first failed batch). ``spin`` (s): poll each response's socket
        that long before sleeping (``socket.busy.poll.us``)."""
        acked: list = []  # (part, batch index) acknowledged in this round
        offsets: dict = {}  # (id(part), batch index) -> (base offset, log append time), tracked parts only
        for node_id, chosen, handle in plan:
            if handle is None:  # acks=0: written is all there is
                continue
            if spin:
                handle.busy_wait(spin)
            try:
                response = await handle.wait()
            except KafkaError as exc:
                # Written, then no answer (timeout, connection lost): the
                # broker may have appended it.
                written = not isinstance(exc, AuthenticationError)
                for part, i in chosen:
                    _fail(part, i, exc)
                    if written:
                        _maybe(part, i)
                continue
            if any(part.tracked for part, _ in chosen):
                _note_offsets(response, chosen, offsets)
            errored = None
            for t in response["responses"]:
                name = t["name"]
                for pr in t["partition_responses"]:
                    code = pr["error_code"]
                    if not code or code == DUPLICATE_SEQUENCE_NUMBER:
                        # 46: an idempotent batch the leader already holds
                        # (a retry of one whose answer was lost): written.
                        continue
                    msg = pr.get("error_message") or ""
                    err = error_for_code(code)(f"topic {name!r} partition {pr['index']} on broker {node_id}" + (f": {msg}" if msg else ""))
                    for part, i in chosen:
                        if part.topic == name and part.partition == pr["index"]:
                            _fail(part, i, err)
                            if code in _APPENDED_CODES:
                                _maybe(part, i)
                            if errored is None:
                                errored = set()
                            errored.add(id(part))
            if errored is None:
                acked.extend(chosen)
            else:
                acked.extend(c for c in chosen if id(c[0]) not in errored)
        for part, i in acked:
            # Acknowledged, but kept for a retry behind an earlier failed
            # batch of its partition: it is in the log.
            if part.failed_from is not None and i > part.failed_from:
                _maybe(part, i)
        for part in parts:
            cut = len(part.batches) if part.failed_from is None else part.failed_from
            if part.tracked and cut:
                _resolve_acked(part, cut, offsets)
            del part.batches[:cut]
            del part.chunks[:cut]
            del part.counts[:cut]
            if part.sequences is not None:
                del part.sequences[:cut]
            part.failed_from = None


def _add_tracked(part: PartitionSend, key: Any, messages: Sequence, ts: int, headers: Sequence, encode: Any, report: Any) -> None:
    """Append the records of a ProducerData sent with a delivery callback or
    futures to ``part`` and remember which report and index each is."""
    records = part.records
    tracked = part.tracked
    if tracked is None:
        tracked = part.tracked = {}
    if headers:
        part.header_bytes += headers_size(headers) * len(messages)
    for j, m in enumerate(messages):
        value = m if encode is None or m is None else encode(m)
        r = (key, value, ts, headers) if headers else (key, value, ts)
        records.append(r)
        tracked[id(r)] = (report, j)


def _tracked_of(part: PartitionSend, records: Sequence) -> list:
    """The (DeliveryReport, index) of the tracked ones among ``records``."""
    tracked = part.tracked
    if not tracked:
        return []
    return [t for r in records if (t := tracked.get(id(r))) is not None]


def _note_offsets(response: dict, chosen: list, offsets: dict) -> None:
    """Remember the base offset and LogAppendTime of each acknowledged batch
    of a tracked partition in ``chosen``."""
    answers = {(t["name"], pr["index"]): pr for t in response["responses"] for pr in t["partition_responses"]}
    for part, i in chosen:
        if part.tracked:
            pr = answers.get((part.topic, part.partition))
            if pr is not None and (not pr["error_code"] or pr["error_code"] == DUPLICATE_SEQUENCE_NUMBER):
                offsets[(id(part), i)] = (pr["base_offset"], pr.get("log_append_time_ms", -1))


def _resolve_acked(part: PartitionSend, cut: int, offsets: dict) -> None:
    """Resolve the tracked records of ``part``'s first ``cut`` batches (all
    acknowledged): offset = the batch's base offset + the record's index in
    it (-1 with acks=0); timestamp = LogAppendTime if the broker set one,
    else the record's CreateTime."""
    tracked = part.tracked
    assert tracked is not None
    topic, partition = part.topic, part.partition
    for i in range(cut):
        base, append_time = offsets.get((id(part), i), (-1, -1))
        for j, r in enumerate(part.chunks[i]):
            t = tracked.pop(id(r), None)
            if t is None:
                continue
            key, value = r[0], r[1]
            t[0].succeeded(
                t[1],
                RecordMetadata(
                    topic,
                    partition,
                    base + j if base >= 0 else -1,
                    append_time if append_time is not None and append_time >= 0 else r[2],
                    -1 if key is None else len(key),
                    -1 if value is None else len(value),
                ),
            )


def _fail_tracked(failed: dict, retries: int) -> None:
    """Fail the tracked records of each failed partition with an error
    naming that partition (its cause: the partition's broker or connection
    error)."""
    for tp, v in failed.items():
        if len(v) > 4 and v[4]:
            error = _failure({tp: v}, retries)
            for report, index in v[4]:
                report.failed(index, error)


def _fail(part: PartitionSend, index: int, error: BaseException) -> None:
    """Record that ``part``'s batch ``index`` (and so every later one) was
    not written; the first failure's error is the one reported."""
    if part.failed_from is None or index < part.failed_from:
        part.failed_from = index
        part.error = error
    elif part.error is None:
        part.error = error


def _maybe(part: PartitionSend, index: int) -> None:
    """Record that ``part``'s batch ``index`` may be in the log."""
    if part.maybe is None:
        part.maybe = set()
    part.maybe.update(map(id, part.chunks[index]))


def _possibly_written(part: PartitionSend) -> int:
    """How many of ``part``'s pending records some attempt may have written."""
    maybe = part.maybe
    if not maybe:
        return 0
    return sum(1 for chunk in part.chunks for r in chunk if id(r) in maybe)


async def _nothing() -> None:
    return None


def _raiser(failed: dict) -> "Callable[[], Awaitable[None]]":
    async def finish() -> None:
        error = _failure(failed, 0)
        _fail_tracked(failed, 0)
        raise error

    return finish


def _failure(failed: dict, retries: int) -> FailedToSendMessageError:
    """The error for ``failed``: ``{(topic, partition): (messages, error)
    or (messages, error, possibly written)}``."""
    lost = sum(v[0] for v in failed.values())
    names = ", ".join(f"{t}-{p}" if p >= 0 else f"{t}" for t, p in list(failed)[:10])
    if len(failed) > 10:
        names += f" and {len(failed) - 10} more"
    cause = next((v[1] for v in failed.values() if v[1] is not None), None)
    after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
    maybe = {tp: v[2] for tp, v in failed.items() if len(v) > 2 and v[2]}
    records = {tp: v[3] for tp, v in failed.items() if len(v) > 3}
    possibly = sum(maybe.values())
    if possibly:
        outcome = f" ({possibly} possibly written: the broker may have appended them; {lost - possibly} not sent)"
    else:
        outcome = " (not sent: none reached a broker)"
    exc = FailedToSendMessageError(
        f"failed to send {lost} message(s) to {names}{after}{outcome}: {cause}",
        lost_messages=lost,
        failed_partitions={tp: v[0] for tp, v in failed.items()},
        possibly_written=possibly,
        possibly_written_partitions=maybe,
        failed_records=records,
    )
    exc.__cause__ = cause
    return exc
