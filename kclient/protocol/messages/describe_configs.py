"""DescribeConfigs (key 32), versions 0-4. Source: `DescribeConfigsRequest.json`
/ `DescribeConfigsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DescribeConfigs) and
KIP-133.

Configs of topics (`resource_type` 2), brokers (4) and broker loggers (8);
`configuration_keys` null asks for all of them. v1+ replaces `is_default`
by `config_source` and can list synonyms (KIP-226); v2 has the v1 layout;
v3+ adds each config's type and documentation (KIP-569); v4 is the first
flexible version (KIP-482)."""

from kclient.protocol.schema import Api, Field

#: `resource_type` values (`ConfigResource.Type`).
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

DESCRIBE_CONFIGS = Api(
    key=32,
    name="DescribeConfigs",
    min_version=0,
    max_version=4,
    flexible_from=4,
    request_fields=(
        Field(
            "resources",
            (
                Field("resource_type", "int8"),
                Field("resource_name", "string"),
                Field("configuration_keys", ("array", "string")),
            ),
        ),
        Field("include_synonyms", "bool", "1+"),
        Field("include_documentation", "bool", "3+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32"),
        Field(
            "results",
            (
                Field("error_code", "int16"),
                Field("error_message", "nullable_string"),
                Field("resource_type", "int8"),
                Field("resource_name", "string"),
                Field(
                    "configs",
                    (
                        Field("name", "string"),
                        Field("value", "nullable_string"),
                        Field("read_only", "bool"),
                        Field("is_default", "bool", "0"),
                        Field("config_source", "int8", "1+", default=-1),
                        Field("is_sensitive", "bool"),
                        Field(
                            "synonyms",
                            (
                                Field("name", "string"),
                                Field("value", "nullable_string"),
                                Field("source", "int8"),
                            ),
                            "1+",
                        ),
                        Field("config_type", "int8", "3+"),
                        Field("documentation", "nullable_string", "3+"),
                    ),
                ),
            ),
        ),
    ),
)
