"""Other clients' KIP-848 consumers (``group.protocol=consumer``) against
the bundled broker's consumer group protocol: Apache Kafka 4's own Java
consumer (``kafka-console-consumer``) and librdkafka's (confluent-kafka).
Two members of one group share the partitions (ConsumerGroupDescribe shows
both with partitions), and every record produced afterwards is consumed
exactly once; Kafka's ``kafka-consumer-groups`` lists and describes the
group."""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections import Counter
from collections.abc import Callable

import pytest
from helpers.groups import group_broker_properties
from helpers.raw import SocketClient, make_topic
from helpers.records import committed_to_log_end, produce
from helpers.wait import wait_for

from kclient.protocol.messages import CONSUMER_GROUP_DESCRIBE
from kclient.testing import BrokerProcess
from kclient.testing.kafka import kafka_tool, kafka_tool_command

PARTITIONS = 4
RECORDS = 200
DEADLINE = 120.0


@pytest.fixture(scope="module")
def broker():
    properties = {
        **group_broker_properties(PARTITIONS),
        "group.consumer.heartbeat.interval.ms": 500,
        "group.consumer.min.heartbeat.interval.ms": 100,
    }
    with BrokerProcess(properties=properties) as proc:
        yield proc


def new_topic(broker, prefix: str) -> str:
    """A fresh topic of `PARTITIONS` partitions, empty: members reading
    from the earliest offset read only what the test produces."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with SocketClient(broker.host, broker.port, client_id="kip848-interop", timeout=30.0) as c:
        make_topic(c, name)
    return name


def members_with_partitions(broker, group: str) -> list[int] | None:
    """Partitions per member of ``group`` when every member has reached
    the target assignment, else None."""
    with SocketClient(broker.host, broker.port, client_id="kip848-interop", timeout=30.0) as c:
        described = c.request(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    if described["error_code"] != 0 or described["group_state"] != "Stable":
        return None
    return sorted(sum(len(tp["partitions"]) for tp in m["assignment"]["topic_partitions"]) for m in described["members"])


def described_members(broker, group: str) -> list[tuple[str, int]]:
    """``[(member id, member epoch)]`` of ``group`` (ConsumerGroupDescribe)."""
    with SocketClient(broker.host, broker.port, client_id="kip848-interop", timeout=30.0) as c:
        described = c.request(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    return sorted((m["member_id"], m["member_epoch"]) for m in described["members"])


def share_then_consume(broker, group: str, topic: str, received: list[Counter[str]]) -> None:
    """Wait for two members that share the partitions, produce, and check
    every record is consumed exactly once (by one member or the other)."""
    wait_for(lambda: members_with_partitions(broker, group) == [PARTITIONS // 2, PARTITIONS // 2], "two members with two partitions each", timeout=DEADLINE)
    values = [f"v{i}" for i in range(RECORDS)]
    produce(broker, topic, [(f"k{i}", v) for i, v in enumerate(values)], per_send=None)

    def all_read() -> bool:
        return sum(sum(c.values()) for c in received) >= RECORDS

    wait_for(all_read, f"{RECORDS} records consumed", timeout=DEADLINE)
    total: Counter[str] = Counter()
    for c in received:
        total.update(c)
    assert set(total) == set(values) and max(total.values()) == 1
    assert all(c for c in received), "a member consumed nothing"


def _read_lines(proc: subprocess.Popen[str], into: Counter[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip():
            into[line.strip()] += 1


def test_java_consumers_share_a_group(broker):
    group, topic = f"java-{uuid.uuid4().hex[:8]}", new_topic(broker, "jt")
    received = [Counter[str](), Counter[str]()]
    procs = []
    try:
        for counter in received:
            command = kafka_tool_command(
                "kafka-console-consumer",
                "--bootstrap-server", broker.bootstrap,
                "--topic", topic,
                "--group", group,
                "--command-property", "group.protocol=consumer",
                "--from-beginning",
            )
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
            procs.append(proc)
            threading.Thread(target=_read_lines, args=(proc, counter), daemon=True).start()
        share_then_consume(broker, group, topic, received)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def _confluent_member(bootstrap: str, group: str, topic: str, into: Counter[str], stop: threading.Event) -> Callable[[], None]:
    def run() -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    into[message.value().decode()] += 1
        finally:
            consumer.close()

    return run


def test_librdkafka_consumers_share_a_group(broker):
    import confluent_kafka

    assert confluent_kafka.libversion()[1] >= 0x020A0000  # KIP-848 is generally available from librdkafka 2.10
    group, topic = f"rdk-{uuid.uuid4().hex[:8]}", new_topic(broker, "rt")
    received = [Counter[str](), Counter[str]()]
    stop = threading.Event()
    threads = [threading.Thread(target=_confluent_member(broker.bootstrap, group, topic, c, stop), daemon=True) for c in received]
    for t in threads:
        t.start()
    try:
        share_then_consume(broker, group, topic, received)
        # Kafka's own admin tool sees the group through ConsumerGroupDescribe and ListGroups v5.
        listed = kafka_tool("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--list", "--type", timeout=DEADLINE).stdout
        assert any(line.split() == [group, "Consumer"] for line in listed.splitlines())
        members = kafka_tool("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", group, "--members", timeout=DEADLINE).stdout
        rows = [line.split() for line in members.splitlines() if line.startswith(group)]
        assert len(rows) == 2 and all(row[-1] == str(PARTITIONS // 2) for row in rows)
        state = kafka_tool("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", group, "--state", timeout=DEADLINE).stdout
        assert any(line.startswith(group) and line.split()[-3:] == ["uniform", "Stable", "2"] for line in state.splitlines())
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)


def committed_total(bootstrap: str, group: str) -> int:
    """The sum of ``group``'s committed offsets: the records it committed,
    on partitions read from offset 0."""
    from kclient import AdminClient

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        return sum(admin.list_consumer_group_offsets(group).values())


def _committing_member(bootstrap: str, group: str, topic: str, into: Counter[str], stop: threading.Event) -> Callable[[], None]:
    """A librdkafka member that commits each record it reads (synchronously)."""

    def run() -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    into[message.value().decode()] += 1
                    consumer.commit(message=message, asynchronous=False)
        finally:
            consumer.close()

    return run


def test_a_member_keeps_its_place_when_the_coordinator_restarts(tmp_path):
    """The group's records in ``__consumer_offsets`` are read back by the
    restarted coordinator: the librdkafka member goes on under the same
    member id and epoch (no rejoin), from its committed offsets; nothing
    read twice, nothing lost."""
    properties = {**group_broker_properties(PARTITIONS), "group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 100}
    with BrokerProcess(properties=properties, keep_port=True, log_dir=str(tmp_path / "logs")) as broker:
        group, topic = f"restart-{uuid.uuid4().hex[:8]}", new_topic(broker, "rs")
        received: Counter[str] = Counter()
        stop = threading.Event()
        thread = threading.Thread(target=_committing_member(broker.bootstrap, group, topic, received, stop), daemon=True)
        thread.start()
        try:
            first = [f"a{i}" for i in range(40)]
            produce(broker, topic, [(f"k{i}", v) for i, v in enumerate(first)], per_send=None)
            wait_for(lambda: set(received) >= set(first), "the first records", timeout=DEADLINE)
            wait_for(lambda: committed_to_log_end(broker, group, topic, range(PARTITIONS)), "the first records committed", timeout=DEADLINE)
            before = described_members(broker, group)
            broker.stop()
            broker.start()
            second = [f"b{i}" for i in range(40)]
            produce(broker, topic, [(f"k{i}", v) for i, v in enumerate(second)], per_send=None)
            wait_for(lambda: set(received) >= set(second), "the records produced after the restart", timeout=DEADLINE)
            assert described_members(broker, group) == before
            assert "error 25" not in broker.output()  # no UNKNOWN_MEMBER_ID: the member did not have to join again
        finally:
            stop.set()
            thread.join(timeout=30)
        assert set(received) == set(first) | set(second)
        assert max(received.values()) == 1, [v for v, n in received.items() if n > 1]


def test_a_member_keeps_its_place_when_the_coordinator_moves(zookeeper):
    """Three brokers, ``__consumer_offsets`` replicated three times: the
    coordinator is killed, the new leader of the group's offsets partition
    reads the group back from its replica, and the librdkafka member goes
    on under the same member id, reading what is produced afterwards,
    nothing twice."""
    from kclient.protocol.messages import FIND_COORDINATOR
    from kclient.testing import Cluster

    properties = {
        "offsets.topic.num.partitions": 3,
        "offsets.topic.replication.factor": 3,
        "group.consumer.heartbeat.interval.ms": 500,
        "group.consumer.min.heartbeat.interval.ms": 100,
        "zookeeper.session.timeout.ms": 2000,
        "replica.lag.time.max.ms": 2000,
        "replica.fetch.wait.max.ms": 100,
    }
    group, topic = f"move-{uuid.uuid4().hex[:8]}", f"mv-{uuid.uuid4().hex[:8]}"
    with Cluster(brokers=3, zookeeper=zookeeper, properties=properties) as cluster:
        cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)

        def coordinator(exclude: int | None = None) -> int | None:
            for broker_id, b in cluster.brokers.items():
                if broker_id == exclude:
                    continue
                try:
                    with SocketClient(b.host, b.port, client_id="probe", timeout=30.0) as c:
                        body = c.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
                except OSError:
                    continue
                if body["error_code"] == 0 and body["node_id"] != exclude:
                    return body["node_id"]
            return None

        def members_on(broker_id: int) -> list[tuple[str, int]]:
            return described_members(cluster.broker(broker_id), group)

        received: Counter[str] = Counter()
        stop = threading.Event()
        thread = threading.Thread(target=_committing_member(cluster.bootstrap, group, topic, received, stop), daemon=True)
        thread.start()
        try:
            first = [f"a{i}" for i in range(40)]
            produce(cluster.bootstrap, topic, [(f"k{i}", v) for i, v in enumerate(first)], per_send=None)
            wait_for(lambda: set(received) >= set(first), "the first records", timeout=DEADLINE)
            old = wait_for(coordinator, "the coordinator", timeout=DEADLINE)
            wait_for(lambda: committed_total(cluster.bootstrap, group) == len(first), "the first records committed", timeout=DEADLINE)
            before = members_on(old)
            cluster.kill(old)
            new = wait_for(lambda: coordinator(exclude=old), "a new coordinator", timeout=DEADLINE)
            for p in range(PARTITIONS):
                cluster.wait_for_leader(topic, p, exclude=[old], timeout=DEADLINE)
            second = [f"b{i}" for i in range(40)]
            survivors = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != old)
            retrying = {"message.send.max.retries": 20, "retry.backoff.ms": 250}
            produce(survivors, topic, [(f"k{i}", v) for i, v in enumerate(second)], per_send=None, config=retrying)
            wait_for(lambda: set(received) >= set(second), "the records produced after the move", timeout=DEADLINE)
            assert members_on(new) == before
        finally:
            stop.set()
            thread.join(timeout=30)
        assert set(received) == set(first) | set(second)
        assert max(received.values()) == 1, [v for v, n in received.items() if n > 1]


def _java_member(broker, group: str, topic: str, instance_id: str) -> subprocess.Popen[str]:
    command = kafka_tool_command(
        "kafka-console-consumer",
        "--bootstrap-server", broker.bootstrap,
        "--topic", topic,
        "--group", group,
        "--command-property", "group.protocol=consumer",
        "--command-property", f"group.instance.id={instance_id}",
    )
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)


def test_a_static_java_member_comes_back_to_its_partitions(broker):
    """KIP-848 static membership with Kafka's Java consumer: a member with a
    ``group.instance.id`` that stops leaves with epoch -2 and keeps its
    partitions; started again, it takes them back under a new member id,
    with no new group epoch (no rebalance)."""
    group, topic = f"static-{uuid.uuid4().hex[:8]}", new_topic(broker, "st")

    def described() -> dict:
        with SocketClient(broker.host, broker.port, client_id="kip848-interop", timeout=30.0) as c:
            return c.request(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]

    def by_instance() -> dict[str, tuple[str, int, list[int]]]:
        return {
            m["instance_id"]: (m["member_id"], m["member_epoch"], sorted(p for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"]))
            for m in described()["members"]
        }

    procs = {i: _java_member(broker, group, topic, i) for i in ("ja", "jb")}
    try:
        wait_for(lambda: members_with_partitions(broker, group) == [PARTITIONS // 2, PARTITIONS // 2], "two static members with two partitions each", timeout=DEADLINE)
        before, epoch = by_instance(), described()["group_epoch"]
        procs["ja"].terminate()
        procs["ja"].wait(timeout=60)
        wait_for(lambda: by_instance()["ja"][1] == -2, "member ja left for now (epoch -2)", timeout=DEADLINE)
        assert by_instance()["ja"][2] == before["ja"][2]  # its partitions wait for it
        procs["ja"] = _java_member(broker, group, topic, "ja")

        def back() -> bool:
            now = by_instance().get("ja")
            return now is not None and now[0] != before["ja"][0] and now[1] >= 0 and now[2] == before["ja"][2]

        wait_for(back, "member ja back with its partitions", timeout=DEADLINE)
        assert described()["group_epoch"] == epoch and by_instance()["jb"] == before["jb"]
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            proc.wait(timeout=60)
