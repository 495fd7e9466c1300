"""The rules of the transactional producer (KIP-98), as Kafka's Java
client applies them: the states of `kclient.client.producer.transactions.TransactionManager`
and their legal transitions, the order of its requests, what each error
code does per request type (`error_action`), and what ``transactional.id``
requires of the other producer settings (`resolve_transactional_config`).

Pure data and functions: no I/O, no clock."""

from __future__ import annotations

import enum

import attrs

from kclient.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_AUTHORIZATION_FAILED,
    ILLEGAL_GENERATION,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TXN_STATE,
    NOT_COORDINATOR,
    OPERATION_NOT_ATTEMPTED,
    PRODUCER_FENCED,
    REQUEST_TIMED_OUT,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTION_ABORTABLE,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_PRODUCER_ID,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    ClusterAuthorizationFailedError,
    ConfigError,
    KafkaError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    UnsupportedVersionError,
    error_for_code,
)
from kclient.protocol.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN
from kclient.protocol.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN
from kclient.protocol.messages.end_txn import END_TXN
from kclient.protocol.messages.find_coordinator import FIND_COORDINATOR
from kclient.protocol.messages.init_producer_id import INIT_PRODUCER_ID_FULL
from kclient.protocol.messages.txn_offset_commit import TXN_OFFSET_COMMIT

__all__ = [
    "ADD_PARTITIONS_RETRY_BACKOFF_MS",
    "EPOCH_BUMP_MIN_VERSION",
    "FATAL_BATCH_ERRORS",
    "MAX_VERSIONS",
    "MAX_EPOCH",
    "VALID_SOURCES",
    "bump_idempotent_epoch",
    "ErrorAction",
    "Priority",
    "State",
    "TransactionalConfig",
    "error_action",
    "is_transition_valid",
    "resolve_transactional_config",
]

#: The backoff of an AddPartitionsToTxn retried after CONCURRENT_TRANSACTIONS
#: while the transaction holds no partition yet (the previous transaction is
#: still completing): shorter than ``retry.backoff.ms``, as Kafka does (ms).
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20
#: Versions the manager builds requests for (the caller negotiates below
#: them): AddPartitionsToTxn v4+ is the brokers' batched form; EndTxn v5 and
#: TxnOffsetCommit v5 belong to transaction version 2 (KIP-890 part 2), which
#: this manager does not speak.
MAX_VERSIONS: dict[int, int] = {
    FIND_COORDINATOR.key: FIND_COORDINATOR.max_version,
    INIT_PRODUCER_ID_FULL.key: INIT_PRODUCER_ID_FULL.max_version,
    ADD_PARTITIONS_TO_TXN.key: 3,
    ADD_OFFSETS_TO_TXN.key: ADD_OFFSETS_TO_TXN.max_version,
    END_TXN.key: 4,
    TXN_OFFSET_COMMIT.key: TXN_OFFSET_COMMIT.max_version,
}
#: The highest producer epoch (int16); a bump past it needs a new producer id.
MAX_EPOCH = 2**15 - 1
#: InitProducerId from this version carries the producer id and epoch, so a
#: coordinator can bump the epoch of an existing producer (KIP-360).
EPOCH_BUMP_MIN_VERSION = 3


