"""Topic config changes in a ZooKeeper cluster, as Kafka's ZooKeeper-mode
brokers pass them on (Kafka's ``ZkConfigManager`` /
``ConfigChangeListener``; KIP-133).

The broker that alters a topic's configs (AlterConfigs,
IncrementalAlterConfigs) writes them to ``/config/topics/<topic>`` and
then a persistent sequential notification
``/config/changes/config_change_<10 digits>`` holding
``{"version":2,"entity_path":"topics/<topic>"}`` (version 1,
``{"version":1,"entity_type":"topics","entity_name":"<topic>"}``, is read
too). Every broker watches ``/config/changes`` (`ConfigChangeListener`)
and, for each notification newer than the last one it saw, applies the
topic's configs to its replicas
(`kclient.broker.replica_manager.ReplicaManager.topic_config_changed`):
no LeaderAndIsr is needed. Notifications present when the broker starts
are skipped (its LeaderAndIsr requests apply the current configs).
Notifications for client quota entities (``users/<user>``,
``users/<user>/clients/<client-id>``, ``clients/<client-id>``,
``ips/<ip>``; KIP-55, KIP-612) go to ``entity_changed``
(`kclient.broker.quotas.manager.QuotaManager.entity_changed`), which
re-reads that entity's node.
Notifications older than 15 minutes are deleted each time the
notifications are handled, as Kafka does
(`kclient.broker.change_notifications`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable

import trio

from kclient.broker.change_notifications import CHANGE_EXPIRATION_MS, purge_obsolete_notifications
from kclient.errors import KafkaError
from kclient.zk.client import TrioZk, ZkClient

__all__ = [
    "CHANGE_PREFIX",
    "CONFIG_CHANGES_PATH",
    "ConfigChangeListener",
    "changed_entity",
    "changed_topic",
    "notify_entity_change",
    "notify_topic_change",
]

log = logging.getLogger("kclient.broker")

CONFIG_CHANGES_PATH = "/config/changes"
CHANGE_PREFIX = "config_change_"


def notify_topic_change(zk: ZkClient, topic: str) -> str:
    """Tell every broker that ``topic``'s configs changed (blocking).

    Args:
        zk: A `kclient.zk.client.ZkClient`.
        topic: The topic whose ``/config/topics`` node was just written.

    Returns:
        The notification's path.
    """
    data = json.dumps({"version": 2, "entity_path": f"topics/{topic}"}).encode()
    return zk.create_sequential(f"{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}", data)


def notify_entity_change(zk: ZkClient, entity_path: str) -> str:
    """Tell every broker that the configs at ``/config/<entity_path>``
    changed (blocking; a quota entity such as ``users/alice``).

    Args:
        zk: A `kclient.zk.client.ZkClient`.
        entity_path: The entity's path under ``/config``.

    Returns:
        The notification's path.
    """
    data = json.dumps({"version": 2, "entity_path": entity_path}).encode()
    return zk.create_sequential(f"{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}", data)


def changed_entity(data: bytes | None) -> str | None:
    """The entity path (under ``/config``) a notification names, topics
    included (``topics/t``, ``users/alice``); None if unreadable."""
    try:
        note = json.loads(data or b"")
    except ValueError:
        return None
    if not isinstance(note, dict):
        return None
    if note.get("version") == 1:
        kind, name = note.get("entity_type"), note.get("entity_name")
        return f"{kind}/{name}" if isinstance(kind, str) and isinstance(name, str) else None
    path = note.get("entity_path")
    return path if isinstance(path, str) else None


def changed_topic(data: bytes | None) -> str | None:
    """The topic a notification names, or ``None`` (another entity type,
    or not a notification)."""
    entity = changed_entity(data)
    if entity is None or not entity.startswith("topics/"):
        return None
    return entity[len("topics/") :]


def _sequence(child: str) -> int | None:
    digits = child[len(CHANGE_PREFIX) :]
    return int(digits) if child.startswith(CHANGE_PREFIX) and digits.isdigit() else None


class ConfigChangeListener:
    """Applies topic config change notifications (see the module docstring).

    Args:
        zk: The broker's ZooKeeper session.
        topic_config_changed: Awaited with the name of each topic a new
            notification names
            (`kclient.broker.replica_manager.ReplicaManager.topic_config_changed`).
    """

    def __init__(
        self,
        zk: ZkClient,
        topic_config_changed: Callable[[str], Awaitable[None]],
        entity_changed: Callable[[str], Awaitable[None]] | None = None,
        *,
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
    ) -> None:
        self.zk = zk
        #: Notifications older than this (ms) are deleted each time the
        #: notifications are handled (`kclient.broker.change_notifications`).
        self.change_expiration_ms = change_expiration_ms
        self.topic_config_changed = topic_config_changed
        #: Awaited with the path (under ``/config``) of any other entity a
        #: notification names (quota entities).
        self.entity_changed = entity_changed
        #: Sequence number of the last notification handled (-1: none yet).
        self.last_seen: int | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Watch ``/config/changes`` until cancelled."""
        zk = self.zk
        tzk = TrioZk(zk)
        send, receive = trio.open_memory_channel(math.inf)
        await tzk.watch_children(CONFIG_CHANGES_PATH, send.send_nowait)
        task_status.started()
        async for children in receive:
            seqs = sorted({s: c for c in children if (s := _sequence(c)) is not None}.items())
            if self.last_seen is None:
                self.last_seen = seqs[-1][0] if seqs else -1
            else:
                await self._apply(tzk, seqs)
            await trio.to_thread.run_sync(purge_obsolete_notifications, zk, CONFIG_CHANGES_PATH, [c for _, c in seqs], self.change_expiration_ms)

    async def _apply(self, tzk: TrioZk, seqs: list[tuple[int, str]]) -> None:
        """Apply the notifications newer than `last_seen`, in order."""
        zk = self.zk
        assert self.last_seen is not None
        for seq, child in seqs:
            if seq <= self.last_seen:
                continue
            self.last_seen = seq
            try:
                data = await tzk.run(zk.get, f"{CONFIG_CHANGES_PATH}/{child}")
            except KafkaError as exc:
                log.warning("cannot read config change %s: %s", child, exc)
                continue
            topic = changed_topic(data)
            if topic is not None:
                log.info("config change %s: topic %s", child, topic)
                await self.topic_config_changed(topic)
            elif self.entity_changed is not None and (entity := changed_entity(data)) is not None:
                log.info("config change %s: %s", child, entity)
                await self.entity_changed(entity)
