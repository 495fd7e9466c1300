"""AlterConfigs (key 33, v0-1; KIP-133) and IncrementalAlterConfigs (key
44, v0; KIP-339) against real brokers: the schemas byte for byte against
kafka-python's generated classes, kafka-python's ``alter_configs`` and
confluent-kafka's ``incremental_alter_configs`` on a standalone broker and
on a three-broker cluster, where the change goes through ZooKeeper's
``/config/topics`` and ``/config/changes`` and every broker applies it
(a raised ``min.insync.replicas`` refuses ``acks=-1`` produces at once,
with no LeaderAndIsr).
"""

from __future__ import annotations

import functools
import json
import socket
import struct
import uuid
import warnings

import pytest
from helpers.wait import wait_for

from kclient.broker.alter_configs import validate_topic_configs
from kclient.broker.config_changes import changed_topic
from kclient.errors import (
    INVALID_CONFIG,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from kclient.protocol.messages import ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from kclient.testing import BrokerProcess, Cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewTopic,
    )
    from kafka.errors import MessageSizeTooLargeError
    from kafka.protocol.admin import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


# ---------------------------------------------------------------- no broker


@pytest.mark.unit
@pytest.mark.parametrize(
    ("configs", "code"),
    [
        ({"retention.ms": "1000", "cleanup.policy": "compact,delete", "min.insync.replicas": "2"}, NONE),
        ({"message.timestamp.type": "LogAppendTime", "compression.type": "zstd", "preallocate": "true"}, NONE),
        ({"no.such.config": "1"}, INVALID_CONFIG),
        ({"retention.ms": "soon"}, INVALID_CONFIG),
        ({"segment.bytes": "10"}, INVALID_CONFIG),  # below Kafka's minimum of 14
        ({"min.insync.replicas": "0"}, INVALID_CONFIG),
        ({"cleanup.policy": "forever"}, INVALID_CONFIG),
        ({"message.timestamp.type": "Whenever"}, INVALID_CONFIG),
        ({"unclean.leader.election.enable": "maybe"}, INVALID_CONFIG),
    ],
)
def test_validate_topic_configs(configs, code):
    assert validate_topic_configs(configs)[0] == code


@pytest.mark.unit
def test_change_notifications_of_both_versions():
    assert changed_topic(b'{"version":2,"entity_path":"topics/orders"}') == "orders"
    assert changed_topic(b'{"version":1,"entity_type":"topics","entity_name":"orders"}') == "orders"
    assert changed_topic(b'{"version":2,"entity_path":"brokers/1"}') is None
    assert changed_topic(b"garbage") is None


@pytest.mark.unit
def test_schemas_match_kafka_python_byte_for_byte():
    alter = {"resources": [{"resource_type": 2, "resource_name": "orders", "configs": [{"name": "retention.ms", "value": "1"}, {"name": "x", "value": None}]}], "validate_only": True}
    incremental = {
        "resources": [{"resource_type": 2, "resource_name": "orders", "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}, {"name": "x", "config_operation": 1, "value": None}]}],
        "validate_only": False,
    }
    response = {
        "throttle_time_ms": 7,
        "responses": [
            {"error_code": 40, "error_message": "bad", "resource_type": 2, "resource_name": "orders"},
            {"error_code": 0, "error_message": None, "resource_type": 4, "resource_name": "1"},
        ],
    }
    theirs_alter = [(r["resource_type"], r["resource_name"], [(c["name"], c["value"]) for c in r["configs"]]) for r in alter["resources"]]
    theirs_inc = [(r["resource_type"], r["resource_name"], [(c["name"], c["config_operation"], c["value"]) for c in r["configs"]]) for r in incremental["resources"]]
    theirs_resp = [(r["error_code"], r["error_message"], r["resource_type"], r["resource_name"]) for r in response["responses"]]
    for version in (0, 1):
        expected = AlterConfigsRequest(resources=theirs_alter, validate_only=True, version=version).encode()
        assert ALTER_CONFIGS.request(version).encode(alter) == expected
        assert ALTER_CONFIGS.request(version).decode(expected) == alter
        expected = AlterConfigsResponse(throttle_time_ms=7, responses=theirs_resp, version=version).encode()
        assert ALTER_CONFIGS.response(version).encode(response) == expected
    expected = IncrementalAlterConfigsRequest(resources=theirs_inc, validate_only=False, version=0).encode()
    assert INCREMENTAL_ALTER_CONFIGS.request(0).encode(incremental) == expected
    assert INCREMENTAL_ALTER_CONFIGS.request(0).decode(expected) == incremental
    expected = IncrementalAlterConfigsResponse(throttle_time_ms=7, responses=theirs_resp, version=0).encode()
    assert INCREMENTAL_ALTER_CONFIGS.response(0).encode(response) == expected


# ---------------------------------------------------------------- raw frames


def request_raw(host: str, port: int, message) -> object:
    """Send one kafka-python-encoded request, decode the answer with kafka-python."""
    message.with_header(correlation_id=99, client_id="alter-configs-test")
    with socket.create_connection((host, port), timeout=15) as sock:
        sock.sendall(message.encode(header=True, framed=True))
        (size,) = struct.unpack(">i", _exactly(sock, 4))
        frame = _exactly(sock, size)
    response_class = IncrementalAlterConfigsResponse if isinstance(message, IncrementalAlterConfigsRequest) else AlterConfigsResponse
    return response_class.decode(frame, version=message.API_VERSION, header=True)


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data


def overrides(admin: KafkaAdminClient, topic: str) -> dict[str, str]:
    """The topic's overrides as kafka-python reads them (DescribeConfigs)."""
    return {n: c["value"] for n, c in admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic].items()}


def produce_all_acks(bootstrap: str, topic: str):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0, request_timeout_ms=10000)
    try:
        return producer.send(topic, key=b"key", value=b"value").get(timeout=30)
    finally:
        producer.close()


