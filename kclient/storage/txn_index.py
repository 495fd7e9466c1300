"""Aborted-transaction index of one log segment (the ``.txnindex`` file).

Layout (Kafka's ``TransactionIndex`` / ``AbortedTxn``, KIP-98): a flat
array of 34-byte big-endian entries, one per transaction aborted by an
ABORT marker written in the segment, in the order the markers were
written::

    version            int16  (0)
    producer_id        int64
    first_offset       int64  the transaction's first offset (may lie in
                              an earlier segment)
    last_offset        int64  the offset of its ABORT marker
    last_stable_offset int64  the partition's LSO when the marker was
                              written (the first offset of the oldest
                              other ongoing transaction, else
                              ``last_offset + 1``)

Entries strictly increase in ``last_offset``. A fetch at the
read_committed isolation level (KIP-98, Fetch v4+) returns, beside the
records, the aborted transactions that overlap the fetched range:
`TransactionIndex.collect_aborted_txns` per segment, `collect_aborted_txns`
across the segments from the one holding the fetch offset.

Unlike the offset and time indexes this one is not sparse: it can only be
rebuilt by replaying the partition's transactions from a producer state
snapshot (`kclient.storage.txn_state`). Entries are written to the file
as they are appended (aborts are rare) and reach the disk on `flush`. The
file is created on the first append, as Kafka does; a segment without
aborted transactions has none. On load a trailing partial entry (a crash
in the middle of a write) is cut off with a WARNING, as the other indexes
do (`kclient.storage.index`).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from kclient.storage.handles import CachedFile
from kclient.storage.log_files import TXN_INDEX_SUFFIX

logger = logging.getLogger(__name__)

#: The entry version kclient writes (Kafka's ``AbortedTxn.CURRENT_VERSION``).
ABORTED_TXN_VERSION = 0
ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = ABORTED_TXN.size  # 34 bytes


@attrs.frozen(slots=True)
class AbortedTxn:
    """One entry of the transaction index: an aborted transaction.

    Offsets are absolute partition offsets.
    """

    producer_id: int
    #: The transaction's first offset.
    first_offset: int
    #: The offset of its ABORT marker.
    last_offset: int
    #: The partition's last stable offset when the marker was written.
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION

    def encode(self) -> bytes:
        """The entry's 34 bytes in the file.

        Raises:
            struct.error: A field out of its int16 / int64 range.
        """
        return ABORTED_TXN.pack(self.version, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, position: int = 0) -> AbortedTxn:
        """Read one entry.

        Args:
            data: Bytes holding the entry.
            position: The entry's first byte in ``data``.

        Returns:
            The entry.
        """
        version, pid, first, last, lso = ABORTED_TXN.unpack_from(data, position)
        return cls(pid, first, last, lso, version)

    def as_aborted_transaction(self) -> tuple[int, int]:
        """``(producer_id, first_offset)``: the entry of a Fetch response's
        ``aborted_transactions`` (Fetch v4+, KIP-98)."""
        return (self.producer_id, self.first_offset)


@attrs.frozen(slots=True)
class TxnIndexSearchResult:
    """What `TransactionIndex.collect_aborted_txns` found in one segment."""

    aborted_txns: list[AbortedTxn]
    #: True when no later segment can hold an overlapping aborted
    #: transaction (an entry's last stable offset reached the range's end).
    is_complete: bool


class TransactionIndex:
    """The aborted transactions whose ABORT markers one segment holds.

    Entries live in memory (read from the file on first use, as the other
    indexes are, KAFKA-7283) and are written to the file on `append`.
    Readers (fetches) see a consistent list without a lock; writers
    (append, truncate) are serialized by the log's lock.

    Source: Kafka's ``TransactionIndex``.

    Args:
        path: The ``.txnindex`` file; created on the first append. A
            trailing partial entry is dropped (WARNING) on load.
        base_offset: The segment's base offset.
    """

    KIND = "transaction index"

    def __init__(self, path: str | os.PathLike[str], base_offset: int) -> None:
        self._file = CachedFile(path, create=True, linger=False)
        self.base_offset = int(base_offset)
        # Replaced as a whole on truncation; appends grow it in place.
        self._loaded: list[AbortedTxn] | None = None
        self._load_lock = threading.Lock()

    @property
    def path(self) -> Path:
        """The index file's current name."""
        return self._file.path

    @property
    def loaded(self) -> bool:
        """Whether the entries were read from the file (on first use)."""
        return self._loaded is not None

    @property
    def _entries(self) -> list[AbortedTxn]:
        entries = self._loaded
        if entries is None:
            with self._load_lock:
                entries = self._loaded
                if entries is None:
                    entries = self._loaded = self._load()
        return entries

    def _load(self) -> list[AbortedTxn]:
        if self._file.closed or not self.path.exists():
            return []
        with self._file.use() as fd:
            size = os.fstat(fd).st_size
            usable = size - size % ABORTED_TXN_SIZE
            if usable != size:
                logger.warning("%s %s: dropping %d trailing bytes of a partial entry", self.KIND, self.path, size - usable)
                os.ftruncate(fd, usable)
            data = os.pread(fd, usable, 0) if usable else b""
        if len(data) != usable:
            raise OSError(f"{self.KIND} {self.path}: short read ({len(data)} of {usable} bytes)")
        return [AbortedTxn.decode(data, pos) for pos in range(0, usable, ABORTED_TXN_SIZE)]

    # ------------------------------------------------------------ queries

    def __len__(self) -> int:
        """Number of entries."""
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """Bytes the entries take in the file."""
        return len(self._entries) * ABORTED_TXN_SIZE

    @property
    def last_offset(self) -> int | None:
        """The ``last_offset`` (ABORT marker offset) of the last entry, or
        ``None`` when the index is empty."""
        entries = self._entries
        return entries[-1].last_offset if entries else None

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry, in file order (Kafka's ``allAbortedTxns``)."""
        return list(self._entries)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping the fetch range
        ``[fetch_offset, upper_bound_offset)``.

        Kafka's ``collectAbortedTxns``: an entry overlaps when its ABORT
        marker is at or after ``fetch_offset`` and its first offset is
        below ``upper_bound_offset``. The search is complete (no later
        segment need be read) once an entry's last stable offset reaches
        ``upper_bound_offset``: every transaction overlapping the range
        was then decided before that entry's marker.

        Args:
            fetch_offset: The first offset of the range (inclusive).
            upper_bound_offset: The end of the range (exclusive).

        Returns:
            The overlapping entries in file order and whether the search is
                complete.
        """
        found: list[AbortedTxn] = []
        for txn in self._entries[:]:  # (a copy: a truncation may replace the list)
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> bool:
        """Check the index the way Kafka's ``sanityCheck`` does, plus the
        version and ordering rules `append` enforces.

        Returns:
            True if every entry has a known version, its ABORT marker at or
                after ``base_offset``, a first offset not after its marker,
                and markers strictly increase. A failing index should be
                rebuilt (by replaying the transactions).
        """
        prev = None
        for txn in self._entries:
            if txn.version < 0 or txn.version > ABORTED_TXN_VERSION or txn.last_offset < self.base_offset:
                return False
            if txn.first_offset > txn.last_offset or (prev is not None and txn.last_offset <= prev):
                return False
            prev = txn.last_offset
        return True

    # ------------------------------------------------------------ updates

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry and write it to the file (no fsync: see `flush`).

        Args:
            txn: The aborted transaction.

        Raises:
            ValueError: Its ``last_offset`` is not after the last entry's,
                or is before ``first_offset``, or a field does not fit.
            OSError: An I/O failure (the file is cut back to the entries
                before it).
        """
        entries = self._entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"{self.KIND} {self.path}: the last offset of appended transactions must increase, "
                f"but {txn.last_offset} is not after {entries[-1].last_offset}"
            )
        if txn.first_offset > txn.last_offset:
            raise ValueError(f"{self.KIND} {self.path}: first offset {txn.first_offset} is after last offset {txn.last_offset}")
        try:
            data = txn.encode()
        except struct.error as exc:
            raise ValueError(f"{self.KIND} {self.path}: entry {txn} does not fit ({exc})") from None
        self._file.write_at(data, len(entries) * ABORTED_TXN_SIZE)
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose ABORT marker is at or after ``offset``,
        in memory and on disk (Kafka's ``truncateTo``).

        Args:
            offset: An absolute offset (the new log end offset).

        Raises:
            OSError: An I/O failure.
        """
        entries = self._entries
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        self._truncate_entries(keep)

    def reset(self) -> None:
        """Remove every entry (before a rebuild)."""
        self._truncate_entries(0)

    def _truncate_entries(self, keep: int) -> None:
        entries = self._entries
        if keep >= len(entries) and (keep or not self.path.exists()):
            return
        self._loaded = entries[:keep]  # a new list: readers keep the old one
        if self.path.exists():
            with self._file.use() as fd:
                os.ftruncate(fd, keep * ABORTED_TXN_SIZE)

    def flush(self) -> None:
        """``os.fsync`` the file, if it exists.

        Raises:
            OSError: An I/O failure.
        """
        if self._file.closed or not self.path.exists():
            return
        with self._file.use() as fd:
            os.fsync(fd)

    @property
    def closed(self) -> bool:
        """Whether `close` or `delete` was called."""
        return self._file.closed

    def close(self) -> None:
        """Close the file (entries are written on append). Idempotent."""
        self._file.close()

    def delete(self) -> None:
        """Close and remove the file (a missing file is not an error)."""
        self._file.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def rename(self, path: str | os.PathLike[str]) -> None:
        """Rename the file (a missing file is not an error); later opens use
        the new name. Used to mark a deleted segment's files ``.deleted``.

        Args:
            path: The new path.
        """
        self._file.rename(path)

    def __repr__(self) -> str:
        return f"TransactionIndex({str(self.path)!r}, base_offset={self.base_offset}, entries={len(self)})"


def collect_aborted_txns(indexes: Iterable[TransactionIndex], fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping ``[fetch_offset,
    upper_bound_offset)``, across segments.

    Kafka's ``LocalLog.collectAbortedTransactions``: search the index of
    the segment holding ``fetch_offset``, then the next segments' in
    order, until one says the search is complete.

    Args:
        indexes: The transaction indexes of the segment holding
            ``fetch_offset`` and of every later segment, in offset order.
        fetch_offset: The first offset of the range (inclusive).
        upper_bound_offset: The end of the range (exclusive): the offset
            after the fetched data (Kafka's ``fetchUpperBoundOffset``, else
            the next segment's base offset or the log end offset).

    Returns:
        The overlapping entries, in segment and file order.
    """
    found: list[AbortedTxn] = []
    for index in indexes:
        result = index.collect_aborted_txns(fetch_offset, upper_bound_offset)
        found.extend(result.aborted_txns)
        if result.is_complete:
            break
    return found


def aborted_transactions(txns: Sequence[AbortedTxn]) -> list[tuple[int, int]]:
    """A Fetch response's ``aborted_transactions`` (KIP-98) from index
    entries.

    Args:
        txns: The entries (`collect_aborted_txns`).

    Returns:
        ``(producer_id, first_offset)`` pairs.
    """
    return [txn.as_aborted_transaction() for txn in txns]


__all__ = [
    "ABORTED_TXN",
    "ABORTED_TXN_SIZE",
    "ABORTED_TXN_VERSION",
    "TXN_INDEX_SUFFIX",
    "AbortedTxn",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "aborted_transactions",
    "collect_aborted_txns",
]
