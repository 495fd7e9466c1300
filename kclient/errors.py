"""One exception tree for kclient.

Broker errors carry the Kafka error code (see the "Error Codes" table of the
Kafka protocol guide) and whether a client may retry them. ``error_for_code``
maps a code read off the wire to its class; ``raise_for_code`` raises it.

Client-side errors (configuration, queue full, timeouts, corrupt data that the
client itself detected) derive from `KafkaError` too, so an application
can catch everything kclient raises with one ``except``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

# --- error codes ---------------------------------------------------------------
# The codes of the "Error Codes" table of the Kafka protocol guide
# (https://kafka.apache.org/protocol#protocol_error_codes) that kclient
# uses, as plain ints for code that writes or compares them (the bundled
# broker builds responses with them). Each exception class below carries its
# code as ``code``; this table is the one place a number is written.

#: No error.
NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_FETCH_SIZE = 4
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
BROKER_NOT_AVAILABLE = 8
#: Metadata v0: a replica of the partition is not live.
REPLICA_NOT_AVAILABLE = 9
MESSAGE_TOO_LARGE = 10
#: An inter-broker request from a controller older than one already seen.
STALE_CONTROLLER_EPOCH = 11
NETWORK_EXCEPTION = 13
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
NOT_ENOUGH_REPLICAS = 19
#: Produce: appended to the leader's log, then too few in-sync replicas.
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_REQUIRED_ACKS = 21
#: Produce: a record's timestamp is further from the broker's clock than
#: the topic's message.timestamp.before/after.max.ms allow (KIP-937).
INVALID_TIMESTAMP = 32
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
#: Admin requests (CreateTopics, DeleteTopics, ...) sent to a broker that
#: is not the controller (KIP-4): send them to Metadata's controller_id.
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
#: Idempotent producer (KIP-98): a batch carries a producer epoch below the
#: one the partition last saw for that producer id.
INVALID_PRODUCER_EPOCH = 47
SASL_AUTHENTICATION_FAILED = 58
#: Idempotent producer (KIP-98): the partition holds no state for the
#: producer id and the batch does not start at sequence 0.
UNKNOWN_PRODUCER_ID = 59
#: Fetch sessions (KIP-227): the session id is unknown. The bundled broker
#: answers it; no exception class, since kclient's clients open no sessions.
FETCH_SESSION_ID_NOT_FOUND = 70
#: KIP-320: the request's leader epoch is older than the broker's.
FENCED_LEADER_EPOCH = 74
#: KIP-320: the request's leader epoch is newer than the broker's.
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87
# Consumer groups and the offset manager (Kafka protocol guide, "Error Codes").
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
#: KIP-345: a static member's ``group.instance.id`` is now used by a newer
#: member id (the same instance restarted): the old one is fenced.
FENCED_INSTANCE_ID = 82
#: OffsetDelete (KIP-496): a member of the group consumes the topic.
GROUP_SUBSCRIBED_TO_TOPIC = 86
#: OffsetFetch with ``require_stable`` (KIP-447): a transaction holds a
#: pending offset of the partition; retry once it commits or aborts.
UNSTABLE_OFFSET_COMMIT = 88
#: KIP-516: no topic has the topic id asked for (Metadata v12+ by id).
UNKNOWN_TOPIC_ID = 100
#: KIP-848: the member epoch is fenced: rejoin with epoch 0.
FENCED_MEMBER_EPOCH = 110
#: KIP-848: the instance id is still owned by another member that has not
#: left (ConsumerGroupHeartbeat with a ``group.instance.id`` in use).
UNRELEASED_INSTANCE_ID = 111
#: KIP-848: the server-side assignor named is not supported.
UNSUPPORTED_ASSIGNOR = 112
#: KIP-848: an OffsetCommit carries an older member epoch than the member's.
STALE_MEMBER_EPOCH = 113
#: KIP-98 transactions: the codes the transaction coordinator answers.
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
#: SCRAM credential administration (KIP-554).
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120
#: The broker's log directory failed (KIP-112).
KAFKA_STORAGE_ERROR = 56
#: Authorization (ACLs, KIP-11): the principal may not use the topic,
#: group, cluster or transactional id the request names.
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
#: An ACL request to a broker without an authorizer (KIP-11).
SECURITY_DISABLED = 54


class KafkaError(Exception):
    """Base of every error kclient raises."""

    #: Kafka error code, or ``None`` for errors that are not broker errors.
    code: ClassVar[int | None] = None
    #: Kafka's upper-case name of the error code (``"OFFSET_OUT_OF_RANGE"``).
    name: ClassVar[str] = "KAFKA_ERROR"
    #: Whether the operation may succeed if retried (after a backoff and,
    #: for leadership errors, a metadata refresh).
    retriable: ClassVar[bool] = False
    #: Whether a metadata refresh should precede the retry.
    invalid_metadata: ClassVar[bool] = False


class ConfigError(KafkaError, ValueError):
    """A configuration value is missing, unknown or out of range."""

    name = "CONFIG_ERROR"


class KafkaTimeoutError(KafkaError):
    """An operation did not finish within its timeout (ms in the message)."""

    name = "TIMEOUT"
    retriable = True


class KafkaConnectionError(KafkaError):
    """A broker connection could not be made or was lost mid-request."""

    name = "CONNECTION_ERROR"
    retriable = True
    invalid_metadata = True


class QueueFullError(KafkaError):
    """The async producer's queue (``queue.buffering.max.messages``) is full and
    ``queue.enqueue.timeout.ms`` said not to wait (0) or the wait ran out.

    Attributes:
        not_enqueued: the ProducerData that were not queued (the ones
            before them were), in order.
    """

    name = "QUEUE_FULL"

    def __init__(self, *args: object, not_enqueued: list[Any] | None = None) -> None:
        super().__init__(*args)
        self.not_enqueued: list[Any] = [] if not_enqueued is None else not_enqueued


class IllegalStateError(KafkaError):
    """A client was used in a state that does not allow the call: after it
    was shut down, a second ``create_message_streams``, ``flush()`` or
    ``close()`` from the producer's own send thread (Kafka's
    IllegalStateException)."""

    name = "ILLEGAL_STATE"


class LoopClosedError(IllegalStateError):
    """A blocking client's event loop thread has stopped (the client was
    closed), so the call cannot run."""

    name = "LOOP_CLOSED"


class ClientForkedError(IllegalStateError):
    """A blocking client was used in a process forked after it was
    created (``os.fork``, ``multiprocessing``'s fork start method, a
    pre-forking server). Its event loop thread and connections belong to
    the parent and do not exist in the child: create clients after the
    fork, in the process that uses them (issue 30)."""

    name = "CLIENT_FORKED"


class ProducerClosedError(KafkaError):
    """``send`` was called on a producer after ``close()``."""

    name = "PRODUCER_CLOSED"


class FailedToSendMessageError(KafkaError):
    """The producer gave up on a batch after ``message.send.max.retries``
    retries; ``__cause__`` is the last broker or connection error.

    Outcomes are split in two. A message is *possibly written* when some
    attempt's Produce request was written to the broker and no answer
    settled it: no response within ``request.timeout.ms``, the connection
    lost after the write, or the broker's REQUEST_TIMED_OUT /
    NOT_ENOUGH_REPLICAS_AFTER_APPEND. It may be in the log (once, or more
    than once if a retry also landed). Every other failed message is *not
    sent*: nothing of it reached a broker (connection refused, no leader or
    unknown topic, a request the broker refused with an error code, a
    serializer error), so it is not in the log. ``possibly_written`` is an
    upper bound of what a failure left in the log; ``not_sent`` is certain.

    Retrying a possibly-written message (the producer's own
    ``message.send.max.retries``, or the application re-sending after this
    error) may write it twice. ``enable.idempotence`` (KIP-98) makes the
    producer's own retries safe (the broker recognises a resent batch by its
    producer id and sequence numbers); an application's re-send is a new
    batch and may still duplicate.

    Attributes:
        lost_messages: how many messages failed (None: not counted), both kinds.
        failed_partitions: ``{(topic, partition): messages failed}``,
            partition -1 when the topic itself failed (None: not known).
        possibly_written: how many of ``lost_messages`` may be in the log
            (0: none of them reached a broker).
        possibly_written_partitions: ``{(topic, partition): messages
            possibly written}`` for the partitions with any.
        failed_records: ``{(topic, partition): [(key, value), ...]}``, the
            failed records themselves (serialized key and value bytes) in
            send order, so the application can tell exactly which ones to
            resend; empty when the producer could not tell (a custom
            ``event.handler``).
    """

    name = "FAILED_TO_SEND_MESSAGE"

    def __init__(
        self,
        *args: object,
        lost_messages: int | None = None,
        failed_partitions: dict[tuple[str, int], int] | None = None,
        possibly_written: int = 0,
        possibly_written_partitions: dict[tuple[str, int], int] | None = None,
        failed_records: dict[tuple[str, int], list[Any]] | None = None,
    ) -> None:
        super().__init__(*args)
        self.failed_records: dict[tuple[str, int], list[Any]] = failed_records or {}
        self.lost_messages = lost_messages
        self.failed_partitions = failed_partitions
        self.possibly_written = possibly_written
        self.possibly_written_partitions: dict[tuple[str, int], int] = possibly_written_partitions or {}

    @property
    def not_sent(self) -> int | None:
        """How many of ``lost_messages`` certainly are not in the log (None:
        not counted)."""
        if self.lost_messages is None:
            return None
        return max(0, self.lost_messages - self.possibly_written)


class ProtocolError(KafkaError):
    """Bytes on the wire do not follow the Kafka protocol (truncated or
    malformed frame, unknown correlation id, bad length)."""

    name = "PROTOCOL_ERROR"


class FrameTooLargeError(ProtocolError):
    """A frame's int32 size prefix declares more bytes than this end accepts.

    Raised as soon as the 4-byte size is read, before any of the frame is
    buffered; the connection is then closed (later frames cannot be found).
    A client accepts a response as large as the request it answers asked
    for: a Fetch's ``max_bytes`` / summed ``partition_max_bytes``, plus
    ``kclient.protocol.connection.DEFAULT_RESPONSE_BYTES`` (8 MiB) for
    headers, metadata-sized answers and the one oversized first batch a
    broker may return (KIP-74). Kafka's broker applies
    ``socket.request.max.bytes`` to requests.

    Attributes:
        size: the size the frame declared (bytes, without the prefix).
        max_bytes: the cap it exceeded (bytes).
    """

    name = "FRAME_TOO_LARGE"

    def __init__(self, *args: object, size: int = 0, max_bytes: int = 0) -> None:
        super().__init__(*args)
        self.size = size
        self.max_bytes = max_bytes


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap brokers (``metadata.broker.list``) answered,
    after every retry the caller allows (a `KafkaConnectionError`: the
    producer retries it with ``retry.backoff.ms`` backoff, up to
    ``message.send.max.retries`` times, before giving up)."""

    name = "NO_BROKERS_AVAILABLE"
    retriable = True


