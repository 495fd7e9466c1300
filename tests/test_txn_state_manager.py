"""The transaction coordinator's cache (loading ``__transaction_state``,
timeouts, expiry, DescribeTransactions / ListTransactions) and its marker
writing (routing by leader, the answers of WriteTxnMarkers, the
completion), pure (KIP-98, KIP-664)."""

from __future__ import annotations

import pytest
from helpers.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient import errors
from kclient.broker.txn import coordinator as c
from kclient.broker.txn import markers as mk
from kclient.broker.txn.metadata import IllegalTransitionError, TransactionMetadata, TransactionState
from kclient.broker.txn.partitioner import partition_for
from kclient.broker.txn.records import tombstone_for, transit_to_value
from kclient.broker.txn.state_manager import TransactionStateManager
from kclient.broker.txn.transaction_coordinator import TransactionCoordinator, TxnStep
from kclient.protocol.messages.transaction_log import encode_key, encode_value

pytestmark = pytest.mark.unit

S = TransactionState
NOW = 1_700_000_000_000
TXN = "txn-1"


def _md(state: TransactionState = S.EMPTY, *, epoch: int = 0, partitions: set[tuple[str, int]] | None = None, **kw: object) -> TransactionMetadata:
    if partitions is None:
        partitions = {("out", 0)} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else set()
    start = NOW - 10 if state != S.EMPTY else -1
    args: dict[str, object] = {"producer_epoch": epoch, "state": state, "topic_partitions": set(partitions), "txn_start_timestamp": start, "txn_last_update_timestamp": NOW - 10}
    args.update(kw)
    return TransactionMetadata(TXN, 1000, **args)  # type: ignore[arg-type]


# --- the state manager --------------------------------------------------------------------


def _manager(now: list[int]) -> TransactionStateManager:
    return TransactionStateManager(50, clock=lambda: now[0], transactional_id_expiration_ms=10_000)


def _records(*pairs: tuple[str, TransactionMetadata | None]) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    for txn_id, md in pairs:
        if md is None:
            out.append(tombstone_for(txn_id))
        else:
            out.append((encode_key(txn_id), encode_value(transit_to_value(md.prepare_no_transit()))))
    return out


def test_manager_lookup_errors_and_loading() -> None:
    now = [NOW]
    m = _manager(now)
    p = m.partition_for(TXN)
    assert p == partition_for(TXN, 50)
    assert m.get(TXN) == (errors.NOT_COORDINATOR, -1, None)
    m.begin_loading(p, 4)
    assert m.get(TXN) == (errors.COORDINATOR_LOAD_IN_PROGRESS, -1, None)
    assert m.list_transactions().error == errors.COORDINATOR_LOAD_IN_PROGRESS
    assert m.load_partition(p, 3, []) == []  # an older election: still loading
    assert m.get(TXN)[0] == errors.COORDINATOR_LOAD_IN_PROGRESS
    assert m.load_partition(p, 4, []) == []
    assert m.get(TXN) == (errors.NONE, 4, None)
    created = TransactionMetadata(TXN, 5)
    assert m.put_if_absent(created) is created
    assert m.put_if_absent(TransactionMetadata(TXN, 6)) is created
    assert m.get(TXN) == (errors.NONE, 4, created)
    m.resign(p, 3)  # an older epoch: kept
    assert m.get(TXN)[0] == errors.NONE
    m.resign(p, 4)
    assert m.get(TXN) == (errors.NOT_COORDINATOR, -1, None)
    with pytest.raises(KeyError):
        m.put_if_absent(created)


