"""ListGroups (key 16), versions 0-5. Source: `ListGroupsRequest.json` /
`ListGroupsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_ListGroups).

The groups a broker coordinates. v1+ adds the throttle time; v3 is the
first flexible version (KIP-482); v4+ filters by state and reports it
(KIP-518); v5+ filters by group type and reports it (KIP-848)."""

from kclient.protocol.schema import Api, Field

LIST_GROUPS = Api(
    key=16,
    name="ListGroups",
    min_version=0,
    max_version=5,
    flexible_from=3,
    request_fields=(
        Field("states_filter", ("array", "string"), "4+"),
        Field("types_filter", ("array", "string"), "5+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16"),
        Field(
            "groups",
            (
                Field("group_id", "string"),
                Field("protocol_type", "string"),
                Field("group_state", "string", "4+"),
                Field("group_type", "string", "5+"),
            ),
        ),
    ),
)
