"""A consumer-protocol member's next assignment (KIP-848 reconciliation):
how the coordinator moves a member from its current assignment towards the
group's target assignment without two members ever owning a partition at
once.

A member is in one of Kafka's states (``MemberState``):

- ``STABLE``: it owns its assignment at the target assignment's epoch;
- ``UNREVOKED_PARTITIONS``: partitions it owns are not in its target; it
  must revoke them first. Until a heartbeat's ``topic_partitions`` (the
  partitions it owns) no longer lists any of them, its epoch stays the
  same and it gets nothing new;
- ``UNRELEASED_PARTITIONS``: partitions of its target are still owned
  (assigned or pending revocation) by another member; it gets them once
  their owner released them, and meanwhile has the target epoch;
- ``UNKNOWN``: not known (a member loaded from elsewhere); only a member
  owning nothing may go on.

`next_assignment` is Kafka's ``CurrentAssignmentBuilder``, written anew from
KIP-848's description: the partitions it keeps are those of its current
assignment still in its target; the ones to revoke the rest of its current
assignment; the ones it may add are those of its target no other member
owns (``partition_epoch`` -1). Pure: no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

import attrs

#: A set of partitions: topic id -> partition indexes.
Partitions = Mapping[uuid.UUID, frozenset[int]]

STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"
UNKNOWN = "unknown"


class FencedMemberError(Exception):
    """The member is in a state it cannot reconcile from
    (FENCED_MEMBER_EPOCH): it must give up its partitions and rejoin."""


@attrs.frozen
class MemberAssignment:
    """A member's reconciliation state: its epochs, the partitions it may
    use (``assigned``) and those it must revoke (``pending_revocation``)."""

    state: str = STABLE
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Partitions = attrs.Factory(dict)
    pending_revocation: Partitions = attrs.Factory(dict)

    def owned(self) -> Iterable[tuple[uuid.UUID, int]]:
        """Every partition the member holds: assigned or pending revocation."""
        for source in (self.assigned, self.pending_revocation):
            for topic_id, partitions in source.items():
                for p in partitions:
                    yield topic_id, p


def freeze(partitions: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    """``partitions`` without its empty topics, as frozensets.

    Args:
        partitions: topic id -> partition indexes.

    Returns:
        The same partitions, immutable.
    """
    return {t: frozenset(ps) for t, ps in partitions.items() if ps}


def _owns_any(owned: list[tuple[uuid.UUID, list[int]]] | None, partitions: Partitions) -> bool:
    """Whether a heartbeat's owned partitions still list any of
    ``partitions`` (None, not sent: assume it does, as Kafka)."""
    if owned is None:
        return True
    return any(p in partitions.get(topic_id, ()) for topic_id, ps in owned for p in ps)


def _with_epoch(current: MemberAssignment, epoch: int, **changes: object) -> MemberAssignment:
    """``current`` with ``changes`` and its epoch set to ``epoch`` (the old
    one becoming the previous epoch, as Kafka's ``updateMemberEpoch``)."""
    return attrs.evolve(current, member_epoch=epoch, previous_member_epoch=current.member_epoch, **changes)  # type: ignore[arg-type]


def next_assignment(
    current: MemberAssignment,
    target_epoch: int,
    target: Partitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: list[tuple[uuid.UUID, list[int]]] | None,
) -> MemberAssignment:
    """The member's next state, from its current one and its target.

    Args:
        current: The member's state now.
        target_epoch: The epoch of the group's target assignment.
        target: The member's partitions in it.
        partition_epoch: ``(topic id, partition) -> the epoch of the member
            owning it``, -1 when free. The member's own partitions count as
            owned: callers remove them first or pass a function that
            ignores them.
        owned: The partitions the member's heartbeat says it owns
            (``[(topic id, partitions)]``), or None when not sent.

    Returns:
        The new state (``current`` itself when nothing changes).

    Raises:
        FencedMemberError: An ``UNKNOWN`` member that owns partitions (or
            did not say).
    """
    state = current.state
    if state == STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _compute(current, current.member_epoch, target_epoch, target, partition_epoch, owned)
    if state == UNREVOKED_PARTITIONS:
        if _owns_any(owned, current.pending_revocation):
            return current
        return _compute(current, current.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state == UNRELEASED_PARTITIONS:
        return _compute(current, current.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise FencedMemberError("the member is in an unknown state: it must give up its partitions and rejoin")
    return _compute(current, target_epoch, target_epoch, target, partition_epoch, owned)


def _compute(
    current: MemberAssignment,
    revoking_epoch: int,
    target_epoch: int,
    target: Partitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: list[tuple[uuid.UUID, list[int]]] | None,
) -> MemberAssignment:
    """The member's next state (``CurrentAssignmentBuilder.computeNextAssignment``):
    ``revoking_epoch`` is its epoch while it still has partitions to revoke."""
    keep: dict[uuid.UUID, set[int]] = {}
    revoke: dict[uuid.UUID, set[int]] = {}
    add: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(current.assigned):
        wanted = set(target.get(topic_id, ()))
        have = set(current.assigned.get(topic_id, ()))
        keep[topic_id] = have & wanted
        revoke[topic_id] = have - wanted
        free = {p for p in wanted - have if partition_epoch(topic_id, p) == -1}
        unreleased = unreleased or len(free) < len(wanted - have)
        add[topic_id] = free
    frozen_revoke = freeze(revoke)
    if frozen_revoke and _owns_any(owned, frozen_revoke):
        return _with_epoch(current, revoking_epoch, state=UNREVOKED_PARTITIONS, assigned=freeze(keep), pending_revocation=frozen_revoke)
    assigned = freeze({t: keep.get(t, set()) | add.get(t, set()) for t in set(keep) | set(add)})
    return _with_epoch(current, target_epoch, state=UNRELEASED_PARTITIONS if unreleased else STABLE, assigned=assigned, pending_revocation={})


__all__ = [
    "STABLE",
    "UNKNOWN",
    "UNRELEASED_PARTITIONS",
    "UNREVOKED_PARTITIONS",
    "FencedMemberError",
    "MemberAssignment",
    "Partitions",
    "freeze",
    "next_assignment",
]
