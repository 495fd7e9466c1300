"""DeleteAcls (key 31), versions 0-3. Source: `DeleteAclsRequest.json` /
`DeleteAclsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DeleteAcls), KIP-11 and
KIP-290.

Deletes the ACL bindings matching each filter, answered per filter with the
bindings it deleted. v1 adds the pattern type (KIP-290); v2 is the first
flexible version (KIP-482); v3 has the v2 layout."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int8, Int16, Int32, NullableString, String, Versions


@attrs.define(kw_only=True)
class DeleteAclsFilter:
    """An entry of ``DeleteAclsRequest.filters``: one
    `kclient.acl.AclBindingFilter`; a null name, principal or host matches
    any."""

    resource_type_filter: Int8 = 0
    resource_name_filter: NullableString = None
    pattern_type_filter: Annotated[Int8, Versions("1+")] = 3
    principal_filter: NullableString = None
    host_filter: NullableString = None
    operation: Int8 = 0
    permission_type: Int8 = 0


@attrs.define(kw_only=True)
class DeleteAclsRequest:
    """The DeleteAcls request body, versions 0-3 (``DeleteAclsRequest.json``)."""

    filters: list[DeleteAclsFilter] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DeleteAclsMatchingAcl:
    """An entry of ``DeleteAclsFilterResult.matching_acls``: one deleted binding."""

    error_code: Int16 = 0
    error_message: NullableString = None
    resource_type: Int8 = 0
    resource_name: String = ""
    pattern_type: Annotated[Int8, Versions("1+")] = 3
    principal: String = ""
    host: String = ""
    operation: Int8 = 0
    permission_type: Int8 = 0


@attrs.define(kw_only=True)
class DeleteAclsFilterResult:
    """An entry of ``DeleteAclsResponse.filter_results``."""

    error_code: Int16 = 0
    error_message: NullableString = None
    matching_acls: list[DeleteAclsMatchingAcl] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DeleteAclsResponse:
    """The DeleteAcls response body, versions 0-3 (``DeleteAclsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    filter_results: list[DeleteAclsFilterResult] = attrs.Factory(list)


DELETE_ACLS = Api(
    key=31,
    name="DeleteAcls",
    min_version=0,
    max_version=3,
    flexible_from=2,
    request_type=DeleteAclsRequest,
    response_type=DeleteAclsResponse,
)
