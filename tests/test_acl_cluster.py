"""ACLs across a 3-broker cluster (issue 30): a change made through any
broker is stored once in ZooKeeper and applied by every broker (Kafka's
``/kafka-acl-changes`` notifications); concurrent changes to one resource
through two brokers both survive (versioned conditional writes); and with
the authorizer on, the brokers' own traffic (controller requests, replica
fetches over the PLAINTEXT inter-broker listener, whose principal is in
``super.users``) keeps a replicated topic writable with acks=all.
"""

from __future__ import annotations

import time
import uuid

import pytest
import trio
from helpers.acls import acl_broker_properties, acl_filter, binding, create_acls, delete_acls, describe_acls, sasl_client
from helpers.raw import SocketClient, produce_body
from helpers.wait import wait_for

from kclient.acl import AclOperation as Op
from kclient.acl import PatternType, ResourceType
from kclient.errors import TOPIC_AUTHORIZATION_FAILED
from kclient.protocol.messages import CREATE_TOPICS, METADATA, PRODUCE
from kclient.protocol.records.v2 import build_batch
from kclient.testing import BrokerProcess

TOPIC = ResourceType.TOPIC


@pytest.fixture(scope="module")
def cluster(zookeeper):
    """Brokers 1, 2, 3 (``cluster[i]`` is broker ``i + 1``)."""
    connect = zookeeper.connect_string(f"acl-cluster-{uuid.uuid4().hex[:8]}")
    brokers = []
    try:
        for broker_id in (1, 2, 3):
            props = acl_broker_properties()
            props.update({"zookeeper.connect": connect, "broker.id": broker_id, "replica.fetch.wait.max.ms": 100, "auto.create.topics.enable": "false"})
            proc = BrokerProcess(properties=props)
            brokers.append(proc)
            proc.start()
        with SocketClient(brokers[0].host, brokers[0].port, client_id="acl-cluster", timeout=15) as c:
            wait_for(lambda: len(c.request(METADATA, 1, {"topics": []})["brokers"]) == 3, "three live brokers")
        yield brokers
    finally:
        for proc in brokers:
            proc.cleanup()


def _described(broker, flt) -> list[tuple[str, str, int]]:
    with sasl_client(broker, "admin") as admin:
        return sorted((r["resource_name"], a["principal"], a["operation"]) for r in describe_acls(admin, flt)["resources"] for a in r["acls"])


def _metadata_names(broker, user: str) -> set[str]:
    with sasl_client(broker, user) as c:
        return {t["name"] for t in c.request(METADATA, 1, {"topics": None})["topics"]}


def test_a_change_through_one_broker_is_applied_by_every_broker(cluster):
    b1, b2, b3 = cluster
    topic = f"shared-{uuid.uuid4().hex[:8]}"
    with sasl_client(b1, "admin") as admin:
        create = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []}], "timeout_ms": 30000, "validate_only": False}
        wait_for(lambda: admin.request(CREATE_TOPICS, 4, create)["topics"][0]["error_code"] in (0, 36), "the topic")  # 36: created by an earlier try
        assert [r["error_code"] for r in create_acls(admin, binding(TOPIC, topic, "User:alice", Op.DESCRIBE))] == [0]
    for broker in cluster:
        wait_for(lambda broker=broker: topic in _metadata_names(broker, "alice"), f"broker {broker.port} applying the new ACL")
        assert topic not in _metadata_names(broker, "bob")
    with sasl_client(b3, "admin") as admin:
        assert len(delete_acls(admin, acl_filter(TOPIC, topic))[0]["matching_acls"]) == 1
    for broker in cluster:
        wait_for(lambda broker=broker: topic not in _metadata_names(broker, "alice"), f"broker {broker.port} applying the deletion")
    del b2


def test_concurrent_changes_to_one_resource_through_two_brokers_all_survive(cluster):
    b1, b2, _ = cluster
    prefix = f"race-{uuid.uuid4().hex[:8]}"
    users = [f"User:u{i}" for i in range(12)]

    async def create_through(broker, principals) -> None:
        def run() -> None:
            with sasl_client(broker, "admin") as admin:
                for p in principals:
                    assert create_acls(admin, binding(TOPIC, prefix, p, Op.READ, pattern=PatternType.PREFIXED))[0]["error_code"] == 0

        await trio.to_thread.run_sync(run)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(create_through, b1, users[::2])
            nursery.start_soon(create_through, b2, users[1::2])

    trio.run(main)
    flt = acl_filter(TOPIC, prefix, pattern=PatternType.PREFIXED)
    expected = sorted((prefix, u, int(Op.READ)) for u in users)
    for broker in cluster:
        wait_for(lambda broker=broker: _described(broker, flt) == expected, f"every ACL on broker {broker.port}")
    with sasl_client(b1, "admin") as admin:
        delete_acls(admin, flt)


def test_replication_keeps_working_with_the_authorizer_on(cluster):
    b1 = cluster[0]
    topic = f"replicated-{uuid.uuid4().hex[:8]}"
    with sasl_client(b1, "admin") as admin:
        create = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []}], "timeout_ms": 30000, "validate_only": False}
        wait_for(lambda: admin.request(CREATE_TOPICS, 4, create)["topics"][0]["error_code"] in (0, 36), "the topic")
        create_acls(admin, binding(TOPIC, topic, "User:alice", Op.WRITE))

    def leader():
        with sasl_client(b1, "admin") as admin:
            part = admin.request(METADATA, 1, {"topics": [{"name": topic}]})["topics"][0]["partitions"]
        return next((cluster[p["leader_id"] - 1] for p in part if p["leader_id"] >= 1 and len(p["isr_nodes"]) == 3), None)

    wait_for(lambda: leader() is not None, "a leader with a full ISR")
    body = {**produce_body(topic, 0, build_batch([(None, b"v", int(time.time() * 1000))]), acks=-1), "timeout_ms": 15000}
    for broker in cluster:
        wait_for(lambda broker=broker: _can_describe(broker, "alice", topic), f"broker {broker.port} knowing alice's ACL")
    with sasl_client(leader(), "alice") as alice:
        assert alice.request(PRODUCE, 7, body)["responses"][0]["partition_responses"][0]["error_code"] == 0
    with sasl_client(leader(), "bob") as bob:
        assert bob.request(PRODUCE, 7, body)["responses"][0]["partition_responses"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED


def _can_describe(broker, user: str, topic: str) -> bool:
    return topic in _metadata_names(broker, user)
