"""ConsumerConnector groups against each broker.

- ZooKeeper coordination (Kafka 0.8's ``/consumers/<group>`` layout,
  "Distribution" in the Kafka 0.8 documentation) over the brokers
  registered in ZooKeeper: the bundled broker and Kafka 3.9 in ZooKeeper
  mode (`zk_target`; Kafka 4 has no ZooKeeper, KIP-833). Two connectors of
  one group split the partitions (range and roundrobin), commit, shut
  down, and a new connector resumes at the committed offsets.
- Broker coordination (``group.coordination=broker``, the classic
  "consumer" group protocol: JoinGroup / SyncGroup / Heartbeat) against
  every broker, in ONE group with Kafka's own Java consumer
  (``VerifiableConsumer``, a KafkaConsumer with ``group.protocol=classic``)
  with Kafka's ``RangeAssignor`` or ``RoundRobinAssignor``: both members
  get partitions, every record is consumed exactly once between them, and
  each side resumes at the offsets the other committed.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import threading
import uuid
from typing import Any

import pytest
from helpers.raw import SocketClient
from helpers.wait import wait_for as _wait_for

from kclient import AdminClient, NewTopic, Producer, ProducerData
from kclient.client.consumer.group.connector import ConsumerConnector
from kclient.client.consumer.group.streams import KafkaStream
from kclient.errors import ConsumerTimeoutError
from kclient.protocol.messages import OFFSET_COMMIT
from kclient.testing import kafka_tool_command
from kclient.testing.cluster import metadata_shows_leaders

DEADLINE = 120.0
#: Partitions of every topic here: an odd count, so range ({0,1,2}, {3,4})
#: and roundrobin ({0,2,4}, {1,3}) split two members differently.
PARTITIONS = 5
JAVA_ASSIGNORS = {"range": "org.apache.kafka.clients.consumer.RangeAssignor", "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor"}
#: What each assignor gives two members of one group over `PARTITIONS`
#: partitions of one topic (the first member in member-id order takes the
#: first set).
SPLITS = {"range": {frozenset({0, 1, 2}), frozenset({3, 4})}, "roundrobin": {frozenset({0, 2, 4}), frozenset({1, 3})}}


wait_until = functools.partial(_wait_for, timeout=DEADLINE, interval=0.05)


def new_topic(target, name: str | None = None) -> str:
    name = name or f"group-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
        admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])
    wait_until(lambda: metadata_shows_leaders([target.process], name, range(PARTITIONS)), f"leaders of {name}")
    return name


class ModuloPartitioner:
    """Partition ``int(key) % partitions``: the records spread evenly."""

    def partition(self, key: bytes | None, num_partitions: int) -> int:
        return int(key or b"0") % num_partitions


def produce(target, topic: str, first: int, count: int) -> None:
    """Records ``first .. first+count-1``, value = key = the number, on
    partition ``n % PARTITIONS`` (an explicit partition through the key:
    the partitioner would spread them unevenly)."""
    config = {"bootstrap.servers": target.bootstrap, "request.required.acks": -1, "producer.type": "sync", "partitioner.class": ModuloPartitioner()}
    with Producer(config) as producer:
        producer.send([ProducerData(topic, str(n).encode(), [str(n).encode()]) for n in range(first, first + count)])


class StreamReader(threading.Thread):
    """Reads a connector's streams into one list until stopped."""

    def __init__(self, streams: list[KafkaStream]) -> None:
        super().__init__(daemon=True)
        self.streams = streams
        self.lock = threading.Lock()
        self.records: list[tuple[int, int, int]] = []  # (number, partition, offset)
        self.stop_event = threading.Event()
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._read, args=(s,), daemon=True) for s in streams]

    def start(self) -> None:  # type: ignore[override]
        for t in self.threads:
            t.start()

    def _read(self, stream: KafkaStream) -> None:
        try:
            while not self.stop_event.is_set():
                try:
                    m = next(stream)
                except ConsumerTimeoutError:
                    continue
                except StopIteration:
                    return
                with self.lock:
                    self.records.append((int(m.message), m.partition, m.offset))
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)

    def numbers(self) -> list[int]:
        with self.lock:
            return [n for n, _, _ in self.records]

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(DEADLINE)
        assert not self.errors, self.errors


