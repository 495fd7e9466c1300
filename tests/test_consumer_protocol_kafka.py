"""`kclient.Consumer` with Kafka 4.0's consumer group protocol
(``group.protocol=consumer``, KIP-848, ConsumerGroupHeartbeat) against
Apache Kafka 4.x itself (KRaft, one broker for the module): subscribe,
poll and commit; two kclient members splitting the partitions and one
taking them all after the other closes; the partitions a member keeps
consumed while another joins (counted by listener calls, not timed); a
Java consumer (``kafka-console-consumer`` with ``group.protocol=consumer``)
and a kclient member sharing one group, each partition read by one of
them, every record once, both shown by ``kafka-consumer-groups
--describe --members``."""

from __future__ import annotations

import functools
import re
import subprocess
import threading
import uuid

import pytest
from helpers.records import produce
from helpers.skips import require
from helpers.wait import wait_for

from kclient import Consumer, OffsetAndMetadata, TopicPartition
from kclient.testing import KafkaProcess, java_unavailable_reason
from kclient.testing.kafka import kafka_tool, kafka_tool_command

pytestmark = pytest.mark.apache_kafka

PARTITIONS = 4
DEADLINE = 90.0
wait_until = functools.partial(wait_for, timeout=DEADLINE, interval=0.05)


@pytest.fixture(scope="module")
def kafka():
    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka (Java 17+)")
    props = {
        "num.partitions": PARTITIONS,
        "offsets.topic.replication.factor": 1,
        "group.initial.rebalance.delay.ms": 0,
        "group.coordinator.rebalance.protocols": "classic,consumer",
        # Quicker heartbeats than the 5 s default, so that reconciliations finish soon.
        "group.consumer.min.heartbeat.interval.ms": 200,
        "group.consumer.heartbeat.interval.ms": 300,
    }
    with KafkaProcess("4", properties=props) as proc:
        yield proc


def settings(kafka, group: str, **extra) -> dict:
    base = {
        "bootstrap.servers": kafka.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.max.wait.ms": 100,
    }
    base.update(extra)
    return base


def fill(kafka, topic: str, per_partition: int, prefix: str) -> set[str]:
    values = set()
    for p in range(PARTITIONS):
        vs = [f"{prefix}{p}-{i}" for i in range(per_partition)]
        produce(kafka, topic, vs, partition=p, acks=-1)
        values.update(vs)
    return values


class Recorder:
    """A rebalance listener that keeps its calls, in order, in a shared log."""

    def __init__(self, name: str, log: list) -> None:
        self.name = name
        self.log = log

    def on_partitions_revoked(self, partitions):
        self.log.append((self.name, "revoked", sorted(partitions)))

    def on_partitions_assigned(self, partitions):
        self.log.append((self.name, "assigned", sorted(partitions)))

    def on_partitions_lost(self, partitions):
        self.log.append((self.name, "lost", sorted(partitions)))


def test_subscribe_poll_commit_with_the_consumer_protocol(kafka, topic):
    group = f"k848-{uuid.uuid4().hex[:8]}"
    produced = fill(kafka, topic, 10, "a")
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    log: list = []
    seen: list[str] = []
    with Consumer(settings(kafka, group, **{"max.poll.records": 9, "group.remote.assignor": "uniform"})) as consumer:
        consumer.subscribe([topic], listener=Recorder("a", log))

        def read_all() -> bool:
            batch = consumer.poll(timeout_ms=200)
            assert len(batch) <= 9
            seen.extend(r.value.decode() for r in batch)
            return set(seen) >= produced

        wait_until(read_all, "every record")
        assert len(seen) == len(produced)
        assert consumer.assignment() == set(tps)
        assert log == [("a", "assigned", tps)]
        consumer.commit()
        assert consumer.committed(tps) == {tp: OffsetAndMetadata(10) for tp in tps}
        consumer.commit({tps[0]: OffsetAndMetadata(4, "kip-848")})
        assert consumer.committed([tps[0]])[tps[0]] == OffsetAndMetadata(4, "kip-848")
    assert log[-1] == ("a", "revoked", tps)
    with Consumer(settings(kafka, group)) as consumer:
        consumer.subscribe(topic)
        again: list = []
        wait_until(lambda: again.extend(consumer.poll(timeout_ms=200)) or len(again) >= 6, "the records after the commit")
        assert sorted((r.partition, r.offset) for r in again) == [(0, o) for o in range(4, 10)]


