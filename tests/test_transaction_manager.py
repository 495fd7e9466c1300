"""The transactional producer's state machine
(`kclient.client.producer.transactions.TransactionManager`), pure: a fake
clock, no broker. Kafka's transitions, the requests built (bytes derived by
hand from the protocol guide's encoding rules, then decoded back with the
message classes), each error code's classification and the state it leaves,
coordinator re-discovery, retry backoff, KIP-360's epoch bump, KIP-447's
group metadata in TxnOffsetCommit v3, and the ``transactional.id`` config
rules."""

from __future__ import annotations

import struct
from typing import Any

import attrs
import pytest

from kclient.client.consumer.poll.errors import CommitFailedError
from kclient.client.consumer.poll.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from kclient.client.producer.transaction_rules import MAX_EPOCH, VALID_SOURCES, bump_idempotent_epoch
from kclient.client.producer.transactions import (
    ADD_PARTITIONS_RETRY_BACKOFF_MS,
    ErrorAction,
    Priority,
    State,
    TransactionManager,
    TxnRequest,
    error_action,
    resolve_transactional_config,
)
from kclient.errors import (
    ClusterAuthorizationFailedError,
    ConfigError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnsupportedVersionError,
    error_for_code,
)
from kclient.protocol.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN, AddOffsetsToTxnResponse
from kclient.protocol.messages.add_partitions_to_txn import (
    ADD_PARTITIONS_TO_TXN,
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kclient.protocol.messages.end_txn import END_TXN, EndTxnResponse
from kclient.protocol.messages.find_coordinator import FIND_COORDINATOR, FindCoordinatorResponse
from kclient.protocol.messages.init_producer_id import INIT_PRODUCER_ID_FULL, InitProducerIdResponse
from kclient.protocol.messages.txn_offset_commit import (
    TXN_OFFSET_COMMIT,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

pytestmark = pytest.mark.unit

TXN_ID = "tx"
PID = 4000
EPOCH = 7
BACKOFF = 100
S = State


# ------------------------------------------------------------ helpers


@attrs.define
class Clock:
    now: int = 1_000

    def __call__(self) -> int:
        return self.now


def s16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def wire_response(api: Any, version: int, body: Any) -> Any:
    """The response as the sender would decode it off the wire."""
    codec = api.response(version)
    return codec.decode_message(codec.encode(body))


def encode(request: TxnRequest, version: int) -> bytes:
    return bytes(request.api.request(version).encode(request.body))


def decode(request: TxnRequest, version: int) -> Any:
    codec = request.api.request(version)
    return codec.decode_message(codec.encode(request.body))


def find_coordinator_ok(node_id: int = 1) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(node_id=node_id, host=f"b{node_id}", port=9092)


def add_partitions_response(codes: dict[tuple[str, int], int]) -> AddPartitionsToTxnResponse:
    topics: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), code in codes.items():
        topics.setdefault(topic, []).append(AddPartitionsToTxnPartitionResult(partition_index=partition, partition_error_code=code))
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[AddPartitionsToTxnTopicResult(name=t, results_by_partition=p) for t, p in topics.items()]
    )


def txn_offset_commit_response(codes: dict[tuple[str, int], int]) -> TxnOffsetCommitResponse:
    topics: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
    for (topic, partition), code in codes.items():
        topics.setdefault(topic, []).append(TxnOffsetCommitResponsePartition(partition_index=partition, error_code=code))
    return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic(name=t, partitions=p) for t, p in topics.items()])


def take(tm: TransactionManager, api: Any, incomplete: bool = False) -> TxnRequest:
    request = tm.next_request(incomplete)
    assert request is not None, f"expected {api.name}, the queue gave nothing"
    assert request.api is api, f"expected {api.name}, got {request.api.name}"
    return request


def answer(tm: TransactionManager, request: TxnRequest, body: Any, version: int | None = None) -> None:
    tm.handle_response(request, wire_response(request.api, request.max_version if version is None else version, body))


def ready(clock: Clock | None = None, *, epoch_bump_version: int = 4, seen: list[tuple[int, int]] | None = None) -> TransactionManager:
    """A manager in READY: coordinator found, InitProducerId answered."""
    clock = clock or Clock()
    tm = TransactionManager(
        TXN_ID,
        transaction_timeout_ms=30_000,
        retry_backoff_ms=BACKOFF,
        clock=clock,
        on_producer_id=None if seen is None else (lambda p, e: seen.append((p, e))),
    )
    result = tm.init_transactions()
    answer(tm, take(tm, FIND_COORDINATOR), find_coordinator_ok())
    tm.coordinator_ready(epoch_bump_version)
    clock.now += BACKOFF
    answer(tm, take(tm, INIT_PRODUCER_ID_FULL), InitProducerIdResponse(producer_id=PID, producer_epoch=EPOCH))
    result.acknowledge()
    assert tm.state is S.READY
    return tm


def in_txn(clock: Clock | None = None, partitions: tuple[tuple[str, int], ...] = (("t", 0),), **kw: Any) -> TransactionManager:
    """A manager IN_TRANSACTION whose partitions AddPartitionsToTxn added."""
    tm = ready(clock, **kw)
    tm.begin_transaction()
    for tp in partitions:
        tm.maybe_add_partition(tp)
    if partitions:
        answer(tm, take(tm, ADD_PARTITIONS_TO_TXN), add_partitions_response(dict.fromkeys(partitions, 0)))
    return tm


# ------------------------------------------------------------ transitions

