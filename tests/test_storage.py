"""Tests of the broker's log engine (kclient.storage): the writes, reads,
deletes and recovery guarantees of the "Log" section of the Kafka
documentation (https://kafka.apache.org/documentation/#log), on real files
under tmp_path."""

from __future__ import annotations

import itertools
import logging
import os
import random
import struct
import tempfile
import time
import zlib
from pathlib import Path

import pytest
from helpers.examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.errors import (
    ConfigError,
    CorruptRecordError,
    InvalidTopicError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    TopicAlreadyExistsError,
)
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import build_batch, iter_records, validate_batch
from kclient.storage import AppendResult, Log, LogConfig, LogManager, LogSegment, OffsetIndex, parse_partition_dir
from kclient.storage import batch_walk as walk_mod
from kclient.storage.segment import file_stem

pytestmark = pytest.mark.unit


def batch(n: int = 1, value_size: int = 10, ts: int = 1_000, tag: bytes = b"v") -> bytes:
    """A valid v2 batch of ``n`` records with base offset 0 (the log
    rewrites it) and timestamps ts..ts+n-1."""
    return build_batch([(None, (tag * value_size)[:value_size], ts + i) for i in range(n)], base_offset=0)


def v1_entry(value: bytes, ts: int = 5, attributes: int = 0) -> bytes:
    """A magic-1 message: offset, size, crc, magic, attributes, timestamp,
    key (null), value."""
    body = struct.pack(">bbqi", 1, attributes, ts, -1) + struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body) & 0xFFFFFFFF
    return struct.pack(">qiI", 0, 4 + len(body), crc) + body


def offsets_in(data: bytes) -> list[tuple[int, int]]:
    return [(i.base_offset, i.last_offset) for i in scan_batches(data)]


def linear_find(data: bytes, offset: int):
    for info in scan_batches(data):
        if info.last_offset >= offset:
            return info.position
    return None


# ------------------------------------------------------------------ append/read


def test_append_assigns_offsets_and_reads_back(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig())
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    r1 = log.append(batch(1))
    src = bytearray(batch(5, tag=b"b"))
    r2 = log.append(src)
    r3 = log.append(memoryview(batch(3, tag=b"c")))
    assert (r1.base_offset, r1.last_offset) == (0, 0)
    assert (r2.base_offset, r2.last_offset) == (1, 5)
    assert (r3.base_offset, r3.last_offset) == (6, 8)
    assert r1.log_append_time_ms == -1
    assert src == batch(5, tag=b"b"), "the caller's buffer must not be modified"
    assert log.log_end_offset == log.high_watermark == 9

    res = log.read(0, 1 << 20)
    assert offsets_in(res.records) == [(0, 0), (1, 5), (6, 8)]
    assert (res.high_watermark, res.log_start_offset, res.log_end_offset) == (9, 0, 9)
    # Offsets were rewritten but the CRC (which skips baseOffset) still holds.
    for info in scan_batches(res.records):
        b = res.records[info.position : info.position + info.size]
        validate_batch(b)
        assert [r.offset for r in iter_records(b)] == list(range(info.base_offset, info.last_offset + 1))

    # A read in the middle of a batch starts at that batch.
    assert offsets_in(log.read(3, 1 << 20).records) == [(1, 5), (6, 8)]
    assert offsets_in(log.read(8, 1 << 20).records) == [(6, 8)]
    assert log.read(9, 1 << 20).records == b""
    log.close()


