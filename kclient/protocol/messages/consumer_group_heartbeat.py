"""ConsumerGroupHeartbeat (key 68), versions 0-1. Source:
`ConsumerGroupHeartbeatRequest.json` / `ConsumerGroupHeartbeatResponse.json`;
see KIP-848 (the next-generation consumer rebalance protocol) and the Kafka
protocol guide (https://kafka.apache.org/protocol).

One RPC does what JoinGroup, SyncGroup, Heartbeat and LeaveGroup do in the
classic protocol: a member joins with epoch 0, leaves with epoch -1 (a
static member that will come back: -2), and otherwise heartbeats with its
current epoch, its subscription and the partitions it owns whenever they
changed (null fields mean "unchanged"). The coordinator answers with the
member's id and epoch, the heartbeat interval, and the assignment when it
changed (null otherwise). Every version is flexible. v1 adds the
subscribed topic regex, and from v1 the consumer generates its own member
id (a UUID, KIP-1082) instead of joining with an empty one.

The topic-partition lists name topics by topic id (KIP-516), not by name."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, NullableString, String, Uuid, Versions

#: ``member_epoch`` a member joins with.
JOIN_EPOCH = 0
#: ``member_epoch`` a member leaves with.
LEAVE_EPOCH = -1
#: ``member_epoch`` a static member leaves with when it will rejoin with
#: the same instance id (KIP-848).
STATIC_LEAVE_EPOCH = -2


@attrs.define(kw_only=True)
class ConsumerGroupHeartbeatTopicPartitions:
    """An entry of ``ConsumerGroupHeartbeatRequest.topic_partitions`` and of
    ``ConsumerGroupHeartbeatAssignment.topic_partitions``: one topic's
    partitions (``TopicPartitions`` in the schema)."""

    topic_id: Uuid = None
    partitions: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ConsumerGroupHeartbeatRequest:
    """The ConsumerGroupHeartbeat request body, versions 0-1
    (``ConsumerGroupHeartbeatRequest.json``)."""

    group_id: String = ""
    member_id: String = ""
    member_epoch: Int32 = 0
    instance_id: NullableString = None
    rack_id: NullableString = None
    #: -1 when unchanged since the last heartbeat; else the time the
    #: coordinator waits for the member to revoke partitions, in ms.
    rebalance_timeout_ms: Int32 = -1
    subscribed_topic_names: list[String] | None = None
    subscribed_topic_regex: Annotated[NullableString, Versions("1+")] = None
    server_assignor: NullableString = None
    #: The partitions the member owns, or None when unchanged.
    topic_partitions: list[ConsumerGroupHeartbeatTopicPartitions] | None = None


@attrs.define(kw_only=True)
class ConsumerGroupHeartbeatAssignment:
    """``ConsumerGroupHeartbeatResponse.assignment``: the partitions the
    member may use now (``Assignment`` in the schema)."""

    topic_partitions: list[ConsumerGroupHeartbeatTopicPartitions] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ConsumerGroupHeartbeatResponse:
    """The ConsumerGroupHeartbeat response body, versions 0-1
    (``ConsumerGroupHeartbeatResponse.json``)."""

    throttle_time_ms: Int32 = 0
    error_code: Int16 = 0
    error_message: NullableString = None
    member_id: NullableString = None
    member_epoch: Int32 = 0
    heartbeat_interval_ms: Int32 = 0
    #: The member's new assignment, or None when it did not change.
    assignment: ConsumerGroupHeartbeatAssignment | None = None


CONSUMER_GROUP_HEARTBEAT = Api(
    key=68,
    name="ConsumerGroupHeartbeat",
    min_version=0,
    max_version=1,
    flexible_from=0,
    request_type=ConsumerGroupHeartbeatRequest,
    response_type=ConsumerGroupHeartbeatResponse,
)
