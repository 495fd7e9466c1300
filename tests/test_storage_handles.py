"""Lazily opened segment files (kclient.storage.handles): the bounded cache
of idle descriptors, and segments, indexes and file slices that hold no
descriptor when no one reads them (Kafka 2.x's lazy indexes, KAFKA-7283).

Open descriptors are counted in ``/proc/self/fd``, so these tests see what
the process really holds."""

from __future__ import annotations

import os
import random
import resource
import socket
import threading
from pathlib import Path

import pytest

from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import build_batch, decode_records
from kclient.storage import Log, LogConfig, LogSegment
from kclient.storage.cleaner import clean_log
from kclient.storage.handles import CachedFile, FileHandleCache, default_cache, default_capacity

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")

T0 = 1_700_000_000_000


def open_files_under(directory: Path) -> list[str]:
    """Names of the files under ``directory`` this process has open."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory) + os.sep):
            out.append(os.path.relpath(target, directory))
    return sorted(out)


def batch(n: int = 1, value_size: int = 50, ts: int = T0, key: bytes | None = None) -> bytes:
    return build_batch([(key, b"v" * value_size, ts + i) for i in range(n)])


@pytest.fixture
def cache_capacity():
    """Set the process-wide cache's capacity for one test (restored after)."""
    cache = default_cache()
    before = cache.capacity

    def set_capacity(n: int) -> FileHandleCache:
        cache.capacity = n
        return cache

    yield set_capacity
    cache.capacity = before


# ---------------------------------------------------------------- the cache


@pytest.mark.unit
def test_default_capacity_is_half_the_descriptor_limit():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        assert default_capacity() == 65536
    else:
        assert default_capacity() == max(16, soft // 2)


@pytest.mark.unit
def test_cache_keeps_the_most_recently_used_idle_descriptors_only(tmp_path):
    cache = FileHandleCache(capacity=2)
    files = [CachedFile(tmp_path / f"f{i}", create=True, cache=cache) for i in range(4)]
    assert open_files_under(tmp_path) == [] and cache.open_count == 0  # nothing opened yet
    for i, f in enumerate(files):
        with f.use() as fd:
            os.pwrite(fd, b"data-%d" % i, 0)
    assert open_files_under(tmp_path) == ["f2", "f3"]
    assert [f.is_open for f in files] == [False, False, True, True]
    assert (cache.open_count, cache.idle_count, cache.opened, cache.evicted) == (2, 2, 4, 2)
    with files[0].use() as fd:  # reopened by name; the least recently used (f2) goes
        assert os.pread(fd, 6, 0) == b"data-0"
    assert open_files_under(tmp_path) == ["f0", "f3"]
    assert cache.opened == 5
    assert cache.close_idle() == 2 and open_files_under(tmp_path) == []


@pytest.mark.unit
def test_a_pinned_descriptor_is_never_closed_by_the_cache(tmp_path):
    cache = FileHandleCache(capacity=0)
    f = CachedFile(tmp_path / "pinned", create=True, cache=cache)
    other = CachedFile(tmp_path / "other", create=True, cache=cache)
    fd = f.pin()
    with f.use() as again:  # pins nest and share the descriptor
        assert again == fd
    for _ in range(3):
        with other.use():
            pass
    cache.close_idle()
    os.fstat(fd)  # still valid
    assert open_files_under(tmp_path) == ["pinned"] and f.pins == 1
    f.unpin()
    assert open_files_under(tmp_path) == [] and not f.is_open  # capacity 0: closed at once
    with pytest.raises(RuntimeError):
        f.unpin()


@pytest.mark.unit
def test_rename_is_followed_by_later_opens(tmp_path):
    cache = FileHandleCache(capacity=4)
    f = CachedFile(tmp_path / "a.log", create=True, cache=cache)
    with f.use() as fd:
        os.pwrite(fd, b"kept", 0)
    cache.close_idle()
    f.rename(tmp_path / "a.log.deleted")
    assert not (tmp_path / "a.log").exists()
    with f.use() as fd:
        assert os.pread(fd, 4, 0) == b"kept"
    assert open_files_under(tmp_path) == ["a.log.deleted"]


@pytest.mark.unit
def test_close_waits_for_the_last_pin_and_refuses_later_uses(tmp_path):
    cache = FileHandleCache(capacity=4)
    f = CachedFile(tmp_path / "x", create=True, cache=cache)
    fd = f.pin()
    f.close()
    os.fstat(fd)  # the user keeps its descriptor...
    f.unpin()
    assert open_files_under(tmp_path) == [] and cache.open_count == 0  # ...until it is done
    with pytest.raises(ValueError):
        f.pin()


@pytest.mark.unit
def test_files_that_do_not_linger_close_after_each_use(tmp_path):
    cache = FileHandleCache(capacity=8)
    f = CachedFile(tmp_path / "ix", create=True, linger=False, cache=cache)
    with f.use():
        assert open_files_under(tmp_path) == ["ix"]
    assert open_files_under(tmp_path) == [] and cache.idle_count == 0


@pytest.mark.unit
def test_running_out_of_descriptors_closes_the_idle_ones_and_retries(tmp_path):
    cache = FileHandleCache(capacity=64)
    files = [CachedFile(tmp_path / f"f{i}", create=True, cache=cache) for i in range(6)]
    for f in files[:5]:
        with f.use():
            pass
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    fillers = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 1, hard))
    try:
        while True:  # take every descriptor still free below the limit
            try:
                fillers.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        with files[5].use() as fd:
            os.fstat(fd)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        for fd in fillers:
            os.close(fd)
    assert open_files_under(tmp_path) == ["f5"] and cache.evicted == 5


