"""Metadata (key 3), versions 0-8. Source: ``MetadataRequest.json`` /
``MetadataResponse.json``. v1+ lets ``topics`` be null (all topics); v4+
carries ``allow_auto_topic_creation``; v7+ the partition leader epoch.
Version 9 is the first flexible one (not implemented)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, NullableString, String, Versions


@attrs.define(kw_only=True)
class MetadataRequestTopic:
    """An entry of ``MetadataRequest.topics``."""

    name: String = ""


@attrs.define(kw_only=True)
class MetadataRequest:
    """The Metadata request body, versions 0-8 (``MetadataRequest.json``)."""

    topics: list[MetadataRequestTopic] | None = attrs.Factory(list)
    allow_auto_topic_creation: Annotated[Bool, Versions("4+")] = True
    include_cluster_authorized_operations: Annotated[Bool, Versions("8+")] = False
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
    name: String = ""
    is_internal: Annotated[Bool, Versions("1+")] = False
    partitions: list[MetadataResponsePartition] = attrs.Factory(list)
    topic_authorized_operations: Annotated[Int32, Versions("8+")] = -2147483648


@attrs.define(kw_only=True)
class MetadataResponse:
    """The Metadata response body, versions 0-8 (``MetadataResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("3+")] = 0
    brokers: list[MetadataResponseBroker] = attrs.Factory(list)
    cluster_id: Annotated[NullableString, Versions("2+")] = None
    controller_id: Annotated[Int32, Versions("1+")] = -1
    topics: list[MetadataResponseTopic] = attrs.Factory(list)
    cluster_authorized_operations: Annotated[Int32, Versions("8+")] = -2147483648


METADATA = Api(
    key=3,
    name="Metadata",
    min_version=0,
    max_version=8,
    flexible_from=9,
    request_type=MetadataRequest,
    response_type=MetadataResponse,
)
