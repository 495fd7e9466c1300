"""kclient's AdminClient and the ``kclient topics`` / ``consumer-groups`` /
``configs`` tools against every target: topics created, described and
deleted, the errors a bad request gets, consumer groups listed and
described with their committed offsets."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conformance.client_support import create_topic, unique_topic, wait_for
from kclient import AdminClient, Consumer, NewTopic, Producer, ProducerData
from kclient.client.admin import AlterConfigOp, ConfigEntry, ConfigResource
from kclient.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kclient.testing import kafka_tool
from kclient.tools.common import fetch_topic_ids, kafka_uuid


def kclient_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the ``kclient`` command (``python -m kclient``)."""
    result = subprocess.run([sys.executable, "-m", "kclient", *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"kclient {' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result


@pytest.fixture
def admin(target):
    with AdminClient({"bootstrap.servers": target.bootstrap, "default.api.timeout.ms": 30_000}) as client:
        yield client


def node_id(admin) -> int:
    [broker] = admin.describe_cluster().brokers
    return broker.node_id


def test_describe_cluster(target, admin):
    cluster = admin.describe_cluster()
    [broker] = cluster.brokers
    assert (broker.host, broker.port) == (target.host, target.port)
    # Kafka 4 (KRaft) names a live broker as the controller in Metadata
    # (clients cannot reach the KRaft controllers, KIP-590); with one node
    # that is the broker itself, as on the others.
    assert cluster.controller_id == broker.node_id
    # A cluster id is a UUID in URL-safe base64 without padding (22 chars).
    assert len(cluster.cluster_id) == 22


def test_create_describe_delete(target, admin):
    topic = unique_topic("adm")
    admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"})])
    wait_for(lambda: topic in admin.list_topics(), f"{topic} listed")
    node = node_id(admin)
    described = wait_for(lambda: _described(admin, topic), f"{topic} led")
    assert [(p.partition, p.leader, p.replicas, p.isr) for p in described.partitions] == [(p, node, (node,), (node,)) for p in range(3)]
    assert described.internal is False
    admin.delete_topics([topic])
    wait_for(lambda: topic not in admin.list_topics(), f"{topic} gone")


def _described(admin, topic):
    try:
        found = admin.describe_topics([topic])[topic]
    except UnknownTopicOrPartitionError:
        return None
    return found if all(p.leader >= 0 for p in found.partitions) else None


def test_create_validate_only(target, admin):
    topic = unique_topic("adm-validate")
    admin.create_topics([NewTopic(topic, 2, 1)], validate_only=True)
    assert topic not in admin.list_topics()


@pytest.mark.parametrize(
    "make,error,code",
    [
        (lambda t: NewTopic(t, 0, 1), InvalidPartitionsError, 37),
        (lambda t: NewTopic(t, 1, 3), InvalidReplicationFactorError, 38),
        (lambda t: NewTopic(t, 1, 1, config={"no.such.config": "1"}), InvalidConfigurationError, 40),
        (lambda t: NewTopic(t, 1, 1, config={"retention.ms": "soon"}), InvalidConfigurationError, 40),
        (lambda t: NewTopic(t + "/bad", 1, 1), InvalidTopicError, 17),
    ],
    ids=["zero-partitions", "replication-factor-3", "unknown-config", "bad-config-value", "bad-name"],
)
def test_create_errors(target, admin, make, error, code):
    new = make(unique_topic("adm-err"))
    with pytest.raises(error) as raised:
        admin.create_topics([new])
    assert raised.value.code == code
    assert new.name not in admin.list_topics()


def test_create_existing_and_delete_missing(target, admin):
    topic = create_topic(target, unique_topic("adm-twice"), partitions=1)
    with pytest.raises(TopicAlreadyExistsError) as raised:
        admin.create_topics([NewTopic(topic, 1, 1)])
    assert raised.value.code == 36
    with pytest.raises(UnknownTopicOrPartitionError) as raised:
        admin.delete_topics([unique_topic("adm-missing")])
    assert raised.value.code == 3


def test_describe_missing_topic(target, admin):
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_topics([unique_topic("adm-missing")])


@pytest.fixture
def group_with_offsets(target):
    """A broker-coordinated kclient group ``grp-*``, still running, that
    read and committed partition 0's 5 records and partition 1's 2; then 2
    more records went to partition 0 (log end 7, lag 2)."""
    topic = create_topic(target, unique_topic("adm-grp"), partitions=2)
    conf = {"bootstrap.servers": target.bootstrap, "request.required.acks": -1}
    with Producer(conf) as producer:
        producer.send([ProducerData(topic, b"k", [f"v{i}".encode() for i in range(5)], partition=0), ProducerData(topic, b"k", [b"a", b"b"], partition=1)])
    group = unique_topic("grp")
    config = {
        "group.id": group,
        "bootstrap.servers": target.bootstrap,
        "auto.offset.reset": "earliest",
        "auto.commit.enable": "false",
        "consumer.timeout.ms": 15_000,
        "client.id": "conformance-member",
    }
    with Consumer.create(config) as connector:
        (stream,) = connector.create_message_streams({topic: 1})[topic]
        seen = []
        for m in stream:
            seen.append((m.partition, m.offset))
            if len(seen) == 7:
                break
        assert sorted(seen) == [(0, i) for i in range(5)] + [(1, 0), (1, 1)]
        connector.commit_offsets()
        with Producer(conf) as producer:
            producer.send(ProducerData(topic, b"k", [b"v5", b"v6"], partition=0))
        yield topic, group, connector


def test_consumer_groups(target, admin, group_with_offsets):
    topic, group, _ = group_with_offsets
    listed = {g.group_id: g for g in admin.list_consumer_groups()}
    assert listed[group].protocol_type == "consumer"
    described = wait_for(lambda: (d := admin.describe_consumer_groups([group])[group]) and d.state == "Stable" and d, "a stable group")
    assert (described.group_id, described.protocol_type, described.protocol) == (group, "consumer", "range")
    [member] = described.members
    assert member.client_id == "conformance-member"
    assert sorted(member.assignment) == [(topic, 0), (topic, 1)]
    assert admin.list_consumer_group_offsets(group) == {(topic, 0): 5, (topic, 1): 2}


def test_cli_consumer_groups(target, group_with_offsets):
    topic, group, _ = group_with_offsets
    assert group in kclient_cli("consumer-groups", "--bootstrap-server", target.bootstrap, "--list").stdout.split()
    lines = kclient_cli("consumer-groups", "--bootstrap-server", target.bootstrap, "--describe", "--group", group).stdout.splitlines()
    rows = [line.split() for line in lines]
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert [r[:6] for r in rows[1:]] == [[group, topic, "0", "5", "7", "2"], [group, topic, "1", "2", "2", "0"]]
    assert rows[1][6] == rows[2][6] != "-"


def test_group_offsets_reset_and_groups_deleted_by_an_admin(target, admin, group_with_offsets):
    """AdminClient's list_offsets (earliest, latest, by time),
    alter_consumer_group_offsets (refused while the group has a member) and
    delete_consumer_groups, and ``consumer-groups --reset-offsets`` /
    ``--delete`` on them: alike on every target."""
    from kclient.errors import GroupIdNotFoundError, GroupNotEmptyError

    topic, group, connector = group_with_offsets
    assert admin.list_offsets({(topic, 0): -2, (topic, 1): -1}) == {(topic, 0): 0, (topic, 1): 2}
    assert admin.list_offsets({(topic, 0): 0}) == {(topic, 0): 0}
    assert admin.list_offsets({(topic, 0): 32503680000000}) == {(topic, 0): -1}  # year 3000: no record that late
    where = ("consumer-groups", "--bootstrap-server", target.bootstrap, "--group", group)
    refused = kclient_cli(*where, "--reset-offsets", "--to-earliest", "--all-topics", "--execute", check=False)
    assert refused.returncode == 1 and f"Assignments can only be reset if the group '{group}' is inactive" in refused.stderr
    assert type(admin.delete_consumer_groups([group])[group]) is GroupNotEmptyError
    connector.shutdown()
    wait_for(lambda: admin.describe_consumer_groups([group])[group].state == "Empty", "the group to be empty")
    reset = kclient_cli(*where, "--reset-offsets", "--shift-by", "-1", "--topic", f"{topic}:0", "--execute")
    assert [line.split() for line in reset.stdout.splitlines()[1:]] == [[group, topic, "0", "4"]]
    assert admin.list_consumer_group_offsets(group) == {(topic, 0): 4, (topic, 1): 2}
    admin.alter_consumer_group_offsets(group, {(topic, 1): 0})
    assert admin.list_consumer_group_offsets(group) == {(topic, 0): 4, (topic, 1): 0}
    deleted = kclient_cli("consumer-groups", "--bootstrap-server", target.bootstrap, "--delete", "--group", group)
    assert deleted.stdout == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert type(admin.delete_consumer_groups([group])[group]) is GroupIdNotFoundError
    missing = kclient_cli("consumer-groups", "--bootstrap-server", target.bootstrap, "--describe", "--group", group, check=False)
    assert missing.returncode == 1 and f"Consumer group '{group}' does not exist." in missing.stderr


def test_cli_topics(target):
    topic = unique_topic("cli")
    created = kclient_cli("topics", "--bootstrap-server", target.bootstrap, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=60000")
    assert created.stdout == f"Created topic {topic}.\n"
    with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
        node = node_id(admin)
        wait_for(lambda: _described(admin, topic), f"{topic} led")
    assert kclient_cli("topics", "--bootstrap-server", target.bootstrap, "--list", "--topic", topic).stdout == f"{topic}\n"
    lines = kclient_cli("topics", "--bootstrap-server", target.bootstrap, "--describe", "--topic", topic).stdout.splitlines()
    summary, _, configs = lines[0].partition("\tConfigs: ")
    # TopicId as kafka-topics prints it: every target has topic ids (KIP-516; Kafka since 2.8).
    topic_id = kafka_uuid(fetch_topic_ids([(target.host, target.port)])[topic])
    assert summary == f"Topic: {topic}\tTopicId: {topic_id}\tPartitionCount: 2\tReplicationFactor: 1"
    # Apache Kafka also lists its broker settings that are not Kafka's defaults (flush.messages), as kafka-topics does.
    assert "retention.ms=60000" in configs.split(",")
    assert lines[1:] == [
        f"\tTopic: {topic}\tPartition: 0\tLeader: {node}\tReplicas: {node}\tIsr: {node}",
        f"\tTopic: {topic}\tPartition: 1\tLeader: {node}\tReplicas: {node}\tIsr: {node}",
    ]
    again = kclient_cli("topics", "--bootstrap-server", target.bootstrap, "--create", "--topic", topic, "--partitions", "2", check=False)
    assert again.returncode == 1
    assert "TopicAlreadyExistsError" in again.stderr
    assert kclient_cli("topics", "--bootstrap-server", target.bootstrap, "--delete", "--topic", topic).stdout == f"Deleted topic {topic}.\n"


def topic_configs(admin, topic: str) -> dict:
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource]


def test_describe_topic_configs(target, admin):
    topic = create_topic(target, unique_topic("adm-cfg"), partitions=1, config={"retention.ms": "3600000"})
    configs = topic_configs(admin, topic)
    assert configs["retention.ms"] == ConfigEntry("retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG", False, False, False)
    assert configs["cleanup.policy"] == ConfigEntry("cleanup.policy", "delete", "DEFAULT_CONFIG", True, False, False)
    assert configs["message.timestamp.type"] == ConfigEntry("message.timestamp.type", "CreateTime", "DEFAULT_CONFIG", True, False, False)
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["min.insync.replicas"].value == "1"
    only = admin.describe_configs([ConfigResource("topic", topic)], names=["retention.ms", "segment.bytes"])
    assert sorted(only[ConfigResource("topic", topic)]) == ["retention.ms", "segment.bytes"]


def test_describe_broker_config(target, admin):
    node = node_id(admin)
    resource = ConfigResource("broker", str(node))
    [entry] = admin.describe_configs([resource], names=["num.partitions"])[resource].values()
    assert entry == ConfigEntry("num.partitions", "2", "STATIC_BROKER_CONFIG", False, True, False)


def _when(value, test):
    return value if test(value) else None


def test_alter_topic_configs(target, admin):
    topic = create_topic(target, unique_topic("adm-alter"), partitions=1, config={"retention.ms": "3600000"})
    resource = ConfigResource("topic", topic)
    admin.incremental_alter_configs({resource: [AlterConfigOp("retention.ms", "60000"), AlterConfigOp("cleanup.policy", "compact")]})
    changed = wait_for(lambda: _when(topic_configs(admin, topic), lambda c: c["cleanup.policy"].value == "compact"), "the change")
    assert (changed["retention.ms"].value, changed["retention.ms"].source) == ("60000", "DYNAMIC_TOPIC_CONFIG")
    assert (changed["cleanup.policy"].value, changed["cleanup.policy"].source) == ("compact", "DYNAMIC_TOPIC_CONFIG")
    admin.incremental_alter_configs({resource: [AlterConfigOp("cleanup.policy", "delete", op="append"), AlterConfigOp("retention.ms", op="delete")]})
    back = wait_for(lambda: _when(topic_configs(admin, topic), lambda c: c["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"), "retention.ms deleted")
    assert back["retention.ms"].is_default
    assert back["cleanup.policy"].value == "compact,delete"
    admin.incremental_alter_configs({resource: [AlterConfigOp("retention.ms", "1000")]}, validate_only=True)
    assert topic_configs(admin, topic)["retention.ms"].is_default


@pytest.mark.parametrize(
    "op,error,code",
    [
        (AlterConfigOp("no.such.config", "1"), InvalidConfigurationError, 40),
        (AlterConfigOp("retention.ms", "soon"), InvalidConfigurationError, 40),
        (AlterConfigOp("retention.ms", "1", op="append"), InvalidConfigurationError, 40),
    ],
    ids=["unknown-config", "bad-value", "append-to-scalar"],
)
def test_alter_topic_config_errors(target, admin, op, error, code):
    topic = create_topic(target, unique_topic("adm-alter-err"), partitions=1)
    resource = ConfigResource("topic", topic)
    with pytest.raises(error) as raised:
        admin.incremental_alter_configs({resource: [op]})
    assert raised.value.code == code
    assert topic_configs(admin, topic)["retention.ms"].is_default


def test_configs_of_missing_topic(target, admin):
    missing = ConfigResource("topic", unique_topic("adm-missing"))
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_configs([missing])
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.incremental_alter_configs({missing: [AlterConfigOp("retention.ms", "1000")]})


def _alter_codes(target, topic: str) -> dict[str, list[int]]:
    """AlterConfigs and IncrementalAlterConfigs with one bad change each,
    as raw requests: the error code of each."""
    import trio

    from kclient.net.connection import BrokerConnection
    from kclient.protocol.messages import ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS

    bad = [("no.such.config", "1"), ("retention.ms", "soon"), ("segment.bytes", "10"), ("cleanup.policy", "forever"), ("min.insync.replicas", "0")]

    async def main():
        async with trio.open_nursery() as nursery:
            conn = await BrokerConnection.connect(nursery, target.host, target.port)
            codes: dict[str, list[int]] = {"AlterConfigs": [], "IncrementalAlterConfigs": []}
            for name, value in bad:
                legacy = {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [{"name": name, "value": value}]}], "validate_only": True}
                r = await conn.request(ALTER_CONFIGS, legacy, version=conn.version_for(ALTER_CONFIGS))
                codes["AlterConfigs"].append(r.responses[0].error_code)
                incremental = {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [{"name": name, "config_operation": 0, "value": value}]}], "validate_only": True}
                r = await conn.request(INCREMENTAL_ALTER_CONFIGS, incremental, version=conn.version_for(INCREMENTAL_ALTER_CONFIGS))
                codes["IncrementalAlterConfigs"].append(r.responses[0].error_code)
            await conn.aclose()
            nursery.cancel_scope.cancel()
            return codes

    return trio.run(main)