@pytest.fixture(scope="module")
def standalone():
    with BrokerProcess(properties={"num.partitions": 1}) as proc:
        yield proc


@pytest.fixture
def admin(standalone):
    client = KafkaAdminClient(bootstrap_servers=standalone.bootstrap, request_timeout_ms=30000)
    yield client
    client.close()


@pytest.fixture
def topic(admin) -> str:
    name = f"ac-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1, topic_configs={"retention.ms": "3600000"})], timeout_ms=30000)
    return name


def test_raw_per_resource_answers(standalone, topic):
    inc = IncrementalAlterConfigsRequest(
        resources=[
            (TOPIC, topic, [("segment.ms", 0, "60000"), ("retention.ms", 1, None)]),
            (TOPIC, "no-such-topic-ac", [("retention.ms", 0, "1")]),
            (TOPIC, topic, [("no.such.config", 0, "1")]),
            (TOPIC, topic, [("retention.bytes", 2, "1")]),  # APPEND to a non-list config
            (BROKER, "0", [("log.retention.hours", 0, "1")]),
            (BROKER, "5", []),
            (BROKER_LOGGER, "0", [("kclient.storage", 0, "LOUD")]),
            (99, "x", []),
        ],
        validate_only=False,
        version=0,
    )
    response = request_raw(standalone.host, standalone.port, inc)
    codes = [(r.error_code, r.resource_name) for r in response.responses]
    assert codes == [
        (NONE, topic),
        (UNKNOWN_TOPIC_OR_PARTITION, "no-such-topic-ac"),
        (INVALID_CONFIG, topic),
        (INVALID_CONFIG, topic),
        (INVALID_REQUEST, "0"),
        (INVALID_REQUEST, "5"),
        (INVALID_CONFIG, "0"),
        (INVALID_REQUEST, "x"),
    ]
    assert "Unknown topic config name: no.such.config" in response.responses[2].error_message
    assert "log.retention.hours" in response.responses[4].error_message
    admin = KafkaAdminClient(bootstrap_servers=standalone.bootstrap)
    try:
        assert overrides(admin, topic) == {"segment.ms": "60000"}
    finally:
        admin.close()


def test_raw_validate_only_changes_nothing(standalone, admin, topic):
    for version in (0, 1):
        request = AlterConfigsRequest(resources=[(TOPIC, topic, [("retention.ms", "5")])], validate_only=True, version=version)
        (result,) = request_raw(standalone.host, standalone.port, request).responses
        assert result.error_code == NONE
    assert overrides(admin, topic) == {"retention.ms": "3600000"}


def test_alter_configs_replaces_every_override(standalone, admin, topic):
    request = AlterConfigsRequest(resources=[(TOPIC, topic, [("cleanup.policy", "compact")])], validate_only=False, version=1)
    (result,) = request_raw(standalone.host, standalone.port, request).responses
    assert result.error_code == NONE
    assert overrides(admin, topic) == {"cleanup.policy": "compact"}  # retention.ms is gone


