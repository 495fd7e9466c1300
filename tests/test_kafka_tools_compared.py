"""kclient's ``consumer-groups``, ``topics --describe`` and ``configs`` next
to Apache Kafka 4's own ``kafka-consumer-groups`` / ``kafka-topics`` /
``kafka-configs`` (`kclient.testing.kafka_tool`), on the same groups and
topics of the bundled broker: the same columns and rows, the same new
offsets for each ``--reset-offsets`` scenario, the same refusal while a
member is active, the same ``Configs:`` field."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers.records import produce
from helpers.wait import wait_for

from kclient.client.admin import AdminClient, NewTopic
from kclient.testing import java_unavailable_reason, kafka_tool

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120.0


@pytest.fixture(autouse=True)
def _needs_java() -> None:
    """Skip without Java 17+, with the reason; fail in CI (helpers.skips.require)."""
    from helpers.skips import require

    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka's tools (Java 17+)")


def kafka(broker, name: str, *args: str) -> subprocess.CompletedProcess:
    return kafka_tool(name, "--bootstrap-server", broker.bootstrap, *args, check=False, timeout=TIMEOUT)


def kclient_tool(broker, name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kclient", name, "--bootstrap-server", broker.bootstrap, *args], check=False, capture_output=True,
                          text=True, timeout=TIMEOUT, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def cells(stdout: str) -> list[list[str]]:
    """The table's non-blank lines, split on whitespace."""
    return [line.split() for line in stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def admin(broker):
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as client:
        yield client


@pytest.fixture(scope="module")
def filled(broker, admin) -> str:
    topic = f"compared-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "60000", "cleanup.policy": "compact"})])
    for partition, count in ((0, 9), (1, 3)):
        produce(broker, topic, [(f"k{i}", f"v{i}") for i in range(count)], partition=partition, per_send=None)
    return topic


def test_reset_offsets_dry_runs_print_what_kafka_prints(broker, admin, filled):
    group = f"compared-{uuid.uuid4().hex[:8]}"
    admin.alter_consumer_group_offsets(group, {(filled, 0): 4, (filled, 1): 1})
    for scenario in (
        ["--to-earliest", "--all-topics"],
        ["--to-latest", "--topic", f"{filled}:1"],
        ["--to-offset", "6", "--topic", filled],
        ["--shift-by", "-3", "--all-topics"],
        ["--to-datetime", "2999-01-01T00:00:00.000", "--topic", filled],
    ):
        args = ["--group", group, "--reset-offsets", *scenario, "--dry-run"]
        theirs, ours = kafka(broker, "kafka-consumer-groups", *args), kclient_tool(broker, "consumer-groups", *args)
        assert theirs.returncode == 0 and ours.returncode == 0, (theirs.stderr, ours.stderr)
        table = [row for row in cells(theirs.stdout) if row[0] in ("GROUP", group)]  # Kafka prints its warnings on stdout too
        assert sorted(cells(ours.stdout)) == sorted(table), (scenario, theirs.stdout, ours.stdout)
        assert cells(ours.stdout)[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
        warnings = [line for line in (theirs.stdout + theirs.stderr).splitlines() if line.startswith(("Warn:", "New offset"))]
        assert sorted(ours.stderr.splitlines()) == sorted(warnings), (theirs.stdout, ours.stderr)
    assert admin.list_consumer_group_offsets(group) == {(filled, 0): 4, (filled, 1): 1}
    ours = kclient_tool(broker, "consumer-groups", "--group", group, "--reset-offsets", "--to-offset", "2", "--all-topics", "--execute")
    assert ours.returncode == 0, ours.stderr
    theirs = kafka(broker, "kafka-consumer-groups", "--describe", "--group", group)
    assert sorted(row for row in cells(theirs.stdout) if row[0] == group) == [[group, filled, "0", "2", "9", "7", "-", "-", "-"], [group, filled, "1", "2", "3", "1", "-", "-", "-"]]


def test_describe_with_a_live_member_and_refused_reset_as_kafka(broker, admin, filled):
    """HOST, CLIENT-ID and CONSUMER-ID of a kclient.Consumer member as
    Kafka's tool prints them; both tools refuse the reset alike."""
    from kclient import Consumer

    group = f"compared-live-{uuid.uuid4().hex[:8]}"
    admin.alter_consumer_group_offsets(group, {(filled, 0): 1, (filled, 1): 1})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "compared-member", "enable.auto.commit": False})
    try:
        consumer.subscribe([filled])
        wait_for(lambda: consumer.poll(200) is not None and len(consumer.assignment()) == 2, "the consumer to own both partitions", timeout=60)
        theirs = kafka(broker, "kafka-consumer-groups", "--describe", "--group", group)
        ours = kclient_tool(broker, "consumer-groups", "--describe", "--group", group)
        assert ours.returncode == 0, ours.stderr
        assert cells(ours.stdout)[0] == cells(theirs.stdout)[0]
        assert sorted(cells(ours.stdout)[1:]) == sorted(cells(theirs.stdout)[1:])
        assert {row[8] for row in cells(ours.stdout)[1:]} == {"compared-member"}
        args = ["--group", group, "--reset-offsets", "--to-earliest", "--all-topics", "--execute"]
        theirs, ours = kafka(broker, "kafka-consumer-groups", *args), kclient_tool(broker, "consumer-groups", *args)
        message = f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable."
        assert message in theirs.stdout + theirs.stderr and message in ours.stderr
        assert ours.returncode == 1
    finally:
        consumer.close()


