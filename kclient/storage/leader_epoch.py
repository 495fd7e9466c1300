"""The leader epoch cache of one partition (KIP-101, KIP-279).

Each time a replica becomes leader of a partition with a new leader epoch,
the first offset it appends under that epoch is recorded: the cache is the
ordered list of ``(leader epoch, start offset)`` entries, both strictly
increasing. A follower asks the leader for the end offset of its latest
epoch (OffsetsForLeaderEpoch) and truncates its log there instead of at its
high watermark, so no committed record is lost and diverging logs converge
(KIP-101, "Replication Protocol"; KIP-279 adds the epoch to the answer).

Persisted as ``leader-epoch-checkpoint`` in the partition directory, in
Kafka's ``LeaderEpochCheckpointFile`` text format: a version line ``0``, a
count line, then one ``<epoch> <start offset>`` line per entry, written
atomically (temp file, fsync, rename, directory fsync) on every change.
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_left, bisect_right
from pathlib import Path

from kclient.storage.checkpoint import CHECKPOINT_VERSION, CheckpointError, write_atomically

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
#: Kafka's ``UNDEFINED_EPOCH`` and ``UNDEFINED_EPOCH_OFFSET``.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def read_leader_epoch_checkpoint(path: str | os.PathLike[str]) -> list[tuple[int, int]] | None:
    """Read a ``leader-epoch-checkpoint`` file.

    Args:
        path: The file.

    Returns:
        The ``(epoch, start offset)`` entries in file order, or ``None`` if
            the file does not exist.

    Raises:
        CheckpointError: A bad version, a count that does not match the
            lines, a malformed line or entries that do not increase.
        OSError: The file exists but cannot be read.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise CheckpointError(f"{path}: expected a version and a count line, got {len(lines)} line(s)")
    try:
        version, count = int(lines[0]), int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: malformed header {lines[:2]!r}") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unknown version {version}")
    if count != len(lines) - 2:
        raise CheckpointError(f"{path}: count line says {count} entries but {len(lines) - 2} follow")
    out: list[tuple[int, int]] = []
    for n, line in enumerate(lines[2:], start=3):
        parts = line.split()
        try:
            epoch, start = (int(x) for x in parts) if len(parts) == 2 else (None, None)
        except ValueError:
            epoch = start = None
        if epoch is None or start is None or epoch < 0 or start < 0:
            raise CheckpointError(f"{path}: line {n} {line!r} is not 'epoch startOffset'")
        if out and (epoch <= out[-1][0] or start < out[-1][1]):
            raise CheckpointError(f"{path}: line {n} {line!r} does not follow {out[-1]}")
        out.append((epoch, start))
    return out


