"""The async producer's per-partition record accumulator and the sticky
partitioner (issue 28), pure: an injected clock, no broker."""

from __future__ import annotations

import random

import pytest

from kclient import ProducerData
from kclient.client.producer.accumulator import (
    ACCUMULATOR_RECORD_OVERHEAD,
    BATCH_ENTRY_OVERHEAD,
    REQUEST_HEADER_ROOM,
    RecordAccumulator,
    StickyPartitioner,
    estimated_size,
)
from kclient.client.producer.partitioner import DefaultPartitioner
from kclient.client.producer.routing import PartitionRouter

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def one_leader(topic: str, partition: int) -> int:
    return 1


def make(**kw) -> tuple[RecordAccumulator, Clock]:
    clock = Clock()
    defaults = {"batch_size": 1000, "batch_messages": 10_000, "linger_ms": 5, "max_request_size": 100_000, "buffer_messages": 10_000}
    return RecordAccumulator(**{**defaults, **kw}, clock=clock), clock


def test_append_keeps_a_batch_open_until_linger_expires():
    acc, clock = make()
    acc.append("t", 0, "a", 1, 100)
    acc.append("t", 0, "b", 1, 100)
    assert acc.messages == 2 and len(acc) == 1
    assert acc.drain(one_leader).items == []
    assert acc.next_ready_in() == pytest.approx(0.005)
    clock.now += 0.004
    assert acc.drain(one_leader).items == []
    clock.now += 0.001
    drained = acc.drain(one_leader)
    assert (drained.items, drained.messages, drained.batches) == (["a", "b"], 2, 1)
    assert acc.messages == 0 and len(acc) == 0 and acc.next_ready_in() is None


def test_a_batch_is_ready_at_batch_size_bytes_or_batch_num_messages():
    acc, _ = make(batch_size=300, batch_messages=5)
    for i in range(3):
        acc.append("t", 0, f"s{i}", 1, 100)  # 300 bytes: full
    for i in range(5):
        acc.append("t", 1, f"c{i}", 1, 1)  # 5 records: full
    acc.append("t", 2, "x", 1, 1)  # neither: lingers
    drained = acc.drain(one_leader)
    assert drained.items == ["s0", "s1", "s2", "c0", "c1", "c2", "c3", "c4"]
    assert acc.messages == 1


def test_a_record_that_would_overflow_opens_a_new_batch_and_a_large_one_goes_alone():
    acc, _ = make(batch_size=300)
    acc.append("t", 0, "a", 1, 200)
    acc.append("t", 0, "big", 1, 5000)  # does not fit: a batch of its own, full at once
    acc.append("t", 0, "c", 1, 10)
    batches = list(acc.batches())
    assert [b.items for b in batches] == [["a"], ["big"], ["c"]]
    assert [b.full for b in batches] == [True, True, False]
    # the full ones are ready, in order; "c" lingers
    assert acc.drain(one_leader).items == ["a", "big"]
    assert [b.items for b in acc.batches()] == [["c"]]


def test_flush_makes_every_batch_ready():
    acc, _ = make()
    acc.append("t", 0, "a", 1, 1)
    acc.append("u", 3, "b", 1, 1)
    assert acc.drain(one_leader).items == []
    assert sorted(acc.drain(one_leader, flush=True).items) == ["a", "b"]


def test_holding_buffer_messages_makes_every_batch_ready():
    acc, _ = make(buffer_messages=3)
    acc.append("t", 0, "a", 2, 1)
    assert not acc.exhausted and acc.drain(one_leader).items == []
    acc.append("t", 1, "b", 1, 1)
    assert acc.exhausted and acc.next_ready_in() == 0.0
    assert acc.drain(one_leader).messages == 3


#: A max.request.size whose drains hold two 600-byte batches, not three.
TWO_BATCHES = REQUEST_HEADER_ROOM + 2 * (600 + BATCH_ENTRY_OVERHEAD) + 10


