"""KafkaStream's iteration without a broker: chunks handed over from a fake
loop, as the connector's fetchers queue them. Checks that the C-level
iteration (a chain of per-chunk map/zip pipelines) hands out every message
once, in order, whether read with ``for`` or ``next()`` or both, that what
it counts as consumed is exactly what it handed out (also after a
rebalance cleared the chunk being read), and that timeouts, errors and
interrupts leave the stream usable."""

from __future__ import annotations

import collections
import types

import pytest

from kclient.client.consumer.group.streams import (
    END,
    TIMEOUT,
    KafkaStream,
    MessageAndMetadata,
    MessageChunk,
)
from kclient.errors import ConsumerTimeoutError, CorruptRecordError

pytestmark = pytest.mark.unit


class FakeCore:
    def __init__(self) -> None:
        self.closed = False
        self.generation = 1
        self.config = types.SimpleNamespace(consumer_timeout_ms=10)
        self.consumed: list[tuple[str, int, int]] = []

    def record_consumed(self, m: MessageAndMetadata) -> None:
        self.consumed.append((m.topic, m.partition, m.offset))


class FakeLoop:
    """Runs the stream's receive coroutine to completion in the calling
    thread (it never awaits anything that blocks)."""

    def __init__(self, core: FakeCore) -> None:
        self.core = core
        self.items: collections.deque = collections.deque()
        self.raise_once: BaseException | None = None

    def call(self, afn):
        if self.raise_once is not None:
            exc, self.raise_once = self.raise_once, None
            raise exc
        coro = afn()
        try:
            coro.send(None)
        except StopIteration as stop:
            return stop.value
        raise AssertionError("receive awaited")

    async def receive(self):
        if self.items:
            return self.items.popleft()
        return END if self.core.closed else TIMEOUT


def rows_for(first: int, count: int) -> tuple[list[int], list[tuple]]:
    offsets = list(range(first, first + count))
    return offsets, [(None if o % 2 else b"k%d" % o, b"v%d" % o, 1000 + o, ()) for o in offsets]


def chunk(partition: int, first: int, count: int, topic: str = "t") -> MessageChunk:
    return MessageChunk(topic, partition, *rows_for(first, count))


def expected(c: MessageChunk) -> list[tuple]:
    offsets, rows = rows_for(c.offsets[0], len(c)) if len(c) else ([], [])
    return [(r[0], r[1], c.topic, c.partition, o, r[2]) for o, r in zip(offsets, rows)]


@pytest.fixture
def setup():
    core = FakeCore()
    loop = FakeLoop(core)
    stream = KafkaStream(core, 0, loop, loop.receive, "c-0")  # type: ignore[arg-type]
    return core, loop, stream


def read(stream, n: int) -> list[MessageAndMetadata]:
    out = []
    for m in stream:
        out.append(m)
        if len(out) == n:
            break
    return out


def test_a_chunk_is_a_sequence_of_message_and_metadata():
    c = chunk(3, 10, 5)
    assert len(c) == 5
    assert [tuple(m) for m in c] == expected(c)
    assert type(c[0]) is MessageAndMetadata and c[0].offset == 10 and c[-1].offset == 14
    assert c[1].key is None and c[0].key == b"k10" and c[4].message == b"v14" and c[4].timestamp == 1014
    assert [m.offset for m in c[1:3]] == [11, 12]
    decoded = MessageChunk("t", 3, *rows_for(10, 5), keys=["K"] * 5, values=list(range(5)))
    assert [(m.key, m.value) for m in decoded] == [("K", i) for i in range(5)]


def test_for_and_next_share_one_position_across_chunks(setup):
    core, loop, stream = setup
    chunks = [chunk(0, 0, 4), chunk(1, 100, 3), chunk(0, 4, 5)]
    loop.items.extend((1, c) for c in chunks)
    want = [m for c in chunks for m in expected(c)]
    got = read(stream, 2)  # a loop left with break inside the first chunk
    got.append(next(stream))
    got += read(stream, 3)  # crosses into the second chunk
    got.append(next(stream))
    while len(got) < len(want):
        got.append(next(stream))
    assert [tuple(m) for m in got] == want
    assert all(type(m) is MessageAndMetadata for m in got)
    with pytest.raises(ConsumerTimeoutError):
        next(stream)
    # at each chunk boundary the last message handed out was recorded
    assert core.consumed == [("t", 0, 3), ("t", 1, 102), ("t", 0, 8)]


def test_last_message_is_exactly_the_last_handed_out(setup):
    _, loop, stream = setup
    c = chunk(2, 50, 10)
    loop.items.append((1, c))
    assert stream.last_message is None
    it = iter(stream)
    for i in range(7):
        m = next(it)
        assert stream.last_message == m and stream.last_message.offset == 50 + i


