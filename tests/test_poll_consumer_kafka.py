"""`kclient.Consumer` against Apache Kafka 4.x itself (KRaft, classic group
protocol; one broker for the module): subscribe, poll, commit and
committed, two kclient members splitting the partitions and one taking
them all after the other closes, seek and offsets_for_times. The same
scenarios as on the bundled broker (tests/test_poll_consumer*.py), so the
consumer is checked against Kafka's own group coordinator."""

from __future__ import annotations

import functools
import time
import uuid

import pytest
from helpers.groups import group_kafka, poll_settings
from helpers.records import produce
from helpers.wait import wait_for

from kclient import Consumer, OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.apache_kafka

PARTITIONS = 4
DEADLINE = 90.0
wait_until = functools.partial(wait_for, timeout=DEADLINE, interval=0.1)


@pytest.fixture(scope="module")
def kafka():
    with group_kafka(PARTITIONS) as proc:
        yield proc


def settings(kafka, group: str | None, **extra) -> dict:
    return poll_settings(kafka.bootstrap, group, **extra)


def fill(kafka, topic: str, per_partition: int, prefix: str) -> set[str]:
    values = set()
    for p in range(PARTITIONS):
        vs = [f"{prefix}{p}-{i}" for i in range(per_partition)]
        produce(kafka, topic, vs, partition=p, acks=-1)
        values.update(vs)
    return values


def test_subscribe_poll_commit_and_resume_on_kafka(kafka, topic):
    group = f"k4-{uuid.uuid4().hex[:8]}"
    produced = fill(kafka, topic, 10, "a")
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    seen: list[str] = []
    with Consumer(settings(kafka, group, **{"max.poll.records": 9})) as consumer:
        consumer.subscribe([topic])

        def read_all() -> bool:
            batch = consumer.poll(timeout_ms=200)
            assert len(batch) <= 9
            seen.extend(r.value.decode() for r in batch)
            return set(seen) >= produced

        wait_until(read_all, "every record")
        assert len(seen) == len(produced)
        consumer.commit()
        assert consumer.committed(tps) == {tp: OffsetAndMetadata(10) for tp in tps}
        consumer.commit({tps[0]: OffsetAndMetadata(4, "kafka")})
        assert consumer.committed([tps[0]])[tps[0]] == OffsetAndMetadata(4, "kafka")
    with Consumer(settings(kafka, group)) as consumer:
        consumer.subscribe(topic)
        again: list = []
        wait_until(lambda: again.extend(consumer.poll(timeout_ms=200)) or len(again) >= 6, "the records after the commit")
        assert sorted((r.partition, r.offset) for r in again) == [(0, o) for o in range(4, 10)]


def test_two_members_split_and_one_takes_all_on_kafka(kafka, topic):
    group = f"k4-{uuid.uuid4().hex[:8]}"
    fill(kafka, topic, 2, "a")
    first = Consumer(settings(kafka, group))
    second = Consumer(settings(kafka, group))
    try:
        first.subscribe([topic])
        second.subscribe([topic])

        def split() -> bool:
            first.poll(timeout_ms=100)
            second.poll(timeout_ms=100)
            a, b = first.assignment(), second.assignment()
            return bool(a) and bool(b) and not a & b and len(a | b) == PARTITIONS

        wait_until(split, "the two members to split the partitions")
        second.close()

        def all_to_first() -> bool:
            first.poll(timeout_ms=100)
            return len(first.assignment()) == PARTITIONS

        wait_until(all_to_first, "the first member to get every partition")
    finally:
        first.close()
        second.close()


def test_assign_seek_and_offsets_for_times_on_kafka(kafka, topic):
    before = int(time.time() * 1000) - 1
    fill(kafka, topic, 5, "a")
    tp = TopicPartition(topic, 2)
    with Consumer(settings(kafka, None)) as consumer:
        consumer.assign([tp])
        assert consumer.end_offsets([tp]) == {tp: 5} and consumer.beginning_offsets([tp]) == {tp: 0}
        consumer.seek(tp, 3)
        got: list = []
        wait_until(lambda: got.extend(consumer.poll(timeout_ms=200)) or len(got) >= 2, "the records from offset 3")
        assert [r.offset for r in got] == [3, 4]
        found = consumer.offsets_for_times({tp: before})
        assert found[tp] is not None and found[tp].offset == 0
        consumer.seek_to_beginning()
        assert consumer.position(tp) == 0
