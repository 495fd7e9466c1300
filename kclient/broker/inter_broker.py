"""The broker's own requests to other brokers, answered in message classes.

The controller (LeaderAndIsr, UpdateMetadata, StopReplica;
`kclient.broker.controller_channel`) and the replica fetchers (Fetch,
OffsetsForLeaderEpoch, ListOffsets; `kclient.broker.replica_fetcher`)
build their requests as the message classes of `kclient.protocol.messages`
and send them on a client connection (`kclient.net.connection`), which
answers with the API's response class.

Pure but for the awaited request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kclient.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kclient.protocol.messages.stop_replica import StopReplicaRequest
from kclient.protocol.messages.update_metadata import UpdateMetadataRequest
from kclient.protocol.schema import Api, Body

if TYPE_CHECKING:
    from kclient.net.connection import BrokerConnection

#: A request of the controller to a broker (each names the controller and
#: its epoch; `kclient.broker.replica_manager.ReplicaManager` answers them).
ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


async def send_request(conn: BrokerConnection, api: Api, body: Body, *, version: int) -> Any:
    """Send one request to another broker and wait for its answer.

    Args:
        conn: The connection to that broker.
        api: The API.
        body: The request message (an instance of ``api.request_type``).
        version: The API version to send.

    Returns:
        The response, an instance of ``api.response_type``.

    Raises:
        kclient.errors.KafkaTimeoutError: No answer in time.
        kclient.errors.KafkaConnectionError: The connection was lost.
    """
    return await conn.request(api, body, version=version)


__all__ = ["ControllerRequest", "send_request"]
