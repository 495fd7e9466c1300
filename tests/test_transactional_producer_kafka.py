"""kclient's transactional producer (KIP-98, ``transactional.id``)
against Apache Kafka 4.x (KRaft, one broker for the module): records are
seen by a read_committed consumer (confluent-kafka) only after
``commit_transaction``, never after ``abort_transaction`` (while a
read_uncommitted one sees them); a second producer with the same
``transactional.id`` fences the first; ``send_offsets_to_transaction``
with a kclient ``Consumer``'s ``group_metadata()`` commits the group's
offsets only with the transaction; the config conflicts and calls in the
wrong state raise; the `TrioProducer` and a sync-mode `Producer` commit
and abort too."""

from __future__ import annotations

import time
import uuid

import pytest
from helpers.groups import group_kafka, poll_settings

import kclient
from kclient import ConfigError, IllegalStateError, ProducerData
from kclient.errors import ProducerFencedError

pytestmark = pytest.mark.apache_kafka

PARTITIONS = 3


@pytest.fixture(scope="module")
def kafka():
    with group_kafka(PARTITIONS, **{"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}) as proc:
        yield proc


def _producer(kafka, tid: str, **extra):
    cfg = {"bootstrap.servers": kafka.bootstrap, "producer.type": "async", "transactional.id": tid, "linger.ms": 1, "serializer.class": "kclient.StringEncoder", **extra}
    return kclient.Producer(cfg)


def _read(kafka, topic: str, isolation: str, expected: int, timeout: float = 30.0, settle: float = 0.0) -> list[bytes]:
    """Values confluent-kafka reads from ``topic`` with ``isolation``:
    until ``expected`` arrived (or ``timeout``), then ``settle`` more
    seconds of polls that must bring nothing new when asserting absence."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(values) < expected:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        end = time.monotonic() + settle
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def _ensure_topic(kafka, topic: str) -> None:
    with kclient.AdminClient({"bootstrap.servers": kafka.bootstrap}) as admin:
        admin.create_topics([kclient.NewTopic(topic, PARTITIONS, 1)])


def test_committed_records_are_seen_by_read_committed_only_after_commit(kafka, topic):
    _ensure_topic(kafka, topic)
    with _producer(kafka, f"tx-{topic}") as producer:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send([ProducerData(topic, f"k{i}", [f"v{i}"]) for i in range(30)])
        producer.flush()
        # Written and acknowledged, not committed: read_committed sees nothing.
        assert _read(kafka, topic, "read_committed", 1, timeout=3.0) == []
        producer.commit_transaction(30_000)
        values = _read(kafka, topic, "read_committed", 30)
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(30))
        # A second transaction on the same producer.
        producer.begin_transaction()
        producer.send([ProducerData(topic, "k", ["second"])])
        producer.commit_transaction(30_000)
    assert b"second" in _read(kafka, topic, "read_committed", 31)


def test_aborted_records_are_never_seen_by_read_committed(kafka, topic):
    _ensure_topic(kafka, topic)
    with _producer(kafka, f"tx-{topic}") as producer:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send([ProducerData(topic, f"k{i}", [f"aborted{i}"]) for i in range(10)])
        producer.abort_transaction(30_000)
        producer.begin_transaction()
        producer.send([ProducerData(topic, "k", ["kept"])])
        producer.commit_transaction(30_000)
    assert _read(kafka, topic, "read_committed", 1, settle=1.0) == [b"kept"]
    uncommitted = _read(kafka, topic, "read_uncommitted", 11)
    assert sorted(uncommitted) == sorted([b"kept", *(f"aborted{i}".encode() for i in range(10))])


def test_a_second_producer_with_the_same_id_fences_the_first(kafka, topic):
    _ensure_topic(kafka, topic)
    tid = f"tx-{topic}"
    first = _producer(kafka, tid)
    try:
        first.init_transactions(30_000)
        first.begin_transaction()
        first.send([ProducerData(topic, "k", ["zombie"])])
        first.flush()
        with _producer(kafka, tid) as second:
            second.init_transactions(30_000)
            with pytest.raises(ProducerFencedError):
                first.commit_transaction(30_000)
            # Fatal: every later call raises it too.
            with pytest.raises(ProducerFencedError):
                first.begin_transaction()
            second.begin_transaction()
            second.send([ProducerData(topic, "k", ["successor"])])
            second.commit_transaction(30_000)
    finally:
        first.close()
    assert _read(kafka, topic, "read_committed", 1, settle=1.0) == [b"successor"]


def test_offsets_sent_to_the_transaction_commit_with_it(kafka, topic):
    _ensure_topic(kafka, topic)
    group = f"g-{topic}"
    consumer = kclient.Consumer(poll_settings(kafka.bootstrap, group))
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(200)
        metadata = consumer.group_metadata()
        offsets = {(topic, p): 5 + p for p in range(PARTITIONS)}
        with _producer(kafka, f"tx-{topic}") as producer, kclient.AdminClient({"bootstrap.servers": kafka.bootstrap}) as admin:
            producer.init_transactions(30_000)
            producer.begin_transaction()
            producer.send_offsets_to_transaction({(topic, 0): 1}, metadata, 30_000)
            producer.abort_transaction(30_000)
            assert admin.list_consumer_group_offsets(group) == {}
            producer.begin_transaction()
            producer.send_offsets_to_transaction(offsets, metadata, 30_000)
            assert admin.list_consumer_group_offsets(group) == {}
            producer.commit_transaction(30_000)
            # The coordinator writes the commit markers after EndTxn answered.
            deadline = time.monotonic() + 30
            while admin.list_consumer_group_offsets(group) != offsets and time.monotonic() < deadline:
                time.sleep(0.1)
            assert admin.list_consumer_group_offsets(group) == offsets
    finally:
        consumer.close()


@pytest.mark.parametrize("conflict", [{"acks": 1}, {"enable.idempotence": False}])
def test_config_conflicts_name_both_properties(conflict):
    with pytest.raises(ConfigError) as info:
        kclient.ProducerConfig.from_properties({"bootstrap.servers": "localhost:9092", "transactional.id": "t", **conflict})
    text = str(info.value)
    assert "transactional.id" in text and next(iter(conflict)) in text


def test_calls_in_the_wrong_state_raise(kafka, topic):
    with _producer(kafka, f"tx-{topic}") as producer:
        with pytest.raises(IllegalStateError):
            producer.begin_transaction()
        with pytest.raises(IllegalStateError):
            producer.send([ProducerData(topic, "k", ["before init"])])
        producer.init_transactions(30_000)
        with pytest.raises(IllegalStateError):
            producer.send_with_result([ProducerData(topic, "k", ["outside a transaction"])])
        with pytest.raises(IllegalStateError):
            producer.commit_transaction(30_000)
        with pytest.raises(IllegalStateError):
            producer.abort_transaction(30_000)
        producer.begin_transaction()
        with pytest.raises(IllegalStateError):
            producer.begin_transaction()
        producer.abort_transaction(30_000)
    plain = kclient.Producer({"bootstrap.servers": kafka.bootstrap})
    try:
        with pytest.raises(IllegalStateError):
            plain.init_transactions(1000)
    finally:
        plain.close()


def test_the_trio_producer_commits_and_aborts(kafka, topic):
    import trio

    _ensure_topic(kafka, topic)
    cfg = {"bootstrap.servers": kafka.bootstrap, "transactional.id": f"tx-{topic}", "serializer.class": "kclient.StringEncoder"}

    async def main() -> None:
        async with kclient.TrioProducer(cfg) as producer:
            with pytest.raises(IllegalStateError):
                await producer.send([ProducerData(topic, "k", ["before init"])])
            await producer.init_transactions(30_000)
            producer.begin_transaction()
            await producer.send([ProducerData(topic, "k", ["dropped"])])
            await producer.abort_transaction(30_000)
            producer.begin_transaction()
            await producer.send([ProducerData(topic, f"k{i}", [f"trio{i}"]) for i in range(5)])
            await producer.commit_transaction(30_000)

    trio.run(main)
    values = _read(kafka, topic, "read_committed", 5, settle=1.0)
    assert sorted(values) == [f"trio{i}".encode() for i in range(5)]


def test_a_sync_producer_is_transactional_too(kafka, topic):
    _ensure_topic(kafka, topic)
    with _producer(kafka, f"tx-{topic}", **{"producer.type": "sync"}) as producer:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send([ProducerData(topic, "k", ["sync-aborted"])])
        producer.abort_transaction(30_000)
        producer.begin_transaction()
        producer.send([ProducerData(topic, "k", ["sync-committed"])])
        producer.commit_transaction(30_000)
    assert _read(kafka, topic, "read_committed", 1, settle=1.0) == [b"sync-committed"]


def test_a_record_that_cannot_be_written_makes_the_transaction_abortable(kafka, topic):
    _ensure_topic(kafka, topic)
    with _producer(kafka, f"tx-{topic}", **{"max.request.size": 2000}) as producer:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        futures = producer.send_with_result([ProducerData(topic, "k", ["before"]), ProducerData(topic, "k", ["x" * 5000])])
        assert futures[-1].exception(30) is not None
        with pytest.raises(kclient.KafkaError) as info:
            producer.commit_transaction(30_000)
        assert not isinstance(info.value, ProducerFencedError)
        producer.abort_transaction(30_000)
        producer.begin_transaction()
        producer.send([ProducerData(topic, "k", ["after"])])
        producer.commit_transaction(30_000)
    assert _read(kafka, topic, "read_committed", 1, settle=1.0) == [b"after"]


def test_a_call_that_timed_out_can_be_made_again(kafka, topic):
    _ensure_topic(kafka, topic)
    with _producer(kafka, f"tx-{topic}") as producer:
        try:
            producer.init_transactions(1)
        except kclient.KafkaTimeoutError:
            with pytest.raises(IllegalStateError):
                producer.begin_transaction()  # the timed-out call must be completed first
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send([ProducerData(topic, "k", ["after-timeout"])])
        producer.commit_transaction(30_000)
    assert _read(kafka, topic, "read_committed", 1, settle=1.0) == [b"after-timeout"]


def test_a_custom_event_handler_cannot_be_transactional():
    class Handler(kclient.EventHandler):
        async def handle(self, events):
            return None

    with pytest.raises(ConfigError, match="transactional.id.*event.handler"):
        kclient.TrioProducer({"bootstrap.servers": "localhost:9092", "transactional.id": "t"}, event_handler=Handler())
