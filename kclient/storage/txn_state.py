"""The ongoing transactions of one partition and its last stable offset
(KIP-98), as Kafka's ``ProducerStateManager`` tracks them.

A transactional data batch from producer P at offsets ``O..L`` starts
P's transaction when P has none open (its first offset is ``O``). A
control batch from P holding a COMMIT or ABORT marker at offset ``M``
completes it: a `CompletedTxn` ``(P, first offset, M, aborted?)``. A
marker of a producer with no open transaction completes nothing (an
empty transaction, or one the cleaner removed), and a control batch with
no record (emptied by the cleaner) is ignored, as in Kafka.

The *first unstable offset* is the first offset of the oldest transaction
still undecided, or of one decided by a marker not yet below the high
watermark (not yet replicated); the *last stable offset* (LSO) is that
offset, or the high watermark when there is none or it is past the high
watermark (Kafka's ``UnifiedLog.lastStableOffset``). A read_committed
fetch reads up to the LSO.

When an ABORT completes a transaction, the segment holding the marker
records an `kclient.storage.txn_index.AbortedTxn` with the LSO at that
moment: the first offset of the oldest *other* ongoing transaction, else
the marker's offset + 1 (Kafka's ``ProducerStateManager.lastStableOffset
(completedTxn)``). `TxnState.append` returns both.

After a restart the state is rebuilt from the ongoing transactions saved
with a producer state snapshot (`TxnState.ongoing` / `TxnState.restore`)
then `TxnState.replay` of the batches after the snapshot offset.

Pure: no I/O. `read_txn_batch` reads a batch's facts from its bytes,
`txn_batches` from a segment walk
(`kclient.storage.batch_walk.walk_batches`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

import attrs

from kclient.errors import InvalidTxnStateError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.control import ABORT, COMMIT, control_type_of
from kclient.protocol.records.scan import BatchInfo
from kclient.protocol.records.v2 import NO_PRODUCER_ID, read_header
from kclient.storage.txn_index import AbortedTxn, TransactionIndex


class TxnBatch(NamedTuple):
    """The transaction facts of one batch appended to (or replayed from)
    the log.

    ``control_type`` is `kclient.protocol.records.control.COMMIT` or
    ``ABORT`` for a transaction marker, ``None`` otherwise (a data batch,
    a control batch with no record or of another type).
    """

    producer_id: int
    is_transactional: bool
    is_control: bool
    control_type: int | None
    base_offset: int
    last_offset: int


@attrs.frozen(slots=True)
class CompletedTxn:
    """A transaction a COMMIT or ABORT marker ended (Kafka's ``CompletedTxn``)."""

    producer_id: int
    #: The transaction's first offset (inclusive).
    first_offset: int
    #: The offset of its COMMIT / ABORT marker (inclusive).
    last_offset: int
    is_aborted: bool


@attrs.frozen(slots=True)
class TxnAppend:
    """What appending one batch changed: the transaction it completed (if
    any) and, for an aborted one, the transaction index entry to write in
    the segment holding the marker."""

    completed: CompletedTxn | None = None
    aborted: AbortedTxn | None = None


_NOTHING = TxnAppend()


def read_txn_batch(buf: Buffer, position: int = 0) -> TxnBatch:
    """The transaction facts of the v2 batch at ``position``.

    Args:
        buf (bytes | bytearray | memoryview): Bytes holding the whole batch.
        position: The batch's first byte in ``buf``.

    Returns:
        Its facts (a marker's type read from its control record key).

    Raises:
        kclient.errors.CorruptRecordError: A malformed batch or control key.
    """
    header = read_header(buf, position)
    control_type = control_type_of(buf, position, header) if header.is_control else None
    return TxnBatch(
        header.producer_id, header.is_transactional, header.is_control, control_type, header.base_offset, header.last_offset
    )


def txn_batches(walked: Iterable[tuple[BatchInfo, Buffer, int]]) -> Iterator[TxnBatch]:
    """The transaction facts of walked batches, for `TxnState.replay`.

    Args:
        walked: ``(info, chunk, position in chunk)`` per complete batch, as
            `kclient.storage.batch_walk.walk_batches` yields them; v0 / v1
            entries (no producer) are left out.

    Yields:
        Each v2 batch's facts, in order.

    Raises:
        kclient.errors.CorruptRecordError: A malformed batch or control key.
    """
    for info, chunk, position in walked:
        if info.magic == 2:
            yield read_txn_batch(chunk, position)


class TxnState:
    """A partition's ongoing transactions and its first unstable offset.

    Not thread-safe: the log calls it under its lock, and publishes the
    LSO it computes.

    Source: Kafka's ``ProducerStateManager`` (``ongoingTxns``,
    ``unreplicatedTxns``, ``firstUnstableOffset``, ``lastStableOffset``,
    ``completeTxn``, ``onHighWatermarkUpdated``) and
    ``ProducerAppendInfo`` (starting and ending a transaction).
    """

    def __init__(self) -> None:
        # producer id -> first offset of its open transaction; insertion
        # order is first-offset order (appends come in offset order, and
        # `restore` sorts).
        self._ongoing: dict[int, int] = {}
        # Completed transactions whose marker is not yet below the high
        # watermark: first offset -> marker offset, in first-offset order.
        self._unreplicated: dict[int, int] = {}

    # ------------------------------------------------------------ queries

    def ongoing(self) -> list[tuple[int, int]]:
        """The open transactions as ``(producer_id, first_offset)``, oldest
        first (what a producer state snapshot saves: Kafka's
        ``currentTxnFirstOffset`` per producer)."""
        return list(self._ongoing.items())

    def current_txn_first_offset(self, producer_id: int) -> int | None:
        """The first offset of the producer's open transaction, or ``None``."""
        return self._ongoing.get(producer_id)

    def first_undecided_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or ``None``
        (Kafka's ``firstUndecidedOffset``)."""
        return next(iter(self._ongoing.values()), None)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is undecided or
        decided by a marker not yet below the high watermark, or ``None``
        (Kafka's ``firstUnstableOffset``)."""
        undecided = self.first_undecided_offset()
        unreplicated = next(iter(self._unreplicated), None)
        if unreplicated is None:
            return undecided
        if undecided is None:
            return unreplicated
        return min(undecided, unreplicated)

    def last_stable_offset(self, high_watermark: int, log_start_offset: int = 0) -> int:
        """The partition's last stable offset (Kafka's ``UnifiedLog.lastStableOffset``).

        Args:
            high_watermark: The partition's high watermark.
            log_start_offset: The log start offset: an unstable offset below
                it counts as the log start offset (Kafka's
                ``maybeIncrementFirstUnstableOffset``).

        Returns:
            The first unstable offset if it is below the high watermark,
                else the high watermark.
        """
        first = self.first_unstable_offset()
        if first is None:
            return high_watermark
        first = max(first, log_start_offset)
        return first if first < high_watermark else high_watermark

    def last_stable_offset_of(self, completed: CompletedTxn) -> int:
        """The LSO recorded in the transaction index for a transaction being
        completed: the first offset of the oldest open transaction of
        another producer, else the marker's offset + 1 (Kafka's
        ``lastStableOffset(completedTxn)``).

        Args:
            completed: The transaction, not yet completed (`complete`).

        Returns:
            The offset.
        """
        for producer_id, first_offset in self._ongoing.items():
            if producer_id != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def __len__(self) -> int:
        """Number of open transactions."""
        return len(self._ongoing)

    # ------------------------------------------------------------ updates

    def append(self, batch: TxnBatch) -> TxnAppend:
        """Apply one batch appended to the log (leader, follower or replay).

        Args:
            batch: The batch's facts (`read_txn_batch`).

        Returns:
            The transaction it completed and, for an abort, the transaction
                index entry (with the LSO of this moment) to write in the
                segment holding the marker; the transaction is then complete
                (its marker waits for the high watermark, see
                `on_high_watermark_updated`).

        Raises:
            kclient.errors.InvalidTxnStateError: A non-transactional data
                batch from a producer with an open transaction (Kafka's
                ``InvalidTxnStateException``); nothing changes.
        """
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID:
            return _NOTHING
        if batch.is_control:
            completed = self.end_txn(pid, batch.control_type, batch.base_offset)
            if completed is None:
                return _NOTHING
            aborted = AbortedTxn(pid, completed.first_offset, completed.last_offset, self.last_stable_offset_of(completed)) if completed.is_aborted else None
            self.complete(completed)
            return TxnAppend(completed, aborted)
        if pid in self._ongoing:
            if not batch.is_transactional:
                raise InvalidTxnStateError(
                    f"expected a transactional write from producer {pid} at offset {batch.base_offset}: "
                    f"its transaction from offset {self._ongoing[pid]} is open"
                )
        elif batch.is_transactional:
            self._ongoing[pid] = batch.base_offset
        return _NOTHING

    def end_txn(self, producer_id: int, control_type: int | None, offset: int) -> CompletedTxn | None:
        """The transaction a marker ends, without completing it (`complete`).

        Args:
            producer_id: The marker's producer id.
            control_type: `COMMIT`, `ABORT`, or ``None`` / another type
                (nothing ends).
            offset: The marker's offset.

        Returns:
            The transaction, or ``None`` when the producer has none open or
                the batch holds no marker.
        """
        if control_type not in (COMMIT, ABORT):
            return None
        first = self._ongoing.get(producer_id)
        if first is None:
            return None
        return CompletedTxn(producer_id, first, offset, control_type == ABORT)

    def complete(self, completed: CompletedTxn) -> None:
        """Mark a transaction complete; it stays unstable until the high
        watermark passes its marker (Kafka's ``completeTxn``).

        Args:
            completed: The transaction (`end_txn`).

        Raises:
            ValueError: The producer has no transaction open at that first
                offset.
        """
        if self._ongoing.get(completed.producer_id) != completed.first_offset:
            raise ValueError(f"cannot complete {completed}: no such transaction was started")
        del self._ongoing[completed.producer_id]
        self._unreplicated[completed.first_offset] = completed.last_offset
        self._unreplicated = dict(sorted(self._unreplicated.items()))

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below the high
        watermark (Kafka's ``onHighWatermarkUpdated``).

        Args:
            high_watermark: The new high watermark.
        """
        if self._unreplicated:
            self._unreplicated = {first: last for first, last in self._unreplicated.items() if last >= high_watermark}

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget completed transactions whose marker is below the new log
        start offset (Kafka's ``onLogStartOffsetIncremented``).

        Args:
            log_start_offset: The new log start offset.
        """
        self.on_high_watermark_updated(log_start_offset)

    def restore(self, ongoing: Iterable[tuple[int, int]]) -> None:
        """Reset to the open transactions saved with a snapshot (the
        completed ones are below the high watermark after a reload, as
        Kafka assumes in ``truncateAndReload``).

        Args:
            ongoing: ``(producer_id, first_offset)`` pairs (`ongoing`).
        """
        self._ongoing = dict(sorted(ongoing, key=lambda pair: pair[1]))
        self._unreplicated = {}

    def reset(self) -> None:
        """Forget every transaction (Kafka's ``truncateFullyAndStartAt``)."""
        self.restore(())

    def replay(self, batches: Iterable[TxnBatch | tuple[int, bool, bool, int | None, int, int]]) -> list[TxnAppend]:
        """Apply the batches after a snapshot, in offset order (a reload,
        a segment's recovery, a truncation's reload).

        Args:
            batches: Each batch's facts, ``(producer_id, is_transactional,
                is_control, control_type, base_offset, last_offset)`` (a
                `TxnBatch` or a plain tuple).

        Returns:
            What each completed transaction changed (the aborted ones carry
                the transaction index entries to write again), in order.

        Raises:
            kclient.errors.InvalidTxnStateError: As `append`.
        """
        return [change for change in _apply_all(self, batches) if change.completed is not None]


def rebuild_txn_index(index: TransactionIndex, state: TxnState, batches: Iterable[TxnBatch]) -> list[TxnAppend]:
    """Rebuild a segment's transaction index by replaying its batches
    (Kafka's ``LogSegment.recover``: the index is reset, then every
    transaction an ABORT marker of the segment completes is recorded).

    Args:
        index: The segment's transaction index.
        state: The partition's transaction state at the segment's base
            offset (a snapshot restored and the earlier batches replayed:
            a transaction may start in an earlier segment); it is advanced
            past the segment.
        batches: The segment's batches' facts, in order (`txn_batches`).

    Returns:
        What each completed transaction changed, in order.

    Raises:
        kclient.errors.InvalidTxnStateError: As `TxnState.append`.
        OSError: An I/O failure of the index.
    """
    index.reset()
    changes = state.replay(batches)
    for change in changes:
        if change.aborted is not None:
            index.append(change.aborted)
    return changes


def _apply_all(state: TxnState, batches: Iterable[TxnBatch | tuple[int, bool, bool, int | None, int, int]]) -> Iterator[TxnAppend]:
    for batch in batches:
        yield state.append(batch if isinstance(batch, TxnBatch) else TxnBatch(*batch))


__all__ = [
    "CompletedTxn",
    "TxnAppend",
    "TxnBatch",
    "TxnState",
    "control_type_of",
    "read_txn_batch",
    "rebuild_txn_index",
    "txn_batches",
]
