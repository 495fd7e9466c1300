"""WriteTxnMarkers (key 27), versions 0-1. Source:
``WriteTxnMarkersRequest.json`` / ``WriteTxnMarkersResponse.json``; see
KIP-98 and the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_WriteTxnMarkers).

Broker to broker: a transaction coordinator asks the leader of each
partition of an ending transaction to append a COMMIT or ABORT control
batch (`kclient.protocol.records.control`) for the producer, stamped with
the coordinator's epoch (the epoch of its ``__transaction_state``
partition). ``transaction_result`` False is ABORT, True COMMIT.

One layout in both versions; v1 is the first flexible one (KIP-482)."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, Int64, String


@attrs.define(kw_only=True)
class WritableTxnMarkerTopic:
    """An entry of ``WritableTxnMarker.topics``: the partitions of one topic
    that get the marker."""

    name: String = ""
    partition_indexes: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class WritableTxnMarker:
    """An entry of ``WriteTxnMarkersRequest.markers``: one producer's marker."""

    producer_id: Int64 = 0
    producer_epoch: Int16 = 0
    #: False: ABORT; True: COMMIT.
    transaction_result: Bool = False
    topics: list[WritableTxnMarkerTopic] = attrs.Factory(list)
    #: The epoch of the coordinator's ``__transaction_state`` partition.
    coordinator_epoch: Int32 = 0


@attrs.define(kw_only=True)
class WriteTxnMarkersRequest:
    """The WriteTxnMarkers request body, versions 0-1 (``WriteTxnMarkersRequest.json``)."""

    markers: list[WritableTxnMarker] = attrs.Factory(list)


@attrs.define(kw_only=True)
class WritableTxnMarkerPartitionResult:
    """An entry of ``WritableTxnMarkerTopicResult.partitions``."""

    partition_index: Int32 = 0
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class WritableTxnMarkerTopicResult:
    """An entry of ``WritableTxnMarkerResult.topics``."""

    name: String = ""
    partitions: list[WritableTxnMarkerPartitionResult] = attrs.Factory(list)


@attrs.define(kw_only=True)
class WritableTxnMarkerResult:
    """An entry of ``WriteTxnMarkersResponse.markers``: one producer's results."""

    producer_id: Int64 = 0
    topics: list[WritableTxnMarkerTopicResult] = attrs.Factory(list)


@attrs.define(kw_only=True)
class WriteTxnMarkersResponse:
    """The WriteTxnMarkers response body, versions 0-1 (``WriteTxnMarkersResponse.json``)."""

    markers: list[WritableTxnMarkerResult] = attrs.Factory(list)


WRITE_TXN_MARKERS = Api(
    key=27,
    name="WriteTxnMarkers",
    min_version=0,
    max_version=1,
    flexible_from=1,
    request_type=WriteTxnMarkersRequest,
    response_type=WriteTxnMarkersResponse,
)
