"""JoinGroup (key 11), versions 0-9. Source: `JoinGroupRequest.json` /
`JoinGroupResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_JoinGroup).

A member joins (or rejoins) a group, offering one or more protocols, each
with opaque metadata (for `protocol_type` "consumer" that is a
`ConsumerProtocolSubscription`, see `kclient.protocol.consumer_protocol`).
The leader's response lists every member and its metadata.

v1+ adds the rebalance timeout (KIP-62); v2+ the throttle time; v4 means
"retry with the member id you were given" (KIP-394, same layout); v5+ the
static membership `group_instance_id` (KIP-345); v6 is the first flexible
version (KIP-482); v7+ echoes `protocol_type` and lets `protocol_name` be
null (KIP-559); v8+ carries a join `reason` (KIP-800); v9+ answers with
`skip_assignment` (KIP-814)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Bytes, Int16, Int32, NullableString, NullableVersions, String, Versions


@attrs.define(kw_only=True)
class JoinGroupRequestProtocol:
    """An entry of ``JoinGroupRequest.protocols``."""

    name: String = ""
    metadata: Bytes = b""


@attrs.define(kw_only=True)
class JoinGroupRequest:
    """The JoinGroup request body, versions 0-9 (``JoinGroupRequest.json``)."""

    group_id: String = ""
    session_timeout_ms: Int32 = 0
    rebalance_timeout_ms: Annotated[Int32, Versions("1+")] = -1
    member_id: String = ""
    group_instance_id: Annotated[NullableString, Versions("5+")] = None
    protocol_type: String = ""
    protocols: list[JoinGroupRequestProtocol] = attrs.Factory(list)
    reason: Annotated[NullableString, Versions("8+")] = None


@attrs.define(kw_only=True)
class JoinGroupResponseMember:
    """An entry of ``JoinGroupResponse.members``."""

    member_id: String = ""
    group_instance_id: Annotated[NullableString, Versions("5+")] = None
    metadata: Bytes = b""


@attrs.define(kw_only=True)
class JoinGroupResponse:
    """The JoinGroup response body, versions 0-9 (``JoinGroupResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("2+")] = 0
    error_code: Int16 = 0
    generation_id: Int32 = -1
    protocol_type: Annotated[NullableString, Versions("7+")] = None
    protocol_name: Annotated[NullableString, NullableVersions("7+")] = ""
    leader: String = ""
    skip_assignment: Annotated[Bool, Versions("9+")] = False
    member_id: String = ""
    members: list[JoinGroupResponseMember] = attrs.Factory(list)


JOIN_GROUP = Api(
    key=11,
    name="JoinGroup",
    min_version=0,
    max_version=9,
    flexible_from=6,
    request_type=JoinGroupRequest,
    response_type=JoinGroupResponse,
)
