"""The bundled broker's trio TCP server.

One task per connection reads request frames and answers them one at a
time, in order, as Kafka does (its network layer mutes a connection while one
of its requests is being processed). A frame is read as Kafka's
``NetworkReceive`` does: its 4-byte size, then its bytes, never more, so
nothing of the next request is read before this one is answered. What
cannot be answered is answered the way Kafka does it:

- a frame whose size is negative or above ``socket.request.max.bytes``, or
  (on a SASL listener, before the login completes) above the listener's
  ``sasl.server.max.receive.size`` (512 KiB by default; Kafka's
  InvalidReceiveException, logged): the connection is closed as soon as
  the 4-byte size has arrived, before any of the frame is read;
- a failed SASL login: its failure response is held back for
  ``connection.failed.authentication.delay.ms`` (KIP-306), then sent, and
  the connection closed; only that connection waits, holding no request
  budget;
- a frame too short for a request header, an unreadable header, an unknown
  API key, an API version outside the advertised range (other than
  ApiVersions), or a body that does not decode: the connection is closed
  and a WARNING logged (rate-limited, as every rejection below);
- an ApiVersions request of a version the broker lacks: the KIP-511 reply
  (response header v0, error 35 and the supported ranges in a v0 body);
- a handler that fails unexpectedly: logged with its traceback, connection
  closed. The broker itself keeps serving in every case.

Memory is bounded globally (`kclient.broker.limits`):

- every byte of a request is taken from the ``queued.max.request.bytes``
  budget (`kclient.broker.limits.RequestMemory`) before it is received, one
  receive of at most `RECEIVE_CHUNK` bytes at a time, and given back once
  the request is answered; a connection that does not fit waits
  (back-pressure). A declared size alone costs nothing: the frame grows
  with the bytes that arrive. The oldest frame being read may go over the
  budget, so reads never stall each other for good. Frames read before a
  SASL login completes take from their own share,
  ``queued.max.unauthenticated.request.bytes``, never from the budget of
  authenticated connections;
- a connection has at most one request and one response in flight (the
  next request is read only after the previous response was sent), so a
  client that does not read its responses only blocks itself;
- at most ``max.connections`` connections are served at once, and at most
  ``max.connections.per.ip`` (or its ``max.connections.per.ip.overrides``
  entry) from one client address; one more is closed at once;
- a connection with no request in progress that sends nothing for
  ``connections.max.idle.ms`` is closed (DEBUG);
- a request must arrive whole within ``socket.request.read.timeout.ms``
  of its first byte, time held back by the budget included, else the
  connection is closed: a size prefix followed by nothing or by a trickle
  holds a connection for that long at most.

CPU work in proportion to what a client sends never runs on the event
loop (`kclient.broker.offload`): SASL tokens are evaluated in worker
threads (`kclient.broker.security.SaslAuthenticator`), and a frame over
`DECODE_IN_THREAD_BYTES` is parsed in one; before a SASL login, a request
of an API not allowed yet is refused from its header, its body unread (as
Kafka does). So a costly login or a huge request does not slow the other
connections.

Rejected and closed connections are logged through one
`kclient.broker.security.RateLimitedLog` (with the TLS and SASL
failures): at most one line per kind of rejection per
``connection.rejection.log.interval.ms``, with the count of those held
back.

Fetch v4+ responses are sent zero-copy (`kclient.broker.zerocopy`):
header bytes with ``send``, record data with ``os.sendfile`` straight from
the segment files. A Fetch long poll ends early when its client
disconnects.

Periodic work runs as tasks of the broker's nursery, each calling the
blocking storage method in a worker thread (``trio.to_thread``) and
cancelled (after the call in progress finishes) when the broker stops:

- every `flush_scheduler_interval_ms`
  (when ``log.flush.interval.ms`` is set):
  `kclient.storage.LogManager.flush_if_due`, the time-based flush
  policy (the message-count policy, ``log.flush.interval.messages``, is
  applied by the log on append);
- every ``log.retention.check.interval.ms``:
  `kclient.storage.LogManager.cleanup` (retention);
- every ``log.cleaner.backoff.ms`` when ``log.cleaner.enable``:
  `kclient.storage.LogCleaner.clean_all` (log compaction of the
  ``cleanup.policy=compact`` topics);
- every ``log.flush.offset.checkpoint.interval.ms``:
  `kclient.storage.LogManager.checkpoint_recovery_points`.
"""

from __future__ import annotations

import contextvars
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import trio

