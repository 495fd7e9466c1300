"""A topic's ``message.timestamp.type`` given at creation through the API
(CreateTopics, stored in ZooKeeper's ``/config/topics/<topic>``) applies to
what the broker writes, as on Apache Kafka. Found by the conformance suite
(tests/conformance/test_producer.py): the bundled broker read the format
from ``topic.config.file`` only and kept the record's CreateTime."""

from __future__ import annotations

import time
import uuid

from helpers.wait import wait_for

from kclient import AdminClient, FetchRequest, NewTopic, Producer, ProducerData, SimpleConsumer


def test_log_append_time_from_create_topics(zk_broker):
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": zk_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})])
        wait_for(lambda: all(p.leader >= 0 for p in admin.describe_topics([topic])[topic].partitions), "a leader")
    before = int(time.time() * 1000)
    with Producer({"bootstrap.servers": zk_broker.bootstrap, "request.required.acks": -1}) as producer:
        [future] = producer.send_with_result(ProducerData(topic, b"k", [b"v"], partition=0, timestamp_ms=1_000))
        metadata = future.result(timeout=30)
    host, port = zk_broker.bootstrap.rsplit(":", 1)
    with SimpleConsumer(host, int(port), so_timeout_ms=10_000, buffer_size=1 << 16, client_id="lat") as consumer:
        [m] = list(consumer.fetch(FetchRequest(topic, 0, 0)))
    assert metadata.timestamp >= before
    assert m.message.timestamp == metadata.timestamp
