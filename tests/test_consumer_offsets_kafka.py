"""ConsumerConnector offsets in Kafka (issue 12): ``offsets.storage=kafka``,
``dual.commit.enabled`` and the migration from ZooKeeper offsets of the
Kafka 0.8.2 documentation ("Migrating offsets from ZooKeeper to Kafka"),
against a real broker process and a real ZooKeeper. Every record is
counted: none may be read twice or skipped. The offsets in
``__consumer_offsets`` are checked independently with confluent-kafka's
``Consumer.committed``."""

from __future__ import annotations

import time
import uuid

import pytest
from helpers.records import numbered, produce
from helpers.wait import wait_for

from kclient import Consumer, ConsumerConnector
from kclient.client.consumer.group.streams import KafkaStream, MessageAndMetadata
from kclient.errors import ConsumerTimeoutError
from kclient.testing import BrokerProcess
from kclient.zk import paths
from kclient.zk.client import ZkClient

PARTITIONS = 3
DEADLINE = 60.0
#: Producer retries for a cluster whose coordinator stops (acks=-1).
RETRIES = {"message.send.max.retries": 10, "retry.backoff.ms": 300}


@pytest.fixture(scope="module")
def chroot(zookeeper) -> str:
    """A ZooKeeper chroot of this module's own: its broker is alone there."""
    return f"{zookeeper.connect}/offsets-kafka-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def offsets_broker(chroot):
    props = {
        "zookeeper.connect": chroot,
        "num.partitions": PARTITIONS,
        "offsets.topic.num.partitions": 3,
        "offsets.topic.replication.factor": 1,
    }
    with BrokerProcess(properties=props, keep_port=True) as proc:
        yield proc


@pytest.fixture
def zk(chroot):
    client = ZkClient(chroot)
    client.start()
    yield client
    client.close()


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def settings(chroot, group, **extra) -> dict:
    base = {
        "group.id": group,
        "zookeeper.connect": chroot,
        "auto.offset.reset": "smallest",
        "consumer.timeout.ms": 2000,
        "auto.commit.enable": False,
        "rebalance.backoff.ms": 200,
        "rebalance.max.retries": 50,
        "zookeeper.session.timeout.ms": 4000,
        "offsets.channel.backoff.ms": 200,
        "offsets.channel.socket.timeout.ms": 30000,
    }
    base.update(extra)
    return base


def wait_for_topic(zk, topic) -> None:
    wait_for(lambda: zk.get(paths.partition_state_path(topic, PARTITIONS - 1)) is not None, f"{topic} in ZooKeeper", timeout=DEADLINE)


def read_available(stream: KafkaStream, expected: int) -> list[MessageAndMetadata]:
    """Read until ``expected`` messages arrived, then on until the stream
    stays quiet for ``consumer.timeout.ms`` (to catch any extra one)."""
    out: list[MessageAndMetadata] = []
    deadline = time.monotonic() + DEADLINE
    while True:
        assert time.monotonic() < deadline, f"only {len(out)} of {expected} messages arrived"
        try:
            out.append(next(stream))
        except ConsumerTimeoutError:
            if len(out) >= expected:
                return out
        except StopIteration:
            return out


