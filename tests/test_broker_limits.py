"""Bad input and limits of the bundled broker (issue 4, "Bad input and
limits"), against real broker processes (kclient.testing.BrokerProcess):

- thousands of malformed frames (random bytes, random sizes including
  negative and huge ones, truncated headers and bodies, valid headers with
  garbage bodies, unknown API keys and versions, valid requests with bytes
  flipped) over several connections, from a seeded generator and from
  hypothesis; afterwards every record written before reads back byte for
  byte, the broker logged no unexpected error, and a fresh client works;
- a frame whose 4-byte size is over ``socket.request.max.bytes`` (or
  negative) closes the connection from the size alone: only the size is
  ever sent;
- 500 idle connections: service goes on and the broker's resident memory
  stays bounded; ``max.connections`` closes the connections beyond it;
- a client that never reads its Fetch responses blocks only itself.

Every wait has a deadline; no assertion is on elapsed time. Memory bounds
are generous (VmRSS of the broker process, /proc, Linux only).
"""

from __future__ import annotations

import random
import socket
import struct
import uuid
from pathlib import Path

import pytest
from helpers import raw
from helpers.examples import examples
from helpers.raw import SocketClient, produce_body
from helpers.wait import wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.broker.handlers import SUPPORTED_VERSIONS
from kclient.protocol.connection import ClientConnection
from kclient.protocol.messages import (
    API_VERSIONS,
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    OFFSET_FETCH,
    PRODUCE,
)
from kclient.protocol.records import build_batch
from kclient.testing import BrokerProcess

pytestmark = pytest.mark.timeout(240)

TIMEOUT = 15.0  # seconds any single exchange may take before the test fails
MAX_REQUEST = 1_000_000  # socket.request.max.bytes of the brokers here
_PROC = Path("/proc")


# ---------------------------------------------------------------- helpers


class Client(SocketClient):
    """A blocking loopback connection speaking raw Kafka frames (TCP_NODELAY)."""

    def __init__(self, broker: BrokerProcess, timeout: float = TIMEOUT) -> None:
        super().__init__(broker.host, broker.port, client_id="limits", timeout=timeout, nodelay=True)


def produce(client: Client, topic: str, partition: int, records: bytes, version: int = 8) -> dict:
    """Produce ``records`` (acks=1); returns the partition response."""
    body = client.request(PRODUCE, version, produce_body(topic, partition, records))
    return body["responses"][0]["partition_responses"][0]


def fetch_body(topic: str, partition: int, offset: int, *, max_bytes: int = 50_000_000, max_wait_ms: int = 0) -> dict:
    """A Fetch request body (any version 0-11) for one partition."""
    return raw.fetch_body(topic, [(partition, offset)], max_wait_ms=max_wait_ms, max_bytes=max_bytes, partition_max_bytes=max_bytes)


def fetch(client: Client, topic: str, partition: int, offset: int, version: int = 11, **kw) -> dict:
    """Fetch one partition; returns its partition response."""
    body = client.request(FETCH, version, fetch_body(topic, partition, offset, **kw))
    return body["responses"][0]["partitions"][0]


def read_partition(client: Client, topic: str, partition: int, end: int) -> bytes:
    """Every stored byte of a partition, by Fetch v11 from offset 0."""
    out = b""
    offset = 0
    while offset < end:
        p = fetch(client, topic, partition, offset, max_bytes=1 << 20)
        assert p["error_code"] == 0, p
        data = bytes(p["records"])
        assert data, f"no progress at offset {offset}"
        out += data
        # Whole batches only here (max_bytes is larger than the partition).
        offset = p["high_watermark"]
    return out


def rss_kib(pid: int) -> int:
    """Resident set size of process ``pid`` in KiB (VmRSS)."""
    for line in (_PROC / str(pid) / "status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS line")


def ping(broker: BrokerProcess) -> None:
    """A fresh connection gets an ApiVersions answer."""
    client = Client(broker)
    try:
        body = client.request(API_VERSIONS, 3, {"client_software_name": "ping", "client_software_version": "1"})
        assert body["error_code"] == 0
    finally:
        client.close()


