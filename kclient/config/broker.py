"""`BrokerConfig`: the bundled broker's settings under Kafka's broker
property names (``server.properties``; see
https://kafka.apache.org/documentation/#brokerconfigs)."""

from __future__ import annotations

from typing import ClassVar

import attrs

from kclient.config.base import _KafkaConfig, prop
from kclient.config.convert import (
    Listener,
    _at_least,
    _not_empty,
    _port,
    _to_bool,
    _to_int,
    _to_list,
    _to_listeners,
    _to_optional_int,
    _to_optional_str,
    _to_str,
)
from kclient.config.formats import (
    _check_topic_config_file,
    _to_format_version,
    _to_timestamp_type,
    load_topic_configs,
    message_format_magic,
)

__all__ = ["BrokerConfig"]

_WILDCARD_HOSTS = {"", "0.0.0.0", "::"}


@attrs.frozen(kw_only=True)
class BrokerConfig(_KafkaConfig):
    """Settings of the bundled broker (Kafka ``server.properties`` names).

    Build with ``BrokerConfig.from_file("server.properties", ["port=9093"])``
    (the ``kafka-server-start.sh ... --override`` way),
    ``BrokerConfig.from_properties(mapping)`` or ``BrokerConfig(port=0, ...)``.
    ``log.dir`` is an alias of ``log.dirs`` (which wins when both are given)
    and ``node.id`` of ``broker.id``. Kafka properties that make no sense for
    kclient (thread counts, replication factors, KRaft settings, ...) are
    accepted and ignored quietly.

    Where it listens and what it advertises (see `listen_host`,
    `listen_port`, `advertised_host`, `advertised_port`):
    the first of ``listeners`` if given, else ``host.name``/``port``; it
    advertises ``advertised.listeners``, else ``advertised.host.name`` /
    ``advertised.port``, else the listening address. Deviation from Kafka:
    when listening on every interface the advertised host defaults to
    ``127.0.0.1`` (Kafka advertises the machine's canonical host name).
    ``port=0`` asks for a free port; the broker then advertises the port it
    got (`advertised_port` is 0 in that case).

    ``advertised.port`` is stored as ``advertised_port_number`` because
    ``advertised_port`` is the resolved value.
    """

    IGNORED: ClassVar[frozenset[str]] = frozenset(
        {
            "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
            "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
            "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
            "transaction.state.log.min.isr",
            "group.initial.rebalance.delay.ms", "default.replication.factor",
            "num.replica.fetchers", "log.cleaner.enable", "share.coordinator.state.topic.replication.factor",
            "share.coordinator.state.topic.min.isr", "process.roles", "controller.quorum.voters",
            "controller.quorum.bootstrap.servers", "controller.listener.names",
            "inter.broker.listener.name", "listener.security.protocol.map",
            "delete.topic.enable",
        }
    )

    broker_id: int = prop("broker.id", _to_int, 0, _at_least(0), aliases=["node.id"])
    """Id of this broker in the cluster."""
    port: int = prop("port", _port, 9092)
    """Port to listen on when ``listeners`` is not given; 0 picks a free one."""
    host_name: str = prop("host.name", _to_str, "")
    """Address to bind when ``listeners`` is not given; empty: every interface."""
    listeners: tuple[Listener, ...] = prop("listeners", _to_listeners, ())
    """``"PLAINTEXT://host:port,..."`` -> ``(("PLAINTEXT", host, port), ...)``; overrides host.name/port."""
    advertised_listeners: tuple[Listener, ...] = prop("advertised.listeners", _to_listeners, ())
    """Addresses given to clients in Metadata; overrides advertised.host.name/port."""
    advertised_host_name: str | None = prop("advertised.host.name", _to_optional_str, None)
    """Host given to clients in Metadata; ``None``: derived from the listening address."""
    advertised_port_number: int | None = prop(
        "advertised.port", lambda v: None if _to_optional_int(v) is None else _port(v), None
    )
    """Port given to clients in Metadata (``advertised.port``); ``None``: the listening port."""
    log_dirs: tuple[str, ...] = prop("log.dirs", _to_list, ("/tmp/kafka-logs",), _not_empty, aliases=["log.dir"])
    """Directories holding the partition logs (``"a,b"`` -> ``("a", "b")``)."""
    num_partitions: int = prop("num.partitions", _to_int, 1, _at_least(1))
    """Partitions of an auto-created topic."""
    log_segment_bytes: int = prop("log.segment.bytes", _to_int, 1073741824, _at_least(14))
    """A segment rolls when it would grow past this size (bytes)."""
    log_index_interval_bytes: int = prop("log.index.interval.bytes", _to_int, 4096, _at_least(0))
    """Bytes of log between two offset index entries."""
    log_index_size_max_bytes: int = prop("log.index.size.max.bytes", _to_int, 10485760, _at_least(4))
    """Largest offset index file (bytes); a full index rolls the segment."""
    log_flush_interval_messages: int = prop(
        "log.flush.interval.messages", _to_int, 9223372036854775807, _at_least(1)
    )
    """fsync a log after this many messages (Kafka's default: never)."""
    log_flush_interval_ms: int | None = prop("log.flush.interval.ms", _to_optional_int, None, _at_least(0))
    """fsync a log when its oldest unflushed message is this old (ms); ``None``: never."""
    log_flush_scheduler_interval_ms: int | None = prop(
        "log.flush.scheduler.interval.ms", _to_optional_int, None, _at_least(1)
    )
    """How often (ms) the broker applies ``log.flush.interval.ms`` to every
    log; ``None`` (default): ``log.flush.interval.ms`` itself, clamped to
    10..1000 ms (see `flush_scheduler_interval_ms`). Deviation: Kafka's
    default is Long.MaxValue, which never runs the time-based flush."""
    log_flush_offset_checkpoint_interval_ms: int = prop(
        "log.flush.offset.checkpoint.interval.ms", _to_int, 60000, _at_least(1)
    )
    """How often (ms) each log dir's ``recovery-point-offset-checkpoint`` is
    rewritten (only when a recovery point moved)."""
    log_roll_ms: int | None = prop("log.roll.ms", _to_optional_int, None, _at_least(1))
    """Roll the active segment once its first batch is this old (ms);
    ``None``: ``log.roll.hours``."""
    log_roll_hours: int = prop("log.roll.hours", _to_int, 168, _at_least(1))
    """Roll the active segment once its first batch is this old (hours)."""
    log_retention_ms: int | None = prop("log.retention.ms", _to_optional_int, None, _at_least(-1))
    """Delete segments older than this (ms); wins over the minutes and hours
    settings; -1 keeps them forever; ``None``: ``log.retention.minutes``."""
    log_retention_minutes: int | None = prop("log.retention.minutes", _to_optional_int, None, _at_least(-1))
    """Delete segments older than this (minutes); wins over hours; -1 keeps
    them forever; ``None``: ``log.retention.hours``."""
    log_retention_hours: int = prop("log.retention.hours", _to_int, 168, _at_least(-1))
    """Delete segments older than this (hours); -1 keeps them forever."""
    log_retention_bytes: int = prop("log.retention.bytes", _to_int, -1, _at_least(-1))
    """Delete old segments while a partition is larger than this (bytes); -1: no limit."""
    log_retention_check_interval_ms: int = prop("log.retention.check.interval.ms", _to_int, 300000, _at_least(1))
    """How often (ms) the broker applies the retention settings to every log."""
    auto_create_topics_enable: bool = prop("auto.create.topics.enable", _to_bool, True)
    """Create unknown topics when a client asks for their metadata."""
    message_max_bytes: int = prop("message.max.bytes", _to_int, 1048588, _at_least(0))
    """Largest record batch the broker accepts (bytes)."""
    socket_request_max_bytes: int = prop("socket.request.max.bytes", _to_int, 104857600, _at_least(1))
    """Largest request frame the broker reads (bytes); larger closes the connection."""
    max_connections: int = prop("max.connections", _to_int, 2147483647, _at_least(0))
    """Most client connections served at once; a connection beyond it is
    closed at once with a WARNING (Kafka instead delays accepting it)."""
    zookeeper_connect: str | None = prop("zookeeper.connect", _to_optional_str, None)
    """ZooKeeper ensemble to register with; ``None``: standalone broker."""
    zookeeper_session_timeout_ms: int = prop("zookeeper.session.timeout.ms", _to_int, 6000, _at_least(1))
    """ZooKeeper session timeout (ms)."""
    zookeeper_connection_timeout_ms: int = prop("zookeeper.connection.timeout.ms", _to_int, 6000, _at_least(1))
    """Longest wait to connect to ZooKeeper (ms)."""
    log_message_format_version: str = prop("log.message.format.version", _to_format_version, "3.0")
    """Message format the broker stores, as a Kafka release (``0.8.2`` -> v0,
    ``0.10.0``/``0.10.2-IV0`` -> v1, ``0.11.0``/``2.8``/``3.0`` -> v2; see
    `message_format_magic`). Appends in another format are converted,
    as Kafka 2.x does. Overridden per topic by ``message.format.version`` in
    ``topic.config.file``."""
    log_message_timestamp_type: str = prop("log.message.timestamp.type", _to_timestamp_type, "CreateTime")
    """``CreateTime`` keeps the producer's timestamps; ``LogAppendTime`` makes
    the broker stamp every appended batch (v1/v2) with its clock. Overridden
    per topic by ``message.timestamp.type`` in ``topic.config.file``."""
    topic_config_file: str | None = prop("topic.config.file", _to_optional_str, None, _check_topic_config_file)
    """A ``.properties`` file of per-topic overrides, one
    ``<topic>.message.format.version=...`` or
    ``<topic>.message.timestamp.type=...`` per line (read when the broker
    starts; see `load_topic_configs`). ``None``: no overrides."""

    @property
    def flush_scheduler_interval_ms(self) -> int | None:
        """Period (ms) of the broker's time-based flush task: ``None`` when
        ``log.flush.interval.ms`` is not set (nothing to schedule), else
        ``log.flush.scheduler.interval.ms`` if given, else
        ``log.flush.interval.ms`` clamped to 10..1000 ms. A system crash
        then loses at most about ``log.flush.interval.ms`` plus this period
        of acknowledged appends."""
        if self.log_flush_interval_ms is None:
            return None
        if self.log_flush_scheduler_interval_ms is not None:
            return self.log_flush_scheduler_interval_ms
        return min(1000, max(10, self.log_flush_interval_ms))

    @property
    def message_format_magic(self) -> int:
        """The magic (0, 1 or 2) ``log.message.format.version`` stands for."""
        return message_format_magic(self.log_message_format_version)

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """The per-topic overrides of ``topic.config.file``.

        Reads the file on every call (see `load_topic_configs`).

        Returns:
            ``{topic: {config: value}}``; empty without a file.

        Raises:
            ConfigError: The file is unreadable or holds a bad value.
        """
        if self.topic_config_file is None:
            return {}
        return load_topic_configs(self.topic_config_file)

    @property
    def listen_host(self) -> str:
        """Address to bind: the first listener's host, else ``host.name``;
        ``"0.0.0.0"`` when that is empty (every interface)."""
        host = self.listeners[0][1] if self.listeners else self.host_name
        return host or "0.0.0.0"

    @property
    def listen_port(self) -> int:
        """Port to bind: the first listener's port, else ``port`` (0 = any free port)."""
        return self.listeners[0][2] if self.listeners else self.port

    @property
    def advertised_host(self) -> str:
        """Host given to clients in Metadata: ``advertised.listeners``, else
        ``advertised.host.name``, else the listening host, with
        ``"127.0.0.1"`` in place of a wildcard address."""
        if self.advertised_listeners and self.advertised_listeners[0][1] not in _WILDCARD_HOSTS:
            return self.advertised_listeners[0][1]
        if self.advertised_host_name:
            return self.advertised_host_name
        host = self.listen_host
        return "127.0.0.1" if host in _WILDCARD_HOSTS else host

    @property
    def advertised_port(self) -> int:
        """Port given to clients in Metadata: ``advertised.listeners``, else
        ``advertised.port``, else `listen_port` (0: use the bound port)."""
        if self.advertised_listeners:
            return self.advertised_listeners[0][2]
        if self.advertised_port_number is not None:
            return self.advertised_port_number
        return self.listen_port