# ---------------------------------------------------------------- ZooKeeper coordination


def zk_config(target, group: str, **extra: Any) -> dict[str, Any]:
    return {
        "group.id": group,
        "zookeeper.connect": target.zookeeper_connect,
        "auto.offset.reset": "smallest",
        "consumer.timeout.ms": 200,
        "auto.commit.enable": False,
        "rebalance.backoff.ms": 200,
        "rebalance.max.retries": 50,
        "zookeeper.session.timeout.ms": 6000,
        **extra,
    }


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_zookeeper_group_splits_commits_and_resumes(zk_target, strategy):
    target = zk_target
    topic = new_topic(target)
    group = f"zk-{uuid.uuid4().hex[:8]}"
    produce(target, topic, 0, 100)
    config = zk_config(target, group, **{"partition.assignment.strategy": strategy})
    first = ConsumerConnector(config)
    second = ConsumerConnector(config)
    readers = []
    try:
        for c in (first, second):
            readers.append(StreamReader(c.create_message_streams({topic: 1})[topic]))
        split = wait_until(
            lambda: (lambda a, b: (a, b) if a and b and a | b == set(range(PARTITIONS)) and not a & b else None)(
                {p for t, p in first.owned_partitions()}, {p for t, p in second.owned_partitions()}
            ),
            "the two connectors to split the partitions",
        )
        if strategy == "range":
            # Kafka 0.8's range over the sorted consumer thread ids.
            assert {frozenset(s) for s in split} == SPLITS["range"]
        else:
            # 0.8.2's roundrobin deals in the Java hash order of "[topic,p]": 3 and 2.
            assert sorted(len(s) for s in split) == [2, 3]
        for r in readers:
            r.start()
        wait_until(lambda: len(readers[0].numbers()) + len(readers[1].numbers()) >= 100, "100 records")
        for r in readers:
            r.stop()
        got = readers[0].numbers() + readers[1].numbers()
        assert sorted(got) == list(range(100)), "every record exactly once between the two"
        for r, c in zip(readers, (first, second)):
            owned = {p for _, p in c.owned_partitions()}
            assert {p for _, p, _ in r.records} <= owned
        first.commit_offsets()
        second.commit_offsets()
    finally:
        first.shutdown()
        second.shutdown()
    produce(target, topic, 100, 50)
    with ConsumerConnector(config) as third:
        reader = StreamReader(third.create_message_streams({topic: 2})[topic])
        reader.start()
        wait_until(lambda: len(reader.numbers()) >= 50, "the 50 records after the commit")
        reader.stop()
        assert sorted(reader.numbers()) == list(range(100, 150)), "resumed at the committed offsets"


# ---------------------------------------------------------------- broker coordination with Kafka's Java consumer


