"""The ``kclient`` command line (argparse, stdlib).

Subcommands: ``broker`` (the bundled broker, see `kclient.tools.broker`),
``cluster`` (ZooKeeper plus N brokers in the foreground, see
`kclient.tools.cluster`), the console tools Kafka users know
(``zookeeper``, ``console-producer``, ``console-consumer``, ``topics``,
``get-offsets``, ``consumer-groups``, ``transactions``: see `kclient.tools`), ``dump-log`` and
``configs`` (SCRAM users in ZooKeeper like ``kafka-configs.sh``, see
`kclient.tools.configs`) and ``acls`` (``kafka-acls.sh``, see
`kclient.tools.acls`). ``kclient --version`` prints the version.

This module imports only the standard library and two small modules of
kclient, and `main` takes over SIGINT and SIGTERM before it imports the
subcommands (see `kclient.tools.shutdown`): Ctrl-C right after start is a
request to stop for the console tools too.

Logging goes to stderr (``-v`` for DEBUG, ``-q`` for warnings only).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from kclient.tools.messages import error_message
from kclient.tools.shutdown import ShutdownSignals, installed_as_current

log = logging.getLogger("kclient.cli")

_SubcommandAdder = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def _registrar(module: str) -> _SubcommandAdder:
    """A registrar importing ``kclient.tools.<module>`` and calling its
    ``register``."""

    def add(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        import importlib

        importlib.import_module(f"kclient.tools.{module}").register(subparsers)

    add.__name__ = f"_add_{module}"
    return add


#: Subcommand registrars, in help order.
SUBCOMMANDS: list[_SubcommandAdder] = [
    _registrar("broker"),
    _registrar("zookeeper"),
    _registrar("cluster"),
    _registrar("console_producer"),
    _registrar("console_consumer"),
    _registrar("topics"),
    _registrar("get_offsets"),
    _registrar("consumer_groups"),
    _registrar("transactions"),
    _registrar("dump_log"),
    _registrar("configs"),
    _registrar("acls"),
]

#: Subcommands that talk to a broker as a client: without ``-v`` only their
#: own one-line warnings and errors reach stderr (Kafka's
#: tools-log4j.properties is as quiet), so their output stays what a script
#: expects.
CLIENT_TOOLS = frozenset({"console-producer", "console-consumer", "topics", "get-offsets", "consumer-groups", "transactions", "acls"})


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


class ToolFormatter(logging.Formatter):
    """The log format of ``kclient``: a tool's own warnings and errors (the
    ``kclient.cli`` logger) as one plain line, ``kclient COMMAND: error:
    message`` (argparse's style, no time stamp or logger name); everything
    else (the broker's log, the client's with ``-v``) with the time, level
    and logger.

    Args:
        prog: ``kclient COMMAND``.
    """

    def __init__(self, prog: str) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.prog = prog

    def format(self, record: logging.LogRecord) -> str:
        if record.name == log.name and record.levelno >= logging.WARNING:
            return f"{self.prog}: {record.levelname.lower()}: {record.getMessage()}"
        return super().format(record)


def _setup_logging(verbose: int, quiet: bool, prog: str) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ToolFormatter(prog))
    logging.basicConfig(level=level, handlers=[handler])


#: Subcommands that take SIGINT / SIGTERM as a request to stop (see
#: `kclient.tools.shutdown`); the others get Python's KeyboardInterrupt.
STOPS_ON_SIGNAL = frozenset({"console-producer", "console-consumer"})


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (``kclient`` in pyproject.toml).

    An error prints one line on stderr, ``kclient COMMAND: error: message``,
    never a traceback. Exit status: 2 for bad arguments (argparse's usage
    errors, and `ConfigError`: a bad property, a bad combination of
    flags), 1 for the other errors (a Kafka error, an unreachable broker, a
    missing group or topic, an OS error such as a busy port), 130 when
    interrupted (SIGINT), else what the command returns.

    SIGINT and SIGTERM that arrive while the command line is parsed are
    held for the console tools, which take them as a request to stop
    (`STOPS_ON_SIGNAL`, see `kclient.tools.shutdown`); the other commands
    then end with status 130.

    Args:
        argv: The arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    signals = ShutdownSignals()
    signals.install()
    # The tools quiet kclient's loggers; a caller running `main` in its own
    # process (a test, an app) gets its levels back.
    levels = {name: logging.getLogger(name).level for name in ("kclient", "kclient.cli")}
    try:
        with installed_as_current(signals):
            return _run(build_parser().parse_args(argv), signals)
    finally:
        signals.uninstall()
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        logging.shutdown()


def _run(args: argparse.Namespace, signals: ShutdownSignals) -> int:
    """Run the parsed command, its errors reported as `main` says."""
    from kclient.errors import ConfigError, KafkaError

    _setup_logging(args.verbose, args.quiet, f"kclient {args.command}")
    if args.command in CLIENT_TOOLS and not args.verbose:
        # One line per failure: the client's own ERROR logs (a failed batch,
        # a lost connection) would repeat what the tool reports (-v shows them).
        logging.getLogger("kclient").setLevel(logging.CRITICAL)
        logging.getLogger("kclient.cli").setLevel(logging.WARNING)
    if args.command not in STOPS_ON_SIGNAL:
        signals.uninstall()
        if signals.requested:
            return 130
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except (KafkaError, OSError) as exc:
        log.error("%s", error_message(exc))
        return 2 if isinstance(exc, ConfigError) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