class State(enum.Enum):
    """The transaction manager's states (Kafka's ``TransactionManager.State``)."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


#: ``{target: the states it may be entered from}``; FATAL_ERROR may be
#: entered from any state, and no transition leaves it.
VALID_SOURCES: dict[State, frozenset[State]] = {
    State.UNINITIALIZED: frozenset((State.READY, State.ABORTABLE_ERROR)),
    State.INITIALIZING: frozenset((State.UNINITIALIZED, State.ABORTING_TRANSACTION)),
    State.READY: frozenset((State.INITIALIZING, State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION)),
    State.IN_TRANSACTION: frozenset((State.READY,)),
    State.COMMITTING_TRANSACTION: frozenset((State.IN_TRANSACTION,)),
    State.ABORTING_TRANSACTION: frozenset((State.IN_TRANSACTION, State.ABORTABLE_ERROR)),
    State.ABORTABLE_ERROR: frozenset(
        (State.IN_TRANSACTION, State.COMMITTING_TRANSACTION, State.ABORTABLE_ERROR, State.INITIALIZING)
    ),
    State.FATAL_ERROR: frozenset(State),
}


def is_transition_valid(source: State, target: State) -> bool:
    """Whether Kafka's transaction manager may go from ``source`` to ``target``.

    Args:
        source: The current state.
        target: The state asked for.

    Returns:
        True when the transition is legal.
    """
    return source in VALID_SOURCES[target]


class Priority(enum.IntEnum):
    """The order in which queued requests go out (lowest first): the
    coordinator must be known before anything, a producer id before adding
    partitions, EndTxn after the partitions and offsets, and the epoch bump
    of an abort after its EndTxn."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3
    EPOCH_BUMP = 4


class ErrorAction(enum.Enum):
    """What an error code in a transactional response does (`error_action`)."""

    #: No error.
    NONE = "none"
    #: Send the same request again after ``retry.backoff.ms``.
    RETRY = "retry"
    #: Forget the coordinator, find it again (FindCoordinator), then retry.
    FIND_COORDINATOR = "find_coordinator"
    #: The transaction must be aborted; the producer goes on after that.
    ABORTABLE = "abortable"
    #: Abortable with an epoch bump (KIP-360) when the coordinator can bump
    #: the epoch (InitProducerId v3+), else fatal.
    ABORTABLE_BUMP = "abortable_bump"
    #: AddPartitionsToTxn: this partition was not added (other partitions
    #: of the request failed, or an unexpected error); abortable.
    PARTITION_FAILED = "partition_failed"
    #: AddPartitionsToTxn: the principal may not write the topic; abortable.
    TOPIC_UNAUTHORIZED = "topic_unauthorized"
    #: TxnOffsetCommit: the consumer's group metadata is stale (KIP-447);
    #: abortable, raised as `CommitFailedError`.
    COMMIT_FAILED = "commit_failed"
    #: A newer producer with the same transactional id exists: fatal, raised
    #: as `ProducerFencedError` (INVALID_PRODUCER_EPOCH from an older
    #: coordinator means the same).
    FENCED = "fenced"
    #: The producer cannot go on: close it.
    FATAL = "fatal"


_COORDINATOR_MOVED = {NOT_COORDINATOR: ErrorAction.FIND_COORDINATOR, COORDINATOR_NOT_AVAILABLE: ErrorAction.FIND_COORDINATOR}
_FENCED = {INVALID_PRODUCER_EPOCH: ErrorAction.FENCED, PRODUCER_FENCED: ErrorAction.FENCED}
_PRODUCER_ID_LOST = {UNKNOWN_PRODUCER_ID: ErrorAction.ABORTABLE_BUMP, INVALID_PRODUCER_ID_MAPPING: ErrorAction.ABORTABLE_BUMP}
_TXN_FATAL = {TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorAction.FATAL, INVALID_TXN_STATE: ErrorAction.FATAL}

