"""DeleteTopics (key 20), versions 0-6. Source: `DeleteTopicsRequest.json` /
`DeleteTopicsResponse.json`; see the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_DeleteTopics) and KIP-4.

v0-5 name the topics; v6+ names them or gives their topic ids (KIP-516),
and the response then may have a null name. v1+ adds the throttle time;
v4 is the first flexible version (KIP-482); v5+ per-topic error messages,
and the error THROTTLING_QUOTA_EXCEEDED (KIP-599)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, NullableString, NullableVersions, String, Uuid, Versions


@attrs.define(kw_only=True)
class DeleteTopicState:
    """An entry of ``DeleteTopicsRequest.topics``."""

    name: NullableString = None
    topic_id: Uuid = None


@attrs.define(kw_only=True)
class DeleteTopicsRequest:
    """The DeleteTopics request body, versions 0-6 (``DeleteTopicsRequest.json``)."""

    topics: Annotated[list[DeleteTopicState], Versions("6+")] = attrs.Factory(list)
    topic_names: Annotated[list[String], Versions("0-5")] = attrs.Factory(list)
    timeout_ms: Int32 = 0


@attrs.define(kw_only=True)
class DeletableTopicResult:
    """An entry of ``DeleteTopicsResponse.responses``."""

    name: Annotated[NullableString, NullableVersions("6+")] = ""
    topic_id: Annotated[Uuid, Versions("6+")] = None
    error_code: Int16 = 0
    error_message: Annotated[NullableString, Versions("5+")] = None


@attrs.define(kw_only=True)
class DeleteTopicsResponse:
    """The DeleteTopics response body, versions 0-6 (``DeleteTopicsResponse.json``)."""

    throttle_time_ms: Annotated[Int32, Versions("1+")] = 0
    responses: list[DeletableTopicResult] = attrs.Factory(list)


DELETE_TOPICS = Api(
    key=20,
    name="DeleteTopics",
    min_version=0,
    max_version=6,
    flexible_from=4,
    request_type=DeleteTopicsRequest,
    response_type=DeleteTopicsResponse,
)
