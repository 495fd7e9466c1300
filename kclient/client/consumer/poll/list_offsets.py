"""Offsets by time from the partitions' leaders (ListOffsets v1+; Kafka
protocol guide, https://kafka.apache.org/protocol#The_Messages_ListOffsets;
KIP-79 for the time index): the log start (``EARLIEST_TIMESTAMP``, -2),
the log end (``LATEST_TIMESTAMP``, -1), or the earliest offset whose
timestamp is at least a given time (``offsets_for_times``).

One request per leader broker. Leadership errors (``NOT_LEADER_OR_FOLLOWER``,
``UNKNOWN_TOPIC_OR_PARTITION``, ``LEADER_NOT_AVAILABLE``...) and lost
connections refresh the metadata and are retried after ``retry.backoff.ms``
until the deadline; other errors are raised at once.

Under ``isolation.level=read_committed`` the requests are ListOffsets v2+
at isolation level 1 (KIP-98): the log end is then the last stable
offset, where a read_committed fetch stops.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import trio

from kclient.client.cluster import Cluster
from kclient.client.consumer.poll.types import OffsetAndTimestamp, TopicPartition
from kclient.errors import (
    NONE,
    BrokerResponseError,
    KafkaConnectionError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    error_for_code,
)
from kclient.protocol.messages import LIST_OFFSETS
from kclient.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from kclient.protocol.records.read_committed import READ_COMMITTED, READ_UNCOMMITTED

log = logging.getLogger("kclient.consumer")


class OffsetLookup:
    """ListOffsets for the poll consumer (on its trio loop).

    Args:
        cluster: Metadata and connections.
        retry_backoff_ms: Pause before a retry (ms).
        isolation_level: ``READ_UNCOMMITTED`` (0) or ``READ_COMMITTED`` (1,
            `kclient.protocol.records.read_committed`).
    """

    def __init__(self, cluster: Cluster, retry_backoff_ms: int, isolation_level: int = READ_UNCOMMITTED) -> None:
        self.cluster = cluster
        self.retry_backoff_ms = retry_backoff_ms
        self.isolation_level = isolation_level

    async def offsets(self, times: Mapping[TopicPartition, int], timeout: float) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Look offsets up by time.

        Args:
            times: ``{partition: timestamp}``, a time in ms since the epoch
                or -2 (log start) / -1 (log end).
            timeout: Longest wait, retries included (seconds).

        Returns:
            ``{partition: OffsetAndTimestamp}``; None for a partition with
            no record at or after the time asked for.

        Raises:
            KafkaTimeoutError: some partitions had no answer by the
                deadline.
            BrokerResponseError: a partition's error a retry cannot fix.
        """
        deadline = trio.current_time() + timeout
        pending = dict(times)
        result: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        while pending:
            last = await self._round(pending, result)
            if last is None:
                break
            if trio.current_time() + self.retry_backoff_ms / 1000 >= deadline:
                raise KafkaTimeoutError(f"ListOffsets for {', '.join(map(str, sorted(pending)))} did not complete: {last}")
            await trio.sleep(self.retry_backoff_ms / 1000)
            await self.cluster.refresh_metadata({tp.topic for tp in pending})
        return result

    async def _round(self, pending: dict[TopicPartition, int], result: dict[TopicPartition, OffsetAndTimestamp | None]) -> BaseException | None:
        """One request per leader of ``pending``; answered partitions move
        from ``pending`` to ``result``. Returns why some must be retried,
        or None."""
        metadata = self.cluster.metadata
        keys = [tp.key for tp in pending]
        leaders = metadata.leaders(keys)
        if len(leaders) < len(keys):
            metadata = await self.cluster.refresh_metadata({tp.topic for tp in pending}, allow_auto_create=False)
            leaders = metadata.leaders(keys)
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in pending:
            leader = leaders.get(tp.key)
            if leader is not None:
                by_node.setdefault(leader[0], []).append(tp)
        why: BaseException = LeaderNotAvailableError(f"no leader for {', '.join(str(tp) for tp in pending if tp.key not in leaders)}")
        for node, tps in by_node.items():
            try:
                await self._ask(node, tps, pending, result)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                why = exc
            except BrokerResponseError as exc:
                if not exc.retriable:
                    raise
                why = exc
        return why if pending else None

    async def _ask(self, node: int, tps: list[TopicPartition], pending: dict[TopicPartition, int], result: dict[TopicPartition, OffsetAndTimestamp | None]) -> None:
        conn = await self.cluster.broker_connection(node)
        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(ListOffsetsPartition(partition_index=tp.partition, timestamp=pending[tp], current_leader_epoch=-1))
        body = ListOffsetsRequest(replica_id=-1, isolation_level=self.isolation_level, topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        floor = 2 if self.isolation_level == READ_COMMITTED else 1  # isolation_level: v2+
        response: ListOffsetsResponse = await conn.request(LIST_OFFSETS, body, version=conn.version_for(LIST_OFFSETS, floor=floor))
        error: BrokerResponseError | None = None
        for topic in response.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition_index)
                if tp not in pending:
                    continue
                if part.error_code != NONE:
                    exc = error_for_code(part.error_code)(f"ListOffsets for {tp}")
                    if not exc.retriable:
                        raise exc
                    error = exc
                    continue
                del pending[tp]
                epoch = part.leader_epoch if part.leader_epoch >= 0 else None
                result[tp] = OffsetAndTimestamp(part.offset, part.timestamp, epoch) if part.offset >= 0 else None
        if error is not None:
            raise error


__all__ = ["OffsetLookup"]
