"""``kclient topics``: list, describe, create and delete topics, with the
flags of Kafka's ``kafka-topics.sh``::

    kclient topics --bootstrap-server 127.0.0.1:9092 --list
    kclient topics --bootstrap-server 127.0.0.1:9092 --describe --topic events
    kclient topics --bootstrap-server 127.0.0.1:9092 --create --topic events \
        --partitions 6 --replication-factor 3 --config min.insync.replicas=2
    kclient topics --bootstrap-server 127.0.0.1:9092 --delete --topic events

``--describe`` prints Kafka's layout: one summary line per topic (with
its ``TopicId:`` when the cluster has topic ids, KIP-516) ending with
``Configs:``, the topic's configs that are not defaults (its overrides,
and broker settings that differ from Kafka's defaults; DescribeConfigs,
KIP-133; with ``--zookeeper`` the overrides in ``/config/topics/<topic>``),
then one tab-indented line per partition (leader, replicas, in-sync
replicas)::

    Topic: events	TopicId: W6E4_hjpVbKAdsCYsr2OWw	PartitionCount: 2	ReplicationFactor: 1	Configs: cleanup.policy=compact,retention.ms=60000
    	Topic: events	Partition: 0	Leader: 1	Replicas: 1	Isr: 1
``--topic`` is a topic name or, as in Kafka, a regular expression (for
``--create`` a name).

With ``--bootstrap-server`` the tool is a client: ``--create`` and
``--delete`` send CreateTopics / DeleteTopics (KIP-4) to the controller
through `kclient.client.admin.AdminClient` and return once the cluster
shows the change. With ``--zookeeper HOST:PORT[/chroot]`` instead (the
older ``kafka-topics.sh`` way) it reads and writes ZooKeeper itself:
``--create`` writes the topic's replica assignment (Kafka's rack-unaware
round-robin over the registered brokers) and configs for the controller to
pick up, ``--delete`` marks the topic under ``/admin/delete_topics``, and
``--list`` / ``--describe`` read the partition state znodes.

Every failure is one line on stderr (exit status 1; 2 for bad arguments).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kclient.errors import ConfigError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
from kclient.tools.arguments import add_actions, add_cluster_choice
from kclient.tools.common import client_properties, fetch_metadata, fetch_topic_ids, kafka_uuid, parse_bootstrap, parse_key_values

if TYPE_CHECKING:
    from kclient.client.cluster import PartitionInfo
    from kclient.zk.client import ZkClient

__all__ = ["INTERNAL_TOPICS", "TopicsArguments", "format_configs", "parse_replica_assignment", "register", "run"]

#: Kafka's internal topics (left out by ``--exclude-internal``).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class TopicsArguments(Protocol):
    """The ``topics`` arguments `register` defines (an
    `argparse.Namespace` has them)."""

    bootstrap_server: str | None
    zookeeper: str | None
    describe: bool
    create: bool
    delete: bool
    topic: str | None
    exclude_internal: bool
    partitions: int | None
    replication_factor: int | None
    replica_assignment: str | None
    config: list[str]
    if_not_exists: bool
    if_exists: bool
    command_config: str | None
    list: bool  # last: the name hides the builtin in the rest of the class


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``topics`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "topics",
        help="list, describe, create and delete topics (kafka-topics.sh)",
        description="List, describe, create or delete topics, through a broker (--bootstrap-server) or "
        "ZooKeeper (--zookeeper).",
    )
    add_cluster_choice(
        p,
        bootstrap_help="the broker(s) to connect to, comma-separated",
        zookeeper_help="the cluster's zookeeper.connect (instead of a broker)",
        bootstrap_flags=("--bootstrap-server", "--broker-list"),
        bootstrap_metavar="HOST:PORT",
    )
    actions = {"list": "list the topic names", "describe": "describe the topics' partitions", "create": "create a topic", "delete": "delete topics"}
    add_actions(p, actions)
    p.add_argument("--topic", help="a topic name or regular expression (default: every topic)")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__consumer_offsets, ...)")
    p.add_argument("--partitions", type=int, help="(--create) the number of partitions (default: the broker's num.partitions)")
    p.add_argument(
        "--replication-factor", type=int, help="(--create) replicas per partition (default: the broker's default.replication.factor)"
    )
    p.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="(--create) manual assignment: partitions separated by commas, each a colon-separated broker list",
    )
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="(--create) a topic config (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="(--create) no error if the topic exists")
    p.add_argument("--if-exists", action="store_true", help="(--delete, --describe) no error if the topic does not exist")
    p.add_argument("--command-config", help="a client .properties file (security settings)")
    p.set_defaults(func=run)


def _selected(names: set[str], args: TopicsArguments) -> list[str] | None:
    """The topics ``--topic`` names (all without it), internal ones left
    out with ``--exclude-internal``; None when none exists and
    ``--if-exists`` was given.

    Raises:
        UnknownTopicOrPartitionError: ``--topic`` matches no topic.
    """
    if args.exclude_internal:
        names = names - INTERNAL_TOPICS
    selected = _select(names, args.topic)
    if args.topic is not None and not selected:
        if args.if_exists:
            return None
        raise UnknownTopicOrPartitionError(f"Topic '{args.topic}' does not exist as expected")
    return selected


def _select(names: Collection[str], pattern: str | None) -> list[str]:
    if pattern is None:
        return sorted(names)
    if pattern in names:
        return [pattern]
    try:
        regex = re.compile(pattern)
    except re.error:
        return []
    return sorted(n for n in names if regex.fullmatch(n))


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Parse ``--replica-assignment`` (``"1:2,2:3,3:1"``: partition 0 on
    brokers 1 and 2, ...).

    Args:
        text: The option's value.

    Returns:
        ``{partition: [broker ids]}``.

    Raises:
        ConfigError: Not that format.
    """
    try:
        result = {p: [int(b) for b in part.split(":")] for p, part in enumerate(text.split(","))}
    except ValueError:
        raise ConfigError(f"--replica-assignment {text!r}: expected broker ids like 1:2,2:3") from None
    if not result or any(len(set(r)) != len(r) for r in result.values()):
        raise ConfigError(f"--replica-assignment {text!r}: each partition needs distinct broker ids")
    return result


