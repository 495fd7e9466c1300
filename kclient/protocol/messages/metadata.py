"""Metadata (key 3), versions 0-8. Source: ``MetadataRequest.json`` /
``MetadataResponse.json``. v1+ lets ``topics`` be null (all topics); v4+
carries ``allow_auto_topic_creation``; v7+ the partition leader epoch.
Version 9 is the first flexible one (not implemented)."""

from kclient.protocol.schema import Api, Field

METADATA = Api(
    key=3,
    name="Metadata",
    min_version=0,
    max_version=8,
    flexible_from=9,
    request_fields=(
        Field("topics", (Field("name", "string"),)),
        Field("allow_auto_topic_creation", "bool", "4+", default=True),
        Field("include_cluster_authorized_operations", "bool", "8+"),
        Field("include_topic_authorized_operations", "bool", "8+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "3+"),
        Field(
            "brokers",
            (
                Field("node_id", "int32"),
                Field("host", "string"),
                Field("port", "int32"),
                Field("rack", "nullable_string", "1+"),
            ),
        ),
        Field("cluster_id", "nullable_string", "2+"),
        Field("controller_id", "int32", "1+", default=-1),
        Field(
            "topics",
            (
                Field("error_code", "int16"),
                Field("name", "string"),
                Field("is_internal", "bool", "1+"),
                Field(
                    "partitions",
                    (
                        Field("error_code", "int16"),
                        Field("partition_index", "int32"),
                        Field("leader_id", "int32"),
                        Field("leader_epoch", "int32", "7+"),
                        Field("replica_nodes", ("array", "int32")),
                        Field("isr_nodes", ("array", "int32")),
                        Field("offline_replicas", ("array", "int32"), "5+"),
                    ),
                ),
                Field("topic_authorized_operations", "int32", "8+", default=-2147483648),
            ),
        ),
        Field("cluster_authorized_operations", "int32", "8+", default=-2147483648),
    ),
)