class JavaConsumer:
    """Kafka's ``VerifiableConsumer`` in the group (it commits synchronously
    after every poll; ``--verbose`` prints each record it consumed)."""

    def __init__(self, target, topic: str, group: str, strategy: str, *, protocol: str = "classic", autocommit: bool = False) -> None:
        release = target.release or "4"
        args = ["--group-protocol", protocol]
        if protocol == "classic":
            args += ["--assignment-strategy", JAVA_ASSIGNORS[strategy], "--session-timeout", "10000"]
        else:
            args += ["--group-remote-assignor", "uniform" if strategy == "roundrobin" else strategy]
        if autocommit:
            args.append("--enable-autocommit")
        command = kafka_tool_command(
            "kafka-verifiable-consumer",
            "--bootstrap-server", target.bootstrap,
            "--topic", topic,
            "--group-id", group,
            *args,
            "--reset-policy", "earliest",
            "--verbose",
            release=release,
        )  # fmt: skip
        self.lock = threading.Lock()
        self.events: list[dict] = []
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                with self.lock:
                    self.events.append(json.loads(line))

    def of(self, name: str) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e.get("name") == name]

    def assignment(self) -> set[int] | None:
        """Its partitions after the latest rebalance (None before the first)."""
        with self.lock:
            owned: set[int] | None = None
            for e in self.events:
                if e.get("name") == "partitions_assigned":
                    owned = (owned or set()) | {p["partition"] for p in e["partitions"]}
                elif e.get("name") == "partitions_revoked":
                    owned = (owned or set()) - {p["partition"] for p in e["partitions"]}
            return owned

    def numbers(self) -> list[int]:
        return [int(e["value"]) for e in self.of("record_data")]

    def committed(self) -> dict[int, int]:
        """The latest successful commit per partition."""
        out: dict[int, int] = {}
        for e in self.of("offsets_committed"):
            if e.get("success"):
                for o in e["offsets"]:
                    out[o["partition"]] = o["offset"]
        return out

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"VerifiableConsumer exited with {self.proc.returncode}: {''.join(self.stderr)[-3000:]}")
        return True

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup; the coordinator drops it after its session timeout."""
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        """SIGTERM: its shutdown hook wakes the consumer, which closes
        (LeaveGroup) and prints shutdown_complete."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def broker_config(target, group: str, strategy: str, **extra: Any) -> dict[str, Any]:
    return {
        "group.id": group,
        "bootstrap.servers": target.bootstrap,
        "group.coordination": "broker",
        "partition.assignment.strategy": strategy,
        "auto.offset.reset": "smallest",
        "consumer.timeout.ms": 200,
        "auto.commit.enable": False,
        "heartbeat.interval.ms": 500,
        "session.timeout.ms": 10000,
        "rebalance.max.retries": 20,
        **extra,
    }


@pytest.mark.parametrize("strategy,first_member", [("range", "kclient"), ("roundrobin", "java"), ("range", "java"), ("roundrobin", "kclient")])
def test_broker_group_with_kafkas_java_consumer(target, strategy, first_member):
    """kclient and Kafka's Java consumer in one group: the first member to
    join leads it and computes the assignment for both (so each side's
    assignor is exercised on the other's subscription)."""
    topic = new_topic(target)
    group = f"java-{uuid.uuid4().hex[:8]}"
    config = broker_config(target, group, strategy)
    java = kclient = None
    try:
        if first_member == "java":
            java = JavaConsumer(target, topic, group, strategy)
            wait_until(lambda: java.alive() and java.assignment() == set(range(PARTITIONS)), "the Java consumer to own every partition")
        kclient = ConsumerConnector(config)
        reader = StreamReader(kclient.create_message_streams({topic: 1})[topic])
        if java is None:
            wait_until(lambda: {p for _, p in kclient.owned_partitions()} == set(range(PARTITIONS)), "kclient to own every partition")
            java = JavaConsumer(target, topic, group, strategy)

        def settled():
            java.alive()
            mine = {p for _, p in kclient.owned_partitions()}
            theirs = java.assignment() or set()
            return (mine, theirs) if mine and theirs and not mine & theirs and mine | theirs == set(range(PARTITIONS)) else None

        mine, theirs = wait_until(settled, "both members to own partitions")
        assert {frozenset(mine), frozenset(theirs)} == SPLITS[strategy]
        reader.start()
        produce(target, topic, 0, 200)
        wait_until(lambda: java.alive() and len(reader.numbers()) + len(java.numbers()) >= 200, "the 200 records")
        reader.stop()
        assert sorted(reader.numbers() + java.numbers()) == list(range(200)), "every record exactly once between the two"
        assert {p for _, p, _ in reader.records} == mine
        assert {e["partition"] for e in java.of("record_data")} == theirs
        kclient.commit_offsets()
        wait_until(lambda: java.committed() == dict.fromkeys(theirs, 40), "the Java consumer's commits")
        # The group's committed offsets, as the coordinator keeps them.
        with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
            offsets = admin.list_consumer_group_offsets(group)
        assert offsets == {(topic, p): 40 for p in range(PARTITIONS)}
    finally:
        if kclient is not None:
            kclient.shutdown()
        if java is not None:
            java.stop()
    # kclient alone resumes where both left off (its own and the Java consumer's commits) ...
    produce(target, topic, 200, 50)
    with ConsumerConnector(config) as again:
        reader = StreamReader(again.create_message_streams({topic: 1})[topic])
        reader.start()
        wait_until(lambda: len(reader.numbers()) >= 50, "the 50 records after the commit")
        reader.stop()
        assert sorted(reader.numbers()) == list(range(200, 250)), "kclient resumed at the group's offsets"
        again.commit_offsets()
    # ... and the Java consumer alone resumes at kclient's commits.
    produce(target, topic, 250, 50)
    java = JavaConsumer(target, topic, group, strategy)
    try:
        wait_until(lambda: java.alive() and len(java.numbers()) >= 50, "the Java consumer to read the last 50")
        wait_until(lambda: java.committed() == dict.fromkeys(range(PARTITIONS), 60), "its commits")
        assert sorted(java.numbers()) == list(range(250, 300)), "the Java consumer resumed at kclient's offsets"
    finally:
        java.stop()


