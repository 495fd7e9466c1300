"""Cluster metadata and broker connections for the clients (trio).

`Cluster` bootstraps from ``metadata.broker.list``, keeps a metadata
cache (brokers, topics, partition leaders) refreshed on demand and every
``topic.metadata.refresh.interval.ms``, and one `BrokerConnection`
per broker, reconnecting with backoff when one is lost. Clients reconnect to
the host/port that Metadata advertises (Kafka protocol guide,
"Partitioning and bootstrapping": https://kafka.apache.org/protocol#protocol_partitioning).

Every connection is secured as ``security`` says (TLS, SASL: see
`kclient.net.connection.BrokerConnection.connect`). An `AuthenticationError`
is never retried, neither over the other brokers nor by a metadata
refresh: the same credentials fail the same way everywhere, so it reaches
the caller at once, typed.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Sequence

import attrs
import trio

from kclient.errors import NONE as _NO_ERROR
from kclient.errors import (
    AuthenticationError,
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NoBrokersAvailableError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kclient.net.connection import BrokerConnection
from kclient.net.settings import ConnectionSettings
from kclient.net.throttle_stats import ThrottleTracker
from kclient.protocol.messages import METADATA
from kclient.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from kclient.security.settings import ClientSecurity

log = logging.getLogger(__name__)


def describe_failure(exc: BaseException, address: str) -> str:
    """How one broker failed, for a `NoBrokersAvailableError` message:
    the address (unless the error names it already) and, for anything but
    a plain connection failure (a `kclient.errors.ProtocolError` from a
    garbage answer, say), the error's class, so that it is not mistaken
    for an unreachable broker (issue 30).

    Args:
        exc: The broker's error.
        address: ``host:port``.

    Returns:
        The text.
    """
    text = str(exc)
    if not isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
        text = f"{type(exc).__name__}: {text}"
    return text if address in text else f"{address}: {text}"


def no_brokers_available(what: str, last: BaseException | None) -> NoBrokersAvailableError:
    """A `NoBrokersAvailableError` saying ``what`` failed after retries,
    caused by the deepest error behind ``last`` (the `ProtocolError` of a
    broker that answered garbage, not the `NoBrokersAvailableError` that
    wraps it), so that ``__cause__`` names what really went wrong.

    Args:
        what: What failed (``"metadata refresh failed"``).
        last: The last attempt's error, if any.

    Returns:
        The error to raise.
    """
    cause = last
    while isinstance(cause, NoBrokersAvailableError) and cause.__cause__ is not None:
        cause = cause.__cause__
    error = NoBrokersAvailableError(f"{what}: {last}")
    error.__cause__ = cause
    return error


@attrs.frozen
class BrokerInfo:
    """A broker as Metadata describes it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen
