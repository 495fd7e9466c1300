"""SimpleConsumer: the low-level consumer of Kafka 0.8 (Kafka 0.8
documentation, section 5.1 "API Design", "Consumer APIs": https://kafka.apache.org/08/documentation.html#apidesign).

It keeps one connection to one broker and no offset state: the caller says
which offset to read from. ``fetch`` reads one partition, ``multifetch``
several in one round trip, ``get_offsets_before`` lists valid offsets before
a time (ListOffsets; v0 is the old getOffsetsBefore, with a fallback built on
v1+ for brokers that dropped v0, such as Kafka 4).

`TrioSimpleConsumer` is the trio API; `SimpleConsumer` the
blocking facade over it (a trio loop in a background thread, one thread
crossing per call).

Both keep Kafka's positional signature ``(host, port, so_timeout_ms,
buffer_size, client_id)`` and take the security properties by keyword:
``config={"security.protocol": "SASL_SSL", "sasl.mechanism": ..., ...}``
(Kafka's names; see `kclient.security.settings.ClientSecurity`). A failed
TLS handshake or SASL exchange (KIP-43, KIP-152) raises an
`AuthenticationError` at once; it is never retried.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import trio

from kclient.client.cluster import PartitionInfo, request_metadata
from kclient.client.consumer.message_set import ByteBufferMessageSet, MultiFetchResponse
from kclient.client.consumer.statistics import ConsumerStatistics, FetchStatistics, StatisticsReporter, count_fetched
from kclient.client.loop_closer import LoopClientCloser
from kclient.errors import (
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
    ConfigError,
    KafkaError,
    NotLeaderForPartitionError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    raise_for_code,
)
from kclient.net.connection import BrokerConnection
from kclient.net.settings import ConnectionSettings
from kclient.protocol.messages import FETCH, LIST_OFFSETS
from kclient.protocol.messages.fetch import FetchPartition, FetchResponse, FetchTopic, PartitionData
from kclient.protocol.messages.fetch import FetchRequest as FetchRequestData
from kclient.protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from kclient.protocol.records.read_committed import READ_COMMITTED, READ_UNCOMMITTED, isolation_level_code
from kclient.security.settings import ClientSecurity
from kclient.sync import ClosingClient, LoopThread, track

log = logging.getLogger(__name__)


#: Largest value of an int32 field (the Fetch request's ``max_bytes``).
_INT32_MAX = 2**31 - 1


@attrs.frozen
class FetchRequest:
    """Read ``topic``/``partition`` from ``offset``, at most ``max_size``
    bytes (Kafka's ``FetchRequest(topic, partition, offset, maxSize)``).

    Attributes:
        topic: The topic to read.
        partition: The partition to read.
        offset: The first offset wanted.
        max_size: The most bytes the broker returns for the partition
            (bytes, default 1 MiB); a first batch larger than this cannot
            be read (`ByteBufferMessageSet.check_fits`).
    """

    topic: str
    partition: int
    offset: int
    max_size: int = 1024 * 1024


class OffsetRequest:
    """Special times for `SimpleConsumer.get_offsets_before` (the classic
    API names of ListOffsets' ``LATEST_TIMESTAMP`` / ``EARLIEST_TIMESTAMP``,
    owned by `kclient.protocol.messages.list_offsets`)."""

    #: the log end offset (the offset the next message will get)
    LATEST_TIME = LATEST_TIMESTAMP
    #: the log start offset (the earliest offset still held)
    EARLIEST_TIME = EARLIEST_TIMESTAMP


#: A fetch without a long poll naming more partitions than this goes as
#: several pipelined Fetch requests of at most this many (0: always one).
PIPELINE_PARTITIONS = 64


def _fetch_body(part: list[tuple[int, FetchRequest]], max_wait_ms: int, min_bytes: int, isolation_level: int = READ_UNCOMMITTED) -> FetchRequestData:
    """The Fetch request for ``part`` (``(index, request)`` pairs, no
    partition twice): a consumer's (replica id -1), at ``isolation_level``
    (0 read uncommitted, 1 read committed: KIP-98, Fetch v4+), without a
    fetch session (KIP-227)."""
    topics: dict[str, list[FetchPartition]] = {}
    new = object.__new__
    for _, req in part:
        # FetchPartition(partition=..., fetch_offset=...,
        # partition_max_bytes=...) built as the codec's message reader
        # builds messages: every field set, no keyword call.
        fp = new(FetchPartition)
        fp.partition = req.partition
        fp.current_leader_epoch = -1
        fp.fetch_offset = req.offset
        fp.log_start_offset = -1
        fp.partition_max_bytes = req.max_size
        topics.setdefault(req.topic, []).append(fp)
    return FetchRequestData(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        # The request's own limit is an int32 (Fetch v3+, KIP-74):
        # many partitions' sizes can add up past it.
        max_bytes=max(1, min(_INT32_MAX, sum(r.max_size for _, r in part))),
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
    )


def _aborted(answer: PartitionData) -> tuple[tuple[int, int], ...]:
    """A read_committed answer's aborted transactions, ``(producer_id,
    first_offset)`` pairs (none: an empty tuple)."""
    aborted = answer.aborted_transactions
    return tuple((a.producer_id, a.first_offset) for a in aborted) if aborted else ()


class _MultiFetch:
    """One `TrioSimpleConsumer.multifetch` in progress. A round holds each
    requested partition once (a partition asked for twice waits for the
    next round); its parts, of at most ``PIPELINE_PARTITIONS`` partitions
    without a long poll, are written together and answered in order."""

    def __init__(self, consumer: TrioSimpleConsumer, conn: BrokerConnection, requests: list[FetchRequest], max_wait_ms: int, min_bytes: int, sent: Callable[[], object] | None) -> None:
        self.consumer = consumer
        self.conn = conn
        self.version = conn.version_for(FETCH, floor=4)
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.sent = sent
        self.results: list[ByteBufferMessageSet | None] = [None] * len(requests)
        self.remaining = list(enumerate(requests))
        self.queue: list[tuple[list[tuple[int, FetchRequest]], Any]] = []
        self.handed = 0  # results handed out by next_ready

    async def start_round(self) -> None:
        """Write the next round's Fetch requests (nothing when done)."""
        seen: set[tuple[str, int]] = set()
        this_round: list[tuple[int, FetchRequest]] = []
        later: list[tuple[int, FetchRequest]] = []
        for i, req in self.remaining:
            key = (req.topic, req.partition)
            (later if key in seen else this_round).append((i, req))
            seen.add(key)
        self.remaining = later
        # Without a long poll (min_bytes <= 0: the broker answers at
        # once) a fetch of many partitions goes as several requests,
        # pipelined: the broker reads the next part while this side
        # decodes the last. With a long poll it stays one request (the
        # broker answers a connection's requests in order, so each part
        # would wait in turn).
        step = PIPELINE_PARTITIONS if self.min_bytes <= 0 and PIPELINE_PARTITIONS > 0 else len(this_round)
        parts = [this_round[k : k + step] for k in range(0, len(this_round), max(1, step))]
        timeout = self.consumer.so_timeout_ms + self.max_wait_ms
        for part in parts:
            body = _fetch_body(part, self.max_wait_ms, self.min_bytes, self.consumer.isolation_level)
            pending = await self.conn.start_request(FETCH, body, version=self.version, timeout_ms=timeout)
            if self.sent is not None:
                self.sent()
                self.sent = None
            assert pending is not None
            self.queue.append((part, pending))

    async def next_part(self) -> bool:
        """Wait for the next part's answer and fill its results; False once
        every request is answered."""
        if not self.queue:
            if not self.remaining:
                return False
            await self.start_round()
        part, pending = self.queue.pop(0)
        response: FetchResponse = await pending.wait()
        if response.error_code:
            raise_for_code(response.error_code, "fetch")
        by_key: dict[tuple[str, int], PartitionData] = {}
        for t in response.responses:
            for p in t.partitions:
                by_key[(t.topic, p.partition_index)] = p
        stats = self.consumer._stats
        results = self.results
        for i, req in part:
            answer = by_key.get((req.topic, req.partition))
            if answer is None:
                results[i] = result = ByteBufferMessageSet(
                    req.topic, req.partition, b"", req.offset, error_code=UNKNOWN_TOPIC_OR_PARTITION, max_size=req.max_size
                )
            else:
                records = answer.records
                results[i] = result = ByteBufferMessageSet(
                    req.topic,
                    req.partition,
                    records if records is not None else b"",
                    req.offset,
                    answer.high_watermark,
                    answer.log_start_offset,
                    answer.error_code,
                    req.max_size,
                    aborted_transactions=_aborted(answer) if self.consumer.isolation_level == READ_COMMITTED else (),
                )
            # counted as each part arrives, while the broker reads the next
            count_fetched(stats, result)
        if not self.queue and not self.remaining:
            stats.request()
        return True

    async def next_ready(self) -> list[ByteBufferMessageSet] | None:
        """The sets that became ready, in request order, once the next part
        is in (moved leaders looked up); None once all were handed out."""
        results = self.results
        while True:
            end = self.handed
            while end < len(results) and results[end] is not None:
                end += 1
            if end > self.handed:
                ready: list[ByteBufferMessageSet] = results[self.handed : end]  # type: ignore[assignment]
                self.handed = end
                await self.consumer._mark_moved(ready)
                return ready
            if not await self.next_part():
                return None


