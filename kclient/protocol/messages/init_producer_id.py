"""InitProducerId (key 22), versions 0-1. Source: ``InitProducerIdRequest.json``
/ ``InitProducerIdResponse.json`` (KIP-98). Idempotent producers (kafka-python
3.x by default) ask for a producer id before their first Produce. Version 2
is the first flexible one (not implemented)."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, NullableString


@attrs.define(kw_only=True)
class InitProducerIdRequest:
    """The InitProducerId request body, versions 0-1 (``InitProducerIdRequest.json``)."""

    transactional_id: NullableString = None
    transaction_timeout_ms: Int32 = 0


@attrs.define(kw_only=True)
class InitProducerIdResponse:
    """The InitProducerId response body, versions 0-1 (``InitProducerIdResponse.json``)."""

    throttle_time_ms: Int32 = 0
    error_code: Int16 = 0
    producer_id: Int64 = -1
    producer_epoch: Int16 = -1


INIT_PRODUCER_ID = Api(
    key=22,
    name="InitProducerId",
    min_version=0,
    max_version=1,
    flexible_from=2,
    request_type=InitProducerIdRequest,
    response_type=InitProducerIdResponse,
)