class PartitionInfo:
    """One partition's leader (-1 when none), replicas and ISR."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    error_code: int = 0


@attrs.frozen
class ClusterMetadata:
    """A snapshot of the cluster: brokers by node id and partitions by topic
    (each a tuple sorted by partition id), plus per-topic error codes, the
    cluster id and controller (-1: not told, Metadata v0) and the topics the
    cluster marks internal (Metadata v1+, ``__consumer_offsets``, ...)."""

    brokers: dict[int, BrokerInfo]
    topics: dict[str, tuple[PartitionInfo, ...]]
    topic_errors: dict[str, int]
    cluster_id: str | None = None
    controller_id: int = -1
    internal_topics: frozenset[str] = frozenset()

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        """The partitions of a topic in this snapshot.

        Args:
            topic: The topic name.

        Returns:
            Its partitions sorted by id; ``()`` for a topic not in the
            snapshot.
        """
        return self.topics.get(topic, ())

    def leaders(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, str, int]]:
        """Where some partitions' leaders are, in this snapshot.

        Args:
            keys: ``(topic, partition)`` pairs.

        Returns:
            ``{key: (broker id, host, port)}`` for the partitions whose
            leader is among the snapshot's brokers (the others are left out).
        """
        by_topic: dict[str, dict[int, PartitionInfo]] = {}
        out: dict[tuple[str, int], tuple[int, str, int]] = {}
        for topic, partition in keys:
            if topic not in by_topic:
                by_topic[topic] = {p.partition: p for p in self.partitions_for(topic)}
            info = by_topic[topic].get(partition)
            broker = self.brokers.get(info.leader) if info is not None else None
            if broker is not None:
                out[(topic, partition)] = (broker.node_id, broker.host, broker.port)
        return out


class Cluster:
    """Metadata cache and connection pool (use inside a trio nursery).

    Args:
        nursery: Runs the connections' reader tasks.
        bootstrap: Sequence of ``(host, port)``.
        client_id: Sent in every request header.
        request_timeout_ms: Response timeout of each request (ms).
        connect_timeout_ms: TCP connect plus TLS handshake timeout (ms).
        retry_backoff_ms: Pause between metadata attempts (ms).
        metadata_max_age_ms: Metadata older than this is refreshed (ms).
        security: ``security.protocol`` with its ``ssl.*`` / ``sasl.*``
            settings (`ClientSecurity`); ``None`` for PLAINTEXT.

    Raises:
        ConfigError: no bootstrap broker, or an ``ssl.*`` file that cannot
            be used (the TLS context is built here, once).

    Methods raise `NoBrokersAvailableError` when no broker answers, and an
    `AuthenticationError` (`SslAuthenticationError`,
    `SaslAuthenticationFailedError`, ...) at once, without retrying. Once
    authentication failed, every later connection attempt raises the same
    error without connecting again: fix the settings and make a new client.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        bootstrap: Sequence[tuple[str, int]],
        *,
        client_id: str | None = "kclient",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 600000,
        security: ClientSecurity | None = None,
    ) -> None:
        if not bootstrap:
            raise ConfigError("no bootstrap brokers given (metadata.broker.list)")
        #: How every connection is opened (its TLS context built once, here).
        self.settings = ConnectionSettings(client_id, connect_timeout_ms, request_timeout_ms, security).with_tls_context()
        self.security = security
        self._nursery = nursery
        self._bootstrap = list(bootstrap)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.metadata = ClusterMetadata({}, {}, {})
        self._metadata_time = -1e18
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._connect_locks: dict[tuple[str, int], trio.Lock] = {}
        self._refresh_lock = trio.Lock()
        self._known_topics: set[str] = set()
        #: The first authentication failure: every later connection attempt
        #: raises it again without touching the network (no retry storm).
        self._auth_error: AuthenticationError | None = None
        #: Where the connections record each response's ``throttle_time_ms``
        #: (the owning client's statistics; None: nowhere).
        self.throttles: ThrottleTracker | None = None

    @classmethod
    def open(
        cls,
        nursery: trio.Nursery,
        bootstrap: Sequence[tuple[str, int]],
        settings: ConnectionSettings,
        *,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 600000,
    ) -> Cluster:
        """A cluster whose connections are opened with ``settings``.

        Args:
            nursery: Runs the connections' reader tasks.
            bootstrap: Sequence of ``(host, port)``.
            settings: Client id, timeouts and security of every connection.
            retry_backoff_ms: Pause between metadata attempts (ms).
            metadata_max_age_ms: Metadata older than this is refreshed (ms).

        Returns:
            The cluster (it connects lazily).

        Raises:
            ConfigError: no bootstrap broker, or an ``ssl.*`` file that
                cannot be used.
        """
        return cls(
            nursery,
            bootstrap,
            client_id=settings.client_id,
            request_timeout_ms=settings.request_timeout_ms,
            connect_timeout_ms=settings.connect_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            security=settings.security,
        )

    async def connection(self, host: str, port: int) -> BrokerConnection:
        """A live connection to a broker address (opened, secured and
        authenticated if needed).

        Args:
            host: The broker's host.
            port: The broker's port.

        Returns:
            The connection, shared by every caller.

        Raises:
            KafkaConnectionError: the broker cannot be reached within
                ``connect_timeout_ms``.
            AuthenticationError: the TLS handshake or SASL exchange failed,
                now or on an earlier attempt of this cluster.
        """
        key = (host, port)
        conn = self._connections.get(key)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connect_locks.setdefault(key, trio.Lock())
        async with lock:
            conn = self._connections.get(key)
            if conn is not None and not conn.closed:
                return conn
            if self._auth_error is not None:
                raise self._auth_error
            try:
                conn = await self.settings.connect(self._nursery, host, port)
            except AuthenticationError as exc:
                log.error("authentication with %s:%d failed; not retried: %s", host, port, exc)
                self._auth_error = exc
                raise
            conn.throttles = self.throttles
            self._connections[key] = conn
            return conn

    async def broker_connection(self, node_id: int) -> BrokerConnection:
        """A connection to a broker at the address Metadata advertises.

        Args:
            node_id: The broker's node id.

        Returns:
            The connection.

        Raises:
            LeaderNotAvailableError: the broker is not in the metadata,
                even after a refresh.
            KafkaConnectionError: the broker cannot be reached.
            NoBrokersAvailableError: the metadata refresh found no broker.
        """
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            await self.refresh_metadata()
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                raise LeaderNotAvailableError(f"broker {node_id} is not in the cluster metadata")
        return await self.connection(broker.host, broker.port)

    async def any_connection(self) -> BrokerConnection:
        """A connection to any known broker (the ones from Metadata first,
        then the bootstrap list in random order).

        Returns:
            The first connection that opens.

        Raises:
            NoBrokersAvailableError: no broker could be reached.
            AuthenticationError: a broker refused the credentials or the TLS
                handshake failed; the other brokers are not tried (they
                would refuse the same way).
        """
        candidates = [(b.host, b.port) for b in self.metadata.brokers.values()]
        boot = list(self._bootstrap)
        random.shuffle(boot)
        errors = []
        cause: KafkaError | None = None
        for host, port in dict.fromkeys([*candidates, *boot]):
            try:
                return await self.connection(host, port)
            except AuthenticationError:
                raise
            except KafkaError as exc:
                errors.append(describe_failure(exc, f"{host}:{port}"))
                if cause is None or isinstance(cause, KafkaConnectionError):
                    cause = exc  # the most telling one: a ProtocolError over a refusal
        raise NoBrokersAvailableError("no broker answered: " + "; ".join(errors)) from cause

    async def refresh_metadata(self, topics: Iterable[str] = (), *, allow_auto_create: bool = True) -> ClusterMetadata:
        """Fetch metadata for the known topics plus some more. Retries
        connection errors and timeouts over the known brokers, once per
        broker; an `AuthenticationError` is raised at once.

        Args:
            topics: Topics to add to the known ones.
            allow_auto_create: Let the broker create missing topics (if it
                is configured to).

        Returns:
            The new snapshot (also `metadata`).

        Raises:
            NoBrokersAvailableError: no broker answered.
            AuthenticationError: a broker refused the credentials or the
                TLS handshake failed.
        """
        self._known_topics.update(topics)
        async with self._refresh_lock:
            last: BaseException | None = None
            for _ in range(max(1, len(self._bootstrap) + len(self.metadata.brokers))):
                try:
                    conn = await self.any_connection()
                    metadata = await request_metadata(conn, sorted(self._known_topics), allow_auto_create=allow_auto_create)
                except (KafkaConnectionError, KafkaTimeoutError) as exc:
                    last = exc
                    await trio.sleep(self.retry_backoff_ms / 1000)
                    continue
                self.metadata = metadata
                self._metadata_time = trio.current_time()
                return self.metadata
            raise no_brokers_available("metadata refresh failed", last)

    def metadata_stale(self) -> bool:
        """Whether the snapshot is older than ``metadata_max_age_ms``."""
        return (trio.current_time() - self._metadata_time) * 1000 > self.metadata_max_age_ms

    async def partitions_for(self, topic: str, *, retries: int = 5) -> tuple[PartitionInfo, ...]:
        """The partitions of a topic (auto-created by the broker if it
        allows), waiting with backoff while the topic has no leaders yet.

        Args:
            topic: The topic name.
            retries: Metadata refreshes to try while the topic has no
                leaders, backing off exponentially from
                ``retry_backoff_ms``.

        Returns:
            The partitions, sorted by id, each with a leader.

        Raises:
            BrokerResponseError: the topic's error from Metadata (e.g.
                `UnknownTopicOrPartitionError`), or
                `LeaderNotAvailableError` when a partition still has no
                leader.
            NoBrokersAvailableError: no broker answered.
        """
        if topic not in self._known_topics or self.metadata_stale():
            await self.refresh_metadata([topic])
        for attempt in range(retries + 1):
            code = self.metadata.topic_errors.get(topic, 0)
            parts = self.metadata.partitions_for(topic)
            if code == _NO_ERROR and parts and all(p.leader >= 0 for p in parts):
                return parts
            if attempt == retries:
                break
            await trio.sleep(self.retry_backoff_ms * (2**attempt) / 1000)
            await self.refresh_metadata([topic])
        code = self.metadata.topic_errors.get(topic, 0)
        if code:
            raise error_for_code(code)(f"topic {topic!r}")
        if not self.metadata.partitions_for(topic):
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partitions")
        raise LeaderNotAvailableError(f"topic {topic!r} has partitions without a leader")

    async def aclose(self) -> None:
        """Close every connection."""
        for conn in list(self._connections.values()):
            await conn.aclose()
        self._connections.clear()


