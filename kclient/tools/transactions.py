"""``kclient transactions``: list the transactional ids the brokers'
transaction coordinators keep and describe one, as Kafka's
``kafka-transactions.sh`` (``list`` and ``describe``; KIP-664) does::

    kclient transactions --bootstrap-server 127.0.0.1:9092 --list
    TransactionalId  Coordinator  ProducerId  TransactionState
    app-1            1            1000        Ongoing
    kclient transactions --bootstrap-server 127.0.0.1:9092 --list --state Ongoing
    kclient transactions --bootstrap-server 127.0.0.1:9092 --describe --transactional-id app-1

``--list`` asks every broker (ListTransactions), optionally only the given
states (``--state``, repeatable, Kafka's names: ``Ongoing``,
``CompleteCommit``, ...), producer ids (``--producer-id``) or transactions
running longer than ``--duration-filter`` ms (KIP-994). ``--describe`` asks
the id's coordinator (FindCoordinator key type 1, then
DescribeTransactions) and prints Kafka's columns: ``CoordinatorId``,
``TransactionalId``, ``ProducerId``, ``ProducerEpoch``,
``TransactionState``, ``TransactionTimeoutMs``,
``CurrentTransactionStartTimeMs`` and ``TransactionDurationMs`` (``None``
when no transaction is ongoing) and ``TopicPartitions``
(``topic-partition``, comma-separated). Columns are laid out as Kafka's
tools lay out a table: each padded to its widest cell, ended by a tab.

An unknown transactional id is an error (``TransactionalIdNotFoundError``,
exit status 1); bad arguments give status 2; Ctrl-C status 130.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from kclient.errors import ConfigError
from kclient.tools.arguments import add_actions
from kclient.tools.common import add_bootstrap_argument, parse_bootstrap

if TYPE_CHECKING:
    from kclient.client.admin_transactions import TransactionDescription, TransactionListing

__all__ = [
    "DESCRIBE_COLUMNS",
    "LIST_COLUMNS",
    "TransactionsArguments",
    "describe_rows",
    "format_table",
    "list_rows",
    "register",
    "run",
]

#: Kafka's ``list`` columns.
LIST_COLUMNS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
#: Kafka's ``describe`` columns.
DESCRIBE_COLUMNS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)


class TransactionsArguments(Protocol):
    """The ``transactions`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    bootstrap_server: str
    describe: bool
    transactional_id: str | None
    state: list[str] | None
    producer_id: list[int] | None
    duration_filter: int | None
    timeout_ms: int
    list: bool  # last: the name hides the builtin in the rest of the class


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``transactions`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "transactions",
        help="list and describe transactions (kafka-transactions.sh)",
        description="List the transactional ids the brokers' transaction coordinators keep, or describe one: its state, "
        "producer id and epoch, timeout, start time and partitions, as kafka-transactions.sh does (KIP-664).",
    )
    add_bootstrap_argument(p)
    add_actions(p, {"list": "list the transactional ids (every broker)", "describe": "describe one transactional id (--transactional-id)"})
    p.add_argument("--transactional-id", metavar="ID", help="(--describe) the transactional id")
    p.add_argument("--state", action="append", metavar="STATE", help="(--list) only this state: Ongoing, CompleteCommit, ... (repeatable)")
    p.add_argument("--producer-id", action="append", type=int, metavar="ID", help="(--list) only this producer id (repeatable)")
    p.add_argument("--duration-filter", type=int, metavar="MS", help="(--list) only transactions running longer than this (ms, KIP-994)")
    p.add_argument("--timeout-ms", type=int, default=30_000, help="how long to wait for the brokers (ms, default 30000)")
    p.set_defaults(func=run)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table as Kafka's tools print one: every cell padded to its
    column's widest cell (the header included) and followed by a tab.

    Args:
        columns: The header.
        rows: The rows, cells as text.

    Returns:
        The text, one line per row after the header, ending with a newline.
    """
    lines = [tuple(columns), *(tuple(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    return "".join("".join(cell.ljust(w) + "\t" for cell, w in zip(line, widths)) + "\n" for line in lines)


def list_rows(listings: Sequence[TransactionListing]) -> list[tuple[str, ...]]:
    """The ``--list`` rows (`LIST_COLUMNS`).

    Args:
        listings: From `kclient.client.admin.AdminClient.list_transactions`.

    Returns:
        One row per listing.
    """
    return [(t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state) for t in listings]


def describe_rows(description: TransactionDescription, now_ms: int) -> list[tuple[str, ...]]:
    """The ``--describe`` row (`DESCRIBE_COLUMNS`).

    Args:
        description: From `kclient.client.admin.AdminClient.describe_transactions`.
        now_ms: The time the duration is measured to (ms since the epoch).

    Returns:
        One row.
    """
    d = description
    start = d.transaction_start_time_ms
    return [
        (
            str(d.coordinator_id),
            d.transactional_id,
            str(d.producer_id),
            str(d.producer_epoch),
            d.state,
            str(d.transaction_timeout_ms),
            "None" if start is None else str(start),
            "None" if start is None else str(now_ms - start),
            ",".join(f"{topic}-{partition}" for topic, partition in d.topic_partitions),
        )
    ]


def _check(args: TransactionsArguments) -> None:
    """Reject options of the other action.

    Raises:
        ConfigError: ``--describe`` without ``--transactional-id``, or an
            option of one action with the other.
    """
    if args.describe and not args.transactional_id:
        raise ConfigError("--describe needs --transactional-id")
    if args.describe and (args.state or args.producer_id or args.duration_filter is not None):
        raise ConfigError("--state, --producer-id and --duration-filter go with --list")
    if args.list and args.transactional_id:
        raise ConfigError("--transactional-id goes with --describe")


def run(args: TransactionsArguments) -> int:
    """Run ``kclient transactions``.

    Args:
        args: The parsed arguments.

    Returns:
        0.

    Raises:
        ConfigError: Bad arguments (status 2).
        TransactionalIdNotFoundError: ``--describe`` of an unknown id.
        KafkaError: A broker's error, or no broker reachable.
    """
    _check(args)
    parse_bootstrap(args.bootstrap_server)
    from kclient.client.admin import AdminClient

    config = {"bootstrap.servers": args.bootstrap_server, "default.api.timeout.ms": args.timeout_ms}
    with AdminClient(config) as admin:
        if args.list:
            listings = admin.list_transactions(args.state, args.producer_id, args.duration_filter)
            sys.stdout.write(format_table(LIST_COLUMNS, list_rows(listings)))
            return 0
        tid = str(args.transactional_id)
        description = admin.describe_transactions([tid])[tid]
        sys.stdout.write(format_table(DESCRIBE_COLUMNS, describe_rows(description, int(time.time() * 1000))))
    return 0
