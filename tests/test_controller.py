"""The controller in a real 3-broker cluster (`kclient.testing.Cluster`:
three broker processes and a real ZooKeeper over loopback).

One ZooKeeper and one cluster for the module; a test that kills or stops
brokers starts them again before it ends (the ``all_up`` fixture checks).
What is checked is what ZooKeeper holds (``/controller``,
``/controller_epoch``, ``/brokers/topics/<t>`` and the partition state
znodes, in Kafka's layout) and what every broker answers (Metadata,
Produce with ``acks=-1``), plus Kafka's own admin clients and kcat.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import time
import uuid

import pytest
from helpers.raw import SocketClient, fetch_body, fetch_records, produce_records
from helpers.skips import require
from helpers.wait import wait_for

from kclient.broker.topic_admin import assign_replicas
from kclient.client.admin import AdminClient, NewTopic
from kclient.errors import (
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kclient.protocol.messages import FETCH, METADATA
from kclient.testing import BrokerProcess, Cluster

BROKERS = (1, 2, 3)


@pytest.fixture(scope="module")
def cluster(zookeeper):
    with Cluster(brokers=3, zookeeper=zookeeper, properties={"auto.create.topics.enable": "false"}) as c:
        yield c


@pytest.fixture(autouse=True)
def all_up(cluster):
    """Every test starts with the three brokers running and registered."""
    for bid, broker in cluster.brokers.items():
        if not broker.running:
            cluster.start_broker(bid)
    cluster._wait(lambda: cluster.registered_brokers() == list(BROKERS) or None, 60, "all brokers registered")
    yield


@pytest.fixture
def name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


wait_until = functools.partial(wait_for, interval=0.1)


def metadata(broker: BrokerProcess, topic: str) -> dict:
    with SocketClient(broker.host, broker.port, client_id="test-md", timeout=10) as c:
        return c.request(
            METADATA,
            8,
            {
                "topics": [{"name": topic}],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )


def partition_views(cluster: Cluster, topic: str, partition: int = 0) -> dict[int, tuple]:
    """``{broker id: (leader, leader epoch, sorted isr, controller id)}`` as
    each running broker's Metadata says."""
    views = {}
    for bid, broker in cluster.brokers.items():
        if not broker.running:
            continue
        md = metadata(broker, topic)
        parts = {p["partition_index"]: p for p in md["topics"][0]["partitions"]}
        p = parts.get(partition)
        views[bid] = None if p is None else (p["leader_id"], p["leader_epoch"], tuple(sorted(p["isr_nodes"])), md["controller_id"])
    return views


#: ``produce(broker, topic, values, acks=..)``: one raw Produce request.
produce = produce_records


def consume(broker: BrokerProcess, topic: str, partition: int = 0) -> tuple[int, list[bytes]]:
    """``(error code, values)`` of one raw Fetch from offset 0."""
    return fetch_records(broker, topic, partition)[:2]


# ---------------------------------------------------------------- election


def test_one_controller_is_elected_and_a_survivor_takes_over_after_sigkill(cluster, name):
    first = cluster.wait_for_controller()
    registration = json.loads(cluster.zk.get("/controller"))
    assert registration["version"] == 1 and registration["brokerid"] == first and int(registration["timestamp"]) > 0
    epoch = cluster.controller_epoch()
    assert epoch >= 1
    # Every broker names the same controller in Metadata (v1+ controller_id).
    wait_until(lambda: {metadata(b, "none")["controller_id"] for b in cluster.brokers.values()} == {first}, what="one controller in Metadata")

    cluster.kill(first)
    # Read as fast as ZooKeeper answers: the moment /controller names the
    # new controller, /controller_epoch already holds its epoch (one
    # transaction writes both).
    deadline = time.monotonic() + 30
    while (second := cluster.controller_id()) in (-1, first):
        assert time.monotonic() < deadline, "no new controller within 30 s"
    assert cluster.controller_epoch() == epoch + 1
    assert second in BROKERS and second != first
    # The survivors learn the new controller (UpdateMetadata from it).
    wait_until(lambda: {metadata(b, "none")["controller_id"] for b in cluster.brokers.values() if b.running} == {second}, what="new controller in Metadata")
    # The admin client finds the new controller and works through it.
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        assert admin.describe_cluster().controller_id == second
        admin.create_topics([NewTopic(name, 2, 2)], timeout_ms=30000)
        assert {p.partition for p in admin.describe_topics([name])[name].partitions} == {0, 1}

    # The old controller comes back as an ordinary broker.
    # Once it names `second` in Metadata (UpdateMetadata from it), its own
    # bid for /controller at start-up is over.
    cluster.start_broker(first)
    wait_until(lambda: metadata(cluster.brokers[first], "none")["controller_id"] == second, what="the old controller to follow the new one")
    assert cluster.controller_id() == second and cluster.controller_epoch() == epoch + 1


