"""The aborted-transaction index of a segment (``.txnindex``, KIP-98;
Kafka's ``TransactionIndex``): its byte format, append order, reads, the
fetch-range search, truncation and recovery of a crash-cut file.

Real files under tmp_path, no mocks, no processes.
"""

from __future__ import annotations

import logging
import os
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers.examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.storage.txn_index import (
    ABORTED_TXN_SIZE,
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    TransactionIndex,
    aborted_transactions,
    collect_aborted_txns,
)

INT64 = st.integers(-(2**63), 2**63 - 1)


def index_at(tmp_path, base: int = 0, name: str | None = None) -> TransactionIndex:
    return TransactionIndex(tmp_path / (name or f"{base:020d}{TXN_INDEX_SUFFIX}"), base)


@pytest.mark.unit
def test_entry_format_byte_for_byte(tmp_path):
    txn = AbortedTxn(producer_id=0x0102030405060708, first_offset=5, last_offset=9, last_stable_offset=10)
    expected = (
        b"\x00\x00"  # version int16 0
        + b"\x01\x02\x03\x04\x05\x06\x07\x08"  # producer id int64
        + b"\x00\x00\x00\x00\x00\x00\x00\x05"  # first offset
        + b"\x00\x00\x00\x00\x00\x00\x00\x09"  # last offset (the ABORT marker)
        + b"\x00\x00\x00\x00\x00\x00\x00\x0a"  # last stable offset
    )
    assert ABORTED_TXN_SIZE == 34 and txn.encode() == expected
    assert AbortedTxn.decode(expected) == txn
    idx = index_at(tmp_path)
    idx.append(txn)
    idx.append(AbortedTxn(-1 & 0x7FFF_FFFF_FFFF_FFFF, 11, 12, 13))
    idx.close()
    data = (tmp_path / f"{0:020d}.txnindex").read_bytes()
    assert len(data) == 2 * 34 and data[:34] == expected
    assert struct.unpack(">hqqqq", data[34:]) == (0, 2**63 - 1, 11, 12, 13)
    assert txn.as_aborted_transaction() == (0x0102030405060708, 5)


@pytest.mark.unit
def test_file_created_on_first_append_only(tmp_path):
    idx = index_at(tmp_path, 100)
    assert len(idx) == 0 and idx.last_offset is None and idx.all_aborted_txns() == []
    idx.flush()
    idx.truncate_to(0)
    idx.reset()
    assert not idx.path.exists()  # no abort, no file (Kafka creates it when needed)
    idx.append(AbortedTxn(1, 90, 100, 101))
    assert idx.path.exists() and idx.path.stat().st_size == 34
    idx.flush()
    idx.close()
    assert idx.closed
    idx.close()  # idempotent


@pytest.mark.unit
def test_append_and_read_back(tmp_path):
    idx = index_at(tmp_path, 0)
    txns = [AbortedTxn(7, 0, 4, 5), AbortedTxn(8, 2, 10, 11), AbortedTxn(7, 11, 15, 16)]
    for t in txns:
        idx.append(t)
    assert idx.all_aborted_txns() == txns and len(idx) == 3 and idx.last_offset == 15
    assert idx.size_bytes == 3 * 34
    idx.close()
    again = index_at(tmp_path, 0)
    assert not again.loaded
    assert again.all_aborted_txns() == txns and again.loaded
    assert again.sanity_check()
    again.close()


@pytest.mark.unit
def test_append_refuses_offsets_going_backwards(tmp_path):
    idx = index_at(tmp_path)
    idx.append(AbortedTxn(1, 0, 10, 11))
    for bad in (AbortedTxn(2, 3, 10, 11), AbortedTxn(2, 3, 9, 11)):
        with pytest.raises(ValueError, match="must increase"):
            idx.append(bad)
    with pytest.raises(ValueError, match="is after last offset"):
        idx.append(AbortedTxn(2, 30, 20, 21))
    with pytest.raises(ValueError, match="does not fit"):
        idx.append(AbortedTxn(2**63, 30, 40, 41))
    assert idx.all_aborted_txns() == [AbortedTxn(1, 0, 10, 11)]
    assert idx.path.stat().st_size == 34  # nothing written by the refused ones
    idx.close()


