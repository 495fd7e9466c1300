"""The Producer (sync and async), TrioProducer, EventHandler and
CallbackHandler against a real bundled broker subprocess.

Every test reads what it produced back with the SimpleConsumer and checks
exact keys, values and partitions. Flush triggers are checked by counting
messages per batch, never by wall time; the queue is filled
deterministically by holding the send thread on a threading.Event.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import plugins_for_tests as plugins
import pytest
import trio
from helpers.examples import examples
from helpers.records import partition_messages
from helpers.wait import wait_for
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kclient.client.consumer.simple import FetchRequest, SimpleConsumer
from kclient.client.producer.batching import BatchBuilder, PartitionSend, v2_record_size
from kclient.client.producer.callbacks import CallbackHandler
from kclient.client.producer.core import TrioProducer
from kclient.client.producer.producer import Producer, ProducerData
from kclient.client.producer.queue import MessageQueue
from kclient.client.producer.settings import ProducerSettings
from kclient.config import ProducerConfig
from kclient.errors import (
    FailedToSendMessageError,
    InvalidTopicError,
    KafkaConnectionError,
    MessageSizeTooLargeError,
    NoBrokersAvailableError,
    ProducerClosedError,
    QueueFullError,
)
from kclient.protocol.records import build_batch
from kclient.testing import BrokerProcess

PLUGINS = plugins.__name__
#: Partitions of auto-created topics on this module's own broker.
PARTITIONS = 5


@pytest.fixture(scope="module")
def broker5():
    """A broker whose auto-created topics get 5 partitions (so partition
    choices are checked over more than two partitions)."""
    with BrokerProcess(properties={"num.partitions": PARTITIONS}) as proc:
        yield proc


# -- helpers -------------------------------------------------------------------


def read_partition(broker, topic, partition):
    """Every record of ``topic``/``partition`` as (offset, key, value, timestamp)."""
    return [(m.offset, m.message.key, m.message.payload, m.message.timestamp) for m in partition_messages(broker, topic, partition)]


def read_topic(broker, topic, partitions):
    """{partition: [(key, value), ...]} over ``partitions`` partitions."""
    return {p: [(k, v) for _, k, v, _ in read_partition(broker, topic, p)] for p in range(partitions)}


def all_records(by_partition):
    return [kv for p in sorted(by_partition) for kv in by_partition[p]]


def kafka_python_partition(key: bytes, n: int) -> int:
    """What kafka-python's DefaultPartitioner picks for ``key``."""
    return (kafka_python_murmur2(key) & 0x7FFFFFFF) % n


def config(broker, **props):
    base = {"metadata.broker.list": broker.bootstrap, "retry.backoff.ms": 20}
    base.update({k.replace("_", "."): v for k, v in props.items()})
    return base


def async_config(broker, **props):
    return config(broker, producer_type="async", **props)


def producer_threads():
    return [t for t in threading.enumerate() if t.name.startswith("kclient-producer-")]


# -- sync mode -------------------------------------------------------------------


@pytest.mark.parametrize("acks", [1, -1, 0])
def test_sync_send_lands_where_murmur2_says(broker5, topic, acks):
    keys = [f"user-{i}".encode() for i in range(40)]
    data = [ProducerData(topic, key=k, messages=[k + b"-a", k + b"-b"]) for k in keys]
    with Producer(config(broker5, request_required_acks=acks)) as producer:
        assert producer.producer_type == "sync"
        producer.send(data)
        producer.send(ProducerData(topic, key=b"single", messages=[b"one"]))
        assert producer.statistics().sent_messages == 81
    expected = {p: [] for p in range(PARTITIONS)}
    for k in keys:
        expected[kafka_python_partition(k, PARTITIONS)] += [(k, k + b"-a"), (k, k + b"-b")]
    expected[kafka_python_partition(b"single", PARTITIONS)].append((b"single", b"one"))
    if acks == 0:  # the broker may still be appending
        wait_for(lambda: read_topic(broker5, topic, PARTITIONS) == expected, "every record in the log", timeout=15)
    got = read_topic(broker5, topic, PARTITIONS)
    assert got == expected
    assert len({p for p, recs in got.items() if recs}) > 1


