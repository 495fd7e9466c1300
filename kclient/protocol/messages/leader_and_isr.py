"""LeaderAndIsr (key 4), versions 0-3, inter-broker (controller to broker).
Source: `LeaderAndIsrRequest.json` / `LeaderAndIsrResponse.json`; see the
Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_LeaderAndIsr).

The controller tells a broker which partitions it leads or follows, with
their ISR and replicas. v1+ marks new partitions (`is_new`); v2+ groups the
partition states by topic and carries the broker epoch (KIP-380); v3+ the
replicas being added or removed by a reassignment (KIP-455). Version 4 is
the first flexible one (not implemented)."""

from kclient.protocol.schema import Api, Field

#: `LeaderAndIsrPartitionState` (a common struct of the request).
_PARTITION_STATE = (
    Field("topic_name", "string", "0-1"),
    Field("partition_index", "int32"),
    Field("controller_epoch", "int32"),
    Field("leader", "int32"),
    Field("leader_epoch", "int32"),
    Field("isr", ("array", "int32")),
    Field("partition_epoch", "int32"),
    Field("replicas", ("array", "int32")),
    Field("adding_replicas", ("array", "int32"), "3+"),
    Field("removing_replicas", ("array", "int32"), "3+"),
    Field("is_new", "bool", "1+"),
)

LEADER_AND_ISR = Api(
    key=4,
    name="LeaderAndIsr",
    min_version=0,
    max_version=3,
    flexible_from=4,
    request_fields=(
        Field("controller_id", "int32"),
        Field("controller_epoch", "int32"),
        Field("broker_epoch", "int64", "2+", default=-1),
        Field("ungrouped_partition_states", _PARTITION_STATE, "0-1"),
        Field(
            "topic_states",
            (
                Field("topic_name", "string"),
                Field("partition_states", _PARTITION_STATE),
            ),
            "2+",
        ),
        Field(
            "live_leaders",
            (
                Field("broker_id", "int32"),
                Field("host_name", "string"),
                Field("port", "int32"),
            ),
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
