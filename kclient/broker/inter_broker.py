"""The broker's own requests to other brokers, answered in message classes.

The controller (LeaderAndIsr, UpdateMetadata, StopReplica;
`kclient.broker.controller_channel`) and the replica fetchers (Fetch,
OffsetsForLeaderEpoch, ListOffsets; `kclient.broker.replica_fetcher`)
build their requests as the message classes of `kclient.protocol.messages`
and send them on a client connection (`kclient.net.connection`). Its
answer is turned into the API's response class here (`as_message`): a
message the connection decoded into that class already is taken as it is,
a dict of field values by name is converted (the fields of other versions
at their defaults), so the callers read attributes either way.

Pure but for the awaited request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from kclient.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kclient.protocol.messages.stop_replica import StopReplicaRequest
from kclient.protocol.messages.update_metadata import UpdateMetadataRequest
from kclient.protocol.schema import Api, Body, fields_of

if TYPE_CHECKING:
    from kclient.net.connection import BrokerConnection

M = TypeVar("M")

#: A request of the controller to a broker (each names the controller and
#: its epoch; `kclient.broker.replica_manager.ReplicaManager` answers them).
ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


def as_message(cls: type[M], value: object) -> M:
    """``value`` as an instance of the message class ``cls``.

    Args:
        cls: A message class (`kclient.protocol.types` annotations).
        value: An instance of ``cls`` (returned as it is), or a dict of its
            fields by name, nested structs as dicts too (the fields it
            lacks take the class defaults).

    Returns:
        The message.

    Raises:
        TypeError: ``value`` is neither.
    """
    if isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        raise TypeError(f"{cls.__name__} expected, got {type(value).__name__}")
    values: dict[str, Any] = {}
    for field in fields_of(cls):
        if field.name in value and field.name not in values:
            item = value[field.name]
            if field.struct_type is not None and item is not None:
                item = [as_message(field.struct_type, entry) for entry in item]
            values[field.name] = item
    return cls(**values)


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
    assert api.response_type is not None
    return as_message(api.response_type, await conn.request(api, body, version=version))


__all__ = ["ControllerRequest", "as_message", "send_request"]