def test_manager_load_replays_last_value_and_tombstones() -> None:
    now = [NOW]
    m = _manager(now)
    ids = ["a", "b", "c"]
    # Put all three in one partition's load (the manager takes records as given).
    p = m.partition_for("a")
    m.begin_loading(p, 1)
    committing = _md(S.PREPARE_COMMIT, epoch=2, partitions={("out", 0)})
    records = _records(("a", _md(S.ONGOING)), ("b", _md(S.EMPTY)), ("a", committing), ("b", None), ("c", _md(S.COMPLETE_ABORT)))
    records.insert(0, (b"\x00\x07junk", b"ignored"))  # an unknown key version: skipped
    markers = m.load_partition(p, 1, records)
    table = m.transactions[p]
    assert sorted(table) == ["a", "c"] and ids
    assert table["a"].state == S.PREPARE_COMMIT and table["a"].pending_state == S.COMPLETE_COMMIT
    assert len(markers) == 1
    mk = markers[0]
    assert (mk.transactional_id, mk.producer_id, mk.producer_epoch, mk.result, mk.partitions) == ("a", 1000, 2, c.TransactionResult.COMMIT, frozenset({("out", 0)}))
    assert mk.complete.txn_state == S.COMPLETE_COMMIT and mk.complete.txn_last_update_timestamp == NOW


def test_manager_timeouts_expiry_describe_list() -> None:
    now = [NOW]
    m = _manager(now)
    p = m.partition_for(TXN)
    m.begin_loading(p, 0)
    m.load_partition(p, 0, [])
    ongoing = m.put_if_absent(_md(S.ONGOING, txn_timeout_ms=100, txn_start_timestamp=NOW - 50, partitions={("t", 1), ("t", 0), ("s", 2)}))
    assert m.timed_out_transactions() == []
    now[0] = NOW + 51
    assert m.timed_out_transactions() == [ongoing]
    d = m.describe(TXN)
    assert (d.error, d.state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms, d.transaction_start_time_ms) == (errors.NONE, "Ongoing", 1000, 0, 100, NOW - 50)
    assert d.topics == {"s": [2], "t": [0, 1]}
    assert m.describe("other-id").error in (errors.NOT_COORDINATOR, errors.TRANSACTIONAL_ID_NOT_FOUND)
    listed = m.list_transactions(states=["Ongoing", "Bogus"])
    assert listed.error == errors.NONE and listed.unknown_state_filters == ["Bogus"]
    assert [(t.transactional_id, t.producer_id, t.state) for t in listed.transactions] == [(TXN, 1000, "Ongoing")]
    assert m.list_transactions(producer_ids=[5]).transactions == []
    assert m.list_transactions(duration_ms=101).transactions == []  # running 101 ms: not longer than 101
    assert len(m.list_transactions(duration_ms=100).transactions) == 1
    assert m.expire_transactional_ids() == []  # ongoing: never expires
    # Completed and idle past transactional.id.expiration.ms: expires.
    ongoing.state, ongoing.topic_partitions, ongoing.txn_last_update_timestamp = S.COMPLETE_COMMIT, set(), NOW
    now[0] = NOW + 9_999
    assert m.expire_transactional_ids() == []
    now[0] = NOW + 10_000
    [(md, dead)] = m.expire_transactional_ids()
    assert md is ongoing and dead.txn_state == S.DEAD and md.pending_state == S.DEAD
    assert m.describe(TXN).error == errors.TRANSACTIONAL_ID_NOT_FOUND
    assert m.expire_transactional_ids() == []  # pending: not twice
    m.remove(TXN)
    assert m.get(TXN) == (errors.NONE, 0, None)
    assert m.describe(TXN).error == errors.TRANSACTIONAL_ID_NOT_FOUND


# --- markers ------------------------------------------------------------------------------


def _committing(partitions: set[tuple[str, int]]) -> tuple[TransactionMetadata, c.TxnMarkers]:
    """A transaction whose PrepareCommit is written, its markers begun."""
    md = _md(S.ONGOING, epoch=3, partitions=partitions)
    d = c.end_txn(md, transactional_id=TXN, producer_id=1000, producer_epoch=3, committed=True, now_ms=NOW)
    assert d.append is not None
    c.on_append_success(md, d.append)
    begun = c.begin_markers(md, d, NOW + 1)
    assert begun.markers is not None
    return md, begun.markers


