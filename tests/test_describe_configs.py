"""DescribeConfigs (key 32, v0-3; KIP-133, KIP-226, KIP-569) against real
brokers: frames encoded and decoded by kafka-python's classes generated
from Kafka's message JSON (an implementation independent of kclient's
schemas), and the admin clients of kafka-python and confluent-kafka, on a
standalone broker and on a three-broker cluster whose topic overrides live
in ZooKeeper's ``/config/topics``. The tables behind the answers
(`kclient.broker.topic_configs`) are checked without a broker.
"""

from __future__ import annotations

import socket
import struct
import uuid
import warnings

import pytest

from kclient.broker.describe_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_LOGGER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    BrokerConfigView,
    is_sensitive,
)
from kclient.broker.topic_admin import TOPIC_CONFIGS
from kclient.broker.topic_configs import TOPIC_CONFIG_DEFS, kafka_string, topic_defaults
from kclient.config import BrokerConfig
from kclient.errors import (
    INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from kclient.protocol.messages.describe_configs import DescribeConfigsSynonym
from kclient.testing import BrokerProcess, Cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewTopic,
    )
    from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
OVERRIDES = {"retention.ms": "3600000", "cleanup.policy": "compact", "min.insync.replicas": "1"}
SECRET = "hunter2-not-shown"
#: Broker properties of the standalone broker: one set (segment.bytes'
#: default comes from it), one password (sensitive, never on the wire).
STANDALONE_PROPS = {"log.segment.bytes": 1048576, "ssl.keystore.password": SECRET, "num.partitions": 1}


# ---------------------------------------------------------------- tables, no broker


@pytest.mark.unit
def test_every_topic_config_create_topics_accepts_is_described():
    assert set(TOPIC_CONFIG_DEFS) == set(TOPIC_CONFIGS)


@pytest.mark.unit
def test_topic_defaults_come_from_the_broker_properties():
    config = BrokerConfig.from_properties(
        {
            "log.retention.minutes": 5,
            "log.segment.bytes": 1000,
            "log.cleanup.policy": "delete,compact",
            "message.max.bytes": 2000,
            "min.insync.replicas": 2,
            "log.roll.hours": 2,
            "log.message.timestamp.type": "LogAppendTime",
            "unclean.leader.election.enable": "true",
        }
    )
    defaults = topic_defaults(config)
    assert defaults["retention.ms"] == "300000"
    assert defaults["segment.ms"] == str(2 * 3_600_000)
    assert defaults["segment.bytes"] == "1000"
    assert defaults["cleanup.policy"] == "compact,delete"
    assert defaults["max.message.bytes"] == "2000"
    assert defaults["min.insync.replicas"] == "2"
    assert defaults["message.timestamp.type"] == "LogAppendTime"
    assert defaults["unclean.leader.election.enable"] == "true"
    assert defaults["min.cleanable.dirty.ratio"] == "0.5"
    # Never flushed by time (Kafka prints Long.MAX_VALUE); Kafka's own defaults
    # for what BrokerConfig does not declare.
    assert defaults["flush.ms"] == str(2**63 - 1)
    assert defaults["compression.type"] == "producer"
    assert defaults["preallocate"] == "false"
    assert set(defaults) == set(TOPIC_CONFIG_DEFS)


@pytest.mark.unit
def test_kafka_strings():
    assert kafka_string(True) == "true" and kafka_string(False) == "false"
    assert kafka_string(None) is None
    assert kafka_string(("compact", "delete")) == "compact,delete"
    assert kafka_string((("PLAINTEXT", "", 9092), ("SSL", "::1", 9093))) == "PLAINTEXT://:9092,SSL://[::1]:9093"
    assert kafka_string(0.5) == "0.5"


def test_broker_synonyms_as_kafka_lists_them():
    view = BrokerConfigView.of(BrokerConfig.from_properties({"log.retention.hours": 24, "num.partitions": 3}))
    assert view.synonyms("num.partitions") == [
        DescribeConfigsSynonym(name="num.partitions", value="3", source=STATIC_BROKER_CONFIG),
        DescribeConfigsSynonym(name="num.partitions", value="1", source=DEFAULT_CONFIG),
    ]
    assert view.synonyms("log.retention.hours") == [
        DescribeConfigsSynonym(name="log.retention.hours", value="24", source=STATIC_BROKER_CONFIG),
        DescribeConfigsSynonym(name="log.retention.hours", value="168", source=DEFAULT_CONFIG),
    ]
    # Kafka drops the synonyms before the name asked for: the hours setting
    # is no synonym of log.retention.ms (nor so of the topic's retention.ms).
    assert view.synonyms("log.retention.ms") == []
    assert view.synonyms("log.flush.interval.ms") == []
    # Kafka's defaults of broker properties kclient does not declare.
    assert view.synonyms("compression.type") == [DescribeConfigsSynonym(name="compression.type", value="producer", source=DEFAULT_CONFIG)]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("name", "sensitive"),
    [
        ("ssl.keystore.password", True),
        ("ssl.key.password", True),
        ("ssl.keystore.key", True),
        ("sasl.jaas.config", True),
        ("listener.name.sasl_ssl.plain.sasl.jaas.config", True),
        ("listener.name.ssl.ssl.truststore.password", True),
        ("sasl.oauthbearer.client.secret", True),
        ("ssl.keystore.location", False),
        ("sasl.enabled.mechanisms", False),
        ("log.retention.ms", False),
    ],
)
def test_sensitive_names(name, sensitive):
    assert is_sensitive(name) is sensitive


