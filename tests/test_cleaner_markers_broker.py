"""Transaction markers leave a compacted topic after ``delete.retention.ms``
once their transaction's data is gone (issue 29; KIP-98, KIP-534), on the
bundled broker and on Apache Kafka 4 for comparison: the same
confluent-kafka transactional producers write

* A (producer 1): ``k1``, ``k2`` committed, later wholly superseded by C;
* B (producer 2): ``k1``, ``k9`` aborted;
* C (producer 1): ``k1``, ``k2`` committed;
* D (producer 3): ``k3`` committed;
* E (producer 2): ``k4`` committed (producer 2's last batch);

then plain records with fresh keys while the broker's cleaner runs. Both
brokers drop A's and B's markers (after a cleaning has given each a delete
horizon, seen on the wire as attribute bit 6) and keep C's, D's and E's,
whose transactions have data left; confluent-kafka's and kclient's
read_committed consumers read exactly the committed latest values, and no
aborted value is readable at all.

One broker of each kind per module; waits are bounded by conditions.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.groups import group_kafka
from helpers.raw import SocketClient, fetch_body
from helpers.transactions import kclient_values
from helpers.wait import wait_for

from kclient.protocol.messages import FETCH
from kclient.protocol.records.control import control_type_of
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import read_header
from kclient.testing import BrokerProcess

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.timeout(300)

RETENTION_MS = 3000
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": str(RETENTION_MS),
}


@pytest.fixture(scope="module")
def bundled() -> Iterator[BrokerProcess]:
    with BrokerProcess(properties={"num.partitions": 1, "log.cleaner.backoff.ms": 100}) as proc:
        yield proc


@pytest.fixture(scope="module")
def kafka4() -> Iterator[Any]:
    props = {"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1, "log.cleaner.backoff.ms": 100}
    with group_kafka(1, **props) as proc:
        yield proc


@pytest.fixture(params=["bundled", "kafka4"])
def broker(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def create_topic(proc: Any, topic: str) -> None:
    admin = ck_admin.AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([ck_admin.NewTopic(topic, 1, 1, config=TOPIC_CONFIG)])[topic].result(60)


def transaction(proc: Any, tid: str, topic: str, rows: list[tuple[bytes, bytes]], commit: bool) -> None:
    producer = ck.Producer({"bootstrap.servers": proc.bootstrap, "transactional.id": tid, "linger.ms": 0})
    producer.init_transactions(60)
    producer.begin_transaction()
    for key, value in rows:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(60) == 0
    (producer.commit_transaction if commit else producer.abort_transaction)(60)


def fetch_all(proc: Any, topic: str) -> list[bytes]:
    """Every batch of the partition (read_uncommitted), raw, oldest first."""
    batches: list[bytes] = []
    with SocketClient(proc.host, proc.port, client_id="markers", timeout=20) as c:
        offset = 0
        while True:
            body = fetch_body(topic, [(0, offset)])
            body["isolation_level"] = 0
            part = c.request(FETCH, 11, body)["responses"][0]["partitions"][0]
            assert part["error_code"] == 0, part
            data = part["records"] or b""
            infos = list(scan_batches(data))
            if not infos:
                return batches
            batches += [bytes(data[i.position : i.position + i.size]) for i in infos]
            offset = infos[-1].last_offset + 1
            if offset >= part["high_watermark"]:
                return batches


def markers(proc: Any, topic: str) -> dict[int, tuple[int, int | None, int | None]]:
    """``base offset -> (producer id, control type, delete horizon)`` of
    every transaction marker."""
    out: dict[int, tuple[int, int | None, int | None]] = {}
    for batch in fetch_all(proc, topic):
        header = read_header(batch)
        if header.is_control and header.records_count:
            out[header.base_offset] = (header.producer_id, control_type_of(batch, 0, header), header.delete_horizon_ms)
    return out


def ck_values(proc: Any, topic: str, isolation: str) -> list[bytes]:
    consumer = ck.Consumer(
        {"bootstrap.servers": proc.bootstrap, "group.id": f"markers-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False, "isolation.level": isolation}
    )
    values: list[bytes] = []
    try:
        tp = ck.TopicPartition(topic, 0)
        end = consumer.get_watermark_offsets(tp, timeout=30)[1]
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if consumer.position([tp])[0].offset >= end:
                return values
        raise AssertionError(f"{topic}: position never reached {end}; read {values}")
    finally:
        consumer.close()


def test_markers_removed_after_data_and_delete_retention(broker):
    suffix = uuid.uuid4().hex[:6]
    topic = f"markers-{suffix}"
    create_topic(broker, topic)
    started = int(time.time() * 1000)
    transaction(broker, f"p1-{suffix}", topic, [(b"k1", b"a1"), (b"k2", b"a2")], True)
    transaction(broker, f"p2-{suffix}", topic, [(b"k1", b"b1"), (b"k9", b"b9")], False)
    transaction(broker, f"p1-{suffix}", topic, [(b"k1", b"c1"), (b"k2", b"c2")], True)
    transaction(broker, f"p3-{suffix}", topic, [(b"k3", b"d3")], True)
    transaction(broker, f"p2-{suffix}", topic, [(b"k4", b"e4")], True)
    first = wait_for(lambda: len(m := markers(broker, topic)) == 5 and m, "the five markers")
    a, b, c, d, e = sorted(first)
    assert all(first[offset][2] is None for offset in (c, d, e))  # (A's and B's may already have one: the cleaner runs meanwhile)
    fillers: list[bytes] = []
    stamped = {offset: horizon for offset, (_pid, _type, horizon) in first.items() if horizon is not None}
    plain = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})

    def step() -> bool:
        value = b"f%d" % len(fillers)
        plain.produce(topic, key=value, value=value)
        assert plain.flush(30) == 0
        fillers.append(value)
        now = markers(broker, topic)
        for offset, (_pid, _type, horizon) in now.items():
            if horizon is not None:
                stamped.setdefault(offset, horizon)
        return set(now) == {c, d, e}

    wait_for(step, "the cleaner to remove A's and B's markers", timeout=180, interval=0.2)
    left = markers(broker, topic)
    assert {offset: horizon for offset, (_p, _t, horizon) in left.items()} == {c: None, d: None, e: None}
    assert set(stamped) == {a, b}  # each got a delete horizon before going
    assert all(h >= started + RETENTION_MS for h in stamped.values())  # (a cleaning's time plus delete.retention.ms)
    committed = [b"c1", b"c2", b"d3", b"e4", *fillers]
    assert ck_values(broker, topic, "read_committed") == committed
    assert kclient_values(broker, topic) == committed
    uncommitted = ck_values(broker, topic, "read_uncommitted")
    assert not {b"a1", b"a2", b"b1", b"b9"} & set(uncommitted)
