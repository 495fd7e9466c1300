"""`kclient.Consumer`, the subscribe/poll consumer (issue 27), and its trio
twin `kclient.TrioConsumer`, against one bundled broker for the module: a
subscriber reads everything once within ``max.poll.records`` per poll;
commits (sync, async, explicit, auto) and ``committed``; ``seek``,
``seek_to_beginning`` / ``seek_to_end``, ``pause`` / ``resume``,
``offsets_for_times``; ``auto.offset.reset`` earliest / latest / none."""

from __future__ import annotations

import functools
import threading
import time
import uuid

import pytest
import trio
from helpers.groups import group_broker_properties, poll_settings
from helpers.records import produce
from helpers.wait import wait_for

from kclient import (
    AdminClient,
    Consumer,
    ConsumerRecord,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    ProducerData,
    TimestampType,
    TopicPartition,
    TrioConsumer,
)
from kclient.protocol.records import Header
from kclient.testing import BrokerProcess

PARTITIONS = 4
DEADLINE = 60.0
wait_until = functools.partial(wait_for, timeout=DEADLINE)


@pytest.fixture(scope="module")
def poll_broker():
    """One broker for the module; topics get `PARTITIONS` partitions."""
    with BrokerProcess(properties=group_broker_properties(PARTITIONS), keep_port=True) as proc:
        yield proc


@pytest.fixture
def group() -> str:
    return f"pc-{uuid.uuid4().hex[:10]}"


def settings(broker, group: str | None, **extra) -> dict:
    return poll_settings(broker.bootstrap, group, **extra)


def fill(broker, topic: str, per_partition: int, prefix: str = "v") -> dict[int, list[str]]:
    """``per_partition`` records in every partition; returns the values by partition."""
    values = {p: [f"{prefix}{p}-{i}" for i in range(per_partition)] for p in range(PARTITIONS)}
    for p, vs in values.items():
        produce(broker, topic, vs, partition=p)
    return values


def read(consumer: Consumer, count: int, *, polls: list[int] | None = None) -> list[ConsumerRecord]:
    """Poll until ``count`` records came (no more are asked for)."""
    got: list[ConsumerRecord] = []

    def more() -> bool:
        batch = consumer.poll(timeout_ms=200)
        if polls is not None and batch:
            polls.append(len(batch))
        got.extend(batch)
        return len(got) >= count

    wait_until(more, f"{count} records (got {len(got)})")
    return got


def test_subscribe_and_poll_read_everything_once_within_max_poll_records(poll_broker, topic, group):
    values = fill(poll_broker, topic, 25)
    produce(poll_broker, topic, [ProducerData(topic, b"key", [b"with-headers"], partition=0, headers=[Header("h", b"1")])])
    polls: list[int] = []
    with Consumer(settings(poll_broker, group, **{"max.poll.records": 7})) as consumer:
        consumer.subscribe([topic])
        records = read(consumer, 101, polls=polls)
        # Nothing more arrives: the next polls are empty.
        assert consumer.poll(timeout_ms=300) == []
        assert consumer.assignment() == {TopicPartition(topic, p) for p in range(PARTITIONS)}
        assert consumer.subscription() == {topic}
        assert all(n <= 7 for n in polls)
        for p in range(PARTITIONS):
            assert consumer.position(TopicPartition(topic, p)) == 25 + (p == 0)
        stats = consumer.statistics()
        assert stats.fetched_messages == 101 and stats.fetch_requests >= 1
        assert {key: (s.position, s.lag) for key, s in stats.partitions.items()} == {(topic, p): (25 + (p == 0), 0) for p in range(PARTITIONS)}
    got = {(r.partition, r.offset) for r in records}
    assert len(got) == len(records) == 101
    by_partition = {p: [r.value.decode() for r in records if r.partition == p and r.value != b"with-headers"] for p in range(PARTITIONS)}
    assert by_partition == values
    last = next(r for r in records if r.value == b"with-headers")
    assert (last.key, last.offset, last.headers, last.timestamp_type) == (b"key", 25, (Header("h", b"1"),), TimestampType.CREATE_TIME)
    assert abs(last.timestamp / 1000 - time.time()) < 600


