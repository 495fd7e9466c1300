"""``kclient cluster``: a development cluster in the foreground, ZooKeeper
plus N bundled brokers on loopback (`kclient.testing.Cluster`)::

    kclient cluster --brokers 3
    Cluster running: bootstrap.servers=127.0.0.1:40111,127.0.0.1:40112,127.0.0.1:40113 zookeeper.connect=127.0.0.1:2181/kclient-cluster-1a2b3c4d (Ctrl-C stops it)

Without ``--zookeeper`` it starts its own ZooKeeper (needs ``java`` and
ZooKeeper's jars); with one, the cluster lives under a chroot of its own
there. Each ``--override key=value`` is a broker property for every broker
(``server.properties`` names), on top of the cluster's short timeouts
(`kclient.testing.CLUSTER_DEFAULTS`). The line above is printed on stdout
once every broker is registered and a controller is elected. Ctrl-C or
SIGTERM stops the brokers and ZooKeeper and deletes their temporary data
(exit status 0); a broker that exits on its own stops the cluster with
status 1.
"""

from __future__ import annotations

import argparse
import logging
from typing import Protocol

__all__ = ["READY_LINE", "ClusterArguments", "register", "run"]

#: Printed on stdout once the cluster serves.
READY_LINE = "Cluster running: bootstrap.servers={bootstrap} zookeeper.connect={zookeeper} (Ctrl-C stops it)"

log = logging.getLogger("kclient.cli")


class ClusterArguments(Protocol):
    """The ``cluster`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    brokers: int
    zookeeper: str | None
    chroot: str | None
    override: list[str]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``cluster`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "cluster",
        help="run a development cluster (ZooKeeper + N brokers) in the foreground",
        description="Start ZooKeeper (unless --zookeeper is given) and N bundled brokers on loopback, print the "
        "bootstrap string, and run until Ctrl-C.",
    )
    p.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3; ids 1..N)")
    p.add_argument("--zookeeper", metavar="HOST:PORT", help="use this ZooKeeper (default: start one)")
    p.add_argument("--chroot", help="the cluster's ZooKeeper chroot (default kclient-cluster-<random>)")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker property for every broker, e.g. --override min.insync.replicas=2 (repeatable)",
    )
    p.set_defaults(func=run)


def run(args: ClusterArguments) -> int:
    """Run ``kclient cluster`` until SIGINT/SIGTERM.

    Args:
        args: The parsed arguments.

    Returns:
        0 once stopped by a signal; 1 if the cluster cannot start or a
        broker exits on its own.

    Raises:
        ConfigError: Bad arguments.
    """
    from kclient.config.files import parse_overrides
    from kclient.errors import ConfigError
    from kclient.testing import Cluster
    from kclient.tools.common import serve_in_foreground

    if args.brokers < 1:
        raise ConfigError(f"--brokers {args.brokers}: a cluster needs at least one broker")
    properties = parse_overrides(args.override)
    for reserved in ("broker.id", "zookeeper.connect", "port", "log.dirs", "host.name"):
        if reserved in properties:
            raise ConfigError(f"--override {reserved}: set by kclient cluster for each broker")
    cluster = Cluster(brokers=args.brokers, properties=properties, zookeeper=args.zookeeper, chroot=args.chroot)

    def exited() -> str | None:
        dead = [bid for bid, b in sorted(cluster.brokers.items()) if not b.running]
        if not dead:
            return None
        tail = [line for line in cluster.brokers[dead[0]].output().splitlines() if line.strip()][-1:] or ["(no output)"]
        return f"broker {dead[0]} exited on its own; last log line: {tail[0]}"

    def ready() -> str:
        return READY_LINE.format(bootstrap=cluster.bootstrap, zookeeper=cluster.zookeeper_connect)

    return serve_in_foreground("the cluster", cluster.start, ready, exited, cluster.cleanup, log)
