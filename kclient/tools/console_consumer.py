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
names); other consumer properties are accepted and ignored.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import IO, Any, Mapping, Sequence

from kclient.errors import ConfigError, UnknownTopicOrPartitionError
from kclient.tools._common import (
    add_bootstrap_argument,
    client_properties,
    fetch_metadata,
    leader_address,
    parse_bootstrap,
    parse_key_values,
    property_bool,
)

__all__ = ["MessageFormatter", "register", "run"]

#: The longest one fetch waits for data at the broker (ms).
POLL_MS = 500
#: Bytes asked per partition and fetch.
FETCH_BYTES = 1024 * 1024


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

    def format(self, partition: int, offset: int, key: bytes | None, value: bytes | None, timestamp: int, headers: Sequence[Any] = ()) -> bytes:
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


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``console-consumer`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "console-consumer",
        help="print a topic's records (kafka-console-consumer.sh)",
        description="Read a topic (every partition, or --partition) and print its records to stdout.",
    )
    add_bootstrap_argument(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", help="earliest, latest (default) or an offset (needs --partition)")
    p.add_argument("--from-beginning", action="store_true", help="start at the log start (as --offset earliest)")
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("--timeout-ms", type=int, help="exit when no record arrived for this long (ms)")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE", help="formatter property: print.key, key.separator, print.offset, ...")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE", help="a consumer property, Kafka's name (repeatable)")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="a consumer .properties file")
    p.set_defaults(func=run)


def _start_offset(args: argparse.Namespace) -> int | str:
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


def run(args: argparse.Namespace, stdout: IO[bytes] | None = None) -> int:
    """Run ``kclient console-consumer``.

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
    from kclient.client.consumer.simple import FetchRequest, OffsetRequest, SimpleConsumer

    out = stdout if stdout is not None else sys.stdout.buffer
    formatter = MessageFormatter(parse_key_values(args.property, "--property"))
    props: dict[str, Any] = client_properties(args.consumer_config, args.consumer_property, "--consumer-property")
    start = _start_offset(args)
    if args.max_messages is not None and args.max_messages < 0:
        raise ConfigError(f"--max-messages {args.max_messages}: expected a non-negative count")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise ConfigError(f"--timeout-ms {args.timeout_ms}: expected a non-negative time")
    bootstrap = parse_bootstrap(args.bootstrap_server)
    metadata = fetch_metadata(bootstrap, [args.topic], properties=props, allow_auto_create=True)
    code = metadata.topic_errors.get(args.topic, 0)
    parts = metadata.partitions_for(args.topic)
    if code or not parts:
        raise UnknownTopicOrPartitionError(f"topic {args.topic!r} does not exist")
    if args.partition is not None:
        parts = tuple(p for p in parts if p.partition == args.partition)
        if not parts:
            raise UnknownTopicOrPartitionError(f"topic {args.topic!r} has no partition {args.partition}")

    consumers: dict[tuple[str, int], SimpleConsumer] = {}
    # leader address -> {partition: next offset}
    positions: dict[tuple[str, int], dict[int, int]] = {}
    processed = 0
    try:
        for part in parts:
            address = leader_address(metadata, part)
            if address not in consumers:
                consumers[address] = SimpleConsumer(*address, client_id="console-consumer", config=props)
                positions[address] = {}
            if isinstance(start, int):
                offset = start
            else:
                time_ = OffsetRequest.EARLIEST_TIME if start == "earliest" else OffsetRequest.LATEST_TIME
                offsets = consumers[address].get_offsets_before(args.topic, part.partition, time_, 1)
                offset = offsets[0] if offsets else 0
            positions[address][part.partition] = offset
        limit = args.max_messages
        last_record = time.monotonic()
        while limit is None or processed < limit:
            got = 0
            for address, consumer in consumers.items():
                wait = POLL_MS // max(1, len(consumers))
                if args.timeout_ms is not None:
                    wait = min(wait, args.timeout_ms)
                requests = [FetchRequest(args.topic, p, o, FETCH_BYTES) for p, o in sorted(positions[address].items())]
                for message_set in consumer.multifetch(requests, max_wait_ms=wait, min_bytes=1):
                    complete = True
                    for mo in message_set:
                        m = mo.message
                        out.write(formatter.format(message_set.partition, mo.offset, m.key, m.payload, m.timestamp, m.headers))
                        positions[address][message_set.partition] = mo.offset + 1
                        processed += 1
                        got += 1
                        if limit is not None and processed >= limit:
                            complete = False
                            break
                    if complete:
                        # Past control batches too (transaction markers take an
                        # offset but hand out no message): a log ending with one
                        # would otherwise answer the long poll at once, forever.
                        position = positions[address][message_set.partition]
                        positions[address][message_set.partition] = max(position, message_set.next_offset)
                    if limit is not None and processed >= limit:
                        break
                if limit is not None and processed >= limit:
                    break
            out.flush()
            if got:
                last_record = time.monotonic()
            elif args.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= args.timeout_ms:
                break
    except KeyboardInterrupt:
        pass
    finally:
        try:
            out.flush()
        except (OSError, ValueError):
            pass
        for consumer in consumers.values():
            consumer.close()
        sys.stderr.write(f"Processed a total of {processed} messages\n")
        sys.stderr.flush()
    return 0