# ---------------------------------------------------------------- segments and logs


def rolled_log(directory: Path, segments: int) -> Log:
    log = Log(directory, LogConfig(segment_bytes=1024, index_interval_bytes=128))
    while len(log.segments) < segments:
        log.append(batch(2))
    return log


@pytest.mark.unit
def test_inactive_segments_hold_no_descriptor_until_read(tmp_path):
    d = tmp_path / "t-0"
    log = rolled_log(d, 5)
    active = log.active_segment
    # only the active segment's .log; no index file, no checkpoint or snapshot
    assert open_files_under(d) == [active.log_path.name]
    first = log.segments[0]
    expected = first.read(0, first.size)
    assert first.log_file.is_open  # read: idle in the cache now
    default_cache().close_idle()
    assert open_files_under(d) == [] and not first.has_open_files
    assert log.read(0, 1 << 20).records == expected  # reopened by name on read
    assert open_files_under(d) == [first.log_path.name]
    log.close()
    assert open_files_under(d) == []


@pytest.mark.unit
def test_a_reopened_log_opens_nothing_until_used_and_loads_indexes_lazily(tmp_path):
    d = tmp_path / "t-0"
    log = rolled_log(d, 6)
    offsets = [(s.base_offset, s.next_offset) for s in log.segments]
    end = log.log_end_offset
    log.close()
    again = Log(d, LogConfig(segment_bytes=1024, index_interval_bytes=128), clean_shutdown=True)
    assert again.log_end_offset == end
    default_cache().close_idle()
    assert open_files_under(d) == []
    middle = again.segments[2]
    base, nxt = offsets[2]
    got = again.read(base + 3, 1 << 20).records
    assert got and middle.find_batch(base + 3).base_offset <= base + 3 < nxt
    assert middle.index.loaded and middle.index.lookup(base + 3)[0] <= base + 3
    assert not any(n.endswith((".index", ".timeindex")) for n in open_files_under(d))
    again.close()


@pytest.mark.unit
def test_segment_open_holds_no_descriptor_and_reads_indexes_on_first_lookup(tmp_path):
    seg = LogSegment.create(tmp_path, 0, index_interval_bytes=64)
    offset = 0
    for _ in range(20):
        data = bytearray(batch(3))
        data[0:8] = offset.to_bytes(8, "big")
        seg.append(bytes(data), offset, offset + 2)
        offset += 3
    entries = seg.index.entries()
    assert len(entries) > 3
    seg.close()
    default_cache().close_idle()
    again = LogSegment.open(tmp_path, 0, index_interval_bytes=64, check_indexes=False)
    assert open_files_under(tmp_path) == []
    assert not again.index.loaded and not again.timeindex.loaded
    assert again.find_batch(31).base_offset == 30
    assert again.index.loaded and again.index.entries() == entries
    assert not again.index._file.is_open  # read, then closed
    again.close()


@pytest.mark.unit
def test_file_slice_reads_a_deleted_segment_after_its_descriptor_was_evicted(tmp_path, cache_capacity):
    cache = cache_capacity(0)
    d = tmp_path / "t-0"
    log = Log(d, LogConfig(segment_bytes=600, retention_ms=1))
    for _ in range(12):
        log.append(batch(2, ts=1000))
    first = log.segments[0]
    expected = first.read(0, first.size)
    piece = log.read_slice(0, 1 << 20)
    assert open_files_under(d) == []  # a slice holds a reference, not a descriptor
    assert log.apply_retention(now_ms=10**12) >= 1
    assert first.deleted and not first.log_path.exists()
    assert piece.read() == expected  # opened by its *.deleted name
    a, b = socket.socketpair()
    try:
        with piece.hold() as fd:
            cache.close_idle()
            os.fstat(fd)  # held for the whole send
            assert piece.fd == fd and open_files_under(d) == [first.log_path.name + ".deleted"]
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
    assert open_files_under(d) == []
    with pytest.raises(ValueError):
        piece.fd  # noqa: B018  the property raises: the piece holds no descriptor
    piece.release()
    assert not list(d.glob("*.deleted"))
    log.close()