def test_bad_config_values_get_invalid_config(target):
    """Apache Kafka (3.9 and 4.x) answers a bad topic config value with
    INVALID_CONFIG (40), in AlterConfigs and IncrementalAlterConfigs alike."""
    topic = create_topic(target, unique_topic("adm-raw"), partitions=1)
    assert _alter_codes(target, topic) == {"AlterConfigs": [40] * 5, "IncrementalAlterConfigs": [40] * 5}


def test_cli_configs_topics_as_kafka_configs_prints(target):
    """``kclient configs --bootstrap-server`` changes a topic's configs and
    describes them line for line as Kafka's own kafka-configs does, on the
    same broker."""
    topic = create_topic(target, unique_topic("cli-cfg"), partitions=1, config={"retention.ms": "3600000", "segment.ms": "600000"})
    where = ("--bootstrap-server", target.bootstrap, "--entity-type", "topics", "--entity-name", topic)
    altered = kclient_cli("configs", *where, "--alter", "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]", "--delete-config", "segment.ms")
    assert altered.stdout == f"Completed updating config for topic {topic}.\n"
    expected = [
        f"Dynamic configs for topic {topic} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}",
    ]
    with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
        wait_for(lambda: "segment.ms" not in {n for n, e in topic_configs(admin, topic).items() if e.source == "DYNAMIC_TOPIC_CONFIG"}, "the change")
    assert kclient_cli("configs", *where, "--describe").stdout.splitlines() == expected
    java = kafka_tool("kafka-configs", *where, "--describe", release=target.release or "4")
    assert java.stdout.strip().splitlines() == expected