def test_delete_and_no_such_group_as_kafka(broker, admin, filled):
    group = f"compared-gone-{uuid.uuid4().hex[:8]}"
    admin.alter_consumer_group_offsets(group, {(filled, 0): 1})
    ours = kclient_tool(broker, "consumer-groups", "--delete", "--group", group)
    assert ours.stdout.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    theirs = kafka(broker, "kafka-consumer-groups", "--describe", "--group", group)
    message = f"Consumer group '{group}' does not exist."
    assert message in theirs.stdout + theirs.stderr
    ours = kclient_tool(broker, "consumer-groups", "--describe", "--group", group)
    assert ours.returncode == 1 and message in ours.stderr


def test_topics_describe_configs_field_and_configs_describe_as_kafka(broker, filled):
    theirs = kafka(broker, "kafka-topics", "--describe", "--topic", filled).stdout.splitlines()
    ours = kclient_tool(broker, "topics", "--describe", "--topic", filled).stdout.splitlines()
    assert ours[0] == theirs[0]
    assert ours[0].endswith("\tConfigs: cleanup.policy=compact,retention.ms=60000")
    assert [line.split("\tElr:")[0] for line in theirs[1:]] == ours[1:]  # Kafka 4 adds ELR (KIP-966) fields
    entity = ("--entity-type", "topics", "--entity-name", filled, "--describe")
    assert kclient_tool(broker, "configs", *entity).stdout == kafka(broker, "kafka-configs", *entity).stdout


def test_a_member_assigned_nothing_has_no_row_as_in_kafka(broker, admin):
    """Two members on a one-partition topic: only the partition's owner has
    a row, in both tools."""
    from kclient import Consumer

    topic, group = f"compared-idle-{uuid.uuid4().hex[:8]}", f"compared-idle-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])
    produce(broker, topic, ["x"], partition=0)
    members = [
        Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": f"idle-{i}", "enable.auto.commit": False}) for i in range(2)
    ]
    try:
        for member in members:
            member.subscribe([topic])

        def settled() -> bool:
            for member in members:
                member.poll(100)
            described = admin.describe_consumer_groups([group])[group]
            return described.state == "Stable" and len(described.members) == 2 and sum(len(m.assignment()) for m in members) == 1

        wait_for(settled, "one member to own the partition, the other none", timeout=60)
        theirs = kafka(broker, "kafka-consumer-groups", "--describe", "--group", group)
        ours = kclient_tool(broker, "consumer-groups", "--describe", "--group", group)
        assert ours.returncode == 0, ours.stderr
        assert sorted(cells(ours.stdout)) == sorted(cells(theirs.stdout))
        assert [row[:3] for row in cells(ours.stdout)[1:]] == [[group, topic, "0"]]
    finally:
        for member in members:
            member.close()
