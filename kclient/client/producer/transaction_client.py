"""The trio side of the transactional producer (KIP-98): sends the
`TransactionManager`'s requests (FindCoordinator, InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) one at a
time and feeds their answers back, as the Java client's ``Sender`` does
before each Produce round.

`TransactionClient.wait` drives the manager until a `TransactionalResult`
completes (the application calls); `TransactionClient.add_partitions`
drives it until the partitions of a Produce are in the transaction (the
send path holds their batches until then). Several trio tasks may drive
at once: a lock keeps one request in flight.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import trio

from kclient.client.producer.transaction_types import TP, TransactionalResult, TxnRequest
from kclient.client.producer.transactions import TransactionManager
from kclient.clock import now_ms
from kclient.errors import AuthenticationError, KafkaError, KafkaTimeoutError, UnsupportedVersionError
from kclient.protocol.messages.init_producer_id import INIT_PRODUCER_ID_FULL

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.cluster import Cluster

__all__ = ["TransactionClient"]

log = logging.getLogger(__name__)

#: Longest pause of a driver that has nothing to send yet (s): a request
#: another task queued, or a batch that completed, is picked up this soon.
IDLE_POLL_S = 0.005


class TransactionClient:
    """Sends a `TransactionManager`'s requests on a producer's cluster.

    Args:
        manager: The transaction manager.
        cluster: The producer's `Cluster` (connections).
    """

    def __init__(self, manager: TransactionManager, cluster: Cluster) -> None:
        self.manager = manager
        self._cluster = cluster
        self._lock = trio.Lock()

    async def wait(self, result: TransactionalResult, timeout_ms: int | None = None, has_incomplete_batches: Callable[[], bool] = lambda: False) -> None:
        """Drive the manager until ``result`` completes, then acknowledge it.

        Args:
            result: What an application call returned.
            timeout_ms: The longest wait (ms); None: no bound. The call may
                be made again after a timeout and waits on the same result.
            has_incomplete_batches: Whether batches of the transaction are
                still unacknowledged (EndTxn waits for them).

        Raises:
            KafkaTimeoutError: ``result`` did not complete in time.
            KafkaError: The error it failed with.
        """
        with trio.move_on_after(math.inf if timeout_ms is None else timeout_ms / 1000) as scope:
            await self._drive(lambda: result.is_completed, has_incomplete_batches)
        if scope.cancelled_caught and not result.is_completed:
            raise KafkaTimeoutError(f"Timeout expired after {timeout_ms} ms while awaiting {result.operation}")
        result.acknowledge()

    async def add_partitions(self, tps: Iterable[TP]) -> None:
        """Add ``tps`` to the transaction and wait until batches may be sent
        to them (AddPartitionsToTxn).

        Args:
            tps: The partitions a Produce writes.

        Raises:
            KafkaError: The manager is in an error state (the error that put
                it there), or the partitions cannot be added in this state
                (`IllegalStateError`).
        """
        manager = self.manager
        wanted = list(tps)
        for tp in wanted:
            manager.maybe_add_partition(tp)

        def ready() -> bool:
            if manager.has_error():
                return True
            return all(manager.is_send_to_partition_allowed(tp) for tp in wanted)

        await self._drive(ready, lambda: True)
        if manager.has_error():
            manager.maybe_add_partition(wanted[0])  # raises the manager's error

    async def _drive(self, done: Callable[[], bool], has_incomplete_batches: Callable[[], bool]) -> None:
        manager = self.manager
        while not done():
            async with self._lock:
                if done():
                    return
                request = manager.next_request(has_incomplete_batches())
                if request is not None:
                    await self._send(request)
                    continue
            due = manager.next_retry_ms()
            delay = IDLE_POLL_S if due is None else min(max(0, due - now_ms()) / 1000, 0.1)
            await trio.sleep(max(delay, 0.001))

    async def _send(self, request: TxnRequest) -> None:
        manager = self.manager
        try:
            if request.node is None:
                conn = await self._cluster.any_connection()
            else:
                conn = await self._cluster.connection(request.node.host, request.node.port)
            version = conn.version_for(request.api, floor=request.min_version, ceiling=request.max_version)
            if request.api.key == INIT_PRODUCER_ID_FULL.key:
                manager.coordinator_ready(conn.api_versions.get(INIT_PRODUCER_ID_FULL.key, (-1, -1))[1])
            response: Any = await conn.request(request.api, request.body, version=version)
        except (UnsupportedVersionError, AuthenticationError) as exc:
            # No retry can fix these: fatal, as in Kafka's client.
            manager.handle_send_failure(request, exc)
            return
        except (KafkaError, OSError) as exc:
            log.info("transactional request %s failed: %s; retrying", request.api.name, exc)
            manager.handle_disconnect(request)
            return
        except BaseException:
            # Cancelled (a call's timeout, the producer closing): the answer
            # is lost; the request is sent again by the next driver.
            manager.handle_disconnect(request)
            raise
        manager.handle_response(request, response)
