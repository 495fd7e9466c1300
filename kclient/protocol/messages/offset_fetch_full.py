"""OffsetFetch (key 9), all versions 0-9. Source: `OffsetFetchRequest.json` /
`OffsetFetchResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_OffsetFetch).

`offset_fetch.OFFSET_FETCH` (v0-5) is the schema the bundled broker
decodes; this one adds what librdkafka sends (it asks for up to v9):
v6 is the first flexible version (KIP-482), v7 adds `require_stable`
(KIP-447), v8 fetches several groups at once (KIP-709: `groups` replaces
`group_id`/`topics` and the response nests per group) and v9 adds the
member id and epoch of the new consumer group protocol (KIP-848).
Versions 0-5 encode exactly as `OFFSET_FETCH` does. A partition without a
committed offset has `committed_offset` -1; `topics` null (v2+) asks for
every committed partition of the group."""

from kclient.protocol.schema import Api, Field

_PARTITION = (
    Field("partition_index", "int32"),
    Field("committed_offset", "int64", default=-1),
    Field("committed_leader_epoch", "int32", "5+", default=-1),
    Field("metadata", "nullable_string"),
    Field("error_code", "int16"),
)

OFFSET_FETCH_FULL = Api(
    key=9,
    name="OffsetFetch",
    min_version=0,
    max_version=9,
    flexible_from=6,
    request_fields=(
        Field("group_id", "string", "0-7"),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field("partition_indexes", ("array", "int32")),
            ),
            "0-7",
        ),
        Field(
            "groups",
            (
                Field("group_id", "string"),
                Field("member_id", "nullable_string", "9+"),
                Field("member_epoch", "int32", "9+", default=-1),
                Field(
                    "topics",
                    (
                        Field("name", "string"),
                        Field("partition_indexes", ("array", "int32")),
                    ),
                ),
            ),
            "8+",
        ),
        Field("require_stable", "bool", "7+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "3+"),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field("partitions", _PARTITION),
            ),
            "0-7",
        ),
        Field("error_code", "int16", "2-7"),
        Field(
            "groups",
            (
                Field("group_id", "string"),
                Field(
                    "topics",
                    (
                        Field("name", "string"),
                        Field("partitions", _PARTITION),
                    ),
                ),
                Field("error_code", "int16"),
            ),
            "8+",
        ),
    ),
)