# ---------------------------------------------------------------- topic creation


def test_created_topic_is_spread_round_robin_in_kafkas_layout(cluster, name):
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 6, 3, config={"retention.ms": "3600000"})], timeout_ms=30000)
        described = admin.describe_topics([name])[name]
    raw = json.loads(cluster.zk.get(f"/brokers/topics/{name}"))
    assert raw["version"] in (1, 2) and sorted(raw["partitions"]) == [str(p) for p in range(6)]
    assignment = {int(p): r for p, r in raw["partitions"].items()}
    # Kafka's rack-unaware assignment: leaders round-robin from a start
    # broker, followers at a shift that grows every len(brokers) partitions.
    ids = sorted(BROKERS)
    start = ids.index(assignment[0][0])
    shift = (ids.index(assignment[0][1]) - start - 1) % len(ids)
    assert assignment == {p: list(r) for p, r in assign_replicas(ids, 6, 3, start_index=start, shift=shift).items()}
    assert all(sorted(r) == ids for r in assignment.values())
    assert sorted(assignment[p][0] for p in range(3)) == ids  # each broker leads one of the first three
    epoch = cluster.controller_epoch()
    for p, replicas in assignment.items():
        state = cluster.partition_state(name, p)
        assert set(state) == {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
        assert state["leader"] == replicas[0] and state["leader_epoch"] == 0
        assert state["isr"] == replicas and state["version"] == 1 and state["controller_epoch"] <= epoch
    assert [(p.leader, list(p.replicas)) for p in described.partitions] == [(assignment[p][0], assignment[p]) for p in range(6)]
    config = json.loads(cluster.zk.get(f"/config/topics/{name}"))
    assert config == {"version": 1, "config": {"retention.ms": "3600000"}}


def test_create_topics_errors_are_kafkas(cluster, name):
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 1, 3)])
        with pytest.raises(TopicAlreadyExistsError, match=name):
            admin.create_topics([NewTopic(name, 1, 3)])
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([NewTopic(name + "-rf", 1, 4)])
        with pytest.raises(InvalidPartitionsError):
            admin.create_topics([NewTopic(name + "-p", 0, 1)])
        # A manual assignment is written as given.
        admin.create_topics([NewTopic(name + "-m", replica_assignment={0: [3, 1], 1: [2, 3]})])
        assert cluster.assignment(name + "-m") == {0: [3, 1], 1: [2, 3]}
        assert name in admin.list_topics() and name + "-rf" not in admin.list_topics()


def test_only_the_controller_serves_create_and_delete_topics(cluster, name):
    """As Kafka's ZooKeeper-mode brokers: CreateTopics / DeleteTopics sent
    to another broker get NOT_CONTROLLER (41) and create nothing; the admin
    client follows Metadata's controller_id (KIP-4)."""
    from kclient.errors import NOT_CONTROLLER
    from kclient.protocol.messages import CREATE_TOPICS, DELETE_TOPICS

    controller = cluster.wait_for_controller()
    other = cluster.broker(next(b for b in sorted(cluster.brokers) if b != controller))
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    with SocketClient(other.host, other.port, client_id="test-admin", timeout=30) as raw:
        reply = raw.request(CREATE_TOPICS, 3, {"topics": [topic], "timeout_ms": 5000, "validate_only": False})
        assert [t["error_code"] for t in reply["topics"]] == [NOT_CONTROLLER]
        assert name not in cluster.zk.get_children("/brokers/topics")
        reply = raw.request(DELETE_TOPICS, 1, {"topic_names": [name], "timeout_ms": 5000})
        assert [t["error_code"] for t in reply["responses"]] == [NOT_CONTROLLER]
    # Bootstrapped on the non-controller only, the admin client still succeeds.
    with AdminClient({"bootstrap.servers": other.bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 1, 3)])
        assert name in admin.list_topics()
        admin.delete_topics([name])
        assert name not in admin.list_topics()