def test_route_markers_by_leader() -> None:
    md, markers = _committing({("a", 0), ("a", 1), ("b", 0), ("gone", 0)})
    leaders = {("a", 0): 1, ("a", 1): 2, ("b", 0): 1, ("gone", 0): None}
    routing = mk.route_markers(markers, markers.partitions, 7, leaders.__getitem__)
    assert routing.by_broker == {
        1: mk.TxnMarkerEntry(1000, 3, 7, c.TransactionResult.COMMIT, (("a", 0), ("b", 0))),
        2: mk.TxnMarkerEntry(1000, 3, 7, c.TransactionResult.COMMIT, (("a", 1),)),
    }
    assert routing.no_leader == {("gone", 0)}
    assert not mk.drop_partitions_without_leader(md, routing)
    assert ("gone", 0) not in md.topic_partitions


def test_markers_written_then_completion() -> None:
    md, markers = _committing({("a", 0), ("a", 1)})
    p1 = mk.on_markers_written(md, {("a", 0): errors.NONE, ("a", 1): errors.NOT_LEADER_OR_FOLLOWER})
    assert p1 == mk.MarkerProgress(retry=frozenset({("a", 1)}))
    p2 = mk.on_markers_written(md, {("a", 1): errors.NONE})
    assert p2 == mk.MarkerProgress(complete=True)
    c.on_append_success(md, markers.complete)
    assert md.state == S.COMPLETE_COMMIT and md.pending_state is None


def test_all_partitions_without_leader_complete_at_once() -> None:
    md, markers = _committing({("gone", 0)})
    routing = mk.route_markers(markers, markers.partitions, 0, lambda tp: -1)
    assert routing.by_broker == {}
    assert mk.drop_partitions_without_leader(md, routing)


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (errors.NONE, mk.MarkerOutcome.DONE),
        (errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, mk.MarkerOutcome.DONE),
        (errors.UNSUPPORTED_VERSION, mk.MarkerOutcome.DONE),
        (errors.UNKNOWN_TOPIC_OR_PARTITION, mk.MarkerOutcome.RETRY),
        (errors.NOT_LEADER_OR_FOLLOWER, mk.MarkerOutcome.RETRY),
        (errors.NOT_ENOUGH_REPLICAS, mk.MarkerOutcome.RETRY),
        (errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, mk.MarkerOutcome.RETRY),
        (errors.REQUEST_TIMED_OUT, mk.MarkerOutcome.RETRY),
        (errors.KAFKA_STORAGE_ERROR, mk.MarkerOutcome.RETRY),
        (errors.INVALID_PRODUCER_EPOCH, mk.MarkerOutcome.CANCEL),
        (errors.TRANSACTION_COORDINATOR_FENCED, mk.MarkerOutcome.CANCEL),
    ],
)
def test_marker_outcomes(error: int, outcome: mk.MarkerOutcome) -> None:
    assert mk.marker_outcome(error) is outcome


@pytest.mark.parametrize("error", [errors.CORRUPT_MESSAGE, errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE, errors.INVALID_REQUIRED_ACKS, errors.INVALID_REQUEST])
def test_marker_fatal_errors(error: int) -> None:
    with pytest.raises(IllegalTransitionError):
        mk.marker_outcome(error)


def test_marker_cancel_leaves_metadata_alone() -> None:
    md, _ = _committing({("a", 0), ("a", 1)})
    progress = mk.on_markers_written(md, {("a", 0): errors.TRANSACTION_COORDINATOR_FENCED, ("a", 1): errors.NONE})
    assert progress.cancelled and not progress.complete


def test_completion_append_failure() -> None:
    md, _ = _committing({("a", 0)})
    assert mk.on_completion_append_failure(md, errors.COORDINATOR_NOT_AVAILABLE)
    assert md.pending_state == S.COMPLETE_COMMIT  # kept for the retry
    with pytest.raises(IllegalTransitionError):
        mk.on_completion_append_failure(md, errors.INVALID_REQUEST)
    assert not mk.on_completion_append_failure(md, errors.NOT_COORDINATOR)
    assert md.pending_state is None


# --- a transaction's whole life, reloaded after every write --------------------------------