@pytest.mark.parametrize("mode", ["sync", "trio", "async"])
def test_socket_busy_poll_us_polls_sync_sends_only(broker5, topic, mode, monkeypatch):
    """socket.busy.poll.us: each acknowledgement a sync send (Producer in
    sync mode, TrioProducer.send) waits for is first polled for, with the
    configured budget, and the records land as without it; async mode
    never polls. With a 30 s budget a loopback broker always answers
    within it, so every poll ends with the response's bytes."""
    from kclient.net.connection import BrokerConnection

    polls: list[tuple[float, bool]] = []
    original = BrokerConnection._busy_wait_readable

    def counting(self, seconds):
        got = original(self, seconds)
        polls.append((seconds, got))
        return got

    monkeypatch.setattr(BrokerConnection, "_busy_wait_readable", counting)
    keys = [f"k{i}".encode() for i in range(12)]
    props = {"socket_busy_poll_us": 30_000_000}
    if mode == "sync":
        with Producer(config(broker5, **props)) as producer:
            for k in keys:
                producer.send(ProducerData(topic, key=k, messages=[k + b"-v"]))
    elif mode == "trio":

        async def main():
            async with TrioProducer(config(broker5, **props)) as producer:
                for k in keys:
                    await producer.send(ProducerData(topic, key=k, messages=[k + b"-v"]))

        trio.run(main)
    else:
        with Producer(async_config(broker5, queue_buffering_max_ms=1, **props)) as producer:
            for k in keys:
                producer.send(ProducerData(topic, key=k, messages=[k + b"-v"]))
    expected = {p: [] for p in range(PARTITIONS)}
    for k in keys:
        expected[kafka_python_partition(k, PARTITIONS)].append((k, k + b"-v"))
    assert read_topic(broker5, topic, PARTITIONS) == expected
    if mode == "async":
        assert polls == []
    else:
        # one Produce request per send, each polled until its response came
        assert len(polls) == len(keys)
        assert polls == [(30.0, True)] * len(keys)


def test_socket_busy_poll_us_is_off_by_default_and_checked(broker, topic, monkeypatch):
    from kclient.errors import ConfigError
    from kclient.net.connection import BrokerConnection

    polls = []
    monkeypatch.setattr(BrokerConnection, "_busy_wait_readable", lambda self, seconds: polls.append(seconds) or False)
    with Producer(config(broker)) as producer:
        producer.send(ProducerData(topic, messages=[b"x"]))
    assert polls == []
    assert ProducerConfig.from_properties({"metadata.broker.list": "h:1"}).socket_busy_poll_us == 0
    assert ProducerConfig.from_properties({"metadata.broker.list": "h:1", "socket.busy.poll.us": "150"}).socket_busy_poll_us == 150
    with pytest.raises(ConfigError, match="socket.busy.poll.us"):
        ProducerConfig.from_properties({"metadata.broker.list": "h:1", "socket.busy.poll.us": "-1"})


def test_sync_null_keys_and_values(broker, topic):
    with Producer(config(broker)) as producer:
        producer.send([ProducerData(topic, messages=[b"no key", None]) for _ in range(10)])
    records = all_records(read_topic(broker, topic, 2))
    assert sorted(records, key=repr) == sorted([(None, b"no key"), (None, None)] * 10, key=repr)


def test_sync_timestamps_are_send_time(broker, topic):
    before = time.time_ns() // 1_000_000
    with Producer(config(broker)) as producer:
        producer.send(ProducerData(topic, key=b"k", messages=[b"v"]))
        producer.send(ProducerData(topic, key=b"k", messages=[b"w"], timestamp_ms=1_600_000_000_000))
    after = time.time_ns() // 1_000_000
    recs = [r for p in range(2) for r in read_partition(broker, topic, p)]
    stamps = {v: ts for _, _, v, ts in recs}
    assert before <= stamps[b"v"] <= after
    assert stamps[b"w"] == 1_600_000_000_000


def test_sync_large_send_is_split_and_stays_in_order(broker, topic):
    # ~3 MB for one partition: more than max.request.size (1 MiB), so several
    # batches and requests; order within the partition must hold.
    values = [b"%06d" % i + b"x" * 20_000 for i in range(150)]
    with Producer(config(broker, partitioner_class=f"{PLUGINS}.LastPartitioner")) as producer:
        producer.send(ProducerData(topic, key=b"k", messages=values))
    got = read_topic(broker, topic, 2)
    assert got[0] == []
    assert [v for _, v in got[1]] == values


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_sync_compressed(broker, topic, codec):
    values = [b"compress me %d " % i * 10 for i in range(200)]
    with Producer(config(broker, compression_codec=codec, partitioner_class=f"{PLUGINS}.LastPartitioner")) as producer:
        producer.send(ProducerData(topic, key=b"k", messages=values))
    assert [v for _, v in read_topic(broker, topic, 2)[1]] == values


def test_sync_record_larger_than_max_request_size(broker, topic):
    with Producer(config(broker, max_request_size=10_000)) as producer:
        with pytest.raises(FailedToSendMessageError, match=topic) as info:
            producer.send(ProducerData(topic, key=b"k", messages=[b"x" * 20_000]))
    assert isinstance(info.value.__cause__, MessageSizeTooLargeError)
    assert info.value.lost_messages == 1


def test_sync_broker_rejects_too_large_batch(broker, topic):
    # The broker's message.max.bytes is ~1 MiB; the producer allows 4 MiB.
    with Producer(config(broker, max_request_size=4 << 20, partitioner_class=f"{PLUGINS}.LastPartitioner")) as producer:
        with pytest.raises(FailedToSendMessageError) as info:
            producer.send(ProducerData(topic, key=b"k", messages=[b"y" * (2 << 20)]))
        producer.send(ProducerData(topic, key=b"k", messages=[b"small"]))
    assert isinstance(info.value.__cause__, MessageSizeTooLargeError)
    assert f"{topic}-1" in str(info.value)
    assert read_topic(broker, topic, 2)[1] == [(b"k", b"small")]


