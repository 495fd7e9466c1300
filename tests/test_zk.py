"""ZooKeeper layer: pure paths / JSON documents / range assignment, and
against a real ZooKeeper server: the kazoo client and the broker's
registration (Kafka 0.8 documentation https://kafka.apache.org/082/documentation.html,
"Distribution": "ZooKeeper Directories", "Broker Node Registry")."""

from __future__ import annotations

import json
import time

import pytest
from helpers.wait import wait_for

from kclient import Producer, ProducerData
from kclient.errors import ZkTimeoutError
from kclient.testing import BrokerProcess, BrokerProcessError, four_letter_word
from kclient.zk import paths
from kclient.zk.client import ZkClient
from kclient.zk.paths import (
    BrokerRegistration,
    ConsumerRegistration,
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    range_assignment,
)

# ---------------------------------------------------------------- pure


@pytest.mark.unit
def test_paths_follow_the_seed_layout():
    assert paths.broker_path(3) == "/brokers/ids/3"
    assert paths.topic_path("t") == "/brokers/topics/t"
    assert paths.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert paths.consumer_id_path("g", "c1") == "/consumers/g/ids/c1"
    assert paths.owner_path("g", "t", 4) == "/consumers/g/owners/t/4"
    assert paths.offset_path("g", "t", 0) == "/consumers/g/offsets/t/0"
    assert paths.CONTROLLER_PATH == "/controller"
    assert paths.consumer_thread_id("c1", 2) == "c1-2"


@pytest.mark.unit
def test_broker_registration_round_trip_and_kafka_shape():
    reg = BrokerRegistration.create(7, "h.example", 9093, 1700000000123)
    doc = json.loads(reg.to_json())
    assert doc == {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://h.example:9093"],
        "jmx_port": -1,
        "host": "h.example",
        "timestamp": "1700000000123",
        "port": 9093,
        "version": 4,
    }
    assert BrokerRegistration.from_json(7, reg.to_json()) == reg


@pytest.mark.unit
def test_broker_registration_lists_every_listener():
    """Every listener is an endpoint, with its protocol in the map (KIP-103);
    a client finds its endpoint by security protocol."""
    listeners = [("PLAINTEXT", "PLAINTEXT", "h.example", 9092), ("EXTERNAL", "SASL_SSL", "::1", 9094)]
    reg = BrokerRegistration.create(7, "h.example", 9092, 1700000000123, listeners=listeners)
    doc = json.loads(reg.to_json())
    assert doc["endpoints"] == ["PLAINTEXT://h.example:9092", "EXTERNAL://[::1]:9094"]
    assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "EXTERNAL": "SASL_SSL"}
    back = BrokerRegistration.from_json(7, reg.to_json())
    assert back.endpoint_for("SASL_SSL") == ("::1", 9094)
    assert back.endpoint_for("PLAINTEXT") == ("h.example", 9092)
    assert back.endpoint_for("SSL") is None


@pytest.mark.unit
def test_broker_registration_reads_endpoint_only_documents():
    data = b'{"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://[::1]:9092"],"host":null,"version":4,"port":-1}'
    reg = BrokerRegistration.from_json(1, data)
    assert (reg.host, reg.port) == ("::1", 9092)
    with pytest.raises(ValueError):
        BrokerRegistration.from_json(1, b"not json")


@pytest.mark.unit
def test_topic_assignment_and_partition_state_round_trip():
    ta = TopicAssignment({1: (0,), 0: (0, 1)})
    assert json.loads(ta.to_json()) == {"version": 1, "partitions": {"0": [0, 1], "1": [0]}}
    assert TopicAssignment.from_json(ta.to_json()) == ta
    assert ta.partition_ids == [0, 1]
    ps = PartitionState(leader=2, isr=(2, 3), leader_epoch=5, controller_epoch=4)
    assert json.loads(ps.to_json()) == {"controller_epoch": 4, "leader": 2, "version": 1, "leader_epoch": 5, "isr": [2, 3]}
    assert PartitionState.from_json(ps.to_json()) == ps
    c = ControllerRegistration(1, 99)
    assert json.loads(c.to_json()) == {"version": 1, "brokerid": 1, "timestamp": "99"}
    assert ControllerRegistration.from_json(c.to_json()) == c
    assert paths.decode_cluster_id(paths.encode_cluster_id("abc")) == "abc"


