"""OffsetFetch (key 9), versions 0-5. Source: ``OffsetFetchRequest.json`` /
``OffsetFetchResponse.json``. v0 read offsets from ZooKeeper, v1+ from the
``__consumer_offsets`` topic (same layout); v2+ lets ``topics`` be null (all
topics) and adds a top-level error code; v3+ the throttle time; v5+ the
committed leader epoch. Version 6 is the first flexible one (not
implemented). A partition without a committed offset has
``committed_offset`` -1."""

from kclient.protocol.schema import Api, Field

OFFSET_FETCH = Api(
    key=9,
    name="OffsetFetch",
    min_version=0,
    max_version=5,
    flexible_from=6,
    request_fields=(
        Field("group_id", "string"),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field("partition_indexes", ("array", "int32")),
            ),
        ),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "3+"),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field(
                    "partitions",
                    (
                        Field("partition_index", "int32"),
                        Field("committed_offset", "int64", default=-1),
                        Field("committed_leader_epoch", "int32", "5+", default=-1),
                        Field("metadata", "nullable_string"),
                        Field("error_code", "int16"),
                    ),
                ),
            ),
        ),
        Field("error_code", "int16", "2+"),
    ),
)
