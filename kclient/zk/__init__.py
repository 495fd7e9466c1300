"""ZooKeeper: the paths and JSON documents of Kafka's layout
(`kclient.zk.paths`, pure) and a kazoo-based client bridged into trio
(`kclient.zk.client`). Seed 003 "ZooKeeper 目录"."""

from kclient.zk.paths import *  # noqa: F403
from kclient.zk.paths import __all__ as _paths_all

__all__ = list(_paths_all)
