"""The high-level consumer's fetch loop against a scripted broker: it sends
the next fetch before decoding and handing over the last one (so the broker
reads while the client decodes), from the offsets the batch headers give,
and never hands out what it fetched ahead for a partition it stopped
fetching. No network: a fake TrioSimpleConsumer answers from in-memory
logs as a broker would (whole batches from the one holding the offset, up
to the size asked for)."""

from __future__ import annotations

import types

import pytest
import trio
import trio.lowlevel
from helpers.wait import wait_for_async

from kclient.client.consumer.fetcher import FetcherGroup, PartitionTopicInfo
from kclient.client.consumer.message_set import ByteBufferMessageSet, MultiFetchResponse
from kclient.errors import (
    OFFSET_OUT_OF_RANGE,
    CorruptRecordError,
    MessageSizeTooLargeError,
)
from kclient.protocol.records import v2
from kclient.protocol.records.scan import read_batch_info

pytestmark = pytest.mark.unit


class FakeBroker:
    """In-memory logs: {partition: [(base_offset, batch bytes)]}."""

    def __init__(self, logs: dict[int, list[tuple[int, bytes]]]) -> None:
        self.logs = logs
        self.fetches: list[list[tuple[int, int]]] = []  # [(partition, offset)] per multifetch
        self.in_flight = 0
        self.most_in_flight = 0
        self.out_of_range_once: set[int] = set()

    async def multifetch_sent(self, requests, max_wait_ms, min_bytes, sent):
        self.fetches.append([(r.partition, r.offset) for r in requests])
        if sent is not None:
            sent()  # the request is on the wire
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await trio.sleep(0.001)  # kept: the fake broker's latency, during which the client decodes
            out = []
            for r in requests:
                if r.partition in self.out_of_range_once:
                    self.out_of_range_once.discard(r.partition)
                    out.append(ByteBufferMessageSet("t", r.partition, b"", r.offset, error_code=OFFSET_OUT_OF_RANGE, max_size=r.max_size))
                    continue
                data = b""
                for _base, batch in self.logs[r.partition]:
                    last = read_batch_info(batch, 0).last_offset
                    if last < r.offset:
                        continue
                    if data and len(data) + len(batch) > r.max_size:
                        break
                    data += batch
                    if len(data) >= r.max_size:
                        break
                out.append(ByteBufferMessageSet("t", r.partition, data[: r.max_size], r.offset, 10**9, max_size=r.max_size))
            return MultiFetchResponse(out)
        finally:
            self.in_flight -= 1

    async def get_offsets_before(self, topic, partition, time, max_offsets):
        return [0]


class FakeCore:
    def __init__(self, max_bytes: int) -> None:
        self.config = types.SimpleNamespace(
            fetch_message_max_bytes=max_bytes,
            fetch_wait_max_ms=0,
            fetch_min_bytes=1,
            refresh_leader_backoff_ms=10,
            auto_offset_reset="smallest",
        )
        self.key_decoder = self.value_decoder = None
        self.delivered: dict[int, list] = {}
        self.resets: list = []
        self.broker: FakeBroker | None = None
        self.fetches_sent: list[int] = []  # at each delivery, how many fetches had been sent

    async def deliver(self, index: int, item) -> None:
        self.delivered.setdefault(index, []).append(item)
        if self.broker is not None:
            self.fetches_sent.append(len(self.broker.fetches))
        await trio.lowlevel.checkpoint()

    def reset_consumed(self, key, offset) -> None:
        self.resets.append((key, offset))


def batches(count: int, per_batch: int, size: int = 100, start: int = 0) -> list[tuple[int, bytes]]:
    out = []
    for b in range(count):
        base = start + b * per_batch
        out.append((base, v2.build_batch([(None, b"%08d" % (base + i) + b"x" * (size - 8), 1000 + base + i) for i in range(per_batch)], base_offset=base)))
    return out


def offsets_of(items) -> list[int]:
    return [m.offset for item in items if isinstance(item, tuple) for m in item[1]]


async def run_until(group: FetcherGroup, broker: FakeBroker, infos, done) -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(group._fetch_until_done, broker, 0, infos)
            await wait_for_async(done, "the fetcher to be done", timeout=10, interval=0.001)
            nursery.cancel_scope.cancel()


