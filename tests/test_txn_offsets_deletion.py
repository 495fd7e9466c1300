"""Pending transactional offsets (TxnOffsetCommit, KIP-98/KIP-447) against
OffsetDelete, DeleteGroups and offset expiry on the bundled broker, as
Kafka 4's group coordinator treats them (issue 29;
``OffsetMetadataManager``): OffsetDelete and DeleteGroups tombstone the
pending offsets too, so the transaction's COMMIT does not bring them back;
expiry spares a partition with a pending offset and keeps a group with
one. Each scenario runs against Apache Kafka 4 too, with the same
answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
from helpers.groups import group_kafka
from helpers.wait import retry, wait_for, wait_for_async
from test_txn_offsets_broker import PARTITIONS, PROPERTIES, committed, ensure_topic, fetch, kclient_producer, request

import kclient
from kclient.broker.components import BrokerComponents
from kclient.broker.group.records import OFFSETS_TOPIC, OffsetAndMetadata
from kclient.client.consumer.poll.types import ConsumerGroupMetadata
from kclient.config import BrokerConfig
from kclient.errors import COORDINATOR_LOAD_IN_PROGRESS, NONE, NOT_COORDINATOR, REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION, UNSTABLE_OFFSET_COMMIT
from kclient.protocol.messages.find_coordinator import COORDINATOR_GROUP, FIND_COORDINATOR, FindCoordinatorRequest
from kclient.protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from kclient.protocol.messages.offset_commit import OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kclient.protocol.messages.offset_delete import OFFSET_DELETE, OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic
from kclient.testing import BrokerProcess

#: Expiry checked often, so that offsets committed with a 1 ms retention
#: (OffsetCommit v2) expire at once.
EXPIRY = {"offsets.retention.check.interval.ms": 100}
KAFKA_EXTRA = {"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1, **EXPIRY}
#: Coordinator answers retried while a new topic or coordinator settles.
SETTLING = (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION)


@pytest.fixture(scope="module")
def deletion_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(properties={**PROPERTIES, **EXPIRY}, keep_port=True) as proc:
        yield proc


@pytest.fixture(scope="module")
def kafka4() -> Iterator[Any]:
    with group_kafka(PARTITIONS, **KAFKA_EXTRA) as kafka:
        yield kafka


@pytest.fixture(params=["bundled", pytest.param("kafka4", marks=pytest.mark.apache_kafka)])
def broker(request: pytest.FixtureRequest) -> Any:
    """The bundled broker, then Apache Kafka 4."""
    return request.getfixturevalue("deletion_broker" if request.param == "bundled" else "kafka4")


def commit_with_retention(broker: Any, group: str, offsets: dict[tuple[str, int], int], retention_ms: int = -1) -> None:
    """A plain OffsetCommit v2 (simple group: generation -1, no member)
    with ``retention_ms`` (-1: the broker's)."""
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (t, p), offset in offsets.items():
        topics.setdefault(t, []).append(OffsetCommitRequestPartition(partition_index=p, committed_offset=offset))
    body = OffsetCommitRequest(group_id=group, retention_time_ms=retention_ms, topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])

    def codes(answer: Any) -> set[int]:
        return {p.error_code for t in answer.topics for p in t.partitions}

    found = retry(lambda: request(broker, FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=COORDINATOR_GROUP), 1), lambda a: a.error_code == NONE, "FindCoordinator")
    assert found.node_id >= 0  # creates the offsets topic on first use
    answer = retry(lambda: request(broker, OFFSET_COMMIT, body, 2), lambda a: not codes(a) & set(SETTLING), "OffsetCommit")
    assert codes(answer) == {NONE}


def offset_delete(broker: Any, group: str, partitions: list[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
    """OffsetDelete v0: ``(group error, {partition: error})``."""
    topics: dict[str, list[OffsetDeleteRequestPartition]] = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(OffsetDeleteRequestPartition(partition_index=p))
    body = OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])
    answer = request(broker, OFFSET_DELETE, body, 0)
    return answer.error_code, {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}


def listed(broker: Any, group: str) -> bool:
    with kclient.AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        return any(g.group_id == group for g in admin.list_consumer_groups())