#: Kafka's legal transitions, written out independently of the module's table.
LEGAL = {
    (S.READY, S.UNINITIALIZED),
    (S.ABORTABLE_ERROR, S.UNINITIALIZED),
    (S.UNINITIALIZED, S.INITIALIZING),
    (S.ABORTING_TRANSACTION, S.INITIALIZING),
    (S.INITIALIZING, S.READY),
    (S.COMMITTING_TRANSACTION, S.READY),
    (S.ABORTING_TRANSACTION, S.READY),
    (S.READY, S.IN_TRANSACTION),
    (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION),
    (S.IN_TRANSACTION, S.ABORTING_TRANSACTION),
    (S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION),
    (S.IN_TRANSACTION, S.ABORTABLE_ERROR),
    (S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR),
    (S.ABORTABLE_ERROR, S.ABORTABLE_ERROR),
    (S.INITIALIZING, S.ABORTABLE_ERROR),
} | {(source, S.FATAL_ERROR) for source in S}


@pytest.mark.parametrize("source", list(S), ids=lambda s: s.value)
@pytest.mark.parametrize("to_state", list(S), ids=lambda s: s.value)
def test_transition_table(source: State, to_state: State) -> None:
    assert (source in VALID_SOURCES[to_state]) == ((source, to_state) in LEGAL)


def test_illegal_transition_raises_naming_the_states_and_keeps_the_state() -> None:
    tm = TransactionManager(TXN_ID, clock=Clock())
    with pytest.raises(IllegalStateError, match="from state UNINITIALIZED to state IN_TRANSACTION"):
        tm.begin_transaction()
    assert tm.state is S.UNINITIALIZED
    with pytest.raises(IllegalStateError, match="UNINITIALIZED to state COMMITTING_TRANSACTION"):
        tm.commit_transaction()
    with pytest.raises(IllegalStateError, match="UNINITIALIZED to state ABORTING_TRANSACTION"):
        tm.abort_transaction()
    with pytest.raises(IllegalStateError, match="before init_transactions"):
        tm.maybe_add_partition(("t", 0))
    assert tm.state is S.UNINITIALIZED and not tm.has_pending_requests()


def test_illegal_calls_from_ready() -> None:
    tm = ready()
    with pytest.raises(IllegalStateError, match="READY to state INITIALIZING"):
        tm.init_transactions()
    with pytest.raises(IllegalStateError, match="READY to state COMMITTING_TRANSACTION"):
        tm.commit_transaction()
    with pytest.raises(IllegalStateError, match="READY to state ABORTING_TRANSACTION"):
        tm.abort_transaction()
    with pytest.raises(IllegalStateError, match="state READY"):
        tm.maybe_add_partition(TopicPartition("t", 0))
    with pytest.raises(IllegalStateError, match="state READY"):
        tm.send_offsets_to_transaction({("t", 0): 5}, ConsumerGroupMetadata("g"))
    assert tm.state is S.READY


def test_illegal_calls_in_transaction() -> None:
    tm = in_txn()
    with pytest.raises(IllegalStateError, match="IN_TRANSACTION to state IN_TRANSACTION"):
        tm.begin_transaction()
    with pytest.raises(IllegalStateError, match="IN_TRANSACTION to state INITIALIZING"):
        tm.init_transactions()
    assert tm.state is S.IN_TRANSACTION


def test_illegal_calls_while_committing() -> None:
    tm = in_txn()
    tm.commit_transaction()
    with pytest.raises(IllegalStateError, match="commitTransaction"):
        tm.begin_transaction()
    with pytest.raises(IllegalStateError, match="commitTransaction"):
        tm.abort_transaction()
    assert tm.state is S.COMMITTING_TRANSACTION


# ------------------------------------------------------------ the requests and the happy path


def test_init_transactions_finds_the_coordinator_then_inits_the_producer_id() -> None:
    clock = Clock()
    seen: list[tuple[int, int]] = []
    tm = TransactionManager(TXN_ID, transaction_timeout_ms=30_000, retry_backoff_ms=BACKOFF, clock=clock, on_producer_id=lambda p, e: seen.append((p, e)))
    result = tm.init_transactions()
    assert tm.state is S.INITIALIZING and not result.is_completed
    find = take(tm, FIND_COORDINATOR)
    assert find.node is None and find.coordinator_type is None and find.priority is Priority.FIND_COORDINATOR
    # FindCoordinator v1: key (string), key_type int8 = 1 (transaction).
    assert encode(find, 1) == s16(TXN_ID) + b"\x01"
    assert (find.min_version, find.max_version) == (1, 2)
    answer(tm, find, find_coordinator_ok(3))
    assert tm.coordinator(1) is not None and tm.coordinator(1).node_id == 3  # type: ignore[union-attr]
    assert tm.next_request() is None  # the InitProducerId waits its retry backoff
    assert tm.next_retry_ms() == 1_000 + BACKOFF
    clock.now += BACKOFF
    init = take(tm, INIT_PRODUCER_ID_FULL)
    assert init.node is not None and init.node.node_id == 3 and (init.min_version, init.max_version) == (0, 5)
    # v1: transactional_id, transaction_timeout_ms; v3 (flexible): + producer id/epoch -1 and no tags.
    assert encode(init, 1) == s16(TXN_ID) + struct.pack(">i", 30_000)
    assert encode(init, 3) == compact(TXN_ID) + struct.pack(">iqh", 30_000, -1, -1) + b"\x00"
    answer(tm, init, InitProducerIdResponse(producer_id=PID, producer_epoch=EPOCH))
    assert result.is_successful and tm.state is S.READY
    assert (tm.producer_id, tm.producer_epoch) == (PID, EPOCH) and seen == [(PID, EPOCH)]
    result.acknowledge()
    assert result.is_acked


