"""Idempotent producer state of a partition log (KIP-98): sequence checks,
duplicates, producer epochs, snapshots, crash replay and truncation.

Real files in tmp dirs, no mocks.
"""

from __future__ import annotations

import json
import struct

import crc32c
import pytest

from kclient.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError, UnknownProducerIdError
from kclient.protocol.records.v2 import build_batch
from kclient.storage import Log, LogConfig
from kclient.storage.producer_state import MAX_BATCHES_PER_PRODUCER, ProducerStateManager, increment_sequence

pytestmark = pytest.mark.unit

SMALL = LogConfig(segment_bytes=700, index_interval_bytes=0)
INT32_MAX = 2**31 - 1


def pbatch(pid: int, epoch: int, seq: int, n: int = 2, tag: bytes = b"v") -> bytes:
    return build_batch(
        [(None, tag + b"-%d" % (seq + i), 1_000 + i) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def plain(n: int = 1) -> bytes:
    return build_batch([(None, b"plain", 1_000 + i) for i in range(n)])


def append(log: Log, data: bytes):
    return log.append(data, validate_producer_state=True)


def test_in_order_sequences_and_duplicates(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    r1 = append(log, pbatch(7, 0, 0, n=3))
    r2 = append(log, pbatch(7, 0, 3, n=2))
    append(log, plain())  # non-idempotent batches are not checked
    assert (r1.base_offset, r1.last_offset, r2.base_offset, r2.last_offset) == (0, 2, 3, 4)
    assert log.producer_state.last_sequence(7) == 4 and log.producer_state.epoch(7) == 0
    assert log.producer_state.last_sequence(8) is None

    size, end = log.size_bytes, log.log_end_offset
    dup = append(log, pbatch(7, 0, 3, n=2))  # a retry of the last batch
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (3, 4)
    dup = append(log, pbatch(7, 0, 0, n=3))  # an older batch still cached
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (0, 2)
    assert (log.size_bytes, log.log_end_offset) == (size, end)  # nothing written
    assert not append(log, pbatch(7, 0, 5)).duplicate
    log.close()


def test_only_the_last_five_batches_are_cached(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    for i in range(7):
        append(log, pbatch(1, 0, i, n=1))
    cached = log.producer_state.batches(1)
    assert len(cached) == MAX_BATCHES_PER_PRODUCER and [b.first_seq for b in cached] == [2, 3, 4, 5, 6]
    assert append(log, pbatch(1, 0, 2, n=1)).duplicate
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(log, pbatch(1, 0, 1, n=1))  # too old to be recognised: out of order
    log.close()


def test_sequence_errors_write_nothing(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    append(log, pbatch(5, 1, 0, n=2))
    size = log.size_bytes
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(log, pbatch(5, 1, 3))  # gap: 2 expected
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(log, pbatch(5, 1, 1))  # overlaps the last batch without matching it
    with pytest.raises(InvalidProducerEpochError) as stale:
        append(log, pbatch(5, 0, 2))  # stale producer epoch
    assert stale.value.code == 47
    with pytest.raises(OutOfOrderSequenceNumberError) as new_epoch:
        append(log, pbatch(5, 2, 2))  # a new epoch must start at 0
    assert new_epoch.value.code == 45
    with pytest.raises(UnknownProducerIdError) as unknown:
        append(log, pbatch(99, 0, 4))
    assert unknown.value.code == 59
    # All-or-nothing per call: a valid batch followed by an invalid one.
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(log, pbatch(5, 1, 2) + pbatch(5, 1, 9))
    assert log.size_bytes == size and log.log_end_offset == 2
    assert log.producer_state.last_sequence(5) == 1
    # Several in-order batches of one producer in one call are fine.
    r = append(log, pbatch(5, 1, 2) + pbatch(5, 1, 4))
    assert (r.base_offset, r.last_offset) == (2, 5) and log.producer_state.last_sequence(5) == 5
    log.close()


def test_new_epoch_resets_the_sequence(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    append(log, pbatch(3, 0, 0))
    append(log, pbatch(3, 0, 2))
    r = append(log, pbatch(3, 1, 0))
    assert not r.duplicate and log.producer_state.epoch(3) == 1 and log.producer_state.last_sequence(3) == 1
    assert not append(log, pbatch(3, 1, 2)).duplicate
    with pytest.raises(InvalidProducerEpochError):
        append(log, pbatch(3, 0, 2))  # a retry from the fenced epoch is not a duplicate
    log.close()


def test_sequence_wraps_around(tmp_path):
    assert increment_sequence(INT32_MAX, 0) == INT32_MAX
    assert increment_sequence(INT32_MAX - 1, 2) == 0
    assert increment_sequence(INT32_MAX, 3) == 2
    log = Log(tmp_path / "t-0", SMALL)
    state = log.producer_state
    # Seed a producer near the top of the sequence space the way a follower would.
    log.append_as_follower(build_batch([(None, b"x", 1)], producer_id=4, producer_epoch=0, base_sequence=INT32_MAX - 1))
    assert state.last_sequence(4) == INT32_MAX - 1
    append(log, pbatch(4, 0, INT32_MAX, n=1))
    append(log, pbatch(4, 0, 0, n=2))
    assert state.last_sequence(4) == 1
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(log, pbatch(4, 0, 0, n=1))
    log.close()


def test_follower_and_unchecked_appends_record_state(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    log.append(pbatch(2, 0, 0, n=3))  # a leader append without validation still records the batch
    assert log.producer_state.last_sequence(2) == 2
    log.append_as_follower(build_batch([(None, b"f", 1)], base_offset=3, producer_id=2, producer_epoch=0, base_sequence=3))
    assert log.producer_state.last_sequence(2) == 3
    assert append(log, pbatch(2, 0, 3, n=1)).duplicate
    log.close()


def snapshot_files(d):
    return sorted(p.name for p in d.iterdir() if p.suffix == ".snapshot")


def test_state_survives_close_and_reopen_via_snapshot(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    append(log, pbatch(11, 2, 0, n=3))
    append(log, pbatch(12, 0, 0, n=1))
    append(log, pbatch(11, 2, 3, n=1))
    end = log.log_end_offset
    log.close()
    assert snapshot_files(d) == [f"{end:020d}.snapshot"]
    raw = (d / f"{end:020d}.snapshot").read_bytes()
    body = raw[4:]
    assert struct.unpack(">I", raw[:4])[0] == crc32c.crc32c(body)
    doc = json.loads(body)
    assert doc["version"] == 1 and doc["offset"] == end
    assert doc["producers"][0] == {"producer_id": 11, "producer_epoch": 2, "batches": [[0, 2, 0, 2], [3, 3, 4, 4]]}

    again = Log(d, SMALL, clean_shutdown=True)
    state = again.producer_state
    assert (state.last_sequence(11), state.epoch(11), state.last_sequence(12)) == (3, 2, 0)
    dup = append(again, pbatch(11, 2, 3, n=1))
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (4, 4)
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(again, pbatch(11, 2, 9))
    again.close()


def test_state_survives_a_crash_by_replay(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    seq = 0
    while len(log.segments) < 3:
        append(log, pbatch(21, 0, seq, n=2, tag=b"x" * 30))
        seq += 2
    roll_snapshots = snapshot_files(d)
    assert roll_snapshots == [f"{s.base_offset:020d}.snapshot" for s in log.segments[1:]]
    append(log, pbatch(21, 0, seq, n=2))
    append(log, pbatch(22, 5, 0, n=1))
    end = log.log_end_offset
    # Crash: no close, so no snapshot of the tail; the new Log replays it.
    crashed = Log(d, SMALL, recovery_point=0)
    assert snapshot_files(d) == roll_snapshots
    state = crashed.producer_state
    assert crashed.log_end_offset == end
    assert (state.last_sequence(21), state.last_sequence(22), state.epoch(22)) == (seq + 1, 0, 5)
    assert append(crashed, pbatch(21, 0, seq, n=2)).duplicate
    crashed.close()
    log.close()


def test_state_rebuilt_without_snapshots_or_with_a_corrupt_one(tmp_path, caplog):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    for seq in range(0, 20, 2):
        append(log, pbatch(31, 0, seq, n=2, tag=b"y" * 30))
    log.close()
    newest = d / snapshot_files(d)[-1]
    raw = bytearray(newest.read_bytes())
    raw[-2] ^= 0xFF
    newest.write_bytes(bytes(raw))
    again = Log(d, SMALL, clean_shutdown=True)
    assert again.producer_state.last_sequence(31) == 19
    assert not newest.exists() and "unusable producer state snapshot" in caplog.text
    again.close()
    for name in snapshot_files(d):
        (d / name).unlink()
    again = Log(d, SMALL, clean_shutdown=True)
    assert again.producer_state.last_sequence(31) == 19
    assert len(again.producer_state.batches(31)) == MAX_BATCHES_PER_PRODUCER
    again.close()


def test_truncate_rebuilds_the_state(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    for seq in range(0, 24, 2):
        append(log, pbatch(41, 0, seq, n=2, tag=b"z" * 30))
    assert len(log.segments) >= 3
    cut = log.segments[1].base_offset + 2
    assert cut % 2 == 0  # a batch boundary (every batch holds 2 records)
    log.truncate_to(cut)
    assert log.producer_state.last_sequence(41) == cut - 1
    assert all(int(name[:20]) <= cut for name in snapshot_files(d))
    # The batch that was cut away is new again, not a duplicate.
    r = append(log, pbatch(41, 0, cut, n=2, tag=b"z" * 30))
    assert not r.duplicate and r.base_offset == cut
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(log, pbatch(41, 0, 22, n=2))
    log.truncate_fully_and_start_at(500)
    assert log.producer_state.producer_ids() == [] and snapshot_files(d) == []
    with pytest.raises(UnknownProducerIdError):
        append(log, pbatch(41, 0, cut + 2))
    log.close()


def test_retention_deletes_old_snapshots_but_keeps_the_newest(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, SMALL)
    for seq in range(0, 30, 2):
        append(log, pbatch(51, 0, seq, n=2, tag=b"r" * 30))
    assert len(snapshot_files(d)) >= 3
    start_before = [s.base_offset for s in log.segments]
    log.delete_old_segments(lambda seg: seg.base_offset < start_before[-2])
    assert log.log_start_offset == start_before[-2]
    assert [int(n[:20]) for n in snapshot_files(d)] == [b for b in start_before[1:] if b >= log.log_start_offset]
    assert log.producer_state.last_sequence(51) == 29
    log.close()
    again = Log(d, SMALL)
    assert again.producer_state.last_sequence(51) == 29
    again.close()


def test_manager_queries_are_read_only(tmp_path):
    state = ProducerStateManager(tmp_path)
    assert state.producer_ids() == [] and state.batches(1) == [] and state.epoch(1) is None
    assert state.load_latest_snapshot(100) is None