@pytest.mark.unit
def test_collect_aborted_txns_overlap_and_completeness(tmp_path):
    idx = index_at(tmp_path)
    # (producer, first, last = ABORT marker, lso at the abort)
    idx.append(AbortedTxn(1, 0, 5, 3))  # an older txn (first 3) was open then
    idx.append(AbortedTxn(2, 3, 10, 11))
    idx.append(AbortedTxn(3, 12, 20, 21))
    got = idx.collect_aborted_txns(0, 3)
    assert got.aborted_txns == [AbortedTxn(1, 0, 5, 3)] and got.is_complete  # lso 3 >= upper 3
    got = idx.collect_aborted_txns(6, 11)
    assert got.aborted_txns == [AbortedTxn(2, 3, 10, 11)] and got.is_complete  # lso 11 >= upper 11
    got = idx.collect_aborted_txns(6, 12)  # the third entry does not overlap but completes
    assert got.aborted_txns == [AbortedTxn(2, 3, 10, 11)] and got.is_complete
    got = idx.collect_aborted_txns(11, 12)  # marker 10 before the range, txn 3 starts at its end
    assert got.aborted_txns == [] and got.is_complete
    got = idx.collect_aborted_txns(21, 30)  # past every marker: a later segment may hold more
    assert got.aborted_txns == [] and not got.is_complete
    got = idx.collect_aborted_txns(0, 100)
    assert [t.producer_id for t in got.aborted_txns] == [1, 2, 3] and not got.is_complete
    assert aborted_transactions(got.aborted_txns) == [(1, 0), (2, 3), (3, 12)]
    idx.close()


@pytest.mark.unit
def test_collect_across_segments_stops_when_complete(tmp_path):
    first = index_at(tmp_path, 0)
    second = index_at(tmp_path, 100)
    third = index_at(tmp_path, 200)
    first.append(AbortedTxn(1, 50, 60, 61))
    second.append(AbortedTxn(2, 90, 150, 95))  # txn 95.. of another producer was open
    second.append(AbortedTxn(3, 95, 180, 181))
    third.append(AbortedTxn(4, 181, 250, 251))
    # A fetch from 55 to 120: the first segment is not complete (lso 61 < 120),
    # the second's first entry is (its lso 95 < 120, the second entry's 181 >= 120).
    assert collect_aborted_txns([first, second, third], 55, 120) == [
        AbortedTxn(1, 50, 60, 61),
        AbortedTxn(2, 90, 150, 95),
        AbortedTxn(3, 95, 180, 181),
    ]
    assert collect_aborted_txns([second, third], 182, 300) == [AbortedTxn(4, 181, 250, 251)]
    assert collect_aborted_txns([], 0, 10) == []
    for ix in (first, second, third):
        ix.close()


@pytest.mark.unit
def test_truncate_to(tmp_path):
    idx = index_at(tmp_path)
    txns = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 1, 10, 11), AbortedTxn(3, 7, 20, 21)]
    for t in txns:
        idx.append(t)
    idx.truncate_to(21)  # nothing at or after 21
    assert idx.all_aborted_txns() == txns
    idx.truncate_to(10)  # the marker at 10 goes (the log now ends before it)
    assert idx.all_aborted_txns() == txns[:1] and idx.path.stat().st_size == 34
    idx.append(AbortedTxn(4, 6, 8, 9))  # appends go on from the cut
    idx.close()
    again = index_at(tmp_path)
    assert again.all_aborted_txns() == [txns[0], AbortedTxn(4, 6, 8, 9)]
    again.truncate_to(0)
    assert len(again) == 0 and again.path.stat().st_size == 0
    again.close()


@pytest.mark.unit
def test_reset_and_delete_and_rename(tmp_path):
    idx = index_at(tmp_path, 10)
    idx.append(AbortedTxn(1, 0, 12, 13))
    idx.reset()
    assert len(idx) == 0 and idx.path.stat().st_size == 0
    idx.append(AbortedTxn(1, 13, 14, 15))
    new = idx.path.with_name(idx.path.name + ".deleted")
    idx.rename(new)
    assert idx.path == new and new.exists()
    idx.delete()
    assert not new.exists()
    idx.delete()  # a missing file is no error


@pytest.mark.unit
def test_crash_cut_trailing_entry_dropped_on_load(tmp_path, caplog):
    idx = index_at(tmp_path)
    idx.append(AbortedTxn(1, 0, 5, 6))
    idx.append(AbortedTxn(2, 3, 9, 10))
    idx.close()
    path = idx.path
    whole = path.read_bytes()
    path.write_bytes(whole + AbortedTxn(3, 10, 12, 13).encode()[:20])  # a write cut by a crash
    with caplog.at_level(logging.WARNING, logger="kclient.storage.txn_index"):
        again = index_at(tmp_path)
        assert again.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)]
    assert any("dropping 20 trailing bytes" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert path.read_bytes() == whole  # cut off on disk too
    again.append(AbortedTxn(3, 10, 12, 13))
    again.close()
    assert index_at(tmp_path).all_aborted_txns()[-1] == AbortedTxn(3, 10, 12, 13)


@pytest.mark.unit
def test_sanity_check(tmp_path):
    def check(base: int, *txns: AbortedTxn, name: str = "x.txnindex") -> bool:
        path = tmp_path / name
        path.write_bytes(b"".join(t.encode() for t in txns))
        idx = TransactionIndex(path, base)
        try:
            return idx.sanity_check()
        finally:
            idx.close()

    assert check(100)
    assert check(100, AbortedTxn(1, 50, 100, 101), AbortedTxn(2, 60, 120, 121))
    assert not check(100, AbortedTxn(1, 50, 99, 100))  # marker before the segment (Kafka's rule)
    assert not check(0, AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 0, 10, 11))  # markers not increasing
    assert not check(0, AbortedTxn(1, 12, 10, 11))  # first after last
    assert not check(0, AbortedTxn(1, 0, 10, 11, version=1))  # an unknown version


