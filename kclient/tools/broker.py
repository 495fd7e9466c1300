"""``kclient broker [server.properties] [--override key=value ...]``: run
the bundled broker, the way Kafka's ``kafka-server-start.sh`` takes a
properties file and overrides.

Once it listens it prints one line per listener to stdout, ``kclient broker
listening on HOST:PORT (NAME)`` (the advertised host and the bound port,
also when port 0 asked for a free one), all in one write, which
`kclient.testing.BrokerProcess` waits for. Without ``host.name`` or
``listeners`` it binds 127.0.0.1 only. SIGINT/SIGTERM stop it cleanly:
connections are closed, logs flushed and closed, exit status 0. A listener
that cannot bind (a busy port) is one error line naming its address, exit
status 1.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any, Protocol

import trio

from kclient.tools.common import unwrap_group

__all__ = ["LISTENING_LINE", "BrokerArguments", "register", "run", "run_broker_until_signalled"]

log = logging.getLogger("kclient.cli")

#: The line printed on stdout per listener once the broker listens;
#: ``{host}``/``{port}`` are the advertised host and the bound port,
#: ``{name}`` the listener name. The first line is the first listener's.
LISTENING_LINE = "kclient broker listening on {host}:{port} ({name})"


class BrokerArguments(Protocol):
    """The ``broker`` arguments `register` defines (an `argparse.Namespace`
    has them)."""

    properties: str | None
    override: list[str]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``broker`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "broker",
        help="run the bundled Kafka-protocol broker",
        description="Run the bundled broker. Properties (server.properties names) come from the file, "
        "then from each --override key=value.",
    )
    p.add_argument("properties", nargs="?", help="a server.properties file (optional)")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one property, e.g. --override port=0 --override log.dirs=/tmp/k (repeatable)",
    )
    p.set_defaults(func=run)


async def run_broker_until_signalled(config: Any, *, on_listening: Callable[[Any], None] | None = None) -> None:
    """Run a `kclient.broker.Broker` until SIGINT or SIGTERM, then stop it cleanly.

    Also stops when the surrounding scope is cancelled. Must run in the main
    thread (signal handling).

    Args:
        config (kclient.config.BrokerConfig): The broker's configuration.
        on_listening: Called once the broker listens, with the started
            `kclient.broker.Broker` (its ``listeners`` hold each listener's
            bound port and advertised address).
    """
    from kclient.broker import Broker

    broker = Broker(config)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.serve)
            assert broker.state is not None
            if on_listening is not None:
                on_listening(broker)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def run(args: BrokerArguments) -> int:
    """Run ``kclient broker`` until SIGINT or SIGTERM.

    Args:
        args: The parsed arguments.

    Returns:
        0 once stopped by a signal.

    Raises:
        ConfigError: A bad property.
        OSError: A listener cannot bind (its address in the message).
    """
    from kclient.broker.gc_tuning import tune_gc
    from kclient.config import BrokerConfig

    config = BrokerConfig.from_file(args.properties, args.override)
    tune_gc()  # this process is a broker: requests of many partitions (issue 28)

    def announce(broker: Any) -> None:
        """Print the listening lines in one write (the one thing the CLI
        prints rather than logs: BrokerProcess reads them)."""
        lines = [
            LISTENING_LINE.format(host=runtime.advertised_host, port=runtime.port, name=runtime.name)
            for runtime in broker.listeners
        ]
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()

    # A listener that cannot bind (a busy port) fails inside the broker's
    # nursery: report that one error, not the exception group around it.
    unwrap_group(trio.run, lambda: run_broker_until_signalled(config, on_listening=announce))
    return 0
