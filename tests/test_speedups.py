"""The compiled speedups (`kclient._speedups`) against their pure-Python
twins: identical bytes, identical rows, and a clean hand-back to the pure
path for every shape they do not take.

These tests call both implementations directly, so they check the compiled
module whichever path the rest of the suite runs (``KCLIENT_PURE_PYTHON``).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import attrs
import pytest
from helpers.examples import examples
from helpers.skips import require
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient import _accel
from kclient.client.producer import partitioner
from kclient.errors import CorruptRecordError, MessageSizeTooLargeError
from kclient.protocol.records import codecs, v2

try:
    from kclient import _speedups
except ImportError as exc:  # not built (no C compiler where kclient was installed)
    _speedups = None
    _MISSING = f"kclient._speedups is not built: {exc}"
else:
    _MISSING = None


@pytest.fixture(autouse=True)
def compiled():
    """Every test here needs the compiled module: skipped without it on a
    developer machine, a failure in CI (``make test`` builds it). On the
    pure-Python path (``KCLIENT_PURE_PYTHON``) kclient did not register its
    ProducerData with it: these tests do."""
    require(_MISSING, name="kclient._speedups", needs="the compiled speedups")
    from kclient.client.producer import data

    _speedups.set_data_fallback(data.py_new, data.ProducerData)


_BYTES = st.one_of(st.none(), st.binary(max_size=300))
# Timestamps around a base, including negative deltas and values that need
# long varints; a few beyond what the compiled path takes (+-2**61).
_TS = st.one_of(st.integers(-(2**40), 2**45), st.integers(-(2**63), 2**63 - 1))


@st.composite
def _records(draw, with_headers: bool = False):
    n = draw(st.integers(1, 40))
    out = []
    for _ in range(n):
        key, value, ts = draw(_BYTES), draw(_BYTES), draw(_TS)
        shape = draw(st.integers(0, 2 if with_headers else 1))
        if shape == 0:
            out.append((key, value, ts))
        elif shape == 1:
            out.append((key, value, ts, ()))
        else:
            headers = draw(st.lists(st.tuples(st.text(max_size=8), _BYTES), min_size=1, max_size=3))
            out.append((key, value, ts, headers))
    return out


def _fast_shape(records) -> bool:
    return all((len(r) == 3 or not r[3]) and all(abs(t) < 2**61 for t in (r[2], records[0][2])) for r in records)


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(with_headers=True))
def test_encode_records_matches_pure_python(records):
    base = records[0][2]
    compiled = _speedups.encode_records(records, base)
    if not _fast_shape(records):
        assert compiled is None  # handed back: the pure path encodes it
        return
    assert compiled is not None
    assert compiled == v2._encode_records_py(records, base)


@pytest.mark.unit
def test_encode_records_hands_back_other_bytes_like_types():
    ts = 1_700_000_000_000
    for record in [(bytearray(b"k"), b"v", ts), (b"k", memoryview(b"v"), ts), ("str", b"v", ts), (b"k", b"v", 1.5), [b"k", b"v", ts]]:
        assert _speedups.encode_records([(None, b"x", ts), record], ts) is None
    # ... and build_batch still encodes the bytes-like ones as before.
    assert v2.decode_records(v2.build_batch([(bytearray(b"k"), memoryview(b"v"), ts)]))[0][2:4] == (b"k", b"v")


@pytest.mark.unit
@settings(max_examples=examples(100), deadline=None)
@given(_records(), st.sampled_from([codecs.NONE, codecs.GZIP, codecs.LZ4, codecs.ZSTD]), st.integers(0, 2**40))
def test_build_batch_bytes_identical_on_both_paths(records, codec, base_offset):
    records = [r for r in records if abs(r[2]) < 2**61] or [(None, b"x", 0)]
    compiled = v2.build_batch(records, codec=codec, base_offset=base_offset)
    saved = v2._c_encode_records
    v2._c_encode_records = None
    try:
        pure = v2.build_batch(records, codec=codec, base_offset=base_offset)
    finally:
        v2._c_encode_records = saved
    if codec in (codecs.NONE,):
        assert compiled == pure
    else:  # compressors may differ run to run only in framing details; the records must not
        assert v2.decode_records(compiled) == v2.decode_records(pure)


def _section(batch: bytes) -> tuple[bytes, v2.BatchHeader]:
    header = v2.read_header(batch)
    return batch, header


def _both(data: bytes, pos: int, end: int, header: v2.BatchHeader, fixed=None):
    """Decode with the compiled loop and the pure one; the compiled result
    (True/False) and both outcomes."""
    c_off, c_rows = [7], [("sentinel",)]
    ok = _speedups.decode_rows(data, pos, end, header.records_count, header.base_offset, header.base_timestamp, fixed, c_off, c_rows)
    try:
        pure = v2._decode_rows_py(data, pos, end, header.records_count, header.base_offset, header.base_timestamp, fixed, [7], [("sentinel",)])
    except CorruptRecordError as exc:
        pure = exc
    return ok, (c_off, c_rows), pure


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(with_headers=True), st.integers(0, 2**50), st.booleans())
def test_decode_rows_matches_pure_python(records, base_offset, log_append_time):
    records = [r for r in records if abs(r[2]) < 2**61] or [(None, b"x", 0)]
    batch = v2.build_batch(records, base_offset=base_offset)
    data, header = _section(batch)
    fixed = header.max_timestamp if log_append_time else None
    ok, compiled, pure = _both(data, v2.HEADER_SIZE, len(data), header, fixed)
    has_headers = any(len(r) == 4 and r[3] for r in records)
    if has_headers:
        assert not ok  # handed back, and nothing of it left in the lists
        assert compiled == ([7], [("sentinel",)])
    else:
        assert ok
        assert compiled == pure


@pytest.mark.unit
@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(), st.data())
def test_decode_rows_on_corrupt_bytes_agrees_or_hands_back(records, data):
    """Flip, cut or extend the records section at random: whenever the
    compiled loop says it decoded, the pure one decodes the same rows;
    otherwise it left the lists as they were (the pure path then raises or
    decodes)."""
    records = [r for r in records if abs(r[2]) < 2**61] or [(None, b"x", 0)]
    batch = bytearray(v2.build_batch(records))
    header = v2.read_header(bytes(batch))
    body = len(batch) - v2.HEADER_SIZE
    for _ in range(data.draw(st.integers(1, 4))):
        at = v2.HEADER_SIZE + data.draw(st.integers(0, max(0, body - 1)))
        batch[at] = data.draw(st.integers(0, 255))
    end = len(batch) - data.draw(st.integers(0, min(5, body)))
    count = header.records_count + data.draw(st.integers(-1, 1))
    header = attrs.evolve(header, records_count=max(0, count))
    ok, compiled, pure = _both(bytes(batch), v2.HEADER_SIZE, end, header)
    if ok:
        assert compiled == pure
    else:
        assert compiled == ([7], [("sentinel",)])


@pytest.mark.unit
def test_decode_rows_wrapper_uses_the_pure_path_for_errors():
    batch = bytearray(v2.build_batch([(b"k", b"v", 5), (None, b"w", 6)]))
    batch[-3] = 0x7F  # the second record's value length now runs past the end
    header = v2.read_header(bytes(batch))
    with pytest.raises(CorruptRecordError):
        v2.decode_rows(bytes(batch), v2.HEADER_SIZE, len(batch), header.records_count, header.base_offset, header.base_timestamp)


@pytest.mark.unit
@settings(max_examples=examples(500), deadline=None)
@given(st.binary(max_size=600))
def test_murmur2_matches_pure_python(data):
    assert _speedups.murmur2(data) == partitioner.murmur2(data)


@pytest.mark.unit
def test_kclient_uses_the_compiled_loops_by_default():
    assert _accel.speedups is _speedups or os.environ.get(_accel.PURE_PYTHON_ENV) not in (None, "", "0")


def test_pure_python_environment_variable_turns_them_off():
    code = (
        "import kclient, kclient._accel as a, kclient.protocol.records.v2 as v2, kclient.client.producer.partitioner as p;"
        "print(a.speedups is None, v2._c_decode_rows is None, v2._c_encode_records is None, p._c_murmur2 is None)"
    )
    for value, expected in (("1", "True True True True"), ("0", "False False False False")):
        env = {**os.environ, _accel.PURE_PYTHON_ENV: value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        assert out.split() == expected.split()


# -- the producer queue's core: compiled and pure twins step for step ----------------


@pytest.mark.unit
@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 12), st.lists(st.tuples(st.sampled_from(["put", "bundle", "poll", "flush+", "flush-", "done", "close", "abandon"]), st.integers(1, 5)), max_size=60))
def test_queue_core_twins_agree(max_messages, ops):
    from kclient.client.producer.queue import Bundle, PyQueueCore

    # buffer.memory: records of 10 + 2*step bytes (plus 70 of overhead)
    # against 600 bytes held; some items hold a record larger than that.
    cores = [_speedups.QueueCore(max_messages, Bundle, 600, 70), PyQueueCore(max_messages, Bundle, 600, 70)]
    wakers = [[], []]
    taken_total = [0, 0]
    taken_bytes = [0, 0]
    for step, (op, n) in enumerate(ops):
        results = []
        for i, core in enumerate(cores):
            if op in ("put", "bundle"):
                value = b"v" * (10 + 2 * step) if step % 7 else b"w" * 600
                record = ("t", b"key", (value,) * n, None)
                r = core.put(record if op == "put" else Bundle([("t", None, (value,), j) for j in range(n)]), n)
                r = "woke" if callable(r) else r
                if r == "woke":
                    wakers[i].append(step)
            elif op == "poll":
                # max_wait 0: a waiting batch is due at once; an hour: only full batches
                kind, value = core.poll(n * 2, 0.0 if n % 2 else 3600.0, lambda: None)
                if kind == "batch":
                    items, taken, nbytes = value
                    taken_total[i] += taken
                    taken_bytes[i] += nbytes
                    r = (kind, list(items), taken, nbytes)
                else:
                    r = (kind, value if value is None else "timeout")
            elif op == "flush+":
                r = "woke" if core.flush_requested(1) is not None else None
            elif op == "flush-":
                r = core.flush_requested(-1) if core.flushing > 0 else None
            elif op == "done":
                k = min(n, taken_total[i])
                b = taken_bytes[i] if k == taken_total[i] else taken_bytes[i] // 2
                taken_total[i] -= k
                taken_bytes[i] -= b
                r = core.task_done(k, b)
            elif op == "close":
                r = core.close() is not None
            else:
                dropped, waker = core.abandon()
                r = (dropped, waker is not None)
            results.append(r)
        assert results[0] == results[1], (op, n)
        state = [(c.count, c.unfinished, c.unfinished_bytes, c.queued_bytes, c.closed, c.flushing, c.queued_items) for c in cores]
        assert state[0] == state[1]
        assert cores[1].measure(("t", b"k", (b"ab", "c"))) == cores[0].measure(("t", b"k", (b"ab", "c"))) == (2 * 71 + 3, 73)
    assert wakers[0] == wakers[1]


def test_extension_build_failure_still_installs(tmp_path):
    """No C compiler: setup.py warns and builds nothing, and kclient runs
    its pure-Python loops (saying so at DEBUG)."""
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    src = tmp_path / "src"
    shutil.copytree(root / "kclient", src / "kclient", ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(root / name, src / name)
    try:
        import Cython  # noqa: F401  (the build needs it; it is in the test extra)
    except ImportError as exc:
        require(str(exc), name="Cython", needs="rebuilding kclient._speedups")
    env = {**os.environ, "CC": "false", "LDSHARED": "false"}
    env.pop(_accel.PURE_PYTHON_ENV, None)
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=src, env=env, capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "_speedups" in build.stdout + build.stderr  # the warning names the optional extension
    assert not list((src / "kclient").glob("_speedups*.so"))
    code = (
        # (the editable install's import hook would find the repo's kclient first)
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if not str(getattr(f, '__module__', '')).startswith('__editable__')];"
        "import logging; logging.basicConfig(level=logging.DEBUG, format='%(name)s %(message)s');"
        "import kclient, kclient._accel as a; from kclient.protocol.records import v2;"
        "b = v2.build_batch([(b'k', b'v', 5)]); assert v2.decode_records(b)[0][2:4] == (b'k', b'v');"
        "print('kclient from', kclient.__path__[0].rsplit('/', 1)[0]); print('speedups', a.speedups)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=src, env={**env, "PYTHONPATH": str(src)}, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert f"kclient from {src}" in run.stdout
    assert "speedups None" in run.stdout
    assert "kclient.accel kclient._speedups is not built" in run.stderr


# -- ProducerData: the compiled constructor and stamp against the pure ones -------------


_ANY_MESSAGES = st.one_of(st.lists(_BYTES, max_size=3), st.tuples(_BYTES), st.lists(_BYTES, max_size=2).map(iter), st.binary(max_size=3), st.none())
_ANY_HEADERS = st.one_of(st.just(()), st.none(), st.just([]), st.lists(st.tuples(st.text(max_size=3), _BYTES), max_size=2), st.lists(st.tuples(st.text(max_size=3), _BYTES), max_size=2).map(tuple))


def _outcome(fn, *args):
    try:
        value = fn(*args)
    except Exception as exc:  # the same error type and message on both paths
        return type(exc), str(exc)
    return type(value), tuple(value)


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=4)), _ANY_MESSAGES, st.one_of(st.none(), st.integers(0, 2**42)), st.one_of(st.none(), st.integers(0, 9)), _ANY_HEADERS)
def test_producer_data_constructor_matches_pure_python(topic, key, messages, ts, partition, headers):
    from kclient.client.producer import data

    pure = data.py_new
    if hasattr(messages, "__next__"):  # an iterator is used up by one call: make two
        items = list(messages)
        first, second = iter(items), iter(items)
    else:
        first = second = messages
    compiled = _outcome(_speedups.new_data, data.ProducerData, topic, key, first, ts, partition, headers)
    assert compiled == _outcome(pure, data.ProducerData, topic, key, second, ts, partition, headers)


@pytest.mark.unit
def test_stamped_sets_the_send_time():
    import time

    from kclient.client.producer.data import ProducerData, py_stamped

    d = ProducerData("t", b"k", [b"v"], None, 3, [("h", b"x")])
    before = time.time_ns() // 1_000_000
    compiled, pure = _speedups.stamped(d), py_stamped(d)
    after = time.time_ns() // 1_000_000
    assert type(compiled) is ProducerData and compiled[:3] == d[:3] and compiled[4:] == d[4:]
    assert before <= compiled.timestamp_ms <= after and before <= pure.timestamp_ms <= after


# -- the producer's collate step: the compiled loops against the pure ones -------------


_COLLATE_KEYS = st.one_of(st.none(), st.binary(max_size=6), st.just(bytearray(b"k")), st.just("str"))
_COLLATE_VALUES = st.one_of(st.none(), st.binary(max_size=4), st.just(bytearray(b"v")))


@st.composite
def _collate_items(draw):
    """One topic's ProducerData: keys null, bytes or not bytes; values
    bytes, null or bytearray; some with a timestamp, an explicit partition
    (in range or not) or headers; some empty."""
    from kclient.client.producer.data import ProducerData

    items = []
    for _ in range(draw(st.integers(0, 12))):
        items.append(
            ProducerData(
                "t",
                draw(_COLLATE_KEYS),
                draw(st.lists(_COLLATE_VALUES, max_size=3)),
                draw(st.one_of(st.none(), st.integers(0, 2**42))),
                draw(st.one_of(st.none(), st.none(), st.integers(-1, 6))),
                draw(st.one_of(st.just(()), st.just(()), st.just([("h", b"x")]))),
            )
        )
    return items


def _compiled_takes(items, n_parts, bytes_values):
    """Whether ``collate_default`` takes every item (else it hands back)."""
    for d in items:
        if d.headers:
            return False
        if not d.messages:
            continue
        if d.key is not None and type(d.key) is not bytes:
            return False
        if d.partition is not None and not 0 <= d.partition < n_parts:
            return False
        if bytes_values and any(v is not None and type(v) is not bytes for v in d.messages):
            return False
    return True


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None)
@given(_collate_items(), st.integers(1, 5), st.integers(0, 2**32), st.booleans())
def test_collate_default_matches_the_pure_collate(items, n_parts, seed, bytes_values):
    """The compiled collate loop (default partitioner, pass-through or
    default encoders) groups records as ``Collator.collate_general`` does,
    drawing the same random partitions for null keys, or hands the batch
    back."""
    import random
    from types import SimpleNamespace

    from kclient.client.producer.collate import Collator
    from kclient.client.producer.data import ProducerData
    from kclient.client.serde import DefaultEncoder

    compiled = _speedups.collate_default(list(items), ProducerData, n_parts, 7, random.Random(seed).random, bytes_values)
    assert (compiled is not None) == _compiled_takes(items, n_parts, bytes_values)
    if compiled is None:
        return
    passthrough = SimpleNamespace(passthrough=True)
    collator = Collator(DefaultEncoder() if bytes_values else passthrough, passthrough, partitioner.DefaultPartitioner(rng=random.Random(seed)))
    pure = collator.collate_general("t", items, n_parts, 7)
    assert list(compiled.items()) == [(p, part.records) for p, part in pure.items()]


@pytest.mark.unit
@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["data", "tracked", "other"])), max_size=20))
def test_group_by_topic_matches_pure_python(shape):
    """The compiled grouping by topic and its pure twin give the same items
    per topic, in the same order (ProducerData, TrackedData and any object
    with a ``topic``)."""
    from types import SimpleNamespace

    from kclient.client.producer.collate import DATA_TYPES, group_by_topic
    from kclient.client.producer.data import ProducerData, new_tuple
    from kclient.client.producer.delivery import TrackedData

    make = {
        "data": lambda t: ProducerData(t, None, [b"v"]),
        "tracked": lambda t: new_tuple(TrackedData, (t, None, (b"v",), None, None, (), None)),
        "other": lambda t: SimpleNamespace(topic=t),
    }
    items = [make[kind](topic) for topic, kind in shape]

    def ids(grouped):
        return [(t, [id(d) for d in ds]) for t, ds in grouped.items()]

    assert ids(_speedups.group_by_topic(items, DATA_TYPES)) == ids(group_by_topic(items, DATA_TYPES))


@pytest.mark.unit
@settings(max_examples=examples(100), deadline=None)
@given(st.lists(_records(with_headers=True), min_size=1, max_size=4), st.integers(0, 3))
def test_record_sets_decode_alike_from_bytes_bytearray_and_memoryview(batches, skip):
    from kclient.protocol.records import iter_record_rows

    data, base = b"", 0
    for records in batches:
        records = [r for r in records if abs(r[2]) < 2**61] or [(None, b"x", 0)]
        data += v2.build_batch(records, base_offset=base)
        base += len(records)
    start = min(skip, base - 1)

    def rows_of(buf):
        return [(o, r) for offsets, rows in iter_record_rows(buf, start) for o, r in zip(offsets, rows)]

    expected = rows_of(data)
    assert expected and expected[0][0] == start
    assert rows_of(bytearray(data)) == expected
    assert rows_of(memoryview(bytearray(b"xx" + data))[2:]) == expected
    for _, (key, value, _, _) in expected:
        assert key is None or type(key) is bytes
        assert value is None or type(value) is bytes


@pytest.mark.unit
def test_plain_producer_data_is_not_tracked_by_the_garbage_collector():
    """Queued records of plain values cost the collector nothing; anything
    that could hold a reference cycle stays tracked."""
    import gc

    from kclient.client.producer.data import ProducerData

    plain = _speedups.new_data(ProducerData, "t", b"k", [b"v", None], 5, 1, ())
    assert not gc.is_tracked(plain) and not gc.is_tracked(plain.messages)
    assert not gc.is_tracked(_speedups.stamped(_speedups.new_data(ProducerData, "t", None, [b"v"])))
    holder: dict = {}
    for d in (
        _speedups.new_data(ProducerData, "t", None, [holder]),  # a value that could refer back
        _speedups.new_data(ProducerData, "t", None, [b"v"], headers=[("h", b"x")]),
        _speedups.new_data(ProducerData, "t", ["not bytes"], [b"v"]),
    ):
        assert gc.is_tracked(d)
    cyclic = _speedups.new_data(ProducerData, "t", None, [holder])
    holder["self"] = cyclic  # a cycle through a tracked record is still collected
    del cyclic, holder
    assert gc.collect() >= 2


@pytest.mark.unit
def test_collated_records_of_plain_values_are_not_tracked_by_the_collector():
    """``collate_default``'s ``(key, value, timestamp)`` records of bytes,
    None and an int timestamp cannot be in a cycle: untracked; a value of
    another type (pass-through encoders) keeps its record tracked."""
    import gc
    import random

    from kclient.client.producer.data import ProducerData

    view = memoryview(b"m")
    items = [
        _speedups.new_data(ProducerData, "t", b"k", [b"v", None], 5, 0, ()),
        _speedups.new_data(ProducerData, "t", None, [view], 6, 1, ()),
        _speedups.new_data(ProducerData, "t", None, [b"w"], 7, 0, ()),
    ]
    out = _speedups.collate_default(items, ProducerData, 2, 9, random.Random(1).random, False)
    assert out == {0: [(b"k", b"v", 5), (b"k", None, 5), (None, b"w", 7)], 1: [(None, view, 6)]}
    assert [gc.is_tracked(r) for r in out[0]] == [False, False, False]
    assert gc.is_tracked(out[1][0])


# -- whole record sets: the compiled batch walker against the pure loop -------------


@st.composite
def _record_set(draw):
    """Several v2 batches of every kind the walker meets: plain, compressed,
    LogAppendTime, control, with headers; then maybe a damaged byte and a
    cut end (a fetch ends inside a batch)."""
    data, base = b"", draw(st.integers(0, 2**40))
    first = base
    for _ in range(draw(st.integers(1, 6))):
        records = [r for r in draw(_records(with_headers=draw(st.booleans()))) if abs(r[2]) < 2**61] or [(None, b"x", 0)]
        kind = draw(st.sampled_from(["plain", "plain", "plain", "gzip", "append", "control"]))
        data += v2.build_batch(
            records,
            base_offset=base,
            codec=codecs.GZIP if kind == "gzip" else codecs.NONE,
            timestamp_type_log_append=kind == "append",
            is_control=kind == "control",
            is_transactional=kind == "control",
        )
        base += len(records)
    data = bytearray(data)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= draw(st.integers(1, 255))
    cut = draw(st.integers(0, 80))
    if cut:
        data = data[: max(0, len(data) - cut)]
    start = first + draw(st.integers(0, base - first))
    return bytes(data), start


def _walk(buf, start, chunk_rows):
    """Every chunk iter_record_rows yields, then the error it raised."""
    from kclient.protocol.records.rows import iter_record_rows

    chunks: list = []
    try:
        for offsets, rows in iter_record_rows(buf, start, where="t-0", chunk_rows=chunk_rows):
            chunks.append((list(offsets), list(rows)))
    except CorruptRecordError as exc:
        return chunks, str(exc)
    return chunks, None


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_record_set(), st.sampled_from([1, 7, 256]))
def test_record_set_walk_matches_pure_python(record_set, chunk_rows):
    """iter_record_rows with the compiled batch walker yields the same rows
    and raises the same error, after the same rows, as with none."""
    from kclient.protocol.records import rows as rows_module

    buf, start = record_set
    assert rows_module._c_decode_batches is _speedups.decode_batches or _accel.speedups is None
    saved = rows_module._c_decode_batches
    rows_module._c_decode_batches = _speedups.decode_batches
    try:
        compiled = _walk(bytearray(buf), start, chunk_rows)
    finally:
        rows_module._c_decode_batches = None
    try:
        pure = _walk(buf, start, chunk_rows)
    finally:
        rows_module._c_decode_batches = saved
    flat = lambda chunks: [(o, r) for offsets, rows in chunks for o, r in zip(offsets, rows)]  # noqa: E731
    assert flat(compiled[0]) == flat(pure[0])
    assert compiled[1] == pure[1]
    if chunk_rows == 256:
        assert all(len(rows) >= 1 for _, rows in compiled[0])


def _decode_chunk_both(buf, start, key_decoder=None, value_decoder=None):
    from kclient.client.consumer import fetcher
    from kclient.client.consumer.fetcher import PartitionTopicInfo, decode_chunk
    from kclient.client.consumer.message_set import ByteBufferMessageSet

    def one():
        try:
            chunk = decode_chunk(PartitionTopicInfo("t", 3, 0, start), ByteBufferMessageSet("t", 3, bytearray(buf), start), key_decoder, value_decoder)
        except (CorruptRecordError, MessageSizeTooLargeError) as exc:
            return type(exc).__name__, str(exc)
        return chunk.offsets, chunk.keys, chunk.values, chunk.timestamps

    saved = fetcher._c_decode_columns
    fetcher._c_decode_columns = _speedups.decode_columns
    try:
        compiled = one()
    finally:
        fetcher._c_decode_columns = None
    try:
        pure = one()
    finally:
        fetcher._c_decode_columns = saved
    return compiled, pure


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_record_set())
def test_consumer_chunks_decode_alike_on_both_paths(record_set):
    """The high-level consumer's fetched chunks: the columns decoded
    straight from the bytes (compiled) equal those made from rows (pure),
    and a corrupt batch fails the chunk with the same error."""
    buf, start = record_set
    compiled, pure = _decode_chunk_both(buf, start)
    assert compiled == pure


def _readers(n: int, decoded: bool = False):
    from kclient.client.consumer.group.streams import MessageAndMetadata, _ChunkReaderPy

    offsets = list(range(100, 100 + n))
    keys = [None if o % 3 else b"k%d" % o for o in offsets]
    values = [{"v": o} if decoded and o % 2 else b"v%d" % o for o in offsets]
    timestamps = [1000 + o for o in offsets]
    args = (MessageAndMetadata, "t", 2, offsets, keys, values, timestamps)
    return _speedups.ChunkReader(*args), _ChunkReaderPy(*args)


@pytest.mark.unit
@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 30), st.lists(st.tuples(st.sampled_from(["next", "stop", "peek"]), st.integers(1, 4)), max_size=20), st.booleans())
def test_chunk_reader_twins_agree(n, ops, decoded):
    """The compiled chunk reader and its pure twin, step by step: the same
    messages, and the same counts of what is left and what was handed out,
    before and after stop()."""
    from kclient.client.consumer.group.streams import MessageAndMetadata

    compiled, pure = _readers(n, decoded)
    c_it, p_it = iter(compiled), iter(pure)
    for op, k in ops:
        if op == "next":
            got = [list(itertools.islice(it, k)) for it in (c_it, p_it)]
            assert got[0] == got[1] and all(type(m) is MessageAndMetadata for m in got[0])
        elif op == "stop":
            compiled.stop()
            pure.stop()
        assert compiled.remaining() == pure.remaining() and compiled.handed() == pure.handed()
    assert list(c_it) == list(p_it)
    assert compiled.handed() == pure.handed() and compiled.remaining() == pure.remaining() == 0


@pytest.mark.unit
def test_chunk_reader_messages_of_plain_values_are_not_tracked_by_the_garbage_collector():
    import gc

    compiled, _ = _readers(6, decoded=True)
    messages = list(compiled)
    assert [gc.is_tracked(m) for m in messages] == [bool(o % 2) for o in range(100, 106)]  # a dict value could refer back
    holder = messages[1].value
    holder["self"] = messages[1]  # a cycle through a tracked message is still collected
    del messages, holder, compiled
    assert gc.collect() >= 2
    with pytest.raises(ValueError):
        _speedups.ChunkReader(tuple, "t", 0, [1, 2], [None], [None, None], [0, 0])


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_record_set(), st.sampled_from([None, 0, 1]), st.integers(0, 2**40), st.data())
def test_fetched_position_matches_pure_python(record_set, legacy_magic, start, data):
    """Where the high-level consumer fetches next, from batch headers: the
    same on both paths for v2 batches, v0/v1 entries, cut and damaged sets."""
    from kclient.client.consumer import statistics
    from kclient.protocol.records import legacy

    buf, _ = record_set
    if legacy_magic is not None:
        records = [(b"k", b"v" * data.draw(st.integers(0, 50)), 1000)] * data.draw(st.integers(1, 5))
        buf = legacy.build_message_set(records, magic=legacy_magic, base_offset=data.draw(st.integers(0, 2**40))) + buf
    for candidate in (buf, buf[: data.draw(st.integers(0, len(buf)))]):
        pure = statistics._fetched_position_py(candidate, start)
        compiled = _speedups.fetched_position(bytearray(candidate), start)
        assert compiled == pure or compiled is None  # None: an offset beyond 62 bits, handed back
        assert statistics.fetched_position(candidate, start) == pure
    assert _speedups.fetched_position(buf, 2**63) is None


def _iterate_message_set(buf, start):
    from kclient.client.consumer.message_set import ByteBufferMessageSet, Message, MessageAndOffset

    got: list = []
    try:
        for mo in ByteBufferMessageSet("t", 1, bytearray(buf), start):
            assert type(mo) is MessageAndOffset and type(mo.message) is Message
            got.append((mo.offset, tuple(mo.message)))
    except (CorruptRecordError, MessageSizeTooLargeError) as exc:
        return got, (type(exc).__name__, str(exc))
    return got, None


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_record_set())
def test_simple_consumer_message_sets_iterate_alike_on_both_paths(record_set):
    """SimpleConsumer's ByteBufferMessageSet: the messages built from the
    compiled columns equal those from rows (pure), start offsets inside a
    batch included, and a corrupt batch raises the same error after the
    same messages."""
    from kclient.client.consumer import message_set

    buf, start = record_set
    saved = message_set._c_decode_columns, message_set._MessageSetReader
    message_set._c_decode_columns, message_set._MessageSetReader = _speedups.decode_columns, _speedups.MessageSetReader
    try:
        compiled = _iterate_message_set(buf, start)
    finally:
        message_set._c_decode_columns = message_set._MessageSetReader = None
    try:
        pure = _iterate_message_set(buf, start)
    finally:
        message_set._c_decode_columns, message_set._MessageSetReader = saved
    assert compiled == pure


@pytest.mark.unit
def test_message_set_reader_messages_of_plain_values_are_not_tracked():
    import gc

    from kclient.client.consumer.message_set import Message, MessageAndOffset

    holder: dict = {}
    reader = _speedups.MessageSetReader(Message, MessageAndOffset, [5, 6], [b"k", None], [b"v", holder], [1, 2])
    plain, other = list(reader)
    assert plain == ((b"k", b"v", 1, ()), 5) and other == ((None, holder, 2, ()), 6)
    assert not gc.is_tracked(plain) and not gc.is_tracked(plain.message)
    assert gc.is_tracked(other) and gc.is_tracked(other.message)
    holder["self"] = other
    del reader, plain, other, holder
    assert gc.collect() >= 2
    with pytest.raises(ValueError):
        _speedups.MessageSetReader(Message, MessageAndOffset, [1], [], [], [])


@pytest.mark.unit
def test_a_bad_magic_after_a_plain_batch_is_named_at_its_byte_on_both_paths():
    """The compiled decoder takes the plain batches and hands the rest to the
    general one: an error there names its byte in the whole fetched buffer,
    as the pure path does (it named the byte in the rest: 0 instead of the
    batch's own position; found by the property test above)."""
    require(_MISSING, name="kclient._speedups", needs="the compiled speedups")
    plain = v2.build_batch([(b"k", b"v", 0)], base_offset=0)
    bad = bytearray(v2.build_batch([(b"k", b"w", 0)], base_offset=1, codec=codecs.GZIP))
    bad[16] = 3  # the magic byte
    compiled, pure = _decode_chunk_both(plain + bytes(bad), 0)
    assert compiled == pure
    assert compiled[0] == "CorruptRecordError" and f"unknown magic byte 3 at byte {len(plain)}" in compiled[1]


_ROUTE_KEYS = st.one_of(st.none(), st.none(), st.binary(max_size=6), st.just(bytearray(b"kk")), st.just("str-key"), st.just(7))
_ROUTE_VALUES = st.one_of(st.none(), st.binary(max_size=40), st.just(bytearray(b"v")), st.just("text"), st.just(3))


@st.composite
def _route_items(draw):
    """One topic's items for the accumulator's router: ProducerData and
    TrackedData, keys null, bytes or of other types, values of every kind,
    some with an explicit partition, some empty."""
    from kclient.client.producer.data import ProducerData, new_tuple
    from kclient.client.producer.delivery import TrackedData

    items = []
    for i in range(draw(st.integers(0, 25))):
        d = ProducerData(
            "t",
            draw(_ROUTE_KEYS),
            draw(st.lists(_ROUTE_VALUES, max_size=3)),
            draw(st.one_of(st.none(), st.integers(0, 2**42))),
            draw(st.one_of(st.none(), st.none(), st.none(), st.integers(0, 6))),
        )
        if draw(st.booleans()):
            d = new_tuple(TrackedData, (*d, f"report-{i}"))
        items.append(d)
    return items


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None)
@given(
    _route_items(),
    st.integers(-1, 6),
    st.booleans(),
    st.booleans(),
    st.integers(-1, 5),
    st.integers(0, 200),
    st.integers(1, 300),
    st.dictionaries(st.integers(-1, 6), st.tuples(st.integers(1, 3), st.integers(0, 250)), max_size=4),
    st.integers(1, 6),
    st.booleans(),
)
def test_route_topic_matches_pure_python(items, n_parts, hash_keys, sticky_keyless, sticky_p, sticky_bytes, batch_size, open_shape, batch_messages, ignore_keys):
    """The compiled router groups a topic's items per partition with the
    same record counts, sizes and sticky partitions as its pure twin, moves
    the sticky partition at the same items, and appends the same items to
    the partitions' open batches; with ``partitioner.ignore.keys`` too."""
    from kclient.client.producer.accumulator import ACCUMULATOR_RECORD_OVERHEAD, PartitionBatch, estimated_size
    from kclient.client.producer.collate import DATA_TYPES
    from kclient.client.producer.routing import route_topic

    def chooser():
        calls = []

        def next_sticky(p):
            calls.append(p)
            return (p + 3) % max(1, n_parts) if p >= 0 else len(calls) % max(1, n_parts)

        return calls, next_sticky

    def open_batches():
        out = {}
        for p, (count, size) in open_shape.items():
            b = out[p] = PartitionBatch("t", p, 0.0)
            b.items, b.messages, b.size = ["held"] * count, count, size
        return out

    def shape(batches):
        return {p: (b.items, b.messages, b.size) for p, b in batches.items()}

    args = (DATA_TYPES, n_parts, hash_keys, sticky_keyless, sticky_p, sticky_bytes, batch_size, ACCUMULATOR_RECORD_OVERHEAD)
    calls_c, choose_c = chooser()
    calls_py, choose_py = chooser()
    compiled = _speedups.route_topic(list(items), *args, choose_c, ignore_keys=ignore_keys)
    pure = route_topic(list(items), *args, choose_py, ignore_keys=ignore_keys)
    assert compiled == pure
    assert calls_c == calls_py
    open_c, open_py = open_batches(), open_batches()
    with_open_c = _speedups.route_topic(list(items), *args, chooser()[1], open_c, batch_messages, ignore_keys)
    with_open_py = route_topic(list(items), *args, chooser()[1], open_py, batch_messages, ignore_keys)
    assert with_open_c == with_open_py
    assert shape(open_c) == shape(open_py)
    assert with_open_py[3] == sum(b.messages for b in open_py.values()) - sum(c for c, _ in open_shape.values())
    assert all(type(a) is type(b) for a, b in zip(
        [d for g in compiled[0].values() for d in g[0]], [d for g in pure[0].values() for d in g[0]], strict=True))
    groups = pure[0]
    assert sum(len(g[0]) for g in groups.values()) == len(items)
    for g in groups.values():
        assert g[2] == [estimated_size(d[1], d[2]) for d in g[0]]


