"""Message formats in configs: Kafka release strings, timestamp types and
the per-topic overrides of ``topic.config.file``.

``log.message.format.version`` / ``message.format.version`` name a Kafka
release whose message format the broker stores (see the broker and topic
configs at https://kafka.apache.org/documentation/#brokerconfigs and
https://kafka.apache.org/documentation/#topicconfigs); the formats are
message set v0, v1 (KIP-31 / KIP-32) and record batch v2 (KIP-98).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from kclient.config.convert import to_str
from kclient.config.files import load_properties
from kclient.errors import ConfigError
from kclient.protocol.records.formats import magic_for_kafka_version

__all__ = [
    "TIMESTAMP_TYPES",
    "TOPIC_CONFIGS",
    "load_topic_configs",
    "message_format_magic",
    "parse_kafka_version",
]

# Every module of the package logs as "kclient.config", the logger name
# the config code has always used.
log = logging.getLogger("kclient.config")

_KAFKA_VERSION = re.compile(r"([0-9]+)\.([0-9]+)(?:\.([0-9]+))?(?:\.[0-9]+)?(?:-IV[0-9]+)?")

#: Timestamp types of ``log.message.timestamp.type`` / ``message.timestamp.type``
#: (Kafka's ``TimestampType`` names).
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

#: Per-topic settings a ``topic.config.file`` may give, each the topic-level
#: name of a broker property: ``message.format.version`` overrides
#: ``log.message.format.version``, ``message.timestamp.type`` overrides
#: ``log.message.timestamp.type``.
TOPIC_CONFIGS = ("message.format.version", "message.timestamp.type")


def parse_kafka_version(value: Any) -> tuple[int, int, int]:
    """A Kafka release as ``(major, minor, patch)``.

    Args:
        value: Kafka's spellings of ``log.message.format.version`` /
            ``inter.broker.protocol.version`` (``"0.8.2"``, ``"0.10.0"``,
            ``"0.10.2-IV0"``, ``"0.11.0"``, ``"2.8"``, ``"3.0-IV1"``, also
            ``"0.10.0.1"``, whose fourth part is ignored as Kafka does) or
            kafka-python's ``api_version`` tuples (``(0, 10)``, ``(0, 8, 2)``).

    Returns:
        ``(major, minor, patch)``; a missing patch is 0.

    Raises:
        ValueError: Anything else, or a release before 0.8.0 (no message
            format of this protocol).
        TypeError: ``value`` is neither a string nor a tuple or list.
    """
    if isinstance(value, (tuple, list)):
        if not 2 <= len(value) <= 4 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise ValueError("expected a Kafka version such as 0.10.2 or (0, 10, 2)")
        parts = tuple(value[:3]) + (0,) * (3 - len(value[:3]))
    elif isinstance(value, str):
        m = _KAFKA_VERSION.fullmatch(value.strip())
        if m is None:
            raise ValueError("expected a Kafka version such as 0.8.2, 0.10.2-IV0, 0.11.0 or 2.8")
        parts = (int(m[1]), int(m[2]), int(m[3] or 0))
    else:
        raise TypeError(f"expected a Kafka version string, not {type(value).__name__}")
    if parts < (0, 8, 0):
        raise ValueError("Kafka versions before 0.8.0 are not supported")
    return parts


def message_format_magic(version: Any) -> int:
    """The message format (magic) a Kafka release writes.

    For ``log.message.format.version`` / topic ``message.format.version``:
    0.8.x and 0.9.x -> 0 (message set v0), 0.10.x (all its IV steps) -> 1
    (message set v1, KIP-31 / KIP-32), 0.11.0 and later -> 2 (record batch
    v2, KIP-98), as listed under ``log.message.format.version`` in
    https://kafka.apache.org/documentation/#brokerconfigs.

    Args:
        version: A release as `parse_kafka_version` takes it.

    Returns:
        0, 1 or 2.

    Raises:
        ValueError: A bad version.
    """
    return magic_for_kafka_version(parse_kafka_version(version))


def _to_format_version(value: Any) -> str:
    """A Kafka version string (kept as given, stripped) that
    `message_format_magic` understands."""
    text = to_str(value)
    message_format_magic(text)
    return text


def _to_timestamp_type(value: Any) -> str:
    """``CreateTime`` or ``LogAppendTime`` (any case) -> Kafka's spelling."""
    if isinstance(value, str):
        for name in TIMESTAMP_TYPES:
            if value.strip().lower() == name.lower():
                return name
    raise ValueError(f"expected one of {', '.join(TIMESTAMP_TYPES)}")


def to_api_version(value: Any) -> tuple[int, int, int] | None:
    """``auto`` / empty / None -> None; else a Kafka version -> tuple."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto")):
        return None
    return parse_kafka_version(value)


def load_topic_configs(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """Read a ``topic.config.file`` of per-topic overrides.

    The file is a ``.properties`` file of lines ``<topic>.<config>=<value>``
    where ``<config>`` is one of `TOPIC_CONFIGS` (a topic name may itself
    hold dots: the config name is matched at the end of the key). Keys
    naming another topic config are logged as a warning and ignored.

    Args:
        path: The file.

    Returns:
        ``{topic: {config: value}}`` with values normalised
        (``message.timestamp.type`` in Kafka's spelling,
        ``message.format.version`` as given).

    Raises:
        ConfigError: An unreadable file, or (naming the key) an empty topic
            name or a bad value.
    """
    result: dict[str, dict[str, str]] = {}
    for key, value in load_properties(path).items():
        key = key.strip()
        for name in TOPIC_CONFIGS:
            if key.endswith("." + name):
                topic = key[: -len(name) - 1]
                break
        else:
            log.warning("%s: %r is not a topic config kclient knows (%s); ignored", os.fspath(path), key, ", ".join(TOPIC_CONFIGS))
            continue
        if not topic:
            raise ConfigError(f"Invalid key {key!r} in topic config file {os.fspath(path)!r}: no topic name")
        try:
            normalised = _to_format_version(value) if name == "message.format.version" else _to_timestamp_type(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"Invalid value {value!r} for {key} in topic config file {os.fspath(path)!r}: {exc}") from None
        result.setdefault(topic, {})[name] = normalised
    return result


def _check_topic_config_file(value: Any) -> None:
    if value is not None:
        load_topic_configs(value)  # ConfigError names the file and key
