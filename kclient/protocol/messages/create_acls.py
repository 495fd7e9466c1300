"""CreateAcls (key 30), versions 0-3. Source: `CreateAclsRequest.json` /
`CreateAclsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_CreateAcls), KIP-11 and
KIP-290.

Creates ACL bindings, answered per binding in request order. v1 adds the
pattern type (KIP-290); v2 is the first flexible version (KIP-482); v3 has
the v2 layout."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int8, Int16, Int32, NullableString, String, Versions


@attrs.define(kw_only=True)
class AclCreation:
    """An entry of ``CreateAclsRequest.creations``: one `kclient.acl.AclBinding`."""

    resource_type: Int8 = 0
    resource_name: String = ""
    resource_pattern_type: Annotated[Int8, Versions("1+")] = 3
    principal: String = ""
    host: String = ""
    operation: Int8 = 0
    permission_type: Int8 = 0


@attrs.define(kw_only=True)
class CreateAclsRequest:
    """The CreateAcls request body, versions 0-3 (``CreateAclsRequest.json``)."""

    creations: list[AclCreation] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AclCreationResult:
    """An entry of ``CreateAclsResponse.results``."""

    error_code: Int16 = 0
    error_message: NullableString = None


@attrs.define(kw_only=True)
class CreateAclsResponse:
    """The CreateAcls response body, versions 0-3 (``CreateAclsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    results: list[AclCreationResult] = attrs.Factory(list)


CREATE_ACLS = Api(
    key=30,
    name="CreateAcls",
    min_version=0,
    max_version=3,
    flexible_from=2,
    request_type=CreateAclsRequest,
    response_type=CreateAclsResponse,
)
