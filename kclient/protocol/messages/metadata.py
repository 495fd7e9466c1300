"""Metadata (key 3). Source: ``MetadataRequest.json`` /
``MetadataResponse.json``; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_Metadata). One set of
message classes serves two schemas:

* `METADATA`, versions 0-8, what kclient's clients send and read (topic
  names always strings). v1+ lets ``topics`` be null (all topics); v4+
  carries ``allow_auto_topic_creation``; v5+ the offline replicas; v7+ the
  partition leader epoch; v8+ the authorized operations (KIP-430).
* `METADATA_FULL`, versions 0-12, what the bundled broker serves and what
  the clients use when they need topic ids: v9 is the first flexible
  version (KIP-482), v10+ carries topic ids (KIP-516: the consumer group
  protocol of KIP-848 names topics by id, so its members need them), v11
  drops the cluster authorized operations, v12 lets a topic be asked for by
  id alone (its name null in the request and, for an unknown id, in the
  response). Versions 0-8 encode exactly as `METADATA` does.

A topic name is a ``string`` before its nullable versions (request v10+,
response v12+): there ``None`` cannot be encoded, and any other name
encodes as a ``nullable_string`` would."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, NullableString, NullableVersions, String, Uuid, Versions


@attrs.define(kw_only=True)
class MetadataRequestTopic:
    """An entry of ``MetadataRequest.topics``."""

    topic_id: Annotated[Uuid, Versions("10+")] = None
    name: Annotated[NullableString, NullableVersions("10+")] = ""


@attrs.define(kw_only=True)
class MetadataRequest:
    """The Metadata request body (``MetadataRequest.json``)."""

    topics: list[MetadataRequestTopic] | None = attrs.Factory(list)
    allow_auto_topic_creation: Annotated[Bool, Versions("4+")] = True
    include_cluster_authorized_operations: Annotated[Bool, Versions("8-10")] = False
    include_topic_authorized_operations: Annotated[Bool, Versions("8+")] = False


@attrs.define(kw_only=True)
class MetadataResponseBroker:
    """An entry of ``MetadataResponse.brokers``."""

    node_id: Int32 = 0
    host: String = ""
    port: Int32 = 0
    rack: Annotated[NullableString, Versions("1+")] = None


@attrs.define(kw_only=True)
class MetadataResponsePartition:
    """An entry of ``MetadataResponseTopic.partitions``."""

    error_code: Int16 = 0
    partition_index: Int32 = 0
    leader_id: Int32 = 0
    leader_epoch: Annotated[Int32, Versions("7+")] = 0
    replica_nodes: list[Int32] = attrs.Factory(list)
    isr_nodes: list[Int32] = attrs.Factory(list)
    offline_replicas: Annotated[list[Int32], Versions("5+")] = attrs.Factory(list)


@attrs.define(kw_only=True)
class MetadataResponseTopic:
    """An entry of ``MetadataResponse.topics``."""

    error_code: Int16 = 0
    name: Annotated[NullableString, NullableVersions("12+")] = ""
    topic_id: Annotated[Uuid, Versions("10+")] = None
    is_internal: Annotated[Bool, Versions("1+")] = False
    partitions: list[MetadataResponsePartition] = attrs.Factory(list)
    topic_authorized_operations: Annotated[Int32, Versions("8+")] = -2147483648


@attrs.define(kw_only=True)
class MetadataResponse:
    """The Metadata response body (``MetadataResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("3+")] = 0
    brokers: list[MetadataResponseBroker] = attrs.Factory(list)
    cluster_id: Annotated[NullableString, Versions("2+")] = None
    controller_id: Annotated[Int32, Versions("1+")] = -1
    topics: list[MetadataResponseTopic] = attrs.Factory(list)
    cluster_authorized_operations: Annotated[Int32, Versions("8-10")] = -2147483648


METADATA = Api(
    key=3,
    name="Metadata",
    min_version=0,
    max_version=8,
    flexible_from=9,
    request_type=MetadataRequest,
    response_type=MetadataResponse,
)

METADATA_FULL = Api(
    key=3,
    name="Metadata",
    min_version=0,
    max_version=12,
    flexible_from=9,
    request_type=MetadataRequest,
    response_type=MetadataResponse,
)
