"""Which segments retention deletes (``log.retention.ms`` /
``log.retention.bytes``), Kafka's rules.

Kafka documentation https://kafka.apache.org/documentation/#log, "Deletes",
and Apache Kafka's ``UnifiedLog.deleteOldSegments``
(``deleteRetentionMsBreachedSegments`` / ``deleteRetentionSizeBreachedSegments``):
whole segments go, oldest first, while the segment's largest timestamp (its
file mtime when it has no timestamps) is more than ``retention.ms`` old, or
while the log without it still holds ``retention.bytes`` or more; only
segments wholly below the high watermark, the active one too once it holds
records. `kclient.storage.log.Log.apply_retention` deletes what this module
counts. Pure functions over a snapshot of the segments.
"""

from __future__ import annotations

from collections.abc import Sequence

from kclient.storage.log_config import LogConfig
from kclient.storage.segment import LogSegment


def deletable_segments(segments: Sequence[LogSegment], log_end_offset: int, high_watermark: int) -> int:
    """How many of the oldest segments retention may delete at all.

    Each must lie wholly below the high watermark (up to the next segment's
    base offset, or the log end offset for the active one), and the active
    one only when it holds records.

    Args:
        segments: The log's segments, oldest first.
        log_end_offset: The log end offset.
        high_watermark: The high watermark.

    Returns:
        The number of leading segments that may go.
    """
    n = 0
    while n < len(segments):
        upper = segments[n + 1].base_offset if n + 1 < len(segments) else log_end_offset
        if high_watermark < upper or (n == len(segments) - 1 and not segments[n].size):
            break
        n += 1
    return n


def retention_ms_breached(segments: Sequence[LogSegment], deletable: int, retention_ms: int, now_ms: int) -> int:
    """How many of the oldest ``deletable`` segments are older than ``retention_ms``.

    Args:
        segments: The log's segments, oldest first.
        deletable: From `deletable_segments`.
        retention_ms: ``retention.ms``; -1 = unlimited.
        now_ms: The time in ms.

    Returns:
        The count, from the oldest, stopping at the first young enough.
    """
    n = 0
    if retention_ms >= 0:
        while n < deletable and now_ms - segments[n].largest_timestamp > retention_ms:
            n += 1
    return n


def retention_size_breached(segments: Sequence[LogSegment], deletable: int, retention_bytes: int) -> int:
    """How many of the oldest ``deletable`` segments go so that the log
    keeps at most ``retention_bytes`` (each goes only when the rest still
    holds ``retention_bytes`` or more).

    Args:
        segments: The log's segments, oldest first.
        deletable: From `deletable_segments`.
        retention_bytes: ``retention.bytes``; -1 = unlimited.

    Returns:
        The count, from the oldest.
    """
    n = 0
    if retention_bytes >= 0:
        excess = sum(s.size for s in segments) - retention_bytes
        while n < deletable and excess - segments[n].size >= 0:
            excess -= segments[n].size
            n += 1
    return n


def segments_to_delete(
    segments: Sequence[LogSegment], log_end_offset: int, high_watermark: int, config: LogConfig, now_ms: int
) -> tuple[int, str]:
    """How many of the oldest segments retention deletes now, and why.

    Args:
        segments: The log's segments, oldest first.
        log_end_offset: The log end offset.
        high_watermark: The high watermark.
        config: The log's configuration (``retention_ms``,
            ``retention_bytes``).
        now_ms: The time in ms.

    Returns:
        ``(count, reason)``: the larger of the two rules' counts and a
            sentence naming each rule that applied (empty when none did).
    """
    deletable = deletable_segments(segments, log_end_offset, high_watermark)
    by_time = retention_ms_breached(segments, deletable, config.retention_ms, now_ms)
    by_size = retention_size_breached(segments, deletable, config.retention_bytes)
    why = []
    if by_time:
        why.append(f"{by_time} older than retention.ms {config.retention_ms}")
    if by_size:
        why.append(f"{by_size} beyond retention.bytes {config.retention_bytes}")
    return max(by_time, by_size), ", ".join(why)


__all__ = ["deletable_segments", "retention_ms_breached", "retention_size_breached", "segments_to_delete"]