def _topic_to_create(args: TopicsArguments) -> str:
    """The ``--topic`` of a ``--create``.

    Raises:
        ConfigError: No ``--topic``, or ``--replica-assignment`` with
            ``--partitions`` or ``--replication-factor``.
    """
    if not args.topic:
        raise ConfigError("--create needs --topic")
    if args.replica_assignment and (args.partitions is not None or args.replication_factor is not None):
        raise ConfigError("--replica-assignment cannot be combined with --partitions or --replication-factor")
    return args.topic


def _print(lines: list[str]) -> None:
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


#: The ``Configs:`` field of each topic ``--describe`` shows
#: (``"k=v,k2=v2"``), given the selected topics.
ConfigsOf = Callable[[list[str]], Mapping[str, str]]


def format_configs(configs: Mapping[str, str | None]) -> str:
    """A ``Configs:`` field as Kafka's ``kafka-topics.sh`` prints it:
    ``k=v`` entries joined by commas (``null`` for a sensitive value).

    Args:
        configs: Config name -> value, in the order to print.

    Returns:
        The field's text (empty without configs).
    """
    return ",".join(f"{k}={'null' if v is None else v}" for k, v in configs.items())


def _describe_lines(name: str, parts: Sequence[PartitionInfo], configs: str, topic_id: str | None = None) -> list[str]:
    """Kafka's ``--describe`` lines for one topic (``TopicId:`` when the
    cluster has topic ids, as Kafka's ``TopicCommand`` prints them)."""
    rf = max((len(p.replicas) for p in parts), default=0)
    id_field = f"\tTopicId: {topic_id}" if topic_id else ""
    out = [f"Topic: {name}{id_field}\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}\tConfigs: {configs}"]
    for p in parts:
        out.append(
            f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
        )
    return out


