"""What a fetch returns: `ByteBufferMessageSet` over the raw record
bytes of one partition, iterated as `MessageAndOffset`, and
`MultiFetchResponse` holding one set per request.

Source: the Kafka 0.8 documentation (https://kafka.apache.org/08/documentation.html#apidesign): section 5.1 "API Design",
"Consumer APIs" (SimpleConsumer returns a ByteBufferMessageSet; multifetch a
MultiFetchResponse) and section 5.4 "Log", "Reads" (a read returns the
messages that fit in S bytes; a partial message at the end is not an error;
a single message bigger than S needs a bigger S). The bytes are decoded by
`kclient.protocol.records.iter_record_rows`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, repeat
from typing import Any, overload

import attrs
from crc32c import crc32c as _crc32c

from kclient._accel import speedups
from kclient.client.value_tuple import tuplegetter
from kclient.errors import BrokerResponseError, MessageSizeTooLargeError, error_for_code
from kclient.protocol.primitives import Buffer
from kclient.protocol.records import Header, iter_record_rows, read_batch_info, scan_batches
from kclient.protocol.records.read_committed import committed_batches
from kclient.protocol.records.rows import CHUNK_ROWS
from kclient.protocol.records.scan import LOG_OVERHEAD


class Message(tuple[Any, ...]):
    """A record as the application sees it: ``key`` and ``payload`` (bytes
    or None), ``timestamp`` (ms since the epoch; CreateTime unless the topic
    uses LogAppendTime), ``headers`` (tuple of `Header`).

    An immutable value (a tuple underneath, so building one per record in
    the consumer's hot loop costs one C call)."""

    __slots__ = ()

    def __new__(cls, key: bytes | None, payload: bytes | None, timestamp: int, headers: tuple[Header, ...] = ()) -> Message:
        return tuple.__new__(cls, (key, payload, timestamp, headers))

    key = tuplegetter(0, "The key (bytes or None).")
    payload = tuplegetter(1, "The value (bytes or None).")
    timestamp = tuplegetter(2, "ms since the epoch.")
    headers = tuplegetter(3, "Tuple of Header.")

    def __repr__(self) -> str:
        return f"Message(key={self[0]!r}, payload={self[1]!r}, timestamp={self[2]!r}, headers={self[3]!r})"


class MessageAndOffset(tuple[Any, ...]):
    """A message with its logical offset; ``next_offset`` is the offset to
    fetch from to continue after it (Kafka 0.8 documentation, section 5.4
    "Log", "Reads")."""

    __slots__ = ()

    def __new__(cls, message: Message, offset: int) -> MessageAndOffset:
        return tuple.__new__(cls, (message, offset))

    message = tuplegetter(0, "The `Message`.")
    offset = tuplegetter(1, "Its offset in the partition.")

    @property
    def next_offset(self) -> int:
        offset: int = self[1]
        return offset + 1

    def __repr__(self) -> str:
        return f"MessageAndOffset(offset={self[1]!r}, message={self[0]!r})"


_new = tuple.__new__


def _message_set_reader_py(offsets: list[int], rows: list[tuple[Any, ...]]) -> Iterator[MessageAndOffset]:
    """The messages of decoded rows (``(key, value, timestamp, headers)``)
    as a C-level ``map``/``zip`` pipeline: the reference behaviour of the
    compiled ``kclient._speedups.MessageSetReader``."""
    return map(_new, repeat(MessageAndOffset), zip(map(_new, repeat(Message), rows), offsets))


#: The compiled column decoder and reader (None: pure Python only).
_c_decode_columns: Any = speedups.decode_columns if speedups is not None else None
_MessageSetReader: Any = speedups.MessageSetReader if speedups is not None else None


@attrs.define
class ByteBufferMessageSet:
    """The messages of one partition from one fetch.

    ``buffer``: the raw record bytes the broker returned (may end with a
    partial batch, which is dropped). ``start_offset``: the offset asked for;
    messages before it (the same batch may begin earlier) are skipped.
    ``high_watermark``: the partition's high watermark at fetch time.
    ``error_code``: the partition's Kafka error code (0 = none); iterating a
    set with an error raises that error. Iterating raises
    `CorruptRecordError` for a batch that fails its CRC.
    ``aborted_transactions``: a read_committed fetch's aborted
    transactions, ``(producer_id, first_offset)`` pairs (KIP-98): their
    records are not handed out (`visible_buffer`). Control batches
    (transaction markers) are never handed out.
    """

    topic: str
    partition: int
    buffer: Buffer
    start_offset: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    error_code: int = 0
    max_size: int | None = None
    #: With NOT_LEADER_OR_FOLLOWER: ``(broker id, host, port)`` of the
    #: partition's current leader, when the consumer looked it up.
    leader: tuple[int, str, int] | None = None
    aborted_transactions: tuple[tuple[int, int], ...] = ()

    @property
    def visible_buffer(self) -> Buffer:
        """The record bytes whose records the application sees: ``buffer``
        without the batches of the aborted transactions (Kafka's consumer
        rule, `kclient.protocol.records.read_committed`); ``buffer`` itself
        when the fetch listed none. Offsets past skipped batches are still
        counted by `next_offset`.

        Raises:
            CorruptRecordError: a malformed batch or control record key.
        """
        if not self.aborted_transactions:
            return self.buffer
        return committed_batches(self.buffer, self.aborted_transactions)

    @property
    def error(self) -> BrokerResponseError | None:
        """The partition's error as an exception instance, or None (a
        `NotLeaderForPartitionError` carries ``leader`` / ``leader_id``
        when the new leader is known)."""
        if not self.error_code:
            return None
        where = f"{self.topic}-{self.partition} at offset {self.start_offset}"
        if self.leader is not None:
            where += f"; the leader is now broker {self.leader[0]} at {self.leader[1]}:{self.leader[2]}"
        exc = error_for_code(self.error_code)(where)
        if self.leader is not None:
            exc.leader_id = self.leader[0]  # type: ignore[attr-defined]
            exc.leader = (self.leader[1], self.leader[2])  # type: ignore[attr-defined]
        return exc

    @property
    def size_in_bytes(self) -> int:
        """Bytes the broker returned for this partition."""
        return len(self.buffer)

    @property
    def next_offset(self) -> int:
        """The offset to fetch from to continue after this set: past its
        last complete batch, control batches included.

        A transactional producer's commit or abort markers are control
        batches: they take an offset but no message is handed out for them,
        so a reader that only follows each message's ``next_offset`` stops
        in front of a marker (a fetch there returns no message, again and
        again). Continuing from this offset moves past it, as Kafka's
        consumer moves its position to the batch's next offset.

        Returns:
            The offset after the last complete batch, or ``start_offset``
            when the set holds none (nothing fetched, a cut first batch, an
            error).
        """
        end = self.start_offset
        if not self.error_code:
            for info in scan_batches(self.buffer):
                end = max(end, info.next_offset)
        return end

    @property
    def valid_bytes(self) -> int:
        """Bytes taken by complete batches (the rest is a partial tail)."""
        total = 0
        for info in scan_batches(self.buffer):
            total = info.position + info.size
        return total

    def check_fits(self) -> None:
        """Check that the fetch size let at least the first batch through.

        Raises:
            MessageSizeTooLargeError: the buffer holds no complete batch
                because the first batch is bigger than the fetch size; the
                message names the size (bytes) to retry with.
        """
        if not self.buffer:
            return
        if read_batch_info(self.buffer, 0) is None and len(self.buffer) >= LOG_OVERHEAD:
            # The entry's size: the int32 ending its log overhead (offset int64, size int32).
            needed = int.from_bytes(bytes(self.buffer[LOG_OVERHEAD - 4 : LOG_OVERHEAD]), "big", signed=True) + LOG_OVERHEAD
            if needed > len(self.buffer):
                raise MessageSizeTooLargeError(
                    f"{self.topic}-{self.partition}: the batch at offset {self.start_offset} is {needed} bytes, "
                    f"larger than the fetch size {self.max_size or len(self.buffer)}; retry with max_size >= {needed}"
                )

    def __iter__(self) -> Iterator[MessageAndOffset]:
        # C-level iterators, chained: the consumer's for-loop pulls each
        # MessageAndOffset through map/zip without running any Python
        # bytecode per record (see _batches).
        return chain.from_iterable(self._batches())

    def _batches(self) -> Iterator[Iterable[MessageAndOffset]]:
        """Iterables of the messages at or after ``start_offset``, in order,
        decoded a few batches at a time as the consumer iterates by
        `kclient.protocol.records.iter_record_rows` (the one record-set
        decoder), whose ``(key, value, timestamp, headers)`` rows ``map``
        turns into Message / MessageAndOffset tuples in C. A corrupt batch
        raises `CorruptRecordError` naming the partition, after the
        messages before it."""
        if self.error_code:
            raise self.error  # type: ignore[misc]
        buf = self.visible_buffer
        if buf is not self.buffer:
            self.check_fits()  # a cut first batch is left out of visible_buffer
        start = self.start_offset
        pos = 0
        if _c_decode_columns is None:
            self.check_fits()
        else:
            # The compiled decoder fills columns straight from the bytes (no
            # tuple per record) for runs of plain batches, a chunk at a time;
            # the general decoder takes the rest from where it stops.
            size = len(buf)
            while pos < size:
                offsets: list[int] = []
                keys: list[bytes | None] = []
                values: list[bytes | None] = []
                timestamps: list[int] = []
                pos = _c_decode_columns(buf, pos, start, offsets, keys, values, timestamps, _crc32c, CHUNK_ROWS)
                if not offsets:
                    break
                yield _MessageSetReader(Message, MessageAndOffset, offsets, keys, values, timestamps)
            if pos >= size:
                return
            if not pos:
                # Nothing decoded: the first batch may be cut by the fetch
                # size (a decoded batch was whole, so this check is needed
                # only here).
                self.check_fits()
        # On the whole buffer from where the compiled decoder stopped, so
        # that an error names its byte in the fetched set on both paths.
        for offsets, rows in iter_record_rows(buf, start, where=f"{self.topic}-{self.partition}", position=pos):
            yield _message_set_reader_py(offsets, rows)

    def messages(self) -> list[MessageAndOffset]:
        """All messages as a list."""
        return list(self)


class MultiFetchResponse(Sequence[ByteBufferMessageSet]):
    """The answer to ``multifetch``: one `ByteBufferMessageSet` per
    FetchRequest, in request order."""

    def __init__(self, sets: Sequence[ByteBufferMessageSet]) -> None:
        self._sets = list(sets)

    @overload
    def __getitem__(self, index: int) -> ByteBufferMessageSet: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ByteBufferMessageSet]: ...

    def __getitem__(self, index: int | slice) -> ByteBufferMessageSet | Sequence[ByteBufferMessageSet]:
        return self._sets[index]

    def __len__(self) -> int:
        return len(self._sets)

    def __repr__(self) -> str:
        return f"MultiFetchResponse({len(self._sets)} message sets)"


__all__ = ["ByteBufferMessageSet", "Header", "Message", "MessageAndOffset", "MultiFetchResponse"]
