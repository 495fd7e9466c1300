"""The decisions of the transaction coordinator (KIP-98), as Kafka's
``TransactionCoordinator`` makes them, without I/O.

Each request handler takes the transactional id's `TransactionMetadata`
(None when the coordinator holds none) and the request's fields as plain
values, and returns a `TxnDecision`: the error code to answer, the producer
id and epoch to answer, and what the caller must do first:

1. ``created``: a new metadata to put into its cache (InitProducerId of an
   unknown id);
2. ``append``: a ``__transaction_state`` record to write
   (`kclient.broker.txn.records.record_for`
   gives its bytes); once written (acks=all), `on_append_success`
   applies it, else `on_append_failure` drops it and gives the error to
   answer;
3. ``result``: after that write, markers to send: `begin_markers` checks
   the metadata again and gives the `TxnMarkers` (WriteTxnMarkers to each
   partition's leader); once every marker is written, the ``complete``
   transition of the markers is written and applied the same way.

The answer is sent after step 2 (EndTxn answers once PrepareCommit or
PrepareAbort is written, before the markers). The caller serialises
requests per transactional id (the metadata's lock in Kafka): a decision
prepares a pending state that makes every other request wait
(CONCURRENT_TRANSACTIONS) until its write completes or fails.

Transactions version 0/1 only (no epoch bump on EndTxn, KIP-890 part 2).

Pure: no I/O, no clock (``now_ms`` is passed in), no producer id source of
its own (``allocate_producer_id`` is).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

import attrs

from kclient.broker.group.records import OFFSETS_TOPIC
from kclient.broker.group.records import partition_for as offsets_partition_for
from kclient.broker.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kclient.errors import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_NOT_AVAILABLE,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    KAFKA_STORAGE_ERROR,
    MESSAGE_TOO_LARGE,
    NONE,
    NOT_COORDINATOR,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    PRODUCER_FENCED,
    RECORD_LIST_TOO_LARGE,
    REQUEST_TIMED_OUT,
    TRANSACTION_ABORTABLE,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
)

#: ``transaction.max.timeout.ms``'s default (15 minutes).
DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000

_S = TransactionState


class TransactionResult(enum.IntEnum):
    """How a transaction ends: the control record type of its markers
    (``ABORT`` 0, ``COMMIT`` 1) and EndTxn's ``committed``."""

    ABORT = 0
    COMMIT = 1


@attrs.frozen
class TxnMarkers:
    """The markers that end a transaction (WriteTxnMarkers, KIP-98).

    Attributes:
        transactional_id: The transaction's id.
        producer_id: The producer id the markers carry.
        producer_epoch: The producer epoch the markers carry.
        result: Commit or abort.
        partitions: The partitions to write a marker to.
        complete: The CompleteCommit / CompleteAbort transition to write
            to ``__transaction_state`` once every marker is written.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    result: TransactionResult
    partitions: frozenset[TopicPartition]
    complete: TxnTransitMetadata


@attrs.frozen
class TxnDecision:
    """What the coordinator answers and does for one request.

    Attributes:
        error: The error code to answer (``NONE``: success), once
            ``append`` (if any) is written.
        producer_id: The producer id to answer (-1 with an error).
        producer_epoch: The producer epoch to answer (-1 with an error).
        append: The transition to write to ``__transaction_state`` first.
        created: A new metadata the caller must add to its cache.
        result: After ``append`` is written, the markers to begin
            (`begin_markers`).
        epoch_fence: ``append`` fences the producer's epoch: if its write
            fails, the bumped epoch is not bumped again (Kafka's
            ``hasFailedEpochFence``).
        markers: Markers to write now (`begin_markers`).
    """

    error: int = NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    append: TxnTransitMetadata | None = None
    created: TransactionMetadata | None = None
    result: TransactionResult | None = None
    epoch_fence: bool = False
    markers: TxnMarkers | None = None


def _error(code: int, created: TransactionMetadata | None = None) -> TxnDecision:
    return TxnDecision(error=code, created=created)


def valid_transaction_timeout(timeout_ms: int, max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS) -> bool:
    """Whether ``transaction.timeout.ms`` is in 1 .. ``transaction.max.timeout.ms``.

    Args:
        timeout_ms: The producer's transaction timeout, in ms.
        max_timeout_ms: The broker's ``transaction.max.timeout.ms``.

    Returns:
        True when the coordinator accepts it.
    """
    return 0 < timeout_ms <= max_timeout_ms


# --- InitProducerId -----------------------------------------------------------


def _valid_producer_id(md: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: a producer that gives its id and epoch is fenced unless the
    metadata was just created, its id is the current one (the epoch is
    checked when bumped), or it is the previous one with an exhausted epoch
    (a retry after the rotation to a new producer id)."""
    return md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id or (producer_id == md.previous_producer_id and is_epoch_exhausted(producer_epoch))


