"""The bundled broker's group coordinator side of TxnOffsetCommit (issue
29; KIP-98, KIP-447): offsets a transactional producer sends with
``send_offsets_to_transaction`` are appended to ``__consumer_offsets`` in
the producer's transaction and stay pending (invisible to OffsetFetch;
UNSTABLE_OFFSET_COMMIT with ``require_stable``) until its COMMIT marker
lands; an ABORT drops them. kclient's and confluent-kafka's transactional
producers; the consumer's group metadata checked as Kafka does
(ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); a SIGKILLed
broker reloads the committed offsets, drops the aborted ones and keeps an
open transaction's pending until its marker. The same scenario against
Apache Kafka 4: ``tests/test_transactional_producer_kafka.py``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from helpers.groups import group_broker_properties, group_kafka, poll_settings
from helpers.transactions import typed_request
from helpers.wait import retry, wait_for

import kclient
from kclient.broker.group.txn_offsets import UNSTABLE_OFFSET_COMMIT
from kclient.client.consumer.poll.types import ConsumerGroupMetadata
from kclient.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    NONE,
    NOT_COORDINATOR,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from kclient.protocol.messages.offset_fetch import (
    OFFSET_FETCH_FULL,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
)
from kclient.protocol.messages.txn_offset_commit import (
    TXN_OFFSET_COMMIT,
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kclient.testing import BrokerProcess

PARTITIONS = 3

PROPERTIES = {
    **group_broker_properties(PARTITIONS),
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
}


@pytest.fixture(scope="module")
def txo_broker():
    """One standalone bundled broker for the module."""
    with BrokerProcess(properties=PROPERTIES, keep_port=True) as proc:
        yield proc


def request(broker: BrokerProcess, api: Any, body: Any, version: int) -> Any:
    """One request to ``broker``, answered."""
    return typed_request(broker, api, body, version, client_id="txn-offsets-test")


def fetch(broker: BrokerProcess, group: str, partitions: list[tuple[str, int]], *, require_stable: bool = True, version: int = 7) -> dict[tuple[str, int], tuple[int, int]]:
    """OffsetFetch v7 (or v8) of ``partitions``: ``{partition: (offset,
    error code)}``, once the coordinator answers."""
    topics: dict[str, list[int]] = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    wanted = [OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()]
    if version >= 8:
        body = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=wanted)], require_stable=require_stable)
    else:
        body = OffsetFetchRequest(group_id=group, topics=wanted, require_stable=require_stable)

    def top_error(answer: Any) -> int:
        return int(answer.groups[0].error_code if version >= 8 else answer.error_code)

    answer = retry(lambda: request(broker, OFFSET_FETCH_FULL, body, version), lambda a: top_error(a) not in (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR), "OffsetFetch")
    assert top_error(answer) == NONE
    answered = answer.groups[0].topics if version >= 8 else answer.topics
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in answered for p in t.partitions}


def committed(broker: BrokerProcess, group: str) -> dict[tuple[str, int], int]:
    with kclient.AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        return admin.list_consumer_group_offsets(group)


def ensure_topic(broker: BrokerProcess, topic: str) -> list[tuple[str, int]]:
    with kclient.AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([kclient.NewTopic(topic, PARTITIONS, 1)])
    return [(topic, p) for p in range(PARTITIONS)]


def kclient_producer(broker: BrokerProcess, txn_id: str) -> kclient.Producer:
    cfg = {"bootstrap.servers": broker.bootstrap, "producer.type": "async", "linger.ms": 1, "serializer.class": "kclient.StringEncoder", "transactional.id": txn_id}
    return kclient.Producer(cfg)


@contextlib.contextmanager
def member(broker: BrokerProcess, group: str, topic: str, **extra: Any) -> Iterator[kclient.Consumer]:
    """A kclient consumer in ``group``, subscribed to ``topic`` and assigned."""
    consumer = kclient.Consumer(poll_settings(broker.bootstrap, group, **extra))
    try:
        consumer.subscribe([topic])
        wait_for(lambda: (consumer.poll(100), consumer.assignment())[1], "an assignment")
        yield consumer
    finally:
        consumer.close()


def pending_everywhere(broker: BrokerProcess, group: str, partitions: list[tuple[str, int]]) -> None:
    """The partitions have pending transactional offsets: invisible to
    OffsetFetch, UNSTABLE_OFFSET_COMMIT with ``require_stable`` (v7, v8)."""
    assert fetch(broker, group, partitions, require_stable=False) == dict.fromkeys(partitions, (-1, NONE))
    assert fetch(broker, group, partitions) == dict.fromkeys(partitions, (-1, UNSTABLE_OFFSET_COMMIT))
    assert fetch(broker, group, partitions, version=8) == dict.fromkeys(partitions, (-1, UNSTABLE_OFFSET_COMMIT))


def settled(broker: BrokerProcess, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The partitions' committed offsets once no transaction has one
    pending (``require_stable`` answers without error)."""

    def stable() -> dict[tuple[str, int], tuple[int, int]] | None:
        answer = fetch(broker, group, partitions)
        return answer if all(code == NONE for _, code in answer.values()) else None

    answer = wait_for(stable, "the transactions' markers")
    return {tp: offset for tp, (offset, _) in answer.items() if offset >= 0}