# ---------------------------------------------------------------- failover


def test_leader_is_reelected_from_the_isr_after_sigkill_and_rejoins_when_restarted(cluster, name):
    cluster.create_topic(name, partitions=1, replication_factor=3)
    old = cluster.leader(name, 0)
    before = cluster.partition_state(name, 0)
    wait_until(lambda: len(cluster.isr(name, 0)) == 3, what="full ISR")
    r = produce(cluster.broker(old), name, [b"a", b"b", b"c"], acks=-1)
    assert r["error_code"] == NONE

    cluster.kill(old)
    new = cluster.wait_for_leader(name, 0, exclude={old})
    after = cluster.partition_state(name, 0)
    assert new in before["isr"] and new != old
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    assert old not in after["isr"]
    assert after["controller_epoch"] == cluster.controller_epoch()
    # Every running broker's Metadata agrees with ZooKeeper.
    want = (new, after["leader_epoch"], tuple(sorted(after["isr"])))
    wait_until(
        lambda: {v[:3] for v in partition_views(cluster, name).values()} == {want},
        what=f"every broker's Metadata to show {want}",
    )
    # What acks=-1 acknowledged survives (visible once the new leader's high
    # watermark has moved past it: when the other follower fetched), and
    # the new leader takes writes.
    wait_until(lambda: consume(cluster.broker(new), name) == (NONE, [b"a", b"b", b"c"]), what="acknowledged records on the new leader")
    assert produce(cluster.broker(new), name, [b"d"], acks=-1)["error_code"] == NONE

    # The killed broker comes back on its port, catches up and rejoins the ISR.
    cluster.start_broker(old)
    cluster.wait_for_isr(name, 0, BROKERS, timeout=60)
    assert cluster.leader(name, 0) == new
    wait_until(lambda: {v[2] for v in partition_views(cluster, name).values()} == {BROKERS}, what="ISR of 3 in Metadata")
    # It holds every record: lead it again and read them there.
    cluster.kill(new)
    third = cluster.wait_for_leader(name, 0, exclude={new})
    wait_until(lambda: consume(cluster.broker(third), name) == (NONE, [b"a", b"b", b"c", b"d"]), what="all records on the next leader")
    cluster.start_broker(new)
    cluster.wait_for_isr(name, 0, BROKERS, timeout=60)


def test_a_new_controller_tells_the_new_leader_before_its_metadata_names_it(cluster, name):
    """The controller is also the partition's leader and is SIGKILLed: the
    next controller elects a new leader and sends it LeaderAndIsr before
    UpdateMetadata (one queue per broker keeps the order), so a broker
    whose Metadata names itself the leader serves Fetch. Each survivor is
    asked Metadata then Fetch over and over until one names itself."""
    controller = cluster.wait_for_controller()
    others = [b for b in BROKERS if b != controller]
    cluster.create_topic(name, replica_assignment={0: [controller, *others]})
    cluster.wait_for_isr(name, 0, BROKERS)
    assert produce(cluster.broker(controller), name, [b"a"], acks=-1)["error_code"] == NONE

    clients = {b: SocketClient(cluster.broker(b).host, cluster.broker(b).port, client_id="test-watch", timeout=10) for b in others}
    try:
        cluster.kill(controller)
        deadline = time.monotonic() + 30
        named_itself: dict[int, int] = {}
        while not named_itself:
            assert time.monotonic() < deadline, "no survivor named itself the leader"
            for bid, c in clients.items():
                md = c.request(METADATA, 1, {"topics": [{"name": name}]})
                leader = md["topics"][0]["partitions"][0]["leader_id"]
                if leader != bid:
                    continue
                part = c.request(FETCH, 11, fetch_body(name, [(0, 0)]))["responses"][0]["partitions"][0]
                named_itself[bid] = part["error_code"]
    finally:
        for c in clients.values():
            c.close()
    assert list(named_itself.values()) == [NONE], named_itself
    assert cluster.wait_for_controller(exclude={controller}) in others