def _snapshot(md: TransactionMetadata) -> tuple[object, ...]:
    return (md.producer_id, md.producer_epoch, md.state, frozenset(md.topic_partitions), md.txn_timeout_ms, md.txn_start_timestamp, md.txn_last_update_timestamp)


def test_reload_after_every_write_gives_the_same_state() -> None:
    """Each write of a transaction's life (init, add, add offsets, commit,
    markers, complete, a second init) is appended to a log; loading the
    log up to each write on a new coordinator gives the metadata the old
    one had then, and a transaction cut off in PrepareCommit gets its
    markers again."""
    from kclient.broker.txn.records import record_for

    now = [NOW]
    old = _manager(now)
    p = old.partition_for(TXN)
    old.begin_loading(p, 1)
    old.load_partition(p, 1, [])
    log: list[tuple[bytes, bytes | None]] = []
    snapshots = []
    ids = iter(range(5000, 5010))

    def write(md: TransactionMetadata, decision: c.TxnDecision) -> None:
        assert decision.error in (errors.NONE,) and decision.append is not None
        log.append(record_for(TXN, decision.append))
        c.on_append_success(md, decision.append)
        snapshots.append(_snapshot(md))

    d = c.init_producer_id(None, transactional_id=TXN, transaction_timeout_ms=30000, now_ms=now[0], allocate_producer_id=lambda: next(ids))
    assert d.created is not None
    md = old.put_if_absent(d.created)
    write(md, d)
    now[0] += 1
    write(md, c.add_partitions_to_txn(md, transactional_id=TXN, producer_id=5000, producer_epoch=0, partitions=[("out", 0), ("out", 1)], now_ms=now[0]))
    now[0] += 1
    write(md, c.add_offsets_to_txn(md, transactional_id=TXN, producer_id=5000, producer_epoch=0, group_id="g", offsets_topic_partitions=50, now_ms=now[0]))
    now[0] += 1
    end = c.end_txn(md, transactional_id=TXN, producer_id=5000, producer_epoch=0, committed=True, now_ms=now[0])
    write(md, end)
    begun = c.begin_markers(md, end, now[0])
    assert begun.markers is not None
    for tp in sorted(begun.markers.partitions):
        mk.on_markers_written(md, {tp: errors.NONE})
    write(md, begun)
    now[0] += 1
    write(md, c.init_producer_id(md, transactional_id=TXN, transaction_timeout_ms=30000, now_ms=now[0], allocate_producer_id=lambda: next(ids)))

    for n, expected in enumerate(snapshots, 1):
        new = _manager(now)
        new.begin_loading(p, 2)
        resumed = new.load_partition(p, 2, log[:n])
        _, epoch, loaded = new.get(TXN)
        assert epoch == 2 and loaded is not None
        assert _snapshot(loaded) == expected, n
        if loaded.state == S.PREPARE_COMMIT:
            [markers] = resumed
            assert markers.result == c.TransactionResult.COMMIT and markers.partitions == expected[3]
        else:
            assert resumed == []
    assert [s[2] for s in snapshots] == [S.EMPTY, S.ONGOING, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.EMPTY]
    assert snapshots[-1][1] == 1  # the second InitProducerId bumped the epoch


# --- random request sequences ---------------------------------------------------------------

_OPS = st.lists(
    st.tuples(st.sampled_from(["init", "init_kip360", "add", "offsets", "commit", "abort", "markers", "timeout", "tick"]), st.booleans(), st.integers(0, 3)),
    max_size=30,
)