def test_multi_batch_append_and_v1_entries(tmp_path):
    log = Log(tmp_path / "t-0")
    r = log.append(batch(2) + batch(3) + batch(1))
    assert (r.base_offset, r.last_offset) == (0, 5)
    r = log.append(v1_entry(b"a") + v1_entry(b"bb"))
    assert (r.base_offset, r.last_offset) == (6, 7)
    assert offsets_in(log.read(0, 1 << 20).records) == [(0, 1), (2, 4), (5, 5), (6, 6), (7, 7)]
    with pytest.raises(CorruptRecordError):
        log.append(v1_entry(b"zz", attributes=1))  # a "gzip wrapper" whose value is not gzip
    assert log.append(b"") == AppendResult(8, 7, -1)
    assert log.log_end_offset == 8
    # a real compressed v1 wrapper takes one offset per inner message and
    # carries the last one (KIP-31: relative inner offsets)
    from kclient.protocol.records import build_message_set, codecs, iter_record_set

    r = log.append(build_message_set([(b"x", b"1", 5), (b"y", b"2", 6), (b"z", b"3", 7)], magic=1, codec=codecs.GZIP))
    assert (r.base_offset, r.last_offset) == (8, 10)
    assert [(rec.offset, rec.key) for rec in iter_record_set(log.read(9, 1 << 20).records)] == [(8, b"x"), (9, b"y"), (10, b"z")]
    assert log.log_end_offset == 11
    log.close()
    log = Log(tmp_path / "t-0")  # recovery walks the wrapper and keeps it
    assert (log.log_end_offset, log.recovery_truncated_bytes) == (11, 0)
    log.close()


def test_read_max_bytes_partial_tail_and_min_one_batch(tmp_path):
    log = Log(tmp_path / "t-0")
    b = batch(4, value_size=100)
    for _ in range(3):
        log.append(b)
    size = len(b)
    res = log.read(0, size + 10)
    assert len(res.records) == size + 10  # tail is a partial batch, like Kafka
    assert offsets_in(res.records) == [(0, 3)]
    # KIP-74: first batch bigger than max_bytes comes back whole.
    assert len(log.read(4, 10).records) == size
    assert len(log.read(4, 10, min_one_batch=False).records) == 10
    log.close()


