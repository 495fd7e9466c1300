"""WriteTxnMarkers (key 27) on a partition leader (KIP-98).

A transaction coordinator ending a transaction asks the leader of each of
its partitions to append a COMMIT or ABORT control batch for the producer
(`kclient.protocol.records.control.build_end_txn_marker_batch`, stamped
with the coordinator epoch). The log's transaction state then completes
the transaction (`kclient.storage.Log.last_stable_offset`, the
``.txnindex`` of an abort). The answer is per producer, topic and
partition, with the error codes of Kafka's
``KafkaApis.handleWriteTxnMarkersRequest``:

- UNKNOWN_TOPIC_OR_PARTITION: the cluster has no such partition;
- NOT_LEADER_OR_FOLLOWER: this broker does not lead it;
- UNSUPPORTED_FOR_MESSAGE_FORMAT: the topic stores a message format
  below v2 (no control batch);
- INVALID_PRODUCER_EPOCH: the partition has seen a newer epoch of the
  producer (Kafka's ``ProducerAppendInfo.checkProducerEpoch``);
- NOT_ENOUGH_REPLICAS / NOT_ENOUGH_REPLICAS_AFTER_APPEND,
  REQUEST_TIMED_OUT: the marker is appended with ``acks=-1`` and waits
  for the ISR as a Produce would (up to the request timeout).

Each marker the ISR has is reported to the ``on_marker`` callbacks (the
group coordinator's pending transactional offsets on a
``__consumer_offsets`` partition, Kafka's ``handleTxnCompletion``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import trio

from kclient.clock import now_ms
from kclient.errors import (
    INVALID_PRODUCER_EPOCH,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    BrokerResponseError,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kclient.protocol.records.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch

if TYPE_CHECKING:
    from kclient.broker.metadata_cache import MetadataCache
    from kclient.broker.partition import Partition

log = logging.getLogger("kclient.broker")

#: How long a marker waits for its ISR by default (ms; Kafka's
#: ``request.timeout.ms`` default).
DEFAULT_MARKER_TIMEOUT_MS = 30_000

#: Told of a replicated marker: ``(topic, partition, producer id, COMMIT?)``.
MarkerCallback = Callable[[str, int, int, bool], None]


class WriteTxnMarkersApi:
    """Answers WriteTxnMarkers requests (see the module docstring).

    Args:
        partitions: The hosted partitions, ``(topic, partition) ->``
            `kclient.broker.partition.Partition` (the replica manager's).
        metadata_cache: The partitions the cluster has.
        format_magic: The stored message format (magic) of a topic.
        clock: The wall clock in ms (the markers' timestamps).
        timeout_ms: How long a marker waits for its ISR (ms).
        on_marker: Called with each marker the ISR has.
    """

    def __init__(
        self,
        partitions: Mapping[tuple[str, int], Partition],
        metadata_cache: MetadataCache,
        format_magic: Callable[[str], int],
        *,
        clock: Callable[[], int] = now_ms,
        timeout_ms: int = DEFAULT_MARKER_TIMEOUT_MS,
        on_marker: Sequence[MarkerCallback] = (),
    ) -> None:
        self.partitions = partitions
        self.metadata_cache = metadata_cache
        self.format_magic = format_magic
        self.clock = clock
        self.timeout_ms = timeout_ms
        self.on_marker = list(on_marker)

    async def write_txn_markers(self, header: RequestHeader, body: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        """WriteTxnMarkers v0-1: append each marker to each named partition
        this broker leads, then wait for the ISR.

        Args:
            header: The request header.
            body: The request.

        Returns:
            One result per marker, with an error code per partition.
        """
        deadline = trio.current_time() + self.timeout_ms / 1000.0
        waits: list[tuple[WritableTxnMarkerPartitionResult, Partition, int]] = []
        ends: list[tuple[int, bool]] = []  # (producer id, COMMIT?) of each entry of waits
        results = []
        for marker in body.markers:
            start = len(waits)
            results.append(self._append_marker(marker, waits))
            ends.extend([(marker.producer_id, bool(marker.transaction_result))] * (len(waits) - start))
        for (entry, part, required), (producer_id, committed) in zip(waits, ends):
            code = await part.wait_for_replication(required, deadline)
            if code != NONE:
                log.info("txn marker on %s-%d: error %d", part.topic, part.partition, code)
                entry.error_code = code
                continue
            for callback in self.on_marker:
                callback(part.topic, part.partition, producer_id, committed)
        return WriteTxnMarkersResponse(markers=results)

    def _append_marker(
        self, marker: WritableTxnMarker, waits: list[tuple[WritableTxnMarkerPartitionResult, Partition, int]]
    ) -> WritableTxnMarkerResult:
        """Append one producer's marker to its partitions; the appended ones
        join ``waits``."""
        control_type = COMMIT if marker.transaction_result else ABORT
        now = self.clock()
        topics = []
        for topic in marker.topics:
            entries = []
            for index in topic.partition_indexes:
                entry = WritableTxnMarkerPartitionResult(partition_index=index, error_code=NONE)
                part = self._leader(topic.name, index, entry, marker)
                if part is not None:
                    batch = build_end_txn_marker_batch(
                        EndTransactionMarker(control_type, marker.coordinator_epoch),
                        producer_id=marker.producer_id,
                        producer_epoch=marker.producer_epoch,
                        timestamp_ms=now,
                    )
                    if self._append(part, batch, now, entry):
                        waits.append((entry, part, part.log.log_end_offset))
                entries.append(entry)
            topics.append(WritableTxnMarkerTopicResult(name=topic.name, partitions=entries))
        return WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics)

    def _leader(self, topic: str, index: int, entry: WritableTxnMarkerPartitionResult, marker: WritableTxnMarker) -> Partition | None:
        """The partition if this broker leads it, its format has control
        batches and it saw no newer epoch of the marker's producer, else
        ``None`` with ``entry``'s error code set."""
        if self.metadata_cache.partition(topic, index) is None and (topic, index) not in self.partitions:
            entry.error_code = UNKNOWN_TOPIC_OR_PARTITION
            return None
        part = self.partitions.get((topic, index))
        if part is None or not part.is_leader:
            entry.error_code = NOT_LEADER_OR_FOLLOWER
            return None
        if self.format_magic(topic) < 2:
            entry.error_code = UNSUPPORTED_FOR_MESSAGE_FORMAT
            return None
        epoch = part.log.producer_state.epoch(marker.producer_id)
        if epoch is not None and marker.producer_epoch < epoch:
            log.info("txn marker on %s-%d: producer %d epoch %d is older than %d", topic, index, marker.producer_id, marker.producer_epoch, epoch)
            entry.error_code = INVALID_PRODUCER_EPOCH
            return None
        return part

    @staticmethod
    def _append(part: Partition, batch: bytes, now: int, entry: WritableTxnMarkerPartitionResult) -> bool:
        """Append the marker batch as the leader (``acks=-1``); False with
        ``entry``'s error code set if it was refused."""
        try:
            part.check_leader()
            part.check_min_isr(-1)
            part.append_records_to_leader(batch, now, None, validate_producer_state=False)
        except BrokerResponseError as exc:
            log.info("txn marker on %s-%d refused: %s", part.topic, part.partition, exc)
            entry.error_code = exc.code if exc.code is not None else UNKNOWN_SERVER_ERROR
            return False
        except Exception:
            log.exception("txn marker on %s-%d failed", part.topic, part.partition)
            entry.error_code = UNKNOWN_SERVER_ERROR
            return False
        return True


__all__ = ["DEFAULT_MARKER_TIMEOUT_MS", "MarkerCallback", "WriteTxnMarkersApi"]
