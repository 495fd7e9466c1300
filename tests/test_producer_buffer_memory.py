"""The async producer's ``buffer.memory`` bound (issue 28): the estimated
bytes of the records it holds (queued, batched, in flight until
acknowledged or failed), ``max.block.ms`` as an alias of
``queue.enqueue.timeout.ms``, a record larger than the whole bound, and
``partitioner.ignore.keys`` (KIP-794). Unit tests of the accounting, then
a broker of this module's own, SIGSTOPped to fill the bound."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from helpers.wait import wait_for

from kclient import AdminClient, FetchRequest, NewTopic, OffsetRequest, Producer, ProducerData, SimpleConsumer
from kclient.client.producer.accumulator import ACCUMULATOR_RECORD_OVERHEAD, RecordAccumulator, estimated_size
from kclient.client.producer.queue import Bundle, MessageQueue, RecordTooLargeError
from kclient.client.producer.routing import PartitionRouter
from kclient.config import ProducerConfig
from kclient.errors import MessageSizeTooLargeError, QueueFullError
from kclient.testing import BrokerProcess

OVERHEAD = ACCUMULATOR_RECORD_OVERHEAD


def record(value_size: int, key: bytes | None = b"k" * 10, n: int = 1) -> ProducerData:
    return ProducerData("t", key=key, messages=[b"v" * value_size] * n)


# -- the accounting, no broker ----------------------------------------------------


@pytest.mark.unit
def test_bytes_are_held_from_put_until_task_done():
    q = MessageQueue(100, max_bytes=1000, record_overhead=OVERHEAD)
    one = 10 + 100 + OVERHEAD
    for _ in range(1000 // one):
        assert q.put(record(100), 1, 0)
    held = (1000 // one) * one
    assert q.statistics().unfinished_bytes == held and q.statistics().max_bytes == 1000
    assert not q.put(record(100), 1, 0)  # the bytes, not the count (100), refuse it
    assert q.last_full_bound.startswith("buffer.memory=1000 bytes")
    kind, (items, taken, taken_bytes) = q.poll_batch(100, 0, lambda: None)
    assert kind == "batch" and taken == len(items) and taken_bytes == held
    assert not q.put(record(100), 1, 0)  # taken but not finished: still held
    q.task_done(taken, taken_bytes)
    assert q.statistics().unfinished_bytes == 0
    assert q.put(record(100), 1, 0)


@pytest.mark.unit
def test_the_message_bound_is_named_when_it_is_the_one_hit():
    q = MessageQueue(2, max_bytes=1 << 20, record_overhead=OVERHEAD)
    assert q.put(record(1), 1, 0) and q.put(record(1), 1, 0)
    assert not q.put(record(1), 1, 0)
    assert q.last_full_bound.startswith("queue.buffering.max.messages=2")


@pytest.mark.unit
def test_a_record_larger_than_buffer_memory_fails_at_once_naming_both_sizes():
    q = MessageQueue(100, max_bytes=1000, record_overhead=OVERHEAD)
    with pytest.raises(MessageSizeTooLargeError, match=rf"a record of {2000 + OVERHEAD} bytes .* buffer\.memory=1000 bytes") as info:
        q.put(record(2000, key=None), 1, -1)  # -1: it would wait forever if it waited
    assert isinstance(info.value, RecordTooLargeError)
    with pytest.raises(RecordTooLargeError):  # inside a bundle too
        q.put(Bundle([record(1), record(2000)]), 2, -1)
    assert q.statistics().unfinished_bytes == 0 and q.statistics().queued_items == 0
    # Many small records larger together than the bound fit an empty buffer.
    assert q.put(record(100, n=20), 20, 0)
    assert q.statistics().unfinished_bytes == 20 * (110 + OVERHEAD)
    assert not q.put(record(1), 1, 0)


@pytest.mark.unit
def test_a_put_waiting_for_bytes_forces_the_batches_out_and_wakes_when_they_finish():
    q = MessageQueue(100, max_bytes=1000, record_overhead=OVERHEAD)
    assert q.put(record(700), 1, 0)
    done = threading.Event()

    def put() -> None:
        q.put(record(700), 1, -1)
        done.set()

    t = threading.Thread(target=put)
    t.start()
    try:
        wait_for(lambda: q.putters_waiting and q.flushing, "the putter to wait and force a flush")
        kind, (items, taken, taken_bytes) = q.poll_batch(100, 3_600_000, lambda: None)  # due at once: flushing
        assert kind == "batch" and taken == 1
        assert not done.is_set()
        q.task_done(taken, taken_bytes)
        wait_for(done.is_set, "the putter to get room")
    finally:
        q.close()
        t.join()
    assert not q.flushing and q.statistics().unfinished_bytes == 710 + OVERHEAD


@pytest.mark.unit
def test_the_queue_counts_the_bytes_the_accumulator_drains():
    """What the queue counted for the items equals the sizes of the batches
    the send thread drains for them, which is what it frees."""
    items = [
        ProducerData("t", key=b"key-%d" % i, messages=[b"x" * (i % 50)]) for i in range(200)
    ] + [
        ProducerData("t", messages=["text", b"", bytearray(b"abc")]),
        ProducerData("t", key="str-key", messages=[b"v"], partition=1),
        ProducerData("u", key=b"other-topic", messages=[b"w" * 500]),
    ]
    q = MessageQueue(10_000, max_bytes=1 << 30, record_overhead=OVERHEAD)
    for d in items:
        assert q.put(d, len(d.messages), 0)
    q.put(Bundle(items[:10]), 10, 0)
    kind, (taken, n, nbytes) = q.poll_batch(10_000, 0, lambda: None)
    assert nbytes == sum(estimated_size(d.key, tuple(d.messages)) for d in taken) == q.statistics().unfinished_bytes
    accumulator = RecordAccumulator(batch_size=2000)
    PartitionRouter(accumulator, lambda topic: 4, hash_keys=True, sticky_keyless=True).route(taken)
    drained = accumulator.drain(lambda topic, p: 0, flush=True)
    total = drained.size
    while accumulator.messages:
        total += accumulator.drain(lambda topic, p: 0, flush=True).size
    assert total == nbytes


@pytest.mark.unit
def test_config_buffer_memory_and_max_block_ms():
    base = {"metadata.broker.list": "h:1"}
    c = ProducerConfig.from_properties(base)
    assert (c.buffer_memory, c.queue_enqueue_timeout_ms, c.partitioner_ignore_keys) == (33554432, -1, False)
    c = ProducerConfig.from_properties({**base, "buffer.memory": "65536", "max.block.ms": "250", "partitioner.ignore.keys": "true"})
    assert (c.buffer_memory, c.queue_enqueue_timeout_ms, c.partitioner_ignore_keys) == (65536, 250, True)
    # The canonical name wins over the alias.
    c = ProducerConfig.from_properties({**base, "max.block.ms": "250", "queue.enqueue.timeout.ms": "0"})
    assert c.queue_enqueue_timeout_ms == 0


@pytest.mark.unit
def test_ignore_keys_routes_keyed_records_on_the_sticky_partition():
    accumulator = RecordAccumulator(batch_size=1 << 20, linger_ms=0)
    router = PartitionRouter(accumulator, lambda topic: 16, hash_keys=True, sticky_keyless=True, ignore_keys=True)
    items = [ProducerData("t", key=b"key-%d" % i, messages=[b"v"]) for i in range(100)]
    router.route(items)  # one topic: the compiled route_topic when built
    router.route(items + [ProducerData("u", key=b"k", messages=[b"v"])])  # two topics: the general loop
    batches = [b for b in accumulator.batches() if b.topic == "t"]
    assert len(batches) == 1 and len(batches[0].items) == 200
    assert {d.partition for d in batches[0].items} == {batches[0].partition}
    # Without it the keys spread the records over the partitions.
    plain = RecordAccumulator(batch_size=1 << 20, linger_ms=0)
    PartitionRouter(plain, lambda topic: 16, hash_keys=True, sticky_keyless=True).route(items)
    assert len(list(plain.batches())) > 8


# -- against a broker of this module's own ----------------------------------------


@pytest.fixture(scope="module")
def broker():
    with BrokerProcess(properties={"num.partitions": 1}) as proc:
        try:
            yield proc
        finally:
            os.kill(proc.pid, signal.SIGCONT)


def new_topic(broker: BrokerProcess, partitions: int) -> str:
    topic = f"bufmem-{uuid.uuid4().hex[:10]}"
    with AdminClient({"metadata.broker.list": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=60_000)
    return topic


def read_all(broker: BrokerProcess, topic: str, partitions: int) -> dict[int, list[bytes]]:
    host, port = broker.bootstrap.rsplit(":", 1)
    out: dict[int, list[bytes]] = {}
    with SimpleConsumer(host, int(port), 10_000, 1 << 20, "bufmem-reader") as consumer:
        for p in range(partitions):
            offset = consumer.get_offsets_before(topic, p, OffsetRequest.EARLIEST_TIME, 1)[0]
            end = consumer.get_offsets_before(topic, p, OffsetRequest.LATEST_TIME, 1)[0]
            got: list[bytes] = []
            while offset < end:
                batch = [m for m in consumer.fetch(FetchRequest(topic, p, offset, 4 << 20)) if m.offset >= offset]
                assert batch, f"no progress reading {topic}-{p} at {offset} of {end}"
                got += [m.message.payload for m in batch]
                offset = batch[-1].next_offset
            out[p] = got
    return out


def test_a_stopped_broker_fills_buffer_memory_then_send_raises_and_nothing_is_lost(broker):
    topic = new_topic(broker, 2)
    buffer_memory = 20_000
    cfg = {
        "metadata.broker.list": broker.bootstrap,
        "producer.type": "async",
        "request.required.acks": 1,
        "buffer.memory": buffer_memory,
        "max.block.ms": 300,
        "linger.ms": 1,
    }
    sent: list[bytes] = []
    with Producer(cfg) as producer:
        producer.send(ProducerData(topic, messages=[b"warm-up"], partition=0))
        producer.flush()
        sent.append(b"warm-up")
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            with pytest.raises(QueueFullError) as info:
                for i in range(10_000):  # ~20 fit; the bound stops the loop long before the end
                    value = b"%05d" % i + b"x" * 995
                    producer.send(ProducerData(topic, key=b"k%d" % (i % 7), messages=[value]))
                    sent.append(value)
            message = str(info.value)
            assert f"buffer.memory={buffer_memory} bytes" in message and "waited queue.enqueue.timeout.ms=300 ms" in message
            assert [d.messages[0][:5] for d in info.value.not_enqueued] == [b"%05d" % (len(sent) - 1)]
            held = producer._queue.statistics()
            assert 0 < held.unfinished_bytes <= buffer_memory
            assert len(sent) - 1 <= buffer_memory // 1000
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        producer.flush()
        stats = producer.statistics()
        assert producer._queue.statistics().unfinished_bytes == 0
    assert stats.failed_messages == 0 and stats.sent_messages == len(sent)
    got = read_all(broker, topic, 2)
    assert Counter(v for values in got.values() for v in values) == Counter(sent)  # none lost, none twice


def test_a_record_larger_than_buffer_memory_is_refused_by_send(broker):
    topic = new_topic(broker, 1)
    cfg = {"metadata.broker.list": broker.bootstrap, "producer.type": "async", "buffer.memory": 1000}
    failures: list[Any] = []
    with Producer(cfg) as producer:
        with pytest.raises(MessageSizeTooLargeError, match=rf"a record of {2000 + OVERHEAD} bytes .* buffer\.memory=1000 bytes"):
            producer.send(ProducerData(topic, messages=[b"x" * 2000]))
        with pytest.raises(MessageSizeTooLargeError) as info:
            producer.send([ProducerData(topic, messages=[b"small"]), ProducerData(topic, messages=[b"x" * 2000]), ProducerData(topic, messages=[b"after"])])
        assert [d.messages[0][:5] for d in info.value.not_enqueued] in ([b"xxxxx", b"after"], [b"small", b"xxxxx", b"after"])
        futures = producer.send_with_result(ProducerData(topic, messages=[b"x" * 2000]))
        assert isinstance(futures[0].exception(timeout=10), MessageSizeTooLargeError)
        with pytest.raises(MessageSizeTooLargeError):  # called back, then raised (as for QueueFullError)
            producer.send(ProducerData(topic, messages=[b"x" * 2000]), callback=lambda md, exc: failures.append(exc))
        producer.send(ProducerData(topic, messages=[b"fits"]))
        producer.flush()
    assert len(failures) == 1 and isinstance(failures[0], MessageSizeTooLargeError)
    got = read_all(broker, topic, 1)[0]
    assert got[-1] == b"fits" and b"x" * 2000 not in got


def test_ignore_keys_sends_keyed_records_to_the_sticky_partition(broker):
    partitions = 8
    topic = new_topic(broker, partitions)
    cfg = {"metadata.broker.list": broker.bootstrap, "producer.type": "async", "partitioner.ignore.keys": "true", "linger.ms": 60_000}
    values = [b"%04d" % i for i in range(100)]  # 100 * (~6 + 4 + 30) bytes: one batch
    with Producer(cfg) as producer:
        for i, v in enumerate(values):
            producer.send(ProducerData(topic, key=b"key-%d" % i, messages=[v]))
        producer.flush()
    got = read_all(broker, topic, partitions)
    assert [p for p, vs in got.items() if vs] and sum(1 for vs in got.values() if vs) == 1
    assert next(vs for vs in got.values() if vs) == values
