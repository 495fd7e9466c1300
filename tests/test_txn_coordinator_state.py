"""The transaction coordinator's state (KIP-98), pure: the
``__transaction_state`` record formats byte for byte, the transactional id
-> partition mapping, Kafka's state transitions, and the decisions of
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and timeouts
with the error codes Kafka answers."""

from __future__ import annotations

import itertools
import struct

import pytest
from helpers.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient import errors
from kclient.broker.group.records import partition_for as group_partition_for
from kclient.broker.txn import coordinator as c
from kclient.broker.txn.metadata import (
    MAX_PRODUCER_EPOCH,
    VALID_PREVIOUS_STATES,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    check_transition,
    is_epoch_exhausted,
)
from kclient.broker.txn.partitioner import java_utils_abs, partition_for
from kclient.broker.txn.records import metadata_from_value, record_for, tombstone_for, transit_to_value
from kclient.protocol.messages.transaction_log import (
    TransactionLogKey,
    TransactionLogPartitions,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

pytestmark = pytest.mark.unit

S = TransactionState
ALL_STATES = list(TransactionState)
NOW = 1_700_000_000_000
TXN = "txn-1"


class Ids:
    """A producer id source: 1000, 1001, ..."""

    def __init__(self, first: int = 1000) -> None:
        self.next = first

    def __call__(self) -> int:
        self.next += 1
        return self.next - 1


# --- the id -> partition mapping ---------------------------------------------------


def _java_hash(text: str) -> int:
    """String.hashCode written out as its definition: s[0]*31^(n-1) + ...
    over UTF-16 code units, wrapped to a signed int."""
    units = struct.unpack(f">{len(text.encode('utf-16-be', 'surrogatepass')) // 2}H", text.encode("utf-16-be", "surrogatepass"))
    n = len(units)
    total = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@pytest.mark.parametrize(
    ("text", "java_hash"),
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("\U0001f600", 1772899),  # two UTF-16 units: 0xD83D * 31 + 0xDE00
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
    ],
)
def test_java_string_hash_values(text: str, java_hash: int) -> None:
    assert _java_hash(text) == java_hash


@pytest.mark.parametrize(
    ("text", "partitions", "expected"),
    [
        ("", 50, 0),
        ("a", 50, 97 % 50),
        ("abc", 50, 96354 % 50),
        ("hello", 50, 99162322 % 50),
        ("Aa", 50, 12),
        ("BB", 7, 2112 % 7),
        ("\U0001f600", 50, 1772899 % 50),
        ("polygenelubricants", 50, 0),  # Utils.abs(Integer.MIN_VALUE) == 0
        ("polygenelubricants", 7, 0),
    ],
)
def test_partition_for(text: str, partitions: int, expected: int) -> None:
    assert partition_for(text, partitions) == expected


def test_partition_for_negative_hash_and_default_count() -> None:
    # Java: "my-transactional-id".hashCode() == -959806496; abs() before the modulo.
    assert _java_hash("my-transactional-id") == -959806496
    assert partition_for("my-transactional-id") == 959806496 % 50 == 46
    assert _java_hash("hello world") == 1794106052
    assert partition_for("hello world", 50) == 2


def test_java_utils_abs() -> None:
    assert java_utils_abs(-(2**31)) == 0
    assert java_utils_abs(-5) == 5
    assert java_utils_abs(2**31 - 1) == 2**31 - 1


def test_partition_for_rejects_no_partitions() -> None:
    with pytest.raises(ValueError, match="positive"):
        partition_for("x", 0)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=40), st.integers(1, 200))
def test_partition_for_matches_java_definition(text: str, partitions: int) -> None:
    h = _java_hash(text)
    assert partition_for(text, partitions) == (0 if h == -(2**31) else abs(h)) % partitions


# --- record formats ------------------------------------------------------------------


def test_key_bytes() -> None:
    assert encode_key("txn") == b"\x00\x00" + b"\x00\x03txn"
    assert decode_key(b"\x00\x00\x00\x03txn") == TransactionLogKey(transactional_id="txn")


def test_unknown_key_version_is_skipped_and_short_key_fails() -> None:
    assert decode_key(b"\x00\x01\x00\x03txn") is None
    with pytest.raises(errors.ProtocolError):
        decode_key(b"\x00")
    with pytest.raises(errors.ProtocolError):
        decode_key(b"\x00\x00\x00\x09tx")


def _value(**kw: object) -> TransactionLogValue:
    base: dict[str, object] = {
        "producer_id": 4000,
        "producer_epoch": 3,
        "transaction_timeout_ms": 60000,
        "transaction_status": 1,
        "transaction_partitions": [TransactionLogPartitions(topic="out", partition_ids=[0, 2])],
        "transaction_last_update_timestamp_ms": NOW + 5,
        "transaction_start_timestamp_ms": NOW,
    }
    base.update(kw)
    return TransactionLogValue(**base)  # type: ignore[arg-type]


def test_value_v0_bytes() -> None:
    expected = (
        b"\x00\x00"  # version 0
        + struct.pack(">qhib", 4000, 3, 60000, 1)
        + struct.pack(">i", 1)  # one topic
        + b"\x00\x03out"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">qq", NOW + 5, NOW)
    )
    # Version 0 has no tagged fields: previous/next producer ids are not kept.
    assert encode_value(_value(previous_producer_id=17), 0) == expected
    assert decode_value(expected) == _value()