def test_out_of_range_reads(tmp_path):
    log = Log(tmp_path / "t-0")
    log.append(batch(3))
    with pytest.raises(OffsetOutOfRangeError, match=r"0\.\.3"):
        log.read(4, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    assert log.read(3, 100).records == b""
    log.close()


def test_oversize_batch_writes_nothing(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(max_message_bytes=300))
    log.append(batch(1))
    before = log.active_segment.size
    small, big = batch(1), batch(1, value_size=400)
    with pytest.raises(MessageSizeTooLargeError):
        log.append(small + big)
    assert log.log_end_offset == 1
    assert log.active_segment.size == before
    assert os.path.getsize(tmp_path / "t-0" / (file_stem(0) + ".log")) == before
    log.close()
    log = Log(tmp_path / "t-1", LogConfig(segment_bytes=200, max_message_bytes=10_000))
    with pytest.raises(RecordListTooLargeError):
        log.append(batch(1, value_size=300))
    assert log.log_end_offset == 0
    log.close()


def test_config_validation():
    with pytest.raises(ConfigError):
        LogConfig(segment_bytes=0)
    with pytest.raises(ConfigError):
        LogConfig(index_interval_bytes=-1)


# ------------------------------------------------------------------ segments


def test_roll_and_reads_across_segments(tmp_path):
    d = tmp_path / "t-0"
    b = batch(2, value_size=200)  # ~280 bytes
    log = Log(d, LogConfig(segment_bytes=1000, index_interval_bytes=0))
    for _ in range(10):
        log.append(b)
    assert log.log_end_offset == 20
    segs = log.segments
    assert len(segs) > 1
    assert all(s.size <= 1000 for s in segs)
    assert [s.base_offset for s in segs] == sorted(s.base_offset for s in segs)
    names = sorted(p.name for p in d.iterdir())
    files = [file_stem(s.base_offset) + suffix for s in segs for suffix in (".log", ".index", ".timeindex")]
    # Each roll also writes a producer state snapshot named by the new segment's base (KIP-98).
    files += [file_stem(s.base_offset) + ".snapshot" for s in segs[1:]]
    assert names == sorted(files)
    # Every offset reads from the batch that holds it; a read ends at its segment.
    for off in range(20):
        res = log.read(off, 1 << 20)
        first = next(iter(scan_batches(res.records)))
        assert first.base_offset <= off <= first.last_offset
        seg = max((s for s in segs if s.base_offset <= off), key=lambda s: s.base_offset)
        assert offsets_in(res.records)[-1][1] == seg.last_offset
    # Reading whole segments one after the other returns the whole log.
    off, seen = 0, []
    while off < log.log_end_offset:
        got = offsets_in(log.read(off, 1 << 20).records)
        seen += got
        off = got[-1][1] + 1
    assert seen == [(2 * i, 2 * i + 1) for i in range(10)]
    log.close()


def test_reopen_continues_at_log_end(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=700, index_interval_bytes=100)
    log = Log(d, cfg)
    for i in range(7):
        log.append(batch(3, value_size=50, ts=1000 * i))
    before = log.read(0, 1 << 20).records
    nsegs = len(log.segments)
    log.close()

    log = Log.open(d, cfg)
    assert log.log_end_offset == 21
    assert len(log.segments) == nsegs
    assert log.read(0, 1 << 20).records == before
    assert log.append(batch(1)).base_offset == 21
    log.close()

    # A missing index is rebuilt.
    for p in d.glob("*.index"):
        p.unlink()
    log = Log.open(d, cfg)
    assert log.log_end_offset == 22
    for off in range(22):
        first = next(iter(scan_batches(log.read(off, 1 << 20).records)))
        assert first.base_offset <= off <= first.last_offset
    log.close()


class _chunks:
    """Temporarily shrink the segment's pread chunk sizes so batches
    straddle chunk boundaries."""

    def __init__(self, walk: int, recover: int) -> None:
        # FIND_CHUNK: the header walk of find_batch re-reads when a header
        # straddles what it read, and skips bodies it did not read.
        self.values = {"WALK_CHUNK": walk, "RECOVER_CHUNK": recover, "FIND_CHUNK": walk}

    def __enter__(self):
        self.saved = {k: getattr(walk_mod, k) for k in self.values}
        for k, v in self.values.items():
            setattr(walk_mod, k, v)

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            setattr(walk_mod, k, v)


def _build_segment(d: Path, sizes, interval: int) -> tuple[LogSegment, int]:
    seg = LogSegment.create(d, 100, index_interval_bytes=interval)
    next_offset = 100
    for n, vsize in sizes:
        data = bytearray(batch(n, value_size=vsize))
        struct.pack_into(">q", data, 0, next_offset)
        seg.append(data, next_offset, next_offset + n - 1)
        next_offset += n
    return seg, next_offset


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 600)), min_size=1, max_size=40),
    interval=st.integers(0, 1500),
    reopen=st.booleans(),
    walk_chunk=st.sampled_from([17, 43, 64, 700, 16 * 1024]),
)
def test_index_lookup_matches_linear_scan(sizes, interval, reopen, walk_chunk):
    with tempfile.TemporaryDirectory() as tmp, _chunks(walk_chunk, walk_chunk):
        d = Path(tmp)
        seg, next_offset = _build_segment(d, sizes, interval)
        if reopen:
            seg.close()
            seg = LogSegment.open(d, 100, index_interval_bytes=interval)
        assert seg.last_offset == next_offset - 1
        whole = seg.read(0, seg.size)
        starts = {i.position: i.base_offset for i in scan_batches(whole)}
        entries = seg.index.entries()
        for off, pos in entries:  # every entry points at the start of its batch
            assert starts[pos] == off
        if interval == 0:
            assert len(entries) == len(sizes) - 1  # sparse: all but the first batch
        for off in range(98, next_offset + 2):
            assert seg.find_position(off) == linear_find(whole, off), off
        seg.close()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 300)), min_size=1, max_size=15),
    cut_fraction=st.floats(0, 1),
    chunk=st.sampled_from([17, 100, 1 << 20]),
)
def test_recovery_keeps_every_complete_batch(sizes, cut_fraction, chunk):
    with tempfile.TemporaryDirectory() as tmp, _chunks(chunk, chunk):
        d = Path(tmp)
        seg, _ = _build_segment(d, sizes, 64)
        whole = seg.read(0, seg.size)
        seg.close()
        cut = int(len(whole) * cut_fraction)
        os.truncate(d / (file_stem(100) + ".log"), cut)
        kept = [i for i in scan_batches(whole) if i.position + i.size <= cut]
        seg = LogSegment.open(d, 100, index_interval_bytes=64)
        expected_size = kept[-1].position + kept[-1].size if kept else 0
        assert seg.recover() == cut - expected_size
        assert seg.size == expected_size
        assert seg.last_offset == (kept[-1].last_offset if kept else 99)
        assert seg.read(0, 1 << 30) == whole[:expected_size]
        for _off, pos in seg.index.entries():
            assert pos < expected_size
        seg.close()


