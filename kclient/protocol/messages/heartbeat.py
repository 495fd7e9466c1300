"""Heartbeat (key 12), versions 0-4. Source: `HeartbeatRequest.json` /
`HeartbeatResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_Heartbeat).

A member's keep-alive within a generation; the error code tells it to
rejoin (REBALANCE_IN_PROGRESS and friends). v1+ adds the throttle time; v3+
the static `group_instance_id` (KIP-345); v4 is the first flexible
version (KIP-482)."""

from kclient.protocol.schema import Api, Field

HEARTBEAT = Api(
    key=12,
    name="Heartbeat",
    min_version=0,
    max_version=4,
    flexible_from=4,
    request_fields=(
        Field("group_id", "string"),
        Field("generation_id", "int32"),
        Field("member_id", "string"),
        Field("group_instance_id", "nullable_string", "3+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16"),
    ),
)
