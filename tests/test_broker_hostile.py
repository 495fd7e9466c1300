"""The broker under hostile load (issue 13, "Broker memory, bounded
globally"), against a real broker process with small limits.

For `ATTACK_SECONDS`, all at once, each attack from its own loopback
address (127.0.0.x: ``max.connections.per.ip`` counts them apart):

- 127.0.0.2: 25 connections sending random bytes as fast as they can, and
  25 declaring a frame just under ``socket.request.max.bytes`` and filling
  it with random bytes as fast as they can; each reconnects when closed;
- 127.0.0.3: 50 connections declaring a frame just under
  ``socket.request.max.bytes``, then sending nothing or a trickle
  (slowloris); closed by ``socket.request.read.timeout.ms``, they reconnect;
- 127.0.0.4: 100 connections at once that send nothing, over a
  ``max.connections.per.ip`` of 60, reopened as they are refused or closed
  idle (``connections.max.idle.ms``);

while a good producer (sync, acks=1) and a SimpleConsumer on 127.0.0.1
run alongside. Then: every record the producer sent is read back by the
consumer; the broker's peak resident memory (VmHWM) stays under the
bound below; the log holds a bounded number of rejection lines; idle and
silent connections were closed by the broker.

No assertion is on elapsed time; every wait has a deadline. Linux only
(/proc, 127.0.0.x source addresses).
"""

from __future__ import annotations

import os
import random
import re
import socket
import struct
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from helpers.wait import wait_for

from kclient.client.consumer.simple import FetchRequest, SimpleConsumer
from kclient.client.producer.producer import Producer, ProducerData
from kclient.testing import BrokerProcess

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and 127.0.0.x sources: Linux only"),
]

MIB = 1 << 20
QUEUED_MAX_REQUEST_BYTES = 32 * MIB  # queued.max.request.bytes (Q)
SOCKET_REQUEST_MAX_BYTES = 16 * MIB  # socket.request.max.bytes (M)
MAX_CONNECTIONS_PER_IP = 60
IDLE_MS = 2000  # connections.max.idle.ms
READ_TIMEOUT_MS = 2000  # socket.request.read.timeout.ms
LOG_INTERVAL_MS = 2000  # connection.rejection.log.interval.ms
ATTACK_SECONDS = 8.0
#: Python's allocator, one trio task and socket per connection (at most
#: max.connections), the log, page tables: everything but request bytes.
SLACK_BYTES = 64 * MIB
#: The broker's request memory stays under Q + M (the oldest frame being
#: read may go over the budget by less than one frame); joining a frame's
#: received chunks into one buffer copies it once, one frame at a time
#: (the server is one thread): one more M.
RSS_BOUND_FORMULA = "baseline VmRSS + Q + 2*M + SLACK"
#: Kinds of rejection lines (RateLimitedLog kinds) the attacks can cause.
REJECTION_KINDS = 6


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} line")