@pytest.mark.unit
def test_route_topic_hands_back_other_shapes():
    """An item of another type, messages not in a tuple or an explicit
    partition that is not an int go back to the caller on both paths."""
    from types import SimpleNamespace

    from kclient.client.producer.collate import DATA_TYPES
    from kclient.client.producer.data import ProducerData, new_tuple
    from kclient.client.producer.routing import route_topic

    odd = [
        [ProducerData("t", None, [b"a"]), SimpleNamespace(topic="t", key=None, messages=(b"b",))],
        [new_tuple(ProducerData, ("t", None, [b"a"], None, None, ()))],
        [ProducerData("t", None, [b"a"], partition=True)],
    ]
    from kclient.client.producer.accumulator import PartitionBatch

    for items in odd:
        for route in (_speedups.route_topic, route_topic):
            open_batch = PartitionBatch("t", 0, 0.0)
            open_batch.items, open_batch.messages, open_batch.size = ["held"], 1, 1
            assert route([ProducerData("t", None, [b"x"], partition=0), *items], DATA_TYPES, 4, True, True, -1, 0, 100, 10, lambda p: 0, {0: open_batch}, 50) is None
            assert open_batch.items == ["held"]  # nothing appended


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 60)), max_size=40), st.integers(0, 5), st.integers(0, 80), st.booleans(), st.integers(1, 6), st.integers(1, 120))
def test_batch_cuts_matches_pure_python(shape, count, size, held, most, limit):
    """Where the compiled splitter closes a partition's batches is where
    its pure twin closes them, and so where appending item by item does."""
    from kclient.client.producer.accumulator import batch_cuts

    messages = [k for k, _ in shape]
    sizes = [b for _, b in shape]
    held = held or bool(count or size)
    assert _speedups.batch_cuts(messages, sizes, count, size, held, most, limit) == batch_cuts(messages, sizes, count, size, held, most, limit)