def test_batches_larger_than_the_read_chunk(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=10))
    sizes = [40_000, 10, 70_000, 5, 20_000]
    for i, n in enumerate(sizes):
        log.append(batch(2, value_size=n, ts=i))
    log.close()
    log = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=10))
    assert log.log_end_offset == 10
    for off in range(10):
        res = log.read(off, 100)
        first = next(iter(scan_batches(res.records)))
        assert first.base_offset == off - off % 2
        assert len(res.records) == max(first.size, 100)
    assert log.offset_for_timestamp(4) == (6, 4)  # batch i holds timestamps i, i+1
    log.close()


def test_offset_index_file_round_trip(tmp_path):
    p = tmp_path / "x.index"
    idx = OffsetIndex(p, 1000)
    assert idx.lookup(5000) == (1000, 0)
    for i in range(1, 1100):  # crosses the 4 KiB write buffer
        idx.append(1000 + 3 * i, 10 * i)
    assert idx.lookup(1000 + 3 * 7 + 1) == (1021, 70)
    assert idx.lookup(999) == (1000, 0)
    idx.truncate_to(1000 + 3 * 500)
    assert len(idx) == 499
    with pytest.raises(ValueError):
        idx.append(1000 + 3 * 10, 100_000)
    idx.close()
    assert p.stat().st_size == 499 * 8
    with open(p, "ab") as f:
        f.write(b"\x00\x00\x01")  # partial entry
    idx = OffsetIndex(p, 1000)
    assert len(idx) == 499 and idx.last_entry == (1000 + 3 * 499, 4990)
    assert idx.sanity_check(4991) and not idx.sanity_check(4990)
    idx.close()


# ------------------------------------------------------------------ recovery


def _fill(d: Path, n: int = 5) -> tuple[list[int], int]:
    log = Log(d, LogConfig(index_interval_bytes=50))
    ends = []
    for i in range(n):
        log.append(batch(2, value_size=40 + i, ts=1000 + i))
        ends.append(log.active_segment.size)
    log.close()
    return ends, n * 2


def test_recovery_truncates_partial_batch(tmp_path, caplog):
    d = tmp_path / "t-0"
    ends, _ = _fill(d)
    path = d / (file_stem(0) + ".log")
    cut = ends[3] + 30  # mid-way through the 5th batch
    os.truncate(path, cut)
    with caplog.at_level(logging.WARNING, logger="kclient.storage"):
        log = Log.open(d, LogConfig(index_interval_bytes=50))
    assert any("truncated 30 bytes" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert log.log_end_offset == 8
    assert path.stat().st_size == ends[3]
    for off in range(8):
        first = next(iter(scan_batches(log.read(off, 1 << 20).records)))
        assert first.base_offset <= off <= first.last_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 100)
    assert log.append(batch(1)).base_offset == 8
    log.close()
    log = Log.open(d)
    assert log.log_end_offset == 9
    log.close()


