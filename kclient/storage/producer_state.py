"""Idempotent producer state of one partition (KIP-98).

For each producer id the partition keeps the producer epoch and the
metadata of the last `MAX_BATCHES_PER_PRODUCER` (5) batches it wrote:
``(first sequence, last sequence, first offset, last offset)``, what Kafka's
``ProducerStateManager`` keeps (a producer has at most 5 requests in
flight, ``max.in.flight.requests.per.connection``). With it the leader:

* answers a retried batch (same epoch, same first and last sequence as a
  cached one) with the offsets it got the first time, writing nothing;
* rejects a producer epoch below the known one (``INVALID_PRODUCER_EPOCH``,
  47), a new epoch not starting at sequence 0 and a sequence that is not
  the last one + 1, modulo 2**31 (``OUT_OF_ORDER_SEQUENCE_NUMBER``, 45);
* rejects a producer id it has no state for when the batch does not start
  at sequence 0 (``UNKNOWN_PRODUCER_ID``, 59; Kafka before KIP-360).

Snapshots: ``<20-digit offset>.snapshot`` in the partition directory holds
the state after every batch below ``offset`` was applied. It is written
when a segment rolls (offset = the new segment's base) and at a clean
close (offset = the log end offset); on load the log takes the newest
snapshot at or below its log end offset and replays the batch headers after
it. Format (all integers in JSON are offsets / sequences / epochs)::

    crc32c  uint32 big-endian, CRC-32C of the JSON bytes that follow
    json    UTF-8: {"version": 1, "offset": <int>, "producers":
            [{"producer_id": <int>, "producer_epoch": <int>,
              "batches": [[first_seq, last_seq, first_offset, last_offset], ...]}, ...],
            "ongoing_txns": [[producer_id, first_offset], ...]}

(``ongoing_txns``: the open transactions, KIP-98, from the
`ongoing_txns` source; optional on reading, an older snapshot has none)

written atomically (temp file, fsync, rename, directory fsync). A snapshot
failing its CRC or its JSON validation is deleted (WARNING) and the next
older one is tried.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs
import crc32c

from kclient.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError, UnknownProducerIdError
from kclient.storage.checkpoint import write_atomically
from kclient.storage.log_files import file_stem, parse_base_offset

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
#: Kafka's ``ProducerStateEntry.NumBatchesToRetain``.
MAX_BATCHES_PER_PRODUCER = 5
NO_SEQUENCE = -1
_INT32_MAX = 2**31 - 1
_CRC = struct.Struct(">I")


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past 2**31-1 to 0 (KIP-98).

    Args:
        sequence: A sequence number.
        increment: What to add (a batch's ``lastOffsetDelta``).

    Returns:
        The resulting sequence number.
    """
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


@attrs.frozen
class BatchMetadata:
    """One batch a producer wrote: its first and last sequence numbers and
    the first and last offsets it got."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@attrs.frozen
class ProducerBatch:
    """The producer facts of one v2 batch to check or record.

    ``producer_id`` / ``producer_epoch``: the idempotent producer;
    ``first_seq``: the batch's base sequence; ``last_offset_delta``: its
    ``lastOffsetDelta`` (records - 1 for an uncompacted batch).
    """

    producer_id: int
    producer_epoch: int
    first_seq: int
    last_offset_delta: int

    @property
    def last_seq(self) -> int:
        """The sequence number of the batch's last record."""
        return increment_sequence(self.first_seq, self.last_offset_delta)


@attrs.define
class _Entry:
    epoch: int
    batches: list[BatchMetadata] = attrs.Factory(list)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        if batch.producer_epoch != self.epoch:
            return None
        last_seq = batch.last_seq
        for meta in self.batches:
            if meta.first_seq == batch.first_seq and meta.last_seq == last_seq:
                return meta
        return None


