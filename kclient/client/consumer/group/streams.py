"""What the high-level consumer hands out: `KafkaStream` iterators of
`MessageAndMetadata`, and the topic filters `Whitelist` /
`Blacklist` (Kafka 0.8 documentation, section 5.1 "API Design",
"Consumer APIs", https://kafka.apache.org/08/documentation.html#apidesign:
``createMessageStreams`` returns KafkaStreams, iterators over
MessageAndMetadata; ``createMessageStreamsByFilter`` takes a TopicFilter,
"a whitelist or a blacklist which is a standard Java regex"), and the
`StreamQueues` that carry chunks from the fetchers to the streams.

A stream is fed by the connector's fetchers (trio tasks in the connector's
loop thread) through a bounded queue of ``queued.max.message.chunks``
chunks; a chunk (`MessageChunk`) is the decoded records of one partition
from one fetch, as columns (offsets, keys, values, timestamps: lists of
objects the garbage collector does not track). Iterating crosses threads
once per chunk, never per message, and runs no Python code per message:
``for m in stream`` iterates an `itertools.chain` of C-level chunk
readers (compiled where ``kclient._speedups`` is built, else
``map``/``zip`` pipelines) that build each `MessageAndMetadata` as it is
handed out, so a message is made just before the application drops the
one before it and queued chunks hold no message objects: consuming does
not make the garbage collector run. What a stream has handed out is read
from its reader (`KafkaStream.last_message`), so counting consumption
costs nothing per message either.
"""

from __future__ import annotations

import abc
import re
from itertools import chain, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Iterator

import trio

from kclient._accel import speedups
from kclient.errors import ConsumerTimeoutError, LoopClosedError

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.consumer.group.core import ConnectorCore
    from kclient.sync import LoopThread


try:  # the C descriptor of namedtuple fields: faster than property(itemgetter)
    from collections import _tuplegetter  # type: ignore[attr-defined]
except ImportError:  # not CPython

    def _tuplegetter(index: int, doc: str):  # type: ignore[misc]
        return property(itemgetter(index), doc=doc)


class MessageAndMetadata(tuple):
    """One consumed message: ``key`` and ``message`` (also ``value``),
    decoded by the stream's key / value decoders (bytes or None without
    one), ``topic``, ``partition``, ``offset`` (its offset in the
    partition) and ``timestamp`` (ms since the epoch; -1 for message
    format v0). A tuple underneath (cheap to build, immutable)."""

    __slots__ = ()

    def __new__(cls, key: Any, message: Any, topic: str, partition: int, offset: int, timestamp: int = -1) -> "MessageAndMetadata":
        return tuple.__new__(cls, (key, message, topic, partition, offset, timestamp))

    key = _tuplegetter(0, "The decoded key.")
    message = _tuplegetter(1, "The decoded value (Kafka 0.8's name).")
    value = _tuplegetter(1, "The decoded value (same as ``message``).")
    topic = _tuplegetter(2, "The topic.")
    partition = _tuplegetter(3, "The partition.")
    offset = _tuplegetter(4, "Offset of the message in its partition.")
    timestamp = _tuplegetter(5, "ms since the epoch (-1 if unknown).")

    def __repr__(self) -> str:
        return (
            f"MessageAndMetadata(topic={self[2]!r}, partition={self[3]}, offset={self[4]}, "
            f"key={self[0]!r}, message={self[1]!r})"
        )


_new = tuple.__new__
_key = itemgetter(0)
_value = itemgetter(1)
_timestamp = itemgetter(2)


class _ChunkReaderPy:
    """Hands out a chunk's messages, built from its columns as they are
    asked for (the reference behaviour of the compiled
    ``kclient._speedups.ChunkReader``). Iterating it gives a C-level
    ``map``/``zip`` pipeline (no Python frame per message); `stop`,
    `remaining` and `handed` work from any thread."""

    __slots__ = ("_messages", "_n", "_probe", "_stop")

    def __init__(self, cls: type, topic: str, partition: int, offsets: list[int], keys: list, values: list, timestamps: list[int]) -> None:
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
        self._messages = map(_new, repeat(cls), columns)

    def __iter__(self) -> Iterator[MessageAndMetadata]:
        return self._messages

    def stop(self) -> None:
        """End the iteration where it is (one C call)."""
        self._stop.__setstate__(self._n)  # type: ignore[attr-defined]

    def remaining(self) -> int:
        """How many messages are left to hand out."""
        return self._stop.__length_hint__()  # type: ignore[attr-defined]

    def handed(self) -> int:
        """How many messages were handed out."""
        return self._n - self._probe.__length_hint__()  # type: ignore[attr-defined]


