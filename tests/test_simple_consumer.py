"""SimpleConsumer against a real bundled broker process: fetch, multifetch,
get_offsets_before, out-of-range, oversize batches, partial tails."""

from __future__ import annotations

import uuid

import pytest
import trio

from kclient import FetchRequest, OffsetRequest, SimpleConsumer
from kclient.client.consumer.simple import TrioSimpleConsumer
from kclient.errors import MessageSizeTooLargeError, OffsetOutOfRangeError, ProducerClosedError, UnknownTopicOrPartitionError
from kclient.net.connection import BrokerConnection
from kclient.protocol.messages import METADATA, PRODUCE
from kclient.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kclient.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kclient.protocol.records import build_batch


def _produce_batches(host: str, port: int, topic: str, batches_by_partition: dict[int, list[list[tuple]]]) -> dict[int, list[int]]:
    """Write record batches with raw Produce requests (acks=1); returns the
    base offsets the broker assigned, per partition."""

    async def run():
        async with trio.open_nursery() as nursery:
            conn = await BrokerConnection.connect(nursery, host, port)
            await conn.request(METADATA, MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True))
            bases: dict[int, list[int]] = {}
            for partition, batches in batches_by_partition.items():
                for records in batches:
                    body = ProduceRequest(
                        acks=1,
                        timeout_ms=5000,
                        topic_data=[TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=build_batch(records))])],
                    )
                    resp = await conn.request(PRODUCE, body, version=conn.version_for(PRODUCE, floor=3))
                    part = resp.responses[0].partition_responses[0]
                    assert part.error_code == 0, part
                    bases.setdefault(partition, []).append(part.base_offset)
            await conn.aclose()
            return bases

    return trio.run(run)


def _records(prefix: str, n: int, size: int = 10) -> list[tuple]:
    return [(f"{prefix}-k{i}".encode(), (f"{prefix}-v{i}-".encode() + b"x" * size), 1_700_000_000_000 + i) for i in range(n)]


@pytest.fixture
def topic() -> str:
    return f"sc-{uuid.uuid4().hex[:10]}"


def test_fetch_returns_every_message_with_offsets(broker, topic):
    batches = [_records("a", 3), _records("b", 4)]
    bases = _produce_batches(broker.host, broker.port, topic, {0: batches})
    assert bases[0] == [0, 3]
    with SimpleConsumer(broker.host, broker.port, 10_000, 64 * 1024, "test") as consumer:
        messages = list(consumer.fetch(FetchRequest(topic, 0, 0, 1 << 20)))
        assert [m.offset for m in messages] == list(range(7))
        assert [m.message.key for m in messages] == [r[0] for r in batches[0] + batches[1]]
        assert [m.message.payload for m in messages] == [r[1] for r in batches[0] + batches[1]]
        assert [m.message.timestamp for m in messages] == [r[2] for r in batches[0] + batches[1]]
        assert messages[-1].next_offset == 7
        # starting inside a batch skips the earlier records of that batch
        assert [m.offset for m in consumer.fetch(FetchRequest(topic, 0, 4, 1 << 20))] == [4, 5, 6]
        # at the log end: an empty set, not an error
        assert list(consumer.fetch(FetchRequest(topic, 0, 7, 1 << 20))) == []


def test_fetch_past_log_end_raises_offset_out_of_range(broker, topic):
    _produce_batches(broker.host, broker.port, topic, {0: [_records("a", 2)]})
    with SimpleConsumer(broker.host, broker.port) as consumer:
        with pytest.raises(OffsetOutOfRangeError):
            consumer.fetch(FetchRequest(topic, 0, 3, 1 << 20))
        # the good data is still there
        assert len(list(consumer.fetch(FetchRequest(topic, 0, 0, 1 << 20)))) == 2


