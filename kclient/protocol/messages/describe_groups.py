"""DescribeGroups (key 15), versions 0-5. Source: `DescribeGroupsRequest.json`
/ `DescribeGroupsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DescribeGroups).

State, protocol and members (with their metadata and assignment bytes) of
each named group. v1+ adds the throttle time; v3+ the authorized
operations bit field (KIP-430; -2147483648 when not asked for); v4+ each
member's `group_instance_id` (KIP-345); v5 is the first flexible version
(KIP-482)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Bytes, Int16, Int32, NullableString, String, Versions

#: `authorized_operations` when the request did not ask for them (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@attrs.define(kw_only=True)
class DescribeGroupsRequest:
    """The DescribeGroups request body, versions 0-5 (``DescribeGroupsRequest.json``)."""

    groups: list[String] = attrs.Factory(list)
    include_authorized_operations: Annotated[Bool, Versions("3+")] = False


@attrs.define(kw_only=True)
class DescribedGroupMember:
    """An entry of ``DescribedGroup.members``."""

    member_id: String = ""
    group_instance_id: Annotated[NullableString, Versions("4+")] = None
    client_id: String = ""
    client_host: String = ""
    member_metadata: Bytes = b""
    member_assignment: Bytes = b""


@attrs.define(kw_only=True)
class DescribedGroup:
    """An entry of ``DescribeGroupsResponse.groups``."""

    error_code: Int16 = 0
    group_id: String = ""
    group_state: String = ""
    protocol_type: String = ""
    protocol_data: String = ""
    members: list[DescribedGroupMember] = attrs.Factory(list)
    authorized_operations: Annotated[Int32, Versions("3+")] = -2147483648


@attrs.define(kw_only=True)
class DescribeGroupsResponse:
    """The DescribeGroups response body, versions 0-5 (``DescribeGroupsResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0
    groups: list[DescribedGroup] = attrs.Factory(list)


DESCRIBE_GROUPS = Api(
    key=15,
    name="DescribeGroups",
    min_version=0,
    max_version=5,
    flexible_from=5,
    request_type=DescribeGroupsRequest,
    response_type=DescribeGroupsResponse,
)
