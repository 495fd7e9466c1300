"""Every target serves: a record produced with kclient over each listener
comes back with its key, value and offset."""

from __future__ import annotations

import uuid

import pytest

from kclient import FetchRequest, Producer, ProducerData, SimpleConsumer


@pytest.mark.parametrize("listener,mechanism", [("PLAINTEXT", None), ("SSL", None), ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512")])
def test_produce_and_fetch_on_every_listener(target, listener, mechanism):
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    conf = target.client_properties(listener, mechanism) | {"request.required.acks": -1, "producer.type": "sync"}
    with Producer(conf) as producer:
        producer.send(ProducerData(topic, b"k", [b"v0", b"v1"]))
    found = []
    with SimpleConsumer(target.host, target.port, so_timeout_ms=10_000, buffer_size=1 << 16, client_id="smoke") as consumer:
        for partition in range(2):
            found += [(m.offset, m.message.key, m.message.payload) for m in consumer.fetch(FetchRequest(topic, partition, 0, 1 << 20))]
    assert found == [(0, b"k", b"v0"), (1, b"k", b"v1")]