def test_one_request_in_flight_at_a_time() -> None:
    tm = TransactionManager(TXN_ID, clock=Clock())
    tm.init_transactions()
    take(tm, FIND_COORDINATOR)
    with pytest.raises(IllegalStateError, match="in flight"):
        tm.next_request()
    assert tm.has_in_flight_request()


def test_an_answer_to_a_request_not_in_flight_is_fatal() -> None:
    tm = TransactionManager(TXN_ID, clock=Clock())
    tm.init_transactions()
    find = take(tm, FIND_COORDINATOR)
    answer(tm, find, find_coordinator_ok())
    answer(tm, find, find_coordinator_ok())
    assert tm.state is S.FATAL_ERROR


def test_add_partitions_before_the_first_batch() -> None:
    tm = ready()
    tm.begin_transaction()
    for tp in (("t", 1), TopicPartition("t", 0), ("u", 2), ("t", 0)):
        tm.maybe_add_partition(tp)
    assert tm.is_partition_pending_add(("t", 0)) and not tm.is_send_to_partition_allowed(("t", 0))
    add = take(tm, ADD_PARTITIONS_TO_TXN)
    assert add.max_version == 3 and add.priority is Priority.ADD_PARTITIONS_OR_OFFSETS
    # v2: transactional_id, producer_id, producer_epoch, [topic, [partition]]
    expected = s16(TXN_ID) + struct.pack(">qh", PID, EPOCH) + struct.pack(">i", 2)
    expected += s16("t") + struct.pack(">iii", 2, 0, 1) + s16("u") + struct.pack(">ii", 1, 2)
    assert encode(add, 2) == expected
    body = decode(add, 3)
    assert body.v3_and_below_transactional_id == TXN_ID and [t.partitions for t in body.v3_and_below_topics] == [[0, 1], [2]]
    tm.maybe_add_partition(("t", 0))  # pending: not added twice
    answer(tm, add, add_partitions_response({("t", 0): 0, ("t", 1): 0, ("u", 2): 0}))
    assert all(tm.is_send_to_partition_allowed(tp) for tp in (("t", 0), ("t", 1), ("u", 2)))
    assert not tm.has_partitions_to_add() and tm.next_request() is None
    tm.maybe_add_partition(("t", 0))
    assert not tm.has_partitions_to_add()


def test_commit_waits_for_the_batches_then_sends_end_txn() -> None:
    tm = in_txn()
    result = tm.commit_transaction()
    assert tm.state is S.COMMITTING_TRANSACTION
    assert tm.next_request(has_incomplete_batches=True) is None
    end = take(tm, END_TXN)
    assert end.max_version == 4
    # v2: transactional_id, producer_id, producer_epoch, committed
    assert encode(end, 2) == s16(TXN_ID) + struct.pack(">qh?", PID, EPOCH, True)
    answer(tm, end, EndTxnResponse())
    assert result.is_successful and tm.state is S.READY and not tm.is_partition_added(("t", 0))
    with pytest.raises(IllegalStateError, match="must be retried"):
        tm.begin_transaction()  # the application has not seen the commit's outcome
    result.acknowledge()
    tm.begin_transaction()
    assert tm.state is S.IN_TRANSACTION


def test_abort_sends_end_txn_abort() -> None:
    tm = in_txn()
    tm.maybe_add_partition(("t", 9))  # noted, never sent: aborting drops it
    result = tm.abort_transaction()
    end = take(tm, END_TXN)
    assert encode(end, 2) == s16(TXN_ID) + struct.pack(">qh?", PID, EPOCH, False)
    answer(tm, end, EndTxnResponse())
    assert result.is_successful and tm.state is S.READY
    assert tm.next_request() is None


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_of_an_empty_transaction_is_not_sent(commit: bool) -> None:
    tm = in_txn(partitions=())
    result = tm.commit_transaction() if commit else tm.abort_transaction()
    assert tm.next_request() is None
    assert result.is_successful and tm.state is S.READY


def test_send_offsets_to_transaction_kip447() -> None:
    clock = Clock()
    tm = in_txn(clock)
    group = ConsumerGroupMetadata("grp", generation_id=12, member_id="m-1", group_instance_id="i-1")
    offsets = {TopicPartition("in", 1): OffsetAndMetadata(42, "md", 3), ("in", 0): 17}
    result = tm.send_offsets_to_transaction(offsets, group)
    add = take(tm, ADD_OFFSETS_TO_TXN)
    # v2: transactional_id, producer_id, producer_epoch, group_id
    assert encode(add, 2) == s16(TXN_ID) + struct.pack(">qh", PID, EPOCH) + s16("grp")
    answer(tm, add, AddOffsetsToTxnResponse())
    assert not result.is_completed and tm.has_pending_offset_commits()
    find = take(tm, FIND_COORDINATOR)  # the group coordinator is not known yet
    assert encode(find, 1) == s16("grp") + b"\x00"
    answer(tm, find, find_coordinator_ok(2))
    clock.now += BACKOFF
    commit = take(tm, TXN_OFFSET_COMMIT)
    assert commit.node is not None and commit.node.node_id == 2 and (commit.min_version, commit.max_version) == (3, 4)
    # v3 (flexible): txn id, group id, pid, epoch, generation, member id, instance id, topics, tags.
    partitions = struct.pack(">iqi", 0, 17, -1) + compact("") + b"\x00" + struct.pack(">iqi", 1, 42, 3) + compact("md") + b"\x00"
    expected = compact(TXN_ID) + compact("grp") + struct.pack(">qhi", PID, EPOCH, 12) + compact("m-1") + compact("i-1")
    expected += b"\x02" + compact("in") + b"\x03" + partitions + b"\x00" + b"\x00"
    assert encode(commit, 3) == expected
    v2 = decode(commit, 2)  # below v3 the group metadata is not sent
    assert (v2.generation_id, v2.member_id, v2.group_instance_id) == (-1, "", None)
    answer(tm, commit, txn_offset_commit_response({("in", 0): 0, ("in", 1): 0}))
    assert result.is_successful and not tm.has_pending_offset_commits()
    # AddOffsetsToTxn started the transaction: the commit sends EndTxn.
    tm.commit_transaction()
    answer(tm, take(tm, END_TXN), EndTxnResponse())
    assert tm.state is S.READY


