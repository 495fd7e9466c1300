"""ApiVersions (key 18), versions 0-3. Source: Kafka protocol guide and
``ApiVersionsRequest.json`` / ``ApiVersionsResponse.json``; KIP-511 for the
client software fields (v3+). Version 3 is the first flexible one."""

from kclient.protocol.schema import Api, Field

API_VERSIONS = Api(
    key=18,
    name="ApiVersions",
    min_version=0,
    max_version=3,
    flexible_from=3,
    request_fields=(
        Field("client_software_name", "string", "3+"),
        Field("client_software_version", "string", "3+"),
    ),
    response_fields=(
        Field("error_code", "int16"),
        Field(
            "api_keys",
            (
                Field("api_key", "int16"),
                Field("min_version", "int16"),
                Field("max_version", "int16"),
            ),
        ),
        Field("throttle_time_ms", "int32", "1+"),
    ),
)