def test_value_v0_empty_state_has_null_partitions() -> None:
    value = _value(transaction_status=0, transaction_partitions=None, transaction_start_timestamp_ms=-1)
    expected = b"\x00\x00" + struct.pack(">qhib", 4000, 3, 60000, 0) + b"\xff\xff\xff\xff" + struct.pack(">qq", NOW + 5, -1)
    assert encode_value(value, 0) == expected
    assert decode_value(expected) == value


def test_value_v1_bytes_without_tags() -> None:
    expected = (
        b"\x00\x01"
        + struct.pack(">qhib", 4000, 3, 60000, 1)
        + b"\x02"  # compact array: 1 entry + 1
        + b"\x04out"  # compact string: length + 1
        + b"\x03"
        + struct.pack(">ii", 0, 2)
        + b"\x00"  # the entry's tagged fields
        + struct.pack(">qq", NOW + 5, NOW)
        + b"\x00"  # no tagged fields: all at their defaults
    )
    assert encode_value(_value()) == expected
    assert decode_value(expected) == _value()


def test_value_v1_bytes_with_tags() -> None:
    value = _value(transaction_status=0, transaction_partitions=None, previous_producer_id=3999, next_producer_id=4001, client_transaction_version=2)
    expected = (
        b"\x00\x01"
        + struct.pack(">qhib", 4000, 3, 60000, 0)
        + b"\x00"  # null compact array
        + struct.pack(">qq", NOW + 5, NOW)
        + b"\x03"  # three tagged fields, by tag
        + b"\x00\x08"
        + struct.pack(">q", 3999)
        + b"\x01\x08"
        + struct.pack(">q", 4001)
        + b"\x02\x02"
        + struct.pack(">h", 2)
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_value_unknown_tag_is_skipped() -> None:
    body = encode_value(_value())[:-1] + b"\x01\x07\x03abc"
    assert decode_value(body) == _value()


def test_value_tombstone_and_errors() -> None:
    assert decode_value(None) is None
    with pytest.raises(errors.ProtocolError, match="version 2"):
        decode_value(b"\x00\x02" + encode_value(_value())[2:])
    with pytest.raises(errors.ProtocolError):
        decode_value(encode_value(_value())[:-3])
    with pytest.raises(errors.ProtocolError, match="trailing"):
        decode_value(encode_value(_value()) + b"\x00")
    with pytest.raises(errors.ProtocolError):
        decode_value(b"\x00")
    with pytest.raises(ValueError, match="version"):
        encode_value(_value(), 2)
    with pytest.raises(ValueError):
        encode_value(_value(producer_epoch=1 << 20))


_partitions = st.lists(
    st.builds(TransactionLogPartitions, topic=st.text(max_size=10), partition_ids=st.lists(st.integers(0, 2**31 - 1), max_size=4)),
    max_size=4,
)
_values = st.builds(
    TransactionLogValue,
    producer_id=st.integers(-1, 2**63 - 1),
    previous_producer_id=st.integers(-1, 2**63 - 1),
    next_producer_id=st.integers(-1, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15 - 1),
    transaction_timeout_ms=st.integers(0, 2**31 - 1),
    transaction_status=st.integers(0, 7),
    transaction_partitions=st.none() | _partitions,
    transaction_last_update_timestamp_ms=st.integers(-1, 2**62),
    transaction_start_timestamp_ms=st.integers(-1, 2**62),
    client_transaction_version=st.integers(0, 3),
)


@settings(max_examples=examples(300), deadline=None)
@given(_values)
def test_value_round_trip_v1(value: TransactionLogValue) -> None:
    assert decode_value(encode_value(value)) == value


@settings(max_examples=examples(200), deadline=None)
@given(_values)
def test_value_round_trip_v0_drops_tagged_fields(value: TransactionLogValue) -> None:
    decoded = decode_value(encode_value(value, 0))
    assert decoded is not None
    assert decoded.previous_producer_id == decoded.next_producer_id == -1
    assert decoded.client_transaction_version == 0
    value.previous_producer_id = value.next_producer_id = -1
    value.client_transaction_version = 0
    assert decoded == value


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=60))
def test_key_round_trip(transactional_id: str) -> None:
    assert decode_key(encode_key(transactional_id)) == TransactionLogKey(transactional_id=transactional_id)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=80), st.integers(0, 1))
def test_value_decode_of_any_bytes_fails_cleanly(tail: bytes, version: int) -> None:
    """Garbage after a valid version decodes or raises ProtocolError, nothing else."""
    try:
        decode_value(struct.pack(">h", version) + tail)
    except errors.ProtocolError:
        pass


@settings(max_examples=examples(200), deadline=None)
@given(_values, st.data())
def test_value_truncated_anywhere_fails_cleanly(value: TransactionLogValue, data: st.DataObject) -> None:
    raw = encode_value(value)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(errors.ProtocolError):
        decode_value(raw[:cut])


# --- state transitions ---------------------------------------------------------------

#: Kafka's table, written out: target -> previous states.
KAFKA_TRANSITIONS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_state_ids_and_names() -> None:
    names = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert [(int(s), s.kafka_name) for s in ALL_STATES] == list(enumerate(names))
    for s in ALL_STATES:
        assert TransactionState.from_kafka_name(s.kafka_name) is s
        assert TransactionState.from_id(int(s)) is s
    with pytest.raises(IllegalTransitionError, match="unknown transaction state id 8"):
        TransactionState.from_id(8)
    with pytest.raises(ValueError):
        TransactionState.from_kafka_name("Completed")


