"""One transactional id's state at its transaction coordinator (KIP-98),
as Kafka's ``TransactionMetadata`` keeps it.

A transaction moves through the states of `TransactionState`:

- ``Empty``: no transaction open (after InitProducerId, or after one
  completed and the id was re-initialised);
- ``Ongoing``: partitions were added (AddPartitionsToTxn, AddOffsetsToTxn);
- ``PrepareCommit`` / ``PrepareAbort``: EndTxn was written to
  ``__transaction_state``; the markers are being written;
- ``CompleteCommit`` / ``CompleteAbort``: every marker was written;
- ``PrepareEpochFence``: the coordinator bumps the epoch to fence the
  producer before aborting its transaction (a new InitProducerId, or the
  transaction timed out); only ever a pending state, never written;
- ``Dead``: the transactional id expired and its tombstone is being
  written; never written as a value either.

Every change is two steps, as in Kafka: a ``prepare_*`` method checks the
transition against `VALID_PREVIOUS_STATES`, records the target state as
``pending_state`` (which blocks every other change: the coordinator answers
CONCURRENT_TRANSACTIONS meanwhile) and returns the target as a
`TxnTransitMetadata`; once that target is written to
``__transaction_state``, `TransactionMetadata.complete_transition_to`
applies it (or `TransactionMetadata.abort_transition` drops it when the
write failed). An illegal transition raises `IllegalTransitionError`.

This is transactions version 0/1 (the producer keeps its epoch across
transactions; KIP-890's epoch bump on every EndTxn, transactions v2, is not
served): ``client_transaction_version`` is kept and written, and
``next_producer_id`` stays -1.

Pure: no I/O, no clock (times are passed in, in ms since the epoch).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from kclient.errors import IllegalStateError

#: ``RecordBatch.NO_PRODUCER_ID``: no producer id.
NO_PRODUCER_ID = -1
#: ``RecordBatch.NO_PRODUCER_EPOCH``: no producer epoch.
NO_PRODUCER_EPOCH = -1
#: The highest producer epoch (Java's ``Short.MAX_VALUE``).
MAX_PRODUCER_EPOCH = 32767

#: A partition of a transaction: ``(topic, partition)``.
TopicPartition = tuple[str, int]


class TransactionState(enum.IntEnum):
    """A transaction's state; the value is the id written to
    ``__transaction_state`` (``transaction_status``)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's name of the state (``"PrepareCommit"``), as
        DescribeTransactions and ListTransactions give it (KIP-664)."""
        return _KAFKA_NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState:
        """The state of Kafka's name ``name``.

        Raises:
            ValueError: No state has that name.
        """
        for state, kafka_name in _KAFKA_NAMES.items():
            if kafka_name == name:
                return state
        raise ValueError(f"no transaction state is named {name!r}")

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        """The state whose id (``transaction_status``) is ``state_id``.

        Raises:
            IllegalTransitionError: An unknown id (Kafka: "Unknown
                transaction state id").
        """
        try:
            return cls(state_id)
        except ValueError:
            raise IllegalTransitionError(f"unknown transaction state id {state_id}") from None


_KAFKA_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_S = TransactionState
#: Kafka's legal transitions: target state -> the states it may follow.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
#: The states in which an idle transactional id may expire
#: (``transactional.id.expiration.ms``).
EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
#: The states of a transaction still open or completing.
PENDING_TRANSACTION_STATES = frozenset({_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT})


class IllegalTransitionError(IllegalStateError):
    """A transaction state change Kafka's coordinator never makes (a target
    state that may not follow the current one, a second pending change,
    a completion that does not match what was prepared). A bug, not a
    client error: Kafka logs these as fatal."""


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Whether no epoch bump is left for a producer id: Kafka keeps
    ``Short.MAX_VALUE`` free so that the coordinator can always fence.

    Args:
        producer_epoch: The epoch.

    Returns:
        True from 32766 on.
    """
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


@attrs.frozen
class TxnTransitMetadata:
    """The target of a prepared transition: what is written to
    ``__transaction_state`` and, once written, applied
    (Kafka's ``TxnTransitMetadata``). Times in ms since the epoch."""

    producer_id: int
    #: The producer id before this transition.
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = 0


