"""Purging old change notifications, as Kafka's ZooKeeper-mode
``ZkNodeChangeNotificationListener`` does.

Kafka's brokers announce a change by a sequential node under a changes
path (``/config/changes``, ``/kafka-acl-changes``,
``/kafka-acl-extended-changes``); every broker watches the path. Each time
a broker handles the notifications of a path, it deletes those created
more than ``changeExpirationMs`` ago (15 minutes in Kafka, fixed), so the
paths do not grow without bound. Any broker may delete them: a broker
that starts reads the entities themselves, never the old notifications.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from kclient.errors import KafkaError
from kclient.zk.client import ZkClient

__all__ = ["CHANGE_EXPIRATION_MS", "purge_obsolete_notifications"]

log = logging.getLogger("kclient.broker")

#: Kafka's ``ZkNodeChangeNotificationListener.changeExpirationMs``: 15 minutes.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def purge_obsolete_notifications(
    zk: ZkClient, changes_path: str, children: Iterable[str], expiration_ms: int, now_ms: Callable[[], int] = lambda: int(time.time() * 1000)
) -> list[str]:
    """Delete the notifications under ``changes_path`` created more than
    ``expiration_ms`` ago (blocking: run it in a worker thread).

    Args:
        zk: The broker's ZooKeeper session.
        changes_path: The changes path (``/config/changes``, ...).
        children: The notification nodes' names under it.
        expiration_ms: Age (ms) past which a notification is deleted.
        now_ms: The wall clock (ms since the epoch), compared with the
            nodes' ``ctime`` as Kafka does.

    Returns:
        The names of the notifications deleted (one another broker deleted
        first is not counted). A ZooKeeper failure is logged, not raised:
        the next pass tries again.
    """
    deleted: list[str] = []
    now = now_ms()
    try:
        for child in sorted(children):
            path = f"{changes_path}/{child}"
            created = zk.created_ms(path)
            if created is not None and now - created > expiration_ms and zk.delete(path):
                log.debug("purged obsolete change notification %s (%d ms old)", path, now - created)
                deleted.append(child)
    except KafkaError as exc:  # ZooKeeper unavailable: the next pass tries again
        log.warning("cannot purge the change notifications of %s: %s", changes_path, exc)
    return deleted
