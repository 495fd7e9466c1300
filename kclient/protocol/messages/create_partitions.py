"""CreatePartitions (key 37), versions 0-3. Source:
`CreatePartitionsRequest.json` / `CreatePartitionsResponse.json`; see the
Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_CreatePartitions) and
KIP-195.

Raises the partition count of existing topics (``kafka-topics --alter
--partitions``, the Java ``Admin.createPartitions``). Each topic names its
new total ``count`` and, optionally (null otherwise), one replica list per
new partition. v1 has the v0 layout; v2 is the first flexible version
(KIP-482); v3 has the v2 layout and may answer THROTTLING_QUOTA_EXCEEDED
(KIP-599)."""

from kclient.protocol.schema import Api, Field

CREATE_PARTITIONS = Api(
    key=37,
    name="CreatePartitions",
    min_version=0,
    max_version=3,
    flexible_from=2,
    request_fields=(
        Field(
            "topics",
            (
                Field("name", "string"),
                Field("count", "int32"),
                Field("assignments", (Field("broker_ids", ("array", "int32")),)),
            ),
        ),
        Field("timeout_ms", "int32"),
        Field("validate_only", "bool"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32"),
        Field(
            "results",
            (
                Field("name", "string"),
                Field("error_code", "int16"),
                Field("error_message", "nullable_string"),
            ),
        ),
    ),
)
