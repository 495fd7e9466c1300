"""The sticky assignors of the "consumer" group protocol: Kafka's
``StickyAssignor`` logic (KIP-54) and its cooperative form,
``CooperativeStickyAssignor`` (KIP-429, JoinGroup protocol name
``cooperative-sticky``).

Goals, in Kafka's order:

1. Balance: among members that could take a partition from each other
   (subscribed to its topic), partition counts differ by at most one; with
   equal subscriptions every member gets ``partitions // members`` or one
   more.
2. Stickiness: a member keeps the partitions it owned (the
   ``owned_partitions`` of its subscription, v1+, KIP-429) as far as
   balance allows. Conflicting claims are settled by generation (the
   subscription's ``generation_id``, v2+, KIP-792, or the 4-byte user data
   Kafka's cooperative-sticky members also send): the claim of the highest
   generation wins; two claims of the same highest generation both lose.

With equal subscriptions the plan is made at once (quotas, owned
partitions kept up to them, the rest dealt out); otherwise unowned
partitions go to the least loaded eligible member, then single partitions
move from a member to one with two fewer that subscribes to their topic
until none can.

Cooperative (`cooperative_sticky_assign`): a partition that one member
owned and another is now given is left out of the new owner's assignment
in this generation; its old owner revokes it and rejoins, and the next
rebalance hands it out (Kafka's ``RebalanceProtocol.COOPERATIVE``).

Pure: no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

import attrs

#: ``(topic, partition)``
Partition = tuple[str, int]
#: ``{member_id: [(topic, partition), ...]}``
Plan = dict[str, list[Partition]]

#: A member without a known generation (Kafka's ``DEFAULT_GENERATION``).
NO_GENERATION = -1


@attrs.frozen
class StickyMember:
    """What the sticky assignors read from one member's subscription.

    Attributes:
        topics: The subscribed topics.
        owned: The partitions the member says it owns.
        generation: The generation it owned them in (`NO_GENERATION`
            when unknown).
    """

    topics: frozenset[str]
    owned: tuple[Partition, ...] = ()
    generation: int = NO_GENERATION


def member_generation(version: int, generation_id: int, user_data: bytes | None) -> int:
    """The generation a subscription's owned partitions belong to, read as
    Kafka's ``CooperativeStickyAssignor`` does: the ``generation_id`` field
    of a v2+ subscription when set, else the int32 of the assignor's user
    data (its ``CooperativeStickyAssignor`` user data v0).

    Args:
        version: The subscription version.
        generation_id: Its ``generation_id`` field (-1 when unset).
        user_data: Its user data.

    Returns:
        The generation, or `NO_GENERATION`.
    """
    if version >= 2 and generation_id >= 0:
        return generation_id
    if user_data is not None and len(user_data) >= 4:
        return int(struct.unpack(">i", user_data[:4])[0])
    return NO_GENERATION


def generation_user_data(generation: int) -> bytes:
    """The user data a cooperative-sticky member sends: its generation as
    an int32 (read by members that decode subscriptions older than v2).

    Args:
        generation: The member's last generation (-1 before the first).

    Returns:
        4 bytes.
    """
    return struct.pack(">i", generation)


def _valid_owned(partitions: set[Partition], members: Mapping[str, StickyMember]) -> dict[str, list[Partition]]:
    """The owned partitions each member may keep: partitions that exist,
    of topics it subscribes to, claimed by it alone at the highest claiming
    generation."""
    claims: dict[Partition, list[tuple[int, str]]] = {}
    for member_id, member in members.items():
        for tp in set(member.owned):
            if tp in partitions and tp[0] in member.topics:
                claims.setdefault(tp, []).append((member.generation, member_id))
    kept: dict[str, list[Partition]] = {member_id: [] for member_id in members}
    for tp, claimants in claims.items():
        best = max(generation for generation, _ in claimants)
        winners = [member_id for generation, member_id in claimants if generation == best]
        if len(winners) == 1:
            kept[winners[0]].append(tp)
    return kept


def _fill(plan: Plan, free: Iterable[Partition], members: Mapping[str, StickyMember]) -> None:
    """Give each unowned partition to the eligible member with the fewest
    partitions (ties by member id); partitions with the fewest eligible
    members go first."""
    eligible = {tp: sorted(m for m, member in members.items() if tp[0] in member.topics) for tp in free}
    for tp in sorted(eligible, key=lambda tp: (len(eligible[tp]), tp)):
        if eligible[tp]:
            taker = min(eligible[tp], key=lambda m: (len(plan[m]), m))
            plan[taker].append(tp)


def _move_one(plan: Plan, members: Mapping[str, StickyMember]) -> bool:
    """Move one partition from a member to one with at least two fewer
    that subscribes to its topic (most loaded donor, least loaded taker);
    False when the plan is balanced."""
    by_load = sorted(plan, key=lambda m: (len(plan[m]), m))
    for taker in by_load:
        for donor in reversed(by_load):
            if len(plan[donor]) - len(plan[taker]) < 2:
                break
            movable = [tp for tp in plan[donor] if tp[0] in members[taker].topics]
            if movable:
                tp = max(movable)
                plan[donor].remove(tp)
                plan[taker].append(tp)
                return True
    return False


def _equal_subscriptions(kept: dict[str, list[Partition]], partitions: set[Partition]) -> Plan:
    """Every member subscribes to the same topics (Kafka's constrained
    assignment): ``partitions // members`` each, one more for the first
    ``partitions % members`` members by owned count; each keeps what it
    owns up to its quota, the rest is dealt to those below theirs."""
    base, extra = divmod(len(partitions), len(kept))
    order = sorted(kept, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    plan = {m: sorted(kept[m])[: quota[m]] for m in order}
    taken = {tp for tps in plan.values() for tp in tps}
    free = iter(sorted(partitions - taken))
    for m in sorted(plan):
        plan[m].extend(next(free) for _ in range(quota[m] - len(plan[m])))
    return plan


def sticky_assign(partitions_per_topic: Mapping[str, int], members: Mapping[str, StickyMember]) -> Plan:
    """The sticky assignment (balanced, then sticky), with no partition
    withheld: Kafka's ``StickyAssignor`` goals.

    Args:
        partitions_per_topic: ``{topic: partition count}``; topics missing
            here are skipped.
        members: ``{member_id: StickyMember}``.

    Returns:
        ``{member_id: [(topic, partition), ...]}`` for every member, each
        list sorted; every partition of a subscribed topic goes to exactly
        one member.
    """
    subscribed = {t for member in members.values() for t in member.topics}
    partitions = {(t, p) for t in subscribed for p in range(partitions_per_topic.get(t) or 0)}
    plan = _valid_owned(partitions, members)
    if members and len({member.topics for member in members.values()}) == 1:
        plan = _equal_subscriptions(plan, partitions)
    else:
        _fill(plan, partitions - {tp for tps in plan.values() for tp in tps}, members)
        while _move_one(plan, members):
            pass
    return {member_id: sorted(tps) for member_id, tps in plan.items()}


def withhold_moved(plan: Plan, members: Mapping[str, StickyMember]) -> Plan:
    """The cooperative adjustment: a partition some member owned (by its
    subscription) and another member is given now is left out of the new
    owner's assignment (Kafka's ``CooperativeStickyAssignor``).

    Args:
        plan: The balanced plan.
        members: The subscriptions it was made for.

    Returns:
        The plan without the partitions still to be revoked by their owner.
    """
    owned = {member_id: set(member.owned) for member_id, member in members.items()}
    revoked = {tp for member_id, tps in owned.items() for tp in tps - set(plan.get(member_id, ()))}
    return {member_id: [tp for tp in tps if tp in owned[member_id] or tp not in revoked] for member_id, tps in plan.items()}


def cooperative_sticky_assign(partitions_per_topic: Mapping[str, int], members: Mapping[str, StickyMember]) -> Plan:
    """Kafka's ``CooperativeStickyAssignor``: `sticky_assign`, then
    `withhold_moved`.

    Args:
        partitions_per_topic: ``{topic: partition count}``.
        members: ``{member_id: StickyMember}``.

    Returns:
        ``{member_id: [(topic, partition), ...]}`` for every member, each
        list sorted; no partition is given to a member while another one
        still owns it.
    """
    return withhold_moved(sticky_assign(partitions_per_topic, members), members)


__all__ = [
    "NO_GENERATION",
    "StickyMember",
    "cooperative_sticky_assign",
    "generation_user_data",
    "member_generation",
    "sticky_assign",
    "withhold_moved",
]
