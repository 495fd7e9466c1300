"""``kclient consumer-groups``: list the consumer groups kept in ZooKeeper and
describe one, with each partition's committed offset, log end offset and
lag, as Kafka's ``kafka-consumer-groups.sh --zookeeper`` (and before it
0.8's ``kafka.tools.ConsumerOffsetChecker``) does::

    kclient consumer-groups --zookeeper 127.0.0.1:2181 --list
    kclient consumer-groups --zookeeper 127.0.0.1:2181 --describe --group readers
    GROUP    TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID
    readers  events  0          40              42              2    readers_host-1700000000000-1a2b3c4d-0
    readers  events  1          -               17              -    -

The groups are those of the ZooKeeper-coordinated `kclient.ConsumerConnector`
(``/consumers/<group>``, the "Consumer registration" and "Consumer Offsets"
paths of the Kafka 0.8 documentation, section "Distribution"). A group's
topics are those it has committed offsets for or owns partitions of.
``CURRENT-OFFSET`` is the committed offset (``-`` when none),
``LOG-END-OFFSET`` the partition's log end offset asked of its leader
(ListOffsets; the leader and its address are read from ZooKeeper), ``LAG``
their difference, ``CONSUMER-ID`` the consumer thread owning the partition
now (``-`` when none). When stderr is a terminal, a ``tqdm`` bar shows the
partitions being asked.

With ``--bootstrap-server`` instead of ``--zookeeper`` the groups are those
the brokers' group coordinators keep (kafka-python's, confluent-kafka's,
Kafka's own consumers): ``--list`` asks every broker (ListGroups),
``--describe`` asks the group's coordinator for its members and their
assignments (DescribeGroups) and committed offsets (OffsetFetch), as
``kafka-consumer-groups.sh --bootstrap-server`` does; ``CONSUMER-ID`` is then
the member id, ``HOST`` the address it connected from and ``CLIENT-ID`` its
``client.id`` (``-`` for a partition no member owns, and for ZooKeeper
groups), Kafka's columns::

    kclient consumer-groups --bootstrap-server 127.0.0.1:9092 --describe --group readers
    kclient consumer-groups --bootstrap-server 127.0.0.1:9092 --describe --all-groups
    kclient consumer-groups --bootstrap-server 127.0.0.1:9092 --delete --group readers
    kclient consumer-groups --bootstrap-server 127.0.0.1:9092 --group readers \
        --reset-offsets --to-earliest --topic events --execute

``--delete`` deletes the groups and their committed offsets (DeleteGroups,
KIP-229; only groups without members), ``--reset-offsets`` is
`kclient.tools.reset_offsets`. ``--group`` is repeatable; ``--all-groups``
applies the action to every group. A group that does not exist is an
error ("Consumer group 'x' does not exist.", exit status 1); bad
arguments give status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Protocol

from kclient.errors import ConfigError, GroupIdNotFoundError, KafkaError
from kclient.tools.arguments import add_actions, add_cluster_choice
from kclient.tools.common import progress_bar
from kclient.tools.reset_offsets import ResetArguments, reset_offsets

if TYPE_CHECKING:
    from kclient.client.admin import AdminClient
    from kclient.client.consumer.simple import SimpleConsumer
    from kclient.zk.client import ZkClient

__all__ = [
    "ConsumerGroupsArguments",
    "PartitionLag",
    "delete_groups",
    "describe_group",
    "describe_group_on_brokers",
    "format_rows",
    "list_groups",
    "register",
    "run",
]

#: Kafka's ``--describe`` columns.
COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
#: Kafka's fixed widths of PARTITION and the offsets columns; the others
#: are at least 15 wide (``printOffsetFormat``).
_FIXED_WIDTHS = {2: 10, 3: 15, 4: 15, 5: 15}
_MIN_WIDTH = 15


class ConsumerGroupsArguments(ResetArguments, Protocol):
    """The ``consumer-groups`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    zookeeper: str | None
    bootstrap_server: str | None
    describe: bool
    delete: bool
    reset_offsets: bool
    group: list[str] | None
    all_groups: bool
    timeout_ms: int
    list: bool  # last: the name hides the builtin in the rest of the class


class PartitionLag(tuple[str, str, int, "int | None", "int | None", "int | None", "str | None", "str | None", "str | None"]):
    """One row of ``--describe``: ``group``, ``topic``, ``partition``,
    ``current_offset`` (the committed offset, None when nothing is
    committed), ``log_end_offset`` (None when the leader could not be
    asked), ``lag`` (None unless both are known), ``owner`` (the consumer
    thread or member id owning the partition, or None), ``host`` and
    ``client_id`` (the owning member's address and ``client.id``, or None)."""

    __slots__ = ()
    _fields = ("group", "topic", "partition", "current_offset", "log_end_offset", "lag", "owner", "host", "client_id")

    def __new__(
        cls,
        group: str,
        topic: str,
        partition: int,
        current_offset: int | None,
        log_end_offset: int | None,
        owner: str | None,
        host: str | None = None,
        client_id: str | None = None,
    ) -> PartitionLag:
        lag = None if current_offset is None or log_end_offset is None else max(0, log_end_offset - current_offset)
        return tuple.__new__(cls, (group, topic, partition, current_offset, log_end_offset, lag, owner, host, client_id))

    @property
    def group(self) -> str:
        """The consumer group."""
        return self[0]

    @property
    def topic(self) -> str:
        """The topic."""
        return self[1]

    @property
    def partition(self) -> int:
        """The partition id."""
        return self[2]

    @property
    def current_offset(self) -> int | None:
        """The committed offset; None when nothing is committed."""
        return self[3]

    @property
    def log_end_offset(self) -> int | None:
        """The partition's log end offset; None when its leader could not be asked."""
        return self[4]

    @property
    def lag(self) -> int | None:
        """``log_end_offset - current_offset`` (at least 0); None unless both are known."""
        return self[5]

    @property
    def owner(self) -> str | None:
        """The consumer thread (or member) id owning the partition, or None."""
        return self[6]

    @property
    def host(self) -> str | None:
        """The owning member's address (``/127.0.0.1``), or None."""
        return self[7]

    @property
    def client_id(self) -> str | None:
        """The owning member's ``client.id``, or None."""
        return self[8]


#: Called with each finished row of ``--describe`` (e.g. a tqdm ``update``).
Progress = Callable[[PartitionLag], object]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``consumer-groups`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "consumer-groups",
        help="list, describe, reset the offsets of and delete consumer groups (kafka-consumer-groups.sh)",
        description="List the consumer groups (in ZooKeeper or on the brokers), describe them (per partition the committed "
        "offset, the log end offset, the lag and the owning member), reset their committed offsets (a dry run unless "
        "--execute) or delete them (--bootstrap-server), as kafka-consumer-groups.sh does.",
    )
    add_cluster_choice(
        p,
        bootstrap_help="broker-coordinated groups: brokers to bootstrap from",
        zookeeper_help="ZooKeeper-coordinated groups: the group's zookeeper.connect",
        zookeeper_first=True,
    )
    add_actions(
        p,
        {
            "list": "list the groups",
            "describe": "describe the groups: per partition the offsets, the lag and the owning member",
            "reset-offsets": "(--bootstrap-server) reset the groups' committed offsets: a dry run unless --execute",
            "delete": "(--bootstrap-server) delete the groups and their committed offsets (DeleteGroups)",
        },
    )
    p.add_argument("--group", action="append", help="a group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--timeout-ms", type=int, default=10_000, help="ZooKeeper connection and broker request timeout (ms, default 10000)")
    _add_reset_arguments(p)
    p.set_defaults(func=run)


