"""The poll consumer's group membership (Kafka's ``ConsumerCoordinator``
with the classic protocol, eager or cooperative rebalancing): when to rejoin, the
rebalance listener calls around a rejoin, background heartbeats, the poll
timer of ``max.poll.interval.ms`` and commits with the member's
generation.

A rebalance happens inside ``poll``, in steps, as in Kafka's
``ConsumerCoordinator.poll``: `GroupDriver.step` returns the listener call
due next (a `ListenerCall`) and the caller runs it, on its own thread,
before the next step, so a listener may call the consumer:

1. before rejoining: the positions are committed (``enable.auto.commit``),
   then ``on_partitions_revoked`` with every owned partition (or
   ``on_partitions_lost`` when the member found it was no longer in the
   group: nothing is committed then);
2. the assignment is cleared and the member joins
   (`kclient.client.consumer.group.membership.GroupMember.join`: JoinGroup,
   the leader's assignment, SyncGroup) on a background task, so ``poll``
   may return before the group settles;
3. ``on_partitions_assigned`` with the new partitions.

Cooperative rebalancing (KIP-429), when every assignor the member offers
supports it (``partition.assignment.strategy=cooperative-sticky``), as
Kafka's ``ConsumerCoordinator`` with ``RebalanceProtocol.COOPERATIVE``:

1. before rejoining: the positions are committed (``enable.auto.commit``);
   only partitions of topics no longer subscribed are revoked (lost, as
   above, when the member was dropped from the group);
2. the member joins with the partitions it owns in its subscription and
   keeps consuming them while the group rebalances;
3. after SyncGroup: the partitions owned and no longer assigned are
   committed (``enable.auto.commit``), ``on_partitions_revoked`` is called
   with them (only when there are some), they leave the assignment and
   ``on_partitions_assigned`` is called with the added ones (even none);
   if some were revoked the member rejoins at once, so the group can hand
   them to their new owner (the assignor withheld them in this
   generation).

Heartbeats run every ``heartbeat.interval.ms`` on a background task
(Kafka's heartbeat thread, KIP-62): ``REBALANCE_IN_PROGRESS`` asks for a
rejoin on the next ``poll``; ``ILLEGAL_GENERATION`` / ``UNKNOWN_MEMBER_ID``
mean the partitions are lost; ``FENCED_INSTANCE_ID`` (a newer process
took this member's ``group.instance.id``, KIP-345) is fatal: every later
``poll`` raises `kclient.errors.FencedInstanceIdError`, as Kafka's
consumer does, and the member never rejoins (it would fence its own
replacement). A member that does not call ``poll`` for
more than ``max.poll.interval.ms`` sends LeaveGroup from that task, so
the group gives its partitions to the others at once; its next ``poll``
calls ``on_partitions_lost`` and joins again.

Every ``metadata.max.age.ms`` the member checks its subscribed topics
(those a pattern matches) and their partition counts; a change starts a
rebalance.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from kclient.client.cluster import Cluster, request_metadata
from kclient.client.consumer.group.assignors import is_cooperative
from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.client.consumer.group.membership import GroupMember, JoinResult
from kclient.client.consumer.poll.errors import CommitFailedError
from kclient.client.consumer.poll.subscription import SubscriptionState
from kclient.client.consumer.poll.types import OffsetAndMetadata, TopicPartition
from kclient.config import ConsumerConfig
from kclient.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    KafkaError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

log = logging.getLogger("kclient.consumer")

#: The listener methods, by `ListenerCall.kind`.
REVOKED = "revoked"
ASSIGNED = "assigned"
LOST = "lost"


@attrs.frozen
class ListenerCall:
    """A rebalance listener call due before the rebalance goes on.

    Attributes:
        kind: `REVOKED`, `ASSIGNED` or `LOST`.
        partitions: Its argument, sorted.
    """

    kind: str
    partitions: tuple[TopicPartition, ...]

    def invoke(self, listener: Any) -> Any:
        """Call ``listener.on_partitions_<kind>(partitions)``.

        Args:
            listener: A `ConsumerRebalanceListener` (any object with the
                method), or None (nothing is called).

        Returns:
            What the method returned (an awaitable for an async listener).
        """
        if listener is None:
            return None
        return getattr(listener, f"on_partitions_{self.kind}")(list(self.partitions))


class Phase(enum.Enum):
    """Where the member is in a rebalance."""

    STABLE = "stable"
    REVOKING = "revoking"
    JOINING = "joining"
    JOINED = "joined"
    #: Cooperative: the revoked partitions' listener call ran; the new
    #: assignment is applied on the next step.
    ASSIGNING = "assigning"
    FAILED = "failed"


#: The phases in which the member heartbeats (it is in a generation).
_HEARTBEAT_PHASES = (Phase.STABLE, Phase.REVOKING, Phase.ASSIGNING)


class GroupDriver:
    """The member's side of the group (on the consumer's trio loop).

    Args:
        coordinator: The group coordinator client.
        member: The membership (JoinGroup / SyncGroup / Heartbeat /
            LeaveGroup).
        cluster: Metadata (subscribed topics and partition counts).
        config: ``heartbeat.interval.ms``, ``max.poll.interval.ms``,
            ``metadata.max.age.ms``, ``retry.backoff.ms``,
            ``enable.auto.commit``, ``exclude.internal.topics``.
        subscriptions: The subscription and assignment.
        commit_positions: Commits the current positions (synchronous), for
            the auto-commit before a rejoin.
        on_assignment_change: Called after the assignment was cleared or
            set (drops buffered fetches).
        wake: Wakes a waiting ``poll``.
    """

    def __init__(
        self,
        coordinator: GroupCoordinator,
        member: GroupMember,
        cluster: Cluster,
        config: ConsumerConfig,
        subscriptions: SubscriptionState,
        commit_positions: Callable[[], Awaitable[None]],
        on_assignment_change: Callable[[], None],
        wake: Callable[[], None],
    ) -> None:
        self.coordinator = coordinator
        self.member = member
        self.cluster = cluster
        self.config = config
        self.subscriptions = subscriptions
        self._commit_positions = commit_positions
        self._on_assignment_change = on_assignment_change
        self._wake = wake
        self.phase = Phase.STABLE
        self.rejoin_needed = False
        self.lost = False
        #: The member was in the group (revoke / lost listener calls due on a rejoin).
        self.joined = False
        self._result: JoinResult | None = None
        self._join_scope: trio.CancelScope | None = None
        self._error: KafkaError | None = None
        #: A fatal error (FENCED_INSTANCE_ID): raised by every later step.
        self.fatal: KafkaError | None = None
        self._joined_counts: dict[str, int] = {}
        self._lost_before_join = False
        self._last_poll = trio.current_time()
        self._polling = 0
        #: How many rebalances this member went through.
        self.rebalances = 0
        #: Incremental (cooperative) rebalancing, KIP-429: every offered
        #: assignor supports it.
        self.cooperative = is_cooperative(member.assignors)
        #: Cooperative: the assignment to apply in `Phase.ASSIGNING`.
        self._pending: tuple[TopicPartition, ...] | None = None

    # ------------------------------------------------------------ poll timer (KIP-62)

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
        idle = trio.current_time() - self._last_poll
        return self._polling == 0 and idle * 1000 > self.config.max_poll_interval_ms

    # ------------------------------------------------------------ rebalance steps

    def request_rejoin(self, why: str) -> None:
        """Rejoin on the next ``poll``.

        Args:
            why: Logged.
        """
        if self.subscriptions.auto_assigned and not self.rejoin_needed:
            log.info("group %s: rejoining: %s", self.member.group_id, why)
        self.rejoin_needed = True
        self._wake()

    async def step(self, nursery: trio.Nursery) -> ListenerCall | None:
        """The next rebalance step due, if any (see the module docstring).

        Args:
            nursery: Runs the join task.

        Returns:
            A listener call to run before the next step, or None (nothing
            due, or the join is still under way).

        Raises:
            KafkaError: the join failed with an error a retry cannot fix
                (``INCONSISTENT_GROUP_PROTOCOL``, ``GROUP_AUTHORIZATION_FAILED``,
                ...); the next ``poll`` tries again.
        """
        if self.fatal is not None:
            raise self.fatal
        if not self.subscriptions.auto_assigned:
            return None
        if self.phase is Phase.JOINED:
            return await self._take_assignment()
        if self.phase is Phase.ASSIGNING:
            return self._apply_assignment()
        if self.phase is Phase.FAILED:
            error, self._error = self._error, None
            self.phase = Phase.REVOKING
            assert error is not None
            raise error
        if self.phase is Phase.STABLE and (self.rejoin_needed or not self.joined):
            self.phase = Phase.REVOKING
            call = await self._before_rejoin()
            if call is not None:
                return call
        if self.phase is Phase.REVOKING:
            self._release_before_join()
            self.phase = Phase.JOINING
            self.rejoin_needed = False
            self.lost = False
            nursery.start_soon(self._join)
        return None

    async def _before_rejoin(self) -> ListenerCall | None:
        """Commit (unless lost) and say which listener call is due."""
        owned = tuple(self.subscriptions.assigned())
        if not self.joined:
            return None
        lost = self.lost or self.member.generation < 0
        self.lost = False
        if lost:
            self._lost_before_join = True
            return ListenerCall(LOST, owned) if owned else None
        self._lost_before_join = False
        if self.config.auto_commit_enable:
            try:
                await self._commit_positions()
            except KafkaError as exc:  # the next owner starts from the last commit (a timeout is a KafkaTimeoutError)
                log.warning("group %s: commit before rejoining failed: %s", self.member.group_id, exc)
        if self.cooperative:
            unsubscribed = tuple(tp for tp in owned if not self._subscribed(tp.topic))
            return ListenerCall(REVOKED, unsubscribed) if unsubscribed else None
        return ListenerCall(REVOKED, owned)

    def _subscribed(self, topic: str) -> bool:
        return topic in self.subscriptions.topics or self.subscriptions.matches(topic)

    def _release_before_join(self) -> None:
        """Drop what the member gives up before it joins: everything
        (eager, or lost), else the partitions of topics no longer
        subscribed (cooperative)."""
        subs = self.subscriptions
        owned = subs.assigned()
        keep = [tp for tp in owned if self._subscribed(tp.topic)] if self.cooperative and not self._lost_before_join else []
        self._lost_before_join = False
        if len(keep) != len(owned):
            subs.assign_from_subscribed(keep)
            self._on_assignment_change()

    async def _take_assignment(self) -> ListenerCall | None:
        result, self._result = self._result, None
        assert result is not None
        subs = self.subscriptions
        wanted = tuple(sorted(TopicPartition(t, p) for t, p in result.assignment if self._subscribed(t)))
        self.joined = True
        self.rebalances += 1
        if not self.cooperative:
            subs.assign_from_subscribed(wanted)
            self._on_assignment_change()
            self.phase = Phase.STABLE
            return ListenerCall(ASSIGNED, wanted)
        self._pending = wanted
        self.phase = Phase.ASSIGNING
        revoked = tuple(sorted(set(subs.assigned()) - set(wanted)))
        if not revoked:
            return self._apply_assignment()
        if self.config.auto_commit_enable:
            try:
                await self._commit_positions()
            except KafkaError as exc:  # the new owner starts from the last commit
                log.warning("group %s: commit of the revoked partitions failed: %s", self.member.group_id, exc)
        return ListenerCall(REVOKED, revoked)

    def _apply_assignment(self) -> ListenerCall:
        """Cooperative: the new assignment replaces the old one (kept
        partitions keep their positions); rejoin at once if some were
        revoked."""
        wanted, self._pending = self._pending, None
        assert wanted is not None
        subs = self.subscriptions
        owned = set(subs.assigned())
        added = tuple(tp for tp in wanted if tp not in owned)
        revoked = owned - set(wanted)
        if added or revoked:
            subs.assign_incrementally(wanted)
            self._on_assignment_change()
        self.phase = Phase.STABLE
        if revoked:
            self.request_rejoin(f"{len(revoked)} partitions were revoked: the group hands them out in the next generation (KIP-429)")
        return ListenerCall(ASSIGNED, added)

    async def subscribed_topics(self) -> list[str]:
        """The topics to join with: the subscribed ones, or the existing
        topics a pattern matches (internal ones left out with
        ``exclude.internal.topics``).

        Returns:
            Sorted topic names.
        """
        subs = self.subscriptions
        if subs.pattern is None:
            return sorted(subs.topics)
        metadata = await request_metadata(await self.cluster.any_connection())
        internal = metadata.internal_topics if self.config.exclude_internal_topics else frozenset()
        topics = sorted(t for t, code in metadata.topic_errors.items() if code == 0 and subs.matches(t) and t not in internal)
        subs.topics = set(topics)
        return topics

    async def partition_counts(self, topics: set[str]) -> Mapping[str, int]:
        """``{topic: partitions}`` of the topics that exist.

        Args:
            topics: Topic names.

        Returns:
            The counts (unknown topics left out).
        """
        metadata = await self.cluster.refresh_metadata(topics, allow_auto_create=self.subscriptions.pattern is None)
        return {t: len(metadata.partitions_for(t)) for t in topics if metadata.partitions_for(t)}

    async def _join(self) -> None:
        with trio.CancelScope() as scope:  # cancelled by leave()
            self._join_scope = scope
            await self._join_until_done()

    async def _join_until_done(self) -> None:
        backoff = self.config.retry_backoff_ms / 1000
        while True:
            try:
                topics = await self.subscribed_topics()
                counts = dict(await self.partition_counts(set(topics)))
                owned = [tp.key for tp in self.subscriptions.assigned()] if self.cooperative else []
                result = await self.member.join(topics, self.partition_counts, owned)
            except KafkaError as exc:
                if exc.retriable:
                    log.info("group %s: join failed, retrying: %s", self.member.group_id, exc)
                    await trio.sleep(backoff)
                    continue
                if isinstance(exc, FencedInstanceIdError):
                    self._fenced(exc)
                self._error = exc
                self.phase = Phase.FAILED
                self._wake()
                return
            self._joined_counts = counts
            self._result = result
            self.phase = Phase.JOINED
            self._wake()
            return

    # ------------------------------------------------------------ background

    async def run(self) -> None:
        """The heartbeat and metadata tasks, until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeat_loop)
            nursery.start_soon(self._metadata_loop)

    def _in_group(self, phases: tuple[Phase, ...] = (Phase.STABLE,)) -> bool:
        return self.phase in phases and self.joined and self.member.generation >= 0 and self.subscriptions.auto_assigned

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            # Heartbeats go on while the revoke listener runs (Kafka stops
            # them only once the JoinGroup is sent), and while a cooperative
            # member's listener runs after SyncGroup.
            if not self._in_group(_HEARTBEAT_PHASES):
                continue
            if self.poll_expired():
                log.warning(
                    "group %s: consumer poll timeout has expired: more than max.poll.interval.ms=%d ms passed between "
                    "two poll() calls; leaving the group (KIP-62)", self.member.group_id, self.config.max_poll_interval_ms,
                )
                await self.member.leave()
                self.lost = True
                self.request_rejoin("poll timeout expired")
                continue
            await self._heartbeat()

    async def _heartbeat(self) -> None:
        try:
            await self.member.heartbeat()
        except RebalanceInProgressError:
            self.request_rejoin("the group is rebalancing")
        except FencedInstanceIdError as exc:
            self._fenced(exc)
            self._error = exc
            self.phase = Phase.FAILED
            self._wake()
        except (IllegalGenerationError, UnknownMemberIdError) as exc:
            if not self._in_group(_HEARTBEAT_PHASES):
                return
            if isinstance(exc, UnknownMemberIdError):
                self.member.member_id = ""
            self.member.generation = -1
            self.lost = True
            self.request_rejoin(f"the member is no longer in the group: {exc}")
        except KafkaError as exc:
            log.warning("group %s: heartbeat failed: %s", self.member.group_id, exc)

    def _fenced(self, exc: FencedInstanceIdError) -> None:
        """FENCED_INSTANCE_ID: another process now holds this member's
        ``group.instance.id``; its partitions are that process's now."""
        log.error("group %s: %s; this consumer must be closed (group.instance.id=%s is used by a newer member)", self.member.group_id, exc, self.member.group_instance_id)
        self.fatal = exc
        self.lost = True

    async def _metadata_loop(self) -> None:
        interval = self.config.metadata_max_age_ms / 1000
        while True:
            await trio.sleep(interval)
            if not self._in_group() or self.rejoin_needed:
                continue
            try:
                topics = await self.subscribed_topics()
                counts = dict(await self.partition_counts(set(topics)))
            except KafkaError as exc:
                log.warning("group %s: metadata check failed: %s", self.member.group_id, exc)
                continue
            if counts != self._joined_counts and self._in_group():
                self.request_rejoin(f"subscribed topics changed from {self._joined_counts} to {counts}")

    # ------------------------------------------------------------ commits and leaving

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit offsets with the member's generation (a consumer with
        partitions assigned by hand commits without one).

        Args:
            offsets: ``{partition: OffsetAndMetadata}``.

        Raises:
            CommitFailedError: the member is no longer in the group (it
                rejoins on the next ``poll``).
            RebalanceInProgressError: the group is rebalancing (commit
                again after the next ``poll``); a cooperative member does
                not commit while it rejoins.
            KafkaError: the coordinator's other errors, after its retries.
        """
        if not offsets:
            return
        generation, member_id = -1, ""
        if self.subscriptions.auto_assigned:
            if self.cooperative and self.phase in (Phase.JOINING, Phase.JOINED):
                # Kafka's generationIfStable: no commit while the group rebalances (the member keeps its partitions then).
                raise RebalanceInProgressError(f"group {self.member.group_id!r} is rebalancing: commit again after the next poll")
            generation, member_id = self.member.current()
            if generation < 0:
                raise CommitFailedError(f"group {self.member.group_id!r}: this member is not in the group (it rejoins on the next poll)")
        by_metadata: dict[str, dict[tuple[str, int], int]] = {}
        for tp, om in offsets.items():
            by_metadata.setdefault(om.metadata, {})[tp.key] = om.offset
        try:
            for metadata, chunk in by_metadata.items():
                await self.coordinator.commit_offsets(chunk, generation=generation, member_id=member_id, metadata=metadata)
        except (IllegalGenerationError, UnknownMemberIdError) as exc:
            self.request_rejoin(str(exc))
            raise CommitFailedError(
                f"Commit cannot be completed since the group {self.member.group_id!r} has already rebalanced and assigned the "
                f"partitions to another member ({exc}): the time between poll() calls was longer than max.poll.interval.ms, "
                "or the session timed out"
            ) from exc
        except RebalanceInProgressError:
            self.request_rejoin("the group is rebalancing")
            raise

    def revoke_for_leave(self) -> ListenerCall | None:
        """The listener call due before leaving the group (``close``,
        ``unsubscribe``): revoked, or lost when no longer a member."""
        owned = tuple(self.subscriptions.assigned())
        if not self.subscriptions.auto_assigned or not self.joined or not owned:
            return None
        return ListenerCall(LOST if self.lost or self.member.generation < 0 else REVOKED, owned)

    async def leave(self) -> None:
        """LeaveGroup (if a member), so the others rebalance at once, and
        forget the membership (a join under way is abandoned)."""
        if self._join_scope is not None:
            self._join_scope.cancel()
            self._join_scope = None
        self._result = None
        self._pending = None
        if self.member.member_id and self.joined:
            with trio.move_on_after(self.config.socket_timeout_ms / 1000):
                await self.member.leave()
        self.member.member_id = ""
        self.member.generation = -1
        self.joined = False
        self.lost = False
        self.rejoin_needed = False
        self.phase = Phase.STABLE


__all__ = ["ASSIGNED", "LOST", "REVOKED", "GroupDriver", "ListenerCall", "Phase"]
