"""Log compaction (issue 12, compaction part): the cleaner on real log
files (latest value per key, offsets and order kept, active segment
untouched, tombstones, dirty ratio, compaction lag, compressed, control,
transactional and idempotent batches), crash safety of the cleaned-segment
swap (files left as a crash leaves them, and a real broker process killed
while cleaning), and a compacted topic on a real broker written by the
kclient Producer and read back by a peer consumer."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from kclient.errors import ConfigError
from kclient.protocol.records import codecs
from kclient.protocol.records.legacy import iter_entry_records
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import build_batch, decode_records, read_header
from kclient.storage import Log, LogConfig, LogManager
from kclient.storage.checkpoint import read_checkpoint
from kclient.storage.cleaner import CLEANER_OFFSET_CHECKPOINT, LogCleaner, clean_log, cleanable
from kclient.storage.offset_map import OffsetMap
from kclient.storage.swap import CLEANED_SUFFIX, SWAP_SUFFIX

T0 = 1_700_000_000_000
DAY = 86_400_000


def compact_config(**kw) -> LogConfig:
    kw.setdefault("segment_bytes", 2048)
    kw.setdefault("index_interval_bytes", 256)
    return LogConfig(cleanup_policy="compact", **kw)


def rec_batch(records, ts=T0, codec=codecs.NONE, **kw) -> bytes:
    """One v2 batch of ``(key, value)`` records."""
    return build_batch([(k, v, ts + i) for i, (k, v) in enumerate(records)], codec=codec, **kw)


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the log through `Log.read`, as (offset, key, value)."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        if not data:
            break
        last = offset - 1
        for info in scan_batches(data):
            raw = data[info.position : info.position + info.size]
            if info.magic == 2:
                header = read_header(raw)
                if not header.is_control:
                    out.extend((o, k, v) for o, _ts, k, v, _h in decode_records(raw))
            else:
                out.extend((r.offset, r.key, r.value) for r in iter_entry_records(raw))
            last = info.last_offset
        offset = last + 1
    return [r for r in out if r[0] >= log.log_start_offset]


def expected_after(records, end_offset, drop_tombstones=False):
    """What a cleaning up to ``end_offset`` must leave: below it the last
    record of each key (tombstones too, unless dropped), above it all."""
    last = {}
    for off, key, _ in records:
        if off < end_offset:
            last[key] = off
    out = []
    for off, key, value in records:
        if off >= end_offset:
            out.append((off, key, value))
        elif last.get(key) == off and not (drop_tombstones and value is None):
            out.append((off, key, value))
    return out


def fill(log: Log, keys: int, rounds: int, ts=T0, tag=b"v", first_key=0) -> list:
    """``rounds`` overwrites of ``keys`` keys, one batch per record, then
    a roll (so everything written is cleanable)."""
    written = []
    for r in range(rounds):
        for k in range(first_key, first_key + keys):
            key = b"key-%d" % k
            value = tag + b"-%d-%d" % (k, r)
            res = log.append(rec_batch([(key, value)], ts=ts + r))
            written.append((res.base_offset, key, value))
    log.roll()
    return written


@pytest.mark.unit
def test_keys_overwritten_many_times_keep_only_latest_value_offsets_and_order(tmp_path):
    log = Log(tmp_path / "t-0", compact_config())
    written = fill(log, keys=10, rounds=40)
    tail = []
    for k in range(3):  # records in the active segment: never cleaned
        res = log.append(rec_batch([(b"key-%d" % k, b"active-%d" % k)]))
        tail.append((res.base_offset, b"key-%d" % k, b"active-%d" % k))
    active = log.active_segment
    active_bytes = active.log_path.read_bytes()
    segments_before = len(log.segments)
    assert read_all(log) == written + tail

    result = clean_log(log, None, now_ms=T0 + 1000)

    assert result is not None and result.end_offset == active.base_offset
    after = read_all(log)
    assert after == expected_after(written + tail, active.base_offset)
    # exactly the latest value of each key below the active segment, at its original offset
    latest = {key: (off, value) for off, key, value in written}
    assert [(o, k, v) for o, k, v in after if o < active.base_offset] == sorted((o, k, v) for k, (o, v) in latest.items())
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    assert log.active_segment is active and active.log_path.read_bytes() == active_bytes
    assert result.records_removed == len(written) - 10
    assert log.log_start_offset == 0 and log.log_end_offset == tail[-1][0] + 1
    # the next cleaning merges the small cleaned segments (grouped by segment.bytes)
    log.roll()
    second = clean_log(log, result.end_offset, now_ms=T0 + 2000, force=True)
    assert second is not None and second.segments_written < second.segments_read
    assert len(log.segments) < segments_before
    after = read_all(log)
    assert after == expected_after(written + tail, second.end_offset)
    # the log reopens (clean and unclean) with the same records
    log.close()
    for kwargs in ({"clean_shutdown": True}, {"recovery_point": 0}):
        again = Log(tmp_path / "t-0", compact_config(), **kwargs)
        assert read_all(again) == after
        assert again.recovery_truncated_bytes == 0
        again.close()


@pytest.mark.unit
def test_tombstones_kept_on_first_cleaning_and_removed_after_delete_retention(tmp_path):
    cfg = compact_config(delete_retention_ms=DAY)
    log = Log(tmp_path / "t-0", cfg)
    written = fill(log, keys=6, rounds=5)
    for k in (1, 4):
        res = log.append(rec_batch([(b"key-%d" % k, None)], ts=T0 + 100))
        written.append((res.base_offset, b"key-%d" % k, None))
    log.roll()
    first = clean_log(log, None, now_ms=T0 + 200)
    assert first is not None
    after = read_all(log)
    assert after == expected_after(written, first.end_offset)
    assert {k for _, k, v in after if v is None} == {b"key-1", b"key-4"}  # tombstones stay after the first cleaning
    # more dirty data, cleaned again before delete.retention.ms passed: still there
    more = fill(log, keys=2, rounds=3, ts=T0 + 300, tag=b"w", first_key=10)
    second = clean_log(log, first.end_offset, now_ms=T0 + DAY // 2, force=True)
    assert second is not None and second.tombstones_removed == 0
    assert {k for _, k, v in read_all(log) if v is None} == {b"key-1", b"key-4"}
    # after delete.retention.ms: the tombstones are gone, the other keys keep their latest values
    more2 = fill(log, keys=2, rounds=2, ts=T0 + 400, tag=b"x", first_key=10)
    third = clean_log(log, second.end_offset, now_ms=T0 + 2 * DAY, force=True)
    assert third is not None and third.tombstones_removed == 2
    final = read_all(log)
    assert all(v is not None for _, _, v in final)
    assert final == expected_after(written + more + more2, third.end_offset, drop_tombstones=True)
    assert {k for _, k, _ in final} == {b"key-%d" % k for k in (0, 2, 3, 5, 10, 11)}
    log.close()


@pytest.mark.unit
def test_dirty_ratio_threshold_is_honoured(tmp_path):
    log = Log(tmp_path / "t-0", compact_config(min_cleanable_dirty_ratio=0.5))
    fill(log, keys=5, rounds=40)
    first = clean_log(log, None, now_ms=T0)
    assert first is not None
    # a little dirty data: ratio well below 0.5
    fill(log, keys=1, rounds=2)
    view = cleanable(log, first.end_offset, T0)
    assert view.dirty_segments and 0 < view.dirty_ratio < 0.5
    before = read_all(log)
    assert clean_log(log, first.end_offset, now_ms=T0) is None
    assert read_all(log) == before
    log.update_config(compact_config(min_cleanable_dirty_ratio=0.01))
    assert clean_log(log, first.end_offset, now_ms=T0) is not None
    log.close()


@pytest.mark.unit
def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path):
    log = Log(tmp_path / "t-0", compact_config(min_compaction_lag_ms=DAY))
    old = fill(log, keys=4, rounds=20, ts=T0)
    boundary = log.log_end_offset
    recent = fill(log, keys=4, rounds=20, ts=T0 + 5 * DAY)
    result = clean_log(log, None, now_ms=T0 + 5 * DAY + 10)
    assert result is not None and result.end_offset == boundary
    assert read_all(log) == expected_after(old + recent, boundary)
    log.close()


@pytest.mark.unit
def test_compressed_batches_are_rebuilt_with_their_codec_and_offsets(tmp_path):
    log = Log(tmp_path / "t-0", compact_config(segment_bytes=4096))
    written = []
    for r in range(6):
        recs = [(b"k%d" % (i % 7), b"value-%d-%d" % (r, i)) for i in range(10)]
        res = log.append(rec_batch(recs, codec=codecs.GZIP))
        written.extend((res.base_offset + i, k, v) for i, (k, v) in enumerate(recs))
    log.roll()
    tail = log.append(rec_batch([(b"k0", b"tail")]))
    written.append((tail.base_offset, b"k0", b"tail"))
    result = clean_log(log, None, now_ms=T0)
    assert result is not None
    assert read_all(log) == expected_after(written, tail.base_offset)
    # every stored v2 batch is still gzip and keeps a lastOffsetDelta covering its original records
    for seg in log.segments[:-1]:
        data = seg.log_path.read_bytes()
        for info in scan_batches(data):
            header = read_header(data, info.position)
            assert header.codec == codecs.GZIP
            assert header.last_offset_delta == 9
    log.close()


@pytest.mark.unit
def test_control_transactional_and_idempotent_batches_survive(tmp_path):
    log = Log(tmp_path / "t-0", compact_config())
    # an idempotent producer whose last batch is fully superseded by a plain write
    pid_batch = rec_batch([(b"a", b"from-producer")], producer_id=7, producer_epoch=0, base_sequence=0)
    idem = log.append(pid_batch)
    txn = log.append(rec_batch([(b"b", b"txn-1")], producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True))
    marker = build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", T0)], producer_id=8, producer_epoch=0,
                         is_transactional=True, is_control=True)
    ctrl = log.append(marker)
    later = log.append(rec_batch([(b"a", b"plain"), (b"b", b"plain")]))
    log.roll()
    log.append(rec_batch([(b"z", b"active")]))
    assert clean_log(log, None, now_ms=T0, force=True) is not None
    stored = {}
    for seg in log.segments[:-1]:
        data = seg.log_path.read_bytes()
        for info in scan_batches(data):
            stored[info.base_offset] = read_header(data, info.position)
    # the idempotent producer's last batch stays as an empty batch (same offsets and sequence)
    assert stored[idem.base_offset].records_count == 0
    assert stored[idem.base_offset].producer_id == 7 and stored[idem.base_offset].base_sequence == 0
    # a committed transactional record is compacted like any other (Kafka's
    # cleaner): superseded, it goes; its batch, the producer's last, stays
    # empty, and so its COMMIT marker stays (its transaction has a batch left)
    assert stored[txn.base_offset].is_transactional and stored[txn.base_offset].records_count == 0
    assert stored[txn.base_offset].producer_id == 8 and stored[txn.base_offset].base_sequence == 0
    assert stored[ctrl.base_offset].is_control and stored[ctrl.base_offset].records_count == 1
    assert stored[ctrl.base_offset].delete_horizon_ms is None
    assert [(o, k, v) for o, k, v in read_all(log) if o < later.base_offset] == []
    assert log.producer_state.last_sequence(7) == 0
    log.close()
    again = Log(tmp_path / "t-0", compact_config(), recovery_point=0)
    assert again.producer_state.last_sequence(7) == 0
    again.close()


@pytest.mark.unit
def test_retention_applies_only_with_delete_policy(tmp_path):
    for policy, survives in (("compact", True), ("compact,delete", False), ("delete", False)):
        log = Log(tmp_path / policy, LogConfig(cleanup_policy=policy, segment_bytes=1024, retention_ms=DAY))
        fill(log, keys=3, rounds=20, ts=T0)
        n = log.apply_retention(now_ms=T0 + 10 * DAY)
        assert (n == 0) is survives
        log.close()


@pytest.mark.unit
def test_cleanup_policy_parsing_and_topic_overrides():
    assert LogConfig().cleanup_policy == ("delete",)
    assert LogConfig(cleanup_policy="delete, compact").cleanup_policy == ("compact", "delete")
    cfg = LogConfig().with_topic_overrides(
        {"cleanup.policy": "compact", "delete.retention.ms": "5", "min.cleanable.dirty.ratio": "0.25", "segment.ms": "9",
         "min.compaction.lag.ms": "3", "unrelated.key": "x"}
    )
    assert (cfg.compact, cfg.delete, cfg.delete_retention_ms, cfg.min_cleanable_dirty_ratio, cfg.roll_ms, cfg.min_compaction_lag_ms) == (
        True, False, 5, 0.25, 9, 3)
    with pytest.raises(ConfigError):
        LogConfig(cleanup_policy="shred")
    with pytest.raises(ConfigError):
        LogConfig().with_topic_overrides({"delete.retention.ms": "soon"})


@pytest.mark.unit
def test_offset_map_capacity_limits_one_round(tmp_path):
    log = Log(tmp_path / "t-0", compact_config())
    written = fill(log, keys=30, rounds=4)
    small = OffsetMap(40)  # about one segment's keys
    result = clean_log(log, None, now_ms=T0, offset_map=small)
    assert result is not None and result.end_offset < log.active_segment.base_offset
    assert read_all(log) == expected_after(written, result.end_offset)
    # the next rounds finish the job
    end = result.end_offset
    while True:
        r = clean_log(log, end, now_ms=T0, offset_map=small, force=True)
        if r is None:
            break
        end = r.end_offset
    assert end == log.active_segment.base_offset
    assert read_all(log) == expected_after(written, end)
    log.close()


# ---------------------------------------------------------------- crash safety


class Crash(Exception):
    pass


@pytest.mark.unit
@pytest.mark.parametrize("stage", ["cleaned", "swap"])
def test_files_left_by_a_crash_mid_clean_are_settled_on_open(tmp_path, stage):
    path = tmp_path / "t-0"
    log = Log(path, compact_config())
    written = fill(log, keys=8, rounds=30)
    tail = log.append(rec_batch([(b"key-0", b"tail")]))
    written.append((tail.base_offset, b"key-0", b"tail"))

    def hook(at):
        if at == stage:
            raise Crash(at)

    with pytest.raises(Crash):
        clean_log(log, None, now_ms=T0, hook=hook)
    suffix = CLEANED_SUFFIX if stage == "cleaned" else SWAP_SUFFIX
    assert any(name.endswith(suffix) for name in os.listdir(path))
    # no close(): the process "died"; reopen as after an unclean shutdown
    for seg in log.segments:
        seg.close()
    again = Log(path, compact_config(), recovery_point=0)
    names = os.listdir(path)
    assert not any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for n in names)
    got = read_all(again)
    if stage == "cleaned":
        assert got == written  # not committed: every original record
    else:
        # committed: the first group is swapped in, later groups are as they were
        kept = {o for o, _, _ in got}
        assert set(expected_after(written, tail.base_offset)) <= set(got)
        assert kept <= {o for o, _, _ in written}
        assert [o for o, _, _ in got] == sorted(kept)
        assert len(got) < len(written)
    assert again.recovery_truncated_bytes == 0
    # a later cleaning finishes the job
    assert clean_log(again, None, now_ms=T0) is not None or stage == "cleaned"
    clean_log(again, None, now_ms=T0, force=True)
    assert read_all(again) == expected_after(written, tail.base_offset)
    again.close()


@pytest.mark.unit
def test_log_manager_cleaner_checkpoint_and_unclean_restart(tmp_path):
    manager = LogManager([tmp_path], LogConfig(segment_bytes=2048))
    manager.create_topic("plain", 1)
    manager.create_topic("table", 1)
    manager.set_topic_config("table", {"cleanup.policy": "compact"})
    table, plain = manager.get("table", 0), manager.get("plain", 0)
    written = fill(table, keys=5, rounds=40)
    fill(plain, keys=5, rounds=40)
    plain_before = read_all(plain)
    cleaner = LogCleaner(manager)
    assert cleaner.clean_all(now_ms=T0) == 1
    end = table.active_segment.base_offset
    assert read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {("table", 0): end}
    assert read_all(plain) == plain_before  # delete policy: untouched
    cleaned = read_all(table)
    assert cleaned == expected_after(written, end)
    assert cleaner.clean_all(now_ms=T0) == 0  # nothing dirty
    # simulate a crash: no clean shutdown marker, recovery from offset 0 with
    # the broker default (delete) config: the gaps are known from the checkpoint
    for plog in manager.logs().values():
        for seg in plog.segments:
            seg.close()
    again = LogManager([tmp_path], LogConfig(segment_bytes=2048))
    try:
        assert read_all(again.get("table", 0)) == cleaned
        assert again.recovery_truncated_bytes() == {}
    finally:
        again.close()


# ---------------------------------------------------------------- real broker

import functools  # noqa: E402
import time  # noqa: E402

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kclient import Producer, ProducerData  # noqa: E402
from kclient.testing import BrokerProcess  # noqa: E402
from tests.helpers.peers import ck_produce, kp_consume  # noqa: E402
from tests.helpers.wait import wait_for  # noqa: E402

DEADLINE = 60.0


_wait_for = functools.partial(wait_for, timeout=DEADLINE)


def _cleaned_to(log_dir: Path, topic: str) -> int | None:
    try:
        return read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT).get((topic, 0))
    except Exception:
        return None


def _cleaned_through_active(log_dir: Path, topic: str) -> int | None:
    """The cleaner's checkpoint once it reached the active (last) segment's
    base offset, else None."""
    cleaned = _cleaned_to(log_dir, topic)
    try:
        active = max(int(name[: -len(".log")]) for name in os.listdir(log_dir / f"{topic}-0") if name.endswith(".log"))
    except (FileNotFoundError, ValueError):
        return None
    return cleaned if cleaned is not None and cleaned >= active else None


def test_compacted_topic_on_a_real_broker_read_by_a_peer_consumer(tmp_path):
    log_dir = tmp_path / "logs"
    props = {"num.partitions": 1, "log.cleaner.backoff.ms": 200, "log.segment.bytes": 1 << 20}
    with BrokerProcess(log_dir=log_dir, properties=props) as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        topic = "table"
        configs = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
        admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=30)
        written = []
        config = {"metadata.broker.list": proc.bootstrap, "producer.type": "sync", "request.required.acks": 1}
        with Producer(config) as producer:
            for r in range(25):
                for k in range(12):
                    key, value = b"user-%d" % k, b"v%d-%d" % (k, r)
                    producer.send(ProducerData(topic, key=key, messages=[value]))
                    written.append((len(written), key, value))
        # a record without a key is refused (INVALID_RECORD, Produce v8)
        errors = []
        ck = confluent_kafka.Producer({"bootstrap.servers": proc.bootstrap, "retries": 0})
        ck.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
        ck.flush(30)
        assert errors and errors[0] is not None and errors[0].code() == confluent_kafka.KafkaError.INVALID_RECORD
        # Everything below the active segment is cleanable (dirty ratio
        # 0.01, no lag): wait until the cleaner got there, so that no later
        # pass changes the log while the peer reads it.
        end = _wait_for(lambda: _cleaned_through_active(log_dir, topic), "the cleaner to reach the active segment")
        expected = expected_after(written, end)
        assert len(expected) < len(written)
        got = kp_consume(proc.bootstrap, topic, len(expected), deadline=DEADLINE, partitions=[0])
        assert [(o, k, v) for _, o, k, v, _ in got] == expected
        # the latest value of every key, at the offset it was written at
        latest = {k: (o, v) for o, k, v in written}
        assert {k: (o, v) for _, o, k, v, _ in got} == latest


def test_broker_killed_while_cleaning_a_large_log_restarts_with_every_record(tmp_path):
    log_dir = tmp_path / "logs"
    topic = "big"
    base = {"num.partitions": 1, "log.cleanup.policy": "compact", "log.segment.bytes": 256 * 1024, "log.cleaner.backoff.ms": 100}
    proc = BrokerProcess(log_dir=log_dir, properties={**base, "log.cleaner.enable": False})
    try:
        proc.start()
        records = [(b"key-%d" % (i % 3000), b"value-%07d-" % i + b"x" * 40, ()) for i in range(60_000)]
        places = ck_produce(proc.bootstrap, topic, records, deadline=DEADLINE, linger_ms=20, config={"batch.size": 16384})
        written = [(off, k, v) for (_, off), (k, v, _) in zip(places, records)]
        assert [o for o, _, _ in written] == list(range(len(written)))
        proc.stop()
        part = log_dir / f"{topic}-0"

        def mid_clean():
            try:
                names = os.listdir(part)
            except FileNotFoundError:
                return False
            return any(n == "cleaner.tmp" or n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for n in names)

        # The cleaning of this log lasts about 100 ms: poll every 5 ms, and
        # if a clean still ends unseen (a loaded machine can hold this
        # process back that long), restore the log as it was and try again.
        pristine = tmp_path / "pristine"
        shutil.copytree(log_dir, pristine)
        proc.properties = {**base, "log.cleaner.enable": True}
        for _attempt in range(5):
            proc.start()
            if _wait_for(lambda: mid_clean() or _cleaned_to(log_dir, topic) is not None, "the cleaner", interval=0.005) is True:
                break
            proc.stop()
            shutil.rmtree(log_dir)
            shutil.copytree(pristine, log_dir)
        else:
            pytest.fail("the cleaner finished five times before it was seen writing cleaned segments")
        time.sleep(random.uniform(0, 0.05))  # kept: the kill lands at a random point of the clean, not only its start
        proc.kill()  # SIGKILL while cleaning
        proc.properties = {**base, "log.cleaner.enable": False}
        proc.start()
        assert not any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for n in os.listdir(part))
        by_offset = {o: (k, v) for o, k, v in written}
        latest = {k: o for o, k, _ in written}
        n_latest = len(latest)
        # every record left is one that was written, at its offset, in order,
        # and the latest record of every key is there
        got = kp_consume(proc.bootstrap, topic, len(written), deadline=15, partitions=[0])
        offsets = [o for _, o, _, _, _ in got]
        assert offsets == sorted(set(offsets))
        assert all(by_offset[o] == (k, v) for _, o, k, v, _ in got)
        assert set(latest.values()) <= set(offsets)
        assert n_latest <= len(got) <= len(written)
        proc.stop()
        # the cleaner finishes the job after the crash
        proc.properties = {**base, "log.cleaner.enable": True}
        proc.start()
        active_base = _wait_for(lambda: _cleaned_to(log_dir, topic), "the cleaner after restart")
        expected = expected_after(written, active_base)
        got = kp_consume(proc.bootstrap, topic, len(expected), deadline=DEADLINE, partitions=[0])
        assert [(o, k, v) for _, o, k, v, _ in got] == expected
    finally:
        proc.cleanup()