#: ``{api key: ({code: action}, action of any other non-retriable code)}``,
#: Kafka's classification per request type. A code not in the table is
#: RETRY when its class is retriable, else the default.
_ERROR_TABLES: dict[int, tuple[dict[int, ErrorAction], ErrorAction]] = {
    FIND_COORDINATOR.key: (
        {
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorAction.FATAL,
            GROUP_AUTHORIZATION_FAILED: ErrorAction.ABORTABLE,
            TRANSACTION_ABORTABLE: ErrorAction.ABORTABLE,
        },
        ErrorAction.FATAL,
    ),
    INIT_PRODUCER_ID_FULL.key: (
        {
            **_COORDINATOR_MOVED,
            **_FENCED,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorAction.ABORTABLE,
            CLUSTER_AUTHORIZATION_FAILED: ErrorAction.ABORTABLE,
            TRANSACTION_ABORTABLE: ErrorAction.ABORTABLE,
        },
        ErrorAction.FATAL,
    ),
    ADD_PARTITIONS_TO_TXN.key: (
        {
            **_COORDINATOR_MOVED,
            **_FENCED,
            **_TXN_FATAL,
            **_PRODUCER_ID_LOST,
            CONCURRENT_TRANSACTIONS: ErrorAction.RETRY,
            TOPIC_AUTHORIZATION_FAILED: ErrorAction.TOPIC_UNAUTHORIZED,
            OPERATION_NOT_ATTEMPTED: ErrorAction.PARTITION_FAILED,
            TRANSACTION_ABORTABLE: ErrorAction.ABORTABLE,
        },
        ErrorAction.PARTITION_FAILED,
    ),
    ADD_OFFSETS_TO_TXN.key: (
        {
            **_COORDINATOR_MOVED,
            **_FENCED,
            **_TXN_FATAL,
            **_PRODUCER_ID_LOST,
            GROUP_AUTHORIZATION_FAILED: ErrorAction.ABORTABLE,
            TRANSACTION_ABORTABLE: ErrorAction.ABORTABLE,
        },
        ErrorAction.FATAL,
    ),
    END_TXN.key: (
        {**_COORDINATOR_MOVED, **_FENCED, **_TXN_FATAL, **_PRODUCER_ID_LOST, TRANSACTION_ABORTABLE: ErrorAction.ABORTABLE},
        ErrorAction.FATAL,
    ),
    TXN_OFFSET_COMMIT.key: (
        {
            **_COORDINATOR_MOVED,
            **_FENCED,
            REQUEST_TIMED_OUT: ErrorAction.FIND_COORDINATOR,
            GROUP_AUTHORIZATION_FAILED: ErrorAction.ABORTABLE,
            FENCED_INSTANCE_ID: ErrorAction.ABORTABLE,
            TRANSACTION_ABORTABLE: ErrorAction.ABORTABLE,
            UNKNOWN_MEMBER_ID: ErrorAction.COMMIT_FAILED,
            ILLEGAL_GENERATION: ErrorAction.COMMIT_FAILED,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorAction.FATAL,
            UNSUPPORTED_FOR_MESSAGE_FORMAT: ErrorAction.FATAL,
        },
        ErrorAction.FATAL,
    ),
}


def error_action(api_key: int, code: int) -> ErrorAction:
    """What an error code in a response of a transactional request does,
    as Kafka's client classifies it for that request type.

    Args:
        api_key: The request's API key (FindCoordinator 10, InitProducerId
            22, AddPartitionsToTxn 24, AddOffsetsToTxn 25, EndTxn 26,
            TxnOffsetCommit 28).
        code: The error code (0: none).

    Returns:
        The `ErrorAction`.

    Raises:
        ValueError: ``api_key`` is not one of those.
    """
    if code == 0:
        return ErrorAction.NONE
    try:
        table, default = _ERROR_TABLES[api_key]
    except KeyError:
        raise ValueError(f"API key {api_key} is not a transactional request") from None
    action = table.get(code)
    if action is not None:
        return action
    return ErrorAction.RETRY if error_for_code(code).retriable else default


#: Errors of a Produce (or any batch failure) that make a transactional
#: producer fatal; any other makes the transaction abortable.
FATAL_BATCH_ERRORS: tuple[type[KafkaError], ...] = (
    ClusterAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    ProducerFencedError,
    UnsupportedVersionError,
)




