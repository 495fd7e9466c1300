"""ApiVersions (key 18), versions 0-3. Source: Kafka protocol guide and
``ApiVersionsRequest.json`` / ``ApiVersionsResponse.json``; KIP-511 for the
client software fields (v3+). Version 3 is the first flexible one."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, String, Versions


@attrs.define(kw_only=True)
class ApiVersionsRequest:
    """The ApiVersions request body, versions 0-3 (``ApiVersionsRequest.json``)."""

    client_software_name: Annotated[String, Versions("3+")] = ""
    client_software_version: Annotated[String, Versions("3+")] = ""


@attrs.define(kw_only=True)
class ApiVersion:
    """An entry of ``ApiVersionsResponse.api_keys``."""

    api_key: Int16 = 0
    min_version: Int16 = 0
    max_version: Int16 = 0


@attrs.define(kw_only=True)
class ApiVersionsResponse:
    """The ApiVersions response body, versions 0-3 (``ApiVersionsResponse.json``)."""

    error_code: Int16 = 0
    api_keys: list[ApiVersion] = attrs.Factory(list)
    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0


API_VERSIONS = Api(
    key=18,
    name="ApiVersions",
    min_version=0,
    max_version=3,
    flexible_from=3,
    request_type=ApiVersionsRequest,
    response_type=ApiVersionsResponse,
)
