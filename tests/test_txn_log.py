"""The transaction state wired into the log (KIP-98): each segment's
``.txnindex`` lifecycle, the last stable offset on appends, high watermark
moves, truncation and reload, and the open transactions a producer state
snapshot keeps.

Real files under tmp_path, no mocks, no processes.
"""

from __future__ import annotations

import pytest

from kclient.errors import InvalidTxnStateError
from kclient.protocol.records import iter_record_set
from kclient.protocol.records.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kclient.protocol.records.v2 import build_batch
from kclient.storage import Log, LogConfig, LogSegment
from kclient.storage.log_files import TXN_INDEX_SUFFIX
from kclient.storage.txn_index import AbortedTxn

pytestmark = pytest.mark.unit


def txn_batch(pid: int, seq: int, n: int = 2, *, transactional: bool = True) -> bytes:
    rows = [(b"k", b"v%d" % i, 1_000) for i in range(n)]
    return build_batch(rows, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=transactional)


def marker(pid: int, control_type: int, base_offset: int = 0) -> bytes:
    return build_end_txn_marker_batch(
        EndTransactionMarker(control_type, 5), producer_id=pid, producer_epoch=0, timestamp_ms=1_000, base_offset=base_offset
    )


def test_segment_txn_index_lifecycle(tmp_path):
    seg = LogSegment.create(tmp_path, 0)
    path = tmp_path / f"{0:020d}{TXN_INDEX_SUFFIX}"
    assert seg.txn_index.path == path and len(seg.txn_index) == 0
    seg.append(txn_batch(1, 0, 3), 0, 2, now_ms=1_000)
    seg.append(marker(1, ABORT, 3), 3, 3, now_ms=1_000)
    seg.txn_index.append(AbortedTxn(1, 0, 3, 4))
    seg.flush()
    assert path.stat().st_size == 34
    seg.close()
    again = LogSegment.open(tmp_path, 0)
    assert again.txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 3, 4)]
    again.truncate_to(3)  # the marker goes, its entry too
    assert len(again.txn_index) == 0 and path.stat().st_size == 0
    again.txn_index.append(AbortedTxn(1, 0, 2, 3))
    again.delete()
    assert not path.exists() and not list(tmp_path.iterdir())
    # A leftover .txnindex without its log is reset when the segment is created again.
    path.write_bytes(AbortedTxn(9, 0, 1, 2).encode())
    fresh = LogSegment.create(tmp_path, 0)
    assert len(fresh.txn_index) == 0
    fresh.close()


def test_log_lso_abort_index_and_reload(tmp_path):
    log = Log(tmp_path, LogConfig())
    log.append(txn_batch(1, 0), validate_producer_state=True)  # 0..1, pid 1 open
    log.append(build_batch([(None, b"plain", 1_000)]))  # 2
    log.append(txn_batch(2, 0), validate_producer_state=True)  # 3..4, pid 2 open
    assert log.high_watermark == 5 and log.last_stable_offset == 0
    assert log.ongoing_transactions() == [(1, 0), (2, 3)]
    with pytest.raises(InvalidTxnStateError):
        log.append(txn_batch(1, 2, transactional=False), validate_producer_state=True)
    assert log.log_end_offset == 5
    log.append(marker(1, COMMIT))  # 5
    assert log.last_stable_offset == 3
    log.append(marker(2, ABORT))  # 6
    assert log.last_stable_offset == 7
    assert log.aborted_transactions(0, 7) == [AbortedTxn(2, 3, 6, 7)]
    assert log.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(2, 3, 6, 7)]
    log.append(txn_batch(1, 2), validate_producer_state=True)  # 7..8 open again
    assert log.last_stable_offset == 7
    log.close()
    # Reload after a clean close: the snapshot keeps the open transaction.
    log = Log(tmp_path, LogConfig(), clean_shutdown=True, high_watermark=9)
    assert log.ongoing_transactions() == [(1, 7)]
    assert log.last_stable_offset == 7
    assert log.aborted_transactions(0, 9) == [AbortedTxn(2, 3, 6, 7)]
    # Truncation below the ABORT marker removes its entry and reopens pid 2.
    log.truncate_to(6)
    assert log.aborted_transactions(0, 9) == []
    assert log.ongoing_transactions() == [(2, 3)]
    log.close()


def test_log_recovers_txn_state_without_snapshot(tmp_path):
    log = Log(tmp_path, LogConfig())
    log.append(txn_batch(3, 0), validate_producer_state=True)
    log.append(marker(3, ABORT))
    log.append(txn_batch(4, 0), validate_producer_state=True)
    index = log.active_segment.txn_index.path
    log.close()
    for snapshot in tmp_path.glob("*.snapshot"):
        snapshot.unlink()
    index.unlink()  # as if a crash lost it
    log = Log(tmp_path, LogConfig())
    assert log.ongoing_transactions() == [(4, 3)]
    assert log.aborted_transactions(0, 10) == [AbortedTxn(3, 0, 2, 3)]
    assert index.stat().st_size == 34
    log.close()