class ProducerStateManager:
    """The idempotent producer state of one partition, with its snapshots
    in ``directory`` (Kafka's ``ProducerStateManager``).

    The `kclient.storage.Log` owns it and changes it under its writer lock;
    other callers should use only the queries (`last_sequence`, `epoch`,
    `producer_ids`, `batches`). Thread-safe.

    Args:
        directory: The partition directory.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}
        #: Source of the open transactions ``(producer_id, first_offset)`` a
        #: snapshot saves (the log's `kclient.storage.txn_state.TxnState.ongoing`).
        self.ongoing_txns: Callable[[], list[tuple[int, int]]] | None = None
        #: The offset and open transactions of the snapshot `load_latest_snapshot`
        #: loaded last (``(None, [])``: none).
        self.loaded_snapshot: tuple[int | None, list[tuple[int, int]]] = (None, [])

    # ------------------------------------------------------------ queries

    def last_sequence(self, producer_id: int) -> int | None:
        """The last sequence number written by ``producer_id``, or ``None``
        if the partition holds no state for it."""
        with self._lock:
            entry = self._entries.get(producer_id)
            return None if entry is None or not entry.batches else entry.last_seq

    def epoch(self, producer_id: int) -> int | None:
        """The producer epoch last seen for ``producer_id``, or ``None``."""
        with self._lock:
            entry = self._entries.get(producer_id)
            return None if entry is None else entry.epoch

    def batches(self, producer_id: int) -> list[BatchMetadata]:
        """The cached batches of ``producer_id`` (at most 5), oldest first."""
        with self._lock:
            entry = self._entries.get(producer_id)
            return [] if entry is None else list(entry.batches)

    def producer_ids(self) -> list[int]:
        """Every producer id the partition holds state for."""
        with self._lock:
            return sorted(self._entries)

    # ------------------------------------------------------------ checks

    def check(self, batches: Iterable[ProducerBatch]) -> BatchMetadata | None:
        """Validate a leader append's idempotent batches in order (KIP-98),
        changing nothing.

        Each batch is checked against the state plus the batches of the same
        call before it.

        Args:
            batches: The append's batches with a producer id >= 0 and a
                base sequence >= 0, in log order.

        Returns:
            The cached metadata of the first batch that is a duplicate of
                one already written (same producer epoch, first and last
                sequence), or ``None`` if every batch is new and valid.

        Raises:
            InvalidProducerEpochError: A producer epoch below the known one.
            OutOfOrderSequenceNumberError: A new producer epoch not starting
                at sequence 0, or a sequence that does not follow the last
                one.
            UnknownProducerIdError: No state for the producer id and the
                batch does not start at sequence 0.
        """
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) after this call's batches
        with self._lock:
            for batch in batches:
                pid = batch.producer_id
                entry = self._entries.get(pid)
                if pid in pending:
                    epoch, last_seq = pending[pid]
                elif entry is not None:
                    epoch, last_seq = entry.epoch, entry.last_seq
                else:
                    epoch, last_seq = None, NO_SEQUENCE
                if epoch is not None and batch.producer_epoch < epoch:
                    raise InvalidProducerEpochError(
                        f"producer {pid}: epoch {batch.producer_epoch} is older than the current epoch {epoch}"
                    )
                if entry is not None and pid not in pending:
                    duplicate = entry.find_duplicate(batch)
                    if duplicate is not None:
                        return duplicate
                first = batch.first_seq
                if epoch is None:
                    if first != 0:
                        raise UnknownProducerIdError(f"producer {pid} is unknown to this partition and its batch starts at sequence {first}, not 0")
                elif batch.producer_epoch != epoch:
                    if first != 0:
                        raise OutOfOrderSequenceNumberError(
                            f"producer {pid}: new epoch {batch.producer_epoch} must start at sequence 0, got {first}"
                        )
                elif last_seq == NO_SEQUENCE:
                    if first != 0:
                        raise OutOfOrderSequenceNumberError(f"producer {pid}: expected sequence 0, got {first}")
                elif not _in_sequence(last_seq, first):
                    raise OutOfOrderSequenceNumberError(
                        f"producer {pid} epoch {epoch}: sequence {first} does not follow the last sequence {last_seq}"
                    )
                pending[pid] = (batch.producer_epoch, batch.last_seq)
        return None

    # ------------------------------------------------------------ updates

    def update(self, batch: ProducerBatch, first_offset: int, last_offset: int) -> None:
        """Record a batch written at ``first_offset``..``last_offset``
        (leader append after `check`, follower append or replay; no checks).

        A producer epoch other than the known one resets the producer's
        cached batches.

        Args:
            batch: The batch's producer facts.
            first_offset: Its first offset.
            last_offset: Its last offset.
        """
        with self._lock:
            self._update_locked(batch.producer_id, batch.producer_epoch, BatchMetadata(batch.first_seq, batch.last_seq, first_offset, last_offset))

    def _update_locked(self, pid: int, epoch: int, meta: BatchMetadata) -> None:
        entry = self._entries.get(pid)
        if entry is None:
            entry = self._entries[pid] = _Entry(epoch)
        elif entry.epoch != epoch:
            entry.epoch = epoch
            entry.batches = []
        entry.batches.append(meta)
        if len(entry.batches) > MAX_BATCHES_PER_PRODUCER:
            del entry.batches[0]

    def clear(self) -> None:
        """Forget every producer (the snapshots stay)."""
        with self._lock:
            self._entries.clear()

    # ------------------------------------------------------------ snapshots

    def snapshot_path(self, offset: int) -> Path:
        """``<directory>/<20-digit offset>.snapshot``."""
        return self.directory / (file_stem(offset) + SNAPSHOT_SUFFIX)

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        out = []
        for name in os.listdir(self.directory):
            if name.endswith(SNAPSHOT_SUFFIX):
                offset = parse_base_offset(name)
                if offset is not None and name == file_stem(offset) + SNAPSHOT_SUFFIX:
                    out.append(offset)
        return sorted(out)

    def take_snapshot(self, offset: int) -> Path:
        """Write the current state as ``<offset>.snapshot``, atomically.

        Args:
            offset: The log end offset the state corresponds to (every batch
                below it is applied).

        Returns:
            The snapshot path.

        Raises:
            OSError: Writing failed (an older snapshot stays usable).
        """
        with self._lock:
            producers = [
                {
                    "producer_id": pid,
                    "producer_epoch": entry.epoch,
                    "batches": [[m.first_seq, m.last_seq, m.first_offset, m.last_offset] for m in entry.batches],
                }
                for pid, entry in sorted(self._entries.items())
            ]
        doc: dict[str, object] = {"version": SNAPSHOT_VERSION, "offset": offset, "producers": producers}
        if self.ongoing_txns is not None:
            doc["ongoing_txns"] = [[pid, first] for pid, first in self.ongoing_txns()]
        body = json.dumps(doc, separators=(",", ":")).encode("utf-8")
        path = self.snapshot_path(offset)
        write_atomically(path, _CRC.pack(crc32c.crc32c(body)) + body)
        logger.debug("%s: wrote producer state snapshot %s (%d producer(s))", self.directory.name, path.name, len(producers))
        return path

    def _read_snapshot(self, offset: int) -> tuple[dict[int, _Entry], list[tuple[int, int]]]:
        data = self.snapshot_path(offset).read_bytes()
        if len(data) < _CRC.size:
            raise ValueError("shorter than its CRC")
        body = data[_CRC.size :]
        if crc32c.crc32c(body) != _CRC.unpack_from(data)[0]:
            raise ValueError("CRC mismatch")
        doc = json.loads(body.decode("utf-8"))
        if not isinstance(doc, dict) or doc.get("version") != SNAPSHOT_VERSION or doc.get("offset") != offset:
            raise ValueError(f"bad header (version {doc.get('version') if isinstance(doc, dict) else None!r})")
        entries: dict[int, _Entry] = {}
        for p in doc["producers"]:
            pid, epoch = p["producer_id"], p["producer_epoch"]
            if not all(isinstance(x, int) for x in (pid, epoch)):
                raise ValueError(f"bad producer {p!r}")
            metas = []
            for b in p["batches"]:
                if len(b) != 4 or not all(isinstance(x, int) for x in b):
                    raise ValueError(f"bad batch {b!r}")
                metas.append(BatchMetadata(*b))
            entries[pid] = _Entry(epoch, metas[-MAX_BATCHES_PER_PRODUCER:])
        ongoing = []
        for txn in doc.get("ongoing_txns", ()):
            if len(txn) != 2 or not all(isinstance(x, int) for x in txn):
                raise ValueError(f"bad ongoing transaction {txn!r}")
            ongoing.append((txn[0], txn[1]))
        return entries, ongoing

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Replace the state with the newest valid snapshot at or below ``max_offset``.

        Snapshots above ``max_offset`` (the log end offset) are deleted first:
        they describe records the log no longer holds. A snapshot that fails
        its CRC or JSON validation is deleted (WARNING) and the next older one
        tried.

        Args:
            max_offset: The log end offset.

        Returns:
            The offset of the snapshot loaded (the caller replays the batches
                from there), or ``None`` if none: the state is then empty.
        """
        self.delete_snapshots_above(max_offset)
        for offset in reversed(self.snapshot_offsets()):
            try:
                entries, ongoing = self._read_snapshot(offset)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                logger.warning("%s: deleting unusable producer state snapshot %s: %s", self.directory, self.snapshot_path(offset).name, exc)
                self.snapshot_path(offset).unlink(missing_ok=True)
                continue
            with self._lock:
                self._entries = entries
            self.loaded_snapshot = (offset, ongoing)
            return offset
        with self._lock:
            self._entries = {}
        self.loaded_snapshot = (None, [])
        return None

    def delete_snapshots_above(self, offset: int) -> int:
        """Delete the snapshots whose offset is above ``offset``.

        Args:
            offset: The log end offset after a truncation.

        Returns:
            How many were deleted.
        """
        gone = 0
        for off in self.snapshot_offsets():
            if off > offset:
                self.snapshot_path(off).unlink(missing_ok=True)
                gone += 1
        return gone

    def delete_snapshots_below(self, offset: int) -> int:
        """Delete the snapshots below ``offset`` (the new log start offset),
        keeping the newest snapshot in any case.

        Args:
            offset: The log start offset.

        Returns:
            How many were deleted.
        """
        offsets = self.snapshot_offsets()
        gone = 0
        for off in offsets[:-1]:
            if off < offset:
                self.snapshot_path(off).unlink(missing_ok=True)
                gone += 1
        return gone

    def delete_all_snapshots(self) -> None:
        """Delete every snapshot and clear the state (the log was emptied)."""
        for off in self.snapshot_offsets():
            self.snapshot_path(off).unlink(missing_ok=True)
        self.clear()

    def __repr__(self) -> str:
        return f"ProducerStateManager({str(self.directory)!r}, producers={len(self._entries)})"
