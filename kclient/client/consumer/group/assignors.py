"""Partition assignors of the "consumer" group protocol: pure functions that
split a group's partitions over its members, as the group leader does
before it sends the assignments in SyncGroup (Kafka protocol guide, "The
Consumer Group Protocol" in "A Guide To The Kafka Protocol",
https://cwiki.apache.org/confluence/display/KAFKA/A+Guide+To+The+Kafka+Protocol;
KIP-62 / KIP-429 for the embedded subscription format).

The names are the JoinGroup protocol names Kafka's clients use, so a
kclient member and a Java, librdkafka, kafka-python or aiokafka member
agree on one:

- ``range`` (Kafka's ``RangeAssignor``, the ``partition.assignment.strategy``
  default): per topic, the members subscribed to it in member-id order; with
  ``N = partitions // members`` and ``extra = partitions % members`` the
  member at position ``i`` takes the ``N + (1 if i < extra else 0)``
  consecutive partitions starting at ``i * N + min(i, extra)``.
- ``roundrobin`` (Kafka's ``RoundRobinAssignor``): every partition of every
  subscribed topic, sorted by topic name then partition, is dealt in turn to
  the members in member-id order, skipping members not subscribed to that
  partition's topic.
- ``cooperative-sticky`` (Kafka's ``CooperativeStickyAssignor``, KIP-429
  with KIP-54's sticky goals): balanced, members keep what they own, and a
  partition moving between members is only revoked in one generation and
  given in the next (`kclient.client.consumer.group.sticky`). The only
  assignor here that supports the cooperative rebalance protocol; as in
  Kafka, a member rebalances cooperatively only when every assignor it
  offers does (`is_cooperative`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kclient.client.consumer.group.sticky import StickyMember, cooperative_sticky_assign, member_generation
from kclient.errors import ConfigError
from kclient.protocol.consumer_protocol import Subscription

TopicPartition = tuple[str, int]
#: ``{member_id: [(topic, partition), ...]}``
Assignments = dict[str, list[TopicPartition]]
Assignor = Callable[[Mapping[str, int], Mapping[str, Iterable[str]]], Assignments]

RANGE = "range"
ROUNDROBIN = "roundrobin"
COOPERATIVE_STICKY = "cooperative-sticky"


def range_assign(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Iterable[str]]) -> Assignments:
    """Kafka's ``RangeAssignor``.

    Args:
        partitions_per_topic: ``{topic: partition count}``; topics missing
            here (unknown to the cluster) are skipped.
        subscriptions: ``{member_id: subscribed topics}``.

    Returns:
        ``{member_id: [(topic, partition), ...]}`` for every member (an
        empty list for a member that gets nothing), each list sorted by
        topic then partition.
    """
    subs = {member: set(topics) for member, topics in subscriptions.items()}
    result: Assignments = {member: [] for member in subs}
    for topic in sorted({t for topics in subs.values() for t in topics}):
        count = partitions_per_topic.get(topic)
        if not count:
            continue
        members = sorted(m for m, topics in subs.items() if topic in topics)
        per, extra = divmod(count, len(members))
        for i, member in enumerate(members):
            start = i * per + min(i, extra)
            length = per + (1 if i < extra else 0)
            result[member].extend((topic, p) for p in range(start, start + length))
    return result


def roundrobin_assign(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Iterable[str]]) -> Assignments:
    """Kafka's ``RoundRobinAssignor``.

    Args:
        partitions_per_topic: ``{topic: partition count}``; topics missing
            here are skipped.
        subscriptions: ``{member_id: subscribed topics}``.

    Returns:
        ``{member_id: [(topic, partition), ...]}`` for every member, each
        list in the order the partitions were dealt (topic, then partition).
    """
    subs = {member: set(topics) for member, topics in subscriptions.items()}
    result: Assignments = {member: [] for member in subs}
    members = sorted(subs)
    if not members:
        return result
    position = 0
    for topic in sorted({t for topics in subs.values() for t in topics}):
        for partition in range(partitions_per_topic.get(topic) or 0):
            while topic not in subs[members[position % len(members)]]:
                position += 1
            result[members[position % len(members)]].append((topic, partition))
            position += 1
    return result


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (32-bit signed, over UTF-16 code units).

    Args:
        text: The string.

    Returns:
        ``s[0]*31^(n-1) + ... + s[n-1]`` in Java ``int`` arithmetic.
    """
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def zk_roundrobin_assignment(partitions: Mapping[str, Iterable[int]], threads: Mapping[str, Iterable[str]], thread_key: Callable[[str], Any] = str) -> dict[TopicPartition, str]:
    """Kafka 0.8.2's ``RoundRobinAssignor`` of the ZooKeeper-coordinated
    consumer (``partition.assignment.strategy=roundrobin``, Kafka 0.8.2
    documentation, consumer configs): every partition of every subscribed
    topic, ordered by the Java hash code of its ``"[topic,partition]"``
    name, is dealt in turn to the group's consumer threads in sorted order.
    It requires every consumer to subscribe the same topics with the same
    number of streams.

    Args:
        partitions: ``{topic: partition ids}``.
        threads: ``{topic: the group's consumer thread ids for it}``.
        thread_key: Sort key of a thread id (Kafka's ConsumerThreadId
            order: `kclient.zk.paths.thread_sort_key`).

    Returns:
        ``{(topic, partition): thread id}`` for every partition (empty
        without threads).

    Raises:
        ValueError: The topics do not all have the same threads.
    """
    per_topic = {t: tuple(sorted(set(threads.get(t, ())), key=thread_key)) for t in partitions}
    distinct = set(per_topic.values())
    if len(distinct) > 1:
        raise ValueError(
            "round-robin assignment needs every consumer of the group to subscribe the same topics "
            "with the same number of streams"
        )
    ordered = next(iter(distinct), ())
    if not ordered:
        return {}
    every = sorted(((t, p) for t, ps in partitions.items() for p in ps), key=lambda tp: (java_string_hash(f"[{tp[0]},{tp[1]}]"), tp))
    return {tp: ordered[i % len(ordered)] for i, tp in enumerate(every)}