def run(args: TopicsArguments) -> int:
    """Run ``kclient topics``.

    Args:
        args: The parsed arguments.

    Returns:
        0.

    Raises:
        ConfigError: Bad arguments.
        UnknownTopicOrPartitionError: ``--topic`` matches no topic (unless
            ``--if-exists``).
        TopicAlreadyExistsError: ``--create`` of an existing topic (unless
            ``--if-not-exists``).
        KafkaError: The broker refused or could not be reached.
    """
    from kclient.config.admin import AdminConfig

    configs = parse_key_values(args.config, "--config")
    new_topic = _topic_to_create(args) if args.create else None
    if args.zookeeper:
        return _run_zookeeper(args, args.zookeeper, configs, new_topic)
    bootstrap = parse_bootstrap(args.bootstrap_server or "")
    props = client_properties(args.command_config, [], "--command-config", keep=AdminConfig.select_known)
    if new_topic is not None:
        return _create(args, new_topic, props, configs)
    metadata = fetch_metadata(bootstrap, None, properties=props)
    names = {n for n, code in metadata.topic_errors.items() if not code}

    def delete(selected: list[str]) -> list[str]:
        from kclient.client.admin import AdminClient

        with AdminClient({**props, "bootstrap.servers": args.bootstrap_server, "client.id": "kclient-topics"}) as admin:
            admin.delete_topics(selected)
        return [f"Deleted topic {name}." for name in selected]

    def configs_of(selected: list[str]) -> dict[str, str]:
        return _broker_topic_configs({**props, "bootstrap.servers": args.bootstrap_server, "client.id": "kclient-topics"}, selected)

    def topic_ids() -> dict[str, str]:
        found = fetch_topic_ids(bootstrap, properties=props)
        return {name: kafka_uuid(topic_id) for name, topic_id in found.items()}

    return _list_describe_delete(names, args, metadata.partitions_for, delete, configs_of, topic_ids)


def _broker_topic_configs(properties: Mapping[str, Any], topics: list[str]) -> dict[str, str]:
    """Each topic's non-default configs (DescribeConfigs), as the
    ``Configs:`` field shows them; empty fields from a broker without
    DescribeConfigs (before Kafka 0.11)."""
    from kclient.client.admin import AdminClient, ConfigResource
    from kclient.errors import UnsupportedVersionError

    resources = [ConfigResource("topic", t) for t in topics]
    with AdminClient(properties) as admin:
        try:
            described = admin.describe_configs(resources)
        except UnsupportedVersionError:
            return dict.fromkeys(topics, "")
    return {r.name: format_configs({e.name: e.value for e in described[r].values() if not e.is_default}) for r in resources}


def _list_describe_delete(
    names: set[str],
    args: TopicsArguments,
    partitions_of: Callable[[str], Sequence[PartitionInfo]],
    delete: Callable[[list[str]], list[str]],
    configs_of: ConfigsOf,
    topic_ids: Callable[[], Mapping[str, str]] = dict,
) -> int:
    """``--list``, ``--describe`` or ``--delete`` of the topics ``--topic``
    selects, through a broker or ZooKeeper (Kafka's ``TopicCommand`` over
    either of its topic services).

    Args:
        names: The topics that exist.
        args: The parsed arguments.
        partitions_of: A topic's partitions, sorted by id (``--describe``).
        delete: Deletes (or marks for deletion) the topics; returns the
            lines to print.
        configs_of: The ``Configs:`` field of each topic (``--describe``).
        topic_ids: Each topic's id as Kafka prints it (``--describe``;
            empty when the cluster has none).

    Returns:
        0.

    Raises:
        ConfigError: ``--delete`` without ``--topic``.
        UnknownTopicOrPartitionError: ``--topic`` matches no topic (unless
            ``--if-exists``).
    """
    selected = _selected(names, args)
    if selected is None:
        return 0
    if args.list:
        _print(selected)
    elif args.describe:
        configs = configs_of(selected) if selected else {}
        ids = topic_ids() if selected else {}
        _print([line for name in selected for line in _describe_lines(name, partitions_of(name), configs.get(name, ""), ids.get(name))])
    else:
        if args.topic is None:
            raise ConfigError("--delete needs --topic")
        _print(delete(selected))
    return 0


