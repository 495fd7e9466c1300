"""Server-side partition assignors of the consumer group protocol (KIP-848):
the group coordinator, not a member, computes the target assignment.

Kafka's two built-in assignors (``group.consumer.assignors``, default
``uniform,range``; the first is the group's default, a member may name
another with ConsumerGroupHeartbeat's ``server_assignor``):

- `UniformAssignor` (``uniform``): spreads every subscribed partition over
  the members subscribed to its topic, as evenly as it can, and keeps each
  partition on its current owner whenever balance allows (sticky), so a
  rebalance moves as few partitions as possible;
- `RangeAssignor` (``range``): for each topic, the members subscribed to it
  sorted by member id get contiguous ranges of its partitions, the first
  ``partitions % members`` one more (the classic ``range`` assignor's
  layout, so co-partitioned topics line up).

An assignment maps a topic id (KIP-516) to a set of partition indexes.
Pure: no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Protocol

import attrs

#: A member's partitions: topic id -> partition indexes.
TopicPartitions = dict[uuid.UUID, set[int]]


@attrs.frozen
class MemberSpec:
    """What an assignor knows of one member.

    Attributes:
        subscribed_topic_ids: The topics the member subscribes to (those
            that exist).
        current: The member's partitions in the current target assignment
            (the stickiness hint).
    """

    subscribed_topic_ids: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, frozenset[int] | set[int]] = attrs.Factory(dict)


class ServerAssignor(Protocol):
    """A server-side assignor (Kafka's ``ConsumerGroupPartitionAssignor``)."""

    #: The name members and ``group.consumer.assignors`` use.
    name: str

    def assign(self, members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]) -> dict[str, TopicPartitions]:
        """The target assignment of every member.

        Args:
            members: member id -> its subscription and current partitions.
            partition_counts: topic id -> number of partitions, for every
                subscribed topic that exists.

        Returns:
            member id -> its partitions (every member present, possibly
            with none).
        """
        ...


def _eligible(members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]) -> dict[uuid.UUID, list[str]]:
    """topic id -> the members subscribed to it, sorted by member id."""
    out: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(members):
        for topic_id in members[member_id].subscribed_topic_ids:
            if topic_id in partition_counts:
                out.setdefault(topic_id, []).append(member_id)
    return out


class UniformAssignor:
    """Balanced and sticky (see the module docstring). The members sharing
    a set of topics (``M`` of them, ``P`` partitions) may each keep
    ``P // M`` of their current partitions, and ``P % M`` of them one
    more; the partitions kept stay where they are (while the topic is
    still subscribed and the partition exists), the rest go one by one to
    the eligible member with the fewest (ties: the smallest member id),
    topics with the fewest subscribers first."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]) -> dict[str, TopicPartitions]:
        """See `ServerAssignor.assign`."""
        eligible = _eligible(members, partition_counts)
        result: dict[str, TopicPartitions] = {m: {} for m in members}
        counts = dict.fromkeys(members, 0)
        taken: set[tuple[uuid.UUID, int]] = set()
        kept = {m: self._keepable(members[m], partition_counts) for m in sorted(members)}
        floor, extras = self._quotas(members, eligible, partition_counts)
        # Sticky: keep current partitions up to the floor, then one more while extras last.
        for allowance in ("floor", "extra"):
            for member_id, keepable in kept.items():
                limit = floor[member_id] if allowance == "floor" else floor[member_id] + 1
                if allowance == "extra" and (extras.get(_sharing_key(members[member_id], eligible), 0) <= 0 or counts[member_id] != floor[member_id]):
                    continue
                while keepable and counts[member_id] < limit:
                    tp = keepable.pop(0)
                    if tp in taken:
                        continue
                    result[member_id].setdefault(tp[0], set()).add(tp[1])
                    counts[member_id] += 1
                    taken.add(tp)
                if allowance == "extra" and counts[member_id] == limit:
                    extras[_sharing_key(members[member_id], eligible)] -= 1
        # The rest: to the least loaded eligible member, topics with the
        # fewest subscribers first (their partitions have the fewest places to go).
        for topic_id in sorted(eligible, key=lambda t: (len(eligible[t]), str(t))):
            for p in range(partition_counts[topic_id]):
                if (topic_id, p) in taken:
                    continue
                member_id = min(eligible[topic_id], key=lambda m: (counts[m], m))
                result[member_id].setdefault(topic_id, set()).add(p)
                counts[member_id] += 1
        return result

    @staticmethod
    def _keepable(spec: MemberSpec, partition_counts: Mapping[uuid.UUID, int]) -> list[tuple[uuid.UUID, int]]:
        """The member's current partitions it may keep: of topics it still
        subscribes to, that still exist; in a stable order."""
        return [
            (topic_id, p)
            for topic_id in sorted(spec.current, key=str)
            if topic_id in spec.subscribed_topic_ids and topic_id in partition_counts
            for p in sorted(spec.current[topic_id])
            if p < partition_counts[topic_id]
        ]

    @staticmethod
    def _quotas(
        members: Mapping[str, MemberSpec], eligible: dict[uuid.UUID, list[str]], partition_counts: Mapping[uuid.UUID, int]
    ) -> tuple[dict[str, int], dict[frozenset[str], int]]:
        """``(member id -> P // M, sharing members -> P % M)``: the floor
        each member keeps, and how many members of each set sharing the
        same topics may keep one more."""
        floor: dict[str, int] = {}
        extras: dict[frozenset[str], int] = {}
        for member_id, spec in members.items():
            total = sum(partition_counts[t] for t in spec.subscribed_topic_ids if t in partition_counts)
            key = _sharing_key(spec, eligible) or frozenset({member_id})
            floor[member_id], extras[key] = divmod(total, len(key))
        return floor, extras


def _sharing_key(spec: MemberSpec, eligible: dict[uuid.UUID, list[str]]) -> frozenset[str]:
    """The members subscribed to any topic ``spec`` subscribes to."""
    return frozenset(m for t in spec.subscribed_topic_ids for m in eligible.get(t, []))


class RangeAssignor:
    """Contiguous ranges per topic (see the module docstring)."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]) -> dict[str, TopicPartitions]:
        """See `ServerAssignor.assign`."""
        result: dict[str, TopicPartitions] = {m: {} for m in members}
        for topic_id, subscribers in _eligible(members, partition_counts).items():
            count = partition_counts[topic_id]
            per_member, extra = divmod(count, len(subscribers))
            start = 0
            for i, member_id in enumerate(subscribers):
                size = per_member + (1 if i < extra else 0)
                if size:
                    result[member_id][topic_id] = set(range(start, start + size))
                start += size
        return result


#: The assignors this broker has, by name.
ASSIGNORS: dict[str, ServerAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}


def assignors_for(names: list[str]) -> dict[str, ServerAssignor]:
    """The assignors ``group.consumer.assignors`` names, in its order (the
    first is the default).

    Args:
        names: Assignor names (``uniform``, ``range``).

    Returns:
        name -> assignor, in the order given.

    Raises:
        ValueError: A name this broker has no assignor for.
    """
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown:
        raise ValueError(f"unknown server-side assignor(s) {unknown}; known: {sorted(ASSIGNORS)}")
    return {n: ASSIGNORS[n] for n in names}


__all__ = ["ASSIGNORS", "MemberSpec", "RangeAssignor", "ServerAssignor", "TopicPartitions", "UniformAssignor", "assignors_for"]