def test_drain_groups_by_leader_bounded_by_max_request_size():
    acc, _ = make(batch_size=600, max_request_size=TWO_BATCHES)
    leaders = {0: "b1", 1: "b2", 2: "b1", 3: "b1"}
    for p in range(4):
        acc.append("t", p, f"p{p}", 1, 600)  # each batch full
    first = acc.drain(lambda t, p: leaders[p])
    # b1 takes p0 and p2 (p3 would not fit), b2 takes p1
    assert first.items == ["p0", "p2", "p1"]
    assert acc.drain(lambda t, p: leaders[p]).items == ["p3"]


def test_drain_takes_a_batch_larger_than_max_request_size_alone():
    acc, _ = make(batch_size=600, max_request_size=TWO_BATCHES)
    acc.append("t", 0, "huge", 1, 5000)
    acc.append("t", 1, "small", 1, 600)
    assert acc.drain(one_leader).items == ["huge"]
    assert acc.drain(one_leader).items == ["small"]


def test_one_partitions_ready_batches_drain_in_order():
    acc, _ = make(batch_size=10)
    for i in range(20):
        acc.append("t", 0, i, 1, 5)  # two per batch
    drained = acc.drain(one_leader)
    assert drained.items == list(range(20)) and drained.batches == 10


def test_sticky_partitioner_stays_until_switched_then_moves():
    sticky = StickyPartitioner(random.Random(7).random)
    first = sticky.partition("t", 8)
    assert all(sticky.partition("t", 8) == first for _ in range(50))
    sticky.switch("t", (first + 1) % 8, 8)  # not the sticky one: no effect
    assert sticky.partition("t", 8) == first
    seen = {first}
    for _ in range(30):
        current = sticky.partition("t", 8)
        sticky.switch("t", current, 8)
        nxt = sticky.partition("t", 8)
        assert nxt != current and 0 <= nxt < 8
        seen.add(nxt)
    assert len(seen) > 4  # spread over the partitions
    assert sticky.partition("one", 1) == 0
    sticky.switch("one", 0, 1)
    assert sticky.partition("one", 1) == 0


def routed(hash_keys=True, sticky_keyless=True, **kw):
    acc, clock = make(**kw)
    router = PartitionRouter(acc, lambda topic: {"t": 16, "one": 1}.get(topic, 0), hash_keys=hash_keys, sticky_keyless=sticky_keyless, sticky=StickyPartitioner(random.Random(3).random))
    return acc, clock, router


def test_router_places_keyed_records_where_the_default_partitioner_does():
    acc, _, router = routed()
    data = [ProducerData("t", key=b"key-%d" % i, messages=[b"v%d" % i]) for i in range(200)]
    router.route(data)
    expected = DefaultPartitioner()
    for batch in acc.batches():
        for d in batch.items:
            assert batch.partition == expected.partition(d.key, 16)
            assert d.partition is None  # the event handler still decides
    # every record once, each partition's in order
    drained = acc.drain(one_leader, flush=True).items
    assert sorted(drained, key=lambda d: int(d.messages[0][1:])) == data
    for p in range(16):
        mine = [d for d in drained if expected.partition(d.key, 16) == p]
        assert mine == [d for d in data if expected.partition(d.key, 16) == p]


def test_router_sticks_keyless_records_to_one_partition_per_batch():
    acc, _, router = routed(batch_size=10 * (100 + ACCUMULATOR_RECORD_OVERHEAD))
    chosen = []
    for _ in range(100):
        chosen.append(router.sticky.partition("t", 16))
        router.route([ProducerData("t", messages=[b"x" * 100])])
    runs = [chosen[i : i + 10] for i in range(0, 100, 10)]
    assert all(len(set(run)) == 1 for run in runs)  # each partition's batch filled before moving on
    assert all(runs[i][0] != runs[i + 1][0] for i in range(9))
    batches = list(acc.batches())
    assert sorted(b.messages for b in batches) == [10] * 10
    for b in batches:
        assert {d.partition for d in b.items} == {b.partition}  # the sticky choice is sent there
    assert len({b.partition for b in batches}) > 3


