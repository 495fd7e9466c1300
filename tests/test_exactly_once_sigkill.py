"""Exactly-once consume-transform-produce under SIGKILL (issue 29):
``examples/exactly_once.py --worker`` is killed at random stages of its
transactions, many times, and restarted with the same ``transactional.id``;
a paused "zombie" resumed after its successor took over is fenced.

The output topic, read with ``isolation.level=read_committed`` (by
confluent-kafka, an independent reader), holds exactly one result for
every input record, none missing and none twice, and the group's committed
offsets are the input's end offsets. Every kill point is a stage line the
worker printed (a condition, never a time)."""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka as ck
import pytest

import kclient
from kclient.client.admin import AdminClient, NewTopic
from kclient.testing import BrokerProcess

pytestmark = pytest.mark.timeout(600)

APP = Path(__file__).resolve().parent.parent / "examples" / "exactly_once.py"
PARTITIONS = 3
STAGES = ("init", "begin", "produced", "offsets", "committing", "committed")
PROPERTIES = {
    "num.partitions": PARTITIONS,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
}


@pytest.fixture(scope="module")
def eos_broker():
    """One bundled broker for the module."""
    with BrokerProcess(properties=PROPERTIES) as proc:
        yield proc


class Worker:
    """One ``exactly_once.py --worker`` process and the lines it printed."""

    def __init__(self, broker: BrokerProcess, source: str, sink: str, group: str, transactional_id: str, log: Path) -> None:
        self.stderr = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, str(APP), "--worker", broker.bootstrap, source, sink, group, transactional_id],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_line(self, wanted: str, timeout: float = 120.0) -> bool:
        """Read lines until one starts with ``wanted`` (True) or the
        process ended (False)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no {wanted!r} line in {timeout} s; lines: {self.lines[-10:]}"
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                return False
            self.lines.append(line)
            if line == wanted or line.startswith((wanted + " ", wanted + ":")):
                return True

    def finish(self, timeout: float = 120.0) -> int:
        """Wait for the process to end; its exit status."""
        while self.wait_for_line("\0never", timeout):
            pass
        status = self.proc.wait(timeout)
        self.stderr.close()
        return status

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.stderr.close()


def make_topics(broker: BrokerProcess, per_partition: int) -> tuple[str, str, dict[str, bytes]]:
    """Source and sink topics; the source filled. Returns the topics and
    ``{"partition:offset": value}`` of every source record."""
    run = uuid.uuid4().hex[:8]
    source, sink = f"eos-in-{run}", f"eos-out-{run}"
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(source, PARTITIONS, 1), NewTopic(sink, PARTITIONS, 1)])
    inputs: dict[str, bytes] = {}
    with kclient.Producer({"bootstrap.servers": broker.bootstrap, "request.required.acks": -1}) as producer:
        for p in range(PARTITIONS):
            values = [f"order {p}-{i}".encode() for i in range(per_partition)]
            producer.send([kclient.ProducerData(source, None, [v], partition=p) for v in values])
            inputs.update({f"{p}:{i}": v for i, v in enumerate(values)})
    return source, sink, inputs


def read_committed(broker: BrokerProcess, topic: str, expected: int) -> list[tuple[str, bytes]]:
    """Every record confluent-kafka reads from ``topic`` with
    ``read_committed``: until ``expected`` came and every partition's
    position reached its high watermark."""
    consumer = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False, "isolation.level": "read_committed"}
    )
    out: list[tuple[str, bytes]] = []
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        highs = {p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append((msg.key().decode(), msg.value()))
            if len(out) >= expected:
                positions = consumer.position([ck.TopicPartition(topic, p) for p in range(PARTITIONS)])
                if all(tp.offset >= highs[tp.partition] or tp.offset < 0 and highs[tp.partition] == 0 for tp in positions):
                    break
                # Past the last data record only aborted records and markers
                # remain; a few more polls must bring nothing.
                settle = time.monotonic() + 2
                while time.monotonic() < settle:
                    msg = consumer.poll(0.2)
                    if msg is not None and msg.error() is None:
                        out.append((msg.key().decode(), msg.value()))
                break
    finally:
        consumer.close()
    return out


def kclient_read_committed(broker: BrokerProcess, topic: str) -> list[tuple[str, bytes]]:
    """The same with kclient's own `Consumer` (``isolation.level=read_committed``),
    up to the last stable offset of each partition."""
    out: list[tuple[str, bytes]] = []
    with kclient.Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": "read_committed", "auto.offset.reset": "earliest"}) as consumer:
        partitions = [kclient.TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + 120
        while any(consumer.position(tp) < ends[tp] for tp in partitions) and time.monotonic() < deadline:
            out += [(r.key.decode(), r.value) for r in consumer.poll(timeout_ms=200)]
    return out


def check_exactly_once(broker: BrokerProcess, source: str, sink: str, group: str, inputs: dict[str, bytes], story: str) -> None:
    results = read_committed(broker, sink, len(inputs))
    assert sorted(kclient_read_committed(broker, sink)) == sorted(results), story
    keys = [k for k, _ in results]
    missing = set(inputs) - set(keys)
    twice = sorted({k for k in keys if keys.count(k) > 1})
    assert not missing and not twice and len(keys) == len(inputs), f"{len(missing)} missing, {len(twice)} twice ({twice[:5]}); {story}"
    assert all(value == b"invoice for " + inputs[key] for key, value in results), story
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets(group)
    per_partition = len(inputs) // PARTITIONS
    assert committed == {(source, p): per_partition for p in range(PARTITIONS)}, story


def test_killed_at_random_stages_many_times_every_record_is_processed_exactly_once(eos_broker, tmp_path):
    seed = int(os.environ.get("KCLIENT_EOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    source, sink, inputs = make_topics(eos_broker, 150)
    group, tid = f"eos-{source}", f"eos-tx-{source}"
    kills: list[str] = []
    for _ in range(14):
        stage = rng.choice(STAGES)
        point = stage if stage == "init" else f"{stage} {rng.randint(1, 3)}"
        worker = Worker(eos_broker, source, sink, group, tid, tmp_path / "worker.log")
        if not worker.wait_for_line(point):
            assert worker.finish() == 0, f"{worker.lines[-5:]}; seed {seed}"
            break  # everything was processed before this kill point
        worker.kill()
        kills.append(point)
    final = Worker(eos_broker, source, sink, group, tid, tmp_path / "worker.log")
    status = final.finish(300)
    story = f"seed {seed}, killed at {kills}"
    assert status == 0 and final.lines[-1] == "done", f"{final.lines[-5:]}; {story}\n{(tmp_path / 'worker.log').read_text()[-3000:]}"
    assert len(kills) >= 8, story  # most of the kills happened before the input ran out
    check_exactly_once(eos_broker, source, sink, group, inputs, story)


def test_a_paused_zombie_resumed_after_its_successor_is_fenced_and_writes_nothing_visible(eos_broker, tmp_path):
    source, sink, inputs = make_topics(eos_broker, 40)
    group, tid = f"eos-{source}", f"eos-tx-{source}"
    zombie = Worker(eos_broker, source, sink, group, tid, tmp_path / "zombie.log")
    assert zombie.wait_for_line("produced 2")
    zombie.proc.send_signal(signal.SIGSTOP)  # mid-transaction: records sent, nothing committed
    try:
        successor = Worker(eos_broker, source, sink, group, tid, tmp_path / "successor.log")
        assert successor.finish(300) == 0, successor.lines[-5:]
        assert successor.lines[-1] == "done"
    finally:
        zombie.proc.send_signal(signal.SIGCONT)
    status = zombie.finish(120)
    assert status == 3 and zombie.lines[-1].startswith("fenced"), f"{status}: {zombie.lines[-5:]}\n{(tmp_path / 'zombie.log').read_text()[-3000:]}"
    assert "committed 2" not in zombie.lines
    check_exactly_once(eos_broker, source, sink, group, inputs, "zombie paused at 'produced 2'")
