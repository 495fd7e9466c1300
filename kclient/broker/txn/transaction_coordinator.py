"""The transaction coordinator of one broker, as Kafka's
``TransactionCoordinator`` class: the cache
(`kclient.broker.txn.state_manager.TransactionStateManager`) and the
decisions (`kclient.broker.txn.coordinator`) put together, still without
I/O.

Every request gives a `TxnStep`: an answer to send now, or a
``__transaction_state`` record to write first (`PendingWrite`, with the
coordinator epoch it was decided at). Once the write is acknowledged (or
failed), `TransactionCoordinator.after_write` gives the answer, checking
that this broker still coordinates the id at that epoch (else
NOT_COORDINATOR), and, for EndTxn and aborts, the markers to write
(`kclient.broker.txn.markers.route_markers` routes them). When every
marker is written, `TransactionCoordinator.completion_write` gives the
completion record, and `TransactionCoordinator.after_completion_write`
whether to retry it.

The broker owns the I/O: appending records (acks=all) to the partition
``partition_for(transactional_id)`` of ``__transaction_state``, sending
WriteTxnMarkers, loading the partition on election
(`TransactionCoordinator.on_election`), and the timers
(`TransactionCoordinator.abort_timed_out_transactions` every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
`TransactionCoordinator.expire_transactional_ids` every
``transaction.remove.expired.transaction.cleanup.interval.ms``). It calls
these methods one at a time (one trio task, or a lock), as Kafka holds the
metadata's lock.

Pure: no I/O; the clock comes from the state manager.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from kclient.broker.txn import coordinator as decide
from kclient.broker.txn.coordinator import DEFAULT_TRANSACTION_MAX_TIMEOUT_MS, TxnDecision, TxnMarkers
from kclient.broker.txn.markers import MarkerProgress, on_completion_append_failure, on_markers_written
from kclient.broker.txn.metadata import TopicPartition, TransactionMetadata, TransactionState
from kclient.broker.txn.records import record_for, tombstone_for
from kclient.broker.txn.state_manager import TransactionDescription, TransactionStateManager
from kclient.errors import INVALID_REQUEST, NONE, NOT_COORDINATOR
from kclient.protocol.messages.transaction_log import VALUE_VERSION

#: ``offsets.topic.num.partitions``'s default.
DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50


@attrs.frozen
class PendingWrite:
    """A ``__transaction_state`` record to append before answering.

    Attributes:
        transactional_id: The transaction's id.
        partition: Its ``__transaction_state`` partition.
        coordinator_epoch: The coordinator epoch it was decided at.
        decision: The decision whose ``append`` this is.
        key: The record key.
        value: The record value (None: a tombstone).
    """

    transactional_id: str
    partition: int
    coordinator_epoch: int
    decision: TxnDecision
    key: bytes
    value: bytes | None


@attrs.frozen
class TxnStep:
    """What to do for a request: write ``write`` first (then
    `TransactionCoordinator.after_write` gives the answer), or, without a
    write, send ``answer`` now."""

    answer: TxnDecision
    write: PendingWrite | None = None


class TransactionCoordinator:
    """One broker's transaction coordinator, without I/O.

    Args:
        manager: The cache of the ids this broker coordinates (its clock is
            the coordinator's).
        allocate_producer_id: Gives a new, unused producer id.
        max_timeout_ms: ``transaction.max.timeout.ms``.
        offsets_topic_partitions: ``offsets.topic.num.partitions``.
        value_version: The ``__transaction_state`` value version to write.
    """

    def __init__(
        self,
        manager: TransactionStateManager,
        allocate_producer_id: Callable[[], int],
        *,
        max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
        offsets_topic_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS,
        value_version: int = VALUE_VERSION,
    ) -> None:
        self.manager = manager
        self.allocate_producer_id = allocate_producer_id
        self.max_timeout_ms = max_timeout_ms
        self.offsets_topic_partitions = offsets_topic_partitions
        self.value_version = value_version

    # --- requests ---------------------------------------------------------------

    def _step(self, transactional_id: str, coordinator_epoch: int, decision: TxnDecision) -> TxnStep:
        if decision.append is None:
            return TxnStep(decision)
        key, value = record_for(transactional_id, decision.append, self.value_version)
        write = PendingWrite(transactional_id, self.manager.partition_for(transactional_id), coordinator_epoch, decision, key, value)
        return TxnStep(decision, write)

    def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1) -> TxnStep:
        """InitProducerId (see `kclient.broker.txn.coordinator.init_producer_id`);
        NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for an id this broker
        does not coordinate (now).

        Returns:
            The step.
        """
        error = decide.check_init_producer_id(transactional_id, transaction_timeout_ms, producer_id, producer_epoch, self.max_timeout_ms)
        checked = error == NONE and transactional_id is not None
        md, epoch = None, -1
        if checked and transactional_id is not None:
            error, epoch, md = self.manager.get(transactional_id)
            if error != NONE:
                return TxnStep(TxnDecision(error=error))
        decision = decide.init_producer_id(
            md,
            transactional_id=transactional_id,
            transaction_timeout_ms=transaction_timeout_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            now_ms=self.manager.clock(),
            allocate_producer_id=self.allocate_producer_id,
            max_timeout_ms=self.max_timeout_ms,
        )
        if not checked or transactional_id is None:
            return TxnStep(decision)
        if decision.created is not None:
            self.manager.put_if_absent(decision.created)
        return self._step(transactional_id, epoch, decision)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]) -> TxnStep:
        """AddPartitionsToTxn (see `kclient.broker.txn.coordinator.add_partitions_to_txn`).

        Returns:
            The step.
        """
        if not transactional_id:
            return TxnStep(decide.add_partitions_to_txn(None, transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, partitions=(), now_ms=0))
        error, epoch, md = self.manager.get(transactional_id)
        if error != NONE:
            return TxnStep(TxnDecision(error=error))
        decision = decide.add_partitions_to_txn(md, transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, partitions=partitions, now_ms=self.manager.clock())
        return self._step(transactional_id, epoch, decision)

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> TxnStep:
        """AddOffsetsToTxn: adds the group's ``__consumer_offsets`` partition.

        Returns:
            The step.
        """
        partition = decide.offsets_partition(group_id, self.offsets_topic_partitions)
        return self.add_partitions_to_txn(transactional_id, producer_id, producer_epoch, [partition])

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool) -> TxnStep:
        """EndTxn (see `kclient.broker.txn.coordinator.end_txn`).

        Returns:
            The step.
        """
        if not transactional_id:
            return TxnStep(decide.end_txn(None, transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, committed=committed, now_ms=0))
        error, epoch, md = self.manager.get(transactional_id)
        if error != NONE:
            return TxnStep(TxnDecision(error=error))
        decision = decide.end_txn(md, transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, committed=committed, now_ms=self.manager.clock())
        return self._step(transactional_id, epoch, decision)

    # --- after a write ------------------------------------------------------------

    def _current(self, transactional_id: str, coordinator_epoch: int) -> tuple[int, TransactionMetadata | None]:
        """``(error, metadata)``: the metadata if this broker still
        coordinates the id at ``coordinator_epoch``, else the error."""
        error, epoch, md = self.manager.get(transactional_id)
        if error != NONE:
            return error, None
        if md is None or epoch != coordinator_epoch:
            return NOT_COORDINATOR, None
        return NONE, md

    def after_write(self, write: PendingWrite, append_error: int) -> TxnDecision:
        """The answer once ``write`` is acknowledged or failed (Kafka's
        ``appendTransactionToLog`` callback, then for EndTxn its
        ``sendTxnMarkersCallback``).

        Args:
            write: The write.
            append_error: The append's error code (``NONE``: written).

        Returns:
            The answer: the write's decision (its error, producer id and
            epoch) with the ``markers`` to write now, or an error
            (NOT_COORDINATOR when the coordinator moved meanwhile; the
            coordinator's error for a failed append).
        """
        decision = write.decision
        error, md = self._current(write.transactional_id, write.coordinator_epoch)
        if append_error != NONE:
            if md is not None:
                return TxnDecision(error=decide.on_append_failure(md, decision, append_error))
            return TxnDecision(error=decide.coordinator_error_for_append(append_error))
        if md is None:
            return TxnDecision(error=error)
        assert decision.append is not None
        decide.on_append_success(md, decision.append)
        if decision.result is None:
            return decision
        begun = decide.begin_markers(md, decision, self.manager.clock())
        if begun.error != NONE:
            return begun
        # EndTxn answers NONE with the ids; InitProducerId's abort answers
        # CONCURRENT_TRANSACTIONS (the producer retries).
        return attrs.evolve(begun, error=decision.error, producer_id=decision.producer_id, producer_epoch=decision.producer_epoch)

    def on_markers_answered(self, markers: TxnMarkers, coordinator_epoch: int, errors: Mapping[TopicPartition, int]) -> MarkerProgress:
        """One broker's WriteTxnMarkers answer for a transaction.

        Args:
            markers: The transaction's markers.
            coordinator_epoch: The epoch the markers were sent with.
            errors: The error code of each partition.

        Returns:
            The progress (cancelled when this broker no longer coordinates
            the id at that epoch).
        """
        _, md = self._current(markers.transactional_id, coordinator_epoch)
        if md is None or md.pending_state not in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            return MarkerProgress(cancelled=True)
        return on_markers_written(md, errors)

    def completion_write(self, markers: TxnMarkers, coordinator_epoch: int) -> PendingWrite | None:
        """The CompleteCommit / CompleteAbort record once every marker is
        written, or None when this broker no longer coordinates the id at
        that epoch (the next coordinator completes it when it loads)."""
        _, md = self._current(markers.transactional_id, coordinator_epoch)
        if md is None:
            return None
        key, value = record_for(markers.transactional_id, markers.complete, self.value_version)
        decision = TxnDecision(producer_id=markers.producer_id, producer_epoch=markers.producer_epoch, append=markers.complete)
        return PendingWrite(markers.transactional_id, self.manager.partition_for(markers.transactional_id), coordinator_epoch, decision, key, value)

    def after_completion_write(self, write: PendingWrite, append_error: int) -> bool:
        """Apply the completion record's write.

        Args:
            write: The write from `completion_write`.
            append_error: The append's error code.

        Returns:
            True when the write should be retried (COORDINATOR_NOT_AVAILABLE).

        Raises:
            kclient.broker.txn.metadata.IllegalTransitionError: An
                unexpected append error (Kafka: fatal).
        """
        _, md = self._current(write.transactional_id, write.coordinator_epoch)
        if md is None:
            return False
        if append_error == NONE:
            assert write.decision.append is not None
            decide.on_append_success(md, write.decision.append)
            return False
        return on_completion_append_failure(md, decide.coordinator_error_for_append(append_error))

    # --- leadership and timers -----------------------------------------------------

    def on_election(self, partition: int, coordinator_epoch: int, records: Iterable[tuple[bytes, bytes | None]]) -> list[TxnMarkers]:
        """This broker leads ``partition`` of ``__transaction_state``: load
        it (see `TransactionStateManager.load_partition`).

        Returns:
            The markers to write again (transactions left in
            PrepareCommit / PrepareAbort), sent with ``coordinator_epoch``.
        """
        self.manager.begin_loading(partition, coordinator_epoch)
        return self.manager.load_partition(partition, coordinator_epoch, records)

    def on_resignation(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """This broker no longer leads ``partition``: forget its ids."""
        self.manager.resign(partition, coordinator_epoch)

    def abort_timed_out_transactions(self) -> list[PendingWrite]:
        """The aborts of the transactions older than their timeout (each
        fences the producer's epoch): write each, then `after_write`
        (whose answer goes to nobody) gives its markers."""
        now = self.manager.clock()
        out = []
        for md in self.manager.timed_out_transactions():
            _, epoch, _ = self.manager.get(md.transactional_id)
            decision = decide.abort_timed_out(md, now)
            if decision is not None and decision.append is not None:
                step = self._step(md.transactional_id, epoch, decision)
                assert step.write is not None
                out.append(step.write)
        return out

    def expire_transactional_ids(self) -> list[PendingWrite]:
        """The tombstones of the ids idle past
        ``transactional.id.expiration.ms``: write each, then
        `after_expiration_write`."""
        out = []
        for md, dead in self.manager.expire_transactional_ids():
            _, epoch, _ = self.manager.get(md.transactional_id)
            key, value = tombstone_for(md.transactional_id)
            out.append(PendingWrite(md.transactional_id, self.manager.partition_for(md.transactional_id), epoch, TxnDecision(append=dead), key, value))
        return out

    def after_expiration_write(self, write: PendingWrite, append_error: int) -> None:
        """Drop the expired id once its tombstone is written, else keep it
        (its pending Dead dropped)."""
        _, md = self._current(write.transactional_id, write.coordinator_epoch)
        if md is None or md.pending_state != TransactionState.DEAD:
            return
        if append_error == NONE:
            self.manager.remove(write.transactional_id)
        else:
            md.abort_transition()

    def describe(self, transactional_ids: Iterable[str]) -> list[TransactionDescription]:
        """DescribeTransactions (KIP-664): one description per id (an empty
        id: INVALID_REQUEST's code with no state).

        Returns:
            `kclient.broker.txn.state_manager.TransactionDescription` per id.
        """
        return [self.manager.describe(t) if t else TransactionDescription(INVALID_REQUEST, t) for t in transactional_ids]


__all__ = ["DEFAULT_OFFSETS_TOPIC_PARTITIONS", "PendingWrite", "TransactionCoordinator", "TxnStep"]
