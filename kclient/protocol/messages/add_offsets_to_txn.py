"""AddOffsetsToTxn (key 25), versions 0-4. Source:
``AddOffsetsToTxnRequest.json`` / ``AddOffsetsToTxnResponse.json``; see
KIP-98 and the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_AddOffsetsToTxn).

A transactional producer that will commit a consumer group's offsets in
its transaction (``send_offsets_to_transaction``) first tells its
transaction coordinator the group; the coordinator adds the group's
``__consumer_offsets`` partition to the transaction, so that the commit or
abort marker is written there too. The producer then sends the offsets
with TxnOffsetCommit to the group coordinator.

One layout in every version: v1 is v0 (responses sent before
throttling); v2 allows PRODUCER_FENCED (KIP-588); v3 is the first flexible
version (KIP-482); v4 allows TRANSACTION_ABORTABLE (KIP-890)."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, String


@attrs.define(kw_only=True)
class AddOffsetsToTxnRequest:
    """The AddOffsetsToTxn request body, versions 0-4 (``AddOffsetsToTxnRequest.json``)."""

    transactional_id: String = ""
    producer_id: Int64 = 0
    producer_epoch: Int16 = 0
    #: The consumer group whose offsets the transaction will commit.
    group_id: String = ""


@attrs.define(kw_only=True)
class AddOffsetsToTxnResponse:
    """The AddOffsetsToTxn response body, versions 0-4 (``AddOffsetsToTxnResponse.json``)."""

    throttle_time_ms: Int32 = 0
    error_code: Int16 = 0


ADD_OFFSETS_TO_TXN = Api(
    key=25,
    name="AddOffsetsToTxn",
    min_version=0,
    max_version=4,
    flexible_from=3,
    request_type=AddOffsetsToTxnRequest,
    response_type=AddOffsetsToTxnResponse,
)
