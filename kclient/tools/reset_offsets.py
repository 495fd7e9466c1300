"""``kclient consumer-groups --reset-offsets``: new committed offsets for a
group, as Kafka's ``kafka-consumer-groups.sh --reset-offsets`` (KIP-122)
computes and prints them::

    kclient consumer-groups --bootstrap-server 127.0.0.1:9092 --group readers \\
        --reset-offsets --to-earliest --topic events [--execute]

    GROUP           TOPIC           PARTITION  NEW-OFFSET
    readers         events          0          0

Scenarios (exactly one): ``--to-earliest``, ``--to-latest``, ``--to-offset
N``, ``--to-datetime YYYY-MM-DDTHH:mm:SS.sss`` (local time unless the text
ends with a zone such as ``Z`` or ``+02:00``; the first offset whose record
is at or after it, the log end offset when none is), ``--shift-by N`` (from
the committed offset). Every new offset is kept between the partition's
log start and log end offsets, as Kafka does. Scope: ``--topic t`` (every
partition), ``--topic t:0,2`` (those partitions; repeatable) or
``--all-topics`` (the partitions the group has committed offsets for).

A dry run by default: the table is printed and nothing changes.
``--execute`` commits the new offsets (OffsetCommit as an admin, which the
coordinator accepts only while the group has no members); a group with
active members is refused with Kafka's message ("Assignments can only be
reset if the group 'g' is inactive, but the current state is Stable.").
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs

from kclient.errors import ConfigError

if TYPE_CHECKING:
    from kclient.client.admin import AdminClient

__all__ = [
    "ResetArguments",
    "ResetScenario",
    "format_reset_rows",
    "parse_datetime",
    "parse_topic_partitions",
    "plan_reset",
    "reset_offsets",
    "scenario_of",
]

TopicPartition = tuple[str, int]

#: Kafka's ``--reset-offsets`` columns.
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
#: The least width of GROUP and TOPIC; PARTITION is 10 wide (Kafka 4's
#: ``printOffsetsToReset``).
_MIN_WIDTH, _PARTITION_WIDTH = 15, 10

#: The groups an offset reset may commit to (Kafka: "inactive" groups).
INACTIVE_STATES = frozenset({"Empty", "Dead"})

_EARLIEST, _LATEST = -2, -1


class ResetArguments(Protocol):
    """The ``--reset-offsets`` arguments of ``consumer-groups``."""

    topic: list[str] | None
    all_topics: bool
    to_earliest: bool
    to_latest: bool
    to_offset: int | None
    to_datetime: str | None
    shift_by: int | None
    execute: bool
    dry_run: bool


@attrs.frozen
class ResetScenario:
    """One ``--reset-offsets`` scenario.

    Attributes:
        kind: ``"earliest"``, ``"latest"``, ``"offset"``, ``"datetime"`` or
            ``"shift-by"``.
        value: The offset, the timestamp (ms since the epoch) or the shift;
            0 for earliest and latest.
    """

    kind: str
    value: int = 0


def parse_datetime(text: str) -> int:
    """Parse ``--to-datetime`` (Kafka's ``yyyy-MM-dd'T'HH:mm:ss.SSS``,
    optionally with a zone: ``Z``, ``+02:00``; local time without one).

    Args:
        text: The option's value.

    Returns:
        Milliseconds since the epoch.

    Raises:
        ConfigError: Not such a date and time.
    """
    value = text.strip()
    try:
        moment = datetime.datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        raise ConfigError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss (optionally with a zone, e.g. Z or +02:00)") from None
    if "T" not in value:
        raise ConfigError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss")
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's tool reads it
    return int(moment.timestamp() * 1000)


def scenario_of(args: ResetArguments) -> ResetScenario:
    """The one scenario the arguments give.

    Raises:
        ConfigError: None or several of them.
    """
    given = [
        ResetScenario(kind, value)
        for kind, value, present in (
            ("earliest", 0, args.to_earliest),
            ("latest", 0, args.to_latest),
            ("offset", args.to_offset or 0, args.to_offset is not None),
            ("datetime", 0, args.to_datetime is not None),
            ("shift-by", args.shift_by or 0, args.shift_by is not None),
        )
        if present
    ]
    if len(given) != 1:
        raise ConfigError(
            "Option '[reset-offsets]' requires exactly one of the following scenarios: "
            "[to-earliest], [to-latest], [to-offset], [to-datetime], [shift-by]"
        )
    if given[0].kind == "datetime":
        return ResetScenario("datetime", parse_datetime(args.to_datetime or ""))
    return given[0]


def parse_topic_partitions(items: Iterable[str]) -> list[tuple[str, list[int] | None]]:
    """Parse ``--topic`` values: ``t`` (every partition) or ``t:0,2``.

    Args:
        items: The values.

    Returns:
        ``[(topic, partitions or None)]``.

    Raises:
        ConfigError: An empty topic or a partition that is not a number.
    """
    out: list[tuple[str, list[int] | None]] = []
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic.strip():
            raise ConfigError(f"--topic {item!r}: no topic name")
        if not sep:
            out.append((topic.strip(), None))
            continue
        ids = [p.strip() for p in parts.split(",") if p.strip()]
        if not ids or not all(p.isdigit() for p in ids):
            raise ConfigError(f"--topic {item!r}: expected topic or topic:partition[,partition...]")
        out.append((topic.strip(), [int(p) for p in ids]))
    return out


def _partitions_to_reset(admin: AdminClient, committed: Mapping[TopicPartition, int], args: ResetArguments) -> list[TopicPartition]:
    """The partitions ``--topic`` / ``--all-topics`` name, sorted.

    Raises:
        UnknownTopicOrPartitionError: A named topic does not exist.
    """
    if args.all_topics:
        return sorted(committed)
    scopes = parse_topic_partitions(args.topic or [])
    missing = sorted({t for t, parts in scopes if parts is None})
    described = admin.describe_topics(missing) if missing else {}
    chosen: set[TopicPartition] = set()
    for topic, parts in scopes:
        ids = parts if parts is not None else [p.partition for p in described[topic].partitions]
        chosen.update((topic, p) for p in ids)
    return sorted(chosen)


def plan_reset(admin: AdminClient, group: str, partitions: Sequence[TopicPartition], scenario: ResetScenario, committed: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The new offset of each partition (Kafka's ``prepareOffsetsToReset``).

    Args:
        admin: An admin client on the cluster.
        group: The group (for messages).
        partitions: The partitions to reset.
        scenario: What to reset them to.
        committed: The group's committed offsets.

    Returns:
        ``{(topic, partition): new offset}``, each between the partition's
        log start and log end offsets (as Kafka's ``checkOffsetsRange``
        keeps them); a ``--to-datetime`` later than every record falls back
        to the log end offset, with Kafka's warning on stderr.

    Raises:
        ConfigError: ``--shift-by`` of a partition with no committed offset.
        UnknownTopicOrPartitionError: A partition does not exist.
    """
    if not partitions:
        return {}
    earliest = admin.list_offsets(dict.fromkeys(partitions, _EARLIEST))
    latest = admin.list_offsets(dict.fromkeys(partitions, _LATEST))
    if scenario.kind == "earliest":
        wanted = dict(earliest)
    elif scenario.kind == "latest":
        wanted = dict(latest)
    elif scenario.kind == "offset":
        wanted = dict.fromkeys(partitions, scenario.value)
    elif scenario.kind == "datetime":
        found = admin.list_offsets(dict.fromkeys(partitions, scenario.value))
        for topic, partition in (tp for tp, offset in found.items() if offset < 0):
            _warn(f"Warn: Partition {partition} from topic {topic} is empty. Falling back to latest known offset.")
        wanted = {tp: latest[tp] if offset < 0 else offset for tp, offset in found.items()}
    else:
        without = [f"{t}-{p}" for t, p in partitions if (t, p) not in committed]
        if without:
            raise ConfigError(f"Cannot shift offset for partition {without[0]} of group {group!r} since there is no current committed offset")
        wanted = {tp: committed[tp] + scenario.value for tp in partitions}
    return {tp: min(max(wanted[tp], earliest[tp]), latest[tp]) for tp in partitions}