class LeaderEpochCache:
    """``(leader epoch, start offset)`` entries of one partition, persisted
    in ``<partition dir>/leader-epoch-checkpoint`` (Kafka's
    ``LeaderEpochFileCache``).

    Thread-safe. Every change rewrites the file atomically (epochs change
    rarely: once per leader election).

    Args:
        directory: The partition directory.
        entries: Initial entries (default: none); not written until the
            first change or `flush`.
    """

    def __init__(self, directory: str | os.PathLike[str], entries: list[tuple[int, int]] | None = None) -> None:
        self.path = Path(directory) / LEADER_EPOCH_CHECKPOINT
        self._lock = threading.Lock()
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or ():
            self._epochs.append(epoch)
            self._starts.append(start)
        #: ``_epochs[-1]`` (-1 when empty), set under the lock by every
        #: change (`_changed_locked`): `latest_epoch` reads it without the
        #: lock (it is asked once per leader append).
        self._latest = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> LeaderEpochCache | None:
        """Load the cache from ``<directory>/leader-epoch-checkpoint``.

        Args:
            directory: The partition directory.

        Returns:
            The cache, or ``None`` if the file is missing or unreadable
                (logged at WARNING); the caller then rebuilds it from the
                log's batches.
        """
        path = Path(directory) / LEADER_EPOCH_CHECKPOINT
        try:
            entries = read_leader_epoch_checkpoint(path)
        except (CheckpointError, OSError, UnicodeDecodeError) as exc:
            logger.warning("%s: unreadable leader epoch checkpoint (%s); rebuilding it from the log", path, exc)
            return None
        if entries is None:
            return None
        return cls(directory, entries)

    # ------------------------------------------------------------ queries

    def entries(self) -> list[tuple[int, int]]:
        """The ``(epoch, start offset)`` entries, oldest first."""
        with self._lock:
            return list(zip(self._epochs, self._starts))

    def latest_epoch(self) -> int:
        """The latest leader epoch recorded, -1 (``UNDEFINED_EPOCH``) if none."""
        return self._latest

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """The OffsetsForLeaderEpoch answer for ``epoch`` (KIP-101, KIP-279).

        Args:
            epoch: The requested leader epoch.
            log_end_offset: The log's current log end offset.

        Returns:
            ``(leader epoch, end offset)``:

            * ``epoch`` is the latest epoch: ``(epoch, log_end_offset)``;
            * otherwise, if a later epoch exists: the largest epoch ``<=
              epoch`` and the start offset of the first epoch above
              ``epoch``; when every known epoch is above ``epoch`` (its
              entries were removed with old segments), ``(epoch, start
              offset of the first entry)``, as Kafka answers so the
              follower truncates to the leader's earliest data;
            * ``(-1, -1)`` (``UNDEFINED_EPOCH``, ``UNDEFINED_EPOCH_OFFSET``)
              if ``epoch`` is -1, the cache is empty or ``epoch`` is above
              the latest epoch.
        """
        with self._lock:
            if epoch == UNDEFINED_EPOCH or not self._epochs:
                return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
            if epoch == self._epochs[-1]:
                return (epoch, log_end_offset)
            higher = bisect_right(self._epochs, epoch)
            if higher == len(self._epochs):
                return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
            if higher == 0:
                return (epoch, self._starts[0])
            return (self._epochs[higher - 1], self._starts[higher])

    # ------------------------------------------------------------ updates

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that leader epoch ``epoch`` starts at ``start_offset``.

        Entries stay strictly increasing in both fields: an epoch below the
        latest is ignored (logged at WARNING); the latest epoch again is
        ignored unless ``start_offset`` is lower (then its start moves down);
        a new epoch first removes entries starting at or after
        ``start_offset`` (Kafka's ``assign``). Negative epochs are ignored.

        Args:
            epoch: The leader epoch.
            start_offset: Its first offset.

        Returns:
            Whether the cache changed (and the file was rewritten).

        Raises:
            OSError: The checkpoint file could not be written.
        """
        if epoch < 0:
            return False
        with self._lock:
            if self._epochs:
                latest, latest_start = self._epochs[-1], self._starts[-1]
                if epoch < latest:
                    logger.warning("%s: ignoring leader epoch %d at offset %d, below the latest epoch %d", self.path, epoch, start_offset, latest)
                    return False
                if epoch == latest and start_offset >= latest_start:
                    return False
            keep = bisect_left(self._starts, start_offset)
            keep = min(keep, bisect_left(self._epochs, epoch))
            del self._epochs[keep:], self._starts[keep:]
            self._epochs.append(epoch)
            self._starts.append(start_offset)
            self._changed_locked()
        logger.info("%s: leader epoch %d starts at offset %d", self.path.parent.name, epoch, start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop the entries starting at or after ``end_offset`` (the log was
        truncated there; Kafka's ``truncateFromEnd``).

        Args:
            end_offset: The new log end offset.

        Returns:
            Whether the cache changed.

        Raises:
            OSError: The checkpoint file could not be written.
        """
        with self._lock:
            keep = bisect_left(self._starts, end_offset)
            if keep == len(self._starts):
                return False
            del self._epochs[keep:], self._starts[keep:]
            self._changed_locked()
            return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Forget what lies below the new log start offset ``start_offset``
        (Kafka's ``truncateFromStart``): the entries starting at or below it
        are removed except the last one, whose start becomes
        ``start_offset``.

        Args:
            start_offset: The new log start offset.

        Returns and Raises as `truncate_from_end`.
        """
        with self._lock:
            below = bisect_right(self._starts, start_offset)
            if below == 0 or (below == 1 and self._starts[0] == start_offset):
                return False
            epoch = self._epochs[below - 1]
            del self._epochs[:below], self._starts[:below]
            self._epochs.insert(0, epoch)
            self._starts.insert(0, start_offset)
            self._changed_locked()
            return True

    def clear(self) -> None:
        """Remove every entry (the log was emptied) and rewrite the file.

        Raises:
            OSError: The checkpoint file could not be written.
        """
        with self._lock:
            self._epochs.clear()
            self._starts.clear()
            self._changed_locked()

    def flush(self) -> None:
        """Write the file now (after building the cache from the log).

        Raises:
            OSError: The checkpoint file could not be written.
        """
        with self._lock:
            self._write_locked()

    def _changed_locked(self) -> None:
        """The entries changed (lock held): refresh `latest_epoch`'s
        value, then rewrite the file."""
        self._latest = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH
        self._write_locked()

    def _write_locked(self) -> None:
        lines = [str(CHECKPOINT_VERSION), str(len(self._epochs))]
        lines += [f"{e} {s}" for e, s in zip(self._epochs, self._starts)]
        write_atomically(self.path, ("\n".join(lines) + "\n").encode("utf-8"))

    def __repr__(self) -> str:
        return f"LeaderEpochCache({str(self.path)!r}, {self.entries()})"
