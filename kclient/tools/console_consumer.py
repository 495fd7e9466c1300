"""``kclient console-consumer``: print a topic's records, with the flags of
Kafka's ``kafka-console-consumer.sh``::

    kclient console-consumer --bootstrap-server 127.0.0.1:9092 --topic events \\
        --from-beginning --max-messages 10 \\
        --property print.key=true --property key.separator=:

It reads every partition of the topic (from Metadata; ``--partition N``
one) with the kclient `SimpleConsumer`, one per partition leader, from the
log end (default), the log start (``--from-beginning`` or ``--offset
earliest``) or an offset (``--offset N``, with ``--partition``). No group,
no committed offsets.

Each record is printed as Kafka's ``DefaultMessageFormatter`` does:
``CreateTime:<ms>``, ``Partition:<n>``, ``Offset:<n>``, the headers, the
key and the value, in that order, as the ``print.timestamp``, ``print.partition``,
``print.offset``, ``print.headers`` (KIP-431: ``k1:v1,k2:v2``, or
``NO_HEADERS``), ``print.key`` and ``print.value`` (default true)
properties ask, separated by ``key.separator`` (default a tab) and ended by
``line.separator`` (default a newline); a null key or value prints as
``null`` (``null.literal``).

It stops after ``--max-messages`` records, or once ``--timeout-ms`` passed
without a record; then, or on Ctrl-C, it prints ``Processed a total of N
messages`` on stderr and exits with status 0. ``--consumer-property k=v``
and ``--consumer.config FILE`` take the security properties (Kafka's
names) and ``isolation.level`` (``read_committed``: only committed
transactions' records, up to the last stable offset, KIP-98); other
consumer properties are accepted and ignored.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Protocol, TypeAlias

from kclient.errors import ConfigError, UnknownTopicOrPartitionError
from kclient.tools.common import (
    client_properties,
    fetch_metadata,
    leader_address,
    parse_bootstrap,
    parse_key_values,
    property_bool,
)
from kclient.tools.console_arguments import add_console_parser
from kclient.tools.console_group import GroupReader, group_config, group_id
from kclient.tools.shutdown import ShutdownSignals, shutdown_signals

if TYPE_CHECKING:
    from kclient.client.cluster import ClusterMetadata, PartitionInfo
    from kclient.client.consumer.message_set import ByteBufferMessageSet
    from kclient.client.consumer.simple import SimpleConsumer
    from kclient.protocol.records.v2 import Header

__all__ = ["ConsoleConsumerArguments", "MessageFormatter", "register", "run"]

#: The longest one fetch waits for data at the broker (ms).
POLL_MS = 500
#: Bytes asked per partition and fetch.
FETCH_BYTES = 1024 * 1024

#: A record header as `MessageFormatter` prints it: a `Header`, or a
#: ``(key, value)`` pair (a None value prints as ``null.literal``).
HeaderLike: TypeAlias = "Header | tuple[str, bytes | None]"


class ConsoleConsumerArguments(Protocol):
    """The ``console-consumer`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    bootstrap_server: str
    topic: str
    partition: int | None
    offset: str | None
    from_beginning: bool
    max_messages: int | None
    timeout_ms: int | None
    property: list[str]
    consumer_property: list[str]
    consumer_config: str | None
    group: str | None


class MessageFormatter:
    """Kafka's ``DefaultMessageFormatter``.

    Args:
        properties: The ``--property`` values: ``print.timestamp``,
            ``print.partition``, ``print.offset``, ``print.key`` (default
            false), ``print.value`` (default true), ``key.separator``
            (default a tab), ``line.separator`` (default a newline),
            ``null.literal`` (default ``null``), ``print.headers``
            (default false), ``headers.separator`` (default ``,``),
            ``headers.key.separator`` (default ``:``) (KIP-431).

    Raises:
        ConfigError: A boolean property that is neither true nor false.
    """

    def __init__(self, properties: Mapping[str, str]) -> None:
        self.print_timestamp = property_bool(properties, "print.timestamp")
        self.print_partition = property_bool(properties, "print.partition")
        self.print_offset = property_bool(properties, "print.offset")
        self.print_key = property_bool(properties, "print.key")
        self.print_value = property_bool(properties, "print.value", True)
        self.key_separator = properties.get("key.separator", "\t").encode("utf-8")
        self.line_separator = properties.get("line.separator", "\n").encode("utf-8")
        self.null_literal = properties.get("null.literal", "null").encode("utf-8")
        self.print_headers = property_bool(properties, "print.headers")
        self.headers_separator = properties.get("headers.separator", ",").encode("utf-8")
        self.headers_key_separator = properties.get("headers.key.separator", ":").encode("utf-8")

    def format(self, partition: int, offset: int, key: bytes | None, value: bytes | None, timestamp: int, headers: Sequence[HeaderLike] = ()) -> bytes:
        """One record as printed.

        Args:
            partition: Its partition.
            offset: Its offset.
            key: Its key (None for a null key).
            value: Its value (None for a null value).
            timestamp: Its timestamp (ms since the epoch; -1 for none).
            headers: Its headers, ``(key, value)`` pairs or `kclient.Header`
                values (a null value prints as ``null.literal``).

        Returns:
            The bytes to write, ``line.separator`` included.
        """
        fields: list[bytes] = []
        if self.print_timestamp:
            fields.append(b"NO_TIMESTAMP" if timestamp < 0 else b"CreateTime:%d" % timestamp)
        if self.print_partition:
            fields.append(b"Partition:%d" % partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % offset)
        if self.print_headers:
            if not headers:
                fields.append(b"NO_HEADERS")
            else:
                fields.append(
                    self.headers_separator.join(
                        k.encode("utf-8") + self.headers_key_separator + (self.null_literal if v is None else bytes(v))
                        for k, v in (h if isinstance(h, tuple) else (h.key, h.value) for h in headers)
                    )
                )
        if self.print_key:
            fields.append(self.null_literal if key is None else bytes(key))
        if self.print_value:
            fields.append(self.null_literal if value is None else bytes(value))
        return self.key_separator.join(fields) + self.line_separator


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``console-consumer`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = add_console_parser(
        subparsers,
        "console-consumer",
        client="consumer",
        help="print a topic's records (kafka-console-consumer.sh)",
        description="Read a topic (every partition, or --partition) and print its records to stdout.",
        topic_help="the topic to read",
        property_help="formatter property: print.key, key.separator, print.offset, ...",
    )
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", help="earliest, latest (default) or an offset (needs --partition)")
    p.add_argument("--from-beginning", action="store_true", help="start at the log start (as --offset earliest)")
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("--timeout-ms", type=int, help="exit when no record arrived for this long (ms)")
    p.add_argument("--group", help="consume as a member of this consumer group, committing the offsets printed")
    p.set_defaults(func=run)


