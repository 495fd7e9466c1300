"""ConsumerConnector: the high-level, ZooKeeper-coordinated consumer of
Kafka 0.8 (seed 000 "Consumer APIs", seed 003 "Consumers and Consumer
Groups", "Consumer registration algorithm", "Consumer rebalancing
algorithm").

::

    with ConsumerConnector({"group.id": "g", "zookeeper.connect": zk,
                            "auto.offset.reset": "smallest"}) as connector:
        streams = connector.create_message_streams({"events": 2})
        for m in streams["events"][0]:
            print(m.topic, m.partition, m.offset, m.key, m.message)

What happens, in seed 003's terms:

1. Registration: the consumer writes the ephemeral
   ``/consumers/<group>/ids/<consumer_id>`` with
   ``{"version":1,"subscription":{topic: streams},"pattern":"static",
   "timestamp":"<ms>"}`` (``white_list`` / ``black_list`` and
   ``{regex: streams}`` for a topic filter), then watches the group's ids,
   ``/brokers/ids`` and ``/brokers/topics`` (a new topic matters only if it
   is subscribed or matches the filter); every change triggers a rebalance.
2. Rebalance: for each subscribed topic, the sorted partitions of
   ``/brokers/topics/<topic>`` are split over the group's sorted consumer
   threads ``<consumer_id>-<n>`` by range, the first
   ``partitions % threads`` threads taking one extra partition
   (`kclient.zk.paths.range_assignment`). If the result is what this
   consumer already owns, nothing changes. Otherwise the fetchers stop, the
   streams' queues are cleared, offsets are committed (with
   ``auto.commit.enable``), this consumer's owner nodes are deleted, and the
   new partitions are claimed with ephemeral
   ``/consumers/<group>/owners/<topic>/<p>`` nodes holding the thread id.
   A claim that meets another consumer's node fails the attempt: the
   claims are undone and the whole rebalance is retried after
   ``rebalance.backoff.ms``, at most ``rebalance.max.retries`` times, then
   `ConsumerRebalanceFailedError` is raised (from
   ``create_message_streams``, or on the streams for a background
   rebalance).
3. Fetching starts at the offsets in ``/consumers/<group>/offsets/<topic>/<p>``
   (the next offset to consume); a partition without one starts per
   ``auto.offset.reset`` (`kclient.client.consumer.fetcher`).
4. Offsets: the offset after the last message each stream handed to the
   application is committed to ZooKeeper by `ConsumerConnector.commit_offsets`,
   every ``auto.commit.interval.ms`` and at shutdown (both with
   ``auto.commit.enable``). Delivery is at least once: after a rebalance
   or a crash, messages after the last commit are delivered again.

The connector runs one trio loop in a background thread
(`kclient.sync.LoopThread`): the rebalance task, the fetchers and
the auto-commit task live there; ZooKeeper calls run in worker threads and
kazoo's watch callbacks are handed to the loop with
``TrioToken.run_sync_soon`` (`kclient.zk.client.TrioZk`).

``offsets.storage=kafka`` (offsets in ``__consumer_offsets`` through a
group coordinator) is not supported: the constructor raises
`NotSupportedError`.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import uuid
from typing import Any, Callable, Mapping

import trio
from kazoo.client import KazooState

from kclient.client.consumer.fetcher import FetcherGroup, PartitionTopicInfo
from kclient.client.consumer.group.streams import END, TIMEOUT, Blacklist, KafkaStream, MessageAndMetadata, TopicFilter, Whitelist, topic_filter_for
from kclient.config import ConsumerConfig
from kclient.errors import ConfigError, ConsumerRebalanceFailedError, KafkaError, NotSupportedError, ZooKeeperError
from kclient.sync import LoopThread
from kclient.zk.client import TrioZk, ZkClient
from kclient.zk.paths import (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    STATIC_PATTERN,
    BrokerRegistration,
    ConsumerRegistration,
    PartitionState,
    TopicAssignment,
    broker_path,
    consumer_id_path,
    consumer_ids_path,
    consumer_thread_id,
    decode_offset,
    encode_offset,
    offset_path,
    owner_path,
    partition_state_path,
    range_assignment,
    topic_path,
)

log = logging.getLogger("kclient.consumer")

Decoder = Any


def _decoder_function(decoder: Decoder, what: str) -> Callable[[Any], Any] | None:
    """``None`` (bytes as they are), an object with ``from_bytes`` (Kafka's
    Decoder, `kclient.client.serde.Decoder`) or a plain callable."""
    if decoder is None:
        return None
    if isinstance(decoder, type):
        decoder = decoder()
    from_bytes = getattr(decoder, "from_bytes", None)
    if from_bytes is not None:
        from kclient.client.serde import DefaultDecoder

        return None if type(decoder) is DefaultDecoder else from_bytes
    if callable(decoder):
        return decoder
    raise TypeError(f"{what} must be a Decoder (with from_bytes), a callable or None, not {decoder!r}")


def default_consumer_id(group_id: str) -> str:
    """``<group>_<host>-<ms>-<8 hex>``, Kafka 0.8's consumer id shape with
    a random suffix."""
    return f"{group_id}_{socket.gethostname()}-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"


class _ConnectorCore:
    """The connector's state on its trio loop (everything but the blocking
    facade). Not public."""

    def __init__(self, config: ConsumerConfig, consumer_id: str) -> None:
        self.config = config
        self.consumer_id = consumer_id
        self.group = config.group_id
        self.closed = False
        #: Bumped by each rebalance that moves partitions; chunks fetched
        #: under an older one are dropped by the streams.
        self.generation = 0
        self.key_decoder: Callable[[Any], Any] | None = None
        self.value_decoder: Callable[[Any], Any] | None = None
        self.streams: list[KafkaStream] = []
        self._senders: list[trio.MemorySendChannel] = []
        self._receivers: list[trio.MemoryReceiveChannel] = []
        #: static: {topic: n}; wildcard: {regex: n} with ``topic_filter``.
        self.subscription: dict[str, int] = {}
        self.topic_filter: TopicFilter | None = None
        self._zk_client = ZkClient(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        )
        self._zk: TrioZk | None = None
        self._lock: trio.Lock | None = None
        self._wakeup: trio.Event | None = None
        self._rebalance_pending = False
        self._scope: trio.CancelScope | None = None
        self._fetch_scope: trio.CancelScope | None = None
        #: Partitions owned now: {(topic, p): PartitionTopicInfo}.
        self.owned: dict[tuple[str, int], PartitionTopicInfo] = {}
        self._owned_threads: dict[tuple[str, int], str] = {}
        #: Offset after the last message handed to the application, per
        #: owned partition (written by stream threads and the loop).
        self.consumed: dict[tuple[str, int], int] = {}
        self._committed: dict[tuple[str, int], int] = {}
        self._relevant_topics: frozenset[str] | None = None
        self._session_lost = False
        self._stopping = False
        self.rebalance_count = 0

    # ------------------------------------------------------------ start / stop

    async def start(self, nursery: trio.Nursery) -> None:
        self._zk = TrioZk(self._zk_client)
        self._lock = trio.Lock()
        self._wakeup = trio.Event()
        await trio.to_thread.run_sync(self._zk_client.start)
        self._zk_client.add_state_listener(self._on_zk_state)
        nursery.start_soon(self._background, nursery)

    async def _background(self, nursery: trio.Nursery) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            if self._stopping:
                return
            async with trio.open_nursery() as inner:
                if self.config.auto_commit_enable and self.config.auto_commit_interval_ms > 0:
                    inner.start_soon(self._auto_commit_loop)
                inner.start_soon(self._rebalance_loop)

    def _on_zk_state(self, state: KazooState) -> None:
        # kazoo's connection thread: never block.
        if self.closed:
            return
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("consumer %s lost its ZooKeeper session; re-registering when reconnected", self.consumer_id)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            assert self._zk is not None
            self._zk.deliver(self.request_rebalance)

    async def shutdown(self) -> None:
        """Stop everything; commit (with auto.commit.enable); end the streams;
        release ownership and end the ZooKeeper session."""
        if self.closed:
            return
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()
        assert self._lock is not None
        async with self._lock:
            await self._stop_fetchers()
            self.closed = True
            for stream in self.streams:
                stream.clear()
            for sender in self._senders:
                sender.close()
            try:
                if self.config.auto_commit_enable and self.owned:
                    await self._commit_locked()
            except KafkaError as exc:
                log.error("committing offsets at shutdown failed: %s", exc)
            try:
                await trio.to_thread.run_sync(self._release_all)
            except KafkaError as exc:
                log.warning("releasing partitions at shutdown failed: %s", exc)
        await trio.to_thread.run_sync(self._zk_client.close)
        log.info("consumer %s shut down", self.consumer_id)

    async def close_zk(self) -> None:
        await trio.to_thread.run_sync(self._zk_client.close)

    # ------------------------------------------------------------ streams

    def make_streams(self, loop: LoopThread, count: int, capacity: int, names: list[str]) -> list[KafkaStream]:
        timeout_ms = self.config.consumer_timeout_ms
        streams = []
        for i in range(count):
            send, receive = trio.open_memory_channel(capacity)
            self._senders.append(send)
            self._receivers.append(receive)
            streams.append(KafkaStream(self, i, loop, self._receiver_function(receive, timeout_ms), names[i]))
        self.streams = streams
        return streams

    @staticmethod
    def _receiver_function(receive: trio.MemoryReceiveChannel, timeout_ms: int) -> Callable[[], Any]:
        if timeout_ms < 0:

            async def next_item() -> Any:
                try:
                    return await receive.receive()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    return END

        else:
            seconds = timeout_ms / 1000.0

            async def next_item() -> Any:
                try:
                    with trio.move_on_after(seconds):
                        return await receive.receive()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    return END
                return TIMEOUT

        return next_item

    async def deliver(self, stream_index: int, item: Any) -> None:
        """Queue a chunk ``(generation, [MessageAndMetadata])`` or an error
        for a stream; waits while its queue is full."""
        try:
            await self._senders[stream_index].send(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def _clear_queues(self) -> None:
        for receive in self._receivers:
            while True:
                try:
                    receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
        for stream in self.streams:
            stream.clear()

    # ------------------------------------------------------------ consumed offsets

    def record_consumed(self, m: MessageAndMetadata) -> None:
        """Count ``m`` as consumed (any thread)."""
        key = (m[2], m[3])
        offset = m[4] + 1
        if key in self.owned and self.consumed.get(key, -1) < offset:
            self.consumed[key] = offset

    def reset_consumed(self, key: tuple[str, int], offset: int) -> None:
        """The fetcher moved a partition to ``offset`` (auto.offset.reset)."""
        self.consumed[key] = offset

    def _collect_consumed(self) -> None:
        for stream in self.streams:
            last = stream._last
            if last is not None:
                self.record_consumed(last)

    async def commit(self) -> int:
        """Commit consumed offsets to ZooKeeper; returns how many changed."""
        assert self._lock is not None
        async with self._lock:
            return await self._commit_locked()

    async def _commit_locked(self) -> int:
        self._collect_consumed()
        todo = {}
        for key in self.owned:
            offset = self.consumed.get(key, -1)
            if offset >= 0 and self._committed.get(key) != offset:
                todo[key] = offset
        if not todo:
            return 0
        assert self._zk is not None
        await self._zk.run(self._write_offsets, todo)
        self._committed.update(todo)
        log.debug("committed offsets %s", todo)
        return len(todo)

    def _write_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        for (topic, partition), offset in offsets.items():
            self._zk_client.write_persistent(offset_path(self.group, topic, partition), encode_offset(offset))

    async def _auto_commit_loop(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while True:
            await trio.sleep(interval)
            try:
                await self.commit()
            except KafkaError as exc:
                log.warning("auto commit failed: %s", exc)

    # ------------------------------------------------------------ registration and watches

    def registration(self) -> ConsumerRegistration:
        pattern = self.topic_filter.pattern if self.topic_filter is not None else STATIC_PATTERN
        return ConsumerRegistration(dict(self.subscription), pattern, int(time.time() * 1000))

    def _register(self) -> None:
        """Blocking: create (or re-create after a session loss) this
        consumer's ids node. Raises ZooKeeperError if another live session
        holds this consumer.id past the session timeout."""
        zk = self._zk_client
        path = consumer_id_path(self.group, self.consumer_id)
        data = self.registration().to_json()
        deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000.0 + 1.0
        while not zk.create_ephemeral_if_absent(path, data):
            if zk.owner_session(path) == zk.session_id:
                return
            if time.monotonic() > deadline:
                raise ZooKeeperError(f"consumer.id {self.consumer_id!r} is already registered at {path} by another live consumer")
            time.sleep(0.2)
        log.info("registered consumer %s at %s: %s", self.consumer_id, path, data.decode())

    async def register_and_rebalance(self) -> None:
        """Seed 003 "Consumer registration algorithm": register, watch the
        group's ids, the brokers and the topics, rebalance now."""
        assert self._zk is not None
        await self._zk.run(self._register)
        await self._zk.watch_children(consumer_ids_path(self.group), self._on_consumers_changed)
        await self._zk.watch_children(BROKER_IDS_PATH, self._on_brokers_changed)
        await self._zk.watch_children(BROKER_TOPICS_PATH, self._on_topics_changed)
        assert self._lock is not None
        async with self._lock:
            await self._rebalance()

    def _on_consumers_changed(self, children: list[str]) -> None:
        log.debug("group %s consumers: %s", self.group, sorted(children))
        self.request_rebalance()

    def _on_brokers_changed(self, children: list[str]) -> None:
        log.debug("brokers: %s", sorted(children))
        self.request_rebalance()

    def _on_topics_changed(self, children: list[str]) -> None:
        relevant = frozenset(self._relevant(children))
        if relevant != self._relevant_topics:
            log.debug("subscribed topics now %s", sorted(relevant))
            self.request_rebalance()

    def _relevant(self, topics: list[str]) -> list[str]:
        if self.topic_filter is not None:
            excl = self.config.exclude_internal_topics
            return [t for t in topics if self.topic_filter.is_topic_allowed(t, excl)]
        return [t for t in topics if t in self.subscription]

    def request_rebalance(self) -> None:
        """Ask the rebalance task to run (trio thread)."""
        if self._wakeup is not None and not self.closed:
            self._rebalance_pending = True
            self._wakeup.set()

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
                    if isinstance(exc, ConsumerRebalanceFailedError):
                        log.error("%s", exc)
                    else:
                        log.exception("rebalance of consumer %s failed", self.consumer_id)
                    self._clear_queues()
                    for sender in self._senders:
                        try:
                            sender.send_nowait(exc)
                        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                            pass

    # ------------------------------------------------------------ rebalance

    async def _rebalance(self) -> None:
        attempts = self.config.rebalance_max_retries + 1
        backoff = self.config.rebalance_backoff_ms / 1000.0
        last_error: BaseException | None = None
        for attempt in range(attempts):
            self._rebalance_pending = False
            try:
                if await self._rebalance_once():
                    self.rebalance_count += 1
                    return
                last_error = None
            except ZooKeeperError as exc:
                last_error = exc
                log.warning("rebalance attempt %d of consumer %s failed: %s", attempt + 1, self.consumer_id, exc)
            if attempt + 1 < attempts:
                log.info("rebalance attempt %d of consumer %s failed; retrying in %d ms", attempt + 1, self.consumer_id, self.config.rebalance_backoff_ms)
                await trio.sleep(backoff)
        error = ConsumerRebalanceFailedError(
            f"{self.consumer_id} can't rebalance after {attempts} attempts (rebalance.max.retries="
            f"{self.config.rebalance_max_retries}, rebalance.backoff.ms={self.config.rebalance_backoff_ms}): "
            + (f"{last_error}" if last_error else "partitions still owned by other consumers")
        )
        raise error from last_error

    def _read_group(self) -> tuple[dict[str, list[int]], dict[str, list[str]], list[int]]:
        """Blocking: ``({topic: sorted partitions}, {topic: thread ids of the
        whole group}, broker ids)`` for the topics this consumer subscribes."""
        zk = self._zk_client
        self._register()  # after a lost session the node is gone
        brokers = sorted(int(b) for b in zk.get_children(BROKER_IDS_PATH) if b.isdigit())
        all_topics = zk.get_children(BROKER_TOPICS_PATH)
        mine = self._relevant(all_topics)
        self._relevant_topics = frozenset(mine)
        partitions: dict[str, list[int]] = {}
        for topic in mine:
            data = zk.get(topic_path(topic))
            if not data:
                continue
            try:
                partitions[topic] = TopicAssignment.from_json(data).partition_ids
            except ValueError as exc:
                log.warning("ignoring topic %s: %s", topic, exc)
        threads: dict[str, list[str]] = {t: [] for t in partitions}
        for consumer in sorted(zk.get_children(consumer_ids_path(self.group))):
            data = zk.get(consumer_id_path(self.group, consumer))
            if not data:
                continue
            try:
                reg = ConsumerRegistration.from_json(data)
            except ValueError as exc:
                log.warning("ignoring consumer %s of group %s: %s", consumer, self.group, exc)
                continue
            if reg.pattern == STATIC_PATTERN:
                topic_counts = reg.subscription
            else:
                ((regex, n),) = reg.subscription.items() if len(reg.subscription) == 1 else ((None, 0),)
                if regex is None:
                    continue
                flt = topic_filter_for(reg.pattern, regex)
                excl = self.config.exclude_internal_topics
                topic_counts = {t: n for t in all_topics if flt.is_topic_allowed(t, excl)}
            for topic, n in topic_counts.items():
                if topic in threads:
                    threads[topic].extend(consumer_thread_id(consumer, i) for i in range(n))
        return partitions, threads, brokers

    def _stream_of(self, topic: str, thread_index: int) -> int:
        if self.topic_filter is not None:
            return thread_index
        base = 0
        for t, n in self.subscription.items():
            if t == topic:
                return base + thread_index
            base += n
        raise KeyError(topic)

    async def _rebalance_once(self) -> bool:
        assert self._zk is not None
        partitions, threads, brokers = await self._zk.run(self._read_group)
        wanted: dict[tuple[str, int], str] = {}
        if brokers:
            for topic, parts in partitions.items():
                for thread, assigned in range_assignment(parts, threads[topic]).items():
                    if thread.rsplit("-", 1)[0] == self.consumer_id:
                        for p in assigned:
                            wanted[(topic, p)] = thread
        else:
            log.warning("no broker is registered in ZooKeeper; consumer %s owns nothing until one is", self.consumer_id)
        if wanted == self._owned_threads and self._fetch_scope is not None:
            if await self._zk.run(self._still_own, wanted):
                log.debug("rebalance of %s: assignment unchanged", self.consumer_id)
                return True
        log.info(
            "rebalancing consumer %s: %d partition(s) -> %s",
            self.consumer_id,
            len(wanted),
            ", ".join(f"{t}-{p}:{th.rsplit('-', 1)[1]}" for (t, p), th in sorted(wanted.items())) or "none",
        )
        # Seed 003 steps 8-9: stop, commit, release, claim.
        await self._stop_fetchers()
        self.generation += 1
        self._collect_consumed()
        self._clear_queues()
        if self.config.auto_commit_enable and self.owned:
            await self._commit_locked()
        await self._zk.run(self._release_all)
        previous = {key: self.consumed.get(key, -1) for key in self.owned}
        self.owned = {}
        self._owned_threads = {}
        for stream in self.streams:
            stream._last = None
        if not await self._zk.run(self._claim, wanted):
            return False
        committed, leaders = await self._zk.run(self._read_offsets_and_leaders, list(wanted))
        infos: dict[tuple[str, int], PartitionTopicInfo] = {}
        for key, thread in sorted(wanted.items()):
            topic, partition = key
            start = max(committed.get(key, -1), previous.get(key, -1))
            infos[key] = PartitionTopicInfo(topic, partition, self._stream_of(topic, int(thread.rsplit("-", 1)[1])), start, leaders.get(key))
            self.consumed[key] = start
            if key in committed:
                self._committed[key] = committed[key]
        for key in list(self.consumed):
            if key not in infos:
                del self.consumed[key]
                self._committed.pop(key, None)
        self.owned = infos
        self._owned_threads = dict(wanted)
        await self._start_fetchers(list(infos.values()))
        return True

    def _still_own(self, wanted: Mapping[tuple[str, int], str]) -> bool:
        zk = self._zk_client
        for (topic, partition), thread in wanted.items():
            path = owner_path(self.group, topic, partition)
            if zk.get(path) != thread.encode() or zk.owner_session(path) != zk.session_id:
                return False
        return True

    def _release_all(self) -> None:
        zk = self._zk_client
        for (topic, partition), thread in self._owned_threads.items():
            path = owner_path(self.group, topic, partition)
            if zk.get(path) == thread.encode() and zk.owner_session(path) == zk.session_id:
                zk.delete(path)

    def _claim(self, wanted: Mapping[tuple[str, int], str]) -> bool:
        zk = self._zk_client
        claimed: list[str] = []
        for (topic, partition), thread in sorted(wanted.items()):
            path = owner_path(self.group, topic, partition)
            if zk.create_ephemeral_if_absent(path, thread.encode()):
                claimed.append(path)
                continue
            if zk.get(path) == thread.encode() and zk.owner_session(path) == zk.session_id:
                claimed.append(path)
                continue
            holder = zk.get(path)
            log.info("%s-%d is still owned by %s; waiting for it to be released", topic, partition, holder.decode() if holder else "?")
            for done in claimed:
                zk.delete(done)
            return False
        return True

    def _read_offsets_and_leaders(self, keys: list[tuple[str, int]]):
        zk = self._zk_client
        committed: dict[tuple[str, int], int] = {}
        for topic, partition in keys:
            data = zk.get(offset_path(self.group, topic, partition))
            if data:
                try:
                    committed[(topic, partition)] = decode_offset(data)
                except ValueError:
                    log.warning("ignoring malformed offset %r of %s-%d", data, topic, partition)
        return committed, self._leaders(keys)

    def _leaders(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, str, int]]:
        zk = self._zk_client
        brokers: dict[int, BrokerRegistration | None] = {}
        leaders = {}
        for topic, partition in keys:
            data = zk.get(partition_state_path(topic, partition))
            if not data:
                continue
            try:
                leader = PartitionState.from_json(data).leader
            except (ValueError, KeyError):
                continue
            if leader < 0:
                continue
            if leader not in brokers:
                raw = zk.get(broker_path(leader))
                try:
                    brokers[leader] = BrokerRegistration.from_json(leader, raw) if raw else None
                except ValueError:
                    brokers[leader] = None
            reg = brokers[leader]
            if reg is not None:
                leaders[(topic, partition)] = (leader, reg.host, reg.port)
        return leaders

    async def find_leaders(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, str, int]]:
        """Leaders of ``keys`` from the partition state and broker nodes."""
        assert self._zk is not None
        return await self._zk.run(self._leaders, keys)

    # ------------------------------------------------------------ fetchers

    async def _start_fetchers(self, infos: list[PartitionTopicInfo]) -> None:
        if not infos:
            return
        group = FetcherGroup(self, infos, self.generation)
        nursery = self._nursery
        assert nursery is not None

        async def run(task_status=trio.TASK_STATUS_IGNORED) -> None:
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
            await self._fetch_done.wait()
            self._fetch_scope = None

    _nursery: trio.Nursery | None = None
    _fetch_done: trio.Event


