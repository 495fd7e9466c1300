"""`kclient.Consumer` with Kafka 4.0's consumer group protocol
(``group.protocol=consumer``, KIP-848, ConsumerGroupHeartbeat) against
Apache Kafka 4.x itself (KRaft, one broker for the module): the
scenarios of `helpers.consumer_protocol` (subscribe, poll and commit; two
kclient members splitting the partitions and one taking them all after
the other closes; the partitions a member keeps consumed while another
joins, counted by listener calls; a member past ``max.poll.interval.ms``
leaving and joining again; a pattern subscription; a restarted static
member), and a Java consumer (``kafka-console-consumer`` with
``group.protocol=consumer``) and a kclient member sharing one group, each
partition read by one of them, every record once, both shown by
``kafka-consumer-groups --describe --members``."""

from __future__ import annotations

import re
import subprocess
import threading

import pytest
from helpers import consumer_protocol as scenarios
from helpers.consumer_protocol import DEADLINE, PARTITIONS, fill, new_group, settings, wait_until
from helpers.records import produce
from helpers.skips import require

from kclient import Consumer
from kclient.testing import KafkaProcess, java_unavailable_reason
from kclient.testing.kafka import kafka_tool, kafka_tool_command

pytestmark = pytest.mark.apache_kafka


@pytest.fixture(scope="module")
def kafka():
    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka (Java 17+)")
    props = {
        "num.partitions": PARTITIONS,
        "offsets.topic.replication.factor": 1,
        "group.initial.rebalance.delay.ms": 0,
        "group.coordinator.rebalance.protocols": "classic,consumer",
        # Quicker heartbeats than the 5 s default, so that reconciliations finish soon.
        "group.consumer.min.heartbeat.interval.ms": 200,
        "group.consumer.heartbeat.interval.ms": 300,
    }
    with KafkaProcess("4", properties=props) as proc:
        yield proc


def test_subscribe_poll_commit_with_the_consumer_protocol(kafka, topic):
    scenarios.subscribe_poll_commit(kafka, topic)


def test_two_members_split_and_one_takes_all_with_the_consumer_protocol(kafka, topic):
    scenarios.two_members_split_and_one_takes_all(kafka, topic)


def test_kept_partitions_are_consumed_while_a_member_joins(kafka, topic):
    scenarios.kept_partitions_consumed_while_a_member_joins(kafka, topic)


def test_a_member_that_stops_polling_leaves_and_rejoins(kafka, topic):
    scenarios.member_that_stops_polling_leaves_and_rejoins(kafka, topic)


def test_pattern_subscription_and_unsubscribe_with_the_consumer_protocol(kafka, topic):
    scenarios.pattern_subscription_and_unsubscribe(kafka, topic)


def test_a_restarted_static_member_gets_its_partitions_back(kafka, topic):
    scenarios.restarted_static_member_gets_its_partitions_back(kafka, topic)


def test_positions_committed_before_revocation_hand_over(kafka, topic):
    scenarios.positions_committed_before_revocation_hand_over(kafka, topic)


def test_an_unknown_server_assignor_is_raised_by_poll(kafka, topic):
    scenarios.unknown_server_assignor_is_raised_by_poll(kafka, topic)


def test_a_subscription_change_moves_the_assignment(kafka, topic):
    scenarios.subscription_change_moves_the_assignment(kafka, topic)


def _describe_members(kafka, group: str) -> list[dict[str, str]]:
    out = kafka_tool("kafka-consumer-groups", "--bootstrap-server", kafka.bootstrap, "--describe", "--group", group, "--members", timeout=DEADLINE).stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = next(i for i, cols in enumerate(lines) if cols and cols[0] == "GROUP")
    return [dict(zip(lines[header], cols, strict=False)) for cols in lines[header + 1 :]]


def test_a_java_member_and_a_kclient_member_share_a_group(kafka, topic):
    group = new_group()
    produce(kafka, topic, ["x"], partition=0, acks=-1)  # the topic exists before anyone subscribes
    ours: dict[tuple[int, int], str] = {}
    java: list[tuple[int, str]] = []
    consumer = Consumer(settings(kafka, group, **{"client.id": "kclient-848"}))
    command = kafka_tool_command(
        "kafka-console-consumer", "--bootstrap-server", kafka.bootstrap, "--topic", topic, "--group", group,
        "--from-beginning", "--formatter-property", "print.partition=true",
        "--consumer-property", "group.protocol=consumer", "--consumer-property", "client.id=java-848",
    )  # fmt: skip
    proc = None
    try:
        consumer.subscribe([topic])

        def read_ours() -> None:
            for r in consumer.poll(timeout_ms=50):
                assert (r.partition, r.offset) not in ours
                ours[(r.partition, r.offset)] = r.value.decode()

        wait_until(lambda: read_ours() or len(consumer.assignment()) == PARTITIONS, "the kclient member to own every partition")
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def pump() -> None:
            assert proc is not None and proc.stdout is not None
            for line in proc.stdout:
                match = re.fullmatch(r"Partition:(\d+)\t(.*)", line.rstrip("\n"))
                if match:
                    java.append((int(match[1]), match[2]))

        threading.Thread(target=pump, daemon=True).start()
        wait_until(lambda: read_ours() or len(consumer.assignment()) == PARTITIONS // 2, "the Java member to take half the partitions")
        members = wait_until(lambda: (rows := _describe_members(kafka, group)) and len(rows) == 2 and rows, "both members in --describe --members")
        assert {m["CLIENT-ID"] for m in members} == {"kclient-848", "java-848"}
        mine = {tp.partition for tp in consumer.assignment()}
        produced = fill(kafka, topic, 25, "j")

        def all_read() -> bool:
            read_ours()
            return {v for v in ours.values() if v != "x"} | {v for _, v in java if v != "x"} >= produced

        wait_until(all_read, "every record, by one member or the other")
        values = [v for v in ours.values() if v != "x"] + [v for _, v in java if v != "x"]
        assert sorted(values) == sorted(produced)  # each record once
        assert {p for p, _ in java} & mine == set()
        assert {p for (p, _), v in ours.items() if v != "x"} <= mine  # "x" was read before the split
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=DEADLINE)
        consumer.close()