async def test_fetches_are_sent_ahead_and_every_message_is_handed_out_once_in_order():
    broker = FakeBroker({0: batches(40, 10), 1: batches(25, 7)})
    core = FakeCore(max_bytes=3000)
    infos = [PartitionTopicInfo("t", 0, 0, 0), PartitionTopicInfo("t", 1, 1, 5)]
    core.broker = broker
    group = FetcherGroup(core, infos, generation=3)  # type: ignore[arg-type]
    await run_until(group, broker, list(infos), lambda: infos[0].fetch_offset >= 400 and infos[1].fetch_offset >= 175)
    assert offsets_of(core.delivered[0]) == list(range(400))
    assert offsets_of(core.delivered[1]) == list(range(5, 175))
    assert all(item[0] == 3 for items in core.delivered.values() for item in items)
    assert broker.most_in_flight == 1  # one fetch at a time
    # the next fetch was sent before the last one's chunks were handed over:
    # the chunks of the n-th fetch (two partitions each) went out after n + 1 had been sent
    assert core.fetches_sent[:2] == [2, 2] and all(sent >= i // 2 + 2 for i, sent in enumerate(core.fetches_sent[:20]))
    # each fetch asked for where the one before it ended
    for before, after in zip(broker.fetches, broker.fetches[1:]):
        assert dict(after)[0] >= dict(before)[0]


async def test_a_partition_that_fails_to_decode_stops_and_what_was_fetched_ahead_is_dropped():
    log = batches(30, 10)
    damaged = bytearray(log[12][1])
    damaged[-3] ^= 0xFF  # offsets 120..129: CRC mismatch
    log[12] = (log[12][0], bytes(damaged))
    broker = FakeBroker({0: log, 1: batches(30, 10)})
    core = FakeCore(max_bytes=2500)
    infos = [PartitionTopicInfo("t", 0, 0, 0), PartitionTopicInfo("t", 1, 1, 0)]
    group = FetcherGroup(core, infos, generation=1)  # type: ignore[arg-type]
    await run_until(group, broker, list(infos), lambda: infos[1].fetch_offset >= 300)
    errors = [item for item in core.delivered[0] if isinstance(item, BaseException)]
    assert len(errors) == 1 and isinstance(errors[0], CorruptRecordError)
    got = offsets_of(core.delivered[0])
    assert got == list(range(len(got))) and len(got) <= 120  # nothing after the bad batch, nothing twice
    assert offsets_of(core.delivered[1]) == list(range(300))
    fetched_after = [f for f in broker.fetches if 0 in dict(f) and dict(f)[0] > 120]
    assert len(fetched_after) <= 1  # at most the fetch already sent ahead


async def test_offset_out_of_range_resets_then_fetching_goes_on():
    broker = FakeBroker({0: batches(10, 10)})
    broker.out_of_range_once.add(0)
    core = FakeCore(max_bytes=5000)
    infos = [PartitionTopicInfo("t", 0, 0, 77)]
    group = FetcherGroup(core, infos, generation=1)  # type: ignore[arg-type]
    await run_until(group, broker, list(infos), lambda: infos[0].fetch_offset >= 100)
    assert core.resets == [(("t", 0), 0)]
    assert offsets_of(core.delivered[0]) == list(range(100))


async def test_a_first_batch_larger_than_the_fetch_size_is_reported_once():
    broker = FakeBroker({0: batches(3, 10, size=500), 1: batches(5, 2)})
    core = FakeCore(max_bytes=1000)
    infos = [PartitionTopicInfo("t", 0, 0, 0), PartitionTopicInfo("t", 1, 1, 0)]
    group = FetcherGroup(core, infos, generation=1)  # type: ignore[arg-type]
    await run_until(group, broker, list(infos), lambda: infos[1].fetch_offset >= 10 and 0 in core.delivered)
    await trio.lowlevel.checkpoint()
    assert [type(item) for item in core.delivered[0]] == [MessageSizeTooLargeError]
    assert offsets_of(core.delivered[1]) == list(range(10))


async def test_an_error_of_the_fetch_loop_leaves_it_as_itself_not_in_a_group():
    """_fetch_loop tells AuthenticationError (never retried, handed to the
    streams) from other errors by its type: the loop's own nursery (for the
    fetch sent ahead) must not wrap it."""
    import pytest

    from kclient.errors import SaslAuthenticationFailedError

    class Refusing(FakeBroker):
        async def multifetch_sent(self, requests, max_wait_ms, min_bytes, sent):
            raise SaslAuthenticationFailedError("bad password")

    core = FakeCore(max_bytes=1000)
    infos = [PartitionTopicInfo("t", 0, 0, 0)]
    group = FetcherGroup(core, infos, generation=1)  # type: ignore[arg-type]
    with pytest.raises(SaslAuthenticationFailedError):
        await group._fetch_until_done(Refusing({0: []}), 0, list(infos))


async def test_starting_offsets_are_looked_up_together_and_a_failure_stops_the_rest():
    import pytest

    from kclient.errors import KafkaConnectionError

    class Broker(FakeBroker):
        def __init__(self, logs, fail: bool) -> None:
            super().__init__(logs)
            self.fail = fail
            self.lookups: list[int] = []

        async def get_offsets_before(self, topic, partition, time, max_offsets):
            self.lookups.append(partition)
            if self.fail:
                raise KafkaConnectionError("no broker")
            await trio.sleep(0.001)  # kept: the fake broker's latency, so the lookups overlap
            return [partition * 10]

    core = FakeCore(max_bytes=1000)
    infos = [PartitionTopicInfo("t", p, 0, -1) for p in range(4)]
    group = FetcherGroup(core, infos, generation=1)  # type: ignore[arg-type]
    broker = Broker({p: [] for p in range(4)}, fail=False)
    await group._reset_offsets(broker, infos)
    assert [i.fetch_offset for i in infos] == [0, 10, 20, 30] and sorted(broker.lookups) == [0, 1, 2, 3]
    assert sorted(core.resets) == [(("t", p), p * 10) for p in range(4)]
    failing = Broker({p: [] for p in range(4)}, fail=True)
    infos = [PartitionTopicInfo("t", p, 0, -1) for p in range(4)]
    with pytest.raises(KafkaConnectionError):
        await group._reset_offsets(failing, infos)
    assert failing.lookups == [0]  # one attempt, as when they went one by one
