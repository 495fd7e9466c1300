"""What the Spark driver asks the cluster: which partitions a subscription
covers, who leads them, and their offsets (earliest, latest, or by time).

Each call runs one short trio loop with its own connections
(`kclient.client.cluster.Cluster`), so the object holds no thread or socket
between calls and can live in Spark's long-running driver-side Python
worker. Offsets come from ListOffsets v1+ (KIP-79), sent to each partition's
leader; a retriable error is retried `fetchOffset.numRetries` times,
`fetchOffset.retryIntervalMs` apart, after a metadata refresh.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import trio

from kclient.client.cluster import Cluster, request_metadata
from kclient.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kclient.net.settings import ConnectionSettings
from kclient.protocol.messages import LIST_OFFSETS
from kclient.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic
from kclient.protocol.messages.offset_for_leader_epoch import CONSUMER_REPLICA_ID
from kclient.protocol.records.read_committed import READ_COMMITTED, isolation_level_code
from kclient.spark.offsets import TopicPartition, describe
from kclient.spark.options import EARLIEST, LATEST, ReadOptions, Subscription

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["ClusterView"]


class ClusterView:
    """Blocking queries of partitions and offsets for one read's options.

    Args:
        options: the read's checked options (bootstrap brokers, client id,
            timeouts and retry settings are used).
    """

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def _run(self, fn: Callable[[Cluster], Awaitable[T]]) -> T:
        opts = self.options

        async def main() -> T:
            # The error is raised after the nursery closes, so the caller
            # gets the KafkaError itself, not an exception group.
            error: Exception | None = None
            async with trio.open_nursery() as nursery:
                settings = ConnectionSettings.with_timeout(opts.request_timeout_ms, client_id=opts.client_id, security=opts.security)
                cluster = Cluster.open(nursery, list(opts.bootstrap), settings, retry_backoff_ms=opts.retry_backoff_ms)
                try:
                    result = await fn(cluster)
                except Exception as exc:
                    error = exc
                finally:
                    with trio.CancelScope(shield=True):
                        await cluster.aclose()
                    nursery.cancel_scope.cancel()
            if error is not None:
                raise error
            return result

        return trio.run(main)

    def partitions(self, subscription: Subscription | None = None) -> dict[TopicPartition, tuple[str, int] | None]:
        """The topic-partitions the subscription covers now, with their
        leader's `(host, port)` (None while a partition has no leader).

        A subscribed topic that does not exist yet contributes nothing (a
        stream picks it up once it appears). Topics the cluster marks
        internal (`__consumer_offsets`, ...) never match a pattern.

        Raises:
            UnknownTopicOrPartitionError: an `assign`ed partition does not
                exist.
            NoBrokersAvailableError: no bootstrap broker answered.
        """
        sub = subscription or self.options.subscription

        async def query(cluster: Cluster) -> dict[TopicPartition, tuple[str, int] | None]:
            names = None if sub.pattern is not None else list(sub.topics or ()) + list(sub.assign or {})
            metadata = await request_metadata(await cluster.any_connection(), names, min_version=1)
            internal = metadata.internal_topics
            regex = re.compile(sub.pattern) if sub.pattern is not None else None
            found: dict[TopicPartition, tuple[str, int] | None] = {}
            for topic, parts in metadata.topics.items():
                if regex is not None and (topic in internal or not regex.fullmatch(topic)):
                    continue
                code = metadata.topic_errors.get(topic, 0)
                if code and code != UnknownTopicOrPartitionError.code:
                    raise error_for_code(code)(f"topic {topic!r}")
                for p in parts:
                    broker = metadata.brokers.get(p.leader)
                    found[(topic, p.partition)] = (broker.host, broker.port) if broker is not None else None
            if sub.assign is not None:
                wanted = {(t, p) for t, ps in sub.assign.items() for p in ps}
                missing = wanted - set(found)
                if missing:
                    raise UnknownTopicOrPartitionError(f"option 'assign' names partitions that do not exist: {describe(missing)}")
                found = {tp: found[tp] for tp in sorted(wanted)}
            return found

        return self._run(query)

    def list_offsets(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Offsets for `query`, which maps each topic-partition to a
        timestamp in ms since the epoch, or `EARLIEST` (-2) for the log start
        offset, or `LATEST` (-1) for the log end offset.

        Returns:
            The offset per topic-partition; for a timestamp, the earliest
                offset whose timestamp is at or after it, or -1 when no record is
                that recent.

        Raises:
            BrokerResponseError: a partition's error after the retries (e.g.
                `UnknownTopicOrPartitionError`).
            NoBrokersAvailableError: no broker answered.
        """
        if not query:
            return {}
        opts = self.options
        # read_committed: the latest offset is the last stable offset (KIP-98)
        isolation = isolation_level_code(opts.isolation_level)

        async def ask(cluster: Cluster) -> dict[TopicPartition, int]:
            result: dict[TopicPartition, int] = {}
            pending = dict(query)
            last_error: BaseException | None = None
            for attempt in range(opts.offset_retries + 1):
                if attempt:
                    await trio.sleep(opts.offset_retry_interval_ms / 1000)
                meta = await cluster.refresh_metadata(sorted({t for t, _ in pending}), allow_auto_create=False)
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in pending:
                    leader = next((p.leader for p in meta.partitions_for(tp[0]) if p.partition == tp[1]), -1)
                    by_leader.setdefault(leader, []).append(tp)
                failed: dict[TopicPartition, BaseException] = {}
                for leader, tps in by_leader.items():
                    if leader < 0:
                        for tp in tps:
                            failed[tp] = UnknownTopicOrPartitionError(f"{tp[0]}-{tp[1]} has no leader or does not exist")
                        continue
                    try:
                        conn = await cluster.broker_connection(leader)
                        version = conn.version_for(LIST_OFFSETS, floor=2 if isolation == READ_COMMITTED else 1)  # isolation_level: v2+
                        topics: dict[str, list[ListOffsetsPartition]] = {}
                        for t, p in tps:
                            topics.setdefault(t, []).append(ListOffsetsPartition(partition_index=p, timestamp=pending[(t, p)], current_leader_epoch=-1))
                        body = ListOffsetsRequest(
                            replica_id=CONSUMER_REPLICA_ID, isolation_level=isolation, topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()]
                        )
                        response: ListOffsetsResponse = await conn.request(LIST_OFFSETS, body, version=version)
                    except (KafkaConnectionError, KafkaTimeoutError) as exc:
                        for tp in tps:
                            failed[tp] = exc
                        continue
                    for lt in response.topics:
                        for lp in lt.partitions:
                            tp = (lt.name, lp.partition_index)
                            if lp.error_code:
                                failed[tp] = error_for_code(lp.error_code)(f"ListOffsets for {tp[0]}-{tp[1]}")
                            else:
                                result[tp] = lp.offset
                pending = {tp: pending[tp] for tp in failed}
                if not pending:
                    return result
                last_error = next(iter(failed.values()))
                retriable = all(getattr(e, "retriable", False) or isinstance(e, UnknownTopicOrPartitionError) for e in failed.values())
                if not retriable:
                    break
                log.info("ListOffsets failed for %s (%s); retrying", describe(failed), last_error)
            assert last_error is not None
            if isinstance(last_error, KafkaError):
                raise last_error
            raise KafkaError(str(last_error)) from last_error

        return self._run(ask)

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Log start offset of each topic-partition."""
        return self.list_offsets(dict.fromkeys(tps, EARLIEST))

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Log end offset (the high watermark for a consumer; under
        ``kafka.isolation.level=read_committed`` the last stable offset,
        KIP-98) of each topic-partition."""
        return self.list_offsets(dict.fromkeys(tps, LATEST))

