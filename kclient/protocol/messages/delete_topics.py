"""DeleteTopics (key 20), versions 0-6. Source: `DeleteTopicsRequest.json` /
`DeleteTopicsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DeleteTopics) and KIP-4.

v0-5 name the topics; v6+ names them or gives their topic ids (KIP-516),
and the response then may have a null name. v1+ adds the throttle time;
v4 is the first flexible version (KIP-482); v5+ per-topic error messages,
and the error THROTTLING_QUOTA_EXCEEDED (KIP-599)."""

from kclient.protocol.schema import Api, Field

DELETE_TOPICS = Api(
    key=20,
    name="DeleteTopics",
    min_version=0,
    max_version=6,
    flexible_from=4,
    request_fields=(
        Field(
            "topics",
            (
                Field("name", "nullable_string"),
                Field("topic_id", "uuid"),
            ),
            "6+",
        ),
        Field("topic_names", ("array", "string"), "0-5"),
        Field("timeout_ms", "int32"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field(
            "responses",
            (
                Field("name", "string", "0-5"),
                Field("name", "nullable_string", "6+"),
                Field("topic_id", "uuid", "6+"),
                Field("error_code", "int16"),
                Field("error_message", "nullable_string", "5+"),
            ),
        ),
    ),
)