from kclient.broker.authz.principal import ConnectionSession, NoMatchingRule, SslPrincipalMapper, principal_mappers
from kclient.broker.broker_apis import BROKER_APIS
from kclient.broker.components import BrokerComponents
from kclient.broker.controller import Controller
from kclient.broker.fetch import ClientGone
from kclient.broker.group.apis import client_host
from kclient.broker.handlers import (
    SUPPORTED_VERSIONS,
    CloseConnection,
    RequestHandlers,
    listener_address,
    listener_name,
    supported_triples,
)
from kclient.broker.limits import ConnectionLimits, RequestMemory, normalize_address
from kclient.broker.offload import run_in_worker
from kclient.broker.quotas.connections import ConnectionRateQuotas, connection_rate_quotas
from kclient.broker.quotas.throttle import ClientSession, apply_quota, cap_fetch_bytes, client_session
from kclient.broker.read_clock import ReadClock
from kclient.broker.security import (
    SASL_EVALUATION_THREADS,
    ListenerRuntime,
    RateLimitedLog,
    SaslAuthenticator,
    SaslClose,
    ScramCredentialStore,
    certificate_principal,
    tls_handshake,
)
from kclient.broker.state import BrokerState
from kclient.broker.zerocopy import SplicedResponse, encode_spliced_response
from kclient.broker.zk_registration import BrokerRegistrar
from kclient.config import BrokerConfig
from kclient.errors import INVALID_REQUEST, ProtocolError
from kclient.protocol.connection import (
    RequestHeader,
    decode_request,
    encode_response,
    encode_unsupported_api_versions,
    parse_request_header,
)
from kclient.protocol.messages import API_VERSIONS, APIS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from kclient.protocol.messages.api_versions import ApiVersionsResponse
from kclient.protocol.messages.fetch import FetchResponse
from kclient.protocol.messages.metadata import METADATA_FULL
from kclient.protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from kclient.protocol.messages.sasl_handshake import (
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kclient.protocol.primitives import read_tagged_fields
from kclient.protocol.schema import Api

log = logging.getLogger("kclient.broker")

#: The former private name (tests/test_protocol_groups.py imports it).
_BROKER_APIS = BROKER_APIS

#: Largest single receive from a client socket (bytes), and so the most
#: request budget a connection holds while it waits for its client.
RECEIVE_CHUNK = 64 * 1024

#: Frames larger than this (bytes) are parsed in a worker thread: parsing
#: costs about 0.5 s of CPU per MiB of small structs (a Metadata request
#: naming many topics), which must not stall the other connections.
DECODE_IN_THREAD_BYTES = RECEIVE_CHUNK
#: Most worker threads parsing large frames at once.
DECODE_THREADS = 2

_SIZE = struct.Struct(">i")
_T = TypeVar("_T")

#: Errors that mean "these bytes are not a request" when reading a header
#: or decoding a body (besides ProtocolError).
_DECODE_ERRORS = (ProtocolError, ValueError, UnicodeDecodeError, struct.error, IndexError, OverflowError)


#: What is sent back for one request: its frame's bytes, or a zero-copy
#: `SplicedResponse` (Fetch v4+).
Reply = bytes | bytearray | SplicedResponse


#: Who is on the other end of the current connection (set per connection
#: task); each request's authorization context is built from it.
_session: contextvars.ContextVar[ConnectionSession | None] = contextvars.ContextVar("kclient_session", default=None)


#: Seconds a connection stays open after its failed-login answer, for the
#: client to read the answer and close first.
_FAILED_LOGIN_GRACE = 1.0


async def _let_the_client_close(stream: Any) -> None:
    """Wait, up to `_FAILED_LOGIN_GRACE`, for the client to close after it
    was sent its failed-login answer (anything else it sends is dropped).
    A client that reads its socket only after our close has also arrived
    would get the answer and the end of stream in one read, and some drop
    the answer then (kafka-python 3.0's transport does); closing second
    lets every client see the answer first."""
    with trio.move_on_after(_FAILED_LOGIN_GRACE):
        try:
            while await stream.receive_some(RECEIVE_CHUNK):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass


class _CloseConnection(Exception):
    """Internal: the request cannot be answered; close the connection."""


class _ClosedMidFrame(Exception):
    """Internal: the client closed the connection in the middle of a frame."""


class Broker:
    """A Kafka-protocol broker serving the
    APIs and versions of `kclient.broker.handlers.SUPPORTED_VERSIONS`
    from a `kclient.storage.LogManager` under ``config.log_dirs``.

    ``config`` is a `kclient.config.BrokerConfig`. Run it with
    ``port = await nursery.start(broker.serve)``; call `stop` (or
    cancel the surrounding scope) to stop it: connections are closed, the
    log manager flushed and closed.

    With ``zookeeper.connect`` set it registers itself and its topics in
    ZooKeeper before it starts listening
    (`kclient.broker.zk_registration`); an unreachable ZooKeeper makes
    `serve` raise `kclient.errors.ZkTimeoutError` after
    ``zookeeper.connection.timeout.ms``. Without it the broker is
    standalone.

    Attributes set once serving: ``port`` (the first listener's bound TCP
    port), ``ports`` (listener name -> bound port), ``listeners`` (the
    `kclient.broker.security.ListenerRuntime` of each listener), ``state``
    (the `BrokerState`),
    ``connection_count`` (connections being served now).

    One listening socket per entry of ``listeners`` (KIP-103), each with
    its security protocol: TLS listeners wrap connections in
    ``trio.SSLStream`` (KIP-651 PEM stores), SASL listeners require
    SaslHandshake / SaslAuthenticate first (KIP-43, KIP-152); see
    `kclient.broker.security`. Metadata answers every client with the
    address of the listener it connected to.
    """

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.port: int | None = None
        self.state: BrokerState | None = None
        #: The `kclient.broker.components.BrokerComponents` (once serving).
        self.components: BrokerComponents | None = None
        self.connection_count = 0
        self._handlers: RequestHandlers | None = None
        self.registrar: BrokerRegistrar | None = None
        #: The `kclient.broker.controller.Controller` (ZooKeeper mode only).
        self.controller: Controller | None = None
        self._scope: trio.CancelScope | None = None
        self.listeners: list[ListenerRuntime] = []
        self.ports: dict[str, int] = {}
        self._scram_store = ScramCredentialStore(None)
        self._refusals = RateLimitedLog(log, interval=config.connection_rejection_log_interval_ms / 1000.0)
        #: The ``queued.max.request.bytes`` budget (`RequestMemory`).
        #: Frames read before authentication take from their own share,
        #: ``queued.max.unauthenticated.request.bytes``.
        self.request_memory = RequestMemory(config.request_memory_limit, config.queued_max_unauthenticated_request_bytes)
        #: The worker threads evaluating SASL tokens (never the event loop).
        self._sasl_limiter = trio.CapacityLimiter(SASL_EVALUATION_THREADS)
        #: The worker threads parsing large request frames.
        self._decode_limiter = trio.CapacityLimiter(DECODE_THREADS)
        self._limits: ConnectionLimits | None = None
        self._connection_rates: ConnectionRateQuotas | None = None
        #: Each listener's ``ssl.principal.mapping.rules`` (set by `serve`).
        self._principal_mappers: dict[str, SslPrincipalMapper] = {}

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the broker until cancelled or `stop` is called.

        Opens the logs, listens on every listener (port 0 picks a free
        one), then serves; after `stop` it returns normally. On the way out
        every connection is closed and every log flushed and closed.

        Args:
            task_status (trio.TaskStatus): ``task_status.started(bound_port)``
                is called once every listener is bound (the first listener's
                port; see ``ports`` for all).

        Raises:
            OSError: An address cannot be bound.
            kclient.errors.ConfigError: A log directory is unusable, or a
                listener's keystore / truststore cannot be read.
        """
        self._principal_mappers = principal_mappers(self.config.security_properties, [e.name for e in self.config.listener_endpoints()])
        bound = await self._bind_listeners()
        listeners = [lst for _, group in bound for lst in group]
        state = await self._open_state(listeners)
        registrar = await self._start_registrar(state, listeners)
        components = BrokerComponents(state, zk=registrar.client if registrar is not None else None)
        self.state = state
        self.components = components
        self.registrar = registrar
        self.controller = components.controller
        self._handlers = RequestHandlers(components)
        config = self.config
        self._connection_rates = connection_rate_quotas(config, [runtime.name for runtime, _ in bound], components.quotas, trio.current_time)
        self._scram_store = ScramCredentialStore(registrar.client if registrar is not None else None)
        try:
            self._limits = await self._connection_limits()
            self._log_start(state)
            if registrar is not None:
                state.producer_ids.zk = registrar.client
                state.producer_ids.broker_id = state.broker_id
            else:
                await components.lead_local_logs()
            await self._run(components, bound, task_status)
        finally:
            await self._shut_down(components, listeners)

    async def _bind_listeners(self) -> list[tuple[ListenerRuntime, list[trio.SocketListener]]]:
        """Bind every listener of the config; sets ``listeners``, ``ports``
        and ``port``. Returns each listener's runtime with its listening
        sockets; on failure closes those already bound."""
        config = self.config
        runtimes = [ListenerRuntime.create(security) for security in config.listener_security()]
        bound: list[tuple[ListenerRuntime, list[trio.SocketListener]]] = []
        try:
            for runtime in runtimes:
                endpoint = runtime.security.listener
                try:
                    listeners = await trio.open_tcp_listeners(endpoint.port, host=endpoint.host or "0.0.0.0")
                except OSError as exc:  # name the address: "Address already in use" alone does not
                    where = f"{endpoint.host or '0.0.0.0'}:{endpoint.port} ({runtime.name})"
                    raise OSError(exc.errno, f"cannot listen on {where}: {exc.strerror or exc}") from exc
                port = listeners[0].socket.getsockname()[1]
                if endpoint.port == 0 and len(listeners) > 1:
                    # Port 0 gives each address of a multi-address host its own
                    # port; keep the one we report.
                    extra = [lst for lst in listeners[1:] if lst.socket.getsockname()[1] != port]
                    for lst in extra:
                        await lst.aclose()
                    listeners = [lst for lst in listeners if lst not in extra]
                bound.append((runtime, listeners))
                runtime.port = port
                runtime.addresses = [lst.socket.getsockname()[:2] for lst in listeners]
                runtime.advertised_host, runtime.advertised_port = config.advertised_address(runtime.name, port)
        except BaseException:
            await _close_all([lst for _, group in bound for lst in group])
            raise
        self.listeners = runtimes
        self.ports = {runtime.name: runtime.port for runtime in runtimes}
        self.port = runtimes[0].port
        return bound

    async def _open_state(self, listeners: list[trio.SocketListener]) -> BrokerState:
        """Open the logs (`BrokerState.open`) with the first listener's
        advertised address; on failure closes ``listeners``."""
        first = self.listeners[0]
        try:
            return BrokerState.open(self.config, advertised_host=first.advertised_host, advertised_port=first.advertised_port)
        except BaseException:
            await _close_all(listeners)
            raise

    async def _start_registrar(self, state: BrokerState, listeners: list[trio.SocketListener]) -> BrokerRegistrar | None:
        """Register the broker in ZooKeeper when ``zookeeper.connect`` is
        set (None otherwise); on failure closes ``listeners`` and the logs."""
        config = self.config
        if not config.zookeeper_connect:
            return None
        registrar = BrokerRegistrar(
            state,
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
            listeners=[
                (r.name, r.security.listener.protocol.value, r.advertised_host, r.advertised_port) for r in self.listeners
            ],
        )
        try:
            await registrar.start()
        except BaseException:
            await _close_all(listeners)
            state.close()
            raise
        return registrar

    async def _connection_limits(self) -> ConnectionLimits:
        """``max.connections`` and ``max.connections.per.ip`` (the
        per-address overrides may resolve host names: a worker thread)."""
        if self.config.max_connections_per_ip_overrides:
            return await trio.to_thread.run_sync(ConnectionLimits, self.config)
        return ConnectionLimits(self.config)

    def _log_start(self, state: BrokerState) -> None:
        """Log the broker's identity, its listeners and any exposure."""
        config = self.config
        runtimes = self.listeners
        log.info("broker %d: cluster id %s, log dirs %s", state.broker_id, state.cluster_id, ", ".join(str(d) for d in state.log_dirs))
        for runtime in runtimes:
            endpoint = runtime.security.listener
            log.info(
                "broker %d listening on %s:%d (listener %s, %s%s), advertised as %s:%d",
                state.broker_id,
                endpoint.host or "0.0.0.0",
                runtime.port,
                runtime.name,
                endpoint.protocol.value,
                _security_summary(runtime),
                runtime.advertised_host,
                runtime.advertised_port,
            )
        if not config.listeners and not config.host_name:
            log.info(
                "bound to %s only (loopback, the default): set host.name or listeners "
                "(e.g. listeners=PLAINTEXT://0.0.0.0:9092) to accept connections from other machines",
                config.listen_host,
            )
        elif any(not r.security.listener.host or r.security.listener.host in ("0.0.0.0", "::") for r in runtimes):
            if not any(r.uses_sasl or r.uses_ssl for r in runtimes):
                log.warning("listening on every interface with no TLS and no authentication")

    async def _run(
        self, components: BrokerComponents, bound: list[tuple[ListenerRuntime, list[trio.SocketListener]]], task_status: trio.TaskStatus[int]
    ) -> None:
        """Run the components, the accept loops, the periodic jobs and the
        ZooKeeper registration until `stop` or cancellation."""
        async with trio.open_nursery() as nursery:
            self._scope = nursery.cancel_scope
            await nursery.start(components.run)
            for runtime, group in bound:
                nursery.start_soon(self._accept_all, group, runtime)
            for name, period_ms, job in self._periodic_jobs(components.state):
                nursery.start_soon(self._run_periodically, name, period_ms, job)
            if self._refusals.interval > 0:
                nursery.start_soon(self._flush_refusals)
            if self.registrar is not None:
                nursery.start_soon(self.registrar.run)
            assert self.port is not None  # bound by _bind_listeners
            task_status.started(self.port)

    async def _shut_down(self, components: BrokerComponents, listeners: list[trio.SocketListener]) -> None:
        """End the ZooKeeper session, close the listeners, flush and close
        the logs, and log the request memory figures."""
        self._scope = None
        with trio.CancelScope(shield=True):
            if self.registrar is not None:
                await self.registrar.close()
            for listener in listeners:
                await listener.aclose()
        components.close()
        self._refusals.flush(force=True)
        memory = self.request_memory
        log.info(
            "request memory: peak %d bytes (queued.max.request.bytes %s), %d waits for it",
            memory.peak,
            memory.limit if memory.limit is not None else "unbounded",
            memory.waits,
        )
        log.info("broker %d stopped; logs flushed and closed", components.state.broker_id)

    def stop(self) -> None:
        """Ask `serve` to stop.

        It then closes every connection, flushes and closes the logs, and
        returns. No effect if it is not serving. Call from the trio thread.
        """
        if self._scope is not None:
            self._scope.cancel()

    def _periodic_jobs(self, state: BrokerState) -> list[tuple[str, int, Callable[[], Any]]]:
        """``(name, period_ms, blocking_call)`` of each periodic task (see
        the module docstring)."""
        config = self.config
        logs = state.logs
        jobs: list[tuple[str, int, Callable[[], Any]]] = [
            ("retention", config.log_retention_check_interval_ms, logs.cleanup),
            ("recovery point checkpoint", config.log_flush_offset_checkpoint_interval_ms, logs.checkpoint_recovery_points),
        ]
        flush_period = config.flush_scheduler_interval_ms
        if flush_period is not None:
            jobs.append(("log flush", flush_period, logs.flush_if_due))
        if config.log_cleaner_enable:
            from kclient.storage.cleaner import LogCleaner

            cleaner = LogCleaner(logs, dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size)
            jobs.append(("log cleaner", max(1, config.log_cleaner_backoff_ms), cleaner.clean_all))
        return jobs

    async def _run_periodically(self, name: str, period_ms: int, job: Callable[[], Any]) -> None:
        """Call ``job`` in a worker thread every ``period_ms`` ms until
        cancelled; a failure is logged and the schedule goes on. The call
        in progress always completes (worker threads cannot be cancelled),
        so the logs are never closed under it."""
        log.debug("periodic task %r every %d ms", name, period_ms)
        while True:
            await trio.sleep(period_ms / 1000.0)
            try:
                await trio.to_thread.run_sync(job)
            except Exception:
                log.exception("periodic task %r failed", name)

    async def _flush_refusals(self) -> None:
        """Log the counts of rejections held back, once per interval."""
        while True:
            await trio.sleep(self._refusals.interval)
            self._refusals.flush()

    async def _accept_all(self, listeners: list[trio.SocketListener], runtime: ListenerRuntime) -> None:
        async def serve(stream: trio.SocketStream) -> None:
            await self._serve_connection(stream, runtime)

        await trio.serve_listeners(serve, listeners)

    async def _serve_connection(self, stream: trio.SocketStream, listener: ListenerRuntime | None = None) -> None:
        try:
            peer = stream.socket.getpeername()
            peer_name = f"{peer[0]}:{peer[1]}"
            address = normalize_address(peer[0])
        except OSError:
            peer_name = address = "?"
        limits = self._limits
        assert limits is not None
        refused = limits.admit(address)
        if refused is not None:
            kind = refused.split(" ", 1)[0]
            self._refusals.log(kind, "closing connection from %s: %s", peer_name, refused)
            with trio.CancelScope(shield=True):
                await stream.aclose()
            return
        self.connection_count += 1
        client_session.set(ClientSession(address=address))  # quotas (kclient.broker.quotas)
        try:
            stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        except OSError:
            pass
        if listener is None:
            listener = self.listeners[0]
        log.debug("connection from %s on listener %s", peer_name, listener.name)
        conn: Any = stream
        try:
            if self._connection_rates is not None and not await self._connection_rates.admit(stream, listener.name, address, peer_name, self._refusals):
                return
            listener_address.set((listener.advertised_host, listener.advertised_port))
            client_host.set(f"/{peer_name.rsplit(':', 1)[0]}")
            listener_name.set(listener.name)
            session = ConnectionSession(client_address=address, listener=listener.name)
            _session.set(session)
            if listener.uses_ssl:
                tls = await tls_handshake(stream, listener, peer_name, self._refusals, self.config.connection_failed_authentication_delay_ms / 1000.0)
                if tls is None:
                    with trio.CancelScope(shield=True):
                        await stream.aclose()
                    return
                conn = tls
                principal = certificate_principal(tls.getpeercert())
                if principal is not None:
                    log.debug("connection from %s: TLS client certificate %s", peer_name, principal)
                    session.tls_principal = self._mapped_principal(principal, listener.name)
            sasl = None
            if listener.uses_sasl:
                sasl = SaslAuthenticator(listener, self._scram_store, peer_name, self._refusals, self._sasl_limiter)
                session.sasl = sasl
            async with conn:
                await self._connection_loop(conn, peer_name, sasl)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            log.debug("connection from %s lost", peer_name)
        except _CloseConnection:
            pass
        except Exception:  # never let one connection take the broker down
            log.exception("closing connection from %s after an unexpected error", peer_name)
        else:
            log.debug("connection from %s closed", peer_name)
        finally:
            self.connection_count -= 1
            limits.leave(address)

    def _mapped_principal(self, principal: str, listener: str) -> str:
        """A TLS client certificate's principal mapped by the listener's
        ``ssl.principal.mapping.rules`` (KIP-371); raises `_CloseConnection`
        when no rule applies (Kafka fails the authentication)."""
        mapper = self._principal_mappers.get(listener) or SslPrincipalMapper()
        try:
            return "User:" + mapper.name(principal.removeprefix("User:"))
        except NoMatchingRule as exc:
            self._refusals.log("tls", "closing connection on listener %s: %s", listener, exc)
            raise _CloseConnection from None

    async def _connection_loop(self, stream: Any, peer: str, sasl: SaslAuthenticator | None = None) -> None:
        config = self.config
        idle_ms = config.connections_max_idle_ms
        idle = idle_ms / 1000.0 if idle_ms > 0 else float("inf")
        session = client_session.get(None)
        while True:
            if session is not None:
                await session.wait_unmuted()  # KIP-219: a throttled connection is muted
            # Between requests: the connection is idle until a byte arrives.
            with trio.move_on_after(idle) as idle_scope:
                prefix = await stream.receive_some(4)
            if idle_scope.cancelled_caught:
                log.debug("closing connection from %s: idle for connections.max.idle.ms (%d)", peer, idle_ms)
                return
            if not prefix:
                return  # closed by the client between requests
            clock = ReadClock(config.socket_request_read_timeout_ms / 1000.0)
            if await self._read_frame(stream, peer, prefix, clock, sasl) is None:
                return

    async def _read_frame(
        self, stream: Any, peer: str, prefix: bytes, clock: ReadClock, sasl: SaslAuthenticator | None
    ) -> bool | None:
        """Read the rest of one request frame (``prefix``: its first bytes),
        answer it and send the response. Returns True, or None when the
        client closed the connection mid-frame; raises `_CloseConnection`."""
        try:
            size = await self._frame_size(stream, peer, prefix, clock, sasl)
            response = await self._receive_and_answer(stream, peer, size, clock, sasl)
        except _ClosedMidFrame:
            return None
        except trio.TooSlowError:
            self._refusals.log(
                "read-timeout",
                "closing connection from %s: request not received within socket.request.read.timeout.ms (%d)",
                peer,
                self.config.socket_request_read_timeout_ms,
            )
            raise _CloseConnection from None
        except SaslClose as close:
            await self._fail_authentication(stream, close)
        # The request is answered and its budget given back; now send.
        if response is None:
            return True
        session = client_session.get(None)
        if session is not None:
            await session.wait_to_respond()  # a throttled old-version request (quotas)
        if isinstance(response, SplicedResponse):
            with response:
                if isinstance(stream, trio.SocketStream):
                    await response.send(stream)
                else:  # TLS: the bytes must go through the SSL object
                    await stream.send_all(response.to_bytes())
        else:
            await stream.send_all(response)
        return True

    async def _frame_size(
        self, stream: Any, peer: str, prefix: bytes, clock: ReadClock, sasl: SaslAuthenticator | None
    ) -> int:
        """The size of the frame that ``prefix`` starts (its 4-byte size
        completed from the stream). Raises `_CloseConnection` for a size
        out of range: above ``sasl.server.max.receive.size`` before the
        SASL login completes (Kafka's InvalidReceiveException), negative or
        above ``socket.request.max.bytes``; `_ClosedMidFrame` at EOF."""
        while len(prefix) < 4:
            more = await clock.receive(stream, 4 - len(prefix))
            if not more:
                self._refusals.log("mid-frame", "connection from %s closed mid-frame (%d bytes buffered)", peer, len(prefix))
                raise _ClosedMidFrame
            prefix += more
        size = int(_SIZE.unpack(prefix)[0])
        if sasl is not None and not sasl.complete and size > sasl.max_receive_size:
            # Refused from the size alone, as Kafka's SaslServerAuthenticator
            # does: none of the frame is read.
            self._refusals.log(
                "sasl-receive-size",
                "closing connection from %s on listener %s: invalid receive (size = %d larger than %d) "
                "before SASL authentication completed (sasl.server.max.receive.size)",
                peer,
                sasl.listener.name,
                size,
                sasl.max_receive_size,
            )
            raise _CloseConnection
        max_frame = self.config.socket_request_max_bytes
        if not 0 <= size <= max_frame:
            # Refused from the size alone: none of the frame is read.
            self._refusals.log(
                "frame-size",
                "closing connection from %s: request frame size %d outside 0..%d (socket.request.max.bytes)",
                peer,
                size,
                max_frame,
            )
            raise _CloseConnection
        return size

    async def _receive_and_answer(
        self, stream: Any, peer: str, size: int, clock: ReadClock, sasl: SaslAuthenticator | None
    ) -> Reply | None:
        """Receive a frame of ``size`` bytes and answer it. Its bytes are
        taken from the request budget as they arrive (before
        authentication: from the unauthenticated share) and given back once
        it is answered."""
        memory = self.request_memory
        token = memory.begin(authenticated=sasl is None or sasl.complete)
        taken = 0
        try:
            chunks: list[bytes | bytearray] = []
            got = 0
            while got < size:
                want = min(size - got, RECEIVE_CHUNK)
                if memory.must_wait(token, want):
                    log.debug("request from %s held back: its request memory budget is used up", peer)
                await clock.reserve(memory, token, want)
                taken += want
                data = await clock.receive(stream, want)
                memory.release(token, want - len(data))
                taken -= want - len(data)
                if not data:
                    self._refusals.log("mid-frame", "connection from %s closed mid-frame (%d bytes buffered)", peer, got + 4)
                    raise _ClosedMidFrame
                chunks.append(data)
                got += len(data)
            frame = b"".join(chunks)
            del chunks
            if sasl is not None and not sasl.complete:
                # Logins are short: the frame counts as being read (the one
                # that may go over its share) until answered, so frames
                # waiting for a SASL worker thread stay within the share.
                return await self._respond(frame, peer, stream, sasl, lambda: None)
            # Done reading once parsed (a large frame waits for a worker
            # thread): the next frame may then go over the budget.
            return await self._respond(frame, peer, stream, sasl, lambda: memory.done_reading(token))
        finally:
            memory.done_reading(token)
            memory.release(token, taken)

    async def _fail_authentication(self, stream: Any, close: SaslClose) -> NoReturn:
        """KIP-306: hold the failure response back for
        ``connection.failed.authentication.delay.ms``, then send it and
        close, so that a client gets at most one answer per delay on a
        connection. Only this connection waits; it holds no request budget
        meanwhile."""
        await trio.sleep(self.config.connection_failed_authentication_delay_ms / 1000.0)
        if close.data:
            await stream.send_all(close.data)
            await _let_the_client_close(stream)
        raise _CloseConnection

    async def _respond(
        self, frame: bytes, peer: str, stream: Any, sasl: SaslAuthenticator | None, parsed: Callable[[], None]
    ) -> Reply | None:
        """The response to one frame (SASL raw tokens included); calls
        ``parsed()`` once the frame is parsed; raises `SaslClose` when a
        login failed."""
        if sasl is not None and sasl.expects_raw_token:
            return await sasl.raw_token(frame)
        return await self._answer(frame, peer, stream, sasl, parsed)

    async def _answer(
        self, frame: bytes, peer: str, stream: Any, sasl: SaslAuthenticator | None = None, parsed: Callable[[], None] = lambda: None
    ) -> Reply | None:
        """What to send back for one request frame: bytes, a zero-copy
        `SplicedResponse` (Fetch v4+), or None (no response).
        Raises `_CloseConnection` where the connection is to be
        closed instead."""
        decoded = await self._decode(frame, peer, sasl)
        parsed()
        if isinstance(decoded, bytes):
            return decoded
        header, api, body = decoded
        log.debug("%s v%d from %s (correlation id %d)", api.name, header.api_version, peer, header.correlation_id)
        if sasl is not None and not sasl.complete:
            reply = await _authenticate(sasl, header, api, body)
            if reply is not None:
                return reply
        return await self._dispatch(header, api, body, peer, stream, len(frame))

    async def _decode(self, frame: bytes, peer: str, sasl: SaslAuthenticator | None = None) -> tuple[RequestHeader, Api, Any] | bytes:
        """The request in ``frame``: its header, API and request message
        (an instance of the API's ``request_type``), or the
        bytes to answer at once (the KIP-511 reply to an ApiVersions of a
        version the broker lacks; INVALID_REQUEST to a malformed
        ApiVersions). Raises `_CloseConnection` for an unreadable header,
        an unknown API, an unsupported version or a malformed body, and
        `SaslClose` for an API not allowed before the SASL login (checked
        from the header: such a body is never decoded, as in Kafka). A
        frame over `DECODE_IN_THREAD_BYTES` is parsed in a worker thread."""
        header, api = await self._parse_header(frame, peer)
        if sasl is not None and not sasl.complete:
            sasl.check_allowed(header, api.name)
        lo, hi = SUPPORTED_VERSIONS[header.api_key]
        if not lo <= header.api_version <= hi:
            if header.api_key == API_VERSIONS.key:
                log.debug("ApiVersions v%d from %s: sending the KIP-511 reply", header.api_version, peer)
                return encode_unsupported_api_versions(header.correlation_id, supported_triples())
            self._refusals.log(
                "bad-request",
                "closing connection from %s: %s v%d is not supported (%d-%d)",
                peer,
                api.name,
                header.api_version,
                lo,
                hi,
            )
            raise _CloseConnection
        try:
            return header, api, await self._off_loop(frame, _decode_body, frame, header, api)
        except _DECODE_ERRORS as exc:
            if header.api_key == API_VERSIONS.key:
                # Kafka answers an undecodable ApiVersions with INVALID_REQUEST.
                self._refusals.log("bad-request", "malformed ApiVersions v%d from %s: %s", header.api_version, peer, exc)
                return encode_response(API_VERSIONS, header.api_version, header.correlation_id, ApiVersionsResponse(error_code=INVALID_REQUEST))
            self._refusals.log(
                "bad-request", "closing connection from %s: malformed %s v%d request: %s", peer, api.name, header.api_version, exc
            )
            raise _CloseConnection from None

    async def _off_loop(self, frame: bytes, parse: Callable[..., _T], *args: Any) -> _T:
        """``parse(*args)``, in a worker thread when ``frame`` is over
        `DECODE_IN_THREAD_BYTES` (`kclient.broker.offload.run_in_worker`):
        parsing costs CPU in proportion to the frame, never that long on
        the event loop."""
        if len(frame) <= DECODE_IN_THREAD_BYTES:
            return parse(*args)
        return await run_in_worker(parse, *args, limiter=self._decode_limiter)

    async def _parse_header(self, frame: bytes, peer: str) -> tuple[RequestHeader, Api]:
        """The request header of ``frame`` and its API (one this broker
        advertises); raises `_CloseConnection` otherwise."""
        try:
            header = await self._off_loop(frame, parse_request_header, frame)
        except _DECODE_ERRORS as exc:
            self._refusals.log("bad-request", "closing connection from %s: unreadable request header: %s", peer, exc)
            raise _CloseConnection from None
        api = BROKER_APIS.get(header.api_key)
        if api is None or header.api_key not in SUPPORTED_VERSIONS:
            self._refusals.log(
                "bad-request",
                "closing connection from %s: unknown api key %d (version %d, correlation id %d)",
                peer,
                header.api_key,
                header.api_version,
                header.correlation_id,
            )
            raise _CloseConnection
        return header, api

    async def _dispatch(self, header: RequestHeader, api: Api, body: Any, peer: str, stream: Any, size: int = 0) -> Reply | None:
        """Hand the request to its handler and encode the response (None:
        no response). Raises `_CloseConnection` where the handler says to
        close, or the client left during a Fetch long poll."""
        assert self._handlers is not None
        sock = stream.socket if isinstance(stream, trio.SocketStream) else stream.transport_stream.socket
        cap_fetch_bytes(self._handlers.quotas, header, body)
        try:
            session = _session.get()
            context = session.context() if session is not None else None
            if context is not None and (quota_session := client_session.get(None)) is not None:
                quota_session.set_principal(context.principal)  # the quota user (KIP-55)
            result = await self._handlers.handle(header, body, peer_gone=lambda: _peer_closed(sock), context=context)
        except CloseConnection as exc:
            self._refusals.log("bad-request", "closing connection from %s: %s", peer, exc)
            raise _CloseConnection from None
        except ClientGone:
            log.debug("connection from %s closed during a %s long poll", peer, api.name)
            raise _CloseConnection from None
        result = await apply_quota(self._handlers.quotas, header, body, result, size)
        if result is None:
            return None
        if isinstance(result, FetchResponse):
            return encode_spliced_response(api, header.api_version, header.correlation_id, result)
        return encode_response(api, header.api_version, header.correlation_id, result)


def _decode_body(frame: bytes, header: RequestHeader, api: Api) -> Any:
    """Decode the body of a request whose header is parsed.

    Args:
        frame: The request frame (header and body).
        header: Its parsed header.
        api: Its API.

    Returns:
        The request message (an instance of ``api.request_type``).

    Raises:
        ProtocolError: (or another of ``_DECODE_ERRORS``) a malformed body.
    """
    if APIS.get(api.key) is api:
        return decode_request(header, frame)
    # SASL, admin, group and inter-broker APIs: not in decode_request's table.
    body_offset = header.body_offset
    if api.flexible(header.api_version):
        # parse_request_header skips a flexible header's tagged fields only
        # for the APIs of `APIS`.
        _, body_offset = read_tagged_fields(frame, body_offset)
        if api.key == METADATA_FULL.key:
            # librdkafka's all-topics Metadata v9+ leaves its 4-byte array
            # count placeholder: a compact null array (0x00) and three more
            # bytes, which Kafka's broker reads past (it ignores bytes after
            # a request's fields). Read it as Kafka does.
            body, end = api.request(header.api_version).read_message(memoryview(frame)[body_offset:], 0)
            if body_offset + end != len(frame):
                log.debug("Metadata v%d: ignoring %d bytes after the request's fields, as Kafka does", header.api_version, len(frame) - body_offset - end)
            return body
    return api.request(header.api_version).decode_message(memoryview(frame)[body_offset:])


async def _authenticate(sasl: SaslAuthenticator, header: RequestHeader, api: Api, body: Any) -> bytes | None:
    """Before SASL completes: refuse other APIs (`SaslAuthenticator.check_allowed`)
    and answer SaslHandshake / SaslAuthenticate (None for any other API).

    Raises:
        SaslClose: The exchange failed; its data is the last response.
    """
    sasl.check_allowed(header, api.name)
    if header.api_key not in (SASL_HANDSHAKE.key, SASL_AUTHENTICATE.key):
        return None
    reply: SaslHandshakeResponse | SaslAuthenticateResponse
    if isinstance(body, SaslHandshakeRequest):
        reply, close = sasl.handshake(header, body)
    else:
        reply, close = await sasl.authenticate(header, body)
    data = encode_response(api, header.api_version, header.correlation_id, reply)
    if close:
        raise SaslClose(data)
    return data


async def _close_all(listeners: list[trio.SocketListener]) -> None:
    """Close listening sockets, shielded from cancellation."""
    with trio.CancelScope(shield=True):
        for listener in listeners:
            await listener.aclose()


def _security_summary(runtime: ListenerRuntime) -> str:
    """``", ssl.client.auth=required, SASL PLAIN/SCRAM-SHA-256"`` for the start-up log."""
    parts = []
    if runtime.uses_ssl:
        parts.append(f"ssl.client.auth={runtime.security.ssl_client_auth.value}")
    if runtime.uses_sasl:
        parts.append("SASL " + "/".join(runtime.security.sasl_enabled_mechanisms))
    return "".join(", " + p for p in parts)


async def _peer_closed(sock: Any) -> bool:
    """Wait until ``sock`` is readable; True if the peer closed it (EOF or
    reset), False if data arrived instead (left unread)."""
    await trio.lowlevel.wait_readable(sock)
    try:
        data = await sock.recv(1, socket.MSG_PEEK)
    except OSError:
        return True
    return not data


__all__ = ["BROKER_APIS", "DECODE_IN_THREAD_BYTES", "DECODE_THREADS", "RECEIVE_CHUNK", "Broker"]
