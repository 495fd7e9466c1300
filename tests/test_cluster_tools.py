"""``kclient cluster`` and ``kclient topics --create/--describe/--delete``
run as subprocesses, as a user runs them: a real 3-broker cluster on the
session ZooKeeper, then topics managed through a broker
(``--bootstrap-server``) and through ZooKeeper (``--zookeeper``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid

import pytest
from helpers.wait import wait_for
from test_cli_tools import ROOT, kc

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def dev_cluster(zookeeper):
    """``kclient cluster --brokers 3`` in the background; yields
    ``(bootstrap, zookeeper.connect)`` from its ready line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    chroot = f"cli-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kclient", "cluster", "--brokers", "3", "--zookeeper", zookeeper.connect, "--chroot", chroot,
         "--override", "auto.create.topics.enable=false"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("Cluster running: bootstrap.servers="), proc.stderr.read() if proc.poll() is not None else line
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        assert fields["zookeeper.connect"] == f"{zookeeper.connect}/{chroot}"
        yield proc, fields["bootstrap.servers"], fields["zookeeper.connect"]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def describe(flag: str, where: str, topic: str) -> list[list[str]]:
    result = kc("topics", flag, where, "--describe", "--topic", topic)
    assert result.returncode == 0, result.stderr
    return [line.strip().split("\t") for line in result.stdout.splitlines()]


def test_cluster_prints_a_bootstrap_of_three_live_brokers(dev_cluster):
    _, bootstrap, _ = dev_cluster
    addresses = bootstrap.split(",")
    assert len(addresses) == 3
    for address in addresses:
        host, port = address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5):
            pass


def test_topics_create_describe_delete_through_a_broker(dev_cluster):
    _, bootstrap, _ = dev_cluster
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    created = kc("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "3",
                 "--replication-factor", "3", "--config", "min.insync.replicas=2")
    assert created.returncode == 0, created.stderr
    assert created.stdout == f"Created topic {topic}.\n"
    lines = describe("--bootstrap-server", bootstrap, topic)
    assert [f for f in lines[0] if not f.startswith("TopicId: ")] == [f"Topic: {topic}", "PartitionCount: 3", "ReplicationFactor: 3", "Configs: min.insync.replicas=2"]
    assert lines[0][1].startswith("TopicId: ") and len(lines[0][1]) == len("TopicId: ") + 22
    leaders = set()
    for p, line in enumerate(lines[1:]):
        fields = dict(f.split(": ", 1) for f in line)
        assert fields["Partition"] == str(p)
        replicas = fields["Replicas"].split(",")
        assert sorted(replicas) == ["1", "2", "3"] and fields["Leader"] == replicas[0]
        assert sorted(fields["Isr"].split(",")) == ["1", "2", "3"]
        leaders.add(fields["Leader"])
    assert leaders == {"1", "2", "3"}  # round-robin leaders

    again = kc("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1 and "TopicAlreadyExistsError" in again.stderr
    quiet = kc("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1", "--if-not-exists")
    assert quiet.returncode == 0 and quiet.stdout == ""
    too_many = kc("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic + "x", "--partitions", "1", "--replication-factor", "4")
    assert too_many.returncode == 1 and len(too_many.stderr.strip().splitlines()) == 1
    assert "InvalidReplicationFactorError" in too_many.stderr

    deleted = kc("topics", "--bootstrap-server", bootstrap, "--delete", "--topic", topic)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout == f"Deleted topic {topic}.\n"
    listed = kc("topics", "--bootstrap-server", bootstrap, "--list")
    assert listed.returncode == 0 and topic not in listed.stdout.splitlines()
    gone = kc("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    assert gone.returncode == 1 and len(gone.stderr.strip().splitlines()) == 1


def test_topics_through_zookeeper(dev_cluster):
    _, bootstrap, connect = dev_cluster
    topic = f"zk-{uuid.uuid4().hex[:8]}"
    created = kc("topics", "--zookeeper", connect, "--create", "--topic", topic, "--replica-assignment", "3:1,1:2")
    assert created.returncode == 0, created.stderr

    def elected():
        """The controller elects the preferred leaders; ZooKeeper's view shows them."""
        lines = describe("--zookeeper", connect, topic)
        fields = [dict(f.split(": ", 1) for f in line) for line in lines[1:]]
        return (lines, fields) if [f["Leader"] for f in fields] == ["3", "1"] else None

    lines, fields = wait_for(elected, "the preferred leaders 3 and 1", interval=0.2)
    assert [f for f in lines[0] if not f.startswith("TopicId: ")] == [f"Topic: {topic}", "PartitionCount: 2", "ReplicationFactor: 2", "Configs:"]
    assert [f["Replicas"] for f in fields] == ["3,1", "1,2"]
    # The brokers agree.
    wait_for(lambda: describe("--bootstrap-server", bootstrap, topic)[1:] == lines[1:], "the brokers' view to match ZooKeeper's", timeout=15, interval=0.2)
    listed = kc("topics", "--zookeeper", connect, "--list")
    assert topic in listed.stdout.splitlines()
    bad = kc("topics", "--zookeeper", connect, "--create", "--topic", topic + "-rf", "--partitions", "1", "--replication-factor", "5")
    assert bad.returncode == 1 and "InvalidReplicationFactorError" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    deleted = kc("topics", "--zookeeper", connect, "--delete", "--topic", topic)
    assert deleted.returncode == 0 and deleted.stdout == f"Topic {topic} is marked for deletion.\n"
    wait_for(lambda: topic not in kc("topics", "--zookeeper", connect, "--list").stdout.splitlines(), "the controller to delete the topic", interval=0.2)


def test_cluster_stops_on_ctrl_c(zookeeper):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kclient", "cluster", "--brokers", "1", "--zookeeper", zookeeper.connect],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("Cluster running: "), proc.stderr.read() if proc.poll() is not None else line
        address = line.split("bootstrap.servers=")[1].split()[0]
        host, port = address.rsplit(":", 1)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        with pytest.raises(OSError):
            socket.create_connection((host, int(port)), timeout=2).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cluster_bad_override_is_one_line_error():
    result = kc("cluster", "--brokers", "2", "--zookeeper", "127.0.0.1:1", "--override", "broker.id=7")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "broker.id" in result.stderr
