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
from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any, Protocol

import trio

from kclient.client.consumer.chunk import ChunkReaderPy, MessageAndMetadata, MessageChunk
from kclient.config import ConsumerConfig
from kclient.errors import ConsumerTimeoutError, LoopClosedError
from kclient.sync import LoopThread

#: The pure-Python chunk reader, under its former name (tests compare it with the compiled one).
_ChunkReaderPy = ChunkReaderPy


class StreamOwner(Protocol):
    """What a `KafkaStream` needs of the connector core that feeds it
    (`kclient.client.consumer.group.core_base.GroupCoreBase` is one): the
    core is handed to the stream, the stream never imports it."""

    #: True once the connector shut down (the stream ends).
    closed: bool
    #: The current rebalance generation; chunks of an older one are dropped.
    generation: int
    #: The connector's config (``consumer.timeout.ms`` is read).
    config: ConsumerConfig

    def record_consumed(self, m: MessageAndMetadata) -> None:
        """Count a message handed to the application as consumed.

        Args:
            m: The message.
        """

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

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.regex!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.regex == self.regex

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

    def __init__(self, core: StreamOwner, index: int, loop: LoopThread, receive: Callable[[], Any], name: str) -> None:
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

    def _next_messages(self) -> Any:
        """The rest of the chunk being read, else the next chunk's messages
        (blocks), as an iterator; END (the sentinel of the stream's
        ``iter(callable, END)``, no iterator) when the stream ends; an
        iterator that raises the error for a timeout or a fetch error.
        Called by a chain whenever its
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
            handed: int = reader.handed()
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
        self._senders: list[trio.MemorySendChannel[Any]] = []
        self._receivers: list[trio.MemoryReceiveChannel[Any]] = []

    def make_streams(self, core: StreamOwner, loop: LoopThread, count: int, capacity: int, names: list[str], timeout_ms: int) -> list[KafkaStream]:
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


def _receiver_function(receive: trio.MemoryReceiveChannel[Any], timeout_ms: int) -> Callable[[], Any]:
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


__all__ = ["Blacklist", "KafkaStream", "MessageAndMetadata", "MessageChunk", "StreamOwner", "StreamQueues", "TopicFilter", "Whitelist", "topic_filter_for"]
