"""The transaction coordinator's cache, as Kafka's
``TransactionStateManager`` keeps it, without I/O.

A broker coordinates the transactional ids of the ``__transaction_state``
partitions it leads (`kclient.broker.txn.partitioner.partition_for`). When
it becomes a partition's leader (at a coordinator epoch, the partition's
leader epoch), it loads the partition: every record, in order, the last
value of a key winning and a tombstone removing it; transactions found in
PrepareCommit or PrepareAbort get their markers written again. While
loading, requests for its ids are answered COORDINATOR_LOAD_IN_PROGRESS; for
ids of partitions it does not lead, NOT_COORDINATOR. On resignation the
partition's ids are dropped.

It also finds the transactions to abort (``transaction.timeout.ms``), the
idle ids to expire (``transactional.id.expiration.ms``), and answers
DescribeTransactions and ListTransactions (KIP-664).

Pure: no I/O; the clock is injected (``clock``, ms since the epoch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs

from kclient.broker.txn.coordinator import TransactionResult, TxnMarkers
from kclient.broker.txn.metadata import EXPIRATION_ALLOWED, TopicPartition, TransactionMetadata, TransactionState, TxnTransitMetadata
from kclient.broker.txn.partitioner import DEFAULT_NUM_PARTITIONS, partition_for
from kclient.broker.txn.records import metadata_from_value
from kclient.clock import now_ms
from kclient.errors import COORDINATOR_LOAD_IN_PROGRESS, NONE, NOT_COORDINATOR, TRANSACTIONAL_ID_NOT_FOUND
from kclient.protocol.messages.transaction_log import decode_key, decode_value

#: ``transactional.id.expiration.ms``'s default (7 days).
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000


@attrs.frozen
class TransactionDescription:
    """One transactional id as DescribeTransactions gives it (KIP-664).

    Attributes:
        error: ``NONE``, or the error for this id.
        transactional_id: The id.
        state: Kafka's state name (``"Ongoing"``), "" with an error.
        producer_id: The producer id (-1 with an error).
        producer_epoch: The producer epoch (-1 with an error).
        transaction_timeout_ms: The transaction timeout (0 with an error).
        transaction_start_time_ms: When the transaction started, -1 when
            none is open.
        topics: Topic -> sorted partitions of the open transaction.
    """

    error: int
    transactional_id: str
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    topics: dict[str, list[int]] = attrs.Factory(dict)


@attrs.frozen
class TransactionListing:
    """One transactional id as ListTransactions gives it (KIP-664)."""

    transactional_id: str
    producer_id: int
    state: str


@attrs.frozen
class ListTransactionsResult:
    """ListTransactions' answer (KIP-664)."""

    error: int
    unknown_state_filters: list[str] = attrs.Factory(list)
    transactions: list[TransactionListing] = attrs.Factory(list)


