"""A partition's transaction state (KIP-98; Kafka's ``ProducerStateManager``
ongoing / unreplicated transactions and the last stable offset) and the
read_committed rule of Kafka's consumer, on real v2 batches and control
markers.

No processes; one test walks a real file under tmp_path.
"""

from __future__ import annotations

import pytest
from helpers.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.errors import CorruptRecordError, InvalidTxnStateError
from kclient.protocol.records import codecs
from kclient.protocol.records.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch, encode_control_key
from kclient.protocol.records.legacy import build_entry, build_message
from kclient.protocol.records.read_committed import (
    ABORTED,
    CONTROL,
    UNSTABLE,
    VISIBLE,
    AbortedTransactionFilter,
    committed_batches,
    decide_batches,
)
from kclient.protocol.records.v2 import build_batch, iter_records, read_header
from kclient.storage.batch_walk import walk_batches
from kclient.storage.handles import CachedFile
from kclient.storage.txn_index import AbortedTxn, TransactionIndex
from kclient.storage.txn_state import CompletedTxn, TxnAppend, TxnBatch, TxnState, control_type_of, read_txn_batch, rebuild_txn_index, txn_batches

pytestmark = pytest.mark.unit


def data(pid: int, base: int, last: int | None = None, txn: bool = True) -> TxnBatch:
    return TxnBatch(pid, txn, False, None, base, base if last is None else last)


def marker(pid: int, offset: int, control_type: int) -> TxnBatch:
    return TxnBatch(pid, True, True, control_type, offset, offset)


# ---------------------------------------------------------------- TxnState


def test_commit_sequence():
    s = TxnState()
    assert s.append(data(7, 0, 2)) == TxnAppend()
    assert s.ongoing() == [(7, 0)] and s.current_txn_first_offset(7) == 0
    assert s.append(data(7, 3, 4)) == TxnAppend()  # same transaction
    assert s.ongoing() == [(7, 0)] and len(s) == 1
    assert s.last_stable_offset(high_watermark=5) == 0
    done = s.append(marker(7, 5, COMMIT))
    assert done == TxnAppend(CompletedTxn(7, 0, 5, False), None)
    assert s.ongoing() == [] and s.first_undecided_offset() is None
    # The marker is not below the high watermark yet: still unstable.
    assert s.first_unstable_offset() == 0 and s.last_stable_offset(high_watermark=5) == 0
    s.on_high_watermark_updated(6)
    assert s.first_unstable_offset() is None and s.last_stable_offset(high_watermark=6) == 6


def test_abort_yields_the_index_entry_with_the_lso_of_that_moment():
    s = TxnState()
    s.append(data(1, 0, 1))
    done = s.append(marker(1, 2, ABORT))
    assert done.completed == CompletedTxn(1, 0, 2, True)
    assert done.aborted == AbortedTxn(1, 0, 2, 3)  # alone: marker + 1
    # With another producer's transaction open, the LSO is its first offset.
    s.append(data(1, 3))
    s.append(data(2, 4))
    s.append(data(3, 5))
    done = s.append(marker(2, 6, ABORT))
    assert done.aborted == AbortedTxn(2, 4, 6, 3)  # producer 1's txn from 3 is the oldest other
    done = s.append(marker(1, 7, ABORT))
    assert done.aborted == AbortedTxn(1, 3, 7, 5)  # then producer 3's from 5
    assert s.ongoing() == [(3, 5)]


def test_interleaved_producers_and_lso():
    s = TxnState()
    s.append(data(1, 0))
    s.append(data(-1, 1, txn=False))  # non-idempotent: no transaction
    s.append(data(2, 2))
    s.append(data(1, 3))
    s.append(data(9, 4, txn=False))  # idempotent, not transactional
    assert s.ongoing() == [(1, 0), (2, 2)]
    assert s.last_stable_offset(5) == 0
    s.append(marker(1, 5, COMMIT))
    s.on_high_watermark_updated(6)
    assert s.first_unstable_offset() == 2 and s.last_stable_offset(6) == 2
    s.append(marker(2, 6, ABORT))
    assert s.last_stable_offset(7) == 2  # marker 6 not replicated yet
    s.on_high_watermark_updated(7)
    assert s.last_stable_offset(7) == 7
    s.append(data(2, 7))  # producer 2's next transaction
    assert s.ongoing() == [(2, 7)] and s.last_stable_offset(8) == 7


