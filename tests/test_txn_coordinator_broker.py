"""The bundled broker's transaction coordinator (issue 29, KIP-98,
KIP-664) against confluent-kafka's transactional producer: InitProducerId
with a transactional id, fencing of an older producer, DescribeTransactions
and ListTransactions, the abort of a transaction whose producer vanished,
and ``__transaction_state`` reloaded after a SIGKILL.

The markers are written by the partition leaders' WriteTxnMarkers
(`kclient.broker.txn_markers_api`); once every one is answered the
coordinator writes CompleteCommit / CompleteAbort."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import confluent_kafka as ck
import pytest
from helpers.groups import group_kafka
from helpers.three_brokers import ThreeBrokers
from helpers.transactions import typed_request
from helpers.wait import retry, wait_for

import kclient
from kclient.broker.txn.coordinator import TransactionResult
from kclient.broker.txn.marker_channel import marker_errors, marker_request
from kclient.broker.txn.markers import TxnMarkerEntry
from kclient.errors import NONE, NOT_LEADER_OR_FOLLOWER, OPERATION_NOT_ATTEMPTED, TRANSACTIONAL_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION
from kclient.protocol.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN, AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kclient.protocol.messages.describe_transactions import (
    DESCRIBE_TRANSACTIONS,
    DescribeTransactionsRequest,
    DescribeTransactionsState,
)
from kclient.protocol.messages.find_coordinator import FIND_COORDINATOR, FindCoordinatorRequest
from kclient.protocol.messages.list_transactions import LIST_TRANSACTIONS, ListTransactionsRequest, ListTransactionsResponse
from kclient.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from kclient.testing import BrokerProcess

PROPERTIES = {
    "num.partitions": 2,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.num.partitions": 5,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
}


@pytest.fixture(scope="module")
def txn_broker():
    """One standalone bundled broker for the module."""
    with BrokerProcess(properties=PROPERTIES, keep_port=True) as proc:
        yield proc


@pytest.fixture
def txn_id() -> str:
    return f"txn-{uuid.uuid4().hex[:10]}"


def request(broker: BrokerProcess, api: Any, body: Any, version: int) -> Any:
    """One request to ``broker``, answered."""
    return typed_request(broker, api, body, version, client_id="txn-test")


def describe(broker: BrokerProcess, txn_id: str) -> DescribeTransactionsState:
    """DescribeTransactions for one id, once its coordinator has loaded it."""
    answer = retry(
        lambda: request(broker, DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=[txn_id]), 0).transaction_states[0],
        lambda s: s.error_code == NONE,
        f"DescribeTransactions of {txn_id}",
    )
    assert isinstance(answer, DescribeTransactionsState)
    return answer


def list_transactions(broker: BrokerProcess, **filters: Any) -> ListTransactionsResponse:
    answer = retry(
        lambda: request(broker, LIST_TRANSACTIONS, ListTransactionsRequest(**filters), 1), lambda r: r.error_code == NONE, "ListTransactions"
    )
    assert isinstance(answer, ListTransactionsResponse)
    return answer


def producer(broker: BrokerProcess, txn_id: str, **extra: Any) -> ck.Producer:
    return ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000, **extra})


def test_init_transactions_gives_an_id_and_describe_shows_the_open_transaction(txn_broker, txn_id):
    """init_transactions: producer id and epoch 0 (state Empty); a produced
    record opens the transaction (Ongoing, its partition listed); commit
    prepares it (PrepareCommit, then CompleteCommit once its markers are
    written)."""
    p = producer(txn_broker, txn_id)
    p.init_transactions(30)
    first = describe(txn_broker, txn_id)
    assert (first.transaction_state, first.producer_epoch, first.transaction_timeout_ms) == ("Empty", 0, 60000)
    assert first.producer_id >= 0
    p.begin_transaction()
    p.produce("txn-out", b"v", partition=1)
    p.flush(30)
    ongoing = describe(txn_broker, txn_id)
    assert ongoing.transaction_state == "Ongoing"
    assert [(t.topic, t.partitions) for t in ongoing.topics] == [("txn-out", [1])]
    assert ongoing.transaction_start_time_ms > 0
    listed = {t.transactional_id: t for t in list_transactions(txn_broker).transaction_states}
    assert (listed[txn_id].producer_id, listed[txn_id].transaction_state) == (first.producer_id, "Ongoing")
    p.commit_transaction(30)
    done = wait_for(lambda: (d := describe(txn_broker, txn_id)).transaction_state == "CompleteCommit" and d, "the markers written")
    assert (done.producer_id, done.producer_epoch, done.topics) == (first.producer_id, 0, [])
    only = list_transactions(txn_broker, producer_id_filters=[first.producer_id], state_filters=["CompleteCommit", "Bogus"])
    assert [t.transactional_id for t in only.transaction_states] == [txn_id]
    assert only.unknown_state_filters == ["Bogus"]


def test_a_second_producer_with_the_same_id_fences_the_first(txn_broker, txn_id):
    """Kafka's zombie fencing: the second init_transactions bumps the epoch
    (same producer id); the first producer's next request is refused with
    PRODUCER_FENCED, a fatal error."""
    first = producer(txn_broker, txn_id)
    first.init_transactions(30)
    before = describe(txn_broker, txn_id)
    second = producer(txn_broker, txn_id)
    second.init_transactions(30)
    after = describe(txn_broker, txn_id)
    assert (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch + 1)
    first.begin_transaction()
    first.produce("txn-out", b"zombie", partition=0)
    with pytest.raises(ck.KafkaException) as raised:
        first.commit_transaction(30)
    error = raised.value.args[0]
    assert error.code() == ck.KafkaError._FENCED or error.fatal(), error
    assert describe(txn_broker, txn_id).producer_epoch == before.producer_epoch + 1


def test_a_vanished_producers_transaction_is_aborted_after_its_timeout(txn_broker, txn_id):
    """A producer killed (SIGKILL) with its transaction open: after its
    ``transaction.timeout.ms`` the coordinator aborts it, bumping the epoch
    (the dead producer is fenced)."""
    script = (
        "import sys, confluent_kafka as ck\n"
        f"p = ck.Producer({{'bootstrap.servers': {txn_broker.bootstrap!r}, 'transactional.id': {txn_id!r}, 'transaction.timeout.ms': 2000}})\n"
        "p.init_transactions(30); p.begin_transaction(); p.produce('txn-out', b'lost', partition=0); p.flush(30)\n"
        "print('open', flush=True); sys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "open"
        opened = describe(txn_broker, txn_id)
        assert (opened.transaction_state, opened.transaction_timeout_ms) == ("Ongoing", 2000)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    aborted = wait_for(lambda: (s := describe(txn_broker, txn_id)).transaction_state == "CompleteAbort" and s, "the timed-out abort")
    assert (aborted.producer_id, aborted.producer_epoch) == (opened.producer_id, opened.producer_epoch + 1)


def test_transaction_state_survives_a_sigkill(txn_broker):
    """``__transaction_state`` reloaded after the broker is killed: every id
    keeps its producer id, epoch and state."""
    ids = [f"txn-restart-{uuid.uuid4().hex[:8]}-{i}" for i in range(4)]
    for i, t in enumerate(ids):
        p = producer(txn_broker, t)
        p.init_transactions(30)
        if i % 2:
            p = producer(txn_broker, t)
            p.init_transactions(30)  # epoch 1, the first producer fenced
        if i == 3:
            p.begin_transaction()
            p.produce("txn-out", b"open", partition=0)
            p.flush(30)
    before = {t: describe(txn_broker, t) for t in ids}
    txn_broker.kill()
    txn_broker.start()
    after = {t: describe(txn_broker, t) for t in ids}
    for t in ids:
        b, a = before[t], after[t]
        assert (a.producer_id, a.producer_epoch, a.transaction_state, a.topics) == (b.producer_id, b.producer_epoch, b.transaction_state, b.topics), t


def read_committed(broker: BrokerProcess, topic: str, partition: int, last: bytes) -> list[bytes]:
    """The values a read_committed confluent-kafka consumer reads from
    ``partition`` of ``topic``, up to and including ``last``."""
    consumer = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"rc-{uuid.uuid4().hex[:8]}", "isolation.level": "read_committed", "enable.auto.commit": False}
    )
    try:
        consumer.assign([ck.TopicPartition(topic, partition, 0)])
        got: list[bytes] = []
        end = time.monotonic() + 30
        while (not got or got[-1] != last) and time.monotonic() < end:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        return got
    finally:
        consumer.close()


def test_fencing_an_open_transaction_aborts_it_and_read_committed_skips_it(txn_broker, txn_id):
    """A new producer with the id of a producer whose transaction is open:
    the coordinator aborts that transaction (epoch bumped, markers written),
    the new producer gets the next epoch; a read_committed reader sees the
    new producer's committed records and none of the zombie's."""
    topic = f"txn-fence-{uuid.uuid4().hex[:8]}"
    zombie = producer(txn_broker, txn_id)
    zombie.init_transactions(30)
    start = describe(txn_broker, txn_id)
    zombie.begin_transaction()
    for i in range(3):
        zombie.produce(topic, f"zombie-{i}".encode(), partition=0)
    zombie.flush(30)
    successor = producer(txn_broker, txn_id)
    successor.init_transactions(30)
    fenced = describe(txn_broker, txn_id)
    assert (fenced.producer_id, fenced.transaction_state) == (start.producer_id, "Empty")
    assert fenced.producer_epoch == start.producer_epoch + 2  # one bump for the abort, one for the new producer (as Kafka)
    successor.begin_transaction()
    for value in (b"a", b"b", b"end"):
        successor.produce(topic, value, partition=0)
    successor.commit_transaction(30)
    assert read_committed(txn_broker, topic, 0, b"end") == [b"a", b"b", b"end"]
    with pytest.raises(ck.KafkaException):
        zombie.commit_transaction(10)


def test_abort_transaction_completes_and_read_committed_skips_it(txn_broker, txn_id):
    """abort_transaction: PrepareAbort, then CompleteAbort once the ABORT
    markers are written; the aborted records stay invisible to read_committed."""
    topic = f"txn-abort-{uuid.uuid4().hex[:8]}"
    p = producer(txn_broker, txn_id)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=0)
    p.flush(30)  # the partition is in the transaction (else the client aborts locally)
    p.abort_transaction(30)
    wait_for(lambda: describe(txn_broker, txn_id).transaction_state == "CompleteAbort", "the abort completed")
    p.begin_transaction()
    p.produce(topic, b"end", partition=0)
    p.commit_transaction(30)
    assert read_committed(txn_broker, topic, 0, b"end") == [b"end"]


def fencing_trace(broker: Any, txn_id: str) -> list[tuple[str, int, list[tuple[str, list[int]]]]]:
    """(state, epoch minus the first epoch, partitions) seen through
    DescribeTransactions while a transaction is opened, fenced by a second
    producer (its abort completed) and the successor commits."""
    topic = f"txn-trace-{uuid.uuid4().hex[:8]}"
    trace = []

    def seen(state: str | None = None) -> None:
        d = wait_for(lambda: (x := describe(broker, txn_id)).transaction_state == (state or x.transaction_state) and x, f"state {state}")
        trace.append((d.transaction_state, d.producer_epoch, [(t.topic, sorted(t.partitions)) for t in d.topics]))

    zombie = producer(broker, txn_id)
    zombie.init_transactions(60)
    seen("Empty")
    zombie.begin_transaction()
    zombie.produce(topic, b"z", partition=0)
    zombie.flush(30)
    seen("Ongoing")
    successor = producer(broker, txn_id)
    successor.init_transactions(60)
    seen("Empty")
    successor.begin_transaction()
    successor.produce(topic, b"s", partition=0)
    successor.commit_transaction(30)
    seen("CompleteCommit")
    first = trace[0][1]
    return [(s, e - first, [(t.replace(topic, "T"), ps) for t, ps in tps]) for s, e, tps in trace]


def timeout_outcome(broker: Any) -> tuple[Any, str, int]:
    """What a live producer whose transaction outlived its
    ``transaction.timeout.ms`` gets when it commits: (the error's name,
    fatal, retriable, abortable), then the state and the epoch bump."""
    txn_id = f"txn-late-{uuid.uuid4().hex[:8]}"
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 2000})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce("txn-late", b"x", partition=0)
    p.flush(30)
    start = describe(broker, txn_id)
    wait_for(lambda: describe(broker, txn_id).transaction_state == "CompleteAbort", "the timed-out abort", timeout=60)
    p.produce("txn-late", b"y", partition=0)
    with pytest.raises(ck.KafkaException) as raised:
        p.commit_transaction(30)
    error = raised.value.args[0]
    end = describe(broker, txn_id)
    return (error.name(), error.fatal(), error.retriable(), error.txn_requires_abort()), end.transaction_state, end.producer_epoch - start.producer_epoch


def test_states_and_epochs_match_apache_kafka_4(txn_broker):
    """The same scenarios against the bundled broker and Apache Kafka 4:
    fencing an open transaction (the same states, epoch bumps and
    partitions), and a producer committing after its transaction timed out
    (fenced, fatal, one epoch bump, as Kafka)."""
    ours = fencing_trace(txn_broker, f"txn-cmp-{uuid.uuid4().hex[:8]}"), timeout_outcome(txn_broker)
    props = {
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
    }
    with group_kafka(2, **props) as kafka:
        theirs = fencing_trace(kafka, f"txn-cmp-{uuid.uuid4().hex[:8]}"), timeout_outcome(kafka)
    assert ours == theirs
    assert ours[0] == [("Empty", 0, []), ("Ongoing", 0, [("T", [0])]), ("Empty", 2, []), ("CompleteCommit", 2, [])]
    assert ours[1] == (("_FENCED", True, False, False), "CompleteAbort", 1)


def test_an_idle_transactional_id_expires_and_a_new_producer_starts_over():
    """``transactional.id.expiration.ms``: an id idle that long is
    tombstoned (DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND, also
    after a restart); the next init_transactions gets a new producer id,
    epoch 0."""
    props = {**PROPERTIES, "transactional.id.expiration.ms": 1500, "transaction.remove.expired.transaction.cleanup.interval.ms": 300}
    with BrokerProcess(properties=props, keep_port=True) as broker:
        txn_id = f"txn-expire-{uuid.uuid4().hex[:8]}"
        p = producer(broker, txn_id)
        p.init_transactions(30)
        first = describe(broker, txn_id)
        states = lambda: request(broker, DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=[txn_id]), 0).transaction_states  # noqa: E731
        wait_for(lambda: states()[0].error_code == TRANSACTIONAL_ID_NOT_FOUND, "the id expired")
        broker.kill()
        broker.start()
        retry(states, lambda s: s[0].error_code == TRANSACTIONAL_ID_NOT_FOUND, "the tombstone reloaded")
        again = producer(broker, txn_id)
        again.init_transactions(30)
        fresh = describe(broker, txn_id)
        assert fresh.producer_epoch == 0 and fresh.producer_id != first.producer_id


@pytest.mark.unit
def test_marker_request_and_answer_mapping():
    """One WriteTxnMarkers entry per producer and broker, topics grouped;
    a partition the answer leaves out counts as NOT_LEADER_OR_FOLLOWER
    (retried), another producer's results are ignored."""
    entry = TxnMarkerEntry(7, 3, 11, TransactionResult.COMMIT, (("a", 0), ("a", 2), ("b", 1)))
    (marker,) = marker_request(entry).markers
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.transaction_result) == (7, 3, 11, True)
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("a", [0, 2]), ("b", [1])]
    answer = WriteTxnMarkersResponse(
        markers=[
            WritableTxnMarkerResult(producer_id=7, topics=[WritableTxnMarkerTopicResult(name="a", partitions=[
                WritableTxnMarkerPartitionResult(partition_index=0, error_code=0),
                WritableTxnMarkerPartitionResult(partition_index=2, error_code=6),
            ])]),
            WritableTxnMarkerResult(producer_id=8, topics=[WritableTxnMarkerTopicResult(name="b", partitions=[
                WritableTxnMarkerPartitionResult(partition_index=1, error_code=0),
            ])]),
        ]
    )
    assert marker_errors(entry, answer) == {("a", 0): NONE, ("a", 2): 6, ("b", 1): NOT_LEADER_OR_FOLLOWER}


