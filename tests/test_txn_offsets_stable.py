"""The poll `kclient.Consumer` asks for stable offsets (OffsetFetch v7+
``require_stable``, KIP-447), as Kafka's consumer does (issue 29): while a
transaction holds a pending offset of a partition, ``committed()`` and
``position()`` wait (UNSTABLE_OFFSET_COMMIT, retried after
``retry.backoff.ms``) until the transaction commits (the new offset) or
aborts (the old one), and never return the value the transaction may still
change. The bundled broker and Apache Kafka 4 give the same answers."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.groups import group_kafka, poll_settings
from helpers.wait import retry, wait_for
from test_txn_offsets_broker import PARTITIONS, PROPERTIES, ensure_topic, kclient_producer

import kclient
from kclient.client.consumer.poll.types import ConsumerGroupMetadata
from kclient.testing import BrokerProcess

KAFKA_EXTRA = {"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}


@pytest.fixture(scope="module")
def stable_broker() -> Iterator[BrokerProcess]:
    """One standalone bundled broker for the module."""
    with BrokerProcess(properties=PROPERTIES, keep_port=True) as proc:
        yield proc


class UnstableAnswers(logging.Handler):
    """Counts the OffsetFetch retries after UNSTABLE_OFFSET_COMMIT the
    consumer's group coordinator logs (``kclient.consumer``, debug)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and any(isinstance(a, kclient.UnstableOffsetCommitError) for a in record.args):
            self.count += 1


@contextlib.contextmanager
def unstable_answers() -> Iterator[UnstableAnswers]:
    handler = UnstableAnswers()
    logger = logging.getLogger("kclient.consumer")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