class ConsumerTimeoutError(KafkaError):
    """No message reached a `KafkaStream`
    within ``consumer.timeout.ms`` (Kafka's ConsumerTimeoutException). The
    stream stays usable: iterate it again to keep waiting."""

    name = "CONSUMER_TIMEOUT"


class ConsumerRebalanceFailedError(KafkaError):
    """A consumer could not take ownership of its partitions in ZooKeeper
    after ``rebalance.max.retries`` retries, ``rebalance.backoff.ms`` apart
    (Kafka's ConsumerRebalanceFailedException: the last step of the
    "Consumer rebalancing algorithm" of the Kafka 0.8 documentation,
    https://kafka.apache.org/082/documentation.html, "Distribution")."""

    name = "CONSUMER_REBALANCE_FAILED"


class ZooKeeperError(KafkaError):
    """A ZooKeeper operation failed (``__cause__`` is kazoo's exception)."""

    name = "ZOOKEEPER_ERROR"
    retriable = True


class ZkTimeoutError(ZooKeeperError, KafkaTimeoutError):
    """No ZooKeeper server of ``zookeeper.connect`` answered within
    ``zookeeper.connection.timeout.ms`` (Kafka's ZkTimeoutException)."""

    name = "ZK_TIMEOUT"


class NotSupportedError(ConfigError):
    """A configured feature exists in Kafka but not in kclient (e.g.
    ``offsets.storage=kafka`` for the ZooKeeper consumer)."""

    name = "NOT_SUPPORTED"