def test_two_members_split_and_one_takes_all_with_the_consumer_protocol(kafka, topic):
    group = f"k848-{uuid.uuid4().hex[:8]}"
    fill(kafka, topic, 2, "a")
    first = Consumer(settings(kafka, group))
    second = Consumer(settings(kafka, group))
    try:
        first.subscribe([topic])
        second.subscribe([topic])

        def split() -> bool:
            first.poll(timeout_ms=50)
            second.poll(timeout_ms=50)
            a, b = first.assignment(), second.assignment()
            return len(a) == len(b) == PARTITIONS // 2 and not a & b

        wait_until(split, "the two members to split the partitions")
        second.close()

        def all_to_first() -> bool:
            first.poll(timeout_ms=50)
            return len(first.assignment()) == PARTITIONS

        wait_until(all_to_first, "the first member to get every partition")
    finally:
        first.close()
        second.close()


def test_kept_partitions_are_consumed_while_a_member_joins(kafka, topic):
    """Incremental reconciliation (KIP-848): while the second member joins,
    the first revokes only the partitions that move, and keeps reading
    the others between its revocation and the second member's assignment."""
    group = f"k848-{uuid.uuid4().hex[:8]}"
    fill(kafka, topic, 400, "k")
    log: list = []
    first = Consumer(settings(kafka, group, **{"max.poll.records": 5}))
    second = Consumer(settings(kafka, group, **{"max.poll.records": 5}))
    try:
        first.subscribe([topic], listener=Recorder("first", log))
        wait_until(lambda: first.poll(timeout_ms=50) is not None and len(first.assignment()) == PARTITIONS, "the first member to own every partition")
        second.subscribe([topic], listener=Recorder("second", log))

        def second_assigned() -> bool:
            for record in first.poll(timeout_ms=20):
                log.append(("first", "record", TopicPartition(record.topic, record.partition)))
            second.poll(timeout_ms=20)
            return any(e[0] == "second" and e[1] == "assigned" and e[2] for e in log)

        wait_until(second_assigned, "the second member to be assigned partitions")
        revoked_at = next(i for i, e in enumerate(log) if e[:2] == ("first", "revoked"))
        assigned_at = next(i for i, e in enumerate(log) if e[0] == "second" and e[1] == "assigned" and e[2])
        revoked = set(log[revoked_at][2])
        kept = first.assignment()
        assert len(revoked) == PARTITIONS // 2 and kept == {TopicPartition(topic, p) for p in range(PARTITIONS)} - revoked
        assert set(log[assigned_at][2]) == revoked
        # Only the moved partitions were revoked, and the kept ones were read in between.
        between = [e[2] for e in log[revoked_at:assigned_at] if e[1] == "record"]
        assert between and set(between) <= kept
        assert not [e for e in log if e[0] == "first" and e[1] == "lost"]
    finally:
        first.close()
        second.close()


def _describe_members(kafka, group: str) -> list[dict[str, str]]:
    out = kafka_tool("kafka-consumer-groups", "--bootstrap-server", kafka.bootstrap, "--describe", "--group", group, "--members", timeout=DEADLINE).stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = next(i for i, cols in enumerate(lines) if cols and cols[0] == "GROUP")
    return [dict(zip(lines[header], cols, strict=False)) for cols in lines[header + 1 :]]


def test_a_java_member_and_a_kclient_member_share_a_group(kafka, topic):
    group = f"k848-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, ["x"], partition=0, acks=-1)  # the topic exists before anyone subscribes
    ours: dict[tuple[int, int], str] = {}
    java: list[tuple[int, str]] = []
    consumer = Consumer(settings(kafka, group, **{"client.id": "kclient-848"}))
    command = kafka_tool_command(
        "kafka-console-consumer", "--bootstrap-server", kafka.bootstrap, "--topic", topic, "--group", group,
        "--from-beginning", "--formatter-property", "print.partition=true",
        "--consumer-property", "group.protocol=consumer", "--consumer-property", "client.id=java-848",
    )  # fmt: skip
    proc = None
    try:
        consumer.subscribe([topic])

        def read_ours() -> None:
            for r in consumer.poll(timeout_ms=50):
                assert (r.partition, r.offset) not in ours
                ours[(r.partition, r.offset)] = r.value.decode()

        wait_until(lambda: read_ours() or len(consumer.assignment()) == PARTITIONS, "the kclient member to own every partition")
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def pump() -> None:
            assert proc is not None and proc.stdout is not None
            for line in proc.stdout:
                match = re.fullmatch(r"Partition:(\d+)\t(.*)", line.rstrip("\n"))
                if match:
                    java.append((int(match[1]), match[2]))

        threading.Thread(target=pump, daemon=True).start()
        wait_until(lambda: read_ours() or len(consumer.assignment()) == PARTITIONS // 2, "the Java member to take half the partitions")
        members = wait_until(lambda: (rows := _describe_members(kafka, group)) and len(rows) == 2 and rows, "both members in --describe --members")
        assert {m["CLIENT-ID"] for m in members} == {"kclient-848", "java-848"}
        mine = {tp.partition for tp in consumer.assignment()}
        produced = fill(kafka, topic, 25, "j")

        def all_read() -> bool:
            read_ours()
            return {v for v in ours.values() if v != "x"} | {v for _, v in java if v != "x"} >= produced

        wait_until(all_read, "every record, by one member or the other")
        values = [v for v in ours.values() if v != "x"] + [v for _, v in java if v != "x"]
        assert sorted(values) == sorted(produced)  # each record once
        assert {p for p, _ in java} & mine == set()
        assert {p for (p, _), v in ours.items() if v != "x"} <= mine  # "x" was read before the split
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=DEADLINE)
        consumer.close()