def _add_reset_arguments(p: argparse.ArgumentParser) -> None:
    """The scope, scenario and mode options of ``--reset-offsets``."""
    reset = p.add_argument_group("--reset-offsets")
    reset.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]", help="the topic (and partitions) to reset (repeatable)")
    reset.add_argument("--all-topics", action="store_true", help="every partition the group has committed offsets for")
    reset.add_argument("--to-earliest", action="store_true", help="to the log start offset")
    reset.add_argument("--to-latest", action="store_true", help="to the log end offset")
    reset.add_argument("--to-offset", type=int, metavar="N", help="to offset N")
    reset.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="to the first offset at or after this time")
    reset.add_argument("--shift-by", type=int, metavar="N", help="by N from the committed offset (negative: back)")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (default: a dry run)")
    reset.add_argument("--dry-run", action="store_true", help="only print the new offsets (the default)")


def list_groups(zk: ZkClient) -> list[str]:
    """The groups registered under ``/consumers``.

    Args:
        zk: A started ZooKeeper session.

    Returns:
        The group names, sorted.
    """
    from kclient.zk import paths

    return sorted(zk.get_children(paths.CONSUMERS_PATH)) if zk.exists(paths.CONSUMERS_PATH) else []


def _group_partitions(zk: ZkClient, group: str) -> Iterator[tuple[str, int]]:
    from kclient.zk import paths

    topics: set[str] = set()
    for base in (paths.offsets_path(group, ""), paths.owners_path(group, "")):
        base = base.rstrip("/")
        if zk.exists(base):
            topics.update(zk.get_children(base))
    for topic in sorted(topics):
        data = zk.get(paths.topic_path(topic))
        if data is not None:
            ids = paths.TopicAssignment.from_json(data).partition_ids
        else:  # the topic is gone; show what the group still holds
            ids = sorted({int(p) for base in (paths.offsets_path(group, topic), paths.owners_path(group, topic)) if zk.exists(base) for p in zk.get_children(base)})
        for partition in ids:
            yield topic, partition


