"""The bundled broker's trio TCP server.

One task per connection reads frames with a
:class:`~kclient.protocol.connection.FrameBuffer` and answers them one at a
time, in order, as Kafka does (its network layer mutes a connection while one
of its requests is being processed). What cannot be answered is answered the
way Kafka does it:

- a frame whose size is negative or above ``socket.request.max.bytes``, a
  frame too short for a request header, an unknown API key, an API version
  outside the advertised range (other than ApiVersions), or a body that does
  not decode: the connection is closed and a WARNING logged;
- an ApiVersions request of a version the broker lacks: the KIP-511 reply
  (response header v0, error 35 and the supported ranges in a v0 body);
- a handler that fails unexpectedly: logged with its traceback, connection
  closed. The broker itself keeps serving in every case.
"""

from __future__ import annotations

import logging
import socket
import trio

from kclient.config import BrokerConfig
from kclient.errors import ProtocolError
from kclient.protocol.connection import (
    FrameBuffer,
    decode_request,
    encode_response,
    encode_unsupported_api_versions,
    parse_request_header,
)
from kclient.protocol.messages import API_VERSIONS, APIS

from kclient.broker.handlers import SUPPORTED_VERSIONS, BrokerState, CloseConnection, RequestHandlers, supported_triples

log = logging.getLogger("kclient.broker")

_RECV_BYTES = 256 * 1024


class _CloseConnection(Exception):
    """Internal: the request cannot be answered; close the connection."""


