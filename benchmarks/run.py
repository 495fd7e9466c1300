"""kclient's benchmark suite: kclient vs kafka-python, aiokafka and
confluent-kafka against ONE bundled broker (issue 5).

    python benchmarks/run.py [--quick] [--repeat N] [--json PATH] [--only NAME[,NAME...]]
                             [--clients NAME[,NAME...]] [--log-dir DIR]

(``make bench`` runs it with the bench extra installed.) One session:

- starts one bundled broker (`kclient.testing.BrokerProcess`) and,
  with 2+ cores, pins it (every thread) to the first core and this process
  and every client subprocess to the second;
- pre-creates every topic the session will use, with its partition count,
  by making the partition directories before the broker starts (the broker
  has no CreateTopics API and ``num.partitions`` is one number for all
  auto-created topics), so each client run writes to a fresh topic; the
  scaling rows' topics (up to 2,048 partitions) are created with
  CreateTopics right before their group instead, one produce topic per
  client reused by the repeats;
- generates the payloads once, from a fixed seed, and gives the same ones to
  every client: random bytes for the throughput rows, JSON-like text for the
  compression rows (random bytes do not compress);
- runs every measurement in a fresh subprocess (``benchmarks/worker.py``),
  ``--repeat`` times (default 3, clients interleaved), and reports the
  median of each metric: records/s, MB/s (record value bytes, 10^6 bytes),
  CPU seconds of the client process per million records (all threads,
  ``getrusage``), peak RSS of the client process (``VmHWM``; see
  ``worker.peak_rss_kb`` for why not ``ru_maxrss``), CPU
  seconds the broker spent during the run, and kclient's ratio to each peer;
- checks correctness: every produce run must leave the topic's log end
  offsets summing to the record count, every consume run must read every
  record (count and value bytes);
- adds issue 16's "cost as work grows" rows (100 B keyed records at 1, 64,
  512 and 2,048 partitions, kclient and confluent-kafka), a "CPU µs per
  record" table, issue 16's producer memory rows (kclient's async Producer
  with ``queue.buffering.max.messages`` = 10,000, peak RSS at N and 10 x N
  records), and issue 5's and issue 16's targets as pass/fail lines;
- prints the tables and writes JSON (default ``benchmarks/results/latest.json``).

Timings are never asserted anywhere; ``tests/test_benchmarks_smoke.py`` runs
``--quick`` and checks only counts and the JSON's shape.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

WORKER = _HERE / "worker.py"
RESULT_PREFIX = "BENCH-RESULT "
DEFAULT_JSON = _HERE / "results" / "latest.json"

KCLIENT = "kclient"
#: kclient-stream: kclient's high-level consumer (ConsumerConnector + one
#: KafkaStream, ZooKeeper-coordinated), a consume row beside SimpleConsumer.
KCLIENT_STREAM = "kclient-stream"
#: kclient-poll: kclient's poll consumer (kclient.Consumer, assign + poll),
#: a consume row beside SimpleConsumer, against confluent-kafka's
#: Consumer.consume.
KCLIENT_POLL = "kclient-poll"
#: kclient-callback / kclient-futures: kclient's async produce with a
#: per-record delivery result (send(data, callback=fn) / send_with_result),
#: rows beside the plain one in the 100 B produce groups, so that
#: 'kclient ÷ this' is what delivery results cost.
KCLIENT_CALLBACK = "kclient-callback"
KCLIENT_FUTURES = "kclient-futures"
#: kclient-list: the batch-level send, send(list of 1,000 ProducerData),
#: beside the plain one-record-per-call row in the 100 B produce groups.
KCLIENT_LIST = "kclient-list"
#: kclient-no-busy-poll: the sync latency row's kclient without
#: socket.busy.poll.us (its default, 0), beside "kclient" with it at
#: LATENCY_BUSY_POLL_US, as the peers there run with their latency settings
#: (linger 0).
KCLIENT_NO_POLL = "kclient-no-busy-poll"
#: socket.busy.poll.us of the latency row's "kclient" (benchmarks/README.md,
#: "Sync latency and the VM's idle cores").
LATENCY_BUSY_POLL_US = 200
PEERS = ["kafka-python", "aiokafka", "confluent-kafka", "confluent-kafka-defaults", KCLIENT_STREAM, KCLIENT_POLL, KCLIENT_LIST, KCLIENT_CALLBACK, KCLIENT_FUTURES, KCLIENT_NO_POLL]
CLIENTS = [KCLIENT, "kafka-python", "aiokafka", "confluent-kafka"]
#: consume rows add confluent-kafka with librdkafka's defaults untouched
#: ("confluent-kafka" there sets fetch.queue.backoff.ms=0, see worker.py)
CONSUME_CLIENTS = [*CLIENTS, "confluent-kafka-defaults", KCLIENT_STREAM, KCLIENT_POLL]
#: every client a row may name (--clients chooses among them)
ALL_CLIENTS = [*CONSUME_CLIENTS, KCLIENT_LIST, KCLIENT_CALLBACK, KCLIENT_FUTURES, KCLIENT_NO_POLL]
#: import name of each client, to skip the ones not installed
MODULES = {
    KCLIENT: "kclient",
    KCLIENT_STREAM: "kclient",
    KCLIENT_POLL: "kclient",
    KCLIENT_LIST: "kclient",
    KCLIENT_CALLBACK: "kclient",
    KCLIENT_FUTURES: "kclient",
    KCLIENT_NO_POLL: "kclient",
    "kafka-python": "kafka",
    "aiokafka": "aiokafka",
    "confluent-kafka": "confluent_kafka",
    "confluent-kafka-defaults": "confluent_kafka",
}
DISTRIBUTIONS = {KCLIENT: "kclient", "kafka-python": "kafka-python", "aiokafka": "aiokafka", "confluent-kafka": "confluent-kafka"}
CODECS = ["gzip", "snappy", "lz4", "zstd"]

#: Distinct payloads per size; record i uses payload i % POOL.
POOL = 10_000
SEED = 20240505
LINGER_MS = 5
BATCH_BYTES = 16384
BIG_BATCH_BYTES = 1 << 20
#: The untimed write before the first row (`Session.warm_up`): twice the
#: largest row's data (the 1,000,000 x 100 B rows, ~130 MB on disk).
WARM_UP_TOPIC = "warm-up"
WARM_UP_MB = 300


# ============================================================ the plan


def sizes(quick: bool) -> dict[str, int]:
    """Record counts and byte totals of each workload (full or --quick)."""
    if quick:
        return dict(small=2_000, large=300, latency=30, latency_warmup=5, compression=2_000, ingest_records=1_000, ingest_size=1_000, scaling=2_000, memory=2_000, txn=2_000)
    return dict(
        small=1_000_000,  # 100-byte records
        large=100_000,  # 1,000-byte records
        latency=2_000,  # sync sends timed one by one
        latency_warmup=50,
        compression=200_000,  # 100-byte text records per codec
        ingest_records=200_000,  # 1,000-byte records: 200 MB through the broker
        ingest_size=1_000,
        scaling=200_000,  # 100-byte keyed records per scaling row
        memory=200_000,  # 100-byte records, the smaller memory row (the other: MEMORY_FACTOR x)
        txn=100_000,  # 100-byte records per transactional / idempotent row
    )


#: The "cost as work grows" rows (issue 16): 100 B keyed records to one
#: topic of N partitions, produce and consume, kclient and confluent-kafka.
SCALING_PARTITIONS = (1, 64, 512, 2048)
SCALING_PARTITIONS_QUICK = (1, 64)
#: kafka-python (1,788 records/s at 2,048 partitions in issue 16's table,
#: about 2 minutes a run) and aiokafka are left out: the target compares
#: kclient with confluent-kafka only.
SCALING_CLIENTS = ["kclient", "confluent-kafka"]


#: The transactional produce rows (issue 29): 100 B records to one
#: partition, acks=all with idempotence, a commit every N records; the row
#: with N = 0 is the idempotent producer without transactions (the
#: reference the commits' cost is read against).
TXN_COMMIT_EVERY = (0, 100, 1_000, 10_000)
TXN_CLIENTS = ["kclient", "confluent-kafka"]


#: The producer memory rows (issue 16, "producer memory still bounded by
#: queue.buffering.max.messages"): kclient's async Producer, the 100 B 1p
#: produce row's settings but this fixed queue bound, at N and
#: MEMORY_FACTOR x N records.
MEMORY_QUEUE_MAX = 10_000
MEMORY_FACTOR = 10
#: The target: peak RSS (VmHWM) at MEMORY_FACTOR x N records minus peak RSS
#: at N records, at most this many MB. What the bound lets the producer
#: hold: 10,000 queued records x (100 B payload + ~300 B of per-record
#: Python objects: ProducerData, its one-element list, the queue's slot)
#: ~= 4 MB, plus the batches being built and in flight (5 requests x 16 KB,
#: well under 1 MB); the payloads here come from the shared 10,000-payload
#: pool, so that 4 MB already over-counts. Doubled for allocator slack
#: (pymalloc's 1 MB arenas, glibc's heap and thread arenas, garbage not yet
#: collected): 8 MB. An unbounded queue grows by hundreds of MB over the
#: 1.8M extra records of the full run (measured with the bound at 2,000,000:
#: +380 MB, ~210 B per record held; benchmarks/README.md).
MEMORY_GROWTH_MAX_MB = 8.0


def _throughput_group(kind: str, size: int, count: int, parts: int, clients: Any, batch_bytes: int | None = None) -> dict:
    """A produce or consume throughput workload (random payloads)."""
    where = f"{parts} partition{'s' if parts > 1 else ''}"
    if kind == "produce":
        title = f"produce {count:,} x {size} B, {where}, acks=1"
    else:
        title = f"consume {count:,} x {size} B from offset 0, {where}"
    group = dict(name=f"{kind}-{size}B-{parts}p", kind=kind, title=title, size=size, count=count, partitions=parts, payload="random", clients=list(clients))
    if batch_bytes is not None:
        group.update(name=f"{group['name']}-{batch_bytes >> 20}MB", title=f"{title}, batches up to {batch_bytes >> 20} MB", batch_bytes=batch_bytes)
    return group


def plan(quick: bool) -> list[dict]:
    """The groups of the suite, in the order they run. A group is one
    workload measured for several clients; ratios compare clients within a
    group."""
    n = sizes(quick)
    groups: list[dict] = []
    for size, count in ((100, n["small"]), (1000, n["large"])):
        for parts in (1, 8):
            # the 100 B rows (per-record costs dominate) also measure delivery results
            clients = [*CLIENTS, KCLIENT_LIST, KCLIENT_CALLBACK, KCLIENT_FUTURES] if size == 100 else CLIENTS
            groups.append(_throughput_group("produce", size, count, parts, clients))
    # The same 1,000 B workloads with batches up to 1 MB (every client tuned
    # alike): per-request costs then weigh far less than per-record ones.
    for parts in (1, 8):
        groups.append(_throughput_group("produce", 1000, n["large"], parts, CLIENTS, batch_bytes=BIG_BATCH_BYTES))
    # kclient's producer memory at N and 10 x N records, one queue bound
    counts = [n["memory"], MEMORY_FACTOR * n["memory"]]
    groups.append(
        dict(
            name="memory-100B-1p",
            kind="memory",
            title=(
                f"producer memory: kclient async produce {counts[0]:,} and {counts[1]:,} x 100 B, 1 partition, acks=1, "
                f"queue.buffering.max.messages={MEMORY_QUEUE_MAX:,}"
            ),
            size=100,
            count=counts[0],
            counts=counts,
            queue_max_messages=MEMORY_QUEUE_MAX,
            partitions=1,
            payload="random",
            clients=[KCLIENT],
        )
    )
    groups.append(
        dict(
            name="latency-100B-1p",
            kind="latency",
            title=f"produce latency: sync, one 100 B record per send, acks=1, {n['latency']:,} sends",
            size=100,
            count=n["latency"],
            warmup=n["latency_warmup"],
            partitions=1,
            payload="random",
            clients=[*CLIENTS, KCLIENT_NO_POLL],
            busy_poll_us=LATENCY_BUSY_POLL_US,
        )
    )
    for size, count in ((100, n["small"]), (1000, n["large"])):
        for parts in (1, 8):
            groups.append(_throughput_group("consume", size, count, parts, CONSUME_CLIENTS))
    for codec in CODECS:
        groups.append(
            dict(
                name=f"compression-{codec}",
                kind="compression",
                title=f"{codec}: produce then consume {n['compression']:,} x 100 B JSON-like text, 1 partition",
                size=100,
                count=n["compression"],
                partitions=1,
                payload="text",
                codec=codec,
                clients=[KCLIENT, "confluent-kafka"],
            )
        )
    groups.append(
        dict(
            name="broker-bounds",
            kind="bounds",
            title=(
                f"broker bounds: {n['ingest_records'] * n['ingest_size'] / 1e6:,.0f} MB "
                f"({n['ingest_records']:,} x {n['ingest_size']:,} B), 1 partition"
            ),
            size=n["ingest_size"],
            count=n["ingest_records"],
            partitions=1,
            payload="random",
            clients=["ingest (confluent-kafka)", "raw-append-fsync", "broker-fetch", "raw-sendfile"],
        )
    )
    for every in TXN_COMMIT_EVERY:
        g = _throughput_group("produce", 100, n["txn"], 1, TXN_CLIENTS)
        how = "idempotent, no transactions" if not every else f"transactional, a commit every {every:,} records"
        g.update(
            name=f"txn-{g['name']}-{'idempotent' if not every else f'every{every}'}",
            title=f"produce {n['txn']:,} x 100 B, 1 partition, acks=all, {how}",
            acks=-1,
            idempotent=True,
            commit_every=every,
        )
        groups.append(g)
    for kind in ("produce", "consume"):
        for parts in SCALING_PARTITIONS_QUICK if quick else SCALING_PARTITIONS:
            g = _throughput_group(kind, 100, n["scaling"], parts, SCALING_CLIENTS)
            g.update(name=f"scaling-{g['name']}", title=f"scaling: {g['title']}, keyed (10,000 keys)", scaling=True, keyed=True)
            if kind == "consume" and parts * (1 << 20) >= 1 << 31:
                # kclient's SimpleConsumer.multifetch sends the sum of the
                # partitions' max sizes as the Fetch max_bytes (int32): 2,048 x
                # 1 MB overflows it (ValueError), so these rows ask for 512 KB
                # per partition (each holds about 10 KB)
                g["fetch_bytes"] = (1 << 30) // parts
            groups.append(g)
    return groups


def memory_label(client: str, count: int) -> str:
    """The row label of a memory run: client and record count."""
    return f"{client} {count:,} records"


def select(groups: list[dict], only: str | None) -> list[dict]:
    """Groups whose name or kind contains one of the comma-separated
    ``only`` words."""
    if not only:
        return groups
    words = [w.strip() for w in only.split(",") if w.strip()]
    return [g for g in groups if any(w in g["name"] or w == g["kind"] for w in words)]


# ============================================================ machine, pinning


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict:
    return {
        "nproc": os.cpu_count(),
        "usable_cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def versions() -> dict:
    out = {}
    for client, dist in DISTRIBUTIONS.items():
        try:
            out[client] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[client] = None
    try:
        import confluent_kafka

        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    return out


def pin_process(pid: int, cpu: int) -> None:
    """Pin every thread of ``pid`` to ``cpu`` (threads it creates later
    inherit the affinity of the thread that creates them)."""
    try:
        tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tasks = [pid]
    for tid in tasks:
        try:
            os.sched_setaffinity(tid, {cpu})
        except OSError:
            pass


def proc_cpu_seconds(pid: int | None) -> float:
    """User + system CPU of process ``pid`` (all its threads) so far."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


