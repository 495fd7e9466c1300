"""The Producer against every target: sync and async, every codec, keys,
headers, the default partitioner (where Kafka's own Java producer puts the
same keys), acks 0/1/-1, idempotence, and the delivery results (partition,
offset, timestamp) the broker's answers give."""

from __future__ import annotations

import pytest

from conformance.client_support import create_topic, read_partition, read_topic, simple_consumer, unique_topic, wait_for_log_end
from kclient import (
    FailedToSendMessageError,
    FetchRequest,
    MessageSizeTooLargeError,
    Producer,
    ProducerData,
    RecordMetadata,
)
from kclient.client.producer.partitioner import murmur2, to_positive
from kclient.protocol.records import v2
from kclient.testing import kafka_tool

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KEYS = [f"key-{i}".encode() for i in range(24)]


def java_partition(key: bytes, partitions: int) -> int:
    """Kafka's Java default partitioner for a keyed record
    (``BuiltInPartitioner.partitionForKey``: toPositive(murmur2(key)) % n)."""
    return to_positive(murmur2(key)) % partitions


@pytest.mark.parametrize("producer_type", ["sync", "async"])
@pytest.mark.parametrize("codec", CODECS)
def test_codecs_keys_headers_round_trip(target, producer_type, codec):
    topic = create_topic(target, unique_topic(f"p-{codec}"), partitions=1)
    conf = {
        "bootstrap.servers": target.bootstrap,
        "producer.type": producer_type,
        "compression.type": codec,
        "request.required.acks": -1,
        "queue.buffering.max.ms": 10,
    }
    headers = (("trace", b"t-1"), ("empty", b""), ("null", None))
    with Producer(conf) as producer:
        producer.send(
            [
                ProducerData(topic, b"k1", [b"v0", b"v1" * 500], partition=0, headers=headers),
                ProducerData(topic, None, [b"v2"], partition=0),
                ProducerData(topic, b"k3", [None], partition=0),
            ]
        )
        producer.flush()
    found = read_topic(target, topic, 1)[0]
    assert found == [
        (0, b"k1", b"v0", headers),
        (1, b"k1", b"v1" * 500, headers),
        (2, None, b"v2", ()),
        (3, b"k3", None, ()),
    ]


def test_default_partitioner_matches_java_producer(target):
    """kclient and Kafka's own console producer (Java client, default
    partitioner) put every key in the same partition, the murmur2 one."""
    partitions = 5
    kclient_topic = create_topic(target, unique_topic("p-part-kc"), partitions=partitions)
    java_topic = create_topic(target, unique_topic("p-part-java"), partitions=partitions)
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": -1}) as producer:
        for key in KEYS:
            producer.send(ProducerData(kclient_topic, key, [b"kclient-" + key]))
    kafka_tool(
        "kafka-console-producer",
        "--bootstrap-server", target.bootstrap,
        "--topic", java_topic,
        "--property", "parse.key=true",
        "--property", "key.separator=:",
        "--producer-property", "acks=all",
        release=target.release or "4",
        input="".join(f"{k.decode()}:java-{k.decode()}\n" for k in KEYS),
    )  # fmt: skip

    def placement(topic):
        return {key: p for p, records in read_topic(target, topic, partitions).items() for _, key, _, _ in records}

    kclient_placement = placement(kclient_topic)
    java_placement = placement(java_topic)
    expected = {key: java_partition(key, partitions) for key in KEYS}
    assert kclient_placement == expected
    assert java_placement == expected
    assert len(set(expected.values())) == partitions  # the keys do spread