@pytest.mark.parametrize(("current", "new_state"), list(itertools.product(ALL_STATES, ALL_STATES)))
def test_every_transition(current: TransactionState, new_state: TransactionState) -> None:
    assert VALID_PREVIOUS_STATES[new_state] == KAFKA_TRANSITIONS[new_state]
    if current in KAFKA_TRANSITIONS[new_state]:
        check_transition(current, new_state)
    else:
        with pytest.raises(IllegalTransitionError, match=f"{current.kafka_name} may not go to {new_state.kafka_name}"):
            check_transition(current, new_state, TXN)


def _md(state: TransactionState = S.EMPTY, *, epoch: int = 0, partitions: set[tuple[str, int]] | None = None, **kw: object) -> TransactionMetadata:
    if partitions is None:
        partitions = {("out", 0)} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else set()
    start = NOW - 10 if state not in (S.EMPTY,) else -1
    args: dict[str, object] = {"producer_epoch": epoch, "state": state, "topic_partitions": set(partitions), "txn_start_timestamp": start, "txn_last_update_timestamp": NOW - 10}
    args.update(kw)
    return TransactionMetadata(TXN, 1000, **args)  # type: ignore[arg-type]


#: Each prepare method and the state it prepares.
PREPARES = {
    "fence": (lambda md: md.prepare_fence_producer_epoch(), S.PREPARE_EPOCH_FENCE),
    "increment": (lambda md: md.prepare_increment_producer_epoch(60000, None, NOW), S.EMPTY),
    "rotation": (lambda md: md.prepare_producer_id_rotation(2000, 60000, NOW, False), S.EMPTY),
    "add": (lambda md: md.prepare_add_partitions({("out", 1)}, NOW), S.ONGOING),
    "commit": (lambda md: md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW), S.PREPARE_COMMIT),
    "abort": (lambda md: md.prepare_abort_or_commit(S.PREPARE_ABORT, NOW), S.PREPARE_ABORT),
    "dead": (lambda md: md.prepare_dead(), S.DEAD),
}


@pytest.mark.parametrize(("name", "state"), list(itertools.product(PREPARES, ALL_STATES)))
def test_every_prepare_from_every_state(name: str, state: TransactionState) -> None:
    prepare, target = PREPARES[name]
    md = _md(state)
    legal = state in KAFKA_TRANSITIONS[target] and not (name == "rotation" and state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT))
    if not legal:
        with pytest.raises(IllegalTransitionError):
            prepare(md)
        assert md.pending_state is None
        return
    transit = prepare(md)
    assert transit.txn_state == target
    assert md.pending_state == target
    assert md.state == state  # nothing applied before the write
    with pytest.raises(IllegalTransitionError, match="pending"):
        prepare(md)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_prepare_complete(state: TransactionState) -> None:
    md = _md(state, epoch=4, last_producer_epoch=3, has_failed_epoch_fence=True)
    transit = md.prepare_complete(NOW)
    assert transit.txn_state == (S.COMPLETE_COMMIT if state == S.PREPARE_COMMIT else S.COMPLETE_ABORT)
    assert transit.topic_partitions == frozenset()
    assert transit.last_producer_epoch == 4
    assert not md.has_failed_epoch_fence
    md.complete_transition_to(transit)
    assert md.state == transit.txn_state and md.topic_partitions == set() and md.txn_last_update_timestamp == NOW


@pytest.mark.parametrize("state", [s for s in ALL_STATES if s not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)])
def test_prepare_complete_only_after_prepare(state: TransactionState) -> None:
    with pytest.raises(IllegalTransitionError):
        _md(state).prepare_complete(NOW)


def test_full_lifecycle_applies_each_write() -> None:
    md = TransactionMetadata(TXN, 1000, txn_timeout_ms=60000, txn_last_update_timestamp=NOW)
    steps = [
        lambda: md.prepare_increment_producer_epoch(60000, None, NOW),
        lambda: md.prepare_add_partitions({("out", 0), ("out", 1)}, NOW + 1),
        lambda: md.prepare_add_partitions({("log", 0)}, NOW + 2),
        lambda: md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW + 3),
        lambda: md.prepare_complete(NOW + 4),
        lambda: md.prepare_add_partitions({("out", 0)}, NOW + 5),
    ]
    states = []
    for step in steps:
        md.complete_transition_to(step())
        states.append((md.state, md.producer_epoch, len(md.topic_partitions), md.txn_start_timestamp))
    assert states == [
        (S.EMPTY, 0, 0, -1),
        (S.ONGOING, 0, 2, NOW + 1),
        (S.ONGOING, 0, 3, NOW + 1),
        (S.PREPARE_COMMIT, 0, 3, NOW + 1),
        (S.COMPLETE_COMMIT, 0, 0, NOW + 1),
        (S.ONGOING, 0, 1, NOW + 5),  # a new transaction starts now
    ]


def test_complete_transition_checks() -> None:
    md = _md(S.ONGOING)
    with pytest.raises(IllegalTransitionError, match="none is pending"):
        md.complete_transition_to(md.prepare_no_transit())
    transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    with pytest.raises(IllegalTransitionError, match="unexpected metadata"):
        md.complete_transition_to(md.prepare_no_transit())  # not the pending state
    md.producer_epoch = 7  # the metadata changed under the write
    with pytest.raises(IllegalTransitionError, match="unexpected metadata"):
        md.complete_transition_to(transit)
    md.producer_epoch = 0
    md.complete_transition_to(transit)
    assert md.state == S.PREPARE_COMMIT and md.pending_state is None