@pytest.mark.unit
def test_consumer_registration_round_trip():
    reg = ConsumerRegistration({"events": 2}, "static", 1234)
    assert json.loads(reg.to_json()) == {"version": 1, "subscription": {"events": 2}, "pattern": "static", "timestamp": "1234"}
    assert ConsumerRegistration.from_json(reg.to_json()) == reg
    wl = ConsumerRegistration({"a.*": 3}, "white_list", 5)
    assert ConsumerRegistration.from_json(wl.to_json()) == wl
    with pytest.raises(ValueError):
        ConsumerRegistration.from_json(b'{"version":1,"subscription":{},"pattern":"weird"}')
    assert paths.decode_offset(paths.encode_offset(12345678901)) == 12345678901
    with pytest.raises(ValueError):
        paths.decode_offset(b"x")


@pytest.mark.unit
def test_range_assignment_gives_every_partition_exactly_one_owner():
    for n_parts in range(13):
        for n_threads in range(1, 8):
            threads = [f"c{i // 3}-{i % 3}" for i in range(n_threads)]
            result = range_assignment(range(n_parts), threads)
            owned = sorted(p for ps in result.values() for p in ps)
            assert owned == list(range(n_parts)), (n_parts, n_threads)
            sizes = [len(result[t]) for t in sorted(threads, key=paths.thread_sort_key)]
            assert max(sizes) - min(sizes) <= 1
            assert sizes == sorted(sizes, reverse=True)  # the first ones take the extra partitions


@pytest.mark.unit
def test_range_assignment_seed_example_with_remainder():
    # 5 partitions, 2 consumers: the documented N = 5/2 = 2 alone would leave partition 4 unowned.
    result = range_assignment([4, 3, 2, 1, 0], ["b-0", "a-0"])
    assert result == {"a-0": [0, 1, 2], "b-0": [3, 4]}
    # numeric order of stream numbers: c-2 before c-10
    result = range_assignment(range(11), [f"c-{i}" for i in range(11)])
    assert result["c-2"] == [2] and result["c-10"] == [10]
    assert range_assignment([0], ["x-0", "y-0"]) == {"x-0": [0], "y-0": []}


# ---------------------------------------------------------------- real ZooKeeper


def test_zookeeper_process_answers_four_letter_words(zookeeper):
    assert four_letter_word(zookeeper.host, zookeeper.port, "ruok") == "imok"
    assert "Zookeeper version" in four_letter_word(zookeeper.host, zookeeper.port, "srvr")


def test_zk_client_ephemeral_and_persistent_nodes(zookeeper):
    a = ZkClient(zookeeper.connect)
    b = ZkClient(zookeeper.connect)
    a.start()
    b.start()
    try:
        base = f"/kclient-test/{time.time_ns()}"
        assert a.create_ephemeral_if_absent(base + "/e", b"1")
        assert not b.create_ephemeral_if_absent(base + "/e", b"2")
        assert b.get(base + "/e") == b"1"
        assert a.owner_session(base + "/e") == a.session_id != b.session_id
        b.write_persistent(base + "/p/q", b"x")
        b.write_persistent(base + "/p/q", b"y")
        assert a.get(base + "/p/q") == b"y"
        assert a.get(base + "/missing") is None
        assert a.get_children(base + "/missing") == []
        assert sorted(a.get_children(base)) == ["e", "p"]
    finally:
        a.close()
    try:
        # the ephemeral node went with a's session
        assert b.get(base + "/e") is None
        assert b.get(base + "/p/q") == b"y"
    finally:
        b.close()


@pytest.mark.filterwarnings("ignore:No chroot path exists:UserWarning")  # kazoo, on connecting under the missing chroot
def test_ephemeral_node_under_missing_parents_and_a_missing_chroot(zookeeper):
    """create_ephemeral_if_absent makes the missing parents (persistent,
    empty) in one go, also under a chroot whose own node does not exist yet."""
    root = f"/kclient-chroot-{time.time_ns()}"
    for connect in (zookeeper.connect, zookeeper.connect + root):
        a = ZkClient(connect)
        a.start()
        try:
            path = f"/x{time.time_ns()}/a/b/e"
            assert a.create_ephemeral_if_absent(path, b"1")
            assert not a.create_ephemeral_if_absent(path, b"2")
            assert a.get(path) == b"1" and a.owner_session(path) == a.session_id
            assert a.get(path.rsplit("/", 1)[0]) == b"" and a.owner_session(path.rsplit("/", 1)[0]) == 0
            assert a.create_ephemeral_if_absent(path.rsplit("/", 1)[0] + "/f", b"3")  # parents there now
        finally:
            a.close()


