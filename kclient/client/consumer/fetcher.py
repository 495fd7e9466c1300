"""The high-level consumer's fetchers: trio tasks that read the partitions a
rebalance gave this consumer from their leaders and queue decoded chunks for
the `KafkaStream` each partition feeds.

One fetch loop per leader broker (Kafka's ConsumerFetcherThread) sends one
Fetch request for all of that broker's partitions (``fetch.message.max.bytes``
per partition, ``fetch.wait.max.ms`` / ``fetch.min.bytes`` long poll). When
every partition of an answer came back without an error, the next request
goes out before that answer is decoded, from the offsets its batch headers
end at, so that the broker reads while the client decodes (one request in
flight per broker; what it brings back for a partition that stopped being
fetched meanwhile is dropped). Per partition result:

- data: decoded into a `MessageChunk` (rows; key / value
  decoders applied) and put on the stream's bounded queue; a full queue
  (``queued.max.message.chunks``) holds the loop until the stream is read;
- OFFSET_OUT_OF_RANGE: the offset is reset per ``auto.offset.reset``
  (``smallest`` -> the log start, ``largest`` -> the log end, ListOffsets)
  and logged at WARNING (Kafka 0.8 documentation, section 5.4 "Log",
  "Reads": OutOfRangeException; https://kafka.apache.org/08/documentation.html#log);
- leadership errors (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
  LEADER_NOT_AVAILABLE) and lost connections: the partition goes to the
  leader finder, which looks its leader up in ZooKeeper every
  ``refresh.leader.backoff.ms`` and starts a fetch loop for it;
- a message larger than ``fetch.message.max.bytes`` or a corrupt batch:
  the error is queued for the stream (the application sees it) and the
  partition stops being fetched until the next rebalance;
- an `AuthenticationError` (TLS handshake or SASL, KIP-43 / KIP-152): never
  retried; queued once for each stream the broker's partitions feed (the
  application's iteration raises it) and the loop ends.

A partition without a starting offset (nothing committed) starts at the
``auto.offset.reset`` end, looked up with ListOffsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from operator import itemgetter
from typing import Any, Protocol

import trio
from crc32c import crc32c

from kclient._accel import speedups
from kclient.client.consumer.chunk import MessageChunk
from kclient.client.consumer.partition_topic_info import Leader, PartitionTopicInfo, TopicPartition
from kclient.client.consumer.simple import FetchRequest, OffsetRequest, TrioSimpleConsumer
from kclient.client.consumer.statistics import fetched_position
from kclient.config import ConsumerConfig
from kclient.errors import NONE as _NO_ERROR
from kclient.errors import (
    OFFSET_OUT_OF_RANGE,
    AuthenticationError,
    BrokerResponseError,
    CorruptRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    ProtocolError,
)
from kclient.protocol.records import iter_record_rows

log = logging.getLogger("kclient.consumer")

#: The compiled decoder of plain record batches into columns (None: pure Python).
_c_decode_columns = speedups.decode_columns if speedups is not None else None

_key = itemgetter(0)
_value = itemgetter(1)
_timestamp = itemgetter(2)


class FetcherOwner(Protocol):
    """What a `FetcherGroup` needs of the connector core that owns the
    partitions (`kclient.client.consumer.group.core_base.GroupCoreBase` is
    one): the core is handed to the fetchers, the fetchers never import it.
    An owner may also have ``ssl_context`` (one TLS context for every
    fetcher connection) and ``fetch_statistics`` (a
    `kclient.client.consumer.statistics.FetchStatistics`)."""

    #: The connector's config (``fetch.*``, ``socket.timeout.ms``,
    #: ``refresh.leader.backoff.ms``, ``auto.offset.reset``, security).
    config: ConsumerConfig
    #: Applied to every key / value (None keeps the bytes).
    key_decoder: Callable[[Any], Any] | None
    value_decoder: Callable[[Any], Any] | None

    async def deliver(self, stream_index: int, item: Any) -> None:
        """Queue a chunk ``(generation, MessageChunk)`` or an error for a
        stream; waits while its queue is full.

        Args:
            stream_index: The stream's index.
            item: The chunk or the exception.
        """

    async def find_leaders(self, keys: list[TopicPartition]) -> dict[TopicPartition, Leader]:
        """The partitions' live leaders.

        Args:
            keys: ``(topic, partition)`` pairs.

        Returns:
            ``{key: (broker id, host, port)}`` for partitions with a live
            leader.
        """
        ...

    def reset_consumed(self, key: TopicPartition, offset: int) -> None:
        """A partition was moved per ``auto.offset.reset``.

        Args:
            key: ``(topic, partition)``.
            offset: Where it is fetched from now.
        """


def decode_chunk(info: PartitionTopicInfo, message_set: Any, key_decoder: Callable[[Any], Any] | None, value_decoder: Callable[[Any], Any] | None) -> MessageChunk:
    """Decode one fetched partition into a `MessageChunk` (a sequence of
    `MessageAndMetadata`, held as columns), with
    `kclient.protocol.records.iter_record_rows` (every format; control
    batches skipped; every batch's size and CRC checked; plain v2 batches
    decoded straight into the columns where ``kclient._speedups`` is
    built). The key / value
    decoders run here, on every message, so that a failing one fails the
    chunk; the `MessageAndMetadata` objects are built by the stream as it
    hands them out.

    Args:
        info: The partition's fetch state (topic, partition, the offset
            asked for).
        message_set: Its `ByteBufferMessageSet` (error code 0).
        key_decoder: Applied to each key; None keeps the bytes.
        value_decoder: Applied to each value; None keeps the bytes.

    Returns:
        The messages from the offset asked for on.

    Raises:
        MessageSizeTooLargeError: the first batch does not fit
            ``fetch.message.max.bytes``.
        CorruptRecordError: a bad batch, naming the partition.
    """
    message_set.check_fits()
    topic = info.topic
    partition = info.partition
    offsets: list[int] = []
    keys: list[Any] = []
    values: list[Any] = []
    timestamps: list[int] = []
    buf = message_set.visible_buffer  # without aborted transactions under read_committed (KIP-98)
    start = message_set.start_offset
    pos = 0
    if _c_decode_columns is not None:
        # The compiled decoder fills the columns straight from the fetched
        # bytes (no tuple per record) for every plain batch; the general
        # decoder takes anything else from where it stops.
        pos = _c_decode_columns(buf, 0, start, offsets, keys, values, timestamps, crc32c)
    if pos < len(buf):
        for o, r in iter_record_rows(buf, start, where=f"{topic}-{partition}", position=pos):
            # rows: (key, value, timestamp, headers)
            offsets += o
            keys += map(_key, r)
            values += map(_value, r)
            timestamps += map(_timestamp, r)
    if key_decoder is not None and value_decoder is not None:  # in message order, key then value
        pairs = [(key_decoder(k), value_decoder(v)) for k, v in zip(keys, values)]
        keys, values = list(map(_key, pairs)), list(map(_value, pairs))
    elif key_decoder is not None:
        keys = list(map(key_decoder, keys))
    elif value_decoder is not None:
        values = list(map(value_decoder, values))
    return MessageChunk.from_columns(topic, partition, offsets, keys, values, timestamps)


#: `FetcherGroup._fetch_result`'s outcomes besides an answer: the
#: partitions went to the leader finder / try again after the backoff.
_LOST = object()
_RETRY = object()


class _Fetch:
    """One multifetch of a fetch loop, run as a task of its own so that the
    next fetch can be sent before the last one's messages are decoded and
    handed over: ``infos`` / ``offsets`` say what it asked for."""

    __slots__ = ("_done", "_error", "_response", "infos", "offsets")

    def __init__(self, infos: list[PartitionTopicInfo], offsets: list[int]) -> None:
        self.infos = infos
        self.offsets = offsets
        self._done = trio.Event()
        self._response: Any = None
        self._error: Exception | None = None

    async def run(self, consumer: TrioSimpleConsumer, requests: list[FetchRequest], max_wait_ms: int, min_bytes: int, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """``nursery.start`` it: started once the request is written."""
        started = False

        def sent() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        try:
            self._response = await consumer.multifetch_sent(requests, max_wait_ms, min_bytes, sent)
        except Exception as exc:  # raised by result(), in the fetch loop
            self._error = exc
        finally:
            self._done.set()
        sent()  # it failed before its request was written

    async def result(self) -> Any:
        """The `MultiFetchResponse` (waits for it); raises what the fetch raised."""
        await self._done.wait()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._response


class FetcherGroup:
    """The fetch loops of one rebalance generation. ``await
    nursery.start(group.run)``; cancel the nursery's scope to stop every
    loop (connections are closed on the way out)."""

    def __init__(self, core: FetcherOwner, infos: list[PartitionTopicInfo], generation: int) -> None:
        self.core = core
        self.infos = infos
        self.generation = generation
        config = core.config
        self._max_bytes = config.fetch_message_max_bytes
        self._max_wait_ms = config.fetch_wait_max_ms
        self._min_bytes = config.fetch_min_bytes
        self._backoff = config.refresh_leader_backoff_ms / 1000.0
        self._nursery: trio.Nursery | None = None
        self._lost: list[PartitionTopicInfo] = []
        self._lost_event = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetch until cancelled: one loop per leader broker, plus the leader
        finder for partitions without one.

        Args:
            task_status: ``nursery.start``'s status; started once every
                partition without an offset has one.
        """
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            by_leader: dict[tuple[int, str, int], list[PartitionTopicInfo]] = {}
            for info in self.infos:
                if info.leader is None:
                    self._lost.append(info)
                else:
                    by_leader.setdefault(info.leader, []).append(info)
            for leader, infos in by_leader.items():
                # Returns once the partitions without an offset have one
                # (auto.offset.reset), so a rebalance ends with every start
                # offset fixed.
                await nursery.start(self._fetch_loop, leader, infos)
            nursery.start_soon(self._leader_finder)
            if self._lost:
                self._lost_event.set()
            task_status.started()

    # ------------------------------------------------------------ leader finder

    def _hand_to_finder(self, infos: list[PartitionTopicInfo]) -> None:
        self._lost.extend(infos)
        self._lost_event.set()

    def _lose(self, infos: list[PartitionTopicInfo]) -> None:
        """Forget the partitions' leader and look for it again."""
        for info in infos:
            info.leader = None
        self._hand_to_finder(infos)

    async def _leader_finder(self) -> None:
        first = True
        while True:
            await self._lost_event.wait()
            if not first or any(i.leader is not None for i in self._lost):
                await trio.sleep(self._backoff)
            first = False
            self._lost_event = trio.Event()
            lost, self._lost = self._lost, []
            try:
                leaders = await self.core.find_leaders([i.key for i in lost])
            except KafkaError as exc:
                log.warning("looking up partition leaders failed: %s", exc)
                leaders = {}
            found: dict[tuple[int, str, int], list[PartitionTopicInfo]] = {}
            for info in lost:
                leader = leaders.get(info.key)
                if leader is None:
                    self._lost.append(info)
                else:
                    info.leader = leader
                    found.setdefault(leader, []).append(info)
            assert self._nursery is not None
            for leader, infos in found.items():
                log.info("fetching %s from broker %d (%s:%d)", ", ".join(f"{i.topic}-{i.partition}" for i in infos), *leader)
                self._nursery.start_soon(self._fetch_loop, leader, infos)
            if self._lost:
                log.debug("no leader yet for %s", ", ".join(f"{i.topic}-{i.partition}" for i in self._lost))
                self._lost_event.set()

    # ------------------------------------------------------------ fetching

    async def _fetch_loop(self, leader: tuple[int, str, int], infos: list[PartitionTopicInfo], task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        core = self.core
        broker_id, host, port = leader
        infos = list(infos)
        assert self._nursery is not None
        async with trio.open_nursery() as conn_nursery:
            consumer = TrioSimpleConsumer(
                host,
                port,
                so_timeout_ms=core.config.socket_timeout_ms,
                client_id=core.config.client_id,
                config=core.config.security,
                isolation_level=core.config.isolation_level,
                ssl_context=getattr(core, "ssl_context", None),
                statistics=getattr(core, "fetch_statistics", None),
            )
            consumer.attach(conn_nursery)
            try:
                await self._reset_offsets(consumer, infos)
            except AuthenticationError:
                pass  # the fetch loop below raises it again and reports it
            except Exception as exc:  # retried by the fetch loop below
                log.debug("initial offset lookup on broker %d failed: %s", broker_id, exc)
            task_status.started()
            try:
                await self._fetch_until_done(consumer, broker_id, infos)
            except AuthenticationError as exc:
                # Never retried (the same credentials fail the same way):
                # the streams of these partitions raise it to the application.
                log.error("fetcher for broker %d (%s:%d) cannot authenticate: %s", broker_id, host, port, exc)
                for index in dict.fromkeys(info.stream_index for info in infos):
                    await core.deliver(index, exc)
            except Exception:
                log.exception("fetcher for broker %d failed; looking for leaders again", broker_id)
                self._lose(infos)
            finally:
                with trio.CancelScope(shield=True):
                    await consumer.aclose()
                conn_nursery.cancel_scope.cancel()

    async def _start_fetch(self, nursery: trio.Nursery, consumer: TrioSimpleConsumer, infos: list[PartitionTopicInfo], offsets: list[int]) -> _Fetch:
        """Send a multifetch; returns once its request is written (or it failed)."""
        fetch = _Fetch(list(infos), offsets)
        requests = [FetchRequest(i.topic, i.partition, o, self._max_bytes) for i, o in zip(fetch.infos, offsets)]
        await nursery.start(fetch.run, consumer, requests, self._max_wait_ms, self._min_bytes)
        return fetch

    async def _fetch_until_done(self, consumer: TrioSimpleConsumer, broker_id: int, infos: list[PartitionTopicInfo]) -> None:
        error: Exception | None = None
        async with trio.open_nursery() as nursery:  # for the fetch sent ahead
            try:
                await self._fetch_partitions(nursery, consumer, broker_id, infos)
            except Exception as exc:  # raised below as itself, not inside an ExceptionGroup
                error = exc
            finally:
                nursery.cancel_scope.cancel()
        if error is not None:
            raise error

    async def _fetch_partitions(self, nursery: trio.Nursery, consumer: TrioSimpleConsumer, broker_id: int, infos: list[PartitionTopicInfo]) -> None:
        """Fetch ``infos`` from one broker until none is left to fetch
        there (each handed to the leader finder or stopped by an error the
        stream reports), one multifetch in flight, the next one sent ahead
        when the last came back whole (`_send_ahead`)."""
        ahead: _Fetch | None = None
        while infos:
            outcome = await self._fetch_result(nursery, consumer, broker_id, infos, ahead)
            ahead = None
            if outcome is _LOST:
                return
            if outcome is _RETRY:
                continue
            fetch, response = outcome
            # Where each partition goes on: the offset after its last complete
            # batch (the batch headers say; the same as after decoding it).
            ends = [fetched_position(ms.buffer, offset) if ms.buffer and not ms.error_code else offset for offset, ms in zip(fetch.offsets, response)]
            live = {id(i) for i in infos}
            ahead = await self._send_ahead(nursery, consumer, live, fetch, ends, response)
            keep: list[PartitionTopicInfo] = []
            for info, offset, end, message_set in zip(fetch.infos, fetch.offsets, ends, response):
                if id(info) not in live:
                    continue  # sent ahead before the partition stopped being fetched: dropped
                if info.fetch_offset != offset or await self._handle_partition(consumer, broker_id, info, end, message_set):
                    keep.append(info)  # (an offset that moved since the fetch was sent: fetched again)
            infos = keep
            await trio.lowlevel.checkpoint()

    async def _fetch_result(self, nursery: trio.Nursery, consumer: TrioSimpleConsumer, broker_id: int, infos: list[PartitionTopicInfo], ahead: _Fetch | None) -> Any:
        """The next multifetch's answer: the one sent ahead, else one sent
        now (after starting the partitions without an offset).

        Returns:
            ``(fetch, response)``; `_LOST` when the broker cannot serve
            these partitions any more (they went to the leader finder);
            `_RETRY` after a failed fetch's backoff.

        Raises:
            AuthenticationError: never retried (`_fetch_loop` hands it to
                the streams).
        """
        try:
            if ahead is None:
                await self._reset_offsets(consumer, infos)
                ahead = await self._start_fetch(nursery, consumer, infos, [i.fetch_offset for i in infos])
            return ahead, await ahead.result()
        except AuthenticationError:
            raise
        except (KafkaConnectionError, KafkaTimeoutError, ProtocolError) as exc:
            log.warning("fetching from broker %d failed (%s); looking for leaders again", broker_id, exc)
            self._lose(infos)
            return _LOST
        except BrokerResponseError as exc:
            if exc.invalid_metadata:
                self._lose(infos)
                return _LOST
            log.warning("fetch from broker %d failed: %s; retrying in %s s", broker_id, exc, self._backoff)
            await trio.sleep(self._backoff)
            return _RETRY

    async def _send_ahead(self, nursery: trio.Nursery, consumer: TrioSimpleConsumer, live: set[int], fetch: _Fetch, ends: list[int], response: Any) -> _Fetch | None:
        """Ask for what follows now, so that the broker reads it while this
        answer is decoded and handed over: when every partition still
        fetched came back without an error and with complete batches or
        nothing (a first batch larger than the fetch size comes back
        again). Returns the fetch sent, or None."""
        now = [(i, o, e, ms) for i, o, e, ms in zip(fetch.infos, fetch.offsets, ends, response) if id(i) in live]
        if not now or not all(not ms.error_code and (e > o or not ms.buffer) for _, o, e, ms in now):
            return None
        return await self._start_fetch(nursery, consumer, [i for i, *_ in now], [e if i.fetch_offset == o else i.fetch_offset for i, o, e, _ in now])

    async def _handle_partition(self, consumer: TrioSimpleConsumer, broker_id: int, info: PartitionTopicInfo, end: int, message_set: Any) -> bool:
        """Act on one partition's part of a multifetch answer (its messages,
        or its error; see the module docstring).

        Returns:
            Whether this broker goes on fetching the partition.
        """
        code = message_set.error_code
        if code == _NO_ERROR:
            return await self._deliver(info, end, message_set)
        if code == OFFSET_OUT_OF_RANGE:
            try:
                await self._reset_offset(consumer, info, "OffsetOutOfRange")
            except (KafkaConnectionError, KafkaTimeoutError):
                pass  # the next multifetch reports it
            return True
        if message_set.error is not None and message_set.error.invalid_metadata:
            log.info("%s-%d: %s from broker %d; looking for its leader", info.topic, info.partition, message_set.error.name, broker_id)
            self._lose([info])
            return False
        log.warning("%s-%d: fetch error %s; retrying", info.topic, info.partition, message_set.error)
        await trio.sleep(self._backoff)
        return True

    async def _deliver(self, info: PartitionTopicInfo, end: int, message_set: Any) -> bool:
        """Decode a partition's messages and queue them for its stream; a
        batch that cannot be read (too large, corrupt, a failing decoder) is
        queued as the stream's error instead.

        Returns:
            Whether the partition goes on being fetched (not after an error).
        """
        if not message_set.buffer:
            return True
        core = self.core
        try:
            chunk = decode_chunk(info, message_set, core.key_decoder, core.value_decoder)
        except (MessageSizeTooLargeError, CorruptRecordError) as exc:
            log.error("%s-%d: %s; the partition is not fetched until the next rebalance", info.topic, info.partition, exc)
            await core.deliver(info.stream_index, exc)
            return False
        except Exception as exc:  # a decoder failed
            log.error("%s-%d: decoding at offset %d failed: %r", info.topic, info.partition, info.fetch_offset, exc)
            await core.deliver(info.stream_index, exc)
            return False
        if chunk.offsets:
            info.fetch_offset = max(end, chunk.offsets[-1] + 1)
            await core.deliver(info.stream_index, (self.generation, chunk))
        elif end > info.fetch_offset:
            info.fetch_offset = end  # only control batches / skipped records
        return True

    async def _reset_offsets(self, consumer: TrioSimpleConsumer, infos: list[PartitionTopicInfo]) -> None:
        """Start the partitions without an offset per ``auto.offset.reset``:
        the first alone (it opens the connection, and an error stops there
        as it did when they went one by one), the others with their
        ListOffsets requests in flight together; the first error is raised
        (as itself) and stops the rest."""
        todo = [info for info in infos if info.fetch_offset < 0]
        if not todo:
            return
        await self._reset_offset(consumer, todo[0], "no committed offset")
        errors: list[Exception] = []
        async with trio.open_nursery() as nursery:

            async def reset(info: PartitionTopicInfo) -> None:
                try:
                    await self._reset_offset(consumer, info, "no committed offset")
                except Exception as exc:
                    errors.append(exc)
                    nursery.cancel_scope.cancel()

            for info in todo[1:]:
                nursery.start_soon(reset, info)
        if errors:
            raise errors[0]

    async def _reset_offset(self, consumer: TrioSimpleConsumer, info: PartitionTopicInfo, why: str) -> None:
        reset = self.core.config.auto_offset_reset
        when = OffsetRequest.EARLIEST_TIME if reset == "smallest" else OffsetRequest.LATEST_TIME
        offsets = await consumer.get_offsets_before(info.topic, info.partition, when, 1)
        new = offsets[0] if offsets else 0
        level = logging.INFO if info.fetch_offset < 0 else logging.WARNING
        log.log(
            level,
            "%s-%d: %s at offset %d; auto.offset.reset=%s -> offset %d",
            info.topic,
            info.partition,
            why,
            info.fetch_offset,
            reset,
            new,
        )
        info.fetch_offset = new
        self.core.reset_consumed(info.key, new)


__all__ = ["FetcherGroup", "FetcherOwner", "PartitionTopicInfo", "decode_chunk"]
