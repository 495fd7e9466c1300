"""The async producer's per-partition batching (issue 28) against the
bundled broker, counting every record: keyed records over 512 partitions,
keyless records under the sticky partitioner, a record larger than
``batch.size``, and a broker SIGKILLed mid-send with ``acks=all``."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from helpers.wait import wait_for

from kclient import AdminClient, FetchRequest, NewTopic, OffsetRequest, Producer, ProducerData, SimpleConsumer
from kclient.client.producer.partitioner import DefaultPartitioner
from kclient.testing import BrokerProcess


@pytest.fixture(scope="module")
def broker():
    with BrokerProcess(properties={"num.partitions": 1}, keep_port=True) as proc:
        yield proc


def new_topic(broker: BrokerProcess, partitions: int) -> str:
    topic = f"acc-{uuid.uuid4().hex[:10]}"
    with AdminClient({"metadata.broker.list": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=60_000)
    return topic


def read_all(broker: BrokerProcess, topic: str, partitions: int) -> dict[int, list[tuple[Any, Any]]]:
    """Every (key, value) of each partition, in offset order, over one connection."""
    host, port = broker.bootstrap.rsplit(":", 1)
    out: dict[int, list[tuple[Any, Any]]] = {}
    with SimpleConsumer(host, int(port), 10_000, 1 << 20, "acc-reader") as consumer:
        for p in range(partitions):
            offset = consumer.get_offsets_before(topic, p, OffsetRequest.EARLIEST_TIME, 1)[0]
            end = consumer.get_offsets_before(topic, p, OffsetRequest.LATEST_TIME, 1)[0]
            got: list[tuple[Any, Any]] = []
            while offset < end:
                batch = [m for m in consumer.fetch(FetchRequest(topic, p, offset, 4 << 20)) if m.offset >= offset]
                assert batch, f"no progress reading {topic}-{p} at {offset} of {end}"
                got += [(m.message.key, m.message.payload) for m in batch]
                offset = batch[-1].next_offset
            out[p] = got
    return out


def config(broker: BrokerProcess, **extra: Any) -> dict[str, Any]:
    return {"metadata.broker.list": broker.bootstrap, "producer.type": "async", **extra}


def test_keyed_records_over_512_partitions_all_arrive_in_order_once(broker):
    partitions, n = 512, 20_000
    topic = new_topic(broker, partitions)
    acks: list[Any] = []
    errors: list[BaseException] = []

    def on_delivery(metadata: Any, exc: BaseException | None) -> None:
        (acks if exc is None else errors).append(metadata if exc is None else exc)

    data = [ProducerData(topic, key=b"key-%d" % (i % 3000), messages=[b"%d" % i]) for i in range(n)]
    with Producer(config(broker)) as producer:
        for i, d in enumerate(data):
            producer.send(d, callback=on_delivery if i % 10 == 0 else None)
        producer.flush()
        stats = producer.statistics()
    assert (stats.sent_messages, stats.failed_messages) == (n, 0)
    assert len(acks) == n // 10 and not errors
    got = read_all(broker, topic, partitions)
    assert sum(len(v) for v in got.values()) == n
    expected: dict[int, list[tuple[Any, Any]]] = {p: [] for p in range(partitions)}
    place = DefaultPartitioner()
    for d in data:
        expected[place.partition(d.key, partitions)].append((d.key, d.messages[0]))
    assert got == expected  # each partition's records, in send order, none lost or duplicated
    # the offsets the callbacks reported are where the records are
    for md in acks[:50]:
        assert got[md.partition][md.offset][0] is not None


def test_keyless_records_stick_to_a_partition_per_batch(broker):
    partitions, n = 16, 4000
    topic = new_topic(broker, partitions)
    # 100-byte values, batch.size of about 20 of them: each batch fills one partition
    with Producer(config(broker, **{"batch.size": 20 * 120, "linger.ms": 600_000})) as producer:
        producer.send([ProducerData(topic, messages=[b"%05d" % i + b"x" * 95]) for i in range(n)])
        producer.flush()
    got = read_all(broker, topic, partitions)
    values = sorted(v for recs in got.values() for _, v in recs)
    assert values == sorted(b"%05d" % i + b"x" * 95 for i in range(n))
    assert sum(1 for recs in got.values() if recs) >= partitions // 2  # spread over the partitions
    # consecutive records go to one partition in runs (sticky), not one by one at random
    where = {v: p for p, recs in got.items() for _, v in recs}
    order = [where[b"%05d" % i + b"x" * 95] for i in range(n)]
    switches = sum(1 for a, b in zip(order, order[1:], strict=False) if a != b)
    assert switches < n // 10


def test_a_record_larger_than_batch_size_goes_alone(broker):
    topic = new_topic(broker, 2)
    big = b"B" * 50_000
    with Producer(config(broker, **{"batch.size": 1000})) as producer:
        producer.send([ProducerData(topic, key=b"k", messages=[b"before"]), ProducerData(topic, key=b"k", messages=[big]), ProducerData(topic, key=b"k", messages=[b"after"])])
        producer.flush()
        assert producer.statistics().failed_messages == 0
    got = read_all(broker, topic, 2)
    p = DefaultPartitioner().partition(b"k", 2)
    assert [v for _, v in got[p]] == [b"before", big, b"after"]


def test_a_custom_partitioner_is_still_used(broker):
    topic = new_topic(broker, 4)
    with Producer(config(broker, **{"partitioner.class": "plugins_for_tests.LastPartitioner"})) as producer:
        producer.send([ProducerData(topic, key=b"k%d" % i, messages=[b"v%d" % i]) for i in range(100)] + [ProducerData(topic, messages=[b"nokey"])])
        producer.flush()
    got = read_all(broker, topic, 4)
    assert [len(got[p]) for p in range(4)] == [0, 0, 0, 101]


def test_sigkilled_broker_mid_send_loses_no_acknowledged_record(broker):
    partitions, n = 64, 20_000
    topic = new_topic(broker, partitions)
    acked: list[bytes] = []
    failed = Counter[str]()
    lock = threading.Lock()

    def on_delivery(value: bytes) -> Any:
        def done(metadata: Any, exc: BaseException | None) -> None:
            with lock:
                if exc is None:
                    acked.append(value)
                else:
                    failed[type(exc).__name__] += 1

        return done

    props = config(broker, **{"acks": "all", "message.send.max.retries": 20, "retry.backoff.ms": 200, "retry.backoff.max.ms": 1000})
    producer = Producer(props)
    try:
        for i in range(n // 2):
            producer.send(ProducerData(topic, key=b"k%d" % (i % 500), messages=[b"%d" % i]), callback=on_delivery(b"%d" % i))
        wait_for(lambda: len(acked) > 0, "some records acknowledged before the kill")
        broker.kill()
        broker.start()
        for i in range(n // 2, n):
            producer.send(ProducerData(topic, key=b"k%d" % (i % 500), messages=[b"%d" % i]), callback=on_delivery(b"%d" % i))
        producer.flush()
    finally:
        try:
            producer.close()
        except Exception:
            pass  # failures were reported through the callbacks, counted below
    got = read_all(broker, topic, partitions)
    present = [v for recs in got.values() for _, v in recs]
    assert set(acked) <= set(present)  # every acknowledged record is in the log
    assert len(acked) + sum(failed.values()) == n  # every record was reported once
    assert len(acked) > n // 2