def consume_phase(chroot, group, topic, expected, **extra) -> list[MessageAndMetadata]:
    """One run of a group member: read what is there, commit, shut down."""
    with Consumer.create(settings(chroot, group, **extra)) as connector:
        (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
        got = read_available(stream, expected)
        connector.commit_offsets()
    return got


def zk_offsets(zk, group, topic) -> dict[int, int]:
    result = {}
    for p in range(PARTITIONS):
        data = zk.get(paths.offset_path(group, topic, p))
        if data is not None:
            result[p] = paths.decode_offset(data)
    return result


def kafka_offsets(broker, group, topic) -> dict[int, int]:
    """The group's offsets in ``__consumer_offsets``, read by librdkafka."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = consumer.committed([confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in parts if tp.offset >= 0}


def end_offsets(messages) -> dict[int, int]:
    result: dict[int, int] = {}
    for m in messages:
        result[m.partition] = max(result.get(m.partition, 0), m.offset + 1)
    return result


def assert_exactly(messages, values) -> None:
    got = sorted(m.message for m in messages)
    assert got == sorted(values), f"{len(got)} read, {len(values)} expected"
    assert len({(m.partition, m.offset) for m in messages}) == len(messages)


# ---------------------------------------------------------------- offsets.storage=kafka


def test_consumer_create_returns_a_connector(chroot, offsets_broker, group):
    with Consumer.create(settings(chroot, group)) as connector:
        assert isinstance(connector, ConsumerConnector) and connector.group_id == group


def test_kafka_storage_commits_to_the_coordinator_and_resumes(chroot, offsets_broker, zk, group, topic):
    first = [f"a{i}" for i in range(60)]
    produce(offsets_broker, topic, numbered(first))
    wait_for_topic(zk, topic)
    kafka_only = {"offsets.storage": "kafka", "dual.commit.enabled": False}
    got = consume_phase(chroot, group, topic, len(first), **kafka_only)
    assert_exactly(got, first)
    assert kafka_offsets(offsets_broker, group, topic) == end_offsets(got)
    assert zk_offsets(zk, group, topic) == {}  # nothing in ZooKeeper without dual commit
    second = [f"b{i}" for i in range(40)]
    produce(offsets_broker, topic, numbered(second))
    again = consume_phase(chroot, group, topic, len(second), **kafka_only)
    assert_exactly(again, second)


def test_dual_commit_writes_both_stores_and_reads_the_larger_offset(chroot, offsets_broker, zk, group, topic):
    values = [f"v{i}" for i in range(90)]
    produce(offsets_broker, topic, numbered(values))
    wait_for_topic(zk, topic)
    dual = {"offsets.storage": "kafka", "dual.commit.enabled": True}
    got = consume_phase(chroot, group, topic, len(values), **dual)
    assert_exactly(got, values)
    ends = end_offsets(got)
    assert zk_offsets(zk, group, topic) == ends == kafka_offsets(offsets_broker, group, topic)
    # Put ZooKeeper's offset of partition 0 back to 0: the larger (Kafka's)
    # offset must win, so nothing is read again.
    zk.write_persistent(paths.offset_path(group, topic, 0), paths.encode_offset(0))
    more = [f"w{i}" for i in range(30)]
    produce(offsets_broker, topic, numbered(more))
    again = consume_phase(chroot, group, topic, len(more), **dual)
    assert_exactly(again, more)


def test_dual_commit_takes_zookeeper_offsets_ahead_of_kafka(chroot, offsets_broker, zk, group, topic):
    values = [f"v{i}" for i in range(45)]
    produce(offsets_broker, topic, numbered(values))
    wait_for_topic(zk, topic)
    got = consume_phase(chroot, group, topic, len(values), **{"offsets.storage": "zookeeper"})
    assert_exactly(got, values)
    assert kafka_offsets(offsets_broker, group, topic) == {}
    more = [f"w{i}" for i in range(15)]
    produce(offsets_broker, topic, numbered(more))
    again = consume_phase(chroot, group, topic, len(more), **{"offsets.storage": "kafka", "dual.commit.enabled": True})
    assert_exactly(again, more)


# ---------------------------------------------------------------- migration


def test_migration_from_zookeeper_to_kafka_reads_every_record_once(chroot, offsets_broker, zk, group, topic):
    """The Kafka 0.8.2 procedure: a group on ZooKeeper offsets; restart with
    offsets.storage=kafka and dual.commit.enabled=true; restart with
    dual.commit.enabled=false. Records produced between the steps are each
    read exactly once, none before its step."""
    batches = [[f"step{s}-{i}" for i in range(50 + 10 * s)] for s in range(4)]
    everything: list[MessageAndMetadata] = []

    produce(offsets_broker, topic, numbered(batches[0]))
    wait_for_topic(zk, topic)
    step1 = consume_phase(chroot, group, topic, len(batches[0]), **{"offsets.storage": "zookeeper"})
    assert_exactly(step1, batches[0])
    everything += step1
    assert zk_offsets(zk, group, topic) == end_offsets(everything)
    assert kafka_offsets(offsets_broker, group, topic) == {}

    produce(offsets_broker, topic, numbered(batches[1]))
    step2 = consume_phase(chroot, group, topic, len(batches[1]), **{"offsets.storage": "kafka", "dual.commit.enabled": True})
    assert_exactly(step2, batches[1])
    everything += step2
    assert zk_offsets(zk, group, topic) == end_offsets(everything) == kafka_offsets(offsets_broker, group, topic)

    produce(offsets_broker, topic, numbered(batches[2]))
    kafka_only = {"offsets.storage": "kafka", "dual.commit.enabled": False}
    step3 = consume_phase(chroot, group, topic, len(batches[2]), **kafka_only)
    assert_exactly(step3, batches[2])
    everything += step3
    assert kafka_offsets(offsets_broker, group, topic) == end_offsets(everything)
    assert zk_offsets(zk, group, topic) == end_offsets(step1 + step2)  # ZooKeeper no longer written

    produce(offsets_broker, topic, numbered(batches[3]))
    step4 = consume_phase(chroot, group, topic, len(batches[3]), **kafka_only)
    assert_exactly(step4, batches[3])
    everything += step4
    assert_exactly(everything, [v for batch in batches for v in batch])


def test_group_resumes_from_kafka_offsets_after_a_broker_restart(chroot, offsets_broker, zk, group, topic):
    """The coordinator reloads ``__consumer_offsets`` after a restart
    (COORDINATOR_LOAD_IN_PROGRESS meanwhile, retried): the group resumes
    where it committed, nothing lost or repeated."""
    values = [f"r{i}" for i in range(80)]
    produce(offsets_broker, topic, numbered(values))
    wait_for_topic(zk, topic)
    kafka_only = {"offsets.storage": "kafka", "dual.commit.enabled": False}
    first = consume_phase(chroot, group, topic, len(values), **kafka_only)
    assert_exactly(first, values)
    offsets_broker.stop()
    offsets_broker.start()
    more = [f"s{i}" for i in range(20)]
    produce(offsets_broker, topic, numbered(more))
    again = consume_phase(chroot, group, topic, len(more), **kafka_only)
    assert_exactly(again, more)


# ---------------------------------------------------------------- coordinator moves


def test_commits_follow_the_coordinator_to_another_broker(zookeeper):
    """Two brokers, ``__consumer_offsets`` replicated on both: the broker
    coordinating the group stops; the connector's next commit finds the new
    coordinator (lost connection, NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE,
    COORDINATOR_LOAD_IN_PROGRESS are retried) and the group resumes from it
    with nothing lost or repeated."""
    from kclient.testing import Cluster

    props = {"num.partitions": 2, "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 2}
    group = f"g-{uuid.uuid4().hex[:10]}"
    topic = f"moves-{uuid.uuid4().hex[:8]}"
    with Cluster(brokers=2, properties=props, zookeeper=zookeeper) as cluster:
        first = [f"a{i}" for i in range(40)]
        produce(cluster, topic, numbered(first), acks=-1, config=RETRIES)
        kafka_only = settings(cluster.zookeeper_connect, group, **{"offsets.storage": "kafka", "dual.commit.enabled": False})
        with Consumer.create(kafka_only) as connector:
            (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
            got = read_available(stream, len(first))
            connector.commit_offsets()
            coordinator = connector._core.coordinator.coordinator_node[0]
            cluster.broker(coordinator).stop()
            second = [f"b{i}" for i in range(30)]
            produce(cluster, topic, numbered(second), acks=-1, config=RETRIES)
            got += read_available(stream, len(second))
            connector.commit_offsets()  # through the new coordinator
            assert connector._core.coordinator.coordinator_node[0] != coordinator
        assert_exactly(got, first + second)
        third = [f"c{i}" for i in range(20)]
        produce(cluster, topic, numbered(third), acks=-1, config=RETRIES)
        with Consumer.create(kafka_only) as connector:
            (stream,) = connector.create_message_streams({topic: 1}, value_decoder=bytes.decode)[topic]
            assert_exactly(read_available(stream, len(third)), third)


# ---------------------------------------------------------------- the coordinator client


def run_with_coordinator(bootstrap, group, body, **kwargs):
    """Run ``await body(coordinator)`` with a `GroupCoordinator` on a fresh trio loop."""
    import trio

    from kclient.client.cluster import Cluster as MetadataCluster
    from kclient.client.consumer.group.coordinator import GroupCoordinator

    async def main():
        async with trio.open_nursery() as nursery:
            cluster = MetadataCluster(nursery, bootstrap, request_timeout_ms=5000, connect_timeout_ms=1000, retry_backoff_ms=50)
            try:
                return await body(GroupCoordinator(cluster, group, **kwargs))
            finally:
                await cluster.aclose()
                nursery.cancel_scope.cancel()

    return trio.run(main)


def test_coordinator_client_commits_and_fetches(offsets_broker, zk, group, topic):
    from kclient.errors import UnknownTopicOrPartitionError

    produce(offsets_broker, topic, numbered(["x"]))
    wait_for_topic(zk, topic)
    host, port = offsets_broker.bootstrap.split(":")

    async def body(coordinator):
        assert await coordinator.fetch_offsets([(topic, 0)]) == {}
        await coordinator.commit_offsets({(topic, 0): 5, (topic, 2): 7})
        with pytest.raises(UnknownTopicOrPartitionError, match="OffsetCommit"):
            await coordinator.commit_offsets({(f"{topic}-missing", 0): 1})
        return await coordinator.fetch_offsets([(topic, 0), (topic, 1), (topic, 2)])

    assert run_with_coordinator([(host, int(port))], group, body) == {(topic, 0): 5, (topic, 2): 7}


def test_coordinator_client_raises_a_member_error_at_once(offsets_broker, zk, group, topic, monkeypatch):
    from kclient.errors import IllegalGenerationError, UnknownMemberIdError
    from kclient.net.connection import BrokerConnection
    from kclient.protocol.messages import OFFSET_COMMIT

    produce(offsets_broker, topic, numbered(["x"]))
    wait_for_topic(zk, topic)
    host, port = offsets_broker.bootstrap.split(":")

    async def body(coordinator):
        with pytest.raises((UnknownMemberIdError, IllegalGenerationError)) as info:
            await coordinator.commit_offsets({(topic, 0): 1}, generation=7, member_id="nobody")
        return info.value

    commits = []
    send = BrokerConnection.request

    async def counted(self, api, *args, **kwargs):
        if api is OFFSET_COMMIT:
            commits.append(api)
        return await send(self, api, *args, **kwargs)

    monkeypatch.setattr(BrokerConnection, "request", counted)
    error = run_with_coordinator([(host, int(port))], group, body, retry_backoff_ms=2000, timeout_ms=60000)
    assert len(commits) == 1  # sent once: a member error is not retried
    assert "OffsetCommit" in str(error) and error.code in (22, 25) and not error.retriable


def test_coordinator_client_gives_up_on_unreachable_brokers_with_a_named_error(group):
    import socket

    from kclient.errors import KafkaConnectionError

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def body(coordinator):
        with pytest.raises(KafkaConnectionError) as info:
            await coordinator.fetch_offsets([("t", 0)])
        return info.value

    # It gives up once timeout_ms is spent (pytest-timeout fails a hang).
    error = run_with_coordinator([("127.0.0.1", port)], group, body, retry_backoff_ms=100, timeout_ms=1500)
    assert f"127.0.0.1:{port}" in str(error)
