"""All partition logs of a broker, spread over one or more log directories.

Each partition lives in ``<log_dir>/<topic>-<partition>/`` (Kafka
documentation https://kafka.apache.org/documentation/#log, "Log": a topic
with two partitions consists of two directories). Modelled on Kafka's ``LogManager``: on start it loads every
partition directory it finds; new partitions go to the log directory that
holds the fewest partitions.

Each log dir also holds ``recovery-point-offset-checkpoint`` (every
partition's recovery point, written by `LogManager.checkpoint_recovery_points`
after flushes), ``replication-offset-checkpoint`` (every partition's high
watermark, written by `LogManager.checkpoint_high_watermarks`, Kafka's
``replica.high.watermark.checkpoint.interval.ms`` task, and at close) and,
between a clean `LogManager.close` and the next start,
``.kafka_cleanshutdown`` (see `kclient.storage.checkpoint`), and
``cleaner-offset-checkpoint`` (each compacted partition's first dirty
offset, kept by `kclient.storage.cleaner.LogCleaner`; a partition listed
there is loaded knowing its offsets may have gaps).
After an unclean shutdown each partition recovers from its checkpointed
recovery point (0 when absent: the whole log).

The broker drives the periodic work: `LogManager.flush_if_due`
(``log.flush.scheduler.interval.ms``), `LogManager.cleanup`
(``log.retention.check.interval.ms``) and
`LogManager.checkpoint_recovery_points`
(``log.flush.offset.checkpoint.interval.ms``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from kclient.clock import now_ms
from kclient.errors import ConfigError, InvalidRequestError, InvalidTopicError, KafkaStorageError, TopicAlreadyExistsError
from kclient.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    read_checkpoint,
    remove_clean_shutdown_marker,
    write_checkpoint,
    write_clean_shutdown_marker,
)
from kclient.storage.log import Log, LogConfig
from kclient.storage.log_files import fsync_dir

logger = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_PARTITION_DIR = re.compile(r"(.+)-(0|[1-9][0-9]*)")


def validate_topic_name(name: str) -> None:
    """Check that ``name`` is a legal Kafka topic name (Kafka's ``Topic.validate``).

    Legal: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``.

    Args:
        name: The topic name.

    Raises:
        kclient.errors.InvalidTopicError: The name is not legal.
    """
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"topic name is {len(name)} characters, the limit is {MAX_TOPIC_NAME_LENGTH}")
    if not _LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'")


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """Split a partition directory name ``<topic>-<partition>``.

    The split is on the last ``-``, so topics may contain ``-``.

    Args:
        name: A directory name (not a path).

    Returns:
        ``(topic, partition)``, or ``None`` if the name is not a partition
            directory (e.g. Kafka's ``...-delete`` directories).
    """
    m = _PARTITION_DIR.fullmatch(name)
    if not m:
        return None
    topic = m.group(1)
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return None
    return topic, int(m.group(2))


def _empty_leftover(path: Path) -> bool:
    """Whether ``path`` is what a failed creation leaves behind (only empty
    files: the open ran out of descriptors or space before anything was
    written, and even the cleanup could not remove it), which a retry may
    take over."""
    try:
        return all(p.is_file() and p.stat().st_size == 0 for p in path.iterdir())
    except OSError:
        return False


class LogManager:
    """Owner of every partition `Log` of the broker.

    ``log_dirs``: one or more directories (created if missing).
    ``config``: the `LogConfig` for every log.
    ``default_num_partitions``: used by `create_topic` when no count
    is given (Kafka's ``num.partitions``). ``clock``: ms clock handed to
    every log (default: wall clock).

    On construction every ``<topic>-<partition>`` directory found is
    loaded: if the log dir holds ``.kafka_cleanshutdown`` the logs are
    trusted (no recovery), else each log recovers from its recovery point
    in the dir's ``recovery-point-offset-checkpoint`` (0 if absent or the
    file is unreadable); the marker is then removed. Each log's high
    watermark is the one in the dir's ``replication-offset-checkpoint``
    capped at its log end offset (the log end offset when absent).
    `recovery_truncated_bytes` reports what recovery cut. Raises
    `ConfigError` if no log dir is given or a partition exists in
    two log dirs, ``OSError`` on I/O failure. Thread-safe.
    """

    def __init__(
        self,
        log_dirs: list[str | os.PathLike[str]],
        config: LogConfig | None = None,
        default_num_partitions: int = 1,
        *,
        clock: Callable[[], int] | None = None,
    ) -> None:
        if isinstance(log_dirs, (str, os.PathLike)):
            log_dirs = [log_dirs]
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")
        if default_num_partitions < 1:
            raise ConfigError(f"num.partitions must be >= 1, got {default_num_partitions}")
        self.config = config if config is not None else LogConfig()
        self._topic_overrides: dict[str, dict[str, str]] = {}
        # The broker defaults each topic's overrides were last applied over.
        self._topic_base: dict[str, LogConfig] = {}
        self.default_num_partitions = default_num_partitions
        self._clock = clock if clock is not None else now_ms
        self._lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._logs: dict[tuple[str, int], Log] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        self._checkpointed: dict[tuple[str, int], int] = {}
        self._closed = False
        #: Log dirs taken offline after an I/O error (`take_dir_offline`).
        self.offline_dirs: list[Path] = []
        #: Log dirs that held a clean-shutdown marker at startup.
        self.clean_shutdown_dirs: list[Path] = []
        try:
            self._load_all()
        except BaseException:
            self._close(clean=False)
            raise

    def _load_all(self) -> None:
        for log_dir in self.log_dirs:
            fresh = not log_dir.is_dir() or not any(log_dir.iterdir())
            log_dir.mkdir(parents=True, exist_ok=True)
            clean = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
            if clean:
                self.clean_shutdown_dirs.append(log_dir)
            try:
                points = read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
            except (CheckpointError, OSError, UnicodeDecodeError) as exc:
                logger.warning("log dir %s: unreadable recovery point checkpoint (%s); recovering every log in full", log_dir, exc)
                points = {}
            try:
                watermarks = read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
            except (CheckpointError, OSError, UnicodeDecodeError) as exc:
                logger.warning("log dir %s: unreadable high watermark checkpoint (%s); high watermarks start at the log end offsets", log_dir, exc)
                watermarks = {}
            if fresh:
                state = "new and empty, nothing to recover"
            elif clean:
                state = "clean shutdown, skipping recovery"
            else:
                state = "unclean shutdown, recovering from checkpoints"
            logger.info("log dir %s: %s", log_dir, state)
            try:
                cleaned = read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
            except (CheckpointError, OSError, UnicodeDecodeError) as exc:
                logger.warning("log dir %s: unreadable cleaner checkpoint (%s)", log_dir, exc)
                cleaned = {}
            for entry in sorted(os.listdir(log_dir)):
                parsed = parse_partition_dir(entry)
                path = log_dir / entry
                if parsed is None or not path.is_dir():
                    continue
                if parsed in self._logs:
                    raise ConfigError(f"partition {entry} exists in both {self._dir_of[parsed]} and {log_dir}")
                plog = Log.open(
                    path,
                    self.config,
                    recovery_point=points.get(parsed, 0),
                    clean_shutdown=clean,
                    clock=self._clock,
                    high_watermark=watermarks.get(parsed),
                    # A log the cleaner has touched may have offset gaps.
                    offset_gaps=True if parsed in cleaned else None,
                )
                self._logs[parsed] = plog
                self._dir_of[parsed] = log_dir
                if plog.recovery_truncated_bytes:
                    logger.warning("partition %s: recovery truncated %d bytes", entry, plog.recovery_truncated_bytes)
        for topic, count in self.topics().items():
            missing = [p for p in range(count) if (topic, p) not in self._logs]
            if missing:
                logger.warning("topic %s: partitions %s have no log directory", topic, missing)
        # Record the recovery points now reached (every log is validated or
        # trusted), then forget the clean shutdown: from here on a crash
        # must lead to recovery.
        self.checkpoint_recovery_points()
        for log_dir in self.log_dirs:
            remove_clean_shutdown_marker(log_dir)
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

    def recovery_truncated_bytes(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): bytes}`` removed by recovery at startup,
        for the partitions where it removed anything."""
        return {key: plog.recovery_truncated_bytes for key, plog in self._logs.items() if plog.recovery_truncated_bytes}

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding ``topic``/``partition``, or ``None``."""
        return self._dir_of.get((topic, partition))

    # ------------------------------------------------------------ per-topic configs

    def config_for(self, topic: str) -> LogConfig:
        """The `LogConfig` of ``topic``'s logs: the broker defaults with the
        topic's overrides (`set_topic_config`) applied."""
        overrides = self._topic_overrides.get(topic)
        if not overrides:
            return self.config
        try:
            return self.config.with_topic_overrides(overrides)
        except ConfigError as exc:
            logger.warning("topic %s: bad config override (%s); using the broker defaults", topic, exc)
            return self.config

    def set_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        """Set the topic-level configs of ``topic`` (``cleanup.policy``,
        ``retention.ms``, ``segment.bytes``, ... as in ZooKeeper's
        ``/config/topics/<topic>`` or a CreateTopics request; see
        `kclient.storage.LogConfig.with_topic_overrides`) and apply them to
        its hosted logs and to those created later.

        Args:
            topic: The topic.
            overrides: Topic config name -> value; replaces earlier ones.

        Raises:
            kclient.errors.ConfigError: A malformed value (nothing changes).
        """
        with self._lock:
            # A broker applies a topic's configs again for each partition it
            # is given (LeaderAndIsr): unchanged ones cost nothing, so that
            # a topic of N partitions is not N x N config comparisons.
            if self._topic_overrides.get(topic) == overrides and self._topic_base.get(topic) is self.config:
                return
        config = self.config.with_topic_overrides(overrides)
        with self._lock:
            self._topic_overrides[topic] = dict(overrides)
            self._topic_base[topic] = self.config
            logs = [plog for (t, _), plog in self._logs.items() if t == topic]
        for plog in logs:
            if plog.config != config:
                plog.update_config(config)

    # ------------------------------------------------------------ creation

    def create_topic(self, name: str, num_partitions: int | None = None) -> None:
        """Create the empty partition logs of topic ``name``.

        Each partition goes to the log dir with the fewest partitions.
        All-or-nothing: on failure no partition of the topic is left behind.

        Args:
            name: The topic name.
            num_partitions: How many partitions (default
                ``default_num_partitions``).

        Raises:
            kclient.errors.InvalidTopicError: An illegal name, or one that
                collides with an existing topic once '.' and '_' are equated
                (Kafka's rule).
            kclient.errors.TopicAlreadyExistsError: The topic exists.
            kclient.errors.InvalidRequestError: ``num_partitions < 1``.
        """
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
                    key = (name, partition)
                    created.append((key, self._create_log_locked(key).directory))
                # Make the new partition directories durable (their own
                # contents are fsync-ed with the first flush).
                for log_dir in {self._dir_of[key] for key, _ in created}:
                    fsync_dir(log_dir)
            except BaseException:
                for key, path in created:
                    log = self._logs.pop(key)
                    self._dir_of.pop(key, None)
                    log.close()
                    shutil.rmtree(path, ignore_errors=True)
                raise
        logger.info("created topic %s with %d partition(s)", name, num_partitions)

    def _create_log_locked(self, key: tuple[str, int]) -> Log:
        """Create the empty log of ``key`` in the log dir with the fewest
        partitions (lock held); the caller fsyncs the log dir."""
        log_dir = self._next_log_dir()
        path = log_dir / f"{key[0]}-{key[1]}"
        if path.exists() and not _empty_leftover(path):
            raise TopicAlreadyExistsError(f"directory {path} exists already")
        try:
            plog = Log.open(path, self.config_for(key[0]), clock=self._clock)
        except BaseException:
            # The directory did not exist: a failed open (out of
            # descriptors, disk full) must not leave it behind, or the
            # retry would be refused as "exists already".
            shutil.rmtree(path, ignore_errors=True)
            raise
        self._logs[key] = plog
        self._dir_of[key] = log_dir
        return plog

    def create_log(self, topic: str, partition: int) -> Log:
        """Get or create the log of one partition (a replica assigned to
        this broker: LeaderAndIsr, Kafka's ``getOrCreateLog``).

        A new log goes to the log dir with the fewest partitions; its
        directory is fsync-ed into the log dir. Thread-safe.

        Args:
            topic: The topic name.
            partition: The partition id (>= 0).

        Returns:
            The partition's log, existing or new.

        Raises:
            kclient.errors.InvalidTopicError: An illegal topic name.
            kclient.errors.InvalidRequestError: A negative partition id.
            kclient.errors.TopicAlreadyExistsError: The directory exists but
                is not loaded (left by another process).
            ValueError: The manager is closed.
            OSError: An I/O failure.
        """
        validate_topic_name(topic)
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise InvalidRequestError(f"partition must be an int >= 0, got {partition!r}")
        key = (topic, partition)
        with self._lock:
            plog = self._logs.get(key)
            if plog is not None:
                return plog
            if self._closed:
                raise ValueError("log manager is closed")
            plog = self._create_log_locked(key)
            try:
                fsync_dir(self._dir_of[key])
            except BaseException:
                self._logs.pop(key)
                self._dir_of.pop(key, None)
                plog.close()
                shutil.rmtree(plog.directory, ignore_errors=True)
                raise
        logger.info("created log %s-%d in %s", topic, partition, self._dir_of[key])
        return plog

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log of one partition and remove its directory
        (StopReplica with ``delete_partitions``; Kafka's ``asyncDelete``,
        done at once here).

        Readers holding a `kclient.storage.FileSlice` keep their open file.
        The partition leaves both checkpoints at their next write.

        Args:
            topic: The topic name.
            partition: The partition id.

        Returns:
            Whether the log existed.

        Raises:
            OSError: The directory could not be removed.
        """
        key = (topic, partition)
        with self._lock:
            plog = self._logs.pop(key, None)
            log_dir = self._dir_of.pop(key, None)
        if plog is None:
            return False
        try:
            plog.close()
        finally:
            shutil.rmtree(plog.directory)
            if log_dir is not None:
                fsync_dir(log_dir)
        logger.info("deleted log %s-%d (%s)", topic, partition, plog.directory)
        return True

    def take_dir_offline(self, log_dir: Path) -> list[tuple[str, int]]:
        """Take a failed log directory offline (Kafka's
        ``LogManager.handleLogDirFailure``, KIP-112): its logs are dropped
        from this manager (no flush, checkpoint, retention or new partition
        touches the directory again; nothing is written to it, so what was
        written stays as it is for the recovery of the next start), their
        files are closed (`kclient.storage.Log.abandon`; a file a reader
        still holds closes when it is released) and the directory leaves
        `log_dirs` for `offline_dirs`.

        Args:
            log_dir: One of `log_dirs`.

        Returns:
            The partitions that were in it (empty if it was not online).
        """
        with self._lock, self._checkpoint_lock:
            if log_dir not in self.log_dirs:
                return []
            self.log_dirs.remove(log_dir)
            self.offline_dirs.append(log_dir)
            keys = [key for key, d in self._dir_of.items() if d == log_dir]
            dropped = [plog for plog in (self._logs.pop(key, None) for key in keys) if plog is not None]
            for key in keys:
                self._dir_of.pop(key, None)
                self._checkpointed.pop(key, None)
        for plog in dropped:
            try:
                plog.abandon()  # close its descriptors, write nothing
            except (OSError, ValueError) as exc:
                logger.warning("closing the log %s of the offline dir failed: %s", plog.directory, exc)
        logger.error("log dir %s is offline: its %d partition(s) are no longer served (KIP-112)", log_dir, len(keys))
        return keys

    def _next_log_dir(self) -> Path:
        if not self.log_dirs:
            raise KafkaStorageError(f"every log dir is offline: {', '.join(map(str, self.offline_dirs))}")
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        counts = dict.fromkeys(self.log_dirs, 0)
        for d in self._dir_of.values():
            counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    # ------------------------------------------------------------ periodic work

    def checkpoint_recovery_points(self) -> None:
        """Write every log dir's ``recovery-point-offset-checkpoint``.

        Each holds the current recovery point of each partition of that dir,
        written atomically (temp file, fsync, rename, dir fsync).

        Raises:
            OSError: Writing a checkpoint failed.
        """
        with self._checkpoint_lock:
            points = {key: plog.recovery_point for key, plog in list(self._logs.items())}
            dirs = dict(self._dir_of)
            for log_dir in self.log_dirs:
                entries = {key: off for key, off in points.items() if dirs.get(key) == log_dir}
                write_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, entries)
            self._checkpointed = points

    def checkpoint_high_watermarks(self) -> None:
        """Write every log dir's ``replication-offset-checkpoint``: each
        partition's high watermark, atomically (Kafka's
        ``replica.high.watermark.checkpoint.interval.ms`` task).

        Raises:
            OSError: Writing a checkpoint failed.
        """
        with self._checkpoint_lock:
            marks = {key: plog.high_watermark for key, plog in list(self._logs.items())}
            dirs = dict(self._dir_of)
            for log_dir in self.log_dirs:
                entries = {key: off for key, off in marks.items() if dirs.get(key) == log_dir}
                write_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, entries)

    def _checkpoint_if_moved(self) -> bool:
        current = {key: plog.recovery_point for key, plog in list(self._logs.items())}
        if current == self._checkpointed:
            return False
        self.checkpoint_recovery_points()
        return True

    def flush(self) -> None:
        """Flush (fsync) every log, then write the recovery point
        checkpoints."""
        for plog in list(self._logs.values()):
            plog.flush()
        self.checkpoint_recovery_points()

    def flush_if_due(self, now_ms: int | None = None) -> int:
        """Apply the time-based flush policy to every log (`Log.flush_if_due`).

        Then rewrite the checkpoints if any recovery point moved (including
        flushes the message-count policy did during appends). Kafka's
        ``flushDirtyLogs``; the broker calls it every
        ``log.flush.scheduler.interval.ms``.

        Args:
            now_ms: The time in ms (default: each log's clock).

        Returns:
            The number of logs flushed.
        """
        now = self._clock() if now_ms is None else now_ms
        flushed = 0
        for plog in list(self._logs.values()):
            try:
                if plog.flush_if_due(now):
                    flushed += 1
            except ValueError:
                pass  # closed meanwhile
        self._checkpoint_if_moved()
        return flushed

    def cleanup(self, now_ms: int | None = None) -> int:
        """Apply retention to every log (`Log.apply_retention`).

        The broker calls it every ``log.retention.check.interval.ms``.

        Args:
            now_ms: The time in ms (default: each log's clock).

        Returns:
            The number of segments deleted.
        """
        now = self._clock() if now_ms is None else now_ms
        deleted = 0
        for key, plog in list(self._logs.items()):
            try:
                deleted += plog.apply_retention(now)
            except (OSError, ValueError) as exc:
                if key not in self._dir_of:  # deleted, or its dir went offline (KIP-112)
                    logger.warning("retention of %s-%d stopped: the log was deleted or its log dir went offline (%s)", key[0], key[1], exc)
                elif isinstance(exc, OSError):
                    logger.exception("retention of %s-%d failed", key[0], key[1])
                else:
                    raise
        if deleted:
            logger.info("retention deleted %d segment(s)", deleted)
        return deleted

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Flush and close every log, write the recovery point checkpoints
        and, if all of that succeeded, the clean-shutdown marker of every
        log dir (so the next start skips recovery). Idempotent; the first
        error is re-raised after every log was tried (no marker is then
        written)."""
        self._close(clean=True)

    def _close(self, clean: bool) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        first: BaseException | None = None
        for plog in list(self._logs.values()):
            try:
                plog.close()
            except BaseException as exc:  # keep closing the others
                first = first or exc
        if clean and first is None:
            try:
                self.checkpoint_recovery_points()
                self.checkpoint_high_watermarks()
                for log_dir in self.log_dirs:
                    write_clean_shutdown_marker(log_dir)
            except BaseException as exc:
                first = exc
        if first is not None:
            raise first
