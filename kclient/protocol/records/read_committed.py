"""What a read_committed reader skips in fetched record batches (KIP-98).

A Fetch at isolation level 1 (READ_COMMITTED) returns the batches below
the partition's last stable offset (LSO) and the aborted transactions
overlapping them, ``(producer_id, first_offset)`` pairs from the
transaction index (`kclient.storage.txn_index`). The reader then applies
the rule of Kafka's consumer (``CompletedFetch``):

* for a batch with a producer id, every aborted transaction whose first
  offset is at or before the batch's last offset makes its producer
  *aborted*;
* a control batch holding an ABORT marker ends its producer's aborted
  transaction (the producer is no longer aborted);
* a transactional data batch of an aborted producer is skipped;
* control batches are never returned to the application.

Batches at or past the LSO are not yet decided: a broker does not return
them, and `decide_batches` marks them so when the caller passes the LSO.
v0 / v1 entries carry no producer id and are always visible.

The consumers (`kclient.SimpleConsumer`, the ConsumerConnector,
`kclient.Consumer`, the Spark source) name the level as Kafka's consumer
property ``isolation.level`` does: `isolation_level_code` turns the name
into the Fetch / ListOffsets ``isolation_level`` field.

Pure: no I/O; used by the broker's tests and the consumers.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

import attrs

from kclient.errors import ConfigError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.control import ABORT, control_type_of
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import NO_PRODUCER_ID, BatchHeader, read_header

#: ``isolation_level`` of a Fetch / ListOffsets reading everything up to
#: the high watermark (Kafka's ``IsolationLevel.READ_UNCOMMITTED``).
READ_UNCOMMITTED = 0
#: ``isolation_level`` reading up to the last stable offset, aborted
#: transactions listed (``IsolationLevel.READ_COMMITTED``, Fetch v4+,
#: ListOffsets v2+).
READ_COMMITTED = 1
#: The ``isolation.level`` values, Kafka's names, with their codes.
ISOLATION_LEVELS: dict[str, int] = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


def isolation_level_code(value: object, key: str = "isolation.level") -> int:
    """The Fetch / ListOffsets ``isolation_level`` of an ``isolation.level``
    setting (KIP-98).

    Args:
        value: ``read_uncommitted`` or ``read_committed`` (any case,
            surrounding blanks ignored), or None for the default,
            ``read_uncommitted``.
        key: The setting's name, for the error message (the Spark source
            passes ``kafka.isolation.level``).

    Returns:
        `READ_UNCOMMITTED` (0) or `READ_COMMITTED` (1).

    Raises:
        ConfigError: Any other value, naming ``key`` and the allowed values.
    """
    if value is None:
        return READ_UNCOMMITTED
    code = ISOLATION_LEVELS.get(value.strip().lower()) if isinstance(value, str) else None
    if code is None:
        raise ConfigError(f"Invalid value {value!r} for configuration {key}: expected one of {', '.join(ISOLATION_LEVELS)}")
    return code


#: `BatchDecision.reason` of a batch the application sees.
VISIBLE = "visible"
#: `BatchDecision.reason` of a control batch (never returned).
CONTROL = "control"
#: `BatchDecision.reason` of a data batch of an aborted transaction.
ABORTED = "aborted"
#: `BatchDecision.reason` of a batch at or past the last stable offset.
UNSTABLE = "unstable"


@attrs.frozen(slots=True)
class BatchDecision:
    """What a read_committed reader does with one fetched batch."""

    #: The batch's first byte in the fetched data.
    position: int
    #: Its bytes, log overhead included.
    size: int
    base_offset: int
    last_offset: int
    #: `VISIBLE`, `CONTROL`, `ABORTED` or `UNSTABLE`.
    reason: str

    @property
    def visible(self) -> bool:
        """Whether the application sees the batch's records."""
        return self.reason == VISIBLE


