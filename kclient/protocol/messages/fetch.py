"""Fetch (key 1), versions 0-11 (record batch v2 needs v4+; zstd v10+).
Source: ``FetchRequest.json`` / ``FetchResponse.json``. v3+ has a request
``max_bytes`` (KIP-74), v4+ isolation level and LSO, v5+ log start offset,
v7+ fetch sessions (KIP-227), v11+ rack id and preferred read replica.
Version 12 is the first flexible one (not implemented)."""

from kclient.protocol.schema import Api, Field

FETCH = Api(
    key=1,
    name="Fetch",
    min_version=0,
    max_version=11,
    flexible_from=12,
    request_fields=(
        Field("replica_id", "int32", default=-1),
        Field("max_wait_ms", "int32"),
        Field("min_bytes", "int32"),
        Field("max_bytes", "int32", "3+", default=0x7FFFFFFF),
        Field("isolation_level", "int8", "4+"),
        Field("session_id", "int32", "7+"),
        Field("session_epoch", "int32", "7+", default=-1),
        Field(
            "topics",
            (
                Field("topic", "string"),
                Field(
                    "partitions",
                    (
                        Field("partition", "int32"),
                        Field("current_leader_epoch", "int32", "9+", default=-1),
                        Field("fetch_offset", "int64"),
                        Field("log_start_offset", "int64", "5+", default=-1),
                        Field("partition_max_bytes", "int32"),
                    ),
                ),
            ),
        ),
        Field(
            "forgotten_topics_data",
            (
                Field("topic", "string"),
                Field("partitions", ("array", "int32")),
            ),
            "7+",
        ),
        Field("rack_id", "string", "11+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "7+"),
        Field("session_id", "int32", "7+"),
        Field(
            "responses",
            (
                Field("topic", "string"),
                Field(
                    "partitions",
                    (
                        Field("partition_index", "int32"),
                        Field("error_code", "int16"),
                        Field("high_watermark", "int64"),
                        Field("last_stable_offset", "int64", "4+", default=-1),
                        Field("log_start_offset", "int64", "5+", default=-1),
                        Field(
                            "aborted_transactions",
                            (
                                Field("producer_id", "int64"),
                                Field("first_offset", "int64"),
                            ),
                            "4+",
                        ),
                        Field("preferred_read_replica", "int32", "11+", default=-1),
                        Field("records", "records"),
                    ),
                ),
            ),
        ),
    ),
)
