"""``kclient topics``: list and describe topics from Metadata, with the
flags of Kafka's ``kafka-topics.sh``::

    kclient topics --bootstrap-server 127.0.0.1:9092 --list
    kclient topics --bootstrap-server 127.0.0.1:9092 --describe --topic events

``--describe`` prints Kafka's layout: one summary line per topic, then one
tab-indented line per partition (leader, replicas, in-sync replicas).
``--topic`` is a topic name or, as in Kafka, a regular expression.

``--create`` and ``--delete`` need CreateTopics / DeleteTopics on the
broker, which come with the cluster work (issue 11): they print a one-line
error and exit with status 2. Until then topics are created on first use
(``auto.create.topics.enable``, ``num.partitions``).
"""

from __future__ import annotations

import argparse
import re
import sys

from kclient.errors import UnknownTopicOrPartitionError
from kclient.tools._common import add_bootstrap_argument, client_properties, fetch_metadata, parse_bootstrap

__all__ = ["NOT_YET", "register", "run"]

#: The error of ``--create`` / ``--delete`` (``{action}`` is the option).
NOT_YET = (
    "kclient topics {action} is not available yet: the bundled broker has no CreateTopics/DeleteTopics "
    "until the cluster work (issue 11); topics are auto-created on first use (auto.create.topics.enable, num.partitions)"
)

#: Kafka's internal topics (left out by ``--exclude-internal``).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``topics`` subcommand.

    Args:
        subparsers: The ``kclient`` parser's subparsers.
    """
    p = subparsers.add_parser(
        "topics",
        help="list and describe topics (kafka-topics.sh)",
        description="List or describe topics from the broker's Metadata.",
    )
    add_bootstrap_argument(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list the topic names")
    actions.add_argument("--describe", action="store_true", help="describe the topics' partitions")
    actions.add_argument("--create", action="store_true", help="not available yet (needs issue 11)")
    actions.add_argument("--delete", action="store_true", help="not available yet (needs issue 11)")
    p.add_argument("--topic", help="a topic name or regular expression (default: every topic)")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__consumer_offsets, ...)")
    p.add_argument("--partitions", type=int, help="(--create) not available yet")
    p.add_argument("--replication-factor", type=int, help="(--create) not available yet")
    p.add_argument("--command-config", help="a client .properties file (security settings)")
    p.set_defaults(func=run)


def _select(names, pattern: str | None) -> list[str]:
    if pattern is None:
        return sorted(names)
    if pattern in names:
        return [pattern]
    try:
        regex = re.compile(pattern)
    except re.error:
        return []
    return sorted(n for n in names if regex.fullmatch(n))


def run(args: argparse.Namespace) -> int:
    """Run ``kclient topics``.

    Args:
        args: The parsed arguments.

    Returns:
        0, or 2 for ``--create`` / ``--delete`` (not available yet).

    Raises:
        ConfigError: Bad arguments.
        UnknownTopicOrPartitionError: ``--topic`` matches no topic.
        KafkaError: The broker could not be reached.
    """
    import logging

    if args.create or args.delete:
        logging.getLogger("kclient.cli").error("%s", NOT_YET.format(action="--create" if args.create else "--delete"))
        return 2
    bootstrap = parse_bootstrap(args.bootstrap_server)
    props = client_properties(args.command_config, [], "--command-config")
    metadata = fetch_metadata(bootstrap, None, properties=props)
    names = {n for n, code in metadata.topic_errors.items() if not code}
    if args.exclude_internal:
        names -= INTERNAL_TOPICS
    selected = _select(names, args.topic)
    if args.topic is not None and not selected:
        raise UnknownTopicOrPartitionError(f"Topic '{args.topic}' does not exist as expected")
    out = []
    if args.list:
        out.extend(name + "\n" for name in selected)
    else:
        for name in selected:
            parts = metadata.partitions_for(name)
            rf = max((len(p.replicas) for p in parts), default=0)
            out.append(f"Topic: {name}\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}\n")
            for p in parts:
                out.append(
                    f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
                    f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\n"
                )
    sys.stdout.write("".join(out))
    sys.stdout.flush()
    return 0