def commit_and_abort_scenario(broker: Any, topic: str) -> None:
    """kclient's transactional producer sends a member's offsets: pending
    until the commit, dropped by an abort; a stale generation is refused
    (CommitFailedError, KIP-447) and the transaction aborted."""
    partitions = ensure_topic(broker, topic)
    group = f"g-{topic}"
    offsets = {tp: 5 + tp[1] for tp in partitions}
    with member(broker, group, topic) as consumer, kclient_producer(broker, f"tx-{topic}") as producer:
        metadata = consumer.group_metadata()
        assert metadata.generation_id >= 0 and metadata.member_id
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({(topic, 0): 1}, metadata, 30_000)
        pending_everywhere(broker, group, [(topic, 0)])
        producer.abort_transaction(30_000)
        assert settled(broker, group, partitions) == {}
        producer.begin_transaction()
        producer.send_offsets_to_transaction(offsets, metadata, 30_000)
        pending_everywhere(broker, group, partitions)
        assert committed(broker, group) == {}
        producer.commit_transaction(30_000)
        assert settled(broker, group, partitions) == offsets
        assert committed(broker, group) == offsets
        producer.begin_transaction()
        stale = ConsumerGroupMetadata(group, metadata.generation_id + 1, metadata.member_id)
        with pytest.raises(kclient.CommitFailedError):
            producer.send_offsets_to_transaction({(topic, 0): 99}, stale, 30_000)
        producer.abort_transaction(30_000)
        assert settled(broker, group, partitions) == offsets


def test_kclient_offsets_are_pending_until_the_commit_and_dropped_by_an_abort(txo_broker, topic):
    commit_and_abort_scenario(txo_broker, topic)