# ============================================================ payloads


def make_payloads(workdir: Path, kind: str, size: int) -> Path:
    """``POOL`` payloads of ``size`` bytes in one file, from a fixed seed."""
    path = workdir / f"payload-{kind}-{size}.bin"
    if path.exists():
        return path
    rng = random.Random(f"{SEED}-{kind}-{size}")
    if kind == "random":
        data = rng.randbytes(POOL * size)
    else:
        events = ["click", "view", "purchase", "signup", "logout", "search", "add_to_cart"]
        words = ["alpha", "beta", "gamma", "delta", "kafka", "stream", "record", "batch", "offset", "topic"]
        out = bytearray()
        for i in range(POOL):
            text = (
                f'{{"id":{100000 + i},"user":"user-{rng.randrange(5000)}","event":"{rng.choice(events)}",'
                f'"ts":{1700000000000 + i * 37},"page":"/p/{rng.randrange(1000)}","tags":"'
            )
            while len(text) < size - 2:
                text += rng.choice(words) + " "
            out += (text[: size - 2] + '"}').encode()
        data = bytes(out)
    path.write_bytes(data)
    return path


# ============================================================ the session


class Session:
    """One broker, the client-side pinning, and the run loop."""

    def __init__(self, args: argparse.Namespace, groups: list[dict]) -> None:
        self.args = args
        self.groups = groups
        self.quick = args.quick
        self.repeat = 1 if args.quick and args.repeat is None else (args.repeat or 3)
        self.notes: list[str] = []
        self.skipped: dict[str, str] = {}
        self.failures: list[dict] = []
        self.workdir = Path(tempfile.mkdtemp(prefix="kclient-bench-", dir=args.log_dir))
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir()
        self.topics: dict[str, int] = {}
        self.deleted_topics: list[str] = []
        self.broker: Any = None
        self.checker: Any = None
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if len(cpus) >= 2 and not args.no_pin:
            self.broker_cpu, self.client_cpu = cpus[0], cpus[1]
        else:
            self.broker_cpu = self.client_cpu = None
        wanted = [c.strip() for c in args.clients.split(",")] if args.clients else ALL_CLIENTS
        self.available = []
        for client in ALL_CLIENTS:
            if client not in wanted:
                continue
            if importlib.util.find_spec(MODULES[client]) is None:
                self.skipped[client] = f"{client} is not installed (pip install -e '.[bench]'); its rows are skipped"
            else:
                self.available.append(client)
        if KCLIENT_STREAM in self.available:
            from kclient.testing import zookeeper_unavailable_reason

            reason = zookeeper_unavailable_reason()
            if reason:
                self.available.remove(KCLIENT_STREAM)
                self.skipped[KCLIENT_STREAM] = f"{KCLIENT_STREAM} needs ZooKeeper: {reason}; its rows are skipped"
        self.zookeeper: Any = None
        self.filler = "confluent-kafka" if "confluent-kafka" in self.available or importlib.util.find_spec("confluent_kafka") else KCLIENT

    # ------------------------------------------------------------ helpers

    def log(self, msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    def topic(self, name: str, partitions: int) -> str:
        """Register a fresh topic (created before the broker starts)."""
        assert name not in self.topics, name
        self.topics[name] = partitions
        return name

    def spec(self, group: dict, **kw: Any) -> dict:
        payload = make_payloads(self.workdir, group["payload"], group["size"])
        spec = dict(
            bootstrap=self.broker.bootstrap if self.broker is not None else None,
            zookeeper=self.zookeeper.connect if self.zookeeper is not None else None,
            size=group["size"],
            count=group["count"],
            partitions=group["partitions"],
            payload_file=str(payload),
            linger_ms=LINGER_MS,
            batch_bytes=group.get("batch_bytes", BATCH_BYTES),
            acks=group.get("acks", 1),
            cpu=self.client_cpu,
        )
        if group.get("idempotent"):
            spec["idempotent"] = True
            spec["commit_every"] = group.get("commit_every", 0)
        if group.get("keyed"):
            spec["keyed"] = True
        if "fetch_bytes" in group:
            spec["fetch_bytes"] = group["fetch_bytes"]
        if group["kind"] == "latency":
            spec["warmup"] = group["warmup"]
            spec["busy_poll_us"] = group.get("busy_poll_us", 0)
        if "queue_max_messages" in group:
            spec["queue_max_messages"] = group["queue_max_messages"]
        spec.update(kw)
        return spec

    def run_worker(self, spec: dict) -> dict:
        """Run one measurement in a fresh subprocess; returns its result
        (with ``broker_cpu_s``) or raises RuntimeError."""
        pid = self.broker.pid if self.broker is not None else None
        # Start every measurement with no dirty page cache left by the one
        # before: otherwise the kernel's writeback throttling of earlier runs'
        # data lands, at random, in this run's write() calls (untimed).
        os.sync()
        b0 = proc_cpu_seconds(pid)
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, str(WORKER), json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=1200,
            cwd=str(_ROOT),
        )
        wall = time.monotonic() - t0
        b1 = proc_cpu_seconds(pid)
        lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr or proc.stdout)[-3000:]
            raise RuntimeError(f"worker {spec['kind']}/{spec['client']} exited {proc.returncode}:\n{tail}")
        result = json.loads(lines[-1][len(RESULT_PREFIX) :])
        result["broker_cpu_s"] = b1 - b0
        result["process_wall_s"] = wall
        return result

    def end_offsets(self, topic: str, partitions: int) -> int:
        from kclient import OffsetRequest

        return sum(self.checker.get_offsets_before(topic, p, OffsetRequest.LATEST_TIME, 1)[0] for p in range(partitions))

    # ------------------------------------------------------------ lifecycle

    def prepare(self) -> None:
        """Name every topic the session will use and make its directories."""
        for g in self.groups:
            g["runs"] = []
            k = g["kind"]
            if g.get("scaling") and k == "produce":
                # One topic per client for all repeats (a 2,048-partition
                # topic per run would make thousands more directories for the
                # broker to load); each run checks the log end offsets it adds.
                for client in g["clients"]:
                    if client in self.available:
                        t = self.topic(f"{g['name']}-{client}", g["partitions"])
                        for rep in range(self.repeat):
                            g["runs"].append(dict(rep=rep, client=client, topic=t, kind=k, reuse=True))
                g["runs"].sort(key=lambda r: r["rep"])  # clients interleaved
            elif k in ("produce", "latency"):
                for rep in range(self.repeat):
                    for client in g["clients"]:
                        if client in self.available:
                            t = self.topic(f"{g['name']}-{client}-r{rep}", g["partitions"])
                            g["runs"].append(dict(rep=rep, client=client, topic=t, kind=k))
            elif k == "memory":
                # per repeat, the N-record run then the 10N-record one, each
                # to a fresh topic; a "produce" run with its own count
                for rep in range(self.repeat):
                    for client in g["clients"]:
                        if client in self.available:
                            for count in g["counts"]:
                                t = self.topic(f"{g['name']}-{client}-{count}-r{rep}", g["partitions"])
                                g["runs"].append(dict(rep=rep, client=client, topic=t, kind="produce", count=count, label=memory_label(client, count)))
            elif k == "consume":
                g["source_topic"] = self.topic(f"{g['name']}-source", g["partitions"])
                for rep in range(self.repeat):
                    for client in g["clients"]:
                        if client in self.available:
                            g["runs"].append(dict(rep=rep, client=client, topic=g["source_topic"], kind="consume"))
            elif k == "compression":
                for rep in range(self.repeat):
                    for client in g["clients"]:
                        if client in self.available:
                            t = self.topic(f"{g['name']}-{client}-r{rep}", 1)
                            g["runs"].append(dict(rep=rep, client=client, topic=t, kind="produce", label=f"{client} produce"))
                            g["runs"].append(dict(rep=rep, client=client, topic=t, kind="consume", label=f"{client} consume"))
            elif k == "bounds":
                for rep in range(self.repeat):
                    t = self.topic(f"{g['name']}-ingest-r{rep}", 1)
                    g["runs"].append(dict(rep=rep, client=self.filler, topic=t, kind="produce", label="ingest (confluent-kafka)" if self.filler != KCLIENT else "ingest (kclient)"))
                    g["runs"].append(dict(rep=rep, client="raw-append-fsync", kind="bound", label="raw-append-fsync"))
                    g["runs"].append(dict(rep=rep, client="broker-fetch", topic=t, kind="bound", label="broker-fetch"))
                    g["runs"].append(dict(rep=rep, client="raw-sendfile", topic=t, kind="bound", label="raw-sendfile"))
        if not self.quick:
            self.topic(WARM_UP_TOPIC, 1)
        # The scaling rows' topics (thousands of partitions) are created
        # with CreateTopics right before their group runs: as directories at
        # start they made the broker register and elect leaders for ~8,000
        # partitions in the background during the first rows (measured:
        # LEADER_NOT_AVAILABLE on the first run, 5x the broker CPU).
        self.late_topics = {g["name"]: sorted({r["topic"] for r in g["runs"] if "topic" in r} | ({g["source_topic"]} if "source_topic" in g else set())) for g in self.groups if g.get("scaling")}
        late = {t for names in self.late_topics.values() for t in names}
        for name, parts in self.topics.items():
            if name in late:
                continue
            for p in range(parts):
                (self.log_dir / f"{name}-{p}").mkdir()

    def start(self) -> None:
        from kclient import SimpleConsumer
        from kclient.testing import BrokerProcess

        if self.client_cpu is not None:
            os.sched_setaffinity(0, {self.client_cpu})
        properties: dict[str, Any] = {"num.partitions": 1}
        if KCLIENT_STREAM in self.available:
            from kclient.testing import ZooKeeperProcess

            self.zookeeper = ZooKeeperProcess().start()
            if self.broker_cpu is not None:
                pin_process(self.zookeeper.pid, self.broker_cpu)
            properties["zookeeper.connect"] = self.zookeeper.connect
        self.broker = BrokerProcess(log_dir=self.log_dir, properties=properties, startup_timeout=120)
        self.broker.start()
        if self.broker_cpu is not None:
            pin_process(self.broker.pid, self.broker_cpu)
        host, port = self.broker.host, self.broker.port
        self.checker = SimpleConsumer(host, port, so_timeout_ms=30000, client_id="bench-check")
        self.log(
            f"broker pid {self.broker.pid} on {self.broker.bootstrap}, log dir {self.log_dir}; "
            + (f"broker pinned to cpu {self.broker_cpu}, clients to cpu {self.client_cpu}" if self.broker_cpu is not None else "not pinned (fewer than 2 usable cores)")
        )

    def stop(self) -> None:
        if self.checker is not None:
            try:
                self.checker.close()
            except Exception:
                pass
        if self.broker is not None:
            self.broker.cleanup()  # stops it; keeps self.log_dir (ours), removes its output file
        if self.zookeeper is not None:
            self.zookeeper.cleanup()
        if not self.args.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------ running

    def create_late_topics(self, g: dict) -> None:
        """Create a scaling group's topics (CreateTopics, replication 1) and
        wait until every partition answers ListOffsets."""
        from kclient.client.admin import AdminClient, NewTopic

        names = self.late_topics.get(g["name"]) or []
        if not names:
            return
        t0 = time.monotonic()
        with AdminClient({"bootstrap.servers": self.broker.bootstrap, "request.timeout.ms": 600000}) as admin:
            admin.create_topics([NewTopic(t, self.topics[t], 1) for t in names], timeout_ms=600000)
        deadline = time.monotonic() + 300
        for t in names:
            while True:
                try:
                    self.end_offsets(t, self.topics[t])
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        self.log(f"   created {len(names)} topic(s) of {g['partitions']} partitions ({time.monotonic() - t0:.1f} s)")

    def run(self) -> None:
        # Each topic is deleted (untimed) once the last run that uses it is
        # done, so that the page cache holds one row's data, not the whole
        # suite's. Measured on this suite's 2-core VM (benchmarks/README.md,
        # "The page cache: broker-bound rows late in a run"): once the page cache grows into
        # memory the host has not backed, writing 100 MB to a new file takes
        # 250 ms of system time instead of 20 ms, and the broker-bound rows
        # late in a run (produce 1000 B) ran 30-45 % slower for every
        # client; the pages of deleted files are reused at the fast rate.
        last_use = {run["topic"]: (gi, ri) for gi, g in enumerate(self.groups) for ri, run in enumerate(g["runs"]) if "topic" in run}
        self.warm_up()
        for gi, g in enumerate(self.groups):
            self.log(f"== {g['title']}")
            if g.get("scaling"):
                self.create_late_topics(g)
            if g["kind"] == "consume":
                self.fill(g)
            for ri, run in enumerate(g["runs"]):
                self.one(g, run)
                if "topic" in run and last_use.get(run["topic"]) == (gi, ri):
                    self.delete_topic(run["topic"])

    def warm_up(self) -> None:
        """Write WARM_UP_MB through the broker to a scratch topic and delete
        it (untimed), so that the first rows, like the later ones, write
        into page-cache memory that has been used before (see `run`;
        measured: the suite's first run, kclient's 100 B produce, had 1.7 s
        of broker CPU instead of 0.9 s)."""
        if self.quick or WARM_UP_TOPIC not in self.topics:
            return
        group = dict(kind="produce", size=1000, count=WARM_UP_MB * 1000, partitions=1, payload="random")
        spec = self.spec(group, kind="produce", client=self.filler, topic=WARM_UP_TOPIC, batch_bytes=BIG_BATCH_BYTES)
        t0 = time.monotonic()
        try:
            self.run_worker(spec)
        except Exception as exc:
            self.log(f"   (warm-up failed: {exc!r})")
        self.delete_topic(WARM_UP_TOPIC)
        self.log(f"   warm-up: {WARM_UP_MB} MB through the broker to {WARM_UP_TOPIC}, deleted ({time.monotonic() - t0:.1f} s)")

    def delete_topic(self, name: str) -> None:
        """Delete a topic no later run uses (DeleteTopics; untimed). A
        failure is logged and the suite goes on with the topic kept."""
        from kclient.client.admin import AdminClient

        try:
            with AdminClient({"bootstrap.servers": self.broker.bootstrap, "request.timeout.ms": 120000}) as admin:
                admin.delete_topics([name], timeout_ms=120000)
            self.deleted_topics.append(name)
        except Exception as exc:
            self.log(f"   (could not delete topic {name}: {exc!r}; its data stays in the page cache)")

    def fill(self, g: dict) -> None:
        """Produce the consume group's source topic once (not timed)."""
        spec = self.spec(g, kind="produce", client=self.filler, topic=g["source_topic"])
        result = self.run_worker(spec)
        got = self.end_offsets(g["source_topic"], g["partitions"])
        if got != g["count"]:
            raise RuntimeError(f"filling {g['source_topic']}: log end offsets sum to {got}, expected {g['count']}")
        g["filled_by"] = self.filler
        self.log(f"   filled {g['source_topic']} with {g['count']:,} records using {self.filler} ({result['elapsed_s']:.1f} s)")

    def one(self, g: dict, run: dict) -> None:
        client, kind = run["client"], run["kind"]
        label = run.get("label", client)
        kw: dict[str, Any] = dict(kind=kind, client=client)
        if "topic" in run:
            kw["topic"] = run["topic"]
        if "count" in run:  # the memory rows: each run its own count
            kw["count"] = run["count"]
        if g["kind"] == "compression":
            kw["codec"] = g["codec"]
        if g["kind"] == "bounds":
            kw.update(self.bounds_spec(g, run))
        spec = self.spec(g, **kw)
        try:
            if run.get("reuse"):
                run["offsets_before"] = self.end_offsets(run["topic"], g["partitions"])
            # Untimed: write back what earlier runs left dirty in the page
            # cache, so that its writeback does not slow this run's broker
            # (measured: the 1000 B produce rows after the three repeats of
            # the 100 B rows ran 30-40 % slower for every client, broker
            # CPU per request up as much).
            if hasattr(os, "sync"):
                os.sync()
            result = self.run_worker(spec)
            self.verify(g, run, spec, result)
        except Exception as exc:  # recorded, reported, and the suite goes on
            msg = str(exc).strip()
            self.failures.append(dict(group=g["name"], client=label, rep=run["rep"], error=msg))
            run["error"] = msg
            self.log(f"   {label:<26} rep {run['rep'] + 1}: FAILED: {msg.splitlines()[-1] if msg else exc!r}")
            return
        run["result"] = result
        rate = result["records"] / result["elapsed_s"] if result["records"] else 0
        mbs = result["bytes"] / result["elapsed_s"] / 1e6
        extra = f", p50 {result['p50_ms']:.3f} ms, p99 {result['p99_ms']:.3f} ms" if "p50_ms" in result else ""
        self.log(
            f"   {label:<26} rep {run['rep'] + 1}: {rate:>12,.0f} rec/s {mbs:>8.1f} MB/s  cpu {result['cpu_s']:.2f} s  "
            f"rss {result['peak_rss_kb'] / 1024:.0f} MB  broker cpu {result['broker_cpu_s']:.2f} s{extra}"
        )

    def bounds_spec(self, g: dict, run: dict) -> dict:
        kw: dict[str, Any] = {}
        total = g["count"] * g["size"]
        if run["kind"] == "produce":  # the load generator: big batches
            kw.update(batch_bytes=1 << 20, extra_confluent={"queue.buffering.max.kbytes": 1 << 20})
        elif run["client"] == "raw-append-fsync":
            kw.update(total_bytes=total, dir=str(self.log_dir), cpu=self.broker_cpu)
        elif run["client"] == "broker-fetch":
            kw.update(end_offset=g["count"], fetch_bytes=8 << 20)
        elif run["client"] == "raw-sendfile":
            segments = sorted((self.log_dir / f"{run['topic']}-0").glob("*.log"))
            kw.update(file=str(segments[0]) if segments else "", sender_cpu=self.broker_cpu)
        return kw

    def verify(self, g: dict, run: dict, spec: dict, result: dict) -> None:
        kind = run["kind"]
        if kind in ("produce", "latency"):
            # a reused topic (the scaling rows): what this run added to it
            before = run.get("offsets_before", 0)
            expected = result.get("expected_end_offsets", spec["count"])
            got = self.end_offsets(run["topic"], spec["partitions"]) - before
            result["log_end_offsets"] = got
            if got != expected:
                raise RuntimeError(f"{run['topic']}: log end offsets sum to {got} (added by this run), expected {expected}")
        elif kind == "consume":
            if result["records"] != spec["count"]:
                raise RuntimeError(f"consumed {result['records']} of {spec['count']}")
        elif run["client"] == "broker-fetch" and result["records"] != g["count"]:
            raise RuntimeError(f"raw fetch reached offset {result['records']}, expected {g['count']}")