def _start_offset(args: ConsoleConsumerArguments) -> int | str:
    """``"earliest"``, ``"latest"`` or an offset, from the arguments."""
    if args.offset is None:
        return "earliest" if args.from_beginning else "latest"
    if args.from_beginning:
        raise ConfigError("--from-beginning and --offset cannot be used together")
    text = args.offset.strip().lower()
    if text in ("earliest", "latest"):
        return text
    if not text.isdigit():
        raise ConfigError(f"--offset {args.offset!r}: expected earliest, latest or a non-negative offset")
    if args.partition is None:
        raise ConfigError("--offset N needs --partition")
    return int(text)


def _check_limits(args: ConsoleConsumerArguments) -> None:
    """Raise `ConfigError` for a negative ``--max-messages`` or ``--timeout-ms``."""
    if args.max_messages is not None and args.max_messages < 0:
        raise ConfigError(f"--max-messages {args.max_messages}: expected a non-negative count")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise ConfigError(f"--timeout-ms {args.timeout_ms}: expected a non-negative time")


def _partitions(metadata: ClusterMetadata, topic: str, partition: int | None) -> tuple[PartitionInfo, ...]:
    """The partitions to read (`kclient.client.cluster.PartitionInfo`):
    the topic's, or the one ``--partition`` names.

    Raises:
        UnknownTopicOrPartitionError: No such topic or partition.
    """
    parts = metadata.partitions_for(topic)
    if metadata.topic_errors.get(topic, 0) or not parts:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    if partition is not None:
        parts = tuple(p for p in parts if p.partition == partition)
        if not parts:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
    return parts


