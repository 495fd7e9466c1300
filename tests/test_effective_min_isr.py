"""min.insync.replicas above a topic's replica count is capped at that
count, as Apache Kafka's Partition.effectiveMinIsr does (3.9 and 4.x): a
one-replica topic with min.insync.replicas=2 takes acks=-1 writes. Found by
tests/conformance/test_producer.py: the bundled broker refused them with
NOT_ENOUGH_REPLICAS."""

from __future__ import annotations

import uuid

from kclient import AdminClient, NewTopic, Producer, ProducerData


def test_min_isr_above_replication_factor(broker):
    topic = f"minisr-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, config={"min.insync.replicas": "2"})])
    with Producer({"bootstrap.servers": broker.bootstrap, "request.required.acks": -1, "message.send.max.retries": 0}) as producer:
        [future] = producer.send_with_result(ProducerData(topic, b"k", [b"v"], partition=0))
        assert future.result(timeout=30).offset == 0
