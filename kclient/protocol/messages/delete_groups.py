"""DeleteGroups (key 42), versions 0-2. Source: `DeleteGroupsRequest.json` /
`DeleteGroupsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DeleteGroups) and KIP-229.

Deletes empty consumer groups (and their committed offsets), answered per
group. v1 has the v0 layout; v2 is the first flexible version (KIP-482)."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, String


@attrs.define(kw_only=True)
class DeleteGroupsRequest:
    """The DeleteGroups request body, versions 0-2 (``DeleteGroupsRequest.json``)."""

    groups_names: list[String] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DeletableGroupResult:
    """An entry of ``DeleteGroupsResponse.results``."""

    group_id: String = ""
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class DeleteGroupsResponse:
    """The DeleteGroups response body, versions 0-2 (``DeleteGroupsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    results: list[DeletableGroupResult] = attrs.Factory(list)


DELETE_GROUPS = Api(
    key=42,
    name="DeleteGroups",
    min_version=0,
    max_version=2,
    flexible_from=2,
    request_type=DeleteGroupsRequest,
    response_type=DeleteGroupsResponse,
)