def _warn(line: str) -> None:
    sys.stderr.write(line + "\n")



def format_reset_rows(rows: Iterable[tuple[str, str, int, int]]) -> str:
    """Kafka's ``--reset-offsets`` table: GROUP and TOPIC as wide as their
    longest value (at least 15), PARTITION 10, one space between columns.

    Args:
        rows: ``(group, topic, partition, new offset)``.

    Returns:
        The header and one line per row, each ending with a newline.
    """
    lines = [RESET_COLUMNS, *((g, t, str(p), str(o)) for g, t, p, o in rows)]
    group_width = max(_MIN_WIDTH, *(len(line[0]) for line in lines))
    topic_width = max(_MIN_WIDTH, *(len(line[1]) for line in lines))
    return "".join(f"{a:<{group_width}} {b:<{topic_width}} {c:<{_PARTITION_WIDTH}} {d}".rstrip() + "\n" for a, b, c, d in lines)


def _reset_group(admin: AdminClient, group: str, scenario: ResetScenario, args: ResetArguments) -> dict[TopicPartition, int] | None:
    """One group's new offsets, committed with ``--execute``; None (and
    Kafka's error line on stderr) when the group has active members."""
    state = admin.describe_consumer_groups([group])[group].state
    if state not in INACTIVE_STATES:
        sys.stderr.write(f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.\n")
        return None
    committed = admin.list_consumer_group_offsets(group)
    planned = plan_reset(admin, group, _partitions_to_reset(admin, committed, args), scenario, committed)
    if args.execute and planned:
        admin.alter_consumer_group_offsets(group, planned)
    return planned


def reset_offsets(admin: AdminClient, groups: Sequence[str], args: ResetArguments) -> int:
    """Run ``--reset-offsets`` for ``groups``: print the table of new
    offsets; with ``--execute`` commit them.

    Args:
        admin: An admin client on the cluster.
        groups: The groups.
        args: The parsed arguments.

    Returns:
        0; 1 when a group was refused because it has active members.

    Raises:
        ConfigError: Bad arguments.
        KafkaError: The cluster refused a request.
    """
    scenario = scenario_of(args)
    if bool(args.topic) == bool(args.all_topics):
        raise ConfigError("One of the reset scopes should be defined: --all-topics, --topic.")
    if args.execute and args.dry_run:
        raise ConfigError("--execute and --dry-run cannot be given together")
    if not args.execute and not args.dry_run:
        sys.stderr.write("WARN: No action will be performed as the --execute option is missing. Add --execute to commit the new offsets.\n")
    rows: list[tuple[str, str, int, int]] = []
    refused = False
    for group in groups:
        planned = _reset_group(admin, group, scenario, args)
        refused |= planned is None
        rows += [(group, t, p, o) for (t, p), o in sorted((planned or {}).items())]
    if rows:
        sys.stdout.write(format_reset_rows(rows))
    return 1 if refused else 0
