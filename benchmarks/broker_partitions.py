"""The bundled broker's CPU per partition entry of a Produce or Fetch request
(issue 28).

    python benchmarks/broker_partitions.py [--partitions 1,64,512,2048] [--records 1] [--size 100]
                                           [--cpu-seconds 2] [--only produce|fetch|fetch-empty]
                                           [--profile DIR] [--rate HZ]

Starts one bundled broker (`kclient.testing.BrokerProcess`), creates a topic
of max(``--partitions``) partitions (CreateTopics), then for each N in
``--partitions`` sends raw requests over one loopback connection, one at a
time (each answered before the next is sent), the frames encoded before the
timed section:

- **produce**: Produce v8, acks=1, N partitions of the topic, each one v2
  batch of ``--records`` records of ``--size`` bytes (null keys, no
  producer id);
- **fetch**: Fetch v11 (no session, ``min_bytes`` 0), N partitions, each
  from an offset a few batches below its end (``--fetch-batches``), with
  Kafka's consumer defaults ``max.partition.fetch.bytes`` 1 MiB and
  ``fetch.max.bytes`` 50 MiB: each partition answers those batches;
- **fetch-empty**: the same at each partition's log end offset (nothing to
  read: what a caught-up consumer's fetch of many partitions costs).

Each kind repeats its request until the broker has used at least
``--cpu-seconds`` of CPU, in ``--rounds`` rounds. The broker's CPU is its process's user + system
time from ``/proc/<pid>/stat`` (all threads) before and after, so the load
of other processes on the machine matters little; the client's own time is
not in it. Printed per row: requests, broker CPU ms per request, and µs of
broker CPU per partition entry (CPU ÷ (requests × N)); the ``marginal``
column is (per-request CPU at N − at the smallest N) ÷ (N − smallest N),
the per-partition cost without the fixed per-request part; ``best`` is the
cheapest round's µs per partition entry (the least disturbed by other load).

``--compare DIR`` starts a second broker running the kclient tree at DIR
(``PYTHONPATH=DIR``; e.g. ``git archive <commit> kclient | tar -x -C DIR``
plus the built ``_speedups`` module) and measures both, alternating round by
round, so that both see the same load: a before / after of a change on a
busy machine.

``--profile DIR`` also runs ``py-spy record --pid`` on the broker during
each row (``--rate`` samples/s) and prints its top functions by self and
inclusive time (`hotspots.parse_raw`); the raw files stay in DIR.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(1, str(_HERE.parent))

from kclient.protocol.connection import ClientConnection  # noqa: E402
from kclient.protocol.messages import FETCH, PRODUCE  # noqa: E402
from kclient.protocol.records.v2 import build_batch  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")
_SIZE = struct.Struct(">i")


def proc_cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of process ``pid`` (all its threads),
    from ``/proc/<pid>/stat`` (fields 14 and 15, in clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) / _TICK, int(fields[12]) / _TICK


class RawClient:
    """One blocking loopback connection: frames are sent as they are and
    each answer is read whole (its size prefix) without decoding."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(client_id="broker-partitions")

    def frame(self, api: Any, version: int, body: dict) -> bytes:
        """The encoded request (the connection's in-flight list is not used)."""
        _, data = self.conn.send(api, version, body, expect_response=False)
        return bytes(data)

    def roundtrip(self, frame: bytes) -> bytes:
        """Send ``frame`` and return the whole answer (size prefix dropped)."""
        self.sock.sendall(frame)
        head = self._exactly(4)
        return self._exactly(_SIZE.unpack(head)[0])

    def decoded(self, api: Any, version: int, body: dict) -> Any:
        """One request answered and decoded (for checks, untimed)."""
        c = ClientConnection(client_id="broker-partitions")
        _, data = c.send(api, version, body)
        self.sock.sendall(data)
        while True:
            response = c.next_response()
            if response is not None:
                return response.body
            c.receive_data(self.sock.recv(1 << 20))

    def _exactly(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise ConnectionError("broker closed the connection")
            got += k
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def produce_body(topic: str, n: int, batch: bytes) -> dict:
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch} for p in range(n)]}],
    }


def fetch_body(topic: str, offsets: list[int]) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 52_428_800,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": off, "log_start_offset": -1, "partition_max_bytes": 1_048_576}
                    for p, off in enumerate(offsets)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kclient import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": bootstrap, "request.timeout.ms": 600000}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)], timeout_ms=600000)
        deadline = time.monotonic() + 300
        while True:
            try:
                described = admin.describe_topics([topic]).get(topic)
            except Exception:
                described = None
            if described is not None and len(described.partitions) == partitions and all(p.leader is not None and p.leader >= 0 for p in described.partitions):
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"topic {topic}: not every partition has a leader after 300 s")
            time.sleep(0.2)


