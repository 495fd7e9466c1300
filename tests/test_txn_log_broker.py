"""Transactions in the bundled broker's log (KIP-98): raw transactional
Produce requests from two producers, COMMIT / ABORT markers written by
WriteTxnMarkers as a transaction coordinator sends them, then Fetch with
``isolation_level=1`` (stops at the last stable offset, returns the aborted
transaction), ListOffsets under read_committed, confluent-kafka's
read_committed / read_uncommitted consumers (interop), and a SIGKILL and
restart that keeps the ``.txnindex``, the LSO and the open transaction.

One module-scoped broker; waits are bounded by deadlines.
"""

from __future__ import annotations

import pytest
from helpers.raw import SocketClient, fetch_body, make_topic, produce_body
from helpers.three_brokers import ThreeBrokers
from helpers.transactions import kclient_values
from helpers.wait import retry

import kclient
from kclient.protocol.messages import FETCH, INIT_PRODUCER_ID, LIST_OFFSETS, PRODUCE
from kclient.protocol.messages.write_txn_markers import WRITE_TXN_MARKERS
from kclient.protocol.records import iter_record_set
from kclient.protocol.records.v2 import build_batch
from kclient.testing import BrokerProcess, java_unavailable_reason, kafka_tool

ck = pytest.importorskip("confluent_kafka")

TOPIC = "txn-log"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("txn-log") / "logs"
    with BrokerProcess(log_dir=log_dir, keep_port=True, properties={"num.partitions": 1}) as proc:
        with client(proc) as c:
            make_topic(c, TOPIC)
        yield proc


def client(proc) -> SocketClient:
    return SocketClient(proc.host, proc.port, client_id="txn-test", timeout=20)


def producer_id(c: SocketClient) -> int:
    reply = c.request(INIT_PRODUCER_ID, 0, {"transactional_id": None, "transaction_timeout_ms": 60_000})
    assert reply["error_code"] == 0
    return reply["producer_id"]


def produce(c: SocketClient, pid: int, seq: int, values: list[bytes], *, transactional: bool = True, epoch: int = 0, topic: str = TOPIC) -> int:
    batch = build_batch(
        [(None, v, 1_000) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional
    )
    reply = c.request(PRODUCE, 7, produce_body(topic, 0, batch, acks=-1))
    part = reply["responses"][0]["partition_responses"][0]
    assert part["error_code"] == 0, part
    return part["base_offset"]


def marker(c: SocketClient, pid: int, commit: bool, partitions: tuple[int, ...] = (0,), *, epoch: int = 0, topic: str = TOPIC) -> list[int]:
    body = {
        "markers": [
            {
                "producer_id": pid,
                "producer_epoch": epoch,
                "transaction_result": commit,
                "topics": [{"name": topic, "partition_indexes": list(partitions)}],
                "coordinator_epoch": 3,
            }
        ]
    }
    reply = c.request(WRITE_TXN_MARKERS, 1, body)
    return [p["error_code"] for p in reply["markers"][0]["topics"][0]["partitions"]]


def fetch(c: SocketClient, isolation: int, offset: int = 0, *, topic: str = TOPIC) -> dict:
    body = fetch_body(topic, [(0, offset)])
    body["isolation_level"] = isolation
    return c.request(FETCH, 11, body)["responses"][0]["partitions"][0]


def latest(c: SocketClient, isolation: int, topic: str = TOPIC) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}],
    }
    part = c.request(LIST_OFFSETS, 5, body)["topics"][0]["partitions"][0]
    assert part["error_code"] == 0
    return part["offset"]


def fetched_offsets(part: dict) -> list[int]:
    return [r.offset for r in iter_record_set(part["records"] or b"")]


def consume(proc, isolation: str, topic: str = TOPIC) -> list[bytes]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": proc.bootstrap,
            "group.id": f"txn-{isolation}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        for _ in range(600):
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(msg.error())
            values.append(msg.value())
        raise AssertionError(f"no end of partition; read {values}")
    finally:
        consumer.close()