def coordinator_of(cluster: ThreeBrokers, txn_id: str) -> int:
    """The broker id FindCoordinator (key type 1) names for ``txn_id``."""
    def ask() -> int:
        for b in cluster.live():
            try:
                answer = request(b, FIND_COORDINATOR, FindCoordinatorRequest(key=txn_id, key_type=1), 1)
            except Exception:
                continue
            if answer.error_code == NONE and answer.node_id in {i for i, x in cluster.brokers.items() if x.running}:
                return int(answer.node_id)
        return 0

    return wait_for(ask, f"the coordinator of {txn_id}", timeout=60)


def test_coordinator_killed_mid_transaction_its_successor_commits_it(zookeeper):
    """Three brokers, ``__transaction_state`` with three replicas: the
    coordinator of an open transaction is killed (SIGKILL); the new leader
    of its partition loads it, the producer's commit goes there, the
    markers are written and a read_committed reader sees the records."""
    with ThreeBrokers(zookeeper) as cluster:
        topic = f"txn-failover-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, partitions=2)
        txn_id = f"txn-failover-{uuid.uuid4().hex[:8]}"
        p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000})
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, f"v{i}".encode(), partition=i % 2)
        p.flush(30)
        old = coordinator_of(cluster, txn_id)
        before = describe(cluster.brokers[old], txn_id)
        assert before.transaction_state == "Ongoing"
        cluster.brokers[old].kill()
        new = coordinator_of(cluster, txn_id)
        assert new != old
        # Nothing of the open transaction is readable committed: every
        # partition's last stable offset is still its first record's.
        assert stable_offsets(cluster, topic, 2) == {0: 0, 1: 0}
        p.produce(topic, b"end", partition=0)
        p.commit_transaction(60)
        done = wait_for(lambda: (d := describe(cluster.brokers[new], txn_id)).transaction_state == "CompleteCommit" and d, "the commit completed", timeout=60)
        assert (done.producer_id, done.producer_epoch) == (before.producer_id, before.producer_epoch)
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rc", "isolation.level": "read_committed", "enable.auto.commit": False})
        try:
            consumer.assign([ck.TopicPartition(topic, 0, 0), ck.TopicPartition(topic, 1, 0)])
            got: list[bytes] = []
            wait_for(lambda: (m := consumer.poll(0.2)) is not None and m.error() is None and got.append(m.value()) is None and len(got) >= 6, "every committed record", timeout=60)
        finally:
            consumer.close()
        assert sorted(got) == sorted([f"v{i}".encode() for i in range(5)] + [b"end"])


