"""DescribeGroups (key 15), versions 0-5. Source: `DescribeGroupsRequest.json`
/ `DescribeGroupsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DescribeGroups).

State, protocol and members (with their metadata and assignment bytes) of
each named group. v1+ adds the throttle time; v3+ the authorized
operations bit field (KIP-430; -2147483648 when not asked for); v4+ each
member's `group_instance_id` (KIP-345); v5 is the first flexible version
(KIP-482)."""

from kclient.protocol.schema import Api, Field

#: `authorized_operations` when the request did not ask for them (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648

DESCRIBE_GROUPS = Api(
    key=15,
    name="DescribeGroups",
    min_version=0,
    max_version=5,
    flexible_from=5,
    request_fields=(
        Field("groups", ("array", "string")),
        Field("include_authorized_operations", "bool", "3+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field(
            "groups",
            (
                Field("error_code", "int16"),
                Field("group_id", "string"),
                Field("group_state", "string"),
                Field("protocol_type", "string"),
                Field("protocol_data", "string"),
                Field(
                    "members",
                    (
                        Field("member_id", "string"),
                        Field("group_instance_id", "nullable_string", "4+"),
                        Field("client_id", "string"),
                        Field("client_host", "string"),
                        Field("member_metadata", "bytes"),
                        Field("member_assignment", "bytes"),
                    ),
                ),
                Field("authorized_operations", "int32", "3+", default=AUTHORIZED_OPERATIONS_OMITTED),
            ),
        ),
    ),
)
