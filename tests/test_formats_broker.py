"""Message formats through a real broker process (issue 3): Produce v0-2
with message sets v0/v1, conversion on append to the stored format
(``log.message.format.version`` / topic ``message.format.version``),
LogAppendTime, down-conversion for Fetch v0-3, zstd and corruption errors,
and kclient's Producer capped by ``api.version``.

Expected records are derived from what was sent, never from what the broker
answered: keys, values, exact offsets (``base + i`` per produce), and the
timestamp each format can carry (v0: none, reported as -1; v1/v2: the
producer's CreateTime, or the broker's LogAppendTime). Every network wait is
bounded by ``TIMEOUT`` and every test by the module's pytest timeout. The
last tests check `kclient.broker.convert` alone (hypothesis round trips
of down-conversion and append conversion, error codes).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.examples import examples
from helpers.raw import TrioClient, fetch_body, produce_body
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.broker.convert import AppendRejected, down_convert, prepare_append
from kclient.client.consumer.simple import FetchRequest, SimpleConsumer
from kclient.client.producer.producer import Producer, ProducerData
from kclient.net.connection import BrokerConnection
from kclient.protocol.messages import FETCH, PRODUCE
from kclient.protocol.records import build_batch as _build_batch
from kclient.protocol.records import codecs, iter_record_set, scan_batches
from kclient.protocol.records.legacy import build_entry, build_message, build_message_set, read_message
from kclient.protocol.records.v2 import read_header, validate_batch
from kclient.storage.append_info import analyze_records
from kclient.testing import BrokerProcess

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 15  # seconds any single exchange may take
MAX_MESSAGE_BYTES = 200_000

#: Topic configs of the module's broker (``topic.config.file``).
TOPIC_CONFIGS = {
    "fmt-v1": {"message.format.version": "0.10.2-IV0"},
    "fmt-v0": {"message.format.version": "0.8.2"},
    "lat-v2": {"message.timestamp.type": "LogAppendTime"},
    "lat-v1": {"message.format.version": "0.10.0", "message.timestamp.type": "LogAppendTime"},
    "cap-v1": {"message.format.version": "0.10.2"},
    "cap-v0": {"message.format.version": "0.9.0"},
    "err-v1": {"message.format.version": "0.10.2"},
}

LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]
TS = 1_600_000_000_000


def build_batch(*args, **kwargs) -> bytes:
    """A v2 batch as the broker stores it: its leader stamps its leader
    epoch (0 on a standalone broker) into every batch (KIP-101)."""
    kwargs.setdefault("partition_leader_epoch", 0)
    return _build_batch(*args, **kwargs)


def write_topic_configs(path: Path, configs: dict) -> Path:
    lines = [f"{topic}.{name}={value}" for topic, entries in configs.items() for name, value in entries.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def fmt_broker(tmp_path_factory):
    """One broker (v2 by default, CreateTime) with the per-topic formats of
    `TOPIC_CONFIGS` and a small message.max.bytes."""
    tmp = tmp_path_factory.mktemp("formats")
    config_file = write_topic_configs(tmp / "topics.properties", TOPIC_CONFIGS)
    with BrokerProcess(
        log_dir=tmp / "logs",
        properties={
            "num.partitions": 1,
            "message.max.bytes": MAX_MESSAGE_BYTES,
            "topic.config.file": str(config_file),
        },
    ) as proc:
        yield proc


# ---------------------------------------------------------------- raw client


class Raw(TrioClient):
    """One loopback connection speaking raw Kafka frames."""

    @classmethod
    async def connect(cls, broker: BrokerProcess) -> Raw:
        return await super().connect(broker, client_id="test-formats", timeout=TIMEOUT)

    async def produce(self, topic: str, records: bytes, *, version: int, partition: int = 0) -> dict:
        body = await self.request(PRODUCE, version, produce_body(topic, partition, records))
        return body["responses"][0]["partition_responses"][0]

    async def fetch(self, topic: str, offset: int, *, version: int, max_bytes: int = 10_000_000) -> dict:
        body = await self.request(FETCH, version, fetch_body(topic, [(0, offset)], max_bytes=max_bytes, partition_max_bytes=max_bytes))
        return body["responses"][0]["partitions"][0]

    async def read_all(self, topic: str, *, version: int) -> tuple[list[tuple], list[int], bytes]:
        """Every record of partition 0 from offset 0 with Fetch ``version``:
        ``(records as (offset, timestamp, key, value, headers), magic of each
        batch, all record bytes)``."""
        records: list[tuple] = []
        magics: list[int] = []
        raw = b""
        offset = 0
        while True:
            p = await self.fetch(topic, offset, version=version)
            assert p["error_code"] == 0, p
            data = bytes(p["records"])
            got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_record_set(data) if r.offset >= offset]
            magics += [i.magic for i in scan_batches(data)]
            raw += data
            records += got
            if not got or records[-1][0] + 1 >= p["high_watermark"]:
                return records, magics, raw
            offset = records[-1][0] + 1


def sample(n: int = 6, *, tag: str = "r", ts: int = TS) -> list[tuple]:
    """(key, value, timestamp): keyed, null key, null value, empty value."""
    out = []
    for i in range(n):
        key = None if i % 3 == 1 else f"{tag}-k{i}".encode()
        value = None if i % 5 == 4 else (b"" if i % 7 == 3 else f"{tag}-value-{i}".encode() * 3)
        out.append((key, value, ts + 7 * i))
    return out


def expected(records, base: int, *, magic_seen: int, lat: int | None = None) -> list[tuple]:
    """What a reader must get back for ``records`` stored from ``base``
    when the data passed through message format ``magic_seen`` at its
    oldest (v0 loses timestamps) and LogAppendTime ``lat`` (ms) if set."""
    out = []
    for i, (k, v, ts) in enumerate(records):
        if magic_seen == 0:
            ts = -1
        elif lat is not None:
            ts = lat
        out.append((base + i, ts, k, v, ()))
    return out


def legacy_set(records, *, magic: int, codec: str) -> bytes:
    return build_message_set(records, magic=magic, codec=codecs.BY_NAME[codec])


# ---------------------------------------------------------------- Produce v0-2 on a v2 topic


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize(("produce_version", "magic"), [(0, 0), (1, 0), (2, 0), (2, 1)])
async def test_legacy_produce_up_converted_and_read_back(fmt_broker, topic, produce_version, magic, codec):
    client = await Raw.connect(fmt_broker)
    first, second = sample(6, tag="a"), sample(4, tag="b", ts=TS + 1000)
    r1 = await client.produce(topic, legacy_set(first, magic=magic, codec=codec), version=produce_version)
    r2 = await client.produce(topic, legacy_set(second, magic=magic, codec=codec), version=produce_version)
    assert (r1["error_code"], r1["base_offset"]) == (0, 0)
    assert (r2["error_code"], r2["base_offset"]) == (0, 6)
    if produce_version >= 2:
        assert r1["log_append_time_ms"] == -1  # CreateTime topic
    want = expected(first, 0, magic_seen=magic) + expected(second, 6, magic_seen=magic)

    # Fetch v4+: the stored bytes, up-converted to v2 (one batch per set:
    # a compressed wrapper keeps its codec, uncompressed entries are grouped).
    for fetch_version in (4, 11):
        got, magics, raw = await client.read_all(topic, version=fetch_version)
        assert got == want
        assert magics == [2, 2]
        for info in scan_batches(raw):
            header = validate_batch(raw[info.position : info.position + info.size])
            assert header.codec == codecs.BY_NAME[codec]
            assert not header.is_log_append_time
    # Fetch v0-3: down-converted to the newest format each can carry.
    for fetch_version in (0, 1, 2, 3):
        to_magic = 0 if fetch_version <= 1 else 1
        got, magics, _ = await client.read_all(topic, version=fetch_version)
        assert got == expected(first, 0, magic_seen=min(magic, to_magic)) + expected(second, 6, magic_seen=min(magic, to_magic))
        assert set(magics) == {to_magic}
    await client.aclose()


@pytest.mark.parametrize("codec", LEGACY_CODECS)
async def test_v2_batches_down_converted_with_exact_offsets(fmt_broker, topic, codec):
    client = await Raw.connect(fmt_broker)
    cid = codecs.BY_NAME[codec]
    a = [(k, v, ts, (("h", b"x"),)) for k, v, ts in sample(5, tag="a")]
    b = [(k, v, ts) for k, v, ts in sample(3, tag="b", ts=TS + 50)]
    batch_a, batch_b = build_batch(a, codec=cid), build_batch(b, codec=cid)
    assert (await client.produce(topic, batch_a, version=8))["base_offset"] == 0
    assert (await client.produce(topic, batch_b, version=3))["base_offset"] == 5
    want = [(i, ts, k, v) for i, (k, v, ts) in enumerate([r[:3] for r in a] + b)]

    # Fetch v4+ serves the stored bytes as produced (base offsets aside).
    p = await client.fetch(topic, 0, version=4)
    stored = bytes(p["records"])
    assert stored == batch_a + struct.pack(">q", 5) + batch_b[8:]

    for fetch_version, to_magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
        got, magics, raw = await client.read_all(topic, version=fetch_version)
        assert set(magics) == {to_magic}
        assert [(o, ts if to_magic else -1, k, v) for o, ts, k, v in want] == [(o, ts, k, v) for o, ts, k, v, _ in got]
        assert all(h == () for *_, h in got)  # headers cannot go below v2
        for info in scan_batches(raw):
            msg = read_message(raw, info.position)
            assert msg.is_valid and msg.codec == cid
        if cid:
            assert len(magics) == 2  # one wrapper per v2 batch, same codec
        # From an offset inside the first batch: uncompressed entries before
        # it are left out, a compressed wrapper comes whole and the reader
        # skips what it did not ask for. Offsets stay exact either way.
        p = await client.fetch(topic, 2, version=fetch_version)
        part = [(r.offset, r.key, r.value) for r in iter_record_set(bytes(p["records"]))]
        if not cid:
            assert part[0][0] == 2
        assert [x for x in part if x[0] >= 2] == [(o, k, v) for o, _, k, v in want[2:]]

    # A small limit still returns the first converted batch whole, and only
    # whole entries.
    p = await client.fetch(topic, 0, version=2, max_bytes=60)
    data = bytes(p["records"])
    assert data and sum(i.size for i in scan_batches(data)) == len(data)
    await client.aclose()


async def test_zstd_needs_produce_v7_and_no_down_conversion(fmt_broker, topic):
    client = await Raw.connect(fmt_broker)
    batch = build_batch(sample(4), codec=codecs.ZSTD)
    r = await client.produce(topic, batch, version=6)
    assert r["error_code"] == 76  # UNSUPPORTED_COMPRESSION_TYPE
    p = await client.fetch(topic, 0, version=11)
    assert p["high_watermark"] == 0  # nothing written
    assert (await client.produce(topic, batch, version=7))["error_code"] == 0
    # zstd in a message set v1 (attributes codec 4) is refused too.
    inner = build_entry(0, build_message(b"k", b"v", magic=1, timestamp=TS))
    wrapper = build_entry(0, build_message(None, codecs.compress(codecs.ZSTD, inner), magic=1, timestamp=TS, attributes=codecs.ZSTD))
    assert (await client.produce(topic, wrapper, version=2))["error_code"] == 76
    # zstd has no v0/v1 form: Fetch v0-3 (down-conversion) get 76; Fetch
    # v4+ get the stored batch (Kafka with compression.type=producer).
    for version in (0, 1, 2, 3):
        assert (await client.fetch(topic, 0, version=version))["error_code"] == 76
    for version in (4, 10, 11):
        p = await client.fetch(topic, 0, version=version)
        assert p["error_code"] == 0 and bytes(p["records"]) == batch
        assert len(list(iter_record_set(bytes(p["records"])))) == 4
    await client.aclose()


# ---------------------------------------------------------------- stored format


def dump_log(path: Path) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "kclient", "dump-log", str(path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if "magic:" in line]


async def test_v1_format_topic_stores_v1(fmt_broker):
    topic = "fmt-v1"
    client = await Raw.connect(fmt_broker)
    v2 = [(k, v, ts, (("h1", b"dropped"),)) for k, v, ts in sample(4, tag="v2")]
    v1 = sample(3, tag="v1", ts=TS + 100)
    v0 = sample(2, tag="v0")
    assert (await client.produce(topic, build_batch(v2, codec=codecs.GZIP), version=8))["base_offset"] == 0
    assert (await client.produce(topic, legacy_set(v1, magic=1, codec="snappy"), version=2))["base_offset"] == 4
    assert (await client.produce(topic, legacy_set(v0, magic=0, codec="none"), version=0))["base_offset"] == 7
    assert (await client.produce(topic, build_batch(sample(1, tag="u")), version=5))["base_offset"] == 9
    want = (
        expected([r[:3] for r in v2], 0, magic_seen=1)
        + expected(v1, 4, magic_seen=1)
        + expected(v0, 7, magic_seen=0)
        + expected(sample(1, tag="u"), 9, magic_seen=1)
    )
    # Fetch v4+ serves what is stored: message set v1 only, CRCs valid,
    # headers gone, offsets and timestamps exact.
    got, magics, raw = await client.read_all(topic, version=11)
    assert got == want
    assert set(magics) == {1}
    for info in scan_batches(raw):
        assert read_message(raw, info.position).is_valid
    got0, magics0, _ = await client.read_all(topic, version=1)
    assert set(magics0) == {0} and got0 == [(o, -1, k, v, h) for o, _, k, v, h in want]
    # The segment on disk says the same (kclient dump-log, Kafka's format).
    lines = dump_log(fmt_broker.log_dir / f"{topic}-0" / "00000000000000000000.log")
    # the v2 batch became 4 v1 messages, the snappy v1 set is kept as ONE
    # wrapper carrying its last inner offset (4..6 -> 6), v0 -> 2 v1, 1 more
    assert len(lines) == 4 + 1 + 2 + 1
    assert all("magic: 1" in line and "isvalid: true" in line for line in lines)
    assert [line.split()[1] for line in lines] == ["0", "1", "2", "3", "6", "7", "8", "9"]
    assert "compresscodec: SNAPPY" in lines[4]
    # Kafka refuses what a v1 log cannot keep: an idempotent batch (43) and zstd (76).
    idempotent = build_batch(sample(2), producer_id=7, producer_epoch=0, base_sequence=0)
    assert (await client.produce(topic, idempotent, version=8))["error_code"] == 43
    assert (await client.produce(topic, build_batch(sample(2), codec=codecs.ZSTD), version=8))["error_code"] == 76
    assert (await client.fetch(topic, 0, version=11))["high_watermark"] == 10
    await client.aclose()


async def test_v0_format_topic_stores_v0(fmt_broker):
    topic = "fmt-v0"
    client = await Raw.connect(fmt_broker)
    assert (await client.produce(topic, build_batch(sample(3), codec=codecs.LZ4), version=8))["error_code"] == 0
    assert (await client.produce(topic, legacy_set(sample(2, tag="x"), magic=1, codec="gzip"), version=2))["error_code"] == 0
    got, magics, raw = await client.read_all(topic, version=11)
    assert set(magics) == {0}
    assert got == expected(sample(3), 0, magic_seen=0) + expected(sample(2, tag="x"), 3, magic_seen=0)
    lines = dump_log(fmt_broker.log_dir / f"{topic}-0" / "00000000000000000000.log")
    assert len(lines) == 5 and all("magic: 0" in line for line in lines)
    await client.aclose()


# ---------------------------------------------------------------- LogAppendTime


async def test_log_append_time_rewrites_timestamps_and_crcs(fmt_broker):
    client = await Raw.connect(fmt_broker)
    # v2 topic: the batch keeps its records; attributes bit 3, maxTimestamp
    # and the CRC-32C change.
    before = int(time.time() * 1000)
    sent = build_batch([(k, v, ts, (("h", b"1"),)) for k, v, ts in sample(3)], codec=codecs.SNAPPY)
    r = await client.produce("lat-v2", sent, version=8)
    legacy = legacy_set(sample(2, tag="old"), magic=1, codec="gzip")
    r_legacy = await client.produce("lat-v2", legacy, version=2)
    after = int(time.time() * 1000)
    assert r["error_code"] == 0 and before <= r["log_append_time_ms"] <= after
    assert r_legacy["error_code"] == 0 and before <= r_legacy["log_append_time_ms"] <= after
    p = await client.fetch("lat-v2", 0, version=11)
    raw = bytes(p["records"])
    infos = list(scan_batches(raw))
    assert len(infos) == 2
    h = validate_batch(raw[: infos[0].size])  # the new CRC-32C is right
    assert h.is_log_append_time and h.max_timestamp == r["log_append_time_ms"]
    assert h.base_timestamp == TS and h.crc != read_header(sent).crc
    assert raw[61 : infos[0].size] == sent[61:]  # records untouched
    h2 = validate_batch(raw[infos[1].position :])
    assert h2.is_log_append_time and h2.max_timestamp == r_legacy["log_append_time_ms"]
    got = list(iter_record_set(raw))
    assert [x.timestamp for x in got] == [r["log_append_time_ms"]] * 3 + [r_legacy["log_append_time_ms"]] * 2
    # Down-converted for Fetch v2: v1 messages carrying the LogAppendTime.
    got_v1 = [(x.offset, x.timestamp) for x in iter_record_set(bytes((await client.fetch("lat-v2", 0, version=2))["records"]))]
    assert got_v1 == [(i, x.timestamp) for i, x in enumerate(got)]

    # v1 topic: each message gets bit 3, the broker's timestamp and a new CRC32.
    r = await client.produce("lat-v1", legacy_set(sample(3), magic=1, codec="none"), version=2)
    r2 = await client.produce("lat-v1", build_batch(sample(2, tag="b")), version=8)
    assert r["error_code"] == 0 and r["log_append_time_ms"] >= before
    raw = bytes((await client.fetch("lat-v1", 0, version=11))["records"])
    msgs = [read_message(raw, i.position) for i in scan_batches(raw)]
    assert len(msgs) == 5
    assert all(m.is_valid and m.magic == 1 and m.is_log_append_time for m in msgs)
    assert [m.timestamp for m in msgs] == [r["log_append_time_ms"]] * 3 + [r2["log_append_time_ms"]] * 2
    await client.aclose()


async def test_broker_wide_format_and_timestamp_type(tmp_path):
    """``log.message.format.version`` and ``log.message.timestamp.type`` on
    the broker; a topic entry overrides both."""
    config_file = write_topic_configs(
        tmp_path / "topics.properties", {"modern": {"message.format.version": "2.8", "message.timestamp.type": "CreateTime"}}
    )
    with BrokerProcess(
        log_dir=tmp_path / "logs",
        properties={
            "log.message.format.version": "0.10.2-IV0",
            "log.message.timestamp.type": "LogAppendTime",
            "topic.config.file": str(config_file),
            "num.partitions": 1,
        },
    ) as proc:
        client = await Raw.connect(proc)
        for topic in ("plain", "modern"):
            r = await client.produce(topic, build_batch(sample(2)), version=8)
            assert r["error_code"] == 0
        _, magics, raw = await client.read_all("plain", version=11)
        assert magics == [1, 1]
        assert all(read_message(raw, i.position).is_log_append_time for i in scan_batches(raw))
        got, magics, raw = await client.read_all("modern", version=11)
        assert magics == [2] and not read_header(raw).is_log_append_time
        assert got == expected(sample(2), 0, magic_seen=2)
        await client.aclose()


# ---------------------------------------------------------------- validation


async def test_corrupt_legacy_sets_rejected_and_earlier_data_intact(fmt_broker, topic):
    client = await Raw.connect(fmt_broker)
    good = legacy_set(sample(3), magic=0, codec="none")
    assert (await client.produce(topic, good, version=0))["error_code"] == 0

    bad_crc = bytearray(legacy_set(sample(2, tag="bad"), magic=1, codec="none"))
    bad_crc[-2] ^= 0x01  # a value byte of the last entry
    bad_inner = bytearray(build_entry(0, build_message(b"k", b"v", magic=0)))
    bad_inner[-1] ^= 0x01
    wrapper_bad_inner = build_entry(0, build_message(None, codecs.compress(codecs.GZIP, bytes(bad_inner)), magic=0, attributes=codecs.GZIP))
    not_gzip = build_entry(0, build_message(None, b"this is not gzip", magic=1, timestamp=TS, attributes=codecs.GZIP))
    for version, data in [
        (0, bytes(bad_crc)),  # CRC32 mismatch
        (2, good + bytes(bad_crc)),  # a good entry followed by a bad one: nothing written
        (1, wrapper_bad_inner),  # an inner message fails its CRC
        (2, not_gzip),  # the wrapper's value does not decompress
        (0, good + good[:20]),  # ends with a partial entry
    ]:
        assert (await client.produce(topic, data, version=version))["error_code"] == 2, (version, data[:40])
    # Produce v3+ carries v2 only; an empty set is invalid.
    assert (await client.produce(topic, good, version=3))["error_code"] == 87
    assert (await client.produce(topic, b"", version=1))["error_code"] == 87
    # Larger than message.max.bytes.
    big = legacy_set([(None, b"x" * (MAX_MESSAGE_BYTES + 10), TS)], magic=1, codec="none")
    assert (await client.produce(topic, big, version=2))["error_code"] == 10
    got, magics, raw = await client.read_all(topic, version=0)
    assert got == expected(sample(3), 0, magic_seen=0)
    assert raw == good  # the producer's v0 entries came back byte for byte
    await client.aclose()


async def test_legacy_into_legacy_topic_errors(fmt_broker):
    client = await Raw.connect(fmt_broker)
    ok = legacy_set(sample(2), magic=1, codec="lz4")
    assert (await client.produce("err-v1", ok, version=2))["error_code"] == 0
    bad = bytearray(ok)
    bad[20] ^= 0xFF
    assert (await client.produce("err-v1", bytes(bad), version=2))["error_code"] == 2
    got, magics, _ = await client.read_all("err-v1", version=3)
    assert got == expected(sample(2), 0, magic_seen=1) and set(magics) == {1}
    await client.aclose()


# ---------------------------------------------------------------- kclient Producer with api.version


@pytest.fixture
def produce_requests(monkeypatch):
    """Record ``(version, records)`` of every Produce request kclient sends."""
    seen: list[tuple[int, bytes]] = []
    original = BrokerConnection.start_request

    async def spy(self, api, body, *, version=None, **kw):
        if api is PRODUCE:
            for t in body.topic_data:
                for p in t.partition_data:
                    seen.append((version, bytes(p.records)))
        return await original(self, api, body, version=version, **kw)

    monkeypatch.setattr(BrokerConnection, "start_request", spy)
    return seen


def read_with_simple_consumer(broker, topic: str) -> list[tuple]:
    out = []
    with SimpleConsumer("127.0.0.1", broker.port, 10000, 1 << 20, "test-formats") as consumer:
        offset = 0
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            batch = list(consumer.fetch(FetchRequest(topic, 0, offset, 4 << 20)))
            if not batch:
                return out
            out += [(m.offset, m.message.timestamp, m.message.key, m.message.payload) for m in batch]
            offset = batch[-1].next_offset
    raise AssertionError("reading took too long")


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize(("api_version", "produce_version", "magic"), [("0.10", 2, 1), ("0.9", 1, 0), ("0.8.2", 0, 0)])
def test_producer_api_version_cap_writes_legacy_sets(fmt_broker, topic, produce_requests, api_version, produce_version, magic, codec):
    n = 25
    values = [f"value-{i}".encode() * (1 + i % 4) for i in range(n)]
    values[3] = None
    config = {
        "metadata.broker.list": fmt_broker.bootstrap,
        "api.version": api_version,
        "compression.codec": codec,
        "retry.backoff.ms": 20,
    }
    stamp = TS + 5
    with Producer(config) as producer:
        producer.send(ProducerData(topic, key=b"key", messages=values, timestamp_ms=stamp))
        producer.send(ProducerData(topic, key=None, messages=[b"unkeyed"], timestamp_ms=stamp))
    # On the wire: the capped Produce version, one message set per send of
    # that magic; compressed as a whole set (one wrapper), never per message.
    assert [v for v, _ in produce_requests] == [produce_version, produce_version]
    for (_, records), count in zip(produce_requests, (n, 1)):
        infos = list(scan_batches(records))
        assert {i.magic for i in infos} == {magic}
        if codec == "none":
            assert len(infos) == count
        else:
            assert len(infos) == 1 and read_message(records).codec == codecs.BY_NAME[codec]
    # The consumer reads every record intact (the v2 topic up-converted them).
    ts = stamp if magic == 1 else -1
    want = [(i, ts, b"key", v) for i, v in enumerate(values)] + [(n, ts, None, b"unkeyed")]
    assert read_with_simple_consumer(fmt_broker, topic) == want


@pytest.mark.parametrize(("api_version", "magic"), [("0.10.2", 1), ("0.9", 0)])
def test_producer_legacy_sets_stored_as_sent_on_matching_topic(fmt_broker, produce_requests, api_version, magic):
    topic = f"cap-v{magic}"
    config = {"metadata.broker.list": fmt_broker.bootstrap, "api.version": api_version}
    with Producer(config) as producer:
        producer.send(ProducerData(topic, key=b"k", messages=[b"a", b"b", None], timestamp_ms=TS))
    (_, sent), = produce_requests
    with SimpleConsumer("127.0.0.1", fmt_broker.port, 10000, 1 << 20, "test-formats") as consumer:
        stored = bytes(consumer.fetch(FetchRequest(topic, 0, 0, 1 << 20)).buffer)
    # Kept as it arrived: the same entries, only the offset fields assigned.
    assert [i.magic for i in scan_batches(stored)] == [magic] * 3
    strip = lambda data: [data[i.position + 8 : i.position + i.size] for i in scan_batches(data)]  # noqa: E731
    assert strip(stored) == strip(sent)
    assert [(m.offset, m.message.payload) for m in read_with_simple_consumer_messages(fmt_broker, topic)] == [(0, b"a"), (1, b"b"), (2, None)]


def read_with_simple_consumer_messages(broker, topic: str):
    with SimpleConsumer("127.0.0.1", broker.port, 10000, 1 << 20, "test-formats") as consumer:
        return list(consumer.fetch(FetchRequest(topic, 0, 0, 1 << 20)))


def test_producer_zstd_below_produce_v7_fails_clearly(fmt_broker, topic):
    from kclient.errors import FailedToSendMessageError

    config = {
        "metadata.broker.list": fmt_broker.bootstrap,
        "api.version": "2.0",
        "compression.codec": "zstd",
        "message.send.max.retries": 0,
    }
    with Producer(config) as producer:
        with pytest.raises(FailedToSendMessageError, match="zstd"):
            producer.send(ProducerData(topic, key=b"k", messages=[b"v"]))


# ---------------------------------------------------------------- convert.py, pure (no broker)

_blob = st.one_of(st.none(), st.binary(max_size=40))
_rows = st.lists(st.tuples(_blob, _blob, st.integers(0, 2**40)), min_size=1, max_size=12)


@pytest.mark.unit
@settings(max_examples=examples(60), deadline=None)
@given(rows=_rows, codec=st.sampled_from(LEGACY_CODECS), base=st.integers(0, 2**40), to_magic=st.sampled_from([0, 1]), skip=st.integers(0, 11))
def test_down_convert_keeps_offsets_and_records(rows, codec, base, to_magic, skip):
    cid = codecs.BY_NAME[codec]
    batch = build_batch(rows, base_offset=base, codec=cid)
    fetch_offset = base + min(skip, len(rows) - 1)
    out = down_convert(batch, to_magic, fetch_offset=fetch_offset)
    assert {i.magic for i in scan_batches(out)} == {to_magic}
    got = [(r.offset, r.key, r.value, r.timestamp) for r in iter_record_set(out) if r.offset >= fetch_offset]
    want = [(base + i, k, v, ts if to_magic else -1) for i, (k, v, ts) in enumerate(rows)][fetch_offset - base :]
    assert got == want


@pytest.mark.unit
@settings(max_examples=examples(60), deadline=None)
@given(rows=_rows, codec=st.sampled_from(LEGACY_CODECS), magic=st.sampled_from([0, 1]), stored=st.sampled_from([0, 1, 2]), lat=st.sampled_from([None, 1_700_000_000_123]))
def test_prepare_append_converts_legacy_sets(rows, codec, magic, stored, lat):
    data = build_message_set(rows, magic=magic, codec=codecs.BY_NAME[codec])
    prepared = prepare_append(data, produce_version=2, stored_magic=stored, log_append_time_ms=lat)
    assert prepared.record_count == len(rows)
    assert {i.magic for i in scan_batches(prepared.records)} == {stored}
    # A v0 log has no timestamps; LogAppendTime stamps every v1/v2 record
    # (v0 input included); otherwise v0 input has none to keep.
    want_ts = [-1 if stored == 0 else lat if lat is not None else -1 if magic == 0 else ts for _, _, ts in rows]
    got = list(iter_record_set(prepared.records))
    # Offsets are the log's business; the stored set numbers its records 0..n-1
    # per batch, so compare content and order.
    assert [(r.key, r.value, r.timestamp) for r in got] == [(k, v, t) for (k, v, _), t in zip(rows, want_ts)]
    assert prepared.log_append_time_ms == (lat if lat is not None and stored > 0 else -1)
    # What the log is handed is what a header read of the stored bytes finds.
    assert list(prepared.batches) == analyze_records(prepared.records)


@pytest.mark.unit
@settings(max_examples=examples(60), deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    codec=st.sampled_from(["none", "gzip", "lz4"]),
    topic_codec=st.sampled_from([None, "none", "gzip", "zstd"]),
    lat=st.sampled_from([None, 1_700_000_000_123]),
    producer_id=st.sampled_from([-1, 7]),
)
def test_prepare_append_hands_down_validated_batches(sizes, codec, topic_codec, lat, producer_id):
    """Kafka's LogValidator result, handed down once: per batch its
    position, offset delta, max timestamp, producer fields, transactional
    bit, record count and codec, as the stored bytes hold them."""
    batches, seq = [], 0
    for n in sizes:
        batches.append(
            build_batch(sample(n), codec=codecs.BY_NAME[codec], producer_id=producer_id, producer_epoch=2 if producer_id >= 0 else -1,
                        base_sequence=seq if producer_id >= 0 else -1, is_transactional=producer_id >= 0)
        )  # fmt: skip
        seq += n
    data = b"".join(batches)
    target = None if topic_codec is None else codecs.BY_NAME[topic_codec]
    prepared = prepare_append(data, produce_version=9, log_append_time_ms=lat, codec=target)
    assert list(prepared.batches) == analyze_records(prepared.records)
    assert [b.record_count for b in prepared.batches] == sizes
    assert [b.last_offset_delta for b in prepared.batches] == [n - 1 for n in sizes]
    assert [b.base_sequence for b in prepared.batches] == ([sum(sizes[:i]) for i in range(len(sizes))] if producer_id >= 0 else [-1] * len(sizes))
    assert {(b.producer_id, b.is_transactional) for b in prepared.batches} == {(producer_id, producer_id >= 0)}
    assert {b.codec for b in prepared.batches} == {codecs.BY_NAME[codec] if target is None else target}
    if lat is not None:
        assert {b.max_timestamp for b in prepared.batches} == {lat}
    positions = [i.position for i in scan_batches(prepared.records)]
    assert [b.position for b in prepared.batches] == positions


@pytest.mark.unit
def test_log_append_uses_the_validated_batches(tmp_path, monkeypatch):
    """With ``batches`` the log and its segment read no header of the
    record set: offsets, indexes and producer state come from them."""
    from kclient.storage import Log, LogConfig
    from kclient.storage import log as log_mod
    from kclient.storage import segment as segment_mod

    data = b"".join(
        build_batch(sample(3, tag=f"b{i}"), producer_id=5, producer_epoch=0, base_sequence=3 * i) for i in range(3)
    )
    prepared = prepare_append(data, produce_version=9)
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    try:
        log.append(build_batch(sample(2)), leader_epoch=4)

        def no_header_reads(*args, **kwargs):
            raise AssertionError("a header was read again")

        monkeypatch.setattr(log_mod, "analyze_records", no_header_reads)
        monkeypatch.setattr(segment_mod, "scan_batches", no_header_reads)
        result = log.append(prepared.records, leader_epoch=4, validate_producer_state=True, batches=prepared.batches)
        assert (result.base_offset, result.last_offset) == (2, 10)
        monkeypatch.undo()
        assert log.producer_state.last_sequence(5) == 8
        stored = list(scan_batches(log.read(2, 1 << 20).records))
        assert [(i.base_offset, i.last_offset) for i in stored] == [(2, 4), (5, 7), (8, 10)]
        assert [read_header(log.read(o, 1 << 20).records).partition_leader_epoch for o in (2, 5, 8)] == [4, 4, 4]
        assert log.active_segment.find_batch(6).base_offset == 5  # indexed from the batches handed down
    finally:
        log.close()


@pytest.mark.unit
def test_prepare_append_error_codes():
    good = build_batch(sample(2))
    with pytest.raises(AppendRejected) as info:
        prepare_append(legacy_set(sample(2), magic=1, codec="none"), produce_version=3)
    assert info.value.code == 87
    with pytest.raises(AppendRejected) as info:
        prepare_append(build_batch(sample(2), codec=codecs.ZSTD), produce_version=6)
    assert info.value.code == 76
    with pytest.raises(AppendRejected) as info:
        prepare_append(good, produce_version=8, max_message_bytes=len(good) - 1)
    assert info.value.code == 10
    with pytest.raises(AppendRejected) as info:
        prepare_append(build_batch(sample(1), is_control=True), produce_version=8)
    assert info.value.code == 87
    # Already in the stored format and CreateTime: the very same bytes.
    assert prepare_append(good, produce_version=8).records is good
