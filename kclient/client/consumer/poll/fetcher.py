"""The poll consumer's fetches (Kafka's consumer ``Fetcher``): one Fetch
at a time per leader broker for the fetchable partitions that have no data
buffered or in flight, sent through a `TrioSimpleConsumer` per broker (the
SimpleConsumer's fetch path: request building, pipelining, moved-leader
lookup), the answers buffered until ``poll`` takes their records, at most
``max.poll.records`` per call.

Fetches run as tasks of the consumer's nursery, so the next records are on
their way while the application handles the last ones. A buffered answer
is dropped when its partition was revoked, paused or ``seek``-ed since the
fetch was sent (its fetch offset is no longer the position). Per partition
error: ``OFFSET_OUT_OF_RANGE`` resets the position per
``auto.offset.reset`` (or raises `OffsetOutOfRangeError` with ``none``);
leadership errors and lost connections refresh the metadata and the
partition is fetched again from its new leader; other errors are raised by
``poll``.

Under ``isolation.level=read_committed`` the fetches stop at the last
stable offset and the records of aborted transactions are left out
(KIP-98, `ByteBufferMessageSet.visible_buffer`); as with control batches,
the position still moves past them (`ByteBufferMessageSet.next_offset`),
so a consumer never stops in front of a transaction marker.
"""

from __future__ import annotations

import logging
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs
import trio

from kclient.client.cluster import Cluster
from kclient.client.consumer.message_set import ByteBufferMessageSet
from kclient.client.consumer.poll.records import consumer_records
from kclient.client.consumer.poll.subscription import EARLIEST, LATEST, SubscriptionState
from kclient.client.consumer.poll.types import ConsumerRecord, TopicPartition
from kclient.client.consumer.simple import FetchRequest, TrioSimpleConsumer
from kclient.client.consumer.statistics import FetchStatistics
from kclient.config import ConsumerConfig
from kclient.errors import OFFSET_OUT_OF_RANGE, KafkaError, OffsetOutOfRangeError

log = logging.getLogger("kclient.consumer")


@attrs.define
class CompletedFetch:
    """One partition's answer, waiting for ``poll``.

    Attributes:
        tp: The partition.
        message_set: What the broker returned.
        records: Its records, decoded when ``poll`` first takes from it.
        index: How many of ``records`` were handed out.
        position: The partition's position once they were (a different
            one means a ``seek``: the rest is dropped).
    """

    tp: TopicPartition
    message_set: ByteBufferMessageSet
    records: list[ConsumerRecord] | None = None
    index: int = 0
    position: int = -1


