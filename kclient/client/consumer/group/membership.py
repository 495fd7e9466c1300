"""One member of a broker-coordinated consumer group: JoinGroup, SyncGroup,
Heartbeat and LeaveGroup with the "consumer" protocol (Kafka protocol
guide, https://kafka.apache.org/protocol, the group membership APIs;
"The Consumer Group Protocol" in "A Guide To The Kafka Protocol",
https://cwiki.apache.org/confluence/display/KAFKA/A+Guide+To+The+Kafka+Protocol;
KIP-62 rebalance timeout, KIP-394 member id required).

`GroupMember.join` runs one rebalance round for this member: JoinGroup
(retried with the member id the coordinator hands out for
``MEMBER_ID_REQUIRED``, with an empty one after ``UNKNOWN_MEMBER_ID``), the
leader's assignment (an assignor of
`kclient.client.consumer.group.assignors` over every member's
subscription and the topics' partition counts), SyncGroup, and the decoded
assignment. ``REBALANCE_IN_PROGRESS`` / ``ILLEGAL_GENERATION`` during a
round start the round again. Coordinator errors are retried by
`kclient.client.consumer.group.coordinator.GroupCoordinator.call`.

A static member (``group.instance.id``, KIP-345) names its instance id in
JoinGroup (v5+), SyncGroup and Heartbeat (v3+): restarted within its
session timeout, it gets its partitions back without a rebalance, and
`GroupMember.leave` sends no LeaveGroup (its partitions wait for it until
its session times out). ``FENCED_INSTANCE_ID`` (another process took the
instance id) is raised as `kclient.errors.FencedInstanceIdError`: fatal for
this member. A returning static leader told to skip the assignment
(JoinGroup v9+, KIP-814) keeps the group's assignment as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol

import attrs

from kclient.client.consumer.group.assignors import KNOWN_ASSIGNORS, TopicPartition, assign
from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.errors import (
    NONE,
    IllegalGenerationError,
    KafkaError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    error_for_code,
)
from kclient.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kclient.protocol.messages import HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP
from kclient.protocol.messages.heartbeat import HeartbeatRequest
from kclient.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from kclient.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from kclient.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse

log = logging.getLogger("kclient.consumer")

#: The errors after which a member joins again.
REJOIN_ERRORS = (RebalanceInProgressError, IllegalGenerationError, UnknownMemberIdError)


@attrs.frozen
class JoinResult:
    """What one rebalance round gave this member."""

    generation: int
    member_id: str
    leader_id: str
    protocol: str
    assignment: tuple[TopicPartition, ...]

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.member_id


class _ErrorCoded(Protocol):
    """A response with a top-level error code."""

    @property
    def error_code(self) -> int: ...


def _raise_for(response: _ErrorCoded, what: str) -> None:
    code = response.error_code
    if code != NONE:
        raise error_for_code(code)(what)


class GroupMember:
    """This consumer's membership of ``coordinator.group_id``.

    Args:
        coordinator: The group's coordinator client.
        session_timeout_ms: ``session.timeout.ms``.
        rebalance_timeout_ms: ``rebalance.timeout.ms`` (JoinGroup v1+).
        assignors: Protocol names offered, in order of preference (each a
            name of `kclient.client.consumer.group.assignors.KNOWN_ASSIGNORS`).
        group_instance_id: ``group.instance.id``: this member's static
            identity (KIP-345), or None for a dynamic member.
    """

    def __init__(
        self,
        coordinator: GroupCoordinator,
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        assignors: Iterable[str],
        group_instance_id: str | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.group_id = coordinator.group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.assignors = list(assignors)
        self.group_instance_id = group_instance_id
        self.member_id = ""
        self.generation = -1

    @property
    def is_static(self) -> bool:
        """Whether this member has a ``group.instance.id`` (KIP-345)."""
        return self.group_instance_id is not None

    def current(self) -> tuple[int, str]:
        """``(generation, member id)`` for commits (-1 and ``""`` before
        the first join)."""
        return self.generation, self.member_id

    async def join(self, topics: Iterable[str], partition_counts: Callable[[set[str]], Awaitable[Mapping[str, int]]], owned: Iterable[TopicPartition] = ()) -> JoinResult:
        """One rebalance round (repeated while the group rebalances again).

        Args:
            topics: This member's subscribed topics.
            partition_counts: ``await partition_counts(topics) ->
                {topic: partitions}``; asked by the leader for every
                member's topics.
            owned: The partitions this member owns now (sent in the
                subscription, v1+, KIP-429, with the member's last
                generation, v2+, KIP-792, for the sticky assignors).

        Returns:
            The `JoinResult`.

        Raises:
            FencedInstanceIdError: another member holds this member's
                ``group.instance.id`` (fatal).
            BrokerResponseError: a JoinGroup or SyncGroup error a rejoin
                cannot fix (``INCONSISTENT_GROUP_PROTOCOL``,
                ``INVALID_SESSION_TIMEOUT``, ...), or coordinator errors
                after the retries.
        """
        topics = sorted(set(topics))
        by_topic: dict[str, list[int]] = {}
        for t, p in owned:
            by_topic.setdefault(t, []).append(p)
        metadata = encode_subscription(topics, owned_partitions=sorted(by_topic.items()), generation_id=self.generation, version=2)
        while True:
            try:
                joined = await self._join_group(metadata)
                assignments: list[SyncGroupRequestAssignment] = []
                if joined.leader == joined.member_id and joined.skip_assignment:
                    log.info("group %s: returning static leader %s keeps the group's assignment (KIP-814)", self.group_id, self.member_id)
                elif joined.leader == joined.member_id:
                    assignments = await self._assign(joined, partition_counts)
                assignment = await self._sync_group(joined.generation_id, joined.protocol_name, assignments)
            except REJOIN_ERRORS as exc:
                if isinstance(exc, UnknownMemberIdError):
                    self.member_id = ""
                log.info("group %s: rejoining: %s", self.group_id, exc)
                continue
            result = JoinResult(self.generation, self.member_id, joined.leader, joined.protocol_name or "", assignment)
            log.info(
                "group %s: member %s joined generation %d (%s, leader %s): %s",
                self.group_id, self.member_id, self.generation, result.protocol, result.leader_id,
                ", ".join(f"{t}-{p}" for t, p in assignment) or "nothing",
            )
            return result

    async def _join_group(self, metadata: bytes) -> JoinGroupResponse:
        while True:
            member_id = self.member_id
            body = JoinGroupRequest(
                group_id=self.group_id,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                member_id=member_id,
                group_instance_id=self.group_instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocols=[JoinGroupRequestProtocol(name=name, metadata=metadata) for name in self.assignors],
                reason=None,
            )
            holder: dict[str, str] = {}

            def check(response: JoinGroupResponse, holder: dict[str, str] = holder) -> JoinGroupResponse:
                code = response.error_code
                if code != NONE:
                    holder["member_id"] = response.member_id or ""
                    raise error_for_code(code)(f"JoinGroup of group {self.group_id!r}")
                return response

            wait_ms = self.rebalance_timeout_ms + 5000
            try:
                response = await self.coordinator.call(JOIN_GROUP, body, check, request_timeout_ms=wait_ms, timeout_ms=wait_ms + self.coordinator.timeout_ms)
            except MemberIdRequiredError:
                self.member_id = holder.get("member_id", "")
                log.debug("group %s: JoinGroup again with member id %s (KIP-394)", self.group_id, self.member_id)
                continue
            except UnknownMemberIdError:
                if not member_id:
                    raise
                self.member_id = ""
                continue
            self.member_id = response.member_id
            self.generation = response.generation_id
            return response

    async def _assign(self, joined: JoinGroupResponse, partition_counts: Callable[[set[str]], Awaitable[Mapping[str, int]]]) -> list[SyncGroupRequestAssignment]:
        protocol = joined.protocol_name or ""
        if protocol not in KNOWN_ASSIGNORS:  # the coordinator chose a protocol this member offered
            raise error_for_code(23)(f"group {self.group_id!r} chose assignor {protocol!r}, not one of {self.assignors}")
        subscriptions = {m.member_id: decode_subscription(bytes(m.metadata)) for m in joined.members}
        all_topics = {t for subscription in subscriptions.values() for t in subscription.topics}
        counts = await partition_counts(all_topics)
        plan = assign(protocol, counts, subscriptions)
        log.info("group %s: leader %s assigns by %s: %s", self.group_id, self.member_id, protocol, {m: [f"{t}-{p}" for t, p in tps] for m, tps in plan.items()})
        assignments = []
        for member, tps in plan.items():
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            assignments.append(SyncGroupRequestAssignment(member_id=member, assignment=encode_assignment(sorted(by_topic.items()))))
        return assignments

    async def _sync_group(self, generation: int, protocol: str | None, assignments: list[SyncGroupRequestAssignment]) -> tuple[TopicPartition, ...]:
        body = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=protocol,
            assignments=assignments,
        )

        def check(response: SyncGroupResponse) -> bytes | memoryview:
            _raise_for(response, f"SyncGroup of group {self.group_id!r} generation {generation}")
            return response.assignment

        wait_ms = self.rebalance_timeout_ms + 5000
        data = await self.coordinator.call(SYNC_GROUP, body, check, request_timeout_ms=wait_ms, timeout_ms=wait_ms + self.coordinator.timeout_ms)
        decoded = decode_assignment(bytes(data or b""))
        return tuple((t, p) for t, parts in decoded.assigned_partitions for p in sorted(parts))

    async def heartbeat(self) -> None:
        """One Heartbeat of the current generation.

        Raises:
            RebalanceInProgressError, IllegalGenerationError,
            UnknownMemberIdError: the member must rejoin.
            FencedInstanceIdError: another member holds this member's
                ``group.instance.id`` (fatal).
            BrokerResponseError: another error, or coordinator errors after
                the retries.
        """
        body = HeartbeatRequest(group_id=self.group_id, generation_id=self.generation, member_id=self.member_id, group_instance_id=self.group_instance_id)
        await self.coordinator.call(HEARTBEAT, body, lambda r: _raise_for(r, f"Heartbeat of group {self.group_id!r}"), attempts=1)

    async def leave(self) -> None:
        """LeaveGroup (the other members rebalance at once instead of after
        ``session.timeout.ms``), and forget the member id and generation.
        Errors are logged, not raised. A static member sends none (KIP-345:
        its partitions stay its own until its session times out, so a
        restart gets them back), as Kafka's consumer."""
        if not self.member_id:
            return
        member_id = self.member_id
        if self.is_static:
            log.info("group %s: static member %s (%s) stops without LeaveGroup", self.group_id, member_id, self.group_instance_id)
            self.member_id = ""
            self.generation = -1
            return
        # v0-2 name the member, v3+ list it (KIP-345): one message for both.
        body = LeaveGroupRequest(
            group_id=self.group_id,
            member_id=member_id,
            members=[MemberIdentity(member_id=member_id, group_instance_id=None, reason="the consumer is shutting down")],
        )
        try:
            await self.coordinator.call(LEAVE_GROUP, body, lambda r: _raise_for(r, f"LeaveGroup of group {self.group_id!r}"), attempts=2)
            log.info("group %s: member %s left", self.group_id, member_id)
        except KafkaError as exc:  # leaving is best effort: the session expires anyway
            log.warning("group %s: LeaveGroup of %s failed: %s", self.group_id, member_id, exc)
        self.member_id = ""
        self.generation = -1


__all__ = ["REJOIN_ERRORS", "GroupMember", "JoinResult"]