class AbortedTransactionFilter:
    """The consumer-side read_committed state of one fetch response.

    Feed it the fetched batches in offset order (`decide`).

    Source: Kafka's ``CompletedFetch`` (``abortedProducerIds``,
    ``abortedTransactions``, ``consumeAbortedTransactionsUpTo``,
    ``isBatchAborted``, ``containsAbortMarker``).

    Args:
        aborted_transactions: The response's ``(producer_id, first_offset)``
            pairs, in any order.
    """

    def __init__(self, aborted_transactions: Iterable[tuple[int, int]] = ()) -> None:
        # (first offset, producer id): a heap, oldest transaction first.
        self._pending = [(first, pid) for pid, first in aborted_transactions]
        heapq.heapify(self._pending)
        self._aborted_producers: set[int] = set()

    @property
    def aborted_producers(self) -> frozenset[int]:
        """The producers whose aborted transaction the reader is inside."""
        return frozenset(self._aborted_producers)

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            self._aborted_producers.add(heapq.heappop(pending)[1])

    def decide(self, header: BatchHeader, control_type: int | None) -> str:
        """The fate of one v2 batch.

        Args:
            header: The batch's header.
            control_type: For a control batch, its record's type
                (`kclient.protocol.records.control.control_type_of`).

        Returns:
            `VISIBLE`, `CONTROL` or `ABORTED`.
        """
        if header.producer_id != NO_PRODUCER_ID:
            self._consume_up_to(header.last_offset)
            if header.is_control:
                if control_type == ABORT:
                    self._aborted_producers.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in self._aborted_producers:
                return ABORTED
        return CONTROL if header.is_control else VISIBLE


def decide_batches(data: Buffer, aborted_transactions: Iterable[tuple[int, int]] = (), last_stable_offset: int | None = None) -> list[BatchDecision]:
    """What a read_committed reader does with each complete batch of
    fetched data.

    Args:
        data (bytes | bytearray | memoryview): The partition's fetched
            records (a partial batch at the end is left out, as a reader
            does).
        aborted_transactions: The fetch response's ``(producer_id,
            first_offset)`` pairs.
        last_stable_offset: The partition's LSO, if known: batches starting
            at or past it are `UNSTABLE`.

    Returns:
        One decision per batch, in order.

    Raises:
        kclient.errors.CorruptRecordError: A malformed batch or control key.
    """
    filt = AbortedTransactionFilter(aborted_transactions)
    decisions = []
    for info in scan_batches(data):
        if last_stable_offset is not None and info.base_offset >= last_stable_offset:
            reason = UNSTABLE
        elif info.magic != 2:
            reason = VISIBLE
        else:
            header = read_header(data, info.position)
            control_type = control_type_of(data, info.position, header) if header.is_control else None
            reason = filt.decide(header, control_type)
        decisions.append(BatchDecision(info.position, info.size, info.base_offset, info.last_offset, reason))
    return decisions


def committed_batches(data: Buffer, aborted_transactions: Iterable[tuple[int, int]] = (), last_stable_offset: int | None = None) -> bytes:
    """The batches of ``data`` a read_committed reader returns, concatenated.

    Args:
        data (bytes | bytearray | memoryview): Fetched records.
        aborted_transactions: The fetch response's ``(producer_id,
            first_offset)`` pairs.
        last_stable_offset: The partition's LSO, if known.

    Returns:
        The visible batches' bytes, unchanged.

    Raises:
        kclient.errors.CorruptRecordError: A malformed batch or control key.
    """
    view = memoryview(data)
    decisions = decide_batches(data, aborted_transactions, last_stable_offset)
    return b"".join(bytes(view[d.position : d.position + d.size]) for d in decisions if d.visible)


__all__ = [
    "ABORTED",
    "CONTROL",
    "ISOLATION_LEVELS",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "UNSTABLE",
    "VISIBLE",
    "AbortedTransactionFilter",
    "BatchDecision",
    "committed_batches",
    "decide_batches",
    "isolation_level_code",
]