def _create(args: TopicsArguments, name: str, props: Mapping[str, str], configs: dict[str, str]) -> int:
    from kclient.client.admin import AdminClient, NewTopic

    assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    topic = NewTopic(
        name,
        -1 if args.partitions is None else args.partitions,
        -1 if args.replication_factor is None else args.replication_factor,
        replica_assignment=assignment,
        config=configs,
    )
    with AdminClient({**props, "bootstrap.servers": args.bootstrap_server, "client.id": "kclient-topics"}) as admin:
        try:
            admin.create_topics([topic])
        except TopicAlreadyExistsError:
            if not args.if_not_exists:
                raise
            return 0
    _print([f"Created topic {name}."])
    return 0


# ---------------------------------------------------------------- --zookeeper


def _create_in_zookeeper(zk: ZkClient, args: TopicsArguments, topic: str, names: set[str], configs: dict[str, str]) -> int:
    """``--create`` with ``--zookeeper``: the topic's config and replica
    assignment written where the controller picks them up."""
    from kclient.broker.topic_admin import TOPIC_CONFIG_PATH, assign_replicas
    from kclient.storage import validate_topic_name
    from kclient.zk.paths import BROKER_IDS_PATH, TopicAssignment, topic_path

    validate_topic_name(topic)
    if topic in names:
        if args.if_not_exists:
            return 0
        raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
    brokers = sorted(int(b) for b in zk.get_children(BROKER_IDS_PATH) if b.isdigit()) if zk.exists(BROKER_IDS_PATH) else []
    if args.replica_assignment:
        replicas = parse_replica_assignment(args.replica_assignment)
    else:
        if args.partitions is None or args.replication_factor is None:
            raise ConfigError("--create with --zookeeper needs --partitions and --replication-factor (or --replica-assignment)")
        try:
            replicas = {p: list(r) for p, r in assign_replicas(brokers, args.partitions, args.replication_factor).items()}
        except ValueError as exc:
            from kclient.errors import InvalidPartitionsError, InvalidReplicationFactorError

            error = InvalidPartitionsError if args.partitions < 1 else InvalidReplicationFactorError
            raise error(f"{exc} (registered brokers: {brokers})") from None
    zk.write_persistent(f"{TOPIC_CONFIG_PATH}/{topic}", json.dumps({"version": 1, "config": configs}).encode())
    if zk.create_versioned(topic_path(topic), TopicAssignment({p: tuple(r) for p, r in replicas.items()}).to_json()) is None:
        raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
    _print([f"Created topic {topic}."])
    return 0


def _run_zookeeper(args: TopicsArguments, connect: str, configs: dict[str, str], new_topic: str | None) -> int:
    from kclient.broker.topic_admin import DELETE_TOPICS_PATH
    from kclient.zk.client import ZkClient
    from kclient.zk.paths import BROKER_TOPICS_PATH, PartitionState, TopicAssignment, partition_state_path, topic_path

    zk = ZkClient(connect, session_timeout_ms=10000, connection_timeout_ms=10000)
    zk.start()
    try:
        names = set(zk.get_children(BROKER_TOPICS_PATH)) if zk.exists(BROKER_TOPICS_PATH) else set()
        if new_topic is not None:
            return _create_in_zookeeper(zk, args, new_topic, names, configs)

        def partitions_of(name: str) -> list[PartitionInfo]:
            from kclient.client.cluster import PartitionInfo

            assignment = TopicAssignment.from_json(zk.get(topic_path(name)) or b'{"partitions":{}}').partitions
            parts = []
            for p, reps in sorted(assignment.items()):
                data = zk.get(partition_state_path(name, int(p)))
                state = PartitionState.from_json(data) if data else PartitionState(-1, ())
                parts.append(PartitionInfo(name, int(p), state.leader, tuple(reps), state.isr))
            return parts

        def mark_for_deletion(selected: list[str]) -> list[str]:
            for name in selected:
                zk.create_persistent_if_absent(f"{DELETE_TOPICS_PATH}/{name}", b"")
            return [f"Topic {name} is marked for deletion." for name in selected]

        def configs_of(selected: list[str]) -> dict[str, str]:
            from kclient.broker.zk_topics import decode_topic_config, topic_config_path

            return {name: format_configs(dict(sorted(decode_topic_config(zk.get(topic_config_path(name))).items()))) for name in selected}

        return _list_describe_delete(names, args, partitions_of, mark_for_deletion, configs_of)
    finally:
        zk.close()
