"""Offset ranges: how a read is split into Spark tasks, how a micro-batch is
capped, and the streaming offset JSON.

Pure: no pyspark, no sockets. A topic-partition is a `(topic, partition)`
tuple throughout; an offset range is half-open, `[from_offset,
until_offset)`, as in Spark's Kafka source.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import attrs

from kclient.errors import ConfigError

TopicPartition = tuple[str, int]

#: A stream's offsets as Spark keeps them in its checkpoint, the JSON of
#: Spark's Kafka source: ``{"topic": {"0": 23}}`` (partitions as strings).
OffsetJson: TypeAlias = dict[str, dict[str, int]]

__all__ = ["OffsetJson", "OffsetRange", "TopicPartition", "cap_offsets", "offsets_from_json", "offsets_to_json", "plan_ranges"]


@attrs.frozen
class OffsetRange:
    """The records of one topic-partition with offsets in
    `[from_offset, until_offset)`, read by one Spark task.

    `leader`: the partition leader's `(host, port)` when the range was
    planned (the task asks the cluster again if it moved), or None.
    """

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    leader: tuple[str, int] | None = None

    @property
    def size(self) -> int:
        """Offsets in the range (records, less any removed by compaction)."""
        return max(0, self.until_offset - self.from_offset)


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    leaders: Mapping[TopicPartition, tuple[str, int]] | None = None,
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """One range per topic-partition of `end`, split further when asked.

    Splitting follows Spark's Kafka source (its `KafkaOffsetRangeCalculator`):
    with `max_records_per_partition`, a range is cut into pieces of at most
    that many offsets; then, when there are fewer ranges than
    `min_partitions`, each range is cut into a share of `min_partitions`
    proportional to its size (at least one piece each). Empty ranges are
    dropped.

    Args:
        start: first offset per topic-partition (a partition missing here
            starts at its `end`, so is empty).
        end: offset after the last one per topic-partition.
        leaders: `(host, port)` of each partition's leader.
        min_partitions: the `minPartitions` option.
        max_records_per_partition: the `maxRecordsPerPartition` option.

    Returns:
        Ranges sorted by topic, partition and offset.
    """
    leaders = leaders or {}
    ranges = []
    for tp in sorted(end):
        begin = start.get(tp, end[tp])
        if end[tp] > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, end[tp], leaders.get(tp)))
    if max_records_per_partition:
        ranges = [piece for r in ranges for piece in _split(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions and len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)
        if total:
            ranges = [piece for r in ranges for piece in _split(r, max(1, round(r.size / total * min_partitions)))]
    return ranges


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    if parts == 1:
        return [r]
    step, extra = divmod(r.size, parts)
    out = []
    begin = r.from_offset
    for i in range(parts):
        until = begin + step + (1 if i < extra else 0)
        out.append(attrs.evolve(r, from_offset=begin, until_offset=until))
        begin = until
    return out


def cap_offsets(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_offsets: int) -> dict[TopicPartition, int]:
    """The end offsets of a micro-batch that reads at most `max_offsets`
    offsets in all (`maxOffsetsPerTrigger`).

    The budget is shared out in proportion to what each partition has
    waiting, as Spark's Kafka source does, but by largest remainder, so the
    total never exceeds `max_offsets` (Spark rounds small shares up and may
    go over by a few records).

    Args:
        start: where each partition's batch begins.
        latest: the latest offset of each partition.
        max_offsets: the budget (>= 1).

    Returns:
        The end offset of every partition of `latest`.
    """
    waiting = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(waiting.values())
    if total <= max_offsets:
        return dict(latest)
    shares = {tp: max_offsets * n / total for tp, n in waiting.items()}
    take = {tp: min(waiting[tp], int(share)) for tp, share in shares.items()}
    left = max_offsets - sum(take.values())
    for tp in sorted(shares, key=lambda tp: (-(shares[tp] - int(shares[tp])), tp)):
        if left <= 0:
            break
        if take[tp] < waiting[tp]:
            take[tp] += 1
            left -= 1
    return {tp: start.get(tp, latest[tp]) + take[tp] for tp in latest}


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> OffsetJson:
    """`{(topic, p): offset}` -> `{"topic": {"p": offset}}`, the JSON shape
    of Spark's Kafka source offsets (partitions as strings, sorted)."""
    out: OffsetJson = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def offsets_from_json(value: Mapping[str, Mapping[str, int]] | str) -> dict[TopicPartition, int]:
    """The inverse of `offsets_to_json`; accepts the dict or its JSON text.

    Raises:
        ConfigError: the value is not of that shape (a damaged checkpoint).
    """
    doc: Any = value  # a damaged checkpoint may hold any JSON: its shape is checked below
    if isinstance(value, str):
        try:
            doc = json.loads(value)
        except ValueError as exc:
            raise ConfigError(f"offsets are not valid JSON: {exc}") from None
    out: dict[TopicPartition, int] = {}
    try:
        for topic, parts in doc.items():
            for partition, offset in parts.items():
                out[(str(topic), int(partition))] = int(offset)
    except (AttributeError, TypeError, ValueError):
        raise ConfigError(f"offsets must look like {{\"topic\": {{\"0\": 23}}}}, got {value!r}") from None
    return out


def describe(tps: Iterable[TopicPartition]) -> str:
    """`topic-0, topic-1` for messages (at most 10 named)."""
    tps = sorted(tps)
    text = ", ".join(f"{t}-{p}" for t, p in tps[:10])
    return text + (f" and {len(tps) - 10} more" if len(tps) > 10 else "")