def unexpected_errors(broker: BrokerProcess) -> list[str]:
    """Lines of the broker log that betray an unhandled exception."""
    return [line for line in broker.output().splitlines() if "Traceback" in line or " ERROR " in line]


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    """One broker for the fuzz tests, with small limits."""
    with BrokerProcess(
        log_dir=tmp_path_factory.mktemp("fuzz") / "logs",
        properties={
            "num.partitions": 2,
            "socket.request.max.bytes": MAX_REQUEST,
            "message.max.bytes": 100_000,
            # Every rejection logged: the tests below look for their own line.
            "connection.rejection.log.interval.ms": 0,
        },
    ) as proc:
        yield proc


# ---------------------------------------------------------------- malformed frames


SCRATCH = "fuzz-scratch"  # the topic mutated valid requests write to


def valid_requests() -> list[bytes]:
    """One well-formed frame per supported API, the raw material that the
    mutations below damage."""
    conn = ClientConnection(client_id="fuzz")
    batch = build_batch([(b"k", b"v" * 20, 1_700_000_000_000)])
    bodies = [
        (API_VERSIONS, 3, {"client_software_name": "fuzz", "client_software_version": "1"}),
        (API_VERSIONS, 0, {}),
        (METADATA, 8, {"topics": [{"name": SCRATCH}], "allow_auto_topic_creation": True}),
        (METADATA, 0, {"topics": [{"name": SCRATCH}]}),
        (
            PRODUCE,
            8,
            {"transactional_id": None, "acks": 1, "timeout_ms": 100, "topic_data": [{"name": SCRATCH, "partition_data": [{"index": 0, "records": batch}]}]},
        ),
        (
            PRODUCE,
            3,
            {"transactional_id": None, "acks": 0, "timeout_ms": 100, "topic_data": [{"name": SCRATCH, "partition_data": [{"index": 1, "records": batch}]}]},
        ),
        (FETCH, 11, fetch_body(SCRATCH, 0, 0, max_wait_ms=20)),
        (FETCH, 4, fetch_body(SCRATCH, 1, 0, max_wait_ms=20)),
        (FETCH, 2, fetch_body(SCRATCH, 0, 0, max_wait_ms=20)),
        (
            LIST_OFFSETS,
            5,
            {"replica_id": -1, "isolation_level": 0, "topics": [{"name": SCRATCH, "partitions": [{"partition_index": 0, "timestamp": -2}]}]},
        ),
        (
            LIST_OFFSETS,
            0,
            {"replica_id": -1, "topics": [{"name": SCRATCH, "partitions": [{"partition_index": 0, "timestamp": -1, "max_num_offsets": 5}]}]},
        ),
        (FIND_COORDINATOR, 2, {"key": "fuzz-group", "key_type": 0}),
        (OFFSET_FETCH, 5, {"group_id": "fuzz-group", "topics": [{"name": SCRATCH, "partition_indexes": [0, 1]}]}),
        (INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 1000}),
    ]
    return [conn.send(api, version, body)[1] for api, version, body in bodies]


VALID = valid_requests()
_UNKNOWN_KEYS = [k for k in (-1, 4, 5, 6, 7, 8, 11, 12, 19, 20, 32, 50, 999, 32767, -32768) if k not in SUPPORTED_VERSIONS]


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _header(api_key: int, version: int, correlation_id: int = 7, client_id: bytes | None = b"fuzz") -> bytes:
    head = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        return head + struct.pack(">h", -1)
    return head + struct.pack(">h", len(client_id)) + client_id


