"""OffsetFetch (key 9). Source: ``OffsetFetchRequest.json`` /
``OffsetFetchResponse.json``; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_OffsetFetch). One set of
message classes serves two schemas:

* `OFFSET_FETCH`, versions 0-5, the schema the bundled broker decodes. v0
  read offsets from ZooKeeper, v1+ from the ``__consumer_offsets`` topic
  (same layout); v2+ lets ``topics`` be null (all topics) and adds a
  top-level error code; v3+ the throttle time; v5+ the committed leader
  epoch.
* `OFFSET_FETCH_FULL`, versions 0-9, what librdkafka sends (it asks for up
  to v9): v6 is the first flexible version (KIP-482), v7 adds
  ``require_stable`` (KIP-447), v8 fetches several groups at once (KIP-709:
  ``groups`` replaces ``group_id``/``topics`` and the response nests per
  group) and v9 adds the member id and epoch of the new consumer group
  protocol (KIP-848). Versions 0-5 encode exactly as `OFFSET_FETCH` does.

A partition without a committed offset has ``committed_offset`` -1."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, Int64, NullableString, String, Versions


@attrs.define(kw_only=True)
class OffsetFetchRequestTopic:
    """An entry of ``OffsetFetchRequest.topics`` (v0-7) and of
    ``OffsetFetchRequestGroup.topics`` (v8+, Kafka's
    ``OffsetFetchRequestTopics``: the same fields)."""

    name: String = ""
    partition_indexes: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetFetchRequestGroup:
    """An entry of ``OffsetFetchRequest.groups`` (v8+)."""

    group_id: String = ""
    member_id: Annotated[NullableString, Versions("9+")] = None
    member_epoch: Annotated[Int32, Versions("9+")] = -1
    topics: list[OffsetFetchRequestTopic] | None = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetFetchRequest:
    """The OffsetFetch request body (``OffsetFetchRequest.json``)."""

    group_id: Annotated[String, Versions("0-7")] = ""
    topics: Annotated[list[OffsetFetchRequestTopic] | None, Versions("0-7")] = attrs.Factory(list)
    groups: Annotated[list[OffsetFetchRequestGroup], Versions("8+")] = attrs.Factory(list)
    require_stable: Annotated[Bool, Versions("7+")] = False


@attrs.define(kw_only=True)
class OffsetFetchResponsePartition:
    """An entry of ``OffsetFetchResponseTopic.partitions`` (Kafka's
    ``OffsetFetchResponsePartition`` and, v8+, ``OffsetFetchResponsePartitions``:
    the same fields)."""

    partition_index: Int32 = 0
    committed_offset: Int64 = -1
    committed_leader_epoch: Annotated[Int32, Versions("5+")] = -1
    metadata: NullableString = None
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class OffsetFetchResponseTopic:
    """An entry of ``OffsetFetchResponse.topics`` (v0-7) and of
    ``OffsetFetchResponseGroup.topics`` (v8+, Kafka's
    ``OffsetFetchResponseTopics``: the same fields)."""

    name: String = ""
    partitions: list[OffsetFetchResponsePartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class OffsetFetchResponseGroup:
    """An entry of ``OffsetFetchResponse.groups`` (v8+)."""

    group_id: String = ""
    topics: list[OffsetFetchResponseTopic] = attrs.Factory(list)
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class OffsetFetchResponse:
    """The OffsetFetch response body (``OffsetFetchResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("3+")] = 0
    topics: Annotated[list[OffsetFetchResponseTopic], Versions("0-7")] = attrs.Factory(list)
    error_code: Annotated[Int16, Versions("2-7")] = 0
    groups: Annotated[list[OffsetFetchResponseGroup], Versions("8+")] = attrs.Factory(list)


#: Kafka's names for the v8+ nested structs, the same classes.
OffsetFetchRequestTopics = OffsetFetchRequestTopic
OffsetFetchResponseTopics = OffsetFetchResponseTopic
OffsetFetchResponsePartitions = OffsetFetchResponsePartition

OFFSET_FETCH = Api(
    key=9,
    name="OffsetFetch",
    min_version=0,
    max_version=5,
    flexible_from=6,
    request_type=OffsetFetchRequest,
    response_type=OffsetFetchResponse,
)

OFFSET_FETCH_FULL = Api(
    key=9,
    name="OffsetFetch",
    min_version=0,
    max_version=9,
    flexible_from=6,
    request_type=OffsetFetchRequest,
    response_type=OffsetFetchResponse,
)