def test_the_first_poll_after_assign_looks_up_the_leader_at_once(poll_broker, topic):
    """The first poll after ``assign`` finds no leader known yet: it looks
    it up at once and fetches, rather than waiting ``retry.backoff.ms``
    (a long one here) first. Before, that first poll came back empty after
    min(timeout, retry.backoff.ms): here 20 s later, with no record."""
    fill(poll_broker, topic, 3)
    tp = TopicPartition(topic, 0)
    with Consumer(settings(poll_broker, None, **{"retry.backoff.ms": 600000})) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        records = consumer.poll(timeout_ms=20000)
        assert [r.offset for r in records] == [0, 1, 2]


def test_commit_sync_async_explicit_and_committed(poll_broker, topic, group):
    fill(poll_broker, topic, 10)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Consumer(settings(poll_broker, group)) as consumer:
        consumer.subscribe(topic)
        read(consumer, 40)
        assert consumer.committed(tps) == dict.fromkeys(tps)
        consumer.commit()
        assert consumer.committed(tps) == {tp: OffsetAndMetadata(10) for tp in tps}
        consumer.commit({tps[0]: 3}, asynchronous=True)
        wait_until(lambda: consumer.committed(tps[0])[tps[0]] == OffsetAndMetadata(3), "the asynchronous commit")
        done = []
        consumer.commit([TopicPartition(topic, 1, 4)], asynchronous=True, callback=lambda offsets, error: done.append(error))
        # The callback runs inside a later poll, on this thread.
        wait_until(lambda: consumer.poll(timeout_ms=20) == [] and done, "the commit callback")
        assert done == [None]
        consumer.commit({tps[2]: OffsetAndMetadata(5, "meta")})
        assert consumer.committed(tps) == {tps[0]: OffsetAndMetadata(3), tps[1]: OffsetAndMetadata(4), tps[2]: OffsetAndMetadata(5, "meta"), tps[3]: OffsetAndMetadata(10)}
    # A new member of the group starts at the committed offsets.
    with Consumer(settings(poll_broker, group)) as consumer:
        consumer.subscribe([topic])
        again = read(consumer, 7 + 6 + 5)
        assert sorted((r.partition, r.offset) for r in again) == sorted(
            [(0, o) for o in range(3, 10)] + [(1, o) for o in range(4, 10)] + [(2, o) for o in range(5, 10)]
        )


def test_async_commits_land_in_order_callbacks_run_on_the_app_thread_and_close_waits(poll_broker, topic, group):
    fill(poll_broker, topic, 10)
    tp = TopicPartition(topic, 0)
    calls: list[tuple[int, OffsetAndMetadata, object]] = []

    def callback(offsets, error) -> None:
        calls.append((threading.get_ident(), offsets[tp], error))

    consumer = Consumer(settings(poll_broker, group, **{"enable.auto.commit": False}))
    consumer.subscribe([topic])
    read(consumer, 40)
    for offset in range(1, 11):
        consumer.commit({tp: offset}, asynchronous=True, callback=callback)
    consumer.close()  # waits for the ten commits and runs their callbacks here
    assert [(ident, om, error) for ident, om, error in calls] == [(threading.get_ident(), OffsetAndMetadata(o), None) for o in range(1, 11)]
    with Consumer(settings(poll_broker, group)) as other:
        assert other.committed(tp)[tp] == OffsetAndMetadata(10)


def test_subscribe_to_no_topic_is_unsubscribe(poll_broker, topic, group):
    fill(poll_broker, topic, 1)
    with Consumer(settings(poll_broker, group)) as consumer:
        consumer.subscribe([topic])
        read(consumer, PARTITIONS)
        assert len(consumer.assignment()) == PARTITIONS
        consumer.subscribe([])
        assert consumer.subscription() == set()
        assert consumer.assignment() == set()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_metadata_names_the_generation_and_member(poll_broker, topic, group, protocol):
    from kclient.errors import InvalidGroupIdError

    fill(poll_broker, topic, 1)
    with Consumer(settings(poll_broker, group, **{"group.protocol": protocol, "group.instance.id": "gm-1"})) as consumer:
        before = consumer.group_metadata()
        assert (before.group_id, before.generation_id, before.group_instance_id) == (group, -1, "gm-1")
        consumer.subscribe([topic])
        read(consumer, PARTITIONS)
        joined = consumer.group_metadata()
        assert joined.group_id == group and joined.generation_id >= 1 and joined.member_id and joined.group_instance_id == "gm-1"
        if protocol == "classic":  # DescribeGroups describes classic groups only
            with AdminClient({"bootstrap.servers": poll_broker.bootstrap}) as admin:
                described = admin.describe_consumer_groups([group])[group]
            assert [(m.member_id, m.group_instance_id) for m in described.members] == [(joined.member_id, "gm-1")]
    with Consumer(settings(poll_broker, None)) as consumer, pytest.raises(InvalidGroupIdError):
        consumer.group_metadata()


