"""Reading one ``__consumer_offsets`` partition from its log start to its
log end when this broker becomes its leader (Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets``).

The last record of each key wins; a null value (tombstone) deletes.
Offsets in a transactional batch (TxnOffsetCommit, KIP-98) are pending
until their producer's marker is read: a COMMIT applies them (unless a
later plain commit of the partition came before the marker), an ABORT
drops them; those without a marker yet stay pending
(`kclient.broker.group.txn_offsets`); a tombstone of a partition drops
its pending offsets too. Runs in a worker thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs

from kclient.broker.group.records import (
    OFFSETS_TOPIC,
    GroupKey,
    GroupRecord,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from kclient.broker.group.txn_offsets import PendingTxnOffsets, apply_committed
from kclient.errors import ProtocolError
from kclient.protocol.primitives import Buffer
from kclient.protocol.records import Record, iter_record_set
from kclient.protocol.records.control import ABORT, COMMIT
from kclient.protocol.records.scan import BatchInfo, scan_batches
from kclient.storage.txn_state import read_txn_batch

if TYPE_CHECKING:
    from kclient.broker.partition import Partition

log = logging.getLogger("kclient.broker.group")

#: Bytes read per step while loading a partition.
LOAD_CHUNK_BYTES = 1 << 20


@attrs.define
class LoadedOffsets:
    """What an offsets partition holds.

    Attributes:
        groups: group id -> its last group metadata record.
        offsets: group id -> ``{(topic, partition): committed}``.
        positions: group id -> ``{(topic, partition): log offset}`` of each
            committed offset's record.
        pending: The transactional offsets without a marker yet.
        others: ``(key, value)`` of the key versions from 3 on (the
            consumer group protocol's records, KIP-848), in log order.
    """

    groups: dict[str, GroupRecord] = attrs.Factory(dict)
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = attrs.Factory(dict)
    positions: dict[str, dict[tuple[str, int], int]] = attrs.Factory(dict)
    pending: PendingTxnOffsets = attrs.Factory(PendingTxnOffsets)
    others: list[tuple[bytes, bytes | None]] = attrs.Factory(list)

    def marker(self, producer_id: int, committed: bool) -> None:
        """A COMMIT (``committed``) or ABORT marker of ``producer_id``."""
        for group_id, offsets in self.pending.complete(producer_id, lambda _g: True).items():
            if committed:
                apply_committed(self.offsets.setdefault(group_id, {}), self.positions.setdefault(group_id, {}), offsets)

    def record(self, rec: Record, producer_id: int | None) -> None:
        """One data record; ``producer_id``: that of its transactional
        batch, or None outside a transaction."""
        assert rec.key is not None
        key = decode_key(bytes(rec.key))
        if isinstance(key, OffsetKey):
            tp = (key.topic, key.partition)
            if producer_id is not None:
                if rec.value is not None:
                    self.pending.add(producer_id, key.group, {tp: (decode_offset_value(bytes(rec.value)), rec.offset)})
            elif rec.value is None:  # also drops the transactions' pending offsets (Kafka 4's replay)
                self.offsets.get(key.group, {}).pop(tp, None)
                self.pending.remove(key.group, [tp])
            else:
                self.offsets.setdefault(key.group, {})[tp] = decode_offset_value(bytes(rec.value))
                self.positions.setdefault(key.group, {})[tp] = rec.offset
        elif isinstance(key, GroupKey):
            if rec.value is None:
                self.groups.pop(key.group, None)
            else:
                self.groups[key.group] = decode_group_value(bytes(rec.value))

    def batch(self, data: Buffer, info: BatchInfo, start: int, partition: int) -> None:
        """The records of the batch ``info`` of ``data`` from offset
        ``start`` on."""
        producer_id: int | None = None
        if info.magic >= 2:
            txn = read_txn_batch(data, info.position)
            if txn.is_control:
                if txn.control_type in (COMMIT, ABORT):
                    self.marker(txn.producer_id, txn.control_type == COMMIT)
                return
            if txn.is_transactional:
                producer_id = txn.producer_id
        for rec in iter_record_set(memoryview(data)[info.position : info.position + info.size]):
            if rec.offset < start or rec.key is None:
                continue
            if len(rec.key) >= 2 and int.from_bytes(bytes(rec.key[:2]), "big", signed=True) >= 3:
                self.others.append((bytes(rec.key), None if rec.value is None else bytes(rec.value)))
                continue
            try:
                self.record(rec, producer_id)
            except (ProtocolError, ValueError, UnicodeDecodeError) as exc:  # unreadable: skip it, as Kafka warns and goes on
                log.warning("%s-%d: unreadable record at offset %d: %s", OFFSETS_TOPIC, partition, rec.offset, exc)


def read_partition(part: Partition) -> LoadedOffsets:
    """Read an offsets partition from its log start to its log end (worker
    thread; see the module docstring).

    Args:
        part: The partition this broker leads.

    Returns:
        Its groups, offsets and pending transactional offsets.
    """
    plog = part.log
    loaded = LoadedOffsets()
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        data = plog.read(offset, LOAD_CHUNK_BYTES, min_one_batch=True).records
        infos = list(scan_batches(data))
        if not infos:
            break
        for info in infos:
            if info.last_offset >= offset:
                loaded.batch(data, info, offset, part.partition)
        offset = max(offset, infos[-1].next_offset)
    return loaded


__all__ = ["LOAD_CHUNK_BYTES", "LoadedOffsets", "read_partition"]