class _LogEndOffsets:
    """Log end offsets asked of partition leaders (ListOffsets latest),
    one SimpleConsumer per leader address; a context manager closing them."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self._consumers: dict[tuple[str, int], SimpleConsumer] = {}

    def get(self, address: tuple[str, int] | None, topic: str, partition: int) -> int | None:
        """The partition's log end offset; None without a leader address
        or when the leader cannot tell."""
        from kclient.client.consumer.simple import OffsetRequest, SimpleConsumer

        if address is None:
            return None
        if address not in self._consumers:
            self._consumers[address] = SimpleConsumer(*address, self.timeout_ms, client_id="kclient-consumer-groups")
        try:
            offsets = self._consumers[address].get_offsets_before(topic, partition, OffsetRequest.LATEST_TIME, 1)
        except KafkaError:
            return None
        return offsets[0] if offsets else None

    def __enter__(self) -> _LogEndOffsets:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for consumer in self._consumers.values():
            consumer.close()


def _described_rows(group: str, describe: Callable[..., list[PartitionLag]]) -> list[PartitionLag]:
    """``describe(progress=...)``'s rows, with a tqdm bar on a terminal."""
    bar = progress_bar(f"describing {group}", " partitions")
    try:
        return describe(progress=None if bar is None else (lambda _row: bar.update()))
    finally:
        if bar is not None:
            bar.close()


def describe_group(zk: ZkClient, group: str, *, timeout_ms: int = 10_000, progress: Progress | None = None) -> list[PartitionLag]:
    """The rows of ``--describe`` for ``group``.

    Args:
        zk: A started ZooKeeper session.
        group: The consumer group.
        timeout_ms: The timeout of each ListOffsets request (ms).
        progress: Called with each finished row (e.g. a tqdm ``update``).

    Returns:
        One `PartitionLag` per partition of each topic the group has
        offsets for or owns, sorted by topic and partition.

    Raises:
        GroupIdNotFoundError: The group does not exist.
    """
    from kclient.zk import paths

    if not zk.exists(paths.consumer_group_path(group)):
        raise GroupIdNotFoundError(f"Consumer group '{group}' does not exist.")
    addresses: dict[int, tuple[str, int] | None] = {}

    def leader_of(topic: str, partition: int) -> tuple[str, int] | None:
        state = zk.get(paths.partition_state_path(topic, partition))
        if state is None:
            return None
        leader = paths.PartitionState.from_json(state).leader
        if leader not in addresses:
            data = zk.get(paths.broker_path(leader)) if leader >= 0 else None
            addresses[leader] = None if data is None else paths.BrokerRegistration.from_json(leader, data).endpoint_for("PLAINTEXT")
        return addresses[leader]

    rows = []
    with _LogEndOffsets(timeout_ms) as log_ends:
        for topic, partition in _group_partitions(zk, group):
            committed = zk.get(paths.offset_path(group, topic, partition))
            owner = zk.get(paths.owner_path(group, topic, partition))
            end = log_ends.get(leader_of(topic, partition), topic, partition)
            row = PartitionLag(
                group,
                topic,
                partition,
                None if committed is None else paths.decode_offset(committed),
                end,
                None if owner is None else owner.decode("utf-8"),
            )
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


