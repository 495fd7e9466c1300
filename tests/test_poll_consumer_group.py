"""`kclient.Consumer` members of one consumer group (issue 27), against one
bundled broker for the module: two kclient members split the partitions
and, after one closes, the other gets them all (the listener called around
each rebalance); a member that stops polling past ``max.poll.interval.ms``
is removed and its partitions go to the other (KIP-62); and a group shared
with confluent-kafka, kafka-python and aiokafka members, and one with
Kafka's own Java consumer (``kafka-verifiable-consumer``), each member
reading disjoint partitions and starting from what the others committed."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from helpers.aio_member import AioKafkaMember
from helpers.groups import group_broker_properties, poll_settings
from helpers.records import produce
from helpers.wait import wait_for

from kclient import CommitFailedError, Consumer, ConsumerRebalanceListener, TopicPartition
from kclient.testing import BrokerProcess

PARTITIONS = 6
DEADLINE = 90.0
wait_until = functools.partial(wait_for, timeout=DEADLINE, interval=0.1)


@pytest.fixture(scope="module")
def group_broker():
    with BrokerProcess(properties=group_broker_properties(PARTITIONS), keep_port=True) as proc:
        yield proc


@pytest.fixture
def group() -> str:
    return f"pg-{uuid.uuid4().hex[:10]}"


def kclient_settings(broker, group: str, **extra) -> dict:
    return poll_settings(broker.bootstrap, group, **extra)


def fill(broker, topic: str, per_partition: int, prefix: str) -> set[str]:
    values = set()
    for p in range(PARTITIONS):
        vs = [f"{prefix}{p}-{i}" for i in range(per_partition)]
        produce(broker, topic, vs, partition=p)
        values.update(vs)
    return values


class Recorder(ConsumerRebalanceListener):
    """Records the listener calls; with ``commit_on_revoke``, commits the
    positions from ``on_partitions_revoked`` (a listener calling its
    consumer, on the polling thread, as Kafka's documentation suggests)."""

    def __init__(self, commit_on_revoke: bool = False) -> None:
        self.calls: list[tuple[str, list[TopicPartition]]] = []
        self.commit_on_revoke = commit_on_revoke
        self.consumer: Consumer | None = None
        self.revoke_commits = 0

    def on_partitions_revoked(self, revoked):
        self.calls.append(("revoked", list(revoked)))
        if self.commit_on_revoke and self.consumer is not None:
            self.consumer.commit()
            self.revoke_commits += 1

    def on_partitions_assigned(self, assigned):
        self.calls.append(("assigned", list(assigned)))

    def on_partitions_lost(self, lost):
        self.calls.append(("lost", list(lost)))


class Member(threading.Thread):
    """One consumer polling in its own thread (committing after each
    non-empty poll) until `stop`; ``lib`` is kclient, confluent-kafka or
    kafka-python."""

    def __init__(self, make: Callable[[], Any], lib: str = "kclient", name: str = "member", *, commit: bool = True) -> None:
        super().__init__(name=name, daemon=True)
        self.make, self.lib, self.commit = make, lib, commit
        self.values: list[str] = []
        self.partitions: set[int] = set()
        self.error: BaseException | None = None
        self.halt = threading.Event()
        self.hold = threading.Event()  # set: stop polling (but stay open)
        self.lock = threading.Lock()
        self.consumer: Any = None

    def run(self) -> None:
        try:
            self.consumer = consumer = self.make()
            try:
                while not self.halt.is_set():
                    if self.hold.is_set():
                        self.halt.wait(0.05)
                        continue
                    got = self._poll(consumer)
                    if got:
                        with self.lock:
                            self.values.extend(got)
                        if self.commit:
                            self._commit(consumer)
                    self.partitions = {tp.partition for tp in consumer.assignment()}
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def _poll(self, consumer) -> list[str]:
        if self.lib == "kclient":
            return [r.value.decode() for r in consumer.poll(timeout_ms=100)]
        if self.lib == "aiokafka":
            return consumer.poll_values(100)
        if self.lib == "kafka-python":
            return [r.value.decode() for recs in consumer.poll(timeout_ms=100).values() for r in recs]
        msg = consumer.poll(0.1)
        return [] if msg is None or msg.error() else [msg.value().decode()]

    def _commit(self, consumer) -> None:
        try:
            if self.lib == "confluent-kafka":
                consumer.commit(asynchronous=False)
            else:
                consumer.commit()
        except CommitFailedError:
            pass  # a rebalance under way: the next owner starts from the last commit
        except Exception as exc:  # kafka-python / librdkafka around a rebalance
            if "rebalanc" not in str(exc).lower() and "generation" not in str(exc).lower():
                raise

    def consumed(self) -> set[str]:
        with self.lock:
            return set(self.values)

    def stop(self) -> None:
        self.halt.set()
        self.join(DEADLINE)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


def kclient_member(broker, group: str, topic: str, listener=None, **extra) -> Callable[[], Consumer]:
    def make() -> Consumer:
        consumer = Consumer(kclient_settings(broker, group, **extra))
        consumer.subscribe([topic], listener=listener)
        if isinstance(listener, Recorder):
            listener.consumer = consumer
        return consumer

    return make


def confluent_member(broker, group: str, topic: str) -> Callable[[], Any]:
    def make():
        from confluent_kafka import Consumer as ConfluentConsumer

        consumer = ConfluentConsumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
                "partition.assignment.strategy": "range",
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        consumer.subscribe([topic])
        return consumer

    return make


def aio_member(broker, group: str, topic: str) -> AioKafkaMember:
    """An aiokafka member with this module's quick session settings and
    the range assignor (the one every member of the shared group names)."""
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor

    return AioKafkaMember(
        broker.bootstrap, group, topic, session_timeout_ms=6000, heartbeat_interval_ms=300, partition_assignment_strategy=(RangePartitionAssignor,)
    )


def kafka_python_member(broker, group: str, topic: str) -> Callable[[], Any]:
    def make():
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            partition_assignment_strategy=[RangePartitionAssignor],
        )
        consumer.subscribe([topic])
        return consumer

    return make


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_two_members_split_partitions_and_one_takes_all_after_the_other_closes(group_broker, topic, group, strategy):
    produced = fill(group_broker, topic, 10, "a")
    first_listener, second_listener = Recorder(commit_on_revoke=True), Recorder()
    strategy_setting = {"partition.assignment.strategy": strategy}
    first = Member(kclient_member(group_broker, group, topic, first_listener, **strategy_setting), name="first")
    first.start()
    wait_until(lambda: first.consumed() >= produced and first.partitions == set(range(PARTITIONS)), "the first member to read all")
    second = Member(kclient_member(group_broker, group, topic, second_listener, **strategy_setting), name="second")
    second.start()
    wait_until(
        lambda: first.partitions and second.partitions and first.partitions | second.partitions == set(range(PARTITIONS)) and not first.partitions & second.partitions,
        "the partitions to be split",
        detail=lambda: f"first {first.partitions}, second {second.partitions}",
    )
    assert len(first.partitions) == len(second.partitions) == PARTITIONS // 2
    # range: consecutive partitions per member; roundrobin: dealt in turn.
    expected = [{0, 1, 2}, {3, 4, 5}] if strategy == "range" else [{0, 2, 4}, {1, 3, 5}]
    assert sorted([first.partitions, second.partitions], key=min) == expected
    more = fill(group_broker, topic, 5, "b")
    wait_until(lambda: (first.consumed() | second.consumed()) >= more, "the split group to read the new records")
    # The second member only read records of its partitions, none the first had committed.
    assert not second.consumed() & produced
    second.stop()
    wait_until(lambda: first.partitions == set(range(PARTITIONS)), "the first member to get every partition back")
    last = fill(group_broker, topic, 2, "c")
    wait_until(lambda: first.consumed() >= last, "the first member to read the last records")
    first.stop()
    assert first_listener.revoke_commits >= 2  # a rebalance and the close
    kinds = [kind for kind, _ in first_listener.calls]
    assert kinds[:3] == ["assigned", "revoked", "assigned"] and kinds[-1] == "revoked"
    assert [kind for kind, _ in second_listener.calls] == ["assigned", "revoked"]
    assert {tp.partition for tp in second_listener.calls[0][1]} == second_listener_partitions(second_listener)


