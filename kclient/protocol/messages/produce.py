"""Produce (key 0), versions 0-8 (record batch v2 needs v3+; v7+ allows zstd).
Source: ``ProduceRequest.json`` / ``ProduceResponse.json``. Versions 0-2 carry
v0/v1 message sets and have no ``transactional_id``. Version 9 is the first
flexible one (not implemented). With ``acks == 0`` there is no response."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, NullableString, Records, String, Versions


@attrs.define(kw_only=True)
class PartitionProduceData:
    """An entry of ``TopicProduceData.partition_data``."""

    index: Int32 = 0
    records: Records = None


@attrs.define(kw_only=True)
class TopicProduceData:
    """An entry of ``ProduceRequest.topic_data``."""

    name: String = ""
    partition_data: list[PartitionProduceData] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ProduceRequest:
    """The Produce request body, versions 0-8 (``ProduceRequest.json``)."""

    transactional_id: Annotated[NullableString, Versions("3+")] = None
    acks: Int16 = 0
    timeout_ms: Int32 = 0
    topic_data: list[TopicProduceData] = attrs.Factory(list)


@attrs.define(kw_only=True)
class BatchIndexAndErrorMessage:
    """An entry of ``PartitionProduceResponse.record_errors``."""

    batch_index: Int32 = 0
    batch_index_error_message: NullableString = None


@attrs.define(kw_only=True)
class PartitionProduceResponse:
    """An entry of ``TopicProduceResponse.partition_responses``."""

    index: Int32 = 0
    error_code: Int16 = 0
    base_offset: Int64 = 0
    log_append_time_ms: Annotated[Int64, Versions("2+")] = -1
    log_start_offset: Annotated[Int64, Versions("5+")] = -1
    record_errors: Annotated[list[BatchIndexAndErrorMessage], Versions("8+")] = attrs.Factory(list)
    error_message: Annotated[NullableString, Versions("8+")] = None


@attrs.define(kw_only=True)
class TopicProduceResponse:
    """An entry of ``ProduceResponse.responses``."""

    name: String = ""
    partition_responses: list[PartitionProduceResponse] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ProduceResponse:
    """The Produce response body, versions 0-8 (``ProduceResponse.json``)."""

    responses: list[TopicProduceResponse] = attrs.Factory(list)
    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0


PRODUCE = Api(
    key=0,
    name="Produce",
    min_version=0,
    max_version=8,
    flexible_from=9,
    request_type=ProduceRequest,
    response_type=ProduceResponse,
)