@pytest.mark.unit
@pytest.mark.parametrize(
    "case",
    ["stamp", "timestamped", "waker", "refused", "unknown topic", "callback", "list", "subclass"],
)
def test_fast_send_does_what_the_first_branch_of_producer_send_does(case):
    """``FastSend`` (the compiled ``Producer.send`` for its usual call)
    queues exactly what ``Producer.send``'s first branch queues, and hands
    every other call (a callback, a list, a subclass, a topic not validated
    yet, a refusal) to ``Producer.send`` itself."""
    from types import SimpleNamespace

    from kclient.client.producer.data import ProducerData
    from kclient.client.producer.producer import Producer

    class Data(ProducerData):
        pass

    item: object = {
        "timestamped": ProducerData("t", b"k", [b"v"], timestamp_ms=5),
        "unknown topic": ProducerData("new-topic", None, [b"v", b"w"]),
        "list": [ProducerData("t", None, [b"v"])],
        "subclass": Data("t", None, [b"v"]),
    }.get(case, ProducerData("t", None, [b"v", b"w"]))
    kwargs = {"callback": print} if case == "callback" else {}

    def run(send_of):
        puts: list = []
        wakes: list = []
        slow: list = []

        def fast_put(d, n):
            puts.append((d[:3], d[4:], n, type(d[3])))
            if case == "refused":
                return False
            return (lambda: wakes.append(1)) if case == "waker" else None

        send = send_of(fast_put, lambda data_or_list, callback=None: slow.append((data_or_list, callback)))
        send(item, **kwargs)
        return puts, wakes, slow

    def compiled(fast_put, slow):
        return _speedups.FastSend(ProducerData, {"t"}, fast_put, slow)

    def pure(fast_put, slow):
        # Producer.send's first branch on a bare producer: what it does not
        # finish there is what FastSend must leave to Producer.send.
        producer = object.__new__(Producer)
        producer._plain_enqueue = True
        producer._valid_topics = {"t"}
        producer._fast_put = fast_put
        producer._closer = SimpleNamespace(closed=False)
        producer._core = SimpleNamespace(prepare=lambda d: producer._valid_topics.add(d[0]))
        producer._enqueue_timeout_ms = 0

        def rest(*args, **kwargs):
            slow(*args, **kwargs)
            return True

        producer._queue = SimpleNamespace(put=lambda d, n, timeout: rest(d))
        if case in ("callback", "list", "subclass"):
            producer._closer = None
            slow(item, kwargs.get("callback"))  # not the first branch: Producer.send's other paths
            return lambda *a, **k: None
        def send(data, **kw):
            try:
                Producer.send(producer, data, **kw)
            finally:
                producer._closer = None  # a bare producer: nothing for __del__ to close

        return send

    c_puts, c_wakes, c_slow = run(compiled)
    p_puts, p_wakes, p_slow = run(pure)
    if case == "unknown topic":
        # Producer.send validates the name and queues it; FastSend leaves that to it
        assert c_puts == [] and c_slow == [(item, None)] and p_puts == [(item[:3], item[4:], 2, int)]
        return
    if case == "refused":
        # the refused item goes on to Producer.send's blocking put
        assert c_puts == p_puts and len(c_slow) == len(p_slow) == 1 and c_slow[0][0] == item
        return
    assert (c_puts, c_wakes) == (p_puts, p_wakes)
    assert [s[0] for s in c_slow] == [s[0] for s in p_slow]