def second_listener_partitions(recorder: Recorder) -> set[int]:
    return {tp.partition for tp in recorder.calls[-1][1]}


def test_member_that_stops_polling_past_max_poll_interval_is_removed(group_broker, topic, group):
    produced = fill(group_broker, topic, 3, "a")
    stuck_listener = Recorder()
    stuck = Member(kclient_member(group_broker, group, topic, stuck_listener, **{"max.poll.interval.ms": 2000}), name="stuck")
    stuck.start()
    wait_until(lambda: stuck.consumed() >= produced, "the first member to read")
    other = Member(kclient_member(group_broker, group, topic), name="other")
    other.start()
    wait_until(lambda: stuck.partitions and other.partitions, "the partitions to be split")
    stuck.hold.set()  # stops polling, stays open: its heartbeats go on
    wait_until(lambda: other.partitions == set(range(PARTITIONS)), "the poller to get every partition")
    more = fill(group_broker, topic, 2, "b")
    wait_until(lambda: other.consumed() >= more, "the poller to read the stuck member's partitions")
    # Back to polling: the stuck member finds its partitions lost and rejoins.
    with pytest.raises(CommitFailedError):
        stuck.consumer.commit({TopicPartition(topic, 0): 1})
    stuck.hold.clear()
    wait_until(lambda: any(kind == "lost" for kind, _ in stuck_listener.calls), "on_partitions_lost")
    wait_until(lambda: stuck.partitions and other.partitions, "the stuck member to rejoin")
    stuck.stop()
    other.stop()


