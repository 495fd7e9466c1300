"""OffsetForLeaderEpoch (key 23), versions 0-4. Source:
`OffsetForLeaderEpochRequest.json` / `OffsetForLeaderEpochResponse.json`;
see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_OffsetForLeaderEpoch) and
KIP-101.

For each partition and leader epoch, the end offset of that epoch (used to
detect log truncation). v1+ answers with the leader epoch (KIP-279); v2+
the request carries the current leader epoch for fencing and the response
the throttle time (KIP-320); v3+ the replica id: a follower's broker id,
-1 for a consumer, -2 (the default) for a "debugging" client allowed to
see offsets beyond the high watermark; v4 is the first flexible version
(KIP-482)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, String, Versions

#: `replica_id` of a consumer (not a follower broker).
CONSUMER_REPLICA_ID = -1

#: `replica_id` of a debugging client, the schema's default.
DEBUGGING_REPLICA_ID = -2


@attrs.define(kw_only=True)
class OffsetForLeaderPartition:
    """An entry of ``OffsetForLeaderTopic.partitions``."""

    partition: Int32 = 0
    current_leader_epoch: Annotated[Int32, Versions("2+")] = -1
    leader_epoch: Int32 = 0


@attrs.define(kw_only=True)
class OffsetForLeaderTopic:
    """An entry of ``OffsetForLeaderEpochRequest.topics``."""

    topic: String = ""
    partitions: list[OffsetForLeaderPartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetForLeaderEpochRequest:
    """The OffsetForLeaderEpoch request body, versions 0-4 (``OffsetForLeaderEpochRequest.json``)."""

    replica_id: Annotated[Int32, Versions("3+")] = -2
    topics: list[OffsetForLeaderTopic] = attrs.Factory(list)


@attrs.define(kw_only=True)
class EpochEndOffset:
    """An entry of ``OffsetForLeaderTopicResult.partitions``."""

    error_code: Int16 = 0
    partition: Int32 = 0
    leader_epoch: Annotated[Int32, Versions("1+")] = -1
    end_offset: Int64 = -1


@attrs.define(kw_only=True)
class OffsetForLeaderTopicResult:
    """An entry of ``OffsetForLeaderEpochResponse.topics``."""

    topic: String = ""
    partitions: list[EpochEndOffset] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetForLeaderEpochResponse:
    """The OffsetForLeaderEpoch response body, versions 0-4 (``OffsetForLeaderEpochResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("2+")] = 0
    topics: list[OffsetForLeaderTopicResult] = attrs.Factory(list)


OFFSET_FOR_LEADER_EPOCH = Api(
    key=23,
    name="OffsetForLeaderEpoch",
    min_version=0,
    max_version=4,
    flexible_from=4,
    request_type=OffsetForLeaderEpochRequest,
    response_type=OffsetForLeaderEpochResponse,
)