def test_custom_partitioner_and_encoders_by_class_path(broker5, topic):
    props = config(
        broker5,
        partitioner_class=f"{PLUGINS}.KeyDigitPartitioner",
        serializer_class=f"{PLUGINS}.UpperStringEncoder",
        key_serializer_class=f"{PLUGINS}.PrefixKeyEncoder",
    )
    with Producer(props) as producer:
        core = producer.trio_producer
        assert isinstance(core.partitioner, plugins.KeyDigitPartitioner)
        assert isinstance(core.encoder, plugins.UpperStringEncoder)
        assert isinstance(core.key_encoder, plugins.PrefixKeyEncoder)
        assert isinstance(core.key_encoder.config, ProducerConfig)
        producer.send([ProducerData(topic, key=f"k{i}", messages=[f"hello {i}", f"bye {i}"]) for i in range(7)])
    got = read_topic(broker5, topic, PARTITIONS)
    for i in range(7):
        assert (f"key:k{i}".encode(), f"HELLO {i}".encode()) in got[i % PARTITIONS]
        assert (f"key:k{i}".encode(), f"BYE {i}".encode()) in got[i % PARTITIONS]
    assert sum(len(v) for v in got.values()) == 14


def test_partitioner_out_of_range_is_a_clear_error(broker, topic):
    with Producer(config(broker, partitioner_class=f"{PLUGINS}.OutOfRangePartitioner")) as producer:
        with pytest.raises(FailedToSendMessageError, match=r"OutOfRangePartitioner returned 9 .* 2 partitions"):
            producer.send(ProducerData(topic, key=b"k", messages=[b"v"]))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_explicit_partition_and_headers(broker5, topic, mode):
    sent = [
        ProducerData(topic, key=b"k%d" % i, messages=[b"v%d" % i], partition=(i * 3) % PARTITIONS, headers=[("i", b"%d" % i), ("none", None)] if i % 2 else ())
        for i in range(20)
    ]
    with Producer(config(broker5, producer_type=mode)) as producer:
        producer.send(sent)
    with SimpleConsumer("127.0.0.1", broker5.port, 10000, 1 << 20, "test-reader") as consumer:
        for p in range(PARTITIONS):
            got = [(m.message.key, m.message.payload, tuple((h.key, h.value) for h in m.message.headers)) for m in consumer.fetch(FetchRequest(topic, p, 0, 1 << 20))]
            want = [(d.key, d.messages[0], tuple(d.headers)) for d in sent if d.partition == p]
            assert got == want  # the partition the data named, not the key's hash; headers kept


def test_explicit_partition_out_of_range_is_a_clear_error(broker, topic):
    with Producer(config(broker)) as producer:
        with pytest.raises(FailedToSendMessageError, match="ProducerData names partition 5 .* 2 partitions"):
            producer.send(ProducerData(topic, messages=[b"v"], partition=5))
    assert all_records(read_topic(broker, topic, 2)) == []


def test_headers_on_an_old_message_format_are_refused(broker, topic):
    with Producer(config(broker, api_version="0.10.0")) as producer:
        with pytest.raises(FailedToSendMessageError, match="headers"):
            producer.send(ProducerData(topic, messages=[b"v"], headers=[("h", b"1")], partition=0))
    assert all_records(read_topic(broker, topic, 2)) == []


def test_big_headers_count_toward_the_request_size(broker, topic):
    # 30 records of 40 KB headers each: about 1.2 MB, over one request
    # (max.request.size 1 MB), so the batch must be split, headers counted.
    big = [("blob", bytes(40_000))]
    with Producer(config(broker, max_request_size=1_000_000)) as producer:
        producer.send([ProducerData(topic, messages=[b"v%d" % i], headers=big, partition=0) for i in range(30)])
    assert [v for _, v in read_topic(broker, topic, 2)[0]] == [b"v%d" % i for i in range(30)]


def test_encoder_error_is_a_clear_send_error(broker, topic):
    with Producer(config(broker)) as producer:  # DefaultEncoder: bytes only
        with pytest.raises(FailedToSendMessageError, match="StringEncoder") as info:
            producer.send([ProducerData(topic, messages=[b"ok"]), ProducerData(topic, messages=["a str"])])
    assert isinstance(info.value.__cause__, TypeError)
    assert info.value.lost_messages == 2
    assert all_records(read_topic(broker, topic, 2)) == []