def test_fence_is_never_applied_and_dead_never_written() -> None:
    md = _md(S.ONGOING)
    with pytest.raises(IllegalTransitionError):
        md.complete_transition_to(md.prepare_fence_producer_epoch())
    md = _md(S.EMPTY)
    with pytest.raises(IllegalTransitionError):
        md.complete_transition_to(md.prepare_dead())


def test_abort_transition_clears_pending() -> None:
    md = _md(S.ONGOING)
    md.prepare_abort_or_commit(S.PREPARE_ABORT, NOW)
    md.abort_transition()
    assert md.pending_state is None and md.state == S.ONGOING


def test_remove_partition_only_while_completing() -> None:
    md = _md(S.PREPARE_COMMIT, partitions={("a", 0), ("b", 1)})
    md.remove_partition(("a", 0))
    assert md.topic_partitions == {("b", 1)}
    with pytest.raises(IllegalTransitionError):
        _md(S.ONGOING).remove_partition(("out", 0))


def test_epoch_exhaustion_and_overflow_guards() -> None:
    assert not is_epoch_exhausted(MAX_PRODUCER_EPOCH - 2)
    assert is_epoch_exhausted(MAX_PRODUCER_EPOCH - 1)
    with pytest.raises(IllegalTransitionError, match="no producer epoch left"):
        _md(S.EMPTY, epoch=MAX_PRODUCER_EPOCH - 1).prepare_increment_producer_epoch(60000, None, NOW)
    with pytest.raises(IllegalTransitionError, match="overflow"):
        _md(S.ONGOING, epoch=MAX_PRODUCER_EPOCH).prepare_fence_producer_epoch()


def test_increment_epoch_kip360_cases() -> None:
    # New producer: bump, last epoch unknown (the old producer is fenced).
    t = _md(S.EMPTY, epoch=5, last_producer_epoch=4).prepare_increment_producer_epoch(60000, None, NOW)
    assert t is not None and (t.producer_epoch, t.last_producer_epoch) == (6, -1)
    # The current epoch: bump and remember it.
    t = _md(S.EMPTY, epoch=5).prepare_increment_producer_epoch(60000, 5, NOW)
    assert t is not None and (t.producer_epoch, t.last_producer_epoch) == (6, 5)
    # The last epoch: a retry of a bump that succeeded.
    t = _md(S.EMPTY, epoch=6, last_producer_epoch=5).prepare_increment_producer_epoch(60000, 5, NOW)
    assert t is not None and (t.producer_epoch, t.last_producer_epoch) == (6, 5)
    # Any other: fenced, nothing prepared.
    md = _md(S.EMPTY, epoch=6, last_producer_epoch=5)
    assert md.prepare_increment_producer_epoch(60000, 3, NOW) is None
    assert md.pending_state is None


def test_failed_fence_does_not_bump_again() -> None:
    md = _md(S.ONGOING, epoch=3, has_failed_epoch_fence=True)
    assert md.prepare_fence_producer_epoch().producer_epoch == 3


# --- InitProducerId --------------------------------------------------------------------


def _init(md: TransactionMetadata | None, ids: Ids | None = None, **kw: object) -> c.TxnDecision:
    args: dict[str, object] = {"transactional_id": TXN, "transaction_timeout_ms": 60000, "now_ms": NOW, "allocate_producer_id": ids or Ids()}
    args.update(kw)
    return c.init_producer_id(md, **args)  # type: ignore[arg-type]


def _apply(md: TransactionMetadata, decision: c.TxnDecision) -> None:
    assert decision.append is not None
    c.on_append_success(md, decision.append)


def test_init_without_transactional_id_is_idempotent_producer() -> None:
    d = _init(None, Ids(77), transactional_id=None)
    assert (d.error, d.producer_id, d.producer_epoch, d.append) == (errors.NONE, 77, 0, None)


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"transactional_id": ""}, errors.INVALID_REQUEST),
        ({"producer_id": 5}, errors.INVALID_REQUEST),
        ({"producer_epoch": 5}, errors.INVALID_REQUEST),
        ({"transaction_timeout_ms": 0}, errors.INVALID_TRANSACTION_TIMEOUT),
        ({"transaction_timeout_ms": c.DEFAULT_TRANSACTION_MAX_TIMEOUT_MS + 1}, errors.INVALID_TRANSACTION_TIMEOUT),
        ({"transaction_timeout_ms": 2000, "max_timeout_ms": 1000}, errors.INVALID_TRANSACTION_TIMEOUT),
    ],
)
def test_init_request_errors(kw: dict[str, object], error: int) -> None:
    d = _init(None, **kw)
    assert (d.error, d.producer_id, d.producer_epoch, d.append, d.created) == (error, -1, -1, None, None)


