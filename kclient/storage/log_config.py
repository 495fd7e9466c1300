"""Per-log settings: `LogConfig`, Kafka's ``LogConfig``.

The broker's ``log.*`` settings and their topic-level overrides
(``cleanup.policy``, ``retention.ms``, ``segment.bytes``, ...; Kafka
documentation https://kafka.apache.org/documentation/#topicconfigs), with
Kafka's defaults and ranges. Sizes in bytes, times in ms. Used by `Log`
(`kclient.storage.log`), its `kclient.storage.loader.LogLoader`, retention
and the cleaner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kclient.errors import ConfigError

INT32_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_WEEK_MS = 7 * 24 * 60 * 60 * 1000


def _int_field(low: int, high: int, optional: bool = False) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
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


def _ratio(instance: Any, attribute: attrs.Attribute[float], value: float) -> None:
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
            with a null value) is kept once cleaned, and a transaction
            marker once a cleaning found its transaction's data gone
            (KIP-534's delete horizon).
        min_cleanable_dirty_ratio: ``log.cleaner.min.cleanable.ratio`` /
            topic ``min.cleanable.dirty.ratio``, 0.5: a log is cleaned when
            its dirty bytes over its cleanable bytes exceed this.
        min_compaction_lag_ms: ``log.cleaner.min.compaction.lag.ms`` / topic
            ``min.compaction.lag.ms``, 0: a segment whose newest record is
            younger than this stays uncompacted.

    Raises:
        kclient.errors.ConfigError: A value is out of range.
    """

    segment_bytes: int = attrs.field(default=1073741824, validator=_int_field(14, INT32_MAX))
    index_interval_bytes: int = attrs.field(default=4096, validator=_int_field(0, INT32_MAX))
    max_message_bytes: int = attrs.field(default=1048588, validator=_int_field(0, INT32_MAX))
    roll_ms: int = attrs.field(default=_WEEK_MS, validator=_int_field(1, LONG_MAX))
    flush_interval_messages: int = attrs.field(default=LONG_MAX, validator=_int_field(1, LONG_MAX))
    flush_interval_ms: int | None = attrs.field(default=None, validator=_int_field(0, LONG_MAX, optional=True))
    retention_ms: int = attrs.field(default=_WEEK_MS, validator=_int_field(-1, LONG_MAX))
    retention_bytes: int = attrs.field(default=-1, validator=_int_field(-1, LONG_MAX))
    index_max_bytes: int = attrs.field(default=10485760, validator=_int_field(4, INT32_MAX))
    cleanup_policy: tuple[str, ...] = attrs.field(default=("delete",), converter=parse_cleanup_policy)
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


__all__ = ["CLEANUP_POLICIES", "INT32_MAX", "LONG_MAX", "LogConfig", "parse_cleanup_policy"]
