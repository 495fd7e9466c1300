"""The public ACL model (`kclient.acl`, KIP-11 / KIP-290): Kafka's wire codes
and names, and the filters' matching rules as Kafka's
``ResourcePatternFilter`` / ``AccessControlEntryFilter`` define them."""

from __future__ import annotations

import pytest

import kclient
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
    camel_name,
    parse_name,
)

pytestmark = pytest.mark.unit


def test_wire_codes_are_kafkas():
    assert {m.name: m.value for m in ResourceType} == {
        "UNKNOWN": 0,
        "ANY": 1,
        "TOPIC": 2,
        "GROUP": 3,
        "CLUSTER": 4,
        "TRANSACTIONAL_ID": 5,
        "DELEGATION_TOKEN": 6,
        "USER": 7,
    }
    assert {m.name: m.value for m in PatternType} == {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
    assert [m.name for m in AclOperation] == [
        "UNKNOWN",
        "ANY",
        "ALL",
        "READ",
        "WRITE",
        "CREATE",
        "DELETE",
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
        "CREATE_TOKENS",
        "DESCRIBE_TOKENS",
    ]
    assert [m.value for m in AclOperation] == list(range(15))
    assert {m.name: m.value for m in AclPermissionType} == {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}


def test_names_as_kafka_writes_them():
    assert camel_name(ResourceType.TRANSACTIONAL_ID) == "TransactionalId"
    assert camel_name(AclOperation.IDEMPOTENT_WRITE) == "IdempotentWrite"
    assert camel_name(AclPermissionType.ALLOW) == "Allow"
    for text in ("IdempotentWrite", "IDEMPOTENT_WRITE", "idempotent_write", "idempotentwrite"):
        assert parse_name(AclOperation, text) is AclOperation.IDEMPOTENT_WRITE
    assert parse_name(ResourceType, "Topic") is ResourceType.TOPIC
    with pytest.raises(ValueError):
        parse_name(AclOperation, "Fly")


def test_exported_from_kclient():
    assert kclient.AclBinding is AclBinding and kclient.ResourceType is ResourceType and "AclBindingFilter" in kclient.__all__


def test_codes_convert_from_ints():
    pattern = ResourcePattern(2, "orders", 4)
    assert pattern.resource_type is ResourceType.TOPIC and pattern.pattern_type is PatternType.PREFIXED
    assert ResourcePattern(ResourceType.TOPIC, "orders") == ResourcePattern(2, "orders", 3)


LITERAL = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
WILDCARD = ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL)
PREFIX = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
OTHER_PREFIX = ResourcePattern(ResourceType.TOPIC, "pay", PatternType.PREFIXED)
GROUP = ResourcePattern(ResourceType.GROUP, "orders", PatternType.LITERAL)


@pytest.mark.parametrize(
    "flt, matched",
    [
        (ResourcePatternFilter(), {LITERAL, WILDCARD, PREFIX, OTHER_PREFIX, GROUP}),
        (ResourcePatternFilter(ResourceType.TOPIC), {LITERAL, WILDCARD, PREFIX, OTHER_PREFIX}),
        (ResourcePatternFilter(ResourceType.ANY, "orders"), {LITERAL, GROUP}),
        (ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL), {LITERAL}),
        (ResourcePatternFilter(ResourceType.TOPIC, "ord", PatternType.PREFIXED), {PREFIX}),
        (ResourcePatternFilter(ResourceType.TOPIC, None, PatternType.PREFIXED), {PREFIX, OTHER_PREFIX}),
        (ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.MATCH), {LITERAL, WILDCARD, PREFIX}),
        (ResourcePatternFilter(ResourceType.TOPIC, "payments", PatternType.MATCH), {WILDCARD, OTHER_PREFIX}),
        (ResourcePatternFilter(ResourceType.TOPIC, "*", PatternType.LITERAL), {WILDCARD}),
    ],
)
def test_resource_pattern_filter(flt, matched):
    assert {p for p in (LITERAL, WILDCARD, PREFIX, OTHER_PREFIX, GROUP) if flt.matches(p)} == matched


def test_entry_filter():
    entry = AccessControlEntry("User:alice", "10.0.0.7", AclOperation.READ, AclPermissionType.ALLOW)
    assert AccessControlEntryFilter().matches(entry)
    assert AccessControlEntryFilter("User:alice", "10.0.0.7", AclOperation.READ, AclPermissionType.ALLOW).matches(entry)
    assert not AccessControlEntryFilter(principal="User:bob").matches(entry)
    assert not AccessControlEntryFilter(host="*").matches(entry)  # a filter's host is exact, not a wildcard
    assert not AccessControlEntryFilter(operation=AclOperation.WRITE).matches(entry)
    assert not AccessControlEntryFilter(permission_type=AclPermissionType.DENY).matches(entry)


def test_binding_filter_and_indefinite_fields():
    binding = AclBinding(LITERAL, AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
    assert AclBindingFilter().matches(binding)
    assert AclBindingFilter(LITERAL.to_filter(), AccessControlEntryFilter(principal="User:alice")).matches(binding)
    assert not AclBindingFilter(GROUP.to_filter()).matches(binding)
    assert binding.indefinite_field() is None
    assert AclBinding(ResourcePattern(ResourceType.ANY, "x"), binding.entry).indefinite_field() == "resource type"
    assert AclBinding(ResourcePattern(ResourceType.TOPIC, "x", PatternType.MATCH), binding.entry).indefinite_field() == "pattern type"
    assert AclBinding(LITERAL, AccessControlEntry("User:a", "*", AclOperation.ANY, AclPermissionType.ALLOW)).indefinite_field() == "operation"
    assert AclBinding(LITERAL, AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ANY)).indefinite_field() == "permission type"
