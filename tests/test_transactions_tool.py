"""kclient's ``AdminClient.list_transactions`` / ``describe_transactions``
and ``kclient transactions --list / --describe`` against Apache Kafka 4
(KIP-664): a confluent-kafka transactional producer left with its
transaction open (``Ongoing``) and another that committed
(``CompleteCommit``) are listed and described with their producer ids and
partitions, and the tool prints what Kafka's own ``kafka-transactions.sh``
(``org.apache.kafka.tools.TransactionsCommand``) prints on the same
broker. An unknown transactional id is a clear error."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.groups import group_kafka

from kclient.client.admin import AdminClient, NewTopic
from kclient.errors import TransactionalIdNotFoundError
from kclient.testing import KafkaProcess, kafka_classpath
from kclient.testing.maven import require_java

ck = pytest.importorskip("confluent_kafka")

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120.0
#: Kafka's ``kafka-transactions.sh`` main class.
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaProcess]:
    """One Kafka 4 node whose transaction state log fits it (one replica,
    few partitions)."""
    props = {
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 3,
    }
    with group_kafka(2, **props) as proc:
        yield proc


@pytest.fixture(scope="module")
def admin(kafka: KafkaProcess) -> Iterator[AdminClient]:
    with AdminClient({"bootstrap.servers": kafka.bootstrap, "default.api.timeout.ms": 60_000}) as client:
        yield client


def _transactional_producer(kafka: KafkaProcess, transactional_id: str) -> Any:
    producer = ck.Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": transactional_id, "transaction.timeout.ms": 600_000})
    producer.init_transactions(60)
    producer.begin_transaction()
    return producer


@pytest.fixture(scope="module")
def transactions(kafka: KafkaProcess, admin: AdminClient) -> Iterator[dict[str, Any]]:
    """``{"topic", "ongoing", "committed"}``: a topic of 2 partitions, the
    id of a producer whose transaction over both partitions stays open,
    and the id of one that wrote partition 0 and committed."""
    suffix = uuid.uuid4().hex[:8]
    topic = f"txn-{suffix}"
    admin.create_topics([NewTopic(topic, 2, 1)])
    ongoing_id, committed_id = f"ongoing-{suffix}", f"committed-{suffix}"
    committed = _transactional_producer(kafka, committed_id)
    committed.produce(topic, b"done", partition=0)
    committed.commit_transaction(60)
    ongoing = _transactional_producer(kafka, ongoing_id)
    for partition in (0, 1):
        ongoing.produce(topic, b"open", partition=partition)
    assert ongoing.flush(60) == 0
    yield {"topic": topic, "ongoing": ongoing_id, "committed": committed_id}
    ongoing.abort_transaction(60)


def kafka_transactions(kafka: KafkaProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """Kafka's ``kafka-transactions.sh --bootstrap-server ... ARGS``."""
    command = [require_java(), "-Xmx512m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
               "-cp", os.pathsep.join(kafka_classpath("4")), TRANSACTIONS_COMMAND]
    return subprocess.run([*command, "--bootstrap-server", kafka.bootstrap, *args], capture_output=True, text=True, timeout=TIMEOUT, check=False)