def test_lso_never_past_high_watermark_nor_below_log_start():
    s = TxnState()
    assert s.last_stable_offset(0) == 0 and s.last_stable_offset(42) == 42
    s.append(data(1, 10))
    assert s.last_stable_offset(high_watermark=5) == 5  # first unstable past the HW
    assert s.last_stable_offset(high_watermark=20) == 10
    assert s.last_stable_offset(high_watermark=20, log_start_offset=15) == 15
    s.append(marker(1, 11, COMMIT))
    s.on_log_start_offset_incremented(12)
    assert s.first_unstable_offset() is None


def test_markers_without_transaction_and_empty_control_batches():
    s = TxnState()
    assert s.append(marker(5, 0, COMMIT)) == TxnAppend()  # empty transaction
    assert s.append(marker(5, 1, ABORT)) == TxnAppend()
    s.append(data(5, 2))
    assert s.append(TxnBatch(5, True, True, None, 3, 3)) == TxnAppend()  # control batch emptied by the cleaner
    assert s.append(marker(5, 4, 7)) == TxnAppend()  # another control type
    assert s.ongoing() == [(5, 2)]
    assert s.append(marker(6, 5, ABORT)) == TxnAppend()  # another producer's marker
    assert s.ongoing() == [(5, 2)]


def test_non_transactional_write_inside_a_transaction_is_refused():
    s = TxnState()
    s.append(data(1, 0))
    with pytest.raises(InvalidTxnStateError, match="expected a transactional write from producer 1"):
        s.append(data(1, 1, txn=False))
    assert s.ongoing() == [(1, 0)]


def test_complete_refuses_an_unknown_transaction_and_end_txn_is_side_effect_free():
    s = TxnState()
    with pytest.raises(ValueError, match="no such transaction"):
        s.complete(CompletedTxn(1, 0, 3, False))
    s.append(data(1, 0))
    txn = s.end_txn(1, ABORT, 4)
    assert txn == CompletedTxn(1, 0, 4, True) and s.ongoing() == [(1, 0)]
    assert s.last_stable_offset_of(txn) == 5
    with pytest.raises(ValueError):
        s.complete(CompletedTxn(1, 1, 4, True))  # wrong first offset
    s.complete(txn)
    assert s.ongoing() == [] and s.first_unstable_offset() == 0


def test_restore_reset_and_replay():
    s = TxnState()
    s.restore([(2, 9), (1, 4)])
    assert s.ongoing() == [(1, 4), (2, 9)] and s.first_unstable_offset() == 4
    changes = s.replay([(1, True, False, None, 10, 11), (1, True, True, ABORT, 12, 12), marker(2, 13, COMMIT)])
    assert changes == [
        TxnAppend(CompletedTxn(1, 4, 12, True), AbortedTxn(1, 4, 12, 9)),
        TxnAppend(CompletedTxn(2, 9, 13, False), None),
    ]
    s.reset()
    assert s.ongoing() == [] and s.first_unstable_offset() is None


# A random workload: producers 0..3 write data batches (transactional or
# not per producer) and markers; offsets follow each other.
STEP = st.tuples(st.integers(0, 3), st.sampled_from(["data", "data", "commit", "abort"]), st.integers(1, 3))


def _workload(steps: list[tuple[int, str, int]]) -> list[TxnBatch]:
    out, offset = [], 0
    for pid, kind, n in steps:
        if kind == "data":
            out.append(data(pid, offset, offset + n - 1, txn=pid != 3))  # producer 3 is idempotent only
            offset += n
        else:
            out.append(marker(pid, offset, COMMIT if kind == "commit" else ABORT))
            offset += 1
    return out


