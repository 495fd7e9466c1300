"""DescribeTransactions (key 65), version 0. Source:
``DescribeTransactionsRequest.json`` / ``DescribeTransactionsResponse.json``;
see KIP-664 (tools to detect and abort hanging transactions) and the Kafka
protocol guide (https://kafka.apache.org/protocol#The_Messages_DescribeTransactions).

An admin client asks a transaction coordinator for the state of some
transactional ids (``kafka-transactions --describe``): the state by
Kafka's name (``Empty``, ``Ongoing``, ``PrepareCommit``, ``PrepareAbort``,
``CompleteCommit``, ``CompleteAbort``, ``Dead``, ``PrepareEpochFence``),
the timeout, the start time, the producer id and epoch, and the
partitions of the transaction (while it prepares to end, only those
without their marker yet). Flexible (KIP-482)."""

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, String


@attrs.define(kw_only=True)
class DescribeTransactionsRequest:
    """The DescribeTransactions request body, version 0
    (``DescribeTransactionsRequest.json``)."""

    #: The transactional ids to describe (none: no results).
    transactional_ids: list[String] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DescribeTransactionsTopicData:
    """An entry of ``DescribeTransactionsState.topics`` (``TopicData`` in the
    schema): one topic's partitions in the transaction."""

    topic: String = ""
    partitions: list[Int32] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DescribeTransactionsState:
    """An entry of ``DescribeTransactionsResponse.transaction_states``
    (``TransactionState`` in the schema): one transactional id."""

    error_code: Int16 = 0
    transactional_id: String = ""
    #: The state by Kafka's name (``Ongoing``, ``CompleteCommit``, ...).
    transaction_state: String = ""
    transaction_timeout_ms: Int32 = 0
    #: When the ongoing transaction started, in ms since the epoch (-1: none).
    transaction_start_time_ms: Int64 = 0
    producer_id: Int64 = 0
    producer_epoch: Int16 = 0
    topics: list[DescribeTransactionsTopicData] = attrs.Factory(list)


@attrs.define(kw_only=True)
class DescribeTransactionsResponse:
    """The DescribeTransactions response body, version 0
    (``DescribeTransactionsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    transaction_states: list[DescribeTransactionsState] = attrs.Factory(list)


DESCRIBE_TRANSACTIONS = Api(
    key=65,
    name="DescribeTransactions",
    min_version=0,
    max_version=0,
    flexible_from=0,
    request_type=DescribeTransactionsRequest,
    response_type=DescribeTransactionsResponse,
)
