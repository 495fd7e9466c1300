"""The transaction coordinator's marker writing (KIP-98), as Kafka's
``TransactionMarkerChannelManager`` and
``TransactionMarkerRequestCompletionHandler`` decide it, without I/O.

After PrepareCommit / PrepareAbort is written, the coordinator sends
WriteTxnMarkers to the leader of each partition of the transaction (one
marker entry per producer and broker, with the coordinator epoch so that a
deposed coordinator's markers are refused). Each partition answered NONE
leaves the transaction; once none is left, the CompleteCommit /
CompleteAbort transition is written. A partition with no leader is taken
to be deleted and leaves the transaction too. Retriable errors send the
partition again (to its possibly new leader); a changed producer or
coordinator epoch cancels the markers (a newer coordinator or producer
took over); corrupt-record and size errors are bugs.

Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping

import attrs

from kclient.broker.txn.coordinator import TransactionResult, TxnMarkers
from kclient.broker.txn.metadata import IllegalTransitionError, TopicPartition, TransactionMetadata
from kclient.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    CORRUPT_MESSAGE,
    INVALID_PRODUCER_EPOCH,
    INVALID_REQUIRED_ACKS,
    KAFKA_STORAGE_ERROR,
    MESSAGE_TOO_LARGE,
    NONE,
    NOT_COORDINATOR,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    RECORD_LIST_TOO_LARGE,
    REQUEST_TIMED_OUT,
    TRANSACTION_COORDINATOR_FENCED,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    UNSUPPORTED_VERSION,
)


class MarkerOutcome(enum.Enum):
    """What one partition's WriteTxnMarkers answer means."""

    #: The marker is written (or the partition cannot take one): the
    #: partition leaves the transaction.
    DONE = "done"
    #: Send the partition's marker again, to its current leader.
    RETRY = "retry"
    #: The producer or coordinator epoch changed: stop sending this
    #: transaction's markers.
    CANCEL = "cancel"


_OUTCOMES = {
    NONE: MarkerOutcome.DONE,
    UNSUPPORTED_FOR_MESSAGE_FORMAT: MarkerOutcome.DONE,
    UNSUPPORTED_VERSION: MarkerOutcome.DONE,
    UNKNOWN_TOPIC_OR_PARTITION: MarkerOutcome.RETRY,
    NOT_LEADER_OR_FOLLOWER: MarkerOutcome.RETRY,
    NOT_ENOUGH_REPLICAS: MarkerOutcome.RETRY,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: MarkerOutcome.RETRY,
    REQUEST_TIMED_OUT: MarkerOutcome.RETRY,
    KAFKA_STORAGE_ERROR: MarkerOutcome.RETRY,
    INVALID_PRODUCER_EPOCH: MarkerOutcome.CANCEL,
    TRANSACTION_COORDINATOR_FENCED: MarkerOutcome.CANCEL,
}
#: Errors no marker write should ever get (Kafka: fatal).
FATAL_MARKER_ERRORS = frozenset({CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_REQUIRED_ACKS})


def marker_outcome(error: int) -> MarkerOutcome:
    """What a partition's WriteTxnMarkers error code means.

    Args:
        error: The partition's error code.

    Returns:
        The outcome.

    Raises:
        IllegalTransitionError: A fatal or unexpected error (Kafka throws
            ``IllegalStateException``).
    """
    outcome = _OUTCOMES.get(error)
    if outcome is None:
        kind = "fatal" if error in FATAL_MARKER_ERRORS else "unexpected"
        raise IllegalTransitionError(f"{kind} error {error} writing a transaction marker")
    return outcome