def malformed_frame(rng: random.Random) -> bytes:
    """One damaged frame (or raw garbage), drawn from ``rng``."""
    kind = rng.randrange(11)
    if kind == 0:  # raw random bytes, no framing at all
        return rng.randbytes(rng.randrange(1, 300))
    if kind == 1:  # random size field, from negative to huge
        size = rng.choice([-1, -2, -(2**31), 2**31 - 1, MAX_REQUEST + 1, 2**30, rng.randrange(-(2**31), 2**31)])
        return struct.pack(">i", size) + rng.randbytes(rng.randrange(0, 64))
    if kind == 2:  # a frame too short for a request header
        return _frame(rng.randbytes(rng.randrange(0, 8)))
    if kind == 3:  # a valid header of a supported API, garbage body
        key = rng.choice(sorted(SUPPORTED_VERSIONS))
        lo, hi = SUPPORTED_VERSIONS[key]
        return _frame(_header(key, rng.randint(lo, hi)) + rng.randbytes(rng.randrange(0, 200)))
    if kind == 4:  # unknown API key
        return _frame(_header(rng.choice(_UNKNOWN_KEYS), rng.randrange(-5, 20)) + rng.randbytes(rng.randrange(0, 40)))
    if kind == 5:  # supported key, unsupported version
        key = rng.choice(sorted(SUPPORTED_VERSIONS))
        lo, hi = SUPPORTED_VERSIONS[key]
        version = rng.choice([hi + 1, hi + 5, lo - 1, -1, 32767])
        return _frame(_header(key, version) + rng.randbytes(rng.randrange(0, 60)))
    if kind == 6:  # a valid request with its body cut short (size adjusted)
        data = rng.choice(VALID)
        cut = rng.randrange(4, len(data))
        return _frame(data[4:cut])
    if kind == 7:  # a valid request whose size promises more than is sent
        data = rng.choice(VALID)
        return data[: rng.randrange(1, len(data))]
    if kind == 8:  # a valid request with bytes flipped after the size
        data = bytearray(rng.choice(VALID))
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(4, len(data))
            data[i] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 9:  # a header with a bad client id length
        key = rng.choice(sorted(SUPPORTED_VERSIONS))
        head = struct.pack(">hhih", key, SUPPORTED_VERSIONS[key][1], 3, rng.choice([-2, -300, 200, 32767]))
        return _frame(head + rng.randbytes(rng.randrange(0, 20)))
    return rng.choice(VALID)  # a valid request now and then: real work in between


def precious_data(broker: BrokerProcess, topic: str) -> dict[int, tuple[int, bytes]]:
    """Write batches to both partitions of ``topic``; returns
    ``{partition: (log_end_offset, stored bytes)}`` as read back."""
    client = Client(broker)
    try:
        expected = {}
        for partition in (0, 1):
            for i in range(10):
                batch = build_batch([(f"k{i}".encode(), f"precious-{partition}-{i}-{j}".encode() * 5, 1_700_000_000_000 + i) for j in range(3)])
                assert produce(client, topic, partition, batch)["error_code"] == 0
            end = fetch(client, topic, partition, 0)["high_watermark"]
            expected[partition] = (end, read_partition(client, topic, partition, end))
        return expected
    finally:
        client.close()


def assert_intact(broker: BrokerProcess, topic: str, expected: dict[int, tuple[int, bytes]]) -> None:
    """Every partition holds exactly the bytes of `precious_data`
    and takes the next write at its old log end offset."""
    client = Client(broker)
    try:
        for partition, (end, data) in expected.items():
            p = fetch(client, topic, partition, 0)
            assert p["high_watermark"] == end
            assert read_partition(client, topic, partition, end) == data
        # ... and still takes writes at the right offset.
        r = produce(client, topic, 0, build_batch([(None, b"after", 1)]))
        assert (r["error_code"], r["base_offset"]) == (0, expected[0][0])
    finally:
        client.close()


def blast(broker: BrokerProcess, frames: list[bytes], *, connections: int, rng: random.Random) -> int:
    """Send ``frames`` spread over ``connections`` parallel connections,
    never reading; a connection the broker closed, or that has sent one
    to three frames (the broker drops a connection at its first malformed
    frame, so most frames need a fresh one to be read at all), is
    replaced. Returns how many connections were used."""
    socks: list[socket.socket | None] = [None] * connections
    used = 0
    sent_on = [0] * connections

    def fresh() -> socket.socket:
        """A new connection (counted)."""
        nonlocal used
        used += 1
        s = socket.create_connection((broker.host, broker.port), timeout=TIMEOUT)
        s.settimeout(2.0)
        return s

    try:
        for frame in frames:
            i = rng.randrange(connections)
            if socks[i] is None or sent_on[i] >= rng.randint(1, 3):
                if socks[i] is not None:
                    socks[i].close()
                socks[i] = fresh()
                sent_on[i] = 0
            try:
                socks[i].sendall(frame)
                sent_on[i] += 1
            except (TimeoutError, OSError):  # closed by the broker, or not reading: next one
                socks[i].close()
                socks[i] = None
    finally:
        for s in socks:
            if s is not None:
                s.close()
    return used


def test_thousands_of_malformed_frames_lose_nothing(fuzz_broker):
    topic = f"precious-{uuid.uuid4().hex[:8]}"
    expected = precious_data(fuzz_broker, topic)
    before = len(unexpected_errors(fuzz_broker))
    rng = random.Random(20240419)
    frames = [malformed_frame(rng) for _ in range(3000)]
    used = blast(fuzz_broker, frames, connections=6, rng=rng)
    assert used > 1000
    assert fuzz_broker.running
    ping(fuzz_broker)
    assert_intact(fuzz_broker, topic, expected)
    log = fuzz_broker.output()
    assert "closing connection from" in log  # malformed input was seen and refused
    assert unexpected_errors(fuzz_broker)[before:] == []