@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("producer_type", ["sync", "async"])
def test_acks_and_delivery_results(target, acks, producer_type):
    # Records stamped in 2023: no retention, or Kafka's check may delete them.
    topic = create_topic(target, unique_topic("p-acks"), partitions=2, config={"retention.ms": "-1"})
    conf = {"bootstrap.servers": target.bootstrap, "producer.type": producer_type, "request.required.acks": acks, "queue.buffering.max.ms": 10}
    with Producer(conf) as producer:
        first = producer.send_with_result([ProducerData(topic, b"a", [b"a0", b"a1", b"a2"], partition=0, timestamp_ms=1_700_000_000_000)])
        second = producer.send_with_result([ProducerData(topic, b"bb", [b"b0"], partition=1, timestamp_ms=1_700_000_000_001)])
        producer.flush()
        results = [f.result(timeout=30) for f in first + second]
    known = acks != 0
    assert results == [
        RecordMetadata(topic, 0, 0 if known else -1, 1_700_000_000_000, 1, 2),
        RecordMetadata(topic, 0, 1 if known else -1, 1_700_000_000_000, 1, 2),
        RecordMetadata(topic, 0, 2 if known else -1, 1_700_000_000_000, 1, 2),
        RecordMetadata(topic, 1, 0 if known else -1, 1_700_000_000_001, 2, 2),
    ]
    wait_for_log_end(target, topic, 0, 3)
    wait_for_log_end(target, topic, 1, 1)
    assert read_topic(target, topic, 2) == {0: [(0, b"a", b"a0", ()), (1, b"a", b"a1", ()), (2, b"a", b"a2", ())], 1: [(0, b"bb", b"b0", ())]}


def test_delivery_callbacks_and_offsets_continue(target):
    topic = create_topic(target, unique_topic("p-cb"), partitions=1)
    seen: list = []
    with Producer({"bootstrap.servers": target.bootstrap, "producer.type": "async", "request.required.acks": 1, "queue.buffering.max.ms": 10}) as producer:
        for batch in range(3):
            producer.send(ProducerData(topic, b"k", [f"{batch}-{i}".encode() for i in range(4)], partition=0), callback=lambda md, exc: seen.append((md, exc)))
            producer.flush()
    assert [exc for _, exc in seen] == [None] * 12
    assert [(md.partition, md.offset) for md, _ in seen] == [(0, i) for i in range(12)]


