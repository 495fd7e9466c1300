"""The log's transaction state survives SIGKILL (KIP-98): a writer process
appends transactional batches, COMMIT / ABORT markers and plain batches
to a `kclient.storage.Log` (rolling segments, so producer snapshots are
taken) and is killed at an arbitrary point; the reopened log's open
transactions, last stable offset and ``.txnindex`` entries equal those
computed from scratch from the batches it holds. Several rounds, each
writer going on from the recovered log.

Real files and real processes; waits bounded by the writer's own output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kclient.storage import Log, LogConfig
from kclient.storage.txn_index import AbortedTxn
from kclient.storage.txn_state import TxnState, read_txn_batch

_WRITER = r"""
import random, sys
from kclient.protocol.records.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kclient.protocol.records.v2 import build_batch
from kclient.storage import Log, LogConfig

log = Log(sys.argv[1], LogConfig(segment_bytes=1500))
rng = random.Random(int(sys.argv[2]))
open_txn = {pid: False for pid in (1, 2, 3)}
seq = {pid: 0 for pid in (1, 2, 3)}
for pid, first in log.ongoing_transactions():
    open_txn[pid] = True
for pid in seq:
    last = log.producer_state.last_sequence(pid)
    seq[pid] = 0 if last is None else last + 1
n = 0
while True:
    pid = rng.choice((1, 2, 3))
    roll = rng.random()
    if open_txn[pid] and roll < 0.3:
        kind = COMMIT if roll < 0.15 else ABORT
        log.append(build_end_txn_marker_batch(EndTransactionMarker(kind, 1), producer_id=pid, producer_epoch=0, timestamp_ms=1_000))
        open_txn[pid] = False
    elif roll < 0.8:
        count = rng.randint(1, 3)
        rows = [(None, b"t%d" % i, 1_000) for i in range(count)]
        log.append(build_batch(rows, producer_id=pid, producer_epoch=0, base_sequence=seq[pid], is_transactional=True), validate_producer_state=True)
        seq[pid] += count
        open_txn[pid] = True
    else:
        log.append(build_batch([(None, b"plain", 1_000)]))
    n += 1
    print(n, flush=True)
"""


def expected(log: Log) -> tuple[list[tuple[int, int]], list[AbortedTxn]]:
    """The open transactions and aborted entries, replayed from offset 0."""
    state = TxnState()
    aborted: list[AbortedTxn] = []
    for seg in log.segments:
        for info, fields in seg.iter_batch_fields():
            if fields is not None and fields.producer_id >= 0:
                change = state.append(read_txn_batch(seg.read(info.position, info.size)))
                if change.aborted is not None:
                    aborted.append(change.aborted)
    return state.ongoing(), aborted


def test_sigkill_mid_appends_recovers_the_txn_state(tmp_path):
    root = Path(__file__).resolve().parent.parent
    directory = tmp_path / "t-0"
    for round_, target in enumerate((150, 90, 200, 60, 120)):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(directory), str(round_)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        assert child.stdout is not None
        for line in child.stdout:
            if int(line) >= target:
                break
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        log = Log(directory, LogConfig(segment_bytes=1500))
        try:
            assert len(log.segments) > 1
            ongoing, aborted = expected(log)
            assert log.ongoing_transactions() == ongoing
            assert log.aborted_transactions(0, log.log_end_offset) == aborted
            first = min((offset for _, offset in ongoing), default=log.high_watermark)
            assert log.last_stable_offset == min(first, log.high_watermark)
            # every segment's .txnindex holds just the ABORT markers it holds
            for seg in log.segments:
                upper = seg.next_offset
                assert seg.txn_index.all_aborted_txns() == [t for t in aborted if seg.base_offset <= t.last_offset < upper]
        finally:
            log.close()
