"""Consume cost of two kclient trees, A/B: the client side and the broker
side swapped independently, each measured as the best of many passes.

``run.py``'s consume rows read 100 MB once (about 0.1 s), so one run of a
row swings 10-20 % with the page cache and the scheduler. This script reads
the same topic (1,000 B records written by confluent-kafka, 1 partition)
``--passes`` times per client process and keeps the best pass, with the
client of tree A and of tree B against the broker of tree A, then of tree B.

    python benchmarks/ab_consume.py /path/to/tree-a /path/to/tree-b

Each tree is a kclient checkout with its compiled module built in place
(``python setup.py build_ext --inplace``); it is put first on PYTHONPATH of
the broker and client processes. Prints client CPU µs per record and wall µs
per record (best pass) for every (broker, client) pair.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CLIENT = r"""
import sys, time
from kclient import FetchRequest, OffsetRequest, SimpleConsumer

host, port, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with SimpleConsumer(host, port, so_timeout_ms=30000, buffer_size=1 << 20, client_id="ab") as c:
    end = c.get_offsets_before("ab", 0, OffsetRequest.LATEST_TIME, 1)[0]
    cpu = wall = float("inf")
    for _ in range(passes):
        c0, w0, offset = time.process_time(), time.perf_counter(), 0
        while offset < end:
            for message_set in c.multifetch_iter([FetchRequest("ab", 0, offset, 1 << 20)]):
                for mo in message_set:
                    mo.message.payload
                    offset = mo.offset + 1
        cpu = min(cpu, (time.process_time() - c0) / end * 1e6)
        wall = min(wall, (time.perf_counter() - w0) / end * 1e6)
    print(f"{cpu:.3f} {wall:.3f}")
"""

BROKER = r"""
import os, subprocess, sys
import confluent_kafka
from kclient.testing import BrokerProcess

records, passes, clients = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
with BrokerProcess(properties={"num.partitions": 1}) as broker:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.size": 1 << 20})
    value = os.urandom(1000)
    for _ in range(records):
        while True:
            try:
                producer.produce("ab", value, partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush()
    for tree in clients:
        done = subprocess.run([sys.executable, "-c", os.environ["AB_CLIENT"], broker.host, str(broker.port), passes],
                              env={**os.environ, "PYTHONPATH": tree}, capture_output=True, text=True, check=True)
        print(tree, done.stdout.strip())
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs=2, help="two kclient checkouts (A and B)")
    ap.add_argument("--records", type=int, default=100_000, help="records of 1,000 B in the topic (default 100,000)")
    ap.add_argument("--passes", type=int, default=12, help="reads of the whole topic per client process; the best counts (default 12)")
    ap.add_argument("--rounds", type=int, default=2, help="times each (broker, client) pair is measured (default 2)")
    args = ap.parse_args()
    trees = [os.path.abspath(t) for t in args.trees]
    print(f"{'broker tree':40s} {'client tree':40s} {'client CPU µs/record':>20s} {'wall µs/record':>15s}")
    for _ in range(args.rounds):
        for broker_tree in trees:
            done = subprocess.run(
                [sys.executable, "-c", BROKER, str(args.records), str(args.passes), *trees],
                env={**os.environ, "PYTHONPATH": broker_tree, "AB_CLIENT": CLIENT},
                capture_output=True,
                text=True,
                check=True,
            )
            for line in done.stdout.splitlines():
                client_tree, cpu, wall = line.rsplit(" ", 2)
                print(f"{broker_tree:40s} {client_tree:40s} {float(cpu):20.3f} {float(wall):15.3f}")


if __name__ == "__main__":
    main()
