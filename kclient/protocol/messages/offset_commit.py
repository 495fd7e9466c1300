"""OffsetCommit (key 8), versions 0-9. Source: `OffsetCommitRequest.json` /
`OffsetCommitResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_OffsetCommit).

v0 committed to ZooKeeper; v1 adds the generation and member id and a
per-partition commit timestamp (v1 only); v2-4 carry a group-level
retention time instead (KIP-211 removed it in v5); v3+ the throttle time;
v6+ the committed leader epoch (KIP-320); v7+ the static member's
`group_instance_id` (KIP-345). Version 8 is the first flexible one
(KIP-482); v9 has the v8 layout and is the first usable with the new
consumer group protocol (KIP-848), where `generation_id_or_member_epoch`
carries the member epoch instead of the generation."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, NullableString, String, Versions


@attrs.define(kw_only=True)
class OffsetCommitRequestPartition:
    """An entry of ``OffsetCommitRequestTopic.partitions``."""

    partition_index: Int32 = 0
    committed_offset: Int64 = 0
    committed_leader_epoch: Annotated[Int32, Versions("6+")] = -1
    commit_timestamp: Annotated[Int64, Versions("1")] = -1
    committed_metadata: NullableString = None


@attrs.define(kw_only=True)
class OffsetCommitRequestTopic:
    """An entry of ``OffsetCommitRequest.topics``."""

    name: String = ""
    partitions: list[OffsetCommitRequestPartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetCommitRequest:
    """The OffsetCommit request body, versions 0-9 (``OffsetCommitRequest.json``)."""

    group_id: String = ""
    generation_id_or_member_epoch: Annotated[Int32, Versions("1+")] = -1
    member_id: Annotated[String, Versions("1+")] = ""
    group_instance_id: Annotated[NullableString, Versions("7+")] = None
    retention_time_ms: Annotated[Int64, Versions("2-4")] = -1
    topics: list[OffsetCommitRequestTopic] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetCommitResponsePartition:
    """An entry of ``OffsetCommitResponseTopic.partitions``."""

    partition_index: Int32 = 0
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class OffsetCommitResponseTopic:
    """An entry of ``OffsetCommitResponse.topics``."""

    name: String = ""
    partitions: list[OffsetCommitResponsePartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetCommitResponse:
    """The OffsetCommit response body, versions 0-9 (``OffsetCommitResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("3+")] = 0
    topics: list[OffsetCommitResponseTopic] = attrs.Factory(list)


OFFSET_COMMIT = Api(
    key=8,
    name="OffsetCommit",
    min_version=0,
    max_version=9,
    flexible_from=8,
    request_type=OffsetCommitRequest,
    response_type=OffsetCommitResponse,
)