def test_clear_stops_the_chunk_and_keeps_the_position(setup):
    core, loop, stream = setup
    first, second = chunk(0, 0, 10), chunk(1, 0, 3)
    loop.items.extend([(1, first)])
    got = read(stream, 4)
    stream.clear()  # a rebalance took partition 0 away
    assert stream.last_message == got[-1]
    core.generation = 2
    loop.items.extend([(1, chunk(0, 10, 5)), (2, second)])  # a stale chunk, then a new one
    rest = read(stream, 3)
    assert [tuple(m) for m in rest] == expected(second)
    assert core.consumed[0] == ("t", 0, 3)
    stream.forget_last()
    assert stream.last_message is None


def test_clear_while_a_for_loop_is_inside_the_chunk(setup):
    core, loop, stream = setup
    loop.items.append((1, chunk(0, 0, 10)))
    got = []
    with pytest.raises(ConsumerTimeoutError):
        for m in stream:
            got.append(m)
            if len(got) == 6:
                stream.clear()
    assert [m.offset for m in got] == list(range(6))
    assert core.consumed == [("t", 0, 5)]


def test_timeouts_errors_and_interrupts_leave_the_stream_usable(setup):
    _, loop, stream = setup
    with pytest.raises(ConsumerTimeoutError):
        next(stream)
    loop.items.append((1, chunk(0, 0, 2)))
    assert [m.offset for m in read(stream, 2)] == [0, 1]
    with pytest.raises(ConsumerTimeoutError):
        read(stream, 1)
    loop.items.extend([CorruptRecordError("t-0 offset 2: bad"), (1, chunk(0, 5, 2))])
    with pytest.raises(CorruptRecordError, match="bad"):
        read(stream, 1)
    assert next(stream).offset == 5
    loop.raise_once = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        read(stream, 5)  # inside the chunk, then waiting for the next one
    loop.items.append((1, chunk(0, 7, 1)))
    assert next(stream).offset == 7
    loop.raise_once = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        next(stream)
    loop.items.append((1, chunk(0, 8, 1)))
    assert [m.offset for m in read(stream, 1)] == [8]


def test_the_stream_ends_at_shutdown_and_stays_ended(setup):
    _, loop, stream = setup
    loop.items.extend([(1, chunk(0, 0, 3)), END])
    assert [m.offset for m in stream] == [0, 1, 2]
    with pytest.raises(StopIteration):
        next(stream)
    assert list(stream) == []
    core2 = FakeCore()
    loop2 = FakeLoop(core2)
    stream2 = KafkaStream(core2, 0, loop2, loop2.receive, "c-0")  # type: ignore[arg-type]
    loop2.items.append((1, chunk(0, 0, 3)))
    assert next(stream2).offset == 0
    core2.closed = True
    assert [m.offset for m in stream2] == [1, 2]  # the rest of the chunk, then the end
    assert list(stream2) == []


def test_decode_chunk_runs_decoders_in_message_order():
    from kclient.client.consumer.fetcher import PartitionTopicInfo, decode_chunk
    from kclient.client.consumer.message_set import ByteBufferMessageSet
    from kclient.protocol.records import v2

    recs = [(f"k{i}".encode(), f"v{i}".encode(), 1000 + i) for i in range(4)]
    buffer = v2.build_batch(recs, base_offset=0)
    calls = []

    def kd(b):
        calls.append(("k", b))
        return b.decode()

    def vd(b):
        calls.append(("v", b))
        return b.decode()

    c = decode_chunk(PartitionTopicInfo("t", 0, 0, 1), ByteBufferMessageSet("t", 0, buffer, 1), kd, vd)
    assert [(m.key, m.value, m.offset) for m in c] == [("k1", "v1", 1), ("k2", "v2", 2), ("k3", "v3", 3)]
    assert calls == [(x, f"{x}{i}".encode()) for i in (1, 2, 3) for x in "kv"]


async def test_concurrent_zookeeper_reads_raise_their_own_error_not_a_group():
    """The rebalance reads committed offsets and leaders at once
    (concurrent_calls.all_of); a failing read raises its own KafkaError, after both
    finished, so the rebalance's retry (which catches KafkaError) sees it."""
    import trio

    from kclient.client.consumer.group.concurrent_calls import all_of, both
    from kclient.errors import ZooKeeperError

    finished = []

    async def ok(value, delay):
        await trio.sleep(delay)  # kept: reads that finish in a chosen order (the thing under test)
        finished.append(value)
        return value

    async def fails():
        await trio.sleep(0)  # kept: a checkpoint (no time passes) before failing
        raise ZooKeeperError("read failed")

    assert await both(ok(1, 0.01), ok(2, 0)) == (1, 2)
    with pytest.raises(ZooKeeperError, match="read failed"):
        await all_of(fails(), ok(3, 0.02))
    assert 3 in finished  # the other call ran to its end
