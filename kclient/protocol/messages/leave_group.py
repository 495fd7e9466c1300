"""LeaveGroup (key 13), versions 0-5. Source: `LeaveGroupRequest.json` /
`LeaveGroupResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_LeaveGroup).

v0-2 name one leaving member; v3+ a batch of members, each with its static
`group_instance_id`, answered per member (KIP-345); v1+ adds the throttle
time; v4 is the first flexible version (KIP-482); v5+ a per-member
`reason` (KIP-800)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, NullableString, String, Versions


@attrs.define(kw_only=True)
class MemberIdentity:
    """An entry of ``LeaveGroupRequest.members``."""

    member_id: String = ""
    group_instance_id: NullableString = None
    reason: Annotated[NullableString, Versions("5+")] = None


@attrs.define(kw_only=True)
class LeaveGroupRequest:
    """The LeaveGroup request body, versions 0-5 (``LeaveGroupRequest.json``)."""

    group_id: String = ""
    member_id: Annotated[String, Versions("0-2")] = ""
    members: Annotated[list[MemberIdentity], Versions("3+")] = attrs.Factory(list)


@attrs.define(kw_only=True)
class MemberResponse:
    """An entry of ``LeaveGroupResponse.members``."""

    member_id: String = ""
    group_instance_id: NullableString = None
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class LeaveGroupResponse:
    """The LeaveGroup response body, versions 0-5 (``LeaveGroupResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0
    error_code: Int16 = 0
    members: Annotated[list[MemberResponse], Versions("3+")] = attrs.Factory(list)


LEAVE_GROUP = Api(
    key=13,
    name="LeaveGroup",
    min_version=0,
    max_version=5,
    flexible_from=4,
    request_type=LeaveGroupRequest,
    response_type=LeaveGroupResponse,
)