def test_txn_offset_commit_without_group_metadata_goes_to_old_brokers() -> None:
    clock = Clock()
    tm = in_txn(clock)
    tm.send_offsets_to_transaction({("in", 0): 1}, ConsumerGroupMetadata("g"))
    answer(tm, take(tm, ADD_OFFSETS_TO_TXN), AddOffsetsToTxnResponse())
    answer(tm, take(tm, FIND_COORDINATOR), find_coordinator_ok())
    clock.now += BACKOFF
    commit = take(tm, TXN_OFFSET_COMMIT)
    assert commit.min_version == 0
    # v0: txn id, group id, pid, epoch, [topic, [partition, offset, metadata]]
    expected = s16(TXN_ID) + s16("g") + struct.pack(">qhi", PID, EPOCH, 1) + s16("in") + struct.pack(">iiq", 1, 0, 1) + s16("")
    assert encode(commit, 0) == expected


def test_txn_offset_commit_retries_the_failed_partitions_and_finds_the_group_coordinator_again() -> None:
    clock = Clock()
    tm = in_txn(clock)
    result = tm.send_offsets_to_transaction({("in", 0): 1, ("in", 1): 2}, ConsumerGroupMetadata("g", 1, "m"))
    answer(tm, take(tm, ADD_OFFSETS_TO_TXN), AddOffsetsToTxnResponse())
    answer(tm, take(tm, FIND_COORDINATOR), find_coordinator_ok(2))
    clock.now += BACKOFF
    commit = take(tm, TXN_OFFSET_COMMIT)
    answer(tm, commit, txn_offset_commit_response({("in", 0): 0, ("in", 1): 16}))  # NOT_COORDINATOR
    assert not result.is_completed and tm.coordinator(0) is None
    find = take(tm, FIND_COORDINATOR)
    assert decode(find, 1).key == "g"
    answer(tm, find, find_coordinator_ok(5))
    assert tm.next_request() is None
    clock.now += BACKOFF
    again = take(tm, TXN_OFFSET_COMMIT)
    assert again.node is not None and again.node.node_id == 5
    answer(tm, again, txn_offset_commit_response({("in", 0): 0, ("in", 1): 14}))  # COORDINATOR_LOAD_IN_PROGRESS: retry
    assert not result.is_completed
    clock.now += BACKOFF
    answer(tm, take(tm, TXN_OFFSET_COMMIT), txn_offset_commit_response({("in", 0): 0, ("in", 1): 0}))
    assert result.is_successful


# ------------------------------------------------------------ error classification

FC, IP, AP, AO, ET, TO = (api.key for api in (FIND_COORDINATOR, INIT_PRODUCER_ID_FULL, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT))
A = ErrorAction

CLASSIFICATION = [
    # FindCoordinator
    (FC, 0, A.NONE), (FC, 15, A.RETRY), (FC, 14, A.RETRY), (FC, 53, A.FATAL), (FC, 30, A.ABORTABLE),
    (FC, 120, A.ABORTABLE), (FC, -1, A.FATAL),
    # InitProducerId
    (IP, 16, A.FIND_COORDINATOR), (IP, 15, A.FIND_COORDINATOR), (IP, 14, A.RETRY), (IP, 51, A.RETRY),
    (IP, 53, A.ABORTABLE), (IP, 31, A.ABORTABLE), (IP, 47, A.FENCED), (IP, 90, A.FENCED), (IP, 120, A.ABORTABLE),
    (IP, 50, A.FATAL), (IP, 35, A.FATAL),
    # AddPartitionsToTxn
    (AP, 16, A.FIND_COORDINATOR), (AP, 15, A.FIND_COORDINATOR), (AP, 51, A.RETRY), (AP, 14, A.RETRY), (AP, 3, A.RETRY),
    (AP, 47, A.FENCED), (AP, 90, A.FENCED), (AP, 53, A.FATAL), (AP, 48, A.FATAL), (AP, 29, A.TOPIC_UNAUTHORIZED),
    (AP, 55, A.PARTITION_FAILED), (AP, 59, A.ABORTABLE_BUMP), (AP, 49, A.ABORTABLE_BUMP), (AP, 120, A.ABORTABLE),
    (AP, 42, A.PARTITION_FAILED),
    # AddOffsetsToTxn
    (AO, 16, A.FIND_COORDINATOR), (AO, 51, A.RETRY), (AO, 47, A.FENCED), (AO, 90, A.FENCED), (AO, 53, A.FATAL),
    (AO, 48, A.FATAL), (AO, 30, A.ABORTABLE), (AO, 59, A.ABORTABLE_BUMP), (AO, 49, A.ABORTABLE_BUMP),
    (AO, 120, A.ABORTABLE), (AO, 42, A.FATAL),
    # EndTxn
    (ET, 16, A.FIND_COORDINATOR), (ET, 15, A.FIND_COORDINATOR), (ET, 51, A.RETRY), (ET, 14, A.RETRY), (ET, 47, A.FENCED),
    (ET, 90, A.FENCED), (ET, 53, A.FATAL), (ET, 48, A.FATAL), (ET, 59, A.ABORTABLE_BUMP), (ET, 49, A.ABORTABLE_BUMP),
    (ET, 120, A.ABORTABLE), (ET, -1, A.FATAL),
    # TxnOffsetCommit
    (TO, 16, A.FIND_COORDINATOR), (TO, 15, A.FIND_COORDINATOR), (TO, 7, A.FIND_COORDINATOR), (TO, 14, A.RETRY),
    (TO, 3, A.RETRY), (TO, 30, A.ABORTABLE), (TO, 82, A.ABORTABLE), (TO, 120, A.ABORTABLE), (TO, 25, A.COMMIT_FAILED),
    (TO, 22, A.COMMIT_FAILED), (TO, 47, A.FENCED), (TO, 90, A.FENCED), (TO, 53, A.FATAL), (TO, 43, A.FATAL),
    (TO, 12, A.FATAL),
]