# ============================================================ summarising


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _spread(values: list[float]) -> float | None:
    """Half the range of ``values`` as a % of their median (0 for one run):
    how far apart the repeats were."""
    values = [v for v in values if v]
    if not values:
        return None
    return (max(values) - min(values)) / 2 / statistics.median(values) * 100


def summarise(groups: list[dict]) -> None:
    """Per row (client, or client + produce/consume), the median of each
    metric over the repeats, and kclient's ratios to each peer."""
    for g in groups:
        rows: dict[str, list[dict]] = {}
        errors: dict[str, int] = {}
        settings: dict[str, Any] = {}
        for run in g["runs"]:
            label = run.get("label", run["client"])
            rows.setdefault(label, [])
            if "result" in run:
                rows[label].append(run["result"])
                settings.setdefault(label, run["result"].get("settings"))
            else:
                errors[label] = errors.get(label, 0) + 1
        medians: dict[str, dict] = {}
        for label, results in rows.items():
            if not results:
                medians[label] = {"runs": 0, "failed": errors.get(label, 0)}
                continue
            m = {
                "runs": len(results),
                "failed": errors.get(label, 0),
                "records": results[0]["records"],
                "records_per_s": _median([r["records"] / r["elapsed_s"] for r in results]) if results[0]["records"] else None,
                "mb_per_s": _median([r["bytes"] / r["elapsed_s"] / 1e6 for r in results]),
                "spread_pct": _spread([r["bytes"] / r["elapsed_s"] for r in results]),
                "elapsed_s": _median([r["elapsed_s"] for r in results]),
                "cpu_s_per_million": _median([r["cpu_s"] / r["records"] * 1e6 for r in results]) if results[0]["records"] else None,
                # the same number, under issue 16's name: process CPU µs per record
                "cpu_us_per_record": _median([r["cpu_s"] / r["records"] * 1e6 for r in results]) if results[0]["records"] else None,
                "cpu_s": _median([r["cpu_s"] for r in results]),
                "peak_rss_mb": _median([r["peak_rss_kb"] / 1024 for r in results]),
                "broker_cpu_s": _median([r.get("broker_cpu_s") for r in results]),
            }
            if all(r.get("broker_cpu_s") for r in results):
                # what the broker could do if it were the only limit
                m["mb_per_broker_cpu_s"] = _median([r["bytes"] / 1e6 / r["broker_cpu_s"] for r in results])
            for key in ("p50_ms", "p99_ms", "max_ms"):
                if key in results[0]:
                    m[key] = _median([r[key] for r in results])
            medians[label] = m
        g["rows"] = medians
        g["settings"] = settings
        g["ratios"] = ratios(g, medians)
        if g["kind"] == "bounds":
            g["ratios"].update(paired_ratios(g))