def test_read_committed_across_commit_abort_and_crash(broker):
    with client(broker) as c:
        one, two = producer_id(c), producer_id(c)
        assert produce(c, one, 0, [b"c0", b"c1", b"c2"]) == 0
        assert produce(c, two, 0, [b"a0", b"a1"]) == 3
        assert produce(c, -1, -1, [b"plain"], transactional=False) == 5
        # (a) while the transactions are open, read_committed stops at offset 0
        open_read = fetch(c, 1)
        assert (open_read["last_stable_offset"], open_read["high_watermark"]) == (0, 6)
        assert fetched_offsets(open_read) == []
        assert fetched_offsets(fetch(c, 0)) == [0, 1, 2, 3, 4, 5]
        assert (latest(c, 1), latest(c, 0)) == (0, 6)  # (c)
        assert marker(c, one, True) == [0]  # COMMIT at 6
        assert fetch(c, 1)["last_stable_offset"] == 3 and latest(c, 1) == 3
        assert marker(c, two, False) == [0]  # ABORT at 7
        done = fetch(c, 1)
        assert done["last_stable_offset"] == 8 and latest(c, 1) == 8
        assert done["aborted_transactions"] == [{"producer_id": two, "first_offset": 3}]
        assert fetched_offsets(done) == list(range(6))  # (markers at 6, 7: control records)
        assert fetch(c, 0)["aborted_transactions"] == []
        # Errors per partition: no such partition, as Kafka answers it.
        assert marker(c, one, True, (0, 7)) == [0, 3]
        # A transaction left open: offsets 9..10 (the marker above is at 8).
        assert produce(c, one, 3, [b"open0", b"open1"]) == 9
        assert latest(c, 1) == 9
    # (b) interop: confluent-kafka's consumer
    assert consume(broker, "read_committed") == [b"c0", b"c1", b"c2", b"plain"]
    assert consume(broker, "read_uncommitted") == [b"c0", b"c1", b"c2", b"a0", b"a1", b"plain", b"open0", b"open1"]
    # (d) SIGKILL and restart: the .txnindex, the LSO and the open transaction come back
    part_dir = broker.log_dir / f"{TOPIC}-0"
    assert [p.stat().st_size for p in part_dir.glob("*.txnindex")] == [34]
    broker.kill()
    broker.start()
    with client(broker) as c:
        after = retry(lambda: fetch(c, 1), lambda p: p["error_code"] == 0 and p["high_watermark"] == 11, "restarted leader")
        assert after["last_stable_offset"] == 9
        assert after["aborted_transactions"] == [{"producer_id": two, "first_offset": 3}]
        assert fetched_offsets(after) == list(range(6))
        assert marker(c, one, False) == [0]  # ABORT of the open one at 11
        final = fetch(c, 1)
        assert final["last_stable_offset"] == 12
        assert final["aborted_transactions"] == [{"producer_id": two, "first_offset": 3}, {"producer_id": one, "first_offset": 9}]
    assert consume(broker, "read_committed") == [b"c0", b"c1", b"c2", b"plain"]
    assert sum(p.stat().st_size for p in part_dir.glob("*.txnindex")) == 68  # (two aborts, in one or two segments)
    # A marker of an older producer epoch than the partition saw is fenced.
    with client(broker) as c:
        assert produce(c, two, 0, [b"e1"], epoch=1) == 12
        assert marker(c, two, False, epoch=0) == [47]  # INVALID_PRODUCER_EPOCH
        assert latest(c, 1) == 12
        assert marker(c, two, False, epoch=1) == [0]  # ABORT at 13
        assert latest(c, 1) == 14


@pytest.fixture(scope="module")
def cluster(zookeeper):
    with ThreeBrokers(zookeeper) as c:
        yield c


