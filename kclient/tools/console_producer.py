"""``kclient console-producer``: send stdin's lines to a topic, with the
flags of Kafka's ``kafka-console-producer.sh``::

    kclient console-producer --bootstrap-server 127.0.0.1:9092 --topic events \\
        --property parse.key=true --property key.separator=:
    alice:hello
    bob:world

Each line (without its line ending) is one record's value, UTF-8 as typed.
With ``--property parse.key=true`` the part before the first
``key.separator`` (default a tab) is the key; a line without the separator
is an error (``ignore.error=true`` sends it without a key instead), as
Kafka's ``LineMessageReader`` does. ``--property parse.headers=true`` reads
headers first, Kafka 3.2's ``h1:v1,h2:v2<TAB>value`` (see
`kclient.tools.line_reader` for the separators and ``null.marker``).

Records go through the kclient `Producer`: async (batched) by default,
``--sync`` waits for each acknowledgement. ``--producer-property k=v`` and
``--producer.config FILE`` take any producer property under Kafka's names
(the security ones too: ``security.protocol``, ``sasl.*``, ``ssl.*``); the
command line wins over the file. At end of input the producer is closed
(everything flushed); a failure is one line on stderr and a non-zero exit
status. When stderr is a terminal, a ``tqdm`` counter shows progress.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Protocol

from kclient.errors import ConfigError, FailedToSendMessageError, KafkaError
from kclient.tools.common import client_properties, parse_bootstrap, parse_key_values, progress_bar
from kclient.tools.console_arguments import add_console_parser
from kclient.tools.line_reader import LineReader, LineRecord
from kclient.tools.messages import error_message, line_ranges
from kclient.tools.shutdown import ShutdownSignals, shutdown_signals

if TYPE_CHECKING:
    from kclient.client.producer.producer import Producer

__all__ = ["ConsoleProducerArguments", "Deliveries", "LineReader", "read_lines", "register", "run"]  # LineReader: re-export

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class ConsoleProducerArguments(Protocol):
    """The ``console-producer`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    bootstrap_server: str
    topic: str
    sync: bool
    compression_codec: str | None
    request_required_acks: str | None
    property: list[str]
    producer_property: list[str]
    producer_config: str | None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``console-producer`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = add_console_parser(
        subparsers,
        "console-producer",
        client="producer",
        help="send lines from stdin to a topic (kafka-console-producer.sh)",
        description="Read lines from stdin and send each as a record to the topic; close at end of input.",
        topic_help="the topic to produce to",
        property_help="line reader property: parse.key, key.separator, parse.headers, headers.delimiter, headers.separator, "
        "headers.key.separator, null.marker, ignore.error",
    )
    p.add_argument("--sync", action="store_true", help="send synchronously, waiting for each acknowledgement")
    p.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        choices=CODECS,
        help="compression: none, gzip, snappy, lz4 or zstd (gzip if given without a value)",
    )
    p.add_argument("--request-required-acks", help="acks: 0, 1 or -1/all (default 1)")
    p.set_defaults(func=run)


def producer_properties(args: ConsoleProducerArguments) -> dict[str, str]:
    """The producer properties of the command line.

    ``--producer.config``, then ``--producer-property``, then the dedicated
    flags (``--bootstrap-server``, ``--sync``, ``--compression-codec``,
    ``--request-required-acks``) on top.

    Args:
        args: The parsed arguments.

    Returns:
        Kafka property names -> values.

    Raises:
        ConfigError: A bad file or ``k=v`` entry.
    """
    from kclient.config.producer import ProducerConfig

    # Keys of the file the producer does not take are logged and left out,
    # as Kafka's tools do (issue 27); a --producer-property typo fails.
    props = client_properties(args.producer_config, args.producer_property, "--producer-property", keep=ProducerConfig.select_known)
    for alias in ("bootstrap.servers", "metadata.broker.list"):
        props.pop(alias, None)
    props["metadata.broker.list"] = ",".join(f"{h}:{p}" for h, p in parse_bootstrap(args.bootstrap_server))
    if args.sync:
        props["producer.type"] = "sync"
    else:
        props.setdefault("producer.type", "async")
    if args.compression_codec is not None:
        props.pop("compression.type", None)
        props["compression.codec"] = args.compression_codec
    if args.request_required_acks is not None:
        props.pop("acks", None)
        props["request.required.acks"] = args.request_required_acks
    props.setdefault("client.id", "console-producer")
    return props


def read_lines(stream: IO[bytes], signals: ShutdownSignals) -> Iterator[bytes]:
    """The lines of ``stream`` as they arrive (each with its ``\\n``; the
    last one may lack it), until end of input or until a stop is asked for.

    Reads the file descriptor itself (no buffer keeps lines that were read
    but not handed out): every line read is yielded before the stop is
    looked at, and a stop asked for while it waits for input ends it at
    once. A stream without a file descriptor is iterated, the stop looked
    at between lines.

    Args:
        stream: The input (``sys.stdin.buffer``).
        signals: The tool's `ShutdownSignals`.

    Yields:
        The lines.
    """
    try:
        fd = stream.fileno() if os.name == "posix" else -1  # select() waits on pipes on POSIX only
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd < 0:
        for line in stream:
            yield line
            if signals.requested:
                return
        return
    pending = b""
    while signals.wait_readable(fd):
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            yield line + b"\n"
    if pending:
        yield pending