def test_a_broker_registered_again_under_a_new_session_is_handled_as_a_restart(cluster, name):
    """/brokers/ids/<id> deleted and created again in one ZooKeeper
    transaction: the children the controller reads are the same ids, but
    the registration's session is new (a restart whose two events came
    together). The controller handles it as gone, then back, as Kafka's
    does with the broker epoch (KIP-380): the partitions it led get a new
    leader and epoch, and it is told to follow that leader."""
    from kclient.zk.client import ZkClient

    controller = cluster.wait_for_controller()
    bounced, other = [b for b in BROKERS if b != controller][:2]
    cluster.create_topic(name, replica_assignment={0: [bounced, other]})
    cluster.wait_for_isr(name, 0, {bounced, other})
    before = cluster.partition_state(name, 0)
    assert before["leader"] == bounced
    assert produce(cluster.broker(bounced), name, [b"a"], acks=-1)["error_code"] == NONE

    path = f"/brokers/ids/{bounced}"
    registration = cluster.zk.get(path)
    intruder = ZkClient(cluster.zk.connect)
    intruder.start()
    try:
        transaction = intruder.kazoo.transaction()
        transaction.delete(path)
        transaction.create(path, registration, ephemeral=True)
        assert not any(isinstance(r, Exception) for r in transaction.commit())
        assert cluster.registered_brokers() == list(BROKERS)  # the same ids throughout
        state = wait_until(
            lambda: (lambda st: st if st["leader"] == other else None)(cluster.partition_state(name, 0)),
            what=f"broker {other} to lead after broker {bounced}'s restart",
        )
        assert state["leader_epoch"] > before["leader_epoch"]
        # Back: the controller tells it to follow the new leader, and it
        # rejoins the ISR; every broker's Metadata agrees.
        cluster.wait_for_isr(name, 0, {bounced, other})
        wait_until(
            lambda: {v[:2] for v in partition_views(cluster, name).values()} == {(other, cluster.partition_state(name, 0)["leader_epoch"])},
            what="every broker to name the new leader",
        )
        assert consume(cluster.broker(other), name) == (NONE, [b"a"])
    finally:
        # The registration now belongs to the intruder's session: restart
        # the broker so that it owns its registration again.
        cluster.kill(bounced)
        intruder.close()
        cluster.start_broker(bounced)


