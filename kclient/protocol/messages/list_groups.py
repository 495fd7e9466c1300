"""ListGroups (key 16), versions 0-5. Source: `ListGroupsRequest.json` /
`ListGroupsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_ListGroups).

The groups a broker coordinates. v1+ adds the throttle time; v3 is the
first flexible version (KIP-482); v4+ filters by state and reports it
(KIP-518); v5+ filters by group type and reports it (KIP-848)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, String, Versions


@attrs.define(kw_only=True)
class ListGroupsRequest:
    """The ListGroups request body, versions 0-5 (``ListGroupsRequest.json``)."""

    states_filter: Annotated[list[String], Versions("4+")] = attrs.Factory(list)
    types_filter: Annotated[list[String], Versions("5+")] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ListedGroup:
    """An entry of ``ListGroupsResponse.groups``."""

    group_id: String = ""
    protocol_type: String = ""
    group_state: Annotated[String, Versions("4+")] = ""
    group_type: Annotated[String, Versions("5+")] = ""


@attrs.define(kw_only=True)
class ListGroupsResponse:
    """The ListGroups response body, versions 0-5 (``ListGroupsResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0
    error_code: Int16 = 0
    groups: list[ListedGroup] = attrs.Factory(list)


LIST_GROUPS = Api(
    key=16,
    name="ListGroups",
    min_version=0,
    max_version=5,
    flexible_from=3,
    request_type=ListGroupsRequest,
    response_type=ListGroupsResponse,
)