def test_log_append_time_in_delivery_results(target):
    """A LogAppendTime topic: the delivery result carries the broker's
    time, the same one a fetch returns, not the record's CreateTime."""
    topic = create_topic(target, unique_topic("p-lat"), partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": -1}) as producer:
        [future] = producer.send_with_result(ProducerData(topic, b"k", [b"v"], partition=0, timestamp_ms=1_000))
        metadata = future.result(timeout=30)
    with simple_consumer(target) as consumer:
        [m] = list(consumer.fetch(FetchRequest(topic, 0, 0)))
    assert metadata.offset == 0
    assert metadata.timestamp != 1_000
    assert m.message.timestamp == metadata.timestamp


@pytest.mark.parametrize("producer_type", ["sync", "async"])
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_idempotent_producer(target, producer_type, codec):
    topic = create_topic(target, unique_topic("p-idem"), partitions=2)
    conf = {
        "bootstrap.servers": target.bootstrap,
        "producer.type": producer_type,
        "enable.idempotence": True,
        "request.required.acks": -1,
        "compression.type": codec,
        "queue.buffering.max.ms": 10,
        "batch.num.messages": 5,
    }
    with Producer(conf) as producer:
        futures = []
        for i in range(20):
            futures += producer.send_with_result(ProducerData(topic, f"k{i % 2}".encode(), [f"v{i}".encode()], partition=i % 2))
        producer.flush()
        results = [f.result(timeout=30) for f in futures]
    assert [(r.partition, r.offset) for r in results] == [(i % 2, i // 2) for i in range(20)]
    found = read_topic(target, topic, 2)
    assert found == {p: [(i // 2, f"k{p}".encode(), f"v{i}".encode(), ()) for i in range(p, 20, 2)] for p in (0, 1)}


def test_message_too_large_is_the_same_error(target):
    topic = create_topic(target, unique_topic("p-big"), partitions=1, config={"max.message.bytes": "1000"})
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": 1, "message.send.max.retries": 0}) as producer:
        [future] = producer.send_with_result(ProducerData(topic, b"k", [b"x" * 5000], partition=0))
        with pytest.raises(FailedToSendMessageError) as failed:
            future.result(timeout=30)
    assert type(failed.value.__cause__) is MessageSizeTooLargeError
    assert failed.value.__cause__.code == 10


def test_partition_the_topic_lacks_fails_in_the_client(target):
    """A partition the topic lacks fails before anything is sent, the same
    way whatever the broker (the producer checks it against the metadata)."""
    topic = create_topic(target, unique_topic("p-nopart"), partitions=1)
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": 1, "message.send.max.retries": 0}) as producer:
        [future] = producer.send_with_result(ProducerData(topic, b"k", [b"v"], partition=7))
        with pytest.raises(FailedToSendMessageError) as failed:
            future.result(timeout=30)
    assert type(failed.value.__cause__) is ValueError
    assert "names partition 7" in str(failed.value.__cause__)
    with simple_consumer(target) as consumer:
        assert read_partition(consumer, topic, 0) == []


def test_min_insync_replicas_above_the_replica_count(target):
    """min.insync.replicas=2 on a 1-replica topic: Kafka caps it at the
    replica count (Partition.effectiveMinIsr), so acks=-1 is written."""
    topic = create_topic(target, unique_topic("p-minisr"), partitions=1, config={"min.insync.replicas": "2"})
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": -1, "message.send.max.retries": 0}) as producer:
        [future] = producer.send_with_result(ProducerData(topic, b"k", [b"all"], partition=0))
        assert future.result(timeout=30).offset == 0
    assert read_topic(target, topic, 1) == {0: [(0, b"k", b"all", ())]}


def test_empty_key_and_value_are_not_null(target):
    topic = create_topic(target, unique_topic("p-empty"), partitions=1)
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": 1}) as producer:
        [future] = producer.send_with_result(ProducerData(topic, b"", [b""], partition=0))
        assert (future.result(timeout=30).serialized_key_size, future.result().serialized_value_size) == (0, 0)
    assert read_topic(target, topic, 1) == {0: [(0, b"", b"", ())]}


def test_record_timestamp_far_in_the_future(target):
    """A CreateTime two hours ahead of the broker's clock: Kafka 4.0 made
    message.timestamp.after.max.ms default to one hour (KIP-1030) and
    refuses it with INVALID_TIMESTAMP (32); Kafka 3.9 (default unbounded,
    KIP-937) and the bundled broker (no such bound) write it."""
    import time

    from kclient.errors import InvalidTimestampError

    topic = create_topic(target, unique_topic("p-future"), partitions=1)
    future_ms = int(time.time() * 1000) + 2 * 3600 * 1000
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": 1, "message.send.max.retries": 0}) as producer:
        [future] = producer.send_with_result(ProducerData(topic, b"k", [b"v"], partition=0, timestamp_ms=future_ms))
        error = future.exception(timeout=30)
    if target.name == "kafka-4":
        assert type(error) is FailedToSendMessageError
        assert type(error.__cause__) is InvalidTimestampError
        assert error.__cause__.code == 32
        assert read_topic(target, topic, 1) == {0: []}
    else:
        assert error is None
        assert future.result().timestamp == future_ms
        assert read_topic(target, topic, 1) == {0: [(0, b"k", b"v", ())]}


@pytest.mark.parametrize("topic_codec,producer_codec", [("gzip", "none"), ("zstd", "lz4"), ("uncompressed", "snappy"), ("producer", "gzip")])
def test_topic_compression_type(target, topic_codec, producer_codec):
    """The topic's compression.type: the broker recompresses what the
    producer sent (or keeps it, ``producer``); the records are the same."""
    topic = create_topic(target, unique_topic("p-topic-codec"), partitions=1, config={"compression.type": topic_codec})
    conf = {"bootstrap.servers": target.bootstrap, "request.required.acks": -1, "compression.type": producer_codec}
    with Producer(conf) as producer:
        producer.send(ProducerData(topic, b"k", [b"a" * 300, b"b", None], partition=0, headers=[("h", b"1")]))
    assert read_topic(target, topic, 1) == {0: [(0, b"k", b"a" * 300, (("h", b"1"),)), (1, b"k", b"b", (("h", b"1"),)), (2, b"k", None, (("h", b"1"),))]}
    with simple_consumer(target) as consumer:
        [header] = [v2.read_header(bytes(consumer.fetch(FetchRequest(topic, 0, 0)).buffer))]
    stored = producer_codec if topic_codec == "producer" else "none" if topic_codec == "uncompressed" else topic_codec
    assert header.codec == CODECS.index(stored)