class _Driver:
    """Applies decisions as the broker will: writes to a log (or fails the
    write), begins markers after PrepareCommit/PrepareAbort, writes them
    and the completion on "markers"."""

    def __init__(self) -> None:
        self.now = NOW
        self.md: TransactionMetadata | None = None
        self.client = (-1, -1)
        self.markers: c.TxnMarkers | None = None
        self.log: list[tuple[bytes, bytes | None]] = []
        self.ids = iter(range(100, 10_000))

    def write(self, decision: c.TxnDecision, ok: bool) -> None:
        from kclient.broker.txn.records import record_for

        md, transit = self.md, decision.append
        assert md is not None and transit is not None
        if not ok:
            c.on_append_failure(md, decision, errors.NOT_ENOUGH_REPLICAS)
            return
        self.log.append(record_for(TXN, transit))
        c.on_append_success(md, transit)
        if decision.result is not None:
            begun = c.begin_markers(md, decision, self.now)
            assert begun.error == errors.NONE and begun.markers is not None
            self.markers = begun.markers
        if decision.error == errors.NONE and decision.producer_id >= 0:
            self.client = (decision.producer_id, decision.producer_epoch)

    def step(self, op: str, ok: bool, k: int) -> None:
        pid, epoch = self.client
        decision: c.TxnDecision | None
        if op in ("init", "init_kip360"):
            kip360 = op == "init_kip360" and pid >= 0
            decision = c.init_producer_id(
                self.md,
                transactional_id=TXN,
                transaction_timeout_ms=1000,
                producer_id=pid if kip360 else -1,
                producer_epoch=epoch if kip360 else -1,
                now_ms=self.now,
                allocate_producer_id=lambda: next(self.ids),
            )
            if decision.created is not None:
                self.md = decision.created
        elif op == "add":
            decision = c.add_partitions_to_txn(self.md, transactional_id=TXN, producer_id=pid, producer_epoch=epoch, partitions=[("t", k)], now_ms=self.now)
        elif op == "offsets":
            decision = c.add_offsets_to_txn(self.md, transactional_id=TXN, producer_id=pid, producer_epoch=epoch, group_id=f"g{k}", offsets_topic_partitions=50, now_ms=self.now)
        elif op in ("commit", "abort"):
            decision = c.end_txn(self.md, transactional_id=TXN, producer_id=pid, producer_epoch=epoch, committed=op == "commit", now_ms=self.now)
        elif op == "markers":
            decision = None
            self.finish_markers(ok)
        elif op == "timeout":
            self.now += 5000
            decision = c.abort_timed_out(self.md, self.now) if self.md is not None else None
        else:
            self.now += 1
            decision = None
        if decision is not None and decision.append is not None:
            self.write(decision, ok)

    def finish_markers(self, ok: bool) -> None:
        from kclient.broker.txn.records import record_for

        md, markers = self.md, self.markers
        if md is None or markers is None:
            return
        progress = mk.on_markers_written(md, dict.fromkeys(sorted(markers.partitions - set()), errors.NONE)) if md.topic_partitions else mk.MarkerProgress(complete=True)
        assert progress.complete
        if not ok:
            assert mk.on_completion_append_failure(md, errors.COORDINATOR_NOT_AVAILABLE)
            return
        self.log.append(record_for(TXN, markers.complete))
        c.on_append_success(md, markers.complete)
        self.markers = None


@settings(max_examples=examples(300), deadline=None)
@given(_OPS)
def test_random_request_sequences_keep_the_invariants(ops: list[tuple[str, bool, int]]) -> None:
    """Whatever the order of requests and failed writes: no illegal
    transition, epochs never go back for a producer id, a change is pending
    only while markers are, and the log reloads to the state in memory."""
    d = _Driver()
    seen: dict[int, int] = {}
    for op, ok, k in ops:
        d.step(op, ok, k)
        md = d.md
        if md is None:
            continue
        assert md.state not in (S.DEAD, S.PREPARE_EPOCH_FENCE)
        assert md.pending_state is None or (d.markers is not None and md.pending_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT))
        assert md.producer_epoch >= seen.get(md.producer_id, -1)
        seen[md.producer_id] = md.producer_epoch
        if not d.log:
            continue
        new = _manager([d.now])
        p = new.partition_for(TXN)
        new.begin_loading(p, 1)
        resumed = new.load_partition(p, 1, d.log)
        _, _, loaded = new.get(TXN)
        assert loaded is not None
        expected = _snapshot(md)
        if md.has_failed_epoch_fence:
            # Kafka: the fence's epoch is current in memory though its write
            # failed (never answered; the next fence reuses it).
            expected = (md.producer_id, md.producer_epoch - 1, *expected[2:])
        if d.markers is not None:
            # Markers written but not the completion: the log still lists
            # every partition; the next coordinator writes their markers again.
            expected = (*expected[:3], d.markers.partitions, *expected[4:])
        assert _snapshot(loaded) == expected
        assert len(resumed) == (1 if d.markers is not None else 0)