def check_init_producer_id(
    transactional_id: str | None,
    transaction_timeout_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
) -> int:
    """The checks of an InitProducerId request made before its
    transactional id is looked up (so they win over NOT_COORDINATOR).

    Args:
        transactional_id: The ``transactional.id``, None without one.
        transaction_timeout_ms: ``transaction.timeout.ms``.
        producer_id: The producer's current id (KIP-360), -1 if none.
        producer_epoch: The producer's current epoch, -1 if none.
        max_timeout_ms: ``transaction.max.timeout.ms``.

    Returns:
        ``NONE``, INVALID_REQUEST (an empty id, or only one of producer id
        and epoch given) or INVALID_TRANSACTION_TIMEOUT (checked only with
        a transactional id).
    """
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return INVALID_REQUEST
    if transactional_id is None:
        return NONE
    if not transactional_id:
        return INVALID_REQUEST
    if not valid_transaction_timeout(transaction_timeout_ms, max_timeout_ms):
        return INVALID_TRANSACTION_TIMEOUT
    return NONE


def init_producer_id(
    md: TransactionMetadata | None,
    *,
    transactional_id: str | None,
    transaction_timeout_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    now_ms: int,
    allocate_producer_id: Callable[[], int],
    max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
) -> TxnDecision:
    """InitProducerId (key 22).

    Without a transactional id: a new producer id at epoch 0 (the
    idempotent producer). With one: a new metadata for an unknown id; the
    epoch bumped (a new producer fences the old one); KIP-360's recovery
    when the producer gives its id and epoch; a new producer id at epoch 0
    once the epoch is exhausted; an ongoing transaction is first aborted
    with the epoch bumped (answered CONCURRENT_TRANSACTIONS: the producer
    retries).

    Args:
        md: The id's metadata, None when unknown.
        transactional_id: The ``transactional.id``, None without one.
        transaction_timeout_ms: ``transaction.timeout.ms``.
        producer_id: The producer's current id (KIP-360), -1 if none.
        producer_epoch: The producer's current epoch, -1 if none.
        now_ms: The time, in ms since the epoch.
        allocate_producer_id: Gives a new, unused producer id.
        max_timeout_ms: ``transaction.max.timeout.ms``.

    Returns:
        The decision. Errors: INVALID_REQUEST (an empty id, or only one of
        producer id and epoch given), INVALID_TRANSACTION_TIMEOUT,
        CONCURRENT_TRANSACTIONS, PRODUCER_FENCED.

    Raises:
        IllegalTransitionError: The metadata is in a state it never rests in.
    """
    error = check_init_producer_id(transactional_id, transaction_timeout_ms, producer_id, producer_epoch, max_timeout_ms)
    if error != NONE:
        return _error(error)
    if transactional_id is None:
        return TxnDecision(producer_id=allocate_producer_id(), producer_epoch=0)
    created = None
    if md is None:
        md = created = TransactionMetadata(transactional_id, allocate_producer_id(), txn_timeout_ms=transaction_timeout_ms, txn_last_update_timestamp=now_ms)
    expected = producer_epoch if producer_id != NO_PRODUCER_ID else None
    if md.pending_transition_in_progress:
        return _error(CONCURRENT_TRANSACTIONS, created)
    if expected is not None and not _valid_producer_id(md, producer_id, producer_epoch):
        return _error(PRODUCER_FENCED, created)
    if md.state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
        return _error(CONCURRENT_TRANSACTIONS, created)
    if md.state == _S.ONGOING:
        return _fence_and_abort(md, now_ms)
    if md.state not in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):
        raise IllegalTransitionError(f"{transactional_id}: found in state {md.state.kafka_name}, which it never rests in")
    if md.is_producer_epoch_exhausted and (expected is None or expected == md.producer_epoch):
        transit: TxnTransitMetadata | None = md.prepare_producer_id_rotation(allocate_producer_id(), transaction_timeout_ms, now_ms, expected is not None)
    else:
        transit = md.prepare_increment_producer_epoch(transaction_timeout_ms, expected, now_ms)
    if transit is None:
        return _error(PRODUCER_FENCED, created)
    return TxnDecision(producer_id=transit.producer_id, producer_epoch=transit.producer_epoch, append=transit, created=created)


