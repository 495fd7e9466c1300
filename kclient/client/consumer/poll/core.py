"""`TrioConsumer`: the poll consumer for trio code (Kafka's
``KafkaConsumer``, https://kafka.apache.org/documentation/#consumerapi and
its javadoc), over kclient's building blocks: the metadata client
(`kclient.client.cluster`), the group coordinator client and the classic
group membership (`kclient.client.consumer.group.coordinator`,
`kclient.client.consumer.group.membership`) driven by
`kclient.client.consumer.poll.group`, and the SimpleConsumer's fetch path
(`kclient.client.consumer.poll.fetcher`).

```python
async with TrioConsumer({"bootstrap.servers": "localhost:9092", "group.id": "g",
                         "auto.offset.reset": "earliest"}) as consumer:
    consumer.subscribe(["events"])
    while True:
        for record in await consumer.poll(timeout_ms=1000):
            print(record.topic, record.partition, record.offset, record.value)
```

Everything happens on the caller's trio loop: fetches, heartbeats and the
joins of a rebalance run as background tasks of the consumer's nursery;
``poll`` hands out what arrived, runs the rebalance steps and the
listener, and commits every ``auto.commit.interval.ms`` (asynchronously,
the positions of the records handed out by earlier polls: at-least-once,
as in Kafka).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from kclient.client.cluster import Cluster, PartitionInfo, request_metadata
from kclient.client.consumer.group.assignors import offered_assignors
from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.client.consumer.group.membership import GroupMember
from kclient.client.consumer.poll.arguments import Offsets, Topics, offsets_of, partitions_of, timeout_seconds, topics_or_pattern
from kclient.client.consumer.poll.auto_commit import AutoCommitter, PendingCommits
from kclient.client.consumer.poll.config import PollSettings, poll_settings
from kclient.client.consumer.poll.consumer_protocol_driver import ConsumerProtocolDriver
from kclient.client.consumer.poll.errors import WakeupError
from kclient.client.consumer.poll.fetcher import Fetcher
from kclient.client.consumer.poll.group import GroupDriver, ListenerCall, Phase
from kclient.client.consumer.poll.list_offsets import OffsetLookup
from kclient.client.consumer.poll.membership_driver import MembershipDriver
from kclient.client.consumer.poll.positions import PositionUpdater
from kclient.client.consumer.poll.record_poll import RecordPoller, Wakeup
from kclient.client.consumer.poll.subscription import EARLIEST, LATEST, SubscriptionState, SubscriptionType
from kclient.client.consumer.poll.types import ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from kclient.client.consumer.statistics import ConsumerStatistics, FetchStatistics
from kclient.config import ConsumerConfig
from kclient.errors import IllegalStateError, InvalidGroupIdError, KafkaError, KafkaTimeoutError, UnstableOffsetCommitError
from kclient.net.settings import ConnectionSettings
from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kclient.protocol.records.read_committed import isolation_level_code

log = logging.getLogger("kclient.consumer")

#: What `TrioConsumer.poll_once` returns: a listener call due, or records.
PollStep = ListenerCall | list[ConsumerRecord]


@contextlib.contextmanager
def within(seconds: float, what: str) -> Iterator[None]:
    """Fail the block after ``seconds`` with `KafkaTimeoutError` (Kafka's
    ``TimeoutException`` for ``default.api.timeout.ms``).

    Args:
        seconds: The time allowed.
        what: Named in the error.

    Yields:
        Nothing.

    Raises:
        KafkaTimeoutError: the time ran out (also while a transaction kept
            the committed offsets unstable, KIP-447: the
            `UnstableOffsetCommitError` is its ``__cause__``, as Kafka's
            ``committed`` and ``position`` time out).
    """
    try:
        with trio.fail_after(seconds):
            yield
    except trio.TooSlowError:
        raise KafkaTimeoutError(f"{what} did not complete within {seconds * 1000:.0f} ms") from None
    except UnstableOffsetCommitError as exc:
        raise KafkaTimeoutError(f"{what} did not complete within {seconds * 1000:.0f} ms: a transaction still holds the committed offsets") from exc


async def run_listener_call(call: ListenerCall, listener: Any) -> None:
    """Run a rebalance listener call on the trio loop (awaiting an async
    listener's result).

    Args:
        call: The call due.
        listener: The listener, or None.
    """
    result = call.invoke(listener)
    if inspect.isawaitable(result):
        await result


class TrioConsumer:
    """The poll consumer for trio code: ``async with TrioConsumer(config)
    as consumer`` (or ``await consumer.open(nursery)`` and later
    ``await consumer.aclose()``).

    Args:
        config: Kafka consumer properties (``bootstrap.servers``;
            ``group.id`` to subscribe or commit; see
            `kclient.client.consumer.poll.config` for the defaults that
            differ from the 0.8 connector's) or a `ConsumerConfig`.

    Raises:
        ConfigError: a missing or bad property.
    """

    def __init__(self, config: ConsumerConfig | Mapping[str, Any]) -> None:
        self.settings: PollSettings = poll_settings(config)
        self.config = self.settings.config
        self.group_id = self.settings.group_id
        self.subscriptions = SubscriptionState()
        self.listener: Any = None
        self.closed = False
        self._opened = False
        self._close_prepared = False
        self._wakeup_requested = False
        self._tasks: trio.Nursery | None = None
        self._scope: trio.CancelScope | None = None
        self._wakeup = Wakeup()
        self._nursery_cm: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._cluster: Cluster | None = None
        self._fetcher: Fetcher | None = None
        self._lookup: OffsetLookup | None = None
        self._positions: PositionUpdater | None = None
        self._driver: MembershipDriver | None = None
        self._poller: RecordPoller | None = None
        self._auto_commit: AutoCommitter | None = None
        self._pending_commits = PendingCommits()

    # ------------------------------------------------------------ lifetime

    async def __aenter__(self) -> TrioConsumer:
        self._nursery_cm = trio.open_nursery()
        nursery = await self._nursery_cm.__aenter__()
        try:
            await self.open(nursery)
        except BaseException as exc:
            await self._nursery_cm.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._nursery_cm is not None
        try:
            await self.aclose()
        finally:
            result = await self._nursery_cm.__aexit__(*exc)
        return result

    async def open(self, nursery: trio.Nursery) -> None:
        """Start the background tasks in ``nursery`` (connections open on
        first use).

        Args:
            nursery: A nursery that outlives the consumer.
        """
        config = self.config
        self._tasks = await nursery.start(self._task_host)
        settings = ConnectionSettings(config.client_id, min(10000, config.socket_timeout_ms), config.socket_timeout_ms, config.security)
        assert config.bootstrap_servers
        cluster = Cluster.open(self._tasks, list(config.bootstrap_servers), settings, retry_backoff_ms=config.retry_backoff_ms, metadata_max_age_ms=config.metadata_max_age_ms)
        self._cluster = cluster
        decoders = (self.settings.key_decoder, self.settings.value_decoder)
        self._fetcher = Fetcher(cluster, config, self.subscriptions, self.settings.offset_reset, decoders, self._wake)
        self._lookup = OffsetLookup(cluster, config.retry_backoff_ms, isolation_level_code(config.isolation_level))
        if self.group_id is not None:
            coordinator = GroupCoordinator(
                cluster,
                self.group_id,
                retry_backoff_ms=config.retry_backoff_ms,
                timeout_ms=config.default_api_timeout_ms,
                commit_retries=config.offsets_commit_max_retries,
                group_instance_id=config.group_instance_id,
            )
            member = GroupMember(
                coordinator,
                session_timeout_ms=config.session_timeout_ms,
                rebalance_timeout_ms=config.max_poll_interval_ms,
                assignors=offered_assignors(config.partition_assignment_strategy),
                group_instance_id=config.group_instance_id,
            )
            if config.group_protocol == "consumer":  # Kafka 4.0's consumer group protocol (KIP-848)
                self._driver = ConsumerProtocolDriver(coordinator, cluster, config, self.subscriptions, self._commit_positions, self._assignment_changed, self._wake)
            else:
                self._driver = GroupDriver(coordinator, member, cluster, config, self.subscriptions, self._commit_positions, self._assignment_changed, self._wake)
            self._tasks.start_soon(self._driver.run)
        committed = self._committed_for_positions if self.group_id is not None else None
        self._positions = PositionUpdater(self.subscriptions, self._lookup, committed, self.settings.offset_reset)
        self._poller = RecordPoller(cluster, self._fetcher, self._positions, self.subscriptions, config, self._wakeup, self._needs_group_step)
        if config.auto_commit_enable and self._driver is not None:
            self._auto_commit = AutoCommitter(config.auto_commit_interval_ms, self.subscriptions.all_consumed, self._driver.commit, self._pending_commits)
        self._opened = True

    async def _task_host(self, task_status: trio.TaskStatus[trio.Nursery] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            async with trio.open_nursery() as tasks:
                task_status.started(tasks)
                await trio.sleep_forever()

    def _check_open(self) -> None:
        if self.closed:
            raise IllegalStateError("This consumer has already been closed.")
        if not self._opened:
            raise IllegalStateError("use 'async with TrioConsumer(...)' or open() it first")

    def _wake(self) -> None:
        self._wakeup.set()

    def _assignment_changed(self) -> None:
        assert self._fetcher is not None
        self._fetcher.clear()

    def _group(self) -> MembershipDriver:
        if self._driver is None:
            raise InvalidGroupIdError("To use the group management or offset commit APIs, you must provide a valid group.id in the consumer configuration.")
        return self._driver

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: Topics, listener: Any = None) -> None:
        """Subscribe to topics, or to every topic a pattern matches, with
        partitions assigned by the group (Kafka's ``subscribe``). The group
        is joined, or rejoined, on the next `poll`.

        Args:
            topics: Topic names, one name, or a pattern (a compiled
                ``re.Pattern``, or a string starting with ``^``), matched
                against the whole topic name.
            listener: A `ConsumerRebalanceListener` (its methods may be
                ``async`` here), or None.

        Raises:
            InvalidGroupIdError: no ``group.id``.
            IllegalStateError: partitions were assigned with `assign`, or
                the consumer is closed.
        """
        self._check_open()
        driver = self._group()
        wanted = topics_or_pattern(topics)
        if isinstance(wanted, list):
            changed = self.subscriptions.subscribe(wanted)
        else:
            self.subscriptions.subscribe_pattern(wanted)
            changed = True
        self.listener = listener
        if changed and driver.joined:
            driver.request_rejoin("the subscription changed")
        self._wake()

    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern: those it matched when the
        group was last joined).

        Returns:
            Topic names.
        """
        return set(self.subscriptions.topics) if self.subscriptions.auto_assigned else set()

    def assign(self, partitions: Iterable[Any]) -> None:
        """Read exactly these partitions, without group management (Kafka's
        ``assign``); an empty list is `unsubscribe`. Partitions with an
        offset (``TopicPartition(t, p, offset)``) start there.

        Args:
            partitions: `TopicPartition` objects or ``(topic, partition)`` pairs.

        Raises:
            IllegalStateError: the consumer is subscribed, or closed.
        """
        self._check_open()
        tps = partitions_of(partitions)
        self.subscriptions.assign_from_user(tps)
        for tp in tps:
            if tp.offset >= 0:
                self.subscriptions.seek(tp, tp.offset)
        self._assignment_changed()
        self._wake()

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now.

        Returns:
            The set (empty during a rebalance).
        """
        return set(self.subscriptions.assigned())

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Where this consumer stands in its group (Kafka's
        ``groupMetadata()``): what a transactional producer sends with the
        offsets it commits (KIP-447).

        Returns:
            The group id, generation (classic) or member epoch (KIP-848;
            -1 when not in the group), member id and
            ``group.instance.id``.

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        self._check_open()
        member = self._group().member
        generation, member_id = member.current()
        return ConsumerGroupMetadata(member.group_id, generation if generation > 0 else -1, member_id, member.group_instance_id)

    def prepare_unsubscribe(self) -> ListenerCall | None:
        """The first half of `unsubscribe`: the listener call due before
        leaving (for the blocking facade, which runs it on its caller's
        thread).

        Returns:
            The call, or None.
        """
        self._check_open()
        return self._driver.revoke_for_leave() if self._driver is not None else None

    async def finish_unsubscribe(self) -> None:
        """The second half of `unsubscribe`: leave the group and forget the
        subscription and assignment."""
        if self._driver is not None:
            await self._driver.leave()
        self.subscriptions.unsubscribe()
        self._assignment_changed()

    async def unsubscribe(self) -> None:
        """Stop reading: the revoke listener (or lost), LeaveGroup, and no
        subscription or assignment any more (Kafka's ``unsubscribe``)."""
        call = self.prepare_unsubscribe()
        if call is not None:
            await run_listener_call(call, self.listener)
        await self.finish_unsubscribe()

    # ------------------------------------------------------------ poll

    async def poll(self, timeout_ms: float | None = None, *, timeout: float | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions (Kafka's ``poll``): what
        was fetched, else wait for a fetch until the timeout. Rebalances,
        the listener and the auto-commit happen here.

        Args:
            timeout_ms: Longest wait for records (ms; default 0: only what
                is buffered or arrives at once).
            timeout: The same in seconds (confluent-kafka's unit), instead
                of ``timeout_ms``.

        Returns:
            At most ``max.poll.records`` records, partition by partition in
            offset order; empty when none came in time.

        Raises:
            IllegalStateError: neither subscribed nor assigned, or closed.
            NoOffsetForPartitionError: a partition without a committed
                offset and ``auto.offset.reset=none``.
            OffsetOutOfRangeError: a position out of range and
                ``auto.offset.reset=none``.
            KafkaError: a partition's or the group's error; what a
                listener raised.
        """
        deadline = trio.current_time() + timeout_seconds(timeout_ms, timeout, 0)
        while True:
            step = await self.poll_once(max(0.0, deadline - trio.current_time()))
            if isinstance(step, ListenerCall):
                await run_listener_call(step, self.listener)
                continue
            if step or trio.current_time() >= deadline:
                return step

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        """``async for record in consumer``: every record `poll` hands out,
        until the consumer is closed or, when ``consumer.timeout.ms`` is
        not -1, no record came for that long (kafka-python's
        ``consumer_timeout_ms``)."""
        return self._records()

    async def _records(self) -> AsyncIterator[ConsumerRecord]:
        limit = self.config.consumer_timeout_ms
        step_ms = 1000 if limit < 0 else min(1000, limit)
        quiet_since = trio.current_time()
        while not self.closed:
            records = await self.poll(timeout_ms=step_ms)
            for record in records:
                yield record
            if records:
                quiet_since = trio.current_time()
            elif limit >= 0 and (trio.current_time() - quiet_since) * 1000 >= limit:
                return

    async def poll_once(self, timeout: float) -> PollStep:
        """One step of `poll`: a rebalance listener call due (run it, then
        call again), else the records that arrive within ``timeout``
        (seconds; maybe none: call again while time is left).

        Args:
            timeout: Longest wait for records (seconds).

        Returns:
            A `ListenerCall`, or records.
        """
        self._check_open()
        self._raise_if_woken()
        if self.subscriptions.type is SubscriptionType.NONE:
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        driver = self._driver
        if driver is not None:
            driver.poll_started()
        try:
            if driver is not None:
                assert self._tasks is not None
                call = await driver.step(self._tasks)
                if call is not None:
                    return call
                if self._auto_commit is not None:
                    self._auto_commit.maybe_commit(self._tasks)
            assert self._poller is not None and self._tasks is not None
            records = await self._poller.poll(self._tasks, timeout)
            if not records:
                self._raise_if_woken()
            return records
        finally:
            if driver is not None:
                driver.poll_ended()

    def wakeup(self) -> None:
        """Make the poll under way, or the next one, raise `WakeupError`
        (Kafka's ``wakeup``: the way to stop a poll loop from another
        thread or task; records already buffered are not lost)."""
        self._wakeup_requested = True
        self._wake()

    def _raise_if_woken(self) -> None:
        if self._wakeup_requested:
            self._wakeup_requested = False
            raise WakeupError("the consumer was woken up (wakeup())")

    def _needs_group_step(self) -> bool:
        driver = self._driver
        if driver is None or not self.subscriptions.auto_assigned:
            return False
        if driver.phase in (Phase.JOINED, Phase.FAILED):
            return True
        return driver.phase is Phase.STABLE and (driver.rejoin_needed or not driver.joined)

    # ------------------------------------------------------------ commits

    async def _commit_positions(self) -> None:
        with within(self.config.default_api_timeout_ms / 1000, "commit"):
            await self._group().commit(self.subscriptions.all_consumed())

    async def commit(self, offsets: Offsets | None = None, asynchronous: bool = False, *, callback: Any = None) -> None:
        """Commit offsets to the group (Kafka's ``commitSync`` /
        ``commitAsync``; OffsetCommit with the member's generation).

        Args:
            offsets: None for the current positions (the offset after the
                last record `poll` handed out, every assigned partition);
                or ``{partition: OffsetAndMetadata or offset}``; or
                `TopicPartition` objects carrying the offset (the next offset
                to read, as Kafka commits).
            asynchronous: Return at once; the commit runs in the
                background and a failure is logged (and passed to
                ``callback``).
            callback: With ``asynchronous``: called on the consumer's loop
                with ``(offsets, error or None)`` when the commit is done.
                A synchronous commit, and `aclose`, first wait for the
                asynchronous commits under way (as Kafka's consumer: an
                older commit never overwrites a newer one, and none is
                dropped at close).

        Raises:
            InvalidGroupIdError: no ``group.id``.
            CommitFailedError: the member is no longer in the group (it
                stopped polling longer than ``max.poll.interval.ms``, or
                its session expired); it rejoins on the next `poll`.
            RebalanceInProgressError: the group is rebalancing.
            KafkaTimeoutError: not done within ``default.api.timeout.ms``.
            KafkaError: the coordinator's errors, after retries.
        """
        self._check_open()
        driver = self._group()
        chosen = self.subscriptions.all_consumed() if offsets is None else offsets_of(offsets)
        if asynchronous:
            assert self._tasks is not None
            self._pending_commits.start(self._tasks, driver.commit, chosen, callback)
            return
        with within(self.config.default_api_timeout_ms / 1000, "commit"):
            await self._pending_commits.wait(math.inf)  # an older commitAsync lands first
            await driver.commit(chosen)

    async def _committed_for_positions(self, partitions: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        # require_stable (KIP-447), as Kafka's consumer: never start from an offset an open transaction may still change
        fetched = await self._group().coordinator.fetch_committed((tp.key for tp in partitions), require_stable=True)
        return {TopicPartition(t, p): OffsetAndMetadata(o, md, epoch if epoch >= 0 else None) for (t, p), (o, md, epoch) in fetched.items()}

    async def committed(self, partitions: Iterable[Any] | TopicPartition, timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (Kafka's ``committed``;
        OffsetFetch), for any partitions, assigned or not. Stable ones
        only (``require_stable``, KIP-447): while a transaction holds an
        offset of a partition, it waits for the transaction to end.

        Args:
            partitions: `TopicPartition` objects (or pairs), or one.
            timeout_ms: Longest wait (ms; default ``default.api.timeout.ms``).

        Returns:
            ``{partition: OffsetAndMetadata}``, None for a partition
            without a committed offset.

        Raises:
            InvalidGroupIdError: no ``group.id``.
            KafkaTimeoutError: no answer in time, or the transaction was
                still open.
        """
        self._check_open()
        self._group()
        tps = [TopicPartition(tp.topic, tp.partition) for tp in partitions_of(partitions)]
        with within(timeout_seconds(timeout_ms, None, self.config.default_api_timeout_ms), "committed"):
            found = await self._committed_for_positions(tps)
        return {tp: found.get(tp) for tp in tps}

    # ------------------------------------------------------------ positions

    async def position(self, partition: TopicPartition | tuple[str, int], timeout_ms: float | None = None) -> int:
        """The offset of the next record `poll` hands out for an assigned
        partition (looked up, committed offset or reset, if not known yet).

        Args:
            partition: The partition.
            timeout_ms: Longest wait (ms; default ``default.api.timeout.ms``).

        Returns:
            The offset.

        Raises:
            IllegalStateError: the partition is not assigned.
            NoOffsetForPartitionError: no committed offset and
                ``auto.offset.reset=none``.
        """
        self._check_open()
        tp = partitions_of([partition])[0]
        state = self.subscriptions.state(tp)
        if not state.has_valid_position:
            assert self._positions is not None
            seconds = timeout_seconds(timeout_ms, None, self.config.default_api_timeout_ms)
            with within(seconds, f"position of {tp}"):
                await self._positions.update(seconds, [tp])
        assert state.position is not None
        return state.position

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int | None = None) -> None:
        """Read an assigned partition from ``offset`` on the next `poll`.

        Args:
            partition: The partition (with the offset in it, when
                ``offset`` is None).
            offset: The offset.

        Raises:
            IllegalStateError: the partition is not assigned.
            ValueError: no offset, or a negative one.
        """
        self._check_open()
        tp = partitions_of([partition])[0]
        where = tp.offset if offset is None else offset
        if where < 0:
            raise ValueError(f"seek offset must not be negative (got {where}); see seek_to_beginning / seek_to_end")
        self.subscriptions.seek(tp, where)
        self._wake()

    def _reset(self, partitions: Iterable[Any] | None, where: str) -> None:
        self._check_open()
        tps = self.subscriptions.assigned() if partitions is None else partitions_of(partitions)
        if not tps and partitions is not None:
            tps = self.subscriptions.assigned()
        for tp in tps:
            self.subscriptions.request_reset(tp, where)
        self._wake()

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        """Read from each partition's log start: see
        `kclient.Consumer.seek_to_beginning` (the same Args and Raises)."""
        self._reset(partitions, EARLIEST)

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        """Read from each partition's log end: see
        `kclient.Consumer.seek_to_end` (the same Args and Raises)."""
        self._reset(partitions, LATEST)

    async def offsets_for_times(self, timestamps: Mapping[Any, int], timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose record timestamp
        is at least the one given (Kafka's ``offsetsForTimes``; ListOffsets
        v1+, KIP-79).

        Args:
            timestamps: ``{partition: ms since the epoch}``.
            timeout_ms: Longest wait (ms; default ``default.api.timeout.ms``).

        Returns:
            ``{partition: OffsetAndTimestamp}``, None where no record is
            that recent.

        Raises:
            ValueError: a negative timestamp.
            KafkaTimeoutError: no answer in time.
        """
        self._check_open()
        times = {partitions_of([k])[0]: int(v) for k, v in timestamps.items()}
        for tp, ts in times.items():
            if ts < 0:
                raise ValueError(f"{tp}: the timestamp must not be negative (got {ts})")
        assert self._lookup is not None
        return await self._lookup.offsets(times, timeout_seconds(timeout_ms, None, self.config.default_api_timeout_ms))

    async def _log_ends(self, partitions: Iterable[Any], which: int, timeout_ms: float | None) -> dict[TopicPartition, int]:
        self._check_open()
        assert self._lookup is not None
        tps = [TopicPartition(tp.topic, tp.partition) for tp in partitions_of(partitions)]
        found = await self._lookup.offsets(dict.fromkeys(tps, which), timeout_seconds(timeout_ms, None, self.config.default_api_timeout_ms))
        return {tp: answer.offset for tp, answer in found.items() if answer is not None}

    async def beginning_offsets(self, partitions: Iterable[Any], timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """Each partition's log start offset (Kafka's ``beginningOffsets``).

        Args:
            partitions: The partitions.
            timeout_ms: Longest wait (ms; default ``default.api.timeout.ms``).

        Returns:
            ``{partition: offset}``.
        """
        return await self._log_ends(partitions, EARLIEST_TIMESTAMP, timeout_ms)

    async def end_offsets(self, partitions: Iterable[Any], timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """Each partition's log end offset, the offset the next record will
        get (Kafka's ``endOffsets``).

        Args:
            partitions: The partitions.
            timeout_ms: Longest wait (ms; default ``default.api.timeout.ms``).

        Returns:
            ``{partition: offset}``.
        """
        return await self._log_ends(partitions, LATEST_TIMESTAMP, timeout_ms)

    async def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        """A topic's partitions (Kafka's ``partitionsFor``).

        Args:
            topic: The topic.

        Returns:
            Its partitions, sorted by id.
        """
        self._check_open()
        assert self._cluster is not None
        return await self._cluster.partitions_for(topic)

    async def list_topics(self, timeout_ms: float | None = None) -> dict[str, tuple[PartitionInfo, ...]]:
        """Every topic the cluster has, with its partitions (Kafka's
        ``listTopics``; internal topics included).

        Args:
            timeout_ms: Longest wait (ms; default ``default.api.timeout.ms``).

        Returns:
            ``{topic: partitions sorted by id}``.
        """
        self._check_open()
        assert self._cluster is not None
        with within(timeout_seconds(timeout_ms, None, self.config.default_api_timeout_ms), "list_topics"):
            metadata = await request_metadata(await self._cluster.any_connection())
        return {t: metadata.partitions_for(t) for t, code in sorted(metadata.topic_errors.items()) if code == 0}

    def statistics(self) -> ConsumerStatistics:
        """What this consumer fetched so far, and each assigned partition's
        lag (counted from the fetched batch headers, as the SimpleConsumer's
        `kclient.ConsumerStatistics`: the position there is the next offset
        to fetch, which runs ahead of `position` by what is buffered).

        Returns:
            A `kclient.ConsumerStatistics` (empty before `open`).
        """
        if self._fetcher is None:
            return FetchStatistics().snapshot()
        return self._fetcher.statistics.snapshot()

    # ------------------------------------------------------------ flow control

    def pause(self, partitions: Iterable[Any]) -> None:
        """Stop fetching these partitions until `resume`: see
        `kclient.Consumer.pause` (the same Args and Raises)."""
        self._check_open()
        for tp in partitions_of(partitions):
            self.subscriptions.set_paused(tp, True)

    def resume(self, partitions: Iterable[Any]) -> None:
        """Fetch paused partitions again: see `kclient.Consumer.resume`."""
        self._check_open()
        for tp in partitions_of(partitions):
            self.subscriptions.set_paused(tp, False)
        self._wake()

    def paused(self) -> set[TopicPartition]:
        """The paused partitions.

        Returns:
            The set.
        """
        return set(self.subscriptions.paused())

    # ------------------------------------------------------------ close

    async def prepare_close(self) -> ListenerCall | None:
        """The first half of `aclose`: commit the positions (with
        ``enable.auto.commit``) and say which listener call is due before
        leaving (for the blocking facade, which runs it on its caller's
        thread). Failures are logged.

        Returns:
            The call, or None.
        """
        if self.closed or self._close_prepared or not self._opened:
            return None
        self._close_prepared = True
        driver = self._driver
        if driver is None:
            return None
        if not await self._pending_commits.wait(self.config.default_api_timeout_ms / 1000):
            log.warning("group %s: %d asynchronous commits still unanswered at close after default.api.timeout.ms", self.group_id, self._pending_commits.in_flight)
        if self.config.auto_commit_enable and not (self.subscriptions.auto_assigned and driver.member.generation < 0):
            try:
                await self._commit_positions()
            except KafkaError as exc:
                log.warning("group %s: commit at close failed: %s", self.group_id, exc)
        return driver.revoke_for_leave()

    async def aclose(self) -> None:
        """Close (Kafka's ``close``): commit the positions with
        ``enable.auto.commit``, the revoke listener, LeaveGroup (the others
        rebalance at once), then close every connection. Idempotent;
        failures are logged, not raised."""
        if self.closed:
            return
        call = await self.prepare_close()
        if call is not None:
            try:
                await run_listener_call(call, self.listener)
            except Exception:
                log.exception("the rebalance listener failed at close")
        self.closed = True
        self._wake()  # a poll waiting for records returns now
        if not self._opened:
            return
        try:
            if self._driver is not None:
                await self._driver.leave()
        finally:
            # The background tasks first (fetches in flight, heartbeats, a
            # join), then the connections.
            if self._scope is not None:
                self._scope.cancel()
            assert self._fetcher is not None and self._cluster is not None
            await self._fetcher.aclose()
            await self._cluster.aclose()


__all__ = ["PollStep", "TrioConsumer", "run_listener_call"]
