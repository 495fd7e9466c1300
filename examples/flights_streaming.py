"""The flights pipeline as a Spark streaming query, stopped and resumed.

1. Start the bundled broker; produce the first half of the flights (JSON,
   keyed by carrier) into topic ``flights``.
2. Run a streaming query over the topic through the ``kclient`` data source
   that keeps, per carrier, the number of flights, the sum and count of the
   departure delays and the number of flights more than 15 minutes late.
   Its state and offsets live in a checkpoint directory; it runs with
   ``Trigger.AvailableNow`` and ``maxOffsetsPerTrigger``, so it reads what is
   there in several micro-batches and stops.
3. Produce the second half; run the same query again from the checkpoint:
   it resumes where it stopped.
4. Check the final totals against pandas on the whole CSV (every count
   exact, no flight read twice or lost) and print them.

    python examples/flights_streaming.py [--limit N]

``--limit`` uses only the first N flights (the test suite runs it so).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from flights import FLIGHT_JSON_SCHEMA, PARTITIONS, TOPIC, flights_csv, read_flights

from kclient import Producer, ProducerData
from kclient.testing import BrokerProcess


def produce(bootstrap: str, flights: list[dict]) -> None:
    """Send ``flights`` and wait for every acknowledgement."""
    config = {"metadata.broker.list": bootstrap, "producer.type": "async", "request.required.acks": 1, "serializer.class": "kclient.StringEncoder", "key.serializer.class": "kclient.StringEncoder"}
    with Producer(config) as producer:
        for flight in flights:
            producer.send(ProducerData(topic=TOPIC, key=flight["carrier"], messages=[json.dumps(flight, separators=(",", ":"))]))


def run_query(spark, bootstrap: str, checkpoint: pathlib.Path, totals: dict) -> list[int]:
    """Run the streaming aggregation until the data available now is read;
    ``totals`` gets the latest complete table. Returns the rows read by each
    micro-batch."""
    from pyspark.sql import functions as F

    flights = (
        spark.readStream.format("kclient")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "60000")
        .load()
        .select(F.from_json(F.col("value").cast("string"), FLIGHT_JSON_SCHEMA).alias("f"))
        .select("f.carrier", F.col("f.dep_delay").cast("double").alias("dep_delay"))
    )
    table = flights.groupBy("carrier").agg(
        F.count(F.lit(1)).alias("flights"),
        F.sum("dep_delay").alias("delay_sum"),
        F.count("dep_delay").alias("departed"),
        F.sum(F.when(F.col("dep_delay") > 15, 1).otherwise(0)).alias("late"),
    )

    def keep(batch, batch_id: int) -> None:
        totals.clear()
        totals.update({r.carrier: r.asDict() for r in batch.collect()})

    query = table.writeStream.outputMode("complete").option("checkpointLocation", str(checkpoint)).foreachBatch(keep).trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"the streaming query failed: {query.exception()}")
    return [p["numInputRows"] for p in query.recentProgress]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="use only the first N flights")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    import pandas as pd

    import kclient.spark

    path = flights_csv()
    flights = list(read_flights(path))[: args.limit]
    half = len(flights) // 2
    spark = kclient.spark.session("flights-streaming", conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    totals: dict = {}
    try:
        with BrokerProcess(properties={"num.partitions": str(PARTITIONS)}) as broker, tempfile.TemporaryDirectory() as tmp:
            checkpoint = pathlib.Path(tmp) / "checkpoint"
            produce(broker.bootstrap, flights[:half])
            start = time.perf_counter()
            first = run_query(spark, broker.bootstrap, checkpoint, totals)
            after_first = sum(t["flights"] for t in totals.values())
            print(f"run 1: {sum(first):,} flights in {len(first)} micro-batches {first}; the table counts {after_first:,}")
            produce(broker.bootstrap, flights[half:])
            second = run_query(spark, broker.bootstrap, checkpoint, totals)
            print(f"run 2 (resumed from the checkpoint): {sum(second):,} more flights in {len(second)} micro-batches {second}")
            print(f"streaming took {time.perf_counter() - start:.1f} s")
    finally:
        spark.stop()

    frame = pd.DataFrame(flights)
    frame["dep_delay"] = pd.to_numeric(frame["dep_delay"])
    problems = []
    if sum(first) != half or sum(second) != len(flights) - half:
        problems.append(f"micro-batches read {sum(first)} + {sum(second)} flights, produced {half} + {len(flights) - half}")
    if after_first != half:
        problems.append(f"after the first run the table counts {after_first} flights, {half} were produced")
    print(f"\n{'carrier':<10}{'flights':>10}{'mean dep delay':>16}{'late >15 min':>14}")
    for carrier, group in sorted(frame.groupby("carrier")):
        delays = group["dep_delay"].dropna()
        got = totals.get(carrier)
        if got is None:
            problems.append(f"carrier {carrier} missing from the streaming table")
            continue
        mean = got["delay_sum"] / got["departed"] if got["departed"] else float("nan")
        if got["flights"] != len(group) or got["departed"] != len(delays) or got["late"] != int((delays > 15).sum()):
            problems.append(f"carrier {carrier}: streaming {got}, pandas flights={len(group)} departed={len(delays)} late={int((delays > 15).sum())}")
        elif len(delays) and not math.isclose(mean, float(delays.mean()), rel_tol=1e-9):
            problems.append(f"carrier {carrier}: mean delay {mean} vs pandas {float(delays.mean())}")
        share = got["late"] / got["departed"] if got["departed"] else 0.0
        print(f"{carrier:<10}{got['flights']:>10,}{mean:>16.3f}{share:>13.1%}")
    if set(totals) - set(frame["carrier"]):
        problems.append(f"unexpected carriers {sorted(set(totals) - set(frame['carrier']))}")
    if problems:
        print("\nFAILED:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    print(f"\nOK: {len(flights):,} flights streamed in two runs, the totals match pandas on the CSV")
    return 0


if __name__ == "__main__":
    sys.exit(main())
