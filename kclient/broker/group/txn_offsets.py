"""Pending transactional offset commits (KIP-98, KIP-447), as Kafka's
``GroupMetadata.pendingTransactionalOffsetCommits``.

TxnOffsetCommit appends a group's offsets to ``__consumer_offsets`` in a
transactional batch of the producer; they stay *pending* (invisible to
OffsetFetch) until the COMMIT or ABORT marker of that producer lands on
the same partition. A COMMIT makes them the group's committed offsets
unless a plain commit of the same partition was appended after them
(the later of the two by log offset wins, Kafka's
``CommitRecordMetadataAndOffset.olderThan``); an ABORT drops them.

As Kafka 4's ``OffsetMetadataManager``: a tombstone of a group's partition
(OffsetDelete, DeleteGroups, expiry) drops every transaction's pending
offset of that partition too, so a later COMMIT does not bring it back
(`remove`); an append that fails to replicate is taken back (`revert`).

Trio-thread only at run time; the loader (a worker thread) builds its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

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

    def remove(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Drop every producer's pending offsets of ``partitions`` of
        ``group_id`` (a tombstone of them was written or read; Kafka's
        ``OffsetMetadataManager.replay`` of a tombstone)."""
        dropped = set(partitions)
        for producer_id in list(self.by_producer):
            groups = self.by_producer[producer_id]
            offsets = groups.get(group_id)
            if offsets is None:
                continue
            for tp in dropped.intersection(offsets):
                del offsets[tp]
            self._prune(producer_id, group_id)

    def revert(self, producer_id: int, group_id: str, added: TxnOffsets, previous: TxnOffsets) -> None:
        """Take back an `add` whose append failed: each partition still
        holding what was added gets its ``previous`` pending offset back
        (an earlier TxnOffsetCommit of the same transaction) or none.

        Args:
            producer_id: The producer of the failed append.
            group_id: Its group.
            added: What the failed append added.
            previous: The pending offsets of those partitions before it.
        """
        offsets = self.by_producer.get(producer_id, {}).get(group_id)
        if offsets is None:
            return
        for tp, value in added.items():
            if offsets.get(tp) is not value:
                continue  # completed or replaced meanwhile
            if tp in previous:
                offsets[tp] = previous[tp]
            else:
                del offsets[tp]
        self._prune(producer_id, group_id)

    def _prune(self, producer_id: int, group_id: str) -> None:
        """Forget ``producer_id``'s entry of ``group_id`` once empty, and
        the producer's once it has no group left."""
        groups = self.by_producer.get(producer_id)
        if groups is None:
            return
        if not groups.get(group_id, True):
            del groups[group_id]
        if not groups:
            del self.by_producer[producer_id]

    def pending_of(self, producer_id: int, group_id: str) -> TxnOffsets:
        """A copy of ``producer_id``'s pending offsets of ``group_id``."""
        return dict(self.by_producer.get(producer_id, {}).get(group_id, {}))

    def partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions of ``group_id`` some transaction has a pending
        offset of."""
        return {tp for groups in self.by_producer.values() for tp in groups.get(group_id, {})}

    def is_pending(self, group_id: str, tp: tuple[str, int]) -> bool:
        """Whether a transaction has a pending offset of ``tp`` for
        ``group_id`` (OffsetFetch ``require_stable``)."""
        return any(tp in groups.get(group_id, {}) for groups in self.by_producer.values())

    def has_group(self, group_id: str) -> bool:
        """Whether ``group_id`` has any pending offset."""
        return any(group_id in groups for groups in self.by_producer.values())


__all__ = ["UNSTABLE_OFFSET_COMMIT", "PendingTxnOffsets", "TxnOffsets", "apply_committed"]
