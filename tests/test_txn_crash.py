"""The transaction index and the transaction state survive SIGKILL at each
write stage (issue 29; KIP-98). The bundled broker is started with
``KCLIENT_CRASH_POINT`` naming one stage (`kclient.crash_point`): a
transactional data batch in the segment but the transaction state not
updated, a COMMIT / ABORT marker in the segment but its ``.txnindex`` entry
not written, the entry written but no producer state snapshot, a segment
rolled but its snapshot not taken, and a ``__transaction_state`` record of
each transition (Ongoing, PrepareCommit / PrepareAbort, CompleteCommit /
CompleteAbort) appended but not acknowledged. A confluent-kafka
transactional producer (a child process) drives the broker until it kills
itself; the broker restarts unarmed and then:

* the coordinator completes or aborts the transaction that was in flight
  (a PrepareCommit is committed, an Ongoing one aborted on its timeout);
  none stays Ongoing or Prepare*;
* the last stable offset equals the high watermark;
* confluent-kafka's and kclient's read_committed consumers read exactly the
  committed records (every acknowledged one), and read_uncommitted holds
  every acknowledged record (aborted ones included);
* each segment's ``.txnindex`` lists exactly the aborted transactions a
  replay of the partition's batches from offset 0 computes (Kafka's
  recovery), and the reopened log's open transactions and LSO match it.

One module-scoped broker, restarted per stage; waits are bounded by
conditions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers.raw import SocketClient
from helpers.transactions import kclient_values
from helpers.wait import wait_for

from kclient.client.admin import AdminClient
from kclient.crash_point import CRASH_POINT_ENV
from kclient.protocol.messages import LIST_OFFSETS
from kclient.storage import Log, LogConfig
from kclient.storage.txn_index import AbortedTxn
from kclient.storage.txn_state import TxnState, read_txn_batch
from kclient.testing import BrokerProcess

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(600)

SEGMENT_BYTES = 4096
TXN_TIMEOUT_MS = 6000

#: A transactional producer: ``bootstrap tid topic timeout op...``, each op
#: ``c|a:count:prefix:size`` (a transaction of ``count`` records, each
#: flushed, then committed or aborted). Prints ``acked <value>`` once a
#: record is acknowledged and ``ended <op>`` once the end returned.
_PRODUCER = r"""
import sys
import confluent_kafka as ck
boot, tid, topic, timeout, *ops = sys.argv[1:]
p = ck.Producer({"bootstrap.servers": boot, "transactional.id": tid, "transaction.timeout.ms": int(timeout), "linger.ms": 0})
p.init_transactions(60)
print("init", flush=True)
for op in ops:
    end, count, prefix, size = op.split(":")
    p.begin_transaction()
    for i in range(int(count)):
        value = ("%s-%d-" % (prefix, i)).encode().ljust(int(size), b".")
        p.produce(topic, value)
        assert p.flush(60) == 0
        print("acked", value.decode(), flush=True)
    (p.commit_transaction if end == "c" else p.abort_transaction)(60)
    print("ended", op, flush=True)