class ConsumerConnector:
    """The high-level consumer (seed 000 ``ConsumerConnector``; see the
    module docstring for the algorithm).

    ``config`` is a `kclient.config.ConsumerConfig` or a mapping of
    Kafka property names (``group.id`` and ``zookeeper.connect`` required;
    ``consumer.id``, ``auto.commit.enable``, ``auto.commit.interval.ms``
    (ms), ``auto.offset.reset`` (``smallest`` | ``largest``),
    ``consumer.timeout.ms`` (ms, -1 = wait forever),
    ``fetch.message.max.bytes`` (bytes per partition per fetch),
    ``fetch.wait.max.ms``, ``fetch.min.bytes``,
    ``queued.max.message.chunks``, ``rebalance.max.retries``,
    ``rebalance.backoff.ms``, ``refresh.leader.backoff.ms``,
    ``zookeeper.session.timeout.ms``, ``zookeeper.connection.timeout.ms``,
    ``socket.timeout.ms``, ``client.id``, ``exclude.internal.topics``).
    ``num.consumer.fetchers`` is accepted but there is always one fetch loop
    per leader broker; ``zookeeper.sync.time.ms`` and
    ``dual.commit.enabled`` are accepted and unused.

    The constructor connects to ZooKeeper. Raises
    `ConfigError` naming the property for a bad
    value, `NotSupportedError` for
    ``offsets.storage=kafka`` or ``partition.assignment.strategy=roundrobin``,
    and `ZkTimeoutError` if ZooKeeper does not answer
    within ``zookeeper.connection.timeout.ms``.

    Use as a context manager or call `shutdown`.
    """

    def __init__(self, config: ConsumerConfig | Mapping[str, Any]) -> None:
        if not isinstance(config, ConsumerConfig):
            if not isinstance(config, Mapping):
                raise ConfigError(f"ConsumerConnector takes a ConsumerConfig or a mapping of properties, not {type(config).__name__}")
            config = ConsumerConfig.from_properties(config)
        if config.offsets_storage != "zookeeper":
            raise NotSupportedError(
                f"offsets.storage={config.offsets_storage} is not supported: kclient's ConsumerConnector "
                "commits offsets to ZooKeeper only (offsets.storage=zookeeper)"
            )
        if config.partition_assignment_strategy != "range":
            raise NotSupportedError(
                f"partition.assignment.strategy={config.partition_assignment_strategy} is not supported: "
                "kclient's ConsumerConnector assigns partitions by range (seed 003)"
            )
        self.config = config
        self.consumer_id = config.consumer_id or default_consumer_id(config.group_id)
        self._core = _ConnectorCore(config, self.consumer_id)
        self._streams_created = False
        self._shut_down = False
        self._loop = LoopThread(name=f"kclient-consumer-{self.consumer_id}")
        try:
            self._loop.call(self._start)
        except BaseException:
            self._loop.close()
            raise

    async def _start(self) -> None:
        self._core._nursery = self._loop.nursery
        await self._core.start(self._loop.nursery)

    @property
    def group_id(self) -> str:
        return self.config.group_id

    def create_message_streams(
        self,
        topic_count_map: Mapping[str, int],
        key_decoder: Decoder = None,
        value_decoder: Decoder = None,
    ) -> dict[str, list[KafkaStream]]:
        """``{topic: number of streams}`` -> ``{topic: [KafkaStream, ...]}``
        (seed 000 ``createMessageStreams``). Each stream is one consumer
        thread ``<consumer_id>-<n>`` of the range assignment; keys and values
        are decoded with ``key_decoder`` / ``value_decoder`` (a
        `kclient.client.serde.Decoder`, any object with
        ``from_bytes``, a callable, or None for bytes). Registers the
        consumer and rebalances before returning; raises
        `ConsumerRebalanceFailedError` if the
        partitions cannot be claimed, ``ValueError`` for a bad map, and
        `KafkaError` if streams were created
        already (once per connector, as in Kafka)."""
        if not topic_count_map:
            raise ValueError("topic_count_map is empty: name at least one topic")
        counts: dict[str, int] = {}
        for topic, n in topic_count_map.items():
            if not isinstance(topic, str) or not topic:
                raise ValueError(f"bad topic name {topic!r}")
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"the number of streams for {topic!r} must be an int >= 1, not {n!r}")
            counts[topic] = n
        names = [f"{self.consumer_id}-{t}-{i}" for t, n in counts.items() for i in range(n)]
        streams = self._create(counts, None, sum(counts.values()), names, key_decoder, value_decoder)
        result: dict[str, list[KafkaStream]] = {}
        base = 0
        for topic, n in counts.items():
            result[topic] = streams[base : base + n]
            base += n
        return result

    def create_message_streams_by_filter(
        self,
        topic_filter: TopicFilter,
        num_streams: int = 1,
        key_decoder: Decoder = None,
        value_decoder: Decoder = None,
    ) -> list[KafkaStream]:
        """``num_streams`` streams over every topic ``topic_filter``
        (`Whitelist` / `Blacklist`) allows, now and as topics
        appear (seed 000 ``createMessageStreamsByFilter``; seed 003: the
        consumer watches ``/brokers/topics``). Stream ``n`` gets thread
        ``<consumer_id>-<n>``'s partitions of every matching topic. Raises
        as `create_message_streams`."""
        if not isinstance(topic_filter, TopicFilter):
            raise TypeError(f"topic_filter must be a Whitelist or Blacklist, not {topic_filter!r}")
        if not isinstance(num_streams, int) or isinstance(num_streams, bool) or num_streams < 1:
            raise ValueError(f"num_streams must be an int >= 1, not {num_streams!r}")
        names = [f"{self.consumer_id}-{i}" for i in range(num_streams)]
        return self._create({topic_filter.regex: num_streams}, topic_filter, num_streams, names, key_decoder, value_decoder)

    def _create(self, subscription, topic_filter, count, names, key_decoder, value_decoder) -> list[KafkaStream]:
        if self._shut_down:
            raise KafkaError("the connector is shut down")
        if self._streams_created:
            raise KafkaError("create_message_streams / create_message_streams_by_filter may be called only once per ConsumerConnector")
        kd = _decoder_function(key_decoder, "key_decoder")
        vd = _decoder_function(value_decoder, "value_decoder")
        self._streams_created = True
        core = self._core
        core.key_decoder, core.value_decoder = kd, vd
        core.subscription = dict(subscription)
        core.topic_filter = topic_filter

        def make() -> list[KafkaStream]:
            return core.make_streams(self._loop, count, self.config.queued_max_message_chunks, names)

        streams = self._loop.call_sync(make)
        self._loop.call(core.register_and_rebalance)
        return streams

    def commit_offsets(self) -> None:
        """Commit the offset after the last message each stream has handed
        out, for every partition this consumer owns, to
        ``/consumers/<group>/offsets/<topic>/<partition>`` (seed 003
        "Consumer Offsets"). Raises `ZooKeeperError`
        if ZooKeeper fails."""
        if self._shut_down:
            raise KafkaError("the connector is shut down")
        self._loop.call(self._core.commit)

    def owned_partitions(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): stream index}`` this consumer owns now."""
        return self._loop.call_sync(lambda: {k: i.stream_index for k, i in self._core.owned.items()})

    def shutdown(self) -> None:
        """Stop fetching, commit (with ``auto.commit.enable``), release the
        partitions, leave the group (the ephemeral nodes go, the other
        consumers rebalance) and end every stream's iteration. Idempotent."""
        if self._shut_down:
            return
        self._shut_down = True
        try:
            self._loop.call(self._core.shutdown)
        finally:
            self._loop.close()

    close = shutdown

    def __enter__(self) -> "ConsumerConnector":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"<ConsumerConnector {self.consumer_id} group={self.config.group_id!r}>"


__all__ = ["Blacklist", "ConsumerConnector", "KafkaStream", "MessageAndMetadata", "TopicFilter", "Whitelist", "default_consumer_id"]
