"""JoinGroup (key 11), versions 0-9. Source: `JoinGroupRequest.json` /
`JoinGroupResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_JoinGroup).

A member joins (or rejoins) a group, offering one or more protocols, each
with opaque metadata (for `protocol_type` "consumer" that is a
`ConsumerProtocolSubscription`, see `kclient.protocol.consumer_protocol`).
The leader's response lists every member and its metadata.

v1+ adds the rebalance timeout (KIP-62); v2+ the throttle time; v4 means
"retry with the member id you were given" (KIP-394, same layout); v5+ the
static membership `group_instance_id` (KIP-345); v6 is the first flexible
version (KIP-482); v7+ echoes `protocol_type` and lets `protocol_name` be
null (KIP-559); v8+ carries a join `reason` (KIP-800); v9+ answers with
`skip_assignment` (KIP-814)."""

from kclient.protocol.schema import Api, Field

JOIN_GROUP = Api(
    key=11,
    name="JoinGroup",
    min_version=0,
    max_version=9,
    flexible_from=6,
    request_fields=(
        Field("group_id", "string"),
        Field("session_timeout_ms", "int32"),
        Field("rebalance_timeout_ms", "int32", "1+", default=-1),
        Field("member_id", "string"),
        Field("group_instance_id", "nullable_string", "5+"),
        Field("protocol_type", "string"),
        Field(
            "protocols",
            (
                Field("name", "string"),
                Field("metadata", "bytes"),
            ),
        ),
        Field("reason", "nullable_string", "8+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "2+"),
        Field("error_code", "int16"),
        Field("generation_id", "int32", default=-1),
        Field("protocol_type", "nullable_string", "7+"),
        Field("protocol_name", "string", "0-6"),
        Field("protocol_name", "nullable_string", "7+"),
        Field("leader", "string"),
        Field("skip_assignment", "bool", "9+"),
        Field("member_id", "string"),
        Field(
            "members",
            (
                Field("member_id", "string"),
                Field("group_instance_id", "nullable_string", "5+"),
                Field("metadata", "bytes"),
            ),
        ),
    ),
)
