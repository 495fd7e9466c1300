"""The values the transaction manager
(`kclient.client.producer.transactions.TransactionManager`) hands out and
takes: a queued request (`TxnRequest`), the outcome an application call
waits on (`TransactionalResult`, Kafka's ``TransactionalRequestResult``), a
coordinator (`Coordinator`) and the consumer group metadata it reads
(`GroupMetadata`, KIP-447). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs

from kclient.client.consumer.poll.types import OffsetAndMetadata
from kclient.client.producer.transaction_rules import Priority
from kclient.errors import IllegalStateError, KafkaError
from kclient.protocol.messages.end_txn import END_TXN
from kclient.protocol.messages.find_coordinator import COORDINATOR_TRANSACTION
from kclient.protocol.schema import Api

__all__ = ["TP", "Coordinator", "GroupMetadata", "TransactionalResult", "TxnRequest"]

#: A partition, ``(topic, partition)``.
TP = tuple[str, int]


class GroupMetadata(Protocol):
    """What `TransactionManager.send_offsets_to_transaction` reads of the
    consumer's group metadata (`kclient.ConsumerGroupMetadata`, KIP-447)."""

    @property
    def group_id(self) -> str: ...

    @property
    def generation_id(self) -> int: ...

    @property
    def member_id(self) -> str: ...

    @property
    def group_instance_id(self) -> str | None: ...


@attrs.frozen
class Coordinator:
    """A coordinator broker, as FindCoordinator names it.

    Attributes:
        node_id: The broker id.
        host: Its host.
        port: Its port.
    """

    node_id: int
    host: str
    port: int


@attrs.define(eq=False)
class TransactionalResult:
    """The outcome of a call that needs the coordinator (Kafka's
    ``TransactionalRequestResult``): not completed until the request(s)
    behind it answered.

    The caller waits until `is_completed` (``on_complete`` callbacks tell
    when), then calls `acknowledge`, which raises the error if it failed.
    A call that is not acknowledged (the application's wait timed out) may
    be made again and returns the same result.

    Attributes:
        operation: Kafka's name of the call (``"commitTransaction"``).
        error: The error it failed with, or None.
        on_complete: Called once each, with the result, when it completes.
    """

    operation: str
    error: KafkaError | None = None
    on_complete: list[Callable[[TransactionalResult], None]] = attrs.Factory(list)
    _completed: bool = False
    _acked: bool = False

    @property
    def is_completed(self) -> bool:
        """Whether the result is known (done or failed)."""
        return self._completed

    @property
    def is_successful(self) -> bool:
        """Whether it completed without error."""
        return self._completed and self.error is None

    @property
    def is_acked(self) -> bool:
        """Whether the caller saw the completed result (`acknowledge`)."""
        return self._acked

    def done(self) -> None:
        """Complete it successfully (no-op once completed)."""
        self._complete(None)

    def fail(self, error: KafkaError) -> None:
        """Complete it with ``error`` (no-op once completed)."""
        self._complete(error)

    def _complete(self, error: KafkaError | None) -> None:
        if self._completed:
            return
        self._completed = True
        self.error = error
        for callback in self.on_complete:
            callback(self)

    def acknowledge(self) -> None:
        """Mark the completed result as seen by the caller.

        Raises:
            IllegalStateError: it is not completed yet.
            KafkaError: the error it failed with.
        """
        if not self._completed:
            raise IllegalStateError(f"{self.operation} has not completed")
        self._acked = True
        if self.error is not None:
            raise self.error


@attrs.define(eq=False)
class TxnRequest:
    """One request the sender sends for the transaction manager.

    Attributes:
        api: The API (`kclient.protocol.schema.Api`; InitProducerId is
            `INIT_PRODUCER_ID_FULL`).
        body: The request object of the landed message class.
        priority: Its place in the queue.
        result: The result it completes.
        coordinator_type: The coordinator to send it to (``1``:
            transaction, ``0``: group), or None for any broker
            (FindCoordinator).
        coordinator_key: The transactional id or group id of that
            coordinator.
        max_version: The highest version the manager builds it for.
        min_version: The lowest version that carries what it says
            (FindCoordinator v1: ``key_type``; an epoch bump: InitProducerId
            v3; TxnOffsetCommit with group metadata: v3, KIP-447). Send the
            highest version in ``min_version..max_version`` the broker
            takes (``conn.version_for(api, floor=min_version,
            ceiling=max_version)``); none: `handle_send_failure` with
            `UnsupportedVersionError`.
        node: The coordinator it goes to (set by `next_request`; None:
            any broker).
        is_retry: Sent before; waits ``backoff_ms`` after its re-queueing.
        not_before_ms: When it may be sent (ms, the injected clock).
        backoff_ms: Its retry backoff (ms).
        is_epoch_bump: InitProducerId with the current producer id and epoch.
        offsets: AddOffsetsToTxn: the offsets TxnOffsetCommit sends after it.
        group_metadata: AddOffsetsToTxn: the consumer's group metadata.
    """

    api: Api
    body: Any
    priority: Priority
    result: TransactionalResult
    coordinator_type: int | None = COORDINATOR_TRANSACTION
    coordinator_key: str | None = None
    max_version: int = 0
    min_version: int = 0
    node: Coordinator | None = None
    is_retry: bool = False
    not_before_ms: int = 0
    backoff_ms: int = 0
    is_epoch_bump: bool = False
    offsets: dict[TP, OffsetAndMetadata] | None = None
    group_metadata: GroupMetadata | None = None

    @property
    def is_end_txn(self) -> bool:
        """Whether it is EndTxn (sent only after every batch completed)."""
        return self.api.key == END_TXN.key