class Broker:
    """A standalone Kafka-protocol broker (no ZooKeeper yet) serving the
    APIs and versions of :data:`kclient.broker.handlers.SUPPORTED_VERSIONS`
    from a :class:`kclient.storage.LogManager` under ``config.log_dirs``.

    ``config`` is a :class:`kclient.config.BrokerConfig`. Run it with
    ``port = await nursery.start(broker.serve)``; call :meth:`stop` (or
    cancel the surrounding scope) to stop it: connections are closed, the
    log manager flushed and closed.

    Attributes set once serving: ``port`` (the bound TCP port), ``state``
    (the :class:`~kclient.broker.handlers.BrokerState`).
    """

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.port: int | None = None
        self.state: BrokerState | None = None
        self._handlers: RequestHandlers | None = None
        self._scope: trio.CancelScope | None = None

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Open the logs, listen on ``listen_host:listen_port`` (port 0 picks
        a free one), call ``task_status.started(bound_port)``, then serve
        until cancelled or :meth:`stop` is called (then it returns
        normally). On the way out every connection is closed and every log
        flushed and closed.

        Raises OSError if the address cannot be bound and
        :class:`kclient.errors.ConfigError` for an unusable log directory.
        """
        config = self.config
        host = config.listen_host
        listeners = await trio.open_tcp_listeners(config.listen_port, host=host)
        try:
            self.port = listeners[0].socket.getsockname()[1]
            if config.listen_port == 0 and len(listeners) > 1:
                # Port 0 gives each address of a multi-address host its own
                # port; keep the one we report.
                extra = [lst for lst in listeners[1:] if lst.socket.getsockname()[1] != self.port]
                for lst in extra:
                    await lst.aclose()
                listeners = [lst for lst in listeners if lst not in extra]
            advertised_host = config.advertised_host
            advertised_port = config.advertised_port or self.port
            state = BrokerState.open(config, advertised_host=advertised_host, advertised_port=advertised_port)
        except BaseException:
            for listener in listeners:
                await listener.aclose()
            raise
        self.state = state
        self._handlers = RequestHandlers(state)
        try:
            log.info(
                "broker %d listening on %s:%d (advertised as %s:%d), cluster id %s, log dirs %s",
                state.broker_id,
                host,
                self.port,
                advertised_host,
                advertised_port,
                state.cluster_id,
                ", ".join(str(d) for d in state.log_dirs),
            )
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._accept_all, listeners)
                task_status.started(self.port)
        finally:
            self._scope = None
            with trio.CancelScope(shield=True):
                for listener in listeners:
                    await listener.aclose()
            state.close()
            log.info("broker %d stopped; logs flushed and closed", state.broker_id)

    def stop(self) -> None:
        """Ask :meth:`serve` to stop (it closes every connection, flushes and
        closes the logs, and returns). No effect if it is not serving.
        Call from the trio thread."""
        if self._scope is not None:
            self._scope.cancel()

    async def _accept_all(self, listeners) -> None:
        await trio.serve_listeners(self._serve_connection, listeners)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        try:
            peer = stream.socket.getpeername()
            peer_name = f"{peer[0]}:{peer[1]}"
        except OSError:
            peer_name = "?"
        try:
            stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        except OSError:
            pass
        log.debug("connection from %s", peer_name)
        try:
            async with stream:
                await self._connection_loop(stream, peer_name)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            log.debug("connection from %s lost", peer_name)
        except _CloseConnection:
            pass
        except Exception:  # never let one connection take the broker down
            log.exception("closing connection from %s after an unexpected error", peer_name)
        else:
            log.debug("connection from %s closed by the client", peer_name)

    async def _connection_loop(self, stream: trio.SocketStream, peer: str) -> None:
        frames = FrameBuffer(max_frame_bytes=self.config.socket_request_max_bytes)
        while True:
            data = await stream.receive_some(_RECV_BYTES)
            if not data:
                if frames.buffered:
                    log.warning("connection from %s closed mid-frame (%d bytes buffered)", peer, frames.buffered)
                return
            frames.feed(data)
            while True:
                try:
                    frame = frames.next_frame()
                except ProtocolError as exc:
                    log.warning("closing connection from %s: %s", peer, exc)
                    raise _CloseConnection from None
                if frame is None:
                    break
                response = await self._answer(frame, peer)
                if response is not None:
                    await stream.send_all(response)

    async def _answer(self, frame: bytes, peer: str) -> bytes | None:
        """Bytes to send back for one request frame (None: no response)."""
        try:
            header = parse_request_header(frame)
        except ProtocolError as exc:
            log.warning("closing connection from %s: unreadable request header: %s", peer, exc)
            raise _CloseConnection from None
        api = APIS.get(header.api_key)
        supported = SUPPORTED_VERSIONS.get(header.api_key)
        if api is None or supported is None:
            log.warning(
                "closing connection from %s: unknown api key %d (version %d, correlation id %d)",
                peer,
                header.api_key,
                header.api_version,
                header.correlation_id,
            )
            raise _CloseConnection
        lo, hi = supported
        if not lo <= header.api_version <= hi:
            if header.api_key == API_VERSIONS.key:
                log.debug("ApiVersions v%d from %s: sending the KIP-511 reply", header.api_version, peer)
                return encode_unsupported_api_versions(header.correlation_id, supported_triples())
            log.warning(
                "closing connection from %s: %s v%d is not supported (%d-%d)",
                peer,
                api.name,
                header.api_version,
                lo,
                hi,
            )
            raise _CloseConnection
        try:
            body = decode_request(header, frame)
        except (ProtocolError, ValueError) as exc:
            if header.api_key == API_VERSIONS.key:
                # Kafka answers an undecodable ApiVersions with INVALID_REQUEST.
                log.warning("malformed ApiVersions v%d from %s: %s", header.api_version, peer, exc)
                return encode_response(
                    API_VERSIONS,
                    header.api_version,
                    header.correlation_id,
                    {"error_code": 42, "api_keys": []},
                )
            log.warning("closing connection from %s: malformed %s v%d request: %s", peer, api.name, header.api_version, exc)
            raise _CloseConnection from None
        assert self._handlers is not None
        log.debug("%s v%d from %s (correlation id %d)", api.name, header.api_version, peer, header.correlation_id)
        try:
            result = await self._handlers.handle(header, body)
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", peer, exc)
            raise _CloseConnection from None
        if result is None:
            return None
        return encode_response(api, header.api_version, header.correlation_id, result)


__all__ = ["Broker"]
