"""The transaction state the log cleaner carries through one cleaning
round (Kafka's ``CleanedTransactionMetadata``, KIP-98): which data batches
belong to aborted transactions (removed), which transaction markers may be
removed, and which aborted transactions stay in the cleaned segments'
``.txnindex``.

The cleaner walks the batches of a round in offset order and calls
`CleanedTxnMetadata.on_batch_read` for each data batch and
`CleanedTxnMetadata.on_control_batch_read` for each control batch:

* a transactional data batch of an aborted transaction (the ``.txnindex``
  entries of the round) is discarded, and its transaction counts as having
  data in this round; one of a committed transaction marks it as having
  data;
* an ABORT marker is removable when no batch of its transaction was seen in
  this round (an earlier round removed them all); otherwise it stays and
  its aborted transaction is kept for the cleaned segment's ``.txnindex``
  (`CleanedTxnMetadata.take_retained`). A COMMIT marker is removable when
  no batch of its transaction was seen;
* a removable marker is not dropped at once: the cleaner sets its batch's
  delete horizon (cleaning time plus ``delete.retention.ms``) the first time,
  and drops it in a round at or after that horizon (Kafka's
  ``Cleaner.cleanInto``, KIP-534's ``deleteHorizonMs``), so a reader that
  fetched the transaction's data before the cleaning still finds its marker.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

import attrs

from kclient.protocol.records.control import ABORT, COMMIT
from kclient.storage.txn_index import AbortedTxn


@attrs.define
class _AbortedProgress:
    """An aborted transaction the round is inside of."""

    txn: AbortedTxn
    #: The last offset of a batch of it seen in this round (None: none).
    last_observed: int | None = None


class CleanedTxnMetadata:
    """The transaction state of one cleaning round (see the module
    docstring).

    Args:
        aborted: The aborted transactions overlapping the round's offsets
            (the segments' ``.txnindex`` entries; duplicates are ignored).
    """

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending: list[tuple[int, int, int, AbortedTxn]] = [(t.first_offset, t.last_offset, t.producer_id, t) for t in set(aborted)]
        heapq.heapify(self._pending)
        self._ongoing_aborted: dict[int, _AbortedProgress] = {}
        self._ongoing_committed: set[int] = set()
        self._retained: list[AbortedTxn] = []

    def _consume_aborted_up_to(self, offset: int) -> None:
        """Enter the aborted transactions starting at or before ``offset``."""
        pending = self._pending
        while pending and pending[0][0] <= offset:
            txn = heapq.heappop(pending)[3]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedProgress(txn))

    def on_batch_read(self, producer_id: int, is_transactional: bool, last_offset: int) -> bool:
        """A data batch of the round, in offset order.

        Args:
            producer_id: Its producer id (-1: none).
            is_transactional: Its transactional attribute bit.
            last_offset: Its last offset.

        Returns:
            Whether it belongs to an aborted transaction (its records go).
        """
        self._consume_aborted_up_to(last_offset)
        if not is_transactional:
            return False
        progress = self._ongoing_aborted.get(producer_id)
        if progress is not None:
            progress.last_observed = last_offset
            return True
        self._ongoing_committed.add(producer_id)
        return False

    def on_control_batch_read(self, producer_id: int, last_offset: int, control_type: int | None, records: int) -> bool:
        """A control batch of the round, in offset order.

        Args:
            producer_id: Its producer id.
            last_offset: Its last offset.
            control_type: `kclient.protocol.records.control.COMMIT` or
                ``ABORT`` (None: another type or no record).
            records: Its record count (0: an empty control batch).

        Returns:
            Whether the marker may be removed (once its delete horizon
            passed): its transaction has no batch left in the log.
        """
        self._consume_aborted_up_to(last_offset)
        if records == 0:
            return True  # (already emptied by a cleaning: safe to drop)
        if control_type == ABORT:
            progress = self._ongoing_aborted.pop(producer_id, None)
            if progress is not None and progress.last_observed is not None:
                self._retained.append(progress.txn)
                return False
            return True
        if control_type == COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def take_retained(self) -> list[AbortedTxn]:
        """The aborted transactions whose ABORT markers were kept since the
        last call, in marker order: the cleaned segment's ``.txnindex``
        entries."""
        out, self._retained = self._retained, []
        return out


__all__ = ["CleanedTxnMetadata"]
