"""From options to offsets: where a batch read or a stream starts and ends.

Runs on the Spark driver. `resolve_offsets` turns an `OffsetSpec`
(`earliest`, `latest`, JSON offsets, a timestamp or timestamps per
partition) into concrete offsets with one ListOffsets round per leader.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kclient.errors import ConfigError, KafkaError
from kclient.spark.admin import ClusterView
from kclient.spark.offsets import TopicPartition, describe
from kclient.spark.options import EARLIEST, LATEST, OffsetSpec

log = logging.getLogger(__name__)

__all__ = ["OffsetNotFoundError", "resolve_offsets"]


class OffsetNotFoundError(KafkaError, LookupError):
    """No record is at or after a starting timestamp, and
    `startingOffsetsByTimestampStrategy` is `error` (Spark's default)."""

    name = "OFFSET_NOT_FOUND"


def resolve_offsets(view: ClusterView, spec: OffsetSpec, tps: Iterable[TopicPartition], *, starting: bool, strategy: str = "error") -> dict[TopicPartition, int]:
    """Concrete offsets of `spec` for every topic-partition of `tps`.

    Args:
        view: queries the cluster.
        spec: the parsed `startingOffsets*` / `endingOffsets*` option.
        tps: the partitions the query reads now.
        starting: True for a start position, False for an end position.
        strategy: `startingOffsetsByTimestampStrategy` (`error` or `latest`):
            what a start timestamp later than every record resolves to. An
            end timestamp later than every record resolves to the latest
            offset.

    Returns:
        The offset of each partition.

    Raises:
        ConfigError: JSON offsets that do not name exactly the query's
            partitions (as Spark's Kafka source requires).
        OffsetNotFoundError: see the class.
    """
    tps = sorted(tps)
    if not tps:
        return {}
    if spec.kind == "earliest":
        return view.earliest(tps)
    if spec.kind == "latest":
        return view.latest(tps)
    if spec.kind == "offsets":
        _check_named(spec, tps)
        wanted = {tp: spec.offsets[tp] for tp in tps}
        special = {tp: v for tp, v in wanted.items() if v in (EARLIEST, LATEST)}
        found = view.list_offsets(special) if special else {}
        return {tp: found.get(tp, v) if v in (EARLIEST, LATEST) else v for tp, v in wanted.items()}
    if spec.kind == "timestamps":
        _check_named(spec, tps)
        stamps = {tp: spec.offsets[tp] for tp in tps}
    else:
        stamps = {tp: int(spec.timestamp or 0) for tp in tps}
    found = view.list_offsets(stamps)
    missing = [tp for tp, off in found.items() if off < 0]
    if missing:
        if starting and strategy == "error":
            raise OffsetNotFoundError(
                f"option {spec.option!r}: no record at or after the timestamp in {describe(missing)}; "
                "set startingOffsetsByTimestampStrategy=latest to start those partitions at their latest offset"
            )
        latest = view.latest(missing)
        found.update(latest)
    return found


def _check_named(spec: OffsetSpec, tps: list[TopicPartition]) -> None:
    named = set(spec.offsets)
    wanted = set(tps)
    if named != wanted:
        extra, missing = named - wanted, wanted - named
        parts = []
        if missing:
            parts.append(f"missing {describe(missing)}")
        if extra:
            parts.append(f"not read by this query: {describe(extra)}")
        raise ConfigError(
            f"option {spec.option!r} must name every partition the query reads, and only those "
            f"({'; '.join(parts)}); use -2 for earliest and -1 for latest"
        )
