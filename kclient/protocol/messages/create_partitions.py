"""CreatePartitions (key 37), versions 0-3. Source:
`CreatePartitionsRequest.json` / `CreatePartitionsResponse.json`; see the
Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_CreatePartitions) and
KIP-195.

Raises the partition count of existing topics (``kafka-topics --alter
--partitions``, the Java ``Admin.createPartitions``). Each topic names its
new total ``count`` and, optionally (null otherwise), one replica list per
new partition. v1 has the v0 layout; v2 is the first flexible version
(KIP-482); v3 has the v2 layout and may answer THROTTLING_QUOTA_EXCEEDED
(KIP-599)."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, NullableString, String


@attrs.define(kw_only=True)
class CreatePartitionsAssignment:
    """An entry of ``CreatePartitionsTopic.assignments``."""

    broker_ids: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class CreatePartitionsTopic:
    """An entry of ``CreatePartitionsRequest.topics``."""

    name: String = ""
    count: Int32 = 0
    assignments: list[CreatePartitionsAssignment] | None = attrs.Factory(list)


@attrs.define(kw_only=True)
class CreatePartitionsRequest:
    """The CreatePartitions request body, versions 0-3 (``CreatePartitionsRequest.json``)."""

    topics: list[CreatePartitionsTopic] = attrs.Factory(list)
    timeout_ms: Int32 = 0
    validate_only: Bool = False


@attrs.define(kw_only=True)
class CreatePartitionsTopicResult:
    """An entry of ``CreatePartitionsResponse.results``."""

    name: String = ""
    error_code: Int16 = 0
    error_message: NullableString = None


@attrs.define(kw_only=True)
class CreatePartitionsResponse:
    """The CreatePartitions response body, versions 0-3 (``CreatePartitionsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    results: list[CreatePartitionsTopicResult] = attrs.Factory(list)


CREATE_PARTITIONS = Api(
    key=37,
    name="CreatePartitions",
    min_version=0,
    max_version=3,
    flexible_from=2,
    request_type=CreatePartitionsRequest,
    response_type=CreatePartitionsResponse,
)
