"""SyncGroup (key 14), versions 0-5. Source: `SyncGroupRequest.json` /
`SyncGroupResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_SyncGroup).

The leader sends every member's assignment (opaque bytes; for the
"consumer" protocol a `ConsumerProtocolAssignment`, see
`kclient.protocol.consumer_protocol`), the others an empty list; each gets
its own assignment back. v1+ adds the throttle time; v3+ the static
`group_instance_id` (KIP-345); v4 is the first flexible version
(KIP-482); v5+ carries the protocol type and name both ways (KIP-559)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bytes, Int16, Int32, NullableString, String, Versions


@attrs.define(kw_only=True)
class SyncGroupRequestAssignment:
    """An entry of ``SyncGroupRequest.assignments``."""

    member_id: String = ""
    assignment: Bytes = b""


@attrs.define(kw_only=True)
class SyncGroupRequest:
    """The SyncGroup request body, versions 0-5 (``SyncGroupRequest.json``)."""

    group_id: String = ""
    generation_id: Int32 = 0
    member_id: String = ""
    group_instance_id: Annotated[NullableString, Versions("3+")] = None
    protocol_type: Annotated[NullableString, Versions("5+")] = None
    protocol_name: Annotated[NullableString, Versions("5+")] = None
    assignments: list[SyncGroupRequestAssignment] = attrs.Factory(list)


@attrs.define(kw_only=True)
class SyncGroupResponse:
    """The SyncGroup response body, versions 0-5 (``SyncGroupResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0
    error_code: Int16 = 0
    protocol_type: Annotated[NullableString, Versions("5+")] = None
    protocol_name: Annotated[NullableString, Versions("5+")] = None
    assignment: Bytes = b""


SYNC_GROUP = Api(
    key=14,
    name="SyncGroup",
    min_version=0,
    max_version=5,
    flexible_from=4,
    request_type=SyncGroupRequest,
    response_type=SyncGroupResponse,
)