def _fence_and_abort(md: TransactionMetadata, now_ms: int) -> TxnDecision:
    """Fence the epoch of an ongoing transaction and abort it; the
    producer is answered CONCURRENT_TRANSACTIONS and retries (its retry
    bumps the epoch again, or rotates the producer id)."""
    fence = md.prepare_fence_producer_epoch()
    aborted = _end_transaction(md, fence.producer_id, fence.producer_epoch, TransactionResult.ABORT, from_client=False, now_ms=now_ms)
    if aborted.error != NONE:
        return aborted
    return attrs.evolve(aborted, error=CONCURRENT_TRANSACTIONS, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)


# --- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------


def _check_producer(md: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> int:
    if md is None or md.producer_id != producer_id:
        return INVALID_PRODUCER_ID_MAPPING
    if md.producer_epoch != producer_epoch:
        return PRODUCER_FENCED
    return NONE


def add_partitions_to_txn(
    md: TransactionMetadata | None,
    *,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    now_ms: int,
) -> TxnDecision:
    """AddPartitionsToTxn (key 24): add partitions to the transaction,
    starting it when none is open.

    Args:
        md: The id's metadata, None when unknown.
        transactional_id: The ``transactional.id``.
        producer_id: The producer's id.
        producer_epoch: The producer's epoch.
        partitions: ``(topic, partition)`` pairs (checked to exist and be
            writable by the caller).
        now_ms: The time, in ms since the epoch.

    Returns:
        The decision (no ``append`` when the partitions are already in the
        ongoing transaction). Errors: INVALID_REQUEST (no id),
        INVALID_PRODUCER_ID_MAPPING (unknown id or another producer id),
        PRODUCER_FENCED (another epoch), CONCURRENT_TRANSACTIONS (a change
        pending, or the transaction completing).

    Raises:
        IllegalTransitionError: The metadata is in a state it never rests in.
    """
    if not transactional_id:
        return _error(INVALID_REQUEST)
    error = _check_producer(md, producer_id, producer_epoch)
    if error != NONE:
        return _error(error)
    assert md is not None
    wanted = frozenset(partitions)
    if md.pending_transition_in_progress or md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        return _error(CONCURRENT_TRANSACTIONS)
    if md.state == _S.ONGOING and wanted <= md.topic_partitions:
        return TxnDecision()
    return TxnDecision(append=md.prepare_add_partitions(wanted, now_ms))


def offsets_partition(group_id: str, offsets_topic_partitions: int) -> TopicPartition:
    """The ``__consumer_offsets`` partition of ``group_id``: what
    AddOffsetsToTxn adds to the transaction.

    Args:
        group_id: The consumer group.
        offsets_topic_partitions: ``offsets.topic.num.partitions``.

    Returns:
        ``("__consumer_offsets", partition)``.
    """
    return (OFFSETS_TOPIC, offsets_partition_for(group_id, offsets_topic_partitions))


def add_offsets_to_txn(
    md: TransactionMetadata | None,
    *,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
    offsets_topic_partitions: int,
    now_ms: int,
) -> TxnDecision:
    """AddOffsetsToTxn (key 25): add the group's ``__consumer_offsets``
    partition to the transaction (its TxnOffsetCommit then goes to the
    group coordinator); the same rules and errors as
    `add_partitions_to_txn`.

    Args:
        md: The id's metadata, None when unknown.
        transactional_id: The ``transactional.id``.
        producer_id: The producer's id.
        producer_epoch: The producer's epoch.
        group_id: The consumer group whose offsets the transaction commits.
        offsets_topic_partitions: ``offsets.topic.num.partitions``.
        now_ms: The time, in ms since the epoch.

    Returns:
        The decision.
    """
    partition = offsets_partition(group_id, offsets_topic_partitions)
    return add_partitions_to_txn(md, transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, partitions=[partition], now_ms=now_ms)


def verify_partitions_in_txn(
    md: TransactionMetadata | None,
    *,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, int]:
    """AddPartitionsToTxn v4+ with ``verify_only`` (KIP-890): whether each
    partition is in the open transaction, asked by a partition leader
    before it appends a transactional batch.

    Returns:
        The error code of each partition: ``NONE`` when it is in the
        transaction, TRANSACTION_ABORTABLE when not; the same error for
        all when the request itself fails (INVALID_REQUEST,
        INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
        CONCURRENT_TRANSACTIONS).
    """
    wanted = list(partitions)
    error = INVALID_REQUEST if not transactional_id else _check_producer(md, producer_id, producer_epoch)
    if error == NONE and md is not None and md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        error = CONCURRENT_TRANSACTIONS
    if error != NONE or md is None:
        return dict.fromkeys(wanted, error)
    return {tp: NONE if tp in md.topic_partitions else TRANSACTION_ABORTABLE for tp in wanted}


# --- EndTxn ----------------------------------------------------------------------


def end_txn(
    md: TransactionMetadata | None,
    *,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    now_ms: int,
) -> TxnDecision:
    """EndTxn (key 26): commit or abort the transaction.

    An ongoing transaction goes to PrepareCommit / PrepareAbort (``append``,
    then the markers: ``result``). A retry of an outcome already reached
    succeeds with the current producer id and epoch; a retry while it is
    still being written is CONCURRENT_TRANSACTIONS; the other outcome, or
    EndTxn without a transaction, is INVALID_TXN_STATE.

    Args:
        md: The id's metadata, None when unknown.
        transactional_id: The ``transactional.id``.
        producer_id: The producer's id.
        producer_epoch: The producer's epoch.
        committed: True to commit, False to abort.
        now_ms: The time, in ms since the epoch.

    Returns:
        The decision. Errors: INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING,
        PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE.

    Raises:
        IllegalTransitionError: The metadata is in a state it never rests in.
    """
    if not transactional_id:
        return _error(INVALID_REQUEST)
    if md is None:
        return _error(INVALID_PRODUCER_ID_MAPPING)
    result = TransactionResult.COMMIT if committed else TransactionResult.ABORT
    return _end_transaction(md, producer_id, producer_epoch, result, from_client=True, now_ms=now_ms)


#: For each state a transaction rests in after EndTxn began: the answer to
#: a repeated EndTxn of the same outcome (the other outcome is
#: INVALID_TXN_STATE).
_SAME_OUTCOME = {
    _S.COMPLETE_COMMIT: (TransactionResult.COMMIT, NONE),
    _S.COMPLETE_ABORT: (TransactionResult.ABORT, NONE),
    _S.PREPARE_COMMIT: (TransactionResult.COMMIT, CONCURRENT_TRANSACTIONS),
    _S.PREPARE_ABORT: (TransactionResult.ABORT, CONCURRENT_TRANSACTIONS),
}


def _end_transaction(md: TransactionMetadata, producer_id: int, producer_epoch: int, result: TransactionResult, *, from_client: bool, now_ms: int) -> TxnDecision:
    """Kafka's ``endTransaction`` (transactions v0/1): from a client the
    epoch must be the current one; from the coordinator itself (timeout,
    fencing) it may be the bumped one."""
    if md.producer_id != producer_id:
        return _error(INVALID_PRODUCER_ID_MAPPING)
    if (from_client and producer_epoch != md.producer_epoch) or producer_epoch < md.producer_epoch:
        return _error(PRODUCER_FENCED)
    fencing = md.pending_state == _S.PREPARE_EPOCH_FENCE
    if md.pending_transition_in_progress and not fencing:
        return _error(CONCURRENT_TRANSACTIONS)
    if md.state == _S.ONGOING:
        next_state = _S.PREPARE_COMMIT if result == TransactionResult.COMMIT else _S.PREPARE_ABORT
        epoch_fence = next_state == _S.PREPARE_ABORT and fencing
        if epoch_fence:
            # The fence's bumped epoch becomes the current one before the
            # abort is written; the fence itself is never written.
            md.pending_state = None
            md.producer_epoch = producer_epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = md.prepare_abort_or_commit(next_state, now_ms)
        return TxnDecision(producer_id=transit.producer_id, producer_epoch=transit.producer_epoch, append=transit, result=result, epoch_fence=epoch_fence)
    if md.state in _SAME_OUTCOME:
        same, answer = _SAME_OUTCOME[md.state]
        if result != same:
            return _error(INVALID_TXN_STATE)
        if answer == NONE:
            return TxnDecision(producer_id=md.producer_id, producer_epoch=md.producer_epoch)
        return _error(answer)
    if md.state == _S.EMPTY:
        return _error(INVALID_TXN_STATE)
    raise IllegalTransitionError(f"{md.transactional_id}: found in state {md.state.kafka_name}, which it never rests in")


def begin_markers(md: TransactionMetadata, decision: TxnDecision, now_ms: int) -> TxnDecision:
    """After a PrepareCommit / PrepareAbort was written and applied: check
    the metadata again and prepare the completion (Kafka's
    ``sendTxnMarkersCallback``).

    Args:
        md: The id's metadata (the caller checks first that it still
            coordinates the id at the same coordinator epoch, else it
            answers NOT_COORDINATOR).
        decision: The decision whose ``append`` was written (it has a
            ``result``).
        now_ms: The time, in ms since the epoch.

    Returns:
        The decision: ``NONE`` with the producer id and epoch to answer
        and the ``markers`` to write (the complete transition pending
        meanwhile); or an error (INVALID_PRODUCER_ID_MAPPING,
        PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE).

    Raises:
        ValueError: ``decision`` has no written transition and result.
        IllegalTransitionError: The metadata is in a state it never rests in.
    """
    if decision.append is None or decision.result is None:
        raise ValueError("begin_markers needs a decision that wrote PrepareCommit or PrepareAbort")
    error = _check_producer(md, decision.append.producer_id, decision.append.producer_epoch)
    if error == NONE and md.pending_transition_in_progress:
        error = CONCURRENT_TRANSACTIONS
    if error != NONE:
        return _error(error)
    expected = {TransactionResult.COMMIT: _S.PREPARE_COMMIT, TransactionResult.ABORT: _S.PREPARE_ABORT}[decision.result]
    if md.state in (_S.DEAD, _S.PREPARE_EPOCH_FENCE):
        raise IllegalTransitionError(f"{md.transactional_id}: found in state {md.state.kafka_name}, which it never rests in")
    if md.state != expected:
        return _error(INVALID_TXN_STATE)
    partitions = frozenset(md.topic_partitions)
    complete = md.prepare_complete(now_ms)
    markers = TxnMarkers(md.transactional_id, md.producer_id, md.producer_epoch, decision.result, partitions, complete)
    return TxnDecision(producer_id=md.producer_id, producer_epoch=md.producer_epoch, append=complete, markers=markers)


# --- timeouts -------------------------------------------------------------------


def is_timed_out(md: TransactionMetadata, now_ms: int) -> bool:
    """Whether an ongoing transaction outlived ``transaction.timeout.ms``
    (and no change is pending).

    Args:
        md: The metadata.
        now_ms: The time, in ms since the epoch.

    Returns:
        True when the coordinator should abort it.
    """
    return not md.pending_transition_in_progress and md.state == _S.ONGOING and md.txn_start_timestamp + md.txn_timeout_ms < now_ms


def abort_timed_out(md: TransactionMetadata, now_ms: int) -> TxnDecision | None:
    """Abort a transaction that timed out: fence the producer's epoch and
    go to PrepareAbort (then the markers), as Kafka's
    ``abortTimedOutTransactions`` does. Nobody is answered.

    Args:
        md: The metadata.
        now_ms: The time, in ms since the epoch.

    Returns:
        The decision, or None when the transaction has not timed out (or a
        change is pending).
    """
    if not is_timed_out(md, now_ms):
        return None
    fence = md.prepare_fence_producer_epoch()
    return _end_transaction(md, fence.producer_id, fence.producer_epoch, TransactionResult.ABORT, from_client=False, now_ms=now_ms)


# --- after a write ---------------------------------------------------------------

#: Kafka's mapping of a failed ``__transaction_state`` append's error to
#: the coordinator's answer (``appendTransactionToLog``).
_APPEND_ERRORS = {
    UNKNOWN_TOPIC_OR_PARTITION: COORDINATOR_NOT_AVAILABLE,
    NOT_ENOUGH_REPLICAS: COORDINATOR_NOT_AVAILABLE,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: COORDINATOR_NOT_AVAILABLE,
    REQUEST_TIMED_OUT: COORDINATOR_NOT_AVAILABLE,
    NOT_LEADER_OR_FOLLOWER: NOT_COORDINATOR,
    KAFKA_STORAGE_ERROR: NOT_COORDINATOR,
    MESSAGE_TOO_LARGE: UNKNOWN_SERVER_ERROR,
    RECORD_LIST_TOO_LARGE: UNKNOWN_SERVER_ERROR,
}


def coordinator_error_for_append(error: int) -> int:
    """The error the coordinator answers when its ``__transaction_state``
    append failed with ``error``.

    Args:
        error: The append's error code.

    Returns:
        COORDINATOR_NOT_AVAILABLE (the producer retries), NOT_COORDINATOR
        (it looks the coordinator up again), UNKNOWN_SERVER_ERROR, or
        ``error`` itself.
    """
    return _APPEND_ERRORS.get(error, error)


def on_append_success(md: TransactionMetadata, transit: TxnTransitMetadata) -> None:
    """Apply a transition once its record is written.

    Raises:
        IllegalTransitionError: It is not the pending one.
    """
    md.complete_transition_to(transit)


def on_append_failure(md: TransactionMetadata, decision: TxnDecision, error: int) -> int:
    """Drop the pending transition whose write failed.

    Args:
        md: The metadata.
        decision: The decision whose ``append`` failed.
        error: The append's error code.

    Returns:
        The error to answer (`coordinator_error_for_append`).
    """
    md.abort_transition()
    if decision.epoch_fence:
        md.has_failed_epoch_fence = True
    return coordinator_error_for_append(error)


#: The APIs, with the version from which they answer PRODUCER_FENCED;
#: older versions get INVALID_PRODUCER_EPOCH (KIP-588): InitProducerId (22)
#: v4, AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26) v2.
PRODUCER_FENCED_FROM_VERSION = {22: 4, 24: 2, 25: 2, 26: 2}


def error_for_version(api_key: int, version: int, error: int) -> int:
    """The error code a request of ``version`` understands: PRODUCER_FENCED
    becomes INVALID_PRODUCER_EPOCH for older clients.

    Args:
        api_key: The request's API key.
        version: The request's version.
        error: The coordinator's error code.

    Returns:
        The code to answer.
    """
    if error == PRODUCER_FENCED and version < PRODUCER_FENCED_FROM_VERSION.get(api_key, 0):
        return INVALID_PRODUCER_EPOCH
    return error


__all__ = [
    "DEFAULT_TRANSACTION_MAX_TIMEOUT_MS",
    "PRODUCER_FENCED_FROM_VERSION",
    "TransactionResult",
    "TxnDecision",
    "TxnMarkers",
    "abort_timed_out",
    "add_offsets_to_txn",
    "add_partitions_to_txn",
    "begin_markers",
    "check_init_producer_id",
    "coordinator_error_for_append",
    "end_txn",
    "error_for_version",
    "init_producer_id",
    "is_timed_out",
    "offsets_partition",
    "on_append_failure",
    "on_append_success",
    "valid_transaction_timeout",
    "verify_partitions_in_txn",
]