def test_router_switches_sticky_partition_when_its_batch_is_drained():
    acc, clock, router = routed()
    router.route([ProducerData("t", messages=[b"a"])])
    [first] = [b.partition for b in acc.batches()]
    clock.now += 1
    acc.drain(one_leader)
    router.route([ProducerData("t", messages=[b"b"])])
    [second] = [b.partition for b in acc.batches()]
    assert second != first


def test_router_leaves_other_records_to_the_event_handler():
    acc, _, router = routed(hash_keys=False, sticky_keyless=False)
    router.route([ProducerData("t", key=b"k", messages=[b"a"]), ProducerData("t", messages=[b"b"]), ProducerData("t", messages=[b"c"], partition=5)])
    assert sorted((b.partition, [d.messages for d in b.items]) for b in acc.batches()) == [(-1, [(b"a",), (b"b",)]), (5, [(b"c",)])]
    assert router.unknown_topics([ProducerData("new", messages=[b"x"]), ProducerData("t", messages=[b"x"])]) == {"new"}


def test_append_many_makes_the_batches_appending_one_by_one_makes():
    one, _ = make(batch_size=300, batch_messages=4)
    many, _ = make(batch_size=300, batch_messages=4)
    sizes = [100, 250, 10, 10, 10, 10, 10, 400, 5, 120, 120, 120]
    for i, size in enumerate(sizes):
        one.append("t", 0, i, 1, size)
    many.append_many("t", 0, list(range(5)), [1] * 5, sizes[:5])
    many.append_many("t", 0, list(range(5, 12)), [1] * 7, sizes[5:])
    shape = lambda acc: [(b.items, b.size, b.messages, b.full) for b in acc.batches()]  # noqa: E731
    assert shape(many) == shape(one)
    assert many.messages == one.messages == 12


def test_estimated_size_counts_key_value_and_overhead():
    assert estimated_size(b"kk", (b"abc", None)) == 2 * (2 + ACCUMULATOR_RECORD_OVERHEAD) + 3


def test_batch_num_messages_bounds_a_partitions_share_of_one_drain():
    acc, _ = make(batch_size=10_000, batch_messages=200)
    acc.append_many("t", 0, list(range(1000)), [1] * 1000, [10] * 1000)  # five full batches of 200
    acc.append("t", 1, "other", 1, 10)
    first = acc.drain(one_leader, flush=True)
    assert first.items[:200] == list(range(200)) and first.messages == 201  # one batch of partition 0, and partition 1
    rest = []
    while acc.messages:
        drained = acc.drain(one_leader)
        assert drained.messages == 200
        rest += drained.items
    assert rest == list(range(200, 1000))


def test_router_one_partition_fast_path_makes_the_batches_the_general_path_makes():
    data = [ProducerData("one", key=None if i % 3 else b"k%d" % i, messages=[b"v" * (i % 50)] if i % 7 else [b"a", b"bb"]) for i in range(500)]
    fast, _, fast_router = routed(batch_size=700, batch_messages=30)
    fast_router.route(data)
    general, _, general_router = routed(batch_size=700, batch_messages=30)
    general_router.route(iter(data))  # not a list: the general loop
    shape = lambda acc: [(b.partition, b.items, b.size, b.messages) for b in acc.batches()]  # noqa: E731
    assert shape(fast) == shape(general) and len(shape(fast)) > 5


