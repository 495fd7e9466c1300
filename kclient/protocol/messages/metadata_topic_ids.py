"""Metadata (key 3), versions 10-12: the versions that carry topic ids
(KIP-516). Source: ``MetadataRequest.json`` / ``MetadataResponse.json``;
see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_Metadata).

`kclient.protocol.messages.metadata.METADATA` stays at versions 0-8 (the
ones the bundled broker serves); a client that needs topic ids, such as
the poll consumer with ``group.protocol=consumer`` (KIP-848 assignments
name topics by id), sends `METADATA_TOPIC_IDS` itself, as
``OFFSET_FETCH_FULL`` is sent beside ``OFFSET_FETCH``. All three versions
are flexible (KIP-482); v11 drops the cluster authorized operations and
v12 lets a topic name be null (topics described by id)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, NullableString, NullableVersions, String, Uuid, Versions


@attrs.define(kw_only=True)
class MetadataTopicIdsRequestTopic:
    """An entry of ``MetadataRequest.topics`` (v10+)."""

    topic_id: Uuid = None
    name: NullableString = None


@attrs.define(kw_only=True)
class MetadataTopicIdsRequest:
    """The Metadata request body, versions 10-12 (``MetadataRequest.json``):
    ``topics`` None asks for every topic."""

    topics: list[MetadataTopicIdsRequestTopic] | None = None
    allow_auto_topic_creation: Bool = False
    include_cluster_authorized_operations: Annotated[Bool, Versions("8-10")] = False
    include_topic_authorized_operations: Bool = False


@attrs.define(kw_only=True)
class MetadataTopicIdsResponseBroker:
    """An entry of ``MetadataResponse.brokers``."""

    node_id: Int32 = 0
    host: String = ""
    port: Int32 = 0
    rack: NullableString = None


@attrs.define(kw_only=True)
class MetadataTopicIdsResponsePartition:
    """An entry of ``MetadataResponseTopic.partitions``."""

    error_code: Int16 = 0
    partition_index: Int32 = 0
    leader_id: Int32 = 0
    leader_epoch: Int32 = -1
    replica_nodes: list[Int32] = attrs.Factory(list)
    isr_nodes: list[Int32] = attrs.Factory(list)
    offline_replicas: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class MetadataTopicIdsResponseTopic:
    """An entry of ``MetadataResponse.topics``: the name (null at v12+ for
    an unknown topic asked by id) and the topic id (all zeros for an
    unknown topic asked by name)."""

    error_code: Int16 = 0
    name: Annotated[NullableString, NullableVersions("12+")] = ""
    topic_id: Uuid = None
    is_internal: Bool = False
    partitions: list[MetadataTopicIdsResponsePartition] = attrs.Factory(list)
    topic_authorized_operations: Int32 = -2147483648


@attrs.define(kw_only=True)
class MetadataTopicIdsResponse:
    """The Metadata response body, versions 10-12 (``MetadataResponse.json``)."""

    throttle_time_ms: Int32 = 0
    brokers: list[MetadataTopicIdsResponseBroker] = attrs.Factory(list)
    cluster_id: NullableString = None
    controller_id: Int32 = -1
    topics: list[MetadataTopicIdsResponseTopic] = attrs.Factory(list)
    cluster_authorized_operations: Annotated[Int32, Versions("8-10")] = -2147483648


METADATA_TOPIC_IDS = Api(
    key=3,
    name="Metadata",
    min_version=10,
    max_version=12,
    flexible_from=9,
    request_type=MetadataTopicIdsRequest,
    response_type=MetadataTopicIdsResponse,
)

__all__ = [
    "METADATA_TOPIC_IDS",
    "MetadataTopicIdsRequest",
    "MetadataTopicIdsRequestTopic",
    "MetadataTopicIdsResponse",
    "MetadataTopicIdsResponseBroker",
    "MetadataTopicIdsResponsePartition",
    "MetadataTopicIdsResponseTopic",
]
