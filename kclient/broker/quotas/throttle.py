"""Applying quotas to a connection (KIP-13, KIP-124, KIP-219).

Each connection has a `ClientSession` (its user and the time until which
it is muted), set as a context variable by the server for the
connection's task. After a Produce or Fetch is handled, `apply_quota`
records its bytes (`kclient.broker.quotas.manager.QuotaManager.record`),
and every request (cluster actions and SASL aside) records its time on the
broker's thread against ``request_percentage``
(`kclient.broker.quotas.request_time`); when the client is over a quota:

- the response's ``throttle_time_ms`` is set, whatever its type (a Fetch over its byte rate is answered with no
  records, and its bytes are not counted, as Kafka's
  ``getThrottledResponse``);
- for versions where the client waits out the throttle
  (`kclient.protocol.throttle.client_throttles`) the response is sent at
  once and the connection muted: the server reads nothing more from it
  until the throttle ends (`ClientSession.wait_unmuted`); for older
  versions the response itself is delayed (`ClientSession.wait_to_respond`,
  after the request's memory was given back). A Produce with acks=0 (no
  response) mutes the connection.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

import attrs
import trio

from kclient.broker.quotas.entities import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from kclient.broker.quotas.manager import QuotaManager
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages import ALL_APIS
from kclient.protocol.messages.fetch import FetchResponse
from kclient.protocol.throttle import client_throttles

__all__ = ["ANONYMOUS", "EXEMPT_FROM_REQUEST_QUOTA", "ClientSession", "apply_quota", "cap_fetch_bytes", "client_session", "response_bytes"]

log = logging.getLogger("kclient.broker")

#: The user of a connection without authentication (Kafka's ``KafkaPrincipal.ANONYMOUS``).
ANONYMOUS = "ANONYMOUS"


@attrs.define
class ClientSession:
    """One connection's quota identity and mute state.

    Attributes:
        user: The principal's name (``alice`` for ``User:alice``).
        address: The client's IP address.
        muted_until: ``trio.current_time()`` until which nothing is read.
        respond_after: ``trio.current_time()`` before which the pending
            response is not sent (old request versions).
    """

    user: str = ANONYMOUS
    address: str = ""
    muted_until: float = 0.0
    respond_after: float = 0.0

    def set_principal(self, principal: str | None) -> None:
        """Take the user from an authenticated principal (``User:alice``)."""
        if principal:
            self.user = principal.split(":", 1)[1] if principal.startswith("User:") else principal

    async def wait_unmuted(self) -> None:
        """Sleep until the connection's throttle has passed."""
        if self.muted_until > trio.current_time():
            await trio.sleep_until(self.muted_until)

    async def wait_to_respond(self) -> None:
        """Sleep until a delayed response may be sent (the request's
        memory is already given back)."""
        if self.respond_after > trio.current_time():
            await trio.sleep_until(self.respond_after)


#: The current connection's session (set per connection task).
client_session: contextvars.ContextVar[ClientSession] = contextvars.ContextVar("client_session")


def response_bytes(response: FetchResponse) -> int:
    """The record bytes of a Fetch response."""
    total = 0
    for topic in response.responses:
        for part in topic.partitions:
            records: Any = part.records
            if records is not None:
                total += records.length if hasattr(records, "length") else len(records)
    return total


def cap_fetch_bytes(quotas: QuotaManager, header: RequestHeader, body: Any) -> None:
    """Cap a consumer's Fetch ``max_bytes`` at what its quota allows in one
    window (Kafka's ``handleFetchRequest``), so that a response fits the
    quota; a follower's Fetch is left alone."""
    session = client_session.get(None)
    if header.api_key != 1 or session is None or not quotas.quotas or getattr(body, "replica_id", -1) >= 0:
        return
    most = quotas.max_value_in_window(CONSUMER_BYTE_RATE, session.user, header.client_id or "")
    if most is not None and hasattr(body, "max_bytes"):
        body.max_bytes = max(1, min(body.max_bytes, int(most)))


def _empty_fetch(response: FetchResponse) -> FetchResponse:
    """The throttled answer to a Fetch: no records (the slices released)."""
    for topic in response.responses:
        for part in topic.partitions:
            release = getattr(part.records, "release", None)
            if release is not None:
                release()
    return FetchResponse(error_code=response.error_code, session_id=response.session_id, responses=[])


#: APIs exempt from ``request_percentage`` (Kafka's cluster actions and
#: the SASL exchange).
EXEMPT_FROM_REQUEST_QUOTA = frozenset({4, 5, 6, 7, 17, 27, 36})


def _byte_throttle(quotas: QuotaManager, session: ClientSession, header: RequestHeader, result: Any, request_size: int) -> tuple[float, Any]:
    """Record a Produce's or Fetch's bytes: (throttle seconds, the response
    to send: a throttled Fetch gets an empty one)."""
    client_id = header.client_id or ""
    if header.api_key == 0:
        return quotas.record(PRODUCER_BYTE_RATE, session.user, client_id, request_size), result
    size = response_bytes(result)
    seconds = quotas.record(CONSUMER_BYTE_RATE, session.user, client_id, size)
    if seconds > 0:
        quotas.unrecord(CONSUMER_BYTE_RATE, session.user, client_id, size)
        result = _empty_fetch(result)
    return seconds, result


def _request_throttle(quotas: QuotaManager, session: ClientSession, header: RequestHeader) -> float:
    """Record the request's time on the broker's thread as a percentage of
    a second (KIP-124); the throttle seconds."""
    meter = quotas.meter
    if meter is None or header.api_key in EXEMPT_FROM_REQUEST_QUOTA:
        return 0.0
    return quotas.record(REQUEST_PERCENTAGE, session.user, header.client_id or "", meter.take() * 100.0)


async def apply_quota(quotas: QuotaManager, header: RequestHeader, body: Any, result: Any, request_size: int) -> Any:
    """Record a request against its client's quotas and throttle it:
    Produce and Fetch bytes (KIP-13), every request's time (KIP-124).

    Args:
        quotas: The broker's quota manager.
        header: The request header (API, version, client id).
        body: The request (a follower's Fetch, ``replica_id`` >= 0, is
            exempt: replication has its own quota in Kafka).
        result: The response message (None: a Produce with acks=0).
        request_size: The request frame's size (bytes).

    Returns:
        The response to send (a throttled Fetch: an empty one).
    """
    session = client_session.get(None)
    key = header.api_key
    if session is None or not quotas.quotas or getattr(body, "replica_id", -1) >= 0:
        return result
    seconds = _request_throttle(quotas, session, header)
    if key in (0, 1):
        byte_seconds, result = _byte_throttle(quotas, session, header, result, request_size)
        seconds = max(seconds, byte_seconds)
    if seconds <= 0:
        return result
    ms = int(seconds * 1000)
    log.debug("throttling %s (user %s, client id %s) for %d ms", header_name(key), session.user, header.client_id, ms)
    if result is not None and hasattr(result, "throttle_time_ms"):
        result.throttle_time_ms = max(result.throttle_time_ms, ms)
    if result is None or client_throttles(key, header.api_version):
        session.muted_until = trio.current_time() + seconds
    else:
        session.respond_after = trio.current_time() + seconds
    return result


def header_name(key: int) -> str:
    """The API's name (``Produce``, ``Fetch``, ...)."""
    api = ALL_APIS.get(key)
    return api.name if api is not None else f"api key {key}"