@settings(max_examples=examples(150), deadline=None)
@given(steps=st.lists(STEP, max_size=40), cut=st.integers(0, 40))
def test_replay_from_a_snapshot_equals_live(steps, cut):
    batches = _workload(steps)
    cut = min(cut, len(batches))
    live = TxnState()
    before = [live.append(b) for b in batches[:cut]]
    snapshot = live.ongoing()
    after = [live.append(b) for b in batches[cut:]]
    reloaded = TxnState()
    reloaded.restore(snapshot)
    assert reloaded.replay(batches[cut:]) == [a for a in after if a.completed is not None]
    assert reloaded.ongoing() == live.ongoing()
    whole = TxnState()
    assert whole.replay(batches) == [a for a in before + after if a.completed is not None]
    # Oracle: an open transaction is the span from a producer's first
    # transactional batch since its last marker.
    open_txns: dict[int, int] = {}
    for b in batches:
        if b.is_control:
            open_txns.pop(b.producer_id, None)
        elif b.is_transactional:
            open_txns.setdefault(b.producer_id, b.base_offset)
    assert sorted(live.ongoing(), key=lambda p: p[1]) == sorted(open_txns.items(), key=lambda p: p[1])
    end = batches[-1].last_offset + 1 if batches else 0
    live.on_high_watermark_updated(end)
    assert live.last_stable_offset(end) == min(open_txns.values(), default=end)


# ---------------------------------------------------------------- real batches


def tx_batch(pid: int, base: int, values: list[bytes], *, txn: bool = True, epoch: int = 0) -> bytes:
    return build_batch(
        [(None, v, 1_000 + i) for i, v in enumerate(values)],
        base_offset=base,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=txn,
    )


def end_marker(pid: int, offset: int, control_type: int) -> bytes:
    return build_end_txn_marker_batch(
        EndTransactionMarker(control_type, coordinator_epoch=3), producer_id=pid, producer_epoch=0, timestamp_ms=2_000, base_offset=offset
    )


def test_read_txn_batch_and_control_type_of_real_batches():
    assert read_txn_batch(tx_batch(5, 10, [b"a", b"b"])) == TxnBatch(5, True, False, None, 10, 11)
    assert read_txn_batch(tx_batch(-1, 0, [b"a"], txn=False)) == TxnBatch(-1, False, False, None, 0, 0)
    assert read_txn_batch(end_marker(5, 12, ABORT)) == TxnBatch(5, True, True, ABORT, 12, 12)
    assert read_txn_batch(end_marker(5, 13, COMMIT)) == TxnBatch(5, True, True, COMMIT, 13, 13)
    two = tx_batch(1, 0, [b"x"]) + end_marker(5, 1, COMMIT)
    assert control_type_of(two, len(tx_batch(1, 0, [b"x"]))) == COMMIT
    assert control_type_of(tx_batch(1, 0, [b"x"])) is None
    compressed = build_batch([(encode_control_key(ABORT), b"\x00\x00\x00\x00\x00\x01", 5)], producer_id=2, producer_epoch=0, is_transactional=True, is_control=True, codec=codecs.GZIP)
    assert control_type_of(compressed) == ABORT
    with pytest.raises(CorruptRecordError):
        control_type_of(build_batch([(b"\x00", b"", 5)], producer_id=2, is_transactional=True, is_control=True))
    with pytest.raises(CorruptRecordError, match="incomplete"):
        control_type_of(end_marker(5, 0, ABORT)[:-3])


def _log(*batches: bytes) -> tuple[bytes, list[AbortedTxn], TxnState]:
    """Batches laid end to end as a segment holds them, fed to a TxnState;
    the aborted transactions it records."""
    state, aborted = TxnState(), []
    for b in batches:
        change = state.append(read_txn_batch(b))
        if change.aborted is not None:
            aborted.append(change.aborted)
    return b"".join(batches), aborted, state


def _values(buf: bytes) -> list[bytes | None]:
    out, pos = [], 0
    while pos < len(buf):
        h = read_header(buf, pos)
        out += [r.value for r in iter_records(buf[pos : pos + h.size])]
        pos += h.size
    return out