def paired_ratios(g: dict) -> dict:
    """The broker bounds per repeat: each ingest run ÷ the raw append+fsync
    run made right after it (and fetch ÷ sendfile likewise), so that a disk
    whose speed drifts during the session is compared with itself; the
    median of those ratios, and every one of them."""
    by_rep: dict[int, dict[str, dict]] = {}
    for run in g["runs"]:
        if "result" in run:
            by_rep.setdefault(run["rep"], {})[run.get("label", run["client"])] = run["result"]
    out: dict[str, Any] = {}
    for key, num, den in (("ingest / raw append+fsync", "ingest", "raw-append-fsync"), ("fetch / raw sendfile", "broker-fetch", "raw-sendfile")):
        values = []
        for rep in sorted(by_rep):
            results = by_rep[rep]
            a = next((r for label, r in results.items() if label.startswith(num)), None)
            b = results.get(den)
            if a and b and a["elapsed_s"] and b["elapsed_s"]:
                values.append((a["bytes"] / a["elapsed_s"]) / (b["bytes"] / b["elapsed_s"]))
        if values:
            out[f"{key}, paired median"] = statistics.median(values)
            out[f"{key}, per repeat"] = [round(v, 2) for v in values]
    return out


def ratios(g: dict, medians: dict[str, dict]) -> dict:
    """kclient ÷ peer on records/s (MB/s for the broker bounds): > 1 means
    kclient is faster. Latency: peer p50 ÷ kclient p50 (> 1: kclient's
    round trip is shorter)."""
    def rate(label: str, key: str = "records_per_s") -> float | None:
        m = medians.get(label) or {}
        return m.get(key)

    out: dict[str, Any] = {}
    if g["kind"] == "bounds":
        ingest = next((k for k in medians if k.startswith("ingest")), None)
        if ingest and rate(ingest, "mb_per_s") and rate("raw-append-fsync", "mb_per_s"):
            out["ingest / raw append+fsync"] = rate(ingest, "mb_per_s") / rate("raw-append-fsync", "mb_per_s")
        if rate("broker-fetch", "mb_per_s") and rate("raw-sendfile", "mb_per_s"):
            out["fetch / raw sendfile"] = rate("broker-fetch", "mb_per_s") / rate("raw-sendfile", "mb_per_s")
        return out
    if g["kind"] == "compression":
        for phase in ("produce", "consume"):
            k, c = rate(f"{KCLIENT} {phase}"), rate(f"confluent-kafka {phase}")
            if k and c:
                out[f"{phase}: kclient / confluent-kafka"] = k / c
        return out
    if g["kind"] == "latency":
        k = (medians.get(KCLIENT) or {}).get("p50_ms")
        for peer in PEERS:
            p = (medians.get(peer) or {}).get("p50_ms")
            if k and p:
                out[peer] = p / k
        return out
    k = rate(KCLIENT)
    for peer in PEERS:
        p = rate(peer)
        if k and p:
            out[peer] = k / p
    return out