def test_broker_group_rebalances_as_the_java_consumer_leaves_joins_and_dies(target):
    """Rebalances between kclient and the Java consumer, both committing
    automatically: the Java consumer leaves (LeaveGroup), a new one joins,
    then it is killed (SIGKILL: the coordinator drops it once its session
    times out). After each, kclient owns what it should and nothing
    produced is missed (at-least-once: a record may come twice around a
    rebalance)."""
    topic = new_topic(target)
    group = f"rebalance-{uuid.uuid4().hex[:8]}"
    everything = set(range(PARTITIONS))
    config = broker_config(target, group, "range", **{"auto.commit.enable": True, "auto.commit.interval.ms": 200})
    java_numbers: list[int] = []
    with ConsumerConnector(config) as kclient:
        reader = StreamReader(kclient.create_message_streams({topic: 1})[topic])
        reader.start()
        try:
            mine = lambda: {p for _, p in kclient.owned_partitions()}  # noqa: E731
            wait_until(lambda: mine() == everything, "kclient to own every partition")
            produced = 0
            for step in ("leave", "kill"):
                java = JavaConsumer(target, topic, group, "range", autocommit=True)
                try:
                    wait_until(lambda java=java: java.alive() and java.assignment() and not java.assignment() & mine() and java.assignment() | mine() == everything, "the split")
                    produce(target, topic, produced, 100)
                    produced += 100
                    wait_until(
                        lambda java=java, produced=produced: java.alive() and set(range(produced)) <= set(reader.numbers()) | set(java_numbers) | set(java.numbers()),
                        "the records while both are in",
                    )
                    if step == "leave":
                        java.stop()
                    else:
                        java.kill()
                finally:
                    java_numbers.extend(java.numbers())
                    java.stop()
                wait_until(lambda: mine() == everything, f"kclient to own every partition again after the Java consumer's {step}")
                produce(target, topic, produced, 100)
                produced += 100
                wait_until(lambda produced=produced: set(range(produced)) <= set(reader.numbers()) | set(java_numbers), f"every record after the {step}")
        finally:
            reader.stop()
    assert set(reader.numbers()) | set(java_numbers) == set(range(produced))