def test_bad_plugin_path_is_a_config_error(broker):
    from kclient.errors import ConfigError

    with pytest.raises(ConfigError, match="partitioner.class"):
        Producer(config(broker, partitioner_class=f"{PLUGINS}.NoSuchPartitioner"))
    assert producer_threads() == []


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("name", ["bad topic", "", "a" * 250, "..", "tópico"])
def test_invalid_topic_name(broker, mode, name):
    with Producer(config(broker, producer_type=mode)) as producer:
        with pytest.raises(InvalidTopicError, match="invalid topic name"):
            producer.send([ProducerData("fine-topic", messages=[b"a"]), ProducerData(name, messages=[b"b"])])
        assert producer.statistics().sent_messages == 0
        assert producer.statistics().queued_messages == 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_send_after_close(broker, topic, mode):
    producer = Producer(config(broker, producer_type=mode))
    producer.send(ProducerData(topic, messages=[b"a"]))
    producer.close()
    producer.close()  # idempotent
    with pytest.raises(ProducerClosedError):
        producer.send(ProducerData(topic, messages=[b"b"]))
    assert producer_threads() == []
    assert all_records(read_topic(broker, topic, 2)) == [(None, b"a")]


@pytest.mark.unit
def test_producer_data_shape():
    d = ProducerData("t", key=b"k", messages=[b"a", b"b"])
    assert d.messages == (b"a", b"b")
    assert (d.partition, d.headers) == (None, ())
    e = ProducerData("t", messages=[b"x"], partition=3, headers=[("h", b"v")])
    assert (e.partition, e.headers) == (3, (("h", b"v"),))
    assert e._stamped(5) == ProducerData("t", messages=[b"x"], timestamp_ms=5, partition=3, headers=[("h", b"v")])
    assert ProducerData("t", None, (b"x",)) == ProducerData("t", messages=[b"x"])
    with pytest.raises(TypeError, match="wrap it"):
        ProducerData("t", messages=b"not a list")
    with pytest.raises(AttributeError):
        d.topic = "u"  # frozen


def test_sync_retries_across_a_broker_restart(topic):
    # A broker on a fixed port, stopped while the producer is connected: the
    # send fails over connection errors, refreshes metadata and succeeds
    # once the broker is back on the same port and logs.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with BrokerProcess(port=port, properties={"num.partitions": 1}) as proc:
        props = config(proc, message_send_max_retries=30, retry_backoff_ms=50)
        with Producer(props) as producer:
            producer.send(ProducerData(topic, messages=[b"before"]))
            proc.stop()
            outcome = []

            def send_while_down():
                try:
                    producer.send(ProducerData(topic, messages=[b"after"]))
                    outcome.append("ok")
                except Exception as exc:  # pragma: no cover - reported below
                    outcome.append(exc)

            sender = threading.Thread(target=send_while_down, name="test-sender")
            sender.start()
            sender.join(0.3)  # let it fail at least once against the dead port
            proc.start()
            sender.join(30)
            assert outcome == ["ok"]
        assert [v for _, _, v, _ in read_partition(proc, topic, 0)] == [b"before", b"after"]


def test_sync_retries_exhausted(topic):
    with BrokerProcess(properties={"num.partitions": 1}) as proc:
        with Producer(config(proc, message_send_max_retries=2, retry_backoff_ms=10)) as producer:
            producer.send(ProducerData(topic, messages=[b"first"]))
            proc.stop()
            with pytest.raises(FailedToSendMessageError, match=f"{topic}-0 after 2 retries") as info:
                producer.send(ProducerData(topic, messages=[b"lost"]))
            assert isinstance(info.value.__cause__, (KafkaConnectionError, NoBrokersAvailableError))
            assert producer.statistics().failed_messages == 1


# -- async mode -------------------------------------------------------------------


def test_async_batch_num_messages_trigger(broker, topic):
    props = async_config(
        broker,
        batch_num_messages=5,
        queue_buffering_max_ms=600_000,
        queue_buffering_max_messages=100,
        event_handler=f"{PLUGINS}.RecordingEventHandler",
    )
    producer = Producer(props)
    handler = producer.trio_producer.event_handler
    assert isinstance(handler, plugins.RecordingEventHandler)
    producer.send([ProducerData(topic, key=b"k", messages=[b"%d" % i]) for i in range(12)])
    assert handler.wait_for(2)
    assert handler.batch_sizes == [5, 5]
    assert producer.statistics().queued_messages == 2  # waiting for 10 minutes or close()
    producer.close()
    assert handler.batch_sizes == [5, 5, 2]
    got = read_topic(broker, topic, 2)
    part = kafka_python_partition(b"k", 2)
    assert [v for _, v in got[part]] == [b"%d" % i for i in range(12)]


def test_async_queue_time_trigger(broker, topic):
    handler = plugins.RecordingEventHandler()
    props = async_config(broker, batch_num_messages=1000, queue_buffering_max_ms=20, queue_buffering_max_messages=5000)
    with Producer(props, event_handler=handler) as producer:
        producer.send([ProducerData(topic, messages=[b"a", b"b"]), ProducerData(topic, messages=[b"c"])])
        assert handler.wait_for(1)
        assert handler.batch_sizes == [3]  # sent well below batch.num.messages
        assert producer.statistics().queued_messages == 0
        producer.flush()
        assert producer.statistics().sent_messages == 3
    assert sorted(v for _, v in all_records(read_topic(broker, topic, 2))) == [b"a", b"b", b"c"]


