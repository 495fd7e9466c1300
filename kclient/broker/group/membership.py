"""One consumer group's members and state (Kafka's classic group
protocol: ``GroupMetadata`` / ``MemberMetadata``).

States, as Kafka names them (and DescribeGroups / ListGroups report):

- ``Empty``: no members (offsets may still be committed);
- ``PreparingRebalance``: members are (re)joining; JoinGroup responses are
  held until every known member rejoined or the rebalance timeout passed;
- ``CompletingRebalance``: the join is done, waiting for the leader's
  SyncGroup with the assignments;
- ``Stable``: every member has its assignment;
- ``Dead``: the group was deleted or moved to another coordinator.

Static members (KIP-345) carry a ``group.instance.id``; the group maps
each instance id to the member id that holds it now (`Group.static_members`,
rebuilt from the group metadata record after a reload), so a restarted
instance takes its place back and the member id it replaced is fenced.

Trio-thread only; no I/O.
"""

from __future__ import annotations

from collections import Counter
from typing import Generic, TypeVar

import attrs
import trio

from kclient.broker.group.records import GroupRecord, MemberRecord
from kclient.errors import FENCED_INSTANCE_ID, NONE, UNKNOWN_MEMBER_ID
from kclient.protocol.messages.join_group import JoinGroupResponse
from kclient.protocol.messages.sync_group import SyncGroupResponse

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"


R = TypeVar("R")


class Waiter(Generic[R]):
    """A parked JoinGroup or SyncGroup: `set` stores the response (a
    ``JoinGroupResponse`` / ``SyncGroupResponse``) and wakes the request's
    handler."""

    def __init__(self) -> None:
        self.event = trio.Event()
        self.result: R | None = None

    def set(self, result: R) -> None:
        if not self.event.is_set():
            self.result = result
            self.event.set()


@attrs.define
class Member:
    """One member: its identity (``group_instance_id`` for a static
    member, KIP-345), timeouts (ms), the protocols it offered
    (``[(name, metadata)]`` in preference order), its assignment, the
    trio time of its last sign of life and its parked requests."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat: float = 0.0
    join_waiter: Waiter[JoinGroupResponse] | None = None
    sync_waiter: Waiter[SyncGroupResponse] | None = None
    group_instance_id: str | None = None

    def metadata(self, protocol: str) -> bytes:
        """The metadata this member offered with ``protocol``."""
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """True if ``protocols`` is what this member offered last."""
        return list(protocols) == list(self.protocols)


class Group:
    """A group's state (see the module docstring).

    Args:
        group_id: The group id.
        state: Its initial state (``Empty``).
    """

    def __init__(self, group_id: str, state: str = EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms = -1
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        #: ``group.instance.id`` -> the member id holding it (KIP-345).
        self.static_members: dict[str, str] = {}
        #: Member ids handed out with MEMBER_ID_REQUIRED (KIP-394) -> trio
        #: deadline by which they must join with it.
        self.pending_members: dict[str, float] = {}
        #: PreparingRebalance: when the join completes at the latest (trio
        #: time), and the earliest (the initial rebalance delay).
        self.rebalance_deadline = 0.0
        self.join_not_before = 0.0
        #: After a join: when members that did not sync are dropped (in
        #: CompletingRebalance or Stable), and those members.
        self.sync_deadline = 0.0
        self.pending_sync: set[str] = set()

    def __repr__(self) -> str:
        return f"<Group {self.group_id!r} {self.state} generation {self.generation_id} members {sorted(self.members)}>"

    def is_(self, state: str) -> bool:
        return self.state == state

    def transition(self, state: str, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    # ------------------------------------------------------------ members

    def add(self, member: Member) -> None:
        """Add ``member`` (a static one is mapped by its instance id)."""
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        """Remove a member (and its instance id's mapping, if it holds it).

        Returns:
            The member removed, or None if there was none.
        """
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is not None and member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        return member

    def validate_member(self, member_id: str, group_instance_id: str | None) -> int:
        """Whether a request naming ``member_id`` (and ``group_instance_id``,
        when static) comes from a current member (Kafka's
        ``ClassicGroup.validateMember``).

        Returns:
            NONE; UNKNOWN_MEMBER_ID (no such member, or an instance id the
            group does not know); FENCED_INSTANCE_ID (the instance id is
            held by another member id: this one was replaced).
        """
        if group_instance_id is not None:
            holder = self.static_members.get(group_instance_id)
            if holder is None:
                return UNKNOWN_MEMBER_ID
            if holder != member_id:
                return FENCED_INSTANCE_ID
        return NONE if member_id in self.members else UNKNOWN_MEMBER_ID

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> tuple[Member, Member]:
        """Give the static member ``old_member_id`` the id ``new_member_id``
        (a restarted instance rejoined): same assignment, protocols and
        timeouts; the leader moves with it.

        Returns:
            ``(the old member, the new one)``; the old one's parked
            requests are the caller's to fence.
        """
        old = self.members.pop(old_member_id)
        new = attrs.evolve(old, member_id=new_member_id, protocols=list(old.protocols), join_waiter=None, sync_waiter=None)
        self.members[new_member_id] = new
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync:  # the new id owes the SyncGroup
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return old, new

    # ------------------------------------------------------------ protocols

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member offering ``protocols`` of ``protocol_type`` may
        join: an empty group takes any non-empty list; otherwise the type
        must match and one protocol be common to every member."""
        if not protocols:
            return False
        if not self.members and not self.pending_members:
            return True
        if self.protocol_type is not None and protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        return bool(self.candidate_protocols() & names) if self.members else True

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for the first of its protocols
        that every member supports; the most votes win (ties: the leader's
        preference order)."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] += 1
                    break
        best = max(votes.values())
        order = [name for name, _ in self.members[self.leader_id].protocols] if self.leader_id in self.members else sorted(votes)
        return next(name for name in order if votes.get(name) == best)

    # ------------------------------------------------------------ joins

    def all_joined(self) -> bool:
        """Every member has a JoinGroup parked and no member id handed out
        with MEMBER_ID_REQUIRED is still expected."""
        return not self.pending_members and all(m.join_waiter is not None for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------ records

    def to_record(self) -> GroupRecord:
        """The group metadata record of the current generation."""
        protocol = self.protocol_name
        members = tuple(
            MemberRecord(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol else b"",
                assignment=m.assignment,
                group_instance_id=m.group_instance_id,
            )
            for m in self.members.values()
        )
        return GroupRecord(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp_ms,
            members=members,
        )

    @classmethod
    def from_record(cls, group_id: str, record: GroupRecord, now: float) -> Group:
        """The group a loaded record describes: ``Empty`` without members,
        else ``Stable`` with every member's heartbeat starting ``now``."""
        group = cls(group_id, STABLE if record.members else EMPTY)
        group.state_timestamp_ms = record.current_state_timestamp
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        group.generation_id = record.generation
        group.leader_id = record.leader
        for m in record.members:
            member = Member(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout_ms=m.session_timeout,
                rebalance_timeout_ms=m.rebalance_timeout,
                protocol_type=record.protocol_type,
                protocols=[(record.protocol or "", m.subscription)],
                assignment=m.assignment,
                last_heartbeat=now,
                group_instance_id=m.group_instance_id,
            )
            group.add(member)
        return group


__all__ = ["COMPLETING_REBALANCE", "DEAD", "EMPTY", "PREPARING_REBALANCE", "STABLE", "Group", "Member", "Waiter"]
