"""OffsetDelete (key 47), version 0. Source: `OffsetDeleteRequest.json` /
`OffsetDeleteResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_OffsetDelete) and KIP-496.

Deletes a group's committed offsets of some partitions
(``kafka-consumer-groups --delete-offsets``, the Java
``Admin.deleteConsumerGroupOffsets``); refused per partition with
GROUP_SUBSCRIBED_TO_TOPIC while a member of the group consumes the topic.
Not flexible."""

from kclient.protocol.schema import Api, Field

#: OffsetDelete has no flexible version (its JSON says ``"flexibleVersions": "none"``).
NEVER_FLEXIBLE = 0x7FFF + 1

OFFSET_DELETE = Api(
    key=47,
    name="OffsetDelete",
    min_version=0,
    max_version=0,
    flexible_from=NEVER_FLEXIBLE,
    request_fields=(
        Field("group_id", "string"),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field("partitions", (Field("partition_index", "int32"),)),
            ),
        ),
    ),
    response_fields=(
        Field("error_code", "int16"),
        Field("throttle_time_ms", "int32"),
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