class TransactionStateManager:
    """The metadata of every transactional id this broker coordinates.

    Args:
        num_partitions: ``transaction.state.log.num.partitions``.
        clock: The time, in ms since the epoch.
        transactional_id_expiration_ms: ``transactional.id.expiration.ms``.
    """

    def __init__(
        self,
        num_partitions: int = DEFAULT_NUM_PARTITIONS,
        *,
        clock: Callable[[], int] = now_ms,
        transactional_id_expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
    ) -> None:
        self.num_partitions = num_partitions
        self.clock = clock
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        #: partition -> coordinator epoch, for the partitions loaded.
        self.coordinator_epochs: dict[int, int] = {}
        #: partition -> coordinator epoch, for the partitions loading.
        self.loading: dict[int, int] = {}
        #: partition -> transactional id -> metadata.
        self.transactions: dict[int, dict[str, TransactionMetadata]] = {}

    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition of ``transactional_id``."""
        return partition_for(transactional_id, self.num_partitions)

    def get(self, transactional_id: str) -> tuple[int, int, TransactionMetadata | None]:
        """Look a transactional id up.

        Args:
            transactional_id: The id.

        Returns:
            ``(error, coordinator epoch, metadata or None)``: error
            NOT_COORDINATOR when this broker does not lead the id's
            partition, COORDINATOR_LOAD_IN_PROGRESS while loading it (epoch
            -1 and no metadata with an error).
        """
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return COORDINATOR_LOAD_IN_PROGRESS, -1, None
        if partition not in self.coordinator_epochs:
            return NOT_COORDINATOR, -1, None
        return NONE, self.coordinator_epochs[partition], self.transactions[partition].get(transactional_id)

    def put_if_absent(self, md: TransactionMetadata) -> TransactionMetadata:
        """Add a new metadata unless its id already has one.

        Args:
            md: The metadata (InitProducerId of an unknown id).

        Returns:
            The metadata now cached for the id.

        Raises:
            KeyError: This broker does not coordinate the id (loaded).
        """
        partition = self.partition_for(md.transactional_id)
        if partition not in self.coordinator_epochs:
            raise KeyError(f"partition {partition} of __transaction_state is not coordinated here")
        return self.transactions[partition].setdefault(md.transactional_id, md)

    def remove(self, transactional_id: str) -> None:
        """Drop an id (its tombstone was written)."""
        self.transactions.get(self.partition_for(transactional_id), {}).pop(transactional_id, None)

    # --- leadership ------------------------------------------------------------

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This broker became the leader of ``partition``: its ids are
        loading until `load_partition`."""
        self.coordinator_epochs.pop(partition, None)
        self.transactions.pop(partition, None)
        self.loading[partition] = coordinator_epoch

    def load_partition(self, partition: int, coordinator_epoch: int, records: Iterable[tuple[bytes, bytes | None]]) -> list[TxnMarkers]:
        """Replay ``partition``'s records and start coordinating its ids.

        Args:
            partition: The ``__transaction_state`` partition.
            coordinator_epoch: The epoch `begin_loading` was given; a
                different one (a newer election) leaves the partition
                loading and returns nothing.
            records: ``(key, value)`` in log order (value None: tombstone);
                keys of unknown versions are skipped, as Kafka does.

        Returns:
            The markers to write again for transactions found in
            PrepareCommit / PrepareAbort (their completion prepared).

        Raises:
            kclient.errors.ProtocolError: A malformed record.
        """
        if self.loading.get(partition) != coordinator_epoch:
            return []
        loaded: dict[str, TransactionMetadata] = {}
        for key, value in records:
            txn_key = decode_key(key)
            if txn_key is None:
                continue
            decoded = decode_value(value)
            if decoded is None:
                loaded.pop(txn_key.transactional_id, None)
            else:
                loaded[txn_key.transactional_id] = metadata_from_value(txn_key.transactional_id, decoded)
        del self.loading[partition]
        self.coordinator_epochs[partition] = coordinator_epoch
        self.transactions[partition] = loaded
        return [_resume(md, self.clock()) for md in loaded.values() if md.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def resign(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """This broker no longer leads ``partition``: drop its ids.

        Args:
            partition: The partition.
            coordinator_epoch: Drop only when loaded or loading at this
                epoch or an older one (None: whatever the epoch).
        """
        for table in (self.coordinator_epochs, self.loading):
            epoch = table.get(partition)
            if epoch is not None and (coordinator_epoch is None or epoch <= coordinator_epoch):
                del table[partition]
                self.transactions.pop(partition, None)

    def all_metadata(self) -> list[TransactionMetadata]:
        """Every cached metadata."""
        return [md for table in self.transactions.values() for md in table.values()]

    # --- timers ------------------------------------------------------------------

    def timed_out_transactions(self) -> list[TransactionMetadata]:
        """The ongoing transactions older than their timeout (no change
        pending): the coordinator aborts them
        (`kclient.broker.txn.coordinator.abort_timed_out`)."""
        now = self.clock()
        return [md for md in self.all_metadata() if md.pending_state is None and md.state == TransactionState.ONGOING and md.txn_start_timestamp + md.txn_timeout_ms < now]

    def expire_transactional_ids(self) -> list[tuple[TransactionMetadata, TxnTransitMetadata]]:
        """Prepare Dead for the ids idle longer than
        ``transactional.id.expiration.ms`` (state Empty, CompleteCommit or
        CompleteAbort, no change pending): write their tombstones
        (`kclient.broker.txn.records.tombstone_for`), then `remove` them
        (or `TransactionMetadata.abort_transition` when the write failed).

        Returns:
            The metadata and their Dead transitions.
        """
        limit = self.clock() - self.transactional_id_expiration_ms
        out = []
        for md in self.all_metadata():
            if md.pending_state is None and md.state in EXPIRATION_ALLOWED and md.txn_last_update_timestamp <= limit:
                out.append((md, md.prepare_dead()))
        return out

    # --- DescribeTransactions, ListTransactions (KIP-664) ---------------------------

    def describe(self, transactional_id: str) -> TransactionDescription:
        """DescribeTransactions for one id.

        Returns:
            The description; error NOT_COORDINATOR,
            COORDINATOR_LOAD_IN_PROGRESS, or TRANSACTIONAL_ID_NOT_FOUND
            (unknown, or expiring).
        """
        error, _, md = self.get(transactional_id)
        if error == NONE and (md is None or md.state == TransactionState.DEAD or md.pending_state == TransactionState.DEAD):
            error = TRANSACTIONAL_ID_NOT_FOUND
        if error != NONE or md is None:
            return TransactionDescription(error, transactional_id)
        return TransactionDescription(
            NONE,
            transactional_id,
            md.state.kafka_name,
            md.producer_id,
            md.producer_epoch,
            md.txn_timeout_ms,
            md.txn_start_timestamp,
            _by_topic(md.topic_partitions),
        )

    def list_transactions(self, producer_ids: Iterable[int] = (), states: Iterable[str] = (), duration_ms: int = -1) -> ListTransactionsResult:
        """ListTransactions: the ids this broker coordinates.

        Args:
            producer_ids: Only these producer ids (empty: all).
            states: Only these Kafka state names (empty: all).
            duration_ms: Only transactions started longer ago than this, in
                ms (KIP-994; -1: all).

        Returns:
            The result: COORDINATOR_LOAD_IN_PROGRESS while a partition
            loads; else the listings sorted by id (Dead ones left out) and
            the state names no state has.
        """
        if self.loading:
            return ListTransactionsResult(COORDINATOR_LOAD_IN_PROGRESS)
        pids, names, now = set(producer_ids), set(states), self.clock()
        known = {s.kafka_name for s in TransactionState}
        out = []
        for md in self.all_metadata():
            if md.state == TransactionState.DEAD or (pids and md.producer_id not in pids) or (names and md.state.kafka_name not in names):
                continue
            if duration_ms >= 0 and now - md.txn_start_timestamp <= duration_ms:
                continue
            out.append(TransactionListing(md.transactional_id, md.producer_id, md.state.kafka_name))
        return ListTransactionsResult(NONE, sorted(names - known), sorted(out, key=lambda t: t.transactional_id))


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        out.setdefault(topic, []).append(partition)
    return out


def _resume(md: TransactionMetadata, now: int) -> TxnMarkers:
    """The markers of a transaction loaded in PrepareCommit/PrepareAbort."""
    result = TransactionResult.COMMIT if md.state == TransactionState.PREPARE_COMMIT else TransactionResult.ABORT
    partitions = frozenset(md.topic_partitions)
    complete = md.prepare_complete(now)
    return TxnMarkers(md.transactional_id, md.producer_id, md.producer_epoch, result, partitions, complete)


__all__ = ["DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS", "ListTransactionsResult", "TransactionDescription", "TransactionListing", "TransactionStateManager"]
