"""The transactional producer's state machine (KIP-98 transactions, with
KIP-360's epoch bump, KIP-447's group metadata and KIP-890's
TRANSACTION_ABORTABLE), modelled on the rules of the Java client's
``TransactionManager``.

Pure: no sockets, no trio, no threads; the clock is injected. The
application side calls `TransactionManager.init_transactions`,
`~TransactionManager.begin_transaction`,
`~TransactionManager.maybe_add_partition` (for each partition a send
touches), `~TransactionManager.send_offsets_to_transaction`,
`~TransactionManager.commit_transaction` and
`~TransactionManager.abort_transaction`; the calls that need the
coordinator return a `TransactionalResult` to wait on. The sender side
takes the requests to send one at a time with
`~TransactionManager.next_request` (a `TxnRequest`: the landed message
class's request object, the API, the highest version the manager allows
and the node to send to) and gives back what came of each with
`~TransactionManager.handle_response`,
`~TransactionManager.handle_disconnect` or
`~TransactionManager.handle_send_failure`. A Produce error of a batch of
the transaction goes to `~TransactionManager.maybe_transition_to_error_state`.

States and transitions (Kafka's): UNINITIALIZED -> INITIALIZING -> READY
-> IN_TRANSACTION -> COMMITTING_TRANSACTION / ABORTING_TRANSACTION ->
READY (or INITIALIZING when the epoch must be bumped first). An error
leaves either ABORTABLE_ERROR (abort the transaction and go on) or
FATAL_ERROR (close the producer). `error_action` tells, per request type,
what an error code does: retry, find the coordinator again and retry,
abortable, abortable with an epoch bump (fatal when the coordinator cannot
bump: InitProducerId below v3), or fatal.

Config rules (`resolve_transactional_config`): ``transactional.id``
implies ``enable.idempotence=true`` and ``acks=all``; an explicit
conflicting value raises `ConfigError` naming both properties.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kclient.client.consumer.poll.errors import CommitFailedError
from kclient.client.consumer.poll.types import OffsetAndMetadata, TopicPartition
from kclient.client.producer.transaction_rules import (
    ADD_PARTITIONS_RETRY_BACKOFF_MS,
    EPOCH_BUMP_MIN_VERSION,
    FATAL_BATCH_ERRORS,
    MAX_VERSIONS,
    ErrorAction,
    Priority,
    State,
    TransactionalConfig,
    error_action,
    is_transition_valid,
    resolve_transactional_config,
)
from kclient.client.producer.transaction_types import TP, Coordinator, GroupMetadata, TransactionalResult, TxnRequest
from kclient.clock import now_ms
from kclient.errors import (
    CONCURRENT_TRANSACTIONS,
    TOPIC_AUTHORIZATION_FAILED,
    ConfigError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    KafkaError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    error_for_code,
)
from kclient.protocol.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN, AddOffsetsToTxnRequest
from kclient.protocol.messages.add_partitions_to_txn import (
    ADD_PARTITIONS_TO_TXN,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kclient.protocol.messages.end_txn import END_TXN, EndTxnRequest
from kclient.protocol.messages.find_coordinator import (
    COORDINATOR_GROUP,
    COORDINATOR_TRANSACTION,
    FIND_COORDINATOR,
    FindCoordinatorRequest,
)
from kclient.protocol.messages.init_producer_id import INIT_PRODUCER_ID_FULL, InitProducerIdRequest
from kclient.protocol.messages.txn_offset_commit import (
    TXN_OFFSET_COMMIT,
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kclient.protocol.schema import Api

log = logging.getLogger(__name__)

__all__ = [
    "ADD_PARTITIONS_RETRY_BACKOFF_MS",
    "Coordinator",
    "ErrorAction",
    "GroupMetadata",
    "Priority",
    "State",
    "TransactionManager",
    "TransactionalConfig",
    "TransactionalResult",
    "TxnRequest",
    "error_action",
    "resolve_transactional_config",
]

#: TxnOffsetCommit from this version carries the consumer's group metadata
#: (KIP-447); Kafka refuses to send group metadata in an older one.
GROUP_METADATA_MIN_VERSION = 3


def _has_group_metadata(group: GroupMetadata) -> bool:
    return group.member_id != "" or group.generation_id != -1 or group.group_instance_id is not None


def _tp(value: TopicPartition | TP) -> TP:
    if isinstance(value, TopicPartition):
        return (value.topic, value.partition)
    return (value[0], value[1])


def _offset(value: OffsetAndMetadata | int) -> OffsetAndMetadata:
    return value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))


class TransactionManager:
    """The transactional producer's state, queued requests and coordinators.

    Args:
        transactional_id: ``transactional.id``.
        transaction_timeout_ms: ``transaction.timeout.ms`` (ms), sent in
            InitProducerId.
        retry_backoff_ms: ``retry.backoff.ms``: the pause before a request
            is retried (ms).
        clock: Milliseconds now (defaults to `kclient.clock.now_ms`).
        on_producer_id: Called with ``(producer_id, producer_epoch)`` each
            time InitProducerId gives a new producer id or epoch: the
            producer's sequence numbers start again from 0 on every
            partition.
    """

    def __init__(
        self,
        transactional_id: str,
        *,
        transaction_timeout_ms: int = 60_000,
        retry_backoff_ms: int = 100,
        clock: Callable[[], int] = now_ms,
        on_producer_id: Callable[[int, int], None] | None = None,
    ) -> None:
        if not transactional_id:
            raise ConfigError("transactional.id must be non-empty for a TransactionManager")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._clock = clock
        self._on_producer_id = on_producer_id
        self._state = State.UNINITIALIZED
        self._last_error: KafkaError | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self._transaction_started = False
        self._epoch_bump_required = False
        self._coordinator_supports_epoch_bump = False
        self._new_partitions: set[TP] = set()
        self._pending_partitions: set[TP] = set()
        self._partitions: set[TP] = set()
        self._pending_offsets: dict[TP, OffsetAndMetadata] = {}
        self._queue: list[tuple[int, int, TxnRequest]] = []
        self._sequence = 0
        self._coordinators: dict[int, Coordinator | None] = {COORDINATOR_TRANSACTION: None, COORDINATOR_GROUP: None}
        self._in_flight: TxnRequest | None = None
        self._pending_transition: tuple[TransactionalResult, State, str] | None = None

    # ------------------------------------------------------------ state

    @property
    def state(self) -> State:
        """The current state."""
        return self._state

    @property
    def last_error(self) -> KafkaError | None:
        """The error that put the manager in ABORTABLE_ERROR or FATAL_ERROR."""
        return self._last_error

    @property
    def epoch_bump_required(self) -> bool:
        """Whether the next abort bumps the epoch (KIP-360)."""
        return self._epoch_bump_required

    @property
    def can_bump_epoch(self) -> bool:
        """Whether the transaction coordinator takes InitProducerId v3+ (KIP-360)."""
        return self._coordinator_supports_epoch_bump

    def has_producer_id(self) -> bool:
        """Whether InitProducerId gave a producer id."""
        return self.producer_id >= 0

    def has_error(self) -> bool:
        """In ABORTABLE_ERROR or FATAL_ERROR."""
        return self._state in (State.ABORTABLE_ERROR, State.FATAL_ERROR)

    def has_fatal_error(self) -> bool:
        """In FATAL_ERROR."""
        return self._state is State.FATAL_ERROR

    def is_completing(self) -> bool:
        """Committing or aborting."""
        return self._state in (State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION)

    def has_ongoing_transaction(self) -> bool:
        """A transaction began and has not completed or failed fatally."""
        return self._state is State.IN_TRANSACTION or self.is_completing() or self._state is State.ABORTABLE_ERROR

    def is_partition_added(self, tp: TopicPartition | TP) -> bool:
        """Whether AddPartitionsToTxn added ``tp`` to the transaction."""
        return _tp(tp) in self._partitions

    def is_partition_pending_add(self, tp: TopicPartition | TP) -> bool:
        """Whether ``tp`` waits for (or is in) an AddPartitionsToTxn."""
        key = _tp(tp)
        return key in self._new_partitions or key in self._pending_partitions

    def is_send_to_partition_allowed(self, tp: TopicPartition | TP) -> bool:
        """Whether a batch of ``tp`` may be sent: the partition is in the
        transaction and the manager is not fatal."""
        return not self.has_fatal_error() and _tp(tp) in self._partitions

    def has_partitions_to_add(self) -> bool:
        """Whether partitions wait for AddPartitionsToTxn."""
        return bool(self._new_partitions or self._pending_partitions)

    def has_pending_offset_commits(self) -> bool:
        """Whether TxnOffsetCommit has offsets not yet committed."""
        return bool(self._pending_offsets)

    def has_pending_requests(self) -> bool:
        """Whether requests are queued."""
        return bool(self._queue)

    def has_in_flight_request(self) -> bool:
        """Whether a request from `next_request` has not been answered."""
        return self._in_flight is not None

    def coordinator(self, coordinator_type: int) -> Coordinator | None:
        """The known coordinator of a type (``1`` transaction, ``0`` group), or None."""
        return self._coordinators[coordinator_type]

    def _transition(self, target: State, error: KafkaError | None = None, *, poison: bool = False) -> None:
        if not is_transition_valid(self._state, target):
            message = f"TransactionalId {self.transactional_id}: Invalid transition attempted from state {self._state.value} to state {target.value}"
            exc = IllegalStateError(message)
            if poison:
                self._state = State.FATAL_ERROR
                self._last_error = exc
            raise exc
        if target in (State.FATAL_ERROR, State.ABORTABLE_ERROR):
            if error is None:
                raise ValueError(f"cannot transition to {target.value} without an error")
            self._last_error = error
        else:
            self._last_error = None
        log.debug("transactional id %s: %s -> %s", self.transactional_id, self._state.value, target.value)
        self._state = target

    def _maybe_fail_with_error(self) -> None:
        if not self.has_error():
            return
        last = self._last_error
        who = f"Producer with transactional id {self.transactional_id!r}, producer id {self.producer_id} and epoch {self.producer_epoch}"
        if isinstance(last, ProducerFencedError):
            raise ProducerFencedError(f"{who} has been fenced by another producer with the same transactional id")
        if isinstance(last, InvalidProducerEpochError):
            raise InvalidProducerEpochError(f"{who} attempted to produce with an old epoch")
        if isinstance(last, IllegalStateError):
            raise IllegalStateError(f"{who} cannot execute a transactional method after an invalid state transition") from last
        raise KafkaError(f"Cannot execute transactional method because the producer is in state {self._state.value}: {last}") from last

    def _throw_if_pending_state(self, operation: str) -> None:
        pending = self._pending_transition
        if pending is None:
            return
        if pending[0].is_acked:
            self._pending_transition = None
            return
        raise IllegalStateError(f"Cannot attempt operation `{operation}` because the previous call to `{pending[2]}` timed out and must be retried")

    def _cached(self, operation: str, next_state: State, start: Callable[[], TransactionalResult]) -> TransactionalResult:
        pending = self._pending_transition
        if pending is not None:
            if pending[0].is_acked:
                self._pending_transition = None
            elif pending[1] is not next_state:
                raise IllegalStateError(
                    f"Cannot attempt operation `{operation}` because the previous call to `{pending[2]}` timed out and must be retried"
                )
            else:
                return pending[0]
        result = start()
        self._pending_transition = (result, next_state, operation)
        return result

    def transition_to_abortable_error(self, error: KafkaError) -> None:
        """Enter ABORTABLE_ERROR (nothing while already aborting).

        Args:
            error: Why.
        """
        if self._state is State.ABORTING_TRANSACTION:
            log.debug("already aborting; not entering ABORTABLE_ERROR for %s", error)
            return
        log.info("transactional id %s: abortable error: %s", self.transactional_id, error)
        self._transition(State.ABORTABLE_ERROR, error, poison=True)

    def transition_to_fatal_error(self, error: KafkaError) -> None:
        """Enter FATAL_ERROR and fail the call waiting on a transition.

        Args:
            error: Why.
        """
        log.info("transactional id %s: fatal error: %s", self.transactional_id, error)
        self._transition(State.FATAL_ERROR, error)
        if self._pending_transition is not None:
            self._pending_transition[0].fail(error)

    def maybe_transition_to_error_state(self, error: KafkaError) -> None:
        """Classify the failure of a batch of the transaction (Kafka's rule):
        cluster or transactional-id authorization, PRODUCER_FENCED and an
        unsupported version are fatal; anything else (a partition's error, a
        batch that timed out, INVALID_PRODUCER_EPOCH from a partition leader,
        KIP-588) makes the transaction abortable, with an epoch bump when the
        coordinator can bump and the transaction is not completing.

        Args:
            error: The batch's error.
        """
        if isinstance(error, FATAL_BATCH_ERRORS):
            self.transition_to_fatal_error(error)
            return
        if self._coordinator_supports_epoch_bump and not self.is_completing():
            self._epoch_bump_required = True
        self.transition_to_abortable_error(error)

    # ------------------------------------------------------------ application calls

    def init_transactions(self) -> TransactionalResult:
        """Get the producer id and epoch of the transactional id
        (InitProducerId): the coordinator fences the id's previous producer
        and completes its open transaction.

        Returns:
            The result; READY when it succeeded.

        Raises:
            IllegalStateError: Not UNINITIALIZED, or another call timed out
                and must be retried first.
            KafkaError: The manager is in an error state.
        """

        def start() -> TransactionalResult:
            self._maybe_fail_with_error()
            self._transition(State.INITIALIZING)
            return self._enqueue_init_producer_id(bump=False)

        return self._cached("initTransactions", State.INITIALIZING, start)

    def _enqueue_init_producer_id(self, *, bump: bool) -> TransactionalResult:
        body = InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self.producer_id if bump else -1,
            producer_epoch=self.producer_epoch if bump else -1,
        )
        priority = Priority.EPOCH_BUMP if bump else Priority.INIT_PRODUCER_ID
        request = self._request(INIT_PRODUCER_ID_FULL, body, priority, "InitProducerId")
        request.is_epoch_bump = bump
        request.min_version = EPOCH_BUMP_MIN_VERSION if bump else 0
        self._enqueue(request)
        return request.result

    def begin_transaction(self) -> None:
        """Start a transaction (local only: nothing is sent until a send or
        `send_offsets_to_transaction`).

        Raises:
            IllegalStateError: Not READY, or a call timed out and must be
                retried first.
            KafkaError: The manager is in an error state.
        """
        self._throw_if_pending_state("beginTransaction")
        self._maybe_fail_with_error()
        self._transition(State.IN_TRANSACTION)

    def check_send_allowed(self) -> None:
        """Raise unless a send may be made now (Kafka's checks at the start
        of ``send``); reads the state only, so any thread may call it.

        Raises:
            IllegalStateError: No producer id yet (`init_transactions` not
                completed) or no transaction in progress.
            KafkaError: The manager is in an error state.
        """
        self._maybe_fail_with_error()
        if not self.has_producer_id():
            raise IllegalStateError("Cannot perform a send before completing a call to init_transactions")
        if self._state is not State.IN_TRANSACTION:
            raise IllegalStateError(f"Cannot call send in state {self._state.value}: call begin_transaction first")

    def maybe_add_partition(self, tp: TopicPartition | TP) -> None:
        """Note a partition a send writes to: it goes in the next
        AddPartitionsToTxn, which must succeed before its first batch is sent
        (`is_send_to_partition_allowed`).

        Args:
            tp: The partition.

        Raises:
            IllegalStateError: No producer id yet (`init_transactions` not
                completed) or no transaction in progress.
            KafkaError: The manager is in an error state.
        """
        self._maybe_fail_with_error()
        self._throw_if_pending_state("send")
        key = _tp(tp)
        if not self.has_producer_id():
            raise IllegalStateError(f"Cannot add partition {key} to the transaction before init_transactions completes")
        if self._state is not State.IN_TRANSACTION:
            raise IllegalStateError(f"Cannot add partition {key} to the transaction while in state {self._state.value}")
        if key in self._partitions or self.is_partition_pending_add(key):
            return
        self._new_partitions.add(key)

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition | TP, OffsetAndMetadata | int], group_metadata: GroupMetadata
    ) -> TransactionalResult:
        """Commit a consumer group's offsets in the transaction (KIP-98,
        KIP-447): AddOffsetsToTxn to the transaction coordinator, then
        TxnOffsetCommit, with the consumer's generation, member id and group
        instance id, to the group coordinator.

        Args:
            offsets: ``{partition: the next offset to consume}``.
            group_metadata: The consumer's ``group_metadata()``.

        Returns:
            The result, completed when TxnOffsetCommit committed every offset.

        Raises:
            IllegalStateError: No transaction in progress.
            KafkaError: The manager is in an error state.
        """
        self._throw_if_pending_state("sendOffsetsToTransaction")
        self._maybe_fail_with_error()
        if self._state is not State.IN_TRANSACTION:
            raise IllegalStateError(f"Cannot send offsets if a transaction is not in progress (state {self._state.value})")
        body = AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            group_id=group_metadata.group_id,
        )
        request = self._request(ADD_OFFSETS_TO_TXN, body, Priority.ADD_PARTITIONS_OR_OFFSETS, "AddOffsetsToTxn")
        request.offsets = {_tp(tp): _offset(value) for tp, value in offsets.items()}
        request.group_metadata = group_metadata
        self._enqueue(request)
        return request.result

    def commit_transaction(self) -> TransactionalResult:
        """Commit the transaction: the last AddPartitionsToTxn, then EndTxn
        (commit) once every batch completed (Kafka's ``beginCommit``).

        Returns:
            The result; READY when it succeeded.

        Raises:
            IllegalStateError: No transaction in progress.
            KafkaError: The manager is in an error state (abort instead, or
                close the producer when fatal).
        """

        def start() -> TransactionalResult:
            self._maybe_fail_with_error()
            self._transition(State.COMMITTING_TRANSACTION)
            return self._begin_completing(commit=True)

        return self._cached("commitTransaction", State.COMMITTING_TRANSACTION, start)

    def abort_transaction(self) -> TransactionalResult:
        """Abort the transaction (also after an abortable error): EndTxn
        (abort), then, when an error asked for it, InitProducerId with the
        current producer id and epoch to bump the epoch (KIP-360).

        Returns:
            The result; READY when it succeeded.

        Raises:
            IllegalStateError: No transaction in progress.
            KafkaError: The manager is in FATAL_ERROR.
        """

        def start() -> TransactionalResult:
            if self._state is not State.ABORTABLE_ERROR:
                self._maybe_fail_with_error()
            error = self._last_error
            self._transition(State.ABORTING_TRANSACTION)
            self._new_partitions.clear()
            return self._begin_completing(commit=False, error=error)

        return self._cached("abortTransaction", State.ABORTING_TRANSACTION, start)

    def _begin_completing(self, *, commit: bool, error: KafkaError | None = None) -> TransactionalResult:
        # ``error``: what made the transaction abortable (the transition to
        # ABORTING cleared it). After INVALID_PRODUCER_ID_MAPPING the
        # coordinator refuses EndTxn: go straight to the epoch bump.
        if self._new_partitions:
            self._enqueue(self._add_partitions_request())
        if not isinstance(error, InvalidProducerIdMappingError):
            body = EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=commit,
            )
            request = self._request(END_TXN, body, Priority.END_TXN, f"EndTxn({commit})")
            self._enqueue(request)
            if not self._epoch_bump_required:
                return request.result
        return self._enqueue_init_producer_id(bump=True)

    # ------------------------------------------------------------ request queue

    def _request(self, api: Api, body: Any, priority: Priority, operation: str) -> TxnRequest:
        return TxnRequest(
            api=api,
            body=body,
            priority=priority,
            result=TransactionalResult(operation),
            coordinator_key=self.transactional_id,
            max_version=MAX_VERSIONS[api.key],
            backoff_ms=self.retry_backoff_ms,
        )

    def _enqueue(self, request: TxnRequest) -> None:
        self._sequence += 1
        heapq.heappush(self._queue, (int(request.priority), self._sequence, request))

    def _reenqueue(self, request: TxnRequest) -> None:
        request.is_retry = True
        request.not_before_ms = self._clock() + request.backoff_ms
        self._enqueue(request)

    def _add_partitions_request(self) -> TxnRequest:
        self._pending_partitions |= self._new_partitions
        self._new_partitions.clear()
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(self._pending_partitions):
            topics.setdefault(topic, []).append(partition)
        body = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in topics.items()],
        )
        return self._request(ADD_PARTITIONS_TO_TXN, body, Priority.ADD_PARTITIONS_OR_OFFSETS, "AddPartitionsToTxn")

    def _lookup_coordinator(self, coordinator_type: int, key: str) -> None:
        self._coordinators[coordinator_type] = None
        body = FindCoordinatorRequest(key=key, key_type=coordinator_type)
        request = self._request(FIND_COORDINATOR, body, Priority.FIND_COORDINATOR, "FindCoordinator")
        request.coordinator_type = None
        request.coordinator_key = None
        request.min_version = 1  # key_type (KIP-98)
        self._enqueue(request)

    def next_retry_ms(self) -> int | None:
        """When the head of the queue may be sent (ms, the injected clock),
        or None when the queue is empty: the sender's wake-up time."""
        if not self._queue:
            return None
        return self._queue[0][2].not_before_ms

    def next_request(self, has_incomplete_batches: bool = False) -> TxnRequest | None:
        """The next request to send, or None for now.

        Partitions noted since the last call go in a new AddPartitionsToTxn.
        EndTxn waits until no batch of the transaction is incomplete; a
        retried request waits its backoff (`next_retry_ms`); a request whose
        coordinator is not known makes way for a FindCoordinator; in an error
        state queued requests fail (a FindCoordinator still goes while the
        error is abortable); EndTxn of a transaction that added nothing
        completes at once without being sent. The returned request is in
        flight until `handle_response`, `handle_disconnect` or
        `handle_send_failure`; only one is in flight at a time.

        Args:
            has_incomplete_batches: Whether batches of the transaction are
                queued or unacknowledged.

        Returns:
            The `TxnRequest` (its ``node`` set when it needs a coordinator),
            or None.

        Raises:
            IllegalStateError: A request is still in flight.
        """
        if self._in_flight is not None:
            raise IllegalStateError("a transactional request is already in flight")
        if self._new_partitions:
            self._enqueue(self._add_partitions_request())
        while self._queue:
            request = self._queue[0][2]
            if (request.is_end_txn and has_incomplete_batches) or request.not_before_ms > self._clock():
                return None
            heapq.heappop(self._queue)
            if self._terminate_with_error(request):
                return None
            if request.is_end_txn and not self._transaction_started:
                self._skip_end_txn(request)
                continue
            if request.coordinator_type is not None:
                request.node = self._coordinators[request.coordinator_type]
                if request.node is None:
                    self._lookup_coordinator(request.coordinator_type, request.coordinator_key or "")
                    self._reenqueue(request)
                    continue
            self._in_flight = request
            return request
        return None

    def _skip_end_txn(self, request: TxnRequest) -> None:
        request.result.done()
        if self._state is not State.FATAL_ERROR:
            log.debug("not sending EndTxn: nothing was added to the transaction")
            self._complete_transaction()

    def _terminate_with_error(self, request: TxnRequest) -> bool:
        if not self.has_error():
            return False
        if self._state is State.ABORTABLE_ERROR and request.api.key == FIND_COORDINATOR.key:
            return False
        assert self._last_error is not None
        request.result.fail(self._last_error)
        return True

    def _complete_transaction(self) -> None:
        self._transition(State.INITIALIZING if self._epoch_bump_required else State.READY, poison=True)
        self._last_error = None
        self._epoch_bump_required = False
        self._transaction_started = False
        self._new_partitions.clear()
        self._pending_partitions.clear()
        self._partitions.clear()

    def coordinator_ready(self, init_producer_id_max_version: int) -> None:
        """Tell the highest InitProducerId version the transaction
        coordinator takes (from its ApiVersions); v3+ lets an abortable
        error's abort bump the epoch (KIP-360).

        Args:
            init_producer_id_max_version: The coordinator's highest
                InitProducerId version (-1: none).
        """
        self._coordinator_supports_epoch_bump = init_producer_id_max_version >= EPOCH_BUMP_MIN_VERSION

    def fail_pending_requests(self, error: KafkaError) -> None:
        """Fail every queued request with an abortable error (the producer
        failed the transaction's batches, e.g. they expired).

        Args:
            error: The error.
        """
        if not self._queue:
            return
        for _, _, request in self._queue:
            request.result.fail(error)
        self._queue.clear()
        self.transition_to_abortable_error(error)

    def close(self) -> None:
        """Fail what is queued and the call waiting on a transition: the
        producer closed."""
        error = KafkaError("The producer closed forcefully")
        if self._queue:
            for _, _, request in self._queue:
                request.result.fail(error)
            self._queue.clear()
            self.transition_to_fatal_error(error)
        elif self._pending_transition is not None:
            self._pending_transition[0].fail(error)

    # ------------------------------------------------------------ responses

    def _take_in_flight(self, request: TxnRequest) -> bool:
        if request is not self._in_flight:
            self.transition_to_fatal_error(KafkaError("Detected more than one in-flight transactional request"))
            return False
        self._in_flight = None
        return True

    def handle_disconnect(self, request: TxnRequest) -> None:
        """The connection was lost before ``request`` was answered: find its
        coordinator again (if it has one) and retry.

        Args:
            request: The request `next_request` gave.
        """
        if not self._take_in_flight(request):
            return
        if request.coordinator_type is not None:
            self._lookup_coordinator(request.coordinator_type, request.coordinator_key or "")
        self._reenqueue(request)

    def handle_send_failure(self, request: TxnRequest, error: KafkaError) -> None:
        """``request`` could not be sent for a reason a retry cannot fix (the
        broker does not support its version: `UnsupportedVersionError`):
        fatal.

        Args:
            request: The request `next_request` gave.
            error: Why.
        """
        if self._take_in_flight(request):
            request.result.fail(error)
            self.transition_to_fatal_error(error)

    def handle_response(self, request: TxnRequest, response: Any) -> None:
        """Consume the response to ``request``: complete its result, retry
        it, find a coordinator again, or enter an error state
        (`error_action`).

        Args:
            request: The request `next_request` gave.
            response: The decoded response object of its API.

        Raises:
            IllegalStateError: The response asks for a transition the state
                does not allow; the manager is then in FATAL_ERROR.
        """
        if not self._take_in_flight(request):
            return
        handler = self._handlers[request.api.key]
        handler(self, request, response)

    def _fatal(self, request: TxnRequest, error: KafkaError) -> None:
        request.result.fail(error)
        self.transition_to_fatal_error(error)

    def _abortable(self, request: TxnRequest, error: KafkaError) -> None:
        request.result.fail(error)
        self.transition_to_abortable_error(error)

    def _apply(self, request: TxnRequest, action: ErrorAction, code: int, what: str) -> None:
        """Act on a non-NONE action of a single-error response."""
        error = error_for_code(code)(what)
        if action is ErrorAction.FIND_COORDINATOR:
            coordinator_type = request.coordinator_type if request.coordinator_type is not None else COORDINATOR_TRANSACTION
            self._lookup_coordinator(coordinator_type, request.coordinator_key or self.transactional_id)
            self._reenqueue(request)
        elif action is ErrorAction.RETRY:
            self._reenqueue(request)
        elif action is ErrorAction.FENCED:
            self._fatal(request, ProducerFencedError(what))
        elif action is ErrorAction.ABORTABLE_BUMP:
            if self._coordinator_supports_epoch_bump:
                self._epoch_bump_required = True
                self._abortable(request, error)
            else:
                self._fatal(request, error)
        elif action is ErrorAction.COMMIT_FAILED:
            self._abortable(request, CommitFailedError(f"Transaction offset commit failed due to consumer group metadata mismatch: {error}"))
        elif action in (ErrorAction.ABORTABLE, ErrorAction.TOPIC_UNAUTHORIZED, ErrorAction.PARTITION_FAILED):
            self._abortable(request, error)
        else:
            self._fatal(request, error)

    def _on_find_coordinator(self, request: TxnRequest, response: Any) -> None:
        code = response.error_code
        action = error_action(FIND_COORDINATOR.key, code)
        body: FindCoordinatorRequest = request.body
        if action is ErrorAction.NONE:
            node = Coordinator(response.node_id, response.host, response.port)
            self._coordinators[body.key_type] = node
            log.info("discovered %s coordinator %s", "transaction" if body.key_type else "group", node)
            request.result.done()
            return
        self._apply(request, action, code, f"FindCoordinator({body.key!r}, type {body.key_type}): {response.error_message or ''}")

    def _on_init_producer_id(self, request: TxnRequest, response: Any) -> None:
        code = response.error_code
        action = error_action(INIT_PRODUCER_ID_FULL.key, code)
        if action is not ErrorAction.NONE:
            self._apply(request, action, code, "InitProducerId")
            return
        self.producer_id = response.producer_id
        self.producer_epoch = response.producer_epoch
        log.info("transactional id %s: producer id %d, epoch %d", self.transactional_id, self.producer_id, self.producer_epoch)
        self._transition(State.READY, poison=True)
        self._last_error = None
        self._epoch_bump_required = False
        if self._on_producer_id is not None:
            self._on_producer_id(self.producer_id, self.producer_epoch)
        request.result.done()

    def _on_add_partitions(self, request: TxnRequest, response: Any) -> None:
        results = {
            (topic.name, part.partition_index): part.partition_error_code
            for topic in response.results_by_topic_v3_and_below
            for part in topic.results_by_partition
        }
        failed: list[tuple[TP, int]] = []
        for tp, code in results.items():
            action = error_action(ADD_PARTITIONS_TO_TXN.key, code)
            if action in (ErrorAction.NONE, ErrorAction.TOPIC_UNAUTHORIZED, ErrorAction.PARTITION_FAILED):
                if action is not ErrorAction.NONE:
                    failed.append((tp, code))
                continue
            if code == CONCURRENT_TRANSACTIONS and not self._partitions:
                request.backoff_ms = min(self.retry_backoff_ms, ADD_PARTITIONS_RETRY_BACKOFF_MS)
            else:
                request.backoff_ms = self.retry_backoff_ms
            self._apply(request, action, code, f"AddPartitionsToTxn {tp[0]}-{tp[1]}")
            return
        self._pending_partitions -= set(results)
        unauthorized = sorted({tp[0] for tp, code in failed if code == TOPIC_AUTHORIZATION_FAILED})
        if unauthorized:
            self._abortable(request, TopicAuthorizationFailedError(f"Not authorized to write to topics {unauthorized}"))
        elif failed:
            self._abortable(request, KafkaError(f"Could not add partitions to the transaction due to errors: {dict(failed)}"))
        else:
            log.debug("added partitions %s to the transaction", sorted(results))
            self._partitions |= set(results)
            self._transaction_started = True
            request.result.done()

    def _on_add_offsets(self, request: TxnRequest, response: Any) -> None:
        code = response.error_code
        action = error_action(ADD_OFFSETS_TO_TXN.key, code)
        if action is not ErrorAction.NONE:
            self._apply(request, action, code, f"AddOffsetsToTxn group {request.body.group_id!r}")
            return
        assert request.offsets is not None and request.group_metadata is not None
        self._pending_offsets.update(request.offsets)
        self._enqueue(self._txn_offset_commit_request(request.result, request.group_metadata))
        self._transaction_started = True

    def _txn_offset_commit_request(self, result: TransactionalResult, group: GroupMetadata) -> TxnRequest:
        topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for (topic, partition), value in sorted(self._pending_offsets.items()):
            topics.setdefault(topic, []).append(
                TxnOffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=value.offset,
                    committed_leader_epoch=-1 if value.leader_epoch is None else value.leader_epoch,
                    committed_metadata=value.metadata,
                )
            )
        body = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group.group_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            generation_id=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[TxnOffsetCommitRequestTopic(name=t, partitions=p) for t, p in topics.items()],
        )
        return TxnRequest(
            api=TXN_OFFSET_COMMIT,
            body=body,
            priority=Priority.ADD_PARTITIONS_OR_OFFSETS,
            result=result,
            coordinator_type=COORDINATOR_GROUP,
            coordinator_key=group.group_id,
            max_version=MAX_VERSIONS[TXN_OFFSET_COMMIT.key],
            min_version=GROUP_METADATA_MIN_VERSION if _has_group_metadata(group) else 0,
            backoff_ms=self.retry_backoff_ms,
            group_metadata=group,
        )

    def _on_txn_offset_commit(self, request: TxnRequest, response: Any) -> None:
        rediscovered = False
        for topic in response.topics:
            for part in topic.partitions:
                tp = (topic.name, part.partition_index)
                action = error_action(TXN_OFFSET_COMMIT.key, part.error_code)
                if action is ErrorAction.NONE:
                    self._pending_offsets.pop(tp, None)
                elif action is ErrorAction.FIND_COORDINATOR:
                    if not rediscovered:
                        rediscovered = True
                        self._lookup_coordinator(COORDINATOR_GROUP, request.body.group_id)
                elif action is not ErrorAction.RETRY:
                    self._apply(request, action, part.error_code, f"TxnOffsetCommit {tp[0]}-{tp[1]} group {request.body.group_id!r}")
                    break
            if request.result.is_completed:
                break
        if request.result.is_completed:
            self._pending_offsets.clear()
        elif not self._pending_offsets:
            request.result.done()
        else:
            self._reenqueue(request)

    def _on_end_txn(self, request: TxnRequest, response: Any) -> None:
        code = response.error_code
        action = error_action(END_TXN.key, code)
        if action is not ErrorAction.NONE:
            self._apply(request, action, code, f"EndTxn(committed={request.body.committed})")
            return
        self._complete_transaction()
        request.result.done()

    _handlers: dict[int, Callable[[TransactionManager, TxnRequest, Any], None]] = {
        FIND_COORDINATOR.key: _on_find_coordinator,
        INIT_PRODUCER_ID_FULL.key: _on_init_producer_id,
        ADD_PARTITIONS_TO_TXN.key: _on_add_partitions,
        ADD_OFFSETS_TO_TXN.key: _on_add_offsets,
        END_TXN.key: _on_end_txn,
        TXN_OFFSET_COMMIT.key: _on_txn_offset_commit,
    }
