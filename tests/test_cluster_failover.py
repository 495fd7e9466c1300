"""The cluster as a user meets it: three brokers, replication factor 3,
``min.insync.replicas=2``, and the leader of the partition killed with
SIGKILL and restarted five times in a row while a producer writes numbered
records (Kafka documentation, "Replication"; KIP-98 for idempotence).

Every record is counted: acknowledged, reported failed, lost, duplicated.
With ``acks=-1`` and an idempotent producer every acknowledged record is in
the log exactly once and in order, and a ConsumerConnector group reads all
of it across the leader moves. With ``acks=1`` the run prints how many
acknowledged records were lost (Kafka's documented trade-off; printed, not
asserted). ZooKeeper's tree is checked against Kafka's layout on the way.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid

import pytest
from helpers.wait import wait_for as _wait_for

from kclient import FetchRequest, Producer, ProducerData
from kclient.client.consumer.group.connector import ConsumerConnector
from kclient.client.consumer.simple import SimpleConsumer
from kclient.errors import KafkaError
from kclient.testing import Cluster

KILLS = 5
TIMEOUT = 60.0
PROPERTIES = {
    "min.insync.replicas": 2,
    "default.replication.factor": 3,
    "num.partitions": 1,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 100,
}


@pytest.fixture(scope="module")
def cluster(zookeeper):
    with Cluster(brokers=3, zookeeper=zookeeper, properties=PROPERTIES) as c:
        yield c


def new_topic(cluster) -> str:
    name = f"numbered-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, partitions=1, replication_factor=3)
    cluster.wait_for_isr(name, 0, sorted(cluster.brokers), timeout=TIMEOUT)
    return name


class Ledger:
    """What the writer was told about each numbered record."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: list[int] = []
        self.ack_times: list[float] = []
        self.failed: dict[int, str] = {}
        self.stop = threading.Event()
        self.errors: list[BaseException] = []

    def ack(self, n: int) -> None:
        with self.lock:
            self.acked.append(n)
            self.ack_times.append(time.monotonic())

    def fail(self, n: int, why: str) -> None:
        with self.lock:
            self.failed[n] = why

    def acks_after(self, t: float) -> list[float]:
        with self.lock:
            return [x for x in self.ack_times if x > t]

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def kclient_writer(cluster, topic: str, ledger: Ledger, **extra) -> threading.Thread:
    """Sync kclient Producer, one numbered record per send."""
    config = {
        "metadata.broker.list": cluster.bootstrap,
        "producer.type": "sync",
        "message.send.max.retries": 20,
        "retry.backoff.ms": 200,
        "request.timeout.ms": 5000,
        **extra,
    }

    def run() -> None:
        try:
            producer = Producer(config)
            try:
                n = 0
                while not ledger.stop.is_set():
                    try:
                        producer.send(ProducerData(topic, None, [str(n).encode()]))
                    except KafkaError as e:
                        ledger.fail(n, f"{type(e).__name__}: {e}")
                    else:
                        ledger.ack(n)
                    n += 1
            finally:
                producer.close()
        except BaseException as e:  # reported by the test
            ledger.errors.append(e)

    t = threading.Thread(target=run, name="kclient-writer", daemon=True)
    t.start()
    return t


def confluent_writer(cluster, topic: str, ledger: Ledger) -> threading.Thread:
    """confluent-kafka's idempotent producer; a record counts as acknowledged
    when its delivery report has no error."""
    confluent_kafka = pytest.importorskip("confluent_kafka")

    def run() -> None:
        try:
            producer = confluent_kafka.Producer(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "message.timeout.ms": 60000,
                    "topic.metadata.refresh.interval.ms": 1000,
                }
            )

            def report(err, msg, n):
                if err is None:
                    ledger.ack(n)
                else:
                    ledger.fail(n, str(err))

            n = 0
            while not ledger.stop.is_set():
                producer.produce(topic, str(n).encode(), partition=0, on_delivery=lambda err, msg, n=n: report(err, msg, n))
                producer.poll(0.002)
                n += 1
                if n % 50 == 0:
                    producer.flush(30)  # bound what is in flight, as a sync writer would
            left = producer.flush(60)
            assert left == 0, f"{left} records never got a delivery report"
        except BaseException as e:
            ledger.errors.append(e)

    t = threading.Thread(target=run, name="confluent-writer", daemon=True)
    t.start()
    return t


wait_for = functools.partial(_wait_for, timeout=TIMEOUT, interval=0.05)


def kill_leaders(cluster, topic: str, ledger: Ledger, kills: int = KILLS) -> list[float]:
    """Kill the partition's leader `kills` times; each time wait for a new
    leader, for the writer to be acknowledged on it, then restart the dead
    broker and wait until it is back in the ISR. Returns the failover times
    (kill -> first acknowledged send after it), seconds."""
    failovers = []
    wait_for(lambda: ledger.count() >= 20, "the first acknowledgements")
    for _ in range(kills):
        old = cluster.leader(topic, 0)
        killed_at = time.monotonic()
        cluster.kill(old)
        new = wait_for(lambda old=old: (lambda x: x if x not in (None, -1, old) else None)(cluster.leader(topic, 0)), "a new leader")
        assert new in cluster.isr(topic, 0)
        first = wait_for(lambda killed_at=killed_at: ledger.acks_after(killed_at + 0.001), "an acknowledged send after the kill")
        failovers.append(first[0] - killed_at)
        wait_for(lambda killed_at=killed_at: len(ledger.acks_after(killed_at)) >= 20, "acknowledged sends on the new leader")
        check_zookeeper_layout(cluster, topic, expect_leader=new)
        cluster.start_broker(old)
        cluster.wait_for_isr(topic, 0, sorted(cluster.brokers), timeout=TIMEOUT)
        if ledger.errors:
            raise ledger.errors[0]
    return failovers