class TrioSimpleConsumer:
    """The SimpleConsumer for trio code: ``async with TrioSimpleConsumer(host,
    port) as c: ms = await c.fetch(FetchRequest(...))``.

    Args:
        host: the broker's host.
        port: the broker's port.
        so_timeout_ms: connect and request timeout (ms).
        buffer_size: accepted for Kafka's ``SimpleConsumer(host, port,
            soTimeout, bufferSize, clientId)`` signature and ignored: the
            operating system sizes the socket receive buffer (setting
            ``SO_RCVBUF`` would turn Linux's autotuning off), and each
            `FetchRequest` says how many bytes to read (``max_size``).
        client_id: sent in every request header.
        config: the security properties under Kafka's names
            (``security.protocol``, ``ssl.ca.location``,
            ``ssl.certificate.location``, ``ssl.key.location``,
            ``ssl.key.password``, ``ssl.endpoint.identification.algorithm``,
            ``sasl.mechanism``, ``sasl.username``, ``sasl.password``,
            ``sasl.jaas.config``), a parsed `ClientSecurity`, or a
            `ConsumerConfig` / `ProducerConfig` (its ``security``); other
            keys of a mapping are ignored. ``None``: PLAINTEXT.
        ssl_context: a TLS context to reuse (built from ``config`` if not
            given).
        statistics: the `FetchStatistics` to count fetches in (to share
            one between consumers); None: a new one, see `statistics`.
        isolation_level: Kafka's consumer property ``isolation.level``
            (KIP-98): ``read_uncommitted`` or ``read_committed`` (fetches
            stop at the last stable offset and skip aborted transactions'
            records; ``get_offsets_before(LATEST_TIME)`` answers the last
            stable offset). None: ``config``'s ``isolation.level`` (a
            mapping's key or a `ConsumerConfig`'s), else
            ``read_uncommitted``. Transaction markers (control batches) are
            never handed out in either mode.

    Raises:
        ConfigError: naming the property, for a bad security value, an
            ``ssl.*`` file that cannot be used, or an ``isolation.level``
            other than ``read_uncommitted`` / ``read_committed``.
    """

    def __init__(
        self,
        host: str,
        port: int,
        so_timeout_ms: int = 30000,
        buffer_size: int = 64 * 1024,
        client_id: str = "kclient-simple-consumer",
        *,
        config: Mapping[str, Any] | ClientSecurity | Any | None = None,
        ssl_context: ssl.SSLContext | None = None,
        statistics: FetchStatistics | None = None,
        isolation_level: str | None = None,
    ) -> None:
        del buffer_size  # see the class docstring
        #: The Fetch / ListOffsets ``isolation_level``: 0 read_uncommitted, 1 read_committed.
        self.isolation_level = isolation_level_code(isolation_level if isolation_level is not None else isolation_of(config))
        self.host = host
        self.port = port
        self.so_timeout_ms = so_timeout_ms
        self.client_id = client_id
        self.security = security_from(config)
        #: How the connection is opened (``so_timeout_ms`` for connecting and
        #: for each request; the TLS context built once, here).
        self.settings = ConnectionSettings(client_id, so_timeout_ms, so_timeout_ms, self.security, ssl_context).with_tls_context()
        self._conn: BrokerConnection | None = None
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._lock = trio.Lock()
        self._stats = statistics if statistics is not None else FetchStatistics()

    def statistics(self) -> ConsumerStatistics:
        """What this consumer fetched so far, and each partition's lag.

        Counted from the batch headers of every fetched partition, nothing
        decompressed: ``fetched_messages`` are the offsets between each
        requested offset and the end of the last complete batch returned
        (records removed by compaction included), the position is that end,
        the lag the partition's high watermark minus the position.

        Returns:
            A `kclient.ConsumerStatistics`.
        """
        return self._stats.snapshot()

    async def __aenter__(self) -> TrioSimpleConsumer:
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
        assert self._nursery_cm is not None
        await self._nursery_cm.__aexit__(*exc)

    def attach(self, nursery: trio.Nursery) -> None:
        """Use ``nursery`` for the connection's reader task (for owners that
        manage their own nursery, like the blocking facade).

        Args:
            nursery: An open nursery on the trio loop that will run this
                consumer's calls; it must outlive the consumer.
        """
        self._nursery = nursery

    async def _connection(self) -> BrokerConnection:
        if self._conn is None or self._conn.closed:
            if self._nursery is None:
                raise RuntimeError("use 'async with TrioSimpleConsumer(...)' or attach() a nursery first")
            async with self._lock:
                if self._conn is None or self._conn.closed:
                    self._conn = await self.settings.connect(self._nursery, self.host, self.port)
                    self._conn.throttles = self._stats.throttles
        return self._conn

    async def fetch(self, request: FetchRequest, *, max_wait_ms: int = 0, min_bytes: int = 0) -> ByteBufferMessageSet:
        """Fetch one partition.

        Args:
            request: what to read (``max_size`` in bytes).
            max_wait_ms: how long the broker may wait for ``min_bytes`` (ms).
            min_bytes: the least the broker should return before
                ``max_wait_ms`` runs out (bytes).

        Returns:
            The partition's messages.

        Raises:
            BrokerResponseError: the partition's error
                (`OffsetOutOfRangeError` past the log end or before the
                log start, `UnknownTopicOrPartitionError`, ...).
                `NotLeaderForPartitionError` (the partition's leader moved,
                e.g. after a broker failure) carries ``leader``, the new
                leader's ``(host, port)``, and ``leader_id`` when this
                broker's metadata names one: reconnect there.
            MessageSizeTooLargeError: the first batch is bigger than
                ``request.max_size``.
            KafkaConnectionError: the broker cannot be reached or the
                connection failed.
            KafkaTimeoutError: no answer within ``so_timeout_ms +
                max_wait_ms``.
        """
        (result,) = await self.multifetch([request], max_wait_ms=max_wait_ms, min_bytes=min_bytes)
        if result.error_code:
            raise result.error  # type: ignore[misc]
        result.check_fits()
        return result

    async def multifetch(self, requests: Sequence[FetchRequest], *, max_wait_ms: int = 0, min_bytes: int = 0) -> MultiFetchResponse:
        """Fetch several partitions in one round trip: one Fetch request,
        or, without a long poll (``min_bytes`` <= 0) and for more than
        ``PIPELINE_PARTITIONS`` (64) partitions, several sent together (the
        broker reads the next while this side decodes the last). A
        partition asked for twice needs a second round trip.

        Args:
            requests: one FetchRequest per partition to read.
            max_wait_ms: how long the broker may wait for ``min_bytes`` (ms).
            min_bytes: the least the broker should return before
                ``max_wait_ms`` runs out (bytes).

        Returns:
            One `ByteBufferMessageSet` per request, in request order.
            Partition errors are not raised here: each set carries its
            partition's ``error_code`` and raises it when iterated.

        Raises:
            BrokerResponseError: the request as a whole failed (a
                top-level error code).
            KafkaConnectionError: the broker cannot be reached or the
                connection failed.
            KafkaTimeoutError: no answer within ``so_timeout_ms +
                max_wait_ms``.
        """
        return await self.multifetch_sent(requests, max_wait_ms, min_bytes, None)

    async def multifetch_sent(self, requests: Sequence[FetchRequest], max_wait_ms: int, min_bytes: int, sent: Callable[[], object] | None) -> MultiFetchResponse:
        """`multifetch`, calling ``sent()`` once its Fetch request is
        written to the broker's socket (the high-level consumer's fetch loop
        waits for that much before it decodes the last answer, so that the
        broker reads the next one meanwhile). Not part of the public API.

        Args:
            requests: As `multifetch`.
            max_wait_ms: As `multifetch`.
            min_bytes: As `multifetch`.
            sent: Called once, after the first (usually the only) Fetch
                request of this call is written; not called if it fails
                before that.

        Returns:
            As `multifetch`.
        """
        fetch = await self._open_multifetch(requests, max_wait_ms, min_bytes, sent)
        while await fetch.next_part():
            pass
        await self._mark_moved(fetch.results)  # type: ignore[arg-type]
        return MultiFetchResponse(fetch.results)  # type: ignore[arg-type]

    async def multifetch_iter(self, requests: Sequence[FetchRequest], *, max_wait_ms: int = 0, min_bytes: int = 0) -> AsyncIterator[ByteBufferMessageSet]:
        """`multifetch`, handing out each message set as soon as its part
        of the answer is in: ``async for ms in c.multifetch_iter(reqs)``.

        The same Fetch requests go out, all parts of a round written
        together when the iteration starts; the sets come in request order,
        each the one `multifetch` would return in its place. While the
        caller reads one part's messages, the broker reads the next part
        (for more than ``PIPELINE_PARTITIONS`` partitions without a long
        poll), so reading many partitions takes about the longer of the two
        instead of their sum.

        Args:
            requests: One FetchRequest per partition to read.
            max_wait_ms: As `multifetch` (ms).
            min_bytes: As `multifetch` (bytes).

        Yields:
            One `ByteBufferMessageSet` per request, in request order.
            Partition errors are not raised here: each set carries its
            partition's ``error_code`` and raises it when iterated.

        Raises:
            BrokerResponseError: a Fetch request as a whole failed (a
                top-level error code), raised where its part would begin.
            KafkaConnectionError: the broker cannot be reached or the
                connection failed: the sets of the parts already in were
                handed out, the rest are not.
            KafkaTimeoutError: no answer within ``so_timeout_ms +
                max_wait_ms``.
        """
        fetch = await self._open_multifetch(requests, max_wait_ms, min_bytes, None)
        while True:
            ready = await fetch.next_ready()
            if ready is None:
                return
            for message_set in ready:
                yield message_set

    async def _open_multifetch(self, requests: Sequence[FetchRequest], max_wait_ms: int, min_bytes: int, sent: Callable[[], object] | None) -> _MultiFetch:
        fetch = _MultiFetch(self, await self._connection(), list(requests), max_wait_ms, min_bytes, sent)
        await fetch.start_round()
        return fetch

    async def _mark_moved(self, sets: Sequence[ByteBufferMessageSet]) -> None:
        """Give each set whose partition's leader moved (NOT_LEADER) its
        new leader, from one Metadata request."""
        moved = [r for r in sets if r.error_code == NOT_LEADER_OR_FOLLOWER]
        if moved:
            leaders = await self._leaders({(r.topic, r.partition) for r in moved})
            for r in moved:
                r.leader = leaders.get((r.topic, r.partition))

    async def _leaders(self, keys: set[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, str, int]]:
        """Where the partitions' leaders are now, from a Metadata request to
        this consumer's broker (which the controller keeps up to date with
        UpdateMetadata). Partitions without a leader, and every partition if
        the request fails, are left out."""
        try:
            metadata = await request_metadata(await self._connection(), sorted({k[0] for k in keys}))
        except KafkaError as exc:
            log.debug("looking up the new leaders of %s failed: %s", sorted(keys), exc)
            return {}
        return metadata.leaders(keys)

    async def _raise_not_leader(self, topic: str, partition: int) -> None:
        leader = (await self._leaders({(topic, partition)})).get((topic, partition))
        where = f"{topic}-{partition} on {self.host}:{self.port}"
        if leader is not None:
            where += f"; the leader is now broker {leader[0]} at {leader[1]}:{leader[2]}"
        exc = NotLeaderForPartitionError(where)
        if leader is not None:
            exc.leader_id = leader[0]
            exc.leader = (leader[1], leader[2])
        raise exc

    async def get_offsets_before(self, topic: str, partition: int, time: int, max_num_offsets: int) -> list[int]:
        """Valid offsets before a time (Kafka's ``getOffsetsBefore``).

        Uses ListOffsets v0; on a broker without v0 (Kafka 4) falls back to
        v1+, which can only answer one offset. With ``read_committed``,
        ListOffsets v2+ at that isolation level (one offset; the latest is
        the last stable offset, KIP-98).

        Args:
            topic: The topic.
            partition: The partition.
            time: A timestamp (ms since the epoch), or
                `OffsetRequest.LATEST_TIME` (-1, the log end offset) /
                `OffsetRequest.EARLIEST_TIME` (-2, the log start offset).
            max_num_offsets: The most offsets to return.

        Returns:
            Up to ``max_num_offsets`` offsets, in descending order (at most
            one with ListOffsets v1+).

        Raises:
            BrokerResponseError: the partition's error
                (`UnknownTopicOrPartitionError`,
                `NotLeaderForPartitionError` with the new leader's
                ``(host, port)`` as ``leader`` when known, ...).
            UnsupportedVersionError: the broker supports no ListOffsets
                version this client speaks.
            KafkaConnectionError: the broker cannot be reached or the
                connection failed.
            KafkaTimeoutError: no answer within ``so_timeout_ms``.
        """
        conn = await self._connection()
        if self.isolation_level == READ_COMMITTED:
            version = conn.version_for(LIST_OFFSETS, floor=2)  # isolation_level: v2+ (KIP-98)
        else:
            try:
                version = conn.version_for(LIST_OFFSETS, ceiling=0)
            except UnsupportedVersionError:
                version = conn.version_for(LIST_OFFSETS, floor=1)
        body = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=self.isolation_level,
            topics=[ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=time, max_num_offsets=max_num_offsets)])],
        )
        response: ListOffsetsResponse = await conn.request(LIST_OFFSETS, body, version=version)
        part = response.topics[0].partitions[0]
        if part.error_code == NOT_LEADER_OR_FOLLOWER:
            await self._raise_not_leader(topic, partition)
        raise_for_code(part.error_code, f"{topic}-{partition}")
        if version == 0:
            return list(part.old_style_offsets)[:max_num_offsets]
        return [part.offset] if part.offset >= 0 and max_num_offsets > 0 else []

    async def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        """The partitions of a topic, from a Metadata request to this
        consumer's broker (Kafka's ``partitionsFor``). The topic is never
        created by asking.

        Args:
            topic: The topic.

        Returns:
            Its partitions sorted by id, each with its leader's node id
            (-1 while it has none), replicas and ISR.

        Raises:
            BrokerResponseError: the topic's error from Metadata, e.g.
                `UnknownTopicOrPartitionError` for a topic that does not
                exist.
            KafkaConnectionError: the broker cannot be reached or the
                connection failed.
            KafkaTimeoutError: no answer within ``so_timeout_ms``.
        """
        metadata = await request_metadata(await self._connection(), [topic])
        raise_for_code(metadata.topic_errors.get(topic, 0), f"topic {topic!r}")
        parts = metadata.partitions_for(topic)
        if not parts:
            raise UnknownTopicOrPartitionError(f"topic {topic!r}")
        return parts

    async def aclose(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            await self._conn.aclose()
            self._conn = None


def isolation_of(config: Mapping[str, Any] | ClientSecurity | Any | None) -> Any:
    """The ``isolation.level`` a SimpleConsumer's ``config`` argument holds.

    Args:
        config: As `security_from` takes it.

    Returns:
        A mapping's ``isolation.level`` value, a config object's
        ``isolation_level`` attribute (`ConsumerConfig`), or None.
    """
    if isinstance(config, Mapping):
        return next((v for k, v in config.items() if str(k).strip() == "isolation.level"), None)
    return getattr(config, "isolation_level", None)


def security_from(config: Mapping[str, Any] | ClientSecurity | Any | None) -> ClientSecurity:
    """The security settings of a SimpleConsumer's ``config`` argument.

    Args:
        config: ``None`` (PLAINTEXT), a `ClientSecurity`, a config object
            with a ``security`` attribute (`ConsumerConfig`,
            `ProducerConfig`), or a mapping of Kafka property names.

    Returns:
        The parsed settings.

    Raises:
        ConfigError: naming the property, for a bad value.
        TypeError: ``config`` is none of these.
    """
    if config is None:
        return ClientSecurity()
    if isinstance(config, ClientSecurity):
        return config
    security = getattr(config, "security", None)
    if isinstance(security, ClientSecurity):
        return security
    if isinstance(config, Mapping):
        return ClientSecurity.from_properties({str(k).strip(): v for k, v in config.items()})
    raise TypeError(f"config must be a mapping of Kafka properties or a ClientSecurity, not {type(config).__name__}")


class SimpleConsumer(ClosingClient):
    """Blocking SimpleConsumer (Kafka 0.8's API): ``SimpleConsumer(host, port,
    so_timeout_ms, buffer_size, client_id, *, config=None)``, arguments as for
    `TrioSimpleConsumer` (``buffer_size`` is ignored; ``config`` holds the
    security properties under Kafka's names).

    Methods mirror `TrioSimpleConsumer`: ``fetch``, ``multifetch``,
    ``get_offsets_before``, ``close``; usable as a context manager. Each call
    crosses into the client's trio thread once; after `close` every call
    raises `LoopClosedError`.

    One that is never closed does not keep the interpreter alive (its thread
    is a daemon thread) and is closed at interpreter exit by kclient's exit
    hook (`kclient.sync`); garbage-collected while open, it emits
    ``ResourceWarning: unclosed <SimpleConsumer ...>`` and is closed.

    Args:
        host: the broker's host.
        port: the broker's port.
        so_timeout_ms: connect and request timeout (ms).
        buffer_size: accepted for Kafka's signature and ignored (see
            `TrioSimpleConsumer`; bytes).
        client_id: sent in every request header.
        config: the security properties, and ``isolation.level`` (see
            `TrioSimpleConsumer`).
        statistics_interval_ms: with ``statistics_callback``, call it every
            this many ms (librdkafka's ``statistics.interval.ms``; 0, the
            default: never).
        statistics_callback: called with a `statistics` snapshot every
            ``statistics_interval_ms`` on a thread of its own (librdkafka's
            ``stats_cb``), until `close`.
        isolation_level: ``read_uncommitted`` or ``read_committed``
            (KIP-98; None: ``config``'s ``isolation.level``, else
            ``read_uncommitted``; see `TrioSimpleConsumer`).

    Raises:
        ConfigError: a bad security value or ``isolation.level``, or only
            one of ``statistics_interval_ms`` > 0 and
            ``statistics_callback``.
    """

    def __init__(
        self,
        host: str,
        port: int,
        so_timeout_ms: int = 30000,
        buffer_size: int = 64 * 1024,
        client_id: str = "kclient-simple-consumer",
        *,
        config: Mapping[str, Any] | ClientSecurity | Any | None = None,
        statistics_interval_ms: int = 0,
        statistics_callback: Callable[[ConsumerStatistics], object] | None = None,
        isolation_level: str | None = None,
    ) -> None:
        if statistics_interval_ms < 0 or (statistics_interval_ms > 0) != (statistics_callback is not None):
            raise ConfigError("statistics_interval_ms > 0 and statistics_callback go together (librdkafka's statistics.interval.ms and stats_cb)")
        core = TrioSimpleConsumer(host, port, so_timeout_ms, buffer_size, client_id, config=config, isolation_level=isolation_level)  # ConfigError first
        self._loop = LoopThread(name=f"kclient-simple-consumer-{host}:{port}")
        self._core = core
        with self._loop.closing_on_error():
            self._loop.call_sync(self._core.attach, self._loop.nursery)
        reporter = None
        if statistics_callback is not None:
            reporter = StatisticsReporter(statistics_interval_ms, statistics_callback, core.statistics, f"kclient-simple-consumer-{host}:{port}-stats")
        self._closer = LoopClientCloser(
            f"<SimpleConsumer {host}:{port} client.id={client_id}>",
            max(1.0, so_timeout_ms / 1000),
            self._loop,
            core.aclose,
            reporter=reporter,
            ignore=(Exception,),  # the loop is gone already
            logger=log,
        )
        track(self._closer)

    @property
    def host(self) -> str:
        """The broker's host."""
        return self._core.host

    @property
    def port(self) -> int:
        """The broker's port."""
        return self._core.port

    def fetch(self, request: FetchRequest, *, max_wait_ms: int = 0, min_bytes: int = 0) -> ByteBufferMessageSet:
        """Blocking `TrioSimpleConsumer.fetch`: read one partition.

        Args:
            request: The partition, the first offset and the size limit
                (``max_size``, bytes).
            max_wait_ms: Long-poll limit (ms); 0 answers at once.
            min_bytes: Answer early once this many bytes are ready (bytes).

        Returns:
            A `ByteBufferMessageSet` over the partition's records.

        Raises:
            LoopClosedError: after `close`.
            BrokerResponseError: the partition's error, e.g.
                `OffsetOutOfRangeError`.
            MessageSizeTooLargeError: the first batch does not fit in
                ``request.max_size``.
            KafkaConnectionError: connecting or the connection failed.
            KafkaTimeoutError: the broker did not answer in time.
        """
        result: ByteBufferMessageSet = self._loop.call(lambda: self._core.fetch(request, max_wait_ms=max_wait_ms, min_bytes=min_bytes))
        return result

    def multifetch(self, requests: Sequence[FetchRequest], *, max_wait_ms: int = 0, min_bytes: int = 0) -> MultiFetchResponse:
        """Blocking `TrioSimpleConsumer.multifetch`: read several partitions
        in one round trip (several Fetch requests in flight for more than
        ``PIPELINE_PARTITIONS`` (64) partitions without a long poll).

        Args:
            requests: One FetchRequest per partition.
            max_wait_ms: Long-poll limit (ms); 0 answers at once.
            min_bytes: Answer early once this many bytes are ready (bytes).

        Returns:
            A `MultiFetchResponse`: one `ByteBufferMessageSet` per request,
            in order; a partition's error is raised when its set is iterated.

        Raises:
            LoopClosedError: after `close`.
            BrokerResponseError: a top-level error for the whole request.
            KafkaConnectionError: connecting or the connection failed.
            KafkaTimeoutError: the broker did not answer in time.
        """
        result: MultiFetchResponse = self._loop.call(lambda: self._core.multifetch(list(requests), max_wait_ms=max_wait_ms, min_bytes=min_bytes))
        return result

    def multifetch_iter(self, requests: Sequence[FetchRequest], *, max_wait_ms: int = 0, min_bytes: int = 0) -> Iterator[ByteBufferMessageSet]:
        """Blocking `TrioSimpleConsumer.multifetch_iter`: `multifetch`,
        handing out each message set as soon as its part of the answer is
        in, so that reading the first partitions' messages overlaps the
        broker reading the next ones::

            for req, ms in zip(reqs, consumer.multifetch_iter(reqs)):
                for mo in ms: ...

        The requests are written by this call (the first round), before it
        returns; the iterator waits for each part in turn. Stopping early is
        safe: the answers still due are read and dropped.

        Args:
            requests: One FetchRequest per partition.
            max_wait_ms: Long-poll limit (ms); 0 answers at once.
            min_bytes: Answer early once this many bytes are ready (bytes).

        Returns:
            An iterator of one `ByteBufferMessageSet` per request, in
            request order; a partition's error is raised when its set is
            iterated.

        Raises:
            LoopClosedError: after `close` (also from the iterator).
            BrokerResponseError: a top-level error of a Fetch request,
                from the iterator, where its part would begin.
            KafkaConnectionError: connecting, writing the requests (from
                this call), or a failed connection (from the iterator,
                after the sets already in).
            KafkaTimeoutError: the broker did not answer in time (from the
                iterator).
        """
        requests = list(requests)
        fetch = self._loop.call(lambda: self._core._open_multifetch(requests, max_wait_ms, min_bytes, None))
        return self._ready_sets(fetch)

    def _ready_sets(self, fetch: _MultiFetch) -> Iterator[ByteBufferMessageSet]:
        while True:
            ready = self._loop.call(fetch.next_ready)
            if ready is None:
                return
            yield from ready

    def get_offsets_before(self, topic: str, partition: int, time: int, max_num_offsets: int) -> list[int]:
        """Blocking `TrioSimpleConsumer.get_offsets_before` (Kafka's
        ``getOffsetsBefore``).

        Args:
            topic: Topic name.
            partition: Partition number.
            time: Epoch time in ms, or `OffsetRequest.LATEST_TIME` (-1) /
                `OffsetRequest.EARLIEST_TIME` (-2).
            max_num_offsets: Upper bound on the offsets returned.

        Returns:
            The offsets, newest first.

        Raises:
            LoopClosedError: after `close`.
            BrokerResponseError: the partition's error, e.g.
                `UnknownTopicOrPartitionError`.
            UnsupportedVersionError: no ListOffsets version in common.
            KafkaConnectionError: connecting or the connection failed.
            KafkaTimeoutError: the broker did not answer in time.
        """
        result: list[int] = self._loop.call(self._core.get_offsets_before, topic, partition, time, max_num_offsets)
        return result

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        """Blocking `TrioSimpleConsumer.partitions_for` (Kafka's
        ``partitionsFor``): how many partitions a topic has, and where.
        Args, Returns and Raises as there, and `LoopClosedError` after
        `close`.
        """
        result: tuple[PartitionInfo, ...] = self._loop.call(self._core.partitions_for, topic)
        return result

    def statistics(self) -> ConsumerStatistics:
        """What this consumer fetched so far, and each partition's lag (see
        `TrioSimpleConsumer.statistics`); callable from any thread, also
        after `close`.

        Returns:
            A `kclient.ConsumerStatistics`:
            ``fetch_requests``, ``fetched_messages``, ``fetched_bytes`` and
            per partition the position, high watermark and ``lag``.
        """
        return self._core.statistics()

    def close(self) -> None:
        """Close the connection and stop the client's trio thread (idempotent;
        never raises for an already closed consumer). A SimpleConsumer still
        open at interpreter exit is closed by kclient's exit hook (bounded by
        ``so_timeout_ms``); one garbage-collected while open emits
        ``ResourceWarning`` and is closed in the background."""
        self._closer.close()

    def __repr__(self) -> str:
        return f"<SimpleConsumer {self._core.host}:{self._core.port} {self._state()}>"
