"""The options ``console-producer`` and ``console-consumer`` share, as
Kafka's console tools name them: ``--bootstrap-server``, ``--topic``, the
line reader's or formatter's ``--property k=v``, the client's
``--producer-property`` / ``--consumer-property k=v`` and its
``--producer.config`` / ``--consumer.config FILE``."""

from __future__ import annotations

import argparse

from kclient.tools.common import add_bootstrap_argument

__all__ = ["add_console_parser"]


def add_console_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    client: str,
    help: str,
    description: str,
    topic_help: str,
    property_help: str,
) -> argparse.ArgumentParser:
    """Add a console tool's subcommand with the options both share.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
        name: The subcommand (``console-producer``).
        client: ``producer`` or ``consumer``: names ``--producer-property``
            (``args.producer_property``) and ``--producer.config``
            (``args.producer_config``).
        help: The subcommand's line in ``kclient --help``.
        description: Its ``--help`` description.
        topic_help: The help of ``--topic``.
        property_help: The help of ``--property`` (which properties the
            line reader or the formatter takes).

    Returns:
        The subcommand's parser, for its own options.
    """
    p = subparsers.add_parser(name, help=help, description=description)
    add_bootstrap_argument(p)
    p.add_argument("--topic", required=True, help=topic_help)
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE", help=property_help)
    p.add_argument(f"--{client}-property", action="append", default=[], metavar="KEY=VALUE", help=f"a {client} property, Kafka's name (repeatable)")
    p.add_argument(f"--{client}.config", dest=f"{client}_config", metavar="FILE", help=f"a {client} .properties file")
    return p
