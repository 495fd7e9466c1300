"""confluent-kafka (librdkafka) and kafka-python against the bundled broker,
and kclient in between: records go confluent-kafka -> kclient and
kclient -> kafka-python, each with keys, headers and compression.

The peers read with ``assign()`` (explicit partitions and offsets): the
bundled broker has no group coordinator yet, so ``subscribe()`` with a
``group.id`` does not get partitions. Interoperability guide:
docs/guides/interoperability.md.

    python examples/peers.py 127.0.0.1:9092       # or KCLIENT_BOOTSTRAP=...

Needs ``pip install confluent-kafka kafka-python`` (kclient's ``test``
extra). Without an address it starts a bundled broker.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
import warnings

import confluent_kafka

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's own use of importlib.resources
    import kafka

from kclient import FetchRequest, Producer, ProducerData, SimpleConsumer

RECORDS = 100


def confluent_to_kclient(bootstrap: str, topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5})
    delivered = []
    for i in range(RECORDS):
        producer.produce(topic, key=b"ck", value=f"from librdkafka {i}".encode(), headers=[("n", str(i).encode())], partition=0,
                         on_delivery=lambda err, msg: delivered.append(err or msg.offset()))
    assert producer.flush(30) == 0
    assert delivered == list(range(RECORDS)), delivered[:3]

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with SimpleConsumer(host, int(port), so_timeout_ms=10_000) as consumer:
        got = consumer.fetch(FetchRequest(topic, 0, 0, 1 << 20)).messages()
    assert [m.message.payload for m in got] == [f"from librdkafka {i}".encode() for i in range(RECORDS)]
    assert got[7].message.headers[0].key == "n" and got[7].message.headers[0].value == b"7"
    print(f"confluent-kafka -> kclient: {len(got)} records (lz4, headers)")


def kclient_to_kafka_python(bootstrap: str, topic: str) -> None:
    config = {"bootstrap.servers": bootstrap, "compression.type": "snappy", "producer.type": "async"}
    with Producer(config) as producer:
        for i in range(RECORDS):
            producer.send(ProducerData(topic, key=b"kc", messages=[f"from kclient {i}".encode()], partition=0, headers=[("n", str(i).encode())]))

    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10_000)
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = []
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got += batch
    finally:
        consumer.close()
    assert [r.value for r in got] == [f"from kclient {i}".encode() for i in range(RECORDS)]
    assert got[3].key == b"kc" and got[3].headers == [("n", b"3")]
    print(f"kclient -> kafka-python: {len(got)} records (snappy, headers)")


def main(bootstrap: str) -> None:
    run = uuid.uuid4().hex[:8]
    confluent_to_kclient(bootstrap, f"from-confluent-{run}")
    kclient_to_kafka_python(bootstrap, f"to-kafka-python-{run}")
    print("OK: records crossed between the clients unchanged")


if __name__ == "__main__":
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KCLIENT_BOOTSTRAP")
    if address:
        main(address)
    else:
        from kclient.testing import BrokerProcess

        with BrokerProcess() as broker:
            main(broker.bootstrap)
