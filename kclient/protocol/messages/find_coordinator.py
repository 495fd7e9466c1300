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

from kclient.protocol.schema import Api, Field

#: ``key_type`` values (``CoordinatorType``).
COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1

FIND_COORDINATOR = Api(
    key=10,
    name="FindCoordinator",
    min_version=0,
    max_version=2,
    flexible_from=3,
    request_fields=(
        Field("key", "string"),
        Field("key_type", "int8", "1+"),
    ),
    response_fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16"),
        Field("error_message", "nullable_string", "1+"),
        Field("node_id", "int32", default=-1),
        Field("host", "string"),
        Field("port", "int32", default=-1),
    ),
)
