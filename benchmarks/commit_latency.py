"""Offset commit latency, p50 / p99, in one run against one bundled broker
(registered in a real ZooKeeper):

- ``kclient offsets.storage=zookeeper``: `ConsumerConnector.commit_offsets`
  writing ``/consumers/<group>/offsets/...``;
- ``kclient offsets.storage=kafka``: the same call committing through the
  group coordinator (OffsetCommit to ``__consumer_offsets``, dual commit
  off);
- ``kclient group.coordination=broker``: the broker-coordinated connector's
  commit (OffsetCommit with the member's generation);
- ``confluent-kafka commit(asynchronous=False)``: librdkafka's synchronous
  commit of one message.

Each sample reads one message and then times one commit of the offset after
it (so every commit changes the offset). Usage:

    python benchmarks/commit_latency.py [--commits N] [--quick] [--json FILE]

Prints one line per client: ``<label>  commits=<n>  p50=<ms> ms  p99=<ms> ms``.
Timings are measurements, never checked by tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))

from kclient import Consumer, Producer, ProducerData  # noqa: E402  after the sys.path insert: runs from a checkout
from kclient.testing import BrokerProcess, ZooKeeperProcess  # noqa: E402  likewise

LABELS = (
    "kclient offsets.storage=zookeeper",
    "kclient offsets.storage=kafka",
    "kclient group.coordination=broker",
    "confluent-kafka commit(asynchronous=False)",
)


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))
    return ordered[index]


def produce(bootstrap: str, topic: str, count: int) -> None:
    with Producer({"metadata.broker.list": bootstrap, "request.required.acks": 1}) as producer:
        for _ in range(count):
            producer.send(ProducerData(topic=topic, key=b"k", messages=[b"x" * 100]))


def kclient_commits(settings: dict, topic: str, commits: int) -> list[float]:
    samples = []
    with Consumer.create(settings) as connector:
        (stream,) = connector.create_message_streams({topic: 1})[topic]
        for _ in range(commits):
            next(stream)
            started = time.perf_counter()
            connector.commit_offsets()
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def confluent_commits(bootstrap: str, topic: str, commits: int) -> list[float]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-cf-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    samples = []
    try:
        while len(samples) < commits:
            msg = consumer.poll(5.0)
            if msg is None or msg.error() is not None:
                continue
            started = time.perf_counter()
            consumer.commit(message=msg, asynchronous=False)
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        consumer.close()
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=300, help="commits timed per client")
    parser.add_argument("--quick", action="store_true", help="20 commits per client (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    commits = 20 if args.quick else args.commits
    results: dict[str, dict] = {}
    with ZooKeeperProcess() as zk:
        chroot = f"{zk.connect}/bench-{uuid.uuid4().hex[:6]}"
        props = {"zookeeper.connect": chroot, "num.partitions": 1, "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1, "group.initial.rebalance.delay.ms": 0}
        with BrokerProcess(properties=props) as broker:
            topic = f"commit-latency-{uuid.uuid4().hex[:6]}"
            produce(broker.bootstrap, topic, commits + 10)
            common = {"auto.offset.reset": "smallest", "auto.commit.enable": False, "consumer.timeout.ms": 30000}
            runs = {
                LABELS[0]: lambda: kclient_commits({**common, "group.id": f"bench-zk-{uuid.uuid4().hex[:6]}", "zookeeper.connect": chroot}, topic, commits),
                LABELS[1]: lambda: kclient_commits(
                    {**common, "group.id": f"bench-kafka-{uuid.uuid4().hex[:6]}", "zookeeper.connect": chroot, "offsets.storage": "kafka", "dual.commit.enabled": False}, topic, commits
                ),
                LABELS[2]: lambda: kclient_commits({**common, "group.id": f"bench-broker-{uuid.uuid4().hex[:6]}", "bootstrap.servers": broker.bootstrap}, topic, commits),
                LABELS[3]: lambda: confluent_commits(broker.bootstrap, topic, commits),
            }
            for label, run in runs.items():
                samples = run()
                results[label] = {"commits": len(samples), "p50_ms": percentile(samples, 0.50), "p99_ms": percentile(samples, 0.99), "mean_ms": statistics.fmean(samples)}
    width = max(len(label) for label in results)
    for label, row in results.items():
        print(f"{label:<{width}}  commits={row['commits']}  p50={row['p50_ms']:.2f} ms  p99={row['p99_ms']:.2f} ms")
    if args.json is not None:
        args.json.write_text(json.dumps({"commits": commits, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
