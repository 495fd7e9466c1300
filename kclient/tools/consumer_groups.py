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
the member id::

    kclient consumer-groups --bootstrap-server 127.0.0.1:9092 --describe --group readers
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from kclient.errors import ConfigError, KafkaError
from kclient.tools.arguments import add_actions, add_cluster_choice
from kclient.tools.common import progress_bar

if TYPE_CHECKING:
    from kclient.client.admin import AdminClient
    from kclient.client.consumer.simple import SimpleConsumer
    from kclient.zk.client import ZkClient

__all__ = ["ConsumerGroupsArguments", "PartitionLag", "describe_group", "describe_group_on_brokers", "list_groups", "register", "run"]

COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID")


class ConsumerGroupsArguments(Protocol):
    """The ``consumer-groups`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    zookeeper: str | None
    bootstrap_server: str | None
    describe: bool
    group: str | None
    timeout_ms: int
    list: bool  # last: the name hides the builtin in the rest of the class


class PartitionLag(tuple[str, str, int, "int | None", "int | None", "int | None", "str | None"]):
    """One row of ``--describe``: ``group``, ``topic``, ``partition``,
    ``current_offset`` (the committed offset, None when nothing is
    committed), ``log_end_offset`` (None when the leader could not be
    asked), ``lag`` (None unless both are known) and ``owner`` (the
    consumer thread id owning the partition, or None)."""

    __slots__ = ()
    _fields = ("group", "topic", "partition", "current_offset", "log_end_offset", "lag", "owner")

    def __new__(cls, group: str, topic: str, partition: int, current_offset: int | None, log_end_offset: int | None, owner: str | None) -> PartitionLag:
        lag = None if current_offset is None or log_end_offset is None else max(0, log_end_offset - current_offset)
        return tuple.__new__(cls, (group, topic, partition, current_offset, log_end_offset, lag, owner))

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


#: Called with each finished row of ``--describe`` (e.g. a tqdm ``update``).
Progress = Callable[[PartitionLag], object]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``consumer-groups`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "consumer-groups",
        help="list consumer groups, describe one with its lag (kafka-consumer-groups.sh --zookeeper)",
        description="List the consumer groups in ZooKeeper, or describe one: per partition the committed offset, "
        "the log end offset, the lag and the owning consumer.",
    )
    add_cluster_choice(
        p,
        bootstrap_help="broker-coordinated groups: brokers to bootstrap from",
        zookeeper_help="ZooKeeper-coordinated groups: the group's zookeeper.connect",
        zookeeper_first=True,
    )
    add_actions(p, {"list": "list the groups", "describe": "describe --group"})
    p.add_argument("--group", help="the group to describe")
    p.add_argument("--timeout-ms", type=int, default=10_000, help="ZooKeeper connection and broker request timeout (ms, default 10000)")
    p.set_defaults(func=run)


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


def _print_described(group: str, describe: Callable[[Progress | None], list[PartitionLag]]) -> None:
    """Print ``describe(progress)``'s rows, with a tqdm bar on a terminal."""
    bar = progress_bar(f"describing {group}", " partitions")
    try:
        rows = describe(None if bar is None else (lambda _row: bar.update()))
    finally:
        if bar is not None:
            bar.close()
    sys.stdout.write(format_rows(rows))


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
        ConfigError: The group does not exist.
    """
    from kclient.zk import paths

    if not zk.exists(paths.consumer_group_path(group)):
        raise ConfigError(f"consumer group {group!r} does not exist in ZooKeeper")
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
        for or a member is assigned, sorted by topic and partition.

    Raises:
        ConfigError: The coordinator knows nothing of the group.
    """
    description = admin.describe_consumer_groups([group])[group]
    committed = admin.list_consumer_group_offsets(group)
    owners = {tp: m.member_id for m in description.members for tp in m.assignment}
    keys = sorted(set(committed) | set(owners))
    if not keys and description.state in ("Dead", ""):
        raise ConfigError(f"consumer group {group!r} is not known to the brokers")
    topics = admin.describe_topics(sorted({t for t, _ in keys})) if keys else {}
    brokers = {b.node_id: (b.host, b.port) for b in admin.describe_cluster().brokers}
    rows = []
    with _LogEndOffsets(timeout_ms) as log_ends:
        for topic, partition in keys:
            leader = next((p.leader for p in topics[topic].partitions if p.partition == partition), -1) if topic in topics else -1
            end = log_ends.get(brokers.get(leader), topic, partition)
            row = PartitionLag(group, topic, partition, committed.get((topic, partition)), end, owners.get((topic, partition)))
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


def _run_on_brokers(args: ConsumerGroupsArguments, group: str | None) -> int:
    from kclient.client.admin import AdminClient

    with AdminClient({"bootstrap.servers": args.bootstrap_server, "request.timeout.ms": args.timeout_ms}) as admin:
        if group is None:
            sys.stdout.write("".join(g.group_id + "\n" for g in admin.list_consumer_groups()))
            return 0
        _print_described(group, lambda progress: describe_group_on_brokers(admin, group, timeout_ms=args.timeout_ms, progress=progress))
        return 0


def format_rows(rows: list[PartitionLag]) -> str:
    """The ``--describe`` table: a header and one line per row, columns
    aligned, ``-`` for what is unknown.

    Args:
        rows: The rows.

    Returns:
        The text, ending with a newline.
    """
    cells = [COLUMNS] + [tuple("-" if v is None else str(v) for v in row) for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() + "\n" for line in cells)


def _described_group(args: ConsumerGroupsArguments) -> str | None:
    """The ``--group`` of a ``--describe``; None for ``--list``.

    Raises:
        ConfigError: ``--describe`` without ``--group``.
    """
    if not args.describe:
        return None
    if not args.group:
        raise ConfigError("--describe needs --group")
    return args.group


def run(args: ConsumerGroupsArguments) -> int:
    """Run ``kclient consumer-groups``.

    Args:
        args: The parsed arguments.

    Returns:
        0.

    Raises:
        ConfigError: ``--describe`` without ``--group``, or a group that
            does not exist.
        ZkTimeoutError: ZooKeeper did not answer within ``--timeout-ms``.
    """
    from kclient.zk.client import ZkClient

    group = _described_group(args)
    if args.bootstrap_server:
        return _run_on_brokers(args, group)
    if args.zookeeper is None:  # argparse requires one of them: an empty --bootstrap-server
        raise ConfigError("--bootstrap-server: no broker given")
    zk = ZkClient(args.zookeeper, connection_timeout_ms=args.timeout_ms)
    zk.start()
    try:
        if group is None:
            sys.stdout.write("".join(g + "\n" for g in list_groups(zk)))
            return 0
        _print_described(group, lambda progress: describe_group(zk, group, timeout_ms=args.timeout_ms, progress=progress))
        return 0
    finally:
        zk.close()
