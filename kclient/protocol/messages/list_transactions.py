"""ListTransactions (key 66), versions 0-1. Source:
``ListTransactionsRequest.json`` / ``ListTransactionsResponse.json``; see
KIP-664 (tools to detect and abort hanging transactions), KIP-994 and the
Kafka protocol guide (https://kafka.apache.org/protocol#The_Messages_ListTransactions).

An admin client lists the transactional ids a transaction coordinator
knows (``kafka-transactions --list``), filtered by state (Kafka's state
names; the response lists the filters the coordinator does not know) and
by producer id; v1 adds ``duration_filter`` (KIP-994: only transactions
running longer than that many ms; -1 for all). Every version is flexible
(KIP-482); the response has one layout in both."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, String, Versions


@attrs.define(kw_only=True)
class ListTransactionsRequest:
    """The ListTransactions request body, versions 0-1 (``ListTransactionsRequest.json``)."""

    #: Only transactions in one of these states (none: every state).
    state_filters: list[String] = attrs.Factory(list)
    #: Only transactions of these producer ids (none: every producer).
    producer_id_filters: list[Int64] = attrs.Factory(list)
    #: Only transactions running longer than this, in ms; -1 for all (v1+).
    duration_filter: Annotated[Int64, Versions("1+")] = -1


@attrs.define(kw_only=True)
class ListTransactionsState:
    """An entry of ``ListTransactionsResponse.transaction_states``
    (``TransactionState`` in the schema)."""

    transactional_id: String = ""
    producer_id: Int64 = 0
    #: The state by Kafka's name (``Ongoing``, ``CompleteCommit``, ...).
    transaction_state: String = ""


@attrs.define(kw_only=True)
class ListTransactionsResponse:
    """The ListTransactions response body, versions 0-1 (``ListTransactionsResponse.json``)."""

    throttle_time_ms: Int32 = 0
    error_code: Int16 = 0
    #: The state filters of the request that the coordinator does not know.
    unknown_state_filters: list[String] = attrs.Factory(list)
    transaction_states: list[ListTransactionsState] = attrs.Factory(list)


LIST_TRANSACTIONS = Api(
    key=66,
    name="ListTransactions",
    min_version=0,
    max_version=1,
    flexible_from=0,
    request_type=ListTransactionsRequest,
    response_type=ListTransactionsResponse,
)
