"""Where a KafkaStream's time goes, run by run, in one process.

Starts ZooKeeper and a bundled broker (pinned to the second core, this
process to the first, as ``run.py`` pins them), fills a topic with
``--count`` records of ``--size`` bytes over ``--partitions`` partitions
(confluent-kafka, 16 KB batches, as ``run.py`` fills its consume topics),
then consumes it ``--runs`` times, each with a fresh ConsumerConnector and
group and ONE KafkaStream over every partition, and prints per run:

- the phases: ``join`` (``create_message_streams``: ZooKeeper registration
  and rebalance, the fetchers' start), ``first`` (until the first message)
  and ``iterate`` (the rest), ms, and records/s over all three (what
  ``run.py``'s kclient-stream row times);
- the process's CPU µs per record, its minor page faults, and the garbage
  collector's runs during the run (per generation);
- the CPU ms of each thread (``/proc/self/task``; 10 ms resolution).

The first run is what ``run.py`` measures (a fresh process per row); the
later ones show what is left once the process is warm. ``--no-gc`` turns
the garbage collector off, to see its share.

Usage::

    python benchmarks/stream_phases.py [--partitions P] [--size B] [--count N] [--runs R] [--no-gc]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import sys
import tempfile
import time
import uuid


def _thread_cpu_ms() -> dict[str, float]:
    """CPU ms (user + system) of each of this process's threads, by
    ``name:tid``."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # ended meanwhile
        out[f"{name}:{tid}"] = (int(fields[11]) + int(fields[12])) * 1000 / tick
    return out


def _fill(bootstrap: str, topic: str, partitions: int, count: int, size: int) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384})
    value = os.urandom(size)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(60):
        raise SystemExit("filling the topic: records not delivered within 60 s")


def _one_run(zookeeper: str, topic: str, count: int) -> None:
    from kclient import ConsumerConnector

    config = {
        "group.id": f"phases-{uuid.uuid4().hex[:12]}",
        "zookeeper.connect": zookeeper,
        "auto.offset.reset": "smallest",
        "auto.commit.enable": False,
        "consumer.timeout.ms": 30000,
        "fetch.message.max.bytes": 1 << 20,
    }
    threads_before = _thread_cpu_ms()
    with ConsumerConnector(config) as connector:
        gc_before = [s["collections"] for s in gc.get_stats()]
        faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        cpu0, t0 = time.process_time(), time.perf_counter()
        stream = connector.create_message_streams({topic: 1})[topic][0]
        t1 = time.perf_counter()
        n = 0
        t_first = None
        for m in stream:
            if t_first is None:
                t_first = time.perf_counter()
            len(m.message)
            n += 1
            if n >= count:
                break
        t2 = time.perf_counter()
        cpu = time.process_time() - cpu0
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
        collections = [s["collections"] - b for s, b in zip(gc.get_stats(), gc_before)]
        threads_after = _thread_cpu_ms()
    assert t_first is not None
    print(
        f"join {1000 * (t1 - t0):6.1f} ms  first {1000 * (t_first - t1):5.1f} ms  iterate {1000 * (t2 - t_first):6.1f} ms  "
        f"-> {count / (t2 - t0):>11,.0f} records/s  cpu {1e6 * cpu / count:.2f} µs/record  "
        f"page faults {faults:,}  gc runs (gen 0/1/2) {collections[0]}/{collections[1]}/{collections[2]}"
    )
    busy = sorted(((k, v - threads_before.get(k, 0.0)) for k, v in threads_after.items()), key=lambda kv: -kv[1])
    print("    thread CPU ms: " + ", ".join(f"{k} {v:.0f}" for k, v in busy if v > 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--size", type=int, default=1000, help="record value size, bytes")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--no-gc", action="store_true", help="turn the garbage collector off")
    args = parser.parse_args(argv)

    from kclient.testing import BrokerProcess, ZooKeeperProcess

    workdir = tempfile.mkdtemp(prefix="kclient-phases-")
    zookeeper = ZooKeeperProcess().start()
    broker = None
    try:
        broker = BrokerProcess(log_dir=workdir, properties={"num.partitions": args.partitions, "zookeeper.connect": zookeeper.connect}).start()
        pinned = len(os.sched_getaffinity(0)) >= 2
        if pinned:
            os.sched_setaffinity(broker.pid, {1})
            os.sched_setaffinity(zookeeper.pid, {1})
            os.sched_setaffinity(0, {0})  # threads started from now on inherit it
        _fill(broker.bootstrap, "phases", args.partitions, args.count, args.size)
        print(
            f"{args.count:,} x {args.size} B over {args.partitions} partition(s); "
            + ("broker and ZooKeeper on cpu 1, this process on cpu 0" if pinned else "not pinned (one core)")
            + ("; garbage collector off" if args.no_gc else "")
        )
        if args.no_gc:
            gc.disable()
        for i in range(args.runs):
            print(f"run {i + 1}: ", end="")
            _one_run(zookeeper.connect, "phases", args.count)
    finally:
        if broker is not None:
            broker.cleanup()
        zookeeper.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