def test_auto_commit_commits_what_poll_handed_out_and_at_close(poll_broker, topic, group):
    fill(poll_broker, topic, 5)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    config = settings(poll_broker, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 100})
    with Consumer(config) as consumer:
        consumer.subscribe([topic])
        read(consumer, 20)

        def committed_all() -> bool:
            consumer.poll(timeout_ms=50)  # auto-commits happen in poll
            return consumer.committed(tps) == {tp: OffsetAndMetadata(5) for tp in tps}

        wait_until(committed_all, "the auto-commit")
    produce(poll_broker, topic, ["late"], partition=1)
    consumer = Consumer(config)
    consumer.subscribe([topic])
    (late,) = read(consumer, 1)
    assert (late.partition, late.offset, late.value) == (1, 5, b"late")
    consumer.close()  # commits the position
    with Consumer(settings(poll_broker, group)) as checker:
        assert checker.committed(TopicPartition(topic, 1)) == {TopicPartition(topic, 1): OffsetAndMetadata(6)}


def test_assign_seek_pause_resume_and_offsets_for_times(poll_broker, topic):
    before = int(time.time() * 1000) - 1
    fill(poll_broker, topic, 10)
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Consumer(settings(poll_broker, None)) as consumer:
        consumer.assign([t0, TopicPartition(topic, 1, 8)])
        assert consumer.assignment() == {t0, t1}
        assert consumer.position(t1) == 8 and consumer.position(t0) == 0
        assert consumer.beginning_offsets([t0]) == {t0: 0} and consumer.end_offsets([t0, t1]) == {t0: 10, t1: 10}
        first = read(consumer, 12)
        assert sorted((r.partition, r.offset) for r in first) == [(0, o) for o in range(10)] + [(1, 8), (1, 9)]
        consumer.seek(t0, 7)
        assert consumer.position(t0) == 7
        assert [(r.partition, r.offset) for r in read(consumer, 3)] == [(0, 7), (0, 8), (0, 9)]
        consumer.seek_to_beginning([t1])
        assert consumer.position(t1) == 0
        consumer.seek_to_end()
        assert consumer.position(t1) == 10 and consumer.poll(timeout_ms=200) == []
        # pause: nothing of t0 is handed out until resume
        consumer.pause([t0])
        assert consumer.paused() == {t0}
        produce(poll_broker, topic, ["p0"], partition=0)
        produce(poll_broker, topic, ["p1"], partition=1)
        got = read(consumer, 1)
        assert [(r.partition, r.value) for r in got] == [(1, b"p1")]
        assert consumer.poll(timeout_ms=300) == []
        consumer.resume([t0])
        assert consumer.paused() == set()
        assert [(r.partition, r.value) for r in read(consumer, 1)] == [(0, b"p0")]
        found = consumer.offsets_for_times({t0: before, t1: int(time.time() * 1000) + 3_600_000})
        assert found[t0] is not None and found[t0].offset == 0 and found[t0].timestamp >= before
        assert found[t1] is None
        consumer.seek(TopicPartition(topic, 0, found[t0].offset))
        assert read(consumer, 11)[0].offset == 0


def test_auto_offset_reset_earliest_latest_and_none(poll_broker, topic, group):
    fill(poll_broker, topic, 3)
    with Consumer(settings(poll_broker, group + "-e", **{"auto.offset.reset": "earliest"})) as consumer:
        consumer.subscribe([topic])
        assert len(read(consumer, 12)) == 12
    with Consumer(settings(poll_broker, group + "-l", **{"auto.offset.reset": "latest"})) as consumer:
        consumer.subscribe([topic])
        tp = TopicPartition(topic, 2)
        wait_until(lambda: consumer.poll(timeout_ms=100) == [] and tp in consumer.assignment(), "the assignment")
        assert consumer.position(tp) == 3
        produce(poll_broker, topic, ["new"], partition=2)
        (record,) = read(consumer, 1)
        assert (record.partition, record.offset, record.value) == (2, 3, b"new")
    with Consumer(settings(poll_broker, group + "-n", **{"auto.offset.reset": "none"})) as consumer:
        consumer.subscribe([topic])

        def refused() -> NoOffsetForPartitionError | None:
            try:
                consumer.poll(timeout_ms=100)
            except NoOffsetForPartitionError as exc:
                return exc
            return None

        error = wait_until(refused, "NoOffsetForPartitionError")
        assert {tp.partition for tp in error.partitions} <= set(range(PARTITIONS)) and "auto.offset.reset=none" in str(error)
    # With an offset committed, "none" starts there.
    with Consumer(settings(poll_broker, group + "-n")) as committer:
        committer.commit({TopicPartition(topic, p): 1 for p in range(PARTITIONS)})
    with Consumer(settings(poll_broker, group + "-n", **{"auto.offset.reset": "none"})) as consumer:
        consumer.subscribe([topic])
        expected = sorted([(p, o) for p in range(PARTITIONS) for o in (1, 2)] + [(2, 3)])  # (2, 3): "new"
        assert sorted((r.partition, r.offset) for r in read(consumer, 9)) == expected