"""

#: (crash point, the transaction the armed broker sees, the outcome the
#: coordinator must reach: CompleteCommit / CompleteAbort).
STAGES = [
    ("txn.data.appended", "c:3:x:20", "CompleteAbort"),
    ("txn.marker.appended", "c:3:x:20", "CompleteCommit"),
    ("txn.marker.appended", "a:3:x:20", "CompleteAbort"),
    ("txn.index.appended", "a:3:x:20", "CompleteAbort"),
    ("log.rolled", "c:12:x:600", "CompleteAbort"),
    ("txn_state.appended.Ongoing", "c:3:x:20", "CompleteAbort"),
    ("txn_state.appended.PrepareCommit", "c:3:x:20", "CompleteCommit"),
    ("txn_state.appended.PrepareAbort", "a:3:x:20", "CompleteAbort"),
    ("txn_state.appended.CompleteCommit", "c:3:x:20", "CompleteCommit"),
    ("txn_state.appended.CompleteAbort", "a:3:x:20", "CompleteAbort"),
]

_SETTLED = {"CompleteCommit", "CompleteAbort", "Empty"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("txn-crash") / "logs"
    properties = {
        "num.partitions": 1,
        "log.segment.bytes": SEGMENT_BYTES,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    }
    with BrokerProcess(log_dir=log_dir, keep_port=True, properties=properties) as proc:
        yield proc


def run_producer(broker: BrokerProcess, tid: str, topic: str, *ops: str) -> subprocess.Popen[str]:
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != CRASH_POINT_ENV}
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.Popen(
        [sys.executable, "-c", _PRODUCER, broker.bootstrap, tid, topic, str(TXN_TIMEOUT_MS), *ops], stdout=subprocess.PIPE, text=True, cwd=root, env=env
    )


def acked_values(lines: list[str]) -> list[bytes]:
    return [line.split(" ", 1)[1].encode() for line in lines if line.startswith("acked ")]


def start_armed(broker: BrokerProcess, point: str | None) -> None:
    """Restart ``broker`` with ``point`` armed (None: unarmed)."""
    old = os.environ.pop(CRASH_POINT_ENV, None)
    assert old is None
    if point is not None:
        os.environ[CRASH_POINT_ENV] = point
    try:
        broker.start()
    finally:
        os.environ.pop(CRASH_POINT_ENV, None)


def last_offsets(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    """``(high watermark, last stable offset)`` by ListOffsets."""
    out = []
    with SocketClient(broker.host, broker.port, client_id="txn-crash", timeout=20) as c:
        for isolation in (0, 1):
            body = {
                "replica_id": -1,
                "isolation_level": isolation,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}],
            }
            part = c.request(LIST_OFFSETS, 5, body)["topics"][0]["partitions"][0]
            assert part["error_code"] == 0
            out.append(part["offset"])
    return out[0], out[1]


def ck_values(broker: BrokerProcess, topic: str, isolation: str, end: int) -> list[bytes]:
    """Every value confluent-kafka reads from ``topic`` under ``isolation``
    until its position reaches ``end`` (the log end: markers included)."""
    consumer = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"crash-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False, "isolation.level": isolation}
    )
    values: list[bytes] = []
    try:
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            position = consumer.position([ck.TopicPartition(topic, 0)])[0].offset
            if position >= end:
                return values
        raise AssertionError(f"{topic}: position never reached {end}; read {values}")
    finally:
        consumer.close()


def replayed(log: Log) -> tuple[list[tuple[int, int]], list[AbortedTxn]]:
    """The open transactions and aborted entries a replay of the log's
    batches from offset 0 computes."""
    state = TxnState()
    aborted: list[AbortedTxn] = []
    for seg in log.segments:
        for info, fields in seg.iter_batch_fields():
            if fields is not None and fields.producer_id >= 0:
                change = state.append(read_txn_batch(seg.read(info.position, info.size)))
                if change.aborted is not None:
                    aborted.append(change.aborted)
    return state.ongoing(), aborted


def check_files(directory: Path) -> int:
    """Each segment's ``.txnindex``, the open transactions and the LSO of
    the log in ``directory`` (broker stopped) against a replay; returns the
    number of aborted transactions."""
    log = Log(directory, LogConfig(segment_bytes=SEGMENT_BYTES))
    try:
        ongoing, aborted = replayed(log)
        assert ongoing == []
        assert log.ongoing_transactions() == ongoing
        assert log.aborted_transactions(0, log.log_end_offset) == aborted
        for seg in log.segments:
            assert seg.txn_index.all_aborted_txns() == [t for t in aborted if seg.base_offset <= t.last_offset < seg.next_offset]
        return len(aborted)
    finally:
        log.close()


@pytest.mark.parametrize(("point", "op", "outcome"), STAGES, ids=[f"{p}-{op[0]}" for p, op, _ in STAGES])
def test_sigkill_at_write_stage(broker, point, op, outcome):
    suffix = uuid.uuid4().hex[:6]
    topic, tid = f"crash-{suffix}", f"tid-{suffix}"
    # Before: a committed and an aborted transaction, then the broker restarts armed.
    before = run_producer(broker, tid, topic, "c:4:pre-c:20", "a:3:pre-a:20")
    out, _ = before.communicate(timeout=120)
    assert before.returncode == 0, out
    committed = [v for v in acked_values(out.splitlines()) if v.startswith(b"pre-c")]
    end_before = wait_for(lambda: (o := last_offsets(broker, topic))[0] == o[1] and o, "the pre-crash markers")[0]
    broker.stop()
    start_armed(broker, point)
    # The armed broker kills itself at ``point``; the producer is killed after it.
    child = run_producer(broker, tid, topic, op)
    try:
        wait_for(lambda: not broker.running, f"the broker to die at {point}", timeout=120)
    finally:
        child.kill()
        out, _ = child.communicate()
    acked = acked_values(out.splitlines())
    broker.kill()
    start_armed(broker, None)
    # The coordinator settles the transaction in flight.
    with AdminClient({"bootstrap.servers": broker.bootstrap, "default.api.timeout.ms": 30_000}) as admin:
        # While it is still open, the recovered log holds it open too: the
        # LSO stays at its first offset when its data reached the log.
        high, stable = last_offsets(broker, topic)
        if admin.describe_transactions([tid])[tid].state == "Ongoing":
            assert stable == (end_before if high > end_before else high), (point, high, stable, end_before)
        state = wait_for(
            lambda: (s := admin.describe_transactions([tid])[tid].state) in _SETTLED and s,
            f"{tid} to complete after the crash at {point}",
            timeout=60,
        )
        assert state == outcome
        stuck = [t for t in admin.list_transactions() if t.state not in _SETTLED]
        assert stuck == []
    if outcome == "CompleteCommit":
        committed += acked
        assert len(acked) == int(op.split(":")[1])
    high, stable = wait_for(lambda: (o := last_offsets(broker, topic))[0] == o[1] and o, "the LSO to reach the high watermark")
    assert stable == high
    assert ck_values(broker, topic, "read_committed", high) == committed
    assert kclient_values(broker, topic) == committed
    uncommitted = ck_values(broker, topic, "read_uncommitted", high)
    assert set(committed) | set(acked) <= set(uncommitted)
    broker.stop()
    try:
        aborted = check_files(broker.log_dir / f"{topic}-0")
        assert aborted >= 1
    finally:
        start_armed(broker, None)