def end_offsets(client: RawClient, topic: str, n: int) -> list[int]:
    from kclient.protocol.messages import LIST_OFFSETS

    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1, "max_num_offsets": 1} for p in range(n)]}],
    }
    resp = client.decoded(LIST_OFFSETS, 5, body)
    got = {p.partition_index: p.offset for p in resp.topics[0].partitions}
    return [got[p] for p in range(n)]


def timed(client: RawClient, pid: int, frame: bytes, cpu_seconds: float) -> tuple[int, float, float, float]:
    """Send ``frame`` again and again until the broker used ``cpu_seconds``.

    Returns:
        ``(requests, broker CPU seconds, of which system, wall seconds)``.
    """
    client.roundtrip(frame)  # warm
    (u0, s0), t0 = proc_cpu_seconds(pid), time.perf_counter()
    count = 0
    while True:
        client.roundtrip(frame)
        count += 1
        u1, s1 = proc_cpu_seconds(pid)
        if u1 + s1 - u0 - s0 >= cpu_seconds:
            return count, u1 + s1 - u0 - s0, s1 - s0, time.perf_counter() - t0


class Profiler:
    """``py-spy record --pid`` on the broker for one row (or nothing)."""

    def __init__(self, out: Path | None, pid: int, rate: int) -> None:
        self.out, self.pid, self.rate = out, pid, rate
        self.proc: subprocess.Popen[bytes] | None = None
        self.path: Path | None = None

    def start(self, label: str) -> None:
        if self.out is None:
            return
        import hotspots

        self.path = self.out / f"broker-{label}.txt"
        cmd = [hotspots.py_spy(), "record", "--pid", str(self.pid), "--format", "raw", "--rate", str(self.rate), "--gil", "-o", str(self.path)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # let it attach

    def stop(self, label: str, top: int) -> None:
        if self.proc is None or self.path is None:
            return
        import hotspots

        self.proc.send_signal(2)
        self.proc.wait(timeout=60)
        self.proc = None
        if self.path.exists():
            print(hotspots.report(f"broker, {label}", hotspots.parse_raw(self.path), top))


class Target:
    """One broker under test: its process, a raw connection and a label."""

    def __init__(self, label: str, broker: Any, args: argparse.Namespace, topic: str, biggest: int, batch: bytes) -> None:
        self.label, self.broker = label, broker
        self.pid: int = broker.pid
        if args.broker_cpu is not None:
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                os.sched_setaffinity(int(tid), {args.broker_cpu})
        create_topic(broker.bootstrap, topic, biggest)
        self.client = RawClient(broker.host, broker.port)
        # Every partition gets its first batches untimed (the fetch rows read them).
        fill = self.client.frame(PRODUCE, 8, produce_body(topic, biggest, batch))
        for _ in range(args.fetch_batches + 1):
            self.client.roundtrip(fill)
        resp = self.client.decoded(PRODUCE, 8, produce_body(topic, biggest, batch))
        errors = {p.error_code for t in resp.responses for p in t.partition_responses}
        if errors != {0}:
            raise SystemExit(f"{label}: produce answered errors {errors}")
        self.profiler = Profiler(Path(args.profile) if args.profile else None, self.pid, args.rate)


def start_broker(tree: str | None) -> Any:
    """A bundled broker running the kclient of ``tree`` (None: this one).

    `BrokerProcess` puts the kclient of the process that starts it first on
    the broker's ``PYTHONPATH``; for another tree the broker's interpreter is
    a wrapper script that sets ``PYTHONPATH`` to that tree alone and runs
    in it (``python -m`` puts the working directory first on ``sys.path``:
    a broker started from inside a checkout would otherwise import the
    checkout's kclient, whatever ``PYTHONPATH`` says)."""
    from kclient.testing import BrokerProcess

    python = sys.executable
    if tree is not None:
        wrapper = Path(tempfile.mkdtemp(prefix="broker-partitions-")) / "python"
        wrapper.write_text(f"#!/bin/sh\ncd {shlex.quote(tree)} || exit 1\nPYTHONPATH={shlex.quote(tree)} exec {shlex.quote(sys.executable)} \"$@\"\n")
        wrapper.chmod(0o755)
        python = str(wrapper)
    broker = BrokerProcess(properties={"num.partitions": 1}, startup_timeout=120, python=python).start()
    if tree is not None:
        environ = Path(f"/proc/{broker.pid}/environ").read_bytes().split(b"\0")
        if f"PYTHONPATH={tree}".encode() not in environ or os.readlink(f"/proc/{broker.pid}/cwd") != tree:
            raise SystemExit(f"the compared broker does not run {tree}")
    return broker


def request_frame(t: Target, kind: str, topic: str, n: int, batch: bytes, fetch_batches: int, records: int) -> bytes:
    if kind == "produce":
        return t.client.frame(PRODUCE, 8, produce_body(topic, n, batch))
    ends = end_offsets(t.client, topic, n)
    offsets = ends if kind == "fetch-empty" else [max(0, e - fetch_batches * records) for e in ends]
    return t.client.frame(FETCH, 11, fetch_body(topic, offsets))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", default="1,64,512,2048", help="comma-separated partition counts per request")
    ap.add_argument("--records", type=int, default=1, help="records per partition batch (default 1)")
    ap.add_argument("--size", type=int, default=100, help="record value bytes (default 100)")
    ap.add_argument("--fetch-batches", type=int, default=4, help="batches each partition answers in the fetch rows (default 4)")
    ap.add_argument("--cpu-seconds", type=float, default=2.0, help="broker CPU seconds per row (default 2)")
    ap.add_argument("--rounds", type=int, default=4, help="each row's CPU is spent in this many rounds (brokers alternating); 'best' is the cheapest round")
    ap.add_argument("--only", default="produce,fetch,fetch-empty")
    ap.add_argument("--compare", default=None, help="a second broker running the kclient tree at this path (PYTHONPATH), measured alternately")
    ap.add_argument("--profile", default=None, help="directory for py-spy raw profiles of the broker (one per row)")
    ap.add_argument("--rate", type=int, default=250)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--broker-cpu", type=int, default=None, help="pin the broker to this cpu")
    args = ap.parse_args(argv)
    counts = sorted(int(x) for x in args.partitions.split(","))
    kinds = args.only.split(",")
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    topic = "partitions"
    biggest = max(counts)
    batch = build_batch([(None, bytes(args.size), 1_700_000_000_000 + i) for i in range(args.records)])
    trees: list[tuple[str, str | None]] = [("this tree", None)]
    if args.compare:
        trees.insert(0, (args.compare, os.path.abspath(args.compare)))
    targets: list[Target] = []
    brokers: list[Any] = []
    try:
        for label, tree in trees:
            brokers.append(start_broker(tree))
            targets.append(Target(label, brokers[-1], args, topic, biggest, batch))
        print(f"topic of {biggest} partitions; batch {len(batch)} B ({args.records} x {args.size} B); " + "; ".join(f"{t.label}: broker pid {t.pid}" for t in targets))
        print(f"{'row':<12}{'N':>6} {'broker':<22}{'requests':>9}{'ms/request':>12}{'us/partition':>14}{'best':>7}{'marginal':>10}{'sys %':>7}{'wall ms/req':>13}")
        for kind in kinds:
            base: dict[str, tuple[int, float]] = {}
            for n in counts:
                frames = [request_frame(t, kind, topic, n, batch, args.fetch_batches, args.records) for t in targets]
                totals = [[0, 0.0, 0.0, 0.0, float("inf")] for _ in targets]
                label = f"{kind}-{n}p"
                for i, t in enumerate(targets):
                    t.profiler.start(f"{label}-{i}")
                for _ in range(args.rounds):
                    for i, t in enumerate(targets):
                        requests, cpu, system, wall = timed(t.client, t.pid, frames[i], args.cpu_seconds / args.rounds)
                        tot = totals[i]
                        tot[0] += requests
                        tot[1] += cpu
                        tot[2] += system
                        tot[3] += wall
                        tot[4] = min(tot[4], cpu / requests)
                for t in targets:
                    t.profiler.stop(f"{label} ({t.label})", args.top)
                for t, (requests, cpu, system, wall, best) in zip(targets, totals):
                    per_request = cpu / requests
                    marginal = ""
                    if t.label not in base:
                        base[t.label] = (n, per_request)
                    elif n > base[t.label][0]:
                        marginal = f"{1e6 * (per_request - base[t.label][1]) / (n - base[t.label][0]):.1f}"
                    print(
                        f"{kind:<12}{n:>6} {t.label[-22:]:<22}{requests:>9}{1e3 * per_request:>12.3f}{1e6 * per_request / n:>14.1f}"
                        f"{1e6 * best / n:>7.1f}{marginal:>10}{100 * system / cpu:>7.0f}{1e3 * wall / requests:>13.3f}",
                        flush=True,
                    )
    finally:
        for t in targets:
            t.client.close()
        for b in brokers:
            b.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
