"""The authorizer's decisions, the ZooKeeper codec and the TLS principal
mapping rules without a broker (pure): Kafka's ``AclAuthorizer``,
``AclEntry`` / ``ZkData`` formats and ``SslPrincipalMapper`` cases."""

from __future__ import annotations

import json
import logging

import pytest

from kclient.acl import AccessControlEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from kclient.broker.authz.authorizer import AclAuthorizer, implied_operations, parse_super_users
from kclient.broker.authz.principal import ANONYMOUS, ConnectionSession, NoMatchingRule, RequestContext, SslPrincipalMapper
from kclient.broker.authz.zk_store import (
    EXTENDED_CHANGES_PATH,
    LITERAL_CHANGES_PATH,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
    resource_path,
)
from kclient.errors import ConfigError

pytestmark = pytest.mark.unit

ALICE = RequestContext("User:alice", "10.0.0.1")
BOB = RequestContext("User:bob", "10.0.0.2")
TOPIC = ResourceType.TOPIC
R, W, D = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def entry(principal: str, op: AclOperation, perm: AclPermissionType = ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def test_no_acl_denies_unless_allow_everyone():
    assert not AclAuthorizer().authorize(ALICE, R, TOPIC, "t")
    assert AclAuthorizer(allow_everyone_if_no_acl_found=True).authorize(ALICE, R, TOPIC, "t")
    auth = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    auth.replace(ResourcePattern(TOPIC, "t"), [entry("User:bob", R)])
    assert not auth.authorize(ALICE, R, TOPIC, "t")  # an ACL exists: the flag no longer applies


def test_literal_wildcard_and_prefixed_patterns_apply():
    auth = AclAuthorizer()
    auth.replace(ResourcePattern(TOPIC, "orders"), [entry("User:alice", R)])
    auth.replace(ResourcePattern(TOPIC, "*"), [entry("User:bob", R)])
    auth.replace(ResourcePattern(TOPIC, "pay", PatternType.PREFIXED), [entry("User:alice", W)])
    assert auth.authorize(ALICE, R, TOPIC, "orders") and not auth.authorize(ALICE, R, TOPIC, "orders2")
    assert auth.authorize(BOB, R, TOPIC, "anything")
    assert auth.authorize(ALICE, W, TOPIC, "payments") and not auth.authorize(ALICE, W, TOPIC, "pa")
    assert not auth.authorize(ALICE, R, ResourceType.GROUP, "orders")


def test_deny_wins_hosts_wildcard_principal_and_all():
    auth = AclAuthorizer()
    pattern = ResourcePattern(TOPIC, "t")
    auth.replace(pattern, [entry("User:*", AclOperation.ALL), entry("User:alice", W, DENY)])
    assert not auth.authorize(ALICE, W, TOPIC, "t") and auth.authorize(ALICE, R, TOPIC, "t") and auth.authorize(BOB, W, TOPIC, "t")
    auth.replace(pattern, [entry("User:alice", R, host="10.0.0.9")])
    assert not auth.authorize(ALICE, R, TOPIC, "t")
    auth.replace(pattern, [entry("User:alice", R, host="10.0.0.1")])
    assert auth.authorize(ALICE, R, TOPIC, "t")
    auth.replace(pattern, [entry("User:alice", R), entry("User:alice", AclOperation.ALL, DENY)])
    assert not auth.authorize(ALICE, R, TOPIC, "t")


def test_implied_operations():
    assert implied_operations(D) == {D, R, W, AclOperation.DELETE, AclOperation.ALTER}
    assert implied_operations(AclOperation.DESCRIBE_CONFIGS) == {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    auth = AclAuthorizer()
    auth.replace(ResourcePattern(TOPIC, "t"), [entry("User:alice", R), entry("User:alice", AclOperation.ALTER_CONFIGS)])
    assert auth.authorize(ALICE, D, TOPIC, "t") and auth.authorize(ALICE, AclOperation.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not auth.authorize(ALICE, W, TOPIC, "t")
    auth.replace(ResourcePattern(TOPIC, "u"), [entry("User:alice", R), entry("User:alice", R, DENY)])
    assert auth.authorize(ALICE, D, TOPIC, "u")  # DENY READ does not deny DESCRIBE, which the ALLOW of READ implies
    assert not auth.authorize(ALICE, R, TOPIC, "u")


def test_super_users_bypass_deny():
    auth = AclAuthorizer(parse_super_users(" User:admin ; User:broker;"))
    assert auth.super_users == {"User:admin", "User:broker"}
    auth.replace(ResourcePattern(TOPIC, "t"), [entry("User:*", AclOperation.ALL, DENY)])
    assert auth.authorize(RequestContext("User:admin"), W, TOPIC, "t")


def test_authorize_by_resource_type():
    auth = AclAuthorizer()
    assert not auth.authorize_by_resource_type(ALICE, W, TOPIC)
    auth.replace(ResourcePattern(TOPIC, "a-", PatternType.PREFIXED), [entry("User:alice", W)])
    assert auth.authorize_by_resource_type(ALICE, W, TOPIC) and not auth.authorize_by_resource_type(BOB, W, TOPIC)
    auth.replace(ResourcePattern(TOPIC, "a", PatternType.PREFIXED), [entry("User:alice", W, DENY)])
    assert not auth.authorize_by_resource_type(ALICE, W, TOPIC)  # the allowed prefix lies inside a denied one


def test_denials_are_rate_limited_at_info(caplog):
    auth = AclAuthorizer(log_interval=3600)
    with caplog.at_level(logging.DEBUG, logger="kclient.broker.authorizer"):
        for _ in range(5):
            auth.authorize(ALICE, W, TOPIC, "t", api_name="Produce")
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(infos) == 1
    assert infos[0].getMessage() == "Principal = User:alice is Denied Operation = Write from host = 10.0.0.1 on resource = Topic:LITERAL:t for request = Produce"
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="kclient.broker.authorizer"):
        auth.flush_log(force=True)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "Principal = User:alice is Denied Operation = Write from host = 10.0.0.1 on resource = Topic:LITERAL:t for request = Produce"
        " (4 such since the last report, this one included)"
    ]


def test_zookeeper_layout_and_json():
    assert resource_path(ResourcePattern(TOPIC, "orders")) == "/kafka-acl/Topic/orders"
    assert resource_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED)) == "/kafka-acl-extended/prefixed/TransactionalId/tx"
    entries = {entry("User:alice", AclOperation.IDEMPOTENT_WRITE), entry("User:bob", R, DENY, "10.0.0.2")}
    doc = json.loads(encode_acls(entries))
    assert doc == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "IdempotentWrite", "host": "*"},
            {"principal": "User:bob", "permissionType": "Deny", "operation": "Read", "host": "10.0.0.2"},
        ],
    }
    assert decode_acls(encode_acls(entries)) == entries
    assert decode_acls(b"") == frozenset()
    with pytest.raises(ValueError):
        decode_acls(b'{"version": 2, "acls": []}')