def test_cli_configs_broker(target):
    with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
        node = node_id(admin)
    where = ("--bootstrap-server", target.bootstrap, "--entity-type", "brokers", "--entity-name", str(node))
    assert kclient_cli("configs", *where, "--describe").stdout.splitlines() == [f"Dynamic configs for broker {node} are:"]
    full = kclient_cli("configs", *where, "--describe", "--all").stdout.splitlines()
    assert full[0] == f"All configs for broker {node} are:"
    assert any(line.startswith("  num.partitions=2 sensitive=false synonyms={STATIC_BROKER_CONFIG:num.partitions=2, DEFAULT_CONFIG:num.partitions=1}") for line in full)


def test_cli_configs_scram_users_in_zookeeper(zk_target):
    """``kclient configs --zookeeper`` reads the SCRAM users Kafka's own
    kafka-configs wrote (Kafka 3.9) or kclient's zk.users (bundled)."""
    out = kclient_cli("configs", "--zookeeper", zk_target.zookeeper_connect, "--describe", "--entity-type", "users", "--entity-name", "bob").stdout
    assert out == "Configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096,SCRAM-SHA-512=iterations=4096\n"


def test_unknown_group(target, admin):
    """A group nobody joined: state Dead, no members, no offsets (DescribeGroups
    up to v5 and OffsetFetch on every broker); ``kclient consumer-groups``
    says so in one line with status 1, in Kafka's words (issue 27: status 2
    is for bad arguments only)."""
    group = unique_topic("grp-none")
    described = admin.describe_consumer_groups([group])[group]
    assert (described.group_id, described.state, described.protocol_type, described.protocol, described.members) == (group, "Dead", "", "", ())
    assert admin.list_consumer_group_offsets(group) == {}
    out = kclient_cli("consumer-groups", "--bootstrap-server", target.bootstrap, "--describe", "--group", group, check=False)
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr.rstrip().endswith(f"Consumer group '{group}' does not exist.")


