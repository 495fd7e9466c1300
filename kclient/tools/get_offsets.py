"""``kclient get-offsets``: a partition's offsets at a time, as Kafka's
``kafka-get-offsets.sh`` / ``kafka.tools.GetOffsetShell`` prints them::

    kclient get-offsets --bootstrap-server 127.0.0.1:9092 --topic events --time -1
    events:0:42
    events:1:17

``--time -1`` or ``latest`` (the default) is the log end offset, ``-2`` or
``earliest`` the log start offset (Kafka 3.x's GetOffsetShell takes both
spellings), any other value a timestamp in ms (the first offset whose record
is at or after it; nothing after the second colon when there is none).
``--partitions 0,1`` limits the partitions. Offsets are asked of each
partition's leader (ListOffsets v1+, as Kafka's admin client does).
"""

from __future__ import annotations

import argparse
import sys
from typing import Protocol

from kclient.errors import ConfigError, UnknownTopicOrPartitionError
from kclient.tools.common import (
    TOOL_TIMEOUT_MS,
    add_bootstrap_argument,
    client_properties,
    fetch_metadata,
    parse_bootstrap,
)

__all__ = ["TIME_NAMES", "GetOffsetsArguments", "parse_partitions", "parse_time", "register", "run"]

#: ``--time``'s names for ListOffsets' special timestamps (Kafka's
#: ``OffsetSpec``): -1 the log end offset, -2 the log start offset.
TIME_NAMES = {"latest": -1, "earliest": -2}


class GetOffsetsArguments(Protocol):
    """The ``get-offsets`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    bootstrap_server: str
    topic: str
    partitions: str | None
    time: int
    command_config: str | None


def parse_partitions(text: str | None) -> list[int] | None:
    """Parse ``--partitions 0,1,2``.

    Args:
        text: The option's value, or None.

    Returns:
        The partition ids, or None for every partition.

    Raises:
        ConfigError: An id that is not a non-negative integer.
    """
    if text is None or not text.strip():
        return None
    result = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit():
            raise ConfigError(f"--partitions {text!r}: {item!r} is not a partition id")
        result.append(int(item))
    return result


def parse_time(text: str) -> int:
    """Parse ``--time``: ``latest`` / ``-1``, ``earliest`` / ``-2``, or a
    timestamp in ms since the epoch.

    Args:
        text: The option's value.

    Returns:
        The ListOffsets timestamp (-1, -2 or the timestamp).

    Raises:
        argparse.ArgumentTypeError: Anything else (argparse reports it as
            a usage error).
    """
    name = text.strip().lower()
    if name in TIME_NAMES:
        return TIME_NAMES[name]
    try:
        value = int(name)
    except ValueError:
        value = -3
    if value < -2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected latest (-1), earliest (-2) or a timestamp in ms")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``get-offsets`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "get-offsets",
        help="print partition offsets (kafka-get-offsets.sh / GetOffsetShell)",
        description="Print topic:partition:offset for each partition: the log end offset (--time -1), "
        "the log start offset (-2) or the first offset at or after a timestamp in ms.",
    )
    add_bootstrap_argument(p)
    p.add_argument("--topic", required=True, help="the topic")
    p.add_argument("--partitions", help="comma-separated partition ids (default: all)")
    p.add_argument(
        "--time", type=parse_time, default=-1, metavar="TIME", help="latest or -1 (the default), earliest or -2, or a timestamp in ms"
    )
    p.add_argument("--command-config", help="a client .properties file (security settings)")
    p.set_defaults(func=run)


def run(args: GetOffsetsArguments) -> int:
    """Run ``kclient get-offsets``.

    Offsets are asked with ListOffsets v1+ (`kclient.AdminClient.list_offsets`),
    as Kafka's GetOffsetShell does: for a timestamp, the first offset whose
    record's timestamp is at or after it (none: nothing after the colon).

    Args:
        args: The parsed arguments.

    Returns:
        0.

    Raises:
        ConfigError: Bad arguments.
        UnknownTopicOrPartitionError: The topic or a listed partition does
            not exist.
        KafkaError: The broker could not be reached or answered an error.
    """
    from kclient.client.admin import AdminClient
    from kclient.config import AdminConfig

    bootstrap = parse_bootstrap(args.bootstrap_server)
    wanted = parse_partitions(args.partitions)
    props = client_properties(args.command_config, [], "--command-config", keep=AdminConfig.select_known)
    metadata = fetch_metadata(bootstrap, [args.topic], properties=props)
    code = metadata.topic_errors.get(args.topic, 0)
    parts = sorted(p.partition for p in metadata.partitions_for(args.topic))
    if code or not parts:
        raise UnknownTopicOrPartitionError(f"topic {args.topic!r} does not exist")
    if wanted is not None:
        missing = sorted(set(wanted) - set(parts))
        if missing:
            raise UnknownTopicOrPartitionError(f"topic {args.topic!r} has no partition {', '.join(map(str, missing))}")
        parts = sorted(set(wanted))
    config = {**props, "bootstrap.servers": args.bootstrap_server, "client.id": "kclient-get-offsets", "request.timeout.ms": TOOL_TIMEOUT_MS}
    with AdminClient(config) as admin:
        offsets = admin.list_offsets({(args.topic, p): args.time for p in parts})
    sys.stdout.write("".join(f"{args.topic}:{p}:{_shown(offsets.get((args.topic, p), -1))}\n" for p in parts))
    sys.stdout.flush()
    return 0


def _shown(offset: int) -> str:
    """An offset as printed: empty for none (-1: no record at or after the
    timestamp)."""
    return str(offset) if offset >= 0 else ""