@pytest.mark.parametrize("damage", ["zeros", "flip", "garbage_header"])
def test_recovery_drops_nonsense_blocks(tmp_path, damage, caplog):
    d = tmp_path / "t-0"
    ends, _ = _fill(d)
    path = d / (file_stem(0) + ".log")
    if damage == "zeros":  # inode grew but the block was never written
        with open(path, "ab") as f:
            f.write(b"\x00" * 4096)
        keep, leo = ends[4], 10
    elif damage == "flip":  # last batch's payload corrupted: CRC catches it
        with open(path, "r+b") as f:
            f.seek(ends[4] - 5)
            byte = f.read(1)
            f.seek(ends[4] - 5)
            f.write(bytes([byte[0] ^ 0xFF]))
        keep, leo = ends[3], 8
    else:  # a header claiming an impossible magic
        with open(path, "ab") as f:
            f.write(struct.pack(">qib", 10, 100, 7) + b"\x01" * 100)
        keep, leo = ends[4], 10
    with caplog.at_level(logging.WARNING):
        log = Log.open(d)
    assert log.log_end_offset == leo
    assert path.stat().st_size == keep
    assert offsets_in(log.read(0, 1 << 20).records) == [(2 * i, 2 * i + 1) for i in range(leo // 2)]
    assert caplog.records
    log.close()


def test_recovery_of_clean_log_truncates_nothing(tmp_path):
    d = tmp_path / "t-0"
    _fill(d)
    seg = LogSegment.open(d, 0)
    assert seg.recover() == 0
    assert seg.last_offset == 9
    seg.close()


# ------------------------------------------------------------------ offsets by time


def test_offsets_before(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, LogConfig(segment_bytes=400))
    assert log.offsets_before(-1, 10) == [0]
    assert log.offsets_before(-2, 10) == [0]
    for _ in range(4):
        log.append(batch(2, value_size=120))  # one batch per segment
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 2, 4, 6]
    # Pin segment mtimes to 1000, 2000, 3000, 4000 s.
    for i, s in enumerate(log.segments):
        os.utime(s.log_path, (1000 * (i + 1), 1000 * (i + 1)))
    assert log.offsets_before(-1, 10) == [8, 6, 4, 2, 0]
    assert log.offsets_before(-1, 2) == [8, 6]
    assert log.offsets_before(-2, 10) == [0]
    assert log.offsets_before(2_500_000, 10) == [2, 0]
    assert log.offsets_before(3_000_000, 1) == [4]
    assert log.offsets_before(999_999, 10) == []
    assert log.offsets_before(int(time.time() * 1000) + 60_000, 10) == [8, 6, 4, 2, 0]
    assert log.offsets_before(-1, 0) == []
    log.roll()  # empty active segment: the log end offset is its base
    assert log.offsets_before(-1, 3) == [8, 6, 4]
    log.close()


def test_offset_for_timestamp(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=500))
    assert log.offset_for_timestamp(0) is None
    for i in range(6):
        log.append(batch(3, value_size=100, ts=10_000 + 100 * i))  # max ts 10_002 + 100 i
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(-1) == (18, -1)
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(0) == (0, 10_002)
    assert log.offset_for_timestamp(10_002) == (0, 10_002)
    assert log.offset_for_timestamp(10_003) == (3, 10_102)
    assert log.offset_for_timestamp(10_450) == (15, 10_502)
    assert log.offset_for_timestamp(10_503) is None
    log.close()


def test_delete_old_segments_moves_log_start(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=400))
    for _ in range(4):
        log.append(batch(2, value_size=120))
    snapshot = log.segments
    assert log.delete_old_segments(lambda s: s.base_offset < 4) == 2
    assert len(snapshot) == 4 and log.segments == snapshot[2:]  # old tuple untouched (copy-on-write)
    assert log.log_start_offset == 4
    assert not snapshot[0].log_path.exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    assert offsets_in(log.read(4, 1 << 20).records) == [(4, 5)]
    assert log.delete_old_segments(lambda s: True) == 1  # never the active one
    assert log.log_start_offset == 6
    log.close()
    log = Log.open(tmp_path / "t-0")
    assert (log.log_start_offset, log.log_end_offset) == (6, 8)
    log.close()