@pytest.mark.parametrize(("api_key", "code", "action"), CLASSIFICATION)
def test_error_action(api_key: int, code: int, action: ErrorAction) -> None:
    assert error_action(api_key, code) is action


def test_error_action_of_an_api_that_is_not_transactional() -> None:
    with pytest.raises(ValueError, match="not a transactional request"):
        error_action(0, 6)


#: (code, state after, error type) of AddPartitionsToTxn, coordinator able to bump.
ADD_PARTITIONS_OUTCOMES = [
    (90, S.FATAL_ERROR, ProducerFencedError),
    (47, S.FATAL_ERROR, ProducerFencedError),
    (53, S.FATAL_ERROR, TransactionalIdAuthorizationFailedError),
    (48, S.FATAL_ERROR, error_for_code(48)),
    (29, S.ABORTABLE_ERROR, TopicAuthorizationFailedError),
    (55, S.ABORTABLE_ERROR, KafkaError),
    (42, S.ABORTABLE_ERROR, KafkaError),
    (59, S.ABORTABLE_ERROR, error_for_code(59)),
    (49, S.ABORTABLE_ERROR, InvalidProducerIdMappingError),
    (120, S.ABORTABLE_ERROR, TransactionAbortableError),
]


@pytest.mark.parametrize(("code", "state", "error"), ADD_PARTITIONS_OUTCOMES)
def test_add_partitions_error_leaves_state(code: int, state: State, error: type[Exception]) -> None:
    tm = in_txn(partitions=())
    tm.maybe_add_partition(("t", 0))
    add = take(tm, ADD_PARTITIONS_TO_TXN)
    answer(tm, add, add_partitions_response({("t", 0): code}))
    assert tm.state is state
    assert add.result.is_completed and isinstance(add.result.error, error) and isinstance(tm.last_error, error)
    assert not tm.is_send_to_partition_allowed(("t", 0))
    assert tm.epoch_bump_required is (code in (59, 49))


def test_unknown_producer_id_without_epoch_bump_support_is_fatal() -> None:
    tm = in_txn(partitions=(), epoch_bump_version=2)
    tm.maybe_add_partition(("t", 0))
    answer(tm, take(tm, ADD_PARTITIONS_TO_TXN), add_partitions_response({("t", 0): 59}))
    assert tm.state is S.FATAL_ERROR


def test_concurrent_transactions_retries_the_first_add_partitions_sooner() -> None:
    clock = Clock()
    tm = in_txn(clock, partitions=())
    tm.maybe_add_partition(("t", 0))
    add = take(tm, ADD_PARTITIONS_TO_TXN)
    answer(tm, add, add_partitions_response({("t", 0): 51}))
    assert tm.state is S.IN_TRANSACTION and not add.result.is_completed
    assert tm.next_retry_ms() == clock.now + ADD_PARTITIONS_RETRY_BACKOFF_MS
    clock.now += ADD_PARTITIONS_RETRY_BACKOFF_MS - 1
    assert tm.next_request() is None
    clock.now += 1
    again = take(tm, ADD_PARTITIONS_TO_TXN)
    assert again is add and again.is_retry
    answer(tm, again, add_partitions_response({("t", 0): 0}))
    # With a partition in the transaction, CONCURRENT_TRANSACTIONS waits retry.backoff.ms.
    tm.maybe_add_partition(("t", 1))
    add2 = take(tm, ADD_PARTITIONS_TO_TXN)
    answer(tm, add2, add_partitions_response({("t", 1): 51}))
    assert tm.next_retry_ms() == clock.now + BACKOFF