def test_read_committed_skips_aborted_data_and_all_control_batches():
    log, aborted, state = _log(
        tx_batch(1, 0, [b"p1-aborted-0", b"p1-aborted-1"]),
        tx_batch(2, 2, [b"p2-committed-0"]),
        tx_batch(3, 3, [b"p3-idempotent"], txn=False),
        end_marker(1, 4, ABORT),
        tx_batch(2, 5, [b"p2-committed-1"]),
        tx_batch(-1, 6, [b"plain"], txn=False),
        end_marker(2, 7, COMMIT),
        tx_batch(1, 8, [b"p1-committed-0", b"p1-committed-1"]),
        end_marker(1, 10, COMMIT),
    )
    assert aborted == [AbortedTxn(1, 0, 4, 2)]  # producer 2's txn from 2 was open
    assert state.ongoing() == []
    pairs = [a.as_aborted_transaction() for a in aborted]
    reasons = [(d.base_offset, d.reason) for d in decide_batches(log, pairs)]
    assert reasons == [
        (0, ABORTED),
        (2, VISIBLE),
        (3, VISIBLE),
        (4, CONTROL),
        (5, VISIBLE),
        (6, VISIBLE),
        (7, CONTROL),
        (8, VISIBLE),
        (10, CONTROL),
    ]
    assert _values(committed_batches(log, pairs)) == [
        b"p2-committed-0",
        b"p3-idempotent",
        b"p2-committed-1",
        b"plain",
        b"p1-committed-0",
        b"p1-committed-1",
    ]
    # read_uncommitted (no aborted list) keeps every data batch; control
    # batches are still no records for the application.
    assert [d.reason for d in decide_batches(log)].count(ABORTED) == 0


def test_read_committed_stops_at_the_lso_and_keeps_legacy_entries():
    log, aborted, state = _log(tx_batch(1, 0, [b"a"]), tx_batch(2, 1, [b"open"]), end_marker(1, 2, COMMIT))
    assert state.last_stable_offset(high_watermark=3) == 0  # the COMMIT at 2 is not replicated yet
    state.on_high_watermark_updated(3)
    lso = state.last_stable_offset(high_watermark=3)
    assert lso == 1 and aborted == []
    assert [(d.base_offset, d.reason) for d in decide_batches(log, [], lso)] == [(0, VISIBLE), (1, UNSTABLE), (2, UNSTABLE)]
    legacy = build_entry(0, build_message(None, b"old", magic=1, timestamp=5))
    assert [d.reason for d in decide_batches(legacy + tx_batch(2, 1, [b"x"]), [(2, 0)])] == [VISIBLE, ABORTED]
    # A partial batch at the end is left out, as a reader does.
    assert len(decide_batches(log[:-5])) == 2


def test_filter_is_stateful_across_batches_and_unordered_aborted_list():
    f = AbortedTransactionFilter([(2, 10), (1, 0)])
    assert f.aborted_producers == frozenset()
    assert f.decide(read_header(tx_batch(1, 0, [b"a"])), None) == ABORTED
    assert f.aborted_producers == {1}
    assert f.decide(read_header(tx_batch(2, 1, [b"b"])), None) == VISIBLE  # its abort starts at 10
    assert f.decide(read_header(end_marker(1, 2, ABORT)), ABORT) == CONTROL
    assert f.decide(read_header(tx_batch(1, 3, [b"c"])), None) == VISIBLE  # producer 1's next transaction
    assert f.decide(read_header(tx_batch(2, 10, [b"d"])), None) == ABORTED


# A random transactional workload on real batches: what read_committed
# returns equals the records of committed transactions plus the
# non-transactional ones.
WSTEP = st.tuples(st.integers(0, 2), st.sampled_from(["data", "data", "data", "commit", "abort"]), st.integers(1, 3))