def test_followers_keep_the_transactions_across_a_leader_failover(cluster):
    """Followers build the transaction state and ``.txnindex`` from what
    they replicate: after the leader is SIGKILLed, the new leader answers
    the same LSO and aborted transactions and takes the open
    transaction's marker."""
    topic = "txn-failover"
    cluster.create_topic(topic)
    with client(cluster.brokers[cluster.leader(topic)]) as c:
        one, two = producer_id(c), producer_id(c)
        assert produce(c, one, 0, [b"x0", b"x1"], topic=topic) == 0
        assert produce(c, two, 0, [b"y0"], topic=topic) == 2
        assert marker(c, two, False, topic=topic) == [0]  # ABORT at 3
        assert produce(c, one, 2, [b"x2"], topic=topic) == 4  # (same transaction of one)
        assert fetch(c, 1, topic=topic)["last_stable_offset"] == 0
    old = cluster.kill_leader(topic)
    new = cluster.wait_new_leader(topic, old)
    with client(cluster.brokers[new]) as c:
        after = retry(
            lambda: fetch(c, 1, topic=topic), lambda p: p["error_code"] == 0 and p["high_watermark"] == 5, "the new leader's high watermark"
        )
        assert after["last_stable_offset"] == 0
        assert marker(c, one, True, topic=topic) == [0]  # COMMIT at 5
        done = fetch(c, 1, topic=topic)
        assert done["last_stable_offset"] == 6
        assert done["aborted_transactions"] == [{"producer_id": two, "first_offset": 2}]
    assert consume(cluster.brokers[new], "read_committed", topic) == [b"x0", b"x1", b"x2"]
    cluster.wait_all_registered()


def test_confluent_kafka_transactional_producer_read_committed(broker):
    """Interop end to end: confluent-kafka's transactional producer (the
    broker's coordinator writes the markers through WriteTxnMarkers), read
    by confluent-kafka's, kafka-python's and kclient's consumers (Consumer and
    SimpleConsumer) and Kafka's own Java consumer (kafka-console-consumer)."""
    topic = "txn-ck"
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "txn-log-ck", "transaction.timeout.ms": 60_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"c%d" % i)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, b"a%d" % i)
    producer.flush(30)  # (on the broker before the abort: librdkafka drops unsent ones)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"c3")
    producer.commit_transaction(30)
    with client(broker) as c:  # (the coordinator may write the last marker after answering EndTxn, as Kafka's)
        retry(lambda: latest(c, 1, topic), lambda offset: offset == 9, "the last marker")  # 6 records, 3 markers
        assert latest(c, 0, topic) == 9
    assert consume(broker, "read_committed", topic) == [b"c0", b"c1", b"c2", b"c3"]
    assert consume(broker, "read_uncommitted", topic) == [b"c0", b"c1", b"c2", b"a0", b"a1", b"c3"]
    assert kafka_python_values(broker, "read_committed", topic, 9) == [b"c0", b"c1", b"c2", b"c3"]
    assert kafka_python_values(broker, "read_uncommitted", topic, 9) == [b"c0", b"c1", b"c2", b"a0", b"a1", b"c3"]
    for isolation, expected in (("read_committed", [b"c0", b"c1", b"c2", b"c3"]), ("read_uncommitted", [b"c0", b"c1", b"c2", b"a0", b"a1", b"c3"])):
        assert kclient_values(broker, topic, isolation) == expected, isolation
        simple = kclient.SimpleConsumer(broker.host, broker.port, 10_000, isolation_level=isolation)
        try:
            got: list[bytes] = []
            offset = 0
            while offset < 9:  # past every record and marker, through each set's next_offset
                ms = simple.fetch(kclient.FetchRequest(topic, 0, offset, 1 << 20))
                got += [m.message.payload for m in ms]
                assert ms.next_offset > offset
                offset = ms.next_offset
            assert got == expected, isolation
        finally:
            simple.close()
    # Kafka's own Java consumer (kafka-console-consumer of Kafka 4)
    if java_unavailable_reason() is None:
        out = kafka_tool(
            "kafka-console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
            "--isolation-level", "read_committed", "--max-messages", "4", release="4", timeout=120,
        ).stdout
        assert out.split() == ["c0", "c1", "c2", "c3"]


def kafka_python_values(proc, isolation: str, topic: str, end: int) -> list[bytes]:
    """What kafka-python's consumer reads from offset 0 until its position
    reaches ``end`` (the partition's last stable offset)."""
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=proc.bootstrap, isolation_level=isolation, enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[bytes] = []
        for _ in range(300):
            if consumer.position(tp) >= end:
                return values
            for records in consumer.poll(timeout_ms=100).values():
                values.extend(r.value for r in records)
        raise AssertionError(f"kafka-python did not reach offset {end}; read {values}")
    finally:
        consumer.close()