@attrs.define(eq=False)
class TransactionMetadata:
    """One transactional id's state (Kafka's ``TransactionMetadata``).

    Attributes:
        transactional_id: The producer's ``transactional.id``.
        producer_id: The producer id in use.
        previous_producer_id: The producer id before the last
            InitProducerId (-1: none), so that a retry after an epoch
            exhaustion is recognised (KIP-360).
        next_producer_id: The producer id to move to after an epoch
            overflow (transactions v2 only; -1 here).
        producer_epoch: The current epoch (-1 until the first
            InitProducerId).
        last_producer_epoch: The epoch before the last bump a producer
            asked for (KIP-360), -1 when a new producer fenced the old one:
            an InitProducerId retry with it gets the current epoch back.
        txn_timeout_ms: ``transaction.timeout.ms`` of the producer.
        state: The current state.
        topic_partitions: The partitions of the open transaction.
        txn_start_timestamp: When its first partition was added (ms; -1).
        txn_last_update_timestamp: When the state last changed (ms).
        client_transaction_version: The client's transaction version.
        pending_state: The target of a prepared transition not yet written
            (None: none).
        has_failed_epoch_fence: A fencing write failed: the next fence does
            not bump the epoch again (the bumped one was never returned).
    """

    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = attrs.Factory(set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    client_transaction_version: int = 0
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        """Whether a prepared transition awaits its write."""
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        """Whether the producer id has no epoch bump left (`is_epoch_exhausted`)."""
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        """Whether a transaction is open or completing."""
        return self.state in PENDING_TRANSACTION_STATES

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Add partitions to the open transaction (loading from the log)."""
        self.topic_partitions.update(partitions)

    def remove_partition(self, partition: TopicPartition) -> None:
        """Forget a partition whose marker was written.

        Raises:
            IllegalTransitionError: Not in PrepareCommit or PrepareAbort.
        """
        if self.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise IllegalTransitionError(f"{self.transactional_id}: removing partition {partition} whose marker was written in state {self.state.kafka_name}")
        self.topic_partitions.discard(partition)

    # --- prepared transitions (Kafka's prepare*) ---------------------------

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a target, without preparing anything."""
        return TxnTransitMetadata(
            self.producer_id,
            self.previous_producer_id,
            self.next_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.state,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
            self.client_transaction_version,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Prepare PrepareEpochFence: bump the epoch (unless an earlier
        fence failed to be written) so that the producer of the ongoing
        transaction is fenced before it is aborted.

        Raises:
            IllegalTransitionError: The epoch is already 32767, or the state
                is not Ongoing.
        """
        if self.producer_epoch == MAX_PRODUCER_EPOCH:
            raise IllegalTransitionError(f"{self.transactional_id}: cannot fence producer epoch {MAX_PRODUCER_EPOCH}: it would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            _S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp, self.txn_last_update_timestamp
        )

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, now_ms: int) -> TxnTransitMetadata | None:
        """Prepare Empty with the epoch bumped (InitProducerId).

        Args:
            new_txn_timeout_ms: The producer's ``transaction.timeout.ms``.
            expected_producer_epoch: The epoch the producer gave (KIP-360),
                None for a new producer: a new producer fences the old one
                (last epoch -1); the current epoch (or none yet) bumps it and
                keeps the current one as the last; the last epoch is a retry
                of a bump that succeeded, answered with the current epoch.
            now_ms: The time of the change.

        Returns:
            The target, or None when the expected epoch is neither the
            current nor the last one: the producer is fenced
            (PRODUCER_FENCED), and nothing was prepared.

        Raises:
            IllegalTransitionError: The epoch is exhausted, or the state may
                not go to Empty.
        """
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"{self.transactional_id}: no producer epoch left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(_S.EMPTY, self.producer_id, epoch, last, new_txn_timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int, record_last_epoch: bool) -> TxnTransitMetadata:
        """Prepare Empty with a new producer id at epoch 0 (the epoch of the
        old one is exhausted).

        Args:
            new_producer_id: The new producer id.
            new_txn_timeout_ms: The producer's ``transaction.timeout.ms``.
            now_ms: The time of the change.
            record_last_epoch: Keep the old epoch as the last one (the
                producer gave its id and epoch, KIP-360), so that its retry
                is recognised.

        Raises:
            IllegalTransitionError: A transaction is still open or completing.
        """
        if self.has_pending_transaction:
            raise IllegalTransitionError(f"{self.transactional_id}: cannot rotate producer ids while a transaction is {self.state.kafka_name}")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(_S.EMPTY, new_producer_id, 0, last, new_txn_timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, partitions: Iterable[TopicPartition], now_ms: int) -> TxnTransitMetadata:
        """Prepare Ongoing with ``partitions`` added; the transaction starts
        now when none was open.

        Raises:
            IllegalTransitionError: The state may not go to Ongoing.
        """
        start = now_ms if self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._prepare(_S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms, frozenset(self.topic_partitions) | frozenset(partitions), start, now_ms)

    def prepare_abort_or_commit(self, new_state: TransactionState, now_ms: int) -> TxnTransitMetadata:
        """Prepare PrepareCommit or PrepareAbort (EndTxn).

        Raises:
            IllegalTransitionError: The state may not go to ``new_state``.
        """
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """Prepare CompleteCommit or CompleteAbort after PrepareCommit or
        PrepareAbort (every marker written); clears a failed fence.

        Raises:
            IllegalTransitionError: Not in PrepareCommit or PrepareAbort.
        """
        new_state = _S.COMPLETE_COMMIT if self.state == _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.producer_epoch, self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        """Prepare Dead: the transactional id expires (its tombstone).

        Raises:
            IllegalTransitionError: A transaction is open or completing.
        """
        return self._prepare(_S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, self.txn_last_update_timestamp)

    def _prepare(
        self,
        state: TransactionState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start: int,
        now_ms: int,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(f"{self.transactional_id}: preparing {state.kafka_name} while {self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise IllegalTransitionError(f"{self.transactional_id}: illegal new producer id {producer_id}")
        if state != _S.DEAD and epoch < 0:
            raise IllegalTransitionError(f"{self.transactional_id}: illegal new producer epoch {epoch}")
        check_transition(self.state, state, self.transactional_id)
        transit = TxnTransitMetadata(producer_id, self.producer_id, NO_PRODUCER_ID, epoch, last_epoch, timeout_ms, state, partitions, start, now_ms, self.client_transaction_version)
        self.pending_state = state
        return transit

    # --- applying a written transition -------------------------------------

    def abort_transition(self) -> None:
        """Drop the prepared transition (its write failed)."""
        self.pending_state = None

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply a prepared transition once it is written to
        ``__transaction_state`` (Kafka's ``completeTransitionTo``).

        Raises:
            IllegalTransitionError: Nothing is pending, ``transit`` is not
                the pending state, or it does not follow from the current
                metadata (an epoch that is neither kept nor bumped by one,
                partitions lost, a changed timeout or start time).
        """
        if self.pending_state is None:
            raise IllegalTransitionError(f"{self.transactional_id}: completing a transition to {transit.txn_state.kafka_name} while none is pending")
        to_state = self.pending_state
        if to_state != transit.txn_state:
            self._fail(transit)
        _APPLY[to_state](self, transit)
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = to_state

    def _apply_empty(self, transit: TxnTransitMetadata) -> None:
        if (self.producer_epoch != transit.producer_epoch and not self._valid_epoch_bump(transit)) or transit.topic_partitions or transit.txn_start_timestamp != -1:
            self._fail(transit)
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.prev_producer_id
        # -1, as written (Kafka keeps the old start time in memory until
        # the partition is loaded again; here memory and log agree).
        self.txn_start_timestamp = transit.txn_start_timestamp

    def _apply_ongoing(self, transit: TxnTransitMetadata) -> None:
        if not self._same_producer(transit) or not self.topic_partitions <= transit.topic_partitions or self.txn_timeout_ms != transit.txn_timeout_ms:
            self._fail(transit)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.add_partitions(transit.topic_partitions)

    def _apply_prepare(self, transit: TxnTransitMetadata) -> None:
        if (
            not self._same_producer(transit)
            or self.topic_partitions != transit.topic_partitions
            or self.txn_timeout_ms != transit.txn_timeout_ms
            or self.txn_start_timestamp != transit.txn_start_timestamp
        ):
            self._fail(transit)

    def _apply_complete(self, transit: TxnTransitMetadata) -> None:
        if not self._same_producer(transit) or self.txn_timeout_ms != transit.txn_timeout_ms or transit.txn_start_timestamp == -1:
            self._fail(transit)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.topic_partitions.clear()

    def _apply_never(self, transit: TxnTransitMetadata) -> None:
        # PrepareEpochFence is replaced by PrepareAbort before anything is
        # written; Dead ends in removal from the cache, never in a value.
        self._fail(transit)

    def _same_producer(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id)

    def _fail(self, transit: TxnTransitMetadata) -> None:
        raise IllegalTransitionError(f"{self.transactional_id}: failed transition to {transit} from {self}: unexpected metadata")


_APPLY = {
    _S.EMPTY: TransactionMetadata._apply_empty,
    _S.ONGOING: TransactionMetadata._apply_ongoing,
    _S.PREPARE_COMMIT: TransactionMetadata._apply_prepare,
    _S.PREPARE_ABORT: TransactionMetadata._apply_prepare,
    _S.COMPLETE_COMMIT: TransactionMetadata._apply_complete,
    _S.COMPLETE_ABORT: TransactionMetadata._apply_complete,
    _S.PREPARE_EPOCH_FENCE: TransactionMetadata._apply_never,
    _S.DEAD: TransactionMetadata._apply_never,
}


def check_transition(current: TransactionState, target: TransactionState, transactional_id: str = "") -> None:
    """Check that ``target`` may follow ``current`` (`VALID_PREVIOUS_STATES`).

    Args:
        current: The current state.
        target: The state to move to.
        transactional_id: Named in the error.

    Raises:
        IllegalTransitionError: The transition is not one of Kafka's.
    """
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTransitionError(f"{transactional_id}: transaction state {current.kafka_name} may not go to {target.kafka_name}")


__all__ = [
    "EXPIRATION_ALLOWED",
    "MAX_PRODUCER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "PENDING_TRANSACTION_STATES",
    "VALID_PREVIOUS_STATES",
    "IllegalTransitionError",
    "TopicPartition",
    "TransactionMetadata",
    "TransactionState",
    "TxnTransitMetadata",
    "check_transition",
    "is_epoch_exhausted",
]
