"""UpdateMetadata (key 6), versions 0-5, inter-broker (controller to broker).
Source: `UpdateMetadataRequest.json` / `UpdateMetadataResponse.json`; see
the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_UpdateMetadata).

The controller pushes partition states and live brokers to every broker's
metadata cache. v1+ lists each broker's endpoints (host, port, security
protocol) instead of one host and port; v2+ the broker rack; v3+ each
endpoint's listener name; v4+ offline replicas; v5+ groups partition
states by topic and carries the broker epoch (KIP-380). Version 6 is the
first flexible one (not implemented)."""

from kclient.protocol.schema import Api, Field

#: `UpdateMetadataPartitionState` (a common struct of the request).
_PARTITION_STATE = (
    Field("topic_name", "string", "0-4"),
    Field("partition_index", "int32"),
    Field("controller_epoch", "int32"),
    Field("leader", "int32"),
    Field("leader_epoch", "int32"),
    Field("isr", ("array", "int32")),
    Field("zk_version", "int32"),
    Field("replicas", ("array", "int32")),
    Field("offline_replicas", ("array", "int32"), "4+"),
)

UPDATE_METADATA = Api(
    key=6,
    name="UpdateMetadata",
    min_version=0,
    max_version=5,
    flexible_from=6,
    request_fields=(
        Field("controller_id", "int32"),
        Field("controller_epoch", "int32"),
        Field("broker_epoch", "int64", "5+", default=-1),
        Field("ungrouped_partition_states", _PARTITION_STATE, "0-4"),
        Field(
            "topic_states",
            (
                Field("topic_name", "string"),
                Field("partition_states", _PARTITION_STATE),
            ),
            "5+",
        ),
        Field(
            "live_brokers",
            (
                Field("id", "int32"),
                Field("v0_host", "string", "0"),
                Field("v0_port", "int32", "0"),
                Field(
                    "endpoints",
                    (
                        Field("port", "int32"),
                        Field("host", "string"),
                        Field("listener", "string", "3+"),
                        Field("security_protocol", "int16"),
                    ),
                    "1+",
                ),
                Field("rack", "nullable_string", "2+"),
            ),
        ),
    ),
    response_fields=(Field("error_code", "int16"),),
)