@pytest.mark.parametrize("code", [16, 15])
def test_not_coordinator_finds_the_coordinator_again(code: int) -> None:
    clock = Clock()
    tm = in_txn(clock, partitions=())
    tm.maybe_add_partition(("t", 0))
    add = take(tm, ADD_PARTITIONS_TO_TXN)
    answer(tm, add, add_partitions_response({("t", 0): code}))
    assert tm.coordinator(1) is None and tm.state is S.IN_TRANSACTION
    find = take(tm, FIND_COORDINATOR)  # goes first, without backoff
    assert decode(find, 1).key_type == 1
    answer(tm, find, find_coordinator_ok(4))
    clock.now += BACKOFF
    again = take(tm, ADD_PARTITIONS_TO_TXN)
    assert again.node is not None and again.node.node_id == 4


def test_disconnect_finds_the_coordinator_again_and_retries() -> None:
    clock = Clock()
    tm = in_txn(clock)
    tm.commit_transaction()
    end = take(tm, END_TXN)
    tm.handle_disconnect(end)
    assert tm.coordinator(1) is None
    answer(tm, take(tm, FIND_COORDINATOR), find_coordinator_ok(6))
    assert tm.next_request() is None
    clock.now += BACKOFF
    again = take(tm, END_TXN)
    assert again is end and again.node is not None and again.node.node_id == 6
    answer(tm, again, EndTxnResponse())
    assert tm.state is S.READY


def test_find_coordinator_retriable_error_retries_itself() -> None:
    clock = Clock()
    tm = TransactionManager(TXN_ID, retry_backoff_ms=BACKOFF, clock=clock)
    tm.init_transactions()
    find = take(tm, FIND_COORDINATOR)
    answer(tm, find, FindCoordinatorResponse(error_code=15))
    assert tm.next_request() is None
    clock.now += BACKOFF
    assert take(tm, FIND_COORDINATOR) is find


@pytest.mark.parametrize(("code", "state"), [(53, S.FATAL_ERROR), (30, S.ABORTABLE_ERROR), (120, S.ABORTABLE_ERROR), (-1, S.FATAL_ERROR)])
def test_find_coordinator_errors_while_initializing(code: int, state: State) -> None:
    tm = TransactionManager(TXN_ID, clock=Clock())
    tm.init_transactions()
    find = take(tm, FIND_COORDINATOR)
    answer(tm, find, FindCoordinatorResponse(error_code=code))
    assert tm.state is state and find.result.is_completed and not find.result.is_successful


@pytest.mark.parametrize(
    ("code", "state", "error"),
    [
        (53, S.ABORTABLE_ERROR, TransactionalIdAuthorizationFailedError),
        (31, S.ABORTABLE_ERROR, ClusterAuthorizationFailedError),
        (90, S.FATAL_ERROR, ProducerFencedError),
        (47, S.FATAL_ERROR, ProducerFencedError),
        (120, S.ABORTABLE_ERROR, TransactionAbortableError),
        (50, S.FATAL_ERROR, error_for_code(50)),
    ],
)
def test_init_producer_id_errors(code: int, state: State, error: type[Exception]) -> None:
    clock = Clock()
    tm = TransactionManager(TXN_ID, retry_backoff_ms=BACKOFF, clock=clock)
    result = tm.init_transactions()
    answer(tm, take(tm, FIND_COORDINATOR), find_coordinator_ok())
    clock.now += BACKOFF
    answer(tm, take(tm, INIT_PRODUCER_ID_FULL), InitProducerIdResponse(error_code=code))
    assert tm.state is state and isinstance(result.error, error)
    with pytest.raises(error):
        result.acknowledge()


def test_init_producer_id_retries_concurrent_transactions() -> None:
    clock = Clock()
    tm = TransactionManager(TXN_ID, retry_backoff_ms=BACKOFF, clock=clock)
    result = tm.init_transactions()
    answer(tm, take(tm, FIND_COORDINATOR), find_coordinator_ok())
    clock.now += BACKOFF
    init = take(tm, INIT_PRODUCER_ID_FULL)
    answer(tm, init, InitProducerIdResponse(error_code=51))
    assert tm.state is S.INITIALIZING and tm.next_request() is None
    clock.now += BACKOFF
    answer(tm, take(tm, INIT_PRODUCER_ID_FULL), InitProducerIdResponse(producer_id=1, producer_epoch=0))
    assert result.is_successful


@pytest.mark.parametrize(
    ("code", "state"),
    [(90, S.FATAL_ERROR), (47, S.FATAL_ERROR), (53, S.FATAL_ERROR), (48, S.FATAL_ERROR), (59, S.ABORTABLE_ERROR), (120, S.ABORTABLE_ERROR), (-1, S.FATAL_ERROR)],
)
def test_end_txn_errors(code: int, state: State) -> None:
    tm = in_txn()
    result = tm.commit_transaction()
    answer(tm, take(tm, END_TXN), EndTxnResponse(error_code=code))
    assert tm.state is state and result.is_completed and not result.is_successful
    if code in (90, 47):
        assert isinstance(result.error, ProducerFencedError)


@pytest.mark.parametrize(
    ("code", "state", "error"),
    [
        (25, S.ABORTABLE_ERROR, CommitFailedError),
        (22, S.ABORTABLE_ERROR, CommitFailedError),
        (82, S.ABORTABLE_ERROR, error_for_code(82)),
        (30, S.ABORTABLE_ERROR, error_for_code(30)),
        (90, S.FATAL_ERROR, ProducerFencedError),
        (43, S.FATAL_ERROR, error_for_code(43)),
    ],
)
def test_txn_offset_commit_errors(code: int, state: State, error: type[Exception]) -> None:
    clock = Clock()
    tm = in_txn(clock)
    result = tm.send_offsets_to_transaction({("in", 0): 1}, ConsumerGroupMetadata("g", 3, "m"))
    answer(tm, take(tm, ADD_OFFSETS_TO_TXN), AddOffsetsToTxnResponse())
    answer(tm, take(tm, FIND_COORDINATOR), find_coordinator_ok())
    clock.now += BACKOFF
    answer(tm, take(tm, TXN_OFFSET_COMMIT), txn_offset_commit_response({("in", 0): code}))
    assert tm.state is state and isinstance(result.error, error) and not tm.has_pending_offset_commits()


