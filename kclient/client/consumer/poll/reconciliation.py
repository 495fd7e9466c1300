"""The bookkeeping of a member of a consumer group with Kafka 4.0's group
protocol (``group.protocol=consumer``, KIP-848): the member id it makes
up, what each ConsumerGroupHeartbeat carries, and how a target
assignment received from the coordinator is reconciled with the
partitions the member owns.

KIP-848 ("The Next Generation of the Consumer Rebalance Protocol"): the
coordinator computes every member's target assignment and sends it, by
topic id, in a heartbeat response. The member revokes the partitions it
owns that are not in it (``on_partitions_revoked``), then takes the new
ones (``on_partitions_assigned``), and says so in its next heartbeat (the
owned ``TopicPartitions``); partitions in both keep being consumed. A
heartbeat sends the subscription, the rebalance timeout, the server
assignor and the owned partitions only when they changed since the last
one (all of them when joining): null means unchanged.

Pure: no I/O.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Mapping

import attrs

from kclient.client.consumer.poll.types import TopicPartition
from kclient.protocol.messages.consumer_group_heartbeat import LEAVE_EPOCH, STATIC_LEAVE_EPOCH

#: ``{topic id: partition ids}``: an assignment as the protocol carries it.
TopicIdAssignment = Mapping[uuid.UUID, frozenset[int]]


def new_member_id() -> str:
    """A member id made up by the member, as ConsumerGroupHeartbeat v1+
    asks (KIP-1082): a random UUID written as Kafka writes one
    (``Uuid.toString``: URL-safe base64 without padding, 22 characters,
    never starting with ``-``).

    Returns:
        The member id.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def leave_epoch(instance_id: str | None) -> int:
    """The member epoch that leaves the group.

    Args:
        instance_id: ``group.instance.id``, or None for a dynamic member.

    Returns:
        `STATIC_LEAVE_EPOCH` for a static member, else `LEAVE_EPOCH`.
    """
    return STATIC_LEAVE_EPOCH if instance_id is not None else LEAVE_EPOCH


def normalize(assignment: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    """An assignment with each topic's partitions as a frozen set (topics
    without partitions left out).

    Args:
        assignment: ``{topic id: partitions}``.

    Returns:
        The normalized copy.
    """
    return {tid: frozenset(parts) for tid, parts in assignment.items() if parts}


@attrs.frozen
class ReconciliationPlan:
    """What reconciling a target assignment means for this member.

    Attributes:
        assigned: The target's partitions whose topic names are known,
            sorted: the member's assignment once reconciled.
        revoked: Owned partitions not in ``assigned``, sorted (revoked first).
        added: Partitions of ``assigned`` not owned yet, sorted.
        resolved: ``assigned`` by topic id: what the next heartbeat says
            the member owns.
        unresolved: Topic ids of the target whose names are not known yet
            (looked up in the metadata; reconciled later).
    """

    assigned: tuple[TopicPartition, ...]
    revoked: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...]
    resolved: dict[uuid.UUID, frozenset[int]]
    unresolved: frozenset[uuid.UUID]


def plan_reconciliation(owned: Iterable[TopicPartition], target: TopicIdAssignment, names: Mapping[uuid.UUID, str]) -> ReconciliationPlan:
    """Compare the owned partitions with a target assignment.

    Args:
        owned: The partitions the member owns now.
        target: The latest target assignment, by topic id.
        names: Topic names by id (from the metadata).

    Returns:
        The `ReconciliationPlan`.
    """
    resolved = {tid: parts for tid, parts in target.items() if tid in names and parts}
    unresolved = frozenset(tid for tid, parts in target.items() if tid not in names and parts)
    assigned = sorted(TopicPartition(names[tid], p) for tid, parts in resolved.items() for p in parts)
    wanted = set(assigned)
    current = {TopicPartition(tp.topic, tp.partition) for tp in owned}
    revoked = sorted(current - wanted)
    added = sorted(wanted - current)
    return ReconciliationPlan(tuple(assigned), tuple(revoked), tuple(added), resolved, unresolved)


@attrs.frozen
class HeartbeatFields:
    """The optional fields of one ConsumerGroupHeartbeat (None: unchanged
    since the last heartbeat, as the protocol says).

    Attributes:
        rebalance_timeout_ms: ``max.poll.interval.ms``, or -1.
        subscribed_topic_names: Sorted topic names, or None.
        server_assignor: ``group.remote.assignor``, or None.
        topic_partitions: The owned partitions by topic id (sorted), or None.
    """

    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    server_assignor: str | None
    topic_partitions: list[tuple[uuid.UUID, list[int]]] | None


@attrs.define
class SentFields:
    """What the last heartbeat carried, to send only what changed (every
    field again after `reset`: when joining, after an error)."""

    rebalance_timeout_ms: int = -1
    topics: tuple[str, ...] | None = None
    assignor: str | None = None
    owned: dict[uuid.UUID, frozenset[int]] | None = None

    def reset(self) -> None:
        """Forget what was sent: the next heartbeat carries every field."""
        self.rebalance_timeout_ms = -1
        self.topics = None
        self.assignor = None
        self.owned = None

    def next_fields(self, *, send_all: bool, rebalance_timeout_ms: int, topics: Iterable[str], assignor: str | None, owned: TopicIdAssignment) -> HeartbeatFields:
        """The fields of the next heartbeat, remembered as sent.

        Args:
            send_all: Send every field (the member is joining).
            rebalance_timeout_ms: ``max.poll.interval.ms``.
            topics: The subscribed topic names.
            assignor: ``group.remote.assignor``, or None.
            owned: The partitions the member owns, by topic id.

        Returns:
            The `HeartbeatFields`.
        """
        timeout = -1
        if send_all or self.rebalance_timeout_ms != rebalance_timeout_ms:
            timeout = self.rebalance_timeout_ms = rebalance_timeout_ms
        names = tuple(sorted(set(topics)))
        send_names: list[str] | None = None
        if send_all or names != self.topics:
            self.topics = names
            send_names = list(names)
        send_assignor: str | None = None
        if assignor is not None and (send_all or assignor != self.assignor):
            send_assignor = self.assignor = assignor
        current = normalize(owned)
        partitions: list[tuple[uuid.UUID, list[int]]] | None = None
        if send_all or current != self.owned:
            self.owned = current
            partitions = [(tid, sorted(parts)) for tid, parts in sorted(current.items(), key=lambda item: str(item[0]))]
        return HeartbeatFields(timeout, send_names, send_assignor, partitions)


__all__ = [
    "HeartbeatFields",
    "ReconciliationPlan",
    "SentFields",
    "TopicIdAssignment",
    "leave_epoch",
    "new_member_id",
    "normalize",
    "plan_reconciliation",
]
