"""All partition logs of a broker, spread over one or more log directories.

Each partition lives in ``<log_dir>/<topic>-<partition>/`` (PROTOCOL-NOTES
"Log files"; seed 001 "a topic ... with two partitions consists of two
directories"). Modelled on Kafka's ``LogManager``: on start it loads every
partition directory it finds; new partitions go to the log directory that
holds the fewest partitions.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from pathlib import Path

from kclient.errors import ConfigError, InvalidRequestError, InvalidTopicError, TopicAlreadyExistsError
from kclient.storage.log import Log, LogConfig

logger = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_PARTITION_DIR = re.compile(r"(.+)-(0|[1-9][0-9]*)")


def validate_topic_name(name: str) -> None:
    """Raise :class:`InvalidTopicError` unless ``name`` is a legal Kafka
    topic name: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or
    ``..`` (Kafka's ``Topic.validate``)."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"topic name is {len(name)} characters, the limit is {MAX_TOPIC_NAME_LENGTH}")
    if not _LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'")


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` from a directory name ``<topic>-<partition>``
    (split on the last ``-``, so topics may contain ``-``); ``None`` if the
    name is not one (e.g. Kafka's ``...-delete`` directories)."""
    m = _PARTITION_DIR.fullmatch(name)
    if not m:
        return None
    topic = m.group(1)
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return None
    return topic, int(m.group(2))


class LogManager:
    """Owner of every partition :class:`Log` of the broker.

    ``log_dirs``: one or more directories (created if missing).
    ``config``: the :class:`LogConfig` for every log.
    ``default_num_partitions``: used by :meth:`create_topic` when no count
    is given (Kafka's ``num.partitions``). On construction every
    ``<topic>-<partition>`` directory found is loaded (last segment
    recovered). Raises :class:`ConfigError` if no log dir is given or a
    partition exists in two log dirs, ``OSError`` on I/O failure.
    Thread-safe.
    """

    def __init__(
        self,
        log_dirs: list[str | os.PathLike[str]],
        config: LogConfig | None = None,
        default_num_partitions: int = 1,
    ) -> None:
        if isinstance(log_dirs, (str, os.PathLike)):
            log_dirs = [log_dirs]
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")
        if default_num_partitions < 1:
            raise ConfigError(f"num.partitions must be >= 1, got {default_num_partitions}")
        self.config = config if config is not None else LogConfig()
        self.default_num_partitions = default_num_partitions
        self._lock = threading.Lock()
        self._logs: dict[tuple[str, int], Log] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        try:
            self._load_all()
        except BaseException:
            self.close()
            raise

    def _load_all(self) -> None:
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            for entry in sorted(os.listdir(log_dir)):
                parsed = parse_partition_dir(entry)
                path = log_dir / entry
                if parsed is None or not path.is_dir():
                    continue
                if parsed in self._logs:
                    raise ConfigError(f"partition {entry} exists in both {self._dir_of[parsed]} and {log_dir}")
                self._logs[parsed] = Log.open(path, self.config)
                self._dir_of[parsed] = log_dir
        for topic, count in self.topics().items():
            missing = [p for p in range(count) if (topic, p) not in self._logs]
            if missing:
                logger.warning("topic %s: partitions %s have no log directory", topic, missing)
        logger.info("loaded %d partition log(s) from %s", len(self._logs), ", ".join(map(str, self.log_dirs)))

    # ------------------------------------------------------------ queries

    def get(self, topic: str, partition: int) -> Log | None:
        """The log of ``topic``/``partition``, or ``None`` if not hosted."""
        return self._logs.get((topic, partition))

    def topics(self) -> dict[str, int]:
        """Topic name -> partition count (highest partition id + 1)."""
        counts: dict[str, int] = {}
        for topic, partition in list(self._logs):
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return counts

    def logs(self) -> dict[tuple[str, int], Log]:
        """Snapshot ``{(topic, partition): Log}`` of every hosted log."""
        return dict(self._logs)

    # ------------------------------------------------------------ creation

    def create_topic(self, name: str, num_partitions: int | None = None) -> None:
        """Create ``num_partitions`` (default ``default_num_partitions``)
        empty partition logs for topic ``name``, each in the log dir with
        the fewest partitions. Raises :class:`InvalidTopicError` for an
        illegal name or one that collides with an existing topic once '.'
        and '_' are equated (Kafka's rule), :class:`TopicAlreadyExistsError`
        if the topic exists, :class:`InvalidRequestError` if
        ``num_partitions < 1``. All-or-nothing: on failure no partition of
        the topic is left behind."""
        validate_topic_name(name)
        if num_partitions is None:
            num_partitions = self.default_num_partitions
        if not isinstance(num_partitions, int) or num_partitions < 1:
            raise InvalidRequestError(f"number of partitions must be >= 1, got {num_partitions!r}")
        with self._lock:
            existing = self.topics()
            if name in existing:
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            folded = name.replace(".", "_")
            for other in existing:
                if other.replace(".", "_") == folded:
                    raise InvalidTopicError(f"topic {name!r} collides with existing topic {other!r}")
            created: list[tuple[tuple[str, int], Path]] = []
            try:
                for partition in range(num_partitions):
                    log_dir = self._next_log_dir()
                    path = log_dir / f"{name}-{partition}"
                    if path.exists():
                        raise TopicAlreadyExistsError(f"directory {path} exists already")
                    key = (name, partition)
                    self._logs[key] = Log.open(path, self.config)
                    self._dir_of[key] = log_dir
                    created.append((key, path))
            except BaseException:
                for key, path in created:
                    log = self._logs.pop(key)
                    self._dir_of.pop(key, None)
                    log.close()
                    shutil.rmtree(path, ignore_errors=True)
                raise
        logger.info("created topic %s with %d partition(s)", name, num_partitions)

    def _next_log_dir(self) -> Path:
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    # ------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        """Flush (fsync) every log."""
        for log in list(self._logs.values()):
            log.flush()

    def close(self) -> None:
        """Flush and close every log. Idempotent; the first error is
        re-raised after every log was tried."""
        first: BaseException | None = None
        for log in list(self._logs.values()):
            try:
                log.close()
            except BaseException as exc:  # keep closing the others
                first = first or exc
        if first is not None:
            raise first
