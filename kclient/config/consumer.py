"""`ConsumerConfig`: the high-level consumer's settings under Kafka's
consumer property names (the Kafka 0.8 consumer configs, see
https://kafka.apache.org/08/documentation.html#consumerconfigs)."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from kclient.config.base import prop
from kclient.config.convert import (
    HostPort,
    at_least,
    enum_choice,
    list_of,
    not_empty,
    same_as,
    to_bool,
    to_host_ports,
    to_int,
    to_optional_plugin,
    to_optional_str,
    to_str,
)
from kclient.config.security import _ClientSecurityConfig
from kclient.errors import ConfigError

__all__ = ["ConsumerConfig"]


def _to_optional_host_ports(value: object) -> tuple[HostPort, ...] | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return to_host_ports(value)


def _default_coordination(config: ConsumerConfig) -> str:
    return "broker" if config.bootstrap_servers and not config.zookeeper_connect else "zookeeper"


@attrs.frozen(kw_only=True)
class ConsumerConfig(_ClientSecurityConfig):
    """Settings of the high-level consumer (Kafka 0.8 consumer names and defaults).

    ``group.id`` is required, and so is ``zookeeper.connect`` for a group
    coordinated through ZooKeeper (``group.coordination=zookeeper``, Kafka
    0.8's design). ``group.coordination=broker`` (the default when
    ``bootstrap.servers`` is given without ``zookeeper.connect``) instead
    coordinates the group through a broker's group coordinator (JoinGroup,
    SyncGroup, Heartbeat, LeaveGroup with the "consumer" protocol: see
    `kclient.client.consumer.group.broker_core`) and needs
    ``bootstrap.servers``; offsets then always live in Kafka
    (``offsets.storage`` and ``dual.commit.enabled`` apply to
    ZooKeeper-coordinated groups only). ``session.timeout.ms``,
    ``heartbeat.interval.ms`` and ``rebalance.timeout.ms`` apply to
    broker-coordinated groups only.
    ``client.id`` defaults to ``group.id``. ``auto.offset.reset`` also accepts
    ``earliest``/``latest`` and stores them as ``smallest``/``largest``.

    The modern consumer names that mean the same thing are aliases:
    ``enable.auto.commit`` (``auto.commit.enable``),
    ``max.partition.fetch.bytes`` (``fetch.message.max.bytes``),
    ``fetch.max.wait.ms`` (``fetch.wait.max.ms``), ``receive.buffer.bytes``
    (``socket.receive.buffer.bytes``) and ``request.timeout.ms``
    (``socket.timeout.ms``). ``group.id``, ``client.id``,
    ``auto.commit.interval.ms``, ``auto.offset.reset``, ``fetch.min.bytes``
    and ``exclude.internal.topics`` are already the modern names.

    Not aliased, because the meaning differs (see `NOT_MAPPED`):
    ``fetch.max.bytes`` (a cap on a whole fetch response, not per
    partition).

    The poll consumer, `kclient.Consumer` (Kafka's KafkaConsumer), reads
    this class too: ``max.poll.records``, ``max.poll.interval.ms``
    (KIP-62), ``default.api.timeout.ms``, ``retry.backoff.ms``,
    ``key.deserializer`` and ``value.deserializer`` are its own (the
    connector ignores them); it takes KafkaConsumer's defaults where they
    differ from 0.8's (``auto.commit.interval.ms`` 5000,
    ``fetch.max.wait.ms`` 500, ``session.timeout.ms`` 45000), accepts
    ``auto.offset.reset=none`` and refuses the ZooKeeper-era settings (see
    `kclient.client.consumer.poll.config`).

    The fetchers' broker connections are secured by ``security.protocol``
    and the ``ssl.*`` / ``sasl.*`` properties (KIP-43, KIP-84, KIP-152; see
    `kclient.config.security`), parsed together into ``security``.
    ZooKeeper is reached as ``zookeeper.connect`` says, unsecured.

    Raises:
        ConfigError: Naming the property, for a bad value, or when
            ``socket.timeout.ms`` is smaller than ``fetch.wait.max.ms``
            (Kafka's own check: a long poll must not outlive the socket
            timeout), or for security properties that do not fit together.
    """

    NOT_MAPPED: ClassVar[dict[str, str]] = {
        "fetch.max.bytes": "it caps a whole fetch response, and kclient's limit is per partition: set "
        "fetch.message.max.bytes (alias max.partition.fetch.bytes)",
    }

    group_id: str = prop("group.id", to_str, validate=not_empty)
    """Consumer group the consumer joins. Required."""
    zookeeper_connect: str | None = prop("zookeeper.connect", to_optional_str, None)
    """ZooKeeper ensemble, ``"host:port,host:port/chroot"``. Required with
    ``group.coordination=zookeeper``."""
    bootstrap_servers: tuple[HostPort, ...] | None = prop("bootstrap.servers", _to_optional_host_ports, None)
    """Brokers to bootstrap from, ``"host:port,host:port"``. Required with
    ``group.coordination=broker``; with ZooKeeper coordination and
    ``offsets.storage=kafka`` the brokers registered in ZooKeeper are used
    when it is unset."""
    group_coordination: str = prop("group.coordination", enum_choice("zookeeper", "broker"), attrs.Factory(_default_coordination, takes_self=True))
    """Who coordinates the group: ``zookeeper`` (Kafka 0.8's registration
    and rebalance in ZooKeeper) or ``broker`` (a broker's group coordinator,
    JoinGroup/SyncGroup). Default: ``broker`` when ``bootstrap.servers`` is
    set and ``zookeeper.connect`` is not, else ``zookeeper``."""
    consumer_id: str | None = prop("consumer.id", to_optional_str, None)
    """Member id in the group; ``None`` generates ``<group>_<host>-<ms>-<random>``."""
    client_id: str = prop("client.id", to_str, same_as("group_id"))
    """Sent with every request; defaults to ``group.id``."""
    socket_timeout_ms: int = prop(
        "socket.timeout.ms", to_int, 30000, at_least(1), aliases=["request.timeout.ms"]
    )
    """Network request timeout (ms)."""
    socket_receive_buffer_bytes: int = prop(
        "socket.receive.buffer.bytes", to_int, 65536, at_least(-1), aliases=["receive.buffer.bytes"]
    )
    """Socket receive buffer (bytes); -1 leaves the OS default."""
    fetch_message_max_bytes: int = prop(
        "fetch.message.max.bytes", to_int, 1048576, at_least(1), aliases=["max.partition.fetch.bytes"]
    )
    """Bytes asked for per partition per fetch; must exceed the largest message."""
    num_consumer_fetchers: int = prop("num.consumer.fetchers", to_int, 1, at_least(1))
    """Fetcher tasks per consumer."""
    auto_commit_enable: bool = prop("auto.commit.enable", to_bool, True, aliases=["enable.auto.commit"])
    """Commit consumed offsets periodically."""
    auto_commit_interval_ms: int = prop("auto.commit.interval.ms", to_int, 60000, at_least(0))
    """Period of the automatic commit (ms)."""
    queued_max_message_chunks: int = prop("queued.max.message.chunks", to_int, 2, at_least(1))
    """Fetched chunks buffered per stream."""
    rebalance_max_retries: int = prop("rebalance.max.retries", to_int, 4, at_least(0))
    """Rebalance attempts before giving up."""
    rebalance_backoff_ms: int = prop("rebalance.backoff.ms", to_int, 2000, at_least(0))
    """Pause between rebalance attempts (ms)."""
    refresh_leader_backoff_ms: int = prop("refresh.leader.backoff.ms", to_int, 200, at_least(0))
    """Pause before looking for a lost partition leader again (ms)."""
    fetch_min_bytes: int = prop("fetch.min.bytes", to_int, 1, at_least(0))
    """Least data a fetch answer should carry (bytes)."""
    fetch_wait_max_ms: int = prop("fetch.wait.max.ms", to_int, 100, at_least(0), aliases=["fetch.max.wait.ms"])
    """Longest the broker waits for ``fetch.min.bytes`` (ms)."""
    auto_offset_reset: str = prop(
        "auto.offset.reset",
        enum_choice("smallest", "largest", synonyms={"earliest": "smallest", "latest": "largest"}),
        "largest",
    )
    """Where to start without a committed offset: ``smallest`` or ``largest``
    (the modern ``earliest`` / ``latest`` are accepted and stored as these)."""
    isolation_level: str = prop("isolation.level", enum_choice("read_uncommitted", "read_committed"), "read_uncommitted")
    """What the fetches return of transactional records (KIP-98; Kafka's
    consumer property of the same name): ``read_uncommitted`` (the
    default) every record up to the high watermark, aborted transactions'
    records included; ``read_committed`` only records of committed
    transactions and non-transactional ones, up to the last stable offset
    (the first offset of the oldest open transaction). Transaction markers
    (control batches) are never handed out in either mode. The ``latest``
    offset of ``auto.offset.reset`` is the last stable offset under
    ``read_committed``."""
    consumer_timeout_ms: int = prop("consumer.timeout.ms", to_int, -1, at_least(-1))
    """Iterator timeout without a message (ms); -1 waits forever."""
    exclude_internal_topics: bool = prop("exclude.internal.topics", to_bool, True)
    """Hide internal topics (``__consumer_offsets``) from wildcard subscriptions."""
    offsets_storage: str = prop("offsets.storage", enum_choice("zookeeper", "kafka"), "zookeeper")
    """Where offsets are committed: ``zookeeper`` or ``kafka``."""
    dual_commit_enabled: bool = prop("dual.commit.enabled", to_bool, True)
    """With ``offsets.storage=kafka``, commit to ZooKeeper too (migration)."""
    partition_assignment_strategy: tuple[str, ...] = prop(
        "partition.assignment.strategy",
        list_of(
            enum_choice(
            "range",
            "roundrobin",
            "cooperative-sticky",
            synonyms={
                "org.apache.kafka.clients.consumer.rangeassignor": "range",
                "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
                "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
            },
            )
        ),
        ("range",),
    )
    """How partitions are spread over the group's streams (or, for the poll
    consumer, the group's members): ``range`` or ``roundrobin``; Kafka's
    class names ``org.apache.kafka.clients.consumer.RangeAssignor`` /
    ``RoundRobinAssignor`` are accepted too. The poll consumer also takes
    ``cooperative-sticky`` (``CooperativeStickyAssignor``, KIP-429:
    incremental rebalancing, partitions that stay keep being consumed), and
    a comma-separated list in order of preference, as Kafka's consumer
    (``cooperative-sticky,range``: Kafka's first step from eager to
    cooperative; a member rebalances incrementally only when every assignor
    it lists is cooperative). The ``ConsumerConnector`` uses the first."""
    group_instance_id: str | None = prop("group.instance.id", to_optional_str, None)
    """Poll consumer: this member's static identity in its group (KIP-345).
    A static member that restarts within ``session.timeout.ms`` gets its
    partitions back with no rebalance; closing it sends no LeaveGroup.
    Unset (the default): a dynamic member."""
    group_protocol: str = prop("group.protocol", enum_choice("classic", "consumer"), "classic")
    """Poll consumer: the group membership protocol. ``classic``
    (JoinGroup / SyncGroup, the client-side assignors of
    ``partition.assignment.strategy``) or ``consumer`` (Kafka 4.0's
    ConsumerGroupHeartbeat protocol, KIP-848: the coordinator assigns,
    rebalances are incremental)."""
    group_remote_assignor: str | None = prop("group.remote.assignor", to_optional_str, None)
    """Poll consumer with ``group.protocol=consumer``: the server-side
    assignor to ask the coordinator for (``uniform`` or ``range``); unset
    lets the coordinator choose (KIP-848)."""
    offsets_channel_backoff_ms: int = prop("offsets.channel.backoff.ms", to_int, 1000, at_least(0))
    """Pause before retrying a coordinator request: finding the
    coordinator, committing or fetching offsets, joining (ms)."""
    offsets_channel_socket_timeout_ms: int = prop("offsets.channel.socket.timeout.ms", to_int, 10000, at_least(1))
    """Longest a coordinator call may take, its retries included (ms)."""
    offsets_commit_max_retries: int = prop("offsets.commit.max.retries", to_int, 5, at_least(0))
    """Retries of a failed commit to Kafka (not of the commit at shutdown's
    ZooKeeper part)."""
    session_timeout_ms: int = prop("session.timeout.ms", to_int, 10000, at_least(1))
    """Broker-coordinated groups: a member without a heartbeat for this long
    is removed from the group (ms)."""
    heartbeat_interval_ms: int = prop("heartbeat.interval.ms", to_int, 3000, at_least(1))
    """Broker-coordinated groups: time between heartbeats (ms); below
    ``session.timeout.ms``."""
    rebalance_timeout_ms: int = prop("rebalance.timeout.ms", to_int, 60000, at_least(1))
    """Broker-coordinated groups: how long the coordinator waits for every
    member to rejoin in a rebalance (JoinGroup's rebalance timeout,
    KIP-62; ms)."""
    metadata_max_age_ms: int = prop("metadata.max.age.ms", to_int, 300000, at_least(1))
    """Broker-coordinated groups: how often the member checks its subscribed
    topics (a topic filter's matches) and their partition counts; a change
    starts a rebalance (ms)."""
    zookeeper_session_timeout_ms: int = prop("zookeeper.session.timeout.ms", to_int, 6000, at_least(1))
    """ZooKeeper session timeout (ms)."""
    zookeeper_connection_timeout_ms: int = prop("zookeeper.connection.timeout.ms", to_int, 6000, at_least(1))
    """Longest wait to connect to ZooKeeper (ms)."""
    zookeeper_sync_time_ms: int = prop("zookeeper.sync.time.ms", to_int, 2000, at_least(0))
    """How far a ZooKeeper follower may lag the leader (ms)."""
    max_poll_records: int = prop("max.poll.records", to_int, 500, at_least(1))
    """The poll consumer (`kclient.Consumer`): the most records one
    ``poll`` returns (Kafka's KafkaConsumer property of the same name)."""
    max_poll_interval_ms: int = prop("max.poll.interval.ms", to_int, 300000, at_least(1))
    """The poll consumer: the longest time between two ``poll`` calls; a
    member that stops polling longer leaves its group and its partitions
    go to the others (KIP-62). Also its JoinGroup rebalance timeout (ms)."""
    default_api_timeout_ms: int = prop("default.api.timeout.ms", to_int, 60000, at_least(0))
    """The poll consumer: how long a call that waits for the brokers
    (``committed``, ``position``, ``offsets_for_times``, a synchronous
    ``commit``) may block when no timeout is given (ms)."""
    retry_backoff_ms: int = prop("retry.backoff.ms", to_int, 100, at_least(0))
    """The poll consumer: pause before retrying a failed request to the
    group coordinator or a partition leader (ms)."""
    key_deserializer: Any = prop("key.deserializer", to_optional_plugin, None)
    """The poll consumer: turns each record's key bytes into the key it
    hands out: a `kclient.Decoder` (class, instance or dotted class path,
    e.g. ``kclient.StringDecoder``) or a callable; ``None`` keeps bytes."""
    value_deserializer: Any = prop("value.deserializer", to_optional_plugin, None)
    """The poll consumer: the same for each record's value."""
    statistics_interval_ms: int = prop("statistics.interval.ms", to_int, 0, at_least(0))
    """How often the ConsumerConnector calls its ``statistics_callback`` with
    a statistics snapshot (ms; librdkafka's property of the same name); 0
    (the default) never."""

    def __attrs_post_init__(self) -> None:
        self._check_security()
        if self.group_coordination == "zookeeper" and not self.zookeeper_connect:
            raise ConfigError("Missing required configuration zookeeper.connect (group.coordination=zookeeper)")
        if self.group_coordination == "broker" and not self.bootstrap_servers:
            raise ConfigError("Missing required configuration bootstrap.servers (group.coordination=broker)")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                f"Invalid value {self.heartbeat_interval_ms} for configuration heartbeat.interval.ms: "
                f"must be below session.timeout.ms={self.session_timeout_ms}"
            )
        if self.socket_timeout_ms < self.fetch_wait_max_ms:
            raise ConfigError(
                f"Invalid value {self.socket_timeout_ms} for configuration socket.timeout.ms: "
                f"must be at least fetch.wait.max.ms={self.fetch_wait_max_ms}"
            )
