"""UpdateMetadata (key 6), versions 0-5, inter-broker (controller to broker).
Source: `UpdateMetadataRequest.json` / `UpdateMetadataResponse.json`; see
the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_UpdateMetadata).

The controller pushes partition states and live brokers to every broker's
metadata cache. v1+ lists each broker's endpoints (host, port, security
protocol) instead of one host and port; v2+ the broker rack; v3+ each
endpoint's listener name; v4+ offline replicas; v5+ groups partition
states by topic and carries the broker epoch (KIP-380). Version 6 is the
first flexible one (not implemented)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, NullableString, String, Versions


@attrs.define(kw_only=True)
class UpdateMetadataPartitionState:
    """An entry of ``UpdateMetadataRequest.ungrouped_partition_states``."""

    topic_name: Annotated[String, Versions("0-4")] = ""
    partition_index: Int32 = 0
    controller_epoch: Int32 = 0
    leader: Int32 = 0
    leader_epoch: Int32 = 0
    isr: list[Int32] = attrs.Factory(list)
    zk_version: Int32 = 0
    replicas: list[Int32] = attrs.Factory(list)
    offline_replicas: Annotated[list[Int32], Versions("4+")] = attrs.Factory(list)


@attrs.define(kw_only=True)
class UpdateMetadataTopicState:
    """An entry of ``UpdateMetadataRequest.topic_states``."""

    topic_name: String = ""
    partition_states: list[UpdateMetadataPartitionState] = attrs.Factory(list)


@attrs.define(kw_only=True)
class UpdateMetadataEndpoint:
    """An entry of ``UpdateMetadataBroker.endpoints``."""

    port: Int32 = 0
    host: String = ""
    listener: Annotated[String, Versions("3+")] = ""
    security_protocol: Int16 = 0


@attrs.define(kw_only=True)
class UpdateMetadataBroker:
    """An entry of ``UpdateMetadataRequest.live_brokers``."""

    id: Int32 = 0
    v0_host: Annotated[String, Versions("0")] = ""
    v0_port: Annotated[Int32, Versions("0")] = 0
    endpoints: Annotated[list[UpdateMetadataEndpoint], Versions("1+")] = attrs.Factory(list)
    rack: Annotated[NullableString, Versions("2+")] = None


@attrs.define(kw_only=True)
class UpdateMetadataRequest:
    """The UpdateMetadata request body, versions 0-5 (``UpdateMetadataRequest.json``)."""

    controller_id: Int32 = 0
    controller_epoch: Int32 = 0
    broker_epoch: Annotated[Int64, Versions("5+")] = -1
    ungrouped_partition_states: Annotated[list[UpdateMetadataPartitionState], Versions("0-4")] = attrs.Factory(list)
    topic_states: Annotated[list[UpdateMetadataTopicState], Versions("5+")] = attrs.Factory(list)
    live_brokers: list[UpdateMetadataBroker] = attrs.Factory(list)


@attrs.define(kw_only=True)
class UpdateMetadataResponse:
    """The UpdateMetadata response body, versions 0-5 (``UpdateMetadataResponse.json``)."""

    error_code: Int16 = 0


UPDATE_METADATA = Api(
    key=6,
    name="UpdateMetadata",
    min_version=0,
    max_version=5,
    flexible_from=6,
    request_type=UpdateMetadataRequest,
    response_type=UpdateMetadataResponse,
)
