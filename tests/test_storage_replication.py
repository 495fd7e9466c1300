"""Storage engine support for replication: truncation (KIP-101), follower
appends, leader epoch stamping and the leader epoch cache (KIP-101 /
KIP-279), the stored high watermark and its checkpoint.

Real files in tmp dirs; records decoded with kclient's own v2 decoder.
"""

from __future__ import annotations

import pytest

from kclient.errors import InvalidRecordError, OffsetOutOfRangeError, UnexpectedAppendOffsetError
from kclient.protocol.records.scan import read_v2_producer_fields, scan_batches
from kclient.protocol.records.v2 import build_batch, iter_records, read_header, validate_batch
from kclient.storage import Log, LogConfig, LogManager
from kclient.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, read_checkpoint
from kclient.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache

pytestmark = pytest.mark.unit

SMALL = LogConfig(segment_bytes=600, index_interval_bytes=0)


def batch(values: list[bytes], ts: int = 1_000) -> bytes:
    return build_batch([(None, v, ts + i) for i, v in enumerate(values)], base_offset=0)


def value(offset: int) -> bytes:
    return b"value-%05d" % offset + b"x" * 40


def fill(log: Log, batches: int, per_batch: int = 3) -> list[tuple[int, int]]:
    """Append ``batches`` batches of ``per_batch`` records whose values name
    their offset; returns each batch's (base, last)."""
    out = []
    for _ in range(batches):
        base = log.log_end_offset
        r = log.append(batch([value(base + i) for i in range(per_batch)]))
        assert r.base_offset == base
        out.append((r.base_offset, r.last_offset))
    return out


