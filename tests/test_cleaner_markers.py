"""The log cleaner removes transaction markers after ``delete.retention.ms``
(issue 29; KIP-98, KIP-534; Kafka's ``Cleaner.cleanInto`` and
``CleanedTransactionMetadata``): on a compacted log, a COMMIT / ABORT
marker stays while a batch of its transaction is in the log; the first
cleaning that finds none sets the marker batch's delete horizon (its time
plus ``delete.retention.ms``, attribute bit 6 with the base timestamp
holding it) and a cleaning at or after the horizon drops it. An aborted
transaction leaves the ``.txnindex`` once its data is gone. A read_committed
reader sees exactly the committed records at every step, and a log reopened
from offset 0 finds no open transaction.

Real files, no process (the broker-level test with confluent-kafka and
kclient consumers is in tests/test_cleaner_markers_broker.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kclient.protocol.records.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kclient.protocol.records.read_committed import committed_batches
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import build_batch, decode_records, read_header
from kclient.storage import Log, LogConfig
from kclient.storage.batch_filter import stamp_delete_horizon
from kclient.storage.cleaner import clean_log

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000
RETENTION = 60_000


def config() -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=400, index_interval_bytes=128, delete_retention_ms=RETENTION)


class Writer:
    """Transactional appends with per-producer sequence numbers."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def txn(self, pid: int, rows: list[tuple[bytes, bytes]]) -> int:
        seq = self.seq.get(pid, 0)
        batch = build_batch([(k, v, T0) for k, v in rows], producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
        self.seq[pid] = seq + len(rows)
        return self.log.append(batch, validate_producer_state=True).base_offset

    def end(self, pid: int, commit: bool) -> int:
        marker = EndTransactionMarker(COMMIT if commit else ABORT, 0)
        return self.log.append(build_end_txn_marker_batch(marker, producer_id=pid, producer_epoch=0, timestamp_ms=T0)).base_offset


def read_committed(log: Log) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` of every record a read_committed reader gets."""
    out: list[tuple[bytes, bytes]] = []
    offset, stable = log.log_start_offset, log.last_stable_offset
    while offset < stable:
        data = log.read(offset, 1 << 20, max_offset=stable).records
        if not data:
            break
        aborted = [t.as_aborted_transaction() for t in log.aborted_transactions(offset, stable)]
        visible = committed_batches(data, aborted, stable)
        out += [(k, v) for _o, _t, k, v, _h in decode_records_all(visible)]
        offset = max(info.last_offset for info in scan_batches(data)) + 1
    return out


def decode_records_all(data: bytes) -> list[tuple]:
    rows: list[tuple] = []
    for info in scan_batches(data):
        rows += decode_records(data[info.position : info.position + info.size])
    return rows


def markers(log: Log) -> dict[int, int | None]:
    """Control batches in the log: ``base offset -> delete horizon``."""
    out: dict[int, int | None] = {}
    for seg in log.segments:
        data = seg.log_path.read_bytes()
        for info in scan_batches(data):
            header = read_header(data, info.position)
            if header.is_control and header.records_count:
                out[info.base_offset] = header.delete_horizon_ms
    return out


def aborted_index(log: Log) -> list[tuple[int, int]]:
    return [(t.producer_id, t.first_offset) for seg in log.segments for t in seg.txn_index.all_aborted_txns()]


def test_stamp_delete_horizon_keeps_every_record_and_timestamp():
    batch = build_batch([(b"k", b"v", T0 + 5), (b"k2", None, T0 + 9)], producer_id=4, producer_epoch=1, base_sequence=3, is_transactional=True)
    stamped = stamp_delete_horizon(batch, T0 + RETENTION)
    header, before = read_header(stamped), read_header(batch)
    assert header.delete_horizon_ms == T0 + RETENTION and before.delete_horizon_ms is None
    assert (header.max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence, header.records_count) == (T0 + 9, 4, 1, 3, 2)
    assert header.is_transactional and header.attributes & ~0x40 == before.attributes
    assert decode_records(stamped) == decode_records(batch)


LATEST = [(b"k1", b"c1"), (b"k2", b"c2"), (b"k3", b"d3"), (b"k4", b"e4"), (b"k5", b"p5"), (b"k6", b"active")]


def scenario(directory: Path) -> tuple[Log, dict[str, int]]:
    """Transactions A (committed, later wholly superseded by C), B
    (aborted), C, D (committed), E (committed, producer 2's last batch),
    a plain record, then an active segment; returns the log and the
    offsets of the markers (``"A"`` ...) and of B's first record (``"b"``)."""
    log = Log(directory, config())
    w = Writer(log)
    at: dict[str, int] = {}
    w.txn(1, [(b"k1", b"a1"), (b"k2", b"a2")])
    at["A"] = w.end(1, True)
    at["b"] = w.txn(2, [(b"k1", b"b1"), (b"k9", b"b9")])
    at["B"] = w.end(2, False)
    w.txn(1, [(b"k1", b"c1"), (b"k2", b"c2")])
    at["C"] = w.end(1, True)
    w.txn(3, [(b"k3", b"d3")])
    at["D"] = w.end(3, True)
    w.txn(2, [(b"k4", b"e4")])
    at["E"] = w.end(2, True)
    log.append(build_batch([(b"k5", b"p5", T0)]))
    log.roll()
    log.append(build_batch([(b"k6", b"active", T0)]))
    return log, at


def test_markers_go_after_their_data_and_delete_retention(tmp_path: Path):
    directory = tmp_path / "t-0"
    log, at = scenario(directory)
    commit_a, abort_b, commit_c, commit_d, commit_e, b_first = at["A"], at["B"], at["C"], at["D"], at["E"], at["b"]
    committed = [(b"k1", b"a1"), (b"k2", b"a2"), (b"k1", b"c1"), (b"k2", b"c2"), (b"k3", b"d3"), (b"k4", b"e4"), (b"k5", b"p5"), (b"k6", b"active")]
    assert read_committed(log) == committed
    assert aborted_index(log) == [(2, b_first)]
    all_markers = {commit_a: None, abort_b: None, commit_c: None, commit_d: None, commit_e: None}
    assert markers(log) == all_markers
    latest = LATEST

    # 1: A's superseded records and B's aborted ones go; every marker stays
    # (this round saw a batch of each transaction), B stays indexed.
    t1 = T0 + 1_000
    result = clean_log(log, None, now_ms=t1, force=True)
    assert result is not None and result.markers_removed == 0
    assert read_committed(log) == latest
    assert markers(log) == all_markers
    assert aborted_index(log) == [(2, b_first)]

    # 2: A and B have no batch left: their markers get a delete horizon,
    # B leaves the index; C, D, E (data left) are untouched.
    t2 = T0 + 2_000
    result = clean_log(log, None, now_ms=t2, force=True)
    assert result is not None and result.markers_removed == 0
    assert markers(log) == {**all_markers, commit_a: t2 + RETENTION, abort_b: t2 + RETENTION}
    assert aborted_index(log) == []
    assert read_committed(log) == latest

    # 3: before the horizon nothing changes (the horizon is not reset).
    result = clean_log(log, None, now_ms=t2 + RETENTION - 1, force=True)
    assert result is not None and result.markers_removed == 0
    assert markers(log) == {**all_markers, commit_a: t2 + RETENTION, abort_b: t2 + RETENTION}

    # 4: at the horizon, A's and B's markers go; the others stay.
    result = clean_log(log, None, now_ms=t2 + RETENTION, force=True)
    assert result is not None and result.markers_removed == 2
    assert markers(log) == {commit_c: None, commit_d: None, commit_e: None}
    assert read_committed(log) == latest
    assert log.ongoing_transactions() == []
    log.close()

    # A log recovered from offset 0 finds no open transaction and the same view.
    again = Log(directory, config(), recovery_point=0)
    try:
        assert again.ongoing_transactions() == []
        assert again.last_stable_offset == again.high_watermark
        assert read_committed(again) == latest
        assert markers(again) == {commit_c: None, commit_d: None, commit_e: None}
    finally:
        again.close()


def test_marker_of_a_producers_last_batch_stays(tmp_path: Path):
    """A transaction whose last batch is its producer's last stays as an
    empty batch (the producer's sequence survives, KIP-98), so its marker
    stays too: Kafka's cleaner keeps them both while the producer is
    known."""
    log = Log(tmp_path / "t-0", config())
    w = Writer(log)
    w.txn(7, [(b"k1", b"old")])
    marker = w.end(7, True)
    log.append(build_batch([(b"k1", b"new", T0)]))  # supersedes producer 7's only record
    log.roll()
    log.append(build_batch([(b"k2", b"active", T0)]))
    for now in (T0 + 1_000, T0 + 2_000, T0 + 3 * RETENTION):
        result = clean_log(log, None, now_ms=now, force=True)
        assert result is not None and result.markers_removed == 0
        assert markers(log) == {marker: None}
    assert read_committed(log) == [(b"k1", b"new"), (b"k2", b"active")]
    log.close()


def test_aborted_batch_kept_empty_goes_once_the_producer_wrote_again(tmp_path: Path):
    """An aborted transaction's batch that was its producer's last stays
    empty (KIP-98) and keeps its ABORT marker; once the producer wrote
    again, a cleaning drops the empty batch, the next one gives the marker
    its delete horizon and one after the horizon drops it."""
    log = Log(tmp_path / "t-0", config())
    w = Writer(log)
    w.txn(2, [(b"k9", b"b9")])
    abort_b = w.end(2, False)
    log.append(build_batch([(b"k5", b"p5", T0)]))
    log.roll()
    log.append(build_batch([(b"k6", b"x", T0)]))
    t1 = T0 + 1_000
    assert clean_log(log, None, now_ms=t1, force=True) is not None
    assert markers(log) == {abort_b: None}
    assert [read_header(log.read(0, 1 << 20).records).records_count] == [0]  # kept, empty
    w.txn(2, [(b"k4", b"e4")])
    commit_e = w.end(2, True)
    log.roll()
    log.append(build_batch([(b"k7", b"active", T0)]))
    for now, expected in (
        (t1 + 1, {abort_b: None, commit_e: None}),  # the empty batch goes; this round saw it
        (t1 + 2, {abort_b: t1 + 2 + RETENTION, commit_e: None}),
        (t1 + 2 + RETENTION, {commit_e: None}),
    ):
        assert clean_log(log, None, now_ms=now, force=True) is not None
        assert markers(log) == expected
    assert read_committed(log) == [(b"k5", b"p5"), (b"k6", b"x"), (b"k4", b"e4"), (b"k7", b"active")]
    assert log.ongoing_transactions() == []
    log.close()


class Crash(Exception):
    pass


@pytest.mark.parametrize("stage", ["cleaned", "swap"])
@pytest.mark.parametrize("round_", [1, 2, 3])
def test_a_crash_mid_cleaning_keeps_the_transactions_consistent(tmp_path: Path, round_: int, stage: str):
    """The process dies in cleaning round ``round_`` (1: aborted data
    removed, 2: horizons set and B's index entry dropped, 3: markers
    removed) with the cleaned files written (``cleaned``) or committed but
    not swapped in (``swap``). The log reopened from offset 0 gives the same
    read_committed view, no open transaction, the LSO at the high
    watermark, markers between the states before and after that round; a
    cleaning at the horizon then ends as without the crash."""
    directory = tmp_path / "t-0"
    log, at = scenario(directory)
    times = [T0 + 1_000, T0 + 2_000, T0 + 2_000 + RETENTION]
    before: dict[int, int | None] = {}
    for i, now in enumerate(times[: round_ - 1]):
        assert clean_log(log, None, now_ms=now, force=True) is not None, i
    before = markers(log)

    def hook(name: str) -> None:
        if name == stage:
            raise Crash(name)

    with pytest.raises(Crash):
        clean_log(log, None, now_ms=times[round_ - 1], force=True, hook=hook)
    for seg in log.segments:  # (no close: the process "died")
        seg.close()
    again = Log(directory, config(), recovery_point=0)
    try:
        view = read_committed(again)
        if round_ == 1:  # (A's superseded records may still be there; no aborted one is visible)
            assert set(LATEST) <= set(view) <= set(LATEST) | {(b"k1", b"a1"), (b"k2", b"a2")}
        else:
            assert view == LATEST
        assert again.ongoing_transactions() == []
        assert again.last_stable_offset == again.high_watermark
        now = markers(again)
        assert {at["C"], at["D"], at["E"]} <= set(now) <= set(before)
        assert all(now[o] == before[o] or before[o] is None for o in now)
        for i in range(round_ - 1, 3):
            assert clean_log(again, None, now_ms=times[i], force=True) is not None
        assert markers(again) == {at["C"]: None, at["D"]: None, at["E"]: None}
        assert read_committed(again) == LATEST
        assert [seg.txn_index.all_aborted_txns() for seg in again.segments] == [[] for _ in again.segments]
    finally:
        again.close()
