"""The cooperative-sticky assignor (KIP-429 with KIP-54's sticky goals):
balance, stickiness, generations settling conflicting claims, no partition
given twice, and moved partitions withheld for one generation."""

from __future__ import annotations

import random

import pytest

from kclient.client.consumer.group.assignors import (
    COOPERATIVE_STICKY,
    RANGE,
    ROUNDROBIN,
    assign,
    is_cooperative,
    offered_assignors,
    sticky_member,
)
from kclient.client.consumer.group.sticky import (
    StickyMember,
    cooperative_sticky_assign,
    generation_user_data,
    member_generation,
    sticky_assign,
)
from kclient.protocol.consumer_protocol import decode_subscription, encode_subscription

pytestmark = pytest.mark.unit


def _member(topics: list[str], owned: list[tuple[str, int]] = (), generation: int = 1) -> StickyMember:  # type: ignore[assignment]
    return StickyMember(frozenset(topics), tuple(owned), generation)


def _every(plan: dict[str, list[tuple[str, int]]]) -> list[tuple[str, int]]:
    return sorted(tp for tps in plan.values() for tp in tps)


def _counts(plan: dict[str, list[tuple[str, int]]]) -> list[int]:
    return sorted(len(tps) for tps in plan.values())


def test_fresh_group_is_balanced_and_covers_every_partition() -> None:
    members = {f"m{i}": _member(["a", "b"], generation=-1) for i in range(3)}
    plan = cooperative_sticky_assign({"a": 5, "b": 3}, members)
    assert _every(plan) == sorted([("a", p) for p in range(5)] + [("b", p) for p in range(3)])
    assert _counts(plan) == [2, 3, 3]


def test_members_keep_what_they_own_when_balanced() -> None:
    owned = {"m0": [("t", 0), ("t", 3)], "m1": [("t", 1), ("t", 2)]}
    members = {m: _member(["t"], tps) for m, tps in owned.items()}
    assert cooperative_sticky_assign({"t": 4}, members) == {m: sorted(tps) for m, tps in owned.items()}


def test_new_member_gets_nothing_moved_in_this_generation() -> None:
    members = {"a": _member(["t"], [("t", p) for p in range(3)]), "c": _member(["t"], [("t", p) for p in range(3, 6)]), "b": _member(["t"], generation=-1)}
    balanced = sticky_assign({"t": 6}, members)
    assert _counts(balanced) == [2, 2, 2]
    first = cooperative_sticky_assign({"t": 6}, members)
    assert first["b"] == []  # both partitions moving to b are still owned
    assert len(first["a"]) == 2 and len(first["c"]) == 2
    assert set(first["a"]) <= set(members["a"].owned) and set(first["c"]) <= set(members["c"].owned)
    # a and c revoke, rejoin with what they kept: b gets the two freed partitions.
    second_members = {"a": _member(["t"], first["a"], 2), "c": _member(["t"], first["c"], 2), "b": _member(["t"], [], 2)}
    second = cooperative_sticky_assign({"t": 6}, second_members)
    assert second["a"] == first["a"] and second["c"] == first["c"]
    assert sorted(second["b"]) == sorted({("t", p) for p in range(6)} - set(first["a"]) - set(first["c"]))


def test_member_leaving_gives_its_partitions_at_once() -> None:
    members = {"a": _member(["t"], [("t", 0), ("t", 1)]), "b": _member(["t"], [("t", 2), ("t", 3)])}
    plan = cooperative_sticky_assign({"t": 4}, {"a": members["a"]})
    assert plan == {"a": [("t", p) for p in range(4)]}


def test_conflicting_claims_settled_by_generation() -> None:
    members = {"old": _member(["t"], [("t", 0), ("t", 1)], 3), "new": _member(["t"], [("t", 0)], 5)}
    plan = sticky_assign({"t": 2}, members)
    assert plan["new"] == [("t", 0)] and plan["old"] == [("t", 1)]
    # The same generation: neither claim counts (the partition goes by balance).
    same = {"x": _member(["t"], [("t", 0), ("t", 1)], 4), "y": _member(["t"], [("t", 1), ("t", 2)], 4)}
    plan = sticky_assign({"t": 4}, same)
    assert ("t", 0) in plan["x"] and ("t", 2) in plan["y"]
    assert _counts(plan) == [2, 2]


def test_unsubscribed_or_vanished_partitions_are_dropped() -> None:
    members = {"a": _member(["t"], [("t", 0), ("gone", 0), ("t", 9)]), "b": _member(["t", "u"], [("t", 1)])}
    plan = sticky_assign({"t": 2, "u": 2}, members)
    assert _every(plan) == [("t", 0), ("t", 1), ("u", 0), ("u", 1)]
    assert ("t", 0) in plan["a"] and _counts(plan) == [2, 2]
    # The partition b gives up to a is withheld until b revoked it.
    cooperative = cooperative_sticky_assign({"t": 2, "u": 2}, members)
    assert cooperative == {"a": [("t", 0)], "b": [("u", 0), ("u", 1)]}