def test_kafka4_mixed_group_with_a_kip848_java_consumer(kafka4_target):
    """Kafka 4's new consumer group protocol (KIP-848, ConsumerGroupHeartbeat)
    beside kclient's classic member: the coordinator assigns for both with
    its server-side assignor, kclient's member gets its share through
    JoinGroup / SyncGroup (KIP-848's online migration: a classic member in
    a consumer group), and between them every record is read once."""
    target = kafka4_target
    topic = new_topic(target)
    group = f"kip848-{uuid.uuid4().hex[:8]}"
    config = broker_config(target, group, "range")
    java = JavaConsumer(target, topic, group, "range", protocol="consumer")
    try:
        wait_until(lambda: java.alive() and java.assignment() == set(range(PARTITIONS)), "the Java consumer to own every partition")
        with ConsumerConnector(config) as kclient:
            reader = StreamReader(kclient.create_message_streams({topic: 1})[topic])

            def settled():
                java.alive()
                mine = {p for _, p in kclient.owned_partitions()}
                theirs = java.assignment() or set()
                return (mine, theirs) if mine and theirs and not mine & theirs and mine | theirs == set(range(PARTITIONS)) else None

            mine, theirs = wait_until(settled, "both members to own partitions")
            reader.start()
            produce(target, topic, 0, 200)
            wait_until(lambda: java.alive() and len(reader.numbers()) + len(java.numbers()) >= 200, "the 200 records")
            reader.stop()
            assert sorted(reader.numbers() + java.numbers()) == list(range(200))
            assert {p for _, p, _ in reader.records} == mine
            kclient.commit_offsets()
    finally:
        java.stop()


@pytest.mark.parametrize("listener,mechanism", [("SSL", None), ("SASL_SSL", "SCRAM-SHA-256")])
def test_zookeeper_group_over_a_secured_listener(zk_target, listener, mechanism):
    """A ZooKeeper-coordinated connector picks the broker endpoint of its
    ``security.protocol`` from the registration's ``endpoints`` (Kafka
    0.9's registration version 2+) and reads over it."""
    target = zk_target
    topic = new_topic(target)
    produce(target, topic, 0, 20)
    security = target.client_properties(listener, mechanism)
    security.pop("bootstrap.servers")
    config = zk_config(target, f"zk-{listener.lower()}-{uuid.uuid4().hex[:8]}", **security)
    with ConsumerConnector(config) as connector:
        reader = StreamReader(connector.create_message_streams({topic: 1})[topic])
        reader.start()
        wait_until(lambda: len(reader.numbers()) >= 20, "the 20 records")
        reader.stop()
    assert sorted(reader.numbers()) == list(range(20))


@pytest.mark.parametrize("dual_commit", [True, False])
def test_zookeeper_group_with_offsets_in_kafka(zk_target, dual_commit):
    """``offsets.storage=kafka`` (Kafka 0.8.2): a ZooKeeper-coordinated
    group commits through the group coordinator (a standalone OffsetCommit:
    generation -1, no member id) and resumes from there."""
    target = zk_target
    topic = new_topic(target)
    group = f"zk-kafka-offsets-{uuid.uuid4().hex[:8]}"
    produce(target, topic, 0, 50)
    config = zk_config(target, group, **{"offsets.storage": "kafka", "dual.commit.enabled": dual_commit})
    with ConsumerConnector(config) as connector:
        reader = StreamReader(connector.create_message_streams({topic: 1})[topic])
        reader.start()
        wait_until(lambda: len(reader.numbers()) >= 50, "the 50 records")
        reader.stop()
        connector.commit_offsets()
    with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
        assert admin.list_consumer_group_offsets(group) == {(topic, p): 10 for p in range(PARTITIONS)}
    produce(target, topic, 50, 25)
    with ConsumerConnector(config) as connector:
        reader = StreamReader(connector.create_message_streams({topic: 1})[topic])
        reader.start()
        wait_until(lambda: len(reader.numbers()) >= 25, "the 25 records after the commit")
        reader.stop()
    assert sorted(reader.numbers()) == list(range(50, 75))