# ------------------------------------------------------------------ manager


def test_manager_creates_and_loads_topics(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs, LogConfig(), default_num_partitions=2)
    m.create_topic("my-topic-x", 3)
    m.create_topic("plain")
    m.create_topic("a.b_c-9", 1)
    assert m.topics() == {"my-topic-x": 3, "plain": 2, "a.b_c-9": 1}
    # Spread over the log dirs: 6 partitions, 3 per dir.
    per_dir = [len([p for p in d.iterdir() if p.is_dir()]) for d in dirs]
    assert per_dir == [3, 3]
    m.get("my-topic-x", 2).append(batch(4))
    assert m.get("my-topic-x", 3) is None
    assert m.get("nope", 0) is None
    with pytest.raises(TopicAlreadyExistsError):
        m.create_topic("plain", 1)
    with pytest.raises(InvalidTopicError):
        m.create_topic("a_b.c-9", 1)  # collides with a.b_c-9
    for bad in ["", ".", "..", "a/b", "x" * 250, "sp ace", "é"]:
        with pytest.raises(InvalidTopicError):
            m.create_topic(bad, 1)
    m.create_topic("x" * 249, 1)
    m.close()

    (tmp_path / "a" / "junk-delete").mkdir()
    (tmp_path / "a" / "meta.properties").write_text("x")
    m = LogManager([str(d) for d in dirs], LogConfig())
    assert m.topics() == {"my-topic-x": 3, "plain": 2, "a.b_c-9": 1, "x" * 249: 1}
    assert m.get("my-topic-x", 2).log_end_offset == 4
    assert m.get("a.b_c-9", 0).log_end_offset == 0
    m.close()


def test_parse_partition_dir():
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("t-0") == ("t", 0)
    assert parse_partition_dir("t-01") is None
    assert parse_partition_dir("t-0.abc-delete") is None
    assert parse_partition_dir("-0") is None
    assert parse_partition_dir("notapartition") is None


def test_batch_header_facts_need_only_the_header():
    """read_batch_header reads what read_batch_info does from the first
    HEADER_FACTS_BYTES of a batch (v2) or entry (v0/v1), the rest of it
    absent, and rejects the same impossible headers."""
    from kclient.protocol.records import legacy
    from kclient.protocol.records.scan import HEADER_FACTS_BYTES, read_batch_header, read_batch_info

    v2_batch = batch(3, value_size=500)
    for data in (v2_batch, legacy.build_message_set([(b"k", b"v" * 50, 7)], magic=1, base_offset=9), legacy.build_message_set([(None, b"v")], magic=0, base_offset=4)):
        whole = read_batch_info(data, 0)
        assert read_batch_header(data[:HEADER_FACTS_BYTES], 0) == whole
        assert read_batch_header(data, 0) == whole
    assert read_batch_header(v2_batch[: HEADER_FACTS_BYTES - 1], 0) is None
    bad = bytearray(v2_batch)
    bad[16] = 9
    with pytest.raises(CorruptRecordError):
        read_batch_header(bytes(bad[:HEADER_FACTS_BYTES]), 0)


def test_topic_configs_applied_again_unchanged_touch_no_log(tmp_path, monkeypatch):
    """A broker applies a topic's configs once per partition it is given:
    unchanged overrides leave the logs alone (a topic of N partitions is
    not N x N config comparisons); changed ones reach every log of the
    topic, and logs created later get them too."""
    manager = LogManager([tmp_path])
    manager.create_topic("t", 3)
    manager.create_topic("other", 1)
    updates = []
    real = Log.update_config
    monkeypatch.setattr(Log, "update_config", lambda self, config: (updates.append(self.name), real(self, config)))
    manager.set_topic_config("t", {"retention.ms": "1000"})
    assert sorted(updates) == ["t-0", "t-1", "t-2"]
    assert {manager.get("t", p).config.retention_ms for p in range(3)} == {1000}
    updates.clear()
    compared = []
    real_ne = LogConfig.__ne__
    monkeypatch.setattr(LogConfig, "__ne__", lambda self, other: (compared.append(1), real_ne(self, other))[1])
    for _ in range(5):
        manager.set_topic_config("t", {"retention.ms": "1000"})
    assert updates == [] and compared == []
    assert manager.create_log("t", 3).config.retention_ms == 1000
    manager.set_topic_config("t", {"retention.ms": "2000"})
    assert sorted(updates) == ["t-0", "t-1", "t-2", "t-3"]
    assert {manager.get("t", p).config.retention_ms for p in range(4)} == {2000}
    assert manager.get("other", 0).config.retention_ms != 2000
    manager.close()