def test_a_member_that_stops_polling_leaves_and_rejoins(kafka, topic):
    """Past ``max.poll.interval.ms`` without a poll the member leaves (epoch
    -1): the other takes every partition; the next poll calls
    ``on_partitions_lost`` and joins again."""
    group = f"k848-{uuid.uuid4().hex[:8]}"
    fill(kafka, topic, 1, "p")
    log: list = []
    first = Consumer(settings(kafka, group, **{"max.poll.interval.ms": 1500}))
    second = Consumer(settings(kafka, group))
    try:
        first.subscribe([topic], listener=Recorder("first", log))
        second.subscribe([topic], listener=Recorder("second", log))

        def split() -> bool:
            first.poll(timeout_ms=20)
            second.poll(timeout_ms=20)
            a, b = first.assignment(), second.assignment()
            return len(a) == len(b) == PARTITIONS // 2 and not a & b

        wait_until(split, "the two members to split the partitions")
        owned, since = sorted(first.assignment()), len(log)
        wait_until(lambda: second.poll(timeout_ms=50) is not None and len(second.assignment()) == PARTITIONS, "the other member to take every partition")
        wait_until(split, "the member to join again after polling")
        calls = [e for e in log[since:] if e[0] == "first"]
        assert calls[0] == ("first", "lost", owned)
        assert not [e for e in calls if e[1] == "revoked"]
    finally:
        first.close()
        second.close()


def test_pattern_subscription_and_unsubscribe_with_the_consumer_protocol(kafka, topic):
    group = f"k848-{uuid.uuid4().hex[:8]}"
    produced = fill(kafka, topic, 3, "r")
    with Consumer(settings(kafka, group)) as consumer:
        consumer.subscribe(re.compile(re.escape(topic[:-8]) + "[0-9a-f]{8}"))
        seen: list[str] = []
        wait_until(lambda: seen.extend(r.value.decode() for r in consumer.poll(timeout_ms=100)) or set(seen) >= produced, "every record of the matched topic")
        assert consumer.subscription() == {topic}
        assert len(consumer.assignment()) == PARTITIONS
        consumer.unsubscribe()
        assert consumer.assignment() == set()
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(timeout_ms=50) is not None and len(consumer.assignment()) == PARTITIONS, "the member to join again")


def test_a_restarted_static_member_gets_its_partitions_back(kafka, topic):
    """A static member (``group.instance.id``) leaves with epoch -2: its
    partitions wait for it, and the same instance restarted takes them
    back; the other member's assignment never changes."""
    group = f"k848-{uuid.uuid4().hex[:8]}"
    fill(kafka, topic, 1, "s")
    log: list = []
    static = Consumer(settings(kafka, group, **{"group.instance.id": "static-1"}))
    other = Consumer(settings(kafka, group))
    again = None
    try:
        static.subscribe([topic])
        other.subscribe([topic], listener=Recorder("other", log))

        def split(a_member) -> bool:
            a_member.poll(timeout_ms=20)
            other.poll(timeout_ms=20)
            a, b = a_member.assignment(), other.assignment()
            return len(a) == len(b) == PARTITIONS // 2 and not a & b

        wait_until(lambda: split(static), "the two members to split the partitions")
        owned = static.assignment()
        calls = len(log)
        static.close()
        again = Consumer(settings(kafka, group, **{"group.instance.id": "static-1"}))
        again.subscribe([topic])
        wait_until(lambda: split(again), "the restarted static member to get partitions")
        assert again.assignment() == owned
        assert len(log) == calls  # the other member was neither revoked nor assigned anything
    finally:
        static.close()
        other.close()
        if again is not None:
            again.close()
