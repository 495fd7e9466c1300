"""The KIP-848 scenarios (``group.protocol=consumer``) that
tests/test_consumer_protocol_kafka.py runs against Apache Kafka 4.x and
tests/test_consumer_protocol_bundled.py against the bundled broker: each
takes the broker (anything with a ``bootstrap`` attribute) and a fresh
topic of `PARTITIONS` partitions (auto-created by the first produce).
Every wait is for a condition (`helpers.wait.wait_for`), and rebalances
are checked by the rebalance listener's calls, not by time."""

from __future__ import annotations

import functools
import re
import subprocess
import threading
import uuid
from typing import Any

import pytest

from helpers.records import produce
from helpers.wait import wait_for
from kclient import Consumer, OffsetAndMetadata, TopicPartition
from kclient.errors import UnsupportedAssignorError
from kclient.testing.kafka import kafka_tool, kafka_tool_command

#: Partitions of every topic (the brokers' ``num.partitions``).
PARTITIONS = 4
DEADLINE = 90.0
wait_until = functools.partial(wait_for, timeout=DEADLINE, interval=0.05)


def new_group() -> str:
    """A group id no other test uses."""
    return f"k848-{uuid.uuid4().hex[:8]}"


def settings(target: Any, group: str, **extra: Any) -> dict[str, Any]:
    """A `kclient.Consumer` config with the consumer group protocol, from the
    earliest offset, no auto-commit; ``extra`` overrides any of them."""
    base = {
        "bootstrap.servers": target.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.max.wait.ms": 100,
    }
    base.update(extra)
    return base


def fill(target: Any, topic: str, per_partition: int, prefix: str) -> set[str]:
    """Produce ``per_partition`` records to each partition; their values."""
    values = set()
    for p in range(PARTITIONS):
        vs = [f"{prefix}{p}-{i}" for i in range(per_partition)]
        produce(target, topic, vs, partition=p, acks=-1)
        values.update(vs)
    return values


class Recorder:
    """A rebalance listener that keeps its calls, in order, in a shared log."""

    def __init__(self, name: str, log: list[Any]) -> None:
        self.name = name
        self.log = log

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.log.append((self.name, "revoked", sorted(partitions)))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.log.append((self.name, "assigned", sorted(partitions)))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.log.append((self.name, "lost", sorted(partitions)))


def subscribe_poll_commit(target: Any, topic: str) -> None:
    group = new_group()
    produced = fill(target, topic, 10, "a")
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    log: list = []
    seen: list[str] = []
    with Consumer(settings(target, group, **{"max.poll.records": 9, "group.remote.assignor": "uniform"})) as consumer:
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
    with Consumer(settings(target, group)) as consumer:
        consumer.subscribe(topic)
        again: list = []
        wait_until(lambda: again.extend(consumer.poll(timeout_ms=200)) or len(again) >= 6, "the records after the commit")
        assert sorted((r.partition, r.offset) for r in again) == [(0, o) for o in range(4, 10)]


def two_members_split_and_one_takes_all(target: Any, topic: str) -> None:
    group = new_group()
    fill(target, topic, 2, "a")
    first = Consumer(settings(target, group))
    second = Consumer(settings(target, group))
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


def kept_partitions_consumed_while_a_member_joins(target: Any, topic: str) -> None:
    """Incremental reconciliation (KIP-848): while the second member joins,
    the first revokes only the partitions that move, and keeps reading
    the others between its revocation and the second member's assignment."""
    group = new_group()
    fill(target, topic, 400, "k")
    log: list = []
    first = Consumer(settings(target, group, **{"max.poll.records": 5}))
    second = Consumer(settings(target, group, **{"max.poll.records": 5}))
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


def member_that_stops_polling_leaves_and_rejoins(target: Any, topic: str) -> None:
    """Past ``max.poll.interval.ms`` without a poll the member leaves (epoch
    -1): the other takes every partition; the next poll calls
    ``on_partitions_lost`` and joins again."""
    group = new_group()
    fill(target, topic, 1, "p")
    log: list = []
    first = Consumer(settings(target, group, **{"max.poll.interval.ms": 1500}))
    second = Consumer(settings(target, group))
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


