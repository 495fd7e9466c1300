"""ConsumerGroupDescribe (key 69), version 0. Source:
`ConsumerGroupDescribeRequest.json` / `ConsumerGroupDescribeResponse.json`;
see KIP-848 and the Kafka protocol guide (https://kafka.apache.org/protocol).

DescribeGroups for groups of the consumer protocol (KIP-848): each group's
state, group and assignment epochs, the server-side assignor, and each
member's epoch, subscription, current and target assignment (topic ids and
names). Flexible (KIP-482)."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, NullableString, String, Uuid

#: ``authorized_operations`` when the request did not ask for them (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@attrs.define(kw_only=True)
class ConsumerGroupDescribeRequest:
    """The ConsumerGroupDescribe request body, version 0
    (``ConsumerGroupDescribeRequest.json``)."""

    group_ids: list[String] = attrs.Factory(list)
    include_authorized_operations: Bool = False


@attrs.define(kw_only=True)
class ConsumerGroupDescribeTopicPartitions:
    """An entry of ``ConsumerGroupDescribeAssignment.topic_partitions``
    (``TopicPartitions`` in the schema)."""

    topic_id: Uuid = None
    topic_name: String = ""
    partitions: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ConsumerGroupDescribeAssignment:
    """A member's current or target assignment (``Assignment`` in the schema)."""

    topic_partitions: list[ConsumerGroupDescribeTopicPartitions] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ConsumerGroupDescribeMember:
    """An entry of ``ConsumerGroupDescribeGroup.members``."""

    member_id: String = ""
    instance_id: NullableString = None
    rack_id: NullableString = None
    member_epoch: Int32 = 0
    client_id: String = ""
    client_host: String = ""
    subscribed_topic_names: list[String] = attrs.Factory(list)
    subscribed_topic_regex: NullableString = None
    assignment: ConsumerGroupDescribeAssignment = attrs.Factory(ConsumerGroupDescribeAssignment)
    target_assignment: ConsumerGroupDescribeAssignment = attrs.Factory(ConsumerGroupDescribeAssignment)


@attrs.define(kw_only=True)
class ConsumerGroupDescribeGroup:
    """An entry of ``ConsumerGroupDescribeResponse.groups`` (``DescribedGroup``
    in the schema)."""

    error_code: Int16 = 0
    error_message: NullableString = None
    group_id: String = ""
    group_state: String = ""
    group_epoch: Int32 = 0
    assignment_epoch: Int32 = 0
    assignor_name: String = ""
    members: list[ConsumerGroupDescribeMember] = attrs.Factory(list)
    authorized_operations: Int32 = AUTHORIZED_OPERATIONS_OMITTED


@attrs.define(kw_only=True)
class ConsumerGroupDescribeResponse:
    """The ConsumerGroupDescribe response body, version 0
    (``ConsumerGroupDescribeResponse.json``)."""

    throttle_time_ms: Int32 = 0
    groups: list[ConsumerGroupDescribeGroup] = attrs.Factory(list)


CONSUMER_GROUP_DESCRIBE = Api(
    key=69,
    name="ConsumerGroupDescribe",
    min_version=0,
    max_version=0,
    flexible_from=0,
    request_type=ConsumerGroupDescribeRequest,
    response_type=ConsumerGroupDescribeResponse,
)
