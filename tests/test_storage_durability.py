"""Durability tests of the broker's log engine (issue 4, storage parts):
flush policy (M messages / S ms), time-based roll, the time index,
recovery after real damage to real files, the recovery point checkpoint and
clean-shutdown marker, retention, and zero-copy file slices that survive
deletion. Every test works on real files under a temporary directory and an
injected clock: nothing sleeps and nothing asserts on timing."""

from __future__ import annotations

import logging
import os
import random
import socket
import struct
import tempfile
import threading
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.examples import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kclient.errors import ConfigError, OffsetOutOfRangeError
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import build_batch
from kclient.storage import (
    CLEAN_SHUTDOWN_FILE,
    MAX_TIMESTAMP,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    FileSlice,
    Log,
    LogConfig,
    LogManager,
    LogSegment,
    read_checkpoint,
    write_checkpoint,
)
from kclient.storage.segment import file_stem

pytestmark = pytest.mark.unit

DAY_MS = 24 * 3600 * 1000


def batch(n: int = 1, value_size: int = 10, ts: int = 1_000, tag: bytes = b"v", ts_step: int = 1) -> bytes:
    """A valid v2 batch of ``n`` records (base offset 0: the log rewrites
    it) with timestamps ts, ts+ts_step, ..."""
    return build_batch([(None, (tag * value_size)[:value_size], ts + i * ts_step) for i in range(n)], base_offset=0)


def v0_entry(value: bytes) -> bytes:
    """A magic-0 message (no timestamp)."""
    body = struct.pack(">bbi", 0, 0, -1) + struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body) & 0xFFFFFFFF
    return struct.pack(">qiI", 0, 4 + len(body), crc) + body