@pytest.mark.interop
def test_kafka_python_alter_configs_standalone(standalone, admin, topic):
    result = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": "10", "retention.ms": ("DELETE", None), "cleanup.policy": ("APPEND", "compact")})]
    )
    assert result == {"topic": {topic: "OK"}}
    assert overrides(admin, topic) == {"max.message.bytes": "10", "cleanup.policy": "delete,compact"}
    # Applied at once: a record batch is larger than 10 bytes. (Not
    # min.insync.replicas=2: as Kafka, the broker caps it at the topic's one
    # replica, Partition.effectiveMinIsr.)
    with pytest.raises(MessageSizeTooLargeError):
        produce_all_acks(standalone.bootstrap, topic)
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": ("DELETE", None)})])
    assert produce_all_acks(standalone.bootstrap, topic).offset == 0
    # The old AlterConfigs API (kafka-python re-sends the other overrides).
    assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})], incremental=False) == {"topic": {topic: "OK"}}
    assert overrides(admin, topic) == {"cleanup.policy": "delete,compact", "retention.ms": "7200000"}


@pytest.mark.interop
def test_kafka_python_sets_a_logger_level(standalone, admin):
    assert admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "0", configs={"kclient.storage": "ERROR"})], raise_on_unknown=False) == {"broker_logger": {"0": "OK"}}
    described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "0", configs={"kclient.storage": None})], config_filter="all")
    assert described["broker_logger"]["0"]["kclient.storage"]["value"] == "ERROR"


# ---------------------------------------------------------------- a three-broker cluster


@pytest.fixture(scope="module")
def cluster(zookeeper):
    with Cluster(brokers=3, zookeeper=zookeeper, properties={"auto.create.topics.enable": "false"}) as c:
        yield c


wait_until = functools.partial(wait_for, interval=0.1)


@pytest.mark.interop
def test_cluster_alter_goes_through_zookeeper_and_every_broker_applies_it(cluster):
    name = f"ac-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, partitions=1, replication_factor=3, config={"retention.ms": "3600000"})
    leader = cluster.leader(name, 0)
    other = next(b for b in cluster.brokers if b != leader)
    # Sent to a broker that does not lead the partition: it writes ZooKeeper,
    # the leader learns it from /config/changes.
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[other].bootstrap, request_timeout_ms=30000)
    try:
        before = set(cluster.zk.get_children("/config/changes")) if cluster.zk.exists("/config/changes") else set()
        request = IncrementalAlterConfigsRequest(resources=[(TOPIC, name, [("max.message.bytes", 0, "10")])], validate_only=False, version=0)
        (result,) = request_raw(cluster.brokers[other].host, cluster.brokers[other].port, request).responses
        assert result.error_code == NONE
        stored = json.loads(cluster.zk.get(f"/config/topics/{name}"))["config"]
        assert stored == {"retention.ms": "3600000", "max.message.bytes": "10"}
        (note,) = set(cluster.zk.get_children("/config/changes")) - before
        assert json.loads(cluster.zk.get(f"/config/changes/{note}")) == {"version": 2, "entity_path": f"topics/{name}"}
        # A record batch is larger than 10 bytes: the leader refuses it.
        wait_until(lambda: _refused(cluster.bootstrap, name), what="the leader to apply max.message.bytes=10")
        # Every broker describes the new value.
        for broker in cluster.brokers.values():
            one = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
            try:
                assert overrides(one, name)["max.message.bytes"] == "10"
            finally:
                one.close()
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={"max.message.bytes": "1048588"})])
        wait_until(lambda: not _refused(cluster.bootstrap, name), what="the leader to apply max.message.bytes=1048588")
    finally:
        admin.close()


def _refused(bootstrap: str, topic: str) -> bool:
    try:
        produce_all_acks(bootstrap, topic)
    except MessageSizeTooLargeError:
        return True
    return False


@pytest.mark.interop
def test_cluster_confluent_incremental_alter_configs(cluster):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry
    from confluent_kafka.admin import ConfigResource as CkConfigResource

    name = f"ac-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, partitions=1, replication_factor=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = CkConfigResource(
        "topic",
        name,
        incremental_configs=[ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET), ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)],
    )
    for future in admin.incremental_alter_configs([resource], request_timeout=30).values():
        future.result(timeout=60)
    assert json.loads(cluster.zk.get(f"/config/topics/{name}"))["config"] == {"retention.ms": "60000", "cleanup.policy": "compact"}
    described = next(iter(admin.describe_configs([CkConfigResource("topic", name)], request_timeout=30).values())).result(timeout=60)
    assert described["retention.ms"].value == "60000" and described["cleanup.policy"].value == "compact"
