"""The topic-level configs a topic is described with, and where their
defaults come from.

Kafka documentation, "Topic-Level Configs"
(https://kafka.apache.org/documentation/#topicconfigs): every topic config
has a broker property that gives its default ("Server Default Property"),
e.g. ``retention.ms`` <- ``log.retention.ms`` (or ``log.retention.minutes``
/ ``log.retention.hours``). `TOPIC_CONFIG_DEFS` lists the names CreateTopics
accepts (`kclient.broker.topic_admin.TOPIC_CONFIGS`) with their Kafka
type, their broker property and, for the broker properties kclient's
`kclient.config.BrokerConfig` does not declare (``compression.type``,
``log.preallocate``, ...), Kafka's default value. `topic_defaults` turns a
broker config into each topic config's default value as Kafka prints it.

kclient stores every such value and reports it (DescribeConfigs, KIP-133);
only the ones `kclient.storage.LogConfig` and the broker read change how a
topic behaves (retention, segments, flushing, compaction,
``max.message.bytes``, ``min.insync.replicas``, the message format and
timestamp type, unclean leader election). `validate_topic_configs`
checks a topic's overrides as Kafka's ``LogConfig.validate`` does
(CreateTopics, AlterConfigs, IncrementalAlterConfigs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from kclient.config.formats import TIMESTAMP_TYPES, message_format_magic
from kclient.errors import INVALID_CONFIG, NONE, ConfigError
from kclient.storage import LogConfig
from kclient.storage.log import parse_cleanup_policy

__all__ = [
    "BROKER_SYNONYM_GROUPS",
    "COMPRESSION_TYPES",
    "CONFIG_TYPES",
    "TOPIC_CONFIG_DEFS",
    "TopicConfigDef",
    "kafka_string",
    "parse_boolean",
    "topic_defaults",
    "validate_topic_configs",
]

#: DescribeConfigs ``config_type`` codes (v3+, KIP-569; Kafka's
#: ``DescribeConfigsResponse.ConfigType``).
CONFIG_TYPES = {"UNKNOWN": 0, "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8, "PASSWORD": 9}

_LONG_MAX = 2**63 - 1

#: Broker properties that stand for one setting, most precise first (a
#: topic's or broker's value comes from the first one that is set; Kafka's
#: ``DynamicBrokerConfig.brokerConfigSynonyms``).
BROKER_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


@attrs.frozen
class TopicConfigDef:
    """One topic-level config.

    Attributes:
        name: The topic config name (``retention.ms``).
        type: Its Kafka type name (a key of `CONFIG_TYPES`).
        broker_name: The broker property that gives its default
            (``log.retention.ms``).
        fallback: The default as Kafka prints it when ``broker_name`` is not
            a property of `kclient.config.BrokerConfig` (``None``: it is).
        doc: One line of documentation.
    """

    name: str
    type: str
    broker_name: str
    fallback: str | None
    doc: str


def _d(name: str, type_: str, broker_name: str, doc: str, fallback: str | None = None) -> TopicConfigDef:
    return TopicConfigDef(name, type_, broker_name, fallback, doc)


#: Every topic config CreateTopics accepts, by name.
TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        _d("cleanup.policy", "LIST", "log.cleanup.policy", "delete (retention by time and size), compact (log compaction) or both."),
        _d("compression.type", "STRING", "compression.type", "The codec of stored batches; producer keeps the producer's.", "producer"),
        _d("delete.retention.ms", "LONG", "log.cleaner.delete.retention.ms", "How long a tombstone stays in a compacted log after its cleaning."),
        _d("file.delete.delay.ms", "LONG", "log.segment.delete.delay.ms", "Wait before a deleted segment's files are removed.", "60000"),
        _d("flush.messages", "LONG", "log.flush.interval.messages", "fsync the log after this many messages."),
        _d("flush.ms", "LONG", "log.flush.interval.ms", "fsync the log when its oldest unflushed message is this old."),
        _d("index.interval.bytes", "INT", "log.index.interval.bytes", "Bytes of log between two offset index entries."),
        _d("max.compaction.lag.ms", "LONG", "log.cleaner.max.compaction.lag.ms", "Longest a record stays uncompacted.", str(_LONG_MAX)),
        _d("max.message.bytes", "INT", "message.max.bytes", "Largest record batch the topic accepts."),
        _d("message.downconversion.enable", "BOOLEAN", "log.message.downconversion.enable", "Whether old consumers get down-converted batches.", "true"),
        _d("message.format.version", "STRING", "log.message.format.version", "The message format stored, as a Kafka release."),
        _d(
            "message.timestamp.difference.max.ms",
            "LONG",
            "log.message.timestamp.difference.max.ms",
            "Largest difference allowed between a CreateTime timestamp and the broker's clock.",
            str(_LONG_MAX),
        ),
        _d("message.timestamp.type", "STRING", "log.message.timestamp.type", "CreateTime or LogAppendTime."),
        _d("min.cleanable.dirty.ratio", "DOUBLE", "log.cleaner.min.cleanable.ratio", "Dirty share of the log above which it is compacted."),
        _d("min.compaction.lag.ms", "LONG", "log.cleaner.min.compaction.lag.ms", "Records younger than this stay uncompacted."),
        _d("min.insync.replicas", "INT", "min.insync.replicas", "In-sync replicas an acks=all produce needs."),
        _d("preallocate", "BOOLEAN", "log.preallocate", "Whether segment files are preallocated.", "false"),
        _d("retention.bytes", "LONG", "log.retention.bytes", "Delete old segments while a partition is larger (-1: no limit)."),
        _d("retention.ms", "LONG", "log.retention.ms", "Delete segments older than this (-1: keep forever)."),
        _d("segment.bytes", "INT", "log.segment.bytes", "A segment rolls when it would grow past this size."),
        _d("segment.index.bytes", "INT", "log.index.size.max.bytes", "Largest offset index file; a full index rolls the segment."),
        _d("segment.jitter.ms", "LONG", "log.roll.jitter.ms", "Random jitter subtracted from segment.ms.", "0"),
        _d("segment.ms", "LONG", "log.roll.ms", "Roll the active segment once its first batch is this old."),
        _d("unclean.leader.election.enable", "BOOLEAN", "unclean.leader.election.enable", "Whether a replica outside the ISR may become leader."),
    )
}


def kafka_string(value: Any) -> str | None:
    """A config value as Kafka prints it (``ConfigDef.convertToString``):
    booleans ``true``/``false``, lists comma-separated (a listener as
    ``NAME://host:port``, a pair as ``host:count``), ``None`` as null.

    Args:
        value: A stored (typed) config value.

    Returns:
        The string, or ``None``.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        items = []
        for item in value:
            if isinstance(item, tuple) and len(item) == 3:
                name, host, port = item
                items.append(f"{name}://{f'[{host}]' if ':' in str(host) else host}:{port}")
            elif isinstance(item, tuple) and len(item) == 2:
                items.append(f"{item[0]}:{item[1]}")
            else:
                items.append(str(item))
        return ",".join(items)
    return str(value)


def topic_defaults(config: Any) -> dict[str, str]:
    """Each topic config's default on a broker with ``config``: the value of
    its broker property (``retention.ms`` and ``segment.ms`` resolved from
    the ms / minutes / hours properties as `kclient.storage.LogConfig`
    does; ``flush.ms`` without ``log.flush.interval.ms`` is Kafka's "never",
    2**63-1), else the def's fallback.

    Args:
        config: A `kclient.config.BrokerConfig`.

    Returns:
        ``{topic config name: value as Kafka prints it}``.
    """
    props = config.as_properties()
    log_config = LogConfig.from_broker_config(config)
    resolved = {
        "retention.ms": str(log_config.retention_ms),
        "segment.ms": str(log_config.roll_ms),
        "flush.ms": str(log_config.flush_interval_ms if log_config.flush_interval_ms is not None else _LONG_MAX),
    }
    result = {}
    for name, d in TOPIC_CONFIG_DEFS.items():
        if name in resolved:
            result[name] = resolved[name]
        elif d.broker_name in props:
            result[name] = kafka_string(props[d.broker_name]) or ""
        else:
            result[name] = d.fallback if d.fallback is not None else ""
    return result


#: The values of topic config ``compression.type``.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def parse_boolean(value: Any) -> bool:
    """A BOOLEAN config value, as Kafka's ``ConfigDef.parseType`` reads it.

    Args:
        value: A bool, or a string ``true`` / ``false`` (any case, blanks
            around it ignored).

    Returns:
        The boolean.

    Raises:
        ValueError: Anything else.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("Expected value to be either true or false")


def _check_value(name: str, value: str) -> None:
    """Raise ValueError when ``value`` is not valid for topic config ``name``."""
    kind = TOPIC_CONFIG_DEFS[name].type
    if name == "message.timestamp.type":
        if value not in TIMESTAMP_TYPES:
            raise ValueError(f"expected one of {', '.join(TIMESTAMP_TYPES)}")
    elif name == "message.format.version":
        message_format_magic(value)
    elif name == "compression.type":
        if value not in COMPRESSION_TYPES:
            raise ValueError(f"expected one of {', '.join(COMPRESSION_TYPES)}")
    elif kind == "BOOLEAN":
        parse_boolean(value)
    elif kind in ("INT", "LONG", "SHORT", "DOUBLE"):
        # Kafka's ConfigDef.parseType wording.
        try:
            number = float(value.strip()) if kind == "DOUBLE" else int(value.strip())
        except ValueError:
            raise ValueError(f"Not a number of type {kind}") from None
        if name == "min.insync.replicas" and number < 1:
            raise ValueError("Value must be at least 1")
    elif kind == "LIST":
        parse_cleanup_policy(value)


def validate_topic_configs(configs: Mapping[str, str | None]) -> tuple[int, str | None]:
    """Check a topic's complete set of overrides.

    Args:
        configs: Topic config name -> value (a null value is refused).

    Returns:
        ``(NONE, None)``, or ``(INVALID_CONFIG, message)`` for a name that
        is no topic config or a bad value (as Kafka's ``LogConfig.validate``,
        whose ConfigException Kafka 3.9 and 4.x answer with INVALID_CONFIG).
    """
    for name in configs:
        if name not in TOPIC_CONFIG_DEFS:
            return INVALID_CONFIG, f"Unknown topic config name: {name}"
    for name, value in configs.items():
        if value is None:
            return INVALID_CONFIG, f"Invalid value null for configuration {name}"
        try:
            _check_value(name, value)
        except (ValueError, ConfigError) as exc:
            return INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {exc}"
    try:
        LogConfig().with_topic_overrides(configs)
    except ConfigError as exc:
        return INVALID_CONFIG, str(exc)
    return NONE, None
