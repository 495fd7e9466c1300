"""The clients through a broker failure: three real brokers and a real
ZooKeeper; the partition leader is SIGKILLed and the controller elects a
new one from the ISR. The producer (acks=-1, idempotent) keeps sending,
the SimpleConsumer is told where the leader went, the ConsumerConnector's
fetchers find it themselves; a producer started before its broker waits
for it. No mocks; waits are bounded by deadlines, never asserted as
speeds."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from helpers.three_brokers import ThreeBrokers, wait_until

from kclient import Producer, ProducerData
from kclient.client.consumer.group.connector import ConsumerConnector
from kclient.client.consumer.simple import FetchRequest, SimpleConsumer
from kclient.errors import ConsumerTimeoutError, FailedToSendMessageError, KafkaConnectionError, NoBrokersAvailableError, NotLeaderForPartitionError
from kclient.testing import BrokerProcess
from kclient.testing.process import free_port


@pytest.fixture(scope="module")
def cluster(zookeeper):
    with ThreeBrokers(zookeeper) as c:
        yield c


@pytest.fixture
def topic(cluster) -> str:
    cluster.wait_all_registered()  # a test before killed one
    name = f"failover-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name)
    return name


def producer_config(bootstrap: str, **extra) -> dict:
    return {
        "metadata.broker.list": bootstrap,
        "enable.idempotence": "true",
        "request.required.acks": -1,
        "message.send.max.retries": 12,
        "retry.backoff.ms": 200,
        "request.timeout.ms": 3000,
        **extra,
    }


def test_acks_all_producer_keeps_sending_through_a_leader_kill(cluster, topic):
    """Every acknowledged record is in the new leader's log exactly once and
    in send order; nothing fails (the retries outlast the election)."""
    acked: list[bytes] = []
    failures: list[BaseException] = []
    killed = threading.Event()

    def send_all() -> None:
        with Producer(producer_config(cluster.bootstrap)) as producer:
            for i in range(60):
                value = f"r{i:03d}".encode()
                try:
                    producer.send(ProducerData(topic, messages=[value]))
                except FailedToSendMessageError as exc:
                    failures.append(exc)
                    continue
                acked.append(value)
                if i == 20:
                    killed.wait(30)  # the kill lands mid-stream, between sends 20 and 21
                time.sleep(0.01)  # kept: a paced stream, so the sends after the kill straddle the failover

    sender = threading.Thread(target=send_all, name="test-sender")
    sender.start()
    try:
        wait_until(lambda: len(acked) >= 21, what="21 acknowledged records")
        old = cluster.kill_leader(topic)
    finally:
        killed.set()
        sender.join(120)
    assert not sender.is_alive()
    new = cluster.wait_new_leader(topic, old)
    assert new != old
    assert failures == []
    assert len(acked) == 60
    assert cluster.values(topic) == acked


def test_a_failed_send_names_its_records(cluster, topic):
    """When the retries run out the error says which records of which
    partition failed (here: the only leader and both followers are gone)."""
    with Producer(producer_config(cluster.bootstrap, **{"message.send.max.retries": 2, "retry.backoff.ms": 50})) as producer:
        producer.send(ProducerData(topic, messages=[b"kept"]))
        for b in cluster.live():
            b.kill()
        with pytest.raises(FailedToSendMessageError) as info:
            producer.send(ProducerData(topic, key=b"k", messages=[b"lost1", b"lost2"]))
    err = info.value
    assert err.failed_partitions == {(topic, 0): 2}
    assert err.failed_records == {(topic, 0): [(b"k", b"lost1"), (b"k", b"lost2")]}
    assert f"{topic}-0" in str(err)


def test_producer_waits_for_a_bootstrap_broker_started_after_it():
    port = free_port("127.0.0.1")
    config = {"metadata.broker.list": f"127.0.0.1:{port}", "message.send.max.retries": 12, "retry.backoff.ms": 200}
    outcome: list = []
    with BrokerProcess(port=port, properties={"num.partitions": 1}) as broker:
        broker.stop()
        with Producer(config) as producer:

            def send() -> None:
                try:
                    producer.send(ProducerData("late", messages=[b"waited"]))
                    outcome.append("ok")
                except Exception as exc:  # reported by the assertion below
                    outcome.append(exc)

            sender = threading.Thread(target=send, name="test-sender")
            sender.start()
            sender.join(1.0)  # it has met the closed port and is backing off
            assert sender.is_alive() and outcome == []
            broker.start()
            sender.join(60)
        assert outcome == ["ok"]


def test_unreachable_bootstrap_fails_clearly_after_the_retries():
    dead = f"127.0.0.1:{free_port('127.0.0.1')}"
    config = {"metadata.broker.list": dead, "message.send.max.retries": 2, "retry.backoff.ms": 20}
    with Producer(config) as producer:
        with pytest.raises(FailedToSendMessageError, match=dead) as info:
            producer.send(ProducerData("nowhere", messages=[b"a", b"b"]))
    err = info.value
    assert isinstance(err.__cause__, NoBrokersAvailableError)
    assert isinstance(err.__cause__, KafkaConnectionError)
    assert err.failed_partitions == {("nowhere", -1): 2}
    assert err.failed_records == {("nowhere", -1): [(None, b"a"), (None, b"b")]}
    assert err.not_sent == 2


def test_simple_consumer_is_told_where_the_new_leader_is(cluster, topic):
    with Producer(producer_config(cluster.bootstrap)) as producer:
        producer.send(ProducerData(topic, messages=[b"m0", b"m1", b"m2"]))
    old = cluster.kill_leader(topic)
    new = cluster.wait_new_leader(topic, old)
    other = next(b for i, b in cluster.brokers.items() if i not in (old, new))
    leader = cluster.brokers[new]

    def refused():
        with SimpleConsumer(other.host, other.port, so_timeout_ms=10_000) as consumer:
            try:
                consumer.fetch(FetchRequest(topic, 0, 0))
            except NotLeaderForPartitionError as exc:
                # Until its UpdateMetadata lands it may still name the old one.
                return exc if exc.leader_id == new else None
        raise AssertionError("a follower served a consumer fetch")

    # The follower learns the new leader from the controller's UpdateMetadata.
    exc = wait_until(refused, what="the follower to name the new leader")
    assert exc.leader == (leader.host, leader.port)
    assert exc.leader_id == new
    with SimpleConsumer(*exc.leader) as consumer:

        def served():
            try:
                return [m.message.payload for m in consumer.fetch(FetchRequest(topic, 0, 0))] or None
            except NotLeaderForPartitionError:
                # The controller's queue to the follower can run ahead of
                # its queue to the new leader (as in Kafka): until its
                # LeaderAndIsr lands, the new leader refuses.
                return None

        # A new leader exposes the records once its high watermark passes
        # them again (its followers fetched), as in Kafka.
        got = wait_until(served, what="the new leader to serve the records")
    assert got == [b"m0", b"m1", b"m2"]


def test_consumer_connector_reads_on_from_the_new_leader(cluster, topic):
    settings = {
        "group.id": f"g-{uuid.uuid4().hex[:8]}",
        "zookeeper.connect": cluster.connect,
        "auto.offset.reset": "smallest",
        "consumer.timeout.ms": 500,
        "rebalance.backoff.ms": 200,
        "refresh.leader.backoff.ms": 200,
        "auto.commit.enable": False,
        "zookeeper.session.timeout.ms": 6000,
    }
    first = [f"a{i}".encode() for i in range(20)]
    later = [f"b{i}".encode() for i in range(20)]
    with Producer(producer_config(cluster.bootstrap)) as producer, ConsumerConnector(settings) as connector:
        (stream,) = connector.create_message_streams({topic: 1})[topic]
        producer.send(ProducerData(topic, messages=first))
        assert read(stream, 20) == first
        old = cluster.kill_leader(topic)
        producer.send(ProducerData(topic, messages=later))
        assert read(stream, 20) == later
        assert cluster.leader(topic) != old
        assert read(stream, 1, patience=2.0) == []  # nothing twice


def read(stream, n: int, *, patience: float = 60.0) -> list[bytes]:
    """Up to ``n`` message values from ``stream``, waiting at most
    ``patience`` seconds in all."""
    out: list[bytes] = []
    deadline = time.monotonic() + patience
    while len(out) < n and time.monotonic() < deadline:
        try:
            out.append(next(stream).message)
        except ConsumerTimeoutError:
            continue
    return out