@pytest.mark.interop
def test_group_shared_with_confluent_kafka_kafka_python_and_aiokafka(group_broker, topic, group):
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("kafka")
    pytest.importorskip("aiokafka")
    produced = fill(group_broker, topic, 10, "a")
    members = [
        Member(kclient_member(group_broker, group, topic), "kclient", "kclient"),
        Member(confluent_member(group_broker, group, topic), "confluent-kafka", "confluent"),
        Member(kafka_python_member(group_broker, group, topic), "kafka-python", "kafka-python"),
        Member(lambda: aio_member(group_broker, group, topic), "aiokafka", "aiokafka"),
    ]
    for m in members:
        m.start()
    everyone = set(range(PARTITIONS))

    def split() -> bool:
        parts = [m.partitions for m in members]
        return all(parts) and set().union(*parts) == everyone and sum(len(p) for p in parts) == PARTITIONS

    wait_until(split, "four members with disjoint partitions", detail=lambda: str([m.partitions for m in members]))
    more = fill(group_broker, topic, 4, "b")
    wait_until(lambda: set().union(*(m.consumed() for m in members)) >= produced | more, "the group to read everything")
    assert split()
    for m in members:  # each read only its own partitions' new records
        assert {int(v[1 : v.index("-")]) for v in m.consumed() & more} <= m.partitions
    # The kclient member leaves: the others take its partitions from its commits.
    kclient_partitions = set(members[0].partitions)
    members[0].stop()
    peers = members[1:]
    wait_until(lambda: set().union(*(m.partitions for m in peers)) == everyone, "the peers to take the kclient member's partitions")
    later = fill(group_broker, topic, 2, "c")
    wait_until(lambda: set().union(*(m.consumed() for m in peers)) >= later, "the peers to read the last records")
    before = {v for v in more if int(v[1 : v.index("-")]) in kclient_partitions}
    assert not set().union(*(m.consumed() for m in peers)) & before, "a peer read again what the kclient member had committed"
    for m in members[1:]:
        m.stop()
    # What the peers committed, a kclient member of the group reads back and starts after.
    with Consumer(kclient_settings(group_broker, group)) as consumer:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = consumer.committed(tps)
        assert {tp: om.offset for tp, om in committed.items() if om is not None} == dict.fromkeys(tps, 16)
        consumer.subscribe([topic])
        assert consumer.poll(timeout_ms=1000) == []
        produce(group_broker, topic, ["d"], partition=5)
        got = wait_until(lambda: consumer.poll(timeout_ms=200), "the record produced after the peers' commits")
        assert [(r.partition, r.offset, r.value) for r in got] == [(5, 16, b"d")]


class JavaMember:
    """Kafka's ``kafka-verifiable-consumer`` (Kafka 4's Java KafkaConsumer,
    classic protocol, RangeAssignor, a synchronous commit after each poll)
    as a subprocess; its JSON events (``partitions_assigned``,
    ``record_data`` with ``--verbose``) collected by a thread."""

    def __init__(self, broker, group: str, topic: str, workdir) -> None:
        from kclient.testing import kafka_tool_command

        self.events: list[dict] = []
        self.lock = threading.Lock()
        self.stderr_path = workdir / "verifiable-consumer.stderr"
        self._stderr = open(self.stderr_path, "wb")
        args = ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--group-id", group, "--reset-policy", "earliest", "--verbose", "--session-timeout", "6000"]
        self.proc = subprocess.Popen(kafka_tool_command("kafka-verifiable-consumer", *args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                with self.lock:
                    self.events.append(event)

    def _named(self, name: str) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e.get("name") == name]

    @property
    def partitions(self) -> set[int]:
        with self.lock:
            changes = [e for e in self.events if e.get("name") in ("partitions_assigned", "partitions_revoked")]
        if not changes or changes[-1]["name"] != "partitions_assigned":
            return set()
        return {p["partition"] for p in changes[-1]["partitions"]}

    def consumed(self) -> set[str]:
        return {e["value"] for e in self._named("record_data")}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(DEADLINE)
        self._stderr.close()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]


