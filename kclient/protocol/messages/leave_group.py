"""LeaveGroup (key 13), versions 0-5. Source: `LeaveGroupRequest.json` /
`LeaveGroupResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_LeaveGroup).

v0-2 name one leaving member; v3+ a batch of members, each with its static
`group_instance_id`, answered per member (KIP-345); v1+ adds the throttle
time; v4 is the first flexible version (KIP-482); v5+ a per-member
`reason` (KIP-800)."""

from kclient.protocol.schema import Api, Field

LEAVE_GROUP = Api(
    key=13,
    name="LeaveGroup",
    min_version=0,
    max_version=5,
    flexible_from=4,
    request_fields=(
        Field("group_id", "string"),
        Field("member_id", "string", "0-2"),
        Field(
            "members",
            (
                Field("member_id", "string"),
                Field("group_instance_id", "nullable_string"),
                Field("reason", "nullable_string", "5+"),
            ),
            "3+",
        ),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16"),
        Field(
            "members",
            (
                Field("member_id", "string"),
                Field("group_instance_id", "nullable_string"),
                Field("error_code", "int16"),
            ),
            "3+",
        ),
    ),
)
