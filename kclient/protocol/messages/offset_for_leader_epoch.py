"""OffsetForLeaderEpoch (key 23), versions 0-4. Source:
`OffsetForLeaderEpochRequest.json` / `OffsetForLeaderEpochResponse.json`;
see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_OffsetForLeaderEpoch) and
KIP-101.

For each partition and leader epoch, the end offset of that epoch (used to
detect log truncation). v1+ answers with the leader epoch (KIP-279); v2+
the request carries the current leader epoch for fencing and the response
the throttle time (KIP-320); v3+ the replica id: a follower's broker id,
-1 for a consumer, -2 (the default) for a "debugging" client allowed to
see offsets beyond the high watermark; v4 is the first flexible version
(KIP-482)."""

from kclient.protocol.schema import Api, Field

#: `replica_id` of a consumer (not a follower broker).
CONSUMER_REPLICA_ID = -1
#: `replica_id` of a debugging client, the schema's default.
DEBUGGING_REPLICA_ID = -2

OFFSET_FOR_LEADER_EPOCH = Api(
    key=23,
    name="OffsetForLeaderEpoch",
    min_version=0,
    max_version=4,
    flexible_from=4,
    request_fields=(
        Field("replica_id", "int32", "3+", default=DEBUGGING_REPLICA_ID),
        Field(
            "topics",
            (
                Field("topic", "string"),
                Field(
                    "partitions",
                    (
                        Field("partition", "int32"),
                        Field("current_leader_epoch", "int32", "2+", default=-1),
                        Field("leader_epoch", "int32"),
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
                Field("topic", "string"),
                Field(
                    "partitions",
                    (
                        Field("error_code", "int16"),
                        Field("partition", "int32"),
                        Field("leader_epoch", "int32", "1+", default=-1),
                        Field("end_offset", "int64", default=-1),
                    ),
                ),
            ),
        ),
    ),
)
