"""The poll consumer's group membership with Kafka 4.0's consumer group
protocol (``group.protocol=consumer``; KIP-848, "The Next Generation of
the Consumer Rebalance Protocol"), as Kafka's ``AsyncKafkaConsumer`` does
it (its ``ConsumerMembershipManager`` and heartbeat request manager).

One request, ConsumerGroupHeartbeat, does everything, on a background
task of the consumer's trio loop:

- **join**: member epoch 0, a member id the member made up (v1+,
  KIP-1082), the subscribed topic names (a pattern is matched against the
  cluster's topics here and its matches sent, as Java's
  ``subscribe(Pattern)`` does), the rebalance timeout
  (``max.poll.interval.ms``) and the server assignor
  (``group.remote.assignor``);
- **heartbeat** every ``heartbeat_interval_ms`` the coordinator gives
  (``heartbeat.interval.ms`` and ``session.timeout.ms`` are the broker's
  ``group.consumer.*`` settings), sending only what changed;
- **reconcile**, inside ``poll`` (`ConsumerProtocolDriver.step`) when a
  response carries a new target assignment (topic ids, named with
  Metadata v10+, `kclient.client.consumer.poll.topic_names`): the
  positions are committed (``enable.auto.commit``) and
  ``on_partitions_revoked`` called with the owned partitions the target
  leaves out; then the assignment becomes the target (partitions kept
  keep their positions and keep being consumed) and
  ``on_partitions_assigned`` is called with the added ones (even none, as
  Java); the next heartbeat, sent at once, says which partitions the
  member owns;
- **fenced** (``FENCED_MEMBER_EPOCH``, ``UNKNOWN_MEMBER_ID``): the
  partitions are lost (``on_partitions_lost`` on the next ``poll``) and
  the member joins again with epoch 0;
- **leave** on ``close`` / ``unsubscribe``: epoch -1 (-2 for a static
  member, ``group.instance.id``, which keeps its assignment for the
  session timeout);
- a member that does not call ``poll`` for ``max.poll.interval.ms``
  leaves (epoch -1) and joins again on its next ``poll``, after
  ``on_partitions_lost``.

Commits carry the member epoch as OffsetCommit's generation (v9+);
``STALE_MEMBER_EPOCH`` is retried after the next heartbeat.
"""

from __future__ import annotations

import enum
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping

import attrs
import trio

from kclient.client.cluster import Cluster, request_metadata
from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.client.consumer.poll.errors import CommitFailedError
from kclient.client.consumer.poll.group import ASSIGNED, LOST, REVOKED, ListenerCall, Phase
from kclient.client.consumer.poll.reconciliation import ReconciliationPlan, SentFields, leave_epoch, new_member_id, normalize, plan_reconciliation
from kclient.client.consumer.poll.subscription import SubscriptionState
from kclient.client.consumer.poll.topic_names import TopicNames
from kclient.client.consumer.poll.types import OffsetAndMetadata, TopicPartition
from kclient.config import ConsumerConfig
from kclient.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedMemberEpochError,
    IllegalGenerationError,
    KafkaError,
    NotCoordinatorError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    error_for_code,
)
from kclient.protocol.messages.consumer_group_heartbeat import (
    CONSUMER_GROUP_HEARTBEAT,
    JOIN_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
)

log = logging.getLogger("kclient.consumer")

#: Error codes the coordinator client looks the coordinator up again for.
_COORDINATOR_CODES = frozenset(cls.code for cls in (CoordinatorNotAvailableError, NotCoordinatorError, CoordinatorLoadInProgressError))
#: Error codes after which the member's partitions are lost and it joins again.
_FENCED_CODES = frozenset(cls.code for cls in (FencedMemberEpochError, UnknownMemberIdError))


class MemberState(enum.Enum):
    """The member's state (Java's ``MemberState`` names)."""

    UNSUBSCRIBED = "unsubscribed"
    JOINING = "joining"
    STABLE = "stable"
    ACKNOWLEDGING = "acknowledging"
    FENCED = "fenced"
    LEAVING = "leaving"
    STALE = "stale"
    FATAL = "fatal"


#: States in which heartbeats are sent.
_HEARTBEATING = frozenset({MemberState.JOINING, MemberState.STABLE, MemberState.ACKNOWLEDGING})


