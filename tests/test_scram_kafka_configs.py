"""Apache Kafka's own ``kafka-configs --entity-type users`` on SCRAM
credentials (KIP-554, issue 30) prints the same against the bundled broker
(ZooKeeper mode) as against Apache Kafka 4: the same sequence of
``--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'``,
``--delete-config``, quota changes of the same user and ``--describe``
(one user, every user), compared line for line (in any order, see
`_normalized`) with the exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.groups import group_kafka

from kclient.testing import BrokerProcess, kafka_tool

TIMEOUT = 120.0
ROOT = Path(__file__).resolve().parent.parent

STEPS: list[tuple[str, ...]] = [
    ("--describe", "--entity-type", "users", "--entity-name", "alice"),
    ("--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]", "--entity-type", "users", "--entity-name", "alice"),
    ("--describe", "--entity-type", "users", "--entity-name", "alice"),
    ("--alter", "--add-config", "SCRAM-SHA-512=[password=alice-secret]", "--entity-type", "users", "--entity-name", "alice"),
    ("--alter", "--add-config", "SCRAM-SHA-512=[iterations=5000,password=bob-secret]", "--entity-type", "users", "--entity-name", "bob"),
    ("--describe", "--entity-type", "users"),
    ("--alter", "--add-config", "producer_byte_rate=1024", "--entity-type", "users", "--entity-name", "alice"),
    ("--describe", "--entity-type", "users", "--entity-name", "alice"),
    ("--alter", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", "alice"),
    ("--describe", "--entity-type", "users", "--entity-name", "alice"),
    ("--describe", "--entity-type", "users", "--entity-name", "bob"),
    ("--alter", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", "bob"),
    ("--alter", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]", "--entity-type", "users", "--entity-name", "carol"),
    ("--alter", "--add-config", "SCRAM-SHA-256=[iterations=20000,password=x]", "--entity-type", "users", "--entity-name", "carol"),
    ("--describe", "--entity-type", "users"),
]


@pytest.fixture(scope="module")
def brokers(zookeeper):
    """Apache Kafka 4, the bundled broker for Kafka's tool, and another
    bundled broker (its own ZooKeeper chroot) for ``kclient configs``."""
    with group_kafka(1) as kafka:
        props = {"zookeeper.connect": zookeeper.connect_string("scram-kafka-configs"), "broker.id": 1555, "num.partitions": 1}
        with BrokerProcess(properties=props) as bundled:
            other = {**props, "zookeeper.connect": zookeeper.connect_string("scram-kclient-configs"), "broker.id": 1556}
            with BrokerProcess(properties=other) as for_kclient:
                yield bundled, kafka, for_kclient


def _run_kclient(broker, args: tuple[str, ...]) -> tuple[int, list[str]]:
    done = subprocess.run([sys.executable, "-m", "kclient", "configs", "--bootstrap-server", broker.bootstrap, *args], check=False, capture_output=True,
                          text=True, timeout=TIMEOUT, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return done.returncode, sorted(_normalized(line) for line in done.stdout.splitlines())


def _run(broker, args: tuple[str, ...]) -> tuple[int, list[str]]:
    done = kafka_tool("kafka-configs", "--bootstrap-server", broker.bootstrap, *args, check=False, timeout=TIMEOUT)
    lines = done.stdout.replace(broker.bootstrap, "<bootstrap>").splitlines()
    stderr = done.stderr.replace(broker.bootstrap, "<bootstrap>").splitlines()
    # what the tool says, without its log lines (timestamped) and stack traces
    error = [line for line in stderr if line.strip() and not line.startswith(("\tat ", "\t...")) and not line[:2].isdigit()][:2]
    return done.returncode, sorted(_normalized(line) for line in lines) + error


def _normalized(line: str) -> str:
    """A describe line with its mechanisms sorted: Kafka 4's KRaft
    ``ScramImage`` lists users and mechanisms in hash-map order (Kafka's
    ZooKeeper mode, as the bundled broker: users sorted, SHA-256 first), so
    the order is compared as a set (the lines are sorted too)."""
    head, sep, items = line.partition(" are ")
    return head + sep + ", ".join(sorted(items.split(", "))) if line.startswith("SCRAM credential configs") else line


def test_kafka_configs_on_scram_users_as_on_kafka(brokers):
    """Kafka's tool on the bundled broker and on Kafka print the same; so
    does ``kclient configs`` (its standard output and exit status)."""
    bundled, kafka, for_kclient = brokers
    outputs = []
    for step in STEPS:
        ours = _run(bundled, step)
        theirs = _run(kafka, step)
        assert ours == theirs, step
        outputs.append(ours)
        stdout = [line for line in theirs[1] if not line.startswith(("Error", "java.", "Iterations"))]
        assert _run_kclient(for_kclient, step) == (theirs[0], stdout), step
    # the refused steps (a missing credential, too few or too many iterations) did fail
    assert [out[0] for out in outputs[-4:-1]] == [1, 1, 1]
    assert "ResourceNotFoundException" in str(outputs[-4]) and "UnacceptableCredentialException" in str(outputs[-2])