@pytest.mark.unit
def test_readers_keep_their_list_across_truncation(tmp_path):
    idx = index_at(tmp_path)
    for i in range(5):
        idx.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    before = idx.all_aborted_txns()
    idx.truncate_to(20)
    assert len(before) == 5 and len(idx) == 2
    idx.close()


TXNS = st.lists(
    st.tuples(INT64, st.integers(0, 1_000), st.integers(1, 1_000), st.integers(0, 2_000)),
    max_size=30,
)


def _aborted_txns(raw: list[tuple[int, int, int, int]], base: int) -> list[AbortedTxn]:
    """Entries with strictly increasing markers from ``base``."""
    out, last = [], base - 1
    for pid, back, step, lso_ahead in raw:
        last += step
        out.append(AbortedTxn(pid, max(0, last - back), last, last + 1 + lso_ahead))
    return out


@pytest.mark.unit
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=TXNS, base=st.integers(0, 10_000), cut=st.integers(0, 40_000))
def test_round_trip_and_truncate_property(tmp_path, raw, base, cut):
    txns = _aborted_txns(raw, base)
    idx = TransactionIndex(tmp_path / "prop.txnindex", base)
    idx.reset()
    for t in txns:
        idx.append(t)
    idx.close()
    again = TransactionIndex(tmp_path / "prop.txnindex", base)
    assert again.all_aborted_txns() == txns and again.sanity_check()
    cut += base
    again.truncate_to(cut)
    kept = [t for t in txns if t.last_offset < cut]
    assert again.all_aborted_txns() == kept
    again.close()
    assert TransactionIndex(tmp_path / "prop.txnindex", base).all_aborted_txns() == kept


@pytest.mark.unit
@settings(max_examples=examples(100), deadline=None)
@given(raw=TXNS, start=st.integers(0, 30_000), span=st.integers(1, 5_000))
def test_collect_matches_overlap_rule_property(raw, start, span):
    # The search result: every overlapping entry up to the first whose lso
    # reaches the range end, which says complete.
    txns = _aborted_txns(raw, 0)
    upper = start + span
    with tempfile.TemporaryDirectory() as d:
        idx = TransactionIndex(Path(d) / "p.txnindex", 0)
        for t in txns:
            idx.append(t)
        got = idx.collect_aborted_txns(start, upper)
        idx.close()
    stop = next((i for i, t in enumerate(txns) if t.last_stable_offset >= upper), None)
    scanned = txns if stop is None else txns[: stop + 1]
    assert got.aborted_txns == [t for t in scanned if t.last_offset >= start and t.first_offset < upper]
    assert got.is_complete == (stop is not None)


# ---------------------------------------------------------------- SIGKILL

_WRITER = r"""
import sys
from kclient.storage.txn_index import AbortedTxn, TransactionIndex

path, base, stage = sys.argv[1], int(sys.argv[2]), sys.argv[3]
idx = TransactionIndex(path, base)
last = idx.last_offset if idx.last_offset is not None else base - 1
n = 0
while True:
    n += 1
    last += 3
    idx.append(AbortedTxn(last % 7, last - 2, last, last + 1))
    if stage == "flushed":
        idx.flush()
    print(last, flush=True)
    if stage == "truncating" and n % 4 == 0:
        idx.truncate_to(last)  # drop the entry just written
        last -= 3
        print("t", last, flush=True)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stage", ["written", "flushed", "truncating"])
def test_sigkill_while_appending_keeps_every_acknowledged_entry(tmp_path, stage):
    """A writer process killed with SIGKILL at some point of its appends
    (after the write, after the fsync, or among truncations): the file loads
    with every entry the writer reported, well formed, and takes appends on."""
    root = Path(__file__).resolve().parent.parent
    path = tmp_path / f"{100:020d}.txnindex"
    before: list[int] = []  # entries on disk before this round's writer
    for target in (20, 45):  # kill, reload and kill again
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), "100", stage],
            stdout=subprocess.PIPE,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        acked: list[int] = []
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("t "):
                acked = [a for a in acked if a <= int(line.split()[1])]
            else:
                acked.append(int(line))
            if len(acked) >= target:
                break
        child.send_signal(signal.SIGKILL)  # the writer is still appending
        child.wait(30)
        child.stdout.close()
        assert child.returncode == -signal.SIGKILL
        idx = TransactionIndex(path, 100)
        lasts = [t.last_offset for t in idx.all_aborted_txns()]
        assert idx.sanity_check() and path.stat().st_size == len(lasts) * ABORTED_TXN_SIZE
        # Every acknowledged entry is there, then what the writer added
        # after (it ran on until the signal), nothing else.
        assert lasts[: len(before) + len(acked)] == before + acked
        assert lasts == list(range(102, 102 + 3 * len(lasts), 3))
        before = lasts
        idx.close()