@pytest.mark.parametrize(("code", "state"), [(90, S.FATAL_ERROR), (30, S.ABORTABLE_ERROR), (48, S.FATAL_ERROR), (49, S.ABORTABLE_ERROR)])
def test_add_offsets_errors(code: int, state: State) -> None:
    tm = in_txn()
    result = tm.send_offsets_to_transaction({("in", 0): 1}, ConsumerGroupMetadata("g"))
    answer(tm, take(tm, ADD_OFFSETS_TO_TXN), AddOffsetsToTxnResponse(error_code=code))
    assert tm.state is state and result.is_completed and not result.is_successful


# ------------------------------------------------------------ error states


@pytest.mark.parametrize(
    "error",
    [ProducerFencedError(), TransactionalIdAuthorizationFailedError(), ClusterAuthorizationFailedError(), UnsupportedVersionError()],
)
def test_fatal_batch_errors(error: KafkaError) -> None:
    tm = in_txn()
    tm.maybe_transition_to_error_state(error)
    assert tm.state is S.FATAL_ERROR and tm.last_error is error
    with pytest.raises(KafkaError):
        tm.abort_transaction()
    with pytest.raises(KafkaError):
        tm.maybe_add_partition(("t", 5))
    assert not tm.is_send_to_partition_allowed(("t", 0))


def test_fenced_producer_raises_producer_fenced_on_every_call() -> None:
    tm = in_txn()
    tm.maybe_transition_to_error_state(ProducerFencedError())
    for call in (tm.begin_transaction, tm.commit_transaction, tm.abort_transaction):
        with pytest.raises(ProducerFencedError, match="fenced"):
            call()


def test_abortable_batch_error_then_abort_with_epoch_bump_kip360() -> None:
    seen: list[tuple[int, int]] = []
    tm = in_txn(seen=seen)
    tm.maybe_transition_to_error_state(RequestTimedOutError("batch expired"))
    assert tm.state is S.ABORTABLE_ERROR and tm.epoch_bump_required
    with pytest.raises(KafkaError, match="ABORTABLE_ERROR"):
        tm.commit_transaction()
    with pytest.raises(KafkaError):
        tm.begin_transaction()
    result = tm.abort_transaction()
    assert tm.state is S.ABORTING_TRANSACTION
    end = take(tm, END_TXN)
    answer(tm, end, EndTxnResponse())
    assert tm.state is S.INITIALIZING and not result.is_completed
    bump = take(tm, INIT_PRODUCER_ID_FULL)
    assert bump.is_epoch_bump and bump.priority is Priority.EPOCH_BUMP and bump.min_version == 3
    assert encode(bump, 3) == compact(TXN_ID) + struct.pack(">iqh", 30_000, PID, EPOCH) + b"\x00"
    answer(tm, bump, InitProducerIdResponse(producer_id=PID, producer_epoch=EPOCH + 1))
    assert result.is_successful and tm.state is S.READY and not tm.epoch_bump_required
    assert seen[-1] == (PID, EPOCH + 1)


@pytest.mark.parametrize(
    "error",
    [KafkaTimeoutError("batch expired"), InvalidProducerEpochError("from a partition leader, KIP-588"), error_for_code(6)(), TransactionAbortableError()],
)
def test_batch_errors_that_make_the_transaction_abortable(error: KafkaError) -> None:
    tm = in_txn()
    tm.maybe_transition_to_error_state(error)
    assert tm.state is S.ABORTABLE_ERROR and tm.last_error is error and tm.epoch_bump_required
    assert tm.has_ongoing_transaction()


def test_batch_error_while_committing_is_abortable_without_bump() -> None:
    tm = in_txn()
    result = tm.commit_transaction()
    tm.maybe_transition_to_error_state(KafkaTimeoutError("batch expired"))
    assert tm.state is S.ABORTABLE_ERROR and not tm.epoch_bump_required
    assert tm.next_request() is None and isinstance(result.error, KafkaTimeoutError)
    with pytest.raises(KafkaTimeoutError):
        result.acknowledge()  # the application sees the commit fail
    result_abort = tm.abort_transaction()
    answer(tm, take(tm, END_TXN), EndTxnResponse())
    assert result_abort.is_successful and tm.state is S.READY


def test_an_abortable_error_outside_a_transaction_poisons_the_manager() -> None:
    tm = ready()
    with pytest.raises(IllegalStateError, match="READY to state ABORTABLE_ERROR"):
        tm.maybe_transition_to_error_state(KafkaTimeoutError())
    assert tm.state is S.FATAL_ERROR
    with pytest.raises(IllegalStateError, match="invalid state transition"):
        tm.begin_transaction()


def test_idempotent_epoch_bump_kip360() -> None:
    assert bump_idempotent_epoch(9, 0) == (9, 1)
    assert bump_idempotent_epoch(9, MAX_EPOCH - 1) == (9, MAX_EPOCH)
    assert bump_idempotent_epoch(9, MAX_EPOCH) is None
    assert bump_idempotent_epoch(-1, -1) is None