@pytest.mark.filterwarnings("ignore:No chroot path exists:UserWarning")
@pytest.mark.parametrize("parents", [False, True])
def test_batched_reads_and_ephemeral_creates(zookeeper, parents):
    """create_ephemeral_many creates what is absent (parents too, also under
    a missing chroot) and reports what existed; owners_and_data and
    get_children_many read several nodes at once, None / [] for absent ones."""
    root = f"/kclient-chroot-{time.time_ns()}"
    for connect in (zookeeper.connect, zookeeper.connect + root):
        a, b = ZkClient(connect), ZkClient(connect)
        a.start()
        b.start()
        try:
            base = f"/m{time.time_ns()}"
            assert b.create_ephemeral_many([(f"{base}/x/1", b"theirs")], parents=parents) == [True]
            nodes = [(f"{base}/x/0", b"a0"), (f"{base}/x/1", b"a1"), (f"{base}/y/z/2", b"a2")]
            assert a.create_ephemeral_many(nodes, parents=parents) == [True, False, True]
            assert a.create_ephemeral_many(nodes, parents=parents) == [False, False, False]
            got = a.owners_and_data([f"{base}/x/0", f"{base}/x/1", f"{base}/nope", f"{base}/x"])
            assert got == [(b"a0", a.session_id), (b"theirs", b.session_id), None, (b"", 0)]
            children = a.get_children_many([f"{base}/x", f"{base}/y/z", f"{base}/nope"])
            assert sorted(children[0]) == ["0", "1"] and children[1:] == [["2"], []]
        finally:
            a.close()
            b.close()


@pytest.mark.filterwarnings("ignore:No chroot path exists:UserWarning")
def test_ephemeral_create_and_counter_increment_are_one_transaction(zookeeper):
    """create_ephemeral_and_increment: the node and the counter change
    together or not at all; racing sessions never count twice."""
    import concurrent.futures

    root = f"/kclient-chroot-{time.time_ns()}"
    for connect in (zookeeper.connect, zookeeper.connect + root):
        clients = [ZkClient(connect) for _ in range(4)]
        for c in clients:
            c.start()
        try:
            base = f"/c{time.time_ns()}"
            node, counter = base + "/owner", base + "/counter"
            clients[0].ensure_path(base)
            # Absent counter: created with 0, then incremented to 1.
            assert clients[0].create_ephemeral_and_increment(node, b"a", counter) == 1
            assert clients[1].get(node) == b"a" and clients[1].get(counter) == b"1"
            # The node exists: nothing changes, the counter included.
            assert clients[1].create_ephemeral_and_increment(node, b"b", counter) is None
            assert clients[1].get(node) == b"a" and clients[1].get(counter) == b"1"
            # The owner's session ends: the next one counts from there.
            clients[0].close()
            assert clients[1].create_ephemeral_and_increment(node, b"b", counter) == 2
            assert clients[2].get(node) == b"b" and clients[2].owner_session(node) == clients[1].session_id
            # Concurrent sessions on distinct nodes, one counter: each commit
            # is conditional on the version it read, so no value is taken twice.
            with concurrent.futures.ThreadPoolExecutor(3) as pool:
                got = list(
                    pool.map(
                        lambda i, clients=clients, base=base, counter=counter: [clients[1 + i].create_ephemeral_and_increment(f"{base}/n{i}-{k}", b"", counter) for k in range(20)],
                        range(3),
                    )
                )
            values = sorted(v for run in got for v in run)
            assert values == list(range(3, 63)) and clients[1].get(counter) == b"62"
        finally:
            for c in clients:
                c.close()  # idempotent


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_zk_client_unreachable_server_times_out_clearly():
    port = closed_port()
    client = ZkClient(f"127.0.0.1:{port}", connection_timeout_ms=1000)
    with pytest.raises(ZkTimeoutError, match="zookeeper.connection.timeout.ms=1000"):
        client.start()


