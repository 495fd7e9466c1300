"""Partition offsets as an admin asks for them (Kafka's
``AdminClient.listOffsets`` with ``OffsetSpec.earliest()``, ``latest()`` or
``forTimestamp(ms)``): ListOffsets v1+ (KIP-79) to each partition's leader.

`kclient.client.admin.AdminClient` exposes `list_offsets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kclient.errors import NONE, UnknownTopicOrPartitionError, error_for_code
from kclient.protocol.messages import LIST_OFFSETS
from kclient.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic
from kclient.protocol.messages.offset_for_leader_epoch import CONSUMER_REPLICA_ID

if TYPE_CHECKING:
    from kclient.client.cluster import Cluster

__all__ = ["EARLIEST", "LATEST", "list_offsets"]

#: The log end offset (ListOffsets timestamp -1).
LATEST = -1
#: The log start offset (ListOffsets timestamp -2).
EARLIEST = -2

TopicPartition = tuple[str, int]


def _by_leader(cluster: Cluster, partitions: list[TopicPartition]) -> dict[int, list[TopicPartition]]:
    """The partitions grouped by leader, from the cluster's metadata.

    Raises:
        UnknownTopicOrPartitionError: A partition does not exist or has no
            leader.
    """
    md = cluster.metadata
    out: dict[int, list[TopicPartition]] = {}
    for topic, partition in partitions:
        leader = next((p.leader for p in md.partitions_for(topic) if p.partition == partition), -1)
        if leader < 0:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist or has no leader")
        out.setdefault(leader, []).append((topic, partition))
    return out


async def list_offsets(cluster: Cluster, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Each partition's offset at a time, asked of its leader.

    Args:
        cluster: The client's cluster view (its metadata is refreshed for
            the topics asked about).
        query: ``{(topic, partition): timestamp}``, the timestamp in ms
            since the epoch, or `LATEST` (-1) / `EARLIEST` (-2).

    Returns:
        ``{(topic, partition): offset}``: for a timestamp, the first offset
        whose record's timestamp is at or after it, -1 when no record is
        that recent (Kafka's ``offsetsForTimes`` answers null then).

    Raises:
        UnknownTopicOrPartitionError: A partition does not exist.
        BrokerResponseError: A partition's other ListOffsets error.
        KafkaConnectionError: A leader could not be reached.
    """
    if not query:
        return {}
    await cluster.refresh_metadata(sorted({t for t, _ in query}), allow_auto_create=False)
    result: dict[TopicPartition, int] = {}
    for leader, partitions in _by_leader(cluster, sorted(query)).items():
        conn = await cluster.broker_connection(leader)
        topics: dict[str, list[ListOffsetsPartition]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(ListOffsetsPartition(partition_index=partition, timestamp=query[(topic, partition)]))
        body = ListOffsetsRequest(replica_id=CONSUMER_REPLICA_ID, isolation_level=0, topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])
        response: ListOffsetsResponse = await conn.request(LIST_OFFSETS, body, version=conn.version_for(LIST_OFFSETS, floor=1))
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != NONE:
                    raise error_for_code(p.error_code)(f"ListOffsets of {t.name}-{p.partition_index}")
                result[(t.name, p.partition_index)] = p.offset
    return result
