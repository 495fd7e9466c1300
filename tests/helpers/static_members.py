"""Static group members (KIP-345) for the static membership tests: a
kclient `Consumer` polling in its own thread with a ``group.instance.id``
and a listener counting its rebalance calls, and the restart scenario the
bundled broker and Apache Kafka both run (a member closes and a new
process with its instance id starts within ``session.timeout.ms``)."""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable, Iterable
from typing import Any

from helpers.records import produce
from helpers.wait import wait_for
from kclient import CommitFailedError, Consumer, ConsumerRebalanceListener, TopicPartition

DEADLINE = 90.0
wait_until = functools.partial(wait_for, timeout=DEADLINE, interval=0.05)


class CountingListener(ConsumerRebalanceListener):
    """Records every rebalance listener call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked):
        self.calls.append(("revoked", list(revoked)))

    def on_partitions_assigned(self, assigned):
        self.calls.append(("assigned", list(assigned)))

    def on_partitions_lost(self, lost):
        self.calls.append(("lost", list(lost)))


def member_generation(consumer: Consumer) -> tuple[int, str]:
    """``(generation, member id)`` of a kclient Consumer's group membership
    now (`Consumer.group_metadata`, Kafka's ``groupMetadata()``)."""
    metadata = consumer.group_metadata()
    return metadata.generation_id, metadata.member_id


class StaticPoller(threading.Thread):
    """A kclient Consumer subscribed to ``topic`` with ``group.instance.id``
    ``instance``, polling until `stop` and committing synchronously after
    every poll that returned records (so a restarted instance starts
    right after what this one read)."""

    def __init__(self, settings: dict[str, Any], topic: str, instance: str | None, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.settings = dict(settings)
        if instance is not None:
            self.settings["group.instance.id"] = instance
        self.topic = topic
        self.listener = CountingListener()
        self.values: list[str] = []
        self.partitions: set[int] = set()
        self.generation: tuple[int, str] = (-1, "")
        self.error: BaseException | None = None
        self.halt = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        try:
            consumer = Consumer(self.settings)
            try:
                consumer.subscribe([self.topic], listener=self.listener)
                while not self.halt.is_set():
                    got = [r.value.decode() for r in consumer.poll(timeout_ms=100)]
                    if got:
                        with self.lock:
                            self.values.extend(got)
                        try:
                            consumer.commit()
                        except CommitFailedError:
                            pass  # a rebalance: the next owner starts from the last commit
                    self.partitions = {tp.partition for tp in consumer.assignment()}
                    self.generation = member_generation(consumer)
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def consumed(self) -> list[str]:
        with self.lock:
            return list(self.values)

    def stop(self) -> None:
        self.halt.set()
        self.join(DEADLINE)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


def fill(target: Any, topic: str, partitions: int, per_partition: int, prefix: str, *, acks: int = 1) -> set[str]:
    """Produce ``per_partition`` distinct values to each partition."""
    values: set[str] = set()
    for p in range(partitions):
        vs = [f"{prefix}{p}-{i}" for i in range(per_partition)]
        produce(target, topic, vs, partition=p, acks=acks)
        values.update(vs)
    return values


def consumed_once(pollers: Iterable[StaticPoller], expected: set[str]) -> bool:
    """Whether the pollers together read every expected value."""
    seen: set[str] = set()
    for p in pollers:
        seen.update(p.consumed())
    return seen >= expected


def restart_within_session(target: Any, topic: str, partitions: int, settings: Callable[[], dict[str, Any]], *, leader_restarts: bool, acks: int = 1) -> None:
    """KIP-345's promise, checked: two static members share ``topic``;
    one closes and a new consumer with its ``group.instance.id`` starts
    before its session times out. It gets the same partitions back, the
    generation stays the same, the other member's listener is not called
    again, and every record (those produced while the first was gone
    too) is read exactly once.

    Args:
        target: The broker(s) (`helpers.records.produce`'s target).
        topic: A topic with ``partitions`` partitions.
        partitions: Its partition count (even).
        settings: A fresh consumer config of the group (the session
            timeout long enough for the restart).
        leader_restarts: Restart the group's leader (the member that
            joined first and alone), else the other member.
        acks: The producer's acks.
    """
    produced = fill(target, topic, partitions, 5, "a", acks=acks)
    first = StaticPoller(settings(), topic, "static-a", "static-a")
    other = StaticPoller(settings(), topic, "static-b", "static-b")
    leader = first if leader_restarts else other
    restarted: StaticPoller | None = None
    try:
        leader.start()
        wait_until(lambda: len(leader.partitions) == partitions, "the first member to join alone (the leader)")
        (other if leader_restarts else first).start()
        wait_until(
            lambda: first.partitions and other.partitions and not first.partitions & other.partitions
            and len(first.partitions | other.partitions) == partitions and consumed_once([first, other], produced),
            "the two static members to split the partitions and read every record",
            detail=lambda: f"first {first.partitions} {first.generation}, other {other.partitions} {other.generation}",
        )
        wait_until(lambda: first.generation[0] == other.generation[0] >= 0, "both members in the same generation")
        owned, generation = set(first.partitions), other.generation
        other_calls = list(other.listener.calls)
        assert other_calls and other_calls[-1][0] == "assigned"
        first.stop()  # a static member's close sends no LeaveGroup
        produced |= fill(target, topic, partitions, 4, "b", acks=acks)
        restarted = StaticPoller(settings(), topic, "static-a", "static-a-restarted")
        restarted.start()
        everyone = [first, other, restarted]
        wait_until(
            lambda: restarted.partitions == owned and consumed_once(everyone, produced),
            "the restarted instance to get its partitions back and every record to be read",
            detail=lambda: f"restarted {restarted.partitions} (wanted {owned}), other {other.partitions}",
        )
        # No rebalance: the same generation for both, a new member id for the
        # restarted instance, and no listener call on the other member.
        assert restarted.generation[0] == generation[0] == other.generation[0]
        assert restarted.generation[1] != first.generation[1]
        assert other.listener.calls == other_calls
        assert [kind for kind, _ in restarted.listener.calls] == ["assigned"]
        assert {tp.partition for tp in restarted.listener.calls[0][1]} == owned
        counts = collections.Counter(v for p in everyone for v in p.consumed())
        assert set(counts) == produced
        assert [v for v, n in counts.items() if n != 1] == []
    finally:
        for p in (first, other, restarted):
            if p is not None and p.is_alive():
                p.stop()