class Fetcher:
    """Fetches for the poll consumer (on its trio loop).

    Args:
        cluster: Metadata (partition leaders).
        config: ``max.partition.fetch.bytes``, ``fetch.max.wait.ms``,
            ``fetch.min.bytes``, ``request.timeout.ms``, ``client.id`` and
            the security settings.
        subscriptions: The positions.
        offset_reset: ``auto.offset.reset`` (``earliest``, ``latest``,
            ``none``).
        decoders: ``(key decoder, value decoder)`` (None keeps bytes).
        wake: Called when an answer arrives (wakes a waiting ``poll``).
    """

    def __init__(
        self,
        cluster: Cluster,
        config: ConsumerConfig,
        subscriptions: SubscriptionState,
        offset_reset: str,
        decoders: tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None],
        wake: Callable[[], None],
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.subscriptions = subscriptions
        self.offset_reset = offset_reset
        self.key_decoder, self.value_decoder = decoders
        self._wake = wake
        self._ssl_context: ssl.SSLContext | None = cluster.settings.ssl_context
        self._clients: dict[int, TrioSimpleConsumer] = {}
        #: Partitions of the Fetch requests in flight, by broker.
        self._in_flight: dict[int, set[TopicPartition]] = {}
        self._completed: deque[CompletedFetch] = deque()
        self.metadata_needed = False
        #: What the fetches brought, per partition (shared by every broker's client).
        self.statistics = FetchStatistics()

    # ------------------------------------------------------------ sending

    def _buffered(self) -> set[TopicPartition]:
        busy = {c.tp for c in self._completed}
        for tps in self._in_flight.values():
            busy |= tps
        return busy

    def send_fetches(self, nursery: trio.Nursery) -> int:
        """Start a Fetch for each leader broker without one in flight,
        for its fetchable partitions with nothing buffered.

        Args:
            nursery: Runs the fetch tasks.

        Returns:
            How many Fetch requests were started.
        """
        busy = self._buffered()
        wanted = [tp for tp in self.subscriptions.fetchable() if tp not in busy]
        if not wanted:
            return 0
        leaders = self.cluster.metadata.leaders(tp.key for tp in wanted)
        by_node: dict[int, tuple[str, int, list[FetchRequest]]] = {}
        for tp in wanted:
            leader = leaders.get(tp.key)
            if leader is None:
                self.metadata_needed = True
                continue
            node, host, port = leader
            if node in self._in_flight:
                continue
            position = self.subscriptions.state(tp).position
            assert position is not None
            by_node.setdefault(node, (host, port, []))[2].append(FetchRequest(tp.topic, tp.partition, position, self.config.fetch_message_max_bytes))
        for node, (host, port, requests) in by_node.items():
            self._in_flight[node] = {TopicPartition(r.topic, r.partition) for r in requests}
            nursery.start_soon(self._fetch, nursery, node, host, port, requests)
        return len(by_node)

    def _client(self, nursery: trio.Nursery, node: int, host: str, port: int) -> TrioSimpleConsumer:
        client = self._clients.get(node)
        if client is None or (client.host, client.port) != (host, port):
            config = self.config
            client = TrioSimpleConsumer(
                host,
                port,
                config.socket_timeout_ms,
                client_id=config.client_id,
                config=config.security,
                ssl_context=self._ssl_context,
                statistics=self.statistics,
                isolation_level=config.isolation_level,
            )
            client.attach(nursery)
            self._clients[node] = client
        return client

    async def _fetch(self, nursery: trio.Nursery, node: int, host: str, port: int, requests: list[FetchRequest]) -> None:
        config = self.config
        try:
            client = self._client(nursery, node, host, port)
            sets = await client.multifetch(requests, max_wait_ms=config.fetch_wait_max_ms, min_bytes=config.fetch_min_bytes)
        except KafkaError as exc:
            log.info("fetch from broker %d (%s:%d) failed: %s; looking the leaders up again", node, host, port, exc)
            self.metadata_needed = True
            await self._drop_client(node)
            await trio.sleep(config.retry_backoff_ms / 1000)
            sets = None
        finally:
            self._in_flight.pop(node, None)
        for message_set in sets or ():
            tp = TopicPartition(message_set.topic, message_set.partition)
            if self.subscriptions.is_assigned(tp):
                self._completed.append(CompletedFetch(tp, message_set))
        self._wake()

    async def _drop_client(self, node: int) -> None:
        client = self._clients.pop(node, None)
        if client is not None:
            await client.aclose()

    # ------------------------------------------------------------ handing out

    @property
    def has_completed(self) -> bool:
        """Answers are buffered."""
        return bool(self._completed)

    def fetched_records(self, max_records: int) -> list[ConsumerRecord]:
        """Take up to ``max_records`` buffered records, advancing the
        positions past them.

        Args:
            max_records: ``max.poll.records``.

        Returns:
            The records, partition by partition in arrival order.

        Raises:
            OffsetOutOfRangeError: a position out of range with
                ``auto.offset.reset=none``.
            BrokerResponseError: another partition error a refetch cannot
                fix.
            MessageSizeTooLargeError, CorruptRecordError: the partition's
                next batch cannot be read (its position stays).
        """
        out: list[ConsumerRecord] = []
        while len(out) < max_records and self._completed:
            fetch = self._completed[0]
            if not self._usable(fetch):
                self._completed.popleft()
                continue
            assert fetch.records is not None
            take = fetch.records[fetch.index : fetch.index + max_records - len(out)]
            fetch.index += len(take)
            out += take
            state = self.subscriptions.state(fetch.tp)
            if take:
                state.position = take[-1].offset + 1
                state.leader_epoch = take[-1].leader_epoch
            if fetch.index >= len(fetch.records):
                self._completed.popleft()
                # past control batches and records compacted away
                state.position = max(state.position or 0, fetch.message_set.next_offset)
            fetch.position = state.position or 0
        return out

    def _usable(self, fetch: CompletedFetch) -> bool:
        """Whether ``fetch`` still has records to hand out (decoding it on
        first use); handles its error."""
        subs = self.subscriptions
        if not subs.is_assigned(fetch.tp):
            return False
        state = subs.state(fetch.tp)
        if fetch.records is None:
            message_set = fetch.message_set
            if state.paused or not state.has_valid_position or state.position != message_set.start_offset:
                return False
            if message_set.error_code:
                self._partition_error(fetch.tp, message_set)
                return False
            if message_set.high_watermark >= 0:
                state.high_watermark = message_set.high_watermark
            fetch.records = consumer_records(message_set, self.key_decoder, self.value_decoder)
            fetch.position = message_set.start_offset
        elif state.paused or state.position != fetch.position:
            return False
        return fetch.index < len(fetch.records) or fetch.message_set.next_offset > (state.position or 0)

    def _partition_error(self, tp: TopicPartition, message_set: ByteBufferMessageSet) -> None:
        error = message_set.error
        assert error is not None
        if message_set.error_code == OFFSET_OUT_OF_RANGE:
            if self.offset_reset == "none":
                raise OffsetOutOfRangeError(f"{tp}: offset {message_set.start_offset} is out of range and auto.offset.reset=none")
            log.info("%s: offset %d is out of range; resetting to the %s offset", tp, message_set.start_offset, self.offset_reset)
            self.subscriptions.request_reset(tp, EARLIEST if self.offset_reset == EARLIEST else LATEST)
            return
        if error.retriable or error.invalid_metadata:
            log.debug("%s: %s; fetching again after a metadata refresh", tp, error)
            self.metadata_needed = True
            return
        raise error

    def clear(self) -> None:
        """Drop every buffered answer and the statistics of partitions no
        longer assigned (after a rebalance or ``assign``)."""
        self._completed.clear()
        assigned = {tp.key for tp in self.subscriptions.assigned()}
        for key in self.statistics.snapshot().partitions:
            if key not in assigned:
                self.statistics.forget(*key)

    async def aclose(self) -> None:
        """Close the fetch connections."""
        for node in list(self._clients):
            await self._drop_client(node)


__all__ = ["CompletedFetch", "Fetcher"]