@pytest.mark.parametrize("seed", range(40))
def test_read_slice_from_a_known_batch_start_equals_the_header_walk(tmp_path, monkeypatch, seed):
    """A fetch from a segment's base offset or from where a recent batch was
    appended takes its slice without reading a header: the same bytes as
    the header walk for every offset, whatever max_bytes and max_offset
    (the high watermark) say, with v1 entries and after a truncation too.
    (Seeded random logs: each seed is one log and its reads.)"""
    rng = random.Random(seed)
    sizes = [rng.randint(1, 5) for _ in range(rng.randint(1, 30))]
    v1_at = {rng.randrange(30) for _ in range(rng.randint(0, 3))}
    plog = Log(tmp_path / "t-0", LogConfig(segment_bytes=rng.choice([300, 1000, 1 << 20]), index_interval_bytes=128))
    for i, n in enumerate(sizes):
        plog.append(v1_entry(b"w" * 20) if i in v1_at else batch(n, 20, tag=b"%d" % (i % 10)))
    if len(sizes) > 3 and rng.random() < 0.5:
        plog.truncate_to(plog.log_end_offset - sizes[-1] - 1)  # a follower's truncation
        plog.append(batch(2, 20, tag=b"t"))
    end = plog.log_end_offset
    limits = [(rng.randint(0, 4000), rng.choice([None, rng.randint(0, end)]), rng.random() < 0.5) for _ in range(3)]
    walks = []
    real_find = LogSegment.find_batch
    monkeypatch.setattr(LogSegment, "find_batch", lambda self, offset: (walks.append(offset), real_find(self, offset))[1])

    def slices(fast: bool) -> list:
        got = []
        for offset, (max_bytes, max_offset, min_one) in itertools.product(range(end + 1), limits):
            with monkeypatch.context() as m:
                if not fast:
                    m.setattr(LogSegment, "batch_start", lambda self, offset: None)
                piece = plog.read_slice(offset, max_bytes, min_one_batch=min_one, max_offset=max_offset)
            with piece:
                got.append((offset, max_bytes, max_offset, piece.path, piece.position, piece.length, piece.read()))
        return got

    fast = slices(True)
    fast_walks = len(walks)
    walks.clear()
    assert fast == slices(False)
    assert fast_walks <= len(walks)
    plog.close()


def test_read_slice_from_the_start_or_the_last_append_reads_no_header(tmp_path, monkeypatch):
    """The two known starts: offset 0 (a consumer reading from the
    beginning) and the base offset of the batch appended last (a consumer
    that has read everything so far)."""
    plog = Log(tmp_path / "t-0", LogConfig())
    for _ in range(5):
        plog.append(batch(3))
    monkeypatch.setattr(LogSegment, "find_batch", lambda self, offset: pytest.fail("a header was read"))
    with plog.read_slice(0, 1 << 20, max_offset=plog.high_watermark) as whole:
        assert (whole.position, whole.length) == (0, plog.active_segment.size)
    before = plog.active_segment.size
    plog.append(batch(2))
    with plog.read_slice(15, 1 << 20, max_offset=plog.high_watermark) as tail:
        assert (tail.position, tail.length) == (before, plog.active_segment.size - before)
    plog.close()