def test_acks_all_is_refused_below_min_insync_replicas(cluster, name):
    cluster.create_topic(name, partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    wait_until(lambda: len(cluster.isr(name, 0)) == 3, what="full ISR")
    leader = cluster.leader(name, 0)
    assert produce(cluster.broker(leader), name, [b"ok"], acks=-1)["error_code"] == NONE

    victims = [b for b in BROKERS if b != leader]
    cluster.kill(victims[0])
    cluster.wait_for_isr(name, 0, {leader, victims[1]})
    assert produce(cluster.broker(leader), name, [b"two-left"], acks=-1)["error_code"] == NONE
    cluster.kill(victims[1])
    cluster.wait_for_isr(name, 0, {leader})
    wait_until(lambda: partition_views(cluster, name)[leader][2] == (leader,), what="leader's ISR to shrink")
    r = produce(cluster.broker(leader), name, [b"refused"], acks=-1)
    appended = []
    if r["error_code"] == NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        # The leader's partition applied the shrink just after this append
        # (its ISR change reaches ZooKeeper and the Metadata answers before
        # the partition itself, as in Kafka): the record is in the log, not
        # acknowledged. The next one meets the shrunk ISR before the append.
        appended.append(b"refused")
        r = produce(cluster.broker(leader), name, [b"refused again"], acks=-1)
    assert r["error_code"] == NOT_ENOUGH_REPLICAS
    # acks=1 does not ask for the ISR.
    assert produce(cluster.broker(leader), name, [b"acks-1"], acks=1)["error_code"] == NONE
    assert consume(cluster.broker(leader), name) == (NONE, [b"ok", b"two-left", *appended, b"acks-1"])


# ---------------------------------------------------------------- deletion


def test_deleted_topic_leaves_zookeeper_the_metadata_and_the_disks(cluster, name):
    cluster.create_topic(name, partitions=2, replication_factor=3)
    assert produce(cluster.broker(cluster.leader(name, 0)), name, [b"x"], acks=-1)["error_code"] == NONE
    dirs = [b.log_dir / f"{name}-{p}" for b in cluster.brokers.values() for p in (0, 1)]
    assert all(d.is_dir() for d in dirs)
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.delete_topics([name], timeout_ms=30000)
        assert name not in admin.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_topics([name])
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([name])
    wait_until(lambda: not cluster.zk.exists(f"/brokers/topics/{name}"), what="topic znode gone")
    wait_until(lambda: not cluster.zk.exists(f"/admin/delete_topics/{name}"), what="deletion marker gone")
    assert not cluster.zk.exists(f"/config/topics/{name}")
    wait_until(lambda: not any(d.exists() for d in dirs), what="partition directories deleted")
    # StopReplica (which deletes the directories) goes before the
    # UpdateMetadata that drops the topic, each broker on its own queue.
    wait_until(
        lambda: all(metadata(broker, name)["topics"][0]["error_code"] != NONE for broker in cluster.brokers.values()),
        what="every broker's Metadata to drop the topic",
    )


# ---------------------------------------------------------------- peers


@pytest.mark.interop
def test_kafka_python_admin_creates_and_deletes_topics(cluster, name):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","), client_id="kp-admin", request_timeout_ms=30000)
    try:
        admin.create_topics([KpNewTopic(name, num_partitions=3, replication_factor=3)], timeout_ms=30000)
        assignment = cluster.assignment(name)
        assert sorted(assignment) == [0, 1, 2] and all(sorted(r) == list(BROKERS) for r in assignment.values())
        # kafka-python asks any broker; each learns the topic on its own queue.
        cluster.wait_for_metadata(name)
        assert name in admin.list_topics()
        admin.delete_topics([name], timeout_ms=30000)
        wait_until(lambda: not cluster.zk.exists(f"/brokers/topics/{name}"), what="topic deleted")
    finally:
        admin.close()


@pytest.mark.interop
def test_confluent_admin_creates_a_topic_with_replication_factor_3(cluster, name):
    from confluent_kafka.admin import AdminClient as CkAdminClient
    from confluent_kafka.admin import NewTopic as CkNewTopic

    admin = CkAdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([CkNewTopic(name, num_partitions=2, replication_factor=3)], operation_timeout=30, request_timeout=40)
    futures[name].result(timeout=60)
    cluster.wait_for_metadata(name)  # librdkafka asks any broker
    md = admin.list_topics(name, timeout=30)
    parts = md.topics[name].partitions
    assert sorted(parts) == [0, 1]
    for p in parts.values():
        assert sorted(p.replicas) == list(BROKERS) and p.leader == cluster.leader(name, p.id)
    assert md.controller_id == cluster.controller_id()
    # A second creation fails with Kafka's error.
    again = admin.create_topics([CkNewTopic(name, num_partitions=2, replication_factor=3)], operation_timeout=30)
    with pytest.raises(Exception) as info:
        again[name].result(timeout=60)
    assert "TOPIC_ALREADY_EXISTS" in str(info.value) or "already exists" in str(info.value)


@pytest.mark.interop
def test_kcat_lists_the_cluster_metadata(cluster, name):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    require(None if kcat else "not on PATH", name="kcat", needs="needs kcat (.ci/run installs it)")
    cluster.create_topic(name, partitions=2, replication_factor=3)
    for p in (0, 1):
        cluster.wait_for_isr(name, p, BROKERS)
    out = subprocess.run([kcat, "-L", "-J", "-b", cluster.bootstrap, "-t", name], capture_output=True, text=True, timeout=60, check=True).stdout
    doc = json.loads(out)
    assert sorted(b["id"] for b in doc["brokers"]) == list(BROKERS)
    assert doc["controllerid"] == cluster.controller_id()
    (topic,) = doc["topics"]
    assert topic["topic"] == name
    for p in topic["partitions"]:
        assert p["leader"] == cluster.leader(name, p["partition"])
        assert sorted(r["id"] for r in p["replicas"]) == list(BROKERS)
        assert sorted(r["id"] for r in p["isrs"]) == list(BROKERS)
