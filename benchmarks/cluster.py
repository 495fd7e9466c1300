"""The cluster rows (issue 11): what replication costs and how long a
failover takes, on one 3-broker `kclient.testing.Cluster` (a real ZooKeeper
and three bundled brokers on loopback).

    python benchmarks/cluster.py [--quick] [--repeat N] [--json PATH] [--kills N]

(``make bench`` runs it after ``security.py``.) One session:

- starts the cluster (``min.insync.replicas=2``);
- **replication cost**: ``--repeat`` times (default 3), an async kclient
  Producer (and confluent-kafka's, when installed) sends 100,000 x 100 B
  records (``--quick``: 5,000) into a fresh topic with replication factor 3
  and ``acks=-1``, then into a fresh topic with replication factor 1 and
  ``acks=1``, interleaved; each run ends when every record is acknowledged
  and the topic's log end offset (ListOffsets) is the count. Reported:
  medians of records/s and the ratio RF3 acks=-1 / RF1 acks=1 per client;
- **failover time**: an idempotent sync kclient Producer (``acks=-1``)
  sends numbered records to a RF3 topic while the partition's leader is
  killed with SIGKILL ``--kills`` times (default 5) and restarted after a
  new leader acknowledged; the time from the kill to the producer's first
  acknowledged send after it, p50 and max. It depends mostly on
  ``zookeeper.session.timeout.ms`` (the controller learns of the death when
  the broker's session expires; 3000 ms here), as in Kafka's ZooKeeper
  mode.

Timings are never asserted anywhere; ``tests/test_benchmarks_smoke.py``
runs ``--quick`` and checks only the report's shape.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from kclient import Producer, ProducerData  # noqa: E402
from kclient.testing import Cluster  # noqa: E402

DEFAULT_JSON = _HERE / "results" / "cluster.json"
PROPERTIES = {"min.insync.replicas": 2, "replica.fetch.wait.max.ms": 50, "replica.lag.time.max.ms": 5000}


def log_end(cluster: Cluster, topic: str, partitions: int) -> int:
    from kclient import SimpleConsumer

    total = 0
    for p in range(partitions):
        leader = cluster.broker(cluster.leader(topic, p))
        host, port = leader.host, leader.port
        consumer = SimpleConsumer(host, port, 10_000, 1 << 16, "bench-check")
        try:
            total += consumer.get_offsets_before(topic, p, -1, 1)[0]
        finally:
            consumer.close()
    return total


def produce_kclient(cluster: Cluster, topic: str, count: int, acks: int, payload: bytes) -> float:
    producer = Producer(
        {
            "metadata.broker.list": cluster.bootstrap,
            "producer.type": "async",
            "request.required.acks": acks,
            "queue.buffering.max.ms": 5,
            "batch.num.messages": 1000,
            "queue.buffering.max.messages": 200_000,
        }
    )
    start = time.perf_counter()
    try:
        batch = [ProducerData(topic, None, [payload])] * 1000
        for _ in range(count // 1000):
            producer.send(batch)
        producer.close()
    except BaseException:
        producer.close()
        raise
    return time.perf_counter() - start


def produce_confluent(cluster: Cluster, topic: str, count: int, acks: int, payload: bytes) -> float:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, "linger.ms": 5, "queue.buffering.max.messages": 200_000})
    failed = []

    def report(err, _msg):
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left or failed:
        raise RuntimeError(f"confluent-kafka: {left} undelivered, {len(failed)} failed ({failed[:3]})")
    return elapsed


CLIENTS = {"kclient": produce_kclient, "confluent-kafka": produce_confluent}


def replication_rows(cluster: Cluster, clients: list[str], count: int, repeat: int) -> dict[str, Any]:
    payload = os.urandom(100)
    runs: dict[str, dict[str, list[float]]] = {c: {"rf3_acks_all": [], "rf1_acks_1": []} for c in clients}
    for r in range(repeat):
        for client in clients:
            order = [("rf3_acks_all", 3, -1), ("rf1_acks_1", 1, 1)]
            if r % 2:
                order.reverse()
            for label, rf, acks in order:
                topic = f"bench-{label}-{uuid.uuid4().hex[:8]}"
                cluster.create_topic(topic, partitions=1, replication_factor=rf)
                cluster.wait_for_isr(topic, 0, cluster.assignment(topic)[0], timeout=60)
                elapsed = CLIENTS[client](cluster, topic, count, acks, payload)
                end = log_end(cluster, topic, 1)
                if end != count:
                    raise RuntimeError(f"{client} {label}: log end offset {end}, sent {count}")
                runs[client][label].append(count / elapsed)
                print(f"  {client:16} {label:13} {count / elapsed:>12,.0f} records/s", flush=True)
    out = {}
    for client, rows in runs.items():
        rf3 = statistics.median(rows["rf3_acks_all"])
        rf1 = statistics.median(rows["rf1_acks_1"])
        out[client] = {"rf3_acks_all_records_per_s": rf3, "rf1_acks_1_records_per_s": rf1, "ratio": rf3 / rf1, "runs": rows}
    return out


def failover_row(cluster: Cluster, kills: int) -> dict[str, Any]:
    topic = f"bench-failover-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    cluster.wait_for_isr(topic, 0, sorted(cluster.brokers), timeout=60)
    acks: list[float] = []
    failed: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def write() -> None:
        producer = Producer(
            {
                "metadata.broker.list": cluster.bootstrap,
                "producer.type": "sync",
                "enable.idempotence": "true",
                "request.required.acks": -1,
                "message.send.max.retries": 50,
                "retry.backoff.ms": 100,
                "request.timeout.ms": 5000,
            }
        )
        n = 0
        try:
            while not stop.is_set():
                try:
                    producer.send(ProducerData(topic, None, [str(n).encode()]))
                except Exception as e:  # counted, and the run goes on
                    failed.append(f"{n}: {type(e).__name__}: {e}")
                else:
                    with lock:
                        acks.append(time.monotonic())
                n += 1
        finally:
            producer.close()

    def wait(predicate, what: str, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.01)
        return value

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    times = []
    try:
        wait(lambda: len(acks) >= 20, "the first acknowledgements")
        for i in range(kills):
            old = cluster.leader(topic, 0)
            killed = time.monotonic()
            cluster.kill(old)
            with lock:
                pass
            first = wait(lambda killed=killed: next((t for t in list(acks) if t > killed), None), "an acknowledgement after the kill")
            times.append(first - killed)
            print(f"  kill {i + 1}: broker {old}, first acknowledged send after {first - killed:.2f} s", flush=True)
            cluster.start_broker(old)
            cluster.wait_for_isr(topic, 0, sorted(cluster.brokers), timeout=60)
    finally:
        stop.set()
        writer.join(60)
    return {"kills": kills, "failover_s": times, "p50_s": statistics.median(times), "max_s": max(times), "failed_sends": failed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="5,000 records per run, 1 repeat, 2 kills")
    parser.add_argument("--repeat", type=int, default=None, help="runs per row; the median is reported (default 3; 1 with --quick)")
    parser.add_argument("--kills", type=int, default=None, help="leader kills for the failover row (default 5; 2 with --quick)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where the results go")
    args = parser.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 3)
    kills = args.kills or (2 if args.quick else 5)
    count = 5_000 if args.quick else 100_000
    clients = ["kclient"]
    try:
        import confluent_kafka  # noqa: F401

        clients.append("confluent-kafka")
    except ImportError:
        print("confluent-kafka is not installed: kclient rows only")
    print(f"cluster benchmark: 3 brokers, {count:,} x 100 B per run, {repeat} repeat(s), {kills} kill(s)", flush=True)
    with Cluster(brokers=3, properties=PROPERTIES) as cluster:
        replication = replication_rows(cluster, clients, count, repeat)
        failover = failover_row(cluster, kills)
    print()
    print("| client | RF3 acks=-1 (records/s) | RF1 acks=1 (records/s) | ratio |")
    print("|---|---|---|---|")
    for client, row in replication.items():
        print(f"| {client} | {row['rf3_acks_all_records_per_s']:,.0f} | {row['rf1_acks_1_records_per_s']:,.0f} | {row['ratio']:.2f} |")
    print()
    print(f"failover (leader SIGKILL -> first acknowledged send), {kills} kills: p50 {failover['p50_s']:.2f} s, max {failover['max_s']:.2f} s")
    print(f"sends reported failed during the kills: {len(failover['failed_sends'])}")
    report = {"count": count, "repeat": repeat, "replication": replication, "failover": failover}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
