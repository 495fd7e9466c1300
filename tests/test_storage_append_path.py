"""The leader's one-batch append (`Log.append` with one validated v2 batch,
the common Produce case, issue 28) against the general append path: the
same files, indexes, offsets, producer state, leader epochs and errors;
and the caches it relies on (`IndexFile.is_full`,
`LeaderEpochCache.latest_epoch`, `CachedFile.write_at`). Real files under
tmp_path."""

from __future__ import annotations

import os
import random
import re

import pytest

from kclient.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageSizeTooLargeError,
    OutOfOrderSequenceNumberError,
    RecordListTooLargeError,
)
from kclient.protocol.records.v2 import build_batch
from kclient.storage import Log, LogConfig, LogSegment, OffsetIndex
from kclient.storage.append_info import ValidatedBatch, analyze_records, check_batch, check_batches, pack_offset
from kclient.storage.handles import CachedFile, FileHandleCache
from kclient.storage.leader_epoch import LeaderEpochCache
from kclient.storage.local_log import LocalLog
from kclient.storage.timeindex import TimeIndex

pytestmark = pytest.mark.unit


def _batch(n: int, size: int, ts: int, producer: tuple[int, int, int] | None = None) -> bytes:
    pid, epoch, seq = producer if producer is not None else (-1, -1, -1)
    rows = [(None, bytes([65 + i % 26]) * size, ts + i) for i in range(n)]
    return build_batch(rows, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def _files(log: Log) -> dict[str, bytes]:
    log.flush()
    return {p.name: p.read_bytes() for p in sorted(log.directory.iterdir()) if p.suffix in (".log", ".index", ".timeindex")}


def _state(log: Log) -> tuple[object, ...]:
    return (
        log.log_start_offset,
        log.log_end_offset,
        log.high_watermark,
        [s.base_offset for s in log.segments],
        log.leader_epoch_cache.entries(),
        {pid: log.producer_state.batches(pid) for pid in log.producer_state.producer_ids()},
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_batch_append_matches_the_general_path(tmp_path, seed):
    """Random one-batch appends (sizes, record counts, timestamps, idempotent
    producers, leader epochs, clock steps past roll.ms) into small segments
    and indexes, so that rolls by size, by index size and by time and
    sparse index entries all happen: the fast path (validated batches
    handed down) and the general one (the log reads the header) leave the
    same bytes on disk and the same state."""
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=4000, index_interval_bytes=300, index_max_bytes=40, roll_ms=1000, flush_interval_messages=37)
    fast = Log(tmp_path / "fast-0", config)
    slow = Log(tmp_path / "slow-0", config)
    now, epoch, sequences = 1_000_000, 0, {7: 0, 8: 0}
    for _ in range(300):
        now += rng.choice((0, 1, 5, 400))
        epoch += rng.random() < 0.03
        n = rng.randint(1, 4)
        pid = rng.choice((None, 7, 8))
        producer = None if pid is None else (pid, 0, sequences[pid])
        if pid is not None:
            sequences[pid] += n
        data = _batch(n, rng.randint(1, 150), now - rng.randint(0, 3000), producer)
        batches = tuple(analyze_records(data))
        a = fast.append(data, now_ms=now, leader_epoch=epoch, validate_producer_state=True, batches=batches)
        b = slow.append(data, now_ms=now, leader_epoch=epoch, validate_producer_state=True)
        assert a == b
        if rng.random() < 0.05 and pid is not None:  # a retried batch: a duplicate, nothing written
            again = fast.append(data, now_ms=now, leader_epoch=epoch, validate_producer_state=True, batches=batches)
            assert again.duplicate and (again.base_offset, again.last_offset) == (a.base_offset, a.last_offset)
            assert slow.append(data, now_ms=now, leader_epoch=epoch, validate_producer_state=True) == again
    assert len(fast.segments) > 3
    assert _state(fast) == _state(slow)
    assert _files(fast) == _files(slow)
    assert fast.flush_count == slow.flush_count
    fast.close()
    slow.close()


def test_one_batch_append_errors_match_the_general_path(tmp_path):
    """Each check of the general path refuses the same batch with the same
    error and message, and nothing is written."""
    config = LogConfig(segment_bytes=300, max_message_bytes=200)
    logs = (Log(tmp_path / "fast-0", config), Log(tmp_path / "slow-0", config))
    small = _batch(1, 10, 5)
    cases: list[tuple[bytes, tuple[ValidatedBatch, ...], type[Exception]]] = [
        (_batch(1, 250, 5), tuple(analyze_records(_batch(1, 250, 5))), MessageSizeTooLargeError),
        (small + small[:20], tuple(analyze_records(small)), CorruptRecordError),
        (small, (analyze_records(small)[0]._replace(last_offset_delta=-1),), InvalidRecordError),
    ]
    big = _batch(1, 60, 5) * 3
    cases.append((big, tuple(analyze_records(big)), RecordListTooLargeError))  # three batches: the general path
    for data, batches, error in cases:
        with pytest.raises(error) as fast_exc:
            logs[0].append(data, batches=batches)
        with pytest.raises(error) as slow_exc:
            check_batches(batches, len(data), config.max_message_bytes, config.segment_bytes)
        assert str(fast_exc.value) == str(slow_exc.value)
        if len(batches) == 1:
            with pytest.raises(error, match=re.escape(str(slow_exc.value))):
                check_batch(batches[0], len(data), config.max_message_bytes, config.segment_bytes)
    assert logs[0].log_end_offset == 0 and logs[0].active_segment.size == 0
    first = _batch(2, 5, 5, (3, 0, 0))
    assert logs[0].append(first, validate_producer_state=True, batches=tuple(analyze_records(first))).last_offset == 1
    gap = _batch(1, 5, 5, (3, 0, 5))
    for log in logs[1:]:
        log.append(first, validate_producer_state=True)
    for log, batches in zip(logs, (tuple(analyze_records(gap)), None)):
        with pytest.raises(OutOfOrderSequenceNumberError):
            log.append(gap, validate_producer_state=True, batches=batches)
        assert log.log_end_offset == 2
    for log in logs:
        log.close()


def test_roll_due_follows_added_index_entries(tmp_path):
    """`LogSegment.roll_due` remembers that the indexes had room only until
    an entry is added (by an append, `mark_inactive`, a rebuild), and for
    the ``index_max_bytes`` it was asked about: it agrees with the indexes'
    own `is_full` after every step."""
    seg = LogSegment.create(tmp_path, 0, index_interval_bytes=0, now_ms=0)
    config = LogConfig(index_max_bytes=3 * OffsetIndex.ENTRY.size)

    def agrees(cfg: LogConfig) -> bool:
        due = seg.roll_due(1, seg.next_offset, 0, cfg)
        assert due == (seg.index.is_full(cfg.index_max_bytes) or seg.timeindex.is_full(cfg.index_max_bytes))
        return due

    offset = 0
    for expected in (False, False, False, True):  # an entry before each batch after the first (interval 0)
        assert agrees(config) is (expected and offset > 0)
        data = bytearray(_batch(1, 10, 1000 + offset))
        pack_offset(data, 0, offset)
        seg.append_batch(data, offset, offset, 1000 + offset, 0)
        offset += 1
    assert agrees(config) and len(seg.index) == 3
    bigger = LogConfig(index_max_bytes=4 * TimeIndex.ENTRY.size)
    assert not agrees(bigger) and not agrees(bigger)
    seg.mark_inactive()  # adds the final time index entry only if the largest timestamp grew
    agrees(bigger)
    seg.rebuild_indexes()
    agrees(bigger)
    assert agrees(config)
    seg.close()


def test_latest_epoch_follows_every_change(tmp_path):
    cache = LeaderEpochCache(tmp_path, [(2, 0)])
    assert cache.latest_epoch() == 2
    cache.assign(4, 10)
    assert cache.latest_epoch() == 4
    cache.truncate_from_end(10)
    assert cache.latest_epoch() == 2
    cache.assign(6, 20)
    cache.truncate_from_start(25)
    assert cache.latest_epoch() == 6 and cache.entries() == [(6, 25)]
    cache.clear()
    assert cache.latest_epoch() == -1
    assert LeaderEpochCache(tmp_path).latest_epoch() == -1


def test_cached_file_write_at(tmp_path):
    """`write_at` writes at a position through the descriptor cache, pinned
    only meanwhile; a closed file refuses."""
    cache = FileHandleCache(capacity=1)
    path = tmp_path / "f.log"
    path.write_bytes(b"")
    f = CachedFile(path, cache=cache)
    f.write_at(b"hello", 0)
    f.write_at(bytearray(b"world"), 5)
    f.write_at(memoryview(b"__"), 3)
    assert path.read_bytes() == b"hel__world" and f.pins == 0
    other = CachedFile(path, cache=cache)
    with other.use():
        pass  # evicts f's idle descriptor (capacity 1): the next write reopens it
    f.write_at(b"!", 10)
    assert path.read_bytes() == b"hel__world!" and os.path.getsize(path) == 11
    f.close()
    with pytest.raises(ValueError):
        f.write_at(b"x", 0)
    other.close()


def test_transactional_batches_take_the_general_path(tmp_path, monkeypatch):
    """The fused path is for non-transactional batches only: a
    transactional one (KIP-98) goes through the general append."""
    log = Log(tmp_path / "t-0", LogConfig())
    data = build_batch([(None, b"v", 5)], producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True)
    monkeypatch.setattr(LocalLog, "append_batch_locked", lambda *args: pytest.fail("the fused path took a transactional batch"))
    assert log.append(data, validate_producer_state=True, batches=tuple(analyze_records(data))).last_offset == 0
    plain = _batch(1, 5, 5)
    with pytest.raises(pytest.fail.Exception):
        log.append(plain, batches=tuple(analyze_records(plain)))
    log.close()