def test_iteration_stops_after_consumer_timeout(poll_broker, topic, group):
    fill(poll_broker, topic, 2)
    with Consumer(settings(poll_broker, group, **{"consumer.timeout.ms": 500})) as consumer:
        consumer.subscribe([topic])
        records = list(consumer)
    assert sorted((r.partition, r.offset) for r in records) == [(p, o) for p in range(PARTITIONS) for o in range(2)]


def test_trio_consumer(poll_broker, topic, group):
    fill(poll_broker, topic, 5)
    events: list[tuple[str, list[TopicPartition]]] = []

    class Listener:
        async def on_partitions_assigned(self, assigned):
            await trio.lowlevel.checkpoint()
            events.append(("assigned", assigned))

        def on_partitions_revoked(self, revoked):
            events.append(("revoked", revoked))

        def on_partitions_lost(self, lost):
            events.append(("lost", lost))

    async def main() -> list[ConsumerRecord]:
        got: list[ConsumerRecord] = []
        async with TrioConsumer(settings(poll_broker, group, **{"consumer.timeout.ms": 500})) as consumer:
            consumer.subscribe([topic], listener=Listener())
            with trio.fail_after(DEADLINE):
                while len(got) < 20:
                    got += await consumer.poll(timeout_ms=200)
            await consumer.commit()
            tp = TopicPartition(topic, 3)
            assert (await consumer.committed([tp]))[tp] == OffsetAndMetadata(5)
            assert await consumer.position(tp) == 5
            await trio.to_thread.run_sync(lambda: produce(poll_broker, topic, ["x", "y"], partition=0))
            more = [record async for record in consumer]  # ends after consumer.timeout.ms without records
            assert [(r.partition, r.offset, r.value) for r in more] == [(0, 5, b"x"), (0, 6, b"y")]
        return got

    records = trio.run(main)
    assert sorted((r.partition, r.offset) for r in records) == [(p, o) for p in range(PARTITIONS) for o in range(5)]
    all_tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    assert events == [("assigned", all_tps), ("revoked", all_tps)]


def test_pattern_subscription_follows_new_topics(poll_broker, topic, group):
    first = f"{topic}-a"
    fill(poll_broker, first, 1)
    # enable.auto.commit: the positions are committed before the rebalance, so "-a" is not read again.
    with Consumer(settings(poll_broker, group, **{"metadata.max.age.ms": 300, "enable.auto.commit": True})) as consumer:
        consumer.subscribe(f"^{topic}-.*")
        assert len(read(consumer, PARTITIONS)) == PARTITIONS
        assert consumer.subscription() == {first}
        topics = consumer.list_topics()
        assert [p.partition for p in topics[first]] == list(range(PARTITIONS)) and consumer.partitions_for(first) == topics[first]
        second = f"{topic}-b"
        fill(poll_broker, second, 1)
        records = read(consumer, PARTITIONS)
        assert {r.topic for r in records} == {second}
        assert consumer.subscription() == {first, second}
        assert {tp.topic for tp in consumer.assignment()} == {first, second}


def test_misuse_is_refused(poll_broker, topic, group):
    from kclient import IllegalStateError
    from kclient.errors import InvalidGroupIdError

    with Consumer(settings(poll_broker, None)) as consumer:
        with pytest.raises(IllegalStateError, match="not subscribed"):
            consumer.poll()
        with pytest.raises(InvalidGroupIdError, match="group.id"):
            consumer.subscribe([topic])
        consumer.assign([TopicPartition(topic, 0)])
        with pytest.raises(InvalidGroupIdError):
            consumer.commit()
        with pytest.raises(IllegalStateError, match="No current assignment"):
            consumer.seek(TopicPartition(topic, 1), 0)
    with Consumer(settings(poll_broker, group)) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        with pytest.raises(IllegalStateError, match="mutually exclusive"):
            consumer.subscribe([topic])
        consumer.unsubscribe()
        assert consumer.assignment() == set()
        consumer.subscribe([topic])
    assert consumer.closed
    from kclient import LoopClosedError

    with pytest.raises(LoopClosedError):
        consumer.poll()