@pytest.mark.parametrize("listener,mechanism", [("SSL", None), ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512")])
def test_broker_group_over_a_secured_listener(target, listener, mechanism):
    """A broker-coordinated connector joins, reads, commits and resumes over
    TLS and SASL (the coordinator's connection too)."""
    topic = new_topic(target)
    produce(target, topic, 0, 20)
    config = broker_config(target, f"secured-{uuid.uuid4().hex[:8]}", "range", **target.client_properties(listener, mechanism))
    for first, count in ((0, 20), (20, 10)):
        if first:
            produce(target, topic, first, count)
        with ConsumerConnector(config) as connector:
            reader = StreamReader(connector.create_message_streams({topic: 1})[topic])
            reader.start()
            wait_until(lambda reader=reader, count=count: len(reader.numbers()) >= count, f"{count} records")
            reader.stop()
            connector.commit_offsets()
        assert sorted(reader.numbers()) == list(range(first, first + count))


def test_zookeeper_group_resumes_at_offsets_committed_with_offset_commit_v0(zk_target):
    """OffsetCommit v0 (Kafka 0.8.1's API, as kafka-python's 0.8.1 mode
    sends it) keeps offsets in ZooKeeper, where a ZooKeeper-coordinated
    connector of the same group starts from them (Kafka 3.9 in ZooKeeper
    mode; the bundled broker since issue 25; Kafka 4 removed v0, KIP-896)."""
    target = zk_target
    topic = new_topic(target)
    group = f"zk-v0-{uuid.uuid4().hex[:8]}"
    produce(target, topic, 0, 50)
    body = {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": p, "committed_offset": 6, "committed_metadata": ""} for p in range(PARTITIONS)]}]}
    with SocketClient(target.host, target.port, client_id="v0-committer", timeout=DEADLINE) as c:
        response = c.request(OFFSET_COMMIT, 0, body)
    assert [p["error_code"] for t in response["topics"] for p in t["partitions"]] == [0] * PARTITIONS
    with ConsumerConnector(zk_config(target, group)) as connector:
        reader = StreamReader(connector.create_message_streams({topic: 1})[topic])
        reader.start()
        wait_until(lambda: len(reader.numbers()) >= 20, "the records after offset 6")
        reader.stop()
    # Partition p holds the records n with n % 5 == p, record n at offset n // 5.
    assert sorted(reader.numbers()) == list(range(30, 50)), "each partition from offset 6"


def test_topic_filter_picks_up_a_new_topic(target):
    """``create_message_streams_by_filter(Whitelist(...))``: a topic created
    after the group was joined is subscribed too, with ZooKeeper
    coordination (a watch on ``/brokers/topics``) where the broker is in
    ZooKeeper, and with broker coordination (Metadata every
    ``metadata.max.age.ms``) on every broker."""
    from kclient.client.consumer.group.streams import Whitelist

    prefix = f"filter-{uuid.uuid4().hex[:6]}"
    modes = ["broker"] + (["zookeeper"] if target.zookeeper_connect else [])
    first = new_topic(target, f"{prefix}-a")
    produce(target, first, 0, 10)
    connectors = []
    try:
        readers = []
        for mode in modes:
            group = f"{prefix}-{mode}"
            if mode == "broker":
                config = broker_config(target, group, "range", **{"metadata.max.age.ms": 500})
            else:
                config = zk_config(target, group)
            connector = ConsumerConnector(config)
            connectors.append(connector)
            reader = StreamReader(connector.create_message_streams_by_filter(Whitelist(f"{prefix}-.*"), 1))
            reader.start()
            readers.append(reader)
        for reader in readers:
            wait_until(lambda reader=reader: len(reader.numbers()) >= 10, "the first topic's records")
        second = new_topic(target, f"{prefix}-b")
        produce(target, second, 10, 10)
        for mode, reader in zip(modes, readers):
            wait_until(lambda reader=reader: len(reader.numbers()) >= 20, f"the new topic's records ({mode} coordination)")
            reader.stop()
            assert sorted(reader.numbers()) == list(range(20)), mode
    finally:
        for connector in connectors:
            connector.shutdown()
