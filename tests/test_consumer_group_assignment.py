"""The consumer group protocol's server-side assignors and reconciliation
(KIP-848), pure: `kclient.broker.group.server_assignors` and
`kclient.broker.group.reconciliation`."""

from __future__ import annotations

import uuid

import pytest
from helpers.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.broker.group.reconciliation import (
    STABLE,
    UNKNOWN,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    FencedMemberError,
    MemberAssignment,
    freeze,
    next_assignment,
)
from kclient.broker.group.server_assignors import MemberSpec, RangeAssignor, UniformAssignor, assignors_for

pytestmark = pytest.mark.unit

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def flat(assignment: dict) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for ps in assignment.values() for t, tp in ps.items() for p in tp)


def sizes(assignment: dict) -> dict[str, int]:
    return {m: sum(len(ps) for ps in tps.values()) for m, tps in assignment.items()}


# ---------------------------------------------------------------- assignors


def test_range_gives_contiguous_ranges_by_member_id():
    members = {"b": MemberSpec(frozenset({T1})), "a": MemberSpec(frozenset({T1, T2}))}
    got = RangeAssignor().assign(members, {T1: 3, T2: 2})
    assert got == {"a": {T1: {0, 1}, T2: {0, 1}}, "b": {T1: {2}}}


def test_uniform_balances_a_new_member_and_keeps_the_rest():
    members = {"a": MemberSpec(frozenset({T1}), {T1: {0, 1, 2}}), "b": MemberSpec(frozenset({T1}), {T1: {3, 4, 5}}), "c": MemberSpec(frozenset({T1}))}
    got = UniformAssignor().assign(members, {T1: 6})
    assert sizes(got) == {"a": 2, "b": 2, "c": 2}
    assert got["a"][T1] <= {0, 1, 2} and got["b"][T1] <= {3, 4, 5}


def test_uniform_with_uneven_counts_moves_only_what_it_must():
    members = {"a": MemberSpec(frozenset({T1}), {T1: {0, 1}}), "b": MemberSpec(frozenset({T1}), {T1: {2, 3}}), "c": MemberSpec(frozenset({T1}))}
    got = UniformAssignor().assign(members, {T1: 4})
    assert sorted(sizes(got).values()) == [1, 1, 2]
    moved = [p for m in ("a", "b") for p in got[m].get(T1, set())]
    assert len(moved) == 3  # one partition moved, to c


def test_uniform_drops_unsubscribed_and_vanished_partitions():
    members = {"a": MemberSpec(frozenset({T2}), {T1: {0}, T2: {5}})}
    assert UniformAssignor().assign(members, {T1: 1, T2: 2}) == {"a": {T2: {0, 1}}}


def test_assignors_for_keeps_the_configured_order():
    assert list(assignors_for(["range", "uniform"])) == ["range", "uniform"]
    with pytest.raises(ValueError, match="sticky"):
        assignors_for(["sticky"])


members_strategy = st.dictionaries(
    st.sampled_from([f"m{i}" for i in range(6)]),
    st.tuples(st.sets(st.sampled_from([T1, T2]), min_size=1), st.dictionaries(st.sampled_from([T1, T2]), st.sets(st.integers(0, 7), max_size=4), max_size=2)),
    min_size=1,
)


@settings(max_examples=examples(200), deadline=None)
@given(members=members_strategy, counts=st.fixed_dictionaries({T1: st.integers(1, 8), T2: st.integers(0, 8)}), name=st.sampled_from(["uniform", "range"]))
def test_every_subscribed_partition_has_exactly_one_subscribed_owner(members, counts, name):
    counts = {t: n for t, n in counts.items() if n}
    specs = {m: MemberSpec(frozenset(subs), current) for m, (subs, current) in members.items()}
    got = assignors_for([name])[name].assign(specs, counts)
    assert set(got) == set(specs)
    wanted = sorted((t, p) for t, n in counts.items() if any(t in s.subscribed_topic_ids for s in specs.values()) for p in range(n))
    assert flat(got) == wanted
    for m, tps in got.items():
        assert set(tps) <= specs[m].subscribed_topic_ids
    if name == "uniform" and len({s.subscribed_topic_ids for s in specs.values()}) == 1:
        counts_per_member = sizes(got).values()
        assert max(counts_per_member) - min(counts_per_member) <= 1


# ---------------------------------------------------------------- reconciliation


def free(_t, _p) -> int:
    return -1


