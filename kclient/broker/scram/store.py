"""Users' SCRAM credentials in ZooKeeper, as Kafka's ZooKeeper mode keeps
them (KIP-84): ``/config/users/<url-encoded name>`` holds
``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
server_key=...,iterations=8192", "producer_byte_rate":"1024"}}``. Writing
credentials keeps the node's other entries (quotas), and announces the
change with a ``/config/changes/config_change_<n>`` node naming
``users/<name>`` (`kclient.broker.config_changes`), as Kafka's
``AdminZkClient.changeConfigs`` does. Blocking: call from a worker thread.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping

from kclient.broker.config_changes import notify_entity_change
from kclient.security.credentials import scram_user_path
from kclient.zk.client import ZkClient

__all__ = ["ZkScramStore"]

_USERS = "/config/users"


def _config_of(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    try:
        config = json.loads(data).get("config", {})
    except (ValueError, AttributeError, UnicodeDecodeError):
        return {}
    return {str(k): str(v) for k, v in config.items()} if isinstance(config, dict) else {}


class ZkScramStore:
    """Reads and writes users' config nodes (blocking).

    Args:
        zk: A started `ZkClient`.
    """

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    def read(self, user: str) -> dict[str, str]:
        """A user's config (SCRAM credentials and quotas); empty if it has none."""
        return _config_of(self.zk.get(scram_user_path(user)))

    def read_all(self) -> dict[str, dict[str, str]]:
        """Every user node's config, by (decoded) user name."""
        return {urllib.parse.unquote(child): _config_of(self.zk.get(f"{_USERS}/{child}")) for child in self.zk.get_children(_USERS)}

    def write(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Replace users' configs and announce each change to every broker.

        Args:
            configs: User name -> its whole config.
        """
        for user, config in configs.items():
            path = scram_user_path(user)
            data = json.dumps({"version": 1, "config": dict(config)}, separators=(",", ":")).encode("utf-8")
            self.zk.write_persistent(path, data)
            notify_entity_change(self.zk, path[len("/config/"):])