class Deliveries:
    """What became of each line read (by line number, from 1): handed to
    the producer and acknowledged, failed, or never sent.

    `callback` is the producer's per-record delivery callback; the
    counters are safe to update from the producer's send thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Lines read so far.
        self.read = 0
        #: Lines the broker acknowledged.
        self.delivered = 0
        #: Lines given to the producer and not yet called back.
        self.pending: set[int] = set()
        #: Lines that failed, or were read and never sent.
        self.lost: list[int] = []
        #: The first failure.
        self.first_error: BaseException | None = None

    def sending(self, number: int) -> Callable[[object, BaseException | None], None]:
        """Line ``number`` is about to be sent; its callback.

        Args:
            number: The line number.

        Returns:
            The ``send(..., callback=)`` for it.
        """
        with self._lock:
            self.pending.add(number)
        return functools.partial(self._done, number)

    def _done(self, number: int, metadata: object, error: BaseException | None) -> None:
        with self._lock:
            self.pending.discard(number)
            if error is None:
                self.delivered += 1
                return
            self.lost.append(number)
            if self.first_error is None:
                self.first_error = error

    def fail(self, error: BaseException) -> None:
        """Note an error that is not one line's (a send refused, a close
        that failed), if none was noted yet."""
        with self._lock:
            if self.first_error is None:
                self.first_error = error

    def not_delivered(self) -> list[int]:
        """The lines read and not delivered: failed, never called back, or
        never given to the producer."""
        with self._lock:
            handed = self.delivered + len(self.lost) + len(self.pending)
            never_sent = range(handed + 1, self.read + 1) if handed < self.read else range(0)
            return sorted({*self.lost, *self.pending, *never_sent})

    def report(self) -> FailedToSendMessageError | None:
        """The error naming the lines not delivered, or None when every
        line read was delivered."""
        lost = self.not_delivered()
        if not lost:
            return None
        error = self.first_error
        if error is None:
            cause = " (interrupted)"
        elif isinstance(error, FailedToSendMessageError):  # its name once, in the report's
            cause = f": {str(error).strip().splitlines()[0]}"
        else:
            cause = f": {error_message(error)}"
        n = len(lost)
        read = f"{self.read} line{'s' if self.read != 1 else ''} read"
        which = f"line{'s' if n != 1 else ''} {line_ranges(lost)}"
        return FailedToSendMessageError(f"{n} of {read} {'was' if n == 1 else 'were'} not delivered ({which}){cause}", lost_messages=n)


def run(args: ConsoleProducerArguments, stdin: IO[bytes] | None = None) -> int:
    """Run ``kclient console-producer``.

    Every line read is sent, or named as lost in the error raised: on end of
    input, on a send error, and on SIGINT / SIGTERM (see
    `kclient.tools.shutdown`). A signal while the producer starts ends the
    tool at once (nothing was read); while it reads, the lines read are sent
    and the producer is closed, waiting at most 5 s; a second signal cuts
    the sending or the closing short (the lines not delivered then are named).

    Args:
        args: The parsed arguments.
        stdin: The input (default ``sys.stdin.buffer``).

    Returns:
        0 when every line was sent at end of input, 130 when stopped by a
        signal with every line read sent.

    Raises:
        ConfigError: Bad arguments, or a line without the key separator.
        FailedToSendMessageError: Lines read were not delivered (their
            numbers in the message).
        KafkaError: Another client error.
        KeyboardInterrupt: A signal while the producer started.
    """
    from kclient.client.producer.producer import Producer

    reader = LineReader(parse_key_values(args.property, "--property"))
    config = producer_properties(args)
    stream = stdin if stdin is not None else sys.stdin.buffer
    deliveries = Deliveries()
    with shutdown_signals() as signals:
        with signals.raising():
            producer = Producer(config)
        try:
            with signals.stopping():
                _send_lines(producer, args.topic, reader.records(read_lines(stream, signals)), deliveries)
        finally:
            _close(producer, deliveries, signals)
        lost = deliveries.report()
        if lost is not None:
            raise lost
        return 130 if signals.requested else 0


def _send_lines(producer: Producer, topic: str, records: Iterable[LineRecord], deliveries: Deliveries) -> None:
    """Send each record, counting it in ``deliveries``; a send error ends
    the sending (it is noted, not raised)."""
    from kclient.client.producer.data import ProducerData

    bar = progress_bar(topic, " records")
    try:
        for key, value, headers in records:
            deliveries.read += 1
            producer.send(ProducerData(topic, key, [value], headers=headers), callback=deliveries.sending(deliveries.read))
            if bar is not None:
                bar.update(1)
    except KafkaError as exc:
        if isinstance(exc, ConfigError):
            raise
        deliveries.fail(exc)
    except KeyboardInterrupt:
        pass
    finally:
        if bar is not None:
            bar.close()


def _close(producer: Producer, deliveries: Deliveries, signals: ShutdownSignals) -> None:
    """Close the producer: after a signal waiting at most 5 s, else until
    everything is acknowledged; a (further) signal meanwhile abandons the
    rest. What could not be delivered is in ``deliveries``."""
    try:
        with signals.stopping():
            producer.close(timeout_ms=5000 if signals.requested else None)
    except KafkaError as exc:
        deliveries.fail(exc)
    except KeyboardInterrupt:
        pass