@st.composite
def frame_batches(draw) -> list[bytes]:
    """A short list of frames: hypothesis-built headers and bodies."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            out.append(draw(st.binary(min_size=1, max_size=64)))
        elif choice == 1:
            size = draw(st.one_of(st.integers(-(2**31), -1), st.integers(MAX_REQUEST + 1, 2**31 - 1), st.integers(0, 64)))
            out.append(struct.pack(">i", size) + draw(st.binary(max_size=32)))
        elif choice == 2:
            key = draw(st.integers(-(2**15), 2**15 - 1))
            version = draw(st.integers(-(2**15), 2**15 - 1))
            client_id = draw(st.one_of(st.none(), st.binary(max_size=12)))
            out.append(_frame(_header(key, version, draw(st.integers(-(2**31), 2**31 - 1)), client_id) + draw(st.binary(max_size=80))))
        else:
            data = draw(st.sampled_from(VALID))
            cut = draw(st.integers(4, len(data)))
            out.append(_frame(data[4:cut] + draw(st.binary(max_size=8))))
    return out


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(frames=frame_batches())
def test_hypothesis_frames_never_break_the_broker(fuzz_broker, frames):
    s = socket.create_connection((fuzz_broker.host, fuzz_broker.port), timeout=TIMEOUT)
    try:
        s.settimeout(2.0)
        for frame in frames:
            try:
                s.sendall(frame)
            except OSError:
                break  # the broker closed it: fine
    finally:
        s.close()
    assert fuzz_broker.running
    ping(fuzz_broker)


def test_hypothesis_run_left_no_unexpected_errors(fuzz_broker):
    """Runs after the hypothesis test in this module: nothing it sent made
    the broker log an unhandled exception."""
    assert fuzz_broker.running
    assert unexpected_errors(fuzz_broker) == []


# ---------------------------------------------------------------- oversize frames


@pytest.mark.parametrize("size", [2**31 - 1, MAX_REQUEST + 1, -1, -(2**31)])
def test_oversize_or_negative_size_closes_from_the_size_alone(fuzz_broker, size):
    """Only the 4-byte size is sent: the broker cannot have buffered any of
    the frame, yet it closes the connection (and logs a warning)."""
    client = Client(fuzz_broker)
    client.sock.sendall(struct.pack(">i", size))
    assert client.closed_by_broker()
    client.close()
    assert f"request frame size {size} outside 0..{MAX_REQUEST}" in fuzz_broker.output()
    ping(fuzz_broker)


def test_frame_at_the_limit_is_read(fuzz_broker):
    """A frame of exactly socket.request.max.bytes is accepted and parsed
    (here: a Metadata request padded with an unknown trailing blob, which
    then fails to decode and closes the connection, as any malformed body)."""
    client = Client(fuzz_broker)
    _, data = client.conn.send(METADATA, 1, {"topics": []})
    body = data[4:] + b"\x00" * (MAX_REQUEST - (len(data) - 4))
    client.sock.sendall(_frame(body))
    assert client.closed_by_broker()
    client.close()
    assert "malformed Metadata v1 request" in fuzz_broker.output()


def test_half_sent_frame_then_disconnect(fuzz_broker):
    client = Client(fuzz_broker)
    client.sock.sendall(struct.pack(">i", 500_000) + b"\x00\x03\x00\x01" + b"x" * 1000)
    client.close()
    ping(fuzz_broker)


# ---------------------------------------------------------------- connections and memory


def test_many_idle_connections_keep_memory_bounded(fuzz_broker):
    pid = fuzz_broker.pid
    assert pid is not None
    ping(fuzz_broker)
    before = rss_kib(pid)
    idle = []
    try:
        for _ in range(500):
            c = Client(fuzz_broker)
            idle.append(c)
        # Every one of them is being served (one request each), then idles.
        for c in idle:
            assert c.request(API_VERSIONS, 0, {})["error_code"] == 0
        during = rss_kib(pid)
        # Service goes on for a newcomer.
        topic = f"idle-{uuid.uuid4().hex[:8]}"
        fresh = Client(fuzz_broker)
        batch = build_batch([(None, b"still-serving", 1)])
        assert produce(fresh, topic, 0, batch)["error_code"] == 0
        stored = bytes(fetch(fresh, topic, 0, 0)["records"])
        # As sent, but for the partition leader epoch the leader stamps (0).
        assert stored[:12] + stored[16:] == batch[:12] + batch[16:] and stored[12:16] == bytes(4)
        fresh.close()
    finally:
        for c in idle:
            c.close()
    growth_mib = (during - before) / 1024
    assert growth_mib < 200, f"broker RSS grew by {growth_mib:.0f} MiB for 500 idle connections"
    ping(fuzz_broker)


def test_max_connections_closes_the_excess(tmp_path):
    with BrokerProcess(log_dir=tmp_path / "logs", properties={"max.connections": 5}) as proc:
        held = [Client(proc) for _ in range(5)]
        try:
            for c in held:  # all five are being served
                assert c.request(API_VERSIONS, 0, {})["error_code"] == 0
            extra = Client(proc)
            assert extra.closed_by_broker()
            extra.close()
            assert "max.connections (5) reached" in proc.output()
            held.pop().close()
            # A slot is free again once the broker has seen the close.

            def served() -> Client | None:
                c = Client(proc)
                try:
                    assert c.request(API_VERSIONS, 0, {})["error_code"] == 0
                    return c
                except (ConnectionError, OSError):
                    c.close()
                    return None

            held.append(wait_for(served, "a slot freed", timeout=TIMEOUT))
        finally:
            for c in held:
                c.close()


@pytest.mark.parametrize("version", [11, 3])  # zero-copy path, down-converted path
def test_slow_reader_blocks_only_itself(tmp_path, version):
    with BrokerProcess(log_dir=tmp_path / "logs", properties={"num.partitions": 1}) as proc:
        topic = "slow"
        writer = Client(proc)
        big = build_batch([(None, bytes([65 + i % 26]) * 100_000, 1_700_000_000_000 + i) for i in range(5)])  # ~500 KB
        for _ in range(8):
            assert produce(writer, topic, 0, big)["error_code"] == 0
        pid = proc.pid
        assert pid is not None
        before = rss_kib(pid)
        slow = socket.create_connection((proc.host, proc.port), timeout=TIMEOUT)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        conn = ClientConnection(client_id="slow")
        wire = b"".join(conn.send(FETCH, version, fetch_body(topic, 0, 0, max_bytes=8 << 20))[1] for _ in range(200))
        slow.sendall(wire)  # 200 requests for ~4 MB each, never read
        try:
            # Everyone else is served meanwhile, the writer included.
            for i in range(5):
                batch = build_batch([(None, f"meanwhile-{i}".encode(), 1)])
                r = produce(writer, topic, 0, batch)
                assert r["error_code"] == 0
                p = fetch(writer, topic, 0, r["base_offset"])
                stored = bytes(p["records"])[: len(batch)]
                # The log assigned the base offset and stamped the leader's
                # epoch (0); the rest, CRC included, is the batch as sent.
                assert stored[8:12] == batch[8:12] and stored[12:16] == b"\x00\x00\x00\x00"
                assert stored[16:] == batch[16:]
                ping(proc)
            during = rss_kib(pid)
        finally:
            slow.close()
            writer.close()
        growth_mib = (during - before) / 1024
        assert growth_mib < 200, f"broker RSS grew by {growth_mib:.0f} MiB for one slow reader"
        ping(proc)


def test_long_poll_of_a_vanished_client_ends(tmp_path):
    """A Fetch waiting up to an hour for data stops when its client
    disconnects (the broker logs it at DEBUG): the task is not held."""
    with BrokerProcess(log_dir=tmp_path / "logs", properties={"num.partitions": 1}, verbose=True) as proc:
        client = Client(proc)
        client.request(METADATA, 8, {"topics": [{"name": "quiet"}], "allow_auto_topic_creation": True})
        body = fetch_body("quiet", 0, 0, max_wait_ms=3_600_000)
        body["min_bytes"] = 1
        _, data = client.conn.send(FETCH, 11, body)
        client.sock.sendall(data)
        wait_for(lambda: "Fetch v11 from" in proc.output(), "the broker to log the Fetch", timeout=TIMEOUT, interval=0.02)
        client.close()
        wait_for(lambda: "closed during a Fetch long poll" in proc.output(), "the long poll to end", timeout=TIMEOUT, interval=0.02)
        ping(proc)
