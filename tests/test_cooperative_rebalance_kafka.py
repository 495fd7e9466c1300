"""Cooperative rebalancing (KIP-429) between kclient's cooperative-sticky
members and Kafka's own Java consumer with ``CooperativeStickyAssignor``
(``kafka-verifiable-consumer``), in one group on Apache Kafka 4.x (KRaft,
classic protocol): first with kclient's assignor (a kclient member leads),
then with Java's (the Java member leads). Each time the member already in
the group revokes only what moves, the newcomer gets it in the next
generation, and every partition ends with exactly one member; every
record produced meanwhile is consumed, twice only in a partition that
changed owner (and there only on the Java side: kclient commits before it
revokes)."""

from __future__ import annotations

import functools
import uuid

import pytest
from helpers.cooperative import JavaMember, Member, Writer
from helpers.groups import group_kafka
from helpers.wait import wait_for

pytestmark = pytest.mark.apache_kafka

PARTITIONS = 6
DEADLINE = 120.0
wait_until = functools.partial(wait_for, timeout=DEADLINE, interval=0.1)


@pytest.fixture(scope="module")
def kafka():
    with group_kafka(PARTITIONS) as proc:
        yield proc


def _split(first: set[int], second: set[int]) -> bool:
    return len(first) == len(second) == PARTITIONS // 2 and first | second == set(range(PARTITIONS))


def test_kclient_and_java_cooperative_members_share_a_group(kafka, tmp_path) -> None:
    tag = uuid.uuid4().hex[:8]
    group, topic = f"coop-k4-{tag}", f"coop-k4-{tag}"
    writer = Writer(kafka.bootstrap, topic, PARTITIONS)
    first = Member(kafka.bootstrap, group, topic, "kclient-1")
    second: Member | None = None
    java: JavaMember | None = None
    consumed: list[tuple[int, int]] = []
    java_gave: set[int] = set()
    try:
        first.start()
        wait_until(lambda: first.partitions == set(range(PARTITIONS)), "the first kclient member to own every partition")
        writer.start()
        wait_until(lambda: len(first.consumed()) > 0, "the first member to consume")
        mark = len(first.listener.calls)
        # A Java member joins: the kclient member leads, its assignor moves half.
        java = JavaMember(kafka.bootstrap, group, topic, tmp_path)
        wait_until(lambda: _split(first.partitions, java.partitions), "kclient and Java to split the partitions", detail=lambda: f"kclient {first.partitions}, java {java.changes()}; {java.stderr()}")
        assert not first.partitions & java.partitions
        revoked = [parts for kind, parts in first.listener.calls[mark:] if kind == "revoked"]
        assert revoked == [sorted(java.partitions)], first.listener.calls
        assert [parts for kind, parts in java.changes() if kind == "revoked"] == []
        wait_until(lambda: len(first.consumed()) > 0 and len(java.consumed()) > 0, "both to consume")
        # The kclient member leaves: the Java member takes all, then leads.
        first.stop()
        wait_until(lambda: java.partitions == set(range(PARTITIONS)), "the Java member to own every partition", detail=java.stderr)
        java_mark = len(java.changes())
        # A new kclient member joins: Java's assignor moves half to it.
        second = Member(kafka.bootstrap, group, topic, "kclient-2")
        second.start()
        wait_until(
            lambda: _split(second.partitions, java.partitions),
            "Java and the new kclient member to split",
            detail=lambda: f"kclient {second.partitions}, java {java.changes()}; {java.stderr()}",
        )
        java_gave = set(second.partitions)
        assert [parts for kind, parts in java.changes()[java_mark:] if kind == "revoked"] == [sorted(java_gave)]
        assert second.listener.kinds("revoked") == [] and second.listener.kinds("lost") == []
        assert [parts for parts in second.listener.kinds("assigned") if parts] == [sorted(second.partitions)]
        writer.stop()
        acknowledged = writer.acknowledged()
        wait_until(
            lambda: acknowledged <= set(first.consumed()) | set(second.consumed()) | set(java.consumed()),
            "every acknowledged record to be consumed",
            detail=java.stderr,
        )
    finally:
        writer.halt.set()
        for m in (first, second):
            if m is not None:
                m.halt.set()
        if java is not None:
            consumed = java.consumed()
            java.stop()
    assert second is not None
    second.stop()
    first.stop()
    # Nothing read twice by one member; twice by two only where a partition moved.
    for m in (first, second):
        assert len(m.consumed()) == len(set(m.consumed())), m.name
    everything = first.consumed() + second.consumed() + consumed
    seen: dict[tuple[int, int], int] = {}
    for key in everything:
        seen[key] = seen.get(key, 0) + 1
    twice = {key for key, n in seen.items() if n > 1}
    # kclient commits before it revokes or leaves: a record comes twice only
    # where the Java member gave a partition up (its last batch before the
    # revocation may be uncommitted: its commit fails while the group rebalances).
    assert {p for p, _ in twice} <= java_gave, sorted(twice)