def connect(broker: BrokerProcess, source: str, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection((broker.host, broker.port), timeout=timeout, source_address=(source, 0))


class Attack:
    """Threads running one attack until `stop` is set; counts what happened."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.connections = 0
        self.closed_by_broker = 0
        self.lock = threading.Lock()

    def spawn(self, target, *args) -> None:
        t = threading.Thread(target=self._guard, args=(target, *args), daemon=True)
        self.threads.append(t)
        t.start()

    def _guard(self, target, *args) -> None:
        while not self.stop.is_set():
            try:
                target(*args)
            except OSError:
                with self.lock:
                    self.closed_by_broker += 1
                self.stop.wait(0.01)

    def count(self) -> None:
        with self.lock:
            self.connections += 1

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)
            assert not t.is_alive(), "an attack thread did not stop"


NOISE = os.urandom(4 * MIB)


def noise(rng: random.Random, n: int) -> bytes:
    start = rng.randrange(0, len(NOISE) - n)
    return NOISE[start : start + n]


def random_bytes(broker, attack: Attack, seed: int) -> None:
    """Random bytes, fast, until the broker closes the connection."""
    rng = random.Random(seed)
    with connect(broker, "127.0.0.2") as s:
        attack.count()
        while not attack.stop.is_set():
            s.sendall(noise(rng, 64 * 1024))


def big_frame_fast(broker, attack: Attack, seed: int) -> None:
    """A frame just under socket.request.max.bytes, filled with random bytes
    (not a request: the broker closes it once read)."""
    rng = random.Random(seed)
    with connect(broker, "127.0.0.2") as s:
        attack.count()
        s.sendall(struct.pack(">i", SOCKET_REQUEST_MAX_BYTES - 1))
        while not attack.stop.is_set():
            s.sendall(noise(rng, 256 * 1024))


def big_frame_slow(broker, attack: Attack, seed: int) -> None:
    """A frame just under socket.request.max.bytes, then nothing (even seeds)
    or a byte every 200 ms (odd seeds), until the broker closes it."""
    with connect(broker, "127.0.0.3") as s:
        attack.count()
        s.sendall(struct.pack(">i", SOCKET_REQUEST_MAX_BYTES - 1))
        s.settimeout(0.2)
        while not attack.stop.is_set():
            try:
                if not s.recv(1):
                    raise ConnectionResetError("closed by the broker")
            except TimeoutError:
                if seed % 2:
                    s.sendall(b"x")


def hold_many(broker, attack: Attack, n: int) -> None:
    """``n`` connections at once from one address, sending nothing; each is
    reopened once the broker has closed it (refused or idle)."""
    socks: list[socket.socket] = []
    try:
        while not attack.stop.is_set():
            while len(socks) < n:
                try:
                    socks.append(connect(broker, "127.0.0.4"))
                    attack.count()
                except OSError:
                    break
            for s in list(socks):
                s.setblocking(False)
                try:
                    data = s.recv(1)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    socks.remove(s)
                    s.close()
                    with attack.lock:
                        attack.closed_by_broker += 1
            attack.stop.wait(0.1)
    finally:
        for s in socks:
            s.close()


def closed_by_broker_within(s: socket.socket, seconds: float) -> bool:
    s.settimeout(seconds)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


@pytest.fixture
def hostile_broker(tmp_path):
    with BrokerProcess(
        log_dir=tmp_path / "logs",
        properties={
            "queued.max.request.bytes": QUEUED_MAX_REQUEST_BYTES,
            "socket.request.max.bytes": SOCKET_REQUEST_MAX_BYTES,
            "max.connections": 400,
            "max.connections.per.ip": MAX_CONNECTIONS_PER_IP,
            "connections.max.idle.ms": IDLE_MS,
            "socket.request.read.timeout.ms": READ_TIMEOUT_MS,
            "connection.rejection.log.interval.ms": LOG_INTERVAL_MS,
        },
    ) as proc:
        yield proc


def test_hostile_load_bounded_memory_nothing_lost(hostile_broker):
    broker = hostile_broker
    pid = broker.pid
    assert pid is not None
    topic = f"hostile-{uuid.uuid4().hex[:8]}"
    sent: list[bytes] = []
    received: list[bytes] = []
    errors: list[BaseException] = []
    producing = threading.Event()
    producing.set()

    def produce() -> None:
        try:
            config = {
                "metadata.broker.list": broker.bootstrap,
                "request.required.acks": 1,
                "request.timeout.ms": 30000,
                "message.send.max.retries": 10,
                "retry.backoff.ms": 100,
            }
            with Producer(config) as producer:
                i = 0
                while producing.is_set():
                    values = [f"record-{i + k}".encode() for k in range(20)]
                    producer.send(ProducerData(topic, key=None, messages=values))
                    sent.extend(values)
                    i += 20
                    time.sleep(0.02)  # kept: a steady stream for as long as the attacks last, not a flood
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    # Warm up: the topic exists, the broker has served both clients once.
    with Producer({"metadata.broker.list": broker.bootstrap}) as p:
        p.send(ProducerData(topic, key=None, messages=[b"warm-up"]))
    sent.append(b"warm-up")
    with SimpleConsumer(broker.host, broker.port, 30000, 1 << 20, "hostile-warm-up") as warm_up:
        wait_for(lambda: [m.message.payload for m in warm_up.fetch(FetchRequest(topic, 0, 0, 1 << 20))] == [b"warm-up"], "the warm-up record read back")
    baseline = rss_kib(pid) * 1024

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    attack = Attack()
    for i in range(25):
        attack.spawn(random_bytes, broker, attack, i)
        attack.spawn(big_frame_fast, broker, attack, 100 + i)
    for i in range(50):
        attack.spawn(big_frame_slow, broker, attack, i)
    attack.spawn(hold_many, broker, attack, 100)

    # During the attacks: an idle connection and a silent size prefix are
    # closed by the broker.
    idle = connect(broker, "127.0.0.5")
    silent = connect(broker, "127.0.0.6")
    silent.sendall(struct.pack(">i", 1000))
    idle_closed = closed_by_broker_within(idle, 15)
    silent_closed = closed_by_broker_within(silent, 15)
    idle.close()
    silent.close()

    # The consumer reads while the attacks go on.
    with SimpleConsumer(broker.host, broker.port, 30000, 1 << 20, "hostile-reader") as consumer:
        offset = 0
        deadline = time.monotonic() + ATTACK_SECONDS
        while time.monotonic() < deadline:
            for m in consumer.fetch(FetchRequest(topic, 0, offset, 1 << 20)):
                received.append(m.message.payload)
                offset = m.next_offset
            time.sleep(0.05)  # kept: a paced reader for the attack's fixed duration (ATTACK_SECONDS)
        attack.join()
        producing.clear()
        producer.join(timeout=60)
        assert not producer.is_alive()
        # Read the rest.
        deadline = time.monotonic() + 30
        while len(received) < len(sent) and time.monotonic() < deadline:
            for m in consumer.fetch(FetchRequest(topic, 0, offset, 1 << 20)):
                received.append(m.message.payload)
                offset = m.next_offset

    assert errors == []
    peak = rss_kib(pid, "VmHWM") * 1024
    output = broker.output()
    assert broker.running

    # Nothing lost: every record sent (acks=1, each send returned) is read.
    assert len(sent) > 100
    missing = set(sent) - set(received)
    assert not missing, f"{len(missing)} of {len(sent)} records lost"

    # Memory: VmHWM is the process's peak resident size, ever.
    bound = baseline + QUEUED_MAX_REQUEST_BYTES + 2 * SOCKET_REQUEST_MAX_BYTES + SLACK_BYTES
    print(
        f"RSS baseline {baseline / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB, bound ({RSS_BOUND_FORMULA}) "
        f"{bound / MIB:.0f} MiB; attack connections {attack.connections}, closed by the broker "
        f"{attack.closed_by_broker}; records {len(sent)}"
    )
    assert peak < bound, f"broker peak RSS {peak / MIB:.0f} MiB over {bound / MIB:.0f} MiB ({RSS_BOUND_FORMULA})"

    # The attacks were served and refused, not ignored.
    assert idle_closed, "an idle connection was not closed (connections.max.idle.ms)"
    assert silent_closed, "a size prefix followed by nothing was not closed (socket.request.read.timeout.ms)"
    assert f"max.connections.per.ip ({MAX_CONNECTIONS_PER_IP}) reached for 127.0.0.4" in output
    assert "socket.request.read.timeout.ms" in output
    assert attack.connections > 200

    # Rejections are logged rate-limited: per kind, one line per interval
    # (plus the first one and a final count).
    lines = [ln for ln in output.splitlines() if re.search(r"closing connection from|closed mid-frame|malformed", ln)]
    elapsed = time.monotonic() - broker_started(broker)
    limit = REJECTION_KINDS * (elapsed / (LOG_INTERVAL_MS / 1000) + 2)
    assert len(lines) <= limit, f"{len(lines)} rejection lines in {elapsed:.0f} s (at most {limit:.0f})"
    assert any("since the last report" in ln for ln in lines)
    unexpected = [ln for ln in output.splitlines() if "Traceback" in ln or " ERROR " in ln]
    assert unexpected == [], output[output.find("Traceback") - 300 :][:3000]


def broker_started(broker: BrokerProcess) -> float:
    """When the broker process started, on time.monotonic()'s clock (from
    /proc/<pid>/stat, in clock ticks since boot)."""
    fields = (Path("/proc") / str(broker.pid) / "stat").read_text().rsplit(")", 1)[1].split()
    start_ticks = int(fields[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    started_since_boot = start_ticks / os.sysconf("SC_CLK_TCK")
    return time.monotonic() - (uptime - started_since_boot)