@pytest.mark.unit
def test_truncation_compaction_and_recovery_with_no_idle_descriptor(tmp_path, cache_capacity):
    """Every use reopens the files: truncation, a compaction swap and a
    restart after a crash behave as with files kept open."""
    cache_capacity(0)
    d = tmp_path / "t-0"
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=2048, index_interval_bytes=256)
    log = Log(d, cfg)
    for r in range(30):
        for k in range(5):
            log.append(build_batch([(b"key-%d" % k, b"value-%d-%d" % (k, r), T0 + r)]))
    log.roll()
    segments_before = len(log.segments)
    result = clean_log(log, None, now_ms=T0 + 1000)
    assert result is not None and result.records_removed == 145 and result.segments_read == segments_before - 1
    assert open_files_under(d) == []
    latest = {}
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        for info in scan_batches(data):
            for off, _ts, key, value, _h in decode_records(data[info.position : info.position + info.size]):
                latest[key] = (off, value)
            offset = info.last_offset + 1
    assert {k: v for k, (_, v) in latest.items()} == {b"key-%d" % k: b"value-%d-29" % k for k in range(5)}
    end = log.log_end_offset
    log.append(batch(1))
    log.append(batch(1))
    log.truncate_to(end + 1)
    assert log.log_end_offset == end + 1
    log.append(batch(2))
    log.flush()
    # a crash: no close; a restart recovers the last segment from its files
    again = Log(d, cfg, recovery_point=0)
    assert again.log_end_offset == end + 3
    assert again.read(end, 1 << 20).records
    again.close()
    log.close()
    assert open_files_under(d) == []


@pytest.mark.unit
def test_readers_and_a_writer_on_many_logs_share_a_tiny_cache(tmp_path, cache_capacity):
    """Four reader threads and one writer on three logs with room for one
    idle descriptor: every use races with evictions, and every read still
    returns the batch it asked for."""
    cache = cache_capacity(1)
    logs = [Log(tmp_path / f"t-{i}", LogConfig(segment_bytes=2048, index_interval_bytes=128)) for i in range(3)]
    written: list[dict[int, bytes]] = [{} for _ in logs]
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                i = rng.randrange(len(logs))
                known = written[i]
                if not known:
                    continue
                offset = rng.choice(list(known))
                data = logs[i].read(offset, 1 << 16).records
                first = next(iter(scan_batches(data)))
                assert first.base_offset == offset
                assert decode_records(data[: first.size])[0][3] == known[offset]
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    try:
        for n in range(300):
            for i, log in enumerate(logs):
                value = b"value-%d-%d" % (i, n)
                res = log.append(build_batch([(None, value, T0 + n)]))
                written[i][res.base_offset] = value
            if stop.is_set():
                break
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert all(len(log.segments) > 3 for log in logs)
    assert cache.evicted > 0
    for log in logs:
        log.close()
    assert open_files_under(tmp_path) == []


def test_a_log_that_failed_to_open_is_created_on_retry(tmp_path):
    """Out of descriptors mid-creation (a real EMFILE, in a subprocess with
    a tiny RLIMIT_NOFILE): what is left of the partition directory (even
    its cleanup needs descriptors) holds nothing, and the retry creates the
    log instead of failing with TOPIC_ALREADY_EXISTS "exists already"."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import errno, os, resource, sys
        from kclient.storage import LogConfig, LogManager
        m = LogManager([{str(tmp_path)!r}], LogConfig())
        hog = []
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        try:
            while True:
                hog.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        try:
            m.create_log("t", 0)
        except OSError as e:
            assert e.errno == errno.EMFILE, e
        else:
            sys.exit("the log opened without a free descriptor")
        for fd in hog:
            os.close(fd)
        left = os.path.join({str(tmp_path)!r}, "t-0")
        assert not os.path.exists(left) or all(os.path.getsize(os.path.join(left, f)) == 0 for f in os.listdir(left))
        log = m.create_log("t", 0)
        assert log.log_end_offset == 0
        m.close()
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
