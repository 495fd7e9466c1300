"""AddPartitionsToTxn (key 24), versions 0-5. Source:
``AddPartitionsToTxnRequest.json`` / ``AddPartitionsToTxnResponse.json``;
see KIP-98, KIP-890 and the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_AddPartitionsToTxn).

A transactional producer tells its transaction coordinator the partitions
it is about to write to, before its first Produce to each of them in a
transaction; the coordinator records them in ``__transaction_state`` so
that it knows where to write the markers when the transaction ends.

Versions 0-3 are the client's form: one transaction, its fields named
``v3_and_below_*`` in the request and its results in
``results_by_topic_v3_and_below``. Versions 4+ are the brokers' batched
form (KIP-890, part 1): a partition leader asks the coordinator, for
several transactions at once, whether a partition is in a transaction
(``verify_only``) before it appends a transactional batch, and the
response nests the results per transaction, with a top-level error code.
v1 is v0 (responses sent before throttling); v2 allows PRODUCER_FENCED
(KIP-588); v3 is the first flexible version (KIP-482); v5 allows
TRANSACTION_ABORTABLE (KIP-890)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Bool, Int16, Int32, Int64, String, Versions


@attrs.define(kw_only=True)
class AddPartitionsToTxnTopic:
    """An entry of ``AddPartitionsToTxnRequest.v3_and_below_topics`` and of
    ``AddPartitionsToTxnTransaction.topics``: one topic's partitions."""

    name: String = ""
    partitions: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AddPartitionsToTxnTransaction:
    """An entry of ``AddPartitionsToTxnRequest.transactions`` (v4+): one
    transaction whose partitions a broker adds or verifies."""

    transactional_id: String = ""
    producer_id: Int64 = 0
    producer_epoch: Int16 = 0
    #: True: only check that the partitions are in the transaction (a
    #: partition leader verifying a transactional Produce, KIP-890).
    verify_only: Bool = False
    topics: list[AddPartitionsToTxnTopic] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AddPartitionsToTxnRequest:
    """The AddPartitionsToTxn request body, versions 0-5
    (``AddPartitionsToTxnRequest.json``)."""

    transactions: Annotated[list[AddPartitionsToTxnTransaction], Versions("4+")] = attrs.Factory(list)
    v3_and_below_transactional_id: Annotated[String, Versions("0-3")] = ""
    v3_and_below_producer_id: Annotated[Int64, Versions("0-3")] = 0
    v3_and_below_producer_epoch: Annotated[Int16, Versions("0-3")] = 0
    v3_and_below_topics: Annotated[list[AddPartitionsToTxnTopic], Versions("0-3")] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AddPartitionsToTxnPartitionResult:
    """An entry of ``AddPartitionsToTxnTopicResult.results_by_partition``."""

    partition_index: Int32 = 0
    partition_error_code: Int16 = 0


@attrs.define(kw_only=True)
class AddPartitionsToTxnTopicResult:
    """An entry of ``AddPartitionsToTxnResponse.results_by_topic_v3_and_below``
    and of ``AddPartitionsToTxnResult.topic_results``."""

    name: String = ""
    results_by_partition: list[AddPartitionsToTxnPartitionResult] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AddPartitionsToTxnResult:
    """An entry of ``AddPartitionsToTxnResponse.results_by_transaction`` (v4+)."""

    transactional_id: String = ""
    topic_results: list[AddPartitionsToTxnTopicResult] = attrs.Factory(list)


@attrs.define(kw_only=True)
class AddPartitionsToTxnResponse:
    """The AddPartitionsToTxn response body, versions 0-5
    (``AddPartitionsToTxnResponse.json``)."""

    throttle_time_ms: Int32 = 0
    #: The top-level error code (v4+).
    error_code: Annotated[Int16, Versions("4+")] = 0
    results_by_transaction: Annotated[list[AddPartitionsToTxnResult], Versions("4+")] = attrs.Factory(list)
    results_by_topic_v3_and_below: Annotated[list[AddPartitionsToTxnTopicResult], Versions("0-3")] = attrs.Factory(list)


ADD_PARTITIONS_TO_TXN = Api(
    key=24,
    name="AddPartitionsToTxn",
    min_version=0,
    max_version=5,
    flexible_from=3,
    request_type=AddPartitionsToTxnRequest,
    response_type=AddPartitionsToTxnResponse,
)