def test_a_new_member_gets_its_free_target_at_once():
    got = next_assignment(MemberAssignment(), 3, freeze({T1: {0, 1}}), free, [])
    assert got == MemberAssignment(state=STABLE, member_epoch=3, previous_member_epoch=0, assigned={T1: frozenset({0, 1})})


def test_partitions_to_revoke_hold_the_epoch_until_acknowledged():
    current = MemberAssignment(state=STABLE, member_epoch=2, previous_member_epoch=1, assigned=freeze({T1: {0, 1}}))
    target = freeze({T1: {0}})
    step = next_assignment(current, 3, target, free, [(T1, [0, 1])])
    assert step.state == UNREVOKED_PARTITIONS and step.member_epoch == 2
    assert step.assigned == {T1: frozenset({0})} and step.pending_revocation == {T1: frozenset({1})}
    # Still owning partition 1: nothing changes.
    assert next_assignment(step, 3, target, free, [(T1, [0, 1])]) is step
    assert next_assignment(step, 3, target, free, None) is step
    # Revoked: the target epoch.
    done = next_assignment(step, 3, target, free, [(T1, [0])])
    assert done.state == STABLE and done.member_epoch == 3 and done.pending_revocation == {}


def test_a_partition_still_owned_elsewhere_is_unreleased():
    owned_elsewhere = {(T1, 1): 2}

    def epoch(t, p):
        return owned_elsewhere.get((t, p), -1)

    step = next_assignment(MemberAssignment(member_epoch=2, previous_member_epoch=1, assigned=freeze({T1: {0}})), 3, freeze({T1: {0, 1}}), epoch, [(T1, [0])])
    assert step.state == UNRELEASED_PARTITIONS and step.member_epoch == 3 and step.assigned == {T1: frozenset({0})}
    owned_elsewhere.clear()
    step = next_assignment(step, 3, freeze({T1: {0, 1}}), epoch, [(T1, [0])])
    assert step.state == STABLE and step.assigned == {T1: frozenset({0, 1})}


def test_an_unknown_member_owning_partitions_is_fenced():
    with pytest.raises(FencedMemberError):
        next_assignment(MemberAssignment(state=UNKNOWN, member_epoch=4), 5, {}, free, [(T1, [0])])
    assert next_assignment(MemberAssignment(state=UNKNOWN, member_epoch=4), 5, {}, free, []).member_epoch == 5


@settings(max_examples=examples(100), deadline=None)
@given(data=st.data())
def test_no_partition_ever_has_two_owners(data):
    """Members heartbeat in a random order towards a changing target; a
    partition a member uses is never another member's at the same time."""
    names = ["a", "b", "c"]
    state = {m: MemberAssignment() for m in names}
    owners: dict[tuple[uuid.UUID, int], str] = {}
    target_epoch = 0
    for _ in range(data.draw(st.integers(1, 6), label="rounds")):
        target_epoch += 1
        split = data.draw(st.lists(st.sampled_from(names), min_size=6, max_size=6), label="target")
        targets = {m: freeze({T1: {p for p, owner in enumerate(split) if owner == m}}) for m in names}
        for m in data.draw(st.lists(st.sampled_from(names), min_size=3, max_size=12), label="heartbeats"):
            mine = set(state[m].owned())

            def epoch(t, p, mine=mine):
                return -1 if (t, p) in mine else (0 if (t, p) in owners else -1)

            owned = [(T1, sorted(p for (_, p) in state[m].owned()))]
            new = next_assignment(state[m], target_epoch, targets[m], epoch, owned)
            for tp in mine:
                owners.pop(tp, None)
            for tp in new.owned():
                assert owners.get(tp, m) == m
                owners[tp] = m
            state[m] = new


# ---------------------------------------------------------------- configuration


def test_consumer_group_timeouts_are_checked_against_their_bounds():
    from kclient.broker.group.consumer_coordinator import check_consumer_group_config
    from kclient.config import BrokerConfig
    from kclient.errors import ConfigError

    check_consumer_group_config(BrokerConfig())
    with pytest.raises(ConfigError, match="group.consumer.min.session.timeout.ms"):
        check_consumer_group_config(BrokerConfig.from_properties({"group.consumer.session.timeout.ms": 1000}))
    with pytest.raises(ConfigError, match="group.consumer.max.heartbeat.interval.ms"):
        check_consumer_group_config(BrokerConfig.from_properties({"group.consumer.heartbeat.interval.ms": 20000}))