def stable_offsets(cluster: ThreeBrokers, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's last stable offset (kclient's read_committed
    `Consumer.end_offsets`: ListOffsets with isolation level 1)."""
    with kclient.Consumer({"bootstrap.servers": cluster.bootstrap, "isolation.level": "read_committed"}) as consumer:
        tps = [kclient.TopicPartition(topic, i) for i in range(partitions)]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}


def test_add_partitions_of_an_unknown_topic_adds_none(txn_broker, txn_id):
    """AddPartitionsToTxn naming a partition the cluster lacks: that one
    UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED, and
    none joins the transaction (Kafka's answer)."""
    p = producer(txn_broker, txn_id)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-known", b"x", partition=0)
    p.flush(30)  # the topic exists, the transaction is Ongoing on it
    d = describe(txn_broker, txn_id)
    body = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=d.producer_id,
        v3_and_below_producer_epoch=d.producer_epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name="txn-known", partitions=[1]), AddPartitionsToTxnTopic(name="txn-missing", partitions=[0])],
    )
    answer = request(txn_broker, ADD_PARTITIONS_TO_TXN, body, 3)
    got = {(t.name, r.partition_index): r.partition_error_code for t in answer.results_by_topic_v3_and_below for r in t.results_by_partition}
    assert got == {("txn-known", 1): OPERATION_NOT_ATTEMPTED, ("txn-missing", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert [(t.topic, t.partitions) for t in describe(txn_broker, txn_id).topics] == [("txn-known", [0])]
    p.abort_transaction(30)


def test_kclient_transactional_producer_and_admin_against_the_bundled_broker(txn_broker):
    """kclient's own transactional producer commits and aborts against the
    bundled broker (read_committed sees the committed records only), and
    kclient's Admin lists and describes the transactions (KIP-664)."""
    topic = f"txn-kc-{uuid.uuid4().hex[:8]}"
    committed_id, open_id = f"txn-kc-{uuid.uuid4().hex[:8]}", f"txn-kc-{uuid.uuid4().hex[:8]}"
    cfg = {"bootstrap.servers": txn_broker.bootstrap, "producer.type": "async", "linger.ms": 1, "serializer.class": "kclient.StringEncoder"}
    with kclient.Producer({**cfg, "transactional.id": committed_id}) as p, kclient.Producer({**cfg, "transactional.id": open_id}) as q:
        p.init_transactions(30_000)
        p.begin_transaction()
        p.send([kclient.ProducerData(topic, "k", ["aborted"])])
        p.flush()
        p.abort_transaction(30_000)
        p.begin_transaction()
        p.send([kclient.ProducerData(topic, "k", ["a"]), kclient.ProducerData(topic, "k", ["end"])])
        p.commit_transaction(30_000)
        q.init_transactions(30_000)
        q.begin_transaction()
        q.send([kclient.ProducerData(topic, "k", ["open"])])
        q.flush()
        # Every record has key "k": one partition for both producers.
        partition = next(t.partitions[0] for t in describe(txn_broker, open_id).topics)
        assert read_committed(txn_broker, topic, partition, b"end") == [b"a", b"end"]
        wait_for(lambda: describe(txn_broker, committed_id).transaction_state == "CompleteCommit", "the commit completed")
        with kclient.AdminClient({"bootstrap.servers": txn_broker.bootstrap}) as admin:
            listed = {t.transactional_id: t for t in admin.list_transactions()}
            assert (listed[committed_id].state, listed[open_id].state) == ("CompleteCommit", "Ongoing")
            described = admin.describe_transactions([open_id, committed_id])
            assert described[open_id].topic_partitions == ((topic, partition),)
            assert described[committed_id].topic_partitions == ()
            assert described[open_id].producer_id == listed[open_id].producer_id
        q.abort_transaction(30_000)


def test_kafka_defaults_on_one_broker_work_across_a_restart():
    """Kafka's defaults (``transaction.state.log.replication.factor`` 3,
    ``min.isr`` 2) on one broker: ``__transaction_state`` gets one replica
    and ``min.insync.replicas`` 1, before and after a SIGKILL."""
    with BrokerProcess(properties={"offsets.topic.replication.factor": 1}, keep_port=True) as broker:
        txn_id = f"txn-defaults-{uuid.uuid4().hex[:8]}"
        producer(broker, txn_id).init_transactions(30)
        broker.kill()
        broker.start()
        p = producer(broker, txn_id)
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("txn-defaults", b"x", partition=0)
        p.commit_transaction(30)
        done = wait_for(lambda: (d := describe(broker, txn_id)).transaction_state == "CompleteCommit" and d, "the commit completed")
        assert done.producer_epoch == 1


def test_markers_follow_a_partition_leader_killed_before_the_commit(zookeeper):
    """Three brokers: the leader of a partition of an open transaction (not
    the coordinator) is killed; the commit's marker for that partition is
    retried until its new leader writes it, and read_committed sees every
    record."""
    with ThreeBrokers(zookeeper) as cluster:
        topic = f"txn-moved-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, partitions=3)
        txn_id = f"txn-moved-{uuid.uuid4().hex[:8]}"
        p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000})
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(6):
            p.produce(topic, f"v{i}".encode(), partition=i % 3)
        p.flush(30)
        coordinator = coordinator_of(cluster, txn_id)
        victim_partition = next(i for i in range(3) if cluster.leader(topic, i) != coordinator)
        cluster.kill_leader(topic, victim_partition)
        p.commit_transaction(60)  # at once: the first marker goes to the dead leader
        wait_for(lambda: describe(cluster.brokers[coordinator], txn_id).transaction_state == "CompleteCommit", "the commit completed", timeout=60)
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rc", "isolation.level": "read_committed", "enable.auto.commit": False})
        got: list[bytes] = []
        try:
            consumer.assign([ck.TopicPartition(topic, i, 0) for i in range(3)])
            wait_for(lambda: (m := consumer.poll(0.2)) is not None and m.error() is None and got.append(m.value()) is None and len(got) >= 6, "every committed record", timeout=60)
        finally:
            consumer.close()
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(6))
        # The retries to the dead leader back off, and are logged at INFO
        # once for the outage (not once per retry).
        log = cluster.brokers[coordinator].output()
        assert log.count("WriteTxnMarkers to broker") <= 1, [line for line in log.splitlines() if "WriteTxnMarkers" in line]
