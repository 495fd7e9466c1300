"""Broker identity files kept in the log directory: ``meta.properties``
(cluster id and broker id, as Kafka writes it) and the producer id block.

Kafka stores ``version``, ``broker.id`` and ``cluster.id`` in
``<log.dirs[0]>/meta.properties`` so the cluster id survives restarts and a
log directory cannot be picked up by a broker with another id
(``kafka.server.BrokerMetadataCheckpoint``). The cluster id is a UUID written
as 22 characters of URL-safe base64 without padding (``Uuid.randomUuid()``).

Producer ids (KIP-98) are handed out from blocks of `PRODUCER_ID_BLOCK`;
the end of the block in use is persisted before any id of it is given out, so
a restarted broker never repeats an id (Kafka keeps these blocks in
ZooKeeper's ``/latest_producer_id_block``).
"""

from __future__ import annotations

import base64
import logging
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from kclient.errors import ConfigError

if TYPE_CHECKING:
    from kclient.zk.client import ZkClient

log = logging.getLogger(__name__)

META_FILE = "meta.properties"
PRODUCER_ID_FILE = "producer_id_block"
PRODUCER_ID_BLOCK = 1000


def new_cluster_id() -> str:
    """A fresh cluster id: 16 random bytes as 22 URL-safe base64 characters
    (no padding), the format of Kafka's ``Uuid.toString()``."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def _read_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, value = line.split(sep, 1)
                props[key.strip()] = value.strip()
                break
    return props


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_or_create_meta(log_dir: str | os.PathLike[str], broker_id: int) -> str:
    """The cluster id stored in ``log_dir/meta.properties``.

    The file is created (with a new cluster id) if it does not exist.

    Args:
        log_dir: A log directory.
        broker_id: This broker's ``broker.id``.

    Returns:
        The cluster id.

    Raises:
        kclient.errors.ConfigError: The file names another broker id
            (Kafka's InconsistentBrokerIdException) or is unreadable.
    """
    directory = Path(log_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / META_FILE
    if path.exists():
        props = _read_properties(path)
        cluster_id = props.get("cluster.id")
        if not cluster_id:
            raise ConfigError(f"{path} has no cluster.id")
        stored = props.get("broker.id")
        if stored is not None and int(stored) != broker_id:
            raise ConfigError(f"{path} belongs to broker.id={stored}, but this broker has broker.id={broker_id}")
        return cluster_id
    cluster_id = new_cluster_id()
    _write_atomically(
        path,
        "#\n#kclient broker metadata (same keys as Kafka's meta.properties)\n"
        f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n",
    )
    log.info("created %s with cluster.id=%s", path, cluster_id)
    return cluster_id


def store_cluster_id(log_dir: str | os.PathLike[str], broker_id: int, cluster_id: str) -> None:
    """Rewrite ``log_dir/meta.properties`` with ``cluster_id`` (a broker
    whose ``meta.properties`` is new takes the cluster id ZooKeeper's
    ``/cluster/id`` already holds, as Kafka's ``getOrGenerateClusterId``
    does: every broker of a cluster reports the same id).

    Args:
        log_dir: The first log directory.
        broker_id: This broker's ``broker.id``.
        cluster_id: The cluster id to keep.
    """
    _write_atomically(
        Path(log_dir) / META_FILE,
        "#\n#kclient broker metadata (same keys as Kafka's meta.properties)\n"
        f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n",
    )
    log.info("stored cluster.id=%s in %s", cluster_id, Path(log_dir) / META_FILE)


class ProducerIdAllocator:
    """Hands out increasing producer ids, persisting block boundaries in
    ``log_dir/producer_id_block`` so ids are never reused across restarts."""

    def __init__(self, log_dir: str | os.PathLike[str], block_size: int = PRODUCER_ID_BLOCK) -> None:
        self._path = Path(log_dir) / PRODUCER_ID_FILE
        self._block_size = block_size
        start = 0
        if self._path.exists():
            try:
                start = int(self._path.read_text(encoding="ascii").strip())
            except ValueError:
                log.warning("%s is unreadable; starting producer ids after a fresh block", self._path)
        self._next = start
        self._block_end = start  # nothing reserved yet

        #: With a ZooKeeper session, blocks come from the cluster-wide
        #: ``/latest_producer_id_block`` instead (see `allocate`).
        self.zk: ZkClient | None = None
        self.broker_id = -1

    def allocate(self) -> int:
        """The next producer id (int64 >= 0). Blocking: with ``zk`` set,
        a new block is claimed in ZooKeeper (call from a worker thread).

        Raises:
            kclient.errors.ZooKeeperError: The block cannot be claimed.
        """
        if self._next >= self._block_end:
            if self.zk is not None:
                self._next, self._block_end = claim_producer_id_block(self.zk, self.broker_id, self._block_size)
            else:
                self._block_end = self._next + self._block_size
                _write_atomically(self._path, f"{self._block_end}\n")
        pid = self._next
        self._next += 1
        return pid

    @property
    def needs_block(self) -> bool:
        """True if the next `allocate` claims a new block (may block)."""
        return self._next >= self._block_end

    def ensure_block(self) -> None:
        """Claim a new block now if the current one is used up (blocking),
        so that the next `allocate` does not block."""
        if self.needs_block and self.zk is not None:
            self._next, self._block_end = claim_producer_id_block(self.zk, self.broker_id, self._block_size)


#: Kafka's znode of the last producer id block handed out in the cluster.
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"


def claim_producer_id_block(zk: ZkClient, broker_id: int, size: int) -> tuple[int, int]:
    """Claim the next ``size`` producer ids for ``broker_id`` in
    ``/latest_producer_id_block`` (Kafka's ZooKeeper-era
    ``ProducerIdManager``: JSON ``{"version":1,"broker":B,"block_start":"S",
    "block_end":"E"}``, E inclusive, advanced with a conditional write so
    two brokers never get the same block).

    Args:
        zk (kclient.zk.client.ZkClient): A started session.
        broker_id: The claiming broker.
        size: Ids per block.

    Returns:
        ``(first id, first id after the block)``.

    Raises:
        kclient.errors.ZooKeeperError: ZooKeeper failed.
    """
    import json

    from kazoo.exceptions import (
        BadVersionError,
        NodeExistsError,
        NoNodeError,
        ZookeeperError,
    )

    from kclient.errors import ZooKeeperError

    kazoo = zk.kazoo
    for _ in range(100):
        try:
            try:
                data, stat = kazoo.get(PRODUCER_ID_BLOCK_PATH)
            except NoNodeError:
                start = 0
                doc = {"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(start + size - 1)}
                try:
                    kazoo.create(PRODUCER_ID_BLOCK_PATH, json.dumps(doc).encode(), makepath=True)
                except NodeExistsError:
                    continue
                return start, start + size
            start = int(json.loads(data)["block_end"]) + 1 if data else 0
            doc = {"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(start + size - 1)}
            try:
                kazoo.set(PRODUCER_ID_BLOCK_PATH, json.dumps(doc).encode(), version=stat.version)
            except BadVersionError:
                continue
            log.info("broker %d claimed producer ids %d..%d", broker_id, start, start + size - 1)
            return start, start + size
        except (ZookeeperError, ValueError, KeyError) as exc:
            raise ZooKeeperError(f"cannot claim a producer id block in {PRODUCER_ID_BLOCK_PATH}: {exc}") from exc
    raise ZooKeeperError(f"cannot claim a producer id block in {PRODUCER_ID_BLOCK_PATH}: too much contention")
