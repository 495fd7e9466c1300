"""Consumer groups of real peer clients against the bundled broker's group
coordinator (`kclient.broker.group`): kafka-python's ``KafkaConsumer`` and
confluent-kafka's ``Consumer`` (join, consume, commit, a second member
joining and one leaving, a broker restart after which the group resumes
from its committed offsets), aiokafka's ``AIOKafkaConsumer``, ``kcat -G``,
the admin clients' group listings, and a 3-broker cluster whose
coordinator is killed with SIGKILL.

Every scenario checks "nothing lost": the union of what the members
consumed is every record produced (at-least-once: a record may come twice
around a rebalance), and after a restart a new member reads exactly the
records produced since the last commit.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from helpers.aio_member import AioKafkaMember
from helpers.records import committed_to_log_end
from helpers.skips import require
from helpers.wait import wait_for as _wait_for

from kclient.testing import BrokerProcess, Cluster

pytestmark = pytest.mark.interop

TIMEOUT = 60.0
PARTITIONS = 4
PROPERTIES = {
    "num.partitions": PARTITIONS,
    "offsets.topic.num.partitions": 4,
    "offsets.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
}


wait_until = functools.partial(_wait_for, timeout=TIMEOUT, interval=0.1)


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    try:
        for i, v in enumerate(values):
            producer.send(topic, v.encode(), partition=i % PARTITIONS).get(timeout=TIMEOUT)
    finally:
        producer.close()


# ---------------------------------------------------------------- one member per thread


class Member(threading.Thread):
    """A consumer of one peer library polling (and committing after each
    non-empty poll) in its own thread until `stop`."""

    def __init__(self, make: Callable[[], Any], lib: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.make, self.lib = make, lib
        self.values: list[str] = []
        self.assignment: set[int] = set()
        self.commits = 0
        self.commit_errors: list[BaseException] = []
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        try:
            consumer = self.make()
            try:
                while not self._halt.is_set():
                    got = self._poll(consumer)
                    if got:
                        with self.lock:
                            self.values.extend(got)
                        self._commit(consumer)
                    self.assignment = self._assignment(consumer)
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def _poll(self, consumer) -> list[str]:
        if self.lib == "aiokafka":
            return consumer.poll_values(200)
        if self.lib == "kafka-python":
            batches = consumer.poll(timeout_ms=200)
            return [r.value.decode() for recs in batches.values() for r in recs]
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            return []
        return [msg.value().decode()]

    def _commit(self, consumer) -> None:
        try:
            if self.lib in ("kafka-python", "aiokafka"):
                consumer.commit()
            else:
                consumer.commit(asynchronous=False)
            self.commits += 1
        except Exception as exc:
            self.commit_errors.append(exc)

    def _assignment(self, consumer) -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    def consumed(self) -> set[str]:
        with self.lock:
            return set(self.values)

    def stop(self) -> None:
        self._halt.set()
        self.join(TIMEOUT)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


def kafka_python_member(bootstrap: str, group: str, topic: str) -> Callable[[], Any]:
    def make():
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )
        consumer.subscribe([topic])
        return consumer

    return make


def confluent_member(bootstrap: str, group: str, topic: str) -> Callable[[], Any]:
    def make():
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        consumer.subscribe([topic])
        return consumer

    return make


def aiokafka_member(bootstrap: str, group: str, topic: str) -> Callable[[], Any]:
    pytest.importorskip("aiokafka")
    return lambda: AioKafkaMember(bootstrap, group, topic, session_timeout_ms=10000, heartbeat_interval_ms=500)


MAKERS = {"kafka-python": kafka_python_member, "confluent-kafka": confluent_member, "aiokafka": aiokafka_member}


@pytest.fixture
def gbroker(zookeeper, tmp_path):
    properties = {"zookeeper.connect": f"{zookeeper.connect}/groups-{uuid.uuid4().hex[:8]}", **PROPERTIES}
    with BrokerProcess(log_dir=tmp_path / "logs", properties=properties, keep_port=True) as proc:
        yield proc


@pytest.mark.parametrize("lib", sorted(MAKERS))
def test_group_members_rebalance_commit_and_resume_after_restart(gbroker, topic, lib):
    group = f"{lib}-{uuid.uuid4().hex[:6]}"
    make = MAKERS[lib](gbroker.bootstrap, group, topic)
    produced = [f"a{i}" for i in range(40)]
    produce(gbroker.bootstrap, topic, produced)
    first = Member(make, lib, "first")
    first.start()
    wait_until(lambda: first.consumed() >= set(produced) and first.commits, "the first member to consume")
    assert first.assignment == set(range(PARTITIONS))

    # A second member joins: the partitions are split between the two.
    second = Member(make, lib, "second")
    second.start()
    wait_until(
        lambda: second.assignment and first.assignment and first.assignment | second.assignment == set(range(PARTITIONS))
        and not first.assignment & second.assignment,
        "the partitions to be split",
    )
    more = [f"b{i}" for i in range(40)]
    produce(gbroker.bootstrap, topic, more)
    produced += more
    wait_until(lambda: first.consumed() | second.consumed() >= set(produced), "both members to consume")
    assert second.consumed() & set(more), "the second member got none of the new records"

    # The first member leaves: the second takes every partition.
    first.stop()
    wait_until(lambda: second.assignment == set(range(PARTITIONS)), "the second member to take every partition")
    rest = [f"c{i}" for i in range(40)]
    produce(gbroker.bootstrap, topic, rest)
    produced += rest
    wait_until(lambda: first.consumed() | second.consumed() >= set(produced), "every record to be consumed")
    wait_until(lambda: committed_to_log_end(gbroker, group, topic, range(PARTITIONS)), "the group's commits at the log end")
    second.stop()
    assert first.consumed() | second.consumed() == set(produced)

    # The broker restarts; a new member resumes from the committed offsets.
    gbroker.stop()
    gbroker.start()
    after = [f"d{i}" for i in range(20)]
    produce(gbroker.bootstrap, topic, after)
    third = Member(make, lib, "third")
    third.start()
    # `after` ends every partition (produce spreads it i % PARTITIONS) and a
    # partition is read in order: a record read again would come first.
    wait_until(lambda: third.consumed() >= set(after), "the member after the restart to consume")
    third.stop()
    assert third.consumed() == set(after), "records before the last commit were read again"


def test_kafka_python_admin_and_confluent_admin_see_the_group(gbroker, topic):
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, TopicPartition

    group = f"admin-{uuid.uuid4().hex[:6]}"
    produced = [f"v{i}" for i in range(8)]
    produce(gbroker.bootstrap, topic, produced)
    member = Member(kafka_python_member(gbroker.bootstrap, group, topic), "kafka-python", "member")
    member.start()
    try:
        wait_until(lambda: member.consumed() >= set(produced) and member.commits, "the member to consume")
        # kafka-python (3.x names): ListGroups, DescribeGroups, OffsetFetch.
        admin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
        try:
            # ListGroups v5 (KIP-518 states, KIP-848 types) since the broker serves it.
            assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"} in admin.list_groups()
            described = admin.describe_groups([group])[group]
            assert (described["group_state"], described["protocol_type"], described["protocol_data"]) == ("Stable", "consumer", "range")
            (m,) = described["members"]
            assert m["member_metadata"]["topics"] == [topic]
            assert {p for a in m["member_assignment"]["assigned_partitions"] for p in a["partitions"]} == set(range(PARTITIONS))
            offsets = wait_until(
                lambda: (o := admin.list_group_offsets(group)[group]) and sum(v.offset for v in o.values()) == len(produced) and o,
                "the committed offsets",
            )
            assert set(offsets) == {TopicPartition(topic, p) for p in range(PARTITIONS)}
        finally:
            admin.close()
        # confluent-kafka (librdkafka): the same three.
        cadmin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
        listed = cadmin.list_consumer_groups().result(timeout=TIMEOUT)
        assert group in {g.group_id for g in listed.valid}
        described = cadmin.describe_consumer_groups([group])[group].result(timeout=TIMEOUT)
        assert described.group_id == group and len(described.members) == 1
        assert str(described.state).endswith("STABLE")
        result = cadmin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=TIMEOUT)
        assert sum(tp.offset for tp in result.topic_partitions if tp.topic == topic) == len(produced)
    finally:
        member.stop()


def test_aiokafka_group_commit_and_resume(gbroker, topic):
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    group = f"aiokafka-{uuid.uuid4().hex[:6]}"
    first = [f"x{i}" for i in range(12)]
    produce(gbroker.bootstrap, topic, first)

    async def consume(expected: int, linger: float) -> list[str]:
        consumer = aiokafka.AIOKafkaConsumer(
            topic, bootstrap_servers=gbroker.bootstrap, group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        got: list[str] = []
        try:
            deadline = time.monotonic() + TIMEOUT
            while len(got) < expected and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                got += [r.value.decode() for recs in batches.values() for r in recs]
            await consumer.commit()
            end = time.monotonic() + linger
            while time.monotonic() < end:
                batches = await consumer.getmany(timeout_ms=200)
                got += [r.value.decode() for recs in batches.values() for r in recs]
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(consume(len(first), 0.0))) == sorted(first)
    second = [f"y{i}" for i in range(6)]
    produce(gbroker.bootstrap, topic, second)
    assert sorted(asyncio.run(consume(len(second), 1.0))) == sorted(second)


def test_kcat_balanced_consumer_resumes_from_its_commits(gbroker, topic):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    require(None if kcat else "not on PATH", name="kcat", needs="needs kcat (.ci/run installs it)")
    group = f"kcat-{uuid.uuid4().hex[:6]}"
    first = [f"k{i}" for i in range(20)]
    produce(gbroker.bootstrap, topic, first)

    def run() -> list[str]:
        out = subprocess.run(
            [kcat, "-b", gbroker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\\n", topic],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        return [line for line in out.stdout.splitlines() if line]

    assert sorted(run()) == sorted(first)
    second = [f"l{i}" for i in range(5)]
    produce(gbroker.bootstrap, topic, second)
    assert sorted(run()) == sorted(second)


def test_cluster_coordinator_killed_group_resumes_on_the_new_one(zookeeper, topic):
    from helpers.raw import SocketClient
    from kafka import KafkaConsumer

    from kclient.protocol.messages import FIND_COORDINATOR

    props = {**PROPERTIES, "offsets.topic.replication.factor": 3}
    group = f"cluster-{uuid.uuid4().hex[:6]}"
    with Cluster(brokers=3, zookeeper=zookeeper, properties=props) as cluster:
        cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
        bootstrap = cluster.bootstrap
        produced = [f"p{i}" for i in range(40)]
        produce(bootstrap, topic, produced)

        def consume_all(expected: set[str], linger: float) -> set[str]:
            consumer = KafkaConsumer(
                bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"
            )
            consumer.subscribe([topic])
            got: set[str] = set()
            try:
                deadline = time.monotonic() + TIMEOUT
                while not got >= expected and time.monotonic() < deadline:
                    for recs in consumer.poll(timeout_ms=200).values():
                        got |= {r.value.decode() for r in recs}
                consumer.commit()
                end = time.monotonic() + linger
                while time.monotonic() < end:
                    for recs in consumer.poll(timeout_ms=200).values():
                        got |= {r.value.decode() for r in recs}
            finally:
                consumer.close()
            return got

        assert consume_all(set(produced), 0.0) == set(produced)
        any_broker = next(iter(cluster.brokers.values()))
        with SocketClient(any_broker.host, any_broker.port, client_id="probe", timeout=TIMEOUT) as c:
            coordinator = c.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0})["node_id"]
        assert coordinator in cluster.brokers
        cluster.kill(coordinator)
        survivors = [b for i, b in cluster.brokers.items() if i != coordinator]
        bootstrap = ",".join(b.bootstrap for b in survivors)

        def new_coordinator() -> int | None:
            try:
                with SocketClient(survivors[0].host, survivors[0].port, client_id="probe", timeout=TIMEOUT) as c:
                    body = c.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
            except OSError:
                return None
            return body["node_id"] if body["error_code"] == 0 and body["node_id"] != coordinator else None

        wait_until(new_coordinator, "a new coordinator")
        after = [f"q{i}" for i in range(20)]
        produce(bootstrap, topic, after)
        assert consume_all(set(after), 1.0) == set(after)


class KcatMember:
    """``kcat -G`` (librdkafka's balanced consumer, auto-commit every
    500 ms) as a group member; its stdout lines are the values read."""

    def __init__(self, kcat: str, bootstrap: str, group: str, topic: str) -> None:
        self.proc = subprocess.Popen(
            [kcat, "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=500",
             "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500", "-q", "-u", "-f", "%s\\n", topic],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.values: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.values.append(line.strip())

    def consumed(self) -> set[str]:
        return set(self.values)

    def stop(self) -> None:
        """SIGINT: kcat commits what it read and leaves the group."""
        import signal

        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(TIMEOUT) is not None
        self.reader.join(TIMEOUT)


def test_kcat_members_rebalance_commit_and_resume_after_restart(gbroker, topic):
    """The scenario of the peer-library test with ``kcat -G`` members; the
    assignments are read with DescribeGroups (kclient's AdminClient)."""
    from kclient import AdminClient

    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    require(None if kcat else "not on PATH", name="kcat", needs="needs kcat (.ci/run installs it)")
    group = f"kcat-{uuid.uuid4().hex[:6]}"

    def assignments() -> list[set[int]]:
        with AdminClient({"bootstrap.servers": gbroker.bootstrap}) as admin:
            d = admin.describe_consumer_groups([group])[group]
        return [{p for t, p in m.assignment if t == topic} for m in d.members] if d.state == "Stable" else []

    produced = [f"a{i}" for i in range(40)]
    produce(gbroker.bootstrap, topic, produced)
    first = KcatMember(kcat, gbroker.bootstrap, group, topic)
    second = third = None
    try:
        wait_until(lambda: first.consumed() >= set(produced), "the first member to consume")
        wait_until(lambda: assignments() == [set(range(PARTITIONS))], "one member with every partition")

        second = KcatMember(kcat, gbroker.bootstrap, group, topic)
        split = wait_until(lambda: (a := assignments()) and len(a) == 2 and all(a) and a, "the partitions to be split")
        assert split[0] | split[1] == set(range(PARTITIONS)) and not split[0] & split[1]
        more = [f"b{i}" for i in range(40)]
        produce(gbroker.bootstrap, topic, more)
        produced += more
        wait_until(lambda: first.consumed() | second.consumed() >= set(produced), "both members to consume")
        assert second.consumed() & set(more), "the second member got none of the new records"

        first.stop()
        wait_until(lambda: assignments() == [set(range(PARTITIONS))], "the second member to take every partition")
        rest = [f"c{i}" for i in range(40)]
        produce(gbroker.bootstrap, topic, rest)
        produced += rest
        wait_until(lambda: first.consumed() | second.consumed() >= set(produced), "every record to be consumed")
        second.stop()
        assert first.consumed() | second.consumed() == set(produced)

        gbroker.stop()
        gbroker.start()
        after = [f"d{i}" for i in range(20)]
        produce(gbroker.bootstrap, topic, after)
        third = KcatMember(kcat, gbroker.bootstrap, group, topic)
        # `after` ends every partition and a partition is read in order: a
        # record read again would come first.
        wait_until(lambda: third.consumed() >= set(after), "the member after the restart to consume")
        third.stop()
        assert third.consumed() == set(after), "records before the last commit were read again"
    finally:
        for m in (first, second, third):
            if m is not None and m.proc.poll() is None:
                m.proc.kill()
