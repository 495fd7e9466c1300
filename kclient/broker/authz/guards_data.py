"""The authorization checks of the data, transaction and inter-broker APIs,
as Kafka's ``KafkaApis`` makes them: a guard narrows the request to what
the principal may touch, calls the handler, and adds Kafka's error for the
rest (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), or answers the whole request with
the error when the check is on the request itself.

- Produce: WRITE on each topic; transactional records need WRITE on the
  transactional id (else every partition fails).
- Fetch: READ on each topic; a follower's fetch needs CLUSTER_ACTION.
- ListOffsets: DESCRIBE on each topic. OffsetForLeaderEpoch: CLUSTER_ACTION
  (brokers), else DESCRIBE on each topic.
- Metadata: the topics the principal may DESCRIBE (a listing of all topics
  silently leaves the others out; named ones get TOPIC_AUTHORIZATION_FAILED);
  a topic to auto-create needs CREATE on the cluster or the topic.
- InitProducerId: WRITE on the transactional id; without one, IDEMPOTENT_WRITE
  on the cluster or WRITE on some topic (KIP-679).
- AddPartitionsToTxn / AddOffsetsToTxn / EndTxn: WRITE on the
  transactional id, plus WRITE on each topic / READ on the group.
- DescribeTransactions / ListTransactions: DESCRIBE on each transactional id.
- LeaderAndIsr, StopReplica, UpdateMetadata: CLUSTER_ACTION;
  WriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster.

Pure: no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import attrs

from kclient.acl import AclOperation, ResourceType
from kclient.broker.authz.check import Call, Check, Guard
from kclient.broker.close_connection import CloseConnection
from kclient.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    OPERATION_NOT_ATTEMPTED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from kclient.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kclient.protocol.messages.describe_transactions import DescribeTransactionsState
from kclient.protocol.messages.end_txn import EndTxnResponse
from kclient.protocol.messages.fetch import FetchableTopicResponse, PartitionData
from kclient.protocol.messages.init_producer_id import InitProducerIdResponse
from kclient.protocol.messages.leader_and_isr import LeaderAndIsrResponse
from kclient.protocol.messages.list_offsets import ListOffsetsPartitionResponse, ListOffsetsTopicResponse
from kclient.protocol.messages.metadata import MetadataResponseTopic
from kclient.protocol.messages.offset_for_leader_epoch import EpochEndOffset, OffsetForLeaderTopicResult
from kclient.protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from kclient.protocol.messages.stop_replica import StopReplicaResponse
from kclient.protocol.messages.update_metadata import UpdateMetadataResponse
from kclient.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)

__all__ = ["DATA_GUARDS", "has_transactional_records"]

#: Where a v2 record batch keeps its magic byte and attributes.
_MAGIC_AT = 16
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21
_TRANSACTIONAL = 0x10
_LENGTH = struct.Struct(">i")


def has_transactional_records(records: Any) -> bool:
    """Whether a partition's record batches (v2) include a transactional one.

    Args:
        records: The partition's records (bytes-like or None).

    Returns:
        True if a batch has the transactional attribute.
    """
    data = memoryview(records) if records else memoryview(b"")
    pos = 0
    while pos + _ATTRIBUTES_AT + 2 <= len(data):
        if data[pos + _MAGIC_AT] == 2 and _ATTRIBUTES.unpack_from(data, pos + _ATTRIBUTES_AT)[0] & _TRANSACTIONAL:
            return True
        (length,) = _LENGTH.unpack_from(data, pos + 8)
        if length <= 0:
            break
        pos += 12 + length
    return False


# ---------------------------------------------------------------- Produce, Fetch, ListOffsets


def _produce_error(topic: Any, code: int) -> TopicProduceResponse:
    return TopicProduceResponse(
        name=topic.name, partition_responses=[PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1) for p in topic.partition_data]
    )


async def produce(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """Produce: WRITE on the transactional id (transactional records), WRITE
    on each topic. With ``acks=0`` a refusal has no answer to carry it, so
    the connection is closed (raises `CloseConnection`), as Kafka's
    ``KafkaApis.handleProduceRequest`` does; the allowed topics' records are
    appended first."""
    transactional = any(has_transactional_records(p.records) for t in body.topic_data for p in t.partition_data)
    if transactional and not (body.transactional_id and check.transactional_id(AclOperation.WRITE, body.transactional_id)):
        if body.acks == 0:
            raise CloseConnection("a Produce with acks=0 was refused: TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        return ProduceResponse(responses=[_produce_error(t, TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for t in body.topic_data])
    allowed, denied = check.split(body.topic_data, lambda t: t.name, AclOperation.WRITE)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, topic_data=allowed)) if allowed else ProduceResponse()
    if body.acks == 0:
        raise CloseConnection("a Produce with acks=0 was refused: TOPIC_AUTHORIZATION_FAILED")
    response.responses.extend(_produce_error(t, TOPIC_AUTHORIZATION_FAILED) for t in denied)
    return response


def _fetch_error(topic: Any) -> FetchableTopicResponse:
    return FetchableTopicResponse(
        topic=topic.topic,
        partitions=[PartitionData(partition_index=p.partition, error_code=TOPIC_AUTHORIZATION_FAILED, high_watermark=-1) for p in topic.partitions],
    )


async def fetch(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """Fetch: CLUSTER_ACTION for a follower, READ on each topic for a consumer."""
    if body.replica_id >= 0:
        if check.cluster(AclOperation.CLUSTER_ACTION):
            return await call(body)
        allowed: list[Any] = []
        denied: list[Any] = list(body.topics)
    else:
        allowed, denied = check.split(body.topics, lambda t: t.topic, AclOperation.READ)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, topics=allowed))
    response.responses.extend(_fetch_error(t) for t in denied)
    return response


async def list_offsets(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """ListOffsets: DESCRIBE on each topic."""
    allowed, denied = check.split(body.topics, lambda t: t.name, AclOperation.DESCRIBE)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, topics=allowed))
    response.topics.extend(
        ListOffsetsTopicResponse(
            name=t.name, partitions=[ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]
        )
        for t in denied
    )
    return response


async def offset_for_leader_epoch(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """OffsetForLeaderEpoch: CLUSTER_ACTION (brokers), else DESCRIBE on each topic."""
    if check.cluster(AclOperation.CLUSTER_ACTION, log_denied=False):
        return await call(body)
    allowed, denied = check.split(body.topics, lambda t: t.topic, AclOperation.DESCRIBE)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, topics=allowed))
    response.topics.extend(
        OffsetForLeaderTopicResult(
            topic=t.topic, partitions=[EpochEndOffset(partition=p.partition, error_code=TOPIC_AUTHORIZATION_FAILED, leader_epoch=-1, end_offset=-1) for p in t.partitions]
        )
        for t in denied
    )
    return response


# ---------------------------------------------------------------- Metadata


def metadata_guard(topic_exists: Callable[[str], bool], auto_create_enabled: bool) -> Guard:
    """The Metadata guard.

    Args:
        topic_exists: Whether the broker knows a topic (a named topic that
            does not exist is auto-created only with CREATE).
        auto_create_enabled: The broker's ``auto.create.topics.enable``.

    Returns:
        The guard.
    """

    async def metadata(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
        if body.topics is None or (header.api_version == 0 and not body.topics):
            response = await call(body)
            response.topics = [t for t in response.topics if t.name is None or check.topic(AclOperation.DESCRIBE, t.name, log_denied=False)]
        else:
            named = [t for t in body.topics if t.name is not None]
            allowed, denied = check.split(named, lambda t: t.name, AclOperation.DESCRIBE)
            missing = [t for t in allowed if not topic_exists(t.name)]
            cannot_create: list[Any] = []
            if body.allow_auto_topic_creation and auto_create_enabled and missing and not check.cluster(AclOperation.CREATE, log_denied=False):
                cannot_create = [t for t in missing if not check.topic(AclOperation.CREATE, t.name)]
            kept = [t for t in body.topics if t not in denied and t not in cannot_create]
            response = await call(attrs.evolve(body, topics=kept))
            response.topics.extend(MetadataResponseTopic(error_code=TOPIC_AUTHORIZATION_FAILED, name=t.name) for t in cannot_create + denied)
        _authorized_operations(check, body, response)
        return response

    return metadata


def _authorized_operations(check: Check, body: Any, response: Any) -> None:
    """Fill ``topic_authorized_operations`` / ``cluster_authorized_operations`` when asked (KIP-430)."""
    if body.include_topic_authorized_operations:
        for topic in response.topics:
            if topic.error_code == 0 and topic.name is not None:
                topic.topic_authorized_operations = check.authorized_operations(ResourceType.TOPIC, topic.name)
    if body.include_cluster_authorized_operations and check.cluster(AclOperation.DESCRIBE, log_denied=False):
        response.cluster_authorized_operations = check.authorized_operations(ResourceType.CLUSTER, "kafka-cluster")


# ---------------------------------------------------------------- transactions


async def init_producer_id(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """InitProducerId: WRITE on the transactional id, else IDEMPOTENT_WRITE or WRITE on some topic."""
    if body.transactional_id:
        if not check.transactional_id(AclOperation.WRITE, body.transactional_id):
            return InitProducerIdResponse(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not check.cluster(AclOperation.IDEMPOTENT_WRITE, log_denied=False) and not check.authorizer.authorize_by_resource_type(
        check.context, AclOperation.WRITE, ResourceType.TOPIC
    ):
        check.cluster(AclOperation.IDEMPOTENT_WRITE)  # logs the denial
        return InitProducerIdResponse(error_code=CLUSTER_AUTHORIZATION_FAILED)
    return await call(body)


def _txn_topic_results(topics: list[Any], code_of: Callable[[str], int]) -> list[AddPartitionsToTxnTopicResult]:
    return [
        AddPartitionsToTxnTopicResult(
            name=t.name, results_by_partition=[AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code_of(t.name)) for p in t.partitions]
        )
        for t in topics
    ]


async def add_partitions_to_txn(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """AddPartitionsToTxn v0-3: WRITE on the transactional id, then on each topic
    (any denied topic: the others are OPERATION_NOT_ATTEMPTED)."""
    topics = body.v3_and_below_topics
    if not check.transactional_id(AclOperation.WRITE, body.v3_and_below_transactional_id):
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_txn_topic_results(topics, lambda _: TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    _, denied = check.split(topics, lambda t: t.name, AclOperation.WRITE)
    if not denied:
        return await call(body)
    names = {t.name for t in denied}
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=_txn_topic_results(topics, lambda n: TOPIC_AUTHORIZATION_FAILED if n in names else OPERATION_NOT_ATTEMPTED)
    )


async def add_offsets_to_txn(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """AddOffsetsToTxn: WRITE on the transactional id, READ on the group."""
    if not check.transactional_id(AclOperation.WRITE, body.transactional_id):
        return AddOffsetsToTxnResponse(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not check.group(AclOperation.READ, body.group_id):
        return AddOffsetsToTxnResponse(error_code=GROUP_AUTHORIZATION_FAILED)
    return await call(body)


async def end_txn(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """EndTxn: WRITE on the transactional id."""
    if not check.transactional_id(AclOperation.WRITE, body.transactional_id):
        return EndTxnResponse(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return await call(body)


async def describe_transactions(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """DescribeTransactions: DESCRIBE on each transactional id."""
    allowed, denied = check.split(body.transactional_ids, lambda t: t, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, transactional_ids=allowed))
    response.transaction_states.extend(
        DescribeTransactionsState(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=t, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1)
        for t in denied
    )
    return response


async def list_transactions(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """ListTransactions: only the transactional ids the principal may DESCRIBE."""
    response = await call(body)
    response.transaction_states = [
        s for s in response.transaction_states if check.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, s.transactional_id, log_denied=False)
    ]
    return response


# ---------------------------------------------------------------- inter-broker


def _cluster_action(error_response: Callable[[Any], Any]) -> Guard:
    async def guard(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
        if check.cluster(AclOperation.CLUSTER_ACTION):
            return await call(body)
        return error_response(body)

    return guard


def _markers_error(body: Any) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(
        markers=[
            WritableTxnMarkerResult(
                producer_id=m.producer_id,
                topics=[
                    WritableTxnMarkerTopicResult(
                        name=t.name, partitions=[WritableTxnMarkerPartitionResult(partition_index=p, error_code=CLUSTER_AUTHORIZATION_FAILED) for p in t.partition_indexes]
                    )
                    for t in m.topics
                ],
            )
            for m in body.markers
        ]
    )


async def write_txn_markers(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """WriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster."""
    if check.cluster(AclOperation.ALTER, log_denied=False) or check.cluster(AclOperation.CLUSTER_ACTION):
        return await call(body)
    return _markers_error(body)


#: API key -> guard (Metadata's needs the metadata cache: `metadata_guard`).
DATA_GUARDS: dict[int, Guard] = {
    0: produce,
    1: fetch,
    2: list_offsets,
    4: _cluster_action(lambda body: LeaderAndIsrResponse(error_code=CLUSTER_AUTHORIZATION_FAILED)),
    5: _cluster_action(lambda body: StopReplicaResponse(error_code=CLUSTER_AUTHORIZATION_FAILED)),
    6: _cluster_action(lambda body: UpdateMetadataResponse(error_code=CLUSTER_AUTHORIZATION_FAILED)),
    22: init_producer_id,
    23: offset_for_leader_epoch,
    24: add_partitions_to_txn,
    25: add_offsets_to_txn,
    26: end_txn,
    27: write_txn_markers,
    65: describe_transactions,
    66: list_transactions,
}