@attrs.define
class ConsumerGroupMember:
    """This member's identity in the group.

    Attributes:
        group_id: ``group.id``.
        member_id: The member id (made up once, kept for the consumer's life).
        epoch: The member epoch (0 before joining or after being fenced).
        instance_id: ``group.instance.id``, or None.
    """

    group_id: str
    member_id: str
    epoch: int = 0
    instance_id: str | None = None

    @property
    def generation(self) -> int:
        """The member epoch while in the group, else -1 (what commits and
        ``close`` check, as a classic generation)."""
        return self.epoch if self.epoch > 0 else -1

    @property
    def group_instance_id(self) -> str | None:
        """``group.instance.id`` (the `MemberGeneration` name)."""
        return self.instance_id

    def current(self) -> tuple[int, str]:
        """``(member epoch, member id)`` for commits."""
        return self.epoch, self.member_id


class Stage(enum.Enum):
    """Where a reconciliation is (its listener calls run inside ``poll``)."""

    IDLE = "idle"
    REVOKING = "revoking"
    ASSIGNING = "assigning"


class ConsumerProtocolDriver:
    """The member's side of a consumer group with the KIP-848 protocol
    (the interface of `kclient.client.consumer.poll.membership_driver.
    MembershipDriver`).

    Args:
        coordinator: The group coordinator client.
        cluster: Metadata and connections.
        config: ``max.poll.interval.ms``, ``group.remote.assignor``,
            ``group.instance.id``, ``retry.backoff.ms``,
            ``metadata.max.age.ms``, ``enable.auto.commit``,
            ``exclude.internal.topics``, ``socket.timeout.ms``.
        subscriptions: The subscription and assignment.
        commit_positions: Commits the current positions (synchronous), for
            the auto-commit before partitions are revoked.
        on_assignment_change: Called after the assignment changed (drops
            buffered fetches).
        wake: Wakes a waiting ``poll``.
    """

    def __init__(
        self,
        coordinator: GroupCoordinator,
        cluster: Cluster,
        config: ConsumerConfig,
        subscriptions: SubscriptionState,
        commit_positions: Callable[[], Awaitable[None]],
        on_assignment_change: Callable[[], None],
        wake: Callable[[], None],
    ) -> None:
        self.coordinator = coordinator
        self.cluster = cluster
        self.config = config
        self.subscriptions = subscriptions
        self._commit_positions = commit_positions
        self._on_assignment_change = on_assignment_change
        self._wake = wake
        self.member = ConsumerGroupMember(coordinator.group_id, new_member_id(), 0, config.group_instance_id)
        self.names = TopicNames(cluster, coordinator)
        self.state = MemberState.UNSUBSCRIBED
        #: The latest target assignment received (None: none since joining).
        self.target: dict[uuid.UUID, frozenset[int]] | None = None
        #: The reconciled assignment, sent as the owned partitions (None:
        #: nothing reconciled since joining).
        self.current: dict[uuid.UUID, frozenset[int]] | None = None
        self._target_version = 0
        self._planned_version = 0
        self._stage = Stage.IDLE
        self._plan: ReconciliationPlan | None = None
        self._lost: tuple[TopicPartition, ...] | None = None
        self._error: KafkaError | None = None
        self._sent = SentFields()
        self._interval = 0.0
        self._last_heartbeat = -float("inf")
        self._heartbeat_now = trio.Event()
        self._responded = trio.Event()
        self._last_poll = trio.current_time()
        self._polling = 0
        self._last_match = trio.current_time()
        #: Bumped when the member joins or is out of the group: a
        #: reconciliation that awaited across it is abandoned.
        self._membership = 0
        #: How many reconciliations this member completed.
        self.rebalances = 0

    # ------------------------------------------------------------ MembershipDriver state

    @property
    def joined(self) -> bool:
        """The member is in the group, or joining it."""
        return self.state is not MemberState.UNSUBSCRIBED

    @property
    def rejoin_needed(self) -> bool:
        """The next ``poll`` joins the group (after leaving it)."""
        return self.state in (MemberState.UNSUBSCRIBED, MemberState.STALE)

    @property
    def phase(self) -> Phase:
        """`Phase.FAILED` with an error to raise, `Phase.JOINED` when a
        `step` is due, `Phase.JOINING` while joining, else `Phase.STABLE`."""
        if self._error is not None:
            return Phase.FAILED
        if self._step_due():
            return Phase.JOINED
        return Phase.JOINING if self.state is MemberState.JOINING else Phase.STABLE

    def _step_due(self) -> bool:
        if not self.subscriptions.auto_assigned:
            return False
        if self._lost is not None or self._stage is not Stage.IDLE or self.rejoin_needed:
            return True
        return self.state in (MemberState.STABLE, MemberState.ACKNOWLEDGING) and self._target_version != self._planned_version

    # ------------------------------------------------------------ poll timer

    def poll_started(self) -> None:
        """A ``poll`` step began: the ``max.poll.interval.ms`` timer stops."""
        self._polling += 1
        self._last_poll = trio.current_time()

    def poll_ended(self) -> None:
        """A ``poll`` step ended: the timer starts again."""
        self._polling -= 1
        self._last_poll = trio.current_time()

    def poll_expired(self) -> bool:
        """Whether the application went more than ``max.poll.interval.ms``
        without polling."""
        return self._polling == 0 and (trio.current_time() - self._last_poll) * 1000 > self.config.max_poll_interval_ms

    def request_rejoin(self, why: str) -> None:
        """The subscription changed: the next heartbeat, sent at once, says
        so (the coordinator assigns again; there is no rejoin in KIP-848).

        Args:
            why: Logged.
        """
        log.info("group %s: member %s: %s", self.member.group_id, self.member.member_id, why)
        self._last_match = -math.inf
        self._heartbeat_now.set()
        self._wake()

    # ------------------------------------------------------------ steps inside poll

    async def step(self, nursery: trio.Nursery) -> ListenerCall | None:
        """The next membership step due inside ``poll`` (see the module
        docstring).

        Args:
            nursery: Unused (heartbeats run on `run`'s task).

        Returns:
            A listener call to run before the next step, or None.

        Raises:
            KafkaError: the coordinator refused the member
                (``GROUP_AUTHORIZATION_FAILED``, ``UNSUPPORTED_ASSIGNOR``,
                ``UNRELEASED_INSTANCE_ID``, ...); the next ``poll`` joins
                again.
        """
        del nursery
        if not self.subscriptions.auto_assigned:
            return None
        if self._error is not None:
            error, self._error = self._error, None
            self.state = MemberState.UNSUBSCRIBED
            raise error
        if self._lost is not None and (call := self._release_lost()) is not None:
            return call
        if self.rejoin_needed:
            await self._start_joining()
            return None
        if self._stage is Stage.REVOKING:
            return self._assign()
        if self._stage is Stage.ASSIGNING:
            self._acknowledge()
        if self.state in (MemberState.STABLE, MemberState.ACKNOWLEDGING) and self._target_version != self._planned_version:
            return await self._reconcile()
        return None

    def _release_lost(self) -> ListenerCall | None:
        lost, self._lost = self._lost, None
        self.subscriptions.assign_from_subscribed(())
        self._on_assignment_change()
        self.state = MemberState.STALE if self.state is MemberState.STALE else MemberState.UNSUBSCRIBED
        self._wake()
        return ListenerCall(LOST, lost) if lost else None

    async def _start_joining(self) -> None:
        await self._rematch_pattern()
        self._membership += 1
        self.member.epoch = JOIN_EPOCH
        self.target = self.current = None
        self._planned_version = self._target_version
        self._stage, self._plan = Stage.IDLE, None
        self._sent.reset()
        self.state = MemberState.JOINING
        log.info("group %s: member %s joining (consumer group protocol, KIP-848)", self.member.group_id, self.member.member_id)
        self._heartbeat_now.set()

    async def _reconcile(self) -> ListenerCall | None:
        self._planned_version = self._target_version
        membership = self._membership
        target = self.target or {}
        try:
            unresolved = await self.names.resolve(target)
        except KafkaError as exc:
            log.warning("group %s: could not name the assigned topics (tried again later): %s", self.member.group_id, exc)
            unresolved = set(target) - set(self.names.names)
        if unresolved:
            log.info("group %s: topic ids %s not in the metadata yet", self.member.group_id, sorted(map(str, unresolved)))
        plan = plan_reconciliation(self.subscriptions.assigned(), target, self.names.names)
        if membership != self._membership or (self.current is not None and plan.resolved == self.current):
            return None
        log.info(
            "group %s: member %s epoch %d reconciling: assigned %s, revoking %s, adding %s",
            self.member.group_id, self.member.member_id, self.member.epoch,
            _names(plan.assigned), _names(plan.revoked), _names(plan.added),
        )
        self._plan = plan
        if not plan.revoked:
            return self._assign()
        if self.config.auto_commit_enable:
            try:
                await self._commit_positions()
            except KafkaError as exc:
                log.warning("group %s: commit before revoking partitions failed: %s", self.member.group_id, exc)
        if membership != self._membership:  # fenced or left meanwhile: the partitions are lost instead
            self._plan = None
            return None
        self._stage = Stage.REVOKING
        return ListenerCall(REVOKED, plan.revoked)

    def _assign(self) -> ListenerCall:
        plan = self._plan
        assert plan is not None
        self.subscriptions.assign_incrementally(plan.assigned)
        self._on_assignment_change()
        self._stage = Stage.ASSIGNING
        return ListenerCall(ASSIGNED, plan.added)

    def _acknowledge(self) -> None:
        plan, self._plan = self._plan, None
        self._stage = Stage.IDLE
        assert plan is not None
        self.current = dict(plan.resolved)
        self.rebalances += 1
        if self.state is MemberState.STABLE:
            self.state = MemberState.ACKNOWLEDGING
        self._heartbeat_now.set()

    async def _match_pattern(self) -> None:
        subs = self.subscriptions
        metadata = await request_metadata(await self.cluster.any_connection())
        internal = metadata.internal_topics if self.config.exclude_internal_topics else frozenset()
        subs.topics = {t for t, code in metadata.topic_errors.items() if code == NONE and subs.matches(t) and t not in internal}

    # ------------------------------------------------------------ background

    async def run(self) -> None:
        """The heartbeat task and, for a pattern, the topic matching task,
        until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeat_loop)
            nursery.start_soon(self._metadata_loop)

    async def _heartbeat_loop(self) -> None:
        while True:
            await self._wait_until_due()
            if self.state not in _HEARTBEATING or not self.subscriptions.auto_assigned:
                continue
            if self.poll_expired():
                await self._leave_for_poll_timeout()
                continue
            if self._last_match == -math.inf:  # a new pattern: its topics go with this heartbeat
                await self._rematch_pattern()
            await self._heartbeat()

    async def _wait_until_due(self) -> None:
        now = trio.current_time()
        due = self._last_heartbeat + self._interval if self.state in _HEARTBEATING else now + 3600
        if self._polling == 0 and self.state in _HEARTBEATING:
            due = min(due, self._last_poll + self.config.max_poll_interval_ms / 1000)
        if due > now and not self._heartbeat_now.is_set():
            with trio.move_on_at(due):
                await self._heartbeat_now.wait()
        if self._heartbeat_now.is_set():
            self._heartbeat_now = trio.Event()

    async def _leave_for_poll_timeout(self) -> None:
        log.warning(
            "group %s: consumer poll timeout has expired: more than max.poll.interval.ms=%d ms passed between two poll() "
            "calls; member %s leaves the group and joins again on the next poll (KIP-62)",
            self.member.group_id, self.config.max_poll_interval_ms, self.member.member_id,
        )
        await self._send_leave(leave_epoch(self.member.instance_id))
        self._lose("the poll timeout expired", stale=True)

    def _request(self, epoch: int) -> ConsumerGroupHeartbeatRequest:
        subs = self.subscriptions
        fields = self._sent.next_fields(
            send_all=self.state is MemberState.JOINING,
            rebalance_timeout_ms=self.config.max_poll_interval_ms,
            topics=subs.topics,
            assignor=self.config.group_remote_assignor,
            owned=self.current or {},
        )
        owned = None if fields.topic_partitions is None else [ConsumerGroupHeartbeatTopicPartitions(topic_id=tid, partitions=ps) for tid, ps in fields.topic_partitions]
        return ConsumerGroupHeartbeatRequest(
            group_id=self.member.group_id,
            member_id=self.member.member_id,
            member_epoch=epoch,
            instance_id=self.member.instance_id,
            rebalance_timeout_ms=fields.rebalance_timeout_ms,
            subscribed_topic_names=fields.subscribed_topic_names,
            server_assignor=fields.server_assignor,
            topic_partitions=owned,
        )

    async def _call(self, body: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        def check(response: ConsumerGroupHeartbeatResponse) -> ConsumerGroupHeartbeatResponse:
            if response.error_code in _COORDINATOR_CODES:  # looked up again by the coordinator client
                raise error_for_code(response.error_code)(f"ConsumerGroupHeartbeat of group {self.member.group_id!r}: {response.error_message or ''}")
            return response

        # Coordinator errors are retried (the coordinator looked up again) for default.api.timeout.ms.
        return await self.coordinator.call(CONSUMER_GROUP_HEARTBEAT, body, check, floor=1)

    async def _heartbeat(self) -> None:
        body = self._request(self.member.epoch)
        if self.state is MemberState.ACKNOWLEDGING:
            self.state = MemberState.STABLE
        self._last_heartbeat = trio.current_time()
        membership = self._membership
        try:
            response = await self._call(body)
        except KafkaError as exc:
            log.info("group %s: heartbeat failed, retrying after retry.backoff.ms: %s", self.member.group_id, exc)
            self._retry_soon()
            return
        if self.state in _HEARTBEATING and membership == self._membership:  # else an answer for a membership now over
            self._on_response(response)

    def _retry_soon(self) -> None:
        self._sent.reset()
        self._last_heartbeat = trio.current_time() - self._interval + self.config.retry_backoff_ms / 1000

    def _on_response(self, response: ConsumerGroupHeartbeatResponse) -> None:
        code = response.error_code
        if code == NONE:
            self._accept(response)
        elif code in _FENCED_CODES:
            self._lose(f"{error_for_code(code).__name__}: {response.error_message or 'fenced by the coordinator'}", stale=False)
        else:
            error = error_for_code(code)(f"ConsumerGroupHeartbeat of group {self.member.group_id!r}: {response.error_message or ''}".rstrip(": "))
            if error.retriable:
                log.info("group %s: heartbeat failed, retrying: %s", self.member.group_id, error)
                self._retry_soon()
                return
            log.error("group %s: member %s cannot stay in the group: %s", self.member.group_id, self.member.member_id, error)
            self._error = error
            self.state = MemberState.FATAL
            self._wake()
        self._responded.set()
        self._responded = trio.Event()

    def _accept(self, response: ConsumerGroupHeartbeatResponse) -> None:
        member = self.member
        if response.member_id:
            member.member_id = response.member_id
        if member.epoch != response.member_epoch:
            log.info("group %s: member %s now at epoch %d", member.group_id, member.member_id, response.member_epoch)
        member.epoch = response.member_epoch
        self._interval = max(0, response.heartbeat_interval_ms) / 1000
        if self.state is MemberState.JOINING:
            self.state = MemberState.STABLE
        if response.assignment is not None:
            self.target = normalize({tp.topic_id: tp.partitions for tp in response.assignment.topic_partitions if tp.topic_id is not None})
            self._target_version += 1
            self._wake()

    def _lose(self, why: str, *, stale: bool) -> None:
        """The member is out of the group: its partitions are lost (the
        listener is called on the next ``poll``), then it joins again."""
        owned = tuple(self.subscriptions.assigned())
        log.warning("group %s: member %s epoch %d lost its partitions %s: %s", self.member.group_id, self.member.member_id, self.member.epoch, _names(owned), why)
        self._lost = owned
        self._membership += 1
        self.member.epoch = JOIN_EPOCH
        self.target = self.current = None
        self._stage, self._plan = Stage.IDLE, None
        self._planned_version = self._target_version
        self.state = MemberState.STALE if stale else MemberState.FENCED
        self._wake()

    async def _metadata_loop(self) -> None:
        """Match a pattern subscription against the cluster's topics every
        ``metadata.max.age.ms``, and name topic ids not named yet every
        ``retry.backoff.ms``: a change is sent with the next heartbeat."""
        while True:
            await trio.sleep(max(0.05, self.config.retry_backoff_ms / 1000))
            if self.state not in _HEARTBEATING or not self.subscriptions.auto_assigned:
                continue
            try:
                if self.target and set(self.target) - set(self.names.names) and not await self.names.resolve(self.target):
                    self._target_version += 1  # every topic named now: reconcile again
                    self._wake()
            except KafkaError as exc:
                log.info("group %s: metadata lookup failed: %s", self.member.group_id, exc)
            if (trio.current_time() - self._last_match) * 1000 >= self.config.metadata_max_age_ms:
                await self._rematch_pattern()
                self._heartbeat_now.set()

    async def _rematch_pattern(self) -> None:
        if self.subscriptions.pattern is None:
            return
        self._last_match = trio.current_time()
        try:
            await self._match_pattern()
        except KafkaError as exc:
            log.info("group %s: could not list the topics the pattern matches: %s", self.member.group_id, exc)

    # ------------------------------------------------------------ commits

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit offsets with the member epoch (OffsetCommit v9+; a
        consumer with partitions assigned by hand commits without one).

        Args:
            offsets: ``{partition: OffsetAndMetadata}``.

        Raises:
            CommitFailedError: the member is not in the group (fenced, or
                it stopped polling); it joins again on the next ``poll``.
            StaleMemberEpochError: the epoch was still stale after the
                next heartbeat.
            KafkaError: the coordinator's other errors, after its retries.
        """
        if not offsets:
            return
        by_metadata: dict[str, dict[tuple[str, int], int]] = {}
        for tp, om in offsets.items():
            by_metadata.setdefault(om.metadata, {})[tp.key] = om.offset
        for attempt in range(2):
            epoch, member_id = self._commit_identity()
            try:
                for metadata, chunk in by_metadata.items():
                    await self.coordinator.commit_offsets(chunk, generation=epoch, member_id=member_id, metadata=metadata)
                return
            except StaleMemberEpochError:
                if attempt or not self.subscriptions.auto_assigned:
                    raise
                log.info("group %s: commit with stale member epoch %d: committing again after the next heartbeat", self.member.group_id, epoch)
                await self._next_response()
            except (FencedMemberEpochError, UnknownMemberIdError, IllegalGenerationError) as exc:
                raise CommitFailedError(
                    f"Commit cannot be completed since the member {member_id} is no longer in group {self.member.group_id!r} ({exc}): "
                    "it was fenced, or the time between poll() calls was longer than max.poll.interval.ms"
                ) from exc

    def _commit_identity(self) -> tuple[int, str]:
        if not self.subscriptions.auto_assigned:
            return -1, ""
        epoch, member_id = self.member.current()
        if epoch <= 0:
            raise CommitFailedError(f"group {self.member.group_id!r}: this member is not in the group (it joins again on the next poll)")
        return epoch, member_id

    async def _next_response(self) -> None:
        self._heartbeat_now.set()
        with trio.move_on_after(max(self._interval, 1.0) + self.config.socket_timeout_ms / 1000):
            await self._responded.wait()

    # ------------------------------------------------------------ leaving

    def revoke_for_leave(self) -> ListenerCall | None:
        """The listener call due before leaving (``close``,
        ``unsubscribe``): revoked, or lost when no longer a member.

        Returns:
            The call, or None (nothing owned).
        """
        owned = tuple(self.subscriptions.assigned())
        if not self.subscriptions.auto_assigned or not owned or self.state is MemberState.UNSUBSCRIBED:
            return None
        lost = self._lost is not None or self.member.epoch <= 0
        return ListenerCall(LOST if lost else REVOKED, owned)

    async def leave(self) -> None:
        """Leave the group (a heartbeat with epoch -1, or -2 for a static
        member) and forget the membership; errors are logged."""
        if self.state in _HEARTBEATING and self.member.epoch > 0:
            await self._send_leave(leave_epoch(self.member.instance_id))
        self.state = MemberState.UNSUBSCRIBED
        self._membership += 1
        self.member.epoch = JOIN_EPOCH
        self.target = self.current = None
        self._stage, self._plan, self._lost = Stage.IDLE, None, None
        self._planned_version = self._target_version

    async def _send_leave(self, epoch: int) -> None:
        self.state = MemberState.LEAVING
        body = ConsumerGroupHeartbeatRequest(group_id=self.member.group_id, member_id=self.member.member_id, member_epoch=epoch, instance_id=self.member.instance_id)
        with trio.move_on_after(self.config.socket_timeout_ms / 1000):
            try:
                response = await self._call(body)
            except KafkaError as exc:
                log.warning("group %s: leaving heartbeat of member %s failed: %s", self.member.group_id, self.member.member_id, exc)
                return
            if response.error_code != NONE:
                log.warning("group %s: leaving heartbeat of member %s: error %s", self.member.group_id, self.member.member_id, error_for_code(response.error_code).__name__)
            else:
                log.info("group %s: member %s left the group (epoch %d)", self.member.group_id, self.member.member_id, epoch)


def _names(partitions: tuple[TopicPartition, ...]) -> str:
    return ", ".join(map(str, partitions)) or "none"


__all__ = ["ConsumerGroupMember", "ConsumerProtocolDriver", "MemberState", "Stage"]
