"""The transaction coordinator's I/O after a transaction ends (Kafka's
``TransactionMarkerChannelManager``): WriteTxnMarkers to each partition's
leader, then the CompleteCommit / CompleteAbort record.

For each transaction whose PrepareCommit / PrepareAbort is written (by
EndTxn, a timed-out abort, or found on loading a partition) one task:

1. routes the partitions still without a marker by leader
   (`kclient.broker.txn.markers.route_markers`; partitions without a
   leader leave the transaction);
2. sends each leader one WriteTxnMarkers request (key 27, v0) over the
   inter-broker listener, all at once, this broker included (it answers
   itself the same way), and hands each answer to
   `TransactionCoordinator.on_markers_answered`; a lost connection or a
   broker that does not serve WriteTxnMarkers (yet) counts as a retriable
   error for its partitions;
3. after ``retry_backoff_ms`` sends the partitions to retry again, until
   none is left or the coordinator cancels (a newer producer or
   coordinator epoch); while a round gets no marker through (a leader
   down) the pause doubles, up to ``retry_backoff_max_ms``, and a broker's
   failures are logged at INFO once per outage (then at DEBUG);
4. writes the completion record (`TransactionCoordinator.completion_write`),
   again while `TransactionCoordinator.after_completion_write` asks.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from kclient.broker.task_host import TaskHost
from kclient.broker.txn.coordinator import TransactionResult, TxnMarkers
from kclient.broker.txn.markers import TxnMarkerEntry, drop_partitions_without_leader, route_markers
from kclient.broker.txn.metadata import TopicPartition
from kclient.broker.txn.transaction_coordinator import PendingWrite, TransactionCoordinator
from kclient.errors import NONE, NOT_LEADER_OR_FOLLOWER, KafkaError
from kclient.net.connection import BrokerConnection
from kclient.protocol.messages.write_txn_markers import (
    WRITE_TXN_MARKERS,
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

if TYPE_CHECKING:
    from kclient.broker.metadata_cache import MetadataCache

log = logging.getLogger("kclient.broker.txn")

#: The WriteTxnMarkers version sent.
MARKERS_VERSION = 0


def marker_request(entry: TxnMarkerEntry) -> WriteTxnMarkersRequest:
    """The WriteTxnMarkers request of one marker entry.

    Args:
        entry: The entry (one producer's partitions led by one broker).

    Returns:
        The request.
    """
    topics: dict[str, list[int]] = {}
    for topic, partition in entry.partitions:
        topics.setdefault(topic, []).append(partition)
    marker = WritableTxnMarker(
        producer_id=entry.producer_id,
        producer_epoch=entry.producer_epoch,
        transaction_result=entry.result == TransactionResult.COMMIT,
        topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in sorted(topics.items())],
        coordinator_epoch=entry.coordinator_epoch,
    )
    return WriteTxnMarkersRequest(markers=[marker])


def marker_errors(entry: TxnMarkerEntry, response: WriteTxnMarkersResponse) -> dict[TopicPartition, int]:
    """Each partition's error code in a WriteTxnMarkers answer (a partition
    the answer leaves out: NOT_LEADER_OR_FOLLOWER, retried).

    Args:
        entry: The entry sent.
        response: The answer.

    Returns:
        ``{(topic, partition): error code}`` for every partition of ``entry``.
    """
    errors: dict[TopicPartition, int] = dict.fromkeys(entry.partitions, NOT_LEADER_OR_FOLLOWER)
    for result in response.markers:
        if result.producer_id != entry.producer_id:
            continue
        for t in result.topics:
            for p in t.partitions:
                if (t.name, p.partition_index) in errors:
                    errors[(t.name, p.partition_index)] = p.error_code
    return errors


class TransactionMarkerChannel(TaskHost):
    """Writes the markers and the completion of ended transactions (see
    the module docstring). Run it with ``await nursery.start(channel.run)``.

    Args:
        coordinator: The transaction coordinator.
        metadata_cache: The partitions' leaders and the brokers' addresses.
        append: Appends a ``__transaction_state`` record (acks=all) and
            gives the append's error code.
        listener: The inter-broker listener name (None: the first).
        broker_id: This broker's id (the connections' client id).
        retry_backoff_ms: The first pause before sending failed markers
            again (ms); it doubles while no marker gets through, up to
            ``retry_backoff_max_ms``.
        retry_backoff_max_ms: The longest pause between retries (ms).
        request_timeout_ms: Connect and request timeout (ms).
    """

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        metadata_cache: MetadataCache,
        append: Callable[[PendingWrite], Awaitable[int]],
        *,
        listener: str | None,
        broker_id: int,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        request_timeout_ms: int = 30000,
    ) -> None:
        self.coordinator = coordinator
        self.metadata_cache = metadata_cache
        self.append = append
        self.listener = listener
        self.broker_id = broker_id
        self.backoff = retry_backoff_ms / 1000
        self.backoff_max = max(retry_backoff_max_ms, retry_backoff_ms) / 1000
        #: Brokers whose last WriteTxnMarkers failed (logged once per outage).
        self.unreachable: set[int] = set()
        self.timeout_ms = request_timeout_ms
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        super().__init__()

    def write_markers(self, markers: TxnMarkers, coordinator_epoch: int) -> None:
        """Start writing ``markers`` (ignored once the channel stopped)."""
        if self._nursery is not None:
            self._nursery.start_soon(self._complete, markers, coordinator_epoch)

    def _leader_of(self, tp: TopicPartition) -> int | None:
        meta = self.metadata_cache.partition(*tp)
        return None if meta is None else meta.leader

    async def _complete(self, markers: TxnMarkers, epoch: int) -> None:
        try:
            if await self._write_all(markers, epoch):
                await self._write_completion(markers, epoch)
        except Exception:
            log.exception("transaction %r: writing its markers failed", markers.transactional_id)

    async def _write_all(self, markers: TxnMarkers, epoch: int) -> bool:
        """Send the markers until every partition has one; False when
        cancelled."""
        pending = set(markers.partitions)
        delay = self.backoff
        while pending:
            before = len(pending)
            routing = route_markers(markers, pending, epoch, self._leader_of)
            _, coordinator_epoch, md = self.coordinator.manager.get(markers.transactional_id)
            if md is None or coordinator_epoch != epoch:
                return False
            pending -= routing.no_leader
            if drop_partitions_without_leader(md, routing):
                return True
            answers = await self._send_all(routing.by_broker)
            for broker, entry in routing.by_broker.items():
                progress = self.coordinator.on_markers_answered(markers, epoch, answers[broker])
                if progress.cancelled:
                    return False
                pending = (pending - set(entry.partitions)) | set(progress.retry)
                if progress.complete:
                    return True
            if pending:
                await trio.sleep(delay)
                # back off while nothing gets through (a leader down)
                delay = self.backoff if len(pending) < before else min(delay * 2, self.backoff_max)
        return True

    async def _write_completion(self, markers: TxnMarkers, epoch: int) -> None:
        while True:
            write = self.coordinator.completion_write(markers, epoch)
            if write is None:
                return
            error = await self.append(write)
            if not self.coordinator.after_completion_write(write, error):
                if error == NONE:
                    log.debug("transaction %r: %s written", markers.transactional_id, markers.complete.txn_state.kafka_name)
                return
            await trio.sleep(self.backoff)

    async def _send_all(self, by_broker: dict[int, TxnMarkerEntry]) -> dict[int, dict[TopicPartition, int]]:
        """Send each broker its entry at the same time (a dead broker does
        not hold up the others); each broker's partition errors."""
        answers: dict[int, dict[TopicPartition, int]] = {}

        async def one(broker: int, entry: TxnMarkerEntry) -> None:
            answers[broker] = await self._send(broker, entry)

        async with trio.open_nursery() as nursery:
            for broker, entry in by_broker.items():
                nursery.start_soon(one, broker, entry)
        return answers

    async def _send(self, broker: int, entry: TxnMarkerEntry) -> dict[TopicPartition, int]:
        retriable = dict.fromkeys(entry.partitions, NOT_LEADER_OR_FOLLOWER)
        node = self.metadata_cache.brokers.get(broker)
        ep = None if node is None else (node.endpoint(self.listener) or node.endpoint(None))
        if ep is None:
            return retriable
        address = (ep.host, ep.port)
        try:
            conn = self._connections.get(address)
            if conn is None or conn.closed:
                assert self._nursery is not None
                conn = await BrokerConnection.connect(
                    self._nursery,
                    *address,
                    client_id=f"txn-markers-{self.broker_id}",
                    connect_timeout_ms=self.timeout_ms,
                    request_timeout_ms=self.timeout_ms,
                )
                self._connections[address] = conn
            response = await conn.request(WRITE_TXN_MARKERS, marker_request(entry), version=MARKERS_VERSION)
        except KafkaError as exc:
            if broker in self.unreachable:
                log.debug("WriteTxnMarkers to broker %d failed again (%s)", broker, exc)
            else:
                self.unreachable.add(broker)
                log.info("WriteTxnMarkers to broker %d failed (%s); retrying with backoff", broker, exc)
            self._connections.pop(address, None)
            return retriable
        if broker in self.unreachable:
            self.unreachable.discard(broker)
            log.info("WriteTxnMarkers to broker %d answered again", broker)
        return marker_errors(entry, response)


__all__ = ["MARKERS_VERSION", "TransactionMarkerChannel", "marker_errors", "marker_request"]
