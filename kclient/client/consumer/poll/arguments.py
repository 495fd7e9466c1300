"""Normalising the poll consumer's arguments: topics or a pattern,
partitions given as `TopicPartition` or pairs, offsets given as a mapping
or as partitions carrying their offset (confluent-kafka's way), and the
poll timeout in ms or seconds.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kclient.client.consumer.poll.types import OFFSET_INVALID, OffsetAndMetadata, TopicPartition, as_topic_partition

#: What ``subscribe`` takes.
Topics = str | re.Pattern[str] | Iterable[str]
#: What ``commit(offsets=...)`` takes.
Offsets = Mapping[Any, OffsetAndMetadata | int] | Iterable[TopicPartition]


def topics_or_pattern(topics: Topics) -> list[str] | re.Pattern[str]:
    """The topics, or the pattern, ``subscribe`` was given.

    Args:
        topics: A compiled pattern; a string (a pattern when it starts
            with ``^``, as in librdkafka, else one topic); or topic names
            (one of them may be a ``^`` pattern, alone).

    Returns:
        The topic names, or the compiled pattern.

    Raises:
        ValueError: no topic, or a pattern mixed with topic names.
        TypeError: a name that is not a string.
    """
    if isinstance(topics, re.Pattern):
        return topics
    names = [topics] if isinstance(topics, str) else list(topics)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"topic names are strings, not {name!r}")
    patterns = [n for n in names if n.startswith("^")]
    if patterns:
        if len(names) > 1:
            raise ValueError("subscribe takes topic names or one pattern, not both")
        return re.compile(patterns[0])
    if not names or not all(n.strip() for n in names):
        raise ValueError("subscribe needs at least one non-empty topic name (unsubscribe() to stop)")
    return names


def partitions_of(partitions: Iterable[Any] | TopicPartition) -> list[TopicPartition]:
    """Partitions as `TopicPartition` objects (offsets kept).

    Args:
        partitions: One `TopicPartition` or an iterable of them or of
            ``(topic, partition)`` pairs.

    Returns:
        The list.
    """
    if isinstance(partitions, TopicPartition):
        return [partitions]
    return [as_topic_partition(p) for p in partitions]


def offsets_of(offsets: Offsets) -> dict[TopicPartition, OffsetAndMetadata]:
    """Explicit offsets to commit.

    Args:
        offsets: ``{partition: OffsetAndMetadata or offset}`` (Kafka's
            ``commitSync(Map)``), or partitions carrying the offset to
            commit (confluent-kafka's ``commit(offsets=[...])``).

    Returns:
        ``{TopicPartition: OffsetAndMetadata}``.

    Raises:
        ValueError: a partition without an offset.
    """
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    if isinstance(offsets, Mapping):
        for key, value in offsets.items():
            tp = as_topic_partition(key)
            out[TopicPartition(tp.topic, tp.partition)] = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
        return out
    for tp in partitions_of(offsets):
        if tp.offset < 0:
            raise ValueError(f"{tp}: commit needs an offset (TopicPartition(topic, partition, offset))")
        out[TopicPartition(tp.topic, tp.partition)] = OffsetAndMetadata(tp.offset)
    return out


def timeout_seconds(timeout_ms: float | None, timeout: float | None, default_ms: float) -> float:
    """A timeout given in ms (Kafka's and kafka-python's unit) or in
    seconds (``timeout=``, confluent-kafka's), in seconds.

    Args:
        timeout_ms: The timeout (ms), or None.
        timeout: The timeout (seconds), or None.
        default_ms: Used when neither is given (ms).

    Returns:
        Seconds (never negative).

    Raises:
        TypeError: both were given.
    """
    if timeout_ms is not None and timeout is not None:
        raise TypeError("give timeout_ms (ms) or timeout (seconds), not both")
    if timeout is not None:
        return max(0.0, float(timeout))
    return max(0.0, float(default_ms if timeout_ms is None else timeout_ms) / 1000)


__all__ = ["OFFSET_INVALID", "Offsets", "Topics", "offsets_of", "partitions_of", "timeout_seconds", "topics_or_pattern"]
