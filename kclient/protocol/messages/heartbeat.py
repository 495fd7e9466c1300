"""Heartbeat (key 12), versions 0-4. Source: `HeartbeatRequest.json` /
`HeartbeatResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_Heartbeat).

A member's keep-alive within a generation; the error code tells it to
rejoin (REBALANCE_IN_PROGRESS and friends). v1+ adds the throttle time; v3+
the static `group_instance_id` (KIP-345); v4 is the first flexible
version (KIP-482)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, NullableString, String, Versions


@attrs.define(kw_only=True)
class HeartbeatRequest:
    """The Heartbeat request body, versions 0-4 (``HeartbeatRequest.json``)."""

    group_id: String = ""
    generation_id: Int32 = 0
    member_id: String = ""
    group_instance_id: Annotated[NullableString, Versions("3+")] = None


@attrs.define(kw_only=True)
class HeartbeatResponse:
    """The Heartbeat response body, versions 0-4 (``HeartbeatResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0
    error_code: Int16 = 0


HEARTBEAT = Api(
    key=12,
    name="Heartbeat",
    min_version=0,
    max_version=4,
    flexible_from=4,
    request_type=HeartbeatRequest,
    response_type=HeartbeatResponse,
)
