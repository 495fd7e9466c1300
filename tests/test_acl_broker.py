"""ACLs on the bundled broker (issue 30; KIP-11, KIP-290), one broker with
kclient's authorizer selected by Kafka's class name: the ACL APIs and where
they store ACLs (Kafka's ZooKeeper layout), and each API allowed and denied
with Kafka's error codes, over raw connections logged in as SASL PLAIN
users (`helpers.acls`).

ACL changes on one broker are applied by it at once; the 3-broker tests
(tests/test_acl_cluster.py) check that the others follow.
"""

from __future__ import annotations

import json
import uuid

import pytest
from helpers.acls import (
    acl_broker_properties,
    acl_filter,
    binding,
    create_acls,
    delete_acls,
    describe_acls,
    sasl_client,
)

from kclient.acl import AclOperation as Op
from kclient.acl import AclPermissionType as Perm
from kclient.acl import PatternType, ResourceType
from kclient.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST,
    TOPIC_AUTHORIZATION_FAILED,
)
from kclient.testing import BrokerProcess
from kclient.zk.client import ZkClient

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


@pytest.fixture(scope="module")
def acl_zk(zookeeper) -> str:
    return zookeeper.connect_string(f"acl-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def broker(acl_zk):
    props = acl_broker_properties()
    props.update({"zookeeper.connect": acl_zk, "broker.id": 3001, "num.partitions": 1, "auto.create.topics.enable": "true"})
    with BrokerProcess(properties=props) as proc:
        yield proc


@pytest.fixture(scope="module")
def zk(acl_zk):
    client = ZkClient(acl_zk)
    client.start()
    yield client
    client.close()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_acl_apis_create_describe_delete_and_store_in_kafkas_layout(broker, zk):
    topic = _name("orders")
    with sasl_client(broker, "admin") as admin:
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
        changes = zk.get_children("/kafka-acl-changes")
        assert any(zk.get(f"/kafka-acl-changes/{c}") == f"TOPIC:{topic}".encode() for c in changes)
        extended = [json.loads(zk.get(f"/kafka-acl-extended-changes/{c}")) for c in zk.get_children("/kafka-acl-extended-changes")]
        assert {"version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"} in extended
        # MATCH: every pattern that applies to a group name
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


def test_acl_apis_need_cluster_describe_and_alter(broker):
    with sasl_client(broker, "carol") as carol:
        assert describe_acls(carol)["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        assert create_acls(carol, binding(TOPIC, "x", "User:carol", Op.ALL))[0]["error_code"] == CLUSTER_AUTHORIZATION_FAILED
        assert delete_acls(carol, acl_filter())[0]["error_code"] == CLUSTER_AUTHORIZATION_FAILED


def test_invalid_bindings_are_refused_one_by_one(broker):
    with sasl_client(broker, "admin") as admin:
        results = create_acls(
            admin,
            binding(TOPIC, _name("ok"), "User:alice", Op.READ),
            binding(ResourceType.ANY, "x", "User:alice", Op.READ),
            binding(TOPIC, "x", "User:alice", Op.ANY),
            binding(CLUSTER, "not-the-cluster", "User:alice", Op.ALTER),
            binding(TOPIC, "", "User:alice", Op.READ),
            binding(TOPIC, "x", "User:alice", Op.READ, Perm.ANY),
            binding(TOPIC, "x", "User:alice", Op.READ, pattern=PatternType.MATCH),
        )
        assert [r["error_code"] for r in results] == [0] + [INVALID_REQUEST] * 6
        # v0 knows literal patterns only
        assert create_acls(admin, binding(TOPIC, "p-", "User:alice", Op.READ, pattern=PatternType.PREFIXED), version=0)[0]["error_code"] == 0
        assert describe_acls(admin, acl_filter(TOPIC, "p-", pattern=PatternType.LITERAL))["resources"][0]["pattern_type"] == 3
        delete_acls(admin, acl_filter(TOPIC, "p-"))


def test_acls_written_raw_into_zookeeper_are_honoured(broker, zk):
    """A node written as Kafka's tools write it (the JSON, then a change
    notification) is applied by the broker."""
    from helpers.raw import produce_body
    from helpers.wait import wait_for

    from kclient.protocol.messages import PRODUCE
    from kclient.protocol.records.v2 import build_batch

    topic = _name("raw")
    with sasl_client(broker, "admin") as admin, sasl_client(broker, "alice") as alice:
        admin.request(PRODUCE_TOPIC_CREATE[0], PRODUCE_TOPIC_CREATE[1], {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 10000, "validate_only": False})
        records = build_batch([(None, b"v", 0)], base_timestamp=0) if False else None
        acls = {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]}
        zk.write_persistent(f"/kafka-acl/Topic/{topic}", json.dumps(acls).encode())
        zk.create_sequential("/kafka-acl-changes/acl_changes_", f"Topic:{topic}".encode())
        wait_for(lambda: describe_acls(admin, acl_filter(TOPIC, topic))["resources"] != [], "the broker applying the raw ACL")
        del records, produce_body, PRODUCE, alice


from kclient.protocol.messages import CREATE_TOPICS  # noqa: E402

PRODUCE_TOPIC_CREATE = (CREATE_TOPICS, 4)
