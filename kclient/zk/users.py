"""SCRAM users in ZooKeeper, as ``kafka-configs.sh --entity-type users``
writes them (KIP-84).

A user's config is the node ``/config/users/<url-encoded name>`` holding
``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
server_key=...,iterations=4096", ...}}``; every change also creates a
sequential ``/config/changes/config_change_<n>`` node holding
``{"version":2,"entity_path":"users/<name>"}`` so that Kafka brokers re-read
it (kclient's broker reads the user node at each SCRAM login).

Blocking functions (kazoo); call them from a worker thread in trio code::

    from kclient.zk.users import add_scram_user
    add_scram_user("127.0.0.1:2181", "alice", {"SCRAM-SHA-256": "alice-secret"})
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping

from kclient.errors import ConfigError
from kclient.security.sasl import (
    SCRAM_MECHANISMS,
    SCRAM_MIN_ITERATIONS,
    make_scram_credential,
    scram_user_path,
)
from kclient.zk.client import ZkClient

__all__ = ["add_scram_user", "alter_user_config", "delete_user_config", "describe_user_config"]

_CHANGES = "/config/changes/config_change_"


@contextlib.contextmanager
def _session(zookeeper: str | ZkClient) -> Iterator[ZkClient]:
    if isinstance(zookeeper, ZkClient):
        yield zookeeper
        return
    client = ZkClient(zookeeper, connection_timeout_ms=10000)
    client.start()
    try:
        yield client
    finally:
        client.close()


def _read(client: ZkClient, username: str) -> dict[str, str]:
    path = scram_user_path(username)
    data = client.get(path)
    if not data:
        return {}
    try:
        node = json.loads(data)
        config = node.get("config", {})
        if not isinstance(config, dict):
            raise ValueError
    except (ValueError, AttributeError, UnicodeDecodeError):
        raise ConfigError(f"Invalid user config at {path}: not {{\"version\":1,\"config\":{{...}}}}") from None
    return {str(k): str(v) for k, v in config.items()}


def _write(client: ZkClient, username: str, config: Mapping[str, str]) -> None:
    path = scram_user_path(username)
    data = json.dumps({"version": 1, "config": dict(config)}, separators=(",", ":")).encode("utf-8")
    client.write_persistent(path, data)
    entity = path[len("/config/"):]
    client.ensure_path("/config/changes")
    client.kazoo.create(
        _CHANGES, json.dumps({"version": 2, "entity_path": entity}).encode("utf-8"), sequence=True
    )


def alter_user_config(
    zookeeper: str | ZkClient,
    username: str,
    add: Mapping[str, str] | None = None,
    delete: tuple[str, ...] | list[str] = (),
    *,
    iterations: Mapping[str, int] | None = None,
) -> dict[str, str]:
    """Change a user's config as ``kafka-configs.sh --alter`` does.

    SCRAM entries of ``add`` are passwords, stored as salted credentials
    (never the password); other entries (quotas) are stored as given.

    Args:
        zookeeper: ``zookeeper.connect`` (``"host:port[/chroot]"``) or a
            started `ZkClient`.
        username: The user.
        add: Config name -> value; ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` ->
            password.
        delete: Config names to remove.
        iterations: SCRAM mechanism -> iteration count (default 4096).

    Returns:
        The user's config as now stored.

    Raises:
        ConfigError: an empty user name, a bad iteration count, an empty password.
        kclient.errors.ZooKeeperError: ZooKeeper failed.
    """
    if not username:
        raise ConfigError("Invalid entity name: the user name is empty")
    with _session(zookeeper) as client:
        config = _read(client, username)
        for key in delete:
            config.pop(key, None)
        for key, value in (add or {}).items():
            if key in SCRAM_MECHANISMS:
                count = (iterations or {}).get(key, SCRAM_MIN_ITERATIONS)
                config[key] = str(make_scram_credential(key, value, iterations=count))
            else:
                config[key] = value
        _write(client, username, config)
        return config


def add_scram_user(
    zookeeper: str | ZkClient, username: str, passwords: Mapping[str, str], *, iterations: int = SCRAM_MIN_ITERATIONS
) -> None:
    """Add (or change) a SCRAM user, like ``kafka-configs.sh --alter
    --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users``.

    Args:
        zookeeper: ``zookeeper.connect`` or a started `ZkClient`.
        username: The user.
        passwords: Mechanism (``SCRAM-SHA-256``, ``SCRAM-SHA-512``) -> password.
        iterations: Iteration count (Kafka allows 4096..16384).

    Raises:
        ConfigError: an unknown mechanism, a bad iteration count, an empty password.
        kclient.errors.ZooKeeperError: ZooKeeper failed.
    """
    for mechanism in passwords:
        if mechanism not in SCRAM_MECHANISMS:
            raise ConfigError(f"Invalid SCRAM mechanism {mechanism!r}: expected {', '.join(SCRAM_MECHANISMS)}")
    alter_user_config(zookeeper, username, passwords, iterations=dict.fromkeys(passwords, iterations))


def delete_user_config(zookeeper: str | ZkClient, username: str, keys: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Remove config entries of a user (``--delete-config``).

    Args:
        zookeeper: ``zookeeper.connect`` or a started `ZkClient`.
        username: The user.
        keys: Config names, e.g. ``["SCRAM-SHA-512"]``.

    Returns:
        The user's config as now stored.
    """
    return alter_user_config(zookeeper, username, delete=keys)


def describe_user_config(zookeeper: str | ZkClient, username: str) -> dict[str, str]:
    """A user's config as stored (SCRAM entries are salted credentials).

    Args:
        zookeeper: ``zookeeper.connect`` or a started `ZkClient`.
        username: The user.

    Returns:
        Config name -> value; empty if the user has none.
    """
    with _session(zookeeper) as client:
        return _read(client, username)
