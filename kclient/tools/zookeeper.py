"""``kclient zookeeper``: a development ZooKeeper in the foreground, like
Kafka's ``zookeeper-server-start.sh`` (standalone, for one machine)::

    kclient zookeeper --port 2181 --data-dir /tmp/zk
    ZooKeeper running, zookeeper.connect=127.0.0.1:2181 (Ctrl-C stops it)

It runs `kclient.testing.ZooKeeperProcess` (needs ``java`` and ZooKeeper's
jars, e.g. Debian's ``zookeeper`` package). Once it serves, the connect
string is printed on stdout (one line; ``--port 0``, the default, picks a
free port). Ctrl-C or SIGTERM stops it and exits with status 0. Without
``--data-dir`` the data lives in a temporary directory deleted at exit.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Protocol

from kclient.tools.ports import ensure_free

__all__ = ["READY_LINE", "ZooKeeperArguments", "register", "run"]

#: Printed on stdout once ZooKeeper serves (``{connect}``: ``host:port``).
READY_LINE = "ZooKeeper running, zookeeper.connect={connect} (Ctrl-C stops it)"

log = logging.getLogger("kclient.cli")


class ZooKeeperArguments(Protocol):
    """The ``zookeeper`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    port: int
    host: str
    data_dir: str | None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``zookeeper`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "zookeeper",
        help="run a development ZooKeeper in the foreground (zookeeper-server-start.sh)",
        description="Start a standalone ZooKeeper (needs java and the ZooKeeper jars), print its connect string, "
        "and run until Ctrl-C.",
    )
    p.add_argument("--port", type=int, default=0, help="client port (default 0: a free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--data-dir", help="ZooKeeper's dataDir (default: a temporary directory deleted at exit)")
    p.set_defaults(func=run)


def run(args: ZooKeeperArguments) -> int:
    """Run ``kclient zookeeper`` until SIGINT/SIGTERM.

    Args:
        args: The parsed arguments.

    Returns:
        0 once stopped by a signal; 1 if ZooKeeper cannot start or exits on
        its own.

    Raises:
        OSError: ``--port`` is taken (the message names the address).
    """
    from kclient.testing import ZooKeeperProcess
    from kclient.tools.common import serve_in_foreground

    if not 0 <= args.port <= 65535:
        log.error("--port %s: expected 0-65535", args.port)
        return 2
    # A ZooKeeper that cannot bind exits only after another server on the
    # port answered its readiness probe: check the port first.
    ensure_free(args.host, args.port)
    zk = ZooKeeperProcess(host=args.host, port=args.port)
    if args.data_dir:
        zk.data_dir = Path(args.data_dir).resolve()

    def exited() -> str | None:
        if zk.running:
            return None
        tail = [line for line in zk.output().splitlines() if line.strip()][-1:] or ["(no output)"]
        return f"ZooKeeper exited on its own; last log line: {tail[0]}"

    return serve_in_foreground("ZooKeeper", zk.start, lambda: READY_LINE.format(connect=zk.connect), exited, zk.cleanup, log)
