"""CreateTopics (key 19), versions 0-4. Source: `CreateTopicsRequest.json` /
`CreateTopicsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_CreateTopics) and KIP-4.

Each topic names either a partition count and replication factor (-1 for
the broker defaults, KIP-464 in v4) or explicit replica assignments, plus
topic configs. v1+ adds `validate_only` and per-topic error messages
(KIP-108); v2+ the throttle time; v3 and v4 have the v2 layout.

Version 5 (the first flexible one, KIP-525) is not implemented: its
response carries `topic_config_error_code` as a tagged field with an
explicit tag (0), which `kclient.protocol.schema` cannot express yet."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, NullableString, String, Versions


@attrs.define(kw_only=True)
class CreatableReplicaAssignment:
    """An entry of ``CreatableTopic.assignments``."""

    partition_index: Int32 = 0
    broker_ids: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class CreatableTopicConfig:
    """An entry of ``CreatableTopic.configs``."""

    name: String = ""
    value: NullableString = None


@attrs.define(kw_only=True)
class CreatableTopic:
    """An entry of ``CreateTopicsRequest.topics``."""

    name: String = ""
    num_partitions: Int32 = 0
    replication_factor: Int16 = 0
    assignments: list[CreatableReplicaAssignment] = attrs.Factory(list)
    configs: list[CreatableTopicConfig] = attrs.Factory(list)


@attrs.define(kw_only=True)
class CreateTopicsRequest:
    """The CreateTopics request body, versions 0-4 (``CreateTopicsRequest.json``)."""

    topics: list[CreatableTopic] = attrs.Factory(list)
    timeout_ms: Int32 = 60000
    validate_only: Annotated[Bool, Versions("1+")] = False


@attrs.define(kw_only=True)
class CreatableTopicResult:
    """An entry of ``CreateTopicsResponse.topics``."""

    name: String = ""
    error_code: Int16 = 0
    error_message: Annotated[NullableString, Versions("1+")] = None


@attrs.define(kw_only=True)
class CreateTopicsResponse:
    """The CreateTopics response body, versions 0-4 (``CreateTopicsResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("2+")] = 0
    topics: list[CreatableTopicResult] = attrs.Factory(list)


CREATE_TOPICS = Api(
    key=19,
    name="CreateTopics",
    min_version=0,
    max_version=4,
    flexible_from=5,
    request_type=CreateTopicsRequest,
    response_type=CreateTopicsResponse,
)