def test_follower_append_feeds_txn_state(tmp_path):
    leader = Log(tmp_path / "leader", LogConfig())
    leader.append(txn_batch(7, 0), validate_producer_state=True)
    leader.append(marker(7, ABORT))
    leader.append(txn_batch(8, 0), validate_producer_state=True)
    follower = Log(tmp_path / "follower", LogConfig())
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    assert follower.ongoing_transactions() == [(8, 3)]
    assert follower.aborted_transactions(0, 5) == [AbortedTxn(7, 0, 2, 3)]
    leader.close()
    follower.close()


def test_deleted_segment_renames_its_txn_index_while_referenced(tmp_path):
    seg = LogSegment.create(tmp_path, 0)
    seg.append(txn_batch(1, 0, 1), 0, 0, now_ms=1_000)
    seg.txn_index.append(AbortedTxn(1, 0, 0, 1))
    assert seg.try_acquire()
    seg.delete()
    assert seg.txn_index.path.name == f"{0:020d}{TXN_INDEX_SUFFIX}.deleted"
    assert seg.txn_index.path.exists()
    seg.release()
    assert not list(tmp_path.iterdir())


def test_loader_removes_a_txn_index_without_its_log(tmp_path):
    log = Log(tmp_path, LogConfig())
    log.append(txn_batch(1, 0), validate_producer_state=True)
    log.close()
    stray = tmp_path / f"{500:020d}{TXN_INDEX_SUFFIX}"
    stray.write_bytes(AbortedTxn(1, 0, 500, 501).encode())
    log = Log(tmp_path, LogConfig(), clean_shutdown=True)
    assert not stray.exists()
    assert log.ongoing_transactions() == [(1, 0)]
    log.close()


def test_snapshot_keeps_open_transactions_and_reads_older_snapshots(tmp_path):
    from kclient.storage.producer_state import ProducerStateManager

    state = ProducerStateManager(tmp_path)
    state.take_snapshot(10)  # no source: an older snapshot's layout
    state.ongoing_txns = lambda: [(4, 7), (2, 9)]
    state.take_snapshot(20)
    again = ProducerStateManager(tmp_path)
    assert again.load_latest_snapshot(20) == 20 and again.loaded_snapshot == (20, [(4, 7), (2, 9)])
    assert again.load_latest_snapshot(15) == 10 and again.loaded_snapshot == (10, [])  # (deletes the one at 20)


def test_retention_past_a_completed_transaction_keeps_the_lso(tmp_path):
    log = Log(tmp_path, LogConfig(segment_bytes=200))
    log.append(txn_batch(1, 0), validate_producer_state=True)
    log.append(marker(1, ABORT))
    for seq in range(2, 8):
        log.append(txn_batch(2, seq - 2, 1), validate_producer_state=True)
    assert len(log.segments) > 2
    assert log.last_stable_offset == 3
    log.delete_old_segments(lambda seg: seg.base_offset < 3)
    assert log.log_start_offset == 3 and log.last_stable_offset == 3
    assert log.ongoing_transactions() == [(2, 3)]
    log.close()


def test_cleaning_keeps_the_aborted_transactions_indexed(tmp_path):
    from kclient.storage.cleaner import clean_log

    log = Log(tmp_path, LogConfig(cleanup_policy="compact", segment_bytes=300))
    for i in range(4):
        log.append(build_batch([(b"k", b"plain%d" % i, 1_000)]))
    log.append(txn_batch(3, 0, 1), validate_producer_state=True)
    log.append(marker(3, ABORT))
    for i in range(4):
        log.append(build_batch([(b"k", b"later%d" % i, 1_000)]))
    log.roll()
    before = log.aborted_transactions(0, log.log_end_offset)
    assert before == [AbortedTxn(3, 4, 5, 6)]
    assert b"v0" in [r.value for seg in log.segments for r in iter_record_set(seg.read(0, seg.size))]
    result = clean_log(log, None, now_ms=2_000, force=True)
    assert result is not None and result.segments_read > 1
    assert log.aborted_transactions(0, log.log_end_offset) == before
    # The aborted record is gone (its batch stays empty: the producer's last);
    # compaction keeps the latest plain value, the marker stays.
    values = [r.value for seg in log.segments for r in iter_record_set(seg.read(0, seg.size))]
    assert b"v0" not in values and values[-1] == b"later3"
    assert result.records_removed >= 1
    log.close()
    log = Log(tmp_path, LogConfig(cleanup_policy="compact", segment_bytes=300), clean_shutdown=True)
    assert log.aborted_transactions(0, log.log_end_offset) == before
    log.close()


def test_completed_transactions_are_forgotten_once_below_the_high_watermark(tmp_path):
    log = Log(tmp_path, LogConfig())
    for i in range(50):
        log.append(txn_batch(5, 2 * i), validate_producer_state=True)
        log.append(marker(5, COMMIT if i % 2 else ABORT))
    # (nobody asked for the LSO: the appends themselves pruned the state)
    assert log._txn_state.first_unstable_offset() is None
    assert log.last_stable_offset == log.high_watermark == 150
    assert len(log.aborted_transactions(0, 150)) == 25
    log.close()
