"""FindCoordinator (key 10), versions 0-2. Source: ``FindCoordinatorRequest.json``
/ ``FindCoordinatorResponse.json`` (v0 was GroupCoordinator; KIP-98 added
``key_type`` in v1: 0 = consumer group, 1 = transactional id; v2 is the same
as v1). The response names the broker that coordinates ``key``. Version 3
is the first flexible one and v4 batches keys (KIP-699); neither is
implemented.

Why a broker needs it even without groups: librdkafka enables some features
(lz4 among them) only when the broker advertises FindCoordinator
(librdkafka before 2.11.1 gates its LZ4 feature on FindCoordinator; see
`kclient.broker.handlers.SUPPORTED_VERSIONS`)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int8, Int16, Int32, NullableString, String, Versions

#: ``key_type`` values (``CoordinatorType``).
COORDINATOR_GROUP = 0

COORDINATOR_TRANSACTION = 1


@attrs.define(kw_only=True)
class FindCoordinatorRequest:
    """The FindCoordinator request body, versions 0-2 (``FindCoordinatorRequest.json``)."""

    key: String = ""
    key_type: Annotated[Int8, Versions("1+")] = 0


@attrs.define(kw_only=True)
class FindCoordinatorResponse:
    """The FindCoordinator response body, versions 0-2 (``FindCoordinatorResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0
    error_code: Int16 = 0
    error_message: Annotated[NullableString, Versions("1+")] = None
    node_id: Int32 = -1
    host: String = ""
    port: Int32 = -1


FIND_COORDINATOR = Api(
    key=10,
    name="FindCoordinator",
    min_version=0,
    max_version=2,
    flexible_from=3,
    request_type=FindCoordinatorRequest,
    response_type=FindCoordinatorResponse,
)
