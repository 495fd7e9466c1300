"""Driving the real peer clients, kafka-python and confluent-kafka
(librdkafka), against the bundled broker: produce records and learn where
each one went, read records back with assign() (no consumer group).

Records are ``(key, value, headers)`` tuples, headers a sequence of
``(name, value)`` pairs; an empty sequence is sent as no headers at all
(``None``), which the old message formats (v0/v1, no headers) need.
Records read back are ``(partition, offset, key, value, headers)`` tuples,
headers a tuple of ``(name, value)`` pairs.

Every loop ends at a deadline, ``deadline`` seconds after the phase
starts; each test module passes its own budget.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable

import confluent_kafka

with warnings.catch_warnings():
    # kafka-python 3.0 loads its schemas with importlib.resources' legacy
    # (deprecated) API; that is its business, not a finding of these tests.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka


# ---------------------------------------------------------------- kafka-python


def kp_produce(bootstrap: str, topic: str, records, *, deadline: float, compression: str = "none", **extra) -> list[tuple[int, int]]:
    """Produce ``records`` with kafka-python's KafkaProducer (idempotent by
    default from kafka-python 3 when the broker is new enough) and return
    the (partition, offset) of each record, in order.

    ``extra`` goes to KafkaProducer as is (e.g. ``api_version=(0, 9)`` for
    an old Produce version and message format)."""
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if compression == "none" else compression,
        request_timeout_ms=10000,
        linger_ms=5,
        **extra,
    )
    try:
        futures = [producer.send(topic, key=k, value=v, headers=list(h) or None) for k, v, h in records]
        producer.flush(timeout=deadline)
        return [(m.partition, m.offset) for m in (f.get(timeout=deadline) for f in futures)]
    finally:
        producer.close(timeout=10)


def kp_consume(bootstrap: str, topic: str, n: int, *, deadline: float, partitions: Iterable[int] | None = None, **extra) -> list[tuple]:
    """Read up to ``n`` records of ``topic`` from the beginning with
    kafka-python's KafkaConsumer (assign + seek_to_beginning, no group,
    nothing committed), until ``n`` are read or the deadline passes.

    ``partitions``: the partitions to read; None asks the client for the
    topic's partitions (metadata) and reads them all. ``extra`` goes to
    KafkaConsumer as is (e.g. ``api_version=(0, 10)`` for an old Fetch)."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10000, **extra)
    try:
        end = time.monotonic() + deadline
        if partitions is None:
            while not partitions and time.monotonic() < end:
                partitions = consumer.partitions_for_topic(topic)
            assert partitions, f"kafka-python sees no partitions for {topic}"
        consumer.assign([kafka.TopicPartition(topic, p) for p in sorted(partitions)])
        consumer.seek_to_beginning()
        got: list[tuple] = []
        while len(got) < n and time.monotonic() < end:
            for tp, batch in consumer.poll(timeout_ms=500).items():
                for r in batch:
                    got.append((tp.partition, r.offset, r.key, r.value, tuple((k, v) for k, v in (r.headers or ()))))
        return got
    finally:
        consumer.close()


# ---------------------------------------------------------------- confluent-kafka


def ck_produce(
    bootstrap: str,
    topic: str,
    records,
    *,
    deadline: float,
    compression: str = "none",
    linger_ms: int = 5,
    idempotent: bool = False,
    config: dict | None = None,
) -> list[tuple[int, int]]:
    """Produce ``records`` with confluent-kafka's Producer and return the
    (partition, offset) of each record, in order, from the delivery
    reports. Fails on any delivery error or record left undelivered.

    ``linger_ms`` and ``idempotent`` set ``linger.ms`` and
    ``enable.idempotence``; ``config`` adds or overrides librdkafka
    properties (e.g. ``broker.version.fallback``, ``log_level``)."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": compression,
            "linger.ms": linger_ms,
            "enable.idempotence": idempotent,
            **(config or {}),
        }
    )
    results: dict[int, tuple[int, int]] = {}
    errors = []

    def delivered(i):
        def callback(err, msg):
            if err is not None:
                errors.append(err)
            else:
                results[i] = (msg.partition(), msg.offset())

        return callback

    for i, (k, v, h) in enumerate(records):
        producer.produce(topic, key=k, value=v, headers=list(h) or None, on_delivery=delivered(i))
        producer.poll(0)
    left = producer.flush(deadline)
    assert left == 0, f"{left} records not delivered"
    assert not errors, errors
    return [results[i] for i in range(len(records))]


def ck_consume(bootstrap: str, topic: str, n: int, *, deadline: float, partitions: Iterable[int], into: list | None = None) -> list[tuple]:
    """Read up to ``n`` records of ``topic`` from offset 0 of each of
    ``partitions`` with confluent-kafka's Consumer (assign with explicit
    offsets; group.id is required by the client but no group protocol is
    used and nothing is committed or stored), until ``n`` are read or the
    deadline passes. Fails on any error the consumer reports.

    ``into``: a list the records are appended to as they are read (and
    returned), for another thread to watch the progress."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"interop-{topic}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
        got: list[tuple] = [] if into is None else into
        end = time.monotonic() + deadline
        while len(got) < n and time.monotonic() < end:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ())))
        return got
    finally:
        consumer.close()
