"""OffsetCommit (key 8), versions 0-9. Source: `OffsetCommitRequest.json` /
`OffsetCommitResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_OffsetCommit).

v0 committed to ZooKeeper; v1 adds the generation and member id and a
per-partition commit timestamp (v1 only); v2-4 carry a group-level
retention time instead (KIP-211 removed it in v5); v3+ the throttle time;
v6+ the committed leader epoch (KIP-320); v7+ the static member's
`group_instance_id` (KIP-345). Version 8 is the first flexible one
(KIP-482); v9 has the v8 layout and is the first usable with the new
consumer group protocol (KIP-848), where `generation_id_or_member_epoch`
carries the member epoch instead of the generation."""

from kclient.protocol.schema import Api, Field

OFFSET_COMMIT = Api(
    key=8,
    name="OffsetCommit",
    min_version=0,
    max_version=9,
    flexible_from=8,
    request_fields=(
        Field("group_id", "string"),
        Field("generation_id_or_member_epoch", "int32", "1+", default=-1),
        Field("member_id", "string", "1+"),
        Field("group_instance_id", "nullable_string", "7+"),
        Field("retention_time_ms", "int64", "2-4", default=-1),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field(
                    "partitions",
                    (
                        Field("partition_index", "int32"),
                        Field("committed_offset", "int64"),
                        Field("committed_leader_epoch", "int32", "6+", default=-1),
                        Field("commit_timestamp", "int64", "1", default=-1),
                        Field("committed_metadata", "nullable_string"),
                    ),
                ),
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
                        Field("error_code", "int16"),
                    ),
                ),
            ),
        ),
    ),
)
