"""A topic's compression.type: the broker stores batches in that codec
(``uncompressed``: none; ``producer``: as sent), recompressing what the
producer sent, as Apache Kafka's LogValidator does. Found by
tests/conformance/test_producer.py: the bundled broker kept the producer's
codec whatever the topic said."""

from __future__ import annotations

import uuid

import pytest
from helpers.wait import wait_for

from kclient import AdminClient, FetchRequest, NewTopic, Producer, ProducerData, SimpleConsumer
from kclient.broker.convert import prepare_append
from kclient.client.admin import AlterConfigOp, ConfigResource
from kclient.protocol.records import codecs, v2


@pytest.mark.unit
def test_prepare_append_recompresses_and_keeps_the_producer_state():
    batch = v2.build_batch([(b"k", b"a" * 100, 5, [("h", b"1")]), (None, None, 6)], codec=codecs.LZ4, producer_id=7, producer_epoch=2, base_sequence=40)
    prepared = prepare_append(batch, produce_version=8, codec=codecs.ZSTD)
    header = v2.read_header(prepared.records)
    assert (header.codec, header.producer_id, header.producer_epoch, header.base_sequence, header.records_count) == (codecs.ZSTD, 7, 2, 40, 2)
    assert prepared.converted
    rows = v2.decode_records(prepared.records)
    assert [(o, ts, k, v, [(h.key, h.value) for h in hs]) for o, ts, k, v, hs in rows] == [(0, 5, b"k", b"a" * 100, [("h", b"1")]), (1, 6, None, None, [])]
    same = prepare_append(batch, produce_version=8, codec=codecs.LZ4)
    assert bytes(same.records) == batch and not same.converted
    assert bytes(prepare_append(batch, produce_version=8).records) == batch


def stored_codec(broker, topic: str, offset: int) -> int:
    host, port = broker.bootstrap.rsplit(":", 1)
    with SimpleConsumer(host, int(port), client_id="codec") as consumer:
        return v2.read_header(bytes(consumer.fetch(FetchRequest(topic, 0, offset)).buffer)).codec


def test_topic_codec_on_the_broker(broker):
    topic = f"codec-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "gzip"})])
        with Producer({"bootstrap.servers": broker.bootstrap, "request.required.acks": 1, "compression.type": "snappy"}) as producer:
            producer.send(ProducerData(topic, b"k", [b"v0"], partition=0))
            assert stored_codec(broker, topic, 0) == codecs.GZIP
            resource = ConfigResource("topic", topic)
            admin.incremental_alter_configs({resource: [AlterConfigOp("compression.type", "uncompressed")]})
            wait_for(lambda: admin.describe_configs([resource])[resource]["compression.type"].value == "uncompressed", "compression.type=uncompressed")
            producer.send(ProducerData(topic, b"k", [b"v1"], partition=0))
            assert stored_codec(broker, topic, 1) == codecs.NONE