#: The eager assignors (topic subscriptions only) by JoinGroup protocol name.
ASSIGNORS: dict[str, Assignor] = {RANGE: range_assign, ROUNDROBIN: roundrobin_assign}

#: The assignors supporting the cooperative rebalance protocol (KIP-429).
COOPERATIVE_ASSIGNORS = frozenset({COOPERATIVE_STICKY})

#: Every protocol name a member may offer.
KNOWN_ASSIGNORS = frozenset(ASSIGNORS) | COOPERATIVE_ASSIGNORS


def offered_assignors(strategies: str | Sequence[str]) -> list[str]:
    """The JoinGroup protocols a member offers for its
    ``partition.assignment.strategy``: the configured ones in order, then,
    when any is eager, the other eager ones (so a group of mixed eager
    members agrees on one); cooperative ones only, as configured, when all
    are cooperative (as a Java member configured with only
    ``CooperativeStickyAssignor``: offering an eager one too makes the
    member rebalance eagerly, Kafka's first step of an upgrade).

    Args:
        strategies: The configured strategies (`KNOWN_ASSIGNORS` names),
            most preferred first; one name alone is accepted.

    Returns:
        Protocol names in order of preference.
    """
    chosen = [strategies] if isinstance(strategies, str) else list(strategies)
    if is_cooperative(chosen):
        return chosen
    return [*chosen, *(a for a in ASSIGNORS if a not in chosen)]


