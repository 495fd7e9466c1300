"""DescribeConfigs (key 32), versions 0-4. Source: `DescribeConfigsRequest.json`
/ `DescribeConfigsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DescribeConfigs) and
KIP-133.

Configs of topics (`resource_type` 2), brokers (4) and broker loggers (8);
`configuration_keys` null asks for all of them. v1+ replaces `is_default`
by `config_source` and can list synonyms (KIP-226); v2 has the v1 layout;
v3+ adds each config's type and documentation (KIP-569); v4 is the first
flexible version (KIP-482)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int8, Int16, Int32, NullableString, String, Versions

#: `resource_type` values (`ConfigResource.Type`).
RESOURCE_TOPIC = 2

RESOURCE_BROKER = 4

RESOURCE_BROKER_LOGGER = 8


@attrs.define(kw_only=True)
class DescribeConfigsResource:
    """An entry of ``DescribeConfigsRequest.resources``."""

    resource_type: Int8 = 0
    resource_name: String = ""
    configuration_keys: list[String] | None = attrs.Factory(list)


@attrs.define(kw_only=True)
class DescribeConfigsRequest:
    """The DescribeConfigs request body, versions 0-4 (``DescribeConfigsRequest.json``)."""

    resources: list[DescribeConfigsResource] = attrs.Factory(list)
    include_synonyms: Annotated[Bool, Versions("1+")] = False
    include_documentation: Annotated[Bool, Versions("3+")] = False


@attrs.define(kw_only=True)
class DescribeConfigsSynonym:
    """An entry of ``DescribeConfigsResourceResult.synonyms``."""

    name: String = ""
    value: NullableString = None
    source: Int8 = 0


@attrs.define(kw_only=True)
class DescribeConfigsResourceResult:
    """An entry of ``DescribeConfigsResult.configs``."""

    name: String = ""
    value: NullableString = None
    read_only: Bool = False
    is_default: Annotated[Bool, Versions("0")] = False
    config_source: Annotated[Int8, Versions("1+")] = -1
    is_sensitive: Bool = False
    synonyms: Annotated[list[DescribeConfigsSynonym], Versions("1+")] = attrs.Factory(list)
    config_type: Annotated[Int8, Versions("3+")] = 0
    documentation: Annotated[NullableString, Versions("3+")] = None


@attrs.define(kw_only=True)
class DescribeConfigsResult:
    """An entry of ``DescribeConfigsResponse.results``."""

    error_code: Int16 = 0
    error_message: NullableString = None
    resource_type: Int8 = 0
    resource_name: String = ""
    configs: list[DescribeConfigsResourceResult] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DescribeConfigsResponse:
    """The DescribeConfigs response body, versions 0-4 (``DescribeConfigsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    results: list[DescribeConfigsResult] = attrs.Factory(list)


DESCRIBE_CONFIGS = Api(
    key=32,
    name="DescribeConfigs",
    min_version=0,
    max_version=4,
    flexible_from=4,
    request_type=DescribeConfigsRequest,
    response_type=DescribeConfigsResponse,
)
