"""OffsetDelete (key 47), version 0. Source: `OffsetDeleteRequest.json` /
`OffsetDeleteResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_OffsetDelete) and KIP-496.

Deletes a group's committed offsets of some partitions
(``kafka-consumer-groups --delete-offsets``, the Java
``Admin.deleteConsumerGroupOffsets``); refused per partition with
GROUP_SUBSCRIBED_TO_TOPIC while a member of the group consumes the topic.
Not flexible."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, String

#: OffsetDelete has no flexible version (its JSON says ``"flexibleVersions": "none"``).
NEVER_FLEXIBLE = 0x7FFF + 1


@attrs.define(kw_only=True)
class OffsetDeleteRequestPartition:
    """An entry of ``OffsetDeleteRequestTopic.partitions``."""

    partition_index: Int32 = 0


@attrs.define(kw_only=True)
class OffsetDeleteRequestTopic:
    """An entry of ``OffsetDeleteRequest.topics``."""

    name: String = ""
    partitions: list[OffsetDeleteRequestPartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetDeleteRequest:
    """The OffsetDelete request body, versions 0-0 (``OffsetDeleteRequest.json``)."""

    group_id: String = ""
    topics: list[OffsetDeleteRequestTopic] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetDeleteResponsePartition:
    """An entry of ``OffsetDeleteResponseTopic.partitions``."""

    partition_index: Int32 = 0
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class OffsetDeleteResponseTopic:
    """An entry of ``OffsetDeleteResponse.topics``."""

    name: String = ""
    partitions: list[OffsetDeleteResponsePartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetDeleteResponse:
    """The OffsetDelete response body, versions 0-0 (``OffsetDeleteResponse.json``)."""

    error_code: Int16 = 0
    throttle_time_ms: Int32 = 0
    topics: list[OffsetDeleteResponseTopic] = attrs.Factory(list)


OFFSET_DELETE = Api(
    key=47,
    name="OffsetDelete",
    min_version=0,
    max_version=0,
    flexible_from=32768,
    request_type=OffsetDeleteRequest,
    response_type=OffsetDeleteResponse,
)
