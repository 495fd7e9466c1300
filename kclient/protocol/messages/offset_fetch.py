"""OffsetFetch (key 9), versions 0-5. Source: ``OffsetFetchRequest.json`` /
``OffsetFetchResponse.json``. v0 read offsets from ZooKeeper, v1+ from the
``__consumer_offsets`` topic (same layout); v2+ lets ``topics`` be null (all
topics) and adds a top-level error code; v3+ the throttle time; v5+ the
committed leader epoch. Version 6 is the first flexible one (not
implemented). A partition without a committed offset has
``committed_offset`` -1."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, NullableString, String, Versions


@attrs.define(kw_only=True)
class OffsetFetchRequestTopic:
    """An entry of ``OffsetFetchRequest.topics``."""

    name: String = ""
    partition_indexes: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetFetchRequest:
    """The OffsetFetch request body, versions 0-5 (``OffsetFetchRequest.json``)."""

    group_id: String = ""
    topics: list[OffsetFetchRequestTopic] | None = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetFetchResponsePartition:
    """An entry of ``OffsetFetchResponseTopic.partitions``."""

    partition_index: Int32 = 0
    committed_offset: Int64 = -1
    committed_leader_epoch: Annotated[Int32, Versions("5+")] = -1
    metadata: NullableString = None
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class OffsetFetchResponseTopic:
    """An entry of ``OffsetFetchResponse.topics``."""

    name: String = ""
    partitions: list[OffsetFetchResponsePartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetFetchResponse:
    """The OffsetFetch response body, versions 0-5 (``OffsetFetchResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("3+")] = 0
    topics: list[OffsetFetchResponseTopic] = attrs.Factory(list)
    error_code: Annotated[Int16, Versions("2+")] = 0


OFFSET_FETCH = Api(
    key=9,
    name="OffsetFetch",
    min_version=0,
    max_version=5,
    flexible_from=6,
    request_type=OffsetFetchRequest,
    response_type=OffsetFetchResponse,
)
