"""`ProducerConfig`: the producer's settings under Kafka's producer
property names (https://kafka.apache.org/documentation/#producerconfigs,
and the 0.8 names of Kafka 0.8's ``ProducerConfig``)."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from kclient.client.producer.transaction_rules import resolve_transactional_config
from kclient.config.base import prop
from kclient.config.convert import (
    HostPort,
    at_least,
    enum_choice,
    one_of,
    same_as,
    to_acks,
    to_bool,
    to_codec,
    to_encoding,
    to_host_ports,
    to_int,
    to_list,
    to_optional_plugin,
    to_optional_str,
    to_plugin,
    to_str,
)
from kclient.config.formats import to_api_version
from kclient.config.security import _ClientSecurityConfig
from kclient.errors import ConfigError

__all__ = ["ProducerConfig"]


@attrs.frozen
class TransactionalDefault:
    """A property's default that depends on ``transactional.id``: a
    transactional producer implies ``acks=all`` and
    ``enable.idempotence=true`` (KIP-98), while an explicit conflicting
    value stays a `ConfigError`."""

    plain: Any
    transactional: Any

    def __call__(self, config: Any) -> Any:
        return self.plain if config.transactional_id is None else self.transactional


def _batch_messages_default(config: Any) -> int:
    """``batch.num.messages``'s default: librdkafka's 10000, at most
    ``queue.buffering.max.messages``."""
    return min(10000, int(config.queue_buffering_max_messages))


def _in_flight_default(config: Any) -> int:
    """``max.in.flight.requests.per.connection``'s default: 5 with
    ``enable.idempotence`` (Kafka's default; the sequence numbers keep each
    partition's order across retries), else 1 (Kafka 0.8's order)."""
    return 5 if config.enable_idempotence else 1


@attrs.frozen(kw_only=True)
class ProducerConfig(_ClientSecurityConfig):
    """Settings of a `Producer` (Kafka 0.8 producer names).

    Build with ``ProducerConfig(metadata_broker_list="host:9092", ...)`` or
    ``ProducerConfig.from_properties({"metadata.broker.list": "host:9092"})``
    (or a ``.properties`` path). The 0.7 spellings ``queue.time``,
    ``queue.size`` and ``queue.enqueueTimeout.ms`` are aliases, as are the
    modern client names that mean the same thing: ``bootstrap.servers``,
    ``acks`` (``all`` = -1), ``retries``, ``compression.type``, ``linger.ms``
    and ``metadata.max.age.ms``. ``retry.backoff.ms``, ``client.id``,
    ``max.in.flight.requests.per.connection``, ``max.request.size``,
    ``send.buffer.bytes`` and ``enable.idempotence`` are already the modern
    names.

    ``batch.size`` is the modern producer's: a partition's batch size in
    **bytes** (the async producer accumulates per partition); 0.7's
    ``batch.size`` (a count of messages) is ``batch.num.messages``, which
    bounds a partition's records per request. The async producer has two
    bounds: ``queue.buffering.max.messages`` (messages waiting in its
    queue) and Kafka's ``buffer.memory`` (bytes of records held until
    acknowledged); ``max.block.ms`` is an alias of
    ``queue.enqueue.timeout.ms``, how long ``send`` waits for room in
    either.

    Deliberate deviations: ``request.required.acks`` defaults to **1** (the
    leader acknowledged the write) rather than the 0.8 default 0 (no
    acknowledgement), so that a default producer learns about failures;
    ``queue.buffering.max.ms`` (alias ``linger.ms``) defaults to Kafka 4.0's
    **5** ms rather than 0.8's 5000 ms, so that an async send is acknowledged
    at once rather than seconds later.

    Plug-in properties (``serializer.class``, ``key.serializer.class``,
    ``partitioner.class``, ``event.handler``, ``callback.handler``) take a
    dotted class path or an already-built class or instance, stored as given;
    `kclient.plugins.load_plugin` turns them into instances.

    Security (KIP-43 SASL, KIP-84 SCRAM, KIP-152 SaslAuthenticate, TLS):
    ``security.protocol``, ``ssl.ca.location`` / ``ssl.cafile``,
    ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``,
    ``ssl.endpoint.identification.algorithm``, ``sasl.mechanism``,
    ``sasl.username``, ``sasl.password``, ``sasl.jaas.config``; parsed
    together into ``security`` (see `kclient.config.security`).

    Raises:
        ConfigError: Naming the property, for a bad value, for
            ``producer.type=async`` with ``batch.num.messages`` larger than
            ``queue.buffering.max.messages``, or for
            ``enable.idempotence=true`` without ``request.required.acks=-1``
            or with more than 5 ``max.in.flight.requests.per.connection``,
            for ``transactional.id`` with ``acks`` other than all,
            ``enable.idempotence=false``, ``retries=0`` or more than 5
            requests in flight (naming both properties), or for security properties that do not fit together (SASL
            without ``sasl.mechanism`` / ``sasl.username`` /
            ``sasl.password``).
    """

    NOT_MAPPED: ClassVar[dict[str, str]] = {}

    metadata_broker_list: tuple[HostPort, ...] = prop(
        "metadata.broker.list", to_host_ports, aliases=["bootstrap.servers"]
    )
    """Bootstrap brokers, ``"host:port,host:port"`` -> ``(("host", port), ...)``. Required."""
    producer_type: str = prop("producer.type", enum_choice("sync", "async"), "sync")
    """``"sync"``: ``send`` waits for the acknowledgement; ``"async"``: ``send`` enqueues."""
    transactional_id: str | None = prop("transactional.id", to_optional_str, None)
    """Makes the producer transactional (KIP-98): ``init_transactions``,
    ``begin_transaction``, ``commit_transaction`` and
    ``abort_transaction``; the coordinator fences an older producer with
    the same id. Implies ``enable.idempotence=true`` and ``acks=all``
    (setting either otherwise is a `ConfigError`)."""
    transaction_timeout_ms: int = prop("transaction.timeout.ms", to_int, 60000, at_least(1))
    """The longest a transaction may stay open before the coordinator
    aborts it (ms; at most the broker's ``transaction.max.timeout.ms``)."""
    request_required_acks: int = prop(
        "request.required.acks", to_acks, attrs.Factory(TransactionalDefault(1, -1), takes_self=True), one_of(-1, 0, 1), aliases=["acks"]
    )
    """0 no acknowledgement, 1 the leader wrote it, -1 (``all``) every
    in-sync replica did. Default 1; -1 with ``transactional.id``."""
    request_timeout_ms: int = prop("request.timeout.ms", to_int, 10000, at_least(1))
    """How long the broker may wait to satisfy ``request.required.acks`` (ms)."""
    serializer_class: Any = prop("serializer.class", to_plugin, "kclient.DefaultEncoder")
    """Encoder of message values: dotted class path, class or instance."""
    key_serializer_class: Any = prop("key.serializer.class", to_optional_plugin, same_as("serializer_class"))
    """Encoder of keys; defaults to (and ``None`` means) ``serializer.class``."""
    serializer_encoding: str = prop("serializer.encoding", to_encoding, "utf-8")
    """Text encoding a `StringEncoder` uses (Kafka's default UTF8)."""
    partitioner_class: Any = prop("partitioner.class", to_plugin, "kclient.DefaultPartitioner")
    """Partitioner: dotted class path, class or instance."""
    partitioner_ignore_keys: bool = prop("partitioner.ignore.keys", to_bool, False)
    """Async, built-in partitioning (no ``partitioner.class`` set): keyed
    records are placed as keyless ones, on the topic's sticky partition
    (KIP-794's ``partitioner.ignore.keys``, default false). Sync mode and
    a custom ``event.handler`` still place keyed records by their key."""
    partitioner_adaptive_partitioning_enable: bool = prop("partitioner.adaptive.partitioning.enable", to_bool, True)
    """Async, sticky partitioner: the next partition of a topic's keyless
    records is chosen at random weighted towards the partitions with the
    fewest bytes queued in the producer's batches (KIP-794's adaptive
    partitioning, default true; Kafka weighs by batches queued); false:
    uniformly at random (KIP-480)."""
    partitioner_availability_timeout_ms: int = prop("partitioner.availability.timeout.ms", to_int, 0, at_least(0))
    """Async, adaptive partitioning: a partition whose ready batch waited
    this long past its linger (its leader is not taking data) is not chosen
    as the sticky partition (ms; KIP-794, default 0: never left out)."""
    compression_codec: str = prop("compression.codec", to_codec, "none", aliases=["compression.type"])
    """``none``, ``gzip``, ``snappy``, ``lz4`` or ``zstd`` (ids 0-4 accepted on input)."""
    compressed_topics: tuple[str, ...] = prop("compressed.topics", to_list, ())
    """Topics to compress; empty means every topic when a codec is set."""
    message_send_max_retries: int = prop("message.send.max.retries", to_int, 3, at_least(0), aliases=["retries"])
    """Retries of a failed send before `FailedToSendMessageError` (leadership
    errors, NOT_ENOUGH_REPLICAS, timeouts, lost connections); also bounds the
    wait for an unreachable bootstrap (every ``metadata.broker.list`` broker
    down), which then fails with `NoBrokersAvailableError` as the cause."""
    retry_backoff_ms: int = prop("retry.backoff.ms", to_int, 100, at_least(0))
    """Pause before the first retry (ms), doubled for each further one up to
    ``retry.backoff.max.ms``; metadata is refreshed before every retry."""
    retry_backoff_max_ms: int = prop("retry.backoff.max.ms", to_int, 1000, at_least(0))
    """Cap of the exponential retry backoff (ms; KIP-580): after a leader
    moves, a retry comes at most this long after the new leader is
    ready."""
    topic_metadata_refresh_interval_ms: int = prop(
        "topic.metadata.refresh.interval.ms", to_int, 600000, aliases=["metadata.max.age.ms"]
    )
    """Periodic metadata refresh (ms); negative: refresh only after a failure."""
    client_id: str = prop("client.id", to_str, "")
    """Sent with every request, for the broker's logs and quotas."""
    queue_buffering_max_ms: int = prop(
        "queue.buffering.max.ms", to_int, 5, at_least(0), aliases=["queue.time", "linger.ms"]
    )
    """Async: longest time a message waits in the queue before its batch is
    sent (ms; the linger). Default 5, Kafka 4.0's ``linger.ms`` (KIP-1030);
    Kafka 0.8 waited 5000. ``linger.ms`` and 0.7's ``queue.time`` set it
    too; given under several names with different values,
    ``queue.buffering.max.ms`` wins over ``queue.time``, which wins over
    ``linger.ms``, and the ignored one is logged as a warning."""
    queue_buffering_max_messages: int = prop(
        "queue.buffering.max.messages", to_int, 100000, at_least(1), aliases=["queue.size"]
    )
    """Async: the most records the producer holds, queued and in its
    per-partition batches (``buffer.memory`` bounds their bytes). Default
    100000, librdkafka's (Kafka 0.8 had 10000): holding this many makes
    every batch ready at once, so a bound far below the records that
    accumulate across many partitions within ``linger.ms`` sends tiny
    batches (measured at 2,048 partitions: 3x the records/s at 100000 as
    at 10000, ``benchmarks/README.md``)."""
    queue_enqueue_timeout_ms: int = prop(
        "queue.enqueue.timeout.ms", to_int, -1, at_least(-1), aliases=["queue.enqueueTimeout.ms", "max.block.ms"]
    )
    """Async, no room (``queue.buffering.max.messages`` or ``buffer.memory``
    reached): how long ``send`` waits for room (ms): -1 block until there
    is room, 0 drop at once (`QueueFullError`), >0 wait that many ms then
    drop. Kafka's ``max.block.ms`` sets it too when
    ``queue.enqueue.timeout.ms`` is not given (the canonical name wins, a
    differing alias is logged); the default stays Kafka 0.8's -1, not
    ``max.block.ms``'s 60000, so that a default async ``send`` waits as it
    did. Unlike Kafka's ``max.block.ms`` it does not bound the wait for
    metadata."""
    buffer_memory: int = prop("buffer.memory", to_int, 33554432, at_least(1))
    """Async: the most bytes of records the producer holds, queued, in the
    per-partition batches and in flight until acknowledged or failed
    (bytes; Kafka's ``buffer.memory``, default 33554432 = 32 MiB). A record
    counts its key, its value and the v2 record overhead (the accumulator's
    estimate). With no room, ``send`` waits ``queue.enqueue.timeout.ms``
    (alias ``max.block.ms``), every batch is sent at once, then
    `QueueFullError` names the bound; a single record larger than this
    fails at once (`MessageSizeTooLargeError`)."""
    close_timeout_ms: int = prop("close.timeout.ms", to_int, 5000, at_least(0))
    """Async: the longest the flush of a producer that was never closed may
    take at interpreter exit (ms; Kafka's ``KafkaProducer.close(timeout)``,
    kclient's ``Producer.close(timeout_ms)``). What is then still queued or
    unacknowledged is abandoned and its count logged at ERROR."""
    batch_num_messages: int = prop("batch.num.messages", to_int, attrs.Factory(_batch_messages_default, takes_self=True), at_least(1))
    """Async: the most messages of one batch (a count). With the default
    event handler it bounds each partition's batch (with ``batch.size``)
    and the messages of one partition in one Produce request; with a custom
    ``event.handler`` it is Kafka 0.8's batch across partitions. Default
    10000 (librdkafka's; Kafka 0.8 had 200), or ``queue.buffering.max.messages``
    when that is smaller."""
    batch_size: int = prop("batch.size", to_int, 16384, at_least(1))
    """Async: a partition's batch is full, and sent, at this many bytes (an
    estimate of the encoded records; Kafka's ``batch.size``, default 16384
    as in Kafka 4). A batch is also sent ``linger.ms`` after its first
    record. Keyless records go to one partition until its batch is full or
    sent (the sticky partitioner, KIP-480), unless ``partitioner.class``
    is set."""
    send_buffer_bytes: int = prop("send.buffer.bytes", to_int, 102400, at_least(-1))
    """Socket send buffer (bytes); -1 leaves the OS default."""
    event_handler: Any = prop("event.handler", to_optional_plugin, None)
    """EventHandler replacing the default pipeline (0.7); ``None`` for the default."""
    callback_handler: Any = prop("callback.handler", to_optional_plugin, None)
    """CallbackHandler with enqueue/dequeue/before-send hooks (0.7); ``None`` for none."""
    enable_idempotence: bool = prop("enable.idempotence", to_bool, attrs.Factory(TransactionalDefault(False, True), takes_self=True))
    """Default false; true with ``transactional.id``. Get a producer id (InitProducerId) and number each partition's batches
    (KIP-98) so that retries, also to a new leader after a failover, do not
    duplicate; keeps up to ``max.in.flight.requests.per.connection`` (at
    most 5) batches per partition in flight, in order across retries (as
    Kafka since 1.0). Needs ``request.required.acks=-1`` and Produce v3+
    (``api.version`` 0.11+)."""
    max_request_size: int = prop("max.request.size", to_int, 1048576, at_least(1))
    """Largest produce request the producer builds (bytes)."""
    max_in_flight_requests_per_connection: int = prop(
        "max.in.flight.requests.per.connection", to_int, attrs.Factory(_in_flight_default, takes_self=True), at_least(1)
    )
    """Async mode: batches the ProducerSendThread may have sent and not yet
    had acknowledged (Kafka's property of the same name). Default 1, and 5
    with ``enable.idempotence`` (Kafka's default; a transactional producer
    is idempotent). 1 keeps Kafka 0.8's one-batch-at-a-time order guarantee
    even across retries; more pipelines Produce requests for throughput,
    and without idempotence a retried batch may then land after a later
    one, as in Kafka. With ``enable.idempotence`` the sequence numbers keep
    each partition's order across retries; it allows at most 5."""
    socket_busy_poll_us: int = prop("socket.busy.poll.us", to_int, 0, at_least(0))
    """Sync sends (``producer.type=sync``, ``TrioProducer.send``): after
    writing a Produce request, keep the sending thread polling the socket
    for the response for up to this many µs before it sleeps (kclient's
    own property, named after Linux's ``SO_BUSY_POLL``). 0 (the default)
    sleeps at once. A sleeping core, above all a virtual machine's, can
    take tens to hundreds of µs to wake when the response arrives; polling
    trades that CPU time for latency. About 200 covers a round trip to a
    broker on the same host or LAN: measured on a 2-core VM, p99 of
    one-record sends fell from 0.7 to 0.32 ms while the host was quiet,
    and rose from 0.69 to 0.94 ms while it was busy (``benchmarks/README.md``):
    measure on your own machines. The poll blocks the producer's event
    loop, and ends as soon as the response's first bytes arrive."""
    api_version: tuple[int, int, int] | None = prop("api.version", to_api_version, None)
    """Cap on the Produce version, and with it the message format, as a Kafka
    release (kafka-python's ``api_version``): ``auto`` / ``None`` (default)
    takes the highest the broker advertises; ``0.8.2`` (also
    ``0.8.0``/``0.8.1``) -> Produce v0, ``0.9`` -> Produce v1, both with
    message set v0; ``0.10`` -> Produce v2 with message set v1; ``0.11`` and
    later -> Produce v3+ with record batch v2 (``2.1`` for zstd). Metadata is
    still negotiated with ApiVersions. Stored as ``(major, minor, patch)``."""

    def __attrs_post_init__(self) -> None:
        self._check_security()
        if self.key_serializer_class is None:
            object.__setattr__(self, "key_serializer_class", self.serializer_class)
        if self.producer_type == "async" and self.batch_num_messages > self.queue_buffering_max_messages:
            raise ConfigError(
                f"Invalid value {self.batch_num_messages} for configuration batch.num.messages: "
                f"must not exceed queue.buffering.max.messages={self.queue_buffering_max_messages}"
            )
        if self.transactional_id is not None:
            self._check_transactional()
        if self.enable_idempotence and self.request_required_acks != -1:
            raise ConfigError(
                f"Invalid value {self.request_required_acks} for configuration request.required.acks: "
                "must be -1 (all) when enable.idempotence=true"
            )
        if self.enable_idempotence and self.max_in_flight_requests_per_connection > 5:
            # Kafka's producer: "Must set max.in.flight.requests.per.connection
            # to at most 5 to use the idempotent producer" (the broker keeps
            # the last 5 batches per producer for duplicate detection).
            raise ConfigError(
                f"Invalid value {self.max_in_flight_requests_per_connection} for configuration "
                "max.in.flight.requests.per.connection: must be at most 5 when enable.idempotence=true"
            )

    def _check_transactional(self) -> None:
        resolve_transactional_config(
            self.transactional_id,
            self.transaction_timeout_ms,
            enable_idempotence=self.enable_idempotence,
            acks=self.request_required_acks,
            retries=self.message_send_max_retries,
            max_in_flight=self.max_in_flight_requests_per_connection,
        )

    @property
    def is_async(self) -> bool:
        """``producer.type == "async"``."""
        return self.producer_type == "async"

    def codec_for(self, topic: str) -> str:
        """The codec name to use for ``topic`` (the 0.8 rule).

        Args:
            topic: The topic a message set is for.

        Returns:
            ``compression.codec`` if it is not ``none`` and
            ``compressed.topics`` is empty or lists ``topic``; otherwise
            ``"none"``.
        """
        if self.compression_codec == "none":
            return "none"
        if not self.compressed_topics or topic in self.compressed_topics:
            return self.compression_codec
        return "none"