def test_partial_batch_at_buffer_end_is_dropped_not_an_error(broker, topic):
    batches = [_records(str(i), 5, size=100) for i in range(4)]
    _produce_batches(broker.host, broker.port, topic, {0: batches})
    with SimpleConsumer(broker.host, broker.port) as consumer:
        whole = consumer.fetch(FetchRequest(topic, 0, 0, 1 << 20))
        first_batch = len(build_batch(batches[0]))
        # room for one and a half batches: only the first comes back
        partial = consumer.fetch(FetchRequest(topic, 0, 0, first_batch + first_batch // 2))
        assert [m.offset for m in partial] == [0, 1, 2, 3, 4]
        assert partial.valid_bytes < partial.size_in_bytes
        assert len(list(whole)) == 20


def test_batch_larger_than_max_size_gives_a_clear_error(broker, topic):
    big = [(b"k", b"y" * 5000, 1)]
    _produce_batches(broker.host, broker.port, topic, {0: [big], 1: [big]})
    size = len(build_batch(big))
    with SimpleConsumer(broker.host, broker.port) as consumer:
        # second partition in the request: no KIP-74 exemption, so the broker
        # returns a truncated batch and the client names the size to retry with
        response = consumer.multifetch([FetchRequest(topic, 0, 0, 100_000), FetchRequest(topic, 1, 0, 1000)])
        with pytest.raises(MessageSizeTooLargeError, match=str(size)):
            list(response[1])
        assert [m.message.payload for m in response[0]] == [b"y" * 5000]
        ms = consumer.fetch(FetchRequest(topic, 1, 0, size))
        assert [m.message.payload for m in ms] == [b"y" * 5000]


def _count_fetch_requests(monkeypatch) -> list[int]:
    """From now on, record how many partitions each Fetch request written
    names (in the returned list, in order)."""
    sent: list[int] = []
    real_start = BrokerConnection.start_request

    async def counting_start(self, api, body, **kwargs):
        if api.key == 1:
            sent.append(sum(len(t.partitions) for t in body.topics))
        return await real_start(self, api, body, **kwargs)

    monkeypatch.setattr(BrokerConnection, "start_request", counting_start)
    return sent


def test_multifetch_keeps_request_order_and_reports_errors_per_partition(broker, topic):
    _produce_batches(broker.host, broker.port, topic, {0: [_records("p0", 2)]})
    other = f"{topic}-other"
    _produce_batches(broker.host, broker.port, other, {0: [_records("o0", 3)]})
    requests = [
        FetchRequest(other, 0, 1, 1 << 16),
        FetchRequest(topic, 0, 0, 1 << 16),
        FetchRequest(topic, 0, 1, 1 << 16),  # same partition twice: a second round trip
        FetchRequest(topic, 0, 99, 1 << 16),  # out of range, reported on its own set
    ]
    with SimpleConsumer(broker.host, broker.port) as consumer:
        response = consumer.multifetch(requests)
        assert len(response) == 4
        assert [m.message.key for m in response[0]] == [b"o0-k1", b"o0-k2"]
        assert [m.offset for m in response[1]] == [0, 1]
        assert [m.offset for m in response[2]] == [1]
        assert response[3].error_code == 1
        with pytest.raises(OffsetOutOfRangeError):
            list(response[3])


def test_multifetch_of_many_partitions_keeps_max_bytes_an_int32(broker, topic):
    """3 x 1 GiB per partition adds up past the request's int32 max_bytes:
    the request is still sent (capped) and every partition answered."""
    _produce_batches(broker.host, broker.port, topic, {p: [_records(f"m{p}", 1)] for p in range(2)})
    with SimpleConsumer(broker.host, broker.port) as consumer:
        response = consumer.multifetch([FetchRequest(topic, p, 0, 1 << 30) for p in range(2)] + [FetchRequest(topic, 0, 0, 1 << 30)])
        assert [[m.message.key for m in r] for r in response] == [[b"m0-k0"], [b"m1-k0"], [b"m0-k0"]]


def test_multifetch_of_many_partitions_without_a_long_poll_is_pipelined(broker, topic, monkeypatch):
    """More partitions than PIPELINE_PARTITIONS, without a long poll: several
    Fetch requests in flight at once, and the same answer as one request,
    in request order, errors on their own sets; with a long poll
    (min_bytes > 0) one request, as the broker answers in order."""
    from kclient.client.consumer import simple

    _produce_batches(broker.host, broker.port, topic, {p: [_records(f"m{p}", p + 1)] for p in range(2)})
    other = f"{topic}-other"
    _produce_batches(broker.host, broker.port, other, {0: [_records("o", 3)]})
    requests = [
        FetchRequest(topic, 1, 0, 1 << 16),
        FetchRequest(other, 0, 1, 1 << 16),
        FetchRequest(topic, 0, 99, 1 << 16),  # out of range
        FetchRequest(topic, 0, 0, 1 << 16),  # again: the second round
        FetchRequest(topic, 1, 1, 1 << 16),  # again: the second round
        FetchRequest(other, 0, 0, 1 << 16),  # again: the second round
    ]
    sent = _count_fetch_requests(monkeypatch)

    def answer(iterate=False, **kwargs):
        with SimpleConsumer(broker.host, broker.port) as consumer:
            response = (consumer.multifetch_iter if iterate else consumer.multifetch)(requests, **kwargs)
            return [(r.topic, r.partition, r.error_code, [(m.offset, m.message.key) for m in r] if not r.error_code else None) for r in response]

    monkeypatch.setattr(simple, "PIPELINE_PARTITIONS", 0)
    single = answer()
    assert sent == [3, 3]
    sent.clear()
    monkeypatch.setattr(simple, "PIPELINE_PARTITIONS", 2)
    assert answer() == single
    assert sent == [2, 1, 2, 1]
    assert single[0][3] == [(0, b"m1-k0"), (1, b"m1-k1")] and single[2][2] == 1 and single[4][3] == [(1, b"m1-k1")]
    sent.clear()
    assert answer(max_wait_ms=100, min_bytes=1) == single
    assert sent == [3, 3]
    # multifetch_iter: the same requests, the same sets in the same order
    for pipeline, expected_sent in ((0, [3, 3]), (2, [2, 1, 2, 1])):
        monkeypatch.setattr(simple, "PIPELINE_PARTITIONS", pipeline)
        sent.clear()
        assert answer(iterate=True) == single
        assert sent == expected_sent
    sent.clear()
    assert answer(iterate=True, max_wait_ms=100, min_bytes=1) == single
    assert sent == [3, 3]


def test_multifetch_iter_hands_out_each_part_as_it_arrives(broker, topic, monkeypatch):
    """multifetch_iter: the requests are written by the call; each part's
    sets are handed out once that part is read (the statistics, counted
    per part as it is read, show only the parts read so far); stopping
    early leaves the connection usable; after close the iterator raises."""
    from kclient import LoopClosedError
    from kclient.client.consumer import simple

    topics = [f"{topic}-{i}" for i in range(3)]
    for i, t in enumerate(topics):  # 2 partitions each (the session broker's default)
        _produce_batches(broker.host, broker.port, t, {p: [_records(f"{t}/{p}", i + p + 1)] for p in range(2)})
    requests = [FetchRequest(t, p, 0, 1 << 16) for t in topics for p in range(2)]
    monkeypatch.setattr(simple, "PIPELINE_PARTITIONS", 2)
    sent = _count_fetch_requests(monkeypatch)
    with SimpleConsumer(broker.host, broker.port) as consumer:
        expected = [[m.message.key for m in r] for r in consumer.multifetch(requests)]
        assert consumer.statistics().fetch_requests == 1
        sent.clear()
        sets = consumer.multifetch_iter(requests)
        assert sent == [2, 2, 2]  # all three parts written before the first set is asked for
        got = []
        for k, ms in enumerate(sets):
            got.append([m.message.key for m in ms])
            read = {(t, p) for (t, p), s in consumer.statistics().partitions.items() if s.fetched_messages == 2 * _expected_count(expected, requests, t, p)}
            # parts of 2: after set k, the sets of parts 0..k//2 were read, no more
            assert read == {(r.topic, r.partition) for r in requests[: 2 * (k // 2 + 1)]}, k
        assert got == expected
        assert consumer.statistics().fetch_requests == 2
        # stopping after the first set: the answers still due are dropped
        first = next(iter(consumer.multifetch_iter(requests)))
        assert [m.message.key for m in first] == expected[0]
        assert [[m.message.key for m in r] for r in consumer.multifetch(requests)] == expected
        late = consumer.multifetch_iter(requests)
    with pytest.raises(LoopClosedError):
        next(late)


def _expected_count(expected, requests, t, p):
    """Messages of partition (t, p) in one multifetch answer."""
    return sum(len(e) for e, r in zip(expected, requests) if (r.topic, r.partition) == (t, p))


def test_get_offsets_before(broker, topic):
    _produce_batches(broker.host, broker.port, topic, {0: [_records("a", 3), _records("b", 2)]})
    with SimpleConsumer(broker.host, broker.port) as consumer:
        assert consumer.get_offsets_before(topic, 0, OffsetRequest.LATEST_TIME, 1) == [5]
        assert consumer.get_offsets_before(topic, 0, OffsetRequest.EARLIEST_TIME, 1) == [0]
        latest = consumer.get_offsets_before(topic, 0, OffsetRequest.LATEST_TIME, 10)
        assert latest == sorted(latest, reverse=True) and latest[0] == 5 and latest[-1] == 0
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.get_offsets_before(topic, 7, OffsetRequest.LATEST_TIME, 1)


async def test_trio_api(broker, topic):
    await trio.to_thread.run_sync(_produce_batches, broker.host, broker.port, topic, {0: [_records("t", 3)]})
    async with TrioSimpleConsumer(broker.host, broker.port) as consumer:
        ms = await consumer.fetch(FetchRequest(topic, 0, 0, 1 << 16))
        assert [m.message.key for m in ms] == [b"t-k0", b"t-k1", b"t-k2"]
        requests = [FetchRequest(topic, 0, 1, 1 << 16), FetchRequest(topic, 1, 0, 1 << 16), FetchRequest(topic, 0, 0, 1 << 16)]
        streamed = [[m.offset for m in r] async for r in consumer.multifetch_iter(requests)]
        assert streamed == [[m.offset for m in r] for r in await consumer.multifetch(requests)] == [[1, 2], [], [0, 1, 2]]
        assert await consumer.get_offsets_before(topic, 0, OffsetRequest.LATEST_TIME, 1) == [3]


def test_calls_after_close_raise_the_typed_loop_closed_error(broker, topic):
    from kclient import IllegalStateError, KafkaError, LoopClosedError

    consumer = SimpleConsumer(broker.host, broker.port)
    consumer.close()
    with pytest.raises(LoopClosedError) as info:
        consumer.fetch(FetchRequest(topic, 0, 0))
    assert isinstance(info.value, IllegalStateError) and isinstance(info.value, KafkaError)


def test_partitions_for_tells_how_many_partitions_a_topic_has(broker, topic):
    """Both blocking clients can tell a topic's partitions (Kafka's
    ``partitionsFor``); the consumer's question never creates a topic."""
    from conftest import BROKER_PARTITIONS

    from kclient import Producer

    with SimpleConsumer(broker.host, broker.port) as consumer:
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.partitions_for(topic)  # asking does not create it
        with Producer({"metadata.broker.list": broker.bootstrap}) as producer:
            parts = producer.partitions_for(topic)  # the producer's metadata auto-creates, as Kafka's does
        assert [p.partition for p in parts] == list(range(BROKER_PARTITIONS))
        seen = consumer.partitions_for(topic)
        assert [p.partition for p in seen] == list(range(BROKER_PARTITIONS))
        assert all(p.topic == topic and p.leader >= 0 for p in seen)
    with pytest.raises(ProducerClosedError):
        producer.partitions_for(topic)
