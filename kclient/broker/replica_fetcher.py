"""Followers copy their leaders' logs (Kafka's ``ReplicaFetcherThread``).

One `ReplicaFetcher` task per leader broker fetches every partition this
broker follows on that leader, as Kafka's design describes: "followers
consume messages from the leader just as a normal Kafka consumer would and
apply them to their own log" (Kafka documentation, "Replication").

For each partition handed to it, a fetcher first **truncates** the local
log to what the leader has (KIP-101, KIP-279): it sends
OffsetsForLeaderEpoch with its latest leader epoch; the leader answers the
end offset of that epoch in its own log (or of the largest epoch below it)
and the follower truncates to the smaller of that offset and its own end
offset for the answered epoch. A leader without an answer (error or -1)
makes it truncate to its high watermark (the pre-KIP-101 rule).

Then it **fetches** from its log end offset with Fetch (``replica_id`` =
this broker, ``current_leader_epoch`` = the epoch it follows, KIP-320),
appends what arrives with the leader's offsets and epochs
(`kclient.storage.Log.append_as_follower`) and sets its high watermark to
the smaller of the leader's and its own log end offset. The leader learns
the follower's log end offset from the fetch offset.

Errors: OFFSET_OUT_OF_RANGE (the follower is ahead of an unclean leader,
or behind its log start) asks the leader for its log start and end
(ListOffsets as replica) and truncates or restarts the log there;
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH or a lost
connection back off ``replica.fetch.backoff.ms`` and try again (the
controller's next LeaderAndIsr may move the partition elsewhere).

Settings (Kafka's broker properties): ``replica.fetch.wait.max.ms``,
``replica.fetch.min.bytes``, ``replica.fetch.max.bytes`` (per partition),
``replica.fetch.response.max.bytes``, ``replica.fetch.backoff.ms``,
``replica.socket.timeout.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from kclient.broker.inter_broker import send_request
from kclient.broker.task_host import TaskHost
from kclient.errors import (
    NONE,
    OFFSET_OUT_OF_RANGE,
    KafkaError,
    error_for_code,
)
from kclient.protocol.messages import FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH
from kclient.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)
from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ListOffsetsRequest, ListOffsetsResponse
from kclient.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.types import Records

if TYPE_CHECKING:
    from kclient.broker.partition import Partition
    from kclient.config import BrokerConfig
    from kclient.net.connection import BrokerConnection

log = logging.getLogger("kclient.broker.replica")

#: Fetch version a follower sends (v9+ carries current_leader_epoch).
FOLLOWER_FETCH_VERSION = 11
#: OffsetsForLeaderEpoch version a follower sends (v3 carries replica_id).
FOLLOWER_EPOCH_VERSION = 3


def complete_batches(records: Records) -> bytes:
    """The whole batches at the front of ``records`` (a fetch may end with
    a partial batch, which is dropped)."""
    data = bytes(records or b"")
    end = 0
    for info in scan_batches(data):
        end = info.position + info.size
    return data[:end]


class FetcherManager(TaskHost):
    """Starts one `ReplicaFetcher` per leader broker and hands partitions
    to it (Kafka's ``ReplicaFetcherManager``).

    Args:
        config: The broker's configuration (``replica.fetch.*``,
            ``replica.socket.timeout.ms``).
        broker_id: This broker's id (the followers' ``replica_id``).
        notify: Called with ``(topic, partition)`` after a follower append
            (wakes Fetch long polls).
        storage_error: Called with ``((topic, partition), error)`` when a
            follower's write (append, truncation) fails with an ``OSError``
            (KIP-112: the replica manager takes the log directory offline,
            which removes its partitions from the fetchers); None lets the
            error end the fetcher.
    """

    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        notify: Callable[[tuple[str, int]], None],
        storage_error: Callable[[tuple[str, int], OSError], None] | None = None,
    ) -> None:
        self.config = config
        self.broker_id = broker_id
        self.notify = notify
        self.storage_error = storage_error
        self._fetchers: dict[int, ReplicaFetcher] = {}
        super().__init__()

    def has(self, key: tuple[str, int]) -> bool:
        """True if some fetcher copies ``key``."""
        return any(key in f.partitions for f in self._fetchers.values())

    def add(self, part: Partition, leader_id: int, address: tuple[str, int]) -> None:
        """Follow ``part`` on broker ``leader_id`` at ``address``."""
        fetcher = self._fetchers.get(leader_id)
        if fetcher is not None and fetcher.address != address:
            fetcher.stop()
            fetcher = None
        if fetcher is None or fetcher.stopped:
            fetcher = ReplicaFetcher(self.config, self.broker_id, leader_id, address, notify=self.notify, storage_error=self.storage_error)
            self._fetchers[leader_id] = fetcher
            if self._nursery is None:
                raise RuntimeError("the replica fetchers are not running")
            self._nursery.start_soon(fetcher.run)
        fetcher.add(part)

    def remove(self, key: tuple[str, int]) -> None:
        """Stop copying ``key`` (it is led here now, or deleted)."""
        for leader, fetcher in list(self._fetchers.items()):
            fetcher.partitions.pop(key, None)
            if not fetcher.partitions:
                fetcher.stop()
                del self._fetchers[leader]

    def remove_all(self) -> None:
        for fetcher in self._fetchers.values():
            fetcher.stop()
        self._fetchers.clear()


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc`` (itself if it is no group); works on
    Python 3.10 too, where groups come from the exceptiongroup backport."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, (tuple, list)) and isinstance(exc, BaseException) and type(exc).__name__.endswith("ExceptionGroup"):
        return [leaf for e in inner for leaf in _leaves(e)]
    return [exc]


class ReplicaFetcher:
    """Copies the partitions this broker follows on one leader broker (see
    the module docstring).

    Args:
        config: The broker's configuration (``replica.fetch.*``,
            ``replica.socket.timeout.ms``).
        broker_id: This broker's id (the fetches' ``replica_id``).
        leader_id: The leader broker's id.
        address: The leader's ``(host, port)`` on the inter-broker listener.
        notify: Called with ``(topic, partition)`` after an append.
        storage_error: Called with ``((topic, partition), error)`` when a
            write to a partition's log fails with an ``OSError`` (see
            `FetcherManager`); the fetcher drops the partition and goes on
            with the others.
    """

    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        leader_id: int,
        address: tuple[str, int],
        *,
        notify: Callable[[tuple[str, int]], None],
        storage_error: Callable[[tuple[str, int], OSError], None] | None = None,
    ) -> None:
        self.config = config
        self.broker_id = broker_id
        self.notify = notify
        self.storage_error = storage_error
        self.leader_id = leader_id
        self.address = address
        #: key -> partition; ``needs_truncation`` holds the keys to truncate first.
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.needs_truncation: set[tuple[str, int]] = set()
        self._wakeup = trio.Event()
        self._scope = trio.CancelScope()
        self.stopped = False

    def add(self, part: Partition) -> None:
        self.partitions[part.key] = part
        self.needs_truncation.add(part.key)
        self._wakeup.set()

    def stop(self) -> None:
        self.stopped = True
        self._scope.cancel()

    async def run(self) -> None:
        """Fetch until stopped; reconnect with backoff on failures."""
        backoff = self.config.replica_fetch_backoff_ms / 1000
        with self._scope:
            while not self.stopped:
                try:
                    async with trio.open_nursery() as nursery:
                        conn = None
                        try:
                            conn = await self._connect(nursery)
                            await self._fetch_loop(conn)
                        except KafkaError as exc:
                            self._failed(exc, backoff)
                        finally:
                            if conn is not None:
                                with trio.CancelScope(shield=True):
                                    await conn.aclose()
                            nursery.cancel_scope.cancel()
                except Exception as exc:
                    # The connection's reader runs in the nursery, so a lost
                    # leader can also arrive as an ExceptionGroup (trio's
                    # strict exception groups): retry, do not end the broker.
                    leaves = _leaves(exc)
                    if not all(isinstance(leaf, KafkaError) for leaf in leaves):
                        raise
                    self._failed(leaves[0], backoff)
                if not self.stopped:
                    await trio.sleep(backoff)

    def _failed(self, exc: BaseException, backoff: float) -> None:
        log.info("replica fetcher for broker %d at %s:%d: %s; retrying in %.1f s", self.leader_id, *self.address, exc, backoff)
        self.needs_truncation.update(self.partitions)

    async def _connect(self, nursery: trio.Nursery) -> BrokerConnection:
        from kclient.net.connection import BrokerConnection

        timeout = self.config.replica_socket_timeout_ms
        return await BrokerConnection.connect(
            nursery,
            *self.address,
            client_id=f"replica-fetcher-{self.broker_id}-{self.leader_id}",
            connect_timeout_ms=timeout,
            request_timeout_ms=timeout + self.config.replica_fetch_wait_max_ms,
        )

    async def _fetch_loop(self, conn: BrokerConnection) -> None:
        backoff = self.config.replica_fetch_backoff_ms / 1000
        while not self.stopped:
            if not self.partitions:
                self._wakeup = trio.Event()
                await self._wakeup.wait()
                continue
            if self.needs_truncation:
                await self._truncate(conn)
            ready = {k: p for k, p in self.partitions.items() if k not in self.needs_truncation}
            if not ready:
                await trio.sleep(backoff)
                continue
            failed = await self._fetch_once(conn, ready)
            if failed:
                await trio.sleep(backoff)

    # ------------------------------------------------------------ truncation

    async def _truncate(self, conn: BrokerConnection) -> None:
        keys = list(self.needs_truncation)
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        sent: dict[tuple[str, int], int] = {}
        for key in keys:
            found = self.partitions.get(key)
            if found is None:
                self.needs_truncation.discard(key)
                continue
            sent[key] = found.leader_epoch
            by_topic.setdefault(key[0], []).append(
                OffsetForLeaderPartition(partition=key[1], current_leader_epoch=found.leader_epoch, leader_epoch=found.log.latest_epoch)
            )
        if not by_topic:
            return
        version = conn.version_for(OFFSET_FOR_LEADER_EPOCH, ceiling=FOLLOWER_EPOCH_VERSION)
        body = OffsetForLeaderEpochRequest(
            replica_id=self.broker_id, topics=[OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]
        )
        response: OffsetForLeaderEpochResponse = await send_request(conn, OFFSET_FOR_LEADER_EPOCH, body, version=version)
        for t in response.topics:
            for p in t.partitions:
                key = (t.topic, p.partition)
                part = self.partitions.get(key)
                if part is None or key not in self.needs_truncation or key not in sent:
                    continue
                plog = part.log
                if p.error_code != NONE:
                    log.info("%s-%d: OffsetsForLeaderEpoch from broker %d: %s", *key, self.leader_id, error_for_code(p.error_code).name)
                    continue
                requested = plog.latest_epoch
                if p.end_offset < 0 or requested < 0:
                    target = min(plog.high_watermark, plog.log_end_offset)
                elif p.leader_epoch == requested:
                    target = min(p.end_offset, plog.log_end_offset)
                else:
                    _, own_end = plog.end_offset_for_epoch(p.leader_epoch)
                    target = min(p.end_offset, own_end if own_end >= 0 else plog.log_end_offset, plog.log_end_offset)
                async with part.replication_lock:
                    if not self._follows(part, sent[key]):
                        continue  # its role changed while the request was out
                    if target < plog.log_end_offset:
                        log.warning(
                            "%s-%d: truncating from %d to %d to match leader %d (epoch %d)",
                            *key, plog.log_end_offset, target, self.leader_id, part.leader_epoch,
                        )
                        if not await self._write(part, plog.truncate_to, target):
                            continue
                self.needs_truncation.discard(key)

    # ------------------------------------------------------------ fetch

    async def _fetch_once(self, conn: BrokerConnection, ready: dict[tuple[str, int], Partition]) -> bool:
        cfg = self.config
        sent = {key: part.leader_epoch for key, part in ready.items()}
        by_topic: dict[str, list[FetchPartition]] = {}
        for (topic, index), part in ready.items():
            by_topic.setdefault(topic, []).append(
                FetchPartition(
                    partition=index,
                    current_leader_epoch=part.leader_epoch,
                    fetch_offset=part.log.log_end_offset,
                    log_start_offset=part.log.log_start_offset,
                    partition_max_bytes=cfg.replica_fetch_max_bytes,
                )
            )
        body = FetchRequest(
            replica_id=self.broker_id,
            max_wait_ms=cfg.replica_fetch_wait_max_ms,
            min_bytes=cfg.replica_fetch_min_bytes,
            max_bytes=cfg.replica_fetch_response_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[],
            rack_id="",
        )
        version = conn.version_for(FETCH, ceiling=FOLLOWER_FETCH_VERSION)
        response: FetchResponse = await send_request(conn, FETCH, body, version=version)
        failed = False
        for t in response.responses:
            for p in t.partitions:
                key = (t.topic, p.partition_index)
                found = self.partitions.get(key)
                if found is None or key not in ready:
                    continue
                part = found
                code = p.error_code
                if code == NONE:
                    await self._apply(part, p, sent[key])
                elif code == OFFSET_OUT_OF_RANGE:
                    await self._handle_out_of_range(conn, part, sent[key])
                else:
                    failed = True
                    log.info("%s-%d: fetch from leader %d: %s", *key, self.leader_id, error_for_code(code).name)
        return failed

    def _follows(self, part: Partition, epoch: int) -> bool:
        """``part`` is still this fetcher's and still follows this leader in
        the leader epoch a request was sent with (not removed, made leader
        or moved meanwhile); call with its ``replication_lock`` held."""
        return (
            not self.stopped
            and self.partitions.get(part.key) is part
            and part.leader_id == self.leader_id
            and part.leader_epoch == epoch
        )

    async def _apply(self, part: Partition, p: PartitionData, epoch: int) -> None:
        plog = part.log
        data = complete_batches(p.records)
        async with part.replication_lock:
            if not self._follows(part, epoch) or part.key in self.needs_truncation:
                return  # it became leader (or moved) while the fetch was out
            if data and not await self._write(part, plog.append_as_follower, data):
                return
            hw = min(p.high_watermark, plog.log_end_offset)
            if hw > plog.high_watermark:
                plog.update_high_watermark(hw)
        if data:
            self.notify(part.key)

    async def _handle_out_of_range(self, conn: BrokerConnection, part: Partition, epoch: int) -> None:
        """The leader cannot serve our log end offset: follow its log start
        and end (Kafka's ``handleOutOfRangeError``)."""
        plog = part.log
        leader_end = await self._leader_offset(conn, part, LATEST_TIMESTAMP)
        if leader_end < plog.log_end_offset:
            async with part.replication_lock:
                if self._follows(part, epoch):
                    log.warning("%s-%d: ahead of leader %d (%d > %d): truncating", *part.key, self.leader_id, plog.log_end_offset, leader_end)
                    await self._write(part, plog.truncate_to, leader_end)
            return
        leader_start = await self._leader_offset(conn, part, EARLIEST_TIMESTAMP)
        if leader_start > plog.log_end_offset:
            async with part.replication_lock:
                if self._follows(part, epoch):
                    log.warning("%s-%d: behind leader %d's log start %d: restarting the log there", *part.key, self.leader_id, leader_start)
                    await self._write(part, plog.truncate_fully_and_start_at, leader_start)

    async def _write(self, part: Partition, write: Callable[..., object], *args: Any) -> bool:
        """``write(*args)`` on ``part``'s log in a worker thread.

        Returns:
            False if it failed with an ``OSError`` and `storage_error` took
                it (a full disk, an I/O error: the partition leaves this
                fetcher and its log directory goes offline, KIP-112, as
                Kafka's ``ReplicaFetcherThread`` reports it to the
                ``LogDirFailureChannel``), True otherwise.

        Raises:
            OSError: It failed and there is no `storage_error`.
        """
        try:
            await trio.to_thread.run_sync(write, *args)
        except OSError as exc:
            if self.storage_error is None:
                raise
            self.partitions.pop(part.key, None)
            self.needs_truncation.discard(part.key)
            self.storage_error(part.key, exc)
            return False
        return True

    async def _leader_offset(self, conn: BrokerConnection, part: Partition, timestamp: int) -> int:
        version = conn.version_for(LIST_OFFSETS, floor=1, ceiling=4)
        body = ListOffsetsRequest.for_partition(part.topic, part.partition, timestamp, replica_id=self.broker_id, current_leader_epoch=part.leader_epoch)
        response: ListOffsetsResponse = await send_request(conn, LIST_OFFSETS, body, version=version)
        entry = response.topics[0].partitions[0]
        if entry.error_code != NONE:
            raise error_for_code(entry.error_code)(f"ListOffsets {part.topic}-{part.partition} on broker {self.leader_id}")
        return entry.offset


__all__ = ["FetcherManager", "ReplicaFetcher", "complete_batches"]
