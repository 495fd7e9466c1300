"""The transaction state of a partition's log (KIP-98): what the log calls
to feed its `kclient.storage.txn_state.TxnState` on append, to rebuild it
and the segments' ``.txnindex`` files after a load or a truncation, and to
collect the aborted transactions a read_committed fetch returns.

Source: Kafka's ``UnifiedLog`` (``analyzeAndValidateProducerState``,
``updateHighWatermarkMetadata``, ``collectAbortedTransactions``) and
``LogLoader`` / ``UnifiedLog.rebuildProducerState`` (the transactions of
the batches after the newest producer state snapshot are replayed, their
ABORT markers indexed again).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kclient.crash_point import crash_point
from kclient.protocol.primitives import Buffer
from kclient.storage.log_segments import LogSegments
from kclient.storage.segment import LogSegment
from kclient.storage.txn_index import AbortedTxn, collect_aborted_txns
from kclient.storage.txn_state import TxnAppend, TxnState, read_txn_batch

logger = logging.getLogger(__name__)


def apply_txn_batch(state: TxnState, segment: LogSegment, buf: Buffer, position: int) -> TxnAppend:
    """Apply one appended v2 batch with a producer id to the transaction
    state; an ABORT completing a transaction is indexed in ``segment``.

    Args:
        state: The partition's transaction state.
        segment: The segment the batch was appended to.
        buf (bytes | bytearray | memoryview): Bytes holding the batch, with
            its final offsets.
        position: The batch's first byte in ``buf``.

    Returns:
        What the batch changed.

    Raises:
        kclient.errors.InvalidTxnStateError: A non-transactional batch of a
            producer with an open transaction.
        OSError: The transaction index could not be written.
    """
    batch = read_txn_batch(buf, position)
    crash_point("txn.marker.appended" if batch.is_control else "txn.data.appended")
    change = state.append(batch)
    if change.aborted is not None:
        segment.txn_index.append(change.aborted)
        crash_point("txn.index.appended")
    return change


def load_txn_state(state: TxnState, snapshot: tuple[int | None, list[tuple[int, int]]], view: LogSegments, log_start_offset: int) -> int:
    """Rebuild the transaction state and the ``.txnindex`` entries from the
    producer state snapshot on: the open transactions it saved, then the
    batches after it replayed (the entries of ABORT markers at or after its
    offset are rewritten, as a crash may have lost them).

    Args:
        state: The transaction state (reset here).
        snapshot: ``(offset, open transactions)`` of the snapshot loaded
            (`kclient.storage.producer_state.ProducerStateManager.loaded_snapshot`);
            ``(None, [])`` replays from the log start.
        view: The log's segments.
        log_start_offset: The log start offset.

    Returns:
        The number of batches replayed.

    Raises:
        OSError: A read or index write failed.
    """
    offset, ongoing = snapshot
    start = log_start_offset if offset is None else max(offset, log_start_offset)
    state.restore(ongoing)
    segments = view.segments
    if not segments or start >= segments[-1].next_offset:
        return 0
    replayed = 0
    for seg in segments[view.index_of(start) :]:
        seg.txn_index.truncate_to(start)
        for info, fields in seg.iter_batch_fields():
            if fields is None or fields.producer_id < 0 or info.last_offset < start:
                continue
            apply_txn_batch(state, seg, seg.read(info.position, info.size), 0)
            replayed += 1
    if replayed or len(state):
        logger.info("log %s: transaction state from snapshot %s plus %d replayed batch(es): %d open", view.segments[0].directory, offset, replayed, len(state))
    return replayed


def log_aborted_txns(segments: Sequence[LogSegment], fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping ``[fetch_offset,
    upper_bound_offset)`` (Kafka's ``collectAbortedTransactions``): the
    segments' indexes from the one holding ``fetch_offset`` on.

    Args:
        segments: The log's segments, oldest first.
        fetch_offset: The first offset fetched.
        upper_bound_offset: The end of the range read (exclusive; the last
            stable offset bounds it).

    Returns:
        The entries, in offset order of their markers.
    """
    first = 0
    for i, seg in enumerate(segments):
        if seg.base_offset <= fetch_offset:
            first = i
        else:
            break
    return collect_aborted_txns((seg.txn_index for seg in segments[first:]), fetch_offset, upper_bound_offset)


__all__ = ["apply_txn_batch", "load_txn_state", "log_aborted_txns"]