async def request_metadata(
    conn: BrokerConnection,
    topics: Iterable[str] | None = None,
    *,
    allow_auto_create: bool = False,
    min_version: int | None = None,
) -> ClusterMetadata:
    """Send one Metadata request on a connection and parse its answer: the
    one client-side Metadata call (Kafka protocol guide, Metadata API;
    https://kafka.apache.org/protocol#The_Messages_Metadata). The version is
    the highest both sides support (at least ``min_version``).

    Args:
        conn: An open connection to any broker.
        topics: The topics to describe; None for every topic (an empty
            list at Metadata v0, which has no null).
        allow_auto_create: Let the broker create missing listed topics (if
            it is configured to; Metadata v4+, KIP-204).
        min_version: The lowest Metadata version to use (1 to learn which
            topics are internal and the controller).

    Returns:
        The snapshot.

    Raises:
        KafkaConnectionError: the connection was lost.
        KafkaTimeoutError: no answer within the connection's request timeout.
        UnsupportedVersionError: the broker has no Metadata version from
            ``min_version`` on.
    """
    version = conn.version_for(METADATA, floor=min_version)
    if topics is None:
        names: list[MetadataRequestTopic] | None = [] if version == 0 else None
    else:
        names = [MetadataRequestTopic(name=t) for t in topics]
    response: MetadataResponse = await conn.request(METADATA, MetadataRequest(topics=names, allow_auto_topic_creation=allow_auto_create), version=version)
    return parse_metadata(response)


