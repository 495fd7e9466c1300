"""Cooperative rebalancing of `kclient.Consumer` members
(``partition.assignment.strategy=cooperative-sticky``, KIP-429) against one
bundled broker for the module: while a member joins, the members already
in the group keep consuming the partitions they keep; only the partitions
that move are revoked (after their offsets were committed), and the next
rebalance hands them to the new member; every record produced meanwhile
is consumed, and duplicated only where a partition changed owner. When a
member closes, the one left takes its partitions with nothing revoked.
The 0.8 ConsumerConnector refuses the strategy."""

from __future__ import annotations

import functools
import uuid
from typing import Any

import pytest
from helpers.cooperative import LibrdkafkaMember, Member, Writer
from helpers.groups import group_broker_properties, poll_settings
from helpers.wait import wait_for

from kclient import Consumer, TopicPartition
from kclient.client.consumer.poll.group import Phase
from kclient.errors import ConfigError, InconsistentGroupProtocolError, RebalanceInProgressError
from kclient.testing import BrokerProcess

PARTITIONS = 6
DEADLINE = 90.0
wait_until = functools.partial(wait_for, timeout=DEADLINE, interval=0.05)


@pytest.fixture(scope="module")
def group_broker():
    with BrokerProcess(properties=group_broker_properties(PARTITIONS), keep_port=True) as proc:
        yield proc


@pytest.fixture
def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:10]
    return f"coop-{tag}", f"coop-topic-{tag}"


def _start(member: Member) -> Member:
    member.start()
    return member


def _wait_assigned(members: list[Any], sizes: list[int], why: str) -> None:
    def settled() -> bool:
        owned = [m.partitions for m in members]
        every = [p for ps in owned for p in ps]
        return sorted(len(ps) for ps in owned) == sorted(sizes) and sorted(every) == list(range(PARTITIONS))

    wait_until(settled, why, detail=lambda: f"{[sorted(m.partitions) for m in members]}")


def _check(*members: Member) -> None:
    for m in members:
        assert m.error is None, m.error


def test_joining_member_takes_partitions_incrementally(group_broker, names) -> None:
    group, topic = names
    writer = Writer(group_broker.bootstrap, topic, PARTITIONS)
    a = _start(Member(group_broker.bootstrap, group, topic, "a"))
    c = _start(Member(group_broker.bootstrap, group, topic, "c"))
    members = [a, c]
    b: Member | None = None
    try:
        writer.start()
        _wait_assigned([a, c], [3, 3], "a and c to share the partitions")
        wait_until(lambda: len(a.consumed()) > 0 and len(c.consumed()) > 0, "a and c to consume")
        a_before = set(a.partitions)
        a_mark = len(a.listener.calls)
        # c stops polling: the coming rebalance waits for it (a rejoin
        # happens in poll), so a's rejoin stays under way until c polls.
        c.hold.set()
        b = _start(Member(group_broker.bootstrap, group, topic, "b"))
        members.append(b)
        wait_until(lambda: a.while_rejoining > 0, "a to return records while it rejoins", detail=lambda: f"{a.listener.calls}")
        assert a.partitions == a_before  # nothing revoked before the group settles
        _check(a, b, c)
        c.hold.clear()
        _wait_assigned([a, b, c], [2, 2, 2], "a balanced assignment of a, b and c")
        writer.stop()
        acknowledged = writer.acknowledged()
        wait_until(lambda: acknowledged <= set(a.consumed()) | set(b.consumed()) | set(c.consumed()), "every acknowledged record to be consumed")
        # The settled group, before the members close (and rebalance again).
        a_after, b_after, a_calls, b_calls = set(a.partitions), set(b.partitions), list(a.listener.calls), list(b.listener.calls)
    finally:
        for m in members:
            m.halt.set()
        writer.halt.set()
    for m in members:
        m.stop()
    assert b is not None
    # a kept two of its three partitions, and only the third was revoked.
    assert a_after <= a_before and len(a_after) == 2
    after = a_calls[a_mark:]
    assert [parts for kind, parts in after if kind == "revoked"] == [sorted(a_before - a_after)], after
    assert [parts for kind, parts in after if kind == "assigned"] == [[]] * len([k for k, _ in after if k == "assigned"]), after
    assert a.listener.kinds("lost") == []
    # b was given its partitions once a and c had revoked them.
    assert [parts for kind, parts in b_calls if kind == "assigned" and parts] == [sorted(b_after)], b_calls
    assert [kind for kind, _ in b_calls if kind != "assigned"] == [], b_calls
    # Every record once; a record twice only in a partition that changed owner.
    moved = b_after
    seen: dict[tuple[int, int], int] = {}
    for m in members:
        for key in m.consumed():
            seen[key] = seen.get(key, 0) + 1
    duplicated = {key for key, n in seen.items() if n > 1}
    assert {p for p, _ in duplicated} <= moved, sorted(duplicated)[:10]
    for m in members:
        assert len(m.consumed()) == len(set(m.consumed())), f"{m.name} read a record twice"