@pytest.mark.parametrize("topic", ["one", "t"])
@pytest.mark.parametrize("hash_keys,sticky_keyless", [(True, True), (False, True), (False, False)])
def test_router_one_topic_path_makes_the_batches_the_general_path_makes(topic, hash_keys, sticky_keyless):
    """Keyed, keyless and explicit-partition items, some tracked (sent with
    a callback), over 1 and 16 partitions: the one-topic path (compiled
    when built) gives the batches, sticky partitions and sticky switches of
    the general loop, over several polls."""
    from kclient.client.producer.data import new_tuple
    from kclient.client.producer.delivery import TrackedData

    def item(i):
        d = ProducerData(topic, key=b"k%d" % (i % 37) if i % 3 == 0 else None, messages=[b"v" * (i % 90)] if i % 7 else [b"a", b"bb"], partition=i % 16 if i % 11 == 0 else None)
        return new_tuple(TrackedData, (*d, i)) if i % 5 == 0 else d

    polls = [[item(i) for i in range(start, start + 97)] for start in range(0, 970, 97)]
    fast, _, fast_router = routed(hash_keys, sticky_keyless, batch_size=700, batch_messages=30)
    general, _, general_router = routed(hash_keys, sticky_keyless, batch_size=700, batch_messages=30)
    shape = lambda acc: [(b.partition, b.items, b.size, b.messages, b.full) for b in acc.batches()]  # noqa: E731
    for i, poll in enumerate(polls):
        fast_router.route(poll)
        general_router.route(iter(poll))  # not a list: the general loop
        assert shape(fast) == shape(general)
        assert fast_router.sticky.current(topic) == general_router.sticky.current(topic)
        if i % 3 == 2:
            assert fast.drain(one_leader).items == general.drain(one_leader).items
    assert len(shape(fast)) > 5


def test_append_many_matches_one_by_one_for_any_shape():
    """Random runs of items (empty ones included) against batch.size and
    batch.num.messages bounds: `append_many` closes batches exactly where
    item-by-item `append` does."""
    rng = random.Random(11)
    for _ in range(200):
        bounds = {"batch_size": rng.randint(1, 400), "batch_messages": rng.randint(1, 8)}
        one, _ = make(**bounds)
        many, _ = make(**bounds)
        items = list(range(rng.randint(0, 40)))
        counts = [rng.choice([0, 1, 1, 1, 2, 5]) for _ in items]
        sizes = [rng.choice([0, 5, 50, 120, 500]) for _ in items]
        for i in items:
            one.append("t", 0, i, counts[i], sizes[i])
        cut = rng.randint(0, len(items))
        many.append_many("t", 0, items[:cut], counts[:cut], sizes[:cut])
        many.append_many("t", 0, items[cut:], counts[cut:], sizes[cut:])
        shape = lambda acc: [(b.items, b.size, b.messages, b.full) for b in acc.batches()]  # noqa: E731
        assert shape(many) == shape(one)
        assert many.messages == one.messages


# -- KIP-794: adaptive partitioning ---------------------------------------------


def test_weighted_choice_folds_the_inverted_loads_into_a_cumulative_table():
    from kclient.client.producer.accumulator import weighted_choice

    # Loads 0, 3, 1 weigh 4, 1, 3 (max + 1 - load): [0, 4) -> 0, [4, 5) -> 1, [5, 8) -> 2.
    picks = {r: weighted_choice([0, 1, 2], [0, 3, 1], r) for r in (0.0, 0.49, 0.5, 0.62, 0.625, 0.99)}
    assert picks == {0.0: 0, 0.49: 0, 0.5: 1, 0.62: 1, 0.625: 2, 0.99: 2}
    assert weighted_choice([4, 7], [10, 10], 0.3) is None  # all equal: the caller's uniform choice
    assert weighted_choice([7], [10], 0.3) == 7
    assert weighted_choice([], [], 0.3) is None


def test_adaptive_sticky_partitioner_prefers_the_least_loaded_partition():
    loads = {0: 0, 1: 30_000, 2: 30_000, 3: 30_000}
    sticky = StickyPartitioner(random.Random(5).random, load=lambda topic, n: (list(range(n)), [loads[p] for p in range(n)]))
    chosen = []
    for _ in range(2000):
        p = sticky.partition("t", 4)
        chosen.append(p)
        sticky.switch("t", p, 4)
    # Weights 30001, 1, 1, 1 (max + 1 - load): partition 0 all but always,
    # where a uniform choice would give it a quarter.
    assert chosen.count(0) / len(chosen) > 0.99


