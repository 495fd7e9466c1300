"""StopReplica (key 5), versions 0-1, inter-broker (controller to broker).
Source: `StopReplicaRequest.json` / `StopReplicaResponse.json`; see the
Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_StopReplica).

The controller tells a broker to stop replicating partitions (and maybe
delete them). v0 lists (topic, partition) pairs; v1+ groups partitions by
topic and carries the broker epoch (KIP-380). Version 2 is the first
flexible one (not implemented)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, Int64, String, Versions


@attrs.define(kw_only=True)
class StopReplicaPartitionV0:
    """An entry of ``StopReplicaRequest.ungrouped_partitions``."""

    topic_name: String = ""
    partition_index: Int32 = 0


@attrs.define(kw_only=True)
class StopReplicaTopicV1:
    """An entry of ``StopReplicaRequest.topics``."""

    name: String = ""
    partition_indexes: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class StopReplicaRequest:
    """The StopReplica request body, versions 0-1 (``StopReplicaRequest.json``)."""

    controller_id: Int32 = 0
    controller_epoch: Int32 = 0
    broker_epoch: Annotated[Int64, Versions("1+")] = -1
    delete_partitions: Bool = False
    ungrouped_partitions: Annotated[list[StopReplicaPartitionV0], Versions("0")] = attrs.Factory(list)
    topics: Annotated[list[StopReplicaTopicV1], Versions("1+")] = attrs.Factory(list)


@attrs.define(kw_only=True)
class StopReplicaPartitionError:
    """An entry of ``StopReplicaResponse.partition_errors``."""

    topic_name: String = ""
    partition_index: Int32 = 0
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class StopReplicaResponse:
    """The StopReplica response body, versions 0-1 (``StopReplicaResponse.json``)."""

    error_code: Int16 = 0
    partition_errors: list[StopReplicaPartitionError] = attrs.Factory(list)


STOP_REPLICA = Api(
    key=5,
    name="StopReplica",
    min_version=0,
    max_version=1,
    flexible_from=2,
    request_type=StopReplicaRequest,
    response_type=StopReplicaResponse,
)
