"""Keyed async produce with DEFAULT settings across partition counts,
kclient against confluent-kafka (issue 28).

    python benchmarks/partitions.py [--partitions 1,64,512,2048] [--records 100000]
                                    [--size 100] [--keys 10000] [--runs 1] [--no-pin]

Starts one bundled broker (`kclient.testing.BrokerProcess`), pinned to the
first core and this process to the second as ``benchmarks/run.py`` does
(`run.pin_process`), creates one topic per partition count (CreateTopics),
and for each count sends ``--records`` keyed records of ``--size`` bytes
(``--keys`` distinct keys) with each client (the order alternating from
run to run; one warm-up record per partition first, untimed), async, ``acks=1``, every
other setting at its default: kclient's ``Producer`` (``producer.type=async``)
and confluent-kafka's ``Producer``. A run is timed from the first send to
the end of the flush. Printed per count: records/s of each client
(medians of ``--runs``) and kclient / confluent, with the load average,
since other processes on the machine skew the numbers, and the CPU µs per
record of the client (this process) and of the broker, which load skews
less. The topics' log end offsets are checked after each partition
count (exit status 1 when a record is missing or extra); timings are
never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(1, str(_HERE.parent))

from run import pin_process, proc_cpu_seconds  # noqa: E402

from kclient import AdminClient, NewTopic, Producer, ProducerData  # noqa: E402
from kclient.testing import BrokerProcess  # noqa: E402


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"parts-{partitions}-{uuid.uuid4().hex[:8]}"
    with AdminClient({"metadata.broker.list": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=120_000)
    return topic


def run_kclient(bootstrap: str, topic: str, partitions: int, keys: list[bytes], value: bytes, n: int) -> float:
    data = [ProducerData(topic, key=keys[i % len(keys)], messages=[value]) for i in range(n)]
    with Producer({"metadata.broker.list": bootstrap, "producer.type": "async", "request.required.acks": 1}) as producer:
        # Metadata, connection and every partition's log opened outside the
        # timed part, as for confluent below.
        producer.send([ProducerData(topic, messages=[b"warm-up"], partition=p) for p in range(partitions)])
        producer.flush()
        send = producer.send
        start = time.perf_counter()
        for d in data:
            send(d)
        producer.flush()
        elapsed = time.perf_counter() - start
        failed = producer.statistics().failed_messages
    if failed:
        print(f"  kclient: {failed} record(s) failed", flush=True)
    return n / elapsed


def run_confluent(bootstrap: str, topic: str, partitions: int, keys: list[bytes], value: bytes, n: int) -> float | None:
    try:
        import confluent_kafka
    except ImportError:
        return None
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1})
    for p in range(partitions):
        producer.produce(topic, b"warm-up", partition=p)
    producer.flush()
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                produce(topic, value, keys[i % len(keys)])
                break
            except BufferError:  # its queue is full: serve it, then retry
                poll(0.001)
    producer.flush()
    return n / (time.perf_counter() - start)


def timed(cpu: list[tuple[float, float]], broker_pid: int, n: int, run: Any, *args: Any) -> Any:
    """``run(*args)``, appending its client and broker CPU µs per record to
    ``cpu`` (the client's: this process, every thread; less sensitive to
    other processes' load than records/s)."""
    client0, broker0 = time.process_time(), proc_cpu_seconds(broker_pid)
    result = run(*args)
    if result is not None:
        cpu.append(((time.process_time() - client0) / n * 1e6, (proc_cpu_seconds(broker_pid) - broker0) / n * 1e6))
    return result


def log_end_total(bootstrap: str, topic: str, partitions: int) -> int:
    """The sum of the topic's log end offsets (every record the broker
    appended)."""
    from kclient import OffsetRequest, SimpleConsumer

    host, port = bootstrap.rsplit(":", 1)
    with SimpleConsumer(host, int(port), so_timeout_ms=30000, client_id="bench-check") as checker:
        return sum(checker.get_offsets_before(topic, p, OffsetRequest.LATEST_TIME, 1)[0] for p in range(partitions))


def cpu_text(cpu: list[tuple[float, float]]) -> str:
    if not cpu:
        return "-"
    return f"{statistics.median(c for c, _ in cpu):.2f} + {statistics.median(b for _, b in cpu):.2f}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="1,64,512,2048")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--no-pin", action="store_true", help="do not pin the broker and this process to separate cores")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    counts = [int(p) for p in args.partitions.split(",")]
    keys = [b"key-%06d" % i for i in range(args.keys)]
    value = b"v" * args.size
    cpus = sorted(os.sched_getaffinity(0))
    with BrokerProcess(properties={"num.partitions": 1}) as broker:
        pinned = len(cpus) >= 2 and not args.no_pin
        if pinned:
            pin_process(broker.pid, cpus[0])
            pin_process(os.getpid(), cpus[1])
        where = f"broker on cpu {cpus[0]}, clients on cpu {cpus[1]}" if pinned else "not pinned"
        print(f"{args.records:,} keyed {args.size}-byte records, async, acks=1, default settings; {where}", flush=True)
        rows: list[tuple[int, float, float | None]] = []
        for parts in counts:
            topic_k = create_topic(broker.bootstrap, parts)
            topic_c = create_topic(broker.bootstrap, parts)
            k_rates, c_rates, k_cpu, c_cpu = [], [], [], []
            for run in range(args.runs):
                # Alternate which client goes first.
                order = ("kclient", "confluent") if run % 2 == 0 else ("confluent", "kclient")
                for client in order:
                    if client == "kclient":
                        k_rates.append(timed(k_cpu, broker.pid, args.records, run_kclient, broker.bootstrap, topic_k, parts, keys, value, args.records))
                    else:
                        c = timed(c_cpu, broker.pid, args.records, run_confluent, broker.bootstrap, topic_c, parts, keys, value, args.records)
                        if c is not None:
                            c_rates.append(c)
            # Every run's records (and its warm-up records) are in the logs.
            expected = args.runs * (args.records + parts)
            for client, topic, rates in (("kclient", topic_k, k_rates), ("confluent", topic_c, c_rates)):
                got = log_end_total(broker.bootstrap, topic, parts)
                if rates and got != expected:
                    print(f"  {client}: the logs hold {got:,} records, expected {expected:,}", flush=True)
                    return 1
            k = statistics.median(k_rates)
            c_med = statistics.median(c_rates) if c_rates else None
            rows.append((parts, k, c_med))
            ratio = f"{k / c_med:.2f}x" if c_med else "-"
            print(f"  {parts:>5} partitions: kclient {k:>10,.0f} rec/s   confluent {c_med or 0:>10,.0f} rec/s   kclient/confluent {ratio}"
                  f"   (load {os.getloadavg()[0]:.2f})", flush=True)
            print(f"        CPU µs/record, client + broker: kclient {cpu_text(k_cpu)}   confluent {cpu_text(c_cpu)}", flush=True)
    print("\npartitions | kclient rec/s | confluent rec/s | ratio")
    print("---|---|---|---")
    for parts, k, c_med in rows:
        print(f"{parts} | {k:,.0f} | {c_med or 0:,.0f} | {k / c_med:.2f}x" if c_med else f"{parts} | {k:,.0f} | - | -")
    print(f"load average now: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (a shared machine makes these noisy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