@attrs.frozen
class TxnMarkerEntry:
    """One marker entry of a WriteTxnMarkers request (key 27) to one broker."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    result: TransactionResult
    partitions: tuple[TopicPartition, ...]


@attrs.frozen
class MarkerRouting:
    """Where a transaction's markers go.

    Attributes:
        by_broker: Broker id -> the marker entry to send it.
        no_leader: Partitions without a leader (deleted topics): they
            leave the transaction without a marker.
    """

    by_broker: dict[int, TxnMarkerEntry]
    no_leader: frozenset[TopicPartition]


def route_markers(markers: TxnMarkers, partitions: Iterable[TopicPartition], coordinator_epoch: int, leader_of: Callable[[TopicPartition], int | None]) -> MarkerRouting:
    """Group a transaction's partitions by leader.

    Args:
        markers: The transaction's markers.
        partitions: The partitions to send to (all of ``markers``' at
            first; those to retry later).
        coordinator_epoch: The coordinator epoch of the transaction's
            ``__transaction_state`` partition.
        leader_of: The leader's broker id of a partition, None when it has
            none (or its topic is gone).

    Returns:
        The routing (partitions sorted within each entry).
    """
    groups: dict[int, list[TopicPartition]] = {}
    no_leader = set()
    for tp in partitions:
        leader = leader_of(tp)
        if leader is None or leader < 0:
            no_leader.add(tp)
        else:
            groups.setdefault(leader, []).append(tp)
    by_broker = {broker: TxnMarkerEntry(markers.producer_id, markers.producer_epoch, coordinator_epoch, markers.result, tuple(sorted(tps))) for broker, tps in sorted(groups.items())}
    return MarkerRouting(by_broker, frozenset(no_leader))


@attrs.frozen
class MarkerProgress:
    """What to do after a WriteTxnMarkers answer for one transaction.

    Attributes:
        cancelled: Stop sending this transaction's markers (its producer or
            coordinator epoch changed).
        retry: Partitions to send again (`route_markers`).
        complete: Every marker is written: write the ``complete``
            transition of the `TxnMarkers` now.
    """

    cancelled: bool = False
    retry: frozenset[TopicPartition] = frozenset()
    complete: bool = False


def on_markers_written(md: TransactionMetadata, errors: Mapping[TopicPartition, int]) -> MarkerProgress:
    """Apply one broker's WriteTxnMarkers answer for a transaction.

    Args:
        md: The transaction's metadata (the caller checks first that it
            still coordinates it at the markers' coordinator epoch, else it
            cancels).
        errors: The error code of each partition of the marker entry.

    Returns:
        The progress.

    Raises:
        IllegalTransitionError: A fatal error, or a metadata not in
            PrepareCommit / PrepareAbort.
    """
    retry = set()
    for tp, error in errors.items():
        outcome = marker_outcome(error)
        if outcome is MarkerOutcome.CANCEL:
            return MarkerProgress(cancelled=True)
        if outcome is MarkerOutcome.RETRY:
            retry.add(tp)
        else:
            md.remove_partition(tp)
    return MarkerProgress(retry=frozenset(retry), complete=not retry and not md.topic_partitions)


def drop_partitions_without_leader(md: TransactionMetadata, routing: MarkerRouting) -> bool:
    """Remove the partitions without a leader from the transaction (their
    topics are deleted: the producer could not have written to them).

    Args:
        md: The transaction's metadata.
        routing: The routing of its markers.

    Returns:
        True when no partition is left: write the completion now.
    """
    for tp in routing.no_leader:
        md.remove_partition(tp)
    return not md.topic_partitions


def on_completion_append_failure(md: TransactionMetadata, error: int) -> bool:
    """After the CompleteCommit / CompleteAbort write failed.

    Args:
        md: The transaction's metadata.
        error: The coordinator's error for the append
            (`kclient.broker.txn.coordinator.coordinator_error_for_append`).

    Returns:
        True: retry the write (COORDINATOR_NOT_AVAILABLE; the pending state
        is kept). False: give up (NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS: the next coordinator completes it when
        it loads the partition); the pending state is dropped.

    Raises:
        IllegalTransitionError: Any other error (Kafka: fatal).
    """
    if error == COORDINATOR_NOT_AVAILABLE:
        return True
    if error in (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS):
        md.abort_transition()
        return False
    raise IllegalTransitionError(f"{md.transactional_id}: unexpected error {error} writing the transaction's completion")


__all__ = [
    "FATAL_MARKER_ERRORS",
    "MarkerOutcome",
    "MarkerProgress",
    "MarkerRouting",
    "TxnMarkerEntry",
    "drop_partitions_without_leader",
    "marker_outcome",
    "on_completion_append_failure",
    "on_markers_written",
    "route_markers",
]