def parse_metadata(body: MetadataResponse) -> ClusterMetadata:
    """A Metadata response as a `ClusterMetadata` snapshot.

    Args:
        body: The response (any version; the fields a version lacks at
            their defaults: no rack, cluster id or controller, nothing
            internal).

    Returns:
        The snapshot; each topic's partitions sorted by id.
    """
    brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in body.brokers}
    topics: dict[str, tuple[PartitionInfo, ...]] = {}
    errors: dict[str, int] = {}
    # A topic without a name (v12+: one asked for by an unknown id) is left
    # out: the clients ask by name.
    named = [(t.name, t) for t in body.topics if t.name is not None]
    for name, t in named:
        errors[name] = t.error_code
        parts = [
            PartitionInfo(name, p.partition_index, p.leader_id, tuple(p.replica_nodes or ()), tuple(p.isr_nodes or ()), p.error_code)
            for p in t.partitions or ()
        ]
        topics[name] = tuple(sorted(parts, key=lambda p: p.partition))
    internal = frozenset(name for name, t in named if t.is_internal)
    return ClusterMetadata(brokers, topics, errors, body.cluster_id, body.controller_id, internal)


__all__ = ["BrokerInfo", "Cluster", "ClusterMetadata", "PartitionInfo", "describe_failure", "no_brokers_available", "parse_metadata", "request_metadata"]
