"""Exactly-once consume-transform-produce (Kafka transactions, KIP-98 and
KIP-447): read a topic, write one result per record to another, and commit
the consumed offsets in the same transaction as the results.

A crash at any point (even SIGKILL) loses nothing and duplicates nothing
that a ``read_committed`` reader can see: the next process with the same
``transactional.id`` fences the old one (its open transaction is aborted,
a paused "zombie" can no longer write) and resumes from the offsets the
last committed transaction carried.

1. Produce 30 records to ``orders-<run>`` (3 partitions).
2. Transform them into ``invoices-<run>``: each poll's records (at most 10)
   are one transaction: one output record per input record, keyed
   ``partition:offset`` of its input, then the offsets, then the commit.
3. Read ``invoices-<run>`` with ``isolation.level=read_committed``: 30
   results, one per input record.

    python examples/exactly_once.py BOOTSTRAP     # e.g. 127.0.0.1:9092
    KCLIENT_BOOTSTRAP=... python examples/exactly_once.py

Without an address it starts a bundled broker (`kclient.testing.BrokerProcess`).

``--worker BOOTSTRAP SOURCE SINK GROUP TRANSACTIONAL_ID`` runs only step 2
and prints one line per stage (``init``, ``begin N``, ``produced N``,
``offsets N``, ``committing N``, ``committed N``, ``done``, or ``fenced``
with exit status 3): the crash tests kill it at those lines.
"""

from __future__ import annotations

import os
import sys
import uuid

from kclient import Consumer, Producer, ProducerData, ProducerFencedError, TopicPartition
from kclient.client.admin import AdminClient, NewTopic
from kclient.errors import KafkaError

FENCED = 3
TIMEOUT_MS = 60_000


def say(line: str) -> None:
    """One stage line, flushed at once (a crash test reads them)."""
    print(line, flush=True)


def transform(value: bytes) -> bytes:
    """The work done on each record."""
    return b"invoice for " + value


def committed_positions(consumer: Consumer, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Where the last committed transaction left each partition (0 when none did)."""
    committed = consumer.committed(partitions, TIMEOUT_MS)
    return {tp: (c.offset if c is not None else 0) for tp, c in committed.items()}


def run_worker(bootstrap: str, source: str, sink: str, group: str, transactional_id: str, per_transaction: int = 10) -> int:
    """Transform ``source`` into ``sink`` until every record of ``source``
    (as it was at the start) is processed.

    Returns:
        0 when done, `FENCED` when a newer producer with the same
        ``transactional.id`` took over.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "producer.type": "async", "transactional.id": transactional_id, "linger.ms": 5})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "max.poll.records": per_transaction})
    try:
        # First fence any older producer of this id: its open transaction
        # is aborted (or its commit completed) before this returns, so the
        # committed offsets read next are final.
        producer.init_transactions(TIMEOUT_MS)
        say("init")
        partitions = [TopicPartition(source, p.partition) for p in consumer.partitions_for(source)]
        consumer.assign(partitions)
        positions = committed_positions(consumer, partitions)
        for tp, offset in positions.items():
            consumer.seek(tp, offset)
        ends = consumer.end_offsets(partitions, TIMEOUT_MS)
        count = 0
        while any(positions[tp] < ends[tp] for tp in partitions):
            records = consumer.poll(timeout_ms=200)
            if not records:
                continue
            count += 1
            try:
                producer.begin_transaction()
                say(f"begin {count}")
                for i, r in enumerate(records):
                    producer.send(ProducerData(sink, f"{r.partition}:{r.offset}".encode(), [transform(r.value)]))
                    if i == len(records) // 2:
                        say(f"produced {count}")
                offsets = dict(positions)
                for r in records:
                    offsets[TopicPartition(r.topic, r.partition)] = r.offset + 1
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata(), TIMEOUT_MS)
                say(f"offsets {count}")
                say(f"committing {count}")
                producer.commit_transaction(TIMEOUT_MS)
                positions = offsets
                say(f"committed {count} {len(records)}")
            except ProducerFencedError:
                raise
            except KafkaError as exc:
                # Abortable: abort, then read again from the last commit.
                say(f"aborting {count}: {exc!r}")
                producer.abort_transaction(TIMEOUT_MS)
                for tp, offset in positions.items():
                    consumer.seek(tp, offset)
        say("done")
        return 0
    except ProducerFencedError as exc:
        say(f"fenced: {exc}")
        return FENCED
    finally:
        consumer.close()
        producer.close(timeout_ms=5000)


def read_committed(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` of every committed record of ``topic``."""
    out: list[tuple[bytes, bytes]] = []
    config = {"bootstrap.servers": bootstrap, "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        partitions = [TopicPartition(topic, p.partition) for p in consumer.partitions_for(topic)]
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions, TIMEOUT_MS)
        while len(out) < expected or any(consumer.position(tp) < ends[tp] for tp in partitions):
            out += [(r.key, r.value) for r in consumer.poll(timeout_ms=200)]
    return out


def demo(bootstrap: str) -> None:
    run = uuid.uuid4().hex[:8]
    source, sink, group = f"orders-{run}", f"invoices-{run}", f"invoicing-{run}"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(source, 3, 1), NewTopic(sink, 3, 1)])
    with Producer({"bootstrap.servers": bootstrap, "request.required.acks": -1}) as producer:
        producer.send([ProducerData(source, None, [f"order {i}".encode()], partition=i % 3) for i in range(30)])
    status = run_worker(bootstrap, source, sink, group, f"invoicing-{run}")
    assert status == 0, status
    results = read_committed(bootstrap, sink, 30)
    keys = sorted(k for k, _ in results)
    assert len(keys) == len(set(keys)) == 30, keys
    print(f"OK: {len(results)} results, one per input record, committed with the group's offsets")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        return run_worker(*argv[1:6])
    bootstrap = argv[0] if argv else os.environ.get("KCLIENT_BOOTSTRAP")
    if bootstrap:
        demo(bootstrap)
        return 0
    from kclient.testing import BrokerProcess

    with BrokerProcess(properties={"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}) as broker:
        demo(broker.bootstrap)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
