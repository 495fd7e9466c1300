"""ACLs on the bundled broker (issue 30; KIP-11, KIP-290), one broker with
kclient's authorizer selected by Kafka's class name
(``kafka.security.authorizer.AclAuthorizer``): the ACL APIs and where they
store ACLs (Kafka's ZooKeeper layout), each API allowed and denied with
Kafka's error codes, patterns, DENY over ALLOW, hosts, super users and the
TLS principal mapping rules, over raw connections that log in as SASL PLAIN
users or present client certificates (`helpers.acls`).

The 3-broker tests (tests/test_acl_cluster.py) check that a change made on
one broker is applied on the others.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from cryptography import x509
from helpers.acls import (
    acl_broker_properties,
    acl_filter,
    binding,
    create_acls,
    delete_acls,
    describe_acls,
    sasl_client,
    tls_client,
)
from helpers.raw import SocketClient, fetch_body, make_topic, produce_body
from helpers.wait import wait_for

from kclient.acl import AclOperation as Op
from kclient.acl import AclPermissionType as Perm
from kclient.acl import PatternType, ResourceType
from kclient.broker.authz.zk_store import EXTENDED_CHANGES_PATH, LITERAL_CHANGES_PATH
from kclient.broker.config_changes import CONFIG_CHANGES_PATH
from kclient.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    INVALID_REQUEST,
    SECURITY_DISABLED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from kclient.protocol.messages import (
    ALTER_CONFIGS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_GROUPS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    FETCH,
    FIND_COORDINATOR,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID_FULL,
    JOIN_GROUP,
    LEADER_AND_ISR,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH_FULL,
    PRODUCE,
    STOP_REPLICA,
    UPDATE_METADATA,
    WRITE_TXN_MARKERS,
)
from kclient.protocol.records.v2 import build_batch
from kclient.testing import BrokerProcess, TestCertificates
from kclient.zk.client import ZkClient
from kclient.zk.users import alter_user_config

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
MAPPING_RULES = "RULE:^CN=([a-z]+),.*$/$1-tls/,DEFAULT"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    with TestCertificates(tmp_path_factory.mktemp("acl-certs")) as certificates:
        yield certificates


@pytest.fixture(scope="module")
def acl_zk(zookeeper) -> str:
    return zookeeper.connect_string(f"acl-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def acl_broker(acl_zk, certs):
    props = acl_broker_properties(certs, mapping_rules=MAPPING_RULES)
    props.update(
        {"zookeeper.connect": acl_zk, "broker.id": 3001, "num.partitions": 1, "auto.create.topics.enable": "true", "connection.rejection.log.interval.ms": 0}
    )
    with BrokerProcess(properties=props) as proc:
        yield proc


@pytest.fixture(scope="module")
def zk(acl_zk):
    client = ZkClient(acl_zk)
    client.start()
    yield client
    client.close()


@pytest.fixture(scope="module")
def admin(acl_broker):
    with sasl_client(acl_broker, "admin") as client:
        yield client


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def grant(admin: SocketClient, *bindings: dict) -> None:
    assert [r["error_code"] for r in create_acls(admin, *bindings)] == [0] * len(bindings)


def new_topic(admin: SocketClient, prefix: str = "t") -> str:
    topic = _name(prefix)
    make_topic(admin, topic)
    return topic


def produce(c: SocketClient, topic: str) -> int:
    body = produce_body(topic, 0, build_batch([(None, b"value", int(time.time() * 1000))]))
    return c.request(PRODUCE, 7, body)["responses"][0]["partition_responses"][0]["error_code"]


def fetch(c: SocketClient, topic: str) -> int:
    return c.request(FETCH, 11, fetch_body(topic, [(0, 0)]))["responses"][0]["partitions"][0]["error_code"]


def list_offsets(c: SocketClient, topic: str) -> int:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    return c.request(LIST_OFFSETS, 4, body)["topics"][0]["partitions"][0]["error_code"]


def metadata(c: SocketClient, topics: list[str] | None, *, auto_create: bool = False) -> dict[str, int]:
    body = {"topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": auto_create}
    return {t["name"]: t["error_code"] for t in c.request(METADATA, 4, body)["topics"]}


# ---------------------------------------------------------------- the ACL APIs and their store


def test_acl_apis_create_describe_delete_and_store_in_kafkas_layout(admin, zk):
    topic = _name("orders")
    results = create_acls(
        admin,
        binding(TOPIC, topic, "User:alice", Op.READ),
        binding(TOPIC, topic, "User:bob", Op.WRITE, Perm.DENY, host="10.0.0.9"),
        binding(GROUP, "app-", "User:alice", Op.READ, pattern=PatternType.PREFIXED),
    )
    assert results == [{"error_code": 0, "error_message": None}] * 3
    found = describe_acls(admin, acl_filter(TOPIC, topic, pattern=PatternType.LITERAL))
    assert found["error_code"] == 0
    assert [(r["resource_name"], r["pattern_type"]) for r in found["resources"]] == [(topic, 3)]
    assert sorted((a["principal"], a["host"], a["operation"], a["permission_type"]) for a in found["resources"][0]["acls"]) == [
        ("User:alice", "*", 3, 3),
        ("User:bob", "10.0.0.9", 4, 2),
    ]
    # Kafka's ZooKeeper layout and JSON
    literal = json.loads(zk.get(f"/kafka-acl/Topic/{topic}"))
    assert literal["version"] == 1
    assert sorted(literal["acls"], key=lambda a: a["principal"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "10.0.0.9"},
    ]
    assert json.loads(zk.get("/kafka-acl-extended/prefixed/Group/app-"))["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    ]
    assert f"TOPIC:{topic}".encode() in [zk.get(f"/kafka-acl-changes/{c}") for c in zk.get_children("/kafka-acl-changes")]
    extended = [json.loads(zk.get(f"/kafka-acl-extended-changes/{c}")) for c in zk.get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"} in extended
    # MATCH: every pattern that applies to a resource name
    matched = describe_acls(admin, acl_filter(GROUP, "app-payments", pattern=PatternType.MATCH))
    assert [(r["resource_name"], r["pattern_type"]) for r in matched["resources"]] == [("app-", 4)]
    # delete by filter: the deleted bindings come back
    deleted = delete_acls(admin, acl_filter(TOPIC, topic, pattern=PatternType.LITERAL, principal="User:bob"))
    assert deleted[0]["error_code"] == 0
    assert [(m["resource_name"], m["principal"], m["operation"]) for m in deleted[0]["matching_acls"]] == [(topic, "User:bob", 4)]
    assert [a["principal"] for a in json.loads(zk.get(f"/kafka-acl/Topic/{topic}"))["acls"]] == ["User:alice"]
    delete_acls(admin, acl_filter(TOPIC, topic), acl_filter(GROUP, "app-", pattern=PatternType.PREFIXED))
    assert zk.get_versioned(f"/kafka-acl/Topic/{topic}") is None
    assert describe_acls(admin, acl_filter(TOPIC, topic))["resources"] == []


def test_acl_apis_need_cluster_describe_and_alter(acl_broker, admin):
    with sasl_client(acl_broker, "carol") as carol:
        assert describe_acls(carol)["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        assert create_acls(carol, binding(TOPIC, "x", "User:carol", Op.ALL))[0]["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        assert delete_acls(carol, acl_filter())[0]["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        grant(admin, binding(CLUSTER, "kafka-cluster", "User:carol", Op.DESCRIBE))
        assert describe_acls(carol)["error_code"] == 0
        assert create_acls(carol, binding(TOPIC, "x", "User:carol", Op.ALL))[0]["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        grant(admin, binding(CLUSTER, "kafka-cluster", "User:carol", Op.ALTER))
        assert create_acls(carol, binding(TOPIC, "x", "User:carol", Op.ALL))[0]["error_code"] == 0
        assert len(delete_acls(carol, acl_filter(TOPIC, "x"))[0]["matching_acls"]) == 1
    delete_acls(admin, acl_filter(CLUSTER, "kafka-cluster", principal="User:carol"))


def test_invalid_bindings_are_refused_one_by_one(admin):
    results = create_acls(
        admin,
        binding(TOPIC, _name("ok"), "User:alice", Op.READ),
        binding(ResourceType.ANY, "x", "User:alice", Op.READ),
        binding(TOPIC, "x", "User:alice", Op.ANY),
        binding(CLUSTER, "not-the-cluster", "User:alice", Op.ALTER),
        binding(TOPIC, "", "User:alice", Op.READ),
        binding(TOPIC, "x", "User:alice", Op.READ, Perm.ANY),
        binding(TOPIC, "x", "User:alice", Op.READ, pattern=PatternType.MATCH),
        binding(TOPIC, "x", "alice", Op.READ),
    )
    assert [r["error_code"] for r in results] == [0] + [INVALID_REQUEST] * 7
    assert all(r["error_message"] for r in results[1:])
    unknown = acl_filter(ResourceType.UNKNOWN)
    assert describe_acls(admin, unknown)["error_code"] == INVALID_REQUEST
    assert [r["error_code"] for r in delete_acls(admin, unknown, acl_filter(TOPIC, "no-such-acl"))] == [INVALID_REQUEST, 0]


def test_acl_apis_without_an_authorizer_answer_security_disabled(broker):
    with SocketClient(broker.host, broker.port, client_id="acl-test", timeout=15) as c:
        assert describe_acls(c)["error_code"] == SECURITY_DISABLED
        assert create_acls(c, binding(TOPIC, "x", "User:a", Op.READ))[0]["error_code"] == SECURITY_DISABLED
        assert delete_acls(c, acl_filter())[0]["error_code"] == SECURITY_DISABLED


def test_acls_written_raw_into_zookeeper_are_honoured(acl_broker, admin, zk):
    """A node written as Kafka's tools write it (Kafka's JSON, then a change
    notification) is applied by the broker; so is its removal."""
    topic = new_topic(admin, "raw")
    prefix = _name("rawp")
    with sasl_client(acl_broker, "alice") as alice:
        assert produce(alice, topic) == TOPIC_AUTHORIZATION_FAILED
        acls = {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]}
        zk.write_persistent(f"/kafka-acl/Topic/{topic}", json.dumps(acls).encode())
        zk.create_sequential("/kafka-acl-changes/acl_changes_", f"Topic:{topic}".encode())
        wait_for(lambda: produce(alice, topic) == 0, "the broker applying the raw literal ACL")
        zk.write_persistent(f"/kafka-acl-extended/prefixed/Topic/{prefix}", json.dumps(acls).encode())
        event = {"version": 1, "resourceType": "TOPIC", "name": prefix, "patternType": "PREFIXED"}
        zk.create_sequential("/kafka-acl-extended-changes/acl_changes_", json.dumps(event).encode())
        other = new_topic(admin, prefix)
        wait_for(lambda: produce(alice, other) == 0, "the broker applying the raw prefixed ACL")
        zk.delete(f"/kafka-acl/Topic/{topic}")
        zk.create_sequential("/kafka-acl-changes/acl_changes_", f"Topic:{topic}".encode())
        wait_for(lambda: produce(alice, topic) == TOPIC_AUTHORIZATION_FAILED, "the broker dropping the removed ACL")
    delete_acls(admin, acl_filter(TOPIC, prefix, pattern=PatternType.PREFIXED))


# ---------------------------------------------------------------- topics


def test_topic_write_read_describe_allowed_and_denied(acl_broker, admin):
    topic = new_topic(admin)
    with sasl_client(acl_broker, "alice") as alice, sasl_client(acl_broker, "bob") as bob:
        assert produce(alice, topic) == TOPIC_AUTHORIZATION_FAILED
        assert fetch(alice, topic) == TOPIC_AUTHORIZATION_FAILED
        assert list_offsets(alice, topic) == TOPIC_AUTHORIZATION_FAILED
        grant(admin, binding(TOPIC, topic, "User:alice", Op.WRITE))
        assert produce(alice, topic) == 0
        assert produce(bob, topic) == TOPIC_AUTHORIZATION_FAILED
        assert fetch(alice, topic) == TOPIC_AUTHORIZATION_FAILED  # WRITE does not give READ
        assert list_offsets(alice, topic) == 0  # WRITE implies DESCRIBE
        grant(admin, binding(TOPIC, topic, "User:bob", Op.READ))
        assert fetch(bob, topic) == 0
        assert list_offsets(bob, topic) == 0  # READ implies DESCRIBE
        assert produce(bob, topic) == TOPIC_AUTHORIZATION_FAILED


def test_one_request_mixes_allowed_and_denied_topics(acl_broker, admin):
    allowed, denied = new_topic(admin, "mixed-ok"), new_topic(admin, "mixed-no")
    grant(admin, binding(TOPIC, allowed, "User:alice", Op.ALL))
    now = int(time.time() * 1000)
    batch = build_batch([(None, b"v", now)])
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 5000,
        "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": batch}]} for t in (allowed, denied)],
    }
    with sasl_client(acl_broker, "alice") as alice:
        answer = alice.request(PRODUCE, 7, body)["responses"]
        assert {t["name"]: t["partition_responses"][0]["error_code"] for t in answer} == {allowed: 0, denied: TOPIC_AUTHORIZATION_FAILED}
        fetched = alice.request(FETCH, 11, {**fetch_body(allowed, [(0, 0)]), "topics": [fetch_body(t, [(0, 0)])["topics"][0] for t in (allowed, denied)]})
        assert {t["topic"]: t["partitions"][0]["error_code"] for t in fetched["responses"]} == {allowed: 0, denied: TOPIC_AUTHORIZATION_FAILED}


def test_metadata_lists_only_topics_the_principal_may_describe(acl_broker, admin):
    mine, theirs = new_topic(admin, "md-mine"), new_topic(admin, "md-theirs")
    grant(admin, binding(TOPIC, mine, "User:carol", Op.DESCRIBE))
    with sasl_client(acl_broker, "carol") as carol:
        listed = metadata(carol, None)
        assert mine in listed and theirs not in listed
        assert metadata(carol, [mine, theirs]) == {mine: 0, theirs: TOPIC_AUTHORIZATION_FAILED}
        # Auto-creation needs CREATE on the cluster or the topic.
        fresh = _name("md-auto")
        grant(admin, binding(TOPIC, fresh, "User:carol", Op.DESCRIBE))
        assert metadata(carol, [fresh], auto_create=True) == {fresh: TOPIC_AUTHORIZATION_FAILED}
        assert fresh not in metadata(admin, None)
        grant(admin, binding(TOPIC, fresh, "User:carol", Op.CREATE))
        wait_for(lambda: metadata(carol, [fresh], auto_create=True)[fresh] == 0, "the auto-created topic")
    assert mine in metadata(admin, None) and theirs in metadata(admin, None)  # a super user sees all


def test_prefixed_and_wildcard_patterns(acl_broker, admin):
    prefix = _name("pre")
    inside, outside = new_topic(admin, prefix), new_topic(admin, "elsewhere")
    grant(admin, binding(TOPIC, prefix, "User:alice", Op.WRITE, pattern=PatternType.PREFIXED))
    with sasl_client(acl_broker, "alice") as alice, sasl_client(acl_broker, "bob") as bob:
        assert produce(alice, inside) == 0
        assert produce(alice, outside) == TOPIC_AUTHORIZATION_FAILED
        # the literal wildcard resource and the wildcard principal
        grant(admin, binding(TOPIC, "*", "User:*", Op.READ))
        try:
            assert fetch(bob, outside) == 0 and fetch(alice, inside) == 0
        finally:
            delete_acls(admin, acl_filter(TOPIC, "*", pattern=PatternType.LITERAL))
        assert fetch(bob, outside) == TOPIC_AUTHORIZATION_FAILED


def test_deny_wins_over_allow_and_super_users_win_over_deny(acl_broker, admin):
    topic = new_topic(admin, "deny")
    grant(admin, binding(TOPIC, topic, "User:*", Op.ALL), binding(TOPIC, topic, "User:alice", Op.WRITE, Perm.DENY))
    with sasl_client(acl_broker, "alice") as alice, sasl_client(acl_broker, "bob") as bob:
        assert produce(alice, topic) == TOPIC_AUTHORIZATION_FAILED
        assert produce(bob, topic) == 0
        assert fetch(alice, topic) == 0  # only WRITE is denied
        grant(admin, binding(TOPIC, topic, "User:admin", Op.ALL, Perm.DENY))
        assert produce(admin, topic) == 0  # super.users bypass every ACL
    delete_acls(admin, acl_filter(TOPIC, topic))  # User:* must not leak into the other tests


def test_hosts_match_exactly_or_by_wildcard(acl_broker, admin):
    topic = new_topic(admin, "hosts")
    grant(admin, binding(TOPIC, topic, "User:alice", Op.WRITE, host="10.9.8.7"))
    with sasl_client(acl_broker, "alice") as alice:
        assert produce(alice, topic) == TOPIC_AUTHORIZATION_FAILED
        grant(admin, binding(TOPIC, topic, "User:alice", Op.WRITE, host="127.0.0.1"))
        assert produce(alice, topic) == 0
        grant(admin, binding(TOPIC, topic, "User:alice", Op.WRITE, Perm.DENY, host="*"))
        assert produce(alice, topic) == TOPIC_AUTHORIZATION_FAILED


def test_topic_admin_apis(acl_broker, admin):
    topic, created = new_topic(admin, "adm"), _name("adm-new")
    create = {"topics": [{"name": created, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 10000, "validate_only": False}
    with sasl_client(acl_broker, "bob") as bob:
        assert bob.request(CREATE_TOPICS, 4, create)["topics"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED
        grant(admin, binding(TOPIC, created, "User:bob", Op.CREATE))
        assert bob.request(CREATE_TOPICS, 4, create)["topics"][0]["error_code"] == 0
        partitions = {"topics": [{"name": topic, "count": 2, "assignments": None}], "timeout_ms": 10000, "validate_only": True}
        assert bob.request(CREATE_PARTITIONS, 1, partitions)["results"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED
        grant(admin, binding(TOPIC, topic, "User:bob", Op.ALTER))
        assert bob.request(CREATE_PARTITIONS, 1, partitions)["results"][0]["error_code"] == 0
        delete = {"topic_names": [topic], "timeout_ms": 10000}
        assert bob.request(DELETE_TOPICS, 3, delete)["responses"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED
        grant(admin, binding(TOPIC, topic, "User:bob", Op.DELETE))
        assert bob.request(DELETE_TOPICS, 3, delete)["responses"][0]["error_code"] == 0


def test_config_apis(acl_broker, admin):
    topic = new_topic(admin, "cfg")
    describe = {
        "resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms"]},
            {"resource_type": 4, "resource_name": "3001", "configuration_keys": ["log.retention.ms"]},
        ]
    }
    alter = {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [{"name": "retention.ms", "value": "3600000"}]}], "validate_only": False}
    incremental = {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [{"name": "retention.ms", "config_operation": 0, "value": "7200000"}]}], "validate_only": False}
    with sasl_client(acl_broker, "carol") as carol:
        answer = carol.request(DESCRIBE_CONFIGS, 3, describe)["results"]
        assert [r["error_code"] for r in answer] == [TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED]
        assert carol.request(ALTER_CONFIGS, 1, alter)["responses"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED
        assert carol.request(INCREMENTAL_ALTER_CONFIGS, 0, incremental)["responses"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED
        grant(admin, binding(TOPIC, topic, "User:carol", Op.ALTER_CONFIGS))  # implies DESCRIBE_CONFIGS
        answer = carol.request(DESCRIBE_CONFIGS, 3, describe)["results"]
        assert [r["error_code"] for r in answer] == [0, CLUSTER_AUTHORIZATION_FAILED]
        assert answer[0]["resource_name"] == topic and answer[0]["configs"]
        assert carol.request(ALTER_CONFIGS, 1, alter)["responses"][0]["error_code"] == 0
        assert carol.request(INCREMENTAL_ALTER_CONFIGS, 0, incremental)["responses"][0]["error_code"] == 0
        grant(admin, binding(CLUSTER, "kafka-cluster", "User:carol", Op.DESCRIBE_CONFIGS))
        assert [r["error_code"] for r in carol.request(DESCRIBE_CONFIGS, 3, describe)["results"]] == [0, 0]
    delete_acls(admin, acl_filter(CLUSTER, "kafka-cluster", principal="User:carol"))


# ---------------------------------------------------------------- groups


def _join(c: SocketClient, group: str) -> int:
    body = {
        "group_id": group,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    return c.request(JOIN_GROUP, 5, body)["error_code"]


def test_group_apis(acl_broker, admin):
    group, topic = _name("grp"), new_topic(admin, "grp")
    commit = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1, "committed_metadata": ""}]}],
    }
    with sasl_client(acl_broker, "bob") as bob:
        assert bob.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0})["error_code"] == GROUP_AUTHORIZATION_FAILED
        assert _join(bob, group) == GROUP_AUTHORIZATION_FAILED
        assert bob.request(OFFSET_COMMIT, 7, commit)["topics"][0]["partitions"][0]["error_code"] == GROUP_AUTHORIZATION_FAILED
        assert bob.request(OFFSET_FETCH_FULL, 5, {"group_id": group, "topics": None})["error_code"] == GROUP_AUTHORIZATION_FAILED
        assert bob.request(DESCRIBE_GROUPS, 4, {"groups": [group]})["groups"][0]["error_code"] == GROUP_AUTHORIZATION_FAILED
        grant(admin, binding(GROUP, group, "User:bob", Op.READ))
        wait_for(lambda: bob.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0})["error_code"] == 0, "the coordinator (READ implies DESCRIBE)")
        assert bob.request(OFFSET_COMMIT, 7, commit)["topics"][0]["partitions"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED
        grant(admin, binding(TOPIC, topic, "User:bob", Op.READ))
        assert bob.request(OFFSET_COMMIT, 7, commit)["topics"][0]["partitions"][0]["error_code"] == 0
        fetched = bob.request(OFFSET_FETCH_FULL, 5, {"group_id": group, "topics": None})
        assert fetched["error_code"] == 0 and [t["name"] for t in fetched["topics"]] == [topic]
        assert bob.request(DESCRIBE_GROUPS, 4, {"groups": [group]})["groups"][0]["error_code"] == 0
        assert group in [g["group_id"] for g in bob.request(LIST_GROUPS, 2, {})["groups"]]
        with sasl_client(acl_broker, "carol") as carol:
            assert group not in [g["group_id"] for g in carol.request(LIST_GROUPS, 2, {})["groups"]]
        assert group in [g["group_id"] for g in admin.request(LIST_GROUPS, 2, {})["groups"]]
        assert bob.request(DELETE_GROUPS, 1, {"groups_names": [group]})["results"][0]["error_code"] == GROUP_AUTHORIZATION_FAILED
        grant(admin, binding(GROUP, group, "User:bob", Op.DELETE))
        assert bob.request(DELETE_GROUPS, 1, {"groups_names": [group]})["results"][0]["error_code"] == 0


def test_join_group_with_a_prefixed_group_acl(acl_broker, admin):
    prefix = _name("app")
    grant(admin, binding(GROUP, prefix, "User:alice", Op.READ, pattern=PatternType.PREFIXED))
    with sasl_client(acl_broker, "alice") as alice:
        wait_for(lambda: alice.request(FIND_COORDINATOR, 2, {"key": f"{prefix}-consumers", "key_type": 0})["error_code"] == 0, "the coordinator")
        assert _join(alice, f"{prefix}-consumers") == 79  # MEMBER_ID_REQUIRED (KIP-394): past the check
        assert _join(alice, _name("other")) == GROUP_AUTHORIZATION_FAILED


# ---------------------------------------------------------------- transactions and idempotence


def test_init_producer_id_needs_transactional_id_write_or_idempotent_write(acl_broker, admin):
    txn = _name("txn")
    transactional = {"transactional_id": txn, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    idempotent = {**transactional, "transactional_id": None}
    with sasl_client(acl_broker, "carol") as carol, sasl_client(acl_broker, "bob") as bob:
        assert carol.request(FIND_COORDINATOR, 2, {"key": txn, "key_type": 1})["error_code"] == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert carol.request(INIT_PRODUCER_ID_FULL, 4, transactional)["error_code"] == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert carol.request(INIT_PRODUCER_ID_FULL, 4, idempotent)["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        grant(admin, binding(TXN, txn, "User:carol", Op.WRITE))
        wait_for(lambda: carol.request(FIND_COORDINATOR, 2, {"key": txn, "key_type": 1})["error_code"] == 0, "the transaction coordinator")
        wait_for(lambda: carol.request(INIT_PRODUCER_ID_FULL, 4, transactional)["error_code"] == 0, "a transactional producer id")
        grant(admin, binding(CLUSTER, "kafka-cluster", "User:carol", Op.IDEMPOTENT_WRITE))
        assert carol.request(INIT_PRODUCER_ID_FULL, 4, idempotent)["error_code"] == 0
        # KIP-679: WRITE on some topic is enough for an idempotent producer
        assert bob.request(INIT_PRODUCER_ID_FULL, 4, idempotent)["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        grant(admin, binding(TOPIC, _name("kip679"), "User:bob", Op.WRITE, pattern=PatternType.PREFIXED))
        assert bob.request(INIT_PRODUCER_ID_FULL, 4, idempotent)["error_code"] == 0
    delete_acls(admin, acl_filter(CLUSTER, "kafka-cluster", principal="User:carol"))


def test_transactional_produce_needs_write_on_the_transactional_id(acl_broker, admin):
    topic, txn = new_topic(admin, "txp"), _name("txid")
    grant(admin, binding(TOPIC, topic, "User:alice", Op.WRITE))
    batch = build_batch([(None, b"v", int(time.time() * 1000))], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    body = {**produce_body(topic, 0, batch), "transactional_id": txn}
    with sasl_client(acl_broker, "alice") as alice:
        assert alice.request(PRODUCE, 7, body)["responses"][0]["partition_responses"][0]["error_code"] == TRANSACTIONAL_ID_AUTHORIZATION_FAILED


# ---------------------------------------------------------------- inter-broker APIs


def test_inter_broker_apis_need_cluster_action(acl_broker):
    with sasl_client(acl_broker, "alice") as alice:
        control = {"controller_id": 3001, "controller_epoch": 99, "broker_epoch": -1}
        assert alice.request(LEADER_AND_ISR, 3, {**control, "topic_states": [], "live_leaders": []})["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        assert alice.request(UPDATE_METADATA, 5, {**control, "topic_states": [], "live_brokers": []})["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        assert alice.request(STOP_REPLICA, 1, {**control, "delete_partitions": False, "topics": []})["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        markers = {"markers": [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "topics": [{"name": "x", "partition_indexes": [0]}], "coordinator_epoch": 0}]}
        answer = alice.request(WRITE_TXN_MARKERS, 1, markers)["markers"][0]["topics"][0]["partitions"][0]
        assert answer["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        follower = {**fetch_body("x", [(0, 0)]), "replica_id": 2}
        assert alice.request(FETCH, 11, follower)["responses"][0]["partitions"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED


# ---------------------------------------------------------------- principals and the log


def test_tls_principals_follow_the_mapping_rules(acl_broker, admin, certs):
    topic = new_topic(admin, "tls")
    grant(admin, binding(TOPIC, topic, "User:dave-tls", Op.WRITE))
    with tls_client(acl_broker, certs, "dave") as dave, tls_client(acl_broker, certs, "erin") as erin:
        assert produce(dave, topic) == 0
        assert produce(erin, topic) == TOPIC_AUTHORIZATION_FAILED
    # No rule matches "Frank9": DEFAULT keeps the whole subject (RFC 2253).
    subject = x509.load_pem_x509_certificate(Path(certs.client_certificate("Frank9").certificate_location).read_bytes()).subject.rfc4514_string()
    assert subject.startswith("CN=Frank9,")
    grant(admin, binding(TOPIC, topic, f"User:{subject}", Op.WRITE))
    with tls_client(acl_broker, certs, "Frank9") as frank:
        assert produce(frank, topic) == 0


def test_denials_are_logged_at_info_as_kafka_words_them(acl_broker, admin):
    topic = new_topic(admin, "logged")
    with sasl_client(acl_broker, "bob") as bob:
        assert produce(bob, topic) == TOPIC_AUTHORIZATION_FAILED
    line = f"Principal = User:bob is Denied Operation = Write from host = 127.0.0.1 on resource = Topic:LITERAL:{topic} for request = Produce"
    wait_for(lambda: line in acl_broker.output(), "the denial in the broker's log")
    assert "INFO" in next(entry for entry in acl_broker.output().splitlines() if line in entry)


# ---------------------------------------------------------------- real clients


def _client_props(acl_broker, user: str) -> dict:
    from helpers.acls import PLAIN_USERS

    from kclient.testing import client_properties

    return client_properties("SASL_PLAINTEXT", mechanism="PLAIN", username=user, password=PLAIN_USERS[user])


def test_kclient_producer_sees_topic_authorization_failed(acl_broker, admin):
    from kclient import FailedToSendMessageError, Producer, ProducerData
    from kclient.errors import TopicAuthorizationFailedError

    topic = new_topic(admin, "kc")
    config = {"metadata.broker.list": acl_broker.bootstrap_for("SASL_PLAINTEXT"), "producer.type": "sync", **_client_props(acl_broker, "alice")}
    producer = Producer(config)
    try:
        with pytest.raises(FailedToSendMessageError) as raised:
            producer.send(ProducerData(topic, None, [b"denied"]))
        assert isinstance(raised.value.__cause__, TopicAuthorizationFailedError)
    finally:
        producer.close()
    grant(admin, binding(TOPIC, topic, "User:alice", Op.WRITE))
    producer = Producer(config)
    try:
        producer.send(ProducerData(topic, None, [b"allowed"]))
    finally:
        producer.close()


def test_confluent_kafka_producer_and_group_consumer(acl_broker, admin):
    ck = pytest.importorskip("confluent_kafka")
    topic, group = new_topic(admin, "ck"), _name("ck-group")
    bootstrap = {"bootstrap.servers": acl_broker.bootstrap_for("SASL_PLAINTEXT")}
    errors: list = []
    producer = ck.Producer({**bootstrap, **_client_props(acl_broker, "alice"), "message.timeout.ms": 10000})
    producer.produce(topic, b"denied", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(15)
    assert [e.code() for e in errors] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    grant(admin, binding(TOPIC, topic, "User:alice", Op.WRITE), binding(TOPIC, topic, "User:bob", Op.READ), binding(GROUP, group, "User:bob", Op.READ))
    errors.clear()
    producer = ck.Producer({**bootstrap, **_client_props(acl_broker, "alice"), "message.timeout.ms": 10000})
    producer.produce(topic, b"allowed", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(15)
    assert errors == [None]
    consumer = ck.Consumer({**bootstrap, **_client_props(acl_broker, "bob"), "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error():
                raise AssertionError(message.error())
        assert message is not None and message.value() == b"allowed"
        consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()


def test_transaction_apis_check_the_transactional_id_then_topics_and_groups(acl_broker, admin):
    from kclient.errors import OPERATION_NOT_ATTEMPTED
    from kclient.protocol.messages import ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, DESCRIBE_TRANSACTIONS, END_TXN, LIST_TRANSACTIONS, TXN_OFFSET_COMMIT

    txn, group = _name("tx"), _name("txg")
    writable, other = new_topic(admin, "txw"), new_topic(admin, "txo")
    ids = {"producer_id": 1, "producer_epoch": 0}
    add = {
        "v3_and_below_transactional_id": txn,
        "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": writable, "partitions": [0]}, {"name": other, "partitions": [0]}],
    }
    commit = {
        "transactional_id": txn,
        "group_id": group,
        **ids,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": writable, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1, "committed_metadata": ""}]}],
    }

    def added(c) -> dict[str, int]:
        return {t["name"]: t["results_by_partition"][0]["partition_error_code"] for t in c.request(ADD_PARTITIONS_TO_TXN, 3, add)["results_by_topic_v3_and_below"]}

    def committed(c) -> int:
        return c.request(TXN_OFFSET_COMMIT, 3, commit)["topics"][0]["partitions"][0]["error_code"]

    with sasl_client(acl_broker, "alice") as alice:
        assert added(alice) == {writable: TRANSACTIONAL_ID_AUTHORIZATION_FAILED, other: TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        assert alice.request(ADD_OFFSETS_TO_TXN, 3, {"transactional_id": txn, **ids, "group_id": group})["error_code"] == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert alice.request(END_TXN, 3, {"transactional_id": txn, **ids, "committed": True})["error_code"] == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert committed(alice) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        described = alice.request(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]})["transaction_states"]
        assert [(s["transactional_id"], s["error_code"]) for s in described] == [(txn, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
        grant(admin, binding(TXN, txn, "User:alice", Op.WRITE), binding(TOPIC, writable, "User:alice", Op.WRITE))
        # one denied topic: it fails, the others are not attempted
        assert added(alice) == {writable: OPERATION_NOT_ATTEMPTED, other: TOPIC_AUTHORIZATION_FAILED}
        assert alice.request(ADD_OFFSETS_TO_TXN, 3, {"transactional_id": txn, **ids, "group_id": group})["error_code"] == GROUP_AUTHORIZATION_FAILED
        assert committed(alice) == GROUP_AUTHORIZATION_FAILED
        assert alice.request(END_TXN, 3, {"transactional_id": txn, **ids, "committed": True})["error_code"] != TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        described = alice.request(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]})["transaction_states"]
        assert described[0]["error_code"] != TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # WRITE implies DESCRIBE
        listed = alice.request(LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})
        assert listed["error_code"] == 0
        # ListTransactions lists only the ids the principal may DESCRIBE
        carols = _name("carol-tx")
        grant(admin, binding(TXN, carols, "User:carol", Op.WRITE))
        init = {"transactional_id": carols, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
        list_all = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}

        def listed_ids(c) -> set[str]:
            return {s["transactional_id"] for s in c.request(LIST_TRANSACTIONS, 1, list_all)["transaction_states"]}

        with sasl_client(acl_broker, "carol") as carol:
            wait_for(lambda: carol.request(FIND_COORDINATOR, 2, {"key": carols, "key_type": 1})["error_code"] == 0, "the transaction coordinator")
            wait_for(lambda: carol.request(INIT_PRODUCER_ID_FULL, 4, init)["error_code"] == 0, "carol's producer id")
            assert carols in listed_ids(carol) and carols in listed_ids(admin)
            assert carols not in listed_ids(alice)


def test_describe_groups_and_metadata_report_authorized_operations(acl_broker, admin):
    group, topic = _name("ops"), new_topic(admin, "ops")
    grant(admin, binding(GROUP, group, "User:alice", Op.READ), binding(TOPIC, topic, "User:alice", Op.WRITE))
    with sasl_client(acl_broker, "alice") as alice:
        wait_for(lambda: alice.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0})["error_code"] == 0, "the coordinator")
        request = {"groups": [group], "include_authorized_operations": True}
        wait_for(lambda: alice.request(DESCRIBE_GROUPS, 4, request)["groups"][0]["error_code"] == 0, "the group described")
        described = alice.request(DESCRIBE_GROUPS, 4, request)["groups"][0]
        assert described["authorized_operations"] == (1 << Op.READ) | (1 << Op.DESCRIBE)
        answer = alice.request(METADATA, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": True})
        assert answer["topics"][0]["topic_authorized_operations"] == (1 << Op.WRITE) | (1 << Op.DESCRIBE)


def test_offset_delete_and_the_consumer_group_protocol_apis(acl_broker, admin):
    from kclient.protocol.messages import CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT, OFFSET_DELETE

    group, topic = _name("cg"), new_topic(admin, "cg")
    heartbeat = {
        "group_id": group,
        "member_id": uuid.uuid4().hex,
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": [topic],
        "server_assignor": None,
        "topic_partitions": [],
    }
    delete = {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]}
    with sasl_client(acl_broker, "bob") as bob:
        assert bob.request(CONSUMER_GROUP_HEARTBEAT, 0, heartbeat)["error_code"] == GROUP_AUTHORIZATION_FAILED
        assert bob.request(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group]})["groups"][0]["error_code"] == GROUP_AUTHORIZATION_FAILED
        assert bob.request(OFFSET_DELETE, 0, delete)["error_code"] == GROUP_AUTHORIZATION_FAILED
        grant(admin, binding(GROUP, group, "User:bob", Op.READ), binding(GROUP, group, "User:bob", Op.DELETE))
        assert bob.request(CONSUMER_GROUP_HEARTBEAT, 0, heartbeat)["error_code"] == TOPIC_AUTHORIZATION_FAILED  # the subscribed topic
        assert bob.request(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group]})["groups"][0]["error_code"] != GROUP_AUTHORIZATION_FAILED
        answer = bob.request(OFFSET_DELETE, 0, delete)
        assert answer["error_code"] != GROUP_AUTHORIZATION_FAILED
        assert [p["error_code"] for t in answer["topics"] for p in t["partitions"] if t["name"] == topic] == [TOPIC_AUTHORIZATION_FAILED]
        grant(admin, binding(TOPIC, topic, "User:bob", Op.READ))
        assert bob.request(CONSUMER_GROUP_HEARTBEAT, 0, heartbeat)["error_code"] not in (GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED)


def _end_offset(c: SocketClient, topic: str) -> int:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    return c.request(LIST_OFFSETS, 4, body)["topics"][0]["partitions"][0]["offset"]


def _send_acks0(c: SocketClient, *topics: str) -> None:
    """Send a Produce with acks=0 (no response expected) to partition 0 of ``topics``."""
    batch = build_batch([(None, b"acks0", int(time.time() * 1000))])
    body = {
        "transactional_id": None,
        "acks": 0,
        "timeout_ms": 5000,
        "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": batch}]} for t in topics],
    }
    _, data = c.conn.send(PRODUCE, 7, body, expect_response=False)
    c.sock.sendall(data)


def test_a_refused_produce_with_acks_0_closes_the_connection(acl_broker, admin):
    # Kafka's KafkaApis closes the connection when a Produce with acks=0
    # fails (it has no response to carry the error): the client learns of
    # the refusal by the disconnect. Before the fix the denied records were
    # dropped silently and the connection stayed open.
    allowed, denied = new_topic(admin, "acks0-ok"), new_topic(admin, "acks0-no")
    grant(admin, binding(TOPIC, allowed, "User:alice", Op.ALL))
    with sasl_client(acl_broker, "alice") as alice:
        _send_acks0(alice, allowed)  # allowed: no answer, the connection stays open
        assert metadata(alice, [allowed]) == {allowed: 0}
        wait_for(lambda: _end_offset(alice, allowed) == 1, "the acks=0 record appended")
        _send_acks0(alice, denied)
        assert alice.closed_by_broker()
    with sasl_client(acl_broker, "alice") as alice:
        _send_acks0(alice, allowed, denied)  # mixed: the allowed topic's record is appended, then the close
        assert alice.closed_by_broker()
    with sasl_client(acl_broker, "alice") as alice:
        assert _end_offset(alice, allowed) == 2
        # any other failure too: a partition the topic does not have
        batch = build_batch([(None, b"acks0", int(time.time() * 1000))])
        body = {"transactional_id": None, "acks": 0, "timeout_ms": 5000, "topic_data": [{"name": allowed, "partition_data": [{"index": 7, "records": batch}]}]}
        alice.sock.sendall(alice.conn.send(PRODUCE, 7, body, expect_response=False)[1])
        assert alice.closed_by_broker()


@pytest.fixture(scope="module")
def purge_zk(zookeeper) -> str:
    return zookeeper.connect_string(f"acl-purge-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def purge_broker(purge_zk, certs):
    """A broker that deletes change notifications older than 1.5 s (Kafka's
    fixed 15 minutes, made short by kclient's own key)."""
    props = acl_broker_properties(certs, mapping_rules=MAPPING_RULES)
    props.update({"zookeeper.connect": purge_zk, "broker.id": 3002, "num.partitions": 1, "change.notification.expiration.ms": 1500})
    with BrokerProcess(properties=props) as proc:
        yield proc


def test_old_change_notifications_are_purged(purge_broker, purge_zk):
    """Kafka's ZkNodeChangeNotificationListener deletes the notifications
    older than its expiry each time it handles its path's notifications:
    the ACL change nodes (/kafka-acl-changes, /kafka-acl-extended-changes)
    and /config/changes do not grow without bound, and the ACLs and quotas
    they announced stay. Before, none was ever deleted."""
    client = ZkClient(purge_zk)
    client.start()
    try:
        with sasl_client(purge_broker, "admin") as root:
            prefix = _name("purge")
            grant(root, binding(TOPIC, f"{prefix}-first", "User:alice", Op.READ), binding(TOPIC, prefix, "User:alice", Op.READ, pattern=PatternType.PREFIXED))
            alter_user_config(client, "purge-user", {"producer_byte_rate": "1000"})
            paths = (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH, CONFIG_CHANGES_PATH)
            first = {path: set(client.get_children(path)) for path in paths}
            assert all(first.values()), first
            count = iter(range(1000))

            def purged() -> bool:
                # Each round announces one more change on every path, so that the
                # broker handles each path's notifications again.
                n = next(count)
                grant(root, binding(TOPIC, f"{prefix}-{n}", "User:alice", Op.READ), binding(TOPIC, f"{prefix}-x{n}", "User:bob", Op.READ, pattern=PatternType.PREFIXED))
                alter_user_config(client, "purge-user", {"producer_byte_rate": str(2000 + n)})
                return not any(first[path] & set(client.get_children(path)) for path in paths)

            wait_for(purged, "the first change notifications to be purged", interval=0.5)
            listed = describe_acls(root, acl_filter(TOPIC, f"{prefix}-first", pattern=PatternType.LITERAL))["resources"]
            assert [r["resource_name"] for r in listed] == [f"{prefix}-first"]  # what they announced stays
    finally:
        client.close()