def read_log(cluster, topic: str) -> list[int]:
    """Every record of partition 0 up to the high watermark, from its leader."""
    leader = cluster.broker(cluster.leader(topic, 0))
    host, port = leader.host, leader.port
    consumer = SimpleConsumer(host, port, 10_000, 1 << 20, "failover-check")
    try:
        out: list[int] = []
        offset = 0
        end = consumer.get_offsets_before(topic, 0, -1, 1)[0]
        while offset < end:
            messages = list(consumer.fetch(FetchRequest(topic, 0, offset, 1 << 20)))
            assert messages, f"no progress at offset {offset} of {end}"
            for m in messages:
                assert m.offset == offset, "offsets are dense"
                out.append(int(m.message.payload))
                offset = m.next_offset
        return out
    finally:
        consumer.close()


def check_exactly_once(log: list[int], ledger: Ledger) -> None:
    acked = set(ledger.acked)
    assert len(log) == len(set(log)), f"duplicated in the log: {sorted(n for n in set(log) if log.count(n) > 1)[:20]}"
    assert log == sorted(log), "records out of order"
    missing = sorted(acked - set(log))
    assert not missing, f"acknowledged but lost: {missing[:20]} ({len(missing)})"
    unknown = sorted(set(log) - acked - set(ledger.failed))
    assert not unknown, f"in the log but never sent: {unknown[:20]}"
    # Failed records are named; a failed record may have been written
    # ("possibly written"), never twice.
    print(f"acknowledged {len(acked)}, failed {len(ledger.failed)}: {dict(list(ledger.failed.items())[:5])}")


def check_zookeeper_layout(cluster, topic: str, *, expect_leader: int) -> None:
    zk = cluster.zk
    ids = sorted(int(i) for i in zk.get_children("/brokers/ids"))
    assert len(ids) == 2 or len(ids) == 3
    reg = json.loads(zk.get(f"/brokers/ids/{ids[0]}"))
    assert {"host", "port", "version"} <= set(reg)
    assignment = json.loads(zk.get(f"/brokers/topics/{topic}"))
    assert sorted(assignment["partitions"]["0"]) == sorted(cluster.brokers)
    state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state"))
    assert set(state) >= {"controller_epoch", "leader", "leader_epoch", "isr", "version"}
    assert state["leader"] == expect_leader and expect_leader in state["isr"]
    controller = json.loads(zk.get("/controller"))
    assert controller["brokerid"] in ids and {"version", "timestamp"} <= set(controller)
    assert int(zk.get("/controller_epoch")) >= state["controller_epoch"] >= 1


def test_kclient_idempotent_producer_and_a_group_across_five_leader_kills(cluster, zookeeper):
    topic = new_topic(cluster)
    ledger = Ledger()
    group = f"failover-{uuid.uuid4().hex[:8]}"
    consumed: list[int] = []
    connector = ConsumerConnector(
        {
            "zookeeper.connect": cluster.zookeeper_connect,
            "group.id": group,
            "auto.offset.reset": "smallest",
            "consumer.timeout.ms": 500,
            "auto.commit.interval.ms": 500,
        }
    )
    stream = connector.create_message_streams({topic: 1})[topic][0]
    reading = threading.Event()
    reading.set()

    def consume() -> None:
        from kclient.errors import ConsumerTimeoutError

        while reading.is_set():
            try:
                for m in stream:
                    consumed.append(int(m.message))
            except ConsumerTimeoutError:
                continue

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    writer = kclient_writer(cluster, topic, ledger, **{"enable.idempotence": "true", "request.required.acks": -1})
    try:
        failovers = kill_leaders(cluster, topic, ledger)
    finally:
        ledger.stop.set()
        writer.join(TIMEOUT)
    assert not ledger.errors, ledger.errors
    log = read_log(cluster, topic)
    check_exactly_once(log, ledger)
    wait_for(lambda: set(log) <= set(consumed), "the group to read the whole log")
    reading.clear()
    reader.join(TIMEOUT)
    connector.shutdown()
    assert set(consumed) == set(log)
    print(f"failover (kill -> first acknowledged send), s: {[round(f, 2) for f in failovers]}")


def test_confluent_idempotent_producer_across_five_leader_kills(cluster):
    topic = new_topic(cluster)
    ledger = Ledger()
    writer = confluent_writer(cluster, topic, ledger)
    try:
        kill_leaders(cluster, topic, ledger)
    finally:
        ledger.stop.set()
        writer.join(2 * TIMEOUT)
    assert not ledger.errors, ledger.errors
    check_exactly_once(read_log(cluster, topic), ledger)


def test_acks_1_reports_what_it_lost(cluster):
    topic = new_topic(cluster)
    ledger = Ledger()
    writer = kclient_writer(cluster, topic, ledger, **{"request.required.acks": 1})
    try:
        kill_leaders(cluster, topic, ledger, kills=3)
    finally:
        ledger.stop.set()
        writer.join(TIMEOUT)
    assert not ledger.errors, ledger.errors
    log = read_log(cluster, topic)
    lost = sorted(set(ledger.acked) - set(log))
    duplicated = len(log) - len(set(log))
    print(f"acks=1: acknowledged {len(ledger.acked)}, lost {len(lost)}, duplicated {duplicated}, failed {len(ledger.failed)}")
    assert set(log) <= set(ledger.acked) | set(ledger.failed)
