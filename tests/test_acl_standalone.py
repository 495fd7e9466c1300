"""ACLs on a standalone bundled broker (no ``zookeeper.connect``): the
authorizer keeps its ACLs in memory, CreateAcls / DeleteAcls change them at
once, and Kafka's ``allow.everyone.if.no.acl.found=true`` opens every
resource no ACL names."""

from __future__ import annotations

import time
import uuid

import pytest
from helpers.acls import acl_broker_properties, acl_filter, binding, create_acls, delete_acls, describe_acls, sasl_client
from helpers.raw import make_topic, produce_body

from kclient.acl import AclOperation as Op
from kclient.acl import AclPermissionType as Perm
from kclient.acl import ResourceType
from kclient.errors import TOPIC_AUTHORIZATION_FAILED
from kclient.protocol.messages import PRODUCE
from kclient.protocol.records.v2 import build_batch
from kclient.testing import BrokerProcess


@pytest.fixture(scope="module")
def standalone():
    props = acl_broker_properties()
    props.update({"num.partitions": 1, "auto.create.topics.enable": "true", "allow.everyone.if.no.acl.found": "true"})
    with BrokerProcess(properties=props) as proc:
        yield proc


def _produce(c, topic: str) -> int:
    body = produce_body(topic, 0, build_batch([(None, b"v", int(time.time() * 1000))]))
    return c.request(PRODUCE, 7, body)["responses"][0]["partition_responses"][0]["error_code"]


def test_acls_in_memory_and_allow_everyone_if_no_acl_found(standalone):
    topic = f"open-{uuid.uuid4().hex[:8]}"
    with sasl_client(standalone, "admin") as admin, sasl_client(standalone, "alice") as alice, sasl_client(standalone, "bob") as bob:
        make_topic(admin, topic)
        assert _produce(alice, topic) == 0  # no ACL names the topic: open to everyone
        assert [r["error_code"] for r in create_acls(admin, binding(ResourceType.TOPIC, topic, "User:alice", Op.WRITE))] == [0]
        assert _produce(alice, topic) == 0
        assert _produce(bob, topic) == TOPIC_AUTHORIZATION_FAILED  # now an ACL names it
        assert len(describe_acls(admin, acl_filter(ResourceType.TOPIC, topic))["resources"]) == 1
        create_acls(admin, binding(ResourceType.TOPIC, topic, "User:alice", Op.WRITE, Perm.DENY))
        assert _produce(alice, topic) == TOPIC_AUTHORIZATION_FAILED
        assert len(delete_acls(admin, acl_filter(ResourceType.TOPIC, topic))[0]["matching_acls"]) == 2
        assert _produce(bob, topic) == 0