class Clock:
    """Injectable ms clock: tests move ``now`` by hand."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def log_batches(log: Log) -> list[tuple[int, int, int, bytes]]:
    """Every batch of the log as ``(base offset, last offset, max ts, bytes)``,
    read segment by segment."""
    out = []
    for seg in log.segments:
        data = seg.read(0, seg.size)
        for i in scan_batches(data):
            out.append((i.base_offset, i.last_offset, i.max_timestamp, data[i.position : i.position + i.size]))
    return out


def read_all(log: Log) -> bytes:
    """The whole log through the public read path."""
    out = bytearray()
    off = log.log_start_offset
    while off < log.log_end_offset:
        data = log.read(off, 1 << 30).records
        infos = list(scan_batches(data))
        assert infos, f"no batch at offset {off}"
        out += data[: infos[-1].position + infos[-1].size]
        off = infos[-1].last_offset + 1
    return bytes(out)


def seg_path(d: Path, base: int, suffix: str = ".log") -> Path:
    return d / (file_stem(base) + suffix)


@pytest.fixture
def fsyncs(monkeypatch):
    """Count ``os.fsync`` calls per file name (via /proc/self/fd)."""
    calls: list[str] = []
    real = os.fsync

    def counting(fd):
        try:
            calls.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        except OSError:
            calls.append(str(fd))
        return real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


# ------------------------------------------------------------------ config


def test_log_config_defaults_and_validation():
    cfg = LogConfig()
    assert cfg.roll_ms == 7 * DAY_MS
    assert cfg.flush_interval_messages == 2**63 - 1
    assert cfg.flush_interval_ms is None
    assert cfg.retention_ms == 7 * DAY_MS
    assert cfg.retention_bytes == -1
    for bad in (
        {"roll_ms": 0},
        {"flush_interval_messages": 0},
        {"flush_interval_ms": -1},
        {"retention_ms": -2},
        {"retention_bytes": -5},
        {"index_max_bytes": 2},
        {"roll_ms": "1"},
    ):
        with pytest.raises(ConfigError):
            LogConfig(**bad)
    assert LogConfig(retention_ms=-1, retention_bytes=-1, flush_interval_ms=0).flush_interval_ms == 0


def test_log_config_from_broker_config():
    cfg = LogConfig.from_broker_config(
        SimpleNamespace(
            log_segment_bytes=5000,
            log_index_interval_bytes=10,
            message_max_bytes=4000,
            log_roll_hours=2,
            log_flush_interval_messages=1,
            log_flush_interval_ms=250,
            log_retention_hours=1,
            log_retention_minutes=3,
            log_retention_ms=None,
            log_retention_bytes=123456,
            log_index_size_max_bytes=4096,
        )
    )
    assert cfg == LogConfig(
        segment_bytes=5000,
        index_interval_bytes=10,
        max_message_bytes=4000,
        roll_ms=2 * 3_600_000,
        flush_interval_messages=1,
        flush_interval_ms=250,
        retention_ms=3 * 60_000,  # minutes win over hours, ms over minutes
        retention_bytes=123456,
        index_max_bytes=4096,
    )
    assert LogConfig.from_broker_config(SimpleNamespace(log_roll_ms=7, log_roll_hours=1, log_retention_hours=-1)) == LogConfig(
        roll_ms=7, retention_ms=-1
    )
    assert LogConfig.from_broker_config(object()) == LogConfig()


# ------------------------------------------------------------------ flush policy


def test_flush_policy_messages(tmp_path, fsyncs):
    clock = Clock(1_000)
    log = Log(tmp_path / "t-0", LogConfig(flush_interval_messages=3), clock=clock)
    assert log.recovery_point == 0
    fsyncs.clear()
    log.append(batch(1))
    log.append(batch(1))
    assert (log.recovery_point, log.unflushed_messages, log.flush_count) == (0, 2, 0)
    assert fsyncs == []
    log.append(batch(1))  # the 3rd message: flushed before append returns
    assert (log.recovery_point, log.unflushed_messages, log.flush_count) == (3, 0, 1)
    stem = file_stem(0)
    assert {stem + ".log", stem + ".index", stem + ".timeindex"} <= set(fsyncs)
    fsyncs.clear()
    log.append(batch(5))  # one batch of 5 messages crosses M at once
    assert (log.recovery_point, log.flush_count) == (8, 2)
    assert stem + ".log" in fsyncs
    assert log.flush() is False  # nothing left to flush
    log.close()


def test_flush_policy_every_message_and_never(tmp_path, fsyncs):
    log = Log(tmp_path / "t-0", LogConfig(flush_interval_messages=1, segment_bytes=400))
    for _ in range(6):
        r = log.append(batch(2, value_size=100))
        assert log.recovery_point == log.log_end_offset == r.last_offset + 1
    assert len(log.segments) > 1
    assert log.flush_count >= 6
    log.close()

    fsyncs.clear()
    log = Log(tmp_path / "t-1", LogConfig())  # default M: never by count
    for _ in range(50):
        log.append(batch(1))
    assert fsyncs == [] and log.recovery_point == 0 and log.unflushed_messages == 50
    log.flush()
    assert log.recovery_point == 50 and fsyncs
    log.close()


def test_flush_policy_time(tmp_path):
    clock = Clock(10_000)
    log = Log(tmp_path / "t-0", LogConfig(flush_interval_ms=1_000), clock=clock)
    assert log.flush_if_due(50_000) is False  # nothing appended
    log.append(batch(1))  # appended at 10_000 (the clock)
    log.append(batch(1), now_ms=10_400)
    assert log.flush_if_due(10_999) is False
    assert log.recovery_point == 0
    assert log.flush_if_due(11_000) is True  # the oldest unflushed append is 1000 ms old
    assert log.recovery_point == 2 and log.flush_count == 1
    assert log.flush_if_due(20_000) is False
    clock.now = 30_000
    log.append(batch(3))
    clock.now = 30_999
    assert log.flush_if_due() is False
    clock.now = 31_000
    assert log.flush_if_due() is True and log.recovery_point == 5
    log.close()
    # Without S the time policy never flushes.
    log = Log(tmp_path / "t-1", LogConfig(), clock=clock)
    log.append(batch(1))
    assert log.flush_if_due(10**15) is False
    log.close()


def test_manager_checkpoints_recovery_points(tmp_path):
    clock = Clock(0)
    d = tmp_path / "data"
    m = LogManager([d], LogConfig(flush_interval_messages=2, flush_interval_ms=500), clock=clock)
    m.create_topic("a", 2)
    cp = d / RECOVERY_POINT_CHECKPOINT
    assert read_checkpoint(cp) == {}  # written at startup, before the topic existed
    a0, a1 = m.get("a", 0), m.get("a", 1)
    a0.append(batch(1))
    a0.append(batch(1))  # M reached: flushed
    a1.append(batch(1))  # not yet
    assert (a0.recovery_point, a1.recovery_point) == (2, 0)
    assert m.flush_if_due(100) == 0  # a1's append is only 100 ms old
    assert read_checkpoint(cp) == {("a", 0): 2, ("a", 1): 0}
    assert m.flush_if_due(500) == 1
    assert read_checkpoint(cp) == {("a", 0): 2, ("a", 1): 1}
    text = cp.read_text()
    assert text.splitlines()[:2] == ["0", "2"] and "a 0 2" in text and "a 1 1" in text
    mtime = cp.stat().st_mtime_ns
    m.flush_if_due(10_000)  # nothing moved: no rewrite
    assert cp.stat().st_mtime_ns == mtime
    m.close()
    assert (d / CLEAN_SHUTDOWN_FILE).exists()


def test_checkpoint_file_format(tmp_path):
    p = tmp_path / "cp"
    assert read_checkpoint(p) == {}
    write_checkpoint(p, {("b", 1): 7, ("a-x.y", 0): 0, ("a-x.y", 10): 2**40})
    assert p.read_text() == "0\n3\na-x.y 0 0\na-x.y 10 1099511627776\nb 1 7\n"
    assert read_checkpoint(p) == {("b", 1): 7, ("a-x.y", 0): 0, ("a-x.y", 10): 2**40}
    assert not (tmp_path / "cp.tmp").exists()
    for bad in ["", "0\n", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "0\n1\na 0 -4\n", "x\n0\n"]:
        p.write_text(bad)
        with pytest.raises(CheckpointError):
            read_checkpoint(p)


# ------------------------------------------------------------------ roll


def test_time_based_roll_with_injected_clock(tmp_path):
    clock = Clock(1_000_000)
    d = tmp_path / "t-0"
    log = Log(d, LogConfig(roll_ms=1_000), clock=clock)
    log.append(batch(1, ts=5))  # producer timestamps do not matter while running
    clock.now += 1_000
    log.append(batch(1, ts=5))  # exactly roll_ms old: not older yet
    assert [s.base_offset for s in log.segments] == [0]
    clock.now += 1
    log.append(batch(1, ts=5))  # first batch now 1001 ms old: roll first
    assert [s.base_offset for s in log.segments] == [0, 2]
    clock.now += 500
    log.append(batch(1))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.append(batch(1), now_ms=clock.now + 10_000)  # an explicit time wins over the clock
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    # A quiet log does not roll by itself, and an empty segment never rolls.
    clock.now += 10**9
    assert log.roll().base_offset == 5
    assert log.roll().base_offset == 5
    log.close()

    # After a restart the age counts from the first batch's timestamp, capped
    # at the load time.
    clock.now = 50_000
    d2 = tmp_path / "t-1"
    log = Log(d2, LogConfig(roll_ms=1_000), clock=clock)
    log.append(batch(1, ts=49_500))
    log.close()
    log = Log(d2, LogConfig(roll_ms=1_000), clock=clock)
    log.append(batch(1), now_ms=50_500)
    assert len(log.segments) == 1
    log.append(batch(1), now_ms=50_501)
    assert len(log.segments) == 2
    log.close()


def test_full_index_rolls_segment(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=0, index_max_bytes=40))  # 5 offset entries
    for _ in range(20):
        log.append(batch(1))
    assert len(log.segments) > 2
    assert all(len(s.index) <= 5 for s in log.segments)
    assert [b[0] for b in log_batches(log)] == list(range(20))
    log.close()


# ------------------------------------------------------------------ time index


def linear_offset_for_timestamp(batches, target):
    for base, _last, max_ts, _data in batches:
        if max_ts >= target:
            return (base, max_ts)
    return None


def check_time_index_truthful(log: Log) -> None:
    """Every time index entry (T, O): the batch holding O has largest
    timestamp T and every earlier batch of its segment a smaller one."""
    for seg in log.segments:
        infos = list(seg.iter_batches())
        entries = seg.timeindex.entries()
        assert [t for t, _ in entries] == sorted({t for t, _ in entries})
        for ts, off in entries:
            holder = next(i for i in infos if i.last_offset >= off)
            assert holder.max_timestamp == ts and holder.base_offset <= off
            assert all(i.max_timestamp < ts for i in infos if i.last_offset < holder.base_offset)
        if any(i.max_timestamp >= 0 for i in infos) and seg is not log.active_segment:
            assert entries[-1][0] == max(i.max_timestamp for i in infos)  # final entry on roll


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 10_000), st.integers(0, 30)), min_size=1, max_size=40),
    segment_bytes=st.sampled_from([300, 700, 5_000, 1 << 20]),
    interval=st.sampled_from([0, 1, 100, 500, 4096]),
    reopen=st.sampled_from(["no", "clean", "drop_timeindex", "unclean"]),
    extra=st.lists(st.integers(-5, 10_100), max_size=10),
)
def test_time_index_lookup_matches_linear_scan(specs, segment_bytes, interval, reopen, extra):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
        log = Log(d, cfg)
        for n, ts, step in specs:  # timestamps jump around, as producer clocks do
            log.append(batch(n, value_size=30, ts=ts, ts_step=step))
        if reopen != "no":
            log.close()
            if reopen == "drop_timeindex":
                for p in d.glob("*.timeindex"):
                    p.unlink()
            log = Log(d, cfg, recovery_point=0 if reopen == "unclean" else None, clean_shutdown=reopen == "clean")
        batches = log_batches(log)
        check_time_index_truthful(log)
        targets = {t for _, _, t, _ in batches} | {t + 1 for _, _, t, _ in batches} | {t - 1 for _, _, t, _ in batches}
        targets |= set(extra) | {0, 10**12}
        for target in sorted(targets):
            if target in (-1, -2, -3):
                continue
            assert log.offset_for_timestamp(target) == linear_offset_for_timestamp(batches, target), target
        top = max(t for _, _, t, _ in batches)
        first_top = next(b for b in batches if b[2] == top)
        assert log.offset_for_timestamp(MAX_TIMESTAMP) == (first_top[0], top)
        log.close()


def test_time_lookup_walks_few_batches(tmp_path, monkeypatch):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=10_000, index_interval_bytes=0))
    for i in range(600):
        log.append(batch(1, ts=1_000 + 10 * i))
    assert len(log.segments) > 3
    walked = []
    real = LogSegment.iter_batches

    def counting(self, position=0):
        for info in real(self, position):
            walked.append(info)
            yield info

    monkeypatch.setattr(LogSegment, "iter_batches", counting)
    for i in range(0, 600, 37):
        walked.clear()
        assert log.offset_for_timestamp(1_000 + 10 * i - 5) == (i, 1_000 + 10 * i)
        assert len(walked) <= 3, len(walked)
    log.close()


# ------------------------------------------------------------------ recovery


def build_log(d: Path, cfg: LogConfig, n_batches: int = 30, seed: int = 0) -> list[tuple[int, int, int, bytes]]:
    rnd = random.Random(seed)
    log = Log(d, cfg)
    for i in range(n_batches):
        log.append(batch(rnd.randint(1, 3), value_size=rnd.randint(10, 120), ts=1_000 + i))
    batches = log_batches(log)
    assert len(log.segments) >= 3
    log.close()
    return batches


def segment_layout(d: Path) -> list[tuple[int, int]]:
    """``(base offset, file size)`` of each segment file."""
    return sorted((int(p.name[:20]), p.stat().st_size) for p in d.glob("*.log"))


def locate(batches, layout, k_seg: int, which: int):
    """The ``which``-th batch of segment number ``k_seg``: ``(index in batches,
    byte position in its file)``."""
    base = layout[k_seg][0]
    nxt = layout[k_seg + 1][0] if k_seg + 1 < len(layout) else 1 << 62
    pos = 0
    inside = [i for i, b in enumerate(batches) if base <= b[0] < nxt]
    for i in inside[:which]:
        pos += len(batches[i][3])
    return inside[which], pos


CFG = LogConfig(segment_bytes=1_200, index_interval_bytes=100)


def check_recovered(log: Log, batches, keep: int) -> None:
    """The log holds exactly the first ``keep`` original batches, reads them
    back through every path and appends at the right offset."""
    assert log_batches(log) == batches[:keep]
    expected_end = batches[keep - 1][1] + 1 if keep else 0
    assert log.log_end_offset == expected_end
    assert read_all(log) == b"".join(b[3] for b in batches[:keep])
    for _base, last, _, data in batches[:keep]:
        assert log.read(last, 1 << 20).records.startswith(data)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(expected_end + 1, 100)
    r = log.append(batch(2, tag=b"new"))
    assert (r.base_offset, r.last_offset) == (expected_end, expected_end + 1)
    assert log.read(expected_end, 1 << 20).records == log_batches(log)[-1][3]


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_recovery_truncation_mid_batch(tmp_path, where, caplog):
    d = tmp_path / "t-0"
    batches = build_log(d, CFG)
    layout = segment_layout(d)
    k = {"first": 0, "middle": len(layout) // 2, "last": len(layout) - 1}[where]
    idx, pos = locate(batches, layout, k, 1)
    cut = pos + len(batches[idx][3]) // 2
    os.truncate(seg_path(d, layout[k][0]), cut)
    later = sum(size for _, size in layout[k + 1 :])
    with caplog.at_level(logging.WARNING, logger="kclient.storage"):
        log = Log(d, CFG, recovery_point=0)
    assert log.recovery_truncated_bytes == (cut - pos) + later
    assert any(f"truncated {cut - pos} bytes" in r.getMessage() for r in caplog.records)
    assert any(f"recovery truncated {log.recovery_truncated_bytes} bytes" in r.getMessage() for r in caplog.records)
    assert [s.base_offset for s in log.segments] == [b for b, _ in layout[: k + 1]]
    assert sorted(p.name for p in d.iterdir() if p.name.endswith(".log")) == [file_stem(b) + ".log" for b, _ in layout[: k + 1]]
    check_recovered(log, batches, idx)
    log.close()
    log = Log(d, CFG, recovery_point=0)  # and it stays that way
    assert log.recovery_truncated_bytes == 0
    assert log_batches(log)[:idx] == batches[:idx]
    log.close()


def test_recovery_random_bytes_appended(tmp_path):
    d = tmp_path / "t-0"
    batches = build_log(d, CFG)
    layout = segment_layout(d)
    junk = random.Random(7).randbytes(3_000)
    with open(seg_path(d, layout[-1][0]), "ab") as f:
        f.write(junk)
    log = Log(d, CFG)  # default: the last segment is checked
    assert log.recovery_truncated_bytes == len(junk)
    check_recovered(log, batches, len(batches))
    log.close()


def test_recovery_flipped_byte_deletes_later_segments(tmp_path):
    d = tmp_path / "t-0"
    batches = build_log(d, CFG)
    layout = segment_layout(d)
    idx, pos = locate(batches, layout, 1, 2)
    path = seg_path(d, layout[1][0])
    data = bytearray(path.read_bytes())
    data[pos + 70] ^= 0x40  # inside the records of the 3rd batch of the 2nd segment
    path.write_bytes(bytes(data))
    m = LogManager([tmp_path], CFG)  # no checkpoint, no marker: full recovery
    log = m.get("t", 0)
    assert m.recovery_truncated_bytes() == {("t", 0): (layout[1][1] - pos) + sum(s for _, s in layout[2:])}
    assert len(log.segments) == 2
    check_recovered(log, batches, idx)
    m.close()


def test_recovery_flipped_base_offset_is_caught(tmp_path):
    d = tmp_path / "t-0"
    batches = build_log(d, CFG)
    layout = segment_layout(d)
    idx, pos = locate(batches, layout, 0, 3)
    path = seg_path(d, layout[0][0])
    data = bytearray(path.read_bytes())
    data[pos + 6] ^= 0x01  # the base offset is not covered by the CRC
    path.write_bytes(bytes(data))
    log = Log(d, CFG, recovery_point=0)
    check_recovered(log, batches, idx)
    log.close()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    damage=st.sampled_from(["truncate", "append", "flip"]),
    k_fraction=st.floats(0, 0.999),
    where=st.floats(0, 0.999),
    junk_len=st.integers(1, 2_000),
    seed=st.integers(0, 1000),
)
def test_recovery_from_random_damage(damage, k_fraction, where, junk_len, seed):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        batches = build_log(d, CFG, n_batches=20, seed=seed)
        layout = segment_layout(d)
        k = int(k_fraction * len(layout))
        base, size = layout[k]
        path = seg_path(d, base)
        in_seg = [i for i, b in enumerate(batches) if base <= b[0] and (k + 1 == len(layout) or b[0] < layout[k + 1][0])]
        starts, pos = [], 0
        for i in in_seg:
            starts.append(pos)
            pos += len(batches[i][3])
        p = int(where * size)
        j = max(n for n, s in enumerate(starts) if s <= p)  # the batch holding byte p
        if damage == "truncate":
            os.truncate(path, p)
            keep = in_seg[j]  # batches before the one cut
            lost = p - starts[j] + sum(s for _, s in layout[k + 1 :])  # the partial batch, later segments
        elif damage == "append":
            with open(path, "ab") as f:
                f.write(random.Random(seed).randbytes(junk_len))
            keep = in_seg[-1] + 1
            lost = junk_len + sum(s for _, s in layout[k + 1 :])
        else:
            assume(not 12 <= p - starts[j] < 16)  # partitionLeaderEpoch: covered by nothing
            data = bytearray(path.read_bytes())
            data[p] ^= 0xFF
            path.write_bytes(bytes(data))
            keep = in_seg[j]
            lost = size - starts[j] + sum(s for _, s in layout[k + 1 :])
        log = Log(d, CFG, recovery_point=0)
        assert log.recovery_truncated_bytes == lost
        check_recovered(log, batches, keep)
        log.close()


def test_recovery_starts_at_recovery_point(tmp_path):
    d = tmp_path / "t-0"
    build_log(d, CFG)
    layout = segment_layout(d)
    assert len(layout) >= 4
    # Flip a CRC-covered byte in segment 0 and in segment 2.
    for k in (0, 2):
        path = seg_path(d, layout[k][0])
        data = bytearray(path.read_bytes())
        data[80] ^= 0x10
        path.write_bytes(bytes(data))
    # Recovery point inside segment 2: segments 0 and 1 are trusted.
    rp = layout[2][0] + 1
    log = Log(d, CFG, recovery_point=rp)
    assert log.recovered_segments == 1
    assert [s.base_offset for s in log.segments] == [b for b, _ in layout[:3]]
    assert log.log_end_offset == layout[2][0]  # segment 2's first batch was damaged
    assert log.recovery_point == log.log_end_offset
    log.close()


def test_missing_and_garbage_indexes_are_rebuilt(tmp_path, caplog):
    d = tmp_path / "t-0"
    batches = build_log(d, CFG)
    layout = segment_layout(d)
    originals = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix in (".index", ".timeindex")}
    assert any(originals[n] for n in originals if n.endswith(".index"))
    seg_path(d, layout[0][0], ".index").unlink()
    seg_path(d, layout[1][0], ".timeindex").unlink()
    seg_path(d, layout[2][0], ".index").write_bytes(random.Random(1).randbytes(77))
    seg_path(d, layout[2][0], ".timeindex").write_bytes(random.Random(2).randbytes(60))
    with caplog.at_level(logging.INFO, logger="kclient.storage"):
        log = Log(d, CFG, clean_shutdown=True)  # trusted segments: indexes checked, not the batches
    assert log.recovered_segments == 0
    assert any("corrupt" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    log.close()
    rebuilt = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix in (".index", ".timeindex")}
    assert rebuilt == originals  # rebuilt exactly as they were written
    log = Log(d, CFG)
    assert log_batches(log) == batches
    for base, _last, ts, data in batches:
        assert log.read(base, 1).records == data
        assert log.offset_for_timestamp(ts) == linear_offset_for_timestamp(batches, ts)
    log.close()


def test_plausible_but_wrong_index_is_detected(tmp_path):
    d = tmp_path / "t-0"
    batches = build_log(d, CFG)
    layout = segment_layout(d)
    log = Log(d, CFG)
    seg = log.segments[0]
    entries = seg.index.entries()
    log.close()
    assert len(entries) >= 2
    # Monotone, inside the file, but every position is off by 3 bytes.
    seg_path(d, layout[0][0], ".index").write_bytes(
        b"".join(struct.pack(">ii", off - layout[0][0], pos + 3) for off, pos in entries)
    )
    log = Log(d, CFG, clean_shutdown=True)
    seg = log.segments[0]
    for _base, last, _, data in batches:
        assert log.read(last, 1).records == data
    assert seg.index_suspect
    log.flush()  # the writer repairs suspect indexes
    assert not seg.index_suspect and seg.index.entries() == entries
    log.close()


def test_clean_shutdown_marker_skips_recovery(tmp_path):
    data_dir = tmp_path / "data"
    m = LogManager([data_dir], CFG)
    m.create_topic("t", 1)
    log = m.get("t", 0)
    for i in range(30):
        log.append(batch(2, value_size=60, ts=i))
    batches = log_batches(log)
    m.close()
    assert (data_dir / CLEAN_SHUTDOWN_FILE).exists()
    assert read_checkpoint(data_dir / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 60}
    d = data_dir / "t-0"
    layout = segment_layout(d)
    # Damage a trusted middle segment: a clean start does not look at it.
    path = seg_path(d, layout[1][0])
    raw = bytearray(path.read_bytes())
    raw[90] ^= 0x08
    path.write_bytes(bytes(raw))

    m = LogManager([data_dir], CFG)
    assert m.clean_shutdown_dirs == [data_dir]
    assert not (data_dir / CLEAN_SHUTDOWN_FILE).exists()  # removed at startup
    log = m.get("t", 0)
    assert log.recovered_segments == 0 and log.recovery_truncated_bytes == 0
    assert log.log_end_offset == 60 and log.recovery_point == 60
    log.append(batch(1))
    # Crash: no close(), so no marker. The checkpoint says 60, so only the last
    # segment is recovered and the old damage stays unnoticed...
    m2 = LogManager([data_dir], CFG)
    assert m2.get("t", 0).recovered_segments == 1
    assert m2.get("t", 0).log_end_offset == 61
    m2._close(clean=False)
    # ...until a start without checkpoint recovers everything.
    (data_dir / RECOVERY_POINT_CHECKPOINT).unlink()
    m3 = LogManager([data_dir], CFG)
    log = m3.get("t", 0)
    assert log.recovered_segments == 2
    assert log.log_end_offset == batches[[b[0] for b in batches].index(layout[1][0])][0]
    assert log_batches(log) == [b for b in batches if b[0] < layout[1][0]]
    m3.close()
    m._close(clean=False)


def test_clean_marker_with_damaged_tail_still_recovers(tmp_path):
    data_dir = tmp_path / "data"
    m = LogManager([data_dir], CFG)
    m.create_topic("t", 1)
    for i in range(10):
        m.get("t", 0).append(batch(1, ts=i))
    batches = log_batches(m.get("t", 0))
    m.close()
    d = data_dir / "t-0"
    with open(seg_path(d, segment_layout(d)[-1][0]), "ab") as f:
        f.write(b"\x00" * 100)
    m = LogManager([data_dir], CFG)
    assert m.recovery_truncated_bytes() == {("t", 0): 100}
    assert log_batches(m.get("t", 0)) == batches
    m.close()


def test_unreadable_checkpoint_means_full_recovery(tmp_path, caplog):
    data_dir = tmp_path / "data"
    m = LogManager([data_dir], CFG)
    m.create_topic("t", 1)
    for i in range(30):
        m.get("t", 0).append(batch(2, value_size=60, ts=i))
    m.flush()
    m._close(clean=False)  # as if killed after the flush
    (data_dir / RECOVERY_POINT_CHECKPOINT).write_text("garbage")
    with caplog.at_level(logging.WARNING):
        m = LogManager([data_dir], CFG)
    assert any("unreadable recovery point checkpoint" in r.getMessage() for r in caplog.records)
    assert m.get("t", 0).recovered_segments == len(m.get("t", 0).segments)
    assert read_checkpoint(data_dir / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 60}  # rewritten
    m.close()


def test_leftover_deleted_files_are_removed_on_open(tmp_path):
    d = tmp_path / "t-0"
    build_log(d, CFG)
    layout = segment_layout(d)
    first = seg_path(d, layout[0][0])
    # A crash after renaming a segment for deletion but before unlinking it.
    for suffix in (".log", ".index", ".timeindex"):
        p = seg_path(d, layout[0][0], suffix)
        p.rename(p.with_name(p.name + ".deleted"))
    log = Log(d, CFG)
    assert log.log_start_offset == layout[1][0]
    assert not list(d.glob("*.deleted")) and not first.exists()
    log.close()


# ------------------------------------------------------------------ retention


def fill_segments(log: Log, n_segments: int, ts_of=lambda i: 1_000 * i):
    """Append one ~500-byte batch per segment (segment_bytes=600)."""
    for i in range(n_segments):
        log.append(batch(2, value_size=200, ts=ts_of(i)))
    assert len(log.segments) == n_segments


def test_retention_by_time(tmp_path):
    d = tmp_path / "t-0"
    log = Log(d, LogConfig(segment_bytes=600, retention_ms=10_000))
    fill_segments(log, 6)  # segment i holds timestamps 1000 i .. 1000 i + 1
    files = [s.log_path for s in log.segments]
    assert log.apply_retention(now_ms=10_001) == 0  # segment 0's largest ts is 1
    assert log.apply_retention(now_ms=11_002) == 2  # largest ts 1 and 1001 are > 10 s old, 2001 is not
    assert log.log_start_offset == 4
    assert not files[0].exists() and not files[1].exists() and files[2].exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    assert log.read(4, 1 << 20).records == log_batches(log)[0][3]
    assert log.offset_for_timestamp(0) == (4, 2_001)
    assert log.offset_for_timestamp(-2) == (4, -1)
    # Everything expired, the active segment too (Kafka's UnifiedLog rolls an
    # empty one first): the log is empty from its log end offset on.
    assert log.apply_retention(now_ms=10**12) == 4
    assert len(log.segments) == 1 and log.segments[0].size == 0
    assert (log.log_start_offset, log.log_end_offset) == (12, 12)
    assert not log.read(12, 1 << 20).records
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 100)
    assert log.apply_retention(now_ms=10**12) == 0  # an empty active segment is never deleted
    log.append(batch(2, value_size=200, ts=10**12))
    assert log.read(12, 1 << 20).records
    log.close()
    log = Log(d, LogConfig(segment_bytes=600, retention_ms=10_000))
    assert (log.log_start_offset, log.log_end_offset) == (12, 14)
    log.close()


def test_retention_keeps_what_is_above_the_high_watermark(tmp_path):
    """Kafka deletes only segments wholly below the high watermark: a
    follower's or leader's records not yet replicated stay, however old."""
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=600, retention_ms=10_000))
    fill_segments(log, 4)  # offsets 0..7, two per segment
    log.update_high_watermark(5)  # inside segment 2 (offsets 4..5 end at 6)
    assert log.apply_retention(now_ms=10**12) == 2  # segments 0 and 1 end at 4 <= 5; segment 2 ends at 6 > 5
    assert log.log_start_offset == 4
    log.update_high_watermark(8)
    assert log.apply_retention(now_ms=10**12) == 2  # then the rest, the active segment too
    assert (log.log_start_offset, log.log_end_offset) == (8, 8)
    log.close()


def test_retention_by_time_uses_mtime_without_timestamps(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=100, retention_ms=DAY_MS))
    for _ in range(3):
        log.append(v0_entry(b"x" * 60))
    assert len(log.segments) == 3 and log.segments[0].max_timestamp == -1
    old = log.segments[0].log_path
    os.utime(old, (1_000, 1_000))  # 1970
    now = log.segments[1].mtime + 1_000
    assert log.apply_retention(now_ms=now) == 1
    assert log.log_start_offset == 1
    log.close()


def test_retention_by_bytes(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=600, retention_bytes=1_600, retention_ms=-1))
    fill_segments(log, 6)
    sizes = [s.size for s in log.segments]
    # Kafka's rule: delete the oldest segment while the log without it still
    # holds at least retention.bytes.
    assert log.apply_retention(now_ms=10**15) == 2
    left = sum(s.size for s in log.segments)
    assert left == sum(sizes[2:]) and left - log.segments[0].size < 1_600 <= left
    assert log.log_start_offset == 4
    assert log.apply_retention(now_ms=10**15) == 0
    log.close()
    log = Log(tmp_path / "t-1", LogConfig(segment_bytes=600, retention_bytes=0, retention_ms=-1))
    fill_segments(log, 4)
    assert log.apply_retention() == 4  # every segment, the active one too, with 0 bytes allowed (as Kafka)
    assert len(log.segments) == 1 and log.segments[0].size == 0 and log.log_start_offset == log.log_end_offset == 8
    log.close()
    log = Log(tmp_path / "t-2", LogConfig(segment_bytes=600))  # defaults: 7 days, unlimited bytes
    fill_segments(log, 3, ts_of=lambda i: 10**13)
    assert log.apply_retention(now_ms=10**13) == 0
    log.close()


def test_manager_cleanup(tmp_path):
    clock = Clock(100_000)
    m = LogManager([tmp_path / "a", tmp_path / "b"], LogConfig(segment_bytes=600, retention_ms=50_000), clock=clock)
    m.create_topic("t", 2)
    for p in range(2):
        fill_segments(m.get("t", p), 4, ts_of=lambda i: 40_000 + 10_000 * i)
    assert m.cleanup() == 2  # per partition, only segment 0 (largest ts 40_001) is over 50 s old
    assert [m.get("t", p).log_start_offset for p in range(2)] == [2, 2]
    clock.now = 10**9
    assert m.cleanup() == 6  # every segment of each partition, the active one too (a new empty one is rolled)
    m.close()
    # One checkpoint and one marker per log dir, each naming its own partitions.
    cps = [read_checkpoint(tmp_path / d / RECOVERY_POINT_CHECKPOINT) for d in ("a", "b")]
    assert sorted(cps, key=str) == sorted([{("t", 0): 8}, {("t", 1): 8}], key=str)
    assert all((tmp_path / d / CLEAN_SHUTDOWN_FILE).exists() for d in ("a", "b"))
    m = LogManager([tmp_path / "a", tmp_path / "b"], LogConfig(segment_bytes=600), clock=clock)
    assert [m.get("t", p).log_start_offset for p in range(2)] == [8, 8]
    assert m.clean_shutdown_dirs == [tmp_path / "a", tmp_path / "b"]
    m.close()


def test_file_slice_survives_retention(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=600, retention_ms=1))
    fill_segments(log, 4)
    expected = log_batches(log)[0][3]
    piece = log.read_slice(0, 1 << 20)
    assert isinstance(piece, FileSlice)
    assert (piece.position, piece.length) == (0, len(expected))
    assert (piece.high_watermark, piece.log_start_offset, piece.log_end_offset) == (8, 0, 8)
    seg0 = log.segments[0]
    assert log.apply_retention(now_ms=10**12) == 4
    assert not seg0.log_path.exists()  # renamed away at once...
    assert seg0.log_path.with_name(seg0.log_path.name + ".deleted").exists()  # ...kept for the reader
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert piece.read() == expected
    a, b = socket.socketpair()
    try:
        sent = 0
        while sent < piece.length:
            sent += piece.transfer_to(a.fileno(), sent)
        got = b""
        while len(got) < len(expected):
            got += b.recv(1 << 16)
        assert got == expected
    finally:
        a.close()
        b.close()
    piece.release()
    piece.release()  # idempotent
    assert not list((tmp_path / "t-0").glob("*.deleted"))  # unlinked with the last reference
    with pytest.raises(ValueError):
        piece.read()
    log.close()


def test_read_slice_shapes(tmp_path):
    log = Log(tmp_path / "t-0")
    with log.read_slice(0, 100) as empty:
        assert (empty.length, empty.fd, empty.read()) == (0, -1, b"")
    b = batch(4, value_size=100)
    for _ in range(3):
        log.append(b)
    with log.read_slice(4, 10) as s:  # KIP-74: whole first batch
        assert s.length == len(b) and s.position == len(b)
        assert s.read() == struct.pack(">q", 4) + b[8:]  # the log assigned base offset 4
        assert s.read(9, 10) == b[9:19]
    with log.read_slice(4, 10, min_one_batch=False) as s:
        assert s.length == 10
    with log.read_slice(0, len(b) + 7) as s:
        data = s.read()  # a partial second batch at the end, as in Kafka
        assert len(data) == len(b) + 7 and data[8 : len(b)] == b[8:] and data[len(b) :] == struct.pack(">q", 4)[:7]
        r, w = os.pipe()
        try:
            n = s.transfer_to(w, 3, 20)
            assert os.read(r, 100) == s.read(3, n)
        finally:
            os.close(r)
            os.close(w)
    with pytest.raises(OffsetOutOfRangeError):
        log.read_slice(13, 10)
    held = log.read_slice(0, 100)
    log.close()  # files stay open for the slice
    assert held.read(0, 12)[8:12] == struct.pack(">i", len(b) - 12)
    held.release()
    assert log.segments[0].closed


def test_readers_during_retention_and_appends(tmp_path):
    """Readers never block on deletion and never see a half-deleted list:
    every read either returns the right batch or OffsetOutOfRangeError for
    an offset below the (new) log start offset. A flusher thread fsyncs
    alongside the appends."""
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=2_000, retention_bytes=6_000, retention_ms=-1))
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            while not stop.is_set():
                end = log.log_end_offset
                if not end:
                    continue
                off = rnd.randrange(max(0, end - 80), end)
                try:
                    data = log.read(off, 1 << 16).records
                except OffsetOutOfRangeError:
                    assert off < log.log_start_offset
                    continue
                first = next(iter(scan_batches(data)))
                assert first.base_offset == off
                expected = build_batch([(None, bytes([65 + off % 26]) * 100, off)], base_offset=off)
                assert data[: first.size] == expected
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(3)] + [threading.Thread(target=flusher)]
    for t in threads:
        t.start()
    try:
        for i in range(400):
            data = batch(1, value_size=100, ts=i, tag=bytes([65 + i % 26]))
            assert log.append(data).base_offset == i
            if i % 10 == 0:
                log.apply_retention()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert log.log_start_offset > 0
    assert log.flush_count > 0
    log.flush()
    assert log.recovery_point == log.log_end_offset == 400
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    log.close()



def test_a_new_log_dir_is_not_reported_as_an_unclean_shutdown(tmp_path, caplog):
    """A log dir that is new (or empty) has nothing to recover, and says so;
    only a dir with data and no clean-shutdown marker is an unclean shutdown."""
    d = tmp_path / "data"
    with caplog.at_level(logging.INFO, logger="kclient.storage"):
        m = LogManager([d], LogConfig())
    assert "new and empty, nothing to recover" in caplog.text
    assert "unclean shutdown" not in caplog.text
    m.create_topic("a", 1)
    m.get("a", 0).append(batch(1))
    m.close()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kclient.storage"):
        LogManager([d], LogConfig()).close()
    assert "clean shutdown, skipping recovery" in caplog.text
    (d / CLEAN_SHUTDOWN_FILE).unlink()  # as after a crash
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kclient.storage"):
        LogManager([d], LogConfig()).close()
    assert "unclean shutdown, recovering from checkpoints" in caplog.text
