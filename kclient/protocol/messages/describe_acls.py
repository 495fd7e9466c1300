"""DescribeAcls (key 29), versions 0-3. Source: `DescribeAclsRequest.json` /
`DescribeAclsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DescribeAcls), KIP-11 and
KIP-290.

Lists the ACL bindings matching one filter (`kclient.acl.AclBindingFilter`
on the wire), grouped by resource pattern. v1 adds the pattern type
(KIP-290: literal or prefixed resource names); v2 is the first flexible
version (KIP-482); v3 has the v2 layout. The int8 codes are
`kclient.acl.ResourceType`, `PatternType`, `AclOperation` and
`AclPermissionType`."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int8, Int16, Int32, NullableString, String, Versions


@attrs.define(kw_only=True)
class DescribeAclsRequest:
    """The DescribeAcls request body, versions 0-3 (``DescribeAclsRequest.json``);
    a null name, principal or host matches any."""

    resource_type_filter: Int8 = 0
    resource_name_filter: NullableString = None
    pattern_type_filter: Annotated[Int8, Versions("1+")] = 3
    principal_filter: NullableString = None
    host_filter: NullableString = None
    operation: Int8 = 0
    permission_type: Int8 = 0


@attrs.define(kw_only=True)
class AclDescription:
    """An entry of ``DescribeAclsResource.acls``."""

    principal: String = ""
    host: String = ""
    operation: Int8 = 0
    permission_type: Int8 = 0


@attrs.define(kw_only=True)
class DescribeAclsResource:
    """An entry of ``DescribeAclsResponse.resources``."""

    resource_type: Int8 = 0
    resource_name: String = ""
    pattern_type: Annotated[Int8, Versions("1+")] = 3
    acls: list[AclDescription] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DescribeAclsResponse:
    """The DescribeAcls response body, versions 0-3 (``DescribeAclsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    error_code: Int16 = 0
    error_message: NullableString = None
    resources: list[DescribeAclsResource] = attrs.Factory(list)


DESCRIBE_ACLS = Api(
    key=29,
    name="DescribeAcls",
    min_version=0,
    max_version=3,
    flexible_from=2,
    request_type=DescribeAclsRequest,
    response_type=DescribeAclsResponse,
)