@pytest.mark.unit
def test_default_linger_is_kafka_4s_5_ms():
    """Issue 27: the async producer lingers 5 ms by default (Kafka 4.0's
    linger.ms), not 0.8's 5 s; ``queue.time`` / ``queue.buffering.max.ms``
    still set it. Checked on the queue's own clock: one record put in the
    queue is due within the linger, whatever the machine's speed."""
    cfg = ProducerConfig.from_properties({"metadata.broker.list": "h:1", "producer.type": "async"})
    assert cfg.queue_buffering_max_ms == 5
    for name in ("queue.time", "queue.buffering.max.ms", "linger.ms"):
        assert ProducerConfig.from_properties({"metadata.broker.list": "h:1", name: "5000"}).queue_buffering_max_ms == 5000
    queue = MessageQueue(100)
    assert queue.put(ProducerData("t", messages=[b"x"]), 1, -1)
    kind, wait_s = queue.poll_batch(cfg.batch_num_messages, cfg.queue_buffering_max_ms, lambda: None)
    # Not full (1 < batch.num.messages), not flushed: due when the linger
    # ends, at most 5 ms after the put (0.8's default: about 5 s).
    assert kind == "batch" or (kind == "wait" and wait_s <= 0.005)
    kind, wait_s = queue.poll_batch(cfg.batch_num_messages, 5000, lambda: None)
    assert kind == "batch" or (kind == "wait" and wait_s > 0.005)  # the 0.8 linger would hold it
    queue.close()


def test_default_async_send_is_delivered_by_the_linger_alone(broker, topic):
    """Issue 27: a default async producer's lone record, neither flushed nor
    part of a full batch, is taken off the queue by the linger alone and
    acknowledged while the producer stays open. That it is the 5 ms linger
    and not 0.8's 5 s is shown on the queue's own clock by
    `test_default_linger_is_kafka_4s_5_ms` (no wall-time claim here)."""
    taken = []

    class Taken(CallbackHandler):
        def after_dequeuing_existing_data(self, data):
            taken.append(list(data.messages))
            return [data]

    with Producer({"metadata.broker.list": broker.bootstrap, "producer.type": "async"}, callback_handler=Taken()) as producer:
        assert producer.config.queue_buffering_max_ms == 5
        [warm] = producer.send_with_result(ProducerData(topic, messages=[b"warm"], partition=0))  # metadata and connection
        assert warm.result(timeout=60).offset == 0
        [future] = producer.send_with_result(ProducerData(topic, messages=[b"x"], partition=0))
        assert future.result(timeout=60).offset == 1
        assert taken == [[b"warm"], [b"x"]]  # each left alone: neither a full batch nor a flush released it


def _held_producer(broker, enqueue_timeout_ms):
    """An async producer whose send thread is held in before_sending_data
    after taking the first message; the queue (3 messages) is then filled."""
    gate = plugins.GateCallbacks()
    props = async_config(
        broker,
        batch_num_messages=1,
        queue_buffering_max_messages=3,
        queue_buffering_max_ms=0,
        queue_enqueue_timeout_ms=enqueue_timeout_ms,
        callback_handler=gate,
    )
    producer = Producer(props)
    return producer, gate


def _fill(producer, gate, topic):
    producer.send(ProducerData(topic, messages=[b"m0"]))
    assert gate.entered.wait(20)
    for i in (1, 2, 3):
        producer.send(ProducerData(topic, messages=[b"m%d" % i]))
    assert producer.statistics().queued_messages == 3


def test_async_queue_full_timeout_zero_raises_at_once(broker, topic):
    producer, gate = _held_producer(broker, 0)
    try:
        _fill(producer, gate, topic)
        with pytest.raises(QueueFullError, match="NOT enqueued") as info:
            producer.send(ProducerData(topic, messages=[b"dropped"]))
        assert [d.messages for d in info.value.not_enqueued] == [(b"dropped",)]
        assert gate.enqueued[-1][1] is False
        assert [added for _, added in gate.enqueued[:-1]] == [True] * 4
    finally:
        gate.release.set()
        producer.close()
    assert gate.closed
    values = sorted(v for _, v in all_records(read_topic(broker, topic, 2)))
    assert values == [b"m0", b"m1", b"m2", b"m3"]


def test_async_queue_full_timeout_positive_waits_then_raises(broker, topic):
    producer, gate = _held_producer(broker, 300)
    try:
        _fill(producer, gate, topic)
        with pytest.raises(QueueFullError, match="waited queue.enqueue.timeout.ms=300"):
            producer.send(ProducerData(topic, messages=[b"dropped"]))
    finally:
        gate.release.set()
        producer.close()
    assert sorted(v for _, v in all_records(read_topic(broker, topic, 2))) == [b"m0", b"m1", b"m2", b"m3"]