def test_broker_registers_itself_and_topics(zookeeper, zk_broker, topic):
    zk = ZkClient(zookeeper.connect)
    zk.start()
    try:
        # The broker listens before its ZooKeeper registration lands: wait for it
        # (and for the controller it elects) rather than read once.
        wait_for(lambda: zk.get("/brokers/ids/0") is not None and zk.get("/controller") is not None, "the broker's registration in ZooKeeper")
        reg = BrokerRegistration.from_json(0, zk.get("/brokers/ids/0"))
        assert (reg.host, reg.port) == (zk_broker.host, zk_broker.port)
        assert reg.endpoints == (f"PLAINTEXT://{zk_broker.host}:{zk_broker.port}",)
        assert zk.owner_session("/brokers/ids/0")  # ephemeral
        assert ControllerRegistration.from_json(zk.get("/controller")).broker_id == 0
        assert paths.decode_cluster_id(zk.get("/cluster/id"))
        with Producer({"metadata.broker.list": zk_broker.bootstrap, "request.required.acks": 1}) as producer:
            producer.send(ProducerData(topic=topic, key=b"k", messages=[b"v"]))
        wait_for(lambda: all(zk.get(paths.partition_state_path(topic, p)) is not None for p in range(5)), "the auto-created topic in ZooKeeper")
        assert TopicAssignment.from_json(zk.get(paths.topic_path(topic))).partitions == dict.fromkeys(range(5), (0,))
        for p in range(5):
            state = PartitionState.from_json(zk.get(paths.partition_state_path(topic, p)))
            assert state.leader == 0 and state.isr == (0,)
    finally:
        zk.close()


def test_broker_restart_registers_existing_topics_and_leaves_on_stop(zookeeper, tmp_path):
    zk = ZkClient(zookeeper.connect)
    zk.start()
    props = {"zookeeper.connect": zookeeper.connect + "/restart", "num.partitions": 2, "broker.id": 4}
    try:
        with BrokerProcess(log_dir=tmp_path / "logs", properties=props) as broker:
            with Producer({"metadata.broker.list": broker.bootstrap, "request.required.acks": 1}) as producer:
                producer.send(ProducerData(topic="kept", messages=[b"v"]))
            broker.stop()
            assert zk.get("/restart/brokers/ids/4") is None  # ephemeral: gone with the session
            zk.delete("/restart/brokers/topics", recursive=True)
            broker.start()
            reg = BrokerRegistration.from_json(4, zk.get("/restart/brokers/ids/4"))
            assert reg.port == broker.port
            assert TopicAssignment.from_json(zk.get("/restart/brokers/topics/kept")).partition_ids == [0, 1]
            # The controller (this broker) writes the partition states just after start-up.
            wait_for(lambda: zk.get("/restart/brokers/topics/kept/partitions/1/state") is not None, "the partition states", timeout=15)
            assert PartitionState.from_json(zk.get("/restart/brokers/topics/kept/partitions/1/state")).leader == 4
    finally:
        zk.close()


def test_broker_fails_clearly_when_zookeeper_is_unreachable():
    port = closed_port()
    broker = BrokerProcess(properties={"zookeeper.connect": f"127.0.0.1:{port}", "zookeeper.connection.timeout.ms": 1000})
    try:
        with pytest.raises(BrokerProcessError) as info:
            broker.start()
    finally:
        broker.cleanup()
    assert "Unable to connect to ZooKeeper" in str(info.value)
    assert "zookeeper.connection.timeout.ms=1000" in str(info.value)  # it gave up after the connection timeout


def test_second_broker_with_the_same_id_is_refused(zookeeper):
    props = {"zookeeper.connect": zookeeper.connect + "/dup", "broker.id": 9, "zookeeper.session.timeout.ms": 2000}
    with BrokerProcess(properties=props):
        other = BrokerProcess(properties=props)
        try:
            with pytest.raises(BrokerProcessError, match="already registered"):
                other.start()
        finally:
            other.cleanup()


def test_kazoo_reconnect_noise_is_info_not_warning(caplog):
    """When the ZooKeeper server goes away kazoo warns about every dropped
    connection and reconnect attempt; kclient passes those on at INFO under
    ``kclient.zk.kazoo`` so they do not reach a user's WARNING log."""
    import logging

    from conftest import require_zookeeper

    from kclient.testing import ZooKeeperProcess

    require_zookeeper()
    with ZooKeeperProcess() as server:
        client = ZkClient(server.connect, session_timeout_ms=10_000)
        client.start()
        try:
            with caplog.at_level(logging.DEBUG):
                server.kill()
                wait_for(lambda: any(r.name == "kclient.zk.kazoo" and "Connection dropped" in r.getMessage() for r in caplog.records), "kazoo's 'Connection dropped'", timeout=20, interval=0.1)
        finally:
            client.close()
    dropped = [r for r in caplog.records if r.name == "kclient.zk.kazoo" and "Connection dropped" in r.getMessage()]
    assert dropped, [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert all(r.levelno == logging.INFO for r in dropped)
    assert not [r for r in caplog.records if r.name.startswith(("kazoo", "kclient.zk.kazoo")) and r.levelno == logging.WARNING]
