"""StopReplica (key 5), versions 0-1, inter-broker (controller to broker).
Source: `StopReplicaRequest.json` / `StopReplicaResponse.json`; see the
Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_StopReplica).

The controller tells a broker to stop replicating partitions (and maybe
delete them). v0 lists (topic, partition) pairs; v1+ groups partitions by
topic and carries the broker epoch (KIP-380). Version 2 is the first
flexible one (not implemented)."""

from kclient.protocol.schema import Api, Field

STOP_REPLICA = Api(
    key=5,
    name="StopReplica",
    min_version=0,
    max_version=1,
    flexible_from=2,
    request_fields=(
        Field("controller_id", "int32"),
        Field("controller_epoch", "int32"),
        Field("broker_epoch", "int64", "1+", default=-1),
        Field("delete_partitions", "bool"),
        Field(
            "ungrouped_partitions",
            (
                Field("topic_name", "string"),
                Field("partition_index", "int32"),
            ),
            "0",
        ),
        Field(
            "topics",
            (
                Field("name", "string"),
                Field("partition_indexes", ("array", "int32")),
            ),
            "1+",
        ),
    ),
    response_fields=(
        Field("error_code", "int16"),
        Field(
            "partition_errors",
            (
                Field("topic_name", "string"),
                Field("partition_index", "int32"),
                Field("error_code", "int16"),
            ),
        ),
    ),
)
