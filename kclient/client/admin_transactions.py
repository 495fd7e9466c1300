"""Transactions kept by the brokers' transaction coordinators, as an admin
sees them: list the transactional ids and describe their current
transaction (Kafka's ``Admin.listTransactions`` and
``Admin.describeTransactions``; KIP-664, and KIP-994 for the duration
filter).

A transactional id's coordinator is the broker FindCoordinator (key type
1) names: the leader of the id's ``__transaction_state`` partition.
ListTransactions goes to every broker, each answering for the
transactional ids it coordinates. These functions work on a
`kclient.client.cluster.Cluster`; `kclient.client.admin.AdminClient`
exposes them.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from kclient.client.admin_groups import RETRIABLE_COORDINATOR_ERRORS, find_coordinator
from kclient.errors import (
    NONE,
    TRANSACTIONAL_ID_NOT_FOUND,
    TransactionalIdNotFoundError,
    UnsupportedVersionError,
    error_for_code,
)
from kclient.protocol.messages import DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS
from kclient.protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse, DescribeTransactionsState
from kclient.protocol.messages.find_coordinator import COORDINATOR_TRANSACTION
from kclient.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse

if TYPE_CHECKING:
    from kclient.client.cluster import Cluster
    from kclient.net.connection import BrokerConnection

__all__ = [
    "TransactionDescription",
    "TransactionListing",
    "describe_transactions",
    "list_transactions",
]

log = logging.getLogger(__name__)

#: Error codes after which the coordinator is looked up (or asked) again.


@attrs.frozen
class TransactionListing:
    """A transactional id as ListTransactions names it (Kafka's
    ``TransactionListing``).

    Attributes:
        transactional_id: The producer's ``transactional.id``.
        producer_id: The producer id the coordinator gave it.
        state: The state by Kafka's name (``Empty``, ``Ongoing``,
            ``PrepareCommit``, ``PrepareAbort``, ``CompleteCommit``,
            ``CompleteAbort``, ``PrepareEpochFence``, ``Dead``).
        coordinator_id: The broker that answered for it (its coordinator).
    """

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@attrs.frozen
class TransactionDescription:
    """A transactional id as DescribeTransactions describes it (Kafka's
    ``TransactionDescription``).

    Attributes:
        transactional_id: The producer's ``transactional.id``.
        coordinator_id: Its transaction coordinator.
        state: The state by Kafka's name (see `TransactionListing`).
        producer_id: The producer id.
        producer_epoch: The producer epoch.
        transaction_timeout_ms: The producer's ``transaction.timeout.ms`` (ms).
        transaction_start_time_ms: When the current transaction started (ms
            since the epoch); None when none is ongoing.
        topic_partitions: ``((topic, partition), ...)`` in the transaction,
            sorted (while it prepares to end, those without their marker yet).
    """

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    topic_partitions: tuple[tuple[str, int], ...]


async def _list_at(conn: BrokerConnection, node_id: int, request: ListTransactionsRequest, *, deadline: float, backoff_ms: int) -> list[TransactionListing]:
    """ListTransactions at one broker, asked again while its coordinator
    loads (until ``deadline``, trio time in s)."""
    version = conn.version_for(LIST_TRANSACTIONS, ceiling=1)
    if request.duration_filter >= 0 and version < 1:
        raise UnsupportedVersionError(f"broker {node_id}: ListTransactions v{version} has no duration filter (KIP-994 needs v1)")
    while True:
        r: ListTransactionsResponse = await conn.request(LIST_TRANSACTIONS, request, version=version)
        if r.error_code == NONE:
            return [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state, node_id) for t in r.transaction_states]
        if r.error_code not in RETRIABLE_COORDINATOR_ERRORS or trio.current_time() + backoff_ms / 1000 >= deadline:
            raise error_for_code(r.error_code)(f"ListTransactions on broker {node_id}")
        await trio.sleep(backoff_ms / 1000)


async def list_transactions(
    cluster: Cluster,
    *,
    states: Collection[str] | None = None,
    producer_ids: Collection[int] | None = None,
    duration_filter_ms: int | None = None,
    timeout_ms: int,
    backoff_ms: int,
) -> list[TransactionListing]:
    """Every transactional id the live brokers coordinate (ListTransactions
    to each broker, KIP-664), merged.

    Args:
        cluster: The client's cluster view (its metadata is refreshed).
        states: Only these states (Kafka's names, ``Ongoing``, ...); None
            or empty for every state. A state the broker does not know
            matches nothing.
        producer_ids: Only these producer ids; None or empty for all.
        duration_filter_ms: Only transactions running longer than this
            (ms; KIP-994, ListTransactions v1); None or negative for all.
        timeout_ms: How long a broker's coordinator may stay loading (ms).
        backoff_ms: Pause between attempts (ms).

    Returns:
        The listings, sorted by transactional id, then coordinator.

    Raises:
        BrokerResponseError: A broker's ListTransactions error
            (`CoordinatorLoadInProgressError` past ``timeout_ms``, ...).
        UnsupportedVersionError: A duration filter and a broker without
            ListTransactions v1, or a broker without ListTransactions
            (before Kafka 3.0).
        KafkaConnectionError: A live broker could not be reached.
    """
    request = ListTransactionsRequest(
        state_filters=sorted(states or ()),
        producer_id_filters=sorted(producer_ids or ()),
        duration_filter=-1 if duration_filter_ms is None or duration_filter_ms < 0 else duration_filter_ms,
    )
    deadline = trio.current_time() + timeout_ms / 1000
    md = await cluster.refresh_metadata((), allow_auto_create=False)
    out: list[TransactionListing] = []
    for node_id in sorted(md.brokers):
        conn = await cluster.broker_connection(node_id)
        out += await _list_at(conn, node_id, request, deadline=deadline, backoff_ms=backoff_ms)
    return sorted(out, key=lambda t: (t.transactional_id, t.coordinator_id))


async def _describe_one(cluster: Cluster, transactional_id: str, *, timeout_ms: int, backoff_ms: int) -> tuple[int, DescribeTransactionsState]:
    """DescribeTransactions of one id at its coordinator, looked up again
    while the answer says the coordinator moved or loads (until
    ``timeout_ms``); the last answer whatever its error."""
    deadline = trio.current_time() + timeout_ms / 1000
    while True:
        node_id, conn = await find_coordinator(cluster, transactional_id, timeout_ms=timeout_ms, backoff_ms=backoff_ms, key_type=COORDINATOR_TRANSACTION)
        request = DescribeTransactionsRequest(transactional_ids=[transactional_id])
        r: DescribeTransactionsResponse = await conn.request(DESCRIBE_TRANSACTIONS, request, version=conn.version_for(DESCRIBE_TRANSACTIONS, ceiling=0))
        state: DescribeTransactionsState = r.transaction_states[0]
        if state.error_code not in RETRIABLE_COORDINATOR_ERRORS or trio.current_time() + backoff_ms / 1000 >= deadline:
            return node_id, state
        log.debug("transactional id %r at broker %d: %s; looking for the coordinator again", transactional_id, node_id, error_for_code(state.error_code).name)
        await trio.sleep(backoff_ms / 1000)


def _description(node_id: int, s: DescribeTransactionsState) -> TransactionDescription:
    partitions = tuple(sorted((t.topic, p) for t in s.topics for p in t.partitions))
    start = s.transaction_start_time_ms if s.transaction_start_time_ms >= 0 else None
    return TransactionDescription(
        s.transactional_id, node_id, s.transaction_state, s.producer_id, s.producer_epoch, s.transaction_timeout_ms, start, partitions
    )


async def describe_transactions(cluster: Cluster, transactional_ids: Sequence[str], *, timeout_ms: int, backoff_ms: int) -> dict[str, TransactionDescription]:
    """DescribeTransactions of each transactional id at its coordinator
    (KIP-664). ``cluster``, ``timeout_ms`` (for each id) and
    ``backoff_ms`` as in `kclient.client.admin_groups.find_coordinator`.

    Args:
        transactional_ids: The ``transactional.id`` values.

    Returns:
        ``{transactional_id: TransactionDescription}``.

    Raises:
        TransactionalIdNotFoundError: The coordinator does not know an id
            (error 105).
        BrokerResponseError: An id's other DescribeTransactions error;
            NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and
            COORDINATOR_NOT_AVAILABLE only once ``timeout_ms`` has passed.
        UnsupportedVersionError: The coordinator has no DescribeTransactions
            (before Kafka 3.0).
    """
    out = {}
    for tid in dict.fromkeys(transactional_ids):
        node_id, state = await _describe_one(cluster, tid, timeout_ms=timeout_ms, backoff_ms=backoff_ms)
        if state.error_code == TRANSACTIONAL_ID_NOT_FOUND:
            raise TransactionalIdNotFoundError(f"transactional id {tid!r} does not exist (coordinator {node_id})")
        if state.error_code != NONE:
            raise error_for_code(state.error_code)(f"DescribeTransactions of transactional id {tid!r} at broker {node_id}")
        out[tid] = _description(node_id, state)
    return out
