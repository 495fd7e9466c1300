"""ACLs across clients: bindings created with confluent-kafka's and
kafka-python's admin clients are listed by kclient and enforced by the
broker; bindings created with kclient are listed (and deleted) by them.
Each test runs against the bundled broker and Apache Kafka 4.x, both with
an ACL authorizer (`helpers.acl_clients`); one broker of each kind per
worker (`acl_bundled`, `acl_kafka` in conftest.py).
"""

from __future__ import annotations

import uuid
import warnings

import confluent_kafka
import pytest
from confluent_kafka import admin as ck
from helpers.acl_clients import as_tuples, sasl_client, settled
from helpers.wait import retry

from kclient.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kclient.client.admin import AdminClient, NewTopic

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.admin as kp

#: Seconds a peer call may take.
TIMEOUT = 30


@pytest.fixture(params=["acl_bundled", pytest.param("acl_kafka", marks=pytest.mark.apache_kafka)])
def broker(request):
    return request.getfixturevalue(request.param)


@pytest.fixture
def admin(broker):
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as client:
        yield client


@pytest.fixture
def prefix() -> str:
    return f"interop-{uuid.uuid4().hex[:8]}-"


# ------------------------------------------------------------------ confluent-kafka


def ck_rows(bindings) -> set:
    return {
        (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name, b.permission_type.name) for b in bindings
    }


def ck_filter(name=None) -> ck.AclBindingFilter:
    return ck.AclBindingFilter(ck.ResourceType.ANY, name, ck.ResourcePatternType.ANY, None, None, ck.AclOperation.ANY, ck.AclPermissionType.ANY)


def test_confluent_kafka_creates_what_kclient_lists(admin, broker, prefix):
    client = ck.AdminClient({"bootstrap.servers": broker.bootstrap})
    created = [
        ck.AclBinding(ck.ResourceType.TOPIC, prefix + "t", ck.ResourcePatternType.LITERAL, "User:alice", "*", ck.AclOperation.READ, ck.AclPermissionType.ALLOW),
        ck.AclBinding(ck.ResourceType.GROUP, prefix, ck.ResourcePatternType.PREFIXED, "User:alice", "*", ck.AclOperation.READ, ck.AclPermissionType.ALLOW),
        ck.AclBinding(ck.ResourceType.TOPIC, prefix + "t", ck.ResourcePatternType.LITERAL, "User:bob", "10.1.1.1", ck.AclOperation.WRITE, ck.AclPermissionType.DENY),
    ]
    for future in client.create_acls(created).values():
        assert future.result(timeout=TIMEOUT) is None
    settled(broker, prefix, ck_rows(created))
    # kclient deletes one; confluent-kafka sees the rest.
    admin.delete_acls([AclBindingFilter(ResourcePatternFilter(ResourceType.GROUP, prefix, PatternType.PREFIXED))])
    settled(broker, prefix, ck_rows([created[0], created[2]]))
    described = client.describe_acls(ck_filter()).result(timeout=TIMEOUT)
    assert {row for row in ck_rows(described) if row[1].startswith(prefix)} == ck_rows([created[0], created[2]])
    admin.delete_acls([AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, prefix + "t", PatternType.LITERAL))])


def test_kclient_creates_what_confluent_kafka_lists_and_deletes(admin, broker, prefix):
    bindings = [
        AclBinding(ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED), AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)),
        AclBinding(ResourcePattern(ResourceType.TRANSACTIONAL_ID, prefix + "tx", PatternType.LITERAL), AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)),
    ]
    assert admin.create_acls(bindings) == dict.fromkeys(bindings)
    settled(broker, prefix, as_tuples(bindings))
    client = ck.AdminClient({"bootstrap.servers": broker.bootstrap})
    described = client.describe_acls(ck_filter()).result(timeout=TIMEOUT)
    assert {row for row in ck_rows(described) if row[1].startswith(prefix)} == as_tuples(bindings)
    deleted = []
    for name in (prefix, prefix + "tx"):
        for future in client.delete_acls([ck_filter(name)]).values():
            deleted += future.result(timeout=TIMEOUT)
    assert ck_rows(deleted) == as_tuples(bindings)
    settled(broker, prefix, set())


# ------------------------------------------------------------------ kafka-python


def kp_rows(acls) -> set:
    return {
        (a.resource_pattern.resource_type.name, a.resource_pattern.resource_name, a.resource_pattern.pattern_type.name, a.principal, a.host, a.operation.name, a.permission_type.name)
        for a in acls
    }


