"""InitProducerId (key 22). Source: ``InitProducerIdRequest.json`` /
``InitProducerIdResponse.json``; see KIP-98 (idempotence and transactions),
KIP-360 and the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_InitProducerId). One set of
message classes serves two schemas:

* `INIT_PRODUCER_ID`, versions 0-1, what kclient's idempotent producer
  sends and the bundled broker decodes today (`kclient.protocol.messages.APIS`;
  adding versions there would change how the broker reads headers).
  Idempotent producers (kafka-python 3.x by default) ask for a producer id
  before their first Produce; a transactional producer names its
  ``transactional_id`` (the coordinator then bumps the epoch and fences the
  previous producer of that id).
* `INIT_PRODUCER_ID_FULL`, versions 0-5: v2 is the first flexible version
  (KIP-482); v3+ carries the producer's current ``producer_id`` and
  ``producer_epoch`` so that a producer can bump its epoch and go on after
  an INVALID_PRODUCER_EPOCH or UNKNOWN_PRODUCER_ID error (KIP-360; -1 for a
  new producer); v4 lets the coordinator answer PRODUCER_FENCED (KIP-588),
  v5 TRANSACTION_ABORTABLE (KIP-890). The response has one layout in every
  version. Versions 0-1 encode exactly as `INIT_PRODUCER_ID` does."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, NullableString, Versions


@attrs.define(kw_only=True)
class InitProducerIdRequest:
    """The InitProducerId request body, versions 0-5 (``InitProducerIdRequest.json``)."""

    #: The transactional id, or None for an idempotent (non-transactional)
    #: producer.
    transactional_id: NullableString = None
    #: How long the coordinator waits before aborting an idle transaction
    #: of this producer, in ms (only used with a transactional id).
    transaction_timeout_ms: Int32 = 0
    #: The producer's current id, -1 for a new producer (v3+, KIP-360).
    producer_id: Annotated[Int64, Versions("3+")] = -1
    #: The producer's current epoch, -1 for a new producer (v3+, KIP-360).
    producer_epoch: Annotated[Int16, Versions("3+")] = -1


@attrs.define(kw_only=True)
class InitProducerIdResponse:
    """The InitProducerId response body, versions 0-5 (``InitProducerIdResponse.json``)."""

    throttle_time_ms: Int32 = 0
    error_code: Int16 = 0
    producer_id: Int64 = -1
    producer_epoch: Int16 = -1


INIT_PRODUCER_ID = Api(
    key=22,
    name="InitProducerId",
    min_version=0,
    max_version=1,
    flexible_from=2,
    request_type=InitProducerIdRequest,
    response_type=InitProducerIdResponse,
)

INIT_PRODUCER_ID_FULL = Api(
    key=22,
    name="InitProducerId",
    min_version=0,
    max_version=5,
    flexible_from=2,
    request_type=InitProducerIdRequest,
    response_type=InitProducerIdResponse,
)