# --- the coordinator: cache and decisions together -----------------------------------------


def _coordinator(now: list[int], elect: bool = True) -> TransactionCoordinator:
    ids = iter(range(3000, 4000))
    coordinator = TransactionCoordinator(_manager(now), lambda: next(ids))
    if elect:
        assert coordinator.on_election(coordinator.manager.partition_for(TXN), 1, []) == []
    return coordinator


def _written(coordinator: TransactionCoordinator, step: TxnStep, error: int = errors.NONE) -> c.TxnDecision:
    assert step.write is not None
    assert step.write.partition == partition_for(TXN, 50) and step.write.key == encode_key(TXN)
    return coordinator.after_write(step.write, error)


def test_coordinator_lookup_errors() -> None:
    now = [NOW]
    co = _coordinator(now, elect=False)
    assert co.init_producer_id(TXN, 60000).answer.error == errors.NOT_COORDINATOR
    assert co.init_producer_id(TXN, 0).answer.error == errors.INVALID_TRANSACTION_TIMEOUT  # checked first
    assert co.init_producer_id("", 60000).answer.error == errors.INVALID_REQUEST
    assert co.init_producer_id(None, 60000).answer == c.TxnDecision(producer_id=3000, producer_epoch=0)
    assert co.add_partitions_to_txn(TXN, 1, 0, [("t", 0)]).answer.error == errors.NOT_COORDINATOR
    assert co.add_partitions_to_txn("", 1, 0, [("t", 0)]).answer.error == errors.INVALID_REQUEST
    assert co.end_txn(TXN, 1, 0, True).answer.error == errors.NOT_COORDINATOR
    assert co.end_txn("", 1, 0, True).answer.error == errors.INVALID_REQUEST
    co.manager.begin_loading(co.manager.partition_for(TXN), 1)
    assert co.add_offsets_to_txn(TXN, 1, 0, "g").answer.error == errors.COORDINATOR_LOAD_IN_PROGRESS
    assert [d.error for d in co.describe(["", TXN])] == [errors.INVALID_REQUEST, errors.COORDINATOR_LOAD_IN_PROGRESS]


def test_coordinator_transaction_end_to_end() -> None:
    now = [NOW]
    co = _coordinator(now)
    init = _written(co, co.init_producer_id(TXN, 60000))
    assert (init.error, init.producer_id, init.producer_epoch) == (errors.NONE, 3000, 0)
    assert _written(co, co.add_partitions_to_txn(TXN, 3000, 0, [("out", 0), ("out", 1)])).error == errors.NONE
    assert co.add_partitions_to_txn(TXN, 3000, 0, [("out", 0)]).write is None  # already in
    assert _written(co, co.add_offsets_to_txn(TXN, 3000, 0, "g")).error == errors.NONE
    end = _written(co, co.end_txn(TXN, 3000, 0, True))
    assert (end.error, end.producer_id, end.producer_epoch) == (errors.NONE, 3000, 0) and end.markers is not None
    assert end.markers.partitions == {("out", 0), ("out", 1), c.offsets_partition("g", 50)}
    assert co.end_txn(TXN, 3000, 0, True).answer.error == errors.CONCURRENT_TRANSACTIONS
    progress = co.on_markers_answered(end.markers, 1, dict.fromkeys(end.markers.partitions, errors.NONE))
    assert progress.complete
    write = co.completion_write(end.markers, 1)
    assert write is not None
    assert not co.after_completion_write(write, errors.NONE)
    assert co.describe([TXN])[0].state == "CompleteCommit"
    assert co.end_txn(TXN, 3000, 0, True).answer == c.TxnDecision(producer_id=3000, producer_epoch=0)


