"""The log cleaner's key -> latest offset map (Kafka's ``SkimpyOffsetMap``).

Kafka documentation, "Log Compaction" ("Log Compaction Details"): the
cleaner reads the dirty section of the log and builds a map from each key
to the offset of its last occurrence; records whose key maps to a later
offset are then dropped. As in Kafka the map stores a 16-byte MD5 digest of
each key (not the key itself) and is bounded: ``log.cleaner.dedupe.buffer.size``
bytes at 24 bytes per entry (digest plus 8-byte offset), filled to at most
``log.cleaner.io.buffer.load.factor`` (0.9). A full map makes the cleaner
clean only the dirty segments it covers; the rest wait for the next round.
"""

from __future__ import annotations

import hashlib

#: Bytes Kafka counts per entry: a 16-byte MD5 digest and an 8-byte offset.
BYTES_PER_ENTRY = 24
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_LOAD_FACTOR = 0.9


class OffsetMap:
    """Key digest -> offset of the key's latest record.

    Args:
        capacity: The most keys the map may hold (>= 1).
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an offset map needs room for at least one key, got {capacity}")
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        #: The highest offset put, -1 when empty.
        self.latest_offset = -1

    @classmethod
    def for_buffer_size(cls, buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_SIZE, load_factor: float = DEFAULT_LOAD_FACTOR) -> OffsetMap:
        """A map sized as Kafka sizes its map from
        ``log.cleaner.dedupe.buffer.size`` and the load factor.

        Args:
            buffer_bytes: The memory budget in bytes.
            load_factor: The fraction of slots that may be used.

        Returns:
            An empty map.
        """
        return cls(max(1, int(buffer_bytes // BYTES_PER_ENTRY * load_factor)))

    @staticmethod
    def digest(key: bytes) -> bytes:
        """The 16-byte MD5 digest the map stores for ``key``."""
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        """Record that ``key``'s latest record (so far) is at ``offset``.

        Args:
            key: The record key.
            offset: Its offset; offsets are put in increasing order.
        """
        self._offsets[self.digest(key)] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``, -1 if none."""
        return self._offsets.get(self.digest(key), -1)

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        """Whether the map holds ``capacity`` keys."""
        return len(self._offsets) >= self.capacity

    def clear(self) -> None:
        """Forget every key."""
        self._offsets.clear()
        self.latest_offset = -1

    def __repr__(self) -> str:
        return f"OffsetMap({len(self)}/{self.capacity} keys, latest offset {self.latest_offset})"


__all__ = ["BYTES_PER_ENTRY", "DEFAULT_DEDUPE_BUFFER_SIZE", "DEFAULT_LOAD_FACTOR", "OffsetMap"]
