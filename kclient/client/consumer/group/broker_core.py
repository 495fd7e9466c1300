"""The `ConsumerConnector`'s core for ``group.coordination=broker``: the
group is coordinated by a broker's group coordinator instead of ZooKeeper,
as Kafka's own consumers do since Kafka 0.9 (Kafka protocol guide, group
membership APIs, https://kafka.apache.org/protocol; KIP-62), so the
connector works on clusters that give clients no ZooKeeper access and
shares groups with any other Kafka consumer.

The same streams as with ZooKeeper; what changes:

- membership: `kclient.client.consumer.group.membership.GroupMember`
  (JoinGroup / SyncGroup with the "consumer" protocol, offering
  ``partition.assignment.strategy`` first and the other assignor of
  `kclient.client.consumer.group.assignors` second); the member's
  partitions are spread over its streams by range per topic;
- liveness: a Heartbeat every ``heartbeat.interval.ms`` on a background
  task; ``REBALANCE_IN_PROGRESS`` (another member joined or left),
  ``ILLEGAL_GENERATION`` or ``UNKNOWN_MEMBER_ID`` start a rebalance: stop
  the fetchers, clear the queues, commit (with ``auto.commit.enable``),
  join again, fetch the committed offsets of the new partitions, start
  fetching;
- offsets: always in Kafka, committed with the member's generation and id
  (`kclient.client.consumer.group.offset_stores.KafkaOffsetStore`);
- leaders and partition counts: from Metadata (`kclient.client.cluster`);
- shutdown: commit, then LeaveGroup.

A topic filter (``create_message_streams_by_filter``) subscribes the
topics matching it when the group is joined; every ``metadata.max.age.ms``
the member looks again, and a new matching topic (or a topic with more
partitions) starts a rebalance.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import trio

from kclient.client.cluster import Cluster, request_metadata
from kclient.client.consumer.group.assignors import offered_assignors, require_eager, spread_over_streams
from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.client.consumer.group.core_base import GroupCoreBase
from kclient.client.consumer.group.membership import REJOIN_ERRORS, GroupMember
from kclient.client.consumer.group.offset_stores import KafkaOffsetStore
from kclient.client.consumer.partition_topic_info import Leader, TopicPartition
from kclient.config import ConsumerConfig
from kclient.errors import KafkaError

log = logging.getLogger("kclient.consumer")


class BrokerGroupCore(GroupCoreBase):
    """The connector's state on its trio loop, for broker coordination.

    Args:
        config: the connector's config.
        consumer_id: this consumer's id (logged; the coordinator hands
            out the member id).
    """

    def __init__(self, config: ConsumerConfig, consumer_id: str) -> None:
        require_eager(config.partition_assignment_strategy, "broker")
        super().__init__(config, consumer_id)
        self.cluster: Cluster | None = None
        self.coordinator: GroupCoordinator | None = None
        self.member: GroupMember | None = None
        self._joining = False
        self._joined = False
        #: ``{topic: partitions}`` this member subscribed when it last joined.
        self._joined_topics: dict[str, int] = {}

    async def start(self, nursery: trio.Nursery) -> None:
        """Set up the cluster connections and the coordinator client, and
        start the background tasks (the group is joined by
        `register_and_rebalance`).

        Args:
            nursery: The loop thread's nursery.
        """
        config = self.config
        self._begin(nursery)
        assert config.bootstrap_servers
        self.cluster = self._open_cluster(nursery, list(config.bootstrap_servers), config.socket_timeout_ms)
        self.coordinator = self._group_coordinator(self.cluster)
        self.member = GroupMember(
            self.coordinator,
            session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.rebalance_timeout_ms,
            assignors=offered_assignors(config.partition_assignment_strategy),
        )
        self.store = KafkaOffsetStore(self.coordinator, self.member.current)
        nursery.start_soon(self._background)

    def _background_tasks(self) -> list[Callable[[], Awaitable[None]]]:
        """Heartbeats and the subscription's metadata check."""
        return [self._heartbeat_loop, self._metadata_loop]

    def _may_commit(self) -> bool:
        """Only a member of the group commits (with its generation)."""
        return self._joined

    async def _leave_locked(self) -> None:
        """LeaveGroup, so the group rebalances at once (not after the
        session timeout)."""
        if self.member is not None and self._joined:
            with trio.move_on_after(self.config.offsets_channel_socket_timeout_ms / 1000):
                await self.member.leave()

    async def _close_connections(self) -> None:
        if self.cluster is not None:
            await self.cluster.aclose()

    # ------------------------------------------------------------ subscription

    async def _subscribed_topics(self) -> list[str]:
        if self.topic_filter is None:
            return list(self.subscription)
        assert self.cluster is not None
        metadata = await request_metadata(await self.cluster.any_connection())
        excl = self.config.exclude_internal_topics
        return sorted(t for t, code in metadata.topic_errors.items() if code == 0 and self.topic_filter.is_topic_allowed(t, excl))

    def _streams_per_topic(self, topics: list[str]) -> dict[str, tuple[int, int]]:
        if self.topic_filter is not None:
            n = next(iter(self.subscription.values()))
            return dict.fromkeys(topics, (0, n))
        result = {}
        base = 0
        for topic, n in self.subscription.items():
            result[topic] = (base, n)
            base += n
        return result

    async def _partition_counts(self, topics: set[str]) -> Mapping[str, int]:
        assert self.cluster is not None
        metadata = await self.cluster.refresh_metadata(topics, allow_auto_create=False)
        return {t: len(metadata.partitions_for(t)) for t in topics if metadata.partitions_for(t)}

    # ------------------------------------------------------------ join and rebalance

    async def register_and_rebalance(self) -> None:
        """Join the group and start fetching (``create_message_streams``)."""
        assert self._lock is not None
        async with self._lock:
            await self._rebalance()

    def _rebalance_failure(self, attempts: int, last_error: BaseException | None) -> str:
        return (
            f"{self.consumer_id} can't join group {self.group!r} after {attempts} attempts (rebalance.max.retries="
            f"{self.config.rebalance_max_retries}): {last_error}"
        )

    async def _commit_before_rebalance(self) -> None:
        try:
            await self._commit_locked()
        except KafkaError as exc:  # e.g. the generation moved on: the next owner re-reads from the last commit
            log.warning("commit before rejoining group %s failed: %s", self.group, exc)

    async def _rebalance_once(self) -> bool:
        assert self.member is not None
        self._joining = True
        try:
            await self._stop_and_commit()
            owned_before = list(self.owned)
            previous = self._forget_owned()
            topics = await self._subscribed_topics()
            self._joined_topics = dict(await self._partition_counts(set(topics)))
            self._joined = False
            result = await self.member.join(topics, self._partition_counts, owned_before)
            self._joined = True
        finally:
            self._joining = False
        assigned = [tp for tp in result.assignment if tp[0] in topics]
        streams = spread_over_streams(assigned, self._streams_per_topic(topics))
        keys = sorted(streams)
        assert self.store is not None
        committed = await self.store.read(keys) if keys else {}
        leaders = await self.find_leaders(keys) if keys else {}
        await self._take_partitions(streams, committed, leaders, previous)
        return True

    async def find_leaders(self, keys: list[TopicPartition]) -> dict[TopicPartition, Leader]:
        """Partition leaders from Metadata (`ClusterMetadata.leaders`; see
        `kclient.client.consumer.fetcher.FetcherOwner.find_leaders`)."""
        assert self.cluster is not None
        metadata = await self.cluster.refresh_metadata({t for t, _ in keys}, allow_auto_create=False)
        return metadata.leaders(keys)

    async def _commit_locked(self) -> int:
        try:
            return await super()._commit_locked()
        except REJOIN_ERRORS:
            # The group moved on (a member joined or left) before this
            # member's heartbeat said so: rejoin, as Kafka's consumer does
            # after a CommitFailedException (a rebalance under way rejoins anyway).
            if not self._joining:
                self.request_rebalance()
            raise

    # ------------------------------------------------------------ metadata

    async def _metadata_loop(self) -> None:
        interval = self.config.metadata_max_age_ms / 1000
        while True:
            await trio.sleep(interval)
            if self._joining or not self._joined or self._rebalance_pending:
                continue
            try:
                topics = await self._subscribed_topics()
                counts = dict(await self._partition_counts(set(topics)))
            except KafkaError as exc:
                log.warning("group %s: metadata check failed: %s", self.group, exc)
                continue
            if counts != self._joined_topics and not self._joining:
                log.info("group %s: subscribed topics changed from %s to %s; rebalancing", self.group, self._joined_topics, counts)
                self.request_rebalance()

    # ------------------------------------------------------------ heartbeats

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            if self._joining or not self._joined or self.member is None or self._rebalance_pending:
                continue
            try:
                await self.member.heartbeat()
            except REJOIN_ERRORS as exc:
                if self._joining:
                    continue
                log.info("group %s: %s; rebalancing", self.group, exc)
                self.request_rebalance()
            except KafkaError as exc:
                log.warning("group %s: heartbeat failed: %s", self.group, exc)


__all__ = ["BrokerGroupCore"]
