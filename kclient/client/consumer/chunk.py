"""A decoded fetch, as the high-level consumer's fetchers hand it to the
streams: `MessageChunk` holds one partition's records from one fetch as
columns (offsets, keys, values, timestamps); `MessageAndMetadata` is one
consumed message, built from those columns only when a stream hands it out
(by `ChunkReader`: compiled where ``kclient._speedups`` is built, else
`ChunkReaderPy`).

A leaf module: the fetcher (`kclient.client.consumer.fetcher`) makes chunks
and the streams (`kclient.client.consumer.group.streams`) read them, and
neither needs the other for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import repeat
from operator import itemgetter, length_hint
from typing import Any, overload

from kclient._accel import speedups
from kclient.client.value_tuple import tuplegetter


class MessageAndMetadata(tuple[Any, ...]):
    """One consumed message: ``key`` and ``message`` (also ``value``),
    decoded by the stream's key / value decoders (bytes or None without
    one), ``topic``, ``partition``, ``offset`` (its offset in the
    partition) and ``timestamp`` (ms since the epoch; -1 for message
    format v0). A tuple underneath (cheap to build, immutable)."""

    __slots__ = ()

    def __new__(cls, key: Any, message: Any, topic: str, partition: int, offset: int, timestamp: int = -1) -> MessageAndMetadata:
        return tuple.__new__(cls, (key, message, topic, partition, offset, timestamp))

    key = tuplegetter(0, "The decoded key.")
    message = tuplegetter(1, "The decoded value (Kafka 0.8's name).")
    value = tuplegetter(1, "The decoded value (same as ``message``).")
    topic = tuplegetter(2, "The topic.")
    partition = tuplegetter(3, "The partition.")
    offset = tuplegetter(4, "Offset of the message in its partition.")
    timestamp = tuplegetter(5, "ms since the epoch (-1 if unknown).")

    def __repr__(self) -> str:
        return (
            f"MessageAndMetadata(topic={self[2]!r}, partition={self[3]}, offset={self[4]}, "
            f"key={self[0]!r}, message={self[1]!r})"
        )


_new = tuple.__new__
_key = itemgetter(0)
_value = itemgetter(1)
_timestamp = itemgetter(2)


class ChunkReaderPy:
    """Hands out a chunk's messages, built from its columns as they are
    asked for (the reference behaviour of the compiled
    ``kclient._speedups.ChunkReader``). Iterating it gives a C-level
    ``map``/``zip`` pipeline (no Python frame per message); `stop`,
    `remaining` and `handed` work from any thread."""

    __slots__ = ("_messages", "_n", "_probe", "_stop")

    def __init__(self, cls: type, topic: str, partition: int, offsets: list[int], keys: list[Any], values: list[Any], timestamps: list[int]) -> None:
        n = len(offsets)
        if not len(keys) == len(values) == len(timestamps) == n:
            raise ValueError("the columns of a chunk differ in length")
        self._n = n
        # zip pulls its arguments in order: key, value, ..., the offset
        # (_stop), then the timestamp (_probe): _probe advances only for a
        # message handed out, also after _stop ended the iteration.
        self._stop = iter(offsets)
        self._probe = iter(timestamps)
        columns = zip(iter(keys), iter(values), repeat(topic), repeat(partition), self._stop, self._probe)
        self._messages: Iterator[MessageAndMetadata] = map(_new, repeat(cls), columns)

    def __iter__(self) -> Iterator[MessageAndMetadata]:
        return self._messages

    def stop(self) -> None:
        """End the iteration where it is (one C call)."""
        self._stop.__setstate__(self._n)  # type: ignore[attr-defined]

    def remaining(self) -> int:
        """How many messages are left to hand out."""
        return length_hint(self._stop)

    def handed(self) -> int:
        """How many messages were handed out."""
        return self._n - length_hint(self._probe)


#: What reads a chunk: compiled where ``kclient._speedups`` is built.
ChunkReader = speedups.ChunkReader if speedups is not None else ChunkReaderPy


class MessageChunk:
    """The messages of one partition from one fetch, as the fetcher decoded
    them, in columns: ``offsets``, ``keys``, ``values`` (decoded by the
    stream's key / value decoders, or bytes) and ``timestamps``. A sequence
    of `MessageAndMetadata`, built when asked for: `reader` is how a
    stream iterates it.

    Args:
        topic: The topic.
        partition: The partition.
        offsets: The messages' offsets, ascending.
        rows: One ``(key, value, timestamp, headers)`` row per offset (see
            `kclient.protocol.records.iter_record_rows`).
        keys: The decoded keys, or None (the rows' keys).
        values: The decoded values, or None (the rows' values).

    Raises:
        ValueError: ``rows``, ``keys`` or ``values`` is not as long as
            ``offsets``.
    """

    __slots__ = ("keys", "offsets", "partition", "timestamps", "topic", "values")

    def __init__(
        self, topic: str, partition: int, offsets: list[int], rows: list[tuple[Any, ...]], keys: list[Any] | None = None, values: list[Any] | None = None
    ) -> None:
        n = len(offsets)
        if len(rows) != n or (keys is not None and len(keys) != n) or (values is not None and len(values) != n):
            raise ValueError(f"a chunk needs one row, key and value per offset: {n} offsets, {len(rows)} rows")
        self.topic = topic
        self.partition = partition
        self.offsets = offsets
        self.keys = list(map(_key, rows)) if keys is None else keys
        self.values = list(map(_value, rows)) if values is None else values
        self.timestamps = list(map(_timestamp, rows))

    @classmethod
    def from_columns(cls, topic: str, partition: int, offsets: list[int], keys: list[Any], values: list[Any], timestamps: list[int]) -> MessageChunk:
        """A chunk from its columns (what the fetcher's compiled decoder
        makes, with no tuple per record).

        Args:
            topic: The topic.
            partition: The partition.
            offsets: The offsets, ascending.
            keys: One key per offset.
            values: One value per offset.
            timestamps: One timestamp (ms) per offset.

        Returns:
            The chunk.

        Raises:
            ValueError: the columns differ in length.
        """
        if not len(keys) == len(values) == len(timestamps) == len(offsets):
            raise ValueError("the columns of a chunk differ in length")
        chunk = cls.__new__(cls)
        chunk.topic = topic
        chunk.partition = partition
        chunk.offsets = offsets
        chunk.keys = keys
        chunk.values = values
        chunk.timestamps = timestamps
        return chunk

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, index: int) -> MessageAndMetadata: ...

    @overload
    def __getitem__(self, index: slice) -> list[MessageAndMetadata]: ...

    def __getitem__(self, index: int | slice) -> MessageAndMetadata | list[MessageAndMetadata]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return _new(MessageAndMetadata, (self.keys[index], self.values[index], self.topic, self.partition, self.offsets[index], self.timestamps[index]))

    def __iter__(self) -> Iterator[MessageAndMetadata]:
        return iter(self.reader())

    def reader(self) -> Any:
        """A reader of the messages: iterating it hands them out, each
        `MessageAndMetadata` built as it is asked for (C-level, no Python
        frame per message), with ``stop()`` (end it where it is),
        ``remaining()`` and ``handed()`` (how many it handed out, also after
        ``stop()``), safe to call from another thread."""
        return ChunkReader(MessageAndMetadata, self.topic, self.partition, self.offsets, self.keys, self.values, self.timestamps)

    def __repr__(self) -> str:
        offsets = self.offsets
        return f"<MessageChunk {self.topic}-{self.partition} offsets {offsets[0] if offsets else '-'}..{offsets[-1] if offsets else '-'} ({len(self)} messages)>"


__all__ = ["ChunkReader", "ChunkReaderPy", "MessageAndMetadata", "MessageChunk"]