def test_adaptive_sticky_partitioner_with_equal_loads_chooses_as_kip_480():
    adaptive = StickyPartitioner(random.Random(9).random, load=lambda topic, n: (list(range(n)), [7] * n))
    uniform = StickyPartitioner(random.Random(9).random)
    for sticky in (adaptive, uniform):
        for _ in range(50):
            sticky.switch("t", sticky.partition("t", 6), 6)
    assert [adaptive.partition("t", 6) for _ in range(3)] == [uniform.partition("t", 6) for _ in range(3)]
    assert adaptive.current("t") == uniform.current("t")


def test_partition_load_counts_queued_bytes_and_leaves_out_unavailable_partitions():
    clock = Clock()
    acc = RecordAccumulator(batch_size=1000, linger_ms=10, availability_timeout_ms=50, clock=clock)
    acc.append("t", 1, "a", 1, 300)
    acc.append("t", 1, "b", 1, 900)  # a second batch
    clock.now += 0.005
    acc.append("t", 2, "c", 1, 100)
    assert acc.partition_load("t", 4) == ([0, 1, 2, 3], [0, 1200, 100, 0])
    clock.now += 0.056  # partition 1's batch waited linger + 51 ms: its leader is not taking data
    assert acc.partition_load("t", 4) == ([0, 2, 3], [0, 100, 0])
    clock.now += 0.01
    assert acc.partition_load("t", 3) == ([0], [0])
    # Off (0), or when nothing would be left: every partition.
    assert RecordAccumulator(clock=clock).partition_load("t", 2) == ([0, 1], [0, 0])
    lone = RecordAccumulator(linger_ms=0, availability_timeout_ms=1, clock=clock)
    lone.append("t", 0, "x", 1, 10)
    clock.now += 1
    assert lone.partition_load("t", 1) == ([0], [10])


def test_adaptive_router_sends_keyless_records_away_from_a_loaded_partition():
    clock = Clock()
    acc = RecordAccumulator(batch_size=500, linger_ms=1000, clock=clock)
    for _ in range(20):
        acc.append("t", 0, ProducerData("t", messages=[b"x" * 400], partition=0), 1, 430)  # 20 batches on partition 0
    router = PartitionRouter(acc, lambda topic: 2, hash_keys=True, sticky_keyless=True,
                             sticky=StickyPartitioner(random.Random(1).random, load=acc.partition_load))
    router.route([ProducerData("t", messages=[b"y" * 40]) for _ in range(100)])
    keyless = [d for b in acc.batches() for d in b.items if d.messages[0][:1] == b"y"]
    assert len(keyless) == 100
    assert sum(d.partition == 1 for d in keyless) > 80  # 52 or so when the choice alternates


def test_partition_load_running_sums_match_the_batches_after_random_appends_and_drains():
    # partition_load keeps the closed batches' bytes as running sums (no
    # walk over the batches per sticky switch): after any mix of appends,
    # in-place appends and drains they equal the sums over the batches held.
    rng = random.Random(28)
    clock = Clock()
    acc = RecordAccumulator(batch_size=1000, batch_messages=7, linger_ms=5, max_request_size=4000, clock=clock)
    for step in range(3000):
        roll = rng.random()
        topic = rng.choice(("a", "b"))
        if roll < 0.6:
            acc.append(topic, rng.randrange(4), step, 1, rng.randrange(1, 600))
        elif roll < 0.8:
            n = rng.randrange(1, 12)
            acc.append_many(topic, rng.randrange(4), list(range(n)), [1] * n, [rng.randrange(1, 400) for _ in range(n)])
        else:
            clock.now += rng.random() * 0.01
            acc.drain(lambda t, p: p % 2, flush=rng.random() < 0.2)
        for t in ("a", "b"):
            expected = [0] * 4
            for batch in acc.batches():
                if batch.topic == t:
                    expected[batch.partition] += batch.size
            assert acc.partition_load(t, 4) == ([0, 1, 2, 3], expected)