def kp_filter(name=None) -> kp.ACLFilter:
    pattern = kp.ResourcePatternFilter(kp.ResourceType.ANY, name, kp.ACLResourcePatternType.ANY)
    return kp.ACLFilter(None, None, kp.ACLOperation.ANY, kp.ACLPermissionType.ANY, pattern)


@pytest.fixture
def kafka_python(broker):
    client = kp.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    yield client
    client.close()


def test_kafka_python_creates_what_kclient_lists(admin, broker, kafka_python, prefix):
    created = [
        kp.ACL("User:bob", "*", kp.ACLOperation.DESCRIBE, kp.ACLPermissionType.ALLOW, kp.ResourcePattern(kp.ResourceType.TOPIC, prefix + "t")),
        kp.ACL("User:bob", "*", kp.ACLOperation.ALL, kp.ACLPermissionType.DENY, kp.ResourcePattern(kp.ResourceType.GROUP, prefix, kp.ACLResourcePatternType.PREFIXED)),
    ]
    result = kafka_python.create_acls(created)
    assert result["failed"] == [] and len(result["succeeded"]) == 2
    settled(broker, prefix, kp_rows(created))
    admin.delete_acls([AclBindingFilter(entry_filter=AccessControlEntryFilter(principal="User:bob"))])
    settled(broker, prefix, set())
    acls, _ = kafka_python.describe_acls(kp_filter())
    assert {row for row in kp_rows(acls) if row[1].startswith(prefix)} == set()


def test_kclient_creates_what_kafka_python_lists_and_deletes(admin, broker, kafka_python, prefix):
    bindings = [
        AclBinding(ResourcePattern(ResourceType.GROUP, prefix + "g", PatternType.LITERAL), AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)),
        AclBinding(ResourcePattern(ResourceType.TOPIC, prefix + "t", PatternType.LITERAL), AccessControlEntry("User:alice", "127.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)),
    ]
    admin.create_acls(bindings)
    settled(broker, prefix, as_tuples(bindings))
    acls, _ = kafka_python.describe_acls(kp_filter())
    assert {row for row in kp_rows(acls) if row[1].startswith(prefix)} == as_tuples(bindings)
    results = kafka_python.delete_acls([kp_filter(prefix + "g"), kp_filter(prefix + "t")])
    deleted = [acl for _, matches, _ in results for acl in matches]
    assert kp_rows(deleted) == as_tuples(bindings)
    settled(broker, prefix, set())


# ------------------------------------------------------------------ enforcement


def produce(broker, user: str, topic: str) -> str | None:
    """Produce one record as ``user`` with confluent-kafka; None when it was
    delivered, else the delivery error's Kafka name."""
    producer = confluent_kafka.Producer({**sasl_client(broker, user), "message.timeout.ms": TIMEOUT * 1000, "enable.idempotence": False})
    outcome: list = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(TIMEOUT)
    assert outcome, "no delivery report"
    return None if outcome[0] is None else outcome[0].name()


@pytest.mark.parametrize("peer", ["confluent-kafka", "kafka-python"])
def test_acls_created_by_a_peer_are_enforced(admin, broker, kafka_python, prefix, peer):
    topic = prefix + "t"
    admin.create_topics([NewTopic(topic, 1, 1)])
    assert produce(broker, "alice", topic) == "TOPIC_AUTHORIZATION_FAILED"
    if peer == "confluent-kafka":
        ops = (ck.AclOperation.WRITE, ck.AclOperation.DESCRIBE)
        created = [ck.AclBinding(ck.ResourceType.TOPIC, topic, ck.ResourcePatternType.LITERAL, "User:alice", "*", op, ck.AclPermissionType.ALLOW) for op in ops]
        client = ck.AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in client.create_acls(created).values():
            future.result(timeout=TIMEOUT)
    else:
        ops = (kp.ACLOperation.WRITE, kp.ACLOperation.DESCRIBE)
        created = [kp.ACL("User:alice", "*", op, kp.ACLPermissionType.ALLOW, kp.ResourcePattern(kp.ResourceType.TOPIC, topic)) for op in ops]
        assert kafka_python.create_acls(created)["failed"] == []
    # An ACL change reaches the broker's authorizer moments after the answer.
    retry(lambda: produce(broker, "alice", topic), lambda error: error is None, "alice allowed to write", timeout=TIMEOUT)
    assert produce(broker, "bob", topic) == "TOPIC_AUTHORIZATION_FAILED"
    admin.delete_acls([AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL))])
    admin.delete_topics([topic])