TARGETS = [
    # (group kind, peer, minimum kclient/peer ratio, text): issue 5, every
    # produce / consume group but the scaling ones
    ("produce", "kafka-python", 3.0, "kclient async produce >= 3x kafka-python"),
    ("produce", "aiokafka", 1.0, "kclient async produce >= 1x aiokafka"),
    ("produce", "confluent-kafka", 0.5, "kclient async produce toward >= 0.5x confluent-kafka"),
    ("consume", "kafka-python", 3.0, "kclient consume >= 3x kafka-python"),
    ("consume", "aiokafka", 1.0, "kclient consume >= 1x aiokafka"),
    ("consume", "confluent-kafka", 0.5, "kclient consume toward >= 0.5x confluent-kafka"),
]

#: Issue 16's targets, (group kind, group names or None for every group of
#: the kind but the scaling ones, kclient row, peer, minimum, text).
#: Consume targets are judged against the tuned "confluent-kafka" row.
TARGETS_16 = [
    ("produce", ("produce-100B-1p", "produce-100B-8p"), KCLIENT, "confluent-kafka", 0.5, "async produce 100 B >= 0.5x confluent-kafka"),
    ("produce", None, KCLIENT, "kafka-python", 3.0, "every produce row >= 3x kafka-python"),
    ("produce", None, KCLIENT, "aiokafka", 1.5, "every produce row >= 1.5x aiokafka"),
    ("consume", None, KCLIENT, "confluent-kafka", 1.0, "consume (SimpleConsumer) >= 1x confluent-kafka"),
    ("consume", None, KCLIENT_STREAM, "confluent-kafka", 1.0, "consume (KafkaStream) >= 1x confluent-kafka"),
]
#: Issue 27's target, in the same shape: the poll consumer beside
#: confluent-kafka's Consumer.consume.
TARGETS_27 = [
    ("consume", None, KCLIENT_POLL, "confluent-kafka", 1.0, "consume (Consumer.poll) >= 1x confluent-kafka"),
]
#: sync produce latency: kclient p99 / confluent-kafka p99 at most this
LATENCY_P99_MAX = 1.5


def _target(issue: int, text: str, group: str, ratio: float, minimum: float | None = None, maximum: float | None = None) -> dict:
    met = (minimum is None or ratio >= minimum) and (maximum is None or ratio <= maximum)
    return dict(issue=issue, target=text, group=group, ratio=ratio, minimum=minimum, maximum=maximum, met=met)


def scaling_table(groups: list[dict]) -> list[dict]:
    """The "cost as work grows" rows: per kind and partition count,
    kclient's and confluent-kafka's records/s and CPU µs per record,
    kclient ÷ confluent-kafka, and that ratio ÷ the ratio at 1 partition."""
    out = []
    for kind in ("produce", "consume"):
        base = None
        for g in sorted((g for g in groups if g.get("scaling") and g["kind"] == kind), key=lambda g: g["partitions"]):
            k = g["rows"].get(KCLIENT) or {}
            c = g["rows"].get("confluent-kafka") or {}
            ratio = g["ratios"].get("confluent-kafka")
            if g["partitions"] == 1:
                base = ratio
            out.append(
                dict(
                    kind=kind,
                    group=g["name"],
                    partitions=g["partitions"],
                    kclient_records_per_s=k.get("records_per_s"),
                    confluent_records_per_s=c.get("records_per_s"),
                    kclient_cpu_us_per_record=k.get("cpu_us_per_record"),
                    confluent_cpu_us_per_record=c.get("cpu_us_per_record"),
                    ratio=ratio,
                    ratio_vs_1p=ratio / base if ratio and base else None,
                )
            )
    return out


