"""`BrokerConfig`: the bundled broker's settings under Kafka's broker
property names (``server.properties``; see
https://kafka.apache.org/documentation/#brokerconfigs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from kclient.config.base import _KafkaConfig, prop
from kclient.config.convert import (
    Listener,
    at_least,
    not_empty,
    one_of,
    port_number,
    to_bool,
    to_int,
    to_list,
    to_listeners,
    to_optional_int,
    to_optional_str,
    to_str,
)
from kclient.config.formats import (
    _check_topic_config_file,
    _to_format_version,
    _to_timestamp_type,
    load_topic_configs,
    message_format_magic,
)

if TYPE_CHECKING:  # imported where used: the broker config loads without the SASL machinery
    from kclient.security.settings import ListenerEndpoint, ListenerSecurity

__all__ = ["BrokerConfig"]

_WILDCARD_HOSTS = {"", "0.0.0.0", "::"}

#: Where the broker binds when neither ``listeners`` nor ``host.name`` say:
#: loopback only (deviation from Kafka, which binds every interface).
DEFAULT_BIND_HOST = "127.0.0.1"

#: The request memory budget when ``queued.max.request.bytes`` is not set
#: (and ``socket.request.max.bytes`` is not larger): 100 MiB. Deviation
#: from Kafka, whose default is unbounded.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 104857600

#: Prefixes of the security properties kept verbatim for
#: `kclient.security.settings.ListenerSecurity` (their names are open-ended:
#: ``listener.name.<listener>.<mechanism>.sasl.jaas.config``).
SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.")


#: The KIP-612 property a listener may override with its ``listener.name.<l>.`` prefix.
_CONNECTION_RATE = "max.connection.creation.rate"


def _listener_connection_rate(key: str, value: Any) -> int:
    """``listener.name.<l>.max.connection.creation.rate``'s value (an
    integer >= 0); raises ConfigError naming ``key`` otherwise."""
    try:
        rate = to_int(value)
    except (TypeError, ValueError):
        rate = -1
    if rate < 0:
        from kclient.errors import ConfigError

        raise ConfigError(f"Invalid value {value!r} for configuration {key}: must be an integer of at least 0")
    return rate


def _to_cleanup_policy(value: Any) -> tuple[str, ...]:
    """``delete`` / ``compact`` / ``compact,delete`` (any order) -> sorted tuple."""
    policies = tuple(sorted({p.lower() for p in to_list(value)}))
    if not policies or any(p not in ("compact", "delete") for p in policies):
        raise ValueError("expected delete, compact or compact,delete")
    return policies


def _to_ratio(value: Any) -> float:
    """A number in [0, 1]."""
    ratio = float(value)
    if not 0.0 <= ratio <= 1.0:
        raise ValueError("must be between 0 and 1")
    return ratio


def _to_ip_overrides(value: Any) -> tuple[tuple[str, int], ...]:
    """``"host:count,[::1]:count"`` (or a mapping) -> ``(("host", count), ...)``."""
    if not value:
        return ()
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    else:
        items = []
        for entry in to_list(value):
            host, sep, count = entry.rpartition(":")
            if not sep or not host:
                raise ValueError(f"expected host:count, got {entry!r}")
            items.append((host, count))
    result = []
    for host, count in items:
        host = host.strip().strip("[]")
        limit = to_int(count)
        if limit < 0:
            raise ValueError(f"the count of {host} must be at least 0")
        result.append((host, limit))
    return tuple(result)


def _to_security(value: Any) -> tuple[tuple[str, str], ...]:
    """A mapping of security properties -> sorted ``((name, value), ...)``
    (hashable, as a frozen config must be)."""
    if not value:
        return ()
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k).strip(), v if isinstance(v, str) else str(v)) for k, v in items))


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

    Without ``listeners`` and ``host.name`` the broker binds ``127.0.0.1``
    only (`DEFAULT_BIND_HOST`; Kafka binds every interface): set
    ``host.name=0.0.0.0`` or ``listeners=PLAINTEXT://:9092`` to open it to
    the network.

    Security (KIP-103 listeners, KIP-43/KIP-152 SASL, KIP-651 PEM stores):
    ``listeners`` may name any listener that
    ``listener.security.protocol.map`` maps to PLAINTEXT, SSL,
    SASL_PLAINTEXT or SASL_SSL (by default each protocol's own name);
    listeners named in ``controller.listener.names`` are not served (there
    is no controller) and map to PLAINTEXT when the map is not given, as in
    Kafka's KRaft mode. Every ``ssl.*``, ``sasl.*`` and
    ``listener.name.*`` property is kept verbatim in `security_config` and
    read per listener by `listener_security`.
    """

    IGNORED: ClassVar[frozenset[str]] = frozenset(
        {
            "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
            "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
            "transaction.state.log.replication.factor",
            "transaction.state.log.min.isr",
            "default.replication.factor",
            "num.replica.fetchers", "share.coordinator.state.topic.replication.factor",
            "share.coordinator.state.topic.min.isr", "process.roles", "controller.quorum.voters",
            "controller.quorum.bootstrap.servers",
            "inter.broker.listener.name", "delete.topic.enable",
            "security.inter.broker.protocol", "sasl.mechanism.inter.broker.protocol",
        }
    )

    broker_id: int = prop("broker.id", to_int, 0, at_least(0), aliases=["node.id"])
    """Id of this broker in the cluster."""
    port: int = prop("port", port_number, 9092)
    """Port to listen on when ``listeners`` is not given; 0 picks a free one."""
    host_name: str = prop("host.name", to_str, "")
    """Address to bind when ``listeners`` is not given; empty: every interface."""
    listeners: tuple[Listener, ...] = prop("listeners", to_listeners, ())
    """``"PLAINTEXT://host:port,..."`` -> ``(("PLAINTEXT", host, port), ...)``; overrides host.name/port."""
    listener_security_protocol_map: str | None = prop("listener.security.protocol.map", to_optional_str, None)
    """``NAME:PROTOCOL,...`` (KIP-103); ``None``: each protocol's own name."""
    controller_listener_names: tuple[str, ...] = prop(
        "controller.listener.names", lambda v: tuple(n.upper() for n in to_list(v)) if v else (), ()
    )
    """KRaft controller listeners: not served by kclient's broker."""
    advertised_listeners: tuple[Listener, ...] = prop("advertised.listeners", to_listeners, ())
    """Addresses given to clients in Metadata; overrides advertised.host.name/port."""
    advertised_host_name: str | None = prop("advertised.host.name", to_optional_str, None)
    """Host given to clients in Metadata; ``None``: derived from the listening address."""
    advertised_port_number: int | None = prop(
        "advertised.port", lambda v: None if to_optional_int(v) is None else port_number(v), None
    )
    """Port given to clients in Metadata (``advertised.port``); ``None``: the listening port."""
    log_dirs: tuple[str, ...] = prop("log.dirs", to_list, ("/tmp/kafka-logs",), not_empty, aliases=["log.dir"])
    """Directories holding the partition logs (``"a,b"`` -> ``("a", "b")``)."""
    num_partitions: int = prop("num.partitions", to_int, 1, at_least(1))
    """Partitions of an auto-created topic."""
    log_segment_bytes: int = prop("log.segment.bytes", to_int, 1073741824, at_least(14))
    """A segment rolls when it would grow past this size (bytes)."""
    log_index_interval_bytes: int = prop("log.index.interval.bytes", to_int, 4096, at_least(0))
    """Bytes of log between two offset index entries."""
    log_index_size_max_bytes: int = prop("log.index.size.max.bytes", to_int, 10485760, at_least(4))
    """Largest offset index file (bytes); a full index rolls the segment."""
    log_flush_interval_messages: int = prop(
        "log.flush.interval.messages", to_int, 9223372036854775807, at_least(1)
    )
    """fsync a log after this many messages (Kafka's default: never)."""
    log_flush_interval_ms: int | None = prop("log.flush.interval.ms", to_optional_int, None, at_least(0))
    """fsync a log when its oldest unflushed message is this old (ms); ``None``: never."""
    log_flush_scheduler_interval_ms: int | None = prop(
        "log.flush.scheduler.interval.ms", to_optional_int, None, at_least(1)
    )
    """How often (ms) the broker applies ``log.flush.interval.ms`` to every
    log; ``None`` (default): ``log.flush.interval.ms`` itself, clamped to
    10..1000 ms (see `flush_scheduler_interval_ms`). Deviation: Kafka's
    default is Long.MaxValue, which never runs the time-based flush."""
    log_flush_offset_checkpoint_interval_ms: int = prop(
        "log.flush.offset.checkpoint.interval.ms", to_int, 60000, at_least(1)
    )
    """How often (ms) each log dir's ``recovery-point-offset-checkpoint`` is
    rewritten (only when a recovery point moved)."""
    log_roll_ms: int | None = prop("log.roll.ms", to_optional_int, None, at_least(1))
    """Roll the active segment once its first batch is this old (ms);
    ``None``: ``log.roll.hours``."""
    log_roll_hours: int = prop("log.roll.hours", to_int, 168, at_least(1))
    """Roll the active segment once its first batch is this old (hours)."""
    log_retention_ms: int | None = prop("log.retention.ms", to_optional_int, None, at_least(-1))
    """Delete segments older than this (ms); wins over the minutes and hours
    settings; -1 keeps them forever; ``None``: ``log.retention.minutes``."""
    log_retention_minutes: int | None = prop("log.retention.minutes", to_optional_int, None, at_least(-1))
    """Delete segments older than this (minutes); wins over hours; -1 keeps
    them forever; ``None``: ``log.retention.hours``."""
    log_retention_hours: int = prop("log.retention.hours", to_int, 168, at_least(-1))
    """Delete segments older than this (hours); -1 keeps them forever."""
    log_retention_bytes: int = prop("log.retention.bytes", to_int, -1, at_least(-1))
    """Delete old segments while a partition is larger than this (bytes); -1: no limit."""
    log_retention_check_interval_ms: int = prop("log.retention.check.interval.ms", to_int, 300000, at_least(1))
    """How often (ms) the broker applies the retention settings to every log."""
    log_cleanup_policy: tuple[str, ...] = prop("log.cleanup.policy", _to_cleanup_policy, ("delete",))
    """Default ``cleanup.policy`` of every topic: ``delete`` (retention by
    time and size), ``compact`` (log compaction: the last record of each key
    is kept) or ``compact,delete`` (both). A topic's own ``cleanup.policy``
    wins (Kafka documentation, "Log Compaction")."""
    log_cleaner_enable: bool = prop("log.cleaner.enable", to_bool, True)
    """Run the log cleaner, which compacts the topics whose policy holds ``compact``."""
    log_cleaner_backoff_ms: int = prop("log.cleaner.backoff.ms", to_int, 15000, at_least(0))
    """Pause (ms) of the log cleaner between two passes over the logs."""
    log_cleaner_threads: int = prop("log.cleaner.threads", to_int, 1, one_of(1))
    """Cleaner threads; kclient runs one cleaner task, so only 1 is accepted."""
    log_cleaner_dedupe_buffer_size: int = prop("log.cleaner.dedupe.buffer.size", to_int, 134217728, at_least(24))
    """Memory (bytes) of the cleaner's key -> offset map, 24 bytes a key; a
    pass cleans only as many dirty segments as the map covers."""
    log_cleaner_delete_retention_ms: int = prop("log.cleaner.delete.retention.ms", to_int, 86400000, at_least(0))
    """How long (ms) a tombstone (null value) stays in a compacted log after
    its first cleaning; a topic's ``delete.retention.ms`` wins."""
    log_cleaner_min_cleanable_ratio: float = prop("log.cleaner.min.cleanable.ratio", _to_ratio, 0.5)
    """A compacted log is cleaned when its dirty bytes over its cleanable
    bytes exceed this; a topic's ``min.cleanable.dirty.ratio`` wins."""
    log_cleaner_min_compaction_lag_ms: int = prop("log.cleaner.min.compaction.lag.ms", to_int, 0, at_least(0))
    """Records younger than this (ms) stay uncompacted; a topic's
    ``min.compaction.lag.ms`` wins."""
    auto_create_topics_enable: bool = prop("auto.create.topics.enable", to_bool, True)
    """Create unknown topics when a client asks for their metadata."""
    default_replication_factor: int = prop("default.replication.factor", to_int, 1, at_least(1))
    """Replicas of each partition of an auto-created topic (and of a
    CreateTopics request asking for -1)."""
    delete_topic_enable: bool = prop("delete.topic.enable", to_bool, True)
    """Whether DeleteTopics (and ``kclient topics --delete``) delete topics."""
    offsets_topic_num_partitions: int = prop("offsets.topic.num.partitions", to_int, 50, at_least(1))
    """Partitions of the ``__consumer_offsets`` topic (created on first use);
    group ``g`` lives in partition ``abs(hashCode(g)) % n``. Do not change
    it once the topic exists."""
    offsets_topic_replication_factor: int = prop("offsets.topic.replication.factor", to_int, 3, at_least(1))
    """Replicas of each ``__consumer_offsets`` partition. Deviation from
    Kafka (which refuses to create the topic until that many brokers are
    alive): with fewer live brokers the topic is created with one replica
    per live broker, and a WARNING says so."""
    offsets_topic_segment_bytes: int = prop("offsets.topic.segment.bytes", to_int, 104857600, at_least(14))
    """``segment.bytes`` of the ``__consumer_offsets`` topic (small
    segments compact and load faster)."""
    transaction_state_log_num_partitions: int = prop("transaction.state.log.num.partitions", to_int, 50, at_least(1))
    """Partitions of the ``__transaction_state`` topic (created on first
    use, KIP-98); transactional id ``t`` lives in partition
    ``abs(hashCode(t)) % n``. Do not change it once the topic exists."""
    transaction_state_log_replication_factor: int = prop("transaction.state.log.replication.factor", to_int, 3, at_least(1))
    """Replicas of each ``__transaction_state`` partition (with fewer live
    brokers, one per live broker, as for ``__consumer_offsets``)."""
    transaction_state_log_min_isr: int = prop("transaction.state.log.min.isr", to_int, 2, at_least(1))
    """``min.insync.replicas`` of the ``__transaction_state`` topic (capped
    at its replication factor)."""
    transaction_state_log_segment_bytes: int = prop("transaction.state.log.segment.bytes", to_int, 104857600, at_least(14))
    """``segment.bytes`` of the ``__transaction_state`` topic."""
    transaction_max_timeout_ms: int = prop("transaction.max.timeout.ms", to_int, 900000, at_least(1))
    """Largest ``transaction.timeout.ms`` a producer may ask for (ms; else
    INVALID_TRANSACTION_TIMEOUT)."""
    transactional_id_expiration_ms: int = prop("transactional.id.expiration.ms", to_int, 604800000, at_least(1))
    """A transactional id without a transaction for this long (ms) is
    forgotten (a tombstone is written to ``__transaction_state``)."""
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = prop(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", to_int, 10000, at_least(1)
    )
    """How often transactions older than their timeout are looked for and
    aborted (ms)."""
    transaction_remove_expired_transaction_cleanup_interval_ms: int = prop(
        "transaction.remove.expired.transaction.cleanup.interval.ms", to_int, 3600000, at_least(1)
    )
    """How often expired transactional ids are looked for (ms)."""
    offsets_commit_timeout_ms: int = prop("offsets.commit.timeout.ms", to_int, 5000, at_least(1))
    """How long an offset commit waits for the ISR of its
    ``__consumer_offsets`` partition (ms); then REQUEST_TIMED_OUT."""
    offsets_retention_minutes: int = prop("offsets.retention.minutes", to_int, 10080, at_least(1))
    """Committed offsets of a group without members are deleted (a
    tombstone is written) this long after their commit (KIP-211)."""
    offsets_retention_check_interval_ms: int = prop("offsets.retention.check.interval.ms", to_int, 600000, at_least(1))
    """How often expired offsets are looked for (ms)."""
    offset_metadata_max_bytes: int = prop("offset.metadata.max.bytes", to_int, 4096, at_least(0))
    """Longest metadata string a commit may carry (else OFFSET_METADATA_TOO_LARGE)."""
    group_min_session_timeout_ms: int = prop("group.min.session.timeout.ms", to_int, 6000, at_least(1))
    """Smallest session timeout a member may ask for (else INVALID_SESSION_TIMEOUT)."""
    group_max_session_timeout_ms: int = prop("group.max.session.timeout.ms", to_int, 1800000, at_least(1))
    """Largest session timeout a member may ask for (else INVALID_SESSION_TIMEOUT)."""
    group_initial_rebalance_delay_ms: int = prop("group.initial.rebalance.delay.ms", to_int, 3000, at_least(0))
    """How long the first rebalance of an empty group waits for more
    members to join (ms), up to the rebalance timeout."""
    group_consumer_heartbeat_interval_ms: int = prop("group.consumer.heartbeat.interval.ms", to_int, 5000, at_least(1))
    """How often members of consumer-protocol groups (KIP-848,
    ``group.protocol=consumer``) heartbeat (ms); sent to them in each
    ConsumerGroupHeartbeat response."""
    group_consumer_min_heartbeat_interval_ms: int = prop("group.consumer.min.heartbeat.interval.ms", to_int, 5000, at_least(1))
    """Smallest ``group.consumer.heartbeat.interval.ms`` allowed (ms)."""
    group_consumer_max_heartbeat_interval_ms: int = prop("group.consumer.max.heartbeat.interval.ms", to_int, 15000, at_least(1))
    """Largest ``group.consumer.heartbeat.interval.ms`` allowed (ms)."""
    group_consumer_session_timeout_ms: int = prop("group.consumer.session.timeout.ms", to_int, 45000, at_least(1))
    """A consumer-protocol member not heard from for this long is removed
    from its group (ms, KIP-848)."""
    group_consumer_min_session_timeout_ms: int = prop("group.consumer.min.session.timeout.ms", to_int, 45000, at_least(1))
    """Smallest ``group.consumer.session.timeout.ms`` allowed (ms)."""
    group_consumer_max_session_timeout_ms: int = prop("group.consumer.max.session.timeout.ms", to_int, 60000, at_least(1))
    """Largest ``group.consumer.session.timeout.ms`` allowed (ms)."""
    group_consumer_assignors: tuple[str, ...] = prop("group.consumer.assignors", to_list, ("uniform", "range"), not_empty)
    """The server-side assignors of consumer-protocol groups (``uniform``,
    ``range``); the first is the default, a member may ask for another."""
    group_consumer_max_size: int = prop("group.consumer.max.size", to_int, 2147483647, at_least(1))
    """The most members a consumer-protocol group may have (else
    GROUP_MAX_SIZE_REACHED)."""
    unclean_leader_election_enable: bool = prop("unclean.leader.election.enable", to_bool, False)
    """Whether a replica outside the ISR may become leader when no in-sync
    replica is alive (availability over durability: acknowledged records
    may be lost); a topic's own setting wins."""
    min_insync_replicas: int = prop("min.insync.replicas", to_int, 1, at_least(1))
    """With ``acks=-1`` a produce needs at least this many in-sync replicas
    (else NOT_ENOUGH_REPLICAS); a topic's own ``min.insync.replicas`` wins."""
    replica_lag_time_max_ms: int = prop("replica.lag.time.max.ms", to_int, 30000, at_least(1))
    """A follower that has not caught up with the leader's log end offset
    for this long (ms) leaves the ISR."""
    replica_fetch_wait_max_ms: int = prop("replica.fetch.wait.max.ms", to_int, 500, at_least(0))
    """Longest a follower's Fetch waits at the leader for data (ms)."""
    replica_fetch_min_bytes: int = prop("replica.fetch.min.bytes", to_int, 1, at_least(0))
    """Bytes a follower's Fetch waits for at the leader."""
    replica_fetch_max_bytes: int = prop("replica.fetch.max.bytes", to_int, 1048576, at_least(0))
    """Bytes a follower fetches per partition per request (the first batch
    comes whole even if larger, KIP-74)."""
    replica_fetch_response_max_bytes: int = prop("replica.fetch.response.max.bytes", to_int, 10485760, at_least(0))
    """Bytes a follower fetches per request over all partitions."""
    replica_fetch_backoff_ms: int = prop("replica.fetch.backoff.ms", to_int, 1000, at_least(0))
    """A follower's pause after a failed fetch (ms)."""
    replica_socket_timeout_ms: int = prop("replica.socket.timeout.ms", to_int, 30000, at_least(1))
    """Connect and request timeout of a follower's connection to its leader (ms)."""
    replica_high_watermark_checkpoint_interval_ms: int = prop(
        "replica.high.watermark.checkpoint.interval.ms", to_int, 5000, at_least(1)
    )
    """How often (ms) each log dir's ``replication-offset-checkpoint``
    (the partitions' high watermarks) is written."""
    inter_broker_listener_name: str | None = prop("inter.broker.listener.name", to_optional_str, None)
    """The listener brokers use to reach each other (controller requests,
    replica fetches); ``None``: the first listener."""
    message_max_bytes: int = prop("message.max.bytes", to_int, 1048588, at_least(0))
    """Largest record batch the broker accepts (bytes)."""
    socket_request_max_bytes: int = prop("socket.request.max.bytes", to_int, 104857600, at_least(1))
    """Largest request frame the broker reads (bytes); larger closes the connection."""
    max_connections: int = prop("max.connections", to_int, 1000, at_least(0))
    """Most client connections served at once; a connection beyond it is
    closed at once (logged rate-limited, see
    ``connection.rejection.log.interval.ms``; Kafka instead delays
    accepting it). Deviation: Kafka's default is 2147483647 (unbounded);
    kclient's is 1000, so that connections alone cannot exhaust the
    broker's file descriptors or memory (each connection holds at most
    `kclient.broker.server.RECEIVE_CHUNK` bytes of request budget while it
    waits for its client)."""
    max_connections_per_ip: int = prop("max.connections.per.ip", to_int, 2147483647, at_least(0))
    """Most connections served at once from one client IP address (Kafka's
    default: 2147483647, i.e. only ``max.connections`` applies); one more
    is closed at once (logged rate-limited). See
    ``max.connections.per.ip.overrides``."""
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = prop(
        "max.connections.per.ip.overrides", _to_ip_overrides, ()
    )
    """Per-address exceptions to ``max.connections.per.ip``:
    ``"127.0.0.1:200,10.0.0.7:0"`` -> ``(("127.0.0.1", 200), ("10.0.0.7", 0))``.
    Kafka's format; a host name is resolved once when the broker starts."""
    queued_max_request_bytes: int | None = prop(
        "queued.max.request.bytes", to_optional_int, None, at_least(-1)
    )
    """Most bytes of requests being read or processed at once, over every
    connection (the broker's request memory pool). A connection that would
    go over it waits before reading more of its request (back-pressure: its
    client sees a slower broker, nothing is refused). A declared frame size
    costs nothing: the budget is taken as the frame's bytes are received,
    one receive (at most `kclient.broker.server.RECEIVE_CHUNK` bytes) at a
    time, and given back once the request has been answered. ``-1`` (or
    ``0``): unbounded. Must be at least ``socket.request.max.bytes`` when
    bounded (as in Kafka). Deviation: Kafka's default is -1 (unbounded);
    kclient's (``None``) is 100 MiB (104857600, the default
    ``socket.request.max.bytes``) or ``socket.request.max.bytes`` if that
    is larger (see `request_memory_limit`), so that many clients sending
    at once, or hostile ones, cannot grow a development broker's memory
    without bound. To never stall, the oldest request being read may go over the
    budget (by less than one frame): the broker's request memory stays
    under ``queued.max.request.bytes + socket.request.max.bytes``.
    Connections that have not authenticated yet do not take from it: see
    ``queued.max.unauthenticated.request.bytes``."""
    change_notification_expiration_ms: int = prop("change.notification.expiration.ms", to_int, 900000, at_least(1))
    """kclient-specific: age (ms) past which the brokers delete a change
    notification node (``/config/changes``, ``/kafka-acl-changes``,
    ``/kafka-acl-extended-changes``) when they handle that path's
    notifications. Kafka's is fixed at 15 minutes (its
    ``ZkNodeChangeNotificationListener``), the default; the key exists for
    tests."""
    queued_max_unauthenticated_request_bytes: int = prop(
        "queued.max.unauthenticated.request.bytes", to_int, 4194304, at_least(0)
    )
    """kclient-specific: the request memory share (bytes) of the
    connections that have not authenticated yet (on a SASL listener, before
    the SASL login completes; their frames are at most
    ``sasl.server.max.receive.size`` each). Their frames take from this
    share only, never from ``queued.max.request.bytes``, so peers that do
    not log in, however many and however silent, cannot hold back an
    authenticated client's requests (only other logins, and at most for
    ``socket.request.read.timeout.ms``). The oldest frame being read before
    authentication may go over it, as in ``queued.max.request.bytes``.
    Kafka has no such pool (it reads authentication frames outside its
    memory pool, each capped by ``sasl.server.max.receive.size``)."""
    connections_max_idle_ms: int = prop("connections.max.idle.ms", to_int, 600000, at_least(-1))
    """A connection with no request in progress that receives nothing for
    this long (ms) is closed (logged at DEBUG, as Kafka does); ``-1``:
    never."""
    socket_request_read_timeout_ms: int = prop("socket.request.read.timeout.ms", to_int, 30000, at_least(1), aliases=("request.timeout.ms",))
    """kclient-specific (Kafka has no such broker property; the clients'
    name ``request.timeout.ms`` is accepted as an alias): a request
    whose first byte has arrived must arrive whole within this long (ms)
    of that first byte, else the connection is closed (logged
    rate-limited). This closes a connection that sends a size prefix, or a
    part of a frame, and then nothing or a trickle; Kafka only closes such a
    connection after ``connections.max.idle.ms`` of complete silence, so a
    trickle keeps it open. Time the broker itself holds the read back
    (``queued.max.request.bytes`` or its unauthenticated share reached)
    counts too, so no connection stays open mid-request for longer, however
    busy the budget. The default is
    the clients' ``request.timeout.ms`` (30 s): a client that cannot send a
    request in that time has given up on it anyway."""
    connection_rejection_log_interval_ms: int = prop(
        "connection.rejection.log.interval.ms", to_int, 10000, at_least(0)
    )
    """kclient-specific: rejected and closed connections (over
    ``max.connections`` or ``max.connections.per.ip``, a bad frame size, a
    read timeout, a malformed request, a failed TLS handshake or SASL
    login) are logged at most once per this interval (ms) for each kind of
    rejection, with the count of those held back since the last line
    (`kclient.broker.security.RateLimitedLog`); ``0`` logs every one.
    Kafka logs each one."""
    connection_failed_authentication_delay_ms: int = prop(
        "connection.failed.authentication.delay.ms", to_int, 100, at_least(0)
    )
    """How long (ms) the broker holds back its answer to a failed
    authentication (KIP-306): the failure response (SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM, ...) is sent only after this delay, then
    the connection is closed. So a client reads the error instead of a bare
    disconnect, and a password-guessing client gets at most one guess per
    delay per connection. The delay holds no request memory and does not
    slow other connections."""
    authorizer_class_name: str = prop("authorizer.class.name", to_str, "")
    """The authorizer (KIP-11): empty (the default) authorizes every
    request, as Kafka does without one. ``kclient.broker.authz.AclAuthorizer``
    selects kclient's ACL authorizer, with Kafka's ``AclAuthorizer``
    semantics; Kafka's class names ``kafka.security.authorizer.AclAuthorizer``,
    ``kafka.security.auth.SimpleAclAuthorizer`` and
    ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` select it
    too, so a Kafka ``server.properties`` works. ACLs are kept where Kafka's
    ZooKeeper mode keeps them (``/kafka-acl``, ``/kafka-acl-extended``), in
    memory for a broker without ZooKeeper. The brokers' own principal must be
    in ``super.users`` (or be allowed CLUSTER_ACTION on the cluster). See
    docs/security.md, "Authorization (ACLs)"."""
    super_users: str = prop("super.users", to_str, "")
    """Principals allowed everything whatever the ACLs say, separated by
    semicolons (``User:admin;User:broker``)."""
    allow_everyone_if_no_acl_found: bool = prop("allow.everyone.if.no.acl.found", to_bool, False)
    """With an authorizer: whether a resource that no ACL names is open to
    every principal (false, the default: only super users may use it)."""
    quota_window_num: int = prop("quota.window.num", to_int, 11, at_least(1))
    """Number of samples a client's byte rate is measured over for its
    quota (KIP-13; Kafka's default 11)."""
    quota_window_size_seconds: int = prop("quota.window.size.seconds", to_int, 1, at_least(1))
    """Length of each quota sample (seconds; Kafka's default 1). A client's
    rate is its bytes over the live samples (at least ``quota.window.num``
    - 1 of them)."""
    max_connection_creation_rate: int = prop("max.connection.creation.rate", to_int, 2147483647, at_least(0))
    """Most new connections accepted per second by the broker (KIP-612;
    Kafka's default 2147483647, unlimited), over every listener but the
    inter-broker one (when there are others, as in Kafka): one more waits
    before it is served until the rate is back under it. It is also each
    listener's own limit unless
    ``listener.name.<listener>.max.connection.creation.rate`` sets another
    (see `max_connection_creation_rate_for`). Per-IP limits are the
    ``connection_creation_rate`` quota of ``/config/ips/<ip>``."""
    zookeeper_connect: str | None = prop("zookeeper.connect", to_optional_str, None)
    """ZooKeeper ensemble to register with; ``None``: standalone broker."""
    zookeeper_session_timeout_ms: int = prop("zookeeper.session.timeout.ms", to_int, 6000, at_least(1))
    """ZooKeeper session timeout (ms)."""
    zookeeper_connection_timeout_ms: int = prop("zookeeper.connection.timeout.ms", to_int, 6000, at_least(1))
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
    topic_config_file: str | None = prop("topic.config.file", to_optional_str, None, _check_topic_config_file)
    """A ``.properties`` file of per-topic overrides, one
    ``<topic>.message.format.version=...`` or
    ``<topic>.message.timestamp.type=...`` per line (read when the broker
    starts; see `load_topic_configs`). ``None``: no overrides."""

    security_config: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_to_security, repr=False)
    """Every ``ssl.*``, ``sasl.*`` and ``listener.name.*`` property as
    ``((name, value), ...)`` (values may be secrets: not in ``repr``)."""

    def __attrs_post_init__(self) -> None:
        # Check the listeners, their protocols and security settings now, so
        # that a bad server.properties fails at start-up, naming the property.
        self.listener_security()
        self._check_listener_connection_rates()
        queued = self.queued_max_request_bytes
        if queued is not None and 0 < queued < self.socket_request_max_bytes:
            from kclient.errors import ConfigError

            raise ConfigError(
                f"Invalid value {queued} for configuration queued.max.request.bytes: must be at least "
                f"socket.request.max.bytes ({self.socket_request_max_bytes}), or -1 for unbounded"
            )

    @property
    def request_memory_limit(self) -> int | None:
        """The request memory budget in bytes: ``queued.max.request.bytes``;
        when not set, 100 MiB or ``socket.request.max.bytes`` if larger;
        ``None`` when unbounded (-1 or 0)."""
        queued = self.queued_max_request_bytes
        if queued is None:
            return max(DEFAULT_QUEUED_MAX_REQUEST_BYTES, self.socket_request_max_bytes)
        return queued if queued > 0 else None

    def max_connections_for(self, address: str) -> int:
        """The connection limit of one client IP address:
        ``max.connections.per.ip.overrides`` for it (matched literally),
        else ``max.connections.per.ip``."""
        for host, limit in self.max_connections_per_ip_overrides:
            if host == address:
                return limit
        return self.max_connections_per_ip

    def max_connection_creation_rate_for(self, listener: str) -> int:
        """A listener's own connection creation rate limit (KIP-612).

        Args:
            listener: The listener's name (any case).

        Returns:
            New connections per second:
            ``listener.name.<listener>.max.connection.creation.rate``, else
            ``max.connection.creation.rate`` (as Kafka's listener-prefixed
            configs fall back to the broker's).

        Raises:
            ConfigError: The listener's value is not an integer >= 0.
        """
        wanted = f"listener.name.{listener.lower()}.{_CONNECTION_RATE}"
        for key, value in self.security_config:
            if key.lower() == wanted:
                return _listener_connection_rate(key, value)
        return self.max_connection_creation_rate

    def _check_listener_connection_rates(self) -> None:
        """Fail at start-up on a bad ``listener.name.<l>.max.connection.creation.rate``."""
        for key, value in self.security_config:
            if key.lower().endswith(f".{_CONNECTION_RATE}"):
                _listener_connection_rate(key, value)

    @classmethod
    def _kwargs_from(cls, source: Mapping[str, Any], with_keys: bool = False, strict: bool = True) -> Any:
        security = {k.strip(): v for k, v in source.items() if isinstance(k, str) and k.strip().startswith(SECURITY_PREFIXES)}
        rest = {k: v for k, v in source.items() if not (isinstance(k, str) and k.strip().startswith(SECURITY_PREFIXES))}
        result = super()._kwargs_from(rest, with_keys=with_keys, strict=strict)
        kwargs = result[0] if with_keys else result
        if security:
            kwargs["security_config"] = security
        return result

    def with_properties(self, changes: Mapping[str, Any], *, strict: bool = True) -> BrokerConfig:
        """A copy with some Kafka properties changed (security properties
        are merged into `security_config`).

        Args:
            changes: ``{"dotted.name": value}``; aliases are accepted.
            strict: Refuse unknown keys (the default), as in
                `from_properties`; False logs and ignores them.

        Returns:
            A new config.

        Raises:
            ConfigError: A bad value, or (unless ``strict=False``) an
                unknown key.
        """
        security = {k.strip(): v for k, v in changes.items() if isinstance(k, str) and k.strip().startswith(SECURITY_PREFIXES)}
        if security:
            rest = {k: v for k, v in changes.items() if not (isinstance(k, str) and k.strip() in security)}
            changes = {**rest, **dict(self.security_config), **security}
        return super().with_properties(changes, strict=strict)

    def as_properties(self) -> dict[str, Any]:
        """The config as ``{"kafka.name": value}``, security properties included."""
        props = super().as_properties()
        props.update(dict(self.security_config))
        return props

    @property
    def security_properties(self) -> dict[str, str]:
        """`security_config` as a dict."""
        return dict(self.security_config)

    def listener_endpoints(self) -> list[ListenerEndpoint]:
        """The listeners to serve, with their security protocols (KIP-103).

        ``listeners`` (without the ``controller.listener.names``), else one
        ``PLAINTEXT`` listener on ``host.name`` (`DEFAULT_BIND_HOST` if
        empty) and ``port``.

        Returns:
            The endpoints, in the order of ``listeners``.

        Raises:
            ConfigError: naming ``listeners`` or
                ``listener.security.protocol.map``.
        """
        from kclient.security.settings import DEFAULT_PROTOCOL_MAP, parse_listeners

        if not self.listeners:
            return parse_listeners([("PLAINTEXT", self.listen_host, self.port)])
        protocol_map: Any = self.listener_security_protocol_map
        if protocol_map is None and self.controller_listener_names:
            protocol_map = {**DEFAULT_PROTOCOL_MAP, **dict.fromkeys(self.controller_listener_names, "PLAINTEXT")}
        served = [lst for lst in self.listeners if lst[0] not in self.controller_listener_names]
        if not served:
            from kclient.errors import ConfigError

            raise ConfigError("Invalid configuration listeners: every listener is in controller.listener.names")
        return parse_listeners(served, protocol_map)

    def listener_security(self) -> list[ListenerSecurity]:
        """Each served listener's TLS and SASL settings.

        Returns:
            The settings of each listener, in the order of ``listeners``.

        Raises:
            ConfigError: naming the property (see
                `kclient.security.settings.ListenerSecurity.from_properties`).
        """
        from kclient.security.settings import ListenerSecurity

        props = self.security_properties
        return [ListenerSecurity.from_properties(props, endpoint) for endpoint in self.listener_endpoints()]

    def advertised_address(self, listener_name: str, bound_port: int) -> tuple[str, int]:
        """``(host, port)`` given to clients that connect to ``listener_name``.

        ``advertised.listeners`` entry of that name, else (first listener
        only) ``advertised.host.name`` / ``advertised.port``, else the
        listener's own address with ``127.0.0.1`` for a wildcard host;
        port 0 means ``bound_port``.

        Args:
            listener_name: The listener's upper-case name.
            bound_port: The port it is bound to.

        Returns:
            The advertised host and port.
        """
        for name, host, port in self.advertised_listeners:
            if name == listener_name:
                return (host if host not in _WILDCARD_HOSTS else "127.0.0.1"), (port or bound_port)
        endpoints = self.listener_endpoints()
        if endpoints[0].name == listener_name:
            return self.advertised_host, (self.advertised_port or bound_port)
        host = next((e.host for e in endpoints if e.name == listener_name), "")
        return (host if host not in _WILDCARD_HOSTS else "127.0.0.1"), bound_port

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
        """Address to bind: the first listener's host (empty: every
        interface, ``"0.0.0.0"``), else ``host.name``, else
        `DEFAULT_BIND_HOST` (``127.0.0.1``: loopback only)."""
        if self.listeners:
            return self.listeners[0][1] or "0.0.0.0"
        return self.host_name or DEFAULT_BIND_HOST

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
