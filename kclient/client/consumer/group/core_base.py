"""What every `ConsumerConnector` core shares, whoever coordinates the
group: the streams' queues, the consumed and committed offsets, the commit
(to an `kclient.client.consumer.group.offset_stores.OffsetStore`), the
background tasks (auto-commit, rebalance), the rebalance's retries and the
steps around a new assignment (stop fetching, commit, forget the old
partitions; look up the new ones' start offsets and fetch them), the group
coordinator's connections and the fetchers of the current generation.
`kclient.client.consumer.group.core.ConnectorCore` (ZooKeeper
coordination) and `kclient.client.consumer.group.broker_core.BrokerGroupCore`
(a broker's group coordinator) fill in membership and assignment.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

from kclient.client.cluster import Cluster
from kclient.client.consumer.fetcher import FetcherGroup
from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.client.consumer.group.offset_stores import OffsetStore
from kclient.client.consumer.group.offsets import ConsumedOffsets
from kclient.client.consumer.group.streams import (
    KafkaStream,
    MessageAndMetadata,
    StreamQueues,
    TopicFilter,
)
from kclient.client.consumer.partition_topic_info import Leader, PartitionTopicInfo, TopicPartition
from kclient.client.consumer.statistics import FetchStatistics
from kclient.config import ConsumerConfig
from kclient.errors import ConsumerRebalanceFailedError, KafkaError
from kclient.net.settings import ConnectionSettings
from kclient.security.tls import client_ssl_context
from kclient.sync import LoopThread

log = logging.getLogger("kclient.consumer")


class GroupCoreBase(abc.ABC):
    """State and tasks shared by the connector cores (on the connector's
    trio loop). Not part of kclient's public API.

    Args:
        config: the connector's config.
        consumer_id: this consumer's id.
    """

    def __init__(self, config: ConsumerConfig, consumer_id: str) -> None:
        self.config = config
        self.consumer_id = consumer_id
        self.group = config.group_id
        self.closed = False
        #: What the fetchers fetched (`ConsumerConnector.statistics`).
        self.fetch_statistics = FetchStatistics()
        #: Bumped by each rebalance that moves partitions; chunks fetched
        #: under an older one are dropped by the streams.
        self.generation = 0
        self.key_decoder: Callable[[Any], Any] | None = None
        self.value_decoder: Callable[[Any], Any] | None = None
        #: What this consumer reads: static ``{topic: streams}``, or
        #: ``{regex: streams}`` with ``topic_filter``.
        self.subscription: dict[str, int] = {}
        self.topic_filter: TopicFilter | None = None
        #: One TLS context for every fetcher connection (``ssl.*`` files are
        #: read once, and a bad one fails here, not in a fetcher).
        self.ssl_context = client_ssl_context(config.security) if config.security.security_protocol.uses_ssl else None
        #: Where commits go (set by the subclass's ``start``).
        self.store: OffsetStore | None = None
        self.offsets = ConsumedOffsets()
        self.queues = StreamQueues()
        #: Partitions owned now: {(topic, p): PartitionTopicInfo}.
        self.owned: dict[TopicPartition, PartitionTopicInfo] = {}
        self.rebalance_count = 0
        self._nursery: trio.Nursery | None = None
        self._lock: trio.Lock | None = None
        self._wakeup: trio.Event | None = None
        self._rebalance_pending = False
        self._scope: trio.CancelScope | None = None
        self._fetch_scope: trio.CancelScope | None = None
        self._fetch_done: trio.Event | None = None
        self._stopping = False

    @property
    def streams(self) -> list[KafkaStream]:
        """The streams, in index order (empty before `make_streams`)."""
        return self.queues.streams

    # ------------------------------------------------------------ start

    def _begin(self, nursery: trio.Nursery) -> None:
        """Take the loop thread's nursery and make the loop-side state
        (``start`` of each core, first thing)."""
        self._nursery = nursery
        self._lock = trio.Lock()
        self._wakeup = trio.Event()

    def _open_cluster(self, nursery: trio.Nursery, bootstrap: Sequence[tuple[str, int]], request_timeout_ms: int) -> Cluster:
        """The connections to the group coordinator's cluster
        (``offsets.channel.socket.timeout.ms`` to connect,
        ``offsets.channel.backoff.ms`` between metadata attempts).

        Args:
            nursery: Runs the connections' reader tasks.
            bootstrap: The brokers to start from.
            request_timeout_ms: Each request's response timeout (ms).

        Returns:
            The cluster (it connects lazily).
        """
        config = self.config
        settings = ConnectionSettings(config.client_id, config.offsets_channel_socket_timeout_ms, request_timeout_ms, config.security)
        return Cluster.open(nursery, bootstrap, settings, retry_backoff_ms=config.offsets_channel_backoff_ms)

    def _group_coordinator(self, cluster: Cluster | Callable[[], Awaitable[Cluster]]) -> GroupCoordinator:
        """The client of this group's coordinator (``offsets.channel.*``,
        ``offsets.commit.max.retries``).

        Args:
            cluster: The cluster, or an async factory of it (connected on
                first use).

        Returns:
            The coordinator client.
        """
        config = self.config
        return GroupCoordinator(
            cluster,
            self.group,
            retry_backoff_ms=config.offsets_channel_backoff_ms,
            timeout_ms=config.offsets_channel_socket_timeout_ms,
            commit_retries=config.offsets_commit_max_retries,
        )

    async def _background(self) -> None:
        """The background tasks, until shutdown cancels them: auto-commit
        (``auto.commit.enable``), the rebalance task and the core's own
        (`_background_tasks`)."""
        with trio.CancelScope() as scope:
            self._scope = scope
            if self._stopping:
                return
            async with trio.open_nursery() as inner:
                if self.config.auto_commit_enable and self.config.auto_commit_interval_ms > 0:
                    inner.start_soon(self._auto_commit_loop)
                inner.start_soon(self._rebalance_loop)
                for task in self._background_tasks():
                    inner.start_soon(task)

    def _background_tasks(self) -> list[Callable[[], Awaitable[None]]]:
        """The core's own background tasks (none here)."""
        return []

    # ------------------------------------------------------------ subscription and streams

    def subscribe(
        self,
        subscription: dict[str, int],
        topic_filter: TopicFilter | None,
        key_decoder: Callable[[Any], Any] | None,
        value_decoder: Callable[[Any], Any] | None,
    ) -> None:
        """Set what this consumer reads (once, before `make_streams`).

        Args:
            subscription: Static ``{topic: streams}``, or ``{regex:
                streams}`` with a ``topic_filter``.
            topic_filter: A `Whitelist` / `Blacklist`, or None.
            key_decoder: Applied to every key; None keeps the bytes.
            value_decoder: Applied to every value; None keeps the bytes.
        """
        self.key_decoder, self.value_decoder = key_decoder, value_decoder
        self.subscription = dict(subscription)
        self.topic_filter = topic_filter

    def make_streams(self, loop: LoopThread, count: int, capacity: int, names: list[str]) -> list[KafkaStream]:
        """Build the streams (on the loop thread).

        Args:
            loop: The loop thread.
            count: How many streams.
            capacity: Queue size of each (chunks).
            names: One name per stream.

        Returns:
            The streams.
        """
        return self.queues.make_streams(self, loop, count, capacity, names, self.config.consumer_timeout_ms)

    async def deliver(self, stream_index: int, item: Any) -> None:
        """Queue an item for a stream; waits while its queue is full.

        Args:
            stream_index: The stream's index.
            item: A chunk ``(generation, [MessageAndMetadata])`` or an error.
        """
        await self.queues.deliver(stream_index, item)

    def owned_partitions(self) -> dict[TopicPartition, int]:
        """``{(topic, partition): stream index}`` owned now (loop thread)."""
        return {k: i.stream_index for k, i in self.owned.items()}

    # ------------------------------------------------------------ consumed offsets

    def record_consumed(self, m: MessageAndMetadata) -> None:
        """Count a message as consumed (any thread).

        Args:
            m: The message handed to the application.
        """
        key = (m[2], m[3])
        if key in self.owned:
            self.offsets.record(key, m[4] + 1)

    def reset_consumed(self, key: TopicPartition, offset: int) -> None:
        """The fetcher moved a partition (``auto.offset.reset``).

        Args:
            key: ``(topic, partition)``.
            offset: Where it fetches from now.
        """
        self.offsets.reset(key, offset)

    def _collect_consumed(self) -> None:
        for stream in self.streams:
            last = stream.last_message
            if last is not None:
                self.record_consumed(last)

    async def commit(self) -> int:
        """Commit consumed offsets to the offset store; returns how many
        changed."""
        assert self._lock is not None
        async with self._lock:
            return await self._commit_locked()

    async def shutdown(self) -> None:
        """Stop fetching; commit (with ``auto.commit.enable``); end the
        streams; give up the partitions (each core's `_leave_locked`);
        close the connections (`_close_connections`). Idempotent."""
        if self.closed:
            return
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()
        assert self._lock is not None
        async with self._lock:
            await self._stop_fetchers()
            self.closed = True
            self.queues.close()
            try:
                if self.config.auto_commit_enable and self.owned and self._may_commit():
                    await self._commit_locked()
            except KafkaError as exc:
                log.error("committing offsets at shutdown failed: %s", exc)
            await self._leave_locked()
        await self._close_connections()
        log.info("consumer %s shut down", self.consumer_id)

    def _may_commit(self) -> bool:
        """Whether the owned partitions' offsets may still be committed
        (at shutdown, before a rebalance)."""
        return True

    @abc.abstractmethod
    async def _leave_locked(self) -> None:
        """Give up the partitions at shutdown (lock held)."""

    @abc.abstractmethod
    async def _close_connections(self) -> None:
        """Close the core's broker and ZooKeeper connections at shutdown."""

    async def _commit_locked(self) -> int:
        self._collect_consumed()
        todo = self.offsets.to_commit(self.owned)
        if not todo:
            return 0
        assert self.store is not None
        await self.store.write(todo)
        self.offsets.mark_committed(todo)
        log.debug("committed offsets %s to %s", todo, self.store.name)
        return len(todo)

    async def _auto_commit_loop(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while True:
            await trio.sleep(interval)
            try:
                await self.commit()
            except KafkaError as exc:
                log.warning("auto commit failed: %s", exc)

    # ------------------------------------------------------------ rebalance task

    def request_rebalance(self) -> None:
        """Ask the rebalance task to run (trio thread)."""
        if self._wakeup is not None and not self.closed:
            self._rebalance_pending = True
            self._wakeup.set()

    async def _rebalance(self) -> None:
        """Decide this consumer's partitions and start fetching them
        (`_rebalance_once`), retried ``rebalance.max.retries`` times
        ``rebalance.backoff.ms`` apart.

        Raises:
            ConsumerRebalanceFailedError: every attempt failed (the last
                error is its cause).
        """
        config = self.config
        attempts = config.rebalance_max_retries + 1
        last_error: BaseException | None = None
        for attempt in range(attempts):
            self._rebalance_pending = False
            try:
                if await self._rebalance_once():
                    self.rebalance_count += 1
                    return
                last_error = None
            except KafkaError as exc:  # ZooKeeper, or the group coordinator
                last_error = exc
                log.warning("rebalance attempt %d of consumer %s failed: %s", attempt + 1, self.consumer_id, exc)
            if attempt + 1 < attempts:
                log.info("rebalance attempt %d of consumer %s failed; retrying in %d ms", attempt + 1, self.consumer_id, config.rebalance_backoff_ms)
                await trio.sleep(config.rebalance_backoff_ms / 1000.0)
        raise ConsumerRebalanceFailedError(self._rebalance_failure(attempts, last_error)) from last_error

    @abc.abstractmethod
    async def _rebalance_once(self) -> bool:
        """One rebalance attempt (through ZooKeeper or the group
        coordinator: each core's own); False to try again."""

    @abc.abstractmethod
    def _rebalance_failure(self, attempts: int, last_error: BaseException | None) -> str:
        """The message of the `ConsumerRebalanceFailedError` after
        ``attempts`` failed attempts."""

    async def _stop_and_commit(self) -> None:
        """The first steps of a rebalance (lock held): stop the fetchers,
        start a new generation, drop what the streams have not handed out,
        and commit what they did (``auto.commit.enable``; `_commit_before_rebalance`)."""
        await self._stop_fetchers()
        self.generation += 1
        self._collect_consumed()
        self.queues.clear()
        if self.config.auto_commit_enable and self.owned and self._may_commit():
            await self._commit_before_rebalance()

    async def _commit_before_rebalance(self) -> None:
        """Commit the consumed offsets before giving the partitions up."""
        await self._commit_locked()

    def _forget_owned(self) -> dict[TopicPartition, int]:
        """Give up the owned partitions (this consumer's side).

        Returns:
            Their consumed offsets (`ConsumedOffsets.snapshot`), for
            `_take_partitions`.
        """
        previous = self.offsets.snapshot(self.owned)
        self.owned = {}
        for stream in self.streams:
            stream.forget_last()
        return previous

    async def _take_partitions(
        self,
        streams: Mapping[TopicPartition, int],
        committed: Mapping[TopicPartition, int],
        leaders: Mapping[TopicPartition, Leader],
        previous: Mapping[TopicPartition, int],
    ) -> None:
        """Own the new assignment and fetch it: each partition starts at its
        committed offset (`ConsumedOffsets.reassign`).

        Args:
            streams: ``{(topic, partition): stream index}`` assigned.
            committed: Their committed offsets.
            leaders: Their known leaders.
            previous: What `_forget_owned` returned.
        """
        keys = sorted(streams)
        starts = self.offsets.reassign(keys, committed, previous)
        self.owned = {key: PartitionTopicInfo(key[0], key[1], streams[key], starts[key], leaders.get(key)) for key in keys}
        await self._start_fetchers(list(self.owned.values()))

    async def _rebalance_loop(self) -> None:
        assert self._lock is not None
        while True:
            assert self._wakeup is not None
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            async with self._lock:
                if not self._rebalance_pending:
                    continue  # already handled by a rebalance that ran meanwhile
                try:
                    await self._rebalance()
                except Exception as exc:  # ConsumerRebalanceFailedError, or a bug: tell the streams
                    if isinstance(exc, (ConsumerRebalanceFailedError, KafkaError)):
                        log.error("%s", exc)
                    else:
                        log.exception("rebalance of consumer %s failed", self.consumer_id)
                    self.queues.clear()
                    self.queues.tell_all(exc)

    @abc.abstractmethod
    async def find_leaders(self, keys: list[TopicPartition]) -> dict[TopicPartition, Leader]:
        """Partition leaders, ``{key: (broker id, host, port)}`` for the
        partitions with a live one (implemented by each core; see
        `kclient.client.consumer.fetcher.FetcherOwner.find_leaders`)."""

    # ------------------------------------------------------------ fetchers

    async def _start_fetchers(self, infos: list[PartitionTopicInfo]) -> None:
        if not infos:
            return
        group = FetcherGroup(self, infos, self.generation)
        nursery = self._nursery
        assert nursery is not None

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with trio.CancelScope() as scope:
                self._fetch_scope = scope
                self._fetch_done = trio.Event()
                try:
                    await group.run(task_status=task_status)
                finally:
                    self._fetch_done.set()

        await nursery.start(run)

    async def _stop_fetchers(self) -> None:
        if self._fetch_scope is not None:
            self._fetch_scope.cancel()
            assert self._fetch_done is not None
            await self._fetch_done.wait()
            self._fetch_scope = None


__all__ = ["GroupCoreBase"]