class BrokerResponseError(KafkaError):
    """An error code a broker returned. Subclasses are named after the code."""

    def __init__(self, message: str = "") -> None:
        text = f"[Error {self.code}] {self.name}"
        if message:
            text += f": {message}"
        super().__init__(text)


_BY_CODE: dict[int, type[BrokerResponseError]] = {}


def _code(code: int, name: str, *, retriable: bool = False, invalid_metadata: bool = False) -> Callable[[type[BrokerResponseError]], type[BrokerResponseError]]:
    def register(cls: type[BrokerResponseError]) -> type[BrokerResponseError]:
        cls.code = code
        cls.name = name
        cls.retriable = retriable
        cls.invalid_metadata = invalid_metadata
        _BY_CODE[code] = cls
        return cls

    return register


@_code(UNKNOWN_SERVER_ERROR, "UNKNOWN_SERVER_ERROR")
class UnknownServerError(BrokerResponseError):
    """-1: the broker hit an unexpected error."""


@_code(OFFSET_OUT_OF_RANGE, "OFFSET_OUT_OF_RANGE")
class OffsetOutOfRangeError(BrokerResponseError):
    """1: the requested offset is below the log start offset or above the log
    end offset of the partition (Kafka documentation
    https://kafka.apache.org/documentation/#log, "Reads": an offset out of
    range raises OutOfRangeException)."""


