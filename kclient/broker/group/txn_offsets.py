"""Pending transactional offset commits (KIP-98, KIP-447), as Kafka's
``GroupMetadata.pendingTransactionalOffsetCommits``.

TxnOffsetCommit appends a group's offsets to ``__consumer_offsets`` in a
transactional batch of the producer; they stay *pending* (invisible to
OffsetFetch) until the COMMIT or ABORT marker of that producer lands on
the same partition. A COMMIT makes them the group's committed offsets
unless a plain commit of the same partition was appended after them
(the later of the two by log offset wins, Kafka's
``CommitRecordMetadataAndOffset.olderThan``); an ABORT drops them.

Trio-thread only at run time; the loader (a worker thread) builds its own.
"""

from __future__ import annotations

from collections.abc import Callable

from kclient.broker.group.records import OffsetAndMetadata
from kclient.errors import UNSTABLE_OFFSET_COMMIT

#: ``{(topic, partition): (offset and metadata, its record's log offset)}``.
TxnOffsets = dict[tuple[str, int], tuple[OffsetAndMetadata, int]]


def apply_committed(
    committed: dict[tuple[str, int], OffsetAndMetadata],
    positions: dict[tuple[str, int], int],
    offsets: TxnOffsets,
) -> None:
    """Make a committed transaction's ``offsets`` a group's committed
    offsets, except where a later plain commit is already there.

    Args:
        committed: The group's committed offsets (updated).
        positions: The log offset of each committed offset's record
            (updated).
        offsets: The transaction's offsets with their log offsets.
    """
    for tp, (value, position) in offsets.items():
        if tp not in committed or positions.get(tp, -1) < position:
            committed[tp] = value
            positions[tp] = position


class PendingTxnOffsets:
    """The transactional offsets waiting for their marker, by producer id
    and group (see the module docstring)."""

    def __init__(self) -> None:
        self.by_producer: dict[int, dict[str, TxnOffsets]] = {}

    def add(self, producer_id: int, group_id: str, offsets: TxnOffsets) -> None:
        """Note ``offsets`` of ``group_id`` appended by ``producer_id``'s
        ongoing transaction (a later one of a partition replaces an
        earlier one)."""
        self.by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def complete(self, producer_id: int, in_partition: Callable[[str], bool]) -> dict[str, TxnOffsets]:
        """Remove and return ``producer_id``'s pending offsets of the groups
        ``in_partition`` accepts (those of the partition whose marker was
        written).

        Args:
            producer_id: The marker's producer id.
            in_partition: Whether a group id belongs to the marker's
                partition.

        Returns:
            ``{group id: its offsets}``.
        """
        groups = self.by_producer.get(producer_id)
        if not groups:
            return {}
        done = {g: o for g, o in groups.items() if in_partition(g)}
        for g in done:
            del groups[g]
        if not groups:
            del self.by_producer[producer_id]
        return done

    def drop_groups(self, dropped: Callable[[str], bool]) -> None:
        """Forget the pending offsets of the groups ``dropped`` accepts
        (their partition was unloaded)."""
        for producer_id in list(self.by_producer):
            groups = self.by_producer[producer_id]
            for g in [g for g in groups if dropped(g)]:
                del groups[g]
            if not groups:
                del self.by_producer[producer_id]

    def is_pending(self, group_id: str, tp: tuple[str, int]) -> bool:
        """Whether a transaction has a pending offset of ``tp`` for
        ``group_id`` (OffsetFetch ``require_stable``)."""
        return any(tp in groups.get(group_id, {}) for groups in self.by_producer.values())

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` has any pending offset."""
        return any(group_id in groups for groups in self.by_producer.values())


__all__ = ["UNSTABLE_OFFSET_COMMIT", "PendingTxnOffsets", "TxnOffsets", "apply_committed"]
