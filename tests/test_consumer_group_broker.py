"""Broker-coordinated consumer groups (issue 12): the range and roundrobin
assignors (pure, checked against the assignments Kafka's RangeAssignor and
RoundRobinAssignor produce in their own unit tests), and the
ConsumerConnector with ``group.coordination=broker`` against real broker
processes, alone and sharing a group with a confluent-kafka consumer."""

from __future__ import annotations

import functools
import threading
import uuid

import pytest
from helpers.groups import group_broker_properties
from helpers.records import numbered, produce, produce_sentinels, without_sentinels
from helpers.wait import wait_for

from kclient import Consumer
from kclient.client.consumer.group.assignors import (
    ASSIGNORS,
    java_string_hash,
    range_assign,
    roundrobin_assign,
    spread_over_streams,
    zk_roundrobin_assignment,
)
from kclient.client.consumer.group.streams import MessageAndMetadata, Whitelist
from kclient.errors import ConsumerTimeoutError
from kclient.testing import BrokerProcess

# -- assignors -----------------------------------------------------------------------------


@pytest.mark.unit
def test_range_assignor_matches_kafka_range_assignor() -> None:
    # RangeAssignorTest.testOneConsumerMultipleTopics / testTwoConsumersOneTopicThreePartitions
    # / testMultipleConsumersMixedTopics (Kafka's clients tests).
    assert range_assign({"t1": 1, "t2": 2}, {"c": ["t1", "t2"]}) == {"c": [("t1", 0), ("t2", 0), ("t2", 1)]}
    assert range_assign({"t": 3}, {"c1": ["t"], "c2": ["t"]}) == {"c1": [("t", 0), ("t", 1)], "c2": [("t", 2)]}
    got = range_assign({"t1": 3, "t2": 2}, {"c1": ["t1"], "c2": ["t1", "t2"], "c3": ["t1"]})
    assert got == {"c1": [("t1", 0)], "c2": [("t1", 1), ("t2", 0), ("t2", 1)], "c3": [("t1", 2)]}
    # testTwoConsumersTwoTopicsSixPartitions: each topic split on its own.
    got = range_assign({"t1": 3, "t2": 3}, {"c1": ["t1", "t2"], "c2": ["t1", "t2"]})
    assert got == {"c1": [("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)], "c2": [("t1", 2), ("t2", 2)]}
    # More members than partitions; unknown topics are skipped.
    assert range_assign({"t": 1}, {"b": ["t"], "a": ["t", "missing"]}) == {"a": [("t", 0)], "b": []}


@pytest.mark.unit
def test_roundrobin_assignor_matches_kafka_roundrobin_assignor() -> None:
    # RoundRobinAssignorTest.testTwoConsumersTwoTopicsSixPartitions / testMultipleConsumersMixedTopics.
    got = roundrobin_assign({"t1": 3, "t2": 3}, {"c1": ["t1", "t2"], "c2": ["t1", "t2"]})
    assert got == {"c1": [("t1", 0), ("t1", 2), ("t2", 1)], "c2": [("t1", 1), ("t2", 0), ("t2", 2)]}
    got = roundrobin_assign({"t1": 3, "t2": 2}, {"c1": ["t1"], "c2": ["t1", "t2"], "c3": ["t1"]})
    assert got == {"c1": [("t1", 0)], "c2": [("t1", 1), ("t2", 0), ("t2", 1)], "c3": [("t1", 2)]}
    assert roundrobin_assign({"t": 2}, {}) == {}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_every_partition_has_exactly_one_owner(name: str) -> None:
    assign = ASSIGNORS[name]
    counts = {"a": 7, "b": 3, "c": 1}
    subs = {f"m{i}": ["a", "b", "c"] if i % 2 else ["a"] for i in range(5)}
    plan = assign(counts, subs)
    owned = [tp for tps in plan.values() for tp in tps]
    assert sorted(owned) == sorted((t, p) for t, n in counts.items() for p in range(n))
    for member, tps in plan.items():
        assert all(t in subs[member] for t, _ in tps)


@pytest.mark.unit
def test_java_string_hash_is_javas() -> None:
    # Values of java.lang.String.hashCode (overflowing int arithmetic, UTF-16 units).
    assert java_string_hash("") == 0 and java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("\U0001f600") == 1772899  # a surrogate pair: two UTF-16 units


@pytest.mark.unit
def test_zookeeper_roundrobin_deals_in_hash_order_and_needs_identical_subscriptions() -> None:
    partitions = {"t": [0, 1, 2], "u": [0, 1]}
    threads = {"t": ["c1-0", "c2-0"], "u": ["c2-0", "c1-0"]}
    plan = zk_roundrobin_assignment(partitions, threads)
    order = sorted([("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1)], key=lambda tp: (java_string_hash(f"[{tp[0]},{tp[1]}]"), tp))
    assert plan == {tp: ("c1-0", "c2-0")[i % 2] for i, tp in enumerate(order)}
    with pytest.raises(ValueError, match="same topics"):
        zk_roundrobin_assignment(partitions, {"t": ["c1-0", "c2-0"], "u": ["c1-0"]})
    assert zk_roundrobin_assignment(partitions, {}) == {}


@pytest.mark.unit
def test_partitions_spread_over_local_streams_by_range() -> None:
    got = spread_over_streams([("a", 0), ("a", 1), ("a", 2), ("b", 4)], {"a": (0, 2), "b": (2, 1)})
    assert got == {("a", 0): 0, ("a", 1): 0, ("a", 2): 1, ("b", 4): 2}
    assert spread_over_streams([("x", 0)], {"a": (0, 1)}) == {}


# -- against real brokers ------------------------------------------------------------------

PARTITIONS = 4
DEADLINE = 90.0
#: Producer retries for a cluster whose coordinator stops (acks=-1).
RETRIES = {"message.send.max.retries": 10, "retry.backoff.ms": 300}


@pytest.fixture(scope="module")
def group_broker():
    """A broker without ZooKeeper: the group is coordinated by the broker."""
    with BrokerProcess(properties=group_broker_properties(PARTITIONS), keep_port=True) as proc:
        yield proc


@pytest.fixture
def group() -> str:
    return f"bg-{uuid.uuid4().hex[:10]}"


def member_settings(bootstrap: str, group, **extra) -> dict:
    base = {
        "group.id": group,
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "smallest",
        "consumer.timeout.ms": 500,
        "auto.commit.enable": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "rebalance.timeout.ms": 10000,
        "rebalance.backoff.ms": 200,
        "offsets.channel.backoff.ms": 100,
    }
    base.update(extra)
    return base


class Reader:
    """Iterates a stream on a thread of its own, collecting every message."""

    def __init__(self, stream) -> None:
        self.messages: list[MessageAndMetadata] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.messages.append(next(stream))
                except ConsumerTimeoutError:
                    continue
                except StopIteration:
                    return
        except BaseException as exc:
            self.errors.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE)
        assert not self.errors, self.errors


wait_until = functools.partial(wait_for, timeout=DEADLINE)


def group_members(broker, group) -> set[str]:
    """The group's member ids, as kafka-python's admin client describes them (DescribeGroups)."""
    kafka_admin = pytest.importorskip("kafka.admin")
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        description = admin.describe_groups([group])[group]
        return {m["member_id"] for m in description["members"]}
    finally:
        admin.close()


def values_of(messages) -> list[str]:
    """The values read, sorted, without the sentinels."""
    return sorted(without_sentinels(m.message for m in messages))


def read_up_to(readers, sentinels: set[str], what: str) -> None:
    """Wait until ``readers`` have read every one of ``sentinels``, so
    everything produced before them (see helpers.records)."""
    wait_until(lambda: sentinels <= {m.message for r in readers for m in r.messages}, what)


def test_broker_coordinated_connector_reads_commits_and_resumes(group_broker, group, topic):
    values = [f"v{i}" for i in range(100)]
    produce(group_broker, topic, numbered(values))
    with Consumer.create(member_settings(group_broker.bootstrap, group)) as connector:
        assert connector.config.group_coordination == "broker"
        streams = connector.create_message_streams({topic: 2}, value_decoder=bytes.decode)[topic]
        assert sorted(connector.owned_partitions()) == [(topic, p) for p in range(PARTITIONS)]
        assert sorted(set(connector.owned_partitions().values())) == [0, 1]  # spread over both streams
        readers = [Reader(s) for s in streams]
        read_up_to(readers, produce_sentinels(group_broker, topic, range(PARTITIONS)), "every message")
        for r in readers:
            r.stop()
        connector.commit_offsets()
    got = [m for r in readers for m in r.messages]
    assert values_of(got) == sorted(values)
    more = [f"w{i}" for i in range(30)]
    produce(group_broker, topic, numbered(more))
    with Consumer.create(member_settings(group_broker.bootstrap, group)) as connector:
        (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
        reader = Reader(stream)
        read_up_to([reader], produce_sentinels(group_broker, topic, range(PARTITIONS)), "the new messages")
        reader.stop()
    assert values_of(reader.messages) == sorted(more)  # resumed at the committed offsets


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_two_kclient_members_split_the_partitions_and_rebalance_when_one_leaves(group_broker, group, topic, strategy):
    values = [f"v{i}" for i in range(120)]
    produce(group_broker, topic, numbered(values))
    settings = member_settings(group_broker.bootstrap, group, **{"partition.assignment.strategy": strategy, "auto.commit.enable": True, "auto.commit.interval.ms": 200, "session.timeout.ms": 30000})
    first = Consumer.create(settings)
    second = None
    try:
        (s1,) = first.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
        r1 = Reader(s1)
        second = Consumer.create(settings)
        (s2,) = second.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
        r2 = Reader(s2)

        def split() -> bool:
            a, b = set(first.owned_partitions()), set(second.owned_partitions())
            return len(a) == len(b) == PARTITIONS // 2 and not a & b

        wait_until(split, "the partitions to be split between the two members")
        wait_until(lambda: len({m.message for m in r1.messages + r2.messages}) >= len(values), "every message")
        leaving = second._core.member.member_id
        assert leaving in group_members(group_broker, group)
        second.shutdown()  # LeaveGroup: gone at once, not after session.timeout.ms (30 s here)
        assert leaving not in group_members(group_broker, group)
        r2.stop()
        wait_until(lambda: len(first.owned_partitions()) == PARTITIONS, "the first member to own every partition")
        more = [f"w{i}" for i in range(40)]
        produce(group_broker, topic, numbered(more))
        wait_until(lambda: {m.message for m in r1.messages} >= set(more), "the new messages on the remaining member")
        r1.stop()
    finally:
        first.shutdown()
        if second is not None:
            second.shutdown()
    seen = {m.message for m in r1.messages + r2.messages}
    assert seen == set(values) | set(more)  # nothing lost (at least once across the rebalance)


def test_topic_filter_subscribes_matching_topics_and_new_ones(group_broker, group):
    prefix = f"flt-{uuid.uuid4().hex[:6]}"
    produce(group_broker, f"{prefix}-a", numbered(["a1", "a2"]))
    produce(group_broker, f"{prefix}-b", numbered(["b1"]))
    produce(group_broker, f"other-{prefix}", numbered(["x"]))
    with Consumer.create(member_settings(group_broker.bootstrap, group, **{"metadata.max.age.ms": 300})) as connector:
        (stream,) = connector.create_message_streams_by_filter(Whitelist(f"{prefix}-.*"), 1, value_decoder=bytes.decode)
        reader = Reader(stream)
        wait_until(lambda: len(reader.messages) >= 3, "the matching topics' messages")
        produce(group_broker, f"{prefix}-c", numbered(["c1"]))  # appears after the join
        wait_until(lambda: len(reader.messages) >= 4, "the new topic's message")
        sentinels = set().union(*(produce_sentinels(group_broker, f"{prefix}-{t}", range(PARTITIONS)) for t in "abc"))
        read_up_to([reader], sentinels, "everything of the matching topics")
        reader.stop()
    assert values_of(reader.messages) == ["a1", "a2", "b1", "c1"]


def test_kclient_and_confluent_kafka_members_share_one_group(group_broker, group, topic):
    """A confluent-kafka member alone, a kclient member joins (the group
    splits the partitions, each member reads only its own), the kclient
    member leaves (confluent-kafka takes everything back); every record
    is read."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    batches = [[f"b{b}-{i}" for i in range(120)] for b in range(3)]
    peer = confluent_kafka.Consumer({
        "bootstrap.servers": group_broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "partition.assignment.strategy": "range",
    })
    peer_messages: list[tuple[int, str]] = []
    peer_assigned: set[int] = set()
    stop = threading.Event()

    def on_assign(consumer, partitions):
        peer_assigned.clear()
        peer_assigned.update(p.partition for p in partitions)

    def on_revoke(consumer, partitions):
        peer_assigned.clear()

    def poll() -> None:
        while not stop.is_set():
            msg = peer.poll(0.2)
            if msg is not None and msg.error() is None:
                peer_messages.append((msg.partition(), msg.value().decode()))
                peer.commit(message=msg, asynchronous=False)

    def all_read(batch, *readers) -> bool:
        seen = {v for _, v in peer_messages} | {m.message for r in readers for m in r.messages}
        return seen >= set(batch)

    peer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        produce(group_broker, topic, numbered(batches[0]))
        wait_until(lambda: len(peer_assigned) == PARTITIONS, "confluent-kafka to own every partition alone")
        wait_until(lambda: all_read(batches[0]), "confluent-kafka to read the first batch")
        with Consumer.create(member_settings(group_broker.bootstrap, group, **{"auto.commit.enable": True, "auto.commit.interval.ms": 200})) as connector:
            (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
            reader = Reader(stream)

            def split() -> bool:
                mine = {p for _, p in connector.owned_partitions()}
                return len(mine) == PARTITIONS // 2 and len(peer_assigned) == PARTITIONS // 2 and not mine & peer_assigned

            wait_until(split, "kclient and confluent-kafka to split the partitions")
            mine = {p for _, p in connector.owned_partitions()}
            theirs = set(peer_assigned)
            peer_before = len(peer_messages)
            produce(group_broker, topic, numbered(batches[1]))
            wait_until(lambda: all_read(batches[1], reader), "the second batch")
            reader.stop()
            assert reader.messages and {m.partition for m in reader.messages} <= mine
            assert {p for p, _ in peer_messages[peer_before:]} <= theirs
        # The kclient member left: confluent-kafka takes every partition again.
        wait_until(lambda: len(peer_assigned) == PARTITIONS, "confluent-kafka to take the partitions back")
        produce(group_broker, topic, numbered(batches[2]))
        wait_until(lambda: all_read(batches[2]), "confluent-kafka to read the third batch")
    finally:
        stop.set()
        poller.join(DEADLINE)
        peer.close()
    seen = {v for _, v in peer_messages} | {m.message for m in reader.messages}
    assert seen == {v for batch in batches for v in batch}


def test_broker_restart_member_rejoins_and_resumes_from_committed_offsets(group_broker, group, topic):
    """The only broker restarts under a live member: its heartbeats and
    fetches fail, it finds the coordinator again (which reloads
    ``__consumer_offsets``) and reads on, committing; a new member then
    resumes from those commits. Nothing is read twice, nothing is lost."""
    first = [f"a{i}" for i in range(60)]
    produce(group_broker, topic, numbered(first))
    settings = member_settings(group_broker.bootstrap, group)
    with Consumer.create(settings) as connector:
        (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
        reader = Reader(stream)
        read_up_to([reader], produce_sentinels(group_broker, topic, range(PARTITIONS)), "the first batch")
        connector.commit_offsets()
        group_broker.stop()
        group_broker.start()
        second = [f"b{i}" for i in range(40)]
        produce(group_broker, topic, numbered(second))
        wait_until(lambda: {m.message for m in reader.messages} >= set(second), "the second batch after the restart")
        read_up_to([reader], produce_sentinels(group_broker, topic, range(PARTITIONS)), "everything after the restart")
        reader.stop()
        connector.commit_offsets()  # to the reloaded coordinator
    assert values_of(reader.messages) == sorted(first + second)
    third = [f"c{i}" for i in range(20)]
    produce(group_broker, topic, numbered(third))
    with Consumer.create(settings) as connector:
        (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
        reader = Reader(stream)
        read_up_to([reader], produce_sentinels(group_broker, topic, range(PARTITIONS)), "the third batch")
        reader.stop()
    assert values_of(reader.messages) == sorted(third)  # resumed at the commits made after the restart


def test_kclient_and_kafka_python_members_share_a_roundrobin_group(group_broker, group, topic):
    """kafka-python offers only roundrobin; kclient prefers range but offers
    roundrobin too, so the coordinator picks roundrobin and the two members
    split the partitions by it."""
    kafka = pytest.importorskip("kafka")
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    batches = [[f"b{b}-{i}" for i in range(80)] for b in range(2)]
    produce(group_broker, topic, numbered(batches[0]))
    with Consumer.create(member_settings(group_broker.bootstrap, group, **{"auto.commit.enable": True, "auto.commit.interval.ms": 200})) as connector:
        (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
        reader = Reader(stream)
        wait_until(lambda: len(reader.messages) >= len(batches[0]), "kclient alone to read the first batch")
        peer = kafka.KafkaConsumer(
            topic,
            bootstrap_servers=group_broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=200,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            partition_assignment_strategy=[RoundRobinPartitionAssignor],
        )
        peer_messages: list[tuple[int, str]] = []
        try:
            def split() -> bool:
                for records in peer.poll(timeout_ms=200).values():
                    peer_messages.extend((r.partition, r.value.decode()) for r in records)
                mine = {p for _, p in connector.owned_partitions()}
                theirs = {tp.partition for tp in peer.assignment()}
                return len(mine) == len(theirs) == PARTITIONS // 2 and not mine & theirs

            wait_until(split, "kclient and kafka-python to split the partitions")
            mine = {p for _, p in connector.owned_partitions()}
            assert mine in ({0, 2}, {1, 3})  # roundrobin over two members, not range's {0, 1} / {2, 3}
            before = len(reader.messages)
            produce(group_broker, topic, numbered(batches[1]))

            def second_read() -> bool:
                for records in peer.poll(timeout_ms=200).values():
                    peer_messages.extend((r.partition, r.value.decode()) for r in records)
                seen = {v for _, v in peer_messages} | {m.message for m in reader.messages}
                return seen >= set(batches[1])

            wait_until(second_read, "the second batch")
            reader.stop()
            assert {m.partition for m in reader.messages[before:]} <= mine
        finally:
            peer.close()
    assert {v for _, v in peer_messages} | {m.message for m in reader.messages} == set(batches[0]) | set(batches[1])


def test_member_follows_its_coordinator_to_another_broker(zookeeper):
    """Two brokers, ``__consumer_offsets`` and the topic replicated on both:
    the group's coordinator stops; the member finds the new one (the group
    and its offsets were replicated with ``__consumer_offsets``), commits
    there and reads on; a new member resumes from those commits."""
    from kclient.testing import Cluster

    props = {"num.partitions": 2, "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 2, "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
    group = f"bg-{uuid.uuid4().hex[:10]}"
    topic = f"moves-{uuid.uuid4().hex[:8]}"
    with Cluster(brokers=2, properties=props, zookeeper=zookeeper) as cluster:
        first = [f"a{i}" for i in range(40)]
        produce(cluster, topic, numbered(first), acks=-1, config=RETRIES)
        settings = member_settings(cluster.bootstrap, group)
        with Consumer.create(settings) as connector:
            (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
            reader = Reader(stream)
            wait_until(lambda: len(reader.messages) >= len(first), "the first batch")
            connector.commit_offsets()
            coordinator = connector._core.coordinator.coordinator_node[0]
            cluster.broker(coordinator).stop()
            second = [f"b{i}" for i in range(30)]
            produce(cluster, topic, numbered(second), acks=-1, config=RETRIES)
            wait_until(lambda: {m.message for m in reader.messages} >= set(second), "the second batch after the coordinator stopped")
            read_up_to([reader], produce_sentinels(cluster, topic, range(2), acks=-1, config=RETRIES), "everything after the coordinator stopped")
            reader.stop()
            connector.commit_offsets()  # through the new coordinator
            assert connector._core.coordinator.coordinator_node[0] != coordinator
        assert values_of(reader.messages) == sorted(first + second)
        third = [f"c{i}" for i in range(20)]
        produce(cluster, topic, numbered(third), acks=-1, config=RETRIES)
        with Consumer.create(settings) as connector:
            (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
            reader = Reader(stream)
            read_up_to([reader], produce_sentinels(cluster, topic, range(2), acks=-1, config=RETRIES), "the third batch")
            reader.stop()
        assert values_of(reader.messages) == sorted(third)


def test_kclient_and_aiokafka_members_share_one_group(group_broker, group, topic):
    """An aiokafka member (roundrobin, its default assignor) and a kclient
    member split the partitions; every record is read."""
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    batches = [[f"b{b}-{i}" for i in range(80)] for b in range(2)]
    peer_messages: list[tuple[int, str]] = []
    peer_assigned: set[int] = set()
    stop = threading.Event()
    failures: list[BaseException] = []

    async def peer_main() -> None:
        consumer = aiokafka.AIOKafkaConsumer(
            topic,
            bootstrap_servers=group_broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=200,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        await consumer.start()
        try:
            while not stop.is_set():
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    peer_messages.extend((r.partition, r.value.decode()) for r in records)
                peer_assigned.clear()
                peer_assigned.update(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()

    def run_peer() -> None:
        try:
            asyncio.run(peer_main())
        except BaseException as exc:
            failures.append(exc)

    produce(group_broker, topic, numbered(batches[0]))
    peer = threading.Thread(target=run_peer, daemon=True)
    peer.start()
    try:
        wait_until(lambda: len(peer_assigned) == PARTITIONS and {v for _, v in peer_messages} >= set(batches[0]), "aiokafka alone to read the first batch")
        with Consumer.create(member_settings(group_broker.bootstrap, group, **{"auto.commit.enable": True, "auto.commit.interval.ms": 200})) as connector:
            (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
            reader = Reader(stream)

            def split() -> bool:
                mine = {p for _, p in connector.owned_partitions()}
                return len(mine) == len(peer_assigned) == PARTITIONS // 2 and not mine & peer_assigned

            wait_until(split, "kclient and aiokafka to split the partitions")
            mine = {p for _, p in connector.owned_partitions()}
            produce(group_broker, topic, numbered(batches[1]))
            wait_until(lambda: {v for _, v in peer_messages} | {m.message for m in reader.messages} >= set(batches[1]), "the second batch")
            reader.stop()
            assert reader.messages and {m.partition for m in reader.messages} <= mine
    finally:
        stop.set()
        peer.join(DEADLINE)
    assert not failures, failures
    assert {v for _, v in peer_messages} | {m.message for m in reader.messages} == set(batches[0]) | set(batches[1])