def test_init_new_transactional_id() -> None:
    d = _init(None, Ids(500))
    assert d.error == errors.NONE and (d.producer_id, d.producer_epoch) == (500, 0)
    md = d.created
    assert md is not None and md.state == S.EMPTY and md.producer_epoch == -1 and md.txn_timeout_ms == 60000
    assert d.append is not None and d.append.txn_state == S.EMPTY
    _apply(md, d)
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch, md.state) == (500, 0, -1, S.EMPTY)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_init_bumps_epoch_and_fences(state: TransactionState) -> None:
    md = _md(state, epoch=4)
    d = _init(md, transaction_timeout_ms=30000)
    assert (d.error, d.producer_id, d.producer_epoch) == (errors.NONE, 1000, 5)
    _apply(md, d)
    assert (md.producer_epoch, md.last_producer_epoch, md.txn_timeout_ms, md.state) == (5, -1, 30000, S.EMPTY)
    # The old producer, still at epoch 4, is fenced everywhere.
    assert c.add_partitions_to_txn(md, transactional_id=TXN, producer_id=1000, producer_epoch=4, partitions=[("out", 0)], now_ms=NOW).error == errors.PRODUCER_FENCED
    assert c.end_txn(md, transactional_id=TXN, producer_id=1000, producer_epoch=4, committed=True, now_ms=NOW).error == errors.PRODUCER_FENCED


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_completing_is_concurrent(state: TransactionState) -> None:
    md = _md(state)
    assert _init(md).error == errors.CONCURRENT_TRANSACTIONS
    assert md.pending_state is None


def test_init_with_pending_change_is_concurrent() -> None:
    md = _md(S.EMPTY)
    md.prepare_add_partitions({("out", 0)}, NOW)
    assert _init(md).error == errors.CONCURRENT_TRANSACTIONS


