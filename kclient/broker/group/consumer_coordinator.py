"""The coordinator of consumer-protocol groups (KIP-848,
``group.protocol=consumer``): ConsumerGroupHeartbeat, ConsumerGroupDescribe,
and the member-epoch checks of OffsetCommit, as Kafka's
``GroupMetadataManager`` does them.

A heartbeat (`ConsumerGroupCoordinator.heartbeat`):

1. joins (member epoch 0: a new member, or a static member replacing the
   instance that left with epoch -2), leaves (-1; a static member -2), or
   is checked against the member's epoch (FENCED_MEMBER_EPOCH when it is
   ahead, or behind other than by the previous epoch with a subset of its
   partitions);
2. updates the member (subscription, assignor, rebalance timeout); the
   group epoch goes up when the membership, a subscription or the
   subscribed topics' partitions changed (topics are resolved against the
   broker's metadata at each heartbeat, so a topic created later is
   assigned at the next one);
3. computes a new target assignment when the group epoch is ahead of it
   (`kclient.broker.group.server_assignors`);
4. moves the member towards its target (`kclient.broker.group.reconciliation`):
   a partition another member still owns is given only once that member's
   heartbeat no longer lists it.

The response carries the assignment when the request was a full one
(joining, or with every optional field set) or the member's assignment
changed; null otherwise. Members not heard from for
``group.consumer.session.timeout.ms`` are removed, as are members that did
not revoke partitions within their rebalance timeout; these deadlines are
checked on every request this coordinator handles (any group's).

The groups' state is written to ``__consumer_offsets`` by the request
handlers (`kclient.broker.group.consumer_apis`, with `pending_records`)
and read back here when this broker becomes the coordinator of an offsets
partition (`load`). Differences from Kafka: a heartbeat with a non-zero
epoch for a group this coordinator does not know is answered
UNKNOWN_MEMBER_ID (the member joins again) where Kafka answers
GROUP_ID_NOT_FOUND; a state change whose records could not be written
stays in memory (the request gets the write's error; the records are
written with the next change). A classic group with members cannot become a consumer
group (GROUP_ID_NOT_FOUND), nor the reverse (JoinGroup:
INCONSISTENT_GROUP_PROTOCOL); Kafka 4 can convert one into the other.

Trio-thread only.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import trio

from kclient.broker.group.consumer_group import ConsumerGroup, ConsumerGroupMember, TopicInfo
from kclient.broker.group.consumer_records import group_records, records_to_write, replay
from kclient.broker.group.membership import DEAD as CLASSIC_DEAD
from kclient.broker.group.membership import EMPTY as CLASSIC_EMPTY
from kclient.broker.group.reconciliation import STABLE as RECONCILED
from kclient.broker.group.reconciliation import UNREVOKED_PARTITIONS, FencedMemberError, MemberAssignment, freeze, next_assignment
from kclient.broker.group.server_assignors import MemberSpec, ServerAssignor, assignors_for
from kclient.broker.topic_ids import topic_id
from kclient.errors import (
    FENCED_INSTANCE_ID,
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INVALID_REQUEST,
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
    UNSUPPORTED_VERSION,
    ConfigError,
    ProtocolError,
)
from kclient.protocol.messages.consumer_group_heartbeat import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
)

if TYPE_CHECKING:
    from kclient.broker.group.metadata_manager import GroupMetadataManager
    from kclient.broker.metadata_cache import MetadataCache
    from kclient.config import BrokerConfig

log = logging.getLogger("kclient.broker.group")

#: Topics a regex subscription never matches (Kafka leaves internal topics out).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class HeartbeatError(Exception):
    """A heartbeat answered with an error code (and message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def new_member_id() -> str:
    """A member id as Kafka makes them (``Uuid.randomUuid().toString()``:
    16 random bytes, URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def _owned(request: ConsumerGroupHeartbeatRequest) -> list[tuple[uuid.UUID, list[int]]] | None:
    if request.topic_partitions is None:
        return None
    return [(t.topic_id or uuid.UUID(int=0), list(t.partitions)) for t in request.topic_partitions]


def _is_subset(owned: list[tuple[uuid.UUID, list[int]]] | None, assigned: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    if owned is None:
        return False
    return all(p in assigned.get(t, ()) for t, ps in owned for p in ps)


_FENCED_PREFIX = "The consumer group member has a"
_FENCED_SUFFIX = "than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin."


def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: list[tuple[uuid.UUID, list[int]]] | None) -> None:
    """FENCED_MEMBER_EPOCH unless ``epoch`` is the member's, or its
    previous one with no partition beyond its assignment (the response
    that bumped it may have been lost)."""
    current = member.assignment
    if epoch > current.member_epoch:
        raise HeartbeatError(FENCED_MEMBER_EPOCH, f"{_FENCED_PREFIX} greater member epoch ({epoch}) {_FENCED_SUFFIX.format(current.member_epoch)}")
    if epoch < current.member_epoch and (epoch != current.previous_member_epoch or not _is_subset(owned, current.assigned)):
        raise HeartbeatError(FENCED_MEMBER_EPOCH, f"{_FENCED_PREFIX} smaller member epoch ({epoch}) {_FENCED_SUFFIX.format(current.member_epoch)}")


def check_consumer_group_config(config: BrokerConfig) -> None:
    """Check ``group.consumer.heartbeat.interval.ms`` and
    ``group.consumer.session.timeout.ms`` against their ``min`` / ``max``
    settings, as Kafka's ``GroupCoordinatorConfig`` does.

    Args:
        config: The broker's configuration.

    Raises:
        kclient.errors.ConfigError: A value outside its bounds, or a
            heartbeat interval not below the session timeout.
    """
    for name, value, low, high in (
        ("group.consumer.heartbeat.interval.ms", config.group_consumer_heartbeat_interval_ms, config.group_consumer_min_heartbeat_interval_ms, config.group_consumer_max_heartbeat_interval_ms),
        ("group.consumer.session.timeout.ms", config.group_consumer_session_timeout_ms, config.group_consumer_min_session_timeout_ms, config.group_consumer_max_session_timeout_ms),
    ):
        if not low <= value <= high:
            bounds = (name.replace("group.consumer.", "group.consumer.min."), name.replace("group.consumer.", "group.consumer.max."))
            raise ConfigError(f"Invalid value {value} for configuration {name}: must be between {bounds[0]} ({low}) and {bounds[1]} ({high})")
    if config.group_consumer_heartbeat_interval_ms >= config.group_consumer_session_timeout_ms:
        raise ConfigError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")


class ConsumerGroupCoordinator:
    """Consumer-protocol groups over the classic coordinator's offsets
    manager (see the module docstring).

    Args:
        config: The broker's configuration (``group.consumer.*``).
        manager: The offsets manager: which groups this broker
            coordinates, the classic groups, the committed offsets.
        metadata_cache: The topics and their partitions.
        clock: Monotonic seconds (trio's clock by default).

    Raises:
        kclient.errors.ConfigError: ``group.consumer.assignors`` names an
            unknown assignor, or the heartbeat interval or session timeout
            is outside its ``min`` / ``max`` bounds.
    """

    def __init__(self, config: BrokerConfig, manager: GroupMetadataManager, metadata_cache: MetadataCache, *, clock: Callable[[], float] = trio.current_time) -> None:
        check_consumer_group_config(config)
        self.config = config
        self.manager = manager
        self.metadata_cache = metadata_cache
        self.clock = clock
        try:
            self.assignors: dict[str, ServerAssignor] = assignors_for(list(config.group_consumer_assignors))
        except ValueError as exc:
            raise ConfigError(f"Invalid value for configuration group.consumer.assignors: {exc}") from None
        self.groups: dict[str, ConsumerGroup] = {}
        #: Groups changed outside their own requests (expired members), to write.
        self.dirty: set[str] = set()
        manager.on_load.append(self.load)
        manager.in_use.append(self.is_active)  # a group with members keeps its offsets

    # ------------------------------------------------------------ lookups

    def group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group ``group_id`` if this broker coordinates it."""
        group = self.groups.get(group_id)
        if group is not None and self.manager.status(group_id) != NONE:
            del self.groups[group_id]  # moved to another coordinator, which loads it
            return None
        return None if group is None or group.dead else group

    def is_consumer_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer-protocol group here."""
        return self.group(group_id) is not None

    def is_active(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer-protocol group with members."""
        group = self.group(group_id)
        return group is not None and bool(group.members)

    def drop(self, group_id: str) -> None:
        """Forget an empty group (deleted, or become a classic group): it
        is Dead; `pending_records` then gives its tombstones."""
        group = self.groups.get(group_id)
        if group is not None:
            group.dead = True

    # ------------------------------------------------------------ records

    def load(self, index: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Rebuild the groups of offsets partition ``index`` from its
        records (the manager's ``on_load`` hook): members' sessions start
        now, the subscribed topics are read from the metadata again.

        Args:
            index: The partition.
            records: Its consumer group records (key, value), in log order.
        """
        loaded: dict[str, ConsumerGroup] = {}
        for key, value in records:
            try:
                replay(loaded, key, value)
            except (ProtocolError, ValueError, UnicodeDecodeError) as exc:  # unreadable: skip it, as Kafka warns and goes on
                log.warning("__consumer_offsets-%d: unreadable consumer group record: %s", index, exc)
        now = self.clock()
        for group_id, group in loaded.items():
            for member in group.members.values():
                member.last_heartbeat = now
            group.topics = self._resolve_topics(group)
            group.assignor = self._assignor_of(group).name
            group.written = group_records(group)
            self.groups[group_id] = group
        if loaded:
            log.info("__consumer_offsets-%d: loaded %d consumer group(s)", index, len(loaded))

    def pending_records(self, group_id: str) -> tuple[ConsumerGroup, dict[bytes, bytes], list[tuple[bytes, bytes | None]]] | None:
        """What to write for ``group_id``: ``(group, its records now, the
        records that differ from those written)``, or None when nothing
        does. Once written, set ``group.written`` to the records now (and
        `forget` a Dead group)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        now = group_records(group)
        delta = records_to_write(group.written, now)
        return (group, now, delta) if delta else None

    def forget(self, group: ConsumerGroup) -> None:
        """Drop a Dead group whose tombstones are written."""
        if group.dead and self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # ------------------------------------------------------------ ConsumerGroupHeartbeat

    def heartbeat(self, request: ConsumerGroupHeartbeatRequest, version: int, *, client_id: str = "", client_host: str = "") -> ConsumerGroupHeartbeatResponse:
        """Handle one ConsumerGroupHeartbeat (v0-1).

        Args:
            request: The request.
            version: Its version (v1+: the member id is the client's).
            client_id: The request header's client id.
            client_host: The client's address (``/ip``).

        Returns:
            The response: the member's id, epoch, heartbeat interval and
            (when it changed) assignment, or an error code and message.
        """
        now = self.clock()
        self.check_deadlines(now)
        try:
            self._validate(request, version)
            code = self.manager.status(request.group_id)
            if code != NONE:
                return ConsumerGroupHeartbeatResponse(error_code=code)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(request)
            return self._heartbeat(request, client_id, client_host, now)
        except HeartbeatError as exc:
            return ConsumerGroupHeartbeatResponse(error_code=exc.code, error_message=exc.message)

    def _validate(self, request: ConsumerGroupHeartbeatRequest, version: int) -> None:
        """INVALID_REQUEST / UNSUPPORTED_ASSIGNOR for a malformed request
        (Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``)."""
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(INVALID_REQUEST, message)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        if request.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if request.rack_id == "":
            raise invalid("RackId can't be empty.")
        if version >= 1 and not request.member_id:
            raise invalid("MemberId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if not request.member_id:
                raise invalid("MemberId can't be empty.")
            if epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif epoch == JOIN_EPOCH:
            self._validate_join(request)
        else:
            raise invalid("MemberEpoch is invalid.")
        if request.subscribed_topic_regex is not None:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as exc:
                raise invalid(f"SubscribedTopicRegex {request.subscribed_topic_regex!r} is not a valid regular expression: {exc}.") from None
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            raise HeartbeatError(UNSUPPORTED_ASSIGNOR, f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: {', '.join(self.assignors)}.")

    @staticmethod
    def _validate_join(request: ConsumerGroupHeartbeatRequest) -> None:
        if request.rebalance_timeout_ms == -1:
            raise HeartbeatError(INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            raise HeartbeatError(INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if not request.subscribed_topic_names and not request.subscribed_topic_regex:
            raise HeartbeatError(INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")

    def _group_for(self, group_id: str, joining: bool) -> ConsumerGroup:
        """The group of a heartbeat, created by a joining member."""
        group = self.group(group_id)
        if group is not None:
            return group
        classic = self.manager.groups.get(group_id)
        if classic is not None and not classic.is_(CLASSIC_EMPTY) and not classic.is_(CLASSIC_DEAD):
            raise HeartbeatError(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not joining:
            raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Consumer group {group_id} is unknown to this coordinator; the member must rejoin.")
        previous = self.groups.get(group_id)  # a Dead one whose tombstones are not written yet
        group = self.groups[group_id] = ConsumerGroup(group_id)
        if previous is not None:
            group.written = previous.written
        return group

    def _member_for(self, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest, owned: list[tuple[uuid.UUID, list[int]]] | None) -> tuple[ConsumerGroupMember, bool]:
        """``(member, new to the group)`` of a heartbeat (Kafka's
        ``getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember``); a
        known member joining again, or a static member replacing its
        instance's previous member, is not new."""
        joining = request.member_epoch == JOIN_EPOCH
        member_id = request.member_id or new_member_id()
        if joining and member_id not in group.members and len(group.members) >= self.config.group_consumer_max_size:
            raise HeartbeatError(GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of {self.config.group_consumer_max_size} members.")
        if request.instance_id is not None:
            return self._static_member(group, member_id, request, owned)
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
            member = ConsumerGroupMember(member_id=member_id)
            group.add(member)
            log.info("group %r: member %s joins (consumer protocol)", group.group_id, member_id)
            return member, True
        if joining:
            # A known member joining again (after an error): it owns nothing now.
            group.set_assignment(member, MemberAssignment())
            return member, False
        _check_epoch(member, request.member_epoch, owned)
        return member, False

    def _static_member(self, group: ConsumerGroup, member_id: str, request: ConsumerGroupHeartbeatRequest, owned: list[tuple[uuid.UUID, list[int]]] | None) -> tuple[ConsumerGroupMember, bool]:
        instance_id = request.instance_id
        assert instance_id is not None
        holder_id = group.static_members.get(instance_id)
        holder = None if holder_id is None else group.members.get(holder_id)
        if request.member_epoch == JOIN_EPOCH:
            if holder is None:
                member = group.members.get(member_id) or ConsumerGroupMember(member_id=member_id, instance_id=instance_id)
                member.instance_id = instance_id
                group.add(member)
                log.info("group %r: static member %s (instance %s) joins", group.group_id, member_id, instance_id)
                return member, True
            if holder.member_epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(UNRELEASED_INSTANCE_ID, f"Static member {holder.member_id} with instance id {instance_id} is not released yet; it must leave (epoch -2) first.")
            return self._replace_static(group, holder, member_id), False
        if holder is None:
            raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if holder.member_id != member_id:
            raise HeartbeatError(FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was fenced by member {holder.member_id}.")
        _check_epoch(holder, request.member_epoch, owned)
        return holder, False

    @staticmethod
    def _replace_static(group: ConsumerGroup, old: ConsumerGroupMember, member_id: str) -> ConsumerGroupMember:
        """A static member rejoining: a new member id takes the old one's
        place and assignment, at epoch 0 (no rebalance)."""
        target = group.target.get(old.member_id)
        assignment = old.assignment
        group.remove(old.member_id)
        member = ConsumerGroupMember(
            member_id=member_id,
            instance_id=old.instance_id,
            rack_id=old.rack_id,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            subscribed_topic_names=old.subscribed_topic_names,
            subscribed_topic_regex=old.subscribed_topic_regex,
            server_assignor=old.server_assignor,
        )
        group.add(member)
        group.set_assignment(member, MemberAssignment(state=assignment.state, member_epoch=0, previous_member_epoch=0, assigned=assignment.assigned, pending_revocation=assignment.pending_revocation))
        if target is not None:
            group.target[member_id] = target
        log.info("group %r: static member %s replaces %s (instance %s)", group.group_id, member_id, old.member_id, old.instance_id)
        return member

    def _heartbeat(self, request: ConsumerGroupHeartbeatRequest, client_id: str, client_host: str, now: float) -> ConsumerGroupHeartbeatResponse:
        group = self._group_for(request.group_id, request.member_epoch == JOIN_EPOCH)
        owned = _owned(request)
        member, new = self._member_for(group, request, owned)
        before = member.assignment
        old_subscription = ((), None) if new else member.subscription()
        self._update_member(member, request, client_id, client_host)
        bump = new or member.subscription() != old_subscription
        topics = self._resolve_topics(group)
        if topics != group.topics:
            group.topics = topics
            bump = True
        if bump:
            group.group_epoch += 1
            log.info("group %r: group epoch %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
        self._reconcile(group, member, owned, now)
        member.last_heartbeat = now
        response = ConsumerGroupHeartbeatResponse(
            member_id=member.member_id, member_epoch=member.member_epoch, heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms
        )
        full = request.member_epoch == JOIN_EPOCH or (request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None and owned is not None)
        if full or member.assignment.assigned != before.assigned:
            response.assignment = ConsumerGroupHeartbeatAssignment(
                topic_partitions=[ConsumerGroupHeartbeatTopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(member.assignment.assigned.items(), key=lambda i: str(i[0]))]
            )
        return response

    @staticmethod
    def _update_member(member: ConsumerGroupMember, request: ConsumerGroupHeartbeatRequest, client_id: str, client_host: str) -> None:
        """The fields a heartbeat sets (null: unchanged)."""
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        member.client_id = client_id
        member.client_host = client_host

    # ------------------------------------------------------------ assignment

    def _matching(self, regexes: set[str]) -> set[str]:
        """The topics of the metadata some regex matches in full."""
        if not regexes:
            return set()
        patterns = [re.compile(r) for r in regexes]
        return {t for t in self.metadata_cache.topics() if t not in INTERNAL_TOPICS and any(p.fullmatch(t) for p in patterns)}

    def _resolve_topics(self, group: ConsumerGroup) -> dict[str, TopicInfo]:
        """The subscribed topics that exist, with their ids and partition counts."""
        names = group.subscribed_topic_names() | self._matching(group.regexes())
        out: dict[str, TopicInfo] = {}
        for name in sorted(names):
            count = len(self.metadata_cache.partitions(name))
            if count:
                out[name] = TopicInfo(topic_id(name), count)
        return out

    def _member_topics(self, group: ConsumerGroup, member: ConsumerGroupMember) -> frozenset[uuid.UUID]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            pattern = re.compile(member.subscribed_topic_regex)
            names.update(t for t in group.topics if t not in INTERNAL_TOPICS and pattern.fullmatch(t))
        return frozenset(group.topics[n].topic_id for n in names if n in group.topics)

    def _assignor_of(self, group: ConsumerGroup) -> ServerAssignor:
        """The assignor most members ask for, else the first configured."""
        asked = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if asked:
            return self.assignors[sorted(asked.items(), key=lambda i: (-i[1], i[0]))[0][0]]
        return next(iter(self.assignors.values()))

    def _compute_target(self, group: ConsumerGroup) -> None:
        """A new target assignment for the group epoch."""
        assignor = self._assignor_of(group)
        specs = {mid: MemberSpec(self._member_topics(group, m), group.target.get(mid, {})) for mid, m in group.members.items()}
        counts = {info.topic_id: info.partitions for info in group.topics.values()}
        target = assignor.assign(specs, counts)
        group.target = {mid: freeze(target.get(mid, {})) for mid in group.members}
        group.assignment_epoch = group.group_epoch
        group.assignor = assignor.name
        log.info("group %r: target assignment of epoch %d computed by %s", group.group_id, group.group_epoch, assignor.name)

    def _reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, owned: list[tuple[uuid.UUID, list[int]]] | None, now: float) -> None:
        current = member.assignment
        if current.state == RECONCILED and current.member_epoch == group.assignment_epoch:
            return
        mine = set(current.owned())

        def partition_epoch(t: uuid.UUID, p: int) -> int:
            return -1 if (t, p) in mine else group.partition_epochs.get((t, p), -1)

        try:
            updated = next_assignment(current, group.assignment_epoch, group.target.get(member.member_id, {}), partition_epoch, owned)
        except FencedMemberError as exc:
            raise HeartbeatError(FENCED_MEMBER_EPOCH, str(exc)) from None
        if updated == current:
            return
        group.set_assignment(member, updated)
        if updated.state == UNREVOKED_PARTITIONS:
            timeout_ms = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else self.config.group_consumer_session_timeout_ms
            member.revocation_deadline = now + timeout_ms / 1000.0
        else:
            member.revocation_deadline = None

    # ------------------------------------------------------------ leaving, deadlines

    def _leave(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        """Epoch -1: the member leaves; -2: a static member leaves for now
        (it keeps its partitions until its session times out or its
        instance rejoins)."""
        group = self.group(request.group_id)
        if group is None:
            raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Consumer group {request.group_id} not found.")
        member = group.members.get(request.member_id)
        if request.instance_id is not None:
            holder_id = group.static_members.get(request.instance_id)
            if holder_id is None:
                raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
            if holder_id != request.member_id:
                raise HeartbeatError(FENCED_INSTANCE_ID, f"Static member {request.member_id} with instance id {request.instance_id} was fenced by member {holder_id}.")
        if member is None:
            raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a member of group {group.group_id}.")
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            member.assignment = MemberAssignment(
                state=member.assignment.state, member_epoch=STATIC_LEAVE_EPOCH, previous_member_epoch=member.member_epoch,
                assigned=member.assignment.assigned, pending_revocation=member.assignment.pending_revocation,
            )
            log.info("group %r: static member %s (instance %s) leaves for now", group.group_id, member.member_id, member.instance_id)
        else:
            self.remove_member(group, member.member_id, "left")
        return ConsumerGroupHeartbeatResponse(member_id=request.member_id, member_epoch=request.member_epoch, heartbeat_interval_ms=0)

    def remove_member(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        """Remove a member; the group epoch goes up (a new target follows
        at the next heartbeat)."""
        if group.remove(member_id) is not None:
            self.dirty.add(group.group_id)
            group.group_epoch += 1
            log.info("group %r: member %s %s; group epoch %d", group.group_id, member_id, why, group.group_epoch)

    def check_deadlines(self, now: float) -> None:
        """Remove members past their session timeout, or past their
        rebalance timeout with partitions still to revoke."""
        session = self.config.group_consumer_session_timeout_ms / 1000.0
        for group_id in list(self.groups):
            group = self.group(group_id)  # (None: moved to another coordinator, dropped here)
            if group is None:
                continue
            for member in list(group.members.values()):
                if now - member.last_heartbeat > session:
                    self.remove_member(group, member.member_id, f"expired ({self.config.group_consumer_session_timeout_ms} ms without a heartbeat)")
                elif member.revocation_deadline is not None and now > member.revocation_deadline:
                    self.remove_member(group, member.member_id, "did not revoke its partitions within its rebalance timeout")

    # ------------------------------------------------------------ offsets

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int, version: int) -> int:
        """The error of an OffsetCommit to consumer group ``group_id``
        (Kafka's ``ConsumerGroup.validateOffsetCommit``): NONE, UNKNOWN_MEMBER_ID,
        UNSUPPORTED_VERSION (a member of the consumer protocol commits with
        v9+), STALE_MEMBER_EPOCH. A commit with a negative epoch (an admin
        client or a consumer without a group) is accepted while the group
        has no members."""
        self.check_deadlines(self.clock())
        group = self.group(group_id)
        if group is None:
            return NONE
        if member_epoch < 0 and not group.members:
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if version < 9:
            return UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH
        return NONE

    def validate_txn_offset_commit(self, group_id: str, member_id: str, member_epoch: int, group_instance_id: str | None) -> int:
        """The error of a TxnOffsetCommit to consumer group ``group_id``
        (Kafka 4's ``ConsumerGroup.validateOffsetCommit``, transactional):
        NONE when the group has no members and the epoch is negative, or
        when the request names no member (v0-2); else UNKNOWN_MEMBER_ID or
        ILLEGAL_GENERATION for an epoch other than the member's (what
        Kafka 4 answers, so that producers raise CommitFailedError)."""
        self.check_deadlines(self.clock())
        group = self.group(group_id)
        if group is None or (member_epoch < 0 and not group.members):
            return NONE
        if member_epoch < 0 and not member_id and group_instance_id is None:
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        return NONE if member_epoch == member.member_epoch else ILLEGAL_GENERATION

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """The error of an OffsetFetch v9+ naming a member of consumer
        group ``group_id`` (Kafka's ``ConsumerGroup.validateOffsetFetch``):
        NONE (also without a member: an admin client), UNKNOWN_MEMBER_ID,
        STALE_MEMBER_EPOCH."""
        group = self.group(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return NONE
        member = group.members.get(member_id or "")
        if member is None:
            return UNKNOWN_MEMBER_ID
        return NONE if member_epoch == member.member_epoch else STALE_MEMBER_EPOCH

    def list_groups(self) -> list[tuple[str, str]]:
        """``[(group id, state)]`` of the consumer groups here."""
        self.check_deadlines(self.clock())
        return sorted((g, group.state) for g in list(self.groups) if (group := self.group(g)) is not None)


__all__ = ["INTERNAL_TOPICS", "ConsumerGroupCoordinator", "HeartbeatError", "check_consumer_group_config", "new_member_id"]
