"""ListOffsets (key 2), versions 0-5. Source: ``ListOffsetsRequest.json`` /
``ListOffsetsResponse.json``. v0 is the old getOffsetsBefore: it takes
``max_num_offsets`` and answers ``old_style_offsets`` (descending); v1+ takes
a timestamp (-1 latest, -2 earliest) and answers one offset and its
timestamp. Version 6 is the first flexible one (not implemented)."""

from kclient.protocol.schema import Api, Field

#: Special ``timestamp`` values of a ListOffsets request: -1 asks for the
#: log end offset (latest), -2 for the log start offset (earliest), -3
#: (KIP-734) for the batch holding the largest timestamp.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

LIST_OFFSETS = Api(
    key=2,
    name="ListOffsets",
    min_version=0,
    max_version=5,
    flexible_from=6,
    request_fields=(
        Field("replica_id", "int32", default=-1),
        Field("isolation_level", "int8", "2+"),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field(
                    "partitions",
                    (
                        Field("partition_index", "int32"),
                        Field("current_leader_epoch", "int32", "4+", default=-1),
                        Field("timestamp", "int64"),
                        Field("max_num_offsets", "int32", "0", default=1),
                    ),
                ),
            ),
        ),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "2+"),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field(
                    "partitions",
                    (
                        Field("partition_index", "int32"),
                        Field("error_code", "int16"),
                        Field("old_style_offsets", ("array", "int64"), "0"),
                        Field("timestamp", "int64", "1+", default=-1),
                        Field("offset", "int64", "1+", default=-1),
                        Field("leader_epoch", "int32", "4+", default=-1),
                    ),
                ),
            ),
        ),
    ),
)