@pytest.mark.apache_kafka
def test_apache_kafka_4_answers_the_same(topic):
    """The same scenario against Apache Kafka 4 (KRaft): the pending
    offsets answer UNSTABLE_OFFSET_COMMIT there too."""
    with group_kafka(PARTITIONS, **{"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}) as kafka:
        commit_and_abort_scenario(kafka, topic)


def test_confluent_kafka_offsets_commit_with_the_transaction(txo_broker, topic):
    partitions = ensure_topic(txo_broker, topic)
    group = f"g-{topic}"
    consumer = ck.Consumer({"bootstrap.servers": txo_broker.bootstrap, "group.id": group, "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: (consumer.poll(0.1), consumer.assignment())[1], "an assignment")
        producer = ck.Producer({"bootstrap.servers": txo_broker.bootstrap, "transactional.id": f"tx-{topic}"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([ck.TopicPartition(topic, 1, 100)], consumer.consumer_group_metadata(), 30)
        pending_everywhere(txo_broker, group, [(topic, 1)])
        producer.abort_transaction(30)
        assert settled(txo_broker, group, partitions) == {}
        producer.begin_transaction()
        producer.send_offsets_to_transaction([ck.TopicPartition(topic, p, 7 + p) for _, p in partitions], consumer.consumer_group_metadata(), 30)
        pending_everywhere(txo_broker, group, partitions)
        producer.commit_transaction(30)
        assert settled(txo_broker, group, partitions) == {tp: 7 + tp[1] for tp in partitions}
    finally:
        consumer.close()


def txn_offset_commit(broker: BrokerProcess, group: str, topic: str, *, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
    """A TxnOffsetCommit v3 of ``topic``-0 (no transaction behind it: only
    refused ones are sent); its error code."""
    body = TxnOffsetCommitRequest(
        transactional_id="no-such-txn",
        group_id=group,
        producer_id=1,
        producer_epoch=0,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        topics=[TxnOffsetCommitRequestTopic(name=topic, partitions=[TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=3)])],
    )
    answer = request(broker, TXN_OFFSET_COMMIT, body, 3)
    return int(answer.topics[0].partitions[0].error_code)


def test_the_consumers_group_metadata_is_checked_as_kafka_does(txo_broker, topic):
    """KIP-447: a zombie's stale metadata is refused (Kafka 4's
    ``ClassicGroup.validateOffsetCommit`` for a transactional commit)."""
    ensure_topic(txo_broker, topic)
    group = f"g-{topic}"
    with member(txo_broker, group, topic, **{"group.instance.id": "instance-1"}) as consumer:
        md = consumer.group_metadata()
        assert md.group_instance_id == "instance-1"
        cases = {
            "another member id for the instance id": (dict(generation_id=md.generation_id, member_id="zombie", group_instance_id="instance-1"), FENCED_INSTANCE_ID),
            "an older generation": (dict(generation_id=md.generation_id - 1, member_id=md.member_id, group_instance_id="instance-1"), ILLEGAL_GENERATION),
            "an unknown member": (dict(generation_id=md.generation_id, member_id="nobody", group_instance_id=None), UNKNOWN_MEMBER_ID),
            "an unknown instance id": (dict(generation_id=md.generation_id, member_id=md.member_id, group_instance_id="instance-2"), UNKNOWN_MEMBER_ID),
        }
        got = {name: txn_offset_commit(txo_broker, group, topic, **kw) for name, (kw, _) in cases.items()}
        assert got == {name: code for name, (_, code) in cases.items()}
        gone = txn_offset_commit(txo_broker, group, f"{topic}-missing", generation_id=md.generation_id, member_id=md.member_id, group_instance_id="instance-1")
        assert gone == UNKNOWN_TOPIC_OR_PARTITION
    assert committed(txo_broker, group) == {}


def test_a_consumer_protocol_member_commits_in_a_transaction(txo_broker, topic):
    """A member of a consumer group (KIP-848) sends its offsets (its
    member epoch as the generation) with the transaction; another epoch is
    ILLEGAL_GENERATION (CommitFailedError), as Kafka 4 answers."""
    partitions = ensure_topic(txo_broker, topic)
    group = f"g-{topic}"
    with member(txo_broker, group, topic, **{"group.protocol": "consumer"}) as consumer, kclient_producer(txo_broker, f"tx-{topic}") as producer:
        metadata = consumer.group_metadata()
        assert metadata.generation_id > 0 and metadata.member_id
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({(topic, 2): 12}, metadata, 30_000)
        pending_everywhere(txo_broker, group, [(topic, 2)])
        producer.commit_transaction(30_000)
        assert settled(txo_broker, group, partitions) == {(topic, 2): 12}
        producer.begin_transaction()
        with pytest.raises(kclient.CommitFailedError):  # ILLEGAL_GENERATION, as Kafka 4 answers
            producer.send_offsets_to_transaction({(topic, 2): 99}, ConsumerGroupMetadata(group, metadata.generation_id + 5, metadata.member_id), 30_000)
        producer.abort_transaction(30_000)
        assert settled(txo_broker, group, partitions) == {(topic, 2): 12}


def test_a_sigkilled_broker_reloads_committed_drops_aborted_and_keeps_pending(txo_broker, topic):
    """After a SIGKILL the offsets partition is read again: a committed
    transaction's offsets are back, an aborted one's are not, a later plain
    commit beats an earlier transactional one (Kafka's rule: the later by
    log offset wins), and an open transaction's offsets stay pending until
    its producer commits it after the restart."""
    partitions = ensure_topic(txo_broker, topic)
    done, ordered, open_group = f"done-{topic}", f"ordered-{topic}", f"open-{topic}"
    with kclient_producer(txo_broker, f"tx-a-{topic}") as p:
        p.init_transactions(30_000)
        p.begin_transaction()
        p.send_offsets_to_transaction({(topic, 0): 10}, ConsumerGroupMetadata(done), 30_000)
        p.commit_transaction(30_000)
        p.begin_transaction()
        p.send_offsets_to_transaction({(topic, 1): 20}, ConsumerGroupMetadata(done), 30_000)
        p.abort_transaction(30_000)
        p.begin_transaction()
        p.send_offsets_to_transaction({(topic, 0): 40}, ConsumerGroupMetadata(ordered), 30_000)
        with kclient.AdminClient({"bootstrap.servers": txo_broker.bootstrap}) as admin:
            admin.alter_consumer_group_offsets(ordered, {(topic, 0): 50})
        p.commit_transaction(30_000)
    assert settled(txo_broker, done, partitions) == {(topic, 0): 10}
    assert settled(txo_broker, ordered, partitions) == {(topic, 0): 50}
    with kclient_producer(txo_broker, f"tx-b-{topic}") as q:
        q.init_transactions(30_000)
        q.begin_transaction()
        q.send_offsets_to_transaction({(topic, 2): 30}, ConsumerGroupMetadata(open_group), 30_000)
        pending_everywhere(txo_broker, open_group, [(topic, 2)])
        txo_broker.kill()
        txo_broker.start()
        assert settled(txo_broker, done, partitions) == {(topic, 0): 10}
        assert settled(txo_broker, ordered, partitions) == {(topic, 0): 50}
        pending_everywhere(txo_broker, open_group, [(topic, 2)])
        q.commit_transaction(30_000)
        assert settled(txo_broker, open_group, partitions) == {(topic, 2): 30}


@pytest.mark.unit
def test_the_later_of_a_plain_and_a_transactional_commit_wins():
    """Kafka's rule when a COMMIT marker lands: a transaction's offset
    replaces the committed one unless that one's record is later."""
    from kclient.broker.group.records import OffsetAndMetadata
    from kclient.broker.group.txn_offsets import PendingTxnOffsets, apply_committed

    pending = PendingTxnOffsets()
    pending.add(7, "g", {("t", 0): (OffsetAndMetadata(offset=40), 10), ("t", 1): (OffsetAndMetadata(offset=41), 11)})
    pending.add(8, "h", {("t", 0): (OffsetAndMetadata(offset=1), 12)})
    assert pending.is_pending("g", ("t", 0)) and not pending.is_pending("g", ("t", 2)) and pending.has_group("h")
    committed = {("t", 0): OffsetAndMetadata(offset=50)}
    positions = {("t", 0): 15}
    done = pending.complete(7, lambda g: g == "g")
    apply_committed(committed, positions, done["g"])
    assert {tp: c.offset for tp, c in committed.items()} == {("t", 0): 50, ("t", 1): 41}
    assert positions == {("t", 0): 15, ("t", 1): 11}
    assert not pending.is_pending("g", ("t", 0)) and pending.complete(7, lambda g: True) == {}
    pending.drop_groups(lambda g: g == "h")
    assert pending.by_producer == {}