def describe_group_on_brokers(admin: AdminClient, group: str, *, timeout_ms: int = 10_000, progress: Progress | None = None) -> list[PartitionLag]:
    """The rows of ``--describe`` for a group its coordinator keeps.

    Args:
        admin: An admin client on the cluster.
        group: The consumer group.
        timeout_ms: The timeout of each ListOffsets request (ms).
        progress: Called with each finished row (e.g. a tqdm ``update``).

    Returns:
        One `PartitionLag` per partition the group has committed offsets
        for or a member is assigned, sorted by topic and partition, with
        the owning member's id, host and client id.

    Raises:
        GroupIdNotFoundError: The coordinator knows nothing of the group
            (state ``Dead``).
    """
    description = admin.describe_consumer_groups([group])[group]
    if description.state in ("Dead", ""):
        raise GroupIdNotFoundError(f"Consumer group '{group}' does not exist.")
    committed = admin.list_consumer_group_offsets(group)
    owners = {tp: m for m in description.members for tp in m.assignment}
    keys = sorted(set(committed) | set(owners))
    topics = admin.describe_topics(sorted({t for t, _ in keys})) if keys else {}
    brokers = {b.node_id: (b.host, b.port) for b in admin.describe_cluster().brokers}
    rows = []
    with _LogEndOffsets(timeout_ms) as log_ends:
        for topic, partition in keys:
            leader = next((p.leader for p in topics[topic].partitions if p.partition == partition), -1) if topic in topics else -1
            end = log_ends.get(brokers.get(leader), topic, partition)
            member = owners.get((topic, partition))
            owner = (None, None, None) if member is None else (member.member_id, member.client_host, member.client_id)
            row = PartitionLag(group, topic, partition, committed.get((topic, partition)), end, *owner)
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


def delete_groups(admin: AdminClient, groups: list[str]) -> int:
    """``--delete``: delete the groups (DeleteGroups, KIP-229) and print
    what Kafka's tool prints.

    Args:
        admin: An admin client on the cluster.
        groups: The groups.

    Returns:
        0 when every group was deleted, else 1 (each failure on stderr:
        "Consumer group 'x' does not exist.", or the broker's error such
        as `GroupNotEmptyError` for a group with members).
    """
    results = admin.delete_consumer_groups(groups)
    deleted = [g for g in groups if results[g] is None]
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        sys.stdout.write(f"Deletion of requested consumer groups ({_quoted(deleted)}) was successful.\n")
        return 0
    for group, error in failed.items():
        reason = f"Consumer group '{group}' does not exist." if isinstance(error, GroupIdNotFoundError) else f"{type(error).__name__}: {error}"
        sys.stderr.write(f"Error: Group '{group}' could not be deleted due to: {reason}\n")
    if deleted:
        sys.stdout.write(f"These consumer groups were deleted successfully: {_quoted(deleted)}\n")
    return 1


def _quoted(groups: list[str]) -> str:
    return ", ".join(f"'{g}'" for g in groups)


def _describe_on_brokers(admin: AdminClient, groups: list[str], timeout_ms: int) -> int:
    """``--describe`` of each group, tables separated by a blank line; an
    ``Empty`` group is said to have no active members (on stderr, as Kafka
    does)."""
    for i, group in enumerate(groups):
        if i:
            sys.stdout.write("\n")
        rows = _described_rows(group, partial(describe_group_on_brokers, admin, group, timeout_ms=timeout_ms))
        if all(row.owner is None for row in rows):
            sys.stderr.write(f"Consumer group '{group}' has no active members.\n")
        if rows:
            sys.stdout.write(format_rows(rows))
    return 0


