"""ListOffsets (key 2), versions 0-5. Source: ``ListOffsetsRequest.json`` /
``ListOffsetsResponse.json``. v0 is the old getOffsetsBefore: it takes
``max_num_offsets`` and answers ``old_style_offsets`` (descending); v1+ takes
a timestamp (-1 latest, -2 earliest) and answers one offset and its
timestamp. Version 6 is the first flexible one (not implemented)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int8, Int16, Int32, Int64, String, Versions

#: Special ``timestamp`` values of a ListOffsets request: -1 asks for the
#: log end offset (latest), -2 for the log start offset (earliest), -3
#: (KIP-734) for the batch holding the largest timestamp.
LATEST_TIMESTAMP = -1

EARLIEST_TIMESTAMP = -2

MAX_TIMESTAMP = -3


@attrs.define(kw_only=True)
class ListOffsetsPartition:
    """An entry of ``ListOffsetsTopic.partitions``."""

    partition_index: Int32 = 0
    current_leader_epoch: Annotated[Int32, Versions("4+")] = -1
    timestamp: Int64 = 0
    max_num_offsets: Annotated[Int32, Versions("0")] = 1


@attrs.define(kw_only=True)
class ListOffsetsTopic:
    """An entry of ``ListOffsetsRequest.topics``."""

    name: String = ""
    partitions: list[ListOffsetsPartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ListOffsetsRequest:
    """The ListOffsets request body, versions 0-5 (``ListOffsetsRequest.json``)."""

    replica_id: Int32 = -1
    isolation_level: Annotated[Int8, Versions("2+")] = 0
    topics: list[ListOffsetsTopic] = attrs.Factory(list)

    @classmethod
    def for_partition(
        cls,
        topic: str,
        partition: int,
        timestamp: int,
        *,
        replica_id: int = -1,
        isolation_level: int = 0,
        current_leader_epoch: int = -1,
        max_num_offsets: int = 1,
    ) -> "ListOffsetsRequest":
        """A request for one partition (what a follower and a simple
        consumer send).

        Args:
            topic: The topic.
            partition: The partition index.
            timestamp: A timestamp in ms, or `LATEST_TIMESTAMP`,
                `EARLIEST_TIMESTAMP` or `MAX_TIMESTAMP`.
            replica_id: The follower's broker id (-1: a consumer).
            isolation_level: 0 read uncommitted, 1 read committed (v2+, KIP-98).
            current_leader_epoch: The leader epoch the sender knows (v4+,
                KIP-320; -1: none).
            max_num_offsets: How many offsets to return (v0 only).

        Returns:
            The request body.
        """
        entry = ListOffsetsPartition(partition_index=partition, current_leader_epoch=current_leader_epoch, timestamp=timestamp, max_num_offsets=max_num_offsets)
        return cls(replica_id=replica_id, isolation_level=isolation_level, topics=[ListOffsetsTopic(name=topic, partitions=[entry])])


@attrs.define(kw_only=True)
class ListOffsetsPartitionResponse:
    """An entry of ``ListOffsetsTopicResponse.partitions``."""

    partition_index: Int32 = 0
    error_code: Int16 = 0
    old_style_offsets: Annotated[list[Int64], Versions("0")] = attrs.Factory(list)
    timestamp: Annotated[Int64, Versions("1+")] = -1
    offset: Annotated[Int64, Versions("1+")] = -1
    leader_epoch: Annotated[Int32, Versions("4+")] = -1


@attrs.define(kw_only=True)
class ListOffsetsTopicResponse:
    """An entry of ``ListOffsetsResponse.topics``."""

    name: String = ""
    partitions: list[ListOffsetsPartitionResponse] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ListOffsetsResponse:
    """The ListOffsets response body, versions 0-5 (``ListOffsetsResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("2+")] = 0
    topics: list[ListOffsetsTopicResponse] = attrs.Factory(list)


LIST_OFFSETS = Api(
    key=2,
    name="ListOffsets",
    min_version=0,
    max_version=5,
    flexible_from=6,
    request_type=ListOffsetsRequest,
    response_type=ListOffsetsResponse,
)