# ---------------------------------------------------------------- raw frames


def describe_raw(host: str, port: int, version: int, resources, *, synonyms: bool = False, documentation: bool = False):
    """One DescribeConfigs round trip encoded and decoded by kafka-python's
    generated classes; returns ``(decoded response, raw response bytes)``."""
    request = DescribeConfigsRequest(resources=resources, include_synonyms=synonyms, include_documentation=documentation, version=version)
    request.with_header(correlation_id=4242, client_id="describe-configs-test")
    with socket.create_connection((host, port), timeout=15) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        (size,) = struct.unpack(">i", _exactly(sock, 4))
        frame = _exactly(sock, size)
    assert struct.unpack(">i", frame[:4])[0] == 4242
    return DescribeConfigsResponse.decode(frame, version=version, header=True), frame


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data


def by_name(result) -> dict:
    return {c.name: c for c in result.configs}


@pytest.fixture(scope="module")
def standalone():
    with BrokerProcess(properties=STANDALONE_PROPS) as proc:
        yield proc


@pytest.fixture(scope="module")
def overridden_topic(standalone) -> str:
    """A topic created by kafka-python's CreateTopics with `OVERRIDES`."""
    name = f"dc-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=standalone.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(name, 1, 1, topic_configs=OVERRIDES)], timeout_ms=30000)
    finally:
        admin.close()
    return name


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_raw_topic_configs_every_version(standalone, overridden_topic, version):
    response, _ = describe_raw(standalone.host, standalone.port, version, [(TOPIC, overridden_topic, None)], synonyms=True, documentation=True)
    assert response.throttle_time_ms == 0
    (result,) = response.results
    assert (result.error_code, result.error_message, result.resource_type, result.resource_name) == (0, None, TOPIC, overridden_topic)
    configs = by_name(result)
    assert set(configs) == set(TOPIC_CONFIGS)
    retention, segment, compression = configs["retention.ms"], configs["segment.bytes"], configs["compression.type"]
    assert (retention.value, retention.read_only, retention.is_sensitive) == ("3600000", False, False)
    assert configs["cleanup.policy"].value == "compact"
    assert segment.value == "1048576"  # the broker's log.segment.bytes
    assert compression.value == "producer"
    if version == 0:
        assert retention.is_default is False and segment.is_default is False and compression.is_default is True
        return
    assert retention.config_source == DYNAMIC_TOPIC_CONFIG
    assert segment.config_source == STATIC_BROKER_CONFIG
    assert compression.config_source == DEFAULT_CONFIG
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [("retention.ms", "3600000", DYNAMIC_TOPIC_CONFIG)]
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("log.segment.bytes", "1048576", STATIC_BROKER_CONFIG),
        ("log.segment.bytes", "1073741824", DEFAULT_CONFIG),
    ]
    assert [(s.name, s.value, s.source) for s in configs["cleanup.policy"].synonyms] == [
        ("cleanup.policy", "compact", DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", DEFAULT_CONFIG),
    ]
    if version == 3:
        assert retention.config_type == 5  # LONG
        assert configs["cleanup.policy"].config_type == 7  # LIST
        assert configs["min.cleanable.dirty.ratio"].config_type == 6  # DOUBLE
        assert configs["preallocate"].config_type == 1  # BOOLEAN
        assert retention.documentation


def test_raw_without_synonyms_or_documentation(standalone, overridden_topic):
    response, _ = describe_raw(standalone.host, standalone.port, 3, [(TOPIC, overridden_topic, None)])
    configs = by_name(response.results[0])
    assert all(c.synonyms == [] and c.documentation is None for c in configs.values())
    # The source still says where the value comes from.
    assert configs["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].config_source == STATIC_BROKER_CONFIG


def test_raw_configuration_keys_filter(standalone, overridden_topic):
    response, _ = describe_raw(
        standalone.host,
        standalone.port,
        1,
        [(TOPIC, overridden_topic, ["retention.ms", "no.such.config"]), (TOPIC, overridden_topic, []), (BROKER, "0", ["num.partitions", "broker.id"])],
    )
    only, everything, broker = response.results
    assert [c.name for c in only.configs] == ["retention.ms"]
    assert len(everything.configs) == len(TOPIC_CONFIGS)  # empty = all, as Kafka
    assert {c.name: c.value for c in broker.configs} == {"num.partitions": "1", "broker.id": "0"}


def test_raw_broker_configs(standalone):
    response, frame = describe_raw(standalone.host, standalone.port, 3, [(BROKER, "0", None)], synonyms=True, documentation=True)
    (result,) = response.results
    assert result.error_code == 0
    configs = by_name(result)
    assert {spec.name for spec in BrokerConfig.properties().values()} <= set(configs)
    segment = configs["log.segment.bytes"]
    assert (segment.value, segment.config_source, segment.read_only, segment.is_sensitive) == ("1048576", STATIC_BROKER_CONFIG, True, False)
    assert segment.config_type == 3 and segment.documentation  # INT, its docstring
    assert configs["log.cleaner.enable"].value == "true"
    assert configs["log.cleaner.enable"].config_source == DEFAULT_CONFIG
    assert configs["log.dirs"].value == str(standalone.log_dir)
    password = configs["ssl.keystore.password"]
    assert (password.value, password.is_sensitive, password.config_source, password.config_type) == (None, True, STATIC_BROKER_CONFIG, 9)
    assert [(s.name, s.value) for s in password.synonyms] == [("ssl.keystore.password", None)]
    assert SECRET.encode() not in frame


@pytest.mark.parametrize(
    ("resource", "code", "message"),
    [
        ((TOPIC, "no-such-topic-dc", None), UNKNOWN_TOPIC_OR_PARTITION, None),
        ((TOPIC, "bad/name", None), INVALID_TOPIC_EXCEPTION, "bad/name"),
        ((BROKER, "7", None), INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 7"),
        ((BROKER, "zero", None), INVALID_REQUEST, "Broker id must be an integer, but it is: zero"),
        ((BROKER_LOGGER, "", None), INVALID_REQUEST, "Broker id must not be empty"),
        ((BROKER_LOGGER, "3", None), INVALID_REQUEST, "Unexpected broker id, expected 0, but received 3"),
        ((99, "x", None), INVALID_REQUEST, "Unsupported resource type: 99"),
    ],
)
def test_raw_errors_per_resource(standalone, overridden_topic, resource, code, message):
    """An error is the resource's own: the others in the request are answered."""
    response, _ = describe_raw(standalone.host, standalone.port, 1, [resource, (TOPIC, overridden_topic, ["retention.ms"])])
    failed, fine = response.results
    assert (failed.resource_type, failed.resource_name) == resource[:2]
    assert failed.error_code == code
    assert failed.configs == []
    if message is None:
        assert failed.error_message is None
    else:
        assert message in failed.error_message
    assert fine.error_code == 0 and [c.value for c in fine.configs] == ["3600000"]


def test_raw_cluster_default_broker_configs_are_empty(standalone):
    """The empty broker name asks for the cluster-wide dynamic defaults:
    kclient has none."""
    response, _ = describe_raw(standalone.host, standalone.port, 1, [(BROKER, "", None)])
    (result,) = response.results
    assert (result.error_code, result.configs) == (0, [])


def test_raw_broker_loggers(standalone):
    response, _ = describe_raw(standalone.host, standalone.port, 1, [(BROKER_LOGGER, "0", None)])
    configs = by_name(response.results[0])
    assert "root" in configs and "kclient.broker" in configs
    assert all(c.config_source == DYNAMIC_BROKER_LOGGER_CONFIG for c in configs.values())
    assert configs["kclient.broker"].value in {"DEBUG", "INFO", "WARN", "ERROR", "FATAL"}


# ---------------------------------------------------------------- peers, standalone


@pytest.mark.interop
def test_kafka_python_describes_topic_and_broker(standalone, overridden_topic):
    admin = KafkaAdminClient(bootstrap_servers=standalone.bootstrap, request_timeout_ms=30000)
    try:
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, overridden_topic)])
        # The default filter ("modified") keeps the dynamic configs: exactly
        # the topic's overrides.
        topic = modified["topic"][overridden_topic]
        assert {n: c["value"] for n, c in topic.items()} == OVERRIDES
        assert all(c["config_source"] == "DYNAMIC_TOPIC_CONFIG" for c in topic.values())
        everything = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, overridden_topic)], config_filter="all", include_synonyms=True)
        topic = everything["topic"][overridden_topic]
        assert set(topic) == set(TOPIC_CONFIGS)
        assert topic["segment.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert topic["retention.bytes"]["value"] == "-1" and topic["retention.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert topic["cleanup.policy"]["synonyms"][0] == {"name": "cleanup.policy", "value": "compact", "source": "DYNAMIC_TOPIC_CONFIG"}
        broker = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")["broker"]["0"]
        assert broker["log.segment.bytes"]["value"] == "1048576" and broker["log.segment.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert broker["ssl.keystore.password"]["value"] is None and broker["ssl.keystore.password"]["is_sensitive"] is True
        assert broker["message.max.bytes"]["config_source"] == "DEFAULT_CONFIG"
    finally:
        admin.close()


@pytest.mark.interop
def test_confluent_describes_topic_and_broker(standalone, overridden_topic):
    from confluent_kafka.admin import AdminClient, ConfigSource
    from confluent_kafka.admin import ConfigResource as CkConfigResource

    admin = AdminClient({"bootstrap.servers": standalone.bootstrap})
    futures = admin.describe_configs([CkConfigResource("topic", overridden_topic), CkConfigResource("broker", "0")], request_timeout=30)
    (topic_f, broker_f) = futures.values()
    topic = topic_f.result(timeout=60)
    assert set(topic) == set(TOPIC_CONFIGS)
    for name, value in OVERRIDES.items():
        assert topic[name].value == value
        assert topic[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert not topic[name].is_default
    assert topic["segment.bytes"].value == "1048576" and topic["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert topic["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value and topic["retention.bytes"].is_default
    broker = broker_f.result(timeout=60)
    assert broker["broker.id"].value == "0" and broker["broker.id"].is_read_only
    assert broker["ssl.keystore.password"].value is None and broker["ssl.keystore.password"].is_sensitive


# ---------------------------------------------------------------- a three-broker cluster


@pytest.fixture(scope="module")
def cluster(zookeeper):
    with Cluster(brokers=3, zookeeper=zookeeper, properties={"auto.create.topics.enable": "false", "log.retention.bytes": 1 << 30}) as c:
        yield c


@pytest.fixture(scope="module")
def cluster_topic(cluster) -> str:
    """A topic created through CreateTopics on the controller: its
    overrides are in ZooKeeper's /config/topics."""
    name = f"dc-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, partitions=2, replication_factor=3, config=OVERRIDES)
    return name


def test_cluster_every_broker_reads_the_overrides_from_zookeeper(cluster, cluster_topic):
    import json

    stored = json.loads(cluster.zk.get(f"/config/topics/{cluster_topic}"))["config"]
    assert stored == OVERRIDES
    for broker_id, broker in cluster.brokers.items():
        response, _ = describe_raw(broker.host, broker.port, 1, [(TOPIC, cluster_topic, None), (BROKER, str(broker_id), ["broker.id"]), (BROKER, "9", None)])
        topic, me, other = response.results
        configs = by_name(topic)
        assert {n for n, c in configs.items() if c.config_source == DYNAMIC_TOPIC_CONFIG} == set(OVERRIDES)
        assert configs["retention.ms"].value == "3600000"
        assert (configs["retention.bytes"].value, configs["retention.bytes"].config_source) == (str(1 << 30), STATIC_BROKER_CONFIG)
        assert configs["segment.bytes"].config_source == DEFAULT_CONFIG
        assert [c.value for c in me.configs] == [str(broker_id)]
        assert other.error_code == INVALID_REQUEST and f"expected {broker_id} or empty string" in other.error_message


@pytest.mark.interop
def test_cluster_kafka_python_describes_topic_and_each_broker(cluster, cluster_topic):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","), request_timeout_ms=30000)
    try:
        topic = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, cluster_topic)], config_filter="all")["topic"][cluster_topic]
        assert {n: c["value"] for n, c in topic.items() if c["config_source"] == "DYNAMIC_TOPIC_CONFIG"} == OVERRIDES
        assert topic["compression.type"]["config_source"] == "DEFAULT_CONFIG"
        # A BROKER resource goes to that broker, which answers for itself.
        brokers = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(b)) for b in cluster.brokers], config_filter="all")["broker"]
        assert {name: configs["broker.id"]["value"] for name, configs in brokers.items()} == {str(b): str(b) for b in cluster.brokers}
        assert all(configs["zookeeper.connect"]["config_source"] == "STATIC_BROKER_CONFIG" for configs in brokers.values())
    finally:
        admin.close()


@pytest.mark.interop
def test_cluster_confluent_describes_topic_and_a_broker(cluster, cluster_topic):
    from confluent_kafka.admin import AdminClient, ConfigSource
    from confluent_kafka.admin import ConfigResource as CkConfigResource

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.describe_configs([CkConfigResource("topic", cluster_topic), CkConfigResource("broker", "2")], request_timeout=30)
    topic_f, broker_f = futures.values()
    topic = topic_f.result(timeout=60)
    assert {n: c.value for n, c in topic.items() if c.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value} == OVERRIDES
    assert topic["retention.bytes"].value == str(1 << 30)
    broker = broker_f.result(timeout=60)
    assert broker["broker.id"].value == "2"