def memory_table(groups: list[dict]) -> list[dict]:
    """The producer memory rows (issue 16), per memory group: each record
    count's medians (peak RSS MB, records/s, CPU s per million records) and
    the growth of peak RSS from the smallest count to the largest (MB):
    median at 10N - median at N, and the same per repeat (the two runs of one
    repeat, back to back)."""
    out = []
    for g in groups:
        if g["kind"] != "memory":
            continue
        for client in g["clients"]:
            labels = [memory_label(client, c) for c in g["counts"]]
            meds = [g["rows"].get(label) or {} for label in labels]
            if not any(m.get("runs") for m in meds):
                continue
            rss = [m.get("peak_rss_mb") for m in meds]
            by_rep: dict[int, dict[int, float]] = {}
            for run in g["runs"]:
                if run["client"] == client and "result" in run:
                    by_rep.setdefault(run["rep"], {})[run["count"]] = run["result"]["peak_rss_kb"] / 1024
            lo, hi = g["counts"][0], g["counts"][-1]
            per_repeat = [round(v[hi] - v[lo], 2) for _, v in sorted(by_rep.items()) if lo in v and hi in v]
            out.append(
                dict(
                    group=g["name"],
                    client=client,
                    queue_max_messages=g.get("queue_max_messages"),
                    rows=[
                        dict(
                            records=count,
                            peak_rss_mb=m.get("peak_rss_mb"),
                            records_per_s=m.get("records_per_s"),
                            cpu_s_per_million=m.get("cpu_s_per_million"),
                            runs=m.get("runs", 0),
                        )
                        for count, m in zip(g["counts"], meds)
                    ],
                    growth_mb=rss[-1] - rss[0] if rss[0] is not None and rss[-1] is not None else None,
                    growth_mb_per_repeat=per_repeat,
                    maximum_mb=MEMORY_GROWTH_MAX_MB,
                )
            )
    return out


def transactions_table(groups: list[dict]) -> list[dict]:
    """The transactional produce rows (issue 29): per commit interval
    (0: idempotent, no transactions), each client's records/s, kclient ÷
    confluent-kafka, and each client's rate ÷ its own idempotent rate (what
    the commits cost it)."""
    chosen = sorted((g for g in groups if "commit_every" in g), key=lambda g: g["commit_every"])
    base = {c: (g["rows"].get(c) or {}).get("records_per_s") for g in chosen if not g["commit_every"] for c in TXN_CLIENTS}
    out = []
    for g in chosen:
        rates = {c: (g["rows"].get(c) or {}).get("records_per_s") for c in TXN_CLIENTS}
        k, c = rates["kclient"], rates["confluent-kafka"]
        out.append(
            dict(
                group=g["name"],
                commit_every=g["commit_every"],
                kclient_records_per_s=k,
                confluent_records_per_s=c,
                ratio=k / c if k and c else None,
                kclient_vs_idempotent=k / base["kclient"] if k and base.get("kclient") else None,
                confluent_vs_idempotent=c / base["confluent-kafka"] if c and base.get("confluent-kafka") else None,
            )
        )
    return out


def targets(groups: list[dict]) -> list[dict]:
    out = []
    # the scaling rows have their own target; the transactional rows
    # (acks=all, idempotent) have none, only their table
    plain = [g for g in groups if not g.get("scaling") and "commit_every" not in g]
    for kind, peer, minimum, text in TARGETS:
        for g in plain:
            if g["kind"] == kind and peer in g.get("ratios", {}):
                r = g["ratios"][peer]
                out.append(_target(5, text, g["name"], r, minimum))
    for g in groups:
        if g["kind"] == "bounds":
            for key, minimum, text in (
                ("ingest / raw append+fsync", 0.5, "broker ingest >= 0.5x raw append + fsync"),
                ("ingest / raw append+fsync, paired median", 0.5, "broker ingest >= 0.5x raw append + fsync (paired)"),
                ("fetch / raw sendfile", 0.5, "broker fetch >= 0.5x raw loopback sendfile"),
                ("fetch / raw sendfile, paired median", 0.5, "broker fetch >= 0.5x raw sendfile (paired)"),
            ):
                if key in g["ratios"]:
                    r = g["ratios"][key]
                    out.append(_target(5, text, g["name"], r, minimum))
    # issues 16 and 27
    for issue, targets in ((16, TARGETS_16), (27, TARGETS_27)):
        for kind, names, mine, peer, minimum, text in targets:
            for g in plain:
                if g["kind"] != kind or (names is not None and g["name"] not in names):
                    continue
                a = (g["rows"].get(mine) or {}).get("records_per_s")
                b = (g["rows"].get(peer) or {}).get("records_per_s")
                if a and b:
                    out.append(_target(issue, text, g["name"], a / b, minimum))
    for g in plain:
        if g["kind"] == "latency":
            a = (g["rows"].get(KCLIENT) or {}).get("p99_ms")
            b = (g["rows"].get("confluent-kafka") or {}).get("p99_ms")
            if a and b:
                out.append(_target(16, f"sync produce p99: kclient / confluent-kafka <= {LATENCY_P99_MAX}", g["name"], a / b, maximum=LATENCY_P99_MAX))
    for m in memory_table(groups):
        if m["growth_mb"] is not None and m["client"] == KCLIENT:
            lo, hi = m["rows"][0]["records"], m["rows"][-1]["records"]
            t = _target(
                16,
                f"producer memory bounded by queue.buffering.max.messages: peak RSS growth from {lo:,} to {hi:,} records <= {m['maximum_mb']:g} MB",
                m["group"],
                m["growth_mb"],
                maximum=m["maximum_mb"],
            )
            t["unit"] = "MB"  # the "ratio" is the growth in MB
            out.append(t)
    for row in scaling_table(groups):
        if row["partitions"] > 1 and row["ratio_vs_1p"] is not None:
            out.append(
                _target(
                    16,
                    f"{row['kind']}: kclient ÷ confluent-kafka at N partitions no worse than at 1 partition",
                    row["group"],
                    row["ratio_vs_1p"],
                    1.0,
                )
            )
    return out


# ============================================================ printing


def _fmt(value: Any, spec: str = ",.0f", dash: str = "-") -> str:
    if value is None:
        return dash
    return format(value, spec)