def test_change_notifications():
    literal = ResourcePattern(TOPIC, "orders")
    assert encode_change(literal) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:orders")
    assert decode_change(LITERAL_CHANGES_PATH, b"Topic:orders") == literal
    assert decode_change(LITERAL_CHANGES_PATH, b"TOPIC:a:b") == ResourcePattern(TOPIC, "a:b")
    prefixed = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)
    path, data = encode_change(prefixed)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {"version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}
    assert decode_change(EXTENDED_CHANGES_PATH, data) == prefixed


@pytest.mark.parametrize(
    "dn, expected",
    [
        ("CN=kafka1,OU=ServiceUsers,O=Org,C=US", "kafka1"),
        ("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"),
        ("CN=Duke,OU=JavaSoft,O=Sun Microsystems", "duke"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ],
)
def test_kafkas_principal_mapper_cases(dn, expected):
    rules = (
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
        "DEFAULT"
    )
    assert SslPrincipalMapper(rules).name(dn) == expected


def test_principal_mapper_upper_case_no_match_and_bad_rules():
    assert SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/U").name("CN=alice,O=x") == "ALICE"
    assert SslPrincipalMapper(None).name("CN=a,O=b") == "CN=a,O=b"
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/").name("O=x")
    for bad in ("DEFAUL", "RULE:^CN=(/x", "RULE:[/$1/"):
        with pytest.raises(ConfigError):
            SslPrincipalMapper(bad)


def test_connection_principal_sasl_then_tls_then_anonymous():
    class Sasl:
        principal = None

    session = ConnectionSession(client_address="10.0.0.1", listener="SASL_SSL", tls_principal="User:CN=x", sasl=Sasl())
    assert session.context().principal == "User:CN=x"
    session.sasl.principal = "User:alice"
    assert session.context() == RequestContext("User:alice", "10.0.0.1", "SASL_SSL")
    assert ConnectionSession().context().principal == ANONYMOUS
