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

from kclient.errors import ConfigError

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


def load_or_create_meta(log_dir: str | os.PathLike, broker_id: int) -> str:
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


class ProducerIdAllocator:
    """Hands out increasing producer ids, persisting block boundaries in
    ``log_dir/producer_id_block`` so ids are never reused across restarts."""

    def __init__(self, log_dir: str | os.PathLike, block_size: int = PRODUCER_ID_BLOCK) -> None:
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

    def allocate(self) -> int:
        """The next producer id (int64 >= 0)."""
        if self._next >= self._block_end:
            self._block_end = self._next + self._block_size
            _write_atomically(self._path, f"{self._block_end}\n")
        pid = self._next
        self._next += 1
        return pid
