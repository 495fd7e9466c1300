"""LeaderAndIsr (key 4), versions 0-3, inter-broker (controller to broker).
Source: `LeaderAndIsrRequest.json` / `LeaderAndIsrResponse.json`; see the
Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_LeaderAndIsr).

The controller tells a broker which partitions it leads or follows, with
their ISR and replicas. v1+ marks new partitions (`is_new`); v2+ groups the
partition states by topic and carries the broker epoch (KIP-380); v3+ the
replicas being added or removed by a reassignment (KIP-455). Version 4 is
the first flexible one (not implemented)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, Int64, String, Versions


@attrs.define(kw_only=True)
class LeaderAndIsrPartitionState:
    """An entry of ``LeaderAndIsrRequest.ungrouped_partition_states``."""

    topic_name: Annotated[String, Versions("0-1")] = ""
    partition_index: Int32 = 0
    controller_epoch: Int32 = 0
    leader: Int32 = 0
    leader_epoch: Int32 = 0
    isr: list[Int32] = attrs.Factory(list)
    partition_epoch: Int32 = 0
    replicas: list[Int32] = attrs.Factory(list)
    adding_replicas: Annotated[list[Int32], Versions("3+")] = attrs.Factory(list)
    removing_replicas: Annotated[list[Int32], Versions("3+")] = attrs.Factory(list)
    is_new: Annotated[Bool, Versions("1+")] = False


@attrs.define(kw_only=True)
class LeaderAndIsrTopicState:
    """An entry of ``LeaderAndIsrRequest.topic_states``."""

    topic_name: String = ""
    partition_states: list[LeaderAndIsrPartitionState] = attrs.Factory(list)


@attrs.define(kw_only=True)
class LeaderAndIsrLiveLeader:
    """An entry of ``LeaderAndIsrRequest.live_leaders``."""

    broker_id: Int32 = 0
    host_name: String = ""
    port: Int32 = 0


@attrs.define(kw_only=True)
class LeaderAndIsrRequest:
    """The LeaderAndIsr request body, versions 0-3 (``LeaderAndIsrRequest.json``)."""

    controller_id: Int32 = 0
    controller_epoch: Int32 = 0
    broker_epoch: Annotated[Int64, Versions("2+")] = -1
    ungrouped_partition_states: Annotated[list[LeaderAndIsrPartitionState], Versions("0-1")] = attrs.Factory(list)
    topic_states: Annotated[list[LeaderAndIsrTopicState], Versions("2+")] = attrs.Factory(list)
    live_leaders: list[LeaderAndIsrLiveLeader] = attrs.Factory(list)


@attrs.define(kw_only=True)
class LeaderAndIsrPartitionError:
    """An entry of ``LeaderAndIsrResponse.partition_errors``."""

    topic_name: String = ""
    partition_index: Int32 = 0
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class LeaderAndIsrResponse:
    """The LeaderAndIsr response body, versions 0-3 (``LeaderAndIsrResponse.json``)."""

    error_code: Int16 = 0
    partition_errors: list[LeaderAndIsrPartitionError] = attrs.Factory(list)


LEADER_AND_ISR = Api(
    key=4,
    name="LeaderAndIsr",
    min_version=0,
    max_version=3,
    flexible_from=4,
    request_type=LeaderAndIsrRequest,
    response_type=LeaderAndIsrResponse,
)