def test_coordinator_moved_during_write() -> None:
    now = [NOW]
    co = _coordinator(now)
    step = co.init_producer_id(TXN, 60000)
    partition = co.manager.partition_for(TXN)
    co.on_resignation(partition)
    assert _written(co, step).error == errors.NOT_COORDINATOR
    co.on_election(partition, 2, [])
    assert _written(co, step).error == errors.NOT_COORDINATOR  # another epoch
    assert _written(co, step, errors.NOT_LEADER_OR_FOLLOWER).error == errors.NOT_COORDINATOR


def test_coordinator_failed_write_and_fencing_init() -> None:
    now = [NOW]
    co = _coordinator(now)
    assert _written(co, co.init_producer_id(TXN, 60000), errors.REQUEST_TIMED_OUT).error == errors.COORDINATOR_NOT_AVAILABLE
    assert _written(co, co.init_producer_id(TXN, 60000)).producer_epoch == 0
    _written(co, co.add_partitions_to_txn(TXN, 3000, 0, [("out", 0)]))
    # A new producer with the same id: the ongoing transaction is aborted, the answer says retry.
    fence = _written(co, co.init_producer_id(TXN, 60000))
    assert (fence.error, fence.producer_id) == (errors.CONCURRENT_TRANSACTIONS, -1)
    assert fence.markers is not None and (fence.markers.result, fence.markers.producer_epoch) == (c.TransactionResult.ABORT, 1)
    assert co.on_markers_answered(fence.markers, 1, {("out", 0): errors.NOT_LEADER_OR_FOLLOWER}).retry == {("out", 0)}
    assert co.on_markers_answered(fence.markers, 1, {("out", 0): errors.NONE}).complete
    write = co.completion_write(fence.markers, 1)
    assert write is not None
    assert co.after_completion_write(write, errors.NOT_ENOUGH_REPLICAS)  # retry
    assert not co.after_completion_write(write, errors.NONE)
    retry = _written(co, co.init_producer_id(TXN, 60000))
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (errors.NONE, 3000, 2)


def test_coordinator_markers_after_resignation_are_cancelled() -> None:
    now = [NOW]
    co = _coordinator(now)
    _written(co, co.init_producer_id(TXN, 60000))
    _written(co, co.add_partitions_to_txn(TXN, 3000, 0, [("out", 0)]))
    end = _written(co, co.end_txn(TXN, 3000, 0, False))
    assert end.markers is not None
    co.on_resignation(co.manager.partition_for(TXN), 1)
    assert co.on_markers_answered(end.markers, 1, {("out", 0): errors.NONE}).cancelled
    assert co.completion_write(end.markers, 1) is None


def test_coordinator_timeouts_and_expiry() -> None:
    now = [NOW]
    co = _coordinator(now)
    _written(co, co.init_producer_id(TXN, 1000))
    _written(co, co.add_partitions_to_txn(TXN, 3000, 0, [("out", 0)]))
    assert co.abort_timed_out_transactions() == []
    now[0] += 1001
    [write] = co.abort_timed_out_transactions()
    answer = co.after_write(write, errors.NONE)
    assert answer.markers is not None and answer.markers.producer_epoch == 1
    assert co.end_txn(TXN, 3000, 0, True).answer.error == errors.PRODUCER_FENCED
    co.on_markers_answered(answer.markers, 1, {("out", 0): errors.NONE})
    completion = co.completion_write(answer.markers, 1)
    assert completion is not None and not co.after_completion_write(completion, errors.NONE)
    now[0] += 10_000
    [tombstone] = co.expire_transactional_ids()
    assert tombstone.value is None
    co.after_expiration_write(tombstone, errors.NOT_ENOUGH_REPLICAS)
    assert co.manager.get(TXN)[2] is not None
    [tombstone] = co.expire_transactional_ids()
    co.after_expiration_write(tombstone, errors.NONE)
    assert co.manager.get(TXN) == (errors.NONE, 1, None)