def stable_fetch(broker: Any, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    return fetch(broker, group, partitions)


def test_offset_delete_drops_the_pending_offsets_too(broker, topic):
    """OffsetDelete of partitions with a committed and a pending offset
    (and one with only a pending offset): NONE; the transaction's COMMIT
    then brings neither back."""
    partitions = ensure_topic(broker, topic)
    group = f"g-{topic}"
    tp0, tp1 = partitions[0], partitions[1]
    commit_with_retention(broker, group, {tp0: 3})
    with kclient_producer(broker, f"tx-{topic}") as producer:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({tp0: 7, tp1: 8}, ConsumerGroupMetadata(group), 30_000)
        assert stable_fetch(broker, group, [tp0, tp1]) == dict.fromkeys([tp0, tp1], (-1, UNSTABLE_OFFSET_COMMIT))
        assert offset_delete(broker, group, [tp0, tp1]) == (NONE, dict.fromkeys([tp0, tp1], NONE))
        assert stable_fetch(broker, group, [tp0, tp1]) == dict.fromkeys([tp0, tp1], (-1, NONE))
        producer.commit_transaction(30_000)
    assert stable_fetch(broker, group, [tp0, tp1]) == dict.fromkeys([tp0, tp1], (-1, NONE))
    assert committed(broker, group) == {}


def test_delete_groups_deletes_a_group_with_only_pending_offsets(broker, topic):
    """DeleteGroups of a group whose only offsets are a transaction's
    pending ones: deleted (no members), the pending offsets with it; the
    COMMIT leaves the group without offsets."""
    partitions = ensure_topic(broker, topic)
    group = f"g-{topic}"
    with kclient_producer(broker, f"tx-{topic}") as producer:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({partitions[0]: 5}, ConsumerGroupMetadata(group), 30_000)
        assert stable_fetch(broker, group, partitions[:1]) == {partitions[0]: (-1, UNSTABLE_OFFSET_COMMIT)}
        with kclient.AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            assert admin.delete_consumer_groups([group]) == {group: None}
        assert stable_fetch(broker, group, partitions[:1]) == {partitions[0]: (-1, NONE)}
        producer.commit_transaction(30_000)
    assert stable_fetch(broker, group, partitions[:1]) == {partitions[0]: (-1, NONE)}
    assert committed(broker, group) == {}


def test_expiry_spares_a_partition_with_a_pending_offset(broker, topic):
    """Offsets committed with a 1 ms retention expire at the next check,
    except one a transaction has pending: it stays, and so does the group
    (listed); once the transaction aborts it expires too and the group
    goes."""
    partitions = ensure_topic(broker, topic)
    group = f"g-{topic}"
    tp0, tp1 = partitions[0], partitions[1]
    with kclient_producer(broker, f"tx-{topic}") as producer:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({tp0: 7}, ConsumerGroupMetadata(group), 30_000)
        commit_with_retention(broker, group, {tp0: 3, tp1: 4}, retention_ms=1)
        answer = wait_for(lambda: (a := fetch(broker, group, [tp0, tp1], require_stable=False))[tp1][0] == -1 and a, "tp1's offset to expire")
        assert answer[tp0] == (3, NONE), "expired while a transaction has an offset pending"
        assert listed(broker, group)
        producer.abort_transaction(30_000)
    wait_for(lambda: fetch(broker, group, [tp0], require_stable=False)[tp0][0] == -1, "tp0's offset to expire after the abort")
    wait_for(lambda: not listed(broker, group), "the group to go")


def test_a_reloaded_partition_keeps_the_pending_offsets_deleted(deletion_broker, topic):
    """After a SIGKILL the offsets partition is read again: the OffsetDelete
    tombstone written after a pending offset drops it there too (Kafka 4's
    replay), so the transaction's COMMIT after the restart brings nothing
    back."""
    broker = deletion_broker
    partitions = ensure_topic(broker, topic)
    group = f"g-{topic}"
    tp0 = partitions[0]
    with kclient_producer(broker, f"tx-{topic}") as producer:
        producer.init_transactions(30_000)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({tp0: 7}, ConsumerGroupMetadata(group), 30_000)
        assert offset_delete(broker, group, [tp0]) == (NONE, {tp0: NONE})
        broker.kill()
        broker.start()
        assert stable_fetch(broker, group, [tp0]) == {tp0: (-1, NONE)}
        producer.commit_transaction(30_000)
    assert stable_fetch(broker, group, [tp0]) == {tp0: (-1, NONE)}
    assert committed(broker, group) == {}


async def test_a_transactional_append_that_is_not_replicated_is_taken_back(tmp_path):
    """A TxnOffsetCommit whose append times out waiting for the ISR
    (a follower that never fetches) is not left pending: the partition's
    earlier pending offset of the same transaction is back, a partition it
    alone had is not pending (Kafka 4 reverts a failed write)."""
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path / "logs"), "offsets.topic.num.partitions": 1, "offsets.commit.timeout.ms": 300})
    state = BrokerComponents.open(config, advertised_host="127.0.0.1", advertised_port=9)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(state.group_coordinator.run)
            alone = LeaderAndIsrPartitionState(
                topic_name=OFFSETS_TOPIC, partition_index=0, controller_epoch=1, leader=0, leader_epoch=1, isr=[0], partition_epoch=0, replicas=[0, 1], is_new=True
            )
            body = LeaderAndIsrRequest(controller_id=0, controller_epoch=1, ungrouped_partition_states=[alone])
            assert (await state.replica_manager.leader_and_isr(body, 1)).partition_errors[0].error_code == NONE
            manager = state.group_coordinator.manager
            await wait_for_async(lambda: manager.status("g") == NONE, "the group's offsets loaded", timeout=30)
            first = {("t", 0): OffsetAndMetadata(offset=5, commit_timestamp=1)}
            assert await manager.store_txn_offsets("g", 1000, 0, first) == NONE
            # The follower joins the ISR and never fetches: appends time out.
            body.ungrouped_partition_states = [attrs.evolve(alone, leader_epoch=2, isr=[0, 1])]
            await state.replica_manager.leader_and_isr(body, 1)
            later = {("t", 0): OffsetAndMetadata(offset=9, commit_timestamp=2), ("t", 1): OffsetAndMetadata(offset=3, commit_timestamp=2)}
            assert await manager.store_txn_offsets("g", 1000, 0, later) == REQUEST_TIMED_OUT
            assert {tp: v.offset for tp, (v, _) in manager.pending_txn.pending_of(1000, "g").items()} == {("t", 0): 5}
            assert not manager.pending_txn.is_pending("g", ("t", 1))
            nursery.cancel_scope.cancel()
    finally:
        state.close()
