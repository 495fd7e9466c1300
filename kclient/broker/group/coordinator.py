"""The group coordinator: Kafka's classic consumer-group membership
protocol (Kafka documentation, "Consumer Group Protocol"; KIP-62 rebalance
timeouts, KIP-394 member ids, KIP-134 the initial rebalance delay).

A rebalance: members send JoinGroup; the first rebalance of an empty group
waits ``group.initial.rebalance.delay.ms`` for more members (extended by
each new one, up to the rebalance timeout), later ones until every known
member rejoined or the largest rebalance timeout passed (members that did
not rejoin are removed). The join completes with a new generation, the
protocol voted for by the members and a leader, who gets every member's
metadata and sends the assignments in its SyncGroup; the group metadata
record (members, generation, assignments) is written to
``__consumer_offsets`` and every member's SyncGroup answered with its own
assignment. A member that sends no Heartbeat (nor any other request) for
its session timeout is removed and the group rebalances; so does one that
leaves (LeaveGroup).

Static members (KIP-345, JoinGroup v5+ ``group_instance_id``): a member
that names its ``group.instance.id`` joins without MEMBER_ID_REQUIRED; when
that instance id is already in the group (a restarted instance, its old
member id unknown to it), the new member id replaces the old one, keeps
its assignment and, in a Stable group whose protocol stays the same, gets
its JoinGroup answered at once with the current generation: no rebalance
(the leader named is the one before the replacement, so a returning
leader syncs as a follower and is given its old assignment back). The
replaced member id is fenced: its requests naming the instance id get
FENCED_INSTANCE_ID. A static member that did not rejoin a rebalance stays
in the group (its partitions assigned to it) until its session times out
or a LeaveGroup v3+ names its instance id (Kafka's ``GroupMetadataManager``
classic group paths).

Error codes as Kafka's ``GroupCoordinator``: UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, INCONSISTENT_GROUP_PROTOCOL,
INVALID_SESSION_TIMEOUT, MEMBER_ID_REQUIRED (JoinGroup v4+),
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (see
`kclient.broker.group.metadata_manager`).

Trio-thread only. Parked JoinGroup / SyncGroup requests wait on
`kclient.broker.group.membership.Waiter` events; one task checks the
session, rebalance and sync deadlines every `TICK_SECONDS`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from kclient.broker.group.membership import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Group,
    Member,
    Waiter,
)
from kclient.broker.group.metadata_manager import GroupMetadataManager
from kclient.broker.group.records import OffsetAndMetadata
from kclient.clock import now_ms
from kclient.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from kclient.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
)
from kclient.protocol.messages.join_group import (
    JoinGroupResponse,
    JoinGroupResponseMember,
)
from kclient.protocol.messages.sync_group import SyncGroupResponse

if TYPE_CHECKING:
    from kclient.config import BrokerConfig

log = logging.getLogger("kclient.broker.group")

#: How often the deadlines are checked (seconds).
TICK_SECONDS = 0.1


def _join_error(code: int, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(error_code=code, generation_id=-1, protocol_type=None, protocol_name=None, leader="", member_id=member_id)


def _sync_error(code: int) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code, assignment=b"", protocol_type=None, protocol_name=None)


def _touch_member(group: Group, member_id: str, generation_id: int, group_instance_id: str | None = None) -> int:
    """Check that ``member_id`` (holding ``group_instance_id`` when
    static) is a member of ``group`` in generation ``generation_id`` and
    note its liveness (a Heartbeat, or an OffsetCommit, which counts as
    one as in Kafka).

    Returns:
        NONE (its ``last_heartbeat`` now set), UNKNOWN_MEMBER_ID,
        FENCED_INSTANCE_ID or ILLEGAL_GENERATION.
    """
    code = group.validate_member(member_id, group_instance_id)
    if code != NONE:
        return code
    if generation_id != group.generation_id:
        return ILLEGAL_GENERATION
    group.members[member_id].last_heartbeat = trio.current_time()
    return NONE


class GroupCoordinator:
    """The membership state machine (see the module docstring) over a
    `GroupMetadataManager`. Run `run` in the broker's nursery.

    Args:
        config: The broker's configuration (``group.*``).
        manager: The offset manager holding the groups and offsets.
        clock: The wall clock in ms (group state change times).
    """

    def __init__(self, config: BrokerConfig, manager: GroupMetadataManager, *, clock: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.clock = clock
        self.manager = manager
        self.manager.on_unload.append(self._unloaded)
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the offset manager and the deadline checks until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.manager.run)
            self._nursery = nursery
            task_status.started()
            try:
                while True:
                    await trio.sleep(TICK_SECONDS)
                    self.check_deadlines(trio.current_time())
            finally:
                self._nursery = None

    # ------------------------------------------------------------ helpers

    def _group_to_commit(self, group_id: str, generation_id: int, *, allow_empty: bool = False) -> tuple[int, Group | None]:
        """The group an offset commit goes to: ``(NONE, group)``, made when
        missing for a commit outside any generation (offsets only, no
        members: a "simple" group), else ``(error, None)``: the
        coordinator's `_check`, ILLEGAL_GENERATION for a generation of an
        unknown group, COORDINATOR_NOT_AVAILABLE for a dead one."""
        code = self._check(group_id, allow_empty=allow_empty)
        if code != NONE:
            return code, None
        groups = self.manager.groups
        group = groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return ILLEGAL_GENERATION, None
            group = groups[group_id] = Group(group_id)
        if group.is_(DEAD):
            return COORDINATOR_NOT_AVAILABLE, None
        return NONE, group

    def _check(self, group_id: str | None, *, allow_empty: bool = False) -> int:
        """NONE when this broker coordinates ``group_id`` and has loaded
        it, else the error to answer. An empty group id is refused with
        INVALID_GROUP_ID except where Kafka accepts it (``allow_empty``):
        OffsetCommit and OffsetFetch, for backwards compatibility with
        clients that commit offsets without a group, and DescribeGroups and
        DeleteGroups, so that such offsets can be seen and deleted (Kafka's
        ``GroupCoordinator.isValidGroupId``)."""
        if group_id is None or (not group_id and not allow_empty):
            return INVALID_GROUP_ID
        return self.manager.status(group_id)

    def _unloaded(self, group: Group) -> None:
        """The group moved away: its parked requests get NOT_COORDINATOR."""
        for m in group.members.values():
            self._fail_waiters(m, NOT_COORDINATOR)
        group.transition(DEAD, self.clock())

    @staticmethod
    def _fail_waiters(m: Member, code: int) -> None:
        if m.join_waiter is not None:
            m.join_waiter.set(_join_error(code, m.member_id))
            m.join_waiter = None
        if m.sync_waiter is not None:
            m.sync_waiter.set(_sync_error(code))
            m.sync_waiter = None

    def _store_soon(self, group: Group) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._store, group)

    async def _store(self, group: Group) -> None:
        code = await self.manager.store_group(group)
        if code != NONE:
            log.info("group %r: metadata of generation %d not stored: error %d", group.group_id, group.generation_id, code)

    def _join_response(self, group: Group, member_id: str) -> JoinGroupResponse:
        leader = member_id == group.leader_id
        protocol = group.protocol_name or ""
        return JoinGroupResponse(
            error_code=NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member_id,
            members=[
                JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata(protocol))
                for m in group.members.values()
            ]
            if leader
            else [],
        )

    # ------------------------------------------------------------ JoinGroup

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        group_instance_id: str | None = None,
    ) -> JoinGroupResponse:
        """Handle a JoinGroup; returns the response (``error_code``,
        ``generation_id``, ``protocol_type``, ``protocol_name``, ``leader``,
        ``member_id``, ``members``), after the rebalance completed when the
        member takes part in one.

        Args:
            group_id: The group.
            member_id: The member's id ("" for a new member).
            client_id: The request's client id (member ids start with it).
            client_host: The client's address (DescribeGroups).
            session_timeout_ms: The member's session timeout (ms).
            rebalance_timeout_ms: The member's rebalance timeout (ms; -1 in
                v0: the session timeout, KIP-62).
            protocol_type: ``consumer`` for consumers.
            protocols: ``[(name, metadata)]`` in preference order.
            require_known_member_id: v4+: a new dynamic member gets
                MEMBER_ID_REQUIRED and its id (KIP-394).
            group_instance_id: v5+: the static member's instance id
                (KIP-345), or None for a dynamic member.

        Returns:
            The JoinGroup response.
        """
        code = self._check(group_id)
        if code != NONE:
            return _join_error(code, member_id)
        if not self.config.group_min_session_timeout_ms <= session_timeout_ms <= self.config.group_max_session_timeout_ms:
            return _join_error(INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 (KIP-62)
        groups = self.manager.groups
        group = groups.get(group_id)
        if group is None:
            if member_id:
                return _join_error(UNKNOWN_MEMBER_ID, member_id)
            group = groups[group_id] = Group(group_id)
        if group.is_(DEAD):
            return _join_error(COORDINATOR_NOT_AVAILABLE, member_id)
        now = trio.current_time()
        # What the JoinGroup says of its member; the member itself once it joins.
        joining = Member(
            member_id=member_id,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type,
            protocols=list(protocols),
            last_heartbeat=now,
            group_instance_id=group_instance_id,
        )
        outcome: JoinGroupResponse | Waiter[JoinGroupResponse]
        if not group.supports(protocol_type, protocols) and (not member_id or member_id in group.pending_members):
            return _join_error(INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not member_id and group_instance_id is not None:
            outcome = await self._join_new_static(group, joining, now)
        elif not member_id or member_id in group.pending_members:
            outcome = self._join_new(group, joining, require_known_member_id, now)
        else:
            outcome = self._join_existing(group, joining, now)
        if isinstance(outcome, JoinGroupResponse):
            return outcome
        self.maybe_complete_join(group, now)
        await outcome.event.wait()
        assert outcome.result is not None
        return outcome.result

    def _join_new(self, group: Group, joining: Member, require_known_member_id: bool, now: float) -> JoinGroupResponse | Waiter[JoinGroupResponse]:
        """A dynamic member without an id, or with one handed out by
        MEMBER_ID_REQUIRED."""
        member_id = joining.member_id
        if not member_id:
            member_id = f"{joining.client_id}-{uuid.uuid4()}"
            if require_known_member_id:
                # KIP-394: hand out the id; the member joins again with it.
                group.pending_members[member_id] = now + joining.session_timeout_ms / 1000.0
                log.debug("group %r: member id %s handed out (MEMBER_ID_REQUIRED)", group.group_id, member_id)
                return _join_error(MEMBER_ID_REQUIRED, member_id)
        group.pending_members.pop(member_id, None)
        return self._add_member(group, member_id, joining, now=now)

    def _join_existing(self, group: Group, joining: Member, now: float) -> JoinGroupResponse | Waiter[JoinGroupResponse]:
        """A member rejoining with its id (and its instance id, if static)."""
        member_id = joining.member_id
        code = group.validate_member(member_id, joining.group_instance_id)
        if code != NONE or group.state in (EMPTY, DEAD):
            return _join_error(code if code != NONE else UNKNOWN_MEMBER_ID, member_id)
        if not group.supports(joining.protocol_type, joining.protocols):
            return _join_error(INCONSISTENT_GROUP_PROTOCOL, member_id)
        member = group.members[member_id]
        member.last_heartbeat = now
        unchanged = member.matches(joining.protocols)
        if group.is_(COMPLETING_REBALANCE) and unchanged:
            return self._join_response(group, member_id)
        if group.is_(STABLE) and unchanged and member_id != group.leader_id:
            return self._join_response(group, member_id)
        return self._update_member(group, member, joining, now=now)

    async def _join_new_static(self, group: Group, joining: Member, now: float) -> JoinGroupResponse | Waiter[JoinGroupResponse]:
        """A static member without a member id: a new instance id joins as
        a new member (no MEMBER_ID_REQUIRED, KIP-345); a known one replaces
        the member id holding it (`_replace_static_member`)."""
        instance_id = joining.group_instance_id
        assert instance_id is not None
        new_id = f"{instance_id}-{uuid.uuid4()}"
        old_id = group.static_members.get(instance_id)
        if old_id is None:
            log.info("group %r: static member %s joins with new member id %s", group.group_id, instance_id, new_id)
            return self._add_member(group, new_id, joining, now=now)
        return await self._replace_static_member(group, old_id, new_id, joining, now)

    async def _replace_static_member(self, group: Group, old_id: str, new_id: str, joining: Member, now: float) -> JoinGroupResponse | Waiter[JoinGroupResponse]:
        """A known static member rejoined without its member id: ``new_id``
        takes ``old_id``'s place (the old one's parked requests get
        FENCED_INSTANCE_ID). Stable, with the group's protocol unchanged:
        the group is stored and the JoinGroup answered with the current
        generation, naming the leader as it was before the replacement
        (JoinGroup v0-8 as Kafka answers them; this broker serves up to
        v5), so the member syncs as a follower and gets its assignment
        back. Otherwise the group rebalances (CompletingRebalance: the
        leader may have assigned to the old id)."""
        instance_id = joining.group_instance_id
        assert instance_id is not None
        previous_leader = group.leader_id
        old, member = group.replace_static_member(instance_id, old_id, new_id)
        self._fail_waiters(old, FENCED_INSTANCE_ID)
        log.info("group %r: static member %s rejoins: member id %s replaces %s", group.group_id, instance_id, new_id, old_id)
        before = (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms)
        member.protocols = joining.protocols
        member.session_timeout_ms = joining.session_timeout_ms
        member.rebalance_timeout_ms = joining.rebalance_timeout_ms
        member.last_heartbeat = now
        waiter: Waiter[JoinGroupResponse] = Waiter()
        member.join_waiter = waiter
        if group.is_(STABLE) and group.select_protocol() == group.protocol_name:
            generation = group.generation_id
            code = await self.manager.store_group(group)
            if member.join_waiter is waiter:
                member.join_waiter = None
            if code != NONE:
                if group.static_members.get(instance_id) == new_id:
                    log.info("group %r: static member %s not stored (error %d): member id %s restored", group.group_id, instance_id, code, old_id)
                    member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = before
                    group.replace_static_member(instance_id, new_id, old_id)[1].last_heartbeat = trio.current_time()
                waiter.set(_join_error(code, ""))
            else:  # (a rebalance under way by now has answered it already)
                waiter.set(
                    JoinGroupResponse(
                        error_code=NONE,
                        generation_id=generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=previous_leader or "",
                        member_id=new_id,
                        members=[],
                    )
                )
        elif group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now, f"static member {instance_id} rejoined as {new_id}")
        return waiter

    def _add_member(self, group: Group, member_id: str, member: Member, *, now: float) -> Waiter[JoinGroupResponse]:
        waiter: Waiter[JoinGroupResponse] = Waiter()
        member.member_id = member_id
        member.join_waiter = waiter
        if not group.members:
            group.protocol_type = member.protocol_type
        group.add(member)
        if group.leader_id not in group.members:
            group.leader_id = member_id
        log.info("group %r: member %s (client %s, %s) joins", group.group_id, member_id, member.client_id, member.client_host)
        if group.is_(PREPARING_REBALANCE) and group.join_not_before > now:
            # The initial delay goes on while members keep arriving (KIP-134).
            delay = self.config.group_initial_rebalance_delay_ms / 1000.0
            group.join_not_before = min(now + delay, group.rebalance_deadline)
        else:
            self._prepare_rebalance(group, now, f"member {member_id} joined")
        return waiter

    def _update_member(self, group: Group, member: Member, joining: Member, *, now: float) -> Waiter[JoinGroupResponse]:
        member.protocols = joining.protocols
        member.session_timeout_ms = joining.session_timeout_ms
        member.rebalance_timeout_ms = joining.rebalance_timeout_ms
        if member.join_waiter is not None:  # a second JoinGroup while one is parked
            member.join_waiter.set(_join_error(REBALANCE_IN_PROGRESS, member.member_id))
        waiter: Waiter[JoinGroupResponse] = Waiter()
        member.join_waiter = waiter
        self._prepare_rebalance(group, now, f"member {member.member_id} rejoined")
        return waiter

    def _prepare_rebalance(self, group: Group, now: float, reason: str) -> None:
        """Enter PreparingRebalance (no effect if already there)."""
        if group.is_(PREPARING_REBALANCE):
            return
        if group.is_(COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
                if m.sync_waiter is not None:
                    m.sync_waiter.set(_sync_error(REBALANCE_IN_PROGRESS))
                    m.sync_waiter = None
        group.pending_sync.clear()
        timeout = group.max_rebalance_timeout_ms() / 1000.0
        if group.is_(EMPTY):
            delay = min(self.config.group_initial_rebalance_delay_ms / 1000.0, timeout)
            group.join_not_before = now + delay
        else:
            group.join_not_before = 0.0
        group.rebalance_deadline = now + timeout
        log.info("group %r: preparing to rebalance generation %d (%s)", group.group_id, group.generation_id, reason)
        group.transition(PREPARING_REBALANCE, self.clock())

    def maybe_complete_join(self, group: Group, now: float) -> None:
        """Complete the join when every member rejoined (and the initial
        delay passed) or the rebalance timeout passed."""
        if not group.is_(PREPARING_REBALANCE):
            return
        if (group.all_joined() and now >= group.join_not_before) or now >= group.rebalance_deadline:
            self._complete_join(group, now)

    def _complete_join(self, group: Group, now: float) -> None:
        # Static members that did not rejoin stay (until their session ends).
        for m in [m for m in group.members.values() if m.join_waiter is None and m.group_instance_id is None]:
            log.info("group %r: member %s did not rejoin in time; removed", group.group_id, m.member_id)
            self._remove_member(group, m)
        joined = [m.member_id for m in group.members.values() if m.join_waiter is not None]
        if group.members and not joined:
            # Only absent static members: wait for them to rejoin or expire.
            group.rebalance_deadline = now + group.max_rebalance_timeout_ms() / 1000.0
            log.info("group %r: no member rejoined; waiting another rebalance timeout", group.group_id)
            return
        group.pending_members.clear()
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(EMPTY, self.clock())
            log.info("group %r: generation %d is empty", group.group_id, group.generation_id)
            self._store_soon(group)
            return
        if group.leader_id not in joined:
            group.leader_id = joined[0]
        group.protocol_name = group.select_protocol()
        group.transition(COMPLETING_REBALANCE, self.clock())
        group.sync_deadline = now + group.max_rebalance_timeout_ms() / 1000.0
        group.pending_sync = set(group.members)
        log.info(
            "group %r: generation %d with %d member(s), protocol %s, leader %s",
            group.group_id, group.generation_id, len(group.members), group.protocol_name, group.leader_id,
        )
        for m in group.members.values():
            m.last_heartbeat = now
            waiter, m.join_waiter = m.join_waiter, None
            if waiter is not None:
                waiter.set(self._join_response(group, m.member_id))

    def _remove_member(self, group: Group, member: Member) -> None:
        group.remove(member.member_id)
        self._fail_waiters(member, UNKNOWN_MEMBER_ID)
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _remove_and_rebalance(self, group: Group, member: Member, now: float, reason: str) -> None:
        self._remove_member(group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now, reason)
        self.maybe_complete_join(group, now)

    # ------------------------------------------------------------ SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: dict[str, bytes],
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        group_instance_id: str | None = None,
    ) -> SyncGroupResponse:
        """Handle a SyncGroup; returns the response (``error_code``,
        ``assignment``, ``protocol_type``, ``protocol_name``). A static
        member (``group_instance_id``, v3+) whose instance id another member
        id now holds gets FENCED_INSTANCE_ID."""
        error = _sync_error
        code = self._check(group_id)
        if code != NONE:
            return error(code)
        group = self.manager.groups.get(group_id)
        if group is None:
            return error(UNKNOWN_MEMBER_ID)
        if group.is_(DEAD):
            return error(COORDINATOR_NOT_AVAILABLE)
        code = group.validate_member(member_id, group_instance_id)
        if code != NONE:
            return error(code)
        if generation_id != group.generation_id:
            return error(ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return error(INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        now = trio.current_time()
        member.last_heartbeat = now
        if group.is_(EMPTY):
            return error(UNKNOWN_MEMBER_ID)
        if group.is_(PREPARING_REBALANCE):
            return error(REBALANCE_IN_PROGRESS)
        group.pending_sync.discard(member_id)
        if group.is_(STABLE):
            return SyncGroupResponse(error_code=NONE, assignment=member.assignment, protocol_type=group.protocol_type, protocol_name=group.protocol_name)
        # CompletingRebalance
        if member.sync_waiter is not None:
            member.sync_waiter.set(error(REBALANCE_IN_PROGRESS))
        waiter: Waiter[SyncGroupResponse] = Waiter()
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            generation = group.generation_id
            for m in group.members.values():
                m.assignment = bytes(assignments.get(m.member_id, b""))
            code = await self.manager.store_group(group)
            if group.is_(COMPLETING_REBALANCE) and group.generation_id == generation:
                if code != NONE:
                    log.info("group %r: generation %d not stored (error %d): rebalancing", group_id, generation, code)
                    for m in group.members.values():
                        if m.sync_waiter is not None:
                            m.sync_waiter.set(error(code))
                            m.sync_waiter = None
                    self._prepare_rebalance(group, trio.current_time(), "the group metadata could not be stored")
                else:
                    group.transition(STABLE, self.clock())
                    log.info("group %r: generation %d is stable", group_id, generation)
                    for m in group.members.values():
                        m.last_heartbeat = trio.current_time()
                        if m.sync_waiter is not None:
                            m.sync_waiter.set(
                                SyncGroupResponse(
                                    error_code=NONE, assignment=m.assignment, protocol_type=group.protocol_type, protocol_name=group.protocol_name
                                )
                            )
                            m.sync_waiter = None
        await waiter.event.wait()
        assert waiter.result is not None
        return waiter.result

    # ------------------------------------------------------------ Heartbeat / LeaveGroup

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None = None) -> int:
        """Handle a Heartbeat; returns its error code (FENCED_INSTANCE_ID
        for a static member replaced by a newer instance, v3+)."""
        code = self._check(group_id)
        if code != NONE:
            return code
        group = self.manager.groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return COORDINATOR_NOT_AVAILABLE
        # (an Empty group has no members: UNKNOWN_MEMBER_ID)
        code = _touch_member(group, member_id, generation_id, group_instance_id)
        if code == NONE and group.is_(PREPARING_REBALANCE):
            return REBALANCE_IN_PROGRESS
        return code

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[tuple[str, str | None, int]]]:
        """Handle a LeaveGroup of ``[(member id, group instance id)]`` (one
        member before v3; a batch from v3, KIP-345).

        A member id "" with an instance id removes the static member
        holding it (an administrator's removal); otherwise the member must
        be in the group and, when an instance id is named, hold it.

        Returns:
            ``(error code, [(member id, instance id, error code)])``: per
            member NONE, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID.
        """
        code = self._check(group_id)
        if code != NONE:
            return code, [(m, i, code) for m, i in members]
        group = self.manager.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return NONE, [(m, i, UNKNOWN_MEMBER_ID) for m, i in members]
        now = trio.current_time()
        results = []
        for member_id, instance_id in members:
            results.append((member_id, instance_id, self._leave_one(group, member_id, instance_id, now)))
        return NONE, results

    def _leave_one(self, group: Group, member_id: str, instance_id: str | None, now: float) -> int:
        if not member_id:
            holder = None if instance_id is None else group.static_members.get(instance_id)
            if holder is None:
                return UNKNOWN_MEMBER_ID
            member_id = holder
        elif group.pending_members.pop(member_id, None) is not None:
            self.maybe_complete_join(group, now)
            return NONE
        code = group.validate_member(member_id, instance_id)
        if code != NONE:
            return code
        log.info("group %r: member %s leaves", group.group_id, member_id)
        self._remove_and_rebalance(group, group.members[member_id], now, f"member {member_id} left")
        return NONE

    # ------------------------------------------------------------ deadlines

    def check_deadlines(self, now: float) -> None:
        """Expire sessions, pending member ids, and rebalances and syncs
        past their timeouts."""
        for group in list(self.manager.groups.values()):
            if group.is_(DEAD):
                continue
            for member_id, deadline in list(group.pending_members.items()):
                if now >= deadline:
                    del group.pending_members[member_id]
            for member in list(group.members.values()):
                parked = member.join_waiter is not None or member.sync_waiter is not None
                if not parked and now - member.last_heartbeat > member.session_timeout_ms / 1000.0:
                    log.info(
                        "group %r: member %s session expired (%d ms without a heartbeat)",
                        group.group_id, member.member_id, member.session_timeout_ms,
                    )
                    self._remove_and_rebalance(group, member, now, f"member {member.member_id} expired")
            if group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync and now >= group.sync_deadline:
                # Kafka's pending sync expiry: also in Stable (a static
                # member that sat out the rebalance never synced).
                for member_id in sorted(group.pending_sync):
                    log.info("group %r: member %s did not sync in time; removed", group.group_id, member_id)
                    unsynced = group.members.get(member_id)
                    if unsynced is not None:
                        self._remove_member(group, unsynced)
                self._prepare_rebalance(group, now, "members did not sync in time")
            self.maybe_complete_join(group, now)

    # ------------------------------------------------------------ offsets

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        *,
        group_instance_id: str | None = None,
    ) -> int:
        """Handle an OffsetCommit of already validated partitions; returns
        the error code for all of them (FENCED_INSTANCE_ID for a replaced
        static member, v7+ ``group_instance_id``)."""
        code, group = self._group_to_commit(group_id, generation_id, allow_empty=True)
        if group is None:
            return code
        if not (generation_id < 0 and group.is_(EMPTY)):
            # The member first (a fenced static member is told so), then
            # the state, as Kafka's ClassicGroup.validateOffsetCommit.
            code = _touch_member(group, member_id, generation_id, group_instance_id)
            if code != NONE:
                return code
            if group.is_(COMPLETING_REBALANCE):
                return REBALANCE_IN_PROGRESS
        return await self.manager.store_offsets(group_id, offsets)

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        *,
        member_id: str = "",
        generation_id: int = -1,
        group_instance_id: str | None = None,
    ) -> int:
        """Handle a TxnOffsetCommit of already validated partitions (KIP-98;
        v3+ names the consumer's member, KIP-447): the offsets are appended
        in the producer's transaction and stay pending until its marker.

        The checks are Kafka 4's ``ClassicGroup.validateOffsetCommit`` for
        a transactional commit: an unknown group is created when the
        generation is -1 (else ILLEGAL_GENERATION); an Empty group takes a
        generation of -1 from anyone; otherwise a request naming a member
        (a generation, member id or instance id) must come from a current
        member (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) of the current
        generation (ILLEGAL_GENERATION). A rebalance in progress does not
        refuse it.

        Args:
            group_id: The group.
            producer_id: The transactional producer's id.
            producer_epoch: Its epoch.
            offsets: The partitions' offsets.
            member_id: The consumer's member id ("" before v3).
            generation_id: Its generation (-1 before v3).
            group_instance_id: Its static instance id, or None.

        Returns:
            The error code for all the partitions.
        """
        code, group = self._group_to_commit(group_id, generation_id)
        if group is None:
            return code
        named = generation_id >= 0 or bool(member_id) or group_instance_id is not None
        if named and not (generation_id < 0 and group.is_(EMPTY)):
            code = group.validate_member(member_id, group_instance_id)
            if code != NONE:
                return code
            if generation_id != group.generation_id:
                return ILLEGAL_GENERATION
        return await self.manager.store_txn_offsets(group_id, producer_id, producer_epoch, offsets)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata]]:
        """``(error code, {(topic, partition): committed})``; ``partitions``
        None: every committed partition of the group."""
        code = self._check(group_id, allow_empty=True)
        if code != NONE:
            return code, {}
        committed = self.manager.offsets.get(group_id, {})
        if partitions is None:
            return NONE, dict(committed)
        return NONE, {tp: committed[tp] for tp in partitions if tp in committed}

    # ------------------------------------------------------------ admin

    def list_groups(self) -> tuple[int, list[tuple[str, str, str]]]:
        """``(error code, [(group id, protocol type, state)])`` of the loaded
        groups; COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        groups = [(g.group_id, g.protocol_type or "", g.state) for g in self.manager.groups.values() if not g.is_(DEAD)]
        return (COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading_any() else NONE), sorted(groups)

    def describe_group(self, group_id: str) -> DescribedGroup:
        """DescribeGroups' entry for ``group_id``: an unknown group is
        ``Dead`` without error, as Kafka answers; member metadata and
        assignments are given when the group is Stable."""
        code = self._check(group_id, allow_empty=True)
        entry = DescribedGroup(error_code=code, group_id=group_id, group_state=DEAD, protocol_type="", protocol_data="")
        if code != NONE:
            return entry
        group = self.manager.groups.get(group_id)
        if group is None:
            return entry
        stable = group.is_(STABLE)
        entry.group_state = group.state
        entry.protocol_type = group.protocol_type or ""
        entry.protocol_data = (group.protocol_name or "") if stable else ""
        entry.members = [
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name or "") if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return entry

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete for one group (KIP-496): ``(group error code,
        {partition: error code})``.

        The group error is GROUP_ID_NOT_FOUND for a group without members
        or offsets, NON_EMPTY_GROUP for a group with members that is not a
        consumer group; in a consumer group with members, the partitions of
        topics a member subscribes to are refused with
        GROUP_SUBSCRIBED_TO_TOPIC and the others deleted (Kafka's
        ``GroupCoordinator.handleDeleteOffsets``). A partition without a
        committed offset is answered NONE; a transaction's pending offset
        is deleted too (Kafka 4's ``OffsetMetadataManager.deleteOffsets``).
        """
        code = self._check(group_id)
        if code != NONE:
            return code, {}
        group = self.manager.groups.get(group_id)
        committed = self.manager.offsets.get(group_id, {})
        pending = self.manager.pending_txn.partitions(group_id)
        if (group is None or group.is_(DEAD)) and not committed and not pending:
            return GROUP_ID_NOT_FOUND, {}
        errors: dict[tuple[str, int], int] = {}
        deletable = list(partitions)
        if group is not None and not group.is_(EMPTY) and not group.is_(DEAD):
            if group.protocol_type != "consumer":
                return NON_EMPTY_GROUP, {}
            subscribed = self._subscribed_topics(group)
            deletable = [tp for tp in partitions if tp[0] not in subscribed]
            errors.update({tp: GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp[0] in subscribed})
        code = await self.manager.delete_offsets(group_id, [tp for tp in deletable if tp in committed or tp in pending])
        if code != NONE:
            return code, {}
        errors.update(dict.fromkeys(deletable, NONE))
        if deletable:
            log.info("group %r: offsets of %d partition(s) deleted", group_id, len(deletable))
        return NONE, errors

    @staticmethod
    def _subscribed_topics(group: Group) -> set[str]:
        """The topics the members of a consumer group subscribe to (from
        their ConsumerProtocolSubscription metadata)."""
        from kclient.protocol.consumer_protocol import decode_subscription

        topics: set[str] = set()
        for member in group.members.values():
            for _, data in member.protocols:
                try:
                    topics.update(decode_subscription(data).topics)
                except Exception:  # not a consumer's subscription
                    continue
        return topics

    async def delete_group(self, group_id: str) -> int:
        """DeleteGroups for one group (KIP-229): GROUP_ID_NOT_FOUND,
        NON_EMPTY_GROUP, or NONE once its tombstones are replicated."""
        code = self._check(group_id, allow_empty=True)
        if code != NONE:
            return code
        group = self.manager.groups.get(group_id)
        if (group is None or group.is_(DEAD)) and group_id not in self.manager.offsets and not self.manager.pending_txn.has_group(group_id):
            return GROUP_ID_NOT_FOUND
        if group is not None and (group.members or group.state not in (EMPTY, DEAD)):
            return NON_EMPTY_GROUP
        code = await self.manager.delete_group(group_id)
        if code == NONE and group is not None:
            group.transition(DEAD, self.clock())
            log.info("group %r deleted", group_id)
        return code


__all__ = ["TICK_SECONDS", "GroupCoordinator"]
