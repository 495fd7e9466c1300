"""AlterConfigs (key 33, versions 0-2) and IncrementalAlterConfigs (key 44,
versions 0-1). Source: `AlterConfigsRequest.json` / `AlterConfigsResponse.json`
and `IncrementalAlterConfigsRequest.json` / `IncrementalAlterConfigsResponse.json`;
see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_AlterConfigs,
https://kafka.apache.org/protocol#The_Messages_IncrementalAlterConfigs),
KIP-133 (AlterConfigs) and KIP-339 (IncrementalAlterConfigs).

AlterConfigs replaces a resource's whole set of dynamic configs;
IncrementalAlterConfigs changes single configs, each with an operation
(`OP_SET`, `OP_DELETE`, `OP_APPEND`, `OP_SUBTRACT`). AlterConfigs v1 has
the v0 layout; v2 and IncrementalAlterConfigs v1 are the first flexible
versions (KIP-482). Both answer per resource."""

from kclient.protocol.schema import Api, Field

#: IncrementalAlterConfigs ``config_operation`` values (``AlterConfigOp.OpType``).
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3

_RESPONSE = (
    Field("throttle_time_ms", "int32"),
    Field(
        "responses",
        (
            Field("error_code", "int16"),
            Field("error_message", "nullable_string"),
            Field("resource_type", "int8"),
            Field("resource_name", "string"),
        ),
    ),
)

ALTER_CONFIGS = Api(
    key=33,
    name="AlterConfigs",
    min_version=0,
    max_version=2,
    flexible_from=2,
    request_fields=(
        Field(
            "resources",
            (
                Field("resource_type", "int8"),
                Field("resource_name", "string"),
                Field("configs", (Field("name", "string"), Field("value", "nullable_string"))),
            ),
        ),
        Field("validate_only", "bool"),
    ),
    response_fields=_RESPONSE,
)

INCREMENTAL_ALTER_CONFIGS = Api(
    key=44,
    name="IncrementalAlterConfigs",
    min_version=0,
    max_version=1,
    flexible_from=1,
    request_fields=(
        Field(
            "resources",
            (
                Field("resource_type", "int8"),
                Field("resource_name", "string"),
                Field(
                    "configs",
                    (Field("name", "string"), Field("config_operation", "int8"), Field("value", "nullable_string")),
                ),
            ),
        ),
        Field("validate_only", "bool"),
    ),
    response_fields=_RESPONSE,
)
