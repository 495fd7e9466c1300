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
chunks; a chunk is the decoded messages of one partition from one fetch.
Iterating crosses threads once per chunk, never per message: ``next()``
on a stream is a list-iterator step plus one attribute store.
"""

from __future__ import annotations

import abc
import re
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Iterator

import trio

from kclient.errors import ConsumerTimeoutError, LoopClosedError

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.consumer.group.core import ConnectorCore
    from kclient.sync import LoopThread


class MessageAndMetadata(tuple):
    """One consumed message: ``key`` and ``message`` (also ``value``),
    decoded by the stream's key / value decoders (bytes or None without
    one), ``topic``, ``partition``, ``offset`` (its offset in the
    partition) and ``timestamp`` (ms since the epoch; -1 for message
    format v0). A tuple underneath (cheap to build, immutable)."""

    __slots__ = ()

    def __new__(cls, key: Any, message: Any, topic: str, partition: int, offset: int, timestamp: int = -1) -> "MessageAndMetadata":
        return tuple.__new__(cls, (key, message, topic, partition, offset, timestamp))

    key = property(itemgetter(0), doc="The decoded key.")
    message = property(itemgetter(1), doc="The decoded value (Kafka 0.8's name).")
    value = property(itemgetter(1), doc="The decoded value (same as ``message``).")
    topic = property(itemgetter(2), doc="The topic.")
    partition = property(itemgetter(3), doc="The partition.")
    offset = property(itemgetter(4), doc="Offset of the message in its partition.")
    timestamp = property(itemgetter(5), doc="ms since the epoch (-1 if unknown).")

    def __repr__(self) -> str:
        return (
            f"MessageAndMetadata(topic={self[2]!r}, partition={self[3]}, offset={self[4]}, "
            f"key={self[0]!r}, message={self[1]!r})"
        )


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


def _empty_next() -> Any:
    raise StopIteration


#: Marks the end of a stream (shutdown) and an empty wait
#: (``consumer.timeout.ms`` passed) in the stream's queue protocol.
END = object()
TIMEOUT = object()


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

    Iterate a stream from one thread at a time. Built by
    `kclient.ConsumerConnector.create_message_streams`, not directly.
    """

    def __init__(self, core: "ConnectorCore", index: int, loop: "LoopThread", receive: Callable[[], Any], name: str) -> None:
        self._core = core
        self.index = index
        self.name = name
        self._loop = loop
        self._receive = receive
        self._next: Callable[[], MessageAndMetadata] = _empty_next
        #: The last message handed to the application (what a commit counts
        #: as consumed; read by the connector's thread).
        self._last: MessageAndMetadata | None = None

    def __iter__(self) -> Iterator[MessageAndMetadata]:
        return self

    def __next__(self) -> MessageAndMetadata:
        try:
            m = self._next()
        except StopIteration:
            m = self._advance()
        self._last = m
        return m

    def _advance(self) -> MessageAndMetadata:
        while True:
            last = self._last
            if last is not None:
                self._core.record_consumed(last)
            if self._core.closed:
                self._next = _empty_next
                raise StopIteration
            try:
                # ``_receive`` reports its outcomes as items (END, TIMEOUT,
                # exceptions queued for the application) and raises nothing
                # of its own: the only KafkaError here is the loop's.
                item = self._loop.call(self._receive)
            except LoopClosedError:
                if self._core.closed:
                    self._next = _empty_next
                    raise StopIteration from None
                raise
            if item is END:
                self._next = _empty_next
                raise StopIteration
            if item is TIMEOUT:
                raise ConsumerTimeoutError(
                    f"no message on stream {self.name} within consumer.timeout.ms={self._core.config.consumer_timeout_ms}"
                )
            if isinstance(item, BaseException):
                raise item
            generation, messages = item
            if generation != self._core.generation:
                continue  # fetched before a rebalance that moved its partition
            step = iter(messages).__next__
            try:
                m = step()
            except StopIteration:
                continue
            self._next = step
            return m

    def clear(self) -> None:
        """Drop the rest of the chunk being iterated (the connector calls this
        when a rebalance takes the partitions away; any thread)."""
        self._next = _empty_next

    @property
    def last_message(self) -> MessageAndMetadata | None:
        """The last message handed to the application (what a commit counts
        as consumed), or None."""
        return self._last

    def forget_last(self) -> None:
        """Forget `last_message` (a rebalance took its partition away)."""
        self._last = None

    def __repr__(self) -> str:
        return f"<KafkaStream {self.name}>"


class StreamQueues:
    """The bounded queues between the fetchers and the streams, one per
    stream (``queued.max.message.chunks`` chunks each), on the connector's
    trio loop. Items: ``(generation, [MessageAndMetadata])`` chunks, an
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
            item: A chunk ``(generation, [MessageAndMetadata])`` or an
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


__all__ = ["Blacklist", "KafkaStream", "MessageAndMetadata", "StreamQueues", "TopicFilter", "Whitelist", "topic_filter_for"]
