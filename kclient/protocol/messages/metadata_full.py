"""Metadata (key 3), versions 0-12, as the bundled broker serves it.
Source: ``MetadataRequest.json`` / ``MetadataResponse.json``; see the Kafka
protocol guide (https://kafka.apache.org/protocol#The_Messages_Metadata).

`kclient.protocol.messages.metadata.METADATA` (versions 0-8, topic names
always strings) is what kclient's clients send and read; `METADATA_FULL`
adds what the broker answers newer clients with: v9 is the first flexible
version (KIP-482), v10+ carries topic ids (KIP-516: the consumer group
protocol of KIP-848 names topics by id, so its members need them), v11
drops the cluster authorized operations, v12 lets a topic be asked for by
id alone (its name null)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, NullableString, NullableVersions, String, Uuid, Versions


@attrs.define(kw_only=True)
class MetadataFullRequestTopic:
    """An entry of ``MetadataRequest.topics``."""

    topic_id: Annotated[Uuid, Versions("10+")] = None
    name: Annotated[NullableString, NullableVersions("10+")] = ""


@attrs.define(kw_only=True)
class MetadataFullRequest:
    """The Metadata request body, versions 0-12 (``MetadataRequest.json``)."""

    topics: list[MetadataFullRequestTopic] | None = attrs.Factory(list)
    allow_auto_topic_creation: Annotated[Bool, Versions("4+")] = True
    include_cluster_authorized_operations: Annotated[Bool, Versions("8-10")] = False
    include_topic_authorized_operations: Annotated[Bool, Versions("8+")] = False


@attrs.define(kw_only=True)
class MetadataFullResponseBroker:
    """An entry of ``MetadataResponse.brokers``."""

    node_id: Int32 = 0
    host: String = ""
    port: Int32 = 0
    rack: Annotated[NullableString, Versions("1+")] = None


@attrs.define(kw_only=True)
class MetadataFullResponsePartition:
    """An entry of ``MetadataFullResponseTopic.partitions``."""

    error_code: Int16 = 0
    partition_index: Int32 = 0
    leader_id: Int32 = 0
    leader_epoch: Annotated[Int32, Versions("7+")] = 0
    replica_nodes: list[Int32] = attrs.Factory(list)
    isr_nodes: list[Int32] = attrs.Factory(list)
    offline_replicas: Annotated[list[Int32], Versions("5+")] = attrs.Factory(list)


@attrs.define(kw_only=True)
class MetadataFullResponseTopic:
    """An entry of ``MetadataResponse.topics``."""

    error_code: Int16 = 0
    name: Annotated[NullableString, NullableVersions("12+")] = ""
    topic_id: Annotated[Uuid, Versions("10+")] = None
    is_internal: Annotated[Bool, Versions("1+")] = False
    partitions: list[MetadataFullResponsePartition] = attrs.Factory(list)
    topic_authorized_operations: Annotated[Int32, Versions("8+")] = -2147483648


@attrs.define(kw_only=True)
class MetadataFullResponse:
    """The Metadata response body, versions 0-12 (``MetadataResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("3+")] = 0
    brokers: list[MetadataFullResponseBroker] = attrs.Factory(list)
    cluster_id: Annotated[NullableString, Versions("2+")] = None
    controller_id: Annotated[Int32, Versions("1+")] = -1
    topics: list[MetadataFullResponseTopic] = attrs.Factory(list)
    cluster_authorized_operations: Annotated[Int32, Versions("8-10")] = -2147483648


METADATA_FULL = Api(
    key=3,
    name="Metadata",
    min_version=0,
    max_version=12,
    flexible_from=9,
    request_type=MetadataFullRequest,
    response_type=MetadataFullResponse,
)
