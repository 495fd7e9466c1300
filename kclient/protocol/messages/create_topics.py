"""CreateTopics (key 19), versions 0-4. Source: `CreateTopicsRequest.json` /
`CreateTopicsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_CreateTopics) and KIP-4.

Each topic names either a partition count and replication factor (-1 for
the broker defaults, KIP-464 in v4) or explicit replica assignments, plus
topic configs. v1+ adds `validate_only` and per-topic error messages
(KIP-108); v2+ the throttle time; v3 and v4 have the v2 layout.

Version 5 (the first flexible one, KIP-525) is not implemented: its
response carries `topic_config_error_code` as a tagged field with an
explicit tag (0), which `kclient.protocol.schema` cannot express yet."""

from kclient.protocol.schema import Api, Field

CREATE_TOPICS = Api(
    key=19,
    name="CreateTopics",
    min_version=0,
    max_version=4,
    flexible_from=5,
    request_fields=(
        Field(
            "topics",
            (
                Field("name", "string"),
                Field("num_partitions", "int32"),
                Field("replication_factor", "int16"),
                Field(
                    "assignments",
                    (
                        Field("partition_index", "int32"),
                        Field("broker_ids", ("array", "int32")),
                    ),
                ),
                Field(
                    "configs",
                    (
                        Field("name", "string"),
                        Field("value", "nullable_string"),
                    ),
                ),
            ),
        ),
        Field("timeout_ms", "int32", default=60000),
        Field("validate_only", "bool", "1+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "2+"),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field("error_code", "int16"),
                Field("error_message", "nullable_string", "1+"),
            ),
        ),
    ),
)