def _run_on_brokers(args: ConsumerGroupsArguments) -> int:
    from kclient.client.admin import AdminClient

    with AdminClient({"bootstrap.servers": args.bootstrap_server, "request.timeout.ms": args.timeout_ms}) as admin:
        if args.list:
            sys.stdout.write("".join(g.group_id + "\n" for g in admin.list_consumer_groups()))
            return 0
        groups = _chosen_groups(args, lambda: [g.group_id for g in admin.list_consumer_groups()])
        if args.delete:
            return delete_groups(admin, groups) if groups else 0
        if args.reset_offsets:
            return reset_offsets(admin, groups, args)
        return _describe_on_brokers(admin, groups, args.timeout_ms)


def format_rows(rows: list[PartitionLag]) -> str:
    """The ``--describe`` table as Kafka prints it (``printOffsetFormat``):
    a header and one line per row, ``-`` for what is unknown; GROUP, TOPIC,
    CONSUMER-ID and HOST at least 15 wide, PARTITION 10, the offsets and
    LAG 15, one space between columns.

    Args:
        rows: The rows.

    Returns:
        The text, ending with a newline.
    """
    cells = [COLUMNS] + [tuple("-" if v is None else str(v) for v in row) for row in rows]
    widths = [_FIXED_WIDTHS.get(i, max(_MIN_WIDTH, *(len(line[i]) for line in cells))) for i in range(len(COLUMNS))]
    return "".join(" ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() + "\n" for line in cells)


def _chosen_groups(args: ConsumerGroupsArguments, every_group: Callable[[], list[str]]) -> list[str]:
    """The groups of ``--describe`` / ``--delete`` / ``--reset-offsets``:
    those ``--group`` names, or every group with ``--all-groups``.

    Raises:
        ConfigError: Neither or both of ``--group`` and ``--all-groups``.
    """
    if args.all_groups and args.group:
        raise ConfigError("--group and --all-groups cannot be given together")
    if args.all_groups:
        return every_group()
    if not args.group:
        action = "--describe" if args.describe else "--delete" if args.delete else "--reset-offsets"
        raise ConfigError(f"{action} needs --group or --all-groups")
    return list(dict.fromkeys(args.group))


def run(args: ConsumerGroupsArguments) -> int:
    """Run ``kclient consumer-groups``.

    Args:
        args: The parsed arguments.

    Returns:
        0; 1 when ``--delete`` or ``--reset-offsets --execute`` failed for
        a group (each said on stderr).

    Raises:
        ConfigError: Bad arguments (status 2).
        GroupIdNotFoundError: ``--describe`` of a group that does not exist.
        ZkTimeoutError: ZooKeeper did not answer within ``--timeout-ms``.
    """
    if args.bootstrap_server:
        return _run_on_brokers(args)
    if args.zookeeper is None:  # argparse requires one of them: an empty --bootstrap-server
        raise ConfigError("--bootstrap-server: no broker given")
    if args.delete or args.reset_offsets:
        raise ConfigError("--delete and --reset-offsets need --bootstrap-server (broker-coordinated groups)")
    return _run_on_zookeeper(args, args.zookeeper)


def _run_on_zookeeper(args: ConsumerGroupsArguments, connect: str) -> int:
    """``--list`` or ``--describe`` of the groups kept in ZooKeeper."""
    from kclient.zk.client import ZkClient

    zk = ZkClient(connect, connection_timeout_ms=args.timeout_ms)
    zk.start()
    try:
        if args.list:
            sys.stdout.write("".join(g + "\n" for g in list_groups(zk)))
            return 0
        for i, group in enumerate(_chosen_groups(args, lambda: list_groups(zk))):
            rows = _described_rows(group, partial(describe_group, zk, group, timeout_ms=args.timeout_ms))
            sys.stdout.write(("\n" if i else "") + format_rows(rows))
        return 0
    finally:
        zk.close()