def kclient_transactions(kafka: KafkaProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """``kclient transactions --bootstrap-server ... ARGS``."""
    return subprocess.run([sys.executable, "-m", "kclient", "transactions", "--bootstrap-server", kafka.bootstrap, *args], capture_output=True,
                          text=True, timeout=TIMEOUT, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False)


def cells(stdout: str) -> list[list[str]]:
    """The table's non-blank lines, split on whitespace."""
    return [line.split() for line in stdout.splitlines() if line.strip()]


def test_list_transactions_names_both_with_their_states(admin, transactions):
    listed = {t.transactional_id: t for t in admin.list_transactions()}
    ongoing, committed = listed[transactions["ongoing"]], listed[transactions["committed"]]
    assert (ongoing.state, committed.state) == ("Ongoing", "CompleteCommit")
    assert ongoing.producer_id >= 0 and committed.producer_id >= 0 and ongoing.producer_id != committed.producer_id
    [node] = admin.describe_cluster().brokers
    assert ongoing.coordinator_id == committed.coordinator_id == node.node_id
    only_ongoing = {t.transactional_id for t in admin.list_transactions(states=["Ongoing"])}
    assert transactions["ongoing"] in only_ongoing and transactions["committed"] not in only_ongoing
    by_producer = admin.list_transactions(producer_ids=[committed.producer_id])
    assert [t.transactional_id for t in by_producer] == [transactions["committed"]]
    assert admin.list_transactions(states=["PrepareAbort"], producer_ids=[ongoing.producer_id]) == []


def test_describe_transactions_gives_state_producer_and_partitions(admin, transactions):
    ongoing_id, committed_id, topic = transactions["ongoing"], transactions["committed"], transactions["topic"]
    described = admin.describe_transactions([ongoing_id, committed_id])
    listed = {t.transactional_id: t for t in admin.list_transactions()}
    ongoing, committed = described[ongoing_id], described[committed_id]
    assert ongoing.state == "Ongoing"
    assert ongoing.topic_partitions == ((topic, 0), (topic, 1))
    assert ongoing.transaction_start_time_ms is not None and ongoing.transaction_start_time_ms > 0
    assert ongoing.transaction_timeout_ms == 600_000
    assert ongoing.producer_epoch >= 0
    assert committed.state == "CompleteCommit" and committed.topic_partitions == ()
    for tid, d in described.items():
        assert d.transactional_id == tid
        assert (d.producer_id, d.coordinator_id) == (listed[tid].producer_id, listed[tid].coordinator_id)


def test_describe_unknown_transactional_id_raises(admin, transactions):
    with pytest.raises(TransactionalIdNotFoundError, match="no-such-id"):
        admin.describe_transactions(["no-such-id"])


def test_list_prints_what_kafka_prints(kafka, transactions):
    theirs, ours = kafka_transactions(kafka, "list"), kclient_transactions(kafka, "--list")
    assert theirs.returncode == 0 and ours.returncode == 0, (theirs.stderr, ours.stderr)
    assert cells(ours.stdout)[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert cells(ours.stdout)[0] == cells(theirs.stdout)[0]
    assert sorted(cells(ours.stdout)[1:]) == sorted(cells(theirs.stdout)[1:])
    rows = {row[0]: row for row in cells(ours.stdout)[1:]}
    assert rows[transactions["ongoing"]][3] == "Ongoing" and rows[transactions["committed"]][3] == "CompleteCommit"
    only = kclient_transactions(kafka, "--list", "--state", "CompleteCommit")
    assert only.returncode == 0, only.stderr
    states = {row[0]: row[3] for row in cells(only.stdout)[1:]}
    assert states.get(transactions["committed"]) == "CompleteCommit" and transactions["ongoing"] not in states


def _described(stdout: str) -> dict[str, str]:
    [header, row] = [line.split("\t") for line in stdout.splitlines() if line.strip()]
    return {name.strip(): value.strip() for name, value in zip(header, row) if name.strip()}


@pytest.mark.parametrize("which", ["ongoing", "committed"])
def test_describe_prints_what_kafka_prints(kafka, transactions, which):
    tid = transactions[which]
    theirs, ours = kafka_transactions(kafka, "describe", "--transactional-id", tid), kclient_transactions(kafka, "--describe", "--transactional-id", tid)
    assert theirs.returncode == 0 and ours.returncode == 0, (theirs.stderr, ours.stderr)
    kafka_fields, our_fields = _described(theirs.stdout), _described(ours.stdout)
    assert list(our_fields) == list(kafka_fields)
    # The duration is measured to each tool's own clock; partitions are a set.
    for row in (kafka_fields, our_fields):
        row.pop("TransactionDurationMs")
        row["TopicPartitions"] = ",".join(sorted(filter(None, row["TopicPartitions"].split(","))))
    assert our_fields == kafka_fields
    topic = transactions["topic"]
    expected = {"ongoing": ("Ongoing", f"{topic}-0,{topic}-1"), "committed": ("CompleteCommit", "")}[which]
    assert (our_fields["TransactionState"], our_fields["TopicPartitions"]) == expected


def test_describe_unknown_id_is_a_clear_error(kafka, transactions):
    ours = kclient_transactions(kafka, "--describe", "--transactional-id", "no-such-id")
    assert ours.returncode == 1 and ours.stdout == ""
    [line] = ours.stderr.splitlines()
    assert line.startswith("kclient transactions: error: TransactionalIdNotFoundError: transactional id 'no-such-id' does not exist"), line
    theirs = kafka_transactions(kafka, "describe", "--transactional-id", "no-such-id")
    assert theirs.returncode == 1


def test_bad_arguments_exit_2(kafka):
    missing = kclient_transactions(kafka, "--describe")
    assert missing.returncode == 2 and "--describe needs --transactional-id" in missing.stderr
    mixed = kclient_transactions(kafka, "--describe", "--transactional-id", "x", "--state", "Ongoing")
    assert mixed.returncode == 2 and "go with --list" in mixed.stderr


def test_duration_filter_keeps_only_older_transactions(admin, kafka, transactions):
    # No transaction here has run for a day; the ongoing one has run longer than 0 ms.
    assert admin.list_transactions(duration_filter_ms=86_400_000) == []
    assert transactions["ongoing"] in {t.transactional_id for t in admin.list_transactions(duration_filter_ms=0)}
    theirs, ours = kafka_transactions(kafka, "list", "--duration-filter", "0"), kclient_transactions(kafka, "--list", "--duration-filter", "0")
    assert theirs.returncode == 0 and ours.returncode == 0, (theirs.stderr, ours.stderr)
    assert sorted(cells(ours.stdout)) == sorted(cells(theirs.stdout))


def test_ctrl_c_while_waiting_for_a_broker_ends_with_status_130():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(TIMEOUT)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        proc = subprocess.Popen([sys.executable, "-m", "kclient", "transactions", "--bootstrap-server", address, "--list"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        try:
            conn, _ = server.accept()  # the tool connected; its request is never answered
            with conn:
                proc.send_signal(signal.SIGINT)
                stdout, stderr = proc.communicate(timeout=TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, stderr
    assert stdout == "" and "Traceback" not in stderr, stderr


@pytest.mark.unit
def test_rows_and_table_are_laid_out_as_kafka_lays_them_out():
    from kclient.client.admin_transactions import TransactionDescription, TransactionListing
    from kclient.tools.transactions import DESCRIBE_COLUMNS, LIST_COLUMNS, describe_rows, format_table, list_rows

    idle = TransactionDescription("app", 1, "Empty", 7, 2, 60_000, None, ())
    assert describe_rows(idle, now_ms=5_000) == [("1", "app", "7", "2", "Empty", "60000", "None", "None", "")]
    open_ = TransactionDescription("app", 1, "Ongoing", 7, 2, 60_000, 1_000, (("t", 0), ("t", 1)))
    assert describe_rows(open_, now_ms=5_000)[0][6:] == ("1000", "4000", "t-0,t-1")
    assert len(format_table(DESCRIBE_COLUMNS, describe_rows(open_, 5_000)).splitlines()) == 2
    table = format_table(LIST_COLUMNS, list_rows([TransactionListing("a-long-transactional-id", 7, "Ongoing", 1)]))
    assert table == ("TransactionalId        \tCoordinator\tProducerId\tTransactionState\t\n"
                     "a-long-transactional-id\t1          \t7         \tOngoing         \t\n")