def test_create_with_broker_defaults_and_assignment(target, admin):
    """num_partitions / replication_factor -1 take the broker's defaults
    (KIP-464: num.partitions=2 here); a replica assignment names the broker.
    One naming an unknown broker is INVALID_REPLICA_ASSIGNMENT (39) on the
    bundled broker and on Kafka 4 (the KRaft controller checks broker
    registrations); Kafka 3.9 in ZooKeeper mode writes the assignment
    without checking and answers REQUEST_TIMED_OUT (7) when no leader is
    elected within the request's timeout."""
    from kclient.errors import InvalidReplicaAssignmentError, RequestTimedOutError

    node = node_id(admin)
    defaults = unique_topic("adm-defaults")
    admin.create_topics([NewTopic(defaults)])
    described = wait_for(lambda: _described(admin, defaults), f"{defaults} led")
    assert [(p.partition, p.replicas) for p in described.partitions] == [(0, (node,)), (1, (node,))]
    assigned = unique_topic("adm-assigned")
    admin.create_topics([NewTopic(assigned, replica_assignment={0: [node], 1: [node], 2: [node]})])
    described = wait_for(lambda: _described(admin, assigned), f"{assigned} led")
    assert [(p.partition, p.leader, p.replicas) for p in described.partitions] == [(p, node, (node,)) for p in range(3)]
    expected = RequestTimedOutError if target.name == "kafka-3.9" else InvalidReplicaAssignmentError
    with pytest.raises(expected) as raised:
        admin.create_topics([NewTopic(unique_topic("adm-bad-assign"), replica_assignment={0: [node + 100]})], timeout_ms=2000)
    assert raised.value.code == expected.code