def test_async_queue_full_timeout_positive_succeeds_when_room_appears(broker, topic):
    producer, gate = _held_producer(broker, 30_000)
    outcome = []
    try:
        _fill(producer, gate, topic)
        sender = threading.Thread(
            target=lambda: outcome.append(producer.send(ProducerData(topic, messages=[b"m4"])) or "ok"), name="test-sender"
        )
        sender.start()
        sender.join(0.2)
        assert sender.is_alive()  # waiting for room
        gate.release.set()
        sender.join(20)
        assert outcome == ["ok"]
    finally:
        gate.release.set()
        producer.close()
    assert sorted(v for _, v in all_records(read_topic(broker, topic, 2))) == [b"m%d" % i for i in range(5)]


def test_async_queue_full_blocks_until_room(broker, topic):
    producer, gate = _held_producer(broker, -1)
    outcome = []
    try:
        _fill(producer, gate, topic)
        sender = threading.Thread(
            target=lambda: outcome.append(producer.send([ProducerData(topic, messages=[b"m4"]), ProducerData(topic, messages=[b"m5"])]) or "ok"),
            name="test-sender",
        )
        sender.start()
        sender.join(0.3)
        assert sender.is_alive() and outcome == []  # blocked on the full queue
        gate.release.set()
        sender.join(20)
        assert outcome == ["ok"]
    finally:
        gate.release.set()
        producer.close()
    assert sorted(v for _, v in all_records(read_topic(broker, topic, 2))) == [b"m%d" % i for i in range(6)]


def test_async_close_wakes_a_blocked_sender(broker, topic):
    producer, gate = _held_producer(broker, -1)
    outcome = []
    try:
        _fill(producer, gate, topic)

        def send_blocked():
            try:
                producer.send(ProducerData(topic, messages=[b"m4"]))
                outcome.append("ok")
            except ProducerClosedError as exc:
                outcome.append(exc)

        sender = threading.Thread(target=send_blocked, name="test-sender")
        sender.start()
        sender.join(0.2)
        closer = threading.Thread(target=producer.close, name="test-closer")
        closer.start()
        sender.join(20)
        assert len(outcome) == 1 and isinstance(outcome[0], ProducerClosedError)
    finally:
        gate.release.set()
        closer.join(20)
    assert sorted(v for _, v in all_records(read_topic(broker, topic, 2))) == [b"m0", b"m1", b"m2", b"m3"]


@pytest.mark.parametrize("in_flight", [1, 5])
def test_async_close_flushes_everything(broker5, topic, in_flight):
    # in_flight 5: batches are pipelined (max.in.flight.requests.per.connection)
    # and must still arrive complete and in order per key.
    n = 5000
    props = async_config(
        broker5,
        batch_num_messages=700 if in_flight == 1 else 90,
        queue_buffering_max_ms=600_000,
        queue_buffering_max_messages=n,
        max_in_flight_requests_per_connection=in_flight,
    )
    data = [ProducerData(topic, key=b"key-%d" % (i % 37), messages=[b"value-%d" % i]) for i in range(n)]
    producer = Producer(props)
    for i in range(0, n, 250):
        producer.send(data[i : i + 250])
    producer.close()
    stats = producer.statistics()
    assert (stats.sent_messages, stats.failed_messages, stats.queued_messages) == (n, 0, 0)
    got = read_topic(broker5, topic, PARTITIONS)
    assert sum(len(v) for v in got.values()) == n
    placed = {p: set(recs) for p, recs in got.items()}
    for d in data:
        assert (d.key, d.messages[0]) in placed[kafka_python_partition(d.key, PARTITIONS)]
    # per key, order is preserved
    for recs in got.values():
        by_key = {}
        for k, v in recs:
            by_key.setdefault(k, []).append(int(v.split(b"-")[1]))
        assert all(vals == sorted(vals) for vals in by_key.values())


def test_async_flush(broker, topic):
    props = async_config(broker, batch_num_messages=1000, queue_buffering_max_ms=600_000)
    with Producer(props) as producer:
        producer.send([ProducerData(topic, messages=[b"x%d" % i]) for i in range(10)])
        producer.flush()
        assert producer.statistics().sent_messages == 10
        assert len(all_records(read_topic(broker, topic, 2))) == 10


def test_async_timestamp_recorded_at_send(broker, topic):
    producer, gate = _held_producer(broker, -1)
    try:
        before = time.time_ns() // 1_000_000
        producer.send(ProducerData(topic, messages=[b"m0"]))
        after = time.time_ns() // 1_000_000
        assert gate.entered.wait(20)
        time.sleep(0.05)  # kept: the batch is sent later than send() was called (the time gap is under test)
        release_time = time.time_ns() // 1_000_000
        gate.release.set()
    finally:
        gate.release.set()
        producer.close()
    [(_, _, _, ts)] = [r for p in range(2) for r in read_partition(broker, topic, p)]
    assert before <= ts <= after < release_time