def require_eager(strategies: str | Sequence[str], coordination: str) -> None:
    """Refuse a cooperative strategy for the 0.8 ``ConsumerConnector``,
    which moves partitions between its streams only by stopping every
    fetcher (eager rebalancing).

    Args:
        strategies: ``partition.assignment.strategy`` (one name or the list).
        coordination: Named in the message (``zookeeper`` or ``broker``).

    Raises:
        ConfigError: a strategy is a cooperative assignor.
    """
    chosen = [strategies] if isinstance(strategies, str) else list(strategies)
    cooperative = [s for s in chosen if s in COOPERATIVE_ASSIGNORS]
    if cooperative:
        raise ConfigError(
            f"partition.assignment.strategy={','.join(chosen)} names {cooperative[0]}, which needs incremental rebalancing "
            f"(KIP-429), which the ConsumerConnector (group.coordination={coordination}) does not do: use the poll consumer, "
            "kclient.Consumer(config), or range / roundrobin"
        )


def is_cooperative(offered: Iterable[str]) -> bool:
    """Whether a member offering these assignors rebalances cooperatively
    (KIP-429: keeps its partitions while it rejoins): only when every one
    supports it, as Kafka's ``ConsumerCoordinator`` decides.

    Args:
        offered: The protocol names the member offers.

    Returns:
        True for a non-empty list of cooperative assignors only.
    """
    names = list(offered)
    return bool(names) and all(name in COOPERATIVE_ASSIGNORS for name in names)


def sticky_member(subscription: Subscription) -> StickyMember:
    """What the sticky assignor reads from a decoded subscription.

    Args:
        subscription: A member's `ConsumerProtocolSubscription`.

    Returns:
        Its topics, owned partitions and generation.
    """
    owned = tuple((t, p) for t, parts in subscription.owned_partitions for p in parts)
    generation = member_generation(subscription.version, subscription.generation_id, subscription.user_data)
    return StickyMember(frozenset(subscription.topics), owned, generation)


def assign(protocol: str, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignments:
    """Run the assignor the group chose, as its leader does.

    Args:
        protocol: The group's protocol name (a `KNOWN_ASSIGNORS` name).
        partitions_per_topic: ``{topic: partition count}``.
        subscriptions: ``{member_id: decoded subscription}``.

    Returns:
        ``{member_id: [(topic, partition), ...]}`` for every member.

    Raises:
        KeyError: ``protocol`` is not a known assignor.
    """
    if protocol in COOPERATIVE_ASSIGNORS:
        return cooperative_sticky_assign(partitions_per_topic, {m: sticky_member(s) for m, s in subscriptions.items()})
    return ASSIGNORS[protocol](partitions_per_topic, {m: s.topics for m, s in subscriptions.items()})


def spread_over_streams(assigned: Iterable[TopicPartition], streams_per_topic: Mapping[str, tuple[int, int]]) -> dict[TopicPartition, int]:
    """Hand a member's partitions to its local streams: per topic, by range
    over that topic's streams (the partition-to-thread split of Kafka 0.8's
    ``ZookeeperConsumerConnector``, applied within one member).

    Args:
        assigned: The member's ``(topic, partition)`` pairs.
        streams_per_topic: ``{topic: (first stream index, stream count)}``.

    Returns:
        ``{(topic, partition): stream index}``; partitions of topics not in
        ``streams_per_topic`` are left out.
    """
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assigned:
        by_topic.setdefault(topic, []).append(partition)
    result: dict[TopicPartition, int] = {}
    for topic, partitions in by_topic.items():
        if topic not in streams_per_topic:
            continue
        base, count = streams_per_topic[topic]
        parts = sorted(set(partitions))
        per, extra = divmod(len(parts), count)
        for i in range(count):
            start = i * per + min(i, extra)
            for p in parts[start : start + per + (1 if i < extra else 0)]:
                result[(topic, p)] = base + i
    return result


__all__ = [
    "ASSIGNORS",
    "COOPERATIVE_ASSIGNORS",
    "COOPERATIVE_STICKY",
    "KNOWN_ASSIGNORS",
    "RANGE",
    "ROUNDROBIN",
    "assign",
    "is_cooperative",
    "java_string_hash",
    "offered_assignors",
    "range_assign",
    "require_eager",
    "roundrobin_assign",
    "spread_over_streams",
    "sticky_member",
    "zk_roundrobin_assignment",
]
