"""Real damage to real files, with a real broker process killed for real
(issue 4; Kafka documentation https://kafka.apache.org/documentation/#log,
"Guarantees"): kill -9 under a produce load, a segment cut
mid-batch, random bytes appended, a byte flipped inside a batch, a deleted
index. After each restart the broker serves every batch before the damage,
reports what it truncated, and takes new writes at the right offsets."""

from __future__ import annotations

import random
import threading
import uuid
from pathlib import Path

import pytest
from helpers.records import partition_messages, produce

from kclient import FetchRequest, Producer, ProducerData, SimpleConsumer
from kclient.errors import KafkaError
from kclient.protocol.records import scan_batches
from kclient.testing import BrokerProcess

pytestmark = pytest.mark.timeout(180)


def _segment(log_dir: Path, topic: str, partition: int = 0) -> Path:
    return log_dir / f"{topic}-{partition}" / f"{0:020d}.log"


def _read_all(proc: BrokerProcess, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
    return [(m.offset, m.message.payload) for m in partition_messages(proc, topic, partition)]


def _produce(proc: BrokerProcess, topic: str, values: list[bytes], per_send: int = 10) -> None:
    """``values`` in sends of ``per_send`` messages (acks=1)."""
    produce(proc, topic, [ProducerData(topic, messages=values[i : i + per_send]) for i in range(0, len(values), per_send)], per_send=1)


@pytest.fixture
def crash_broker(tmp_path):
    proc = BrokerProcess(log_dir=tmp_path / "logs", properties={"num.partitions": 1, "log.flush.interval.messages": 1, "log.segment.bytes": 64 * 1024})
    proc.start()
    yield proc
    proc.cleanup()


def _topic() -> str:
    return f"crash-{uuid.uuid4().hex[:8]}"


def test_kill9_under_produce_load_loses_no_acknowledged_record(crash_broker):
    topic = _topic()
    _produce(crash_broker, topic, [b"warm-up"], per_send=1)
    acked: list[bytes] = []
    stop = threading.Event()
    failure: list[BaseException] = []

    def load():
        config = {"metadata.broker.list": crash_broker.bootstrap, "producer.type": "sync", "request.required.acks": 1, "message.send.max.retries": 0, "request.timeout.ms": 5000}
        try:
            with Producer(config) as producer:
                i = 0
                while not stop.is_set():
                    batch = [f"r{i}-{j}".encode() for j in range(20)]
                    producer.send(ProducerData(topic, messages=batch))
                    acked.extend(batch)  # only after the broker acknowledged
                    i += 1
        except KafkaError as exc:  # the broker died under us: expected
            failure.append(exc)

    thread = threading.Thread(target=load, name="crash-load")
    thread.start()
    while len(acked) < 2000 and thread.is_alive():
        threading.Event().wait(0.01)
    crash_broker.kill()
    stop.set()
    thread.join(60)
    assert not thread.is_alive()
    assert len(acked) >= 2000

    crash_broker.start()
    stored = _read_all(crash_broker, topic)
    values = [v for _, v in stored]
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    assert [o for o, _ in stored] == list(range(len(stored)))
    # new writes continue right after what survived
    _produce(crash_broker, topic, [b"after-restart"], per_send=1)
    assert _read_all(crash_broker, topic)[-1] == (len(stored), b"after-restart")


def _fill_and_crash(proc: BrokerProcess, topic: str, n_sends: int = 30) -> list[bytes]:
    values = [f"v{i:05d}".encode() * 4 for i in range(n_sends * 5)]
    _produce(proc, topic, values, per_send=5)
    proc.kill()  # unclean: no clean-shutdown marker, so recovery runs
    return values


def _batch_bounds(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [(info.position, info.size) for info in scan_batches(data)]


def test_segment_truncated_mid_batch(crash_broker):
    topic = _topic()
    values = _fill_and_crash(crash_broker, topic)
    seg = _segment(crash_broker.log_dir, topic)
    bounds = _batch_bounds(seg)
    last_pos, last_size = bounds[-1]
    with open(seg, "r+b") as f:
        f.truncate(last_pos + last_size // 2)
    crash_broker.start()
    stored = _read_all(crash_broker, topic)
    assert [v for _, v in stored] == values[: len(values) - 5]
    assert "truncat" in crash_broker.output().lower()
    _produce(crash_broker, topic, [b"next"], per_send=1)
    assert _read_all(crash_broker, topic)[-1] == (len(values) - 5, b"next")


def test_random_bytes_appended_after_a_crash(crash_broker):
    topic = _topic()
    values = _fill_and_crash(crash_broker, topic)
    seg = _segment(crash_broker.log_dir, topic)
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(random.Random(7).randbytes(333))
    crash_broker.start()
    assert [v for _, v in _read_all(crash_broker, topic)] == values
    assert seg.stat().st_size == size
    assert "333" in crash_broker.output()
    _produce(crash_broker, topic, [b"next"], per_send=1)
    assert _read_all(crash_broker, topic)[-1] == (len(values), b"next")


def test_flipped_byte_inside_a_batch(crash_broker):
    topic = _topic()
    values = _fill_and_crash(crash_broker, topic)
    seg = _segment(crash_broker.log_dir, topic)
    bounds = _batch_bounds(seg)
    damaged = len(bounds) // 2
    pos, size = bounds[damaged]
    with open(seg, "r+b") as f:
        f.seek(pos + size - 3)  # inside the records, covered by the CRC
        b = f.read(1)
        f.seek(pos + size - 3)
        f.write(bytes([b[0] ^ 0xFF]))
    crash_broker.start()
    stored = _read_all(crash_broker, topic)
    assert [v for _, v in stored] == values[: damaged * 5]
    assert "truncat" in crash_broker.output().lower()
    _produce(crash_broker, topic, [b"next"], per_send=1)
    assert _read_all(crash_broker, topic)[-1] == (damaged * 5, b"next")


def test_deleted_index_is_rebuilt(crash_broker):
    topic = _topic()
    values = _fill_and_crash(crash_broker, topic, n_sends=400)
    index = _segment(crash_broker.log_dir, topic).with_suffix(".index")
    assert index.exists()
    index.unlink()
    crash_broker.start()
    assert index.exists()
    stored = _read_all(crash_broker, topic)
    assert [v for _, v in stored] == values
    # reads from the middle use the rebuilt index and land on the right record
    with SimpleConsumer(crash_broker.host, crash_broker.port) as consumer:
        middle = len(values) // 2 + 1
        first = next(iter(consumer.fetch(FetchRequest(topic, 0, middle, 4096))))
        assert (first.offset, first.message.payload) == (middle, values[middle])
