"""``kclient consumer-groups`` against a real ZooKeeper and a registered
bundled broker: the groups are listed, and ``--describe`` shows per
partition the committed offset, the log end offset, the lag and the owner,
as ``kafka-consumer-groups.sh --zookeeper`` does."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kclient import ConsumerConnector, ConsumerTimeoutError, Producer, ProducerData
from kclient.tools.consumer_groups import PartitionLag, format_rows

ROOT = Path(__file__).resolve().parent.parent


def kc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kclient", *args], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def table(stdout: str) -> dict[tuple[str, str], list[str]]:
    """(topic, partition) -> the row's cells."""
    lines = stdout.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = [line.split() for line in lines[1:]]
    return {(r[1], r[2]): r for r in rows}


def test_describe_shows_committed_offset_log_end_and_lag(zookeeper, zk_broker, topic):
    group = f"lag-{uuid.uuid4().hex[:8]}"
    with Producer({"bootstrap.servers": zk_broker.bootstrap}) as producer:
        producer.send(ProducerData(topic, None, [b"m%d" % i for i in range(7)], partition=0))
    config = {"group.id": group, "zookeeper.connect": zookeeper.connect, "auto.offset.reset": "earliest",
              "enable.auto.commit": "false", "consumer.timeout.ms": 1500}
    with ConsumerConnector(config) as connector:
        [stream] = connector.create_message_streams({topic: 1})[topic]
        got = []
        try:
            for m in stream:
                got.append(m)
        except ConsumerTimeoutError:
            pass
        assert len(got) == 7
        connector.commit_offsets()
        with Producer({"bootstrap.servers": zk_broker.bootstrap}) as producer:
            producer.send(ProducerData(topic, None, [b"late"] * 3, partition=0))

        result = kc("consumer-groups", "--zookeeper", zookeeper.connect, "--describe", "--group", group)
        assert result.returncode == 0, result.stderr
        rows = table(result.stdout)
        assert rows[(topic, "0")][3:6] == ["7", "10", "3"]
        assert rows[(topic, "0")][6].startswith(connector.consumer_id)  # owned now: the stream's thread id
        assert {p for (t, p) in rows if t == topic} == {str(i) for i in range(5)}  # the session broker's 5 partitions
        assert all(r[0] == group for r in rows.values())

        listed = kc("consumer-groups", "--zookeeper", zookeeper.connect, "--list")
        assert listed.returncode == 0 and group in listed.stdout.split()

    # After shutdown: nobody owns the partitions; the offsets stay.
    result = kc("consumer-groups", "--zookeeper", zookeeper.connect, "--describe", "--group", group)
    rows = table(result.stdout)
    assert rows[(topic, "0")][3:] == ["7", "10", "3", "-", "-", "-"]
    every = kc("consumer-groups", "--zookeeper", zookeeper.connect, "--describe", "--all-groups")
    assert every.returncode == 0, every.stderr
    assert [line.split()[3:6] for line in every.stdout.splitlines() if line.split()[:3] == [group, topic, "0"]] == [["7", "10", "3"]]


def test_unknown_group_and_missing_group_flag_are_one_line_errors(zookeeper):
    result = kc("consumer-groups", "--zookeeper", zookeeper.connect, "--describe", "--group", "no-such-group-xyz")
    assert result.returncode == 1 and "Consumer group 'no-such-group-xyz' does not exist." in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    result = kc("consumer-groups", "--zookeeper", zookeeper.connect, "--describe")
    assert result.returncode == 2 and "--describe needs --group or --all-groups" in result.stderr


def test_unreachable_zookeeper_is_one_line_error():
    from kclient.testing.process import free_port

    result = kc("consumer-groups", "--zookeeper", f"127.0.0.1:{free_port('127.0.0.1')}", "--list", "--timeout-ms", "1000")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.unit
def test_lag_needs_both_offsets_and_the_table_aligns():
    assert PartitionLag("g", "t", 0, 5, 9, None).lag == 4
    assert PartitionLag("g", "t", 1, None, 9, None).lag is None
    assert PartitionLag("g", "t", 2, 5, None, "c-0").lag is None
    text = format_rows([PartitionLag("g", "t", 0, 5, 9, "owner-0"), PartitionLag("g", "topic", 10, None, 12, None)])
    lines = text.splitlines()
    assert lines[1].split() == ["g", "t", "0", "5", "9", "4", "owner-0", "-", "-"]
    assert lines[2].split() == ["g", "topic", "10", "-", "12", "-", "-", "-", "-"]
    owned = format_rows([PartitionLag("g", "t", 0, 1, 2, "member-1", "/127.0.0.1", "reader")]).splitlines()[1]
    assert owned.split() == ["g", "t", "0", "1", "2", "1", "member-1", "/127.0.0.1", "reader"]
    assert lines[0].index("TOPIC") == lines[1].index("t  ") == lines[2].index("topic")


def test_broker_coordinated_group_is_listed_and_described(broker, topic):
    """A confluent-kafka group kept by the broker's group coordinator:
    AdminClient and ``consumer-groups --bootstrap-server`` show its member,
    its assignment, its committed offsets and the lag."""
    import pytest

    ck = pytest.importorskip("confluent_kafka")
    from kclient import AdminClient

    group = f"broker-lag-{uuid.uuid4().hex[:8]}"
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        producer.send(ProducerData(topic, None, [b"m%d" % i for i in range(6)], partition=0))
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "client.id": "lag-reader"})
    try:
        consumer.subscribe([topic])
        got = []
        deadline = 60
        import time

        end = time.monotonic() + deadline
        while len(got) < 6 and time.monotonic() < end:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        assert len(got) == 6
        consumer.commit(asynchronous=False)
        with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
            producer.send(ProducerData(topic, None, [b"late"] * 2, partition=0))

        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            assert group in [g.group_id for g in admin.list_consumer_groups()]
            description = admin.describe_consumer_groups([group])[group]
            assert description.state == "Stable" and description.protocol_type == "consumer"
            [member] = description.members
            assert member.client_id == "lag-reader" and (topic, 0) in member.assignment
            assert admin.list_consumer_group_offsets(group)[(topic, 0)] == 6

        result = kc("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", group)
        assert result.returncode == 0, result.stderr
        rows = table(result.stdout)
        assert rows[(topic, "0")][3:7] == ["6", "8", "2", member.member_id]
        listed = kc("consumer-groups", "--bootstrap-server", broker.bootstrap, "--list")
        assert listed.returncode == 0 and group in listed.stdout.split()
    finally:
        consumer.close()
    missing = kc("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", "no-such-group-xyz")
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
