"""Consumer registration and the range rebalance in ZooKeeper (the blocking
side of group membership; the connector's core runs these methods in worker
threads).

Kafka 0.8 documentation, section 5.5 "Distribution"
(https://kafka.apache.org/08/documentation.html#distributionimpl),
"Consumer registration algorithm" and "Consumer rebalancing algorithm":

- registration: the ephemeral ``/consumers/<group>/ids/<consumer_id>``
  holds ``{"version":1,"subscription":{topic: streams},"pattern":"static",
  "timestamp":"<ms>"}`` (``white_list`` / ``black_list`` and ``{regex:
  streams}`` for a topic filter);
- assignment: for each subscribed topic, the sorted partitions of
  ``/brokers/topics/<topic>`` are split over the group's sorted consumer
  threads ``<consumer_id>-<n>`` by range, the first ``partitions % threads``
  threads taking one extra partition
  (`kclient.zk.paths.range_assignment`);
- ownership: each partition is claimed with an ephemeral
  ``/consumers/<group>/owners/<topic>/<p>`` node holding the thread id; a
  claim that meets another consumer's node fails (and is undone).
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Mapping

from kclient.client.consumer.group.assignors import require_eager, zk_roundrobin_assignment
from kclient.client.consumer.group.streams import TopicFilter, topic_filter_for
from kclient.client.consumer.partition_topic_info import Leader, TopicPartition
from kclient.clock import now_ms
from kclient.config import ConsumerConfig
from kclient.errors import ConsumerRebalanceFailedError, ZooKeeperError
from kclient.zk.client import ZkClient
from kclient.zk.paths import (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    STATIC_PATTERN,
    BrokerRegistration,
    ConsumerRegistration,
    PartitionState,
    TopicAssignment,
    broker_path,
    consumer_id_path,
    consumer_ids_path,
    consumer_thread_id,
    owner_path,
    partition_state_path,
    range_assignment,
    thread_sort_key,
    topic_path,
)

log = logging.getLogger("kclient.consumer")



def default_consumer_id(group_id: str) -> str:
    """A consumer id of Kafka 0.8's shape, with a random suffix.

    Args:
        group_id: The ``group.id``.

    Returns:
        ``<group>_<host>-<ms since the epoch>-<8 hex>``.
    """
    return f"{group_id}_{socket.gethostname()}-{now_ms()}-{uuid.uuid4().hex[:8]}"


class GroupRegistry:
    """One consumer's view of its group in ZooKeeper: its registration, the
    group's members and subscriptions, partition ownership and leaders.

    Args:
        zk: the connector's ZooKeeper client.
        config: the connector's config (``group.id``,
            ``zookeeper.session.timeout.ms``, ``exclude.internal.topics``).
        consumer_id: this consumer's id.

    ``subscription`` (static: ``{topic: streams}``; wildcard: ``{regex:
    streams}``) and ``topic_filter`` are set once by
    `kclient.client.consumer.group.core.ConnectorCore.subscribe`.
    """

    def __init__(self, zk: ZkClient, config: ConsumerConfig, consumer_id: str) -> None:
        require_eager(config.partition_assignment_strategy, "zookeeper")
        self.zk = zk
        self.config = config
        #: (broker id, protocol) pairs already warned about a missing endpoint.
        self._warned_endpoints: set[tuple[int, str]] = set()
        self.group = config.group_id
        self.consumer_id = consumer_id
        self.subscription: dict[str, int] = {}
        self.topic_filter: TopicFilter | None = None
        #: The subscribed topics the last `read_group` saw.
        self.relevant_topics: frozenset[str] | None = None

    # ------------------------------------------------------------ registration

    def registration(self) -> ConsumerRegistration:
        pattern = self.topic_filter.pattern if self.topic_filter is not None else STATIC_PATTERN
        return ConsumerRegistration(dict(self.subscription), pattern, now_ms())

    def register(self) -> None:
        """Blocking: create (or re-create after a session loss) this
        consumer's ids node.

        Raises:
            ZooKeeperError: another live session holds this consumer.id past
                the session timeout.
        """
        zk = self.zk
        path = consumer_id_path(self.group, self.consumer_id)
        data = self.registration().to_json()
        deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000.0 + 1.0
        while not zk.create_ephemeral_many([(path, data)], parents=True)[0]:
            if zk.owner_session(path) == zk.session_id:
                return
            if time.monotonic() > deadline:
                raise ZooKeeperError(f"consumer.id {self.consumer_id!r} is already registered at {path} by another live consumer")
            time.sleep(0.2)
        log.info("registered consumer %s at %s: %s", self.consumer_id, path, data.decode())

    def relevant(self, topics: list[str]) -> list[str]:
        """Filter topics by this consumer's subscription.

        Args:
            topics: Topic names (e.g. the children of ``/brokers/topics``).

        Returns:
            Those this consumer subscribes to (statically or by filter).
        """
        if self.topic_filter is not None:
            excl = self.config.exclude_internal_topics
            return [t for t in topics if self.topic_filter.is_topic_allowed(t, excl)]
        return [t for t in topics if t in self.subscription]

    def topics_changed(self, topics: list[str]) -> bool:
        """Whether a topic list changes the subscribed topics.

        Args:
            topics: The children of ``/brokers/topics``.

        Returns:
            True when the subscribed ones differ from those of the last
            `read_group`.
        """
        return frozenset(self.relevant(topics)) != self.relevant_topics

    # ------------------------------------------------------------ rebalance

    def read_group(self) -> tuple[dict[str, list[int]], dict[str, list[str]], list[int]]:
        """Blocking: ``({topic: sorted partitions}, {topic: thread ids of the
        whole group}, broker ids)`` for the topics this consumer subscribes
        (re-registering first: after a lost session the node is gone)."""
        zk = self.zk
        # Two round trips: this consumer's node and the three lists, then
        # the topics' and the consumers' nodes (requests sent together).
        (mine_node,) = zk.owners_and_data([consumer_id_path(self.group, self.consumer_id)])
        broker_ids, all_topics, consumers = zk.get_children_many([BROKER_IDS_PATH, BROKER_TOPICS_PATH, consumer_ids_path(self.group)])
        if mine_node is None or mine_node[1] != zk.session_id:
            self.register()
            consumers = zk.get_children(consumer_ids_path(self.group))
        brokers = sorted(int(b) for b in broker_ids if b.isdigit())
        mine = self.relevant(all_topics)
        self.relevant_topics = frozenset(mine)
        consumers = sorted(consumers)
        datas = zk.get_many([topic_path(topic) for topic in mine] + [consumer_id_path(self.group, c) for c in consumers])
        topic_datas, consumer_datas = datas[: len(mine)], datas[len(mine) :]
        partitions: dict[str, list[int]] = {}
        for topic, data in zip(mine, topic_datas):
            if not data:
                continue
            try:
                partitions[topic] = TopicAssignment.from_json(data).partition_ids
            except ValueError as exc:
                log.warning("ignoring topic %s: %s", topic, exc)
        threads: dict[str, list[str]] = {t: [] for t in partitions}
        for consumer, data in zip(consumers, consumer_datas):
            if not data:
                continue
            try:
                reg = ConsumerRegistration.from_json(data)
            except ValueError as exc:
                log.warning("ignoring consumer %s of group %s: %s", consumer, self.group, exc)
                continue
            if reg.pattern == STATIC_PATTERN:
                topic_counts = reg.subscription
            else:
                ((regex, n),) = reg.subscription.items() if len(reg.subscription) == 1 else ((None, 0),)
                if regex is None:
                    continue
                flt = topic_filter_for(reg.pattern, regex)
                excl = self.config.exclude_internal_topics
                topic_counts = {t: n for t in all_topics if flt.is_topic_allowed(t, excl)}
            for topic, n in topic_counts.items():
                if topic in threads:
                    threads[topic].extend(consumer_thread_id(consumer, i) for i in range(n))
        return partitions, threads, brokers

    def assign(self, partitions: Mapping[str, list[int]], threads: Mapping[str, list[str]]) -> dict[TopicPartition, str]:
        """This consumer's share of the assignment: by range per topic, or
        with ``partition.assignment.strategy=roundrobin`` Kafka 0.8.2's
        round-robin over all subscribed partitions
        (`kclient.client.consumer.group.assignors.zk_roundrobin_assignment`).

        Args:
            partitions: ``{topic: sorted partition ids}``.
            threads: ``{topic: consumer thread ids of the whole group}``.

        Returns:
            ``{(topic, partition): thread id}`` for this consumer's threads.

        Raises:
            ConsumerRebalanceFailedError: roundrobin, and the group's
                consumers do not all subscribe the same topics with the
                same number of streams.
        """
        wanted: dict[TopicPartition, str] = {}
        if self.config.partition_assignment_strategy[0] == "roundrobin":
            try:
                plan = zk_roundrobin_assignment(partitions, threads, thread_sort_key)
            except ValueError as exc:
                raise ConsumerRebalanceFailedError(f"group {self.group}: {exc}") from None
            return {key: thread for key, thread in plan.items() if thread.rsplit("-", 1)[0] == self.consumer_id}
        for topic, parts in partitions.items():
            for thread, assigned in range_assignment(parts, threads[topic]).items():
                if thread.rsplit("-", 1)[0] == self.consumer_id:
                    for p in assigned:
                        wanted[(topic, p)] = thread
        return wanted

    def stream_of(self, topic: str, thread_index: int) -> int:
        """The stream a consumer thread feeds (streams are numbered over the
        subscription).

        Args:
            topic: The topic.
            thread_index: The consumer thread's index within the topic.

        Returns:
            The stream index.

        Raises:
            KeyError: ``topic`` is not in a static subscription.
        """
        if self.topic_filter is not None:
            return thread_index
        base = 0
        for t, n in self.subscription.items():
            if t == topic:
                return base + thread_index
            base += n
        raise KeyError(topic)

    # ------------------------------------------------------------ ownership

    def still_own(self, wanted: Mapping[TopicPartition, str]) -> bool:
        """Blocking: whether this session holds every owner node.

        Args:
            wanted: ``{(topic, partition): thread id}``.

        Returns:
            True when each owner node names the thread and belongs to this
            ZooKeeper session.
        """
        zk = self.zk
        items = list(wanted.items())
        nodes = zk.owners_and_data([owner_path(self.group, t, p) for (t, p), _ in items])
        session = zk.session_id
        return all(node is not None and node[0] == thread.encode() and node[1] == session for (_, thread), node in zip(items, nodes))

    def release(self, owned: Mapping[TopicPartition, str]) -> None:
        """Blocking: delete the owner nodes this session holds.

        Args:
            owned: ``{(topic, partition): thread id}``.
        """
        zk = self.zk
        items = list(owned.items())
        paths = [owner_path(self.group, t, p) for (t, p), _ in items]
        session = zk.session_id
        for path, (_, thread), node in zip(paths, items, zk.owners_and_data(paths)):
            if node is not None and node[0] == thread.encode() and node[1] == session:
                zk.delete(path)

    def claim(self, wanted: Mapping[TopicPartition, str]) -> bool:
        """Blocking: claim partitions by creating their owner nodes (the
        creates sent together: one round trip).

        Args:
            wanted: ``{(topic, partition): thread id}``.

        Returns:
            True when every partition is claimed; False on meeting another
            consumer's node (the claims made are undone).
        """
        zk = self.zk
        items = sorted(wanted.items())
        paths = [owner_path(self.group, t, p) for (t, p), _ in items]
        created = zk.create_ephemeral_many([(path, thread.encode()) for path, (_, thread) in zip(paths, items)], parents=True)
        existing = [i for i, made in enumerate(created) if not made]
        if not existing:
            return True
        session = zk.session_id
        ours = list(created)
        conflict = None
        for i, node in zip(existing, zk.owners_and_data([paths[i] for i in existing])):
            if node is not None and node[0] == items[i][1].encode() and node[1] == session:
                ours[i] = True  # ours already
            elif conflict is None:
                conflict = (i, node[0] if node is not None else None)
        if conflict is None:
            return True
        i, holder = conflict
        (topic, partition), _ = items[i]
        log.info("%s-%d is still owned by %s; waiting for it to be released", topic, partition, holder.decode() if holder else "?")
        for path, mine in zip(paths, ours):
            if mine:
                zk.delete(path)
        return False

    def broker_addresses(self) -> list[tuple[str, int]]:
        """Blocking: the address of every broker registered in
        ``/brokers/ids`` for the consumer's ``security.protocol`` (KIP-103),
        to bootstrap a connection to the group coordinator from.

        Returns:
            ``[(host, port), ...]`` in broker id order.
        """
        protocol = self.config.security.security_protocol.value
        addresses = []
        for child in sorted(self.zk.get_children(BROKER_IDS_PATH), key=lambda c: (len(c), c)):
            if not child.isdigit():
                continue
            raw = self.zk.get(broker_path(int(child)))
            try:
                reg = BrokerRegistration.from_json(int(child), raw) if raw else None
            except ValueError:
                reg = None
            endpoint = reg.endpoint_for(protocol) if reg is not None else None
            if endpoint is not None:
                addresses.append(endpoint)
        return addresses

    def leaders(self, keys: list[TopicPartition]) -> dict[TopicPartition, Leader]:
        """Blocking: the partition leaders from the partition state and
        broker nodes. Each leader's address is its endpoint for the
        consumer's ``security.protocol`` (KIP-103 listeners).

        Args:
            keys: ``(topic, partition)`` pairs.

        Returns:
            ``{key: (broker id, host, port)}``; partitions without a live
            leader are left out.
        """
        zk = self.zk
        keys = list(keys)
        protocol = self.config.security.security_protocol.value
        brokers: dict[int, BrokerRegistration | None] = {}
        leaders = {}
        # The partitions' states, then their leaders' registrations: each
        # set read in one round trip.
        states: list[tuple[TopicPartition, int]] = []
        for key, data in zip(keys, zk.get_many([partition_state_path(t, p) for t, p in keys])):
            if not data:
                continue
            try:
                leader = PartitionState.from_json(data).leader
            except (ValueError, KeyError):
                continue
            if leader >= 0:
                states.append((key, leader))
        ids = list(dict.fromkeys(leader for _, leader in states))
        for leader, raw in zip(ids, zk.get_many([broker_path(b) for b in ids])):
            try:
                brokers[leader] = BrokerRegistration.from_json(leader, raw) if raw else None
            except ValueError:
                brokers[leader] = None
        for (topic, partition), leader in states:
            reg = brokers[leader]
            if reg is not None:
                endpoint = reg.endpoint_for(protocol)
                if endpoint is None:
                    level = logging.DEBUG if (leader, protocol) in self._warned_endpoints else logging.WARNING
                    self._warned_endpoints.add((leader, protocol))
                    log.log(level, "broker %d registers no %s endpoint (it has %s); %s-%d waits", leader, protocol, ", ".join(reg.endpoints) or "none", topic, partition)
                    continue
                leaders[(topic, partition)] = (leader, *endpoint)
        return leaders


__all__ = ["GroupRegistry", "default_consumer_id"]