def test_position_out_of_range_is_reset_per_auto_offset_reset(poll_broker, topic):
    from kclient import OffsetOutOfRangeError

    fill(poll_broker, topic, 3)
    tp = TopicPartition(topic, 1)
    with Consumer(settings(poll_broker, None)) as consumer:  # earliest
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        records = wait_until(lambda: consumer.poll(timeout=0.2), "the records after the reset")  # seconds, confluent-style
        assert [r.offset for r in records] == [0, 1, 2]
    with Consumer(settings(poll_broker, None, **{"auto.offset.reset": "latest"})) as consumer:
        consumer.assign([TopicPartition(topic, 1, 1000)])
        wait_until(lambda: consumer.poll(timeout_ms=100) == [] and consumer.position(tp) == 3, "the reset to the log end")
    with Consumer(settings(poll_broker, None, **{"auto.offset.reset": "none"})) as consumer:
        consumer.assign([TopicPartition(topic, 1, 1000)])

        def refused() -> bool:
            try:
                consumer.poll(timeout_ms=100)
            except OffsetOutOfRangeError:
                return True
            return False

        wait_until(refused, "OffsetOutOfRangeError")


def test_close_from_another_thread_ends_a_waiting_poll(poll_broker, topic, group):
    import threading

    from kclient import IllegalStateError, LoopClosedError

    fill(poll_broker, topic, 1)
    consumer = Consumer(settings(poll_broker, group))
    consumer.subscribe([topic])
    read(consumer, PARTITIONS)
    outcome: list[BaseException | list] = []
    started = threading.Event()

    def poll_long() -> None:
        started.set()
        try:
            outcome.append(consumer.poll(timeout_ms=600_000))
        except (IllegalStateError, LoopClosedError) as exc:
            outcome.append(exc)

    poller = threading.Thread(target=poll_long, daemon=True)
    poller.start()
    started.wait(DEADLINE)
    consumer.close()
    poller.join(DEADLINE)
    assert not poller.is_alive(), "poll did not end when the consumer was closed"
    assert len(outcome) == 1 and (outcome[0] == [] or isinstance(outcome[0], (IllegalStateError, LoopClosedError)))


def test_a_listener_error_propagates_from_poll_and_the_rebalance_stands(poll_broker, topic, group):
    fill(poll_broker, topic, 2)

    class Failing:
        def __init__(self) -> None:
            self.failed = False

        def on_partitions_assigned(self, assigned):
            if not self.failed:
                self.failed = True
                raise RuntimeError("listener failed")

        def on_partitions_revoked(self, revoked):
            pass

    with Consumer(settings(poll_broker, group)) as consumer:
        consumer.subscribe([topic], listener=Failing())

        def raised() -> bool:
            try:
                consumer.poll(timeout_ms=100)
            except RuntimeError as exc:
                return str(exc) == "listener failed"
            return False

        wait_until(raised, "the listener's error from poll")
        assert len(consumer.assignment()) == PARTITIONS
        assert len(read(consumer, 2 * PARTITIONS)) == 2 * PARTITIONS


def test_wakeup_ends_a_waiting_poll_once(poll_broker, topic, group):
    import threading

    from kclient import WakeupError

    fill(poll_broker, topic, 1)
    with Consumer(settings(poll_broker, group)) as consumer:
        consumer.subscribe([topic])
        read(consumer, PARTITIONS)
        outcome: list[BaseException | list] = []

        def poll_long() -> None:
            try:
                outcome.append(consumer.poll(timeout_ms=600_000))
            except WakeupError as exc:
                outcome.append(exc)

        poller = threading.Thread(target=poll_long, daemon=True)
        poller.start()
        consumer.wakeup()
        poller.join(DEADLINE)
        assert not poller.is_alive(), "wakeup() did not end the poll"
        assert len(outcome) == 1 and isinstance(outcome[0], WakeupError)
        # Raised once: the consumer goes on.
        produce(poll_broker, topic, ["after"], partition=0)
        assert [r.value for r in read(consumer, 1)] == [b"after"]