@_code(CORRUPT_MESSAGE, "CORRUPT_MESSAGE", retriable=True)
class CorruptRecordError(BrokerResponseError):
    """2: a record batch failed its CRC or size check."""


@_code(UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION", retriable=True, invalid_metadata=True)
class UnknownTopicOrPartitionError(BrokerResponseError):
    """3: this broker does not host the topic-partition."""


@_code(INVALID_FETCH_SIZE, "INVALID_FETCH_SIZE")
class InvalidFetchSizeError(BrokerResponseError):
    """4: the requested fetch size is invalid."""


@_code(LEADER_NOT_AVAILABLE, "LEADER_NOT_AVAILABLE", retriable=True, invalid_metadata=True)
class LeaderNotAvailableError(BrokerResponseError):
    """5: the partition has no leader right now (e.g. just created)."""


@_code(NOT_LEADER_OR_FOLLOWER, "NOT_LEADER_OR_FOLLOWER", retriable=True, invalid_metadata=True)
class NotLeaderForPartitionError(BrokerResponseError):
    """6: this broker is not the leader of the partition.

    A client that looked the partition up again after this error (the
    `SimpleConsumer` does) fills in where the leader is now.

    Attributes:
        leader: ``(host, port)`` of the partition's current leader, or None
            when it is not known (no leader elected yet, or not looked up).
        leader_id: That leader's broker id, -1 when not known.
    """

    leader: tuple[str, int] | None = None
    leader_id: int = -1


@_code(REQUEST_TIMED_OUT, "REQUEST_TIMED_OUT", retriable=True)
class RequestTimedOutError(BrokerResponseError):
    """7: the broker could not complete the request within its timeout."""


@_code(BROKER_NOT_AVAILABLE, "BROKER_NOT_AVAILABLE")
class BrokerNotAvailableError(BrokerResponseError):
    """8: the broker is not alive."""


@_code(MESSAGE_TOO_LARGE, "MESSAGE_TOO_LARGE")
class MessageSizeTooLargeError(BrokerResponseError):
    """10: a record batch is larger than ``message.max.bytes``, or (client
    side) a single batch is larger than the fetch size asked for."""


@_code(NETWORK_EXCEPTION, "NETWORK_EXCEPTION", retriable=True, invalid_metadata=True)
class NetworkExceptionError(BrokerResponseError):
    """13: the server disconnected before a response was received."""


@_code(COORDINATOR_NOT_AVAILABLE, "COORDINATOR_NOT_AVAILABLE", retriable=True)
class CoordinatorNotAvailableError(BrokerResponseError):
    """15: the group coordinator is not available."""


@_code(NOT_COORDINATOR, "NOT_COORDINATOR", retriable=True)
class NotCoordinatorError(BrokerResponseError):
    """16: this broker is not the coordinator of the group."""


@_code(INVALID_TOPIC_EXCEPTION, "INVALID_TOPIC_EXCEPTION")
class InvalidTopicError(BrokerResponseError):
    """17: the topic name is invalid (empty, too long, bad characters)."""


@_code(RECORD_LIST_TOO_LARGE, "RECORD_LIST_TOO_LARGE")
class RecordListTooLargeError(BrokerResponseError):
    """18: a produce request's record set is larger than the segment size."""


@_code(NOT_ENOUGH_REPLICAS, "NOT_ENOUGH_REPLICAS", retriable=True)
class NotEnoughReplicasError(BrokerResponseError):
    """19: fewer in-sync replicas than required."""


@_code(INVALID_REQUIRED_ACKS, "INVALID_REQUIRED_ACKS")
class InvalidRequiredAcksError(BrokerResponseError):
    """21: ``acks`` is not -1, 0 or 1."""


@_code(INVALID_TIMESTAMP, "INVALID_TIMESTAMP")
class InvalidTimestampError(BrokerResponseError):
    """32: a record's timestamp is out of the range the topic accepts
    (``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms``,
    KIP-937; Kafka 4.0+ refuses CreateTimes more than an hour ahead by default)."""


@_code(UNSUPPORTED_VERSION, "UNSUPPORTED_VERSION")
class UnsupportedVersionError(BrokerResponseError):
    """35: the API version of the request is not supported by the broker."""


@_code(TOPIC_ALREADY_EXISTS, "TOPIC_ALREADY_EXISTS")
class TopicAlreadyExistsError(BrokerResponseError):
    """36: the topic exists already."""


@_code(INVALID_REQUEST, "INVALID_REQUEST")
class InvalidRequestError(BrokerResponseError):
    """42: the request is malformed or violates the protocol."""


@_code(UNSUPPORTED_FOR_MESSAGE_FORMAT, "UNSUPPORTED_FOR_MESSAGE_FORMAT")
class UnsupportedForMessageFormatError(BrokerResponseError):
    """43: the message format version does not support the request."""


@_code(OUT_OF_ORDER_SEQUENCE_NUMBER, "OUT_OF_ORDER_SEQUENCE_NUMBER")
class OutOfOrderSequenceNumberError(BrokerResponseError):
    """45: an idempotent producer's sequence number is out of order."""


@_code(DUPLICATE_SEQUENCE_NUMBER, "DUPLICATE_SEQUENCE_NUMBER")
class DuplicateSequenceNumberError(BrokerResponseError):
    """46: an idempotent producer's batch was already written."""


@_code(REPLICA_NOT_AVAILABLE, "REPLICA_NOT_AVAILABLE", retriable=True)
class ReplicaNotAvailableError(BrokerResponseError):
    """9: a replica of the partition is not available (Metadata v0)."""


@_code(STALE_CONTROLLER_EPOCH, "STALE_CONTROLLER_EPOCH")
class StaleControllerEpochError(BrokerResponseError):
    """11: a controller request carries an epoch older than the latest the
    broker has seen (a deposed controller)."""


@_code(INVALID_PRODUCER_EPOCH, "INVALID_PRODUCER_EPOCH")
class InvalidProducerEpochError(BrokerResponseError):
    """47: the producer's epoch is older than the partition's (a newer
    producer with the same id exists; KIP-98)."""


@_code(UNKNOWN_PRODUCER_ID, "UNKNOWN_PRODUCER_ID")
class UnknownProducerIdError(BrokerResponseError):
    """59: the partition has no state for this producer id (KIP-98)."""


@_code(FENCED_LEADER_EPOCH, "FENCED_LEADER_EPOCH", retriable=True, invalid_metadata=True)
class FencedLeaderEpochError(BrokerResponseError):
    """74: the request's leader epoch is older than the broker's (KIP-320)."""


@_code(UNKNOWN_LEADER_EPOCH, "UNKNOWN_LEADER_EPOCH", retriable=True)
class UnknownLeaderEpochError(BrokerResponseError):
    """75: the request's leader epoch is newer than the broker's (KIP-320)."""


@_code(INVALID_PARTITIONS, "INVALID_PARTITIONS")
class InvalidPartitionsError(BrokerResponseError):
    """37: the number of partitions is invalid (below 1)."""


@_code(INVALID_REPLICATION_FACTOR, "INVALID_REPLICATION_FACTOR")
class InvalidReplicationFactorError(BrokerResponseError):
    """38: the replication factor is below 1 or above the live brokers."""


@_code(INVALID_REPLICA_ASSIGNMENT, "INVALID_REPLICA_ASSIGNMENT")
class InvalidReplicaAssignmentError(BrokerResponseError):
    """39: a manual replica assignment is invalid."""


@_code(INVALID_CONFIG, "INVALID_CONFIG")
class InvalidConfigurationError(BrokerResponseError):
    """40: a topic config name or value is invalid."""


@_code(NOT_CONTROLLER, "NOT_CONTROLLER", retriable=True)
class NotControllerError(BrokerResponseError):
    """41: the broker is not the controller; admin requests go to the
    controller Metadata v1+ names (KIP-4)."""


@_code(UNSUPPORTED_COMPRESSION_TYPE, "UNSUPPORTED_COMPRESSION_TYPE")
class UnsupportedCompressionTypeError(BrokerResponseError):
    """76: the compression codec cannot be used with this request version."""


@_code(INVALID_RECORD, "INVALID_RECORD")
class InvalidRecordError(BrokerResponseError):
    """87: a record failed the broker's validation."""


@_code(OFFSET_METADATA_TOO_LARGE, "OFFSET_METADATA_TOO_LARGE")
class OffsetMetadataTooLargeError(BrokerResponseError):
    """12: a committed offset's metadata string is longer than the
    broker's ``offset.metadata.max.bytes``."""


@_code(COORDINATOR_LOAD_IN_PROGRESS, "COORDINATOR_LOAD_IN_PROGRESS", retriable=True)
class CoordinatorLoadInProgressError(BrokerResponseError):
    """14: the coordinator is still loading its ``__consumer_offsets``
    partition (it just became its leader); retry after a backoff."""


@_code(ILLEGAL_GENERATION, "ILLEGAL_GENERATION")
class IllegalGenerationError(BrokerResponseError):
    """22: the request's generation id is not the group's current one: the
    member must rejoin."""


@_code(INCONSISTENT_GROUP_PROTOCOL, "INCONSISTENT_GROUP_PROTOCOL")
class InconsistentGroupProtocolError(BrokerResponseError):
    """23: the member's protocol type or protocols have nothing in common
    with the group's."""


@_code(INVALID_GROUP_ID, "INVALID_GROUP_ID")
class InvalidGroupIdError(BrokerResponseError):
    """24: the group id is empty or null."""


@_code(UNKNOWN_MEMBER_ID, "UNKNOWN_MEMBER_ID")
class UnknownMemberIdError(BrokerResponseError):
    """25: the coordinator does not know this member id (its session
    expired, or it left): the member must rejoin with an empty id."""


@_code(INVALID_SESSION_TIMEOUT, "INVALID_SESSION_TIMEOUT")
class InvalidSessionTimeoutError(BrokerResponseError):
    """26: the session timeout is outside the broker's
    ``group.min.session.timeout.ms`` .. ``group.max.session.timeout.ms``."""


@_code(REBALANCE_IN_PROGRESS, "REBALANCE_IN_PROGRESS")
class RebalanceInProgressError(BrokerResponseError):
    """27: the group is rebalancing: the member must rejoin."""


@_code(NON_EMPTY_GROUP, "NON_EMPTY_GROUP")
class GroupNotEmptyError(BrokerResponseError):
    """68: DeleteGroups on a group that still has members (KIP-229)."""


@_code(GROUP_ID_NOT_FOUND, "GROUP_ID_NOT_FOUND")
class GroupIdNotFoundError(BrokerResponseError):
    """69: the group does not exist (DeleteGroups, KIP-229)."""


@_code(MEMBER_ID_REQUIRED, "MEMBER_ID_REQUIRED")
class MemberIdRequiredError(BrokerResponseError):
    """79: JoinGroup v4+ without a member id: the response carries one;
    join again with it (KIP-394)."""


@_code(GROUP_MAX_SIZE_REACHED, "GROUP_MAX_SIZE_REACHED")
class GroupMaxSizeReachedError(BrokerResponseError):
    """81: the group already has ``group.max.size`` members (KIP-389)."""


@_code(GROUP_SUBSCRIBED_TO_TOPIC, "GROUP_SUBSCRIBED_TO_TOPIC")
class GroupSubscribedToTopicError(BrokerResponseError):
    """86: OffsetDelete of a partition whose topic a member of the group is
    subscribed to (KIP-496)."""


@_code(FENCED_INSTANCE_ID, "FENCED_INSTANCE_ID")
class FencedInstanceIdError(BrokerResponseError):
    """82: another member id now holds this ``group.instance.id``: the
    static member was replaced by a newer instance of itself (KIP-345)."""


@_code(UNSTABLE_OFFSET_COMMIT, "UNSTABLE_OFFSET_COMMIT", retriable=True)
class UnstableOffsetCommitError(BrokerResponseError):
    """88: OffsetFetch with ``require_stable`` (KIP-447) for a partition a
    transaction holds a pending offset of; retriable: the offset is stable
    once the transaction commits or aborts."""


@_code(UNKNOWN_TOPIC_ID, "UNKNOWN_TOPIC_ID", retriable=True)
class UnknownTopicIdError(BrokerResponseError):
    """100: no topic has this topic id (KIP-516)."""


@_code(FENCED_MEMBER_EPOCH, "FENCED_MEMBER_EPOCH")
class FencedMemberEpochError(BrokerResponseError):
    """110: the member's epoch is fenced by the group coordinator; it
    loses its partitions and rejoins with epoch 0 (KIP-848)."""


@_code(UNRELEASED_INSTANCE_ID, "UNRELEASED_INSTANCE_ID")
class UnreleasedInstanceIdError(BrokerResponseError):
    """111: the ``group.instance.id`` is still used by a member that has
    not left the group (KIP-848)."""


@_code(UNSUPPORTED_ASSIGNOR, "UNSUPPORTED_ASSIGNOR")
class UnsupportedAssignorError(BrokerResponseError):
    """112: the coordinator has no server-side assignor of the name given
    in ``group.remote.assignor`` (KIP-848)."""


@_code(STALE_MEMBER_EPOCH, "STALE_MEMBER_EPOCH", retriable=True)
class StaleMemberEpochError(BrokerResponseError):
    """113: an OffsetCommit carries an older member epoch than the
    coordinator's: the member's assignment changed meanwhile (KIP-848)."""


@_code(INVALID_TXN_STATE, "INVALID_TXN_STATE")
class InvalidTxnStateError(BrokerResponseError):
    """48: a transactional request the transaction's state does not allow (KIP-98)."""


@_code(INVALID_PRODUCER_ID_MAPPING, "INVALID_PRODUCER_ID_MAPPING")
class InvalidProducerIdMappingError(BrokerResponseError):
    """49: the producer id is not the one the transactional id holds (KIP-98)."""


@_code(INVALID_TRANSACTION_TIMEOUT, "INVALID_TRANSACTION_TIMEOUT")
class InvalidTransactionTimeoutError(BrokerResponseError):
    """50: ``transaction.timeout.ms`` is not in 1 .. ``transaction.max.timeout.ms`` (KIP-98)."""


@_code(CONCURRENT_TRANSACTIONS, "CONCURRENT_TRANSACTIONS", retriable=True)
class ConcurrentTransactionsError(BrokerResponseError):
    """51: the transaction is completing or another change is pending; retry (KIP-98)."""


@_code(TRANSACTION_COORDINATOR_FENCED, "TRANSACTION_COORDINATOR_FENCED")
class TransactionCoordinatorFencedError(BrokerResponseError):
    """52: WriteTxnMarkers from a coordinator with a stale coordinator epoch (KIP-98)."""


@_code(OPERATION_NOT_ATTEMPTED, "OPERATION_NOT_ATTEMPTED")
class OperationNotAttemptedError(BrokerResponseError):
    """55: not attempted because another part of the same request failed."""


@_code(PRODUCER_FENCED, "PRODUCER_FENCED")
class ProducerFencedError(BrokerResponseError):
    """90: a newer producer with the same transactional id has a newer epoch (KIP-588)."""


@_code(TRANSACTIONAL_ID_NOT_FOUND, "TRANSACTIONAL_ID_NOT_FOUND")
class TransactionalIdNotFoundError(BrokerResponseError):
    """105: the coordinator holds no state for the transactional id (KIP-664)."""


@_code(TRANSACTION_ABORTABLE, "TRANSACTION_ABORTABLE")
class TransactionAbortableError(BrokerResponseError):
    """120: the transaction failed but may be aborted and the id reused (KIP-890)."""


@_code(TOPIC_AUTHORIZATION_FAILED, "TOPIC_AUTHORIZATION_FAILED")
class TopicAuthorizationFailedError(BrokerResponseError):
    """29: the principal may not access the topic (ACLs, KIP-11)."""


@_code(GROUP_AUTHORIZATION_FAILED, "GROUP_AUTHORIZATION_FAILED")
class GroupAuthorizationFailedError(BrokerResponseError):
    """30: the principal may not access the consumer group (ACLs, KIP-11)."""


@_code(CLUSTER_AUTHORIZATION_FAILED, "CLUSTER_AUTHORIZATION_FAILED")
class ClusterAuthorizationFailedError(BrokerResponseError):
    """31: the principal may not perform the cluster action (ACLs, KIP-11;
    an idempotent producer needs IDEMPOTENT_WRITE before Kafka 2.8)."""


@_code(TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    """53: the principal may not use the transactional id (ACLs, KIP-98)."""


@_code(SECURITY_DISABLED, "SECURITY_DISABLED")
class SecurityDisabledError(BrokerResponseError):
    """54: the broker has no authorizer (``authorizer.class.name`` is empty), so
    it keeps no ACLs (KIP-11)."""



@_code(RESOURCE_NOT_FOUND, "RESOURCE_NOT_FOUND")
class ResourceNotFoundError(BrokerResponseError):
    """91: the resource does not exist, e.g. a user without SCRAM
    credentials in DescribeUserScramCredentials (KIP-554)."""


@_code(DUPLICATE_RESOURCE, "DUPLICATE_RESOURCE")
class DuplicateResourceError(BrokerResponseError):
    """92: one request names a resource twice (a user in
    DescribeUserScramCredentials, a user and mechanism in
    AlterUserScramCredentials, KIP-554)."""


@_code(UNACCEPTABLE_CREDENTIAL, "UNACCEPTABLE_CREDENTIAL")
class UnacceptableCredentialError(BrokerResponseError):
    """93: the broker refuses a SCRAM credential: an empty user name or an
    iteration count outside 4096..16384 (KIP-554)."""

@_code(KAFKA_STORAGE_ERROR, "KAFKA_STORAGE_ERROR", retriable=True, invalid_metadata=True)
class KafkaStorageError(BrokerResponseError):
    """56: the broker's log directory holding the partition failed (a full
    disk, an I/O error) and is offline (KIP-112). Retriable with a metadata
    refresh, as Kafka's KafkaStorageException (an
    InvalidMetadataException): the controller moves leadership to another
    in-sync replica where there is one."""


class UnexpectedAppendOffsetError(InvalidRecordError):
    """A follower append (records whose offsets the leader assigned) does
    not start at the log end offset or its batches are not contiguous
    (Kafka's ``UnexpectedAppendOffsetException``). Not a wire error of its
    own: it carries `InvalidRecordError`'s code.

    Attributes:
        first_offset: The first offset of the rejected records.
        expected_offset: The offset the log expected (its log end offset,
            or the next offset after the previous batch).
    """

    def __init__(self, message: str = "", first_offset: int = -1, expected_offset: int = -1) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.expected_offset = expected_offset


def error_for_code(code: int) -> type[BrokerResponseError]:
    """Return the exception class for a Kafka error code.

    Args:
        code: A non-zero Kafka error code (0 means no error and has no class).

    Returns:
        The registered subclass of `BrokerResponseError`; an unknown code
            maps to a fresh subclass named ``UNKNOWN_<code>`` so the code is
            never lost.
    """
    try:
        return _BY_CODE[code]
    except KeyError:
        cls: type[BrokerResponseError] = type(f"KafkaError{code}", (BrokerResponseError,), {"__doc__": f"Kafka error code {code}."})
        cls.code = code
        cls.name = f"UNKNOWN_{code}"
        _BY_CODE[code] = cls
        return cls


def raise_for_code(code: int, message: str = "") -> None:
    """Raise the error for a Kafka error code unless it is 0 (``NONE``).

    Args:
        code: The error code read off the wire.
        message: Text added to the exception's message.

    Raises:
        BrokerResponseError: The subclass `error_for_code` gives, when
            ``code`` is not 0.
    """
    if code:
        raise error_for_code(code)(message)


# --------------------------------------------------------------------------
# Authentication (TLS, KIP-43 SASL, KIP-152 SaslAuthenticate)
# --------------------------------------------------------------------------


class AuthenticationError(KafkaError):
    """A peer could not be authenticated, or refused to authenticate us.

    Base of `SslAuthenticationError` (the TLS handshake failed) and
    `SaslAuthenticationFailedError` (the SASL exchange failed), so a
    connection can catch both with one ``except``. Never retriable: the
    same credentials fail the same way.
    """

    name = "AUTHENTICATION_FAILED"


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed (Kafka's SslAuthenticationException): the
    broker's certificate is not trusted by ``ssl.ca.location``, its host
    name does not match (``ssl.endpoint.identification.algorithm=https``),
    or the broker refused our certificate. The message names the cause;
    ``__cause__`` is the `ssl.SSLError`.
    """

    name = "SSL_AUTHENTICATION_FAILED"


@_code(UNSUPPORTED_SASL_MECHANISM, "UNSUPPORTED_SASL_MECHANISM")
class UnsupportedSaslMechanismError(BrokerResponseError, AuthenticationError):
    """33: the broker does not enable the SASL mechanism the client asked
    for in SaslHandshake (KIP-43); the response lists the ones it does.
    An `AuthenticationError`, as Kafka's UnsupportedSaslMechanismException
    is an AuthenticationException: never retriable."""


@_code(ILLEGAL_SASL_STATE, "ILLEGAL_SASL_STATE")
class IllegalSaslStateError(BrokerResponseError, AuthenticationError):
    """34: a SASL message arrived in a state that does not expect it (e.g. a
    SaslAuthenticate before SaslHandshake, or a token after completion).
    An `AuthenticationError` (Kafka's IllegalSaslStateException is an
    AuthenticationException): never retriable."""


@_code(SASL_AUTHENTICATION_FAILED, "SASL_AUTHENTICATION_FAILED")
class SaslAuthenticationFailedError(BrokerResponseError, AuthenticationError):
    """58: SASL authentication failed: unknown user, wrong password or a
    malformed token (KIP-152). The message says no more than that."""