#: What reads a chunk: compiled where ``kclient._speedups`` is built.
_ChunkReader = speedups.ChunkReader if speedups is not None else _ChunkReaderPy


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

    def __init__(self, topic: str, partition: int, offsets: list[int], rows: list[tuple], keys: list | None = None, values: list | None = None) -> None:
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
    def from_columns(cls, topic: str, partition: int, offsets: list[int], keys: list, values: list, timestamps: list[int]) -> MessageChunk:
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

    def __getitem__(self, index: int) -> MessageAndMetadata:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]  # type: ignore[return-value]
        return _new(MessageAndMetadata, (self.keys[index], self.values[index], self.topic, self.partition, self.offsets[index], self.timestamps[index]))

    def __iter__(self) -> Iterator[MessageAndMetadata]:
        return iter(self.reader())

    def reader(self) -> Any:
        """A reader of the messages: iterating it hands them out, each
        `MessageAndMetadata` built as it is asked for (C-level, no Python
        frame per message), with ``stop()`` (end it where it is),
        ``remaining()`` and ``handed()`` (how many it handed out, also after
        ``stop()``), safe to call from another thread."""
        return _ChunkReader(MessageAndMetadata, self.topic, self.partition, self.offsets, self.keys, self.values, self.timestamps)

    def __repr__(self) -> str:
        offsets = self.offsets
        return f"<MessageChunk {self.topic}-{self.partition} offsets {offsets[0] if offsets else '-'}..{offsets[-1] if offsets else '-'} ({len(self)} messages)>"


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class TopicFilter(abc.ABC):
    """A topic regular expression (Python ``re``, matched against the whole
    topic name). As in Kafka, commas mean "or" (``"a,b"`` is ``a|b``),
    spaces and surrounding quotes are dropped.

    Args:
        regex: The expression.

    Raises:
        ValueError: an empty or invalid expression.
    """

    #: The ``pattern`` written in the consumer's ZooKeeper registration.
    pattern: str = ""

    def __init__(self, regex: str) -> None:
        cleaned = regex.strip().replace(",", "|").replace(" ", "").strip("\"'")
        if not cleaned:
            raise ValueError("a topic filter needs a non-empty regular expression")
        try:
            self._compiled = re.compile(cleaned)
        except re.error as exc:
            raise ValueError(f"invalid topic filter regex {regex!r}: {exc}") from None
        self.regex = cleaned

    @abc.abstractmethod
    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        """Whether the filter selects a topic. Implemented by `Whitelist` and
        `Blacklist`.

        Args:
            topic: The topic name.
            exclude_internal_topics: Leave internal topics
                (``__consumer_offsets``, ...) out whatever the expression
                (``exclude.internal.topics``).

        Returns:
            True when the consumer should read ``topic``.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.regex!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.regex == self.regex  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.regex))


class Whitelist(TopicFilter):
    """Consume the topics whose whole name matches the expression."""

    pattern = "white_list"

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        """Whether ``topic``'s whole name matches (see `TopicFilter.is_topic_allowed`).

        Args:
            topic: The topic name.
            exclude_internal_topics: Leave internal topics out.

        Returns:
            True for a matching, allowed topic.
        """
        if exclude_internal_topics and topic in INTERNAL_TOPICS:
            return False
        return self._compiled.fullmatch(topic) is not None


class Blacklist(TopicFilter):
    """Consume every topic whose whole name does not match the expression."""

    pattern = "black_list"

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        """Whether ``topic``'s whole name does not match (see
        `TopicFilter.is_topic_allowed`).

        Args:
            topic: The topic name.
            exclude_internal_topics: Leave internal topics out.

        Returns:
            True for a non-matching, allowed topic.
        """
        if exclude_internal_topics and topic in INTERNAL_TOPICS:
            return False
        return self._compiled.fullmatch(topic) is None


def topic_filter_for(pattern: str, regex: str) -> TopicFilter:
    """The filter a ZooKeeper registration describes.

    Args:
        pattern: The registration's ``pattern``: ``white_list`` or
            ``black_list``.
        regex: The registered expression.

    Returns:
        A `Whitelist` or `Blacklist`.

    Raises:
        ValueError: another pattern (e.g. ``static``), or a bad expression.
    """
    if pattern == Whitelist.pattern:
        return Whitelist(regex)
    if pattern == Blacklist.pattern:
        return Blacklist(regex)
    raise ValueError(f"not a wildcard pattern: {pattern!r}")


#: Marks the end of a stream (shutdown) and an empty wait
#: (``consumer.timeout.ms`` passed) in the stream's queue protocol.
END = object()
TIMEOUT = object()


class _Raising:
    """An iterator that raises ``exc`` once, then is exhausted: how a
    stream's chain of chunk iterators hands an error to the application
    and stays usable (``itertools.chain`` keeps an iterator that raised as
    its current one and asks it again on the next ``next()``)."""

    __slots__ = ("_exc",)

    def __init__(self, exc: BaseException) -> None:
        self._exc: BaseException | None = exc

    def __iter__(self) -> _Raising:
        return self

    def __next__(self) -> Any:
        exc = self._exc
        if exc is None:
            raise StopIteration
        self._exc = None
        try:
            raise exc
        finally:
            del exc


_EXHAUSTED: Iterator[Any] = iter(())


class KafkaStream:
    """An iterator of `MessageAndMetadata` over the partitions the
    rebalance gives this stream (Kafka's KafkaStream; one "consumer thread"
    ``<consumer_id>-<n>`` of the group).

    ``for m in stream`` blocks until a message arrives; with
    ``consumer.timeout.ms`` >= 0 it raises
    `ConsumerTimeoutError` after that many ms without
    one (the stream stays usable). Iteration ends (``StopIteration``) when
    the connector shuts down. Fetch errors the application must act on
    surface here: `MessageSizeTooLargeError` (a
    message bigger than ``fetch.message.max.bytes``),
    `CorruptRecordError`,
    `ConsumerRebalanceFailedError` (a background
    rebalance gave up).

    ``next(stream)`` works too; ``iter(stream)`` (what a ``for`` loop
    calls) returns a C-level iterator over the same position, so a ``for``
    loop runs no Python code of the stream per message.

    Iterate a stream from one thread at a time. Built by
    `kclient.ConsumerConnector.create_message_streams`, not directly.
    """

    def __init__(self, core: "ConnectorCore", index: int, loop: "LoopThread", receive: Callable[[], Any], name: str) -> None:
        self._core = core
        self.index = index
        self.name = name
        self._loop = loop
        self._receive = receive
        #: The chunk being read and its `MessageChunk.reader`, or None.
        self._reading: tuple[MessageChunk, Any] | None = None
        #: Its messages' iterator (exhausted when there is none).
        self._active: Iterator[MessageAndMetadata] = _EXHAUSTED
        #: The last message handed out before the chunk being read.
        self._before: MessageAndMetadata | None = None
        self._ended = False
        # What the chains iterate: the message iterators of the chunks, as
        # the application reaches them (``_next_messages``; END ends it).
        self._chunks = iter(self._next_messages, END)
        self._iterator: Iterator[MessageAndMetadata] = iter(self)

    def __iter__(self) -> Iterator[MessageAndMetadata]:
        # Per message the chain steps a chunk's C-level iterator; per chunk
        # it calls _next_messages. A fresh chain for every loop (it goes on
        # where the stream is), so that a chain whose source was interrupted
        # (KeyboardInterrupt while waiting) is not reused.
        return chain.from_iterable(self._chunks)

    def __next__(self) -> MessageAndMetadata:
        try:
            return next(self._iterator)
        except StopIteration:
            if self._ended:
                raise
            self._iterator = iter(self)  # an interrupted chain: go on with a new one
            return next(self._iterator)

    def _next_messages(self) -> Iterator[Any]:
        """The rest of the chunk being read, else the next chunk's messages
        (blocks); END when the stream ends; an iterator that raises the error
        for a timeout or a fetch error. Called by a chain whenever its
        current iterator is exhausted, on the iterating thread: nothing it
        raises may escape (the chain would drop its source)."""
        try:
            reading = self._reading
            if reading is not None and reading[1].remaining() > 0:
                return self._active  # another chain (a loop left with break) stopped inside it
            while True:
                last = self.last_message
                self._before = last  # first: last_message never goes back for a reader on another thread
                self._reading = None
                if last is not None:
                    self._core.record_consumed(last)
                if self._core.closed:
                    return self._end()
                try:
                    # ``_receive`` reports its outcomes as items (END, TIMEOUT,
                    # exceptions queued for the application) and raises nothing
                    # of its own: the only KafkaError here is the loop's.
                    item = self._loop.call(self._receive)
                except LoopClosedError:
                    if self._core.closed:
                        return self._end()
                    raise
                if item is END:
                    return self._end()
                if item is TIMEOUT:
                    raise ConsumerTimeoutError(
                        f"no message on stream {self.name} within consumer.timeout.ms={self._core.config.consumer_timeout_ms}"
                    )
                if isinstance(item, BaseException):
                    raise item
                generation, chunk = item
                if generation != self._core.generation or not len(chunk):
                    continue  # fetched before a rebalance that moved its partition
                reader = chunk.reader()
                messages = iter(reader)
                self._active = messages
                self._reading = (chunk, reader)
                return messages
        except BaseException as exc:
            return _Raising(exc)

    def _end(self) -> Any:
        self._ended = True
        self._active = _EXHAUSTED
        return END

    def clear(self) -> None:
        """Drop the rest of the chunk being iterated (the connector calls this
        when a rebalance takes the partitions away; any thread).
        `last_message` stays the last message handed out."""
        reading = self._reading
        if reading is not None:
            reading[1].stop()  # one C call: the chunk's iterator is exhausted

    @property
    def last_message(self) -> MessageAndMetadata | None:
        """The last message handed to the application (what a commit counts
        as consumed), or None."""
        reading = self._reading
        if reading is not None:
            chunk, reader = reading
            handed = reader.handed()
            if handed > 0:
                return chunk[handed - 1]
        return self._before

    def forget_last(self) -> None:
        """Forget `last_message` (a rebalance took its partition away)."""
        self._reading = None
        self._before = None

    def __repr__(self) -> str:
        return f"<KafkaStream {self.name}>"


class StreamQueues:
    """The bounded queues between the fetchers and the streams, one per
    stream (``queued.max.message.chunks`` chunks each), on the connector's
    trio loop. Items: ``(generation, MessageChunk)`` chunks, an
    exception for the application, or (from the receive side) `END` /
    `TIMEOUT`."""

    def __init__(self) -> None:
        self.streams: list[KafkaStream] = []
        self._senders: list[trio.MemorySendChannel] = []
        self._receivers: list[trio.MemoryReceiveChannel] = []

    def make_streams(self, core: "ConnectorCore", loop: "LoopThread", count: int, capacity: int, names: list[str], timeout_ms: int) -> list[KafkaStream]:
        """Build the streams and their queues.

        Args:
            core: The connector core the streams report consumption to.
            loop: The loop thread the streams' receives run on.
            count: How many streams.
            capacity: Queue size of each stream (chunks,
                ``queued.max.message.chunks``).
            names: One name per stream.
            timeout_ms: How long a stream waits per item (ms,
                ``consumer.timeout.ms``; -1 forever).

        Returns:
            The streams, in index order.
        """
        streams = []
        for i in range(count):
            send, receive = trio.open_memory_channel(capacity)
            self._senders.append(send)
            self._receivers.append(receive)
            streams.append(KafkaStream(core, i, loop, _receiver_function(receive, timeout_ms), names[i]))
        self.streams = streams
        return streams

    async def deliver(self, stream_index: int, item: Any) -> None:
        """Queue an item for a stream; waits while its queue is full (items
        for closed queues are dropped).

        Args:
            stream_index: The stream's index.
            item: A chunk ``(generation, MessageChunk)`` or an
                exception for the application.
        """
        try:
            await self._senders[stream_index].send(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def tell_all(self, error: BaseException) -> None:
        """Queue an error for every stream that has room.

        Args:
            error: The exception each stream's iteration raises.
        """
        for sender in self._senders:
            try:
                sender.send_nowait(error)
            except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                pass

    def clear(self) -> None:
        """Drop every queued item and the rest of each stream's chunk."""
        for receive in self._receivers:
            while True:
                try:
                    receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
        for stream in self.streams:
            stream.clear()

    def close(self) -> None:
        """End every stream (their iteration stops once the queue is read)."""
        for stream in self.streams:
            stream.clear()
        for sender in self._senders:
            sender.close()


def _receiver_function(receive: trio.MemoryReceiveChannel, timeout_ms: int) -> Callable[[], Any]:
    if timeout_ms < 0:

        async def next_item() -> Any:
            try:
                return await receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return END

    else:
        seconds = timeout_ms / 1000.0

        async def next_item() -> Any:
            try:
                with trio.move_on_after(seconds):
                    return await receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return END
            return TIMEOUT

    return next_item


__all__ = ["Blacklist", "KafkaStream", "MessageAndMetadata", "MessageChunk", "StreamQueues", "TopicFilter", "Whitelist", "topic_filter_for"]