def partition_of(value: str) -> int:
    """The partition a `fill` value was produced to (``<prefix><partition>-<i>``)."""
    return int(value[1 : value.index("-")])


@pytest.mark.interop
@pytest.mark.apache_kafka
def test_group_shared_with_a_java_kafka_consumer(group_broker, topic, group, tmp_path):
    from helpers.skips import require

    from kclient.testing import java_unavailable_reason

    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka's tools (Java 17+)")
    produced = fill(group_broker, topic, 10, "a")
    member = Member(kclient_member(group_broker, group, topic), name="kclient")
    member.start()
    wait_until(lambda: member.consumed() >= produced, "the kclient member to read everything")
    java = JavaMember(group_broker, group, topic, tmp_path)
    try:
        wait_until(
            lambda: java.partitions and member.partitions and java.partitions | member.partitions == set(range(PARTITIONS)) and not java.partitions & member.partitions,
            "the Java and kclient members to split the partitions",
            detail=lambda: f"java {java.partitions}, kclient {member.partitions}; {java.stderr()}",
        )
        java_partitions = set(java.partitions)
        more = fill(group_broker, topic, 4, "b")
        wait_until(lambda: (member.consumed() | java.consumed()) >= more, "the group to read the new records", detail=java.stderr)
        assert {partition_of(v) for v in java.consumed()} <= java_partitions  # it started at kclient's commits
        assert {partition_of(v) for v in member.consumed() & more} <= member.partitions
    finally:
        java.stop()
    # The Java member committed what it read: the kclient member takes its partitions from there.
    wait_until(lambda: member.partitions == set(range(PARTITIONS)), "the kclient member to get every partition back")
    last = fill(group_broker, topic, 1, "c")
    wait_until(lambda: member.consumed() >= last, "the kclient member to read the last records")
    assert not member.consumed() & {v for v in more if partition_of(v) in java_partitions}
    member.stop()


def test_nothing_is_lost_while_members_come_and_go_with_auto_commit(group_broker, topic, group):
    """Three members each open, poll ten times and close, three times over,
    with ``enable.auto.commit`` (commits before each rebalance and at
    close); then one member reads what is left. Every record is read at
    least once (at-least-once: a record may come twice around a rebalance)."""
    produced = fill(group_broker, topic, 100, "a")
    seen: set[str] = set()
    lock = threading.Lock()
    errors: list[BaseException] = []
    config = kclient_settings(group_broker, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 200})

    def churn() -> None:
        try:
            for _ in range(3):
                with Consumer(config) as consumer:
                    consumer.subscribe([topic])
                    for _ in range(10):
                        values = [r.value.decode() for r in consumer.poll(timeout_ms=100)]
                        with lock:
                            seen.update(values)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=churn, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
        assert not t.is_alive()
    assert not errors, errors
    with Consumer(config) as consumer:
        consumer.subscribe([topic])

        def all_read() -> bool:
            seen.update(r.value.decode() for r in consumer.poll(timeout_ms=200))
            return seen >= produced

        wait_until(all_read, "every record", detail=lambda: f"{len(produced - seen)} missing")


def test_member_keeps_reading_across_a_broker_restart(group_broker, topic, group):
    """Runs last in the module: the broker stops and starts again (same
    port and logs). The member's connections, heartbeats and fetches fail
    meanwhile; afterwards it finds the coordinator again, rejoins and reads
    on from its commits."""
    produced = fill(group_broker, topic, 3, "a")
    listener = Recorder()
    member = Member(kclient_member(group_broker, group, topic, listener), name="survivor")
    member.start()
    wait_until(lambda: member.consumed() >= produced, "the member to read")
    group_broker.stop()
    group_broker.start()
    after = fill(group_broker, topic, 3, "b")
    wait_until(lambda: member.consumed() >= after, "the member to read after the restart", detail=lambda: str(member.error))
    member.stop()
    assert not member.values[len(produced):] or set(member.values[len(produced):]) <= after, "records before the last commit were read again"
