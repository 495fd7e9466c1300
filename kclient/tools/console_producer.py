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
Kafka's ``LineMessageReader`` does.

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
import sys
from collections.abc import Iterator, Mapping
from typing import IO, Protocol

from kclient.errors import ConfigError
from kclient.tools.common import add_bootstrap_argument, client_properties, parse_bootstrap, parse_key_values, progress_bar, property_bool

__all__ = ["ConsoleProducerArguments", "LineReader", "register", "run"]

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


class LineReader:
    """Kafka's ``LineMessageReader``: turns input lines into ``(key,
    value)`` pairs of bytes.

    Args:
        properties: The ``--property`` values: ``parse.key`` (default
            false), ``key.separator`` (default a tab), ``ignore.error``
            (default false).
    """

    def __init__(self, properties: Mapping[str, str]) -> None:
        self.parse_key = property_bool(properties, "parse.key")
        self.ignore_error = property_bool(properties, "ignore.error")
        separator = properties.get("key.separator", "\t")
        if not separator:
            raise ConfigError("--property key.separator must not be empty")
        self.key_separator = separator.encode("utf-8")

    def records(self, stream: IO[bytes]) -> Iterator[tuple[bytes | None, bytes]]:
        """The records of a binary stream, one per line.

        Args:
            stream: The input (``sys.stdin.buffer``).

        Yields:
            ``(key, value)``; the key is None without ``parse.key``.

        Raises:
            ConfigError: ``parse.key`` and a line without the separator
                (unless ``ignore.error``).
        """
        for number, raw in enumerate(stream, 1):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            if not self.parse_key:
                yield None, line
                continue
            key, sep, value = line.partition(self.key_separator)
            if sep:
                yield key, value
            elif self.ignore_error:
                yield None, line
            else:
                shown = line.decode("utf-8", "replace")
                raise ConfigError(f"No key separator found on line number {number}: '{shown}'")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``console-producer`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "console-producer",
        help="send lines from stdin to a topic (kafka-console-producer.sh)",
        description="Read lines from stdin and send each as a record to the topic; close at end of input.",
    )
    add_bootstrap_argument(p)
    p.add_argument("--topic", required=True, help="the topic to produce to")
    p.add_argument("--sync", action="store_true", help="send synchronously, waiting for each acknowledgement")
    p.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        choices=CODECS,
        help="compression: none, gzip, snappy, lz4 or zstd (gzip if given without a value)",
    )
    p.add_argument("--request-required-acks", help="acks: 0, 1 or -1/all (default 1)")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE", help="line reader property: parse.key, key.separator, ignore.error")
    p.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE", help="a producer property, Kafka's name (repeatable)")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="a producer .properties file")
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


def run(args: ConsoleProducerArguments, stdin: IO[bytes] | None = None) -> int:
    """Run ``kclient console-producer``.

    Args:
        args: The parsed arguments.
        stdin: The input (default ``sys.stdin.buffer``).

    Returns:
        0 when every record was sent.

    Raises:
        ConfigError: Bad arguments, or a line without the key separator.
        FailedToSendMessageError: Records could not be delivered.
        KafkaError: Another client error.
    """
    from kclient.client.producer.data import ProducerData
    from kclient.client.producer.producer import Producer

    reader = LineReader(parse_key_values(args.property, "--property"))
    producer = Producer(producer_properties(args))
    bar = progress_bar(args.topic, " records")
    sent = 0
    try:
        for key, value in reader.records(stdin if stdin is not None else sys.stdin.buffer):
            producer.send(ProducerData(args.topic, key, [value]))
            sent += 1
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt:
        # Ctrl-C: send what was read, as Kafka's console producer does at
        # shutdown, waiting a bounded time.
        producer.close(timeout_ms=5000)
        return 130
    except BaseException:
        # Report the first error; what was read before it is still sent,
        # waiting a bounded time.
        try:
            producer.close(timeout_ms=5000)
        except Exception:
            pass
        raise
    finally:
        if bar is not None:
            bar.close()
    producer.close()
    return 0
