"""The two required option groups of the ``kafka-*.sh``-like subcommands
(``topics``, ``configs``, ``consumer-groups``): where the tool connects,
``--bootstrap-server`` or ``--zookeeper``, and which one action it runs
(Kafka's tools: "Command must include exactly one action").
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from functools import partial

__all__ = ["add_actions", "add_cluster_choice"]


def add_cluster_choice(
    parser: argparse.ArgumentParser,
    *,
    bootstrap_help: str,
    zookeeper_help: str,
    bootstrap_flags: Sequence[str] = ("--bootstrap-server",),
    bootstrap_metavar: str = "HOST:PORT[,...]",
    zookeeper_first: bool = False,
) -> None:
    """Add ``--bootstrap-server`` and ``--zookeeper``, exactly one of them
    required (``args.bootstrap_server`` and ``args.zookeeper``, the unused
    one None).

    Args:
        parser: The subcommand's parser.
        bootstrap_help: The help of ``--bootstrap-server``.
        zookeeper_help: The help of ``--zookeeper`` (``HOST:PORT[/CHROOT]``).
        bootstrap_flags: ``--bootstrap-server`` and its aliases (such as
            ``--broker-list``); the first names ``args.bootstrap_server``.
        bootstrap_metavar: How ``--help`` shows its value.
        zookeeper_first: List ``--zookeeper`` first in ``--help`` (the
            tools where ZooKeeper is the usual way).
    """
    where = parser.add_mutually_exclusive_group(required=True)
    bootstrap = partial(where.add_argument, *bootstrap_flags, dest="bootstrap_server", metavar=bootstrap_metavar, help=bootstrap_help)
    zookeeper = partial(where.add_argument, "--zookeeper", metavar="HOST:PORT[/CHROOT]", help=zookeeper_help)
    for add in (zookeeper, bootstrap) if zookeeper_first else (bootstrap, zookeeper):
        add()


def add_actions(parser: argparse.ArgumentParser, actions: Mapping[str, str]) -> None:
    """Add the subcommand's action flags, exactly one of them required.

    Args:
        parser: The subcommand's parser.
        actions: ``{flag: help}`` in ``--help`` order, each flag without
            its dashes (``{"list": "list the topic names", ...}`` adds
            ``--list``, a boolean ``args.list``).
    """
    group = parser.add_mutually_exclusive_group(required=True)
    for name, text in actions.items():
        group.add_argument(f"--{name}", action="store_true", help=text)