def test_async_callback_hooks_and_threads(broker, topic):
    class Hooks(plugins.GateCallbacks):
        def before_enqueue(self, data):
            super().before_enqueue(data)
            return None if data.messages == (b"drop",) else data

        def after_dequeuing_existing_data(self, data):
            super().after_dequeuing_existing_data(data)
            return [data, ProducerData(data.topic, messages=[data.messages[0] + b"-copy"])]

        def last_batch_before_close(self):
            self._note("last_batch_before_close")
            return [ProducerData(topic, messages=[b"last"])]

    hooks = Hooks()
    hooks.release.set()
    props = async_config(broker, batch_num_messages=2, queue_buffering_max_ms=600_000, callback_handler=hooks)
    producer = Producer(props)
    producer.send([ProducerData(topic, messages=[b"a"]), ProducerData(topic, messages=[b"drop"]), ProducerData(topic, messages=[b"b"])])
    producer.close()
    values = sorted(v for _, v in all_records(read_topic(broker, topic, 2)))
    assert values == [b"a", b"a-copy", b"b", b"b-copy", b"last"]
    me = threading.current_thread().name
    threads = {}
    for hook, thread in hooks.calls:
        threads.setdefault(hook, set()).add(thread)
    assert threads["before_enqueue"] == {me} and threads["after_enqueue"] == {me}
    assert threads["close"] == {me}
    send_threads = threads["after_dequeuing_existing_data"] | threads["before_sending_data"] | threads["last_batch_before_close"]
    assert len(send_threads) == 1 and next(iter(send_threads)).endswith("-send")
    assert [h for h, _ in hooks.calls][-1] == "close"


@pytest.mark.parametrize("in_flight", [1, 5])
def test_async_errors_surface_at_close(broker, topic, caplog, in_flight):
    hooks = plugins.GateCallbacks()
    hooks.release.set()
    bad_topic = topic + "-big"
    props = async_config(
        broker,
        max_request_size=5000,
        batch_num_messages=10,
        queue_buffering_max_ms=600_000,
        callback_handler=hooks,
        max_in_flight_requests_per_connection=in_flight,
    )
    producer = Producer(props)
    producer.send([ProducerData(topic, messages=[b"fine"]), ProducerData(bad_topic, messages=[b"z" * 10_000, b"y"])])
    with caplog.at_level(logging.ERROR, logger="kclient"):
        with pytest.raises(FailedToSendMessageError, match=r"2 message\(s\) in 1 batch") as info:
            producer.close()
    assert isinstance(info.value.__cause__, FailedToSendMessageError)
    assert isinstance(info.value.__cause__.__cause__, MessageSizeTooLargeError)
    [(events, exc)] = hooks.errors
    assert {d.topic for d in events} == {topic, bad_topic}
    assert exc is info.value.__cause__
    assert any(bad_topic in r.getMessage() and "2 message" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    assert producer.statistics().failed_messages == 2
    assert producer.statistics().sent_messages == 1
    assert all_records(read_topic(broker, topic, 2)) == [(None, b"fine")]


def test_async_send_thread_is_named_and_daemon(broker):
    # async: one thread, the send thread, which also runs the trio loop; daemon
    # so that it never keeps the interpreter alive (issue 13: the exit hook
    # flushes an unclosed producer, see tests/test_exit.py)
    with Producer(async_config(broker, client_id="thread-check")):
        names = {t.name: t for t in producer_threads()}
        assert set(names) == {"kclient-producer-thread-check-send"}
        assert names["kclient-producer-thread-check-send"].daemon is True
    assert producer_threads() == []
    with Producer(config(broker, client_id="thread-check")):  # sync: the loop thread only
        names = {t.name: t for t in producer_threads()}
        assert set(names) == {"kclient-producer-thread-check-trio"}
        assert names["kclient-producer-thread-check-trio"].daemon is True
    assert producer_threads() == []


@pytest.mark.unit
def test_message_queue_counts_messages():
    q = MessageQueue(4)
    assert q.put(ProducerData("t", messages=[b"a", b"b", b"c"]), 3, 0)
    assert not q.put(ProducerData("t", messages=[b"d", b"e"]), 2, 0)
    assert q.put(ProducerData("t", messages=[b"f"]), 1, 0)
    assert q.statistics().queued_messages == 4
    q.close()
    assert [len(d.messages) for d in q.take_batch(10, 0)] == [3, 1]
    assert q.take_batch(10, 0) is None
    # an item bigger than the whole queue is accepted when the queue is empty
    q2 = MessageQueue(2)
    assert q2.put(ProducerData("t", messages=[b"x"] * 5), 5, 0)


@pytest.mark.unit
def test_message_queue_put_from_its_consumer_thread_never_waits():
    # a CallbackHandler hook runs on the send thread, the queue's only
    # consumer: a blocking put there would wait forever
    q = MessageQueue(1)
    q.consumer_ident = threading.get_ident()
    assert q.put(ProducerData("t", messages=[b"a"]), 1, -1)
    with pytest.raises(QueueFullError, match="would deadlock"):
        q.put(ProducerData("t", messages=[b"b"]), 1, -1)
    assert q.statistics().queued_messages == 1


# -- the trio API --------------------------------------------------------------------


async def test_trio_producer(broker, topic):
    errors = []

    class Hooks(CallbackHandler):
        def on_send_error(self, events, exc):
            errors.append(exc)

    async with TrioProducer(config(broker), callback_handler=Hooks()) as producer:
        async with trio.open_nursery() as nursery:
            for i in range(4):
                nursery.start_soon(producer.send, [ProducerData(topic, key=b"k%d" % i, messages=[b"v%d" % i])])
        with pytest.raises(InvalidTopicError):
            await producer.send(ProducerData("no spaces allowed", messages=[b"x"]))
    with pytest.raises(ProducerClosedError):
        await producer.send(ProducerData(topic, messages=[b"late"]))
    got = await trio.to_thread.run_sync(read_topic, broker, topic, 2)
    assert sorted(all_records(got)) == [(b"k%d" % i, b"v%d" % i) for i in range(4)]
    for i in range(4):
        assert (b"k%d" % i, b"v%d" % i) in got[kafka_python_partition(b"k%d" % i, 2)]
    assert errors == []


# -- batch sizing -----------------------------------------------------------------


@pytest.mark.unit
@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=300)),
            st.one_of(st.none(), st.sampled_from([0, 5, 63, 64, 1000, 8191, 8192, 20000]).map(bytes)),
            st.integers(-1000, 10**7),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_v2_record_size_is_exact(rows):
    base = 1_700_000_000_000
    records = [(k, v, base + d) for k, v, d in rows]
    expected = len(build_batch(records)) - 61  # the batch header
    assert sum(v2_record_size(k, v, ts - records[0][2], i) for i, (k, v, ts) in enumerate(records)) == expected