def test_member_closing_leaves_its_partitions_without_revocation(group_broker, names) -> None:
    group, topic = names
    a = _start(Member(group_broker.bootstrap, group, topic, "a"))
    b = _start(Member(group_broker.bootstrap, group, topic, "b"))
    try:
        _wait_assigned([a, b], [3, 3], "a and b to share the partitions")
        b_before = set(b.partitions)
        mark = len(b.listener.calls)
        a.stop()
        wait_until(lambda: b.partitions == set(range(PARTITIONS)), "b to take every partition")
    finally:
        a.halt.set()
        b.halt.set()
    b.stop()
    a.stop()
    assert b.listener.calls[mark:] == [("assigned", sorted(set(range(PARTITIONS)) - b_before)), ("revoked", list(range(PARTITIONS)))]  # then close
    assert a.listener.kinds("revoked")[-1] == sorted(set(range(PARTITIONS)) - b_before)


@pytest.mark.interop
def test_group_shared_with_a_librdkafka_cooperative_member(group_broker, names) -> None:
    """A kclient and a confluent-kafka member, both cooperative-sticky:
    kclient's assignor first (kclient leads), then librdkafka's (the
    kclient member closes, a new one joins)."""
    group, topic = names
    writer = Writer(group_broker.bootstrap, topic, PARTITIONS)
    first = _start(Member(group_broker.bootstrap, group, topic, "kclient-1"))
    rdk: LibrdkafkaMember | None = None
    second: Member | None = None
    try:
        wait_until(lambda: first.partitions == set(range(PARTITIONS)), "the kclient member to own every partition")
        writer.start()
        mark = len(first.listener.calls)
        rdk = LibrdkafkaMember(group_broker.bootstrap, group, topic)
        rdk.start()
        _wait_assigned([first, rdk], [3, 3], "kclient and librdkafka to split the partitions")
        assert [parts for kind, parts in first.listener.calls[mark:] if kind == "revoked"] == [sorted(rdk.partitions)]
        first.stop()
        wait_until(lambda: rdk.partitions == set(range(PARTITIONS)), "librdkafka to own every partition")
        rdk_gave_from = set(rdk.partitions)
        second = _start(Member(group_broker.bootstrap, group, topic, "kclient-2"))
        _wait_assigned([second, rdk], [3, 3], "librdkafka and the new kclient member to split")
        assert second.listener.kinds("revoked") == [] and second.listener.kinds("lost") == []
        assert [parts for parts in second.listener.kinds("assigned") if parts] == [sorted(second.partitions)]
        assert second.partitions <= rdk_gave_from
        writer.stop()
        acknowledged = writer.acknowledged()
        wait_until(lambda: acknowledged <= set(first.consumed()) | set(second.consumed()) | set(rdk.consumed()), "every acknowledged record to be consumed")
    finally:
        writer.halt.set()
        for m in (first, second, rdk):
            if m is not None:
                m.halt.set()
    assert rdk is not None and second is not None
    rdk.stop()
    second.stop()
    first.stop()
    for m in (first, second):
        assert len(m.consumed()) == len(set(m.consumed())), m.name


def test_cooperative_member_cannot_join_an_eager_group(group_broker, names) -> None:
    """A cooperative-sticky member offers only that assignor (as a Java
    member configured with CooperativeStickyAssignor alone): a group whose
    members all use range refuses it with INCONSISTENT_GROUP_PROTOCOL, the
    eager members keep their partitions."""
    group, topic = names
    with Consumer(poll_settings(group_broker.bootstrap, group)) as eager:
        eager.subscribe([topic])
        wait_until(lambda: eager.poll(timeout_ms=100) is not None and len(eager.assignment()) == PARTITIONS, "the range member's assignment")
        settings = poll_settings(group_broker.bootstrap, group, **{"partition.assignment.strategy": "cooperative-sticky"})
        with Consumer(settings) as cooperative:
            cooperative.subscribe([topic])
            with pytest.raises(InconsistentGroupProtocolError):
                wait_until(lambda: cooperative.poll(timeout_ms=100) and False, "the cooperative member to be refused")
        assert len(eager.assignment()) == PARTITIONS


def test_commit_while_rejoining_is_refused(group_broker, names) -> None:
    """A cooperative member keeps its partitions while it rejoins but does
    not commit then (Kafka's generationIfStable)."""
    group, topic = names
    settings = poll_settings(group_broker.bootstrap, group, **{"partition.assignment.strategy": "cooperative-sticky"})
    with Consumer(settings) as consumer:
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(timeout_ms=100) is not None and len(consumer.assignment()) == PARTITIONS, "the assignment")
        driver = consumer._core._driver
        assert driver is not None
        driver.phase = Phase.JOINING
        try:
            with pytest.raises(RebalanceInProgressError):
                consumer.commit({TopicPartition(topic, 0): 0})
        finally:
            driver.phase = Phase.STABLE


@pytest.mark.parametrize("coordination", ["broker", "zookeeper"])
def test_connector_refuses_cooperative_sticky(coordination: str) -> None:
    settings: dict[str, Any] = {"group.id": "g", "partition.assignment.strategy": "cooperative-sticky", "group.coordination": coordination}
    if coordination == "broker":
        settings["bootstrap.servers"] = "127.0.0.1:1"
    else:
        settings["zookeeper.connect"] = "127.0.0.1:1"
    with pytest.raises(ConfigError, match="poll consumer"):
        Consumer.create(settings)

