"""The ``kclient`` command line (argparse, stdlib).

Subcommands: ``broker`` (below), ``cluster`` (ZooKeeper plus N brokers in
the foreground, see `kclient.tools.cluster`), the console tools Kafka users know
(``zookeeper``, ``console-producer``, ``console-consumer``, ``topics``,
``get-offsets``, ``consumer-groups``: see `kclient.tools`), ``dump-log`` and ``configs`` (SCRAM
users in ZooKeeper like ``kafka-configs.sh``, see `kclient.tools.configs`).
``kclient --version`` prints the version.

``kclient broker [server.properties] [--override key=value ...]``
    Run the bundled broker, the way Kafka's ``kafka-server-start.sh`` takes
    a properties file and overrides. Once it listens it prints one line per
    listener to stdout, ``kclient broker listening on HOST:PORT (NAME)``
    (the advertised host and the bound port, also when port 0 asked for a
    free one), all in one write, which `kclient.testing.BrokerProcess`
    waits for. Without ``host.name`` or ``listeners`` it binds 127.0.0.1
    only. SIGINT/SIGTERM stop it
    cleanly: connections are closed, logs flushed and closed, exit status 0.

Logging goes to stderr (``-v`` for DEBUG, ``-q`` for warnings only).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

import trio

log = logging.getLogger("kclient.cli")

#: The line printed on stdout per listener once the broker listens;
#: ``{host}``/``{port}`` are the advertised host and the bound port,
#: ``{name}`` the listener name. The first line is the first listener's.
LISTENING_LINE = "kclient broker listening on {host}:{port} ({name})"

_SubcommandAdder = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def _add_broker(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    p.set_defaults(func=_cmd_broker)


#: Subcommand registrars, in help order. Later issues append theirs.
def _add_dump_log(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from kclient.tools.dump_log import register

    register(subparsers)


def _add_configs(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from kclient.tools.configs import register

    register(subparsers)


def _registrar(module: str) -> _SubcommandAdder:
    """A registrar importing ``kclient.tools.<module>`` and calling its
    ``register``."""

    def add(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        import importlib

        importlib.import_module(f"kclient.tools.{module}").register(subparsers)

    add.__name__ = f"_add_{module}"
    return add


SUBCOMMANDS: list[_SubcommandAdder] = [
    _add_broker,
    _registrar("zookeeper"),
    _registrar("cluster"),
    _registrar("console_producer"),
    _registrar("console_consumer"),
    _registrar("topics"),
    _registrar("get_offsets"),
    _registrar("consumer_groups"),
    _add_dump_log,
    _add_configs,
]

#: Subcommands that talk to a broker as a client: without ``-v`` only their
#: own one-line warnings and errors reach stderr (Kafka's
#: tools-log4j.properties is as quiet), so their output stays what a script
#: expects.
CLIENT_TOOLS = frozenset({"console-producer", "console-consumer", "topics", "get-offsets", "consumer-groups"})


def _version() -> str:
    from kclient import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    """The ``kclient`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="kclient", description="kclient: Kafka-protocol client SDK and bundled broker")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v: DEBUG)")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    parser.add_argument("--version", action="version", version=f"kclient {_version()}", help="print kclient's version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


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


def _cmd_broker(args: argparse.Namespace) -> int:
    from kclient.config import BrokerConfig

    config = BrokerConfig.from_file(args.properties, args.override)

    def announce(broker: Any) -> None:
        """Print the listening lines in one write (the one thing the CLI
        prints rather than logs: BrokerProcess reads them)."""
        lines = [
            LISTENING_LINE.format(host=runtime.advertised_host, port=runtime.port, name=runtime.name)
            for runtime in broker.listeners
        ]
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()

    trio.run(lambda: run_broker_until_signalled(config, on_listening=announce))
    return 0


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line (the first line; the type name
    when the message is empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (``kclient`` in pyproject.toml).

    Configuration errors print a one-line message and give status 2;
    Kafka errors (an unreachable broker, a refused request) and OS errors a
    one-line message and status 1, never a traceback.

    Args:
        argv: The arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    from kclient.errors import ConfigError, KafkaError, ZooKeeperError

    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose, args.quiet)
    if args.command in CLIENT_TOOLS and not args.verbose:
        # One line per failure: the client's own ERROR logs (a failed batch,
        # a lost connection) would repeat what the tool reports (-v shows them).
        logging.getLogger("kclient").setLevel(logging.CRITICAL)
        logging.getLogger("kclient.cli").setLevel(logging.WARNING)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        log.error("%s", _one_line(exc))
        return 2
    except ZooKeeperError as exc:
        log.error("%s", exc)
        return 1
    except KafkaError as exc:
        log.error("%s: %s", type(exc).__name__, _one_line(exc))
        return 1
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        log.error("%s", _one_line(exc))
        return 1
    finally:
        logging.shutdown()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
