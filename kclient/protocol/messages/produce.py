"""Produce (key 0), versions 0-8 (record batch v2 needs v3+; v7+ allows zstd).
Source: ``ProduceRequest.json`` / ``ProduceResponse.json``. Versions 0-2 carry
v0/v1 message sets and have no ``transactional_id``. Version 9 is the first
flexible one (not implemented). With ``acks == 0`` there is no response."""

from kclient.protocol.schema import Api, Field

PRODUCE = Api(
    key=0,
    name="Produce",
    min_version=0,
    max_version=8,
    flexible_from=9,
    request_fields=(
        Field("transactional_id", "nullable_string", "3+"),
        Field("acks", "int16"),
        Field("timeout_ms", "int32"),
        Field(
            "topic_data",
            (
                Field("name", "string"),
                Field(
                    "partition_data",
                    (
                        Field("index", "int32"),
                        Field("records", "records"),
                    ),
                ),
            ),
        ),
    ),
    response_fields=(
        Field(
            "responses",
            (
                Field("name", "string"),
                Field(
                    "partition_responses",
                    (
                        Field("index", "int32"),
                        Field("error_code", "int16"),
                        Field("base_offset", "int64"),
                        Field("log_append_time_ms", "int64", "2+", default=-1),
                        Field("log_start_offset", "int64", "5+", default=-1),
                        Field(
                            "record_errors",
                            (
                                Field("batch_index", "int32"),
                                Field("batch_index_error_message", "nullable_string"),
                            ),
                            "8+",
                        ),
                        Field("error_message", "nullable_string", "8+"),
                    ),
                ),
            ),
        ),
        Field("throttle_time_ms", "int32", "1+"),
    ),
)