@settings(max_examples=examples(100), deadline=None)
@given(steps=st.lists(WSTEP, max_size=30))
def test_read_committed_returns_exactly_the_committed_records(steps):
    batches, offset = [], 0
    pending: dict[int, list[bytes]] = {}
    expected_by_end: list[tuple[int, list[bytes]]] = []  # (decided at offset, values)
    for pid, kind, n in steps:
        if kind == "data":
            txn = pid != 2  # producer 2 is not transactional
            values = [b"%d-%d" % (pid, offset + i) for i in range(n)]
            batches.append(tx_batch(pid, offset, values, txn=txn))
            if txn:
                pending.setdefault(pid, []).extend(values)
            else:
                expected_by_end.append((offset, values))
            offset += n
        else:
            batches.append(end_marker(pid, offset, COMMIT if kind == "commit" else ABORT))
            values = pending.pop(pid, [])
            if kind == "commit" and values:
                expected_by_end.append((offset, values))
            offset += 1
    log, aborted, state = _log(*batches)
    state.on_high_watermark_updated(offset)
    lso = state.last_stable_offset(offset)
    got = _values(committed_batches(log, [a.as_aborted_transaction() for a in aborted], lso))
    # Everything below the LSO is decided: committed records and
    # non-transactional ones, in offset order.
    expected = sorted(
        (v for _, vals in expected_by_end for v in vals),
        key=lambda v: int(v.split(b"-")[1]),
    )
    assert got == [v for v in expected if int(v.split(b"-")[1]) < lso]


def test_replay_from_a_segment_walk_equals_live(tmp_path):
    batches = [
        build_entry(0, build_message(None, b"old", magic=1, timestamp=5)),  # no producer: left out
        tx_batch(1, 1, [b"a", b"b"]),
        tx_batch(2, 3, [b"c"]),
        end_marker(1, 4, ABORT),
        tx_batch(3, 5, [b"d"], txn=False),
        end_marker(2, 6, COMMIT),
        tx_batch(1, 7, [b"e"]),
    ]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches) + tx_batch(4, 8, [b"cut"])[:30])  # a partial batch at the end
    live = TxnState()
    live_changes = [c for c in (live.append(read_txn_batch(b)) for b in batches[1:]) if c.completed is not None]
    f = CachedFile(path)
    try:
        facts = list(txn_batches(walk_batches(f, path, 0, path.stat().st_size, whole=True)))
    finally:
        f.close()
    assert [b.base_offset for b in facts] == [1, 3, 4, 5, 6, 7]
    assert facts[2] == TxnBatch(1, True, True, ABORT, 4, 4)
    replayed = TxnState()
    assert replayed.replay(facts) == live_changes
    assert live_changes[0].aborted == AbortedTxn(1, 1, 4, 3)
    assert replayed.ongoing() == live.ongoing() == [(1, 7)]


def test_rebuild_txn_index_of_a_segment_whose_transaction_began_earlier(tmp_path):
    # Segment 0 holds offsets 0..2 (producer 1's txn starts at 1), segment 3
    # holds its ABORT at 4 and producer 2's aborted txn 3..5.
    first = [tx_batch(9, 0, [b"x"], txn=False), tx_batch(1, 1, [b"a", b"b"])]
    second = [tx_batch(2, 3, [b"c"]), end_marker(1, 4, ABORT), end_marker(2, 5, ABORT), tx_batch(1, 6, [b"d"])]
    live = TxnState()
    expected = [c.aborted for c in (live.append(read_txn_batch(b)) for b in first + second) if c.aborted is not None]
    assert expected == [AbortedTxn(1, 1, 4, 3), AbortedTxn(2, 3, 5, 6)]
    index = TransactionIndex(tmp_path / "00000000000000000003.txnindex", 3)
    index.append(AbortedTxn(7, 0, 3, 4))  # stale content, replaced
    state = TxnState()
    state.replay(read_txn_batch(b) for b in first)  # the state at the segment's base
    changes = rebuild_txn_index(index, state, [read_txn_batch(b) for b in second])
    assert [c.completed for c in changes] == [CompletedTxn(1, 1, 4, True), CompletedTxn(2, 3, 5, True)]
    assert index.all_aborted_txns() == expected and index.sanity_check()
    assert state.ongoing() == live.ongoing() == [(1, 6)]
    index.close()
    assert TransactionIndex(index.path, 3).all_aborted_txns() == expected
