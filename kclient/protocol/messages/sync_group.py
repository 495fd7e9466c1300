"""SyncGroup (key 14), versions 0-5. Source: `SyncGroupRequest.json` /
`SyncGroupResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_SyncGroup).

The leader sends every member's assignment (opaque bytes; for the
"consumer" protocol a `ConsumerProtocolAssignment`, see
`kclient.protocol.consumer_protocol`), the others an empty list; each gets
its own assignment back. v1+ adds the throttle time; v3+ the static
`group_instance_id` (KIP-345); v4 is the first flexible version
(KIP-482); v5+ carries the protocol type and name both ways (KIP-559)."""

from kclient.protocol.schema import Api, Field

SYNC_GROUP = Api(
    key=14,
    name="SyncGroup",
    min_version=0,
    max_version=5,
    flexible_from=4,
    request_fields=(
        Field("group_id", "string"),
        Field("generation_id", "int32"),
        Field("member_id", "string"),
        Field("group_instance_id", "nullable_string", "3+"),
        Field("protocol_type", "nullable_string", "5+"),
        Field("protocol_name", "nullable_string", "5+"),
        Field(
            "assignments",
            (
                Field("member_id", "string"),
                Field("assignment", "bytes"),
            ),
        ),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16"),
        Field("protocol_type", "nullable_string", "5+"),
        Field("protocol_name", "nullable_string", "5+"),
        Field("assignment", "bytes"),
    ),
)