def read_all(log: Log) -> list[tuple[int, bytes]]:
    """Every record from the log start, via reads that start at each batch."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        infos = list(scan_batches(data))
        assert infos, f"no batch at {offset}"
        for info in infos:
            chunk = data[info.position : info.position + info.size]
            validate_batch(chunk)
            out += [(r.offset, r.value) for r in iter_records(chunk)]
            offset = info.last_offset + 1
    return out


def check_indexes(log: Log) -> None:
    """Every offset index entry names the batch at its position; every time
    index entry lies inside its segment."""
    for seg in log.segments:
        batches = {info.position: info for info in seg.iter_batches()}
        for offset, position in seg.index.entries():
            assert position in batches and batches[position].base_offset == offset, (seg, offset, position)
        for ts, offset in seg.timeindex.entries():
            assert seg.base_offset <= offset <= seg.last_offset, (seg, ts, offset)
        assert seg.next_offset == (max((i.last_offset for i in batches.values()), default=seg.base_offset - 1) + 1)


def expected_records(end: int) -> list[tuple[int, bytes]]:
    return [(o, value(o)) for o in range(end)]


# ------------------------------------------------------------------ truncation


@pytest.mark.parametrize("where", ["boundary", "mid_batch", "earlier_segment", "segment_base", "last_batch"])
def test_truncate_to_batch_boundaries_across_segments(tmp_path, where):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    spans = fill(log, 12)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    if where == "boundary":
        target, want = spans[7][0], spans[7][0]
    elif where == "mid_batch":
        target, want = spans[7][0] + 1, spans[7][0]
    elif where == "earlier_segment":
        target, want = bases[1] + 4, spans[(bases[1] + 4) // 3][0]
    elif where == "segment_base":
        target, want = bases[2], bases[2]
    else:
        target, want = spans[-1][1], spans[-1][0]
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    assert log.truncate_to(target) == want
    assert log.log_end_offset == want
    assert log.recovery_point <= want and log.high_watermark == want
    assert all(s.base_offset <= want for s in log.segments)
    assert read_all(log) == expected_records(want)
    assert log.read(want, 100).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(want + 1, 100)
    check_indexes(log)
    on_disk = sorted(p.name for p in d.iterdir() if p.suffix == ".log")
    assert on_disk == [f"{s.base_offset:020d}.log" for s in log.segments]

    # Appends continue at the cut, through new rolls, and survive reopen.
    more = fill(log, 6)
    assert more[0][0] == want
    end = log.log_end_offset
    assert read_all(log) == expected_records(end)
    check_indexes(log)
    log.close()
    for kwargs in ({"clean_shutdown": True}, {"recovery_point": 0}):
        again = Log(d, SMALL, **kwargs)
        assert again.log_end_offset == end and again.recovery_truncated_bytes == 0
        assert read_all(again) == expected_records(end)
        check_indexes(again)
        again.close()


def test_truncate_no_op_at_or_above_log_end(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    fill(log, 3)
    assert log.truncate_to(9) == 9 and log.truncate_to(100) == 9
    assert read_all(log) == expected_records(9)
    with pytest.raises(ValueError):
        log.truncate_to(-1)
    log.close()


def test_truncate_to_zero_and_below_log_start(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    fill(log, 10)
    assert log.truncate_to(0) == 0
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (0, 0, 1)
    fill(log, 10)
    # Retention moves the log start; truncating below it empties the log there.
    log.delete_old_segments(lambda seg: seg.base_offset < 9)
    start = log.log_start_offset
    assert start > 0
    assert log.truncate_to(start - 1) == start - 1
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (start - 1, start - 1, start - 1)
    log.close()


def test_truncate_fully_and_start_at(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    fill(log, 8)
    log.append(batch([b"x"]), leader_epoch=4)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (100, 100, 100, 100)
    assert log.leader_epoch_cache.entries() == [] and log.latest_epoch == -1
    assert sorted(p.name for p in d.iterdir() if p.suffix == ".log") == [f"{100:020d}.log"]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.append(batch([b"a", b"b"])).base_offset == 100
    log.close()
    again = Log(d, SMALL, recovery_point=0)
    assert (again.log_start_offset, again.log_end_offset) == (100, 102)
    assert [r.offset for r in iter_records(again.read(100, 1000).records)] == [100, 101]
    again.close()


def test_truncate_while_a_reader_holds_a_deleted_segment(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    fill(log, 12)
    last_base = log.segments[-1].base_offset
    with log.read_slice(last_base, 1 << 20) as piece:
        before = piece.read()
        log.truncate_to(log.segments[1].base_offset)
        # The reader still gets its bytes, and the offsets it covered can be
        # rewritten into a new segment with the same file name.
        assert piece.read() == before
        fill(log, 12)
        assert last_base in [s.base_offset for s in log.segments]  # same file name as the deleted one
    assert read_all(log) == expected_records(log.log_end_offset)
    assert not [p for p in d.iterdir() if p.name.endswith(".deleted")]
    check_indexes(log)
    log.close()


# ------------------------------------------------------------------ follower append


def test_append_as_follower_keeps_the_leaders_offsets_and_bytes(tmp_path):
    leader = Log(tmp_path / "leader" / "t-0", SMALL)
    follower = Log(tmp_path / "follower" / "t-0", SMALL)
    fill(leader, 2)
    leader.append(batch([b"e5-a", b"e5-b"]), leader_epoch=5)
    leader.append(batch([b"e5-c"]), leader_epoch=5)
    leader.append(batch([b"e7"]), leader_epoch=7)
    offset = 0
    while offset < leader.log_end_offset:  # a follower's fetch loop
        data = leader.read(offset, 250).records
        whole = b"".join(data[i.position : i.position + i.size] for i in scan_batches(data))
        r = follower.append_as_follower(whole)
        assert r.base_offset == offset and not r.duplicate
        offset = r.last_offset + 1
    assert follower.log_end_offset == leader.log_end_offset == 10
    for seg_l, seg_f in zip(leader.segments, follower.segments):
        assert seg_l.read(0, seg_l.size) == seg_f.read(0, seg_f.size)
    assert read_all(follower) == read_all(leader)
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries() == [(5, 6), (7, 9)]
    assert follower.high_watermark == 0  # a follower takes the high watermark from its leader
    assert follower.update_high_watermark(8) == 8
    check_indexes(follower)

    # Offsets that do not start at the log end offset, or leave a gap, are rejected whole.
    size = follower.size_bytes
    with pytest.raises(UnexpectedAppendOffsetError) as info:
        follower.append_as_follower(leader.read(9, 1000).records)
    assert (info.value.first_offset, info.value.expected_offset) == (9, 10)
    assert isinstance(info.value, InvalidRecordError)
    gap = build_batch([(None, b"a", 1)], base_offset=10) + build_batch([(None, b"b", 1)], base_offset=12)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(gap)
    assert (follower.size_bytes, follower.log_end_offset) == (size, 10)
    assert follower.append_as_follower(b"").base_offset == 10
    leader.close()
    follower.close()


# ------------------------------------------------------------------ leader epochs


def test_leader_epoch_is_stamped_outside_the_crc(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    raw = batch([b"a", b"b"])
    assert read_header(raw).partition_leader_epoch == -1
    log.append(raw, leader_epoch=7)
    log.append(batch([b"c"]), leader_epoch=7)
    log.append(batch([b"d"]))  # no epoch: stored as given
    log.append(batch([b"e"]), leader_epoch=9)
    data = log.read(0, 1 << 20).records
    infos = list(scan_batches(data))
    epochs = [read_v2_producer_fields(data, i.position).partition_leader_epoch for i in infos]
    assert epochs == [7, 7, -1, 9]
    assert data[12:16] == (7).to_bytes(4, "big")
    for info in infos:
        chunk = data[info.position : info.position + info.size]
        header = validate_batch(chunk)  # raises on a CRC mismatch
        assert header.crc == read_header(chunk).crc
    first = data[infos[0].position : infos[0].position + infos[0].size]
    assert read_header(first).crc == read_header(raw).crc  # the CRC did not change
    assert [r.value for r in iter_records(first)] == [b"a", b"b"]
    assert log.leader_epoch_cache.entries() == [(7, 0), (9, 4)]
    assert log.latest_epoch == 9
    assert (d / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n7 0\n9 4\n"
    assert log.end_offset_for_epoch(7) == (7, 4)
    assert log.end_offset_for_epoch(9) == (9, 5)
    assert log.end_offset_for_epoch(8) == (7, 4)
    log.close()


def test_epoch_cache_end_offset_for_kip_279():
    cache = LeaderEpochCache("/nonexistent", [(1, 0), (3, 10), (5, 20)])
    leo = 30
    assert cache.end_offset_for(5, leo) == (5, 30)  # the latest epoch ends at the log end offset
    assert cache.end_offset_for(3, leo) == (3, 20)
    assert cache.end_offset_for(4, leo) == (3, 20)  # unknown epoch: largest epoch below it, next epoch's start
    assert cache.end_offset_for(2, leo) == (1, 10)
    assert cache.end_offset_for(0, leo) == (0, 0)  # below the first entry: Kafka answers its start offset
    assert cache.end_offset_for(6, leo) == (-1, -1)  # above the latest
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert LeaderEpochCache("/nonexistent").end_offset_for(0, leo) == (-1, -1)
    assert LeaderEpochCache("/nonexistent").latest_epoch() == -1


def test_epoch_cache_updates_and_file(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    assert cache.assign(1, 0) and cache.assign(3, 10) and cache.assign(5, 20)
    assert not cache.assign(5, 25)  # same epoch, later offset: nothing new
    assert not cache.assign(2, 30)  # older epoch: ignored
    assert not cache.assign(-1, 40)
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    assert path.read_text() == "0\n3\n1 0\n3 10\n5 20\n"
    assert not (tmp_path / (LEADER_EPOCH_CHECKPOINT + ".tmp")).exists()
    assert LeaderEpochCache.load(tmp_path).entries() == [(1, 0), (3, 10), (5, 20)]
    assert cache.truncate_from_end(15) and cache.entries() == [(1, 0), (3, 10)]
    assert not cache.truncate_from_end(15)
    assert cache.truncate_from_start(12) and cache.entries() == [(3, 12)]
    assert not cache.truncate_from_start(12)
    assert cache.assign(6, 8) and cache.entries() == [(6, 8)]  # a new epoch below old starts replaces them
    assert path.read_text() == "0\n1\n6 8\n"
    path.write_text("0\n2\n6 8\n")
    assert LeaderEpochCache.load(tmp_path) is None  # count mismatch: unreadable
    path.unlink()
    assert LeaderEpochCache.load(tmp_path) is None


@pytest.mark.parametrize("damage", ["delete", "garble"])
def test_epoch_cache_rebuilt_from_the_log(tmp_path, damage):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    fill(log, 3)
    log.append(batch([b"a"] * 3), leader_epoch=2)
    fill(log, 4)
    log.append(batch([b"b"]), leader_epoch=4)
    log.append(batch([b"c"]), leader_epoch=4)
    assert len(log.segments) > 2
    want = [(2, 9), (4, 24)]
    assert log.leader_epoch_cache.entries() == want
    log.close()
    path = d / LEADER_EPOCH_CHECKPOINT
    if damage == "delete":
        path.unlink()
    else:
        path.write_text("0\nbanana\n")
    again = Log(d, SMALL, clean_shutdown=True)
    assert again.leader_epoch_cache.entries() == want
    assert path.read_text() == "0\n2\n2 9\n4 24\n"
    # Truncation drops the epochs starting at or after the cut.
    again.truncate_to(24)
    assert again.leader_epoch_cache.entries() == [(2, 9)]
    assert again.end_offset_for_epoch(2) == (2, 24)
    again.close()


def test_epochs_appended_after_a_crash_are_recovered(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    log.append(batch([b"a"]), leader_epoch=1)
    log.flush()
    log.append(batch([b"b"]), leader_epoch=3)
    # Crash: the checkpoint file still has only epoch 1.
    (d / LEADER_EPOCH_CHECKPOINT).write_text("0\n1\n1 0\n")
    again = Log(d, SMALL, recovery_point=1)
    assert again.leader_epoch_cache.entries() == [(1, 0), (3, 1)]
    again.close()


# ------------------------------------------------------------------ high watermark


def test_high_watermark_is_stored_and_clamped(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    assert log.high_watermark == 0 and log.high_watermark_follows_log_end
    fill(log, 2)
    assert log.high_watermark == 6  # no replication: follows the log end offset
    assert log.update_high_watermark(4) == 4
    assert not log.high_watermark_follows_log_end
    fill(log, 1)
    assert (log.high_watermark, log.log_end_offset) == (4, 9)
    assert log.read(0, 100).high_watermark == 4
    with log.read_slice(9, 100) as piece:
        assert (piece.high_watermark, piece.log_end_offset) == (4, 9)
    # A consumer's read stops at the high watermark; a follower's does not.
    assert [r.offset for r in iter_records(log.read(0, 1 << 20, max_offset=4).records)] == [0, 1, 2]
    assert log.read(3, 1 << 20, max_offset=4).records == b""  # the batch 3..5 reaches past 4
    assert log.read(4, 1 << 20, max_offset=4).records == b""
    assert [i.base_offset for i in scan_batches(log.read(0, 1 << 20).records)] == [0, 3]  # to the segment's end
    assert log.read(6, 1 << 20, max_offset=9).records == log.read(6, 1 << 20).records != b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 100, max_offset=4)
    assert log.update_high_watermark(1000) == 9
    assert log.update_high_watermark(-5) == 0
    log.update_high_watermark(9)
    log.truncate_to(5)
    assert log.high_watermark == 3  # the batch holding 5 starts at 3
    log.close()
    reopened = Log(tmp_path / "t-0", SMALL, high_watermark=2)
    assert reopened.high_watermark == 2
    reopened.close()
    capped = Log(tmp_path / "t-0", SMALL, high_watermark=50)
    assert capped.high_watermark == 3
    capped.close()


def test_log_manager_high_watermark_checkpoint_create_and_delete_log(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    mgr = LogManager(dirs, SMALL)
    log = mgr.create_log("topic", 3)
    assert mgr.create_log("topic", 3) is log
    other = mgr.create_log("topic", 0)
    assert {mgr.log_dir_of("topic", 3), mgr.log_dir_of("topic", 0)} == set(dirs)
    fill(log, 3)
    fill(other, 1)
    log.update_high_watermark(5)
    mgr.checkpoint_high_watermarks()
    where = mgr.log_dir_of("topic", 3)
    assert read_checkpoint(where / REPLICATION_OFFSET_CHECKPOINT) == {("topic", 3): 5}
    assert (where / REPLICATION_OFFSET_CHECKPOINT).read_text() == "0\n1\ntopic 3 5\n"
    mgr.close()

    mgr = LogManager(dirs, SMALL)
    assert mgr.get("topic", 3).high_watermark == 5
    assert mgr.get("topic", 0).high_watermark == 3  # followed its log end offset
    mgr.close()

    # A checkpoint above the log end offset is capped; a missing one gives the log end offset.
    (where / REPLICATION_OFFSET_CHECKPOINT).write_text("0\n1\ntopic 3 500\n")
    mgr = LogManager(dirs, SMALL)
    assert mgr.get("topic", 3).high_watermark == 9
    path = mgr.get("topic", 3).directory
    assert mgr.delete_log("topic", 3)
    assert not path.exists() and mgr.get("topic", 3) is None
    assert not mgr.delete_log("topic", 3)
    mgr.checkpoint_high_watermarks()
    assert ("topic", 3) not in read_checkpoint(where / REPLICATION_OFFSET_CHECKPOINT)
    fresh = mgr.create_log("topic", 3)
    assert fresh.log_end_offset == 0 and fresh.high_watermark == 0
    mgr.close()
    for d in dirs:
        (d / REPLICATION_OFFSET_CHECKPOINT).unlink()
    mgr = LogManager(dirs, SMALL)
    assert mgr.get("topic", 0).high_watermark == 3
    mgr.close()
