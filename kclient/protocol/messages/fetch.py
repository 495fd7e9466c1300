"""Fetch (key 1), versions 0-11 (record batch v2 needs v4+; zstd v10+).
Source: ``FetchRequest.json`` / ``FetchResponse.json``. v3+ has a request
``max_bytes`` (KIP-74), v4+ isolation level and LSO, v5+ log start offset,
v7+ fetch sessions (KIP-227), v11+ rack id and preferred read replica.
Version 12 is the first flexible one (not implemented)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int8, Int16, Int32, Int64, Records, String, Versions


@attrs.define(kw_only=True)
class FetchPartition:
    """An entry of ``FetchTopic.partitions``."""

    partition: Int32 = 0
    current_leader_epoch: Annotated[Int32, Versions("9+")] = -1
    fetch_offset: Int64 = 0
    log_start_offset: Annotated[Int64, Versions("5+")] = -1
    partition_max_bytes: Int32 = 0


@attrs.define(kw_only=True)
class FetchTopic:
    """An entry of ``FetchRequest.topics``."""

    topic: String = ""
    partitions: list[FetchPartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ForgottenTopic:
    """An entry of ``FetchRequest.forgotten_topics_data``."""

    topic: String = ""
    partitions: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class FetchRequest:
    """The Fetch request body, versions 0-11 (``FetchRequest.json``)."""

    replica_id: Int32 = -1
    max_wait_ms: Int32 = 0
    min_bytes: Int32 = 0
    max_bytes: Annotated[Int32, Versions("3+")] = 2147483647
    isolation_level: Annotated[Int8, Versions("4+")] = 0
    session_id: Annotated[Int32, Versions("7+")] = 0
    session_epoch: Annotated[Int32, Versions("7+")] = -1
    topics: list[FetchTopic] = attrs.Factory(list)
    forgotten_topics_data: Annotated[list[ForgottenTopic], Versions("7+")] = attrs.Factory(list)
    rack_id: Annotated[String, Versions("11+")] = ""


@attrs.define(kw_only=True)
class AbortedTransaction:
    """An entry of ``PartitionData.aborted_transactions``."""

    producer_id: Int64 = 0
    first_offset: Int64 = 0


@attrs.define(kw_only=True)
class PartitionData:
    """An entry of ``FetchableTopicResponse.partitions``."""

    partition_index: Int32 = 0
    error_code: Int16 = 0
    high_watermark: Int64 = 0
    last_stable_offset: Annotated[Int64, Versions("4+")] = -1
    log_start_offset: Annotated[Int64, Versions("5+")] = -1
    aborted_transactions: Annotated[list[AbortedTransaction] | None, Versions("4+")] = attrs.Factory(list)
    preferred_read_replica: Annotated[Int32, Versions("11+")] = -1
    records: Records = None


@attrs.define(kw_only=True)
class FetchableTopicResponse:
    """An entry of ``FetchResponse.responses``."""

    topic: String = ""
    partitions: list[PartitionData] = attrs.Factory(list)


@attrs.define(kw_only=True)
class FetchResponse:
    """The Fetch response body, versions 0-11 (``FetchResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0
    error_code: Annotated[Int16, Versions("7+")] = 0
    session_id: Annotated[Int32, Versions("7+")] = 0
    responses: list[FetchableTopicResponse] = attrs.Factory(list)


FETCH = Api(
    key=1,
    name="Fetch",
    min_version=0,
    max_version=11,
    flexible_from=12,
    request_type=FetchRequest,
    response_type=FetchResponse,
)
