"""Sparse time index of one log segment (the ``.timeindex`` file).

Layout (Kafka's ``TimeIndex``, KIP-33): a flat
array of 12-byte big-endian entries, each an int64 timestamp (ms) and an
int32 offset relative to the segment's base offset. An entry ``(T, O)``
says: the largest timestamp of the segment's batches up to and including
the batch holding offset ``O`` is ``T``, and that batch is the first to
reach ``T``. Every batch before it has a largest timestamp ``< T``.

Entries are strictly increasing in timestamp and non-decreasing in offset.
The segment adds one at the offset index's cadence (every
``index_interval_bytes``) when the largest timestamp so far has grown, plus
a final one when the segment is rolled or closed, so the last entry gives
the segment's largest timestamp. ``O`` is the *last* offset of the batch
(Kafka's ``shallowOffsetOfMaxTimestamp``).

Like the offset index, it is an accelerator that can be rebuilt from the
``.log`` file; writes are buffered and reach the file on flush / close.
"""

from __future__ import annotations

import struct
from bisect import bisect_right

from kclient.storage.index import IndexFile

TIME_ENTRY = struct.Struct(">qi")
TIME_ENTRY_SIZE = TIME_ENTRY.size  # 12 bytes
_INT32_MAX = 2**31 - 1


class TimeIndex(IndexFile):
    """In-memory plus on-disk sparse time index for one segment.

    Columns: timestamps (ms) and absolute offsets, so `lookup` is a
    ``bisect``.

    Source: Kafka's ``TimeIndex`` (no mmap or preallocation).

    Args:
        path: The ``.timeindex`` file (created if missing; a trailing partial
            entry is dropped on load).
        base_offset: The segment's base offset.

    Raises:
        OSError: An I/O failure.
    """

    ENTRY = TIME_ENTRY
    KIND = "time index"

    def _decode(self, ts: int, rel: int) -> tuple[int, int]:
        return ts, self.base_offset + rel

    def _encode(self, timestamp: int, offset: int) -> bytes:
        return TIME_ENTRY.pack(timestamp, offset - self.base_offset)

    # ------------------------------------------------------------ queries

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp ms, absolute offset)`` of the last entry, or
        ``(-1, base_offset)`` when the index is empty (Kafka's convention)."""
        timestamps, offsets = self._cols
        if not timestamps:
            return (-1, self.base_offset)
        return (timestamps[-1], offsets[-1])

    @property
    def max_timestamp(self) -> int:
        """Timestamp of the last entry (the largest), -1 when empty."""
        timestamps = self._cols[0]
        return timestamps[-1] if timestamps else -1

    def entries(self) -> list[tuple[int, int]]:
        """All entries as ``(timestamp ms, absolute offset)`` pairs."""
        timestamps, offsets = self._cols
        return list(zip(timestamps, offsets))

    def lookup(self, timestamp: int) -> tuple[int, int] | None:
        """The entry with the largest timestamp ``<= timestamp``.

        The first batch whose largest timestamp is ``>= timestamp`` is then at or
        after the batch holding the returned offset (at the start of the segment
        for ``None``).

        Args:
            timestamp: Milliseconds since the epoch.

        Returns:
            ``(timestamp, absolute offset)``, or ``None`` if every entry is later
                (or the index is empty).
        """
        timestamps, offsets = self._cols
        i = bisect_right(timestamps, timestamp) - 1
        if i < 0:
            return None
        return (timestamps[i], offsets[i])

    def sanity_check(self, last_offset: int | None = None) -> bool:
        """Check the index; a failing one should be rebuilt.

        Args:
            last_offset: The segment's last offset, if known.

        Returns:
            True if timestamps strictly increase, offsets never decrease, are
                ``>= base_offset`` and, when ``last_offset`` is given,
                ``<= last_offset``.
        """
        prev_ts, prev_off = None, self.base_offset
        for ts, off in zip(self._a, self._b):
            if off < prev_off or (prev_ts is not None and ts <= prev_ts):
                return False
            prev_ts, prev_off = ts, off
        if last_offset is not None and self._b and self._b[-1] > last_offset:
            return False
        return True

    # ------------------------------------------------------------ updates

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add ``(timestamp, offset)`` if ``timestamp`` is later than the last entry's.

        Args:
            timestamp: Milliseconds since the epoch; negative ones are not
                added.
            offset: The absolute offset of the batch holding it.

        Returns:
            Whether the entry was added.

        Raises:
            ValueError: The offset goes backwards or does not fit the int32
                relative field.
        """
        if timestamp < 0 or (self._a and timestamp <= self._a[-1]):
            return False
        rel = offset - self.base_offset
        if not 0 <= rel <= _INT32_MAX:
            raise ValueError(f"time index {self.path}: offset {offset} does not fit relative to base {self.base_offset}")
        if self._b and offset < self._b[-1]:
            raise ValueError(f"time index {self.path}: offset {offset} is before the last entry's {self._b[-1]}")
        self._add(timestamp, offset)
        return True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset``."""
        keep = bisect_right(self._b, offset - 1)
        self._truncate_entries(keep)

    def __repr__(self) -> str:
        return f"TimeIndex({str(self.path)!r}, base_offset={self.base_offset}, entries={len(self)})"
