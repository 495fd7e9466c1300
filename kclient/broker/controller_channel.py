"""The controller's connections to the brokers (Kafka's
``ControllerChannelManager``).

One queue and one sending task per live broker: requests to one broker go
out in the order the controller made them, each retried (after
``replica.fetch.backoff.ms``, reconnecting) until it is answered or the
broker leaves the cluster. Requests to the controller's own broker are not
sent over the network: they are handed to its
`kclient.broker.replica_manager.ReplicaManager` directly, in the same
order.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import trio

from kclient.broker.inter_broker import ControllerRequest, send_request
from kclient.broker.task_host import TaskHost
from kclient.errors import KafkaError
from kclient.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kclient.protocol.messages.stop_replica import StopReplicaRequest
from kclient.protocol.schema import Api

if TYPE_CHECKING:
    from kclient.broker.replica_manager import ReplicaManager
    from kclient.net.connection import BrokerConnection

log = logging.getLogger("kclient.broker.controller")


class _Destination:
    def __init__(self, broker_id: int, address: tuple[str, int] | None) -> None:
        self.broker_id = broker_id
        self.address = address
        channel: tuple[
            trio.MemorySendChannel[tuple[Api, int, ControllerRequest]], trio.MemoryReceiveChannel[tuple[Api, int, ControllerRequest]]
        ] = trio.open_memory_channel(math.inf)
        self.send, self.receive = channel
        self.scope = trio.CancelScope()


class ControllerChannel(TaskHost):
    """Queues of requests to each broker (see the module docstring).

    Args:
        replicas: The controller's own broker's replica manager.
        backoff_ms: Pause between attempts (ms).
        timeout_ms: Connect and request timeout (ms).
    """

    def __init__(self, replicas: ReplicaManager, *, backoff_ms: int, timeout_ms: int) -> None:
        self.replicas = replicas
        self.backoff = backoff_ms / 1000
        self.timeout_ms = timeout_ms
        self._destinations: dict[int, _Destination] = {}
        super().__init__()

    def set_brokers(self, addresses: dict[int, tuple[str, int]]) -> None:
        """The live brokers and where to reach them; queues of brokers that
        left are dropped with what they held."""
        for broker_id in list(self._destinations):
            dest = self._destinations[broker_id]
            if broker_id not in addresses or (broker_id != self.replicas.broker_id and dest.address != addresses[broker_id]):
                dest.scope.cancel()
                del self._destinations[broker_id]
        for broker_id, address in addresses.items():
            if broker_id not in self._destinations:
                dest = _Destination(broker_id, address)
                self._destinations[broker_id] = dest
                assert self._nursery is not None
                self._nursery.start_soon(self._sender, dest)

    def send(self, broker_id: int, api: Api, version: int, body: ControllerRequest) -> None:
        """Queue a request to a live broker (ignored for others)."""
        dest = self._destinations.get(broker_id)
        if dest is not None:
            dest.send.send_nowait((api, version, body))

    def close(self) -> None:
        for dest in self._destinations.values():
            dest.scope.cancel()
        self._destinations.clear()

    async def _sender(self, dest: _Destination) -> None:
        with dest.scope:
            if dest.broker_id == self.replicas.broker_id:
                async for api, version, body in dest.receive:
                    await self._local(api, version, body)
                return
            conn: BrokerConnection | None = None
            async with trio.open_nursery() as nursery:
                async for api, version, body in dest.receive:
                    while True:
                        try:
                            if conn is None or conn.closed:
                                conn = await self._connect(nursery, dest)
                            response = await send_request(conn, api, body, version=version)
                            if response.error_code:
                                log.warning("%s to broker %d: error %d", api.name, dest.broker_id, response.error_code)
                            break
                        except KafkaError as exc:
                            log.info("%s to broker %d failed (%s); retrying", api.name, dest.broker_id, exc)
                            conn = None
                            await trio.sleep(self.backoff)
                nursery.cancel_scope.cancel()

    async def _connect(self, nursery: trio.Nursery, dest: _Destination) -> BrokerConnection:
        from kclient.net.connection import BrokerConnection

        assert dest.address is not None
        return await BrokerConnection.connect(
            nursery,
            *dest.address,
            client_id=f"controller-{self.replicas.broker_id}",
            connect_timeout_ms=self.timeout_ms,
            request_timeout_ms=self.timeout_ms,
        )

    async def _local(self, api: Api, version: int, body: ControllerRequest) -> None:
        rm = self.replicas
        try:
            if isinstance(body, LeaderAndIsrRequest):
                await rm.leader_and_isr(body, version)
            elif isinstance(body, StopReplicaRequest):
                await rm.stop_replica(body, version)
            else:
                await rm.update_metadata(body, version)
        except Exception:
            log.exception("local %s failed", api.name)


__all__ = ["ControllerChannel"]