def test_abortable_error_without_epoch_bump_support_aborts_without_bump() -> None:
    tm = in_txn(epoch_bump_version=2)
    tm.maybe_transition_to_error_state(RequestTimedOutError())
    assert tm.state is S.ABORTABLE_ERROR and not tm.epoch_bump_required
    result = tm.abort_transaction()
    answer(tm, take(tm, END_TXN), EndTxnResponse())
    assert result.is_successful and tm.state is S.READY and tm.next_request() is None


def test_invalid_producer_id_mapping_skips_end_txn_and_bumps() -> None:
    tm = in_txn(partitions=())
    tm.maybe_add_partition(("t", 0))
    answer(tm, take(tm, ADD_PARTITIONS_TO_TXN), add_partitions_response({("t", 0): 49}))
    assert tm.state is S.ABORTABLE_ERROR and tm.epoch_bump_required
    result = tm.abort_transaction()
    bump = take(tm, INIT_PRODUCER_ID_FULL)
    assert bump.is_epoch_bump
    answer(tm, bump, InitProducerIdResponse(producer_id=PID, producer_epoch=EPOCH + 1))
    assert result.is_successful and tm.state is S.READY


def test_queued_requests_fail_in_an_error_state() -> None:
    tm = in_txn()
    result = tm.send_offsets_to_transaction({("in", 0): 1}, ConsumerGroupMetadata("g"))
    tm.maybe_transition_to_error_state(KafkaError("a partition failed"))
    assert tm.next_request() is None
    assert result.is_completed and isinstance(result.error, KafkaError) and not tm.has_pending_requests()


def test_error_while_aborting_is_ignored() -> None:
    tm = in_txn()
    tm.abort_transaction()
    tm.maybe_transition_to_error_state(RequestTimedOutError())
    assert tm.state is S.ABORTING_TRANSACTION and not tm.epoch_bump_required


def test_unsupported_version_when_sending_is_fatal() -> None:
    tm = TransactionManager(TXN_ID, clock=Clock())
    result = tm.init_transactions()
    find = take(tm, FIND_COORDINATOR)
    tm.handle_send_failure(find, UnsupportedVersionError("FindCoordinator v1"))
    assert tm.state is S.FATAL_ERROR and result.is_completed


def test_fail_pending_requests_and_close() -> None:
    tm = in_txn()
    result = tm.send_offsets_to_transaction({("in", 0): 1}, ConsumerGroupMetadata("g"))
    tm.fail_pending_requests(RequestTimedOutError("expired"))
    assert tm.state is S.ABORTABLE_ERROR and isinstance(result.error, RequestTimedOutError)
    tm2 = in_txn()
    pending = tm2.commit_transaction()
    tm2.close()
    assert tm2.state is S.FATAL_ERROR and pending.is_completed and not pending.is_successful


# ------------------------------------------------------------ timed-out calls


def test_a_timed_out_call_returns_the_same_result_when_retried() -> None:
    tm = in_txn()
    first = tm.commit_transaction()
    assert tm.commit_transaction() is first  # the application's wait timed out; it calls again
    with pytest.raises(IllegalStateError, match="timed out and must be retried"):
        tm.abort_transaction()
    answer(tm, take(tm, END_TXN), EndTxnResponse())
    first.acknowledge()
    tm.begin_transaction()
    assert tm.state is S.IN_TRANSACTION


def test_acknowledge_before_completion_raises() -> None:
    tm = TransactionManager(TXN_ID, clock=Clock())
    result = tm.init_transactions()
    with pytest.raises(IllegalStateError, match="has not completed"):
        result.acknowledge()
    calls: list[bool] = []
    result.on_complete.append(lambda r: calls.append(r.is_successful))
    result.done()
    result.fail(KafkaError("late"))  # completes once
    assert calls == [True] and result.is_successful


# ------------------------------------------------------------ config


def test_config_transactional_id_implies_idempotence_and_acks_all() -> None:
    cfg = resolve_transactional_config("app-1")
    assert (cfg.enable_idempotence, cfg.acks, cfg.transaction_timeout_ms) == (True, -1, 60_000)
    assert resolve_transactional_config("app-1", 5_000, enable_idempotence=True, acks=-1, retries=3, max_in_flight=5).acks == -1
    plain = resolve_transactional_config(None, acks=1)
    assert (plain.transactional_id, plain.enable_idempotence, plain.acks) == (None, False, 1)


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"enable_idempotence": False}, ("transactional.id", "enable.idempotence")),
        ({"acks": 1}, ("transactional.id", "acks")),
        ({"acks": 0}, ("transactional.id", "acks")),
        ({"retries": 0}, ("transactional.id", "retries")),
        ({"max_in_flight": 6}, ("transactional.id", "max.in.flight.requests.per.connection")),
    ],
)
def test_config_conflicts_name_both_properties(kwargs: dict[str, Any], names: tuple[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_transactional_config("app-1", **kwargs)
    assert all(name in str(info.value) for name in names)


@pytest.mark.parametrize(("tid", "timeout", "name"), [("", 1000, "transactional.id"), ("a", 0, "transaction.timeout.ms"), (None, -5, "transaction.timeout.ms")])
def test_config_bad_values(tid: str | None, timeout: int, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        resolve_transactional_config(tid, timeout)


def test_manager_needs_a_transactional_id() -> None:
    with pytest.raises(ConfigError, match="transactional.id"):
        TransactionManager("")
