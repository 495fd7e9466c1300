"""One group of the consumer group protocol (KIP-848): its members, epochs
and target assignment (Kafka's ``ConsumerGroup`` / ``ConsumerGroupMember``).

- The **group epoch** goes up whenever the membership or a subscription
  changes, or the subscribed topics' partitions do (a topic created,
  deleted or given more partitions);
- the **target assignment** is computed by a server-side assignor
  (`kclient.broker.group.server_assignors`) for a group epoch, its
  **assignment epoch**;
- each member has a **member epoch**: the assignment epoch it has
  reconciled to (`kclient.broker.group.reconciliation`), and the
  partitions it owns; `partition_epochs` says which member epoch owns each
  partition, so a partition is handed to a new member only once its
  previous owner released it.

States, as Kafka names them (ListGroups, ConsumerGroupDescribe):
``Empty`` (no members), ``Assigning`` (the target assignment is behind the
group epoch), ``Reconciling`` (a member has not reached the target yet),
``Stable``; ``Dead`` once deleted or moved away.

The state is written to ``__consumer_offsets`` as Kafka's records
(`kclient.broker.group.consumer_records`) and read back by the next
coordinator of the group, so members keep their epochs and partitions
across a coordinator change. Committed offsets are stored as the classic
groups' are.

Trio-thread only; no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import attrs

from kclient.broker.group.reconciliation import STABLE as RECONCILED
from kclient.broker.group.reconciliation import MemberAssignment, Partitions

EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = "Stable"
DEAD = "Dead"


@attrs.define
class ConsumerGroupMember:
    """One member of a consumer-protocol group.

    Attributes:
        member_id: Its id (client-generated from ConsumerGroupHeartbeat v1).
        instance_id: Its ``group.instance.id`` when static (KIP-345).
        assignment: Its reconciliation state and partitions.
        last_heartbeat: When it was last heard from (trio time, seconds).
        revocation_deadline: While it has partitions to revoke: when it is
            fenced if it has not (trio time, seconds), else None.
    """

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assignment: MemberAssignment = attrs.Factory(MemberAssignment)
    last_heartbeat: float = 0.0
    revocation_deadline: float | None = None

    @property
    def member_epoch(self) -> int:
        """The member's epoch."""
        return self.assignment.member_epoch

    def subscription(self) -> tuple[tuple[str, ...], str | None]:
        """``(topic names, regex)``: what a change of bumps the group epoch."""
        return self.subscribed_topic_names, self.subscribed_topic_regex


@attrs.frozen
class TopicInfo:
    """A subscribed topic as the group last saw it in the metadata."""

    topic_id: uuid.UUID
    partitions: int


class ConsumerGroup:
    """A consumer-protocol group (see the module docstring).

    Args:
        group_id: The group id.

    Attributes:
        members: member id -> member.
        static_members: instance id -> the member id holding it.
        group_epoch: Bumped on every membership, subscription or metadata change.
        assignment_epoch: The group epoch of `target`.
        target: member id -> its partitions in the target assignment.
        partition_epochs: ``(topic id, partition)`` -> epoch of the member
            owning it (assigned or pending revocation).
        topics: The subscribed topics' ids and partition counts, by name,
            when the group epoch was last computed.
        assignor: The name of the assignor that computed `target`.
        written: The group's records last written to ``__consumer_offsets``
            (key -> value; `kclient.broker.group.consumer_records`).
    """

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.target: dict[str, Partitions] = {}
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.assignor = ""
        self.dead = False
        self.written: dict[bytes, bytes] = {}

    def __repr__(self) -> str:
        return f"<ConsumerGroup {self.group_id!r} {self.state} epoch={self.group_epoch} members={len(self.members)}>"

    @property
    def state(self) -> str:
        """Kafka's consumer group state (see the module docstring)."""
        if self.dead:
            return DEAD
        if not self.members:
            return EMPTY
        if self.assignment_epoch < self.group_epoch:
            return ASSIGNING
        if any(m.assignment.state != RECONCILED or m.member_epoch != self.assignment_epoch for m in self.members.values()):
            return RECONCILING
        return STABLE

    def add(self, member: ConsumerGroupMember) -> None:
        """Add ``member`` (its instance id mapped when static)."""
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerGroupMember | None:
        """Remove a member: its partitions are released and its target
        assignment dropped. Returns it, or None if unknown."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.release(member.assignment.owned())
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def release(self, partitions: Iterable[tuple[uuid.UUID, int]]) -> None:
        """Mark ``partitions`` as owned by no member."""
        for tp in partitions:
            self.partition_epochs.pop(tp, None)

    def set_assignment(self, member: ConsumerGroupMember, assignment: MemberAssignment) -> None:
        """Give ``member`` its next reconciliation state, moving the
        ownership of its partitions (`partition_epochs`) with it."""
        self.release(member.assignment.owned())
        member.assignment = assignment
        for tp in assignment.owned():
            self.partition_epochs[tp] = assignment.member_epoch

    def subscribed_topic_names(self) -> set[str]:
        """Every topic name some member subscribes to by name."""
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def regexes(self) -> set[str]:
        """Every topic regex some member subscribes with."""
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}


__all__ = ["ASSIGNING", "DEAD", "EMPTY", "RECONCILING", "STABLE", "ConsumerGroup", "ConsumerGroupMember", "TopicInfo"]