@pytest.mark.unit
def test_chunks_fill_max_request_size_exactly():
    builder = BatchBuilder(ProducerSettings(max_request_bytes=20_000))
    assert builder.max_batch_bytes == 20_000 - 512
    part = PartitionSend("t", 0)
    ts = 1_700_000_000_000
    fits = [(None, bytes([i]) * 1000, ts) for i in range(19)]  # 19 x 1,009 + 61 bytes: one batch
    assert len(builder.chunk(part, fits, 0, 2)) == 1
    many = [(None, bytes([i % 256]) * 1000, ts + i) for i in range(100)]
    chunks = builder.chunk(part, many, 0, 2)
    assert [r for c in chunks for r in c] == many
    sizes = [len(build_batch(c)) for c in chunks]
    assert max(sizes) <= builder.max_batch_bytes
    assert all(size + 1_010 > builder.max_batch_bytes for size in sizes[:-1])  # each full but the last


def test_async_error_without_hooks_is_logged_and_raised_at_close(broker, topic, caplog):
    # no CallbackHandler: the batch's ProducerData are not kept in flight,
    # the failure is still logged with its topic-partitions and raised
    producer = Producer(async_config(broker, max_request_size=5000, batch_num_messages=10, queue_buffering_max_ms=600_000))
    producer.send([ProducerData(topic, messages=[b"fine"]), ProducerData(topic + "-big", messages=[b"z" * 10_000])])
    with caplog.at_level(logging.ERROR, logger="kclient"):
        with pytest.raises(FailedToSendMessageError, match=r"1 message\(s\) in 1 batch"):
            producer.close()
    assert any(f"{topic}-big" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    assert all_records(read_topic(broker, topic, 2)) == [(None, b"fine")]


def test_async_send_of_a_list_is_queued_as_bundles_and_arrives_in_order(broker, topic):
    """send(list) (a batch-level send): one queue entry per batch.num.messages
    messages, every record delivered once, in order per partition, with its
    own timestamp or the send time."""
    handler = plugins.RecordingEventHandler()
    props = async_config(broker, batch_num_messages=100, queue_buffering_max_ms=5, queue_buffering_max_messages=250)
    before = int(time.time() * 1000)
    with Producer(props, event_handler=handler) as producer:
        data = [
            ProducerData(topic, None, [b"%d" % i, b"%d+" % i] if i % 7 == 0 else [b"%d" % i], timestamp_ms=1_000_000 + i if i % 5 == 0 else None, partition=i % 2)
            for i in range(1234)
        ]
        producer.send(data)
        producer.send([ProducerData(topic, None, [b"last"], partition=1)])
        producer.flush()
    after = int(time.time() * 1000)
    assert max(handler.batch_sizes) <= 100  # whole bundles of up to batch.num.messages messages
    got = read_topic(broker, topic, 2)
    expected: dict[int, list] = {0: [], 1: []}
    for i in range(1234):
        expected[i % 2] += [b"%d" % i, b"%d+" % i] if i % 7 == 0 else [b"%d" % i]
    expected[1].append(b"last")
    assert {p: [v for _, v in got[p]] for p in (0, 1)} == expected
    stamps = {v: ts for p in (0, 1) for _, _, v, ts in read_partition(broker, topic, p)}
    for i in range(1234):
        ts = stamps[b"%d" % i]
        assert ts == 1_000_000 + i if i % 5 == 0 else before <= ts <= after
