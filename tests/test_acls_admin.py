"""The admin client's ACL calls (CreateAcls, DescribeAcls, DeleteAcls;
KIP-11, KIP-290) against the bundled broker and Apache Kafka 4.x, both
with an ACL authorizer (`helpers.acl_clients`): the same calls give the same
answers on both, errors typed per binding and per filter.

One broker of each kind per worker (`acl_bundled`, `acl_kafka` in
conftest.py, shared with the other ACL client tests); every test names its own resources
(a unique prefix), so the tests do not see each other's ACLs.
"""

from __future__ import annotations

import uuid

import pytest
from helpers.acl_clients import as_tuples, sasl_client, settled
from helpers.wait import wait_for

from kclient.acl import (
    CLUSTER_NAME,
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
from kclient.client.admin import AclDeletion, AdminClient
from kclient.errors import ClusterAuthorizationFailedError, InvalidRequestError, SecurityDisabledError

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED, ANY, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH


@pytest.fixture(params=["acl_bundled", pytest.param("acl_kafka", marks=pytest.mark.apache_kafka)])
def broker(request):
    """Each test runs on the bundled broker and on Apache Kafka."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def admin(broker):
    """An admin client on the PLAINTEXT listener (a super user)."""
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as client:
        yield client


@pytest.fixture
def prefix() -> str:
    return f"acl-{uuid.uuid4().hex[:8]}-"


def binding(resource_type, name, principal, operation, permission=ALLOW, pattern_type=LITERAL, host="*") -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type), AccessControlEntry(principal, host, operation, permission))


def sample(prefix: str) -> list[AclBinding]:
    t = ResourceType
    return [
        binding(t.TOPIC, prefix + "orders", "User:alice", AclOperation.READ),
        binding(t.TOPIC, prefix + "orders", "User:alice", AclOperation.WRITE),
        binding(t.TOPIC, prefix + "orders", "User:bob", AclOperation.ALL, DENY, host="10.0.0.1"),
        binding(t.TOPIC, prefix + "ord", "User:bob", AclOperation.DESCRIBE, pattern_type=PREFIXED),
        binding(t.GROUP, prefix + "readers", "User:alice", AclOperation.READ),
        binding(t.TRANSACTIONAL_ID, prefix + "tx", "User:alice", AclOperation.WRITE, pattern_type=PREFIXED),
    ]


def test_created_bindings_are_described_and_deleted(admin, broker, prefix):
    bindings = sample(prefix)
    assert admin.create_acls(bindings) == dict.fromkeys(bindings)
    settled(broker, prefix, as_tuples(bindings))
    # Creating one again is no error and keeps one copy.
    assert admin.create_acls(bindings[:1]) == {bindings[0]: None}
    settled(broker, prefix, as_tuples(bindings))

    topic_filter = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, prefix + "orders", LITERAL), AccessControlEntryFilter(principal="User:alice"))
    result = admin.delete_acls([topic_filter])
    assert set(result) == {topic_filter}
    assert result[topic_filter].error is None and result[topic_filter].failed == ()
    assert as_tuples(result[topic_filter].deleted) == as_tuples(bindings[:2])
    settled(broker, prefix, as_tuples(bindings[2:]))

    everything = [AclBindingFilter(ResourcePatternFilter(t, None, ANY)) for t in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)]
    deleted = admin.delete_acls(everything)
    assert {b for d in deleted.values() for b in as_tuples(d.deleted)} >= as_tuples(bindings[2:])
    settled(broker, prefix, set())


def test_describe_filters_match_as_kafka_defines(admin, broker, prefix):
    bindings = sample(prefix)
    admin.create_acls(bindings)
    settled(broker, prefix, as_tuples(bindings))
    orders, prefixed = bindings[:3], bindings[3:4]

    def described(resource_type=ResourceType.ANY, name=None, pattern_type=ANY, **entry):
        found = admin.describe_acls(AclBindingFilter(ResourcePatternFilter(resource_type, name, pattern_type), AccessControlEntryFilter(**entry)))
        return {row for row in as_tuples(found) if row[1].startswith(prefix)}

    assert described(ResourceType.TOPIC, prefix + "orders", LITERAL) == as_tuples(orders)
    assert described(ResourceType.TOPIC, prefix + "ord", LITERAL) == set()
    assert described(ResourceType.TOPIC, prefix + "ord", PREFIXED) == as_tuples(prefixed)
    # MATCH: every pattern that applies to the topic named.
    assert described(ResourceType.TOPIC, prefix + "orders", MATCH) == as_tuples(orders + prefixed)
    assert described(ResourceType.TOPIC, prefix + "other", MATCH) == set()
    assert described(ResourceType.GROUP) == as_tuples(bindings[4:5])
    assert described(principal="User:bob") == as_tuples(bindings[2:4])
    assert described(host="10.0.0.1", permission_type=DENY) == as_tuples(bindings[2:3])
    assert described(operation=AclOperation.WRITE) == as_tuples([bindings[1], bindings[5]])
    admin.delete_acls([AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, ANY), AccessControlEntryFilter(principal=p)) for p in ("User:alice", "User:bob")])


def test_wildcard_names_and_the_cluster(admin, broker, prefix):
    principal = f"User:{prefix}carol"
    bindings = [
        binding(ResourceType.TOPIC, "*", principal, AclOperation.DESCRIBE),
        binding(ResourceType.CLUSTER, CLUSTER_NAME, principal, AclOperation.IDEMPOTENT_WRITE),
    ]
    assert admin.create_acls(bindings) == dict.fromkeys(bindings)
    mine = AccessControlEntryFilter(principal=principal)
    wait_for(lambda: len(admin.describe_acls(AclBindingFilter(entry_filter=mine))) == 2, "both bindings described")
    # A literal "*" applies to every topic: MATCH finds it for any name.
    found = admin.describe_acls(AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "anything", MATCH), mine))
    assert as_tuples(found) == as_tuples(bindings[:1])
    assert as_tuples(admin.describe_acls(AclBindingFilter(ResourcePatternFilter(ResourceType.CLUSTER), mine))) == as_tuples(bindings[1:])
    deleted = admin.delete_acls([AclBindingFilter(entry_filter=mine)])
    assert as_tuples(next(iter(deleted.values())).deleted) == as_tuples(bindings)


def test_errors_are_typed_per_binding(admin, broker, prefix):
    good = binding(ResourceType.TOPIC, prefix + "good", "User:alice", AclOperation.READ)
    bad = [
        binding(ResourceType.TOPIC, prefix + "t", "alice", AclOperation.READ),  # no principal type
        binding(ResourceType.TOPIC, "", "User:alice", AclOperation.READ),  # empty name
        binding(ResourceType.CLUSTER, "other", "User:alice", AclOperation.ALTER),  # not the cluster's name
        binding(ResourceType.TOPIC, prefix + "t", "User:alice", AclOperation.READ, host=""),  # empty host
    ]
    results = admin.create_acls([good, *bad])
    assert results[good] is None
    assert {b: type(results[b]) for b in bad} == dict.fromkeys(bad, InvalidRequestError)
    settled(broker, prefix, as_tuples([good]))
    admin.delete_acls([AclBindingFilter(good.pattern.to_filter())])


def test_a_binding_with_an_any_field_is_refused_before_sending(admin):
    with pytest.raises(ValueError, match="operation"):
        admin.create_acls([binding(ResourceType.TOPIC, "t", "User:alice", AclOperation.ANY)])
    with pytest.raises(ValueError, match="pattern type"):
        admin.create_acls([binding(ResourceType.TOPIC, "t", "User:alice", AclOperation.READ, pattern_type=MATCH)])


def test_a_principal_without_cluster_rights_gets_cluster_authorization_failed(broker, prefix):
    b = binding(ResourceType.TOPIC, prefix + "t", "User:alice", AclOperation.READ)
    with AdminClient(sasl_client(broker, "alice")) as alice:
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_acls(AclBindingFilter())
        assert isinstance(alice.create_acls([b])[b], ClusterAuthorizationFailedError)
        deletion = alice.delete_acls([AclBindingFilter()])[AclBindingFilter()]
        assert isinstance(deletion, AclDeletion) and deletion.deleted == ()
        assert isinstance(deletion.error, ClusterAuthorizationFailedError)
    # A super user on the SASL listener may.
    with AdminClient(sasl_client(broker, "admin")) as admin:
        assert admin.create_acls([b]) == {b: None}
        settled(broker, prefix, as_tuples([b]))
        admin.delete_acls([AclBindingFilter(b.pattern.to_filter())])


def test_a_broker_without_an_authorizer_answers_security_disabled(zk_broker):
    b = binding(ResourceType.TOPIC, "t", "User:alice", AclOperation.READ)
    with AdminClient({"bootstrap.servers": zk_broker.bootstrap}) as admin:
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(AclBindingFilter())
        assert isinstance(admin.create_acls([b])[b], SecurityDisabledError)
        assert isinstance(admin.delete_acls([AclBindingFilter()])[AclBindingFilter()].error, SecurityDisabledError)
