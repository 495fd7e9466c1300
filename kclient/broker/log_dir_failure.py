"""A failed log directory goes offline (KIP-112, "Handle disk failure for
JBOD"), as in Kafka's ``LogDirFailureChannel`` and
``ReplicaManager.handleLogDirFailure``.

An append (a Produce, or a follower's append of what it fetched, Kafka's
``ReplicaFetcherThread``) or a Fetch's read that fails with an ``OSError``
(a full disk: ENOSPC, EFBIG; an I/O error; a segment file gone) is answered
``KAFKA_STORAGE_ERROR`` (56), not UNKNOWN_SERVER_ERROR (a follower's
fetcher thread goes on with its other partitions), and its log directory is
taken offline:

- the `kclient.storage.LogManager` forgets the directory's logs (no flush,
  checkpoint, retention, cleaner or new partition touches it again) and
  closes their files without writing anything, so what was written there
  (everything acknowledged) is left as it is for the recovery of the next
  start;
- the replica manager stops hosting the directory's partitions; Produce,
  Fetch and LeaderAndIsr for them answer ``KAFKA_STORAGE_ERROR`` (Kafka's
  ``HostedPartition.Offline``); the partitions of the other directories are
  served as before;
- in a ZooKeeper cluster the broker writes a log dir event notification,
  ``/log_dir_event_notification/log_dir_event_<10 digits>`` holding
  ``{"version":1,"broker":<id>,"event":1}`` as Kafka's brokers do, plus
  the partitions that went offline (``"partitions": [{"topic","partition"}]``,
  a kclient addition: Kafka's controller learns them from the broker's
  LeaderAndIsr answers instead); the controller
  (`kclient.broker.controller.Controller`) then treats those replicas as
  offline: it elects another in-sync replica leader where there is one and
  removes them from the ISR, until the broker registers again (a restart);
- the error is logged without a traceback, once per directory at ERROR
  and then at most once per 10 s per partition (`RateLimitedLog`), not one
  traceback per failed append.

Deviation: Kafka halts a broker whose every log directory is offline; the
bundled broker keeps running and answers ``KAFKA_STORAGE_ERROR`` (in a
cluster the controller has moved leadership away by then).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from kclient.broker.security import RateLimitedLog
from kclient.storage import LogManager

__all__ = ["LOG_DIR_EVENT_PATH", "LOG_DIR_EVENT_PREFIX", "LOG_DIR_FAILURE", "LogDirFailureChannel", "decode_log_dir_event", "encode_log_dir_event"]

log = logging.getLogger("kclient.broker")

LOG_DIR_EVENT_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
#: Kafka's ``LogDirEventNotificationHandler.LogDirFailureEvent``.
LOG_DIR_FAILURE = 1


def encode_log_dir_event(broker_id: int, partitions: list[tuple[str, int]]) -> bytes:
    """A log dir failure notification's data (see the module docstring).

    Args:
        broker_id: The broker whose directory failed.
        partitions: The partitions that went offline with it.

    Returns:
        The JSON bytes.
    """
    body = {"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    return json.dumps(body).encode()


def decode_log_dir_event(data: bytes) -> tuple[int, list[tuple[str, int]]] | None:
    """Read a log dir event notification.

    Args:
        data: The znode's data.

    Returns:
        ``(broker id, offline partitions)`` of a failure event (no
        partitions from a Kafka broker's notification), or None for
        anything else.
    """
    try:
        body = json.loads(data)
        if int(body.get("event", LOG_DIR_FAILURE)) != LOG_DIR_FAILURE:
            return None
        partitions = [(str(p["topic"]), int(p["partition"])) for p in body.get("partitions", [])]
        return int(body["broker"]), partitions
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class LogDirFailureChannel:
    """Which log directories and partitions of this broker are offline,
    and what happens when a write fails (see the module docstring).

    Args:
        logs: The broker's log manager.
        interval: Seconds between two log lines of one partition's failures.
    """

    def __init__(self, logs: LogManager, *, interval: float = 10.0) -> None:
        self.logs = logs
        #: The partitions whose log directory is offline.
        self.offline_partitions: set[tuple[str, int]] = set()
        #: Called with ``(log dir, its partitions)`` once a directory went
        #: offline (the replica manager stops hosting them, then tells the
        #: controller).
        self.listeners: list[Callable[[Path, list[tuple[str, int]]], None]] = []
        self._log = RateLimitedLog(log, interval, logging.ERROR)

    @property
    def offline_dirs(self) -> list[Path]:
        """The log directories taken offline."""
        return list(self.logs.offline_dirs)

    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether the partition's log directory is offline."""
        return (topic, partition) in self.offline_partitions

    def read_error(self, topic: str, partition: int, exc: OSError) -> None:
        """Report that reading the partition's log failed (a Fetch; Kafka's
        ``ReplicaManager.readFromLocalLog``): `storage_error` with
        ``"fetch"``."""
        self.storage_error(topic, partition, "fetch", exc)

    def storage_error(self, topic: str, partition: int, what: str, exc: OSError) -> None:
        """Report that reading or writing the partition's log failed: log it
        (rate-limited, no traceback) and take its directory offline.

        Args:
            topic: The topic.
            partition: The partition.
            what: What failed (``"append"``, ``"follower append"``,
                ``"fetch"``).
            exc: The error.
        """
        self._log.log(f"{topic}-{partition}", "%s to %s-%d failed: %s; answering KAFKA_STORAGE_ERROR", what, topic, partition, exc)
        log_dir = self.logs.log_dir_of(topic, partition)
        if log_dir is None:
            return  # offline already (or deleted meanwhile)
        keys = self.logs.take_dir_offline(log_dir)
        self.offline_partitions.update(keys)
        log.error("log dir %s failed (%s): %d partition(s) offline: %s", log_dir, exc, len(keys), ", ".join(f"{t}-{p}" for t, p in sorted(keys)))
        for listener in self.listeners:
            try:
                listener(log_dir, keys)
            except Exception:
                log.exception("log dir failure listener failed")
