"""InitProducerId (key 22), versions 0-1. Source: ``InitProducerIdRequest.json``
/ ``InitProducerIdResponse.json`` (KIP-98). Idempotent producers (kafka-python
3.x by default) ask for a producer id before their first Produce. Version 2
is the first flexible one (not implemented)."""

from kclient.protocol.schema import Api, Field

INIT_PRODUCER_ID = Api(
    key=22,
    name="InitProducerId",
    min_version=0,
    max_version=1,
    flexible_from=2,
    request_fields=(
        Field("transactional_id", "nullable_string"),
        Field("transaction_timeout_ms", "int32"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("producer_id", "int64", default=-1),
        Field("producer_epoch", "int16", default=-1),
    ),
)