def test_different_subscriptions_balance_where_members_can_trade() -> None:
    members = {"a": _member(["t"], generation=-1), "b": _member(["t", "u"], generation=-1), "c": _member(["u"], generation=-1)}
    plan = sticky_assign({"t": 4, "u": 4}, members)
    assert _every(plan) == sorted([("t", p) for p in range(4)] + [("u", p) for p in range(4)])
    assert all(tp[0] == "t" for tp in plan["a"]) and all(tp[0] == "u" for tp in plan["c"])
    assert max(_counts(plan)) - min(_counts(plan)) <= 1


def test_random_groups_are_balanced_sticky_and_exclusive() -> None:
    rng = random.Random(27)
    for _ in range(200):
        counts = {t: rng.randint(1, 9) for t in ("a", "b", "c")[: rng.randint(1, 3)]}
        everything = [(t, p) for t, n in counts.items() for p in range(n)]
        previous = {f"m{i}": [] for i in range(rng.randint(1, 5))}
        for tp in everything:
            if rng.random() < 0.8:
                previous[rng.choice(sorted(previous))].append(tp)
        members = {m: _member(sorted(counts), tps, 7) for m, tps in previous.items()}
        for _ in range(rng.randint(0, 2)):
            members[f"n{rng.randint(0, 99)}"] = _member(sorted(counts), generation=-1)
        balanced = sticky_assign(counts, members)
        assert _every(balanced) == sorted(everything)
        sizes = _counts(balanced)
        assert sizes[-1] - sizes[0] <= 1
        quota = -(-len(everything) // len(members))
        for m, tps in previous.items():  # a member keeps its partitions up to its quota
            assert len(set(balanced[m]) & set(tps)) >= min(len(tps), len(everything) // len(members))
            assert len(balanced[m]) <= quota
        cooperative = cooperative_sticky_assign(counts, members)
        given = _every(cooperative)
        assert len(given) == len(set(given))
        for m, tps in cooperative.items():  # nothing given while another member still owns it
            for tp in tps:
                assert all(tp not in members[o].owned for o in members if o != m)


def test_generation_from_subscription_or_user_data() -> None:
    v2 = decode_subscription(encode_subscription(["t"], owned_partitions=[("t", [1])], generation_id=8, version=2))
    assert sticky_member(v2) == StickyMember(frozenset({"t"}), (("t", 1),), 8)
    v1 = decode_subscription(encode_subscription(["t"], generation_user_data(5), owned_partitions=[("t", [0])], version=1))
    assert sticky_member(v1).generation == 5
    assert member_generation(0, -1, None) == -1
    assert member_generation(3, -1, generation_user_data(4)) == 4


def test_assign_dispatches_by_protocol() -> None:
    subs = {m: decode_subscription(encode_subscription(["t"], version=1)) for m in ("a", "b")}
    assert assign(RANGE, {"t": 3}, subs) == {"a": [("t", 0), ("t", 1)], "b": [("t", 2)]}
    assert assign(ROUNDROBIN, {"t": 3}, subs) == {"a": [("t", 0), ("t", 2)], "b": [("t", 1)]}
    assert _counts(assign(COOPERATIVE_STICKY, {"t": 3}, subs)) == [1, 2]
    with pytest.raises(KeyError):
        assign("sticky-ish", {"t": 3}, subs)


def test_offered_assignors_and_rebalance_protocol() -> None:
    assert offered_assignors(RANGE) == [RANGE, ROUNDROBIN]
    assert offered_assignors(ROUNDROBIN) == [ROUNDROBIN, RANGE]
    assert offered_assignors(COOPERATIVE_STICKY) == [COOPERATIVE_STICKY]
    # Kafka's upgrade path: a list with an eager assignor rebalances eagerly.
    assert offered_assignors((COOPERATIVE_STICKY, RANGE)) == [COOPERATIVE_STICKY, RANGE, ROUNDROBIN]
    assert not is_cooperative(offered_assignors((COOPERATIVE_STICKY, RANGE)))
    assert offered_assignors((ROUNDROBIN,)) == [ROUNDROBIN, RANGE]
    assert is_cooperative([COOPERATIVE_STICKY])
    assert not is_cooperative([COOPERATIVE_STICKY, RANGE])
    assert not is_cooperative([])


def test_random_different_subscriptions_leave_no_move_that_balances() -> None:
    """Kafka's balance for unequal subscriptions: no member could take a
    partition from a member with two or more partitions more."""
    rng = random.Random(429)
    topics = [f"t{i}" for i in range(6)]
    for _ in range(100):
        counts = {t: rng.randint(1, 8) for t in topics}
        members = {f"m{i}": _member(rng.sample(topics, rng.randint(1, 6)), generation=-1) for i in range(rng.randint(1, 8))}
        owner = sorted(members)[0]
        members[owner] = _member(sorted(members[owner].topics), [(t, p) for t in members[owner].topics for p in range(counts[t])], 2)
        plan = sticky_assign(counts, members)
        wanted = sorted((t, p) for t in {t for m in members.values() for t in m.topics} for p in range(counts[t]))
        assert _every(plan) == wanted
        for taker, mine in plan.items():
            for donor, theirs in plan.items():
                if len(theirs) - len(mine) >= 2:
                    assert not [tp for tp in theirs if tp[0] in members[taker].topics], (taker, donor, plan)