class Background:
    """``call()`` in a thread; `result` once it returned."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.value = call()
            except BaseException as exc:  # handed to the test thread
                self.error = exc
            finally:
                self.done.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self) -> Any:
        wait_for(self.done.is_set, "the consumer's answer")
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.value


def commit_plainly(broker: Any, group: str, tp: kclient.TopicPartition, offset: int) -> None:
    """Commit ``offset`` outside a transaction, once the coordinator knows
    the new topic (Apache Kafka's metadata image lags topic creation)."""

    def attempt() -> kclient.KafkaError | None:
        with kclient.Consumer(poll_settings(broker.bootstrap, group)) as plain:
            plain.assign([tp])
            try:
                plain.commit({tp: kclient.OffsetAndMetadata(offset)})
            except kclient.KafkaError as exc:  # retriable while the coordinator catches up
                return exc
            return None

    retry(attempt, lambda exc: exc is None, "a plain commit")


def waits_for_the_transaction(broker: Any, topic: str, *, commit: bool) -> None:
    """Offset 3 committed plainly, then a transaction sends 7 for the same
    partition: ``committed()`` and ``position()`` of fresh consumers wait
    while it is open and then see 7 (commit) or 3 (abort)."""
    ensure_topic(broker, topic)
    group = f"g-{topic}"
    tp = kclient.TopicPartition(topic, 0)
    settings = poll_settings(broker.bootstrap, group, **{"retry.backoff.ms": 50, "default.api.timeout.ms": 60_000})
    commit_plainly(broker, group, tp, 3)
    with kclient_producer(broker, f"tx-{topic}") as producer, kclient.Consumer(settings) as asker, kclient.Consumer(settings) as starter, unstable_answers() as seen:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({(topic, 0): 7}, ConsumerGroupMetadata(group), 30_000)
        starter.assign([tp])
        committed = Background(lambda: asker.committed([tp])[tp])
        position = Background(lambda: starter.position(tp))
        wait_for(lambda: seen.count >= 4, "UNSTABLE_OFFSET_COMMIT answers to both consumers")
        assert not committed.done.is_set() and not position.done.is_set(), "answered while the transaction is open"
        if commit:
            producer.commit_transaction(30_000)
        else:
            producer.abort_transaction(30_000)
        expected = 7 if commit else 3
        assert committed.result().offset == expected
        assert position.result() == expected


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_committed_and_position_wait_for_the_transaction(stable_broker, topic, commit):
    waits_for_the_transaction(stable_broker, topic, commit=commit)


def test_committed_gives_up_at_the_timeout_with_unstable_offset_commit(stable_broker, topic):
    """``committed()`` with a timeout shorter than the transaction raises
    `KafkaTimeoutError` (as Kafka's; never the unstable value); the admin client's offsets do not ask for
    stable ones (``require_stable`` false, as Kafka's admin) and answer
    at once with the last committed offset."""
    ensure_topic(stable_broker, topic)
    group = f"g-{topic}"
    tp = kclient.TopicPartition(topic, 1)
    settings = poll_settings(stable_broker.bootstrap, group, **{"retry.backoff.ms": 50, "default.api.timeout.ms": 1_000})
    commit_plainly(stable_broker, group, tp, 2)
    with kclient_producer(stable_broker, f"tx-{topic}") as producer, kclient.Consumer(settings) as asker:
        # Found the coordinator first, so the timed call below spends its
        # time on OffsetFetch answers, not on the lookup.
        assert asker.committed([tp], timeout_ms=60_000)[tp].offset == 2
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({(topic, 1): 9}, ConsumerGroupMetadata(group), 30_000)
        # A slow machine may not get one answer inside the timeout; then
        # the cause is only the timeout, and the call is tried with a
        # longer one (a test never depends on the machine's speed).
        timeout_ms = 1_000
        while True:
            with unstable_answers() as seen, pytest.raises(kclient.KafkaTimeoutError) as info:
                asker.committed([tp], timeout_ms=timeout_ms)
            if seen.count:
                break
            assert timeout_ms < 64_000, "no UNSTABLE_OFFSET_COMMIT answer in 64 s"
            timeout_ms *= 2
        assert isinstance(info.value.__cause__, kclient.UnstableOffsetCommitError)
        with kclient.AdminClient({"bootstrap.servers": stable_broker.bootstrap}) as admin:
            assert admin.list_consumer_group_offsets(group) == {(topic, 1): 2}
        producer.commit_transaction(30_000)
        assert asker.committed([tp])[tp].offset == 9


def test_poll_starts_from_the_offset_the_transaction_commits(stable_broker, topic):
    """``poll()`` of a consumer without a position waits while the
    transaction holds the partition's offset, then reads from the
    committed one (7), never from the older plain commit (3)."""
    ensure_topic(stable_broker, topic)
    group = f"g-{topic}"
    tp = kclient.TopicPartition(topic, 2)
    with kclient.Producer({"bootstrap.servers": stable_broker.bootstrap, "serializer.class": "kclient.StringEncoder"}) as plain_producer:
        plain_producer.send(kclient.ProducerData(topic, messages=[f"m{i}" for i in range(10)], partition=2))
    commit_plainly(stable_broker, group, tp, 3)
    settings = poll_settings(stable_broker.bootstrap, group, **{"retry.backoff.ms": 50, "default.api.timeout.ms": 60_000})
    with kclient_producer(stable_broker, f"tx-{topic}") as producer, kclient.Consumer(settings) as reader, unstable_answers() as seen:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({(topic, 2): 7}, ConsumerGroupMetadata(group), 30_000)
        reader.assign([tp])

        def first_records() -> list[Any]:
            return wait_for(lambda: reader.poll(100), "records")

        polled = Background(first_records)
        wait_for(lambda: seen.count >= 2, "UNSTABLE_OFFSET_COMMIT answers to the poll")
        assert not polled.done.is_set(), "polled while the transaction is open"
        producer.commit_transaction(30_000)
        assert polled.result()[0].offset == 7


@pytest.mark.unit
def test_the_error_is_retriable_and_exported():
    assert kclient.UnstableOffsetCommitError.code == 88
    assert kclient.UnstableOffsetCommitError.retriable
    assert kclient.errors.error_for_code(88) is kclient.UnstableOffsetCommitError


@pytest.fixture(scope="module")
def kafka4() -> Iterator[Any]:
    """Apache Kafka 4 (KRaft, one node) for the module's comparisons."""
    with group_kafka(PARTITIONS, **KAFKA_EXTRA) as kafka:
        yield kafka


@pytest.mark.apache_kafka
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_apache_kafka_4_makes_the_consumer_wait_too(kafka4, topic, commit):
    waits_for_the_transaction(kafka4, topic, commit=commit)
