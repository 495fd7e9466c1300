"""The log of one partition: an ordered list of segments in one directory.

Kafka documentation https://kafka.apache.org/documentation/#log ("Log":
"Writes", "Reads", "Deletes", "Guarantees") and Kafka's ``Log`` /
``UnifiedLog``:

* appends go to the last (active) segment, which rolls over to a new file
  named by the next offset when it would grow past ``segment_bytes``, when
  its first batch is older than ``roll_ms`` or when an index is full;
* the log assigns offsets by overwriting each batch's first 8 bytes;
* flush policy: after ``flush_interval_messages`` unflushed messages (M,
  as the "Writes" section calls it) the log and its indexes are fsync-ed;
  `Log.flush_if_due` does the same once the oldest unflushed append is
  ``flush_interval_ms`` old (S). A system crash loses at most M messages
  or S ms of appends;
* reads locate the segment by ``bisect`` over an immutable snapshot of the
  segment list (replaced, never mutated, so a reader always searches a
  consistent view while segments are rolled or deleted), then the batch
  by the segment's sparse index; `Log.read_slice` returns the byte
  range for ``os.sendfile`` while holding the segment open;
* ListOffsets by timestamp bisects the segments' largest timestamps, then
  uses the segment's time index;
* retention deletes whole segments, oldest first, below the high watermark,
  the active one too once it holds records (a new one is rolled first);
* on open after an unclean shutdown every segment from the one holding the
  recovery point is validated (size + CRC of each batch); the first invalid
  batch truncates its segment and every later segment is deleted;
* replication (Kafka documentation, "Replication"; KIP-101, KIP-98): a
  follower appends the leader's batches as they are
  (`Log.append_as_follower`) and truncates its log to a batch boundary
  (`Log.truncate_to`) when it diverged; the leader stamps its leader epoch
  into each batch; the high watermark is stored; the leader epoch cache
  (`kclient.storage.leader_epoch`) and the idempotent producer state
  (`kclient.storage.producer_state`) follow every append, truncation and
  retention.

Plain blocking file I/O; writers are serialised by a ``threading.Lock`` so
the broker may call from worker threads. Readers take no lock.

Why one module of about 1,500 lines: `Log` is one class around one
invariant (the immutable segment-list snapshot, the log end offset, the
recovery point, the high watermark, the leader epoch cache and the producer
state, changed together under one lock by append, roll, flush, truncation,
retention and recovery); splitting its methods across modules would spread
that invariant. The epoch cache and the producer state themselves live in
their own modules. About half the lines are docstrings.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import attrs

from kclient.clock import now_ms
from kclient.errors import (
    ConfigError,
    CorruptRecordError,
    InvalidRecordError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    UnexpectedAppendOffsetError,
)
from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kclient.protocol.records.legacy import ATTR_CODEC_MASK as _CODEC_MASK
from kclient.protocol.records.legacy import ATTRIBUTES_AT as _V01_ATTRIBUTES_AT
from kclient.protocol.records.scan import BatchInfo, ProducerFields, read_v2_producer_fields, scan_batches, stamp_partition_leader_epoch
from kclient.storage.fileslice import FileSlice
from kclient.storage.leader_epoch import LeaderEpochCache
from kclient.storage.producer_state import ProducerBatch, ProducerStateManager
from kclient.storage.swap import SWAP_SUFFIX, recover_swaps
from kclient.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIMEINDEX_SUFFIX,
    LogSegment,
    file_stem,
    fsync_dir,
    parse_base_offset,
)

logger = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_OFFSET = struct.Struct(">q")


def _assign_with_wrappers(buf: bytearray, infos: list, next_offset: int) -> tuple[bytearray, int]:
    """Offsets for a record set holding compressed v0/v1 wrappers: each
    wrapper takes as many offsets as it has inner messages and carries the
    last one (v1 inner offsets stay relative, so only the wrapper header is
    rewritten; v0 inner offsets are absolute, so that set is rebuilt —
    `kclient.protocol.records.legacy.assign_legacy_offsets`). Returns (new
    bytes, next offset)."""
    from kclient.protocol.records.legacy import assign_legacy_offsets

    out = bytearray()
    for info in infos:
        entry = buf[info.position : info.position + info.size]
        if info.magic != 2 and entry[_V01_ATTRIBUTES_AT] & _CODEC_MASK:
            new, last = assign_legacy_offsets(entry, next_offset)
            out += new
            next_offset = last + 1
        else:
            _OFFSET.pack_into(entry, 0, next_offset)
            out += entry
            next_offset += info.last_offset - info.base_offset + 1
    return out, next_offset
def _is_wrapper(buf, info: BatchInfo) -> bool:
    """Whether ``info`` is a compressed v0/v1 wrapper (it carries only its
    last inner offset)."""
    return info.magic != 2 and bool(buf[info.position + _V01_ATTRIBUTES_AT] & _CODEC_MASK)


def _producer_fields(buf, infos: list[BatchInfo], all_v2: bool = False) -> Iterator[tuple[BatchInfo, ProducerFields]]:
    """The v2 batches of ``buf`` with their header fields: those with a
    producer id and a base sequence (idempotent), or every v2 batch with
    ``all_v2``."""
    for info in infos:
        if info.magic == 2:
            fields = read_v2_producer_fields(buf, info.position)
            if all_v2 or (fields.producer_id >= 0 and fields.base_sequence >= 0):
                yield info, fields


_SNAPSHOT_RETRIES = 16
_WEEK_MS = 7 * 24 * 60 * 60 * 1000
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".tmp")  # ".tmp": a checkpoint or snapshot write cut by a crash


def _int_field(low: int, high: int, optional: bool = False) -> Callable[[Any, attrs.Attribute, Any], None]:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if optional and value is None:
            return
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ConfigError(f"{attribute.name} must be an int in [{low}, {high}]{' or None' if optional else ''}, got {value!r}")

    return check


CLEANUP_POLICIES = ("compact", "delete")

#: Topic-level config name -> `LogConfig` field.
_TOPIC_FIELDS = {
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "segment.ms": "roll_ms",
    "segment.index.bytes": "index_max_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "max.message.bytes": "max_message_bytes",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
}


def parse_cleanup_policy(value: Any) -> tuple[str, ...]:
    """A ``cleanup.policy`` value as a sorted tuple of policies.

    Args:
        value: ``"delete"``, ``"compact"``, ``"compact,delete"`` (any order,
            spaces allowed; Kafka's list syntax) or an iterable of those.

    Returns:
        ``("delete",)``, ``("compact",)`` or ``("compact", "delete")``.

    Raises:
        kclient.errors.ConfigError: An empty or unknown policy.
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    policies = sorted({str(p).strip().lower() for p in items if str(p).strip()})
    if not policies or any(p not in CLEANUP_POLICIES for p in policies):
        raise ConfigError(f"cleanup.policy must be delete, compact or compact,delete, got {value!r}")
    return tuple(policies)


def _ratio(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{attribute.name} must be in [0, 1], got {value!r}")


@attrs.frozen
class LogConfig:
    """Per-log settings (Kafka broker ``log.*`` / topic configs and their defaults).

    Sizes in bytes, times in ms.

    Attributes:
        segment_bytes: ``log.segment.bytes``, 1 GiB: roll the active segment
            when an append would take it past this size (14 .. 2**31-1).
        index_interval_bytes: ``log.index.interval.bytes``, 4096: add
            offset / time index entries after about this many bytes.
        max_message_bytes: ``message.max.bytes``: the largest single batch
            accepted, including its 12-byte log overhead.
        roll_ms: ``log.roll.ms`` / ``log.roll.hours``, 7 days: roll the
            active segment when its first batch is older than this.
        flush_interval_messages: ``log.flush.interval.messages``, the "M"
            of Kafka's "Writes" (default 2**63-1 = never): fsync after
            this many unflushed messages.
        flush_interval_ms: ``log.flush.interval.ms``, the "S" of Kafka's
            "Writes" (``None`` = never by time): `Log.flush_if_due` fsyncs
            once the oldest unflushed append is this old.
        retention_ms: ``log.retention.ms/minutes/hours``, 7 days (-1 =
            unlimited): delete segments whose largest timestamp is older.
        retention_bytes: ``log.retention.bytes`` (-1 = unlimited): delete the
            oldest segments while the log is larger.
        index_max_bytes: ``log.index.size.max.bytes``, 10 MiB: roll when an
            index file reaches this size.
        cleanup_policy: ``log.cleanup.policy`` / topic ``cleanup.policy``:
            ``("delete",)`` (the default), ``("compact",)`` or ``("compact",
            "delete")``. Retention by time and size applies only when it
            holds ``delete``; the log cleaner compacts only logs whose policy
            holds ``compact`` (Kafka documentation, "Log Compaction").
        delete_retention_ms: ``log.cleaner.delete.retention.ms`` / topic
            ``delete.retention.ms``, 1 day: how long a tombstone (a record
            with a null value) is kept once cleaned.
        min_cleanable_dirty_ratio: ``log.cleaner.min.cleanable.ratio`` /
            topic ``min.cleanable.dirty.ratio``, 0.5: a log is cleaned when
            its dirty bytes over its cleanable bytes exceed this.
        min_compaction_lag_ms: ``log.cleaner.min.compaction.lag.ms`` / topic
            ``min.compaction.lag.ms``, 0: a segment whose newest record is
            younger than this stays uncompacted.

    Raises:
        kclient.errors.ConfigError: A value is out of range.
    """

    segment_bytes: int = attrs.field(default=1073741824, validator=_int_field(14, _INT32_MAX))
    index_interval_bytes: int = attrs.field(default=4096, validator=_int_field(0, _INT32_MAX))
    max_message_bytes: int = attrs.field(default=1048588, validator=_int_field(0, _INT32_MAX))
    roll_ms: int = attrs.field(default=_WEEK_MS, validator=_int_field(1, LONG_MAX))
    flush_interval_messages: int = attrs.field(default=LONG_MAX, validator=_int_field(1, LONG_MAX))
    flush_interval_ms: int | None = attrs.field(default=None, validator=_int_field(0, LONG_MAX, optional=True))
    retention_ms: int = attrs.field(default=_WEEK_MS, validator=_int_field(-1, LONG_MAX))
    retention_bytes: int = attrs.field(default=-1, validator=_int_field(-1, LONG_MAX))
    index_max_bytes: int = attrs.field(default=10485760, validator=_int_field(4, _INT32_MAX))
    cleanup_policy: tuple[str, ...] = attrs.field(default=("delete",), converter=lambda v: parse_cleanup_policy(v))
    delete_retention_ms: int = attrs.field(default=86_400_000, validator=_int_field(0, LONG_MAX))
    min_cleanable_dirty_ratio: float = attrs.field(default=0.5, converter=float, validator=_ratio)
    min_compaction_lag_ms: int = attrs.field(default=0, validator=_int_field(0, LONG_MAX))

    @property
    def compact(self) -> bool:
        """Whether the cleanup policy holds ``compact``."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether the cleanup policy holds ``delete`` (retention applies)."""
        return "delete" in self.cleanup_policy

    def with_topic_overrides(self, overrides: Mapping[str, Any]) -> LogConfig:
        """This configuration with a topic's own configs applied (Kafka's
        topic-level names: ``cleanup.policy``, ``delete.retention.ms``,
        ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``,
        ``retention.ms``, ``retention.bytes``, ``segment.bytes``,
        ``segment.ms``, ``segment.index.bytes``, ``index.interval.bytes``,
        ``max.message.bytes``, ``flush.messages``, ``flush.ms``; others are
        ignored here), as /config/topics in ZooKeeper or CreateTopics
        configs carry them.

        Args:
            overrides: Topic config name -> value (strings or numbers).

        Returns:
            The resulting configuration (``self`` when nothing applies).

        Raises:
            kclient.errors.ConfigError: A value is malformed or out of range.
        """
        kwargs: dict[str, Any] = {}
        for name, value in overrides.items():
            field = _TOPIC_FIELDS.get(name)
            if field is None or value is None:
                continue
            try:
                if field == "cleanup_policy":
                    kwargs[field] = parse_cleanup_policy(value)
                elif field == "min_cleanable_dirty_ratio":
                    kwargs[field] = float(value)
                else:
                    kwargs[field] = int(value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"topic config {name}={value!r}: {exc}") from None
        return attrs.evolve(self, **kwargs) if kwargs else self

    @classmethod
    def from_broker_config(cls, config: Any) -> LogConfig:
        """Build from a broker config object, reading attributes by name.

        Missing or ``None`` attributes keep the defaults.

        Args:
            config: An object with any of ``log_segment_bytes``,
                ``log_index_interval_bytes``, ``message_max_bytes``,
                ``log_index_size_max_bytes``, ``log_roll_ms`` else
                ``log_roll_hours``, ``log_flush_interval_messages``,
                ``log_flush_interval_ms``, ``log_retention_ms`` else
                ``log_retention_minutes`` else ``log_retention_hours`` (Kafka's
                precedence; a negative value means unlimited),
                ``log_retention_bytes``, ``log_cleanup_policy``,
                ``log_cleaner_delete_retention_ms``,
                ``log_cleaner_min_cleanable_ratio``,
                ``log_cleaner_min_compaction_lag_ms``.

        Returns:
            The log configuration.

        Raises:
            kclient.errors.ConfigError: A value is out of range.
        """

        def get(name: str) -> Any:
            return getattr(config, name, None)

        kwargs: dict[str, Any] = {}
        for field, name in (
            ("segment_bytes", "log_segment_bytes"),
            ("index_interval_bytes", "log_index_interval_bytes"),
            ("max_message_bytes", "message_max_bytes"),
            ("index_max_bytes", "log_index_size_max_bytes"),
            ("flush_interval_messages", "log_flush_interval_messages"),
            ("retention_bytes", "log_retention_bytes"),
            ("delete_retention_ms", "log_cleaner_delete_retention_ms"),
            ("min_compaction_lag_ms", "log_cleaner_min_compaction_lag_ms"),
        ):
            if get(name) is not None:
                kwargs[field] = int(get(name))
        if get("log_cleanup_policy") is not None:
            kwargs["cleanup_policy"] = parse_cleanup_policy(get("log_cleanup_policy"))
        if get("log_cleaner_min_cleanable_ratio") is not None:
            kwargs["min_cleanable_dirty_ratio"] = float(get("log_cleaner_min_cleanable_ratio"))
        if get("log_flush_interval_ms") is not None:
            kwargs["flush_interval_ms"] = int(get("log_flush_interval_ms"))
        if get("log_roll_ms") is not None:
            kwargs["roll_ms"] = int(get("log_roll_ms"))
        elif get("log_roll_hours") is not None:
            kwargs["roll_ms"] = int(get("log_roll_hours")) * 3_600_000
        for name, unit in (("log_retention_ms", 1), ("log_retention_minutes", 60_000), ("log_retention_hours", 3_600_000)):
            if get(name) is not None:
                value = int(get(name))
                kwargs["retention_ms"] = -1 if value < 0 else value * unit
                break
        return cls(**kwargs)


@attrs.frozen
class AppendResult:
    """Outcome of `Log.append` / `Log.append_as_follower`: the first and
    last offsets assigned, and the LogAppendTime in ms. `Log.append` always
    reports -1: it stores batches as given, and a LogAppendTime topic's
    batches arrive already stamped (`kclient.broker.convert.prepare_append`,
    whose ``log_append_time_ms`` the Produce response carries).

    ``duplicate``: the records were a retried idempotent batch already in
    the log (KIP-98): nothing was written and the offsets are those the
    batch got the first time.
    """

    base_offset: int
    last_offset: int
    log_append_time_ms: int = -1
    duplicate: bool = False


@attrs.frozen
class ReadResult:
    """Outcome of `Log.read`: ``records`` holds whole batches from the
    one containing the requested offset (the last may be cut short, as in
    Kafka); the offsets are those of the log when the read was made."""

    records: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


def _holds_offsets_from(segments: Sequence[LogSegment], i: int, offset: int) -> bool:
    """Whether ``segments[i]`` holds an offset ``>= offset``, answered from
    the next segment's base offset when that suffices, so a flush or a
    close does not open every old segment (their files open lazily)."""
    if i + 1 < len(segments) and segments[i + 1].base_offset <= offset:
        return False
    return segments[i].next_offset > offset


class _Stale(Exception):
    """A segment of a snapshot was deleted meanwhile: take a new snapshot."""


class _View:
    """Immutable snapshot of the segment list (copy-on-write: the log
    replaces its view, never mutates it). ``bases`` are the segments' base
    offsets for ``bisect``; the running maximum of the sealed (non-active)
    segments' largest timestamps is computed once per view."""

    __slots__ = ("bases", "segments", "_prefix")

    def __init__(self, segments: Sequence[LogSegment]) -> None:
        self.segments: tuple[LogSegment, ...] = tuple(segments)
        self.bases: tuple[int, ...] = tuple(s.base_offset for s in self.segments)
        self._prefix: list[int] | None = None

    def sealed_timestamp_prefix(self) -> list[int]:
        """``prefix[i]`` = largest timestamp of segments ``0..i`` (all but
        the active one); non-decreasing, so it can be bisected. Raises
        `_Stale` if a segment was deleted meanwhile."""
        prefix = self._prefix
        if prefix is None:
            prefix = []
            running = -1
            for seg in self.segments[:-1]:
                if not seg.try_acquire():
                    raise _Stale
                try:
                    running = max(running, seg.max_timestamp)
                finally:
                    seg.release()
                prefix.append(running)
            self._prefix = prefix
        return prefix


class Log:
    """The log of one partition, stored in ``directory``
    (``<log_dir>/<topic>-<partition>/``).

    ``Log(directory, config)`` (or `open`) loads every
    ``<20 digits>.log`` segment found, sorted by base offset (leftover
    ``*.deleted`` files and indexes without a log are removed). An empty
    directory (created if missing) gets a first segment at offset 0.

    Recovery (Kafka documentation, "Log", "Guarantees"): with ``clean_shutdown`` the
    segments are trusted (indexes sanity-checked, the last batch of the last
    segment verified; a failure there recovers that segment). Otherwise
    every segment from the one holding ``recovery_point`` (an offset; every
    offset below it was fsync-ed) onwards is recovered, or only the last
    segment when ``recovery_point`` is ``None``: each batch's size, offsets
    and CRC are checked, the segment is truncated after its last valid batch
    and all later segments are deleted. `recovery_truncated_bytes`
    tells how many bytes that removed (also logged at WARNING). Missing or
    corrupt ``.index`` / ``.timeindex`` files are rebuilt.

    ``clock``: a function returning the time in ms (default: wall clock);
    used for time-based roll and flush when no ``now_ms`` is passed.

    Compaction (Kafka documentation, "Log Compaction"; the cleaner is
    `kclient.storage.cleaner`): before loading, a cleaning cut by a crash
    is settled (`kclient.storage.swap.recover_swaps`: ``.cleaned`` files are
    deleted, ``.swap`` files replace the segments they cover).
    ``offset_gaps`` (default: the config's policy holds ``compact``) lets
    recovery accept offsets that skip values, as cleaned segments have.

    Replication state (KIP-101, KIP-98): ``high_watermark`` is the
    checkpointed high watermark (``None``: the log end offset); the
    `leader_epoch_cache` is loaded from ``leader-epoch-checkpoint`` (rebuilt
    from the batches' ``partitionLeaderEpoch`` when the file is missing) and
    extended from the batches recovery validated; the `producer_state` is
    loaded from the newest ``<offset>.snapshot`` at or below the log end
    offset plus a replay of the batch headers after it.

    Errors: `OffsetOutOfRangeError` on reads outside
    ``[log_start_offset, log_end_offset]``; `MessageSizeTooLargeError`,
    `RecordListTooLargeError`, `InvalidRecordError`,
    `CorruptRecordError` on appends; ``OSError`` on I/O failure;
    ``ValueError`` when used after `close`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        recovery_point: int | None = None,
        clean_shutdown: bool = False,
        clock: Callable[[], int] | None = None,
        high_watermark: int | None = None,
        offset_gaps: bool | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.config = config if config is not None else LogConfig()
        #: Whether offsets may skip values between batches (a compacted log,
        #: Kafka documentation "Log Compaction": cleaning removes records but
        #: keeps the offsets of the others). Recovery then accepts a batch or
        #: segment that starts above the previous one's end, not only at it.
        self.offset_gaps = self.config.compact if offset_gaps is None else offset_gaps
        self._clock = clock if clock is not None else now_ms
        self._lock = threading.Lock()
        self._closed = False
        self._dir_dirty = False
        #: Bytes removed by recovery when the log was opened: the truncated
        #: tail of the damaged segment plus every later segment deleted.
        self.recovery_truncated_bytes = 0
        #: Number of segments validated batch by batch when the log was opened.
        self.recovered_segments = 0
        #: Number of flushes (fsync rounds) done since the log was opened.
        self.flush_count = 0
        self.directory.mkdir(parents=True, exist_ok=True)
        self._recovered_from: int | None = None  # base offset of the first segment recovery validated
        segments = self._load(recovery_point, clean_shutdown)
        self._view = _View(segments)
        self._log_end_offset = segments[-1].next_offset
        # Everything loaded was validated or trusted and is on disk.
        self._recovery_point = self._log_end_offset
        self._first_unflushed_ms: int | None = None
        #: While true, every leader `append` moves the high watermark to the
        #: log end offset (a partition whose ISR is the leader alone, as with
        #: no replication). The first `update_high_watermark` call sets it to
        #: false: from then on the replication layer moves the high watermark.
        self.high_watermark_follows_log_end = True
        self._high_watermark = self._log_end_offset
        if high_watermark is not None:
            self._high_watermark = max(self.log_start_offset, min(high_watermark, self._log_end_offset))
        self._producer_state = ProducerStateManager(self.directory)
        try:
            self._epoch_cache = self._load_replication_state()
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        logger.debug(
            "loaded log %s: %d segment(s), offsets %d..%d", self.directory, len(segments), self.log_start_offset, self._log_end_offset
        )

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        recovery_point: int | None = None,
        clean_shutdown: bool = False,
        clock: Callable[[], int] | None = None,
        high_watermark: int | None = None,
        offset_gaps: bool | None = None,
    ) -> Log:
        """Load (or create) the log in ``directory``; same as the constructor."""
        return cls(
            directory,
            config,
            recovery_point=recovery_point,
            clean_shutdown=clean_shutdown,
            clock=clock,
            high_watermark=high_watermark,
            offset_gaps=offset_gaps,
        )

    # ------------------------------------------------------------ loading

    def _remove_leftovers(self, bases: set[int]) -> None:
        for name in os.listdir(self.directory):
            path = self.directory / name
            if name.endswith(_LEFTOVER_SUFFIXES):
                logger.info("log %s: removing leftover file %s", self.directory, name)
                path.unlink(missing_ok=True)
                self._dir_dirty = True
            elif name.endswith((INDEX_SUFFIX, TIMEINDEX_SUFFIX)):
                base = parse_base_offset(name)
                if base is not None and base not in bases:
                    logger.info("log %s: removing index %s without its log file", self.directory, name)
                    path.unlink(missing_ok=True)
                    self._dir_dirty = True

    def _delete_segment_files(self, base: int) -> int:
        """Remove the files of segment ``base`` (not opened); returns the
        size of its ``.log`` file."""
        stem = file_stem(base)
        size = 0
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
            path = self.directory / (stem + suffix)
            try:
                if suffix == LOG_SUFFIX:
                    size = path.stat().st_size
                path.unlink()
            except FileNotFoundError:
                pass
        self._dir_dirty = True
        return size

    def _load(self, recovery_point: int | None, clean_shutdown: bool) -> list[LogSegment]:
        now = self._clock()
        interval = self.config.index_interval_bytes
        if recover_swaps(self.directory):
            self._dir_dirty = True
            self.offset_gaps = True  # a cleaner ran here
        names = os.listdir(self.directory)
        bases = sorted(b for name in names if name.endswith(LOG_SUFFIX) and (b := parse_base_offset(name)) is not None)
        self._remove_leftovers(set(bases))
        if not bases:
            seg = LogSegment.create(self.directory, 0, interval, now_ms=now)
            self._dir_dirty = True
            return [seg]
        if clean_shutdown:
            first_recover = len(bases)
        elif recovery_point is None:
            first_recover = len(bases) - 1
        else:
            first_recover = max(0, bisect_right(bases, recovery_point) - 1)
        segments: list[LogSegment] = []
        recovered: list[LogSegment] = []
        truncated = 0
        try:
            for i, base in enumerate(bases):
                if i < first_recover:
                    segments.append(LogSegment.open(self.directory, base, interval, now_ms=now))
                    continue
                prev = segments[-1] if segments else None
                if prev is not None and (base < prev.next_offset or (base > prev.next_offset and not self.offset_gaps)):
                    # Each segment starts where the previous one ends (rolls
                    # happen at the log end offset and nothing is compacted):
                    # a gap means the previous segment lost its tail, an
                    # overlap means damaged names. Later data cannot be kept.
                    dropped = sum(self._delete_segment_files(b) for b in bases[i:])
                    truncated += dropped
                    logger.warning(
                        "log %s: segment %d does not start where the previous one ends (offset %d); "
                        "deleted it and every later segment (%d segment(s), %d bytes)",
                        self.directory,
                        base,
                        prev.next_offset,
                        len(bases) - i,
                        dropped,
                    )
                    break
                seg = LogSegment.open(self.directory, base, interval, check_indexes=False, now_ms=now)
                segments.append(seg)
                recovered.append(seg)
                cut = seg.recover(allow_gaps=self.offset_gaps)
                if cut:
                    truncated += cut
                    self._dir_dirty = True
                    later = bases[i + 1 :]
                    if later:
                        dropped = sum(self._delete_segment_files(b) for b in later)
                        truncated += dropped
                        logger.warning(
                            "log %s: deleted %d segment(s) (%d bytes) after the damaged segment %d: %s",
                            self.directory,
                            len(later),
                            dropped,
                            base,
                            ", ".join(str(b) for b in later),
                        )
                    break
            if clean_shutdown and not segments[-1].verify_tail():
                last = segments[-1]
                logger.warning("log %s: clean shutdown marker found but segment %d ends badly; recovering it", self.directory, last.base_offset)
                truncated += last.recover(allow_gaps=self.offset_gaps)
                recovered.append(last)
            if not segments:  # every segment overlapped (impossible unless files were renamed)
                segments.append(LogSegment.create(self.directory, bases[0], interval, now_ms=now))
            segments[-1].last_offset  # compute the active segment's tail state now, single-threaded
            for seg in recovered:
                seg.flush()
            if recovered and self._dir_dirty:
                fsync_dir(self.directory)
                self._dir_dirty = False
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        self.recovered_segments = len(recovered)
        self.recovery_truncated_bytes = truncated
        if recovered:
            self._recovered_from = recovered[0].base_offset
        if truncated:
            logger.warning(
                "log %s: recovery truncated %d bytes; log end offset is now %d", self.directory, truncated, segments[-1].next_offset
            )
        return segments

    def _iter_fields(self, from_offset: int) -> Iterator[tuple[BatchInfo, ProducerFields | None]]:
        """Batch headers (with their v2 leader epoch / producer fields) of
        every batch whose last offset is ``>= from_offset``, in log order
        (lock held, or during construction)."""
        view = self._view
        i = max(0, bisect_right(view.bases, from_offset) - 1)
        for seg in view.segments[i:]:
            position = 0
            if from_offset > seg.base_offset:
                info = seg.find_batch(from_offset)
                if info is None:
                    continue
                position = info.position
            yield from seg.iter_batch_fields(position)

    def _load_replication_state(self) -> LeaderEpochCache:
        """Load the leader epoch cache and the producer state (construction)."""
        start, end = self.log_start_offset, self._log_end_offset
        cache = LeaderEpochCache.load(self.directory)
        rebuild_epochs = cache is None
        if cache is None:
            cache = LeaderEpochCache(self.directory)
            epochs_from: int | None = start
        else:
            cache.truncate_from_end(end)
            cache.truncate_from_start(start)
            # Batches recovery validated may carry epochs written after the
            # last checkpoint write.
            epochs_from = self._recovered_from
        snapshot = self._producer_state.load_latest_snapshot(end)
        producers_from = start if snapshot is None else max(snapshot, start)
        scan_from = producers_from if epochs_from is None else min(producers_from, epochs_from)
        entries = cache.entries()
        replayed = 0
        if scan_from < end:
            for info, fields in self._iter_fields(scan_from):
                if fields is None:
                    continue
                if epochs_from is not None and info.base_offset >= epochs_from and fields.partition_leader_epoch >= 0:
                    if not entries or fields.partition_leader_epoch > entries[-1][0]:
                        entries.append((fields.partition_leader_epoch, info.base_offset))
                if info.base_offset >= producers_from and fields.producer_id >= 0 and fields.base_sequence >= 0:
                    self._producer_state.update(
                        ProducerBatch(fields.producer_id, fields.producer_epoch, fields.base_sequence, info.last_offset - info.base_offset),
                        info.base_offset,
                        info.last_offset,
                    )
                    replayed += 1
        if rebuild_epochs:
            cache = LeaderEpochCache(self.directory, entries)
            if end > start:  # a new, empty log gets its file at the first epoch or at close
                cache.flush()
                logger.info("log %s: rebuilt the leader epoch cache from the log: %s", self.directory, entries)
        else:
            for epoch, offset in entries[len(cache.entries()) :]:
                cache.assign(epoch, offset)
        if replayed:
            logger.info(
                "log %s: producer state from snapshot %s plus %d replayed batch(es)", self.directory, snapshot, replayed
            )
        return cache

    def _reload_producer_state(self) -> None:
        """Rebuild the producer state for the current log end offset from
        the newest snapshot at or below it plus a replay (lock held)."""
        end = self._log_end_offset
        snapshot = self._producer_state.load_latest_snapshot(end)
        start = self.log_start_offset if snapshot is None else max(snapshot, self.log_start_offset)
        if start < end:
            for info, fields in self._iter_fields(start):
                if fields is not None and fields.producer_id >= 0 and fields.base_sequence >= 0:
                    self._producer_state.update(
                        ProducerBatch(fields.producer_id, fields.producer_epoch, fields.base_sequence, info.last_offset - info.base_offset),
                        info.base_offset,
                        info.last_offset,
                    )

    # ------------------------------------------------------------ offsets

    @property
    def name(self) -> str:
        """The directory name, ``<topic>-<partition>``."""
        return self.directory.name

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """Snapshot of the segments, oldest first (the last is active)."""
        return self._view.segments

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._view.segments[-1]

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record will get."""
        return self._log_end_offset

    @property
    def log_start_offset(self) -> int:
        """The first offset still held: the base offset of the oldest segment."""
        return self._view.bases[0]

    @property
    def high_watermark(self) -> int:
        """The high watermark: the offset below which every record is
        replicated to the whole ISR ("committed"), up to which consumers may
        read (Kafka documentation, "Replication"). Stored, not derived: the
        replication layer moves it with `update_high_watermark`; until then
        (`high_watermark_follows_log_end`) leader appends move it to the log
        end offset."""
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (the leader after the ISR caught up, a
        follower from the leader's fetch response).

        Also turns `high_watermark_follows_log_end` off.

        Args:
            offset: The new high watermark; clamped to ``[log_start_offset,
                log_end_offset]``.

        Returns:
            The high watermark now in effect.
        """
        with self._lock:
            self.high_watermark_follows_log_end = False
            self._high_watermark = max(self.log_start_offset, min(offset, self._log_end_offset))
            return self._high_watermark

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        """The partition's `LeaderEpochCache` (KIP-101): ``(leader epoch,
        start offset)`` entries, persisted in ``leader-epoch-checkpoint``."""
        return self._epoch_cache

    @property
    def latest_epoch(self) -> int:
        """The latest leader epoch in the leader epoch cache, -1 if none."""
        return self._epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The OffsetsForLeaderEpoch answer for ``epoch`` (KIP-101, KIP-279).

        Args:
            epoch: The requested leader epoch.

        Returns:
            ``(leader epoch, end offset)``; see
                `LeaderEpochCache.end_offset_for` (the latest epoch ends at the
                log end offset; ``(-1, -1)`` when unknown).
        """
        with self._lock:
            return self._epoch_cache.end_offset_for(epoch, self._log_end_offset)

    @property
    def producer_state(self) -> ProducerStateManager:
        """The idempotent producer state (KIP-98). Callers outside the log
        use its queries only: ``last_sequence(producer_id)``,
        ``epoch(producer_id)``, ``batches(producer_id)``,
        ``producer_ids()``."""
        return self._producer_state

    @property
    def recovery_point(self) -> int:
        """Every offset below this one is fsync-ed (what the recovery point
        checkpoint records; recovery after a crash starts from here)."""
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        """Messages appended but not yet fsync-ed (``log_end_offset -
        recovery_point``)."""
        return self._log_end_offset - self._recovery_point

    @property
    def size_bytes(self) -> int:
        """Total bytes of all segments' ``.log`` files."""
        return sum(s.size for s in self._view.segments)

    # ------------------------------------------------------------ append

    def append(
        self,
        records,
        now_ms: int | None = None,
        *,
        leader_epoch: int | None = None,
        validate_producer_state: bool = False,
    ) -> AppendResult:
        """Assign offsets to ``records`` and append them as the leader; return the offsets.

        The input is copied, never modified: a v2 batch gets base offset =
        log end offset and consumes ``lastOffsetDelta + 1`` offsets; an
        uncompressed v0/v1 entry gets one offset; a compressed v0/v1 wrapper
        gets one offset per inner message and carries the last (a v1
        wrapper's header is rewritten, a v0 set is rebuilt with absolute
        inner offsets). Nothing else is rewritten (the v2 CRC does not
        cover the base offset) except, with ``leader_epoch``, each v2
        batch's ``partitionLeaderEpoch`` (not covered by the CRC either).

        The active segment is rolled first if it is non-empty and the append
        would take it past ``segment_bytes``, its first batch is older than
        ``roll_ms``, or an index is full. After the append, if
        ``flush_interval_messages`` or more messages are unflushed, the log
        is fsync-ed before returning. All-or-nothing per call.

        Every v2 batch with a producer id >= 0 is recorded in the
        `producer_state` (KIP-98). While `high_watermark_follows_log_end`
        the high watermark moves to the new log end offset.

        Args:
            records (bytes | bytearray | memoryview): One or more
                complete batches (v2) or entries (v0/v1), validated by the
                caller.
            now_ms: The append time (default: the log's clock).
            leader_epoch: The leader's epoch (KIP-101): stamped into every v2
                batch and, when above the latest epoch of the
                `leader_epoch_cache`, recorded there as starting at this
                append's first offset. ``None``: batches are stored as given.
            validate_producer_state: Check the sequence numbers of every v2
                batch with a producer id >= 0 against the `producer_state`
                before writing anything (KIP-98). A retried batch already
                written (same producer epoch, first and last sequence as one
                of the producer's last 5 batches) writes nothing and returns
                its original offsets with ``duplicate=True``.

        Returns:
            The offsets assigned. An empty ``records`` writes nothing and
                returns ``(log_end_offset, log_end_offset - 1)``.

        Raises:
            MessageSizeTooLargeError: One batch is larger than
                ``max_message_bytes``.
            RecordListTooLargeError: The whole set is larger than
                ``segment_bytes``.
            InvalidRecordError: A batch has a negative ``lastOffsetDelta``.
            CorruptRecordError: An impossible header or a partial trailing
                batch.
            InvalidProducerEpochError: (``validate_producer_state``) a
                producer epoch below the known one.
            OutOfOrderSequenceNumberError: (``validate_producer_state``) a
                sequence number that does not follow the producer's last one,
                or a new producer epoch not starting at 0.
            UnknownProducerIdError: (``validate_producer_state``) no state for
                the producer id and the batch does not start at sequence 0.
            OSError: The write failed, or the policy flush failed (the
                records are then appended but not known to be durable).
        """
        buf = bytearray(records)
        with self._lock:
            self._check_open()
            next_offset = self._log_end_offset
            if not buf:
                return AppendResult(next_offset, next_offset - 1)
            infos, wrappers = self._validate_batches(buf)
            if validate_producer_state:
                duplicate = self._producer_state.check(
                    ProducerBatch(f.producer_id, f.producer_epoch, f.base_sequence, info.last_offset - info.base_offset)
                    for info, f in _producer_fields(buf, infos)
                )
                if duplicate is not None:
                    logger.debug("log %s: duplicate batch, already at offsets %d..%d", self.directory, duplicate.first_offset, duplicate.last_offset)
                    return AppendResult(duplicate.first_offset, duplicate.last_offset, -1, duplicate=True)
            now = self._clock() if now_ms is None else now_ms
            first = next_offset
            if wrappers:
                buf, next_offset = _assign_with_wrappers(buf, infos, next_offset)
                infos = list(scan_batches(buf))
            else:
                for info in infos:
                    _OFFSET.pack_into(buf, info.position, next_offset)
                    next_offset += info.last_offset - info.base_offset + 1
                infos = list(scan_batches(buf))
            if leader_epoch is not None:
                for info in infos:
                    if info.magic == 2:
                        stamp_partition_leader_epoch(buf, info.position, leader_epoch)
            flush_due = self._write_locked(buf, infos, first, next_offset - 1, now, leader_epoch=leader_epoch)
            if self.high_watermark_follows_log_end:
                self._high_watermark = self._log_end_offset
        if flush_due:
            self.flush(now_ms=now)
        return AppendResult(first, next_offset - 1, -1)

    def append_as_follower(self, records, now_ms: int | None = None) -> AppendResult:
        """Append batches whose offsets the leader assigned (a follower's
        fetch result), as they are.

        No offset or field is rewritten. The records must start at the log
        end offset and each batch must start right after the previous one
        (with `offset_gaps`, as a compacted leader's batches: at or after).
        The `leader_epoch_cache` records each v2 batch's
        ``partitionLeaderEpoch`` above its latest epoch (KIP-101) and the
        `producer_state` each batch with a producer id >= 0, without
        sequence checks (the leader made them). Roll, indexing and the flush
        policy are those of `append`; the high watermark does not move (the
        follower takes it from the leader with `update_high_watermark`).

        Args:
            records (bytes | bytearray | memoryview): Complete batches with
                their final offsets.
            now_ms: The append time (default: the log's clock).

        Returns:
            The first and last offsets appended; an empty ``records`` gives
                ``(log_end_offset, log_end_offset - 1)``.

        Raises:
            UnexpectedAppendOffsetError: The first batch does not start at
                the log end offset, or a batch does not start right after the
                previous one (nothing is written).
            MessageSizeTooLargeError: One batch is larger than
                ``max_message_bytes``.
            RecordListTooLargeError: The whole set is larger than
                ``segment_bytes``.
            InvalidRecordError: A batch has a negative ``lastOffsetDelta``.
            CorruptRecordError: An impossible header or a partial trailing
                batch.
            OSError: The write failed, or the policy flush failed.
        """
        buf = records if isinstance(records, (bytes, bytearray)) else bytes(records)
        with self._lock:
            self._check_open()
            end = self._log_end_offset
            if not buf:
                return AppendResult(end, end - 1)
            infos, _ = self._validate_batches(buf)
            expected = end
            for info in infos:
                if _is_wrapper(buf, info):
                    ok = info.last_offset >= expected  # carries its last inner offset only
                elif self.offset_gaps:
                    ok = info.base_offset >= expected  # a compacted leader's log skips offsets
                else:
                    ok = info.base_offset == expected
                if not ok:
                    where = "the log end offset" if expected == end else "the end of the previous batch"
                    raise UnexpectedAppendOffsetError(
                        f"{self.name}: batch at byte {info.position} starts at offset {info.base_offset}, "
                        f"expected {expected} ({where}); nothing appended",
                        first_offset=infos[0].base_offset,
                        expected_offset=expected,
                    )
                expected = info.last_offset + 1
            now = self._clock() if now_ms is None else now_ms
            last = infos[-1].last_offset
            first = end if _is_wrapper(buf, infos[0]) else infos[0].base_offset
            flush_due = self._write_locked(buf, infos, first, last, now, epochs_from_batches=True)
        if flush_due:
            self.flush(now_ms=now)
        return AppendResult(first, last, -1)

    def _validate_batches(self, buf) -> tuple[list[BatchInfo], bool]:
        """Check a record set's framing and sizes (lock held); returns its
        batches and whether it holds compressed v0/v1 wrappers."""
        total = len(buf)
        infos = list(scan_batches(buf))
        covered = sum(i.size for i in infos)
        if covered != total:
            raise CorruptRecordError(f"record set of {total} bytes ends with a partial batch of {total - covered} bytes")
        limit = self.config.max_message_bytes
        wrappers = False  # compressed v0/v1 wrappers, whose inner messages own several offsets
        for info in infos:
            if info.size > limit:
                raise MessageSizeTooLargeError(f"batch at byte {info.position} is {info.size} bytes, above max.message.bytes {limit}")
            if info.magic == 2:
                if info.last_offset < info.base_offset:
                    raise InvalidRecordError(f"batch at byte {info.position} has negative lastOffsetDelta")
            elif _is_wrapper(buf, info):
                wrappers = True
        if total > self.config.segment_bytes:
            raise RecordListTooLargeError(f"record set of {total} bytes is larger than segment.bytes {self.config.segment_bytes}")
        return infos, wrappers

    def _write_locked(
        self,
        buf,
        infos: list[BatchInfo],
        first: int,
        last: int,
        now: int,
        *,
        leader_epoch: int | None = None,
        epochs_from_batches: bool = False,
    ) -> bool:
        """Write batches carrying offsets ``first``..``last`` at the log end
        (lock held): roll if due, append to the active segment, then record
        the leader epoch (``leader_epoch`` for a leader append, or each
        batch's own ``partitionLeaderEpoch`` with ``epochs_from_batches`` for
        a follower append) and the producer state. Returns whether the
        message-count flush policy is due."""
        active = self.active_segment
        if active.index_suspect:
            active.rebuild_indexes()
        reason = self._roll_reason(active, len(buf), last, now)
        if reason:
            active = self._roll(first, now, reason)
        active.append(buf, first, last, now_ms=now)
        self._log_end_offset = last + 1
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now
        cache = self._epoch_cache
        if leader_epoch is not None:
            if leader_epoch > cache.latest_epoch():
                cache.assign(leader_epoch, first)
        for info, fields in _producer_fields(buf, infos, all_v2=True):
            if epochs_from_batches and fields.partition_leader_epoch > cache.latest_epoch():
                cache.assign(fields.partition_leader_epoch, info.base_offset)
            if fields.producer_id >= 0 and fields.base_sequence >= 0:
                self._producer_state.update(
                    ProducerBatch(fields.producer_id, fields.producer_epoch, fields.base_sequence, info.last_offset - info.base_offset),
                    info.base_offset,
                    info.last_offset,
                )
        return self._log_end_offset - self._recovery_point >= self.config.flush_interval_messages

    def _roll_reason(self, active: LogSegment, total: int, last: int, now: int) -> str | None:
        if not active.size:
            return None
        cfg = self.config
        if active.size + total > cfg.segment_bytes:
            return f"segment would grow past segment.bytes {cfg.segment_bytes}"
        if last - active.base_offset > _INT32_MAX:
            return "relative offsets would overflow"
        if active.index.is_full(cfg.index_max_bytes) or active.timeindex.is_full(cfg.index_max_bytes):
            return f"an index reached {cfg.index_max_bytes} bytes"
        base = active.rolling_base_ms
        if base is not None and now - base > cfg.roll_ms:
            return f"first batch is {now - base} ms old, above roll.ms {cfg.roll_ms}"
        return None

    def _roll(self, base_offset: int, now: int | None = None, reason: str = "forced") -> LogSegment:
        """Start a new active segment at ``base_offset`` (lock held)."""
        old = self.active_segment
        old.mark_inactive()
        old.flush()  # a rolled segment is never written again: make it durable now
        old.drop_descriptors()  # and it holds no descriptor until it is read
        if old.next_offset > self._recovery_point:
            self._recovery_point = old.next_offset
            if self._recovery_point >= self._log_end_offset:
                self._first_unflushed_ms = None
        seg = LogSegment.create(
            self.directory, base_offset, self.config.index_interval_bytes, now_ms=self._clock() if now is None else now
        )
        self._view = _View(self._view.segments + (seg,))
        # The producer state up to the new segment (KIP-98): recovery after a
        # crash replays only the batches after the newest snapshot.
        self._producer_state.take_snapshot(self._log_end_offset)
        self._dir_dirty = True
        logger.info("log %s: rolled new segment at offset %d (previous %d bytes; %s)", self.directory, base_offset, old.size, reason)
        return seg

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Force a new active segment at the log end offset.

        Nothing happens when the active segment is empty.

        Args:
            now_ms: The time in ms (default: the log's clock).

        Returns:
            The active segment.
        """
        with self._lock:
            self._check_open()
            if self.active_segment.size:
                return self._roll(self._log_end_offset, now_ms)
            return self.active_segment

    # ------------------------------------------------------------ flush

    def flush(self, now_ms: int | None = None) -> bool:
        """Make everything appended so far durable.

        ``os.fsync`` every segment holding unflushed data (log, index and time
        index files) and, after a roll or deletion, the directory; then the
        recovery point becomes the log end offset seen at the start. The fsyncs
        run outside the writer lock, so appends continue meanwhile. Seed 001's
        guarantee: what is flushed survives a system crash.

        Args:
            now_ms: The time in ms (default: the log's clock).

        Returns:
            ``False`` if there was nothing to flush.

        Raises:
            OSError: An fsync failed.
        """
        with self._lock:
            self._check_open()
            for seg in self._view.segments:
                if seg.index_suspect:
                    seg.rebuild_indexes()
            target = self._log_end_offset
            rp = self._recovery_point
            dir_dirty = self._dir_dirty
            if target <= rp and not dir_dirty:
                return False
            started = self._clock() if now_ms is None else now_ms
            held = []
            segs = self._view.segments
            for i, seg in enumerate(segs):
                if seg.size and _holds_offsets_from(segs, i, rp):
                    seg.prepare_flush()
                    if seg.try_acquire():
                        held.append(seg)
            self._dir_dirty = False
        try:
            for seg in held:
                seg.sync()
            if dir_dirty:
                fsync_dir(self.directory)
        except BaseException:
            with self._lock:
                self._dir_dirty = self._dir_dirty or dir_dirty
            raise
        finally:
            for seg in held:
                seg.release()
        with self._lock:
            if target > self._recovery_point:
                self._recovery_point = target
            if self._recovery_point >= self._log_end_offset:
                self._first_unflushed_ms = None
            elif self._first_unflushed_ms is None or self._first_unflushed_ms < started:
                # Appends made during the fsync: they are no older than ``started``.
                self._first_unflushed_ms = started
            self.flush_count += 1
        return True

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """Time-based flush policy (``flush_interval_ms``).

        Flush if messages are unflushed and the oldest of them was appended
        ``flush_interval_ms`` or more ago. The broker calls this periodically
        (``log.flush.scheduler.interval.ms``).

        Args:
            now_ms: The time in ms (default: the log's clock).

        Returns:
            Whether it flushed.

        Raises:
            OSError: An fsync failed.
        """
        interval = self.config.flush_interval_ms
        if interval is None:
            return False
        now = self._clock() if now_ms is None else now_ms
        with self._lock:
            if self._closed:
                return False
            first = self._first_unflushed_ms
            due = first is not None and self._log_end_offset > self._recovery_point and now - first >= interval
        if due:
            return self.flush(now_ms=now)
        return False

    # ------------------------------------------------------------ read

    def read_slice(self, offset: int, max_bytes: int, min_one_batch: bool = True, max_offset: int | None = None) -> FileSlice:
        """Locate the bytes to return for a fetch at ``offset`` without
        reading them.

        Args:
            offset: The offset to read from; the slice starts at the batch
                that holds it.
            max_bytes: The most bytes to return; the last batch may be cut,
                as the "Reads" part of Kafka's "Log" documentation describes.
            min_one_batch: Return the whole first batch even if it is larger
                than ``max_bytes`` (KIP-74).
            max_offset: Stop before the batch holding this offset (a
                consumer's fetch passes the high watermark, a follower's
                passes ``None``: up to the log end offset). An ``offset`` at
                or above it gives an empty slice.

        Returns:
            A `FileSlice` of one segment file. An offset equal to the log end
                offset (or in a segment rolled after the snapshot) gives an empty
                slice. The slice keeps the segment open until released, even if
                retention deletes it meanwhile.

        Raises:
            OffsetOutOfRangeError: ``offset`` is below ``log_start_offset``
                or above ``log_end_offset`` (also when its segment is deleted
                while being located).
            CorruptRecordError: A segment holds an impossible header.
            ValueError: The log is closed.
        """
        for _ in range(_SNAPSHOT_RETRIES):
            end = self._log_end_offset
            view = self._view  # one consistent snapshot
            hw = min(self._high_watermark, end)
            start = view.bases[0]
            if offset == end or (max_offset is not None and start <= offset <= end and offset >= max_offset):
                return FileSlice.empty(hw, start, end)
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range for {self.name}: valid offsets are {start}..{end} (log end offset {end})"
                )
            i = max(0, bisect_right(view.bases, offset) - 1)
            stale = False
            while i < len(view.segments):
                seg = view.segments[i]
                if not seg.try_acquire():
                    stale = True
                    break
                keep = False
                try:
                    # A fetch from where a batch is known to begin that takes
                    # the rest of the segment (a consumer reading from the
                    # start, or one that has read everything appended so
                    # far) needs no header: no batch is cut, none passes
                    # max_offset. As in the walk below, the size and the
                    # next offset are read without the writer's lock (the
                    # broker appends to a partition it leads and reads it on
                    # its one trio thread).
                    position = seg.batch_start(offset)
                    if position is not None:
                        size = seg.size
                        if 0 < size - position <= max_bytes and (max_offset is None or max_offset >= seg.next_offset):
                            result = FileSlice(seg, position, size - position, hw, start, end)
                            keep = True
                            return result
                    info = seg.find_batch(offset)
                    if info is not None:
                        want = info.size if (min_one_batch and info.size > max_bytes) else max(0, max_bytes)
                        length = max(0, min(seg.size - info.position, want))
                        if max_offset is not None and info.last_offset >= max_offset:
                            length = 0  # the first batch reaches past max_offset
                        elif max_offset is not None and seg.next_offset > max_offset:
                            stop = seg.find_batch(max_offset)
                            if stop is not None:
                                length = min(length, stop.position - info.position)
                        result = FileSlice(seg, info.position, length, hw, start, end)
                        keep = True
                        return result
                finally:
                    if not keep:
                        seg.release()
                i += 1  # this segment ends before ``offset``: continue in the next one
            if not stale:
                return FileSlice.empty(hw, start, end)
            if self._closed:
                raise ValueError(f"log {self.directory} is closed")
            self._await_writer()
        raise OffsetOutOfRangeError(
            f"offset {offset} of {self.name} was deleted while being read; log start offset is now {self.log_start_offset}"
        )

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True, max_offset: int | None = None) -> ReadResult:
        """Read batches starting with the one that holds ``offset``, as
        bytes (`read_slice` then ``pread``).

        Args:
            offset: The offset to read from.
            max_bytes: The most bytes to return, from one segment; the last
                batch may be partial (the client detects that by its size
                field, as Kafka's "Reads" describes).
            min_one_batch: Return the whole first batch even if it is larger
                than ``max_bytes`` (KIP-74).
            max_offset: Stop before the batch holding this offset (see
                `read_slice`).

        Returns:
            The bytes with the partition's offsets at read time. An offset
                equal to the log end offset gives empty records.

        Raises:
            OffsetOutOfRangeError: ``offset`` is below ``log_start_offset``
                or above ``log_end_offset``.
            CorruptRecordError: A segment holds an impossible header.
        """
        with self.read_slice(offset, max_bytes, min_one_batch, max_offset) as piece:
            data = piece.read()
        return ReadResult(data, piece.high_watermark, piece.log_start_offset, piece.log_end_offset)

    # ------------------------------------------------------------ offsets by time

    def offsets_before(self, timestamp_ms: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0 (getOffsetsBefore), as Kafka 0.8's
        ``Log.getOffsetsBefore``.

        Candidates are every segment's base offset paired with its file
        mtime (ms) and, if the active segment is non-empty, the log end
        offset paired with now.

        Args:
            timestamp_ms: ``LATEST_TIMESTAMP`` (-1) starts from the last
                candidate, ``EARLIEST_TIMESTAMP`` (-2) from the first; any
                other value from the last candidate whose time is
                ``<= timestamp_ms`` (none: empty list).
            max_num_offsets: The most offsets to return.

        Returns:
            Offsets from the start going back, descending.
        """
        end = self._log_end_offset
        segs = self._view.segments
        candidates = []
        for seg in segs:
            if not seg.try_acquire():
                continue  # deleted meanwhile
            try:
                candidates.append((seg.base_offset, seg.mtime))
            finally:
                seg.release()
        if segs[-1].size > 0:
            candidates.append((end, self._clock()))
        if timestamp_ms == LATEST_TIMESTAMP:
            start = len(candidates) - 1
        elif timestamp_ms == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = len(candidates) - 1
            while start >= 0 and candidates[start][1] > timestamp_ms:
                start -= 1
        count = max(0, min(max_num_offsets, start + 1))
        return sorted((candidates[start - j][0] for j in range(count)), reverse=True)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """ListOffsets v1+: the offset for a timestamp.

        Args:
            timestamp_ms: A timestamp (ms), or ``LATEST_TIMESTAMP`` (-1),
                ``EARLIEST_TIMESTAMP`` (-2) or ``MAX_TIMESTAMP`` (-3,
                KIP-734), from `kclient.protocol.messages.list_offsets`.

        Returns:
            ``(offset, timestamp_ms)``: -1 gives ``(log_end_offset, -1)``,
                -2 gives ``(log_start_offset, -1)``, -3 gives the batch holding
                the largest timestamp as ``(its base offset, that timestamp)``;
                otherwise the first batch whose largest timestamp is
                ``>= timestamp_ms`` gives ``(its base offset, its largest
                timestamp)`` (batch granularity). ``None`` if there is none.

        Found by lookup: bisect over the running maximum of the segments'
        largest timestamps picks the segment, then its time index, its
        offset index and a short walk over batch headers."""
        if timestamp_ms == LATEST_TIMESTAMP:
            return (self._log_end_offset, -1)
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return (self.log_start_offset, -1)
        for _ in range(_SNAPSHOT_RETRIES):
            view = self._view
            try:
                if timestamp_ms == MAX_TIMESTAMP:
                    return self._max_timestamp_offset(view)
                if timestamp_ms < 0:
                    return self._scan_for_timestamp(view, timestamp_ms)
                prefix = view.sealed_timestamp_prefix()
                i = bisect_left(prefix, timestamp_ms)
                seg = view.segments[i] if i < len(prefix) else view.segments[-1]
                if not seg.try_acquire():
                    raise _Stale
                try:
                    info = seg.find_offset_by_timestamp(timestamp_ms)
                finally:
                    seg.release()
                return None if info is None else (info.base_offset, info.max_timestamp)
            except _Stale:
                self._await_writer()
                continue
        raise OffsetOutOfRangeError(f"segments of {self.name} were deleted while looking up timestamp {timestamp_ms}")

    @staticmethod
    def _scan_for_timestamp(view: _View, timestamp_ms: int) -> tuple[int, int] | None:
        for seg in view.segments:
            if not seg.try_acquire():
                raise _Stale
            try:
                for info in seg.iter_batches():
                    if info.max_timestamp >= timestamp_ms:
                        return (info.base_offset, info.max_timestamp)
            finally:
                seg.release()
        return None

    @staticmethod
    def _max_timestamp_offset(view: _View) -> tuple[int, int] | None:
        best: LogSegment | None = None
        best_ts = -1
        for seg in view.segments:
            if not seg.try_acquire():
                raise _Stale
            try:
                if seg.max_timestamp > best_ts:
                    best, best_ts = seg, seg.max_timestamp
            finally:
                seg.release()
        if best is None:
            return None
        if not best.try_acquire():
            raise _Stale
        try:
            info = best.find_batch(best.offset_of_max_timestamp)
        finally:
            best.release()
        return None if info is None else (info.base_offset, best_ts)

    # ------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> int:
        """Remove every record at or above ``offset`` (a follower whose log
        diverged from the leader's; Kafka's ``truncateTo``, KIP-101).

        The cut falls on a batch boundary: a batch holding ``offset`` is
        removed whole, so the new log end offset may be below ``offset``.
        Later segments are deleted, the segment holding the cut becomes the
        active one (its ``.log`` file truncated and fsync-ed, its indexes
        cut); the recovery point and the high watermark are lowered to the
        new log end offset, the leader epoch cache loses the epochs starting
        at or after it, producer snapshots above it are deleted and the
        producer state is rebuilt. Readers holding a `FileSlice` of a
        deleted segment keep their bytes. An ``offset`` below the log start
        offset empties the log (`truncate_fully_and_start_at`).

        Args:
            offset: The first offset to remove.

        Returns:
            The new log end offset (unchanged when ``offset >=
                log_end_offset``).

        Raises:
            ValueError: The log is closed, or ``offset`` is negative.
            OSError: An I/O failure.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to negative offset {offset}")
        with self._lock:
            self._check_open()
            if offset >= self._log_end_offset:
                return self._log_end_offset
            if offset < self.log_start_offset:
                self._truncate_fully_locked(offset)
                return self._log_end_offset
            old_end = self._log_end_offset
            view = self._view
            i = max(0, bisect_right(view.bases, offset) - 1)
            seg = view.segments[i]
            later = view.segments[i + 1 :]
            removed = 0
            if later:
                self._view = _View(view.segments[: i + 1])
                self._dir_dirty = True
                for dead in later:
                    removed += dead.size
                    dead.delete()
            removed += seg.truncate_to(offset)
            self._after_truncation(seg.next_offset)
            if self._dir_dirty:
                fsync_dir(self.directory)
                self._dir_dirty = False
            logger.warning(
                "log %s: truncated to offset %d (asked %d): removed offsets %d..%d, %d bytes, %d segment(s) deleted",
                self.directory,
                self._log_end_offset,
                offset,
                self._log_end_offset,
                old_end - 1,
                removed,
                len(later),
            )
            return self._log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset`` (a
        follower whose log end offset is below the leader's log start
        offset; Kafka's ``truncateFullyAndStartAt``).

        The log start offset, log end offset, recovery point and high
        watermark all become ``offset``; the leader epoch cache is emptied;
        every producer snapshot is deleted and the producer state cleared.

        Args:
            offset: The new log start offset.

        Raises:
            ValueError: The log is closed, or ``offset`` is negative.
            OSError: An I/O failure.
        """
        if offset < 0:
            raise ValueError(f"cannot start {self.name} at negative offset {offset}")
        with self._lock:
            self._check_open()
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        old = self._view.segments
        for seg in old:
            seg.delete()
        seg = LogSegment.create(self.directory, offset, self.config.index_interval_bytes, now_ms=self._clock())
        self._view = _View((seg,))
        self._log_end_offset = offset
        self._recovery_point = offset
        self._high_watermark = offset
        self._first_unflushed_ms = None
        self._epoch_cache.clear()
        self._producer_state.delete_all_snapshots()
        fsync_dir(self.directory)
        self._dir_dirty = False
        logger.warning("log %s: deleted all %d segment(s); the log now starts at offset %d", self.directory, len(old), offset)

    def _after_truncation(self, end: int) -> None:
        """Bring the offsets, the epoch cache and the producer state down
        to the new log end offset ``end`` (lock held)."""
        self._log_end_offset = end
        if self._recovery_point > end:
            self._recovery_point = end
        if self._recovery_point >= end:
            self._first_unflushed_ms = None
        if self._high_watermark > end:
            self._high_watermark = end
        self._epoch_cache.truncate_from_end(end)
        self._reload_producer_state()

    # ------------------------------------------------------------ deletion

    def _delete_prefix(self, n: int, reason: str) -> None:
        """Drop the ``n`` oldest segments (lock held): swap in the shorter
        view first, then delete the files (deferred while readers hold
        them)."""
        old = self._view
        self._view = _View(old.segments[n:])
        self._dir_dirty = True
        for seg in old.segments[:n]:
            logger.info(
                "log %s: deleting segment %s (offsets %d..%d, %d bytes): %s",
                self.directory,
                seg.log_path.name,
                seg.base_offset,
                seg.last_offset,
                seg.size,
                reason,
            )
            seg.delete()
        start = self.log_start_offset
        if self._recovery_point < start:
            self._recovery_point = start
        if self._high_watermark < start:
            self._high_watermark = start
        self._epoch_cache.truncate_from_start(start)
        self._producer_state.delete_snapshots_below(start)

    def delete_old_segments(self, should_delete: Callable[[LogSegment], bool]) -> int:
        """Delete segments from the oldest while ``should_delete(segment)`` is true.

        The active segment is never deleted. As in Kafka's "Deletes", whole
        segments go, and the segment list is replaced copy-on-write, so
        concurrent reads keep a consistent view. The log start offset becomes
        the base of the oldest remaining segment.

        Args:
            should_delete: Called on each segment, oldest first.

        Returns:
            The number of segments deleted.
        """
        with self._lock:
            self._check_open()
            segs = self._view.segments
            n = 0
            while n < len(segs) - 1 and should_delete(segs[n]):
                n += 1
            if n:
                self._delete_prefix(n, "delete policy")
            return n

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Retention (``log.retention.ms`` / ``log.retention.bytes``), Kafka's rules.

        Only for a cleanup policy holding ``delete`` (a ``compact``-only log
        keeps every segment; its cleaner removes records instead). Delete
        whole segments, oldest first, while the segment's largest timestamp
        (its file mtime when it has no timestamps) is more than
        ``retention_ms`` before ``now_ms``, or while the log minus that
        segment still holds ``retention_bytes`` or more, and only segments
        wholly below the high watermark. As in Apache Kafka
        (``UnifiedLog.deleteOldSegments``), the active segment is no
        exception once it holds records: when every segment is to go, a new
        empty active segment is rolled at the log end first, so the log
        start offset becomes the log end offset. Otherwise the log start
        offset advances to the oldest remaining segment. Later reads below it
        raise `OffsetOutOfRangeError`. Also rebuilds indexes that readers
        found inconsistent.

        Args:
            now_ms: The time in ms (default: the log's clock).

        Returns:
            The number of segments deleted.
        """
        now = self._clock() if now_ms is None else now_ms
        cfg = self.config
        with self._lock:
            if self._closed:
                return 0
            segs = self._view.segments
            if not cfg.delete:
                for seg in segs:
                    if seg.index_suspect:
                        seg.rebuild_indexes()
                return 0
            for seg in segs:
                if seg.index_suspect:
                    seg.rebuild_indexes()
            # Kafka's deletable segments: each wholly below the high watermark
            # (up to the next segment's base, or the log end for the active
            # one), the active one only when it holds records.
            end = self._log_end_offset
            hw = self._high_watermark
            deletable = 0
            while deletable < len(segs):
                upper = segs[deletable + 1].base_offset if deletable + 1 < len(segs) else end
                if hw < upper or (deletable == len(segs) - 1 and not segs[deletable].size):
                    break
                deletable += 1
            by_time = 0
            if cfg.retention_ms >= 0:
                while by_time < deletable and now - segs[by_time].largest_timestamp > cfg.retention_ms:
                    by_time += 1
            by_size = 0
            if cfg.retention_bytes >= 0:
                excess = sum(s.size for s in segs) - cfg.retention_bytes
                while by_size < deletable and excess - segs[by_size].size >= 0:
                    excess -= segs[by_size].size
                    by_size += 1
            n = max(by_time, by_size)
            if n:
                why = []
                if by_time:
                    why.append(f"{by_time} older than retention.ms {cfg.retention_ms}")
                if by_size:
                    why.append(f"{by_size} beyond retention.bytes {cfg.retention_bytes}")
                if n == len(segs):
                    # Every segment goes, the active one too: a log always has
                    # one, so roll an empty one at the log end first.
                    self._roll(end, now, reason="retention deletes every segment")
                self._delete_prefix(n, "retention: " + ", ".join(why))
            return n

    # ------------------------------------------------------------ compaction

    def _await_writer(self) -> None:
        """A reader that met a deleted segment waits for the writer holding
        the lock to publish the new view before taking a new snapshot."""
        with self._lock:
            pass

    def update_config(self, config: LogConfig) -> None:
        """Replace the log's configuration (a topic's configs changed or
        became known; Kafka's ``updateConfig``). Appends, rolls, retention
        and the cleaner use it from their next call. A ``compact`` policy
        turns `offset_gaps` on for good.

        Args:
            config: The new configuration.
        """
        with self._lock:
            self.config = config
            if config.compact:
                self.offset_gaps = True

    def replace_segments(self, old: Sequence[LogSegment], sizes: Sequence[int], swap_stem: Path) -> LogSegment | None:
        """Swap cleaned segment files in for ``old`` (Kafka's
        ``replaceSegments``; used by `kclient.storage.cleaner`).

        ``swap_stem`` names ``<stem>.log.swap`` (and its ``.index.swap`` /
        ``.timeindex.swap``), fsync-ed, whose base offset is that of
        ``old[0]``. Under the writer lock: if ``old`` are still consecutive,
        inactive segments of the log with the ``sizes`` seen when cleaning
        began, they are deleted (readers keep their open files), the swap
        files take their names, the new segment is opened and a new view
        published; else the swap files are deleted and nothing changes. A
        crash at any point leaves files `kclient.storage.swap.recover_swaps`
        settles.

        Args:
            old: The segments the cleaned one replaces, oldest first.
            sizes: Their sizes when cleaning read them.
            swap_stem: The path of the swap files without their suffixes.

        Returns:
            The new segment, or ``None`` if the log changed meanwhile.

        Raises:
            OSError: An I/O failure.
        """
        base = old[0].base_offset
        swaps = [swap_stem.with_name(swap_stem.name + suffix + SWAP_SUFFIX) for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)]
        with self._lock:
            segs = self._view.segments
            ok = not self._closed and old[0] in segs
            if ok:
                i = segs.index(old[0])
                ok = (
                    i + len(old) < len(segs)
                    and all(a is b and not a.deleted and a.size == n for a, b, n in zip(old, segs[i : i + len(old)], sizes))
                )
            if not ok:
                for path in swaps:
                    path.unlink(missing_ok=True)
                logger.info("log %s: cleaned segment %d dropped: the log changed while it was cleaned", self.directory, base)
                return None
            self.offset_gaps = True
            for seg in old:
                seg.delete()
            stem = self.directory / file_stem(base)
            for path, suffix in zip(swaps, (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)):
                if path.exists():
                    os.replace(path, stem.with_name(stem.name + suffix))
            new = LogSegment.open(self.directory, base, self.config.index_interval_bytes, now_ms=self._clock())
            self._view = _View(segs[:i] + (new,) + segs[i + len(old) :])
            fsync_dir(self.directory)
            self._dir_dirty = False
        return new

    # ------------------------------------------------------------ lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    def close(self) -> None:
        """Flush (fsync) and close every segment; the recovery point then
        equals the log end offset. Files still used by a
        `FileSlice` close when it is released. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            segs = self._view.segments
            try:
                active = segs[-1]
                active.mark_inactive()
                for i, seg in enumerate(segs):
                    if seg is active or (seg.size and _holds_offsets_from(segs, i, self._recovery_point)):
                        seg.flush()
                self._producer_state.take_snapshot(self._log_end_offset)
                if not self._epoch_cache.path.exists():
                    self._epoch_cache.flush()
                if self._dir_dirty:
                    fsync_dir(self.directory)
                    self._dir_dirty = False
                self._recovery_point = self._log_end_offset
                self._first_unflushed_ms = None
            finally:
                for seg in segs:
                    seg.close()

    def __repr__(self) -> str:
        return f"Log({str(self.directory)!r}, offsets={self.log_start_offset}..{self._log_end_offset})"