def pattern_subscription_and_unsubscribe(target: Any, topic: str) -> None:
    group = new_group()
    produced = fill(target, topic, 3, "r")
    with Consumer(settings(target, group)) as consumer:
        consumer.subscribe(re.compile(re.escape(topic[:-8]) + "[0-9a-f]{8}"))
        seen: list[str] = []
        wait_until(lambda: seen.extend(r.value.decode() for r in consumer.poll(timeout_ms=100)) or set(seen) >= produced, "every record of the matched topic")
        assert consumer.subscription() == {topic}
        assert len(consumer.assignment()) == PARTITIONS
        consumer.unsubscribe()
        assert consumer.assignment() == set()
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(timeout_ms=50) is not None and len(consumer.assignment()) == PARTITIONS, "the member to join again")


def restarted_static_member_gets_its_partitions_back(target: Any, topic: str) -> None:
    """A static member (``group.instance.id``) leaves with epoch -2: its
    partitions wait for it, and the same instance restarted takes them
    back; the other member's assignment never changes."""
    group = new_group()
    fill(target, topic, 1, "s")
    log: list = []
    static = Consumer(settings(target, group, **{"group.instance.id": "static-1"}))
    other = Consumer(settings(target, group))
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
        again = Consumer(settings(target, group, **{"group.instance.id": "static-1"}))
        again.subscribe([topic])
        wait_until(lambda: split(again), "the restarted static member to get partitions")
        assert again.assignment() == owned
        assert len(log) == calls  # the other member was neither revoked nor assigned anything
    finally:
        static.close()
        other.close()
        if again is not None:
            again.close()


def positions_committed_before_revocation_hand_over(target: Any, topic: str) -> None:
    """With ``enable.auto.commit`` the member commits (with its member
    epoch) before revoking partitions, so the member that takes them
    starts where it stopped: no record is read twice, none is skipped."""
    group = new_group()
    produced = fill(target, topic, 50, "h")
    log: list[Any] = []
    reads: dict[str, list[tuple[int, int]]] = {"first": [], "second": []}
    auto = {"enable.auto.commit": True, "auto.commit.interval.ms": 600000, "max.poll.records": 7}
    first = Consumer(settings(target, group, **auto))
    second = Consumer(settings(target, group, **auto))
    try:
        first.subscribe([topic], listener=Recorder("first", log))

        def read(name: str, consumer: Consumer) -> set[str]:
            records = consumer.poll(timeout_ms=20)
            reads[name].extend((r.partition, r.offset) for r in records)
            return {r.value.decode() for r in records}

        seen: set[str] = set()
        wait_until(lambda: seen.update(read("first", first)) or len(reads["first"]) >= 20, "the first member to read some records")
        second.subscribe([topic], listener=Recorder("second", log))
        wait_until(lambda: seen.update(read("first", first) | read("second", second)) or seen >= produced, "every record")
        assert any(e[:2] == ("first", "revoked") for e in log)
        both = reads["first"] + reads["second"]
        assert len(both) == len(set(both)) == len(produced)  # each record once
    finally:
        first.close()
        second.close()


def unknown_server_assignor_is_raised_by_poll(target: Any, topic: str) -> None:
    """``group.remote.assignor`` the coordinator lacks: ``poll`` raises
    ``UNSUPPORTED_ASSIGNOR``."""
    produce(target, topic, ["u"], partition=0, acks=-1)
    with Consumer(settings(target, new_group(), **{"group.remote.assignor": "no-such-assignor"})) as consumer:
        consumer.subscribe([topic])
        with pytest.raises(UnsupportedAssignorError):
            wait_until(lambda: consumer.poll(timeout_ms=50) and False, "UNSUPPORTED_ASSIGNOR")


