"""EndTxn (key 26), versions 0-5. Source: ``EndTxnRequest.json`` /
``EndTxnResponse.json``; see KIP-98, KIP-890 and the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_EndTxn).

A transactional producer ends its transaction: ``committed`` True commits,
False aborts. The coordinator writes PREPARE_COMMIT / PREPARE_ABORT to
``__transaction_state``, answers, and then has the markers written
(WriteTxnMarkers) to every partition of the transaction.

v1 is v0 (responses sent before throttling); v2 allows PRODUCER_FENCED
(KIP-588); v3 is the first flexible version (KIP-482); v4 allows
TRANSACTION_ABORTABLE (KIP-890); v5 (KIP-890, part 2: the epoch is bumped
at the end of every transaction) returns the producer id and epoch the
producer goes on with."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, Int64, String, Versions


@attrs.define(kw_only=True)
class EndTxnRequest:
    """The EndTxn request body, versions 0-5 (``EndTxnRequest.json``)."""

    transactional_id: String = ""
    producer_id: Int64 = 0
    producer_epoch: Int16 = 0
    #: True to commit the transaction, False to abort it.
    committed: Bool = False


@attrs.define(kw_only=True)
class EndTxnResponse:
    """The EndTxn response body, versions 0-5 (``EndTxnResponse.json``)."""

    throttle_time_ms: Int32 = 0
    error_code: Int16 = 0
    #: The producer id to use from now on (v5+, KIP-890).
    producer_id: Annotated[Int64, Versions("5+")] = -1
    #: The producer epoch to use from now on (v5+, KIP-890).
    producer_epoch: Annotated[Int16, Versions("5+")] = -1


END_TXN = Api(
    key=26,
    name="EndTxn",
    min_version=0,
    max_version=5,
    flexible_from=3,
    request_type=EndTxnRequest,
    response_type=EndTxnResponse,
)