def test_init_aborts_ongoing_transaction_first() -> None:
    md = _md(S.ONGOING, epoch=2, partitions={("out", 0), ("out", 1)})
    d = _init(md)
    assert (d.error, d.producer_id, d.producer_epoch) == (errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert d.append is not None and d.append.txn_state == S.PREPARE_ABORT and d.append.producer_epoch == 3
    assert d.result == c.TransactionResult.ABORT and d.epoch_fence
    assert md.producer_epoch == 3  # the fence's epoch is current before the write
    _apply(md, d)
    m = c.begin_markers(md, d, NOW + 1)
    assert m.error == errors.NONE and m.markers is not None
    assert (m.markers.producer_id, m.markers.producer_epoch, m.markers.result) == (1000, 3, c.TransactionResult.ABORT)
    assert m.markers.partitions == {("out", 0), ("out", 1)}
    # The old producer (epoch 2) is fenced; the retry of InitProducerId waits until the abort completes.
    assert c.end_txn(md, transactional_id=TXN, producer_id=1000, producer_epoch=2, committed=True, now_ms=NOW).error == errors.PRODUCER_FENCED
    assert _init(md).error == errors.CONCURRENT_TRANSACTIONS
    c.on_append_success(md, m.markers.complete)
    retry = _init(md)
    assert (retry.error, retry.producer_epoch) == (errors.NONE, 4)


def test_init_failed_fence_write_keeps_epoch_for_next_fence() -> None:
    md = _md(S.ONGOING, epoch=2)
    d = _init(md)
    assert c.on_append_failure(md, d, errors.NOT_ENOUGH_REPLICAS) == errors.COORDINATOR_NOT_AVAILABLE
    assert md.pending_state is None and md.has_failed_epoch_fence and md.producer_epoch == 3
    again = _init(md)
    assert again.append is not None and again.append.producer_epoch == 3


def test_init_epoch_exhausted_rotates_producer_id() -> None:
    md = _md(S.COMPLETE_COMMIT, epoch=MAX_PRODUCER_EPOCH - 1)
    d = _init(md, Ids(9000))
    assert (d.error, d.producer_id, d.producer_epoch) == (errors.NONE, 9000, 0)
    _apply(md, d)
    assert (md.producer_id, md.previous_producer_id, md.producer_epoch, md.last_producer_epoch) == (9000, 1000, 0, -1)


def test_init_kip360_recovery_with_exhausted_epoch_records_last_epoch() -> None:
    md = _md(S.EMPTY, epoch=MAX_PRODUCER_EPOCH - 1)
    d = _init(md, Ids(9000), producer_id=1000, producer_epoch=MAX_PRODUCER_EPOCH - 1)
    assert (d.producer_id, d.producer_epoch) == (9000, 0)
    _apply(md, d)
    assert md.last_producer_epoch == MAX_PRODUCER_EPOCH - 1
    # The response was lost: the retry with the old id and exhausted epoch is recognised (previous producer id).
    # The old producer id with an epoch that is not exhausted is not a retry: fenced.
    assert _init(md, Ids(9500), producer_id=1000, producer_epoch=MAX_PRODUCER_EPOCH - 2).error == errors.PRODUCER_FENCED
    retry = _init(md, Ids(9500), producer_id=1000, producer_epoch=MAX_PRODUCER_EPOCH - 1)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (errors.NONE, 9000, 0)


def test_init_fences_exhausted_epoch_then_rotates() -> None:
    """Kafka's "use last epoch to fence when epochs are exhausted": an
    ongoing transaction at epoch 32766 is fenced at 32767; the retry gets
    a new producer id."""
    md = _md(S.ONGOING, epoch=MAX_PRODUCER_EPOCH - 1, last_producer_epoch=MAX_PRODUCER_EPOCH - 2)
    d = _init(md)
    assert d.error == errors.CONCURRENT_TRANSACTIONS
    assert d.append is not None and (d.append.producer_epoch, d.append.last_producer_epoch, d.append.txn_state) == (MAX_PRODUCER_EPOCH, -1, S.PREPARE_ABORT)
    _apply(md, d)
    m = c.begin_markers(md, d, NOW)
    assert m.markers is not None
    c.on_append_success(md, m.markers.complete)
    retry = _init(md, Ids(7000))
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (errors.NONE, 7000, 0)


def test_init_kip360_recovery() -> None:
    md = _md(S.EMPTY, epoch=5)
    d = _init(md, producer_id=1000, producer_epoch=5)
    assert (d.error, d.producer_id, d.producer_epoch) == (errors.NONE, 1000, 6)
    _apply(md, d)
    assert md.last_producer_epoch == 5
    retry = _init(md, producer_id=1000, producer_epoch=5)  # the answer was lost
    assert (retry.error, retry.producer_epoch) == (errors.NONE, 6)
    _apply(md, retry)
    assert _init(md, producer_id=1000, producer_epoch=3).error == errors.PRODUCER_FENCED
    assert _init(md, producer_id=77, producer_epoch=6).error == errors.PRODUCER_FENCED


def test_init_kip360_on_new_metadata_accepts_any_producer() -> None:
    d = _init(None, Ids(600), producer_id=77, producer_epoch=3)
    assert (d.error, d.producer_id, d.producer_epoch) == (errors.NONE, 600, 0)


def test_init_in_state_never_rested_in_raises() -> None:
    for state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        with pytest.raises(IllegalTransitionError):
            _init(_md(state))


# --- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------------


def _add(md: TransactionMetadata | None, partitions: list[tuple[str, int]], **kw: object) -> c.TxnDecision:
    args: dict[str, object] = {"transactional_id": TXN, "producer_id": 1000, "producer_epoch": 0, "partitions": partitions, "now_ms": NOW}
    args.update(kw)
    return c.add_partitions_to_txn(md, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_add_partitions_starts_transaction(state: TransactionState) -> None:
    md = _md(state)
    d = _add(md, [("out", 0), ("out", 3)])
    assert d.error == errors.NONE and d.append is not None
    assert d.append.txn_state == S.ONGOING and d.append.txn_start_timestamp == NOW
    _apply(md, d)
    assert md.state == S.ONGOING and md.topic_partitions == {("out", 0), ("out", 3)}


def test_add_partitions_to_ongoing() -> None:
    md = _md(S.ONGOING, partitions={("out", 0)})
    assert _add(md, [("out", 0)]) == c.TxnDecision()  # already in: no write
    d = _add(md, [("out", 1)])
    assert d.append is not None and d.append.txn_start_timestamp == NOW - 10
    _apply(md, d)
    assert md.topic_partitions == {("out", 0), ("out", 1)}


@pytest.mark.parametrize(
    ("md", "kw", "error"),
    [
        (None, {}, errors.INVALID_PRODUCER_ID_MAPPING),
        (_md(S.ONGOING), {"transactional_id": ""}, errors.INVALID_REQUEST),
        (_md(S.ONGOING), {"transactional_id": None}, errors.INVALID_REQUEST),
        (_md(S.ONGOING), {"producer_id": 1}, errors.INVALID_PRODUCER_ID_MAPPING),
        (_md(S.ONGOING), {"producer_epoch": 1}, errors.PRODUCER_FENCED),
        (_md(S.PREPARE_COMMIT), {}, errors.CONCURRENT_TRANSACTIONS),
        (_md(S.PREPARE_ABORT), {}, errors.CONCURRENT_TRANSACTIONS),
    ],
)
def test_add_partitions_errors(md: TransactionMetadata | None, kw: dict[str, object], error: int) -> None:
    d = _add(md, [("out", 5)], **kw)
    assert (d.error, d.append) == (error, None)


def test_add_partitions_with_pending_change_is_concurrent() -> None:
    md = _md(S.ONGOING)
    md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    assert _add(md, [("out", 5)]).error == errors.CONCURRENT_TRANSACTIONS


def test_add_offsets_adds_group_partition() -> None:
    md = _md(S.EMPTY)
    d = c.add_offsets_to_txn(md, transactional_id=TXN, producer_id=1000, producer_epoch=0, group_id="my-group", offsets_topic_partitions=50, now_ms=NOW)
    expected = ("__consumer_offsets", group_partition_for("my-group", 50))
    assert c.offsets_partition("my-group", 50) == expected
    assert d.append is not None and d.append.topic_partitions == {expected}
    assert c.add_offsets_to_txn(md, transactional_id=TXN, producer_id=1000, producer_epoch=0, group_id="g", offsets_topic_partitions=50, now_ms=NOW).error == errors.CONCURRENT_TRANSACTIONS
    md.abort_transition()
    assert c.add_offsets_to_txn(md, transactional_id=TXN, producer_id=1000, producer_epoch=9, group_id="g", offsets_topic_partitions=50, now_ms=NOW).error == errors.PRODUCER_FENCED


def test_verify_partitions_in_txn() -> None:
    md = _md(S.ONGOING, partitions={("out", 0)})
    v = c.verify_partitions_in_txn(md, transactional_id=TXN, producer_id=1000, producer_epoch=0, partitions=[("out", 0), ("out", 1)])
    assert v == {("out", 0): errors.NONE, ("out", 1): errors.TRANSACTION_ABORTABLE}
    assert c.verify_partitions_in_txn(md, transactional_id=TXN, producer_id=1000, producer_epoch=1, partitions=[("out", 0)]) == {("out", 0): errors.PRODUCER_FENCED}
    assert c.verify_partitions_in_txn(None, transactional_id=TXN, producer_id=1000, producer_epoch=0, partitions=[("out", 0)]) == {("out", 0): errors.INVALID_PRODUCER_ID_MAPPING}
    assert c.verify_partitions_in_txn(md, transactional_id="", producer_id=1000, producer_epoch=0, partitions=[("out", 0)]) == {("out", 0): errors.INVALID_REQUEST}
    done = _md(S.PREPARE_COMMIT)
    assert c.verify_partitions_in_txn(done, transactional_id=TXN, producer_id=1000, producer_epoch=0, partitions=[("out", 0)]) == {("out", 0): errors.CONCURRENT_TRANSACTIONS}


# --- EndTxn ------------------------------------------------------------------------------


def _end(md: TransactionMetadata | None, committed: bool, **kw: object) -> c.TxnDecision:
    args: dict[str, object] = {"transactional_id": TXN, "producer_id": 1000, "producer_epoch": 0, "committed": committed, "now_ms": NOW}
    args.update(kw)
    return c.end_txn(md, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_full_path(committed: bool) -> None:
    md = _md(S.ONGOING, partitions={("out", 0), ("__consumer_offsets", 7)})
    d = _end(md, committed)
    prepare = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
    assert d.error == errors.NONE and (d.producer_id, d.producer_epoch) == (1000, 0)
    assert d.append is not None and d.append.txn_state == prepare and not d.epoch_fence
    assert d.result == (c.TransactionResult.COMMIT if committed else c.TransactionResult.ABORT)
    # While PrepareX is being written: another EndTxn waits.
    assert _end(md, committed).error == errors.CONCURRENT_TRANSACTIONS
    _apply(md, d)
    m = c.begin_markers(md, d, NOW + 1)
    assert m.error == errors.NONE and m.markers is not None and m.markers.partitions == {("out", 0), ("__consumer_offsets", 7)}
    assert m.append is m.markers.complete
    # Markers are being written: the same outcome retried waits, the other fails.
    assert _end(md, committed).error == errors.CONCURRENT_TRANSACTIONS
    md.remove_partition(("out", 0))
    c.on_append_success(md, m.markers.complete)
    assert md.state == (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)
    retry = _end(md, committed)
    assert (retry.error, retry.producer_id, retry.producer_epoch, retry.append) == (errors.NONE, 1000, 0, None)
    other = _end(md, not committed)
    assert (other.error, other.producer_id, other.producer_epoch) == (errors.INVALID_TXN_STATE, -1, -1)


@pytest.mark.parametrize(
    ("state", "committed", "error"),
    [
        (S.PREPARE_COMMIT, True, errors.CONCURRENT_TRANSACTIONS),
        (S.PREPARE_COMMIT, False, errors.INVALID_TXN_STATE),
        (S.PREPARE_ABORT, False, errors.CONCURRENT_TRANSACTIONS),
        (S.PREPARE_ABORT, True, errors.INVALID_TXN_STATE),
        (S.COMPLETE_COMMIT, True, errors.NONE),
        (S.COMPLETE_COMMIT, False, errors.INVALID_TXN_STATE),
        (S.COMPLETE_ABORT, False, errors.NONE),
        (S.COMPLETE_ABORT, True, errors.INVALID_TXN_STATE),
        (S.EMPTY, True, errors.INVALID_TXN_STATE),
        (S.EMPTY, False, errors.INVALID_TXN_STATE),
    ],
)
def test_end_txn_by_state(state: TransactionState, committed: bool, error: int) -> None:
    d = _end(_md(state), committed)
    assert (d.error, d.append) == (error, None)


@pytest.mark.parametrize(
    ("md", "kw", "error"),
    [
        (None, {}, errors.INVALID_PRODUCER_ID_MAPPING),
        (_md(S.ONGOING), {"transactional_id": ""}, errors.INVALID_REQUEST),
        (_md(S.ONGOING), {"producer_id": 5}, errors.INVALID_PRODUCER_ID_MAPPING),
        (_md(S.ONGOING), {"producer_epoch": 1}, errors.PRODUCER_FENCED),
        (_md(S.ONGOING, epoch=3), {"producer_epoch": 2}, errors.PRODUCER_FENCED),
    ],
)
def test_end_txn_errors(md: TransactionMetadata | None, kw: dict[str, object], error: int) -> None:
    assert _end(md, True, **kw).error == error


def test_end_txn_in_state_never_rested_in_raises() -> None:
    for state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        with pytest.raises(IllegalTransitionError):
            _end(_md(state), True)


def test_begin_markers_rechecks() -> None:
    md = _md(S.ONGOING)
    d = _end(md, True)
    with pytest.raises(ValueError):
        c.begin_markers(md, c.TxnDecision(), NOW)
    assert c.begin_markers(md, d, NOW).error == errors.CONCURRENT_TRANSACTIONS  # not applied yet
    _apply(md, d)
    assert c.begin_markers(md, attrs_evolve(d, result=c.TransactionResult.ABORT), NOW).error == errors.INVALID_TXN_STATE
    md.producer_epoch = 5
    assert c.begin_markers(md, d, NOW).error == errors.PRODUCER_FENCED
    md.producer_id = 5
    assert c.begin_markers(md, d, NOW).error == errors.INVALID_PRODUCER_ID_MAPPING


def attrs_evolve(d: c.TxnDecision, **kw: object) -> c.TxnDecision:
    import attrs

    return attrs.evolve(d, **kw)  # type: ignore[arg-type]


def test_end_txn_append_failure_lets_client_retry() -> None:
    md = _md(S.ONGOING)
    d = _end(md, True)
    assert c.on_append_failure(md, d, errors.NOT_LEADER_OR_FOLLOWER) == errors.NOT_COORDINATOR
    assert md.pending_state is None and md.state == S.ONGOING and not md.has_failed_epoch_fence
    assert _end(md, True).error == errors.NONE


@pytest.mark.parametrize(
    ("append_error", "answer"),
    [
        (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_ENOUGH_REPLICAS, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.REQUEST_TIMED_OUT, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_COORDINATOR),
        (errors.KAFKA_STORAGE_ERROR, errors.NOT_COORDINATOR),
        (errors.MESSAGE_TOO_LARGE, errors.UNKNOWN_SERVER_ERROR),
        (errors.RECORD_LIST_TOO_LARGE, errors.UNKNOWN_SERVER_ERROR),
        (errors.INVALID_REQUEST, errors.INVALID_REQUEST),
    ],
)
def test_append_error_mapping(append_error: int, answer: int) -> None:
    assert c.coordinator_error_for_append(append_error) == answer


@pytest.mark.parametrize(
    ("api", "version", "error"),
    [
        (22, 3, errors.INVALID_PRODUCER_EPOCH),
        (22, 4, errors.PRODUCER_FENCED),
        (24, 1, errors.INVALID_PRODUCER_EPOCH),
        (24, 2, errors.PRODUCER_FENCED),
        (25, 1, errors.INVALID_PRODUCER_EPOCH),
        (26, 1, errors.INVALID_PRODUCER_EPOCH),
        (26, 2, errors.PRODUCER_FENCED),
    ],
)
def test_producer_fenced_for_old_versions(api: int, version: int, error: int) -> None:
    assert c.error_for_version(api, version, errors.PRODUCER_FENCED) == error
    assert c.error_for_version(api, 0, errors.CONCURRENT_TRANSACTIONS) == errors.CONCURRENT_TRANSACTIONS


def test_error_classes() -> None:
    for code, name in [
        (48, "InvalidTxnStateError"),
        (49, "InvalidProducerIdMappingError"),
        (50, "InvalidTransactionTimeoutError"),
        (51, "ConcurrentTransactionsError"),
        (52, "TransactionCoordinatorFencedError"),
        (55, "OperationNotAttemptedError"),
        (90, "ProducerFencedError"),
        (105, "TransactionalIdNotFoundError"),
        (120, "TransactionAbortableError"),
    ]:
        assert errors.error_for_code(code).__name__ == name
    assert errors.ConcurrentTransactionsError.retriable and not errors.ProducerFencedError.retriable


# --- timeouts ---------------------------------------------------------------------------


def test_timed_out_transaction_is_aborted_with_epoch_bump() -> None:
    md = _md(S.ONGOING, epoch=2, txn_timeout_ms=1000, txn_start_timestamp=NOW - 1000)
    assert not c.is_timed_out(md, NOW) and c.abort_timed_out(md, NOW) is None
    d = c.abort_timed_out(md, NOW + 1)
    assert d is not None and d.error == errors.NONE and d.epoch_fence and d.result == c.TransactionResult.ABORT
    assert d.append is not None and (d.append.txn_state, d.append.producer_epoch) == (S.PREPARE_ABORT, 3)
    assert c.abort_timed_out(md, NOW + 1) is None  # pending: not twice
    # The producer that timed out is fenced from now on.
    assert _end(md, True, producer_epoch=2).error == errors.PRODUCER_FENCED
    _apply(md, d)
    m = c.begin_markers(md, d, NOW + 2)
    assert m.markers is not None and m.markers.producer_epoch == 3
    c.on_append_success(md, m.markers.complete)
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, 3)


@pytest.mark.parametrize("state", [s for s in ALL_STATES if s != S.ONGOING])
def test_only_ongoing_transactions_time_out(state: TransactionState) -> None:
    assert not c.is_timed_out(_md(state, txn_timeout_ms=1, txn_start_timestamp=0), NOW)


# --- records <-> metadata ----------------------------------------------------------------


def test_record_of_transition_and_load_back() -> None:
    md = _md(S.ONGOING, epoch=7, partitions={("b", 1), ("a", 2), ("a", 0)})
    transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    key, value = record_for(TXN, transit)
    assert key == encode_key(TXN)
    decoded = decode_value(value)
    assert decoded == transit_to_value(transit)
    assert decoded is not None and decoded.transaction_partitions == [
        TransactionLogPartitions(topic="a", partition_ids=[0, 2]),
        TransactionLogPartitions(topic="b", partition_ids=[1]),
    ]
    loaded = metadata_from_value(TXN, decoded)
    assert (loaded.state, loaded.producer_id, loaded.producer_epoch, loaded.last_producer_epoch) == (S.PREPARE_COMMIT, 1000, 7, -1)
    assert loaded.topic_partitions == {("b", 1), ("a", 2), ("a", 0)}
    assert tombstone_for(TXN) == (encode_key(TXN), None)


def test_empty_record_has_null_partitions() -> None:
    md = _md(S.COMPLETE_COMMIT, epoch=1)
    transit = md.prepare_increment_producer_epoch(60000, None, NOW)
    assert transit is not None
    value = transit_to_value(transit)
    assert value.transaction_partitions is None and value.previous_producer_id == 1000
    assert record_for(TXN, transit, 0)[1] == encode_value(value, 0)
    with pytest.raises(IllegalTransitionError):
        transit_to_value(attrs_evolve_transit(transit))


def attrs_evolve_transit(transit: object) -> object:
    import attrs

    return attrs.evolve(transit, topic_partitions=frozenset({("x", 0)}))  # type: ignore[misc]