def subscription_change_moves_the_assignment(target: Any, topic: str) -> None:
    """``subscribe`` again, to another topic, while in the group: the next
    heartbeat carries the new topic names (no rejoin in KIP-848); the old
    topic's partitions are revoked and the new one's assigned."""
    other = f"{topic}-b"
    fill(target, topic, 1, "o")
    fresh = fill(target, other, 2, "n")
    log: list[Any] = []
    with Consumer(settings(target, new_group())) as consumer:
        consumer.subscribe([topic], listener=Recorder("member", log))
        wait_until(lambda: consumer.poll(timeout_ms=50) is not None and len(consumer.assignment()) == PARTITIONS, "the first topic's partitions")
        first = sorted(consumer.assignment())
        consumer.subscribe([other], listener=Recorder("member", log))
        seen: set[str] = set()

        def moved() -> bool:
            seen.update(r.value.decode() for r in consumer.poll(timeout_ms=50) if r.topic == other)
            return {tp.topic for tp in consumer.assignment()} == {other} and len(consumer.assignment()) == PARTITIONS and seen >= fresh

        wait_until(moved, "the assignment to move to the other topic")
        assert ("member", "revoked", first) in log
        assert not [e for e in log if e[1] == "lost"]


def describe_members(target: Any, group: str) -> list[dict[str, str]]:
    """The rows of ``kafka-consumer-groups --describe --members``, by column."""
    out = kafka_tool("kafka-consumer-groups", "--bootstrap-server", target.bootstrap, "--describe", "--group", group, "--members", timeout=DEADLINE).stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = next(i for i, cols in enumerate(lines) if cols and cols[0] == "GROUP")
    return [dict(zip(lines[header], cols, strict=False)) for cols in lines[header + 1 :]]


def java_member_and_kclient_member_share_a_group(target: Any, topic: str) -> None:
    """A Java consumer (``kafka-console-consumer`` with
    ``group.protocol=consumer``) and a kclient member in one group: each
    takes half the partitions, ``--describe --members`` shows both, every
    record produced then is read once, by its partition's owner; when the
    Java member stops, the kclient member takes every partition."""
    group = new_group()
    produce(target, topic, ["x"], partition=0, acks=-1)  # the topic exists before anyone subscribes
    ours: dict[tuple[int, int], str] = {}
    java: list[tuple[int, str]] = []
    consumer = Consumer(settings(target, group, **{"client.id": "kclient-848"}))
    command = kafka_tool_command(
        "kafka-console-consumer", "--bootstrap-server", target.bootstrap, "--topic", topic, "--group", group,
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
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

        def pump() -> None:
            assert proc is not None and proc.stdout is not None
            for line in proc.stdout:
                match = re.fullmatch(r"Partition:(\d+)\t(.*)", line.rstrip("\n"))
                if match:
                    java.append((int(match[1]), match[2]))

        threading.Thread(target=pump, daemon=True).start()
        wait_until(lambda: read_ours() or len(consumer.assignment()) == PARTITIONS // 2, "the Java member to take half the partitions")
        members = wait_until(lambda: (rows := describe_members(target, group)) and len(rows) == 2 and rows, "both members in --describe --members")
        assert {m["CLIENT-ID"] for m in members} == {"kclient-848", "java-848"}
        mine = {tp.partition for tp in consumer.assignment()}
        produced = fill(target, topic, 25, "j")

        def all_read() -> bool:
            read_ours()
            return {v for v in ours.values() if v != "x"} | {v for _, v in java if v != "x"} >= produced

        wait_until(all_read, "every record, by one member or the other")
        values = [v for v in ours.values() if v != "x"] + [v for _, v in java if v != "x"]
        assert sorted(values) == sorted(produced)  # each record once
        assert {p for p, _ in java} & mine == set()
        assert {p for (p, _), v in ours.items() if v != "x"} <= mine  # "x" was read before the split
        proc.terminate()  # Kafka's consumer leaves the group as it shuts down
        proc.wait(timeout=DEADLINE)
        wait_until(lambda: read_ours() or len(consumer.assignment()) == PARTITIONS, "the kclient member to take every partition back")
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=DEADLINE)
        consumer.close()