def table(headers: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """A plain-text table; ``align``: one of l/r per column."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def render(report: dict) -> str:
    parts: list[str] = []
    m = report["machine"]
    parts.append(
        f"kclient benchmarks ({'quick' if report['quick'] else 'full'}, median of {report['repeat']} run(s) per row)\n"
        f"machine: {m['nproc']} cores, {m['cpu_model']}, Python {m['python']} ({m['platform']})\n"
        f"pinning: {report['pinning']}\n"
        f"versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items() if v)
    )
    throughput = [g for g in report["groups"] if g["kind"] in ("produce", "consume", "compression", "bounds")]
    if throughput:
        headers = ["workload", "client", "records/s", "±%", "MB/s", "CPU s/M rec", "peak RSS MB", "broker CPU s", "kclient ÷ this"]
        rows = []
        for g in throughput:
            first = True
            for label, med in g["rows"].items():
                ratio = ""
                if g["kind"] in ("produce", "consume") and label in g["ratios"]:
                    ratio = f"{g['ratios'][label]:.2f}x"
                elif g["kind"] == "compression" and not label.startswith(KCLIENT):
                    phase = label.rsplit(" ", 1)[-1]
                    r = g["ratios"].get(f"{phase}: kclient / confluent-kafka")
                    ratio = f"{r:.2f}x" if r else ""
                if not med.get("runs"):
                    cells = ["FAILED"] + [""] * 6
                else:
                    cells = [
                        _fmt(med.get("records_per_s")),
                        _fmt(med.get("spread_pct"), ".0f"),
                        _fmt(med.get("mb_per_s"), ",.1f"),
                        _fmt(med.get("cpu_s_per_million"), ",.2f"),
                        _fmt(med.get("peak_rss_mb"), ",.0f"),
                        _fmt(med.get("broker_cpu_s"), ",.2f"),
                    ]
                    cells.append(ratio)
                rows.append([g["short"] if first else "", label, *cells])
                first = False
        parts.append(table(headers, rows, "llrrrrrrr"))
    for g in report["groups"]:
        if g["kind"] == "latency":
            headers = ["client", "p50 ms", "p99 ms", "max ms", "sends/s", "CPU s/M rec", "peak RSS MB", "this p50 ÷ kclient p50"]
            rows = []
            for label, med in g["rows"].items():
                if not med.get("runs"):
                    rows.append([label, "FAILED", "", "", "", "", "", ""])
                    continue
                r = g["ratios"].get(label)
                rows.append(
                    [
                        label,
                        _fmt(med.get("p50_ms"), ".3f"),
                        _fmt(med.get("p99_ms"), ".3f"),
                        _fmt(med.get("max_ms"), ".3f"),
                        _fmt(med.get("records_per_s")),
                        _fmt(med.get("cpu_s_per_million"), ",.1f"),
                        _fmt(med.get("peak_rss_mb"), ",.0f"),
                        f"{r:.2f}x" if r else "",
                    ]
                )
            parts.append(g["title"] + "\n" + table(headers, rows, "lrrrrrrr"))
    bounds = [g for g in report["groups"] if g["kind"] == "bounds"]
    for g in bounds:
        if g["ratios"]:
            text = "broker bounds: " + ", ".join(
                f"{k} = {' / '.join(f'{x:.2f}' for x in v) if isinstance(v, list) else format(v, '.2f')}" for k, v in g["ratios"].items()
            )
            cpu_bound = [
                f"{label} {med['mb_per_broker_cpu_s']:,.0f} MB per broker CPU second"
                for label, med in g["rows"].items()
                if med.get("mb_per_broker_cpu_s") and (label.startswith("ingest") or label == "broker-fetch")
            ]
            if cpu_bound:
                text += "\n  (the broker's own CPU cost: " + "; ".join(cpu_bound) + ")"
            parts.append(text)
    for m in report.get("memory") or []:
        rows = [
            [
                f"{r['records']:,}",
                _fmt(r["peak_rss_mb"], ",.1f"),
                _fmt(r["records_per_s"]),
                _fmt(r["cpu_s_per_million"], ",.2f"),
            ]
            for r in m["rows"]
        ]
        growth = f"{m['growth_mb']:+.1f} MB" if m["growth_mb"] is not None else "-"
        per_repeat = f" (per repeat: {', '.join(f'{v:+.1f}' for v in m['growth_mb_per_repeat'])} MB)" if len(m["growth_mb_per_repeat"]) > 1 else ""
        parts.append(
            f"producer memory (issue 16): {m['client']} async produce, 100 B records, 1 partition, "
            f"queue.buffering.max.messages={m['queue_max_messages']:,}; medians\n"
            + table(["records", "peak RSS MB", "records/s", "CPU s/M rec"], rows, "rrrr")
            + f"\npeak RSS growth from {m['rows'][0]['records']:,} to {m['rows'][-1]['records']:,} records: {growth}{per_repeat}, bound {m['maximum_mb']:g} MB"
        )
    cpu = cpu_table(report["groups"])
    if cpu:
        parts.append(cpu)
    scaling = report.get("scaling") or []
    if scaling:
        rows = [
            [
                r["kind"],
                str(r["partitions"]),
                _fmt(r["kclient_records_per_s"]),
                _fmt(r["confluent_records_per_s"]),
                _fmt(r["ratio"], ".2f") + ("x" if r["ratio"] else ""),
                _fmt(r["ratio_vs_1p"], ".2f") + ("x" if r["ratio_vs_1p"] else ""),
                _fmt(r["kclient_cpu_us_per_record"], ",.2f"),
                _fmt(r["confluent_cpu_us_per_record"], ",.2f"),
            ]
            for r in scaling
        ]
        headers = ["", "partitions", "kclient rec/s", "confluent-kafka rec/s", "kclient ÷ confluent", "÷ ratio at 1p", "kclient CPU µs/rec", "confluent CPU µs/rec"]
        parts.append("cost as work grows (issue 16): 100 B keyed records, one topic of N partitions\n" + table(headers, rows, "lrrrrrrr"))
    txn = report.get("transactions") or []
    if txn:
        rows = [
            [
                "none (idempotent)" if not r["commit_every"] else f"every {r['commit_every']:,}",
                _fmt(r["kclient_records_per_s"]),
                _fmt(r["confluent_records_per_s"]),
                _fmt(r["ratio"], ".2f") + ("x" if r["ratio"] else ""),
                _fmt(r["kclient_vs_idempotent"], ".2f") + ("x" if r["kclient_vs_idempotent"] else ""),
                _fmt(r["confluent_vs_idempotent"], ".2f") + ("x" if r["confluent_vs_idempotent"] else ""),
            ]
            for r in txn
        ]
        headers = ["commit", "kclient rec/s", "confluent-kafka rec/s", "kclient ÷ confluent", "kclient ÷ its idempotent", "confluent ÷ its idempotent"]
        parts.append("transactional produce (issue 29): 100 B records, 1 partition, acks=all, idempotent\n" + table(headers, rows, "lrrrrr"))
    for issue, title in ((5, "issue 5 targets (ratios of medians, same run)"), (16, "issue 16 targets (ratios of medians, same run; the memory line: MB)")):
        chosen = [t for t in report["targets"] if t.get("issue", 5) == issue]
        if chosen:
            rows = [
                [
                    t["target"],
                    t["group"],
                    # a target with a unit (the memory line: MB) prints its value and bound in it
                    f"{t['ratio']:.2f} {t['unit']}" if t.get("unit") else f"{t['ratio']:.2f}x",
                    (f">= {t['minimum']:.2f}" if t.get("minimum") is not None else f"<= {t['maximum']:.2f}") + (f" {t['unit']}" if t.get("unit") else ""),
                    "met" if t["met"] else "MISSED",
                ]
                for t in chosen
            ]
            parts.append(title + "\n" + table(["target", "workload", "ratio", "bound", ""], rows, "llrll"))
    parts.append("settings\n" + "\n".join(f"  - {s}" for s in report["settings_text"]))
    if report["notes"]:
        parts.append("notes\n" + "\n".join(f"  - {n}" for n in report["notes"]))
    if report["failures"]:
        parts.append("FAILURES\n" + "\n".join(f"  - {f['group']} / {f['client']} rep {f['rep'] + 1}: {f['error'].splitlines()[-1] if f['error'] else ''}" for f in report["failures"]))
    return "\n\n".join(parts) + "\n"


def cpu_table(groups: list[dict]) -> str:
    """Issue 16's "CPU µs per record": process CPU time (all threads) ÷
    records, per workload and client, produce and consume (the same figure
    as the "CPU s/M rec" column), and kclient's ÷ confluent-kafka's."""
    chosen = [g for g in groups if g["kind"] in ("produce", "consume")]
    clients: list[str] = []
    for g in chosen:
        for label, med in g["rows"].items():
            if label not in clients and med.get("cpu_us_per_record") is not None:
                clients.append(label)
    if not chosen or not clients:
        return ""
    order = [c for c in ALL_CLIENTS if c in clients]
    rows = []
    for g in chosen:
        cells = [_fmt((g["rows"].get(c) or {}).get("cpu_us_per_record"), ",.2f", "") for c in order]
        k = (g["rows"].get(KCLIENT) or {}).get("cpu_us_per_record")
        c = (g["rows"].get("confluent-kafka") or {}).get("cpu_us_per_record")
        rows.append([g["short"], *cells, f"{k / c:.1f}x" if k and c else ""])
    return "CPU µs per record (client process CPU, all threads, ÷ records; medians)\n" + table(["workload", *order, "kclient ÷ confluent-kafka"], rows)


SHORT_NAMES = {
    "produce": "produce {size} B x {count}, {partitions}p",
    "consume": "consume {size} B x {count}, {partitions}p",
    "compression": "{codec} {size} B text x {count}",
    "bounds": "broker bounds {mb} MB",
    "latency": "latency",
    "memory": "memory {size} B x {count}, {partitions}p",
}


def short_name(g: dict) -> str:
    count = g["count"]
    c = f"{count // 1_000_000}M" if count >= 1_000_000 and count % 1_000_000 == 0 else f"{count // 1000}k" if count >= 1000 and count % 1000 == 0 else str(count)
    name = SHORT_NAMES[g["kind"]].format(size=g["size"], count=c, partitions=g["partitions"], codec=g.get("codec", ""), mb=f"{g['count'] * g['size'] / 1e6:,.0f}")
    if g.get("batch_bytes", BATCH_BYTES) != BATCH_BYTES:
        name += f", {g['batch_bytes'] >> 20} MB batches"
    if g.get("keyed"):
        name += ", keyed"
    return name


def settings_text(quick: bool) -> list[str]:
    return [
        f"produce throughput, acks=1, linger {LINGER_MS} ms, batches up to {BATCH_BYTES // 1024} KB per partition, one record per send call, null keys: "
        f"kclient Producer(producer.type=async, linger.ms={LINGER_MS}, batch.size={BATCH_BYTES} (per partition, as the peers' since issue 28's accumulator), "
        "max.in.flight.requests.per.connection=5 as the peers' default), send(ProducerData(topic, None, [value])) then flush(); "
        f"kafka-python KafkaProducer(acks=1, linger_ms={LINGER_MS}, batch_size={BATCH_BYTES}, enable_idempotence=False), send() then flush(); "
        f"aiokafka AIOKafkaProducer(acks=1, linger_ms={LINGER_MS}, max_batch_size={BATCH_BYTES}, enable_idempotence=False), await send() then flush(); "
        f"confluent-kafka Producer(acks=1, linger.ms={LINGER_MS}, batch.size={BATCH_BYTES}), produce() (poll(0) every 1024) then flush()",
        "delivery results (the 100 B produce rows): kclient-callback = the kclient row with send(data, callback=fn), fn counting "
        "fn(metadata, exception) calls on the send thread; kclient-futures = send_with_result(data), the futures of every 10,000 "
        "sends read with result() after the next 10,000 (then dropped); both check that every record got its result. "
        "'kclient ÷ this' is then the plain send's speed over the one with results",
        "batch-level send (the 100 B produce rows): kclient-list = the kclient row with send(list of 1,000 ProducerData) per call "
        "(queued as one entry per batch.num.messages messages); 'kclient ÷ this' is the one-record-per-call speed over it",
        f"the '1 MB batches' produce rows: the same with batches up to {BIG_BATCH_BYTES:,} bytes for every client (kclient batch.size, "
        "kafka-python batch_size, aiokafka max_batch_size, confluent-kafka batch.size); max request size stays 1 MB",
        "transactional produce (issue 29): the 100 B 1-partition produce settings with acks=all and idempotence on both clients "
        "(kclient request.required.acks=-1, enable.idempotence=true; confluent-kafka acks=all, enable.idempotence=true), then with a "
        "transactional.id: init_transactions() untimed (the idempotent row: one warm-up record sent and flushed, untimed, for its producer id), "
        "then begin_transaction(), N sends, commit_transaction() for every N records, "
        "the last commit and flush() timed; each run checked by its log end offsets (records + one COMMIT marker per transaction)",
        "produce latency: one 100 B record per call, each waited for, acks=1, linger 0: kclient Producer(producer.type=sync, "
        f"socket.busy.poll.us={LATENCY_BUSY_POLL_US}).send() (the socket is polled for the acknowledgement before the thread sleeps; "
        "kclient-no-busy-poll: the same with the default, 0); "
        "kafka-python send().get(); aiokafka await send_and_wait(); confluent-kafka produce() + flush(); after a warm-up of 50 sends",
        "consume: every record from offset 0, reading each value in Python: kclient SimpleConsumer.multifetch_iter over all partitions "
        "(FetchRequest.max_size 1 MB per partition); kafka-python KafkaConsumer assign + seek_to_beginning + poll(); aiokafka "
        "AIOKafkaConsumer assign + seek_to_beginning + getmany(); confluent-kafka Consumer assign(offset 0) + consume(num_messages=10000) "
        "with fetch.queue.backoff.ms=0 (librdkafka's default of 1000 ms stalls a fast consumer at random: 270k-1.3M records/s for the same "
        "run), and confluent-kafka-defaults, the same with every librdkafka default; the issue's confluent targets use the tuned one. "
        "The source topic is produced once, untimed, by confluent-kafka (linger 5 ms, 16 KB batches)",
        "compression: same producer settings as above plus kclient compression.codec / confluent-kafka compression.type; each client then "
        "consumes the topic it produced; payloads are JSON-like text (random bytes do not compress)",
        "broker bounds: ingest = confluent-kafka producing to the broker with batch.size 1 MB, linger 5 ms, acks=1; raw append+fsync = "
        "the same number of bytes written to a file in the broker's log dir in 1 MB chunks, fsync every 16 MB and at the end, on the "
        "broker's core; fetch = Fetch v4 requests (partition_max_bytes 8 MB) built with kclient.protocol over a blocking socket, "
        "only batch headers parsed (no record decoded); raw sendfile = os.sendfile of the ingest topic's segment file over a loopback "
        "TCP connection from a process on the broker's core to one on the client's core (1 MB recv_into buffer); MB/s of these rows "
        "counts record-batch bytes on disk / on the wire, the producers' rows count value bytes",
        "scaling rows (issue 16, 'cost as work grows'): 100 B records with keys (10,000 distinct, record i has key i % 10,000, each client's "
        "default partitioner) to one topic of 1, 64, 512 and 2,048 partitions (1 and 64 with --quick), produce with the settings above and "
        "consume as above, kclient and confluent-kafka only (kafka-python needs about 2 minutes a run at 2,048 partitions); one produce topic "
        "per client and partition count, reused by the repeats, each run checked by the log end offsets it added; kclient's ratio to "
        "confluent-kafka at N partitions ÷ its ratio at 1 partition is the target (>= 1)",
        f"producer memory (issue 16): kclient's async Producer with the 100 B 1-partition produce settings above but "
        f"queue.buffering.max.messages={MEMORY_QUEUE_MAX:,} fixed, producing {sizes(quick)['memory']:,} and then "
        f"{MEMORY_FACTOR * sizes(quick)['memory']:,} records (fresh process and topic each, the pair once per repeat); peak RSS = VmHWM; "
        f"the target: median peak RSS at {MEMORY_FACTOR}N - median at N <= {MEMORY_GROWTH_MAX_MB:g} MB (10,000 queued records x "
        "(100 B + ~300 B of Python objects) ~= 4 MB, doubled for allocator slack)",
        "CPU µs per record = the client process's CPU time (user + system, all threads) during the timed section ÷ records: the "
        "'CPU s/M rec' column under issue 16's name",
        "kclient consume: the log end offsets that tell its loop when to stop are looked up before the timed section (the peers stop "
        "at the expected count)",
        "every measurement runs in a fresh process, after os.sync() (untimed: earlier runs' dirty pages are written back first); "
        f"each topic is deleted once its last run is done, and {WARM_UP_MB} MB go through the broker to a scratch topic (deleted) before the "
        "first row, all untimed, so that the broker appends into page-cache memory used before (on this VM fresh memory costs 12x the "
        "system time: benchmarks/README.md); CPU = user + system of that process (all its threads) during the timed section; "
        "peak RSS = its VmHWM (peak resident set) over its whole life (interpreter, library, 10,000-payload pool); broker CPU = the broker's CPU "
        "seconds while the process ran",
    ]


# ============================================================ main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="kclient benchmarks vs kafka-python, aiokafka, confluent-kafka (issue 5)")
    ap.add_argument("--quick", action="store_true", help="tiny counts and 1 repeat (smoke test)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per row, median reported (default 3; 1 with --quick)")
    ap.add_argument("--json", default=str(DEFAULT_JSON), help=f"where to write the JSON report (default {DEFAULT_JSON.relative_to(_ROOT)})")
    ap.add_argument("--only", default=None, help="comma-separated group names or kinds: produce, memory, latency, consume, compression, bounds, scaling, gzip, 8p ...")
    ap.add_argument("--clients", default=None, help=f"comma-separated subset of {', '.join(ALL_CLIENTS)}")
    ap.add_argument("--log-dir", default=None, help="parent directory for the broker's logs and payloads (default: the system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the broker's log directory afterwards")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the broker and the clients to separate cores")
    args = ap.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        ap.error("--repeat must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    groups = select(plan(args.quick), args.only)
    if not groups:
        print(f"--only {args.only!r} matches no benchmark group", file=sys.stderr)
        return 2
    for g in groups:
        g["short"] = short_name(g)
    started = _dt.datetime.now(_dt.timezone.utc)
    t0 = time.monotonic()
    session = Session(args, groups)
    notes = [
        "KafkaStream / ConsumerConnector: the kclient-stream consume row (one KafkaStream over every partition, "
        "ZooKeeper-coordinated, timed from create_message_streams, so the group join (~0.1-0.2 s) is included and dominates --quick counts); "
        "'kclient ÷ kclient-stream' compares SimpleConsumer with it",
        "records/s and MB/s are medians over the repeats; ratios are kclient's median ÷ the peer's median from this same session "
        "(> 1: kclient faster; for latency: the peer's p50 ÷ kclient's p50)",
    ]
    try:
        session.prepare()
        session.start()
        session.run()
    finally:
        session.stop()
    summarise(groups)
    notes += list(session.skipped.values())
    if session.broker_cpu is None:
        notes.append("broker and clients were NOT pinned to separate cores (fewer than 2 usable cores, or --no-pin)")
    report = {
        "suite": "kclient benchmarks (issue 5)",
        "schema": 1,
        "command": " ".join([Path(sys.executable).name, "benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]),
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - t0, 1),
        "quick": args.quick,
        "repeat": session.repeat,
        "machine": machine_info(),
        "pinning": (
            f"broker on cpu {session.broker_cpu}, clients on cpu {session.client_cpu} (sched_setaffinity)"
            if session.broker_cpu is not None
            else "none"
        ),
        "versions": versions(),
        "clients": session.available,
        "skipped": session.skipped,
        "settings_text": settings_text(args.quick),
        "notes": notes,
        "groups": [
            {k: v for k, v in g.items() if k not in ("clients",)} | {"clients": [c for c in g["clients"] if c in session.available or g["kind"] == "bounds"]}
            for g in groups
        ],
        "scaling": [],
        "memory": [],
        "targets": [],
        "failures": session.failures,
        "deleted_topics": session.deleted_topics,
    }
    report["scaling"] = scaling_table(report["groups"])
    report["transactions"] = transactions_table(report["groups"])
    report["memory"] = memory_table(report["groups"])
    report["targets"] = targets(report["groups"])
    text = render(report)
    print(text)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"JSON written to {out}  (took {report['duration_s']:.0f} s)")
    return 1 if session.failures else 0


if __name__ == "__main__":
    sys.exit(main())
