"""DeleteGroups (key 42), versions 0-2. Source: `DeleteGroupsRequest.json` /
`DeleteGroupsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DeleteGroups) and KIP-229.

Deletes empty consumer groups (and their committed offsets), answered per
group. v1 has the v0 layout; v2 is the first flexible version (KIP-482)."""

from kclient.protocol.schema import Api, Field

DELETE_GROUPS = Api(
    key=42,
    name="DeleteGroups",
    min_version=0,
    max_version=2,
    flexible_from=2,
    request_fields=(Field("groups_names", ("array", "string")),),
    response_fields=(
        Field("throttle_time_ms", "int32"),
        Field(
            "results",
            (
                Field("group_id", "string"),
                Field("error_code", "int16"),
            ),
        ),
    ),
)