class _ConsoleReader:
    """What the console consumer reads and has printed: one
    `SimpleConsumer` per partition leader, each partition's next offset,
    and how many records were printed (up to ``limit``)."""

    def __init__(self, topic: str, formatter: MessageFormatter, out: IO[bytes], limit: int | None) -> None:
        self.topic = topic
        self.formatter = formatter
        self.out = out
        self.limit = limit
        self.processed = 0
        self.consumers: dict[tuple[str, int], SimpleConsumer] = {}
        #: leader address -> {partition: next offset}
        self.positions: dict[tuple[str, int], dict[int, int]] = {}

    @property
    def done(self) -> bool:
        """Whether ``--max-messages`` records were printed."""
        return self.limit is not None and self.processed >= self.limit

    def open(self, metadata: ClusterMetadata, parts: Sequence[PartitionInfo], start: int | str, properties: Mapping[str, str]) -> None:
        """Connect to the partitions' leaders and find each start offset.

        Args:
            metadata: The topic's `kclient.client.cluster.ClusterMetadata`.
            parts: The partitions to read.
            start: ``"earliest"``, ``"latest"`` or an offset.
            properties: The consumer properties (security).
        """
        from kclient.client.consumer.simple import OffsetRequest, SimpleConsumer

        for part in parts:
            address = leader_address(metadata, part)
            if address not in self.consumers:
                self.consumers[address] = SimpleConsumer(*address, client_id="console-consumer", config=properties)
                self.positions[address] = {}
            if isinstance(start, int):
                offset = start
            else:
                when = OffsetRequest.EARLIEST_TIME if start == "earliest" else OffsetRequest.LATEST_TIME
                offsets = self.consumers[address].get_offsets_before(self.topic, part.partition, when, 1)
                offset = offsets[0] if offsets else 0
            self.positions[address][part.partition] = offset

    def poll(self, timeout_ms: int | None, stop: Callable[[], bool] = lambda: False) -> int:
        """One fetch from every leader (``POLL_MS`` long polls in all, at
        most ``timeout_ms``); prints what came.

        Args:
            timeout_ms: The longest to wait for records (ms), None for
                `POLL_MS`.
            stop: Looked at after each leader's fetch: true ends the poll.

        Returns:
            How many records were printed.
        """
        wait = POLL_MS // max(1, len(self.consumers))
        if timeout_ms is not None:
            wait = min(wait, timeout_ms)
        got = 0
        for address, consumer in self.consumers.items():
            got += self._fetch(consumer, self.positions[address], wait)
            if self.done or stop():
                break
        self.out.flush()
        return got

    def _fetch(self, consumer: SimpleConsumer, positions: dict[int, int], wait: int) -> int:
        from kclient.client.consumer.simple import FetchRequest

        requests = [FetchRequest(self.topic, p, o, FETCH_BYTES) for p, o in sorted(positions.items())]
        got = 0
        for message_set in consumer.multifetch(requests, max_wait_ms=wait, min_bytes=1):
            got += self._print(message_set, positions)
            if self.done:
                break
        return got

    def _print(self, message_set: ByteBufferMessageSet, positions: dict[int, int]) -> int:
        """Print a fetched partition's records (up to the limit) and move
        its position past them; returns how many were printed."""
        partition = message_set.partition
        printed = 0
        for mo in message_set:
            m = mo.message
            self.out.write(self.formatter.format(partition, mo.offset, m.key, m.payload, m.timestamp, m.headers))
            positions[partition] = mo.offset + 1
            self.processed += 1
            printed += 1
            if self.done:
                return printed
        # Past control batches too (transaction markers take an offset but
        # hand out no message): a log ending with one would otherwise answer
        # the long poll at once, forever.
        positions[partition] = max(positions[partition], message_set.next_offset)
        return printed

    def read(self, timeout_ms: int | None, stop: Callable[[], bool] = lambda: False) -> None:
        """Print records until the limit, until ``timeout_ms`` passed
        without one (never, without a timeout), or until ``stop()`` is true
        (looked at between fetches: what a fetch brought is printed and
        counted first)."""
        last_record = time.monotonic()
        while not self.done and not stop():
            if self.poll(timeout_ms, stop):
                last_record = time.monotonic()
            elif timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                break

    def close(self) -> None:
        """Flush the output and close the consumers."""
        try:
            self.out.flush()
        except (OSError, ValueError):
            pass
        for consumer in self.consumers.values():
            consumer.close()


def run(args: ConsoleConsumerArguments, stdout: IO[bytes] | None = None) -> int:
    """Run ``kclient console-consumer``.

    Once the arguments are checked it prints ``Processed a total of N
    messages`` on stderr exactly once, however it ends (the limit, the
    timeout, an error, or SIGINT / SIGTERM at any point): N is the number of
    records written to ``stdout``. A signal while it connects ends it at
    once; while it reads, it ends after the current fetch's records are
    printed and counted; a second signal cuts the closing short (see
    `kclient.tools.shutdown`).

    Args:
        args: The parsed arguments.
        stdout: Where records go (default ``sys.stdout.buffer``).

    Returns:
        0.

    Raises:
        ConfigError: Bad arguments.
        UnknownTopicOrPartitionError: No such topic or partition.
        KafkaError: The broker could not be reached or answered an error.
    """
    out = stdout if stdout is not None else sys.stdout.buffer
    formatter = MessageFormatter(parse_key_values(args.property, "--property"))
    props = client_properties(args.consumer_config, args.consumer_property, "--consumer-property")
    start = _start_offset(args)
    _check_limits(args)
    bootstrap = parse_bootstrap(args.bootstrap_server)
    group = group_id(args.group, props)
    if group is not None and (args.partition is not None or args.offset is not None):
        raise ConfigError("--group cannot be used with --partition or --offset")
    reader = GroupReader(args.topic, formatter, out, args.max_messages) if group is not None else _ConsoleReader(args.topic, formatter, out, args.max_messages)
    with shutdown_signals() as signals:
        try:
            with signals.raising():
                if isinstance(reader, GroupReader):
                    reader.open(group_config(args.bootstrap_server, str(group), args.from_beginning, props))
                else:
                    metadata = fetch_metadata(bootstrap, [args.topic], properties=props, allow_auto_create=True)
                    reader.open(metadata, _partitions(metadata, args.topic, args.partition), start, props)
            with signals.stopping():
                reader.read(args.timeout_ms, lambda: signals.requested)
        except KeyboardInterrupt:
            pass
        finally:
            _close(reader, signals)
    return 0


def _close(reader: _ConsoleReader | GroupReader, signals: ShutdownSignals) -> None:
    """Close the reader (a signal during the close, after a first one, cuts
    it short), then print the summary line whatever happened."""
    try:
        with signals.stopping():
            reader.close()
    except KeyboardInterrupt:
        pass
    finally:
        sys.stderr.write(f"Processed a total of {reader.processed} messages\n")
        sys.stderr.flush()