@attrs.frozen
class TransactionalConfig:
    """The producer settings a transactional id implies
    (`resolve_transactional_config`).

    Attributes:
        transactional_id: ``transactional.id``, or None.
        transaction_timeout_ms: ``transaction.timeout.ms`` (ms).
        enable_idempotence: The effective ``enable.idempotence``.
        acks: The effective ``acks`` (-1: all).
    """

    transactional_id: str | None
    transaction_timeout_ms: int
    enable_idempotence: bool
    acks: int


def resolve_transactional_config(
    transactional_id: str | None,
    transaction_timeout_ms: int = 60_000,
    *,
    enable_idempotence: bool | None = None,
    acks: int | None = None,
    retries: int | None = None,
    max_in_flight: int | None = None,
    default_acks: int = 1,
) -> TransactionalConfig:
    """Check ``transactional.id`` and ``transaction.timeout.ms`` against the
    other producer settings, as Kafka's ``ProducerConfig`` does, and return
    the settings they imply. None means "not set by the user".

    A transactional id implies ``enable.idempotence=true`` and ``acks=all``
    (KIP-98); a value the user set that conflicts raises.

    Args:
        transactional_id: ``transactional.id`` (None: not transactional).
        transaction_timeout_ms: ``transaction.timeout.ms`` (ms, default
            60000); the coordinator refuses more than its
            ``transaction.max.timeout.ms``.
        enable_idempotence: ``enable.idempotence`` if set.
        acks: ``acks`` / ``request.required.acks`` if set (-1 = all).
        retries: ``retries`` / ``message.send.max.retries`` if set.
        max_in_flight: ``max.in.flight.requests.per.connection`` if set.
        default_acks: The acks used when ``acks`` is not set and there is
            no transactional id.

    Returns:
        The `TransactionalConfig`.

    Raises:
        ConfigError: An empty ``transactional.id``, a
            ``transaction.timeout.ms`` below 1, or a transactional id with
            ``enable.idempotence=false``, ``acks`` other than all,
            ``retries=0`` or more than 5 requests in flight; the message
            names both properties.
    """
    if transaction_timeout_ms < 1:
        raise ConfigError(f"Invalid value {transaction_timeout_ms} for configuration transaction.timeout.ms: must be at least 1")
    if transactional_id is None:
        return TransactionalConfig(None, transaction_timeout_ms, bool(enable_idempotence), default_acks if acks is None else acks)
    if not transactional_id:
        raise ConfigError("Invalid value '' for configuration transactional.id: must be non-empty")
    conflicts = [
        ("enable.idempotence", enable_idempotence is False, "must be true"),
        ("acks", acks is not None and acks != -1, "must be all (-1)"),
        ("retries", retries == 0, "must be non-zero"),
        ("max.in.flight.requests.per.connection", max_in_flight is not None and max_in_flight > 5, "must be at most 5"),
    ]
    for name, bad, rule in conflicts:
        if bad:
            raise ConfigError(f"Cannot set transactional.id={transactional_id!r} with this {name}: {name} {rule} for a transactional producer")
    return TransactionalConfig(transactional_id, transaction_timeout_ms, True, -1)



def bump_idempotent_epoch(producer_id: int, producer_epoch: int) -> tuple[int, int] | None:
    """KIP-360 for the idempotent (non-transactional) producer: after a
    batch's sequence can no longer be resolved (OUT_OF_ORDER_SEQUENCE_NUMBER
    with a gap, UNKNOWN_PRODUCER_ID, an expired batch), Kafka's client bumps
    the epoch of its producer id locally, once no batch is in flight, and
    numbers every partition from 0 again; the partition leaders accept the
    higher epoch at sequence 0. At the highest epoch it asks for a new
    producer id instead.

    Args:
        producer_id: The current producer id (-1: none).
        producer_epoch: Its current epoch.

    Returns:
        ``(producer_id, producer_epoch + 1)``, or None when a new producer
        id is needed (none yet, or the epoch is exhausted).
    """
    if producer_id < 0 or producer_epoch >= MAX_EPOCH:
        return None
    return (producer_id, producer_epoch + 1)
