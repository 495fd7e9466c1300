"""A trio connection to one broker: pipelined requests, correlation ids,
timeouts, ApiVersions negotiation, TLS and SASL authentication.

`BrokerConnection` wraps the sans-I/O
`kclient.protocol.connection.ClientConnection`. Many tasks may call
`BrokerConnection.request` at once: sends are serialized, responses
come back in request order on a reader task that lives in the nursery given
to `BrokerConnection.connect`. On a timeout or a lost connection every
pending request fails with `KafkaTimeoutError` /
`KafkaConnectionError` and the connection is closed (responses are
ordered, so one lost response would misalign all that follow).

Receive memory follows the bytes that arrive, not the sizes announced: a
large response is received in place into a buffer that starts at 1 MiB and
doubles as it fills (`kclient.protocol.connection.FrameBuffer`), so a
response header claiming 100 MiB followed by silence costs about 1 MiB
until the request's timeout. Each response may be as large as its request
asked for (a Fetch's ``max_bytes`` / ``partition_max_bytes`` plus 8 MiB,
other requests 8 MiB); a larger size prefix fails every pending request
with `FrameTooLargeError` (naming the size and the cap) and closes the
connection.

A request that failed after it was written (a timeout, a connection lost
after the write) may have been processed by the broker; one whose write
failed was not (an incomplete frame is never processed). The producer
reports the two apart (`FailedToSendMessageError.possibly_written`).

Security (``security.protocol``, see `kclient.security.settings.ClientSecurity`):
with SSL / SASL_SSL the TCP stream is wrapped in a `trio.SSLStream` and the
TLS handshake runs within ``connect_timeout_ms``; a failed handshake raises
`SslAuthenticationError` naming the cause (untrusted certificate, host-name
mismatch, certificate refused). With SASL_PLAINTEXT / SASL_SSL the client,
after ApiVersions, sends SaslHandshake v1 naming ``sasl.mechanism`` (KIP-43)
and then the mechanism's tokens in SaslAuthenticate requests (KIP-152) until
the exchange completes; PLAIN and SCRAM-SHA-256/512 (KIP-84) are supported.
Authentication errors are `AuthenticationError` subclasses and never
retriable.
"""

from __future__ import annotations

import logging
import math
import os
import select
import socket
import ssl
import time
from typing import Any

import trio

from kclient.errors import (
    UNSUPPORTED_VERSION,
    AuthenticationError,
    FrameTooLargeError,
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    error_for_code,
)
from kclient.net.throttle_stats import ThrottleTracker
from kclient.protocol.connection import ClientConnection, Response
from kclient.protocol.messages import API_VERSIONS, FETCH, PRODUCE, SASL_AUTHENTICATE, SASL_HANDSHAKE, choose_version
from kclient.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kclient.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kclient.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kclient.protocol.schema import Api, Body
from kclient.protocol.throttle import client_throttles
from kclient.security.settings import ClientSecurity
from kclient.security.tls import client_ssl_context, ssl_authentication_error

log = logging.getLogger(__name__)

_RECV_BYTES = 1 << 20
#: The same over plain TCP (read straight from the socket, `_receive_raw`),
#: where a large response goes in place once its size prefix has arrived
#: (_DIRECT_FRAME_BYTES): a read of n bytes allocates n bytes and shrinks
#: them to what arrived, and at 1 MB every read got a fresh mapping from
#: malloc (page faults on each) plus two more copies of the head of every
#: fetch response (measured: 1 MB fetches took 0.54 instead of 0.78 ms of
#: CPU each, ~150 page faults fewer).
_RECV_BYTES_RAW = 64 * 1024
#: Responses at least this big are received in place (FrameBuffer.receive_buffer).
_DIRECT_FRAME_BYTES = 64 * 1024
#: SaslHandshake v1: the tokens travel in SaslAuthenticate requests (KIP-152).
_SASL_HANDSHAKE_VERSION = 1
#: SaslAuthenticate version used when ApiVersions was not negotiated.
_SASL_AUTHENTICATE_VERSION = 1
#: A SASL exchange longer than this many rounds is a broker bug (SCRAM needs 2).
_MAX_SASL_ROUNDS = 10


def _ssl_cause(exc: BaseException) -> ssl.SSLError | None:
    """The `ssl.SSLError` behind ``exc`` (trio wraps it in
    `trio.BrokenResourceError`), or ``None``."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, ssl.SSLError):
            return exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return None


class _Pending:
    __slots__ = ("event", "response", "error", "api", "deadline", "timeout_ms")

    def __init__(self, api: Api, deadline: float, timeout_ms: int) -> None:
        self.event = trio.Event()
        self.response: Response | None = None
        self.error: BaseException | None = None
        self.api = api
        self.deadline = deadline  # trio clock (s); enforced by the connection's watchdog
        self.timeout_ms = timeout_ms


class PendingResponse:
    """A request already written to a `BrokerConnection`, whose
    response has not been awaited yet (see
    `BrokerConnection.start_request`)."""

    def __init__(self, conn: BrokerConnection, api: Api, pending: _Pending) -> None:
        self._conn = conn
        self._api = api
        self._pending = pending

    async def wait(self, timeout_ms: int | None = None) -> Any:
        """Wait for the response.

        Args:
            timeout_ms: How long to wait, in ms (default
                ``request.timeout.ms``).

        Returns:
            The response message (an instance of the API's
                ``response_type``).

        Raises:
            kclient.errors.KafkaTimeoutError: No response within ``timeout_ms``.
            kclient.errors.KafkaConnectionError: The connection was lost.
        """
        return (await self._conn._wait(self._api, self._pending, timeout_ms)).body

    @property
    def done(self) -> bool:
        """True once the response (or the connection's failure) arrived."""
        return self._pending.event.is_set()


    def busy_wait(self, seconds: float) -> bool:
        """Poll the connection's socket until the response starts to arrive,
        for at most ``seconds``, without yielding to the event loop (the
        ``socket.busy.poll.us`` of sync sends). It reads nothing: the
        connection's reader takes the bytes once the caller awaits `wait`.

        Args:
            seconds: The longest poll (s).

        Returns:
            True once the response is in or its first bytes are readable,
                False when ``seconds`` ran out first or the connection is
                closed.
        """
        if self._pending.event.is_set():
            return True
        return self._conn._busy_wait_readable(seconds)

#: What a plain (PLAINTEXT, SASL_PLAINTEXT) connection that got no Kafka
#: answer says: the usual cause is a TLS listener.
_TLS_LISTENER_HINT = "if its listener uses TLS, set security.protocol=SSL or SASL_SSL"


def _is_tls_record_header(size: int) -> bool:
    """Whether a response's 4-byte size prefix is the start of a TLS record
    (content type handshake 22 or alert 21, protocol version 3.x): what a
    TLS listener sends back to a client that spoke plain Kafka to it.

    Args:
        size: The prefix read as a big-endian int32.

    Returns:
        True for a TLS record header.
    """
    b0, b1, b2 = (size >> 24) & 0xFF, (size >> 16) & 0xFF, (size >> 8) & 0xFF
    return b0 in (21, 22) and b1 == 3 and b2 <= 4


#: Lowest Produce version Kafka 4.0+ accepts (KIP-896 removed v0-v2).
KIP_896_PRODUCE_MIN_VERSION = 3
#: Lowest Fetch version Kafka 4.0+ advertises (KIP-896 removed v0-v3): a
#: broker whose Fetch starts here is a KIP-896 broker.
KIP_896_FETCH_MIN_VERSION = 4


def _effective_versions(versions: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """The versions a broker accepts, from those its ApiVersions advertised.

    Kafka 4.0+ removed Produce v0-v2 (KIP-896) yet still advertises Produce
    v0 (KAFKA-18659: old librdkafka releases refused to compress unless the
    broker listed v0); a v0-v2 Produce request makes it close the
    connection. Such a broker is known by its Fetch range starting at v4:
    its Produce range is taken to start at v3, so that a producer capped at
    an older release (``api.version``) fails with `UnsupportedVersionError`
    instead of a closed connection.

    Args:
        versions: API key -> ``(min, max)`` as advertised.

    Returns:
        ``versions``, with Produce's minimum raised on a KIP-896 broker.
    """
    produce, fetch = versions.get(PRODUCE.key), versions.get(FETCH.key)
    if produce is not None and fetch is not None and fetch[0] >= KIP_896_FETCH_MIN_VERSION and produce[0] < KIP_896_PRODUCE_MIN_VERSION:
        versions = {**versions, PRODUCE.key: (KIP_896_PRODUCE_MIN_VERSION, produce[1])}
    return versions


class BrokerConnection:
    """One TCP connection to ``host:port``.

    Create with ``await BrokerConnection.connect(nursery, host, port, ...)``.
    ``api_versions`` holds the broker's {api_key: (min, max)} after connect.
    """

    def __init__(self, stream: trio.abc.Stream, host: str, port: int, client_id: str | None, request_timeout_ms: int) -> None:
        self.host = host
        self.port = port
        self._stream = stream
        self._proto = ClientConnection(client_id)
        self._pending: dict[int, _Pending] = {}
        self._send_lock = trio.Lock()
        # Plain TCP: write to and receive into the socket directly (fast
        # paths). TLS: every byte goes through the SSLStream.
        self._raw = isinstance(stream, trio.SocketStream)
        self._fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else -1
        # The TCP socket under TLS too, polled by _busy_wait_readable.
        transport = stream if self._raw else getattr(stream, "transport_stream", None)
        sock = getattr(transport, "socket", None)
        self._poll_fd = sock.fileno() if sock is not None else -1
        self._poller: Any = None
        # Whether the last plain-TCP read emptied the socket (see _receive_raw).
        self._drained = True
        # Wakes the watchdog (_watch) at the earliest deadline of a pending request.
        self._watch_scope: trio.CancelScope | None = None
        self._closed = False
        self._close_reason: BaseException | None = None
        self.request_timeout_ms = request_timeout_ms
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._versions: dict[tuple[int, int | None, int | None], int] = {}

        #: The SASL mechanism this connection authenticated with, if any.
        self.sasl_mechanism: str | None = None
        # Whether any response arrived (a TLS connection closed before
        # that was refused by the broker's certificate check).
        self._answered = False
        self._client_certificate = False
        #: KIP-219: ``trio.current_time()`` until which the broker mutes
        #: this connection (nothing is sent before); see `throttled`.
        self.throttled_until = 0.0
        #: The last ``throttle_time_ms`` a response carried (ms) and how
        #: many responses were throttled.
        self.throttle_time_ms = 0
        self.throttle_count = 0
        #: Where every response's ``throttle_time_ms`` is recorded for the
        #: client's statistics (`kclient.net.throttle_stats`; None: nowhere).
        self.throttles: ThrottleTracker | None = None

    def __repr__(self) -> str:
        return f"<BrokerConnection {self.host}:{self.port}{' closed' if self._closed else ''}>"

    @property
    def uses_tls(self) -> bool:
        """Whether the connection runs over TLS."""
        return not self._raw

    @property
    def closed(self) -> bool:
        return self._closed

    @classmethod
    async def connect(
        cls,
        nursery: trio.Nursery,
        host: str,
        port: int,
        *,
        client_id: str | None = "kclient",
        connect_timeout_ms: int = 10000,
        request_timeout_ms: int = 30000,
        negotiate: bool = True,
        security: ClientSecurity | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> BrokerConnection:
        """Open a connection, secure and authenticate it, start its reader in ``nursery``.

        The order is Kafka's: TCP connect; the TLS handshake (SSL,
        SASL_SSL); ApiVersions (``negotiate``); SaslHandshake v1 and
        SaslAuthenticate rounds (SASL_PLAINTEXT, SASL_SSL; KIP-43, KIP-152).
        The TCP connect and the TLS handshake share ``connect_timeout_ms``;
        each SASL request has ``request_timeout_ms``.

        Args:
            nursery: Runs the connection's reader task.
            host: The broker's host (also the TLS server name checked
                against its certificate).
            port: The broker's port.
            client_id: Sent in every request header.
            connect_timeout_ms: Connection (and TLS handshake) timeout in ms.
            request_timeout_ms: Default response timeout of each request, in ms.
            negotiate: Fetch the broker's ApiVersions first, so that requests
                default to the highest common version.
            security: ``security.protocol`` and the ``ssl.*`` / ``sasl.*``
                settings; ``None`` for PLAINTEXT.
            ssl_context: A context built once by the caller with
                `kclient.security.tls.client_ssl_context` (clients reuse one
                for all their connections); built from ``security`` if not
                given.

        Returns:
            The open (and authenticated) connection.

        Raises:
            kclient.errors.KafkaConnectionError: The broker cannot be reached,
                or the TLS handshake does not finish, within
                ``connect_timeout_ms``.
            kclient.errors.SslAuthenticationError: The TLS handshake failed:
                the broker's certificate is not trusted or does not name
                ``host``, or the broker refused ours.
            kclient.errors.UnsupportedSaslMechanismError: The broker does not
                enable ``sasl.mechanism`` (the message lists the ones it does).
            kclient.errors.SaslAuthenticationFailedError: Wrong user name or
                password (the broker's message).
            kclient.errors.ConfigError: An ``ssl.*`` file cannot be used.
        """
        use_ssl = security is not None and security.security_protocol.uses_ssl
        if use_ssl and ssl_context is None:
            assert security is not None
            ssl_context = client_ssl_context(security)
        stream: trio.abc.Stream
        protocol = security.security_protocol.value if security is not None else "PLAINTEXT"
        log.debug("connecting to %s:%d (%s)", host, port, protocol)
        try:
            with trio.fail_after(connect_timeout_ms / 1000):
                tcp = await trio.open_tcp_stream(host, port)
                try:
                    tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass
                stream = tcp
                if use_ssl:
                    assert ssl_context is not None
                    stream = trio.SSLStream(tcp, ssl_context, server_hostname=host)
                    try:
                        await stream.do_handshake()
                    except BaseException:
                        with trio.CancelScope(shield=True):
                            await trio.aclose_forcefully(stream)
                        raise
        except trio.TooSlowError:
            what = "TLS handshake with" if use_ssl else "cannot connect to"
            raise KafkaConnectionError(f"{what} {host}:{port}: timed out after {connect_timeout_ms} ms") from None
        except trio.BrokenResourceError as exc:
            cause = _ssl_cause(exc)
            if cause is not None:
                raise ssl_authentication_error(cause, host=host) from cause
            raise KafkaConnectionError(f"TLS handshake with {host}:{port} failed: the connection was closed ({exc.__cause__ or exc})") from None
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {host}:{port}: {_connect_failure(exc)}") from None
        conn = cls(stream, host, port, client_id, request_timeout_ms)
        conn._client_certificate = bool(use_ssl and security is not None and security.ssl_certificate_location)
        nursery.start_soon(conn._reader)
        nursery.start_soon(conn._watch)
        try:
            if negotiate:
                await conn._negotiate()
            if security is not None and security.security_protocol.uses_sasl:
                await conn._authenticate(security)
        except BaseException:
            await conn.aclose()
            raise
        log.debug("connected to %s:%d (%s)", host, port, protocol)
        return conn

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SASL: SaslHandshake v1 (KIP-43), then SaslAuthenticate rounds (KIP-152).

        Args:
            security: Names the mechanism and the credentials.

        Raises:
            kclient.errors.UnsupportedSaslMechanismError: error 33; the
                message lists the broker's enabled mechanisms.
            kclient.errors.SaslAuthenticationFailedError: error 58, or the
                broker failed to prove it knows the SCRAM credential.
            kclient.errors.IllegalSaslStateError: error 34, or an exchange
                that does not end.
        """
        mechanism = security.sasl_client()
        name = mechanism.mechanism
        where = f"{self.host}:{self.port}"
        handshake: SaslHandshakeResponse = (await self._request(SASL_HANDSHAKE, _SASL_HANDSHAKE_VERSION, SaslHandshakeRequest(mechanism=name))).body
        code = handshake.error_code
        if code:
            enabled = ", ".join(handshake.mechanisms or ()) or "none"
            cls = error_for_code(code)
            if cls is UnsupportedSaslMechanismError:
                raise UnsupportedSaslMechanismError(
                    f"broker {where} does not enable sasl.mechanism={name}; it enables: {enabled}"
                )
            raise cls(f"SaslHandshake with {where} for {name}")
        if self.api_versions:
            version = self.version_for(SASL_AUTHENTICATE)
        else:
            version = _SASL_AUTHENTICATE_VERSION
        token: bytes | None = mechanism.initial_response()
        rounds = 0
        while token is not None:
            rounds += 1
            if rounds > _MAX_SASL_ROUNDS:
                raise IllegalSaslStateError(f"SASL/{name} with {where} did not complete in {_MAX_SASL_ROUNDS} rounds")
            body: SaslAuthenticateResponse = (await self._request(SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=token))).body
            code = body.error_code
            if code:
                message = body.error_message or ""
                cls = error_for_code(code)
                text = f"SASL/{name} authentication of {security.sasl_username!r} with {where} failed"
                if message:
                    text += f": {message}"
                if issubclass(cls, AuthenticationError):
                    raise cls(text)
                raise SaslAuthenticationFailedError(f"{text} (error {code} {cls.name})")
            token = mechanism.evaluate_challenge(bytes(body.auth_bytes or b""))
        if not mechanism.is_complete:
            raise IllegalSaslStateError(f"SASL/{name} with {where} ended before the exchange completed")
        self.sasl_mechanism = name
        log.debug("authenticated to %s as %r with SASL/%s", where, security.sasl_username, name)

    async def _negotiate(self) -> None:
        request = ApiVersionsRequest(client_software_name="kclient", client_software_version="0.1.0")
        response = await self._request(API_VERSIONS, API_VERSIONS.max_version, request)
        body: ApiVersionsResponse = response.body
        if response.version != API_VERSIONS.max_version or body.error_code == UNSUPPORTED_VERSION:
            # KIP-511: retry with the highest version the broker has.
            version = choose_version(API_VERSIONS, {k.api_key: (k.min_version, k.max_version) for k in body.api_keys})
            body = (await self._request(API_VERSIONS, version, request)).body
        if body.error_code:
            raise UnsupportedVersionError(f"ApiVersions failed with error {body.error_code}")
        self.api_versions = _effective_versions({k.api_key: (k.min_version, k.max_version) for k in body.api_keys})
        self._versions.clear()

    def version_for(self, api: Api, *, floor: int | None = None, ceiling: int | None = None) -> int:
        """Highest version of ``api`` both sides support.

        Args:
            api: The API to send.
            floor: Lowest version kclient will use.
            ceiling: Highest version kclient will use.

        Returns:
            The version.

        Raises:
            kclient.errors.UnsupportedVersionError: No common version.
        """
        key = (api.key, floor, ceiling)
        version = self._versions.get(key)
        if version is None:  # negotiated once per (api, bounds); per request after that
            version = self._versions[key] = choose_version(api, self.api_versions, floor=floor, ceiling=ceiling)
        return version

    async def request(self, api: Api, body: Body, *, version: int | None = None, expect_response: bool = True, timeout_ms: int | None = None) -> Any:
        """Send one request and wait for its response; Args as `start_request`.

        Returns:
            The response message (an instance of ``api.response_type``), or
                ``None`` when ``expect_response`` is False.

        Raises:
            kclient.errors.KafkaTimeoutError: No response within ``timeout_ms``.
            kclient.errors.KafkaConnectionError: The connection was lost.
        """
        if version is None:
            version = self.version_for(api)
        handle = await self._start(api, version, body, expect_response, timeout_ms)
        if handle is None:
            return None
        return (await self._wait(api, handle._pending, None)).body

    async def start_request(self, api: Api, body: Body, *, version: int | None = None, expect_response: bool = True, timeout_ms: int | None = None) -> PendingResponse | None:
        """Write one request and return without waiting for its response.

        Requests started one after another on a connection are written, and
        answered, in that order (how a producer keeps several requests in
        flight without reordering).

        Args:
            api: The API.
            body: The request message (an instance of ``api.request_type``).
            version: The API version (default: the negotiated one).
            expect_response: ``False`` for requests the broker does not answer
                (Produce with acks=0).
            timeout_ms: Response timeout in ms, enforced from now on as
                `request` does (default ``request.timeout.ms``).

        Returns:
            A `PendingResponse` to ``await .wait()`` later, or ``None`` when
                ``expect_response`` is False.

        Raises:
            kclient.errors.KafkaConnectionError: The write failed.
        """
        if version is None:
            version = self.version_for(api)
        return await self._start(api, version, body, expect_response, timeout_ms)

    async def _start(self, api: Api, version: int, body: Body, expect_response: bool, timeout_ms: int | None = None) -> PendingResponse | None:
        if self._closed:
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} is closed: {self._close_reason}")
        if self.throttled_until > trio.current_time():
            # KIP-219: the broker reads nothing from a muted connection.
            await trio.sleep_until(self.throttled_until)
        pending = None
        lock = self._send_lock
        try:
            lock.acquire_nowait()  # the usual case: nobody else is writing
        except trio.WouldBlock:
            await lock.acquire()
        try:
            correlation_id, data = self._proto.send(api, version, body, expect_response=expect_response)
            if expect_response:
                timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
                deadline = trio.current_time() + timeout / 1000 if timeout >= 0 else math.inf
                pending = _Pending(api, deadline, timeout)
                self._pending[correlation_id] = pending
                scope = self._watch_scope
                if scope is not None and deadline < scope.deadline:
                    scope.deadline = deadline
            try:
                await self._write(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                error = self._lost(exc)
                await self._fail(error)
                raise error from None
        finally:
            lock.release()
        return None if pending is None else PendingResponse(self, api, pending)

    async def _write(self, data: bytes | bytearray) -> None:
        # Write straight to the non-blocking socket: a request usually fits
        # the socket buffer at once, and then no trip through the scheduler
        # is needed. Whatever does not fit goes through trio's send_all.
        # The send lock orders writers. Over TLS every byte goes through
        # the SSLStream.
        if not self._raw:
            await self._stream.send_all(data)
            return
        try:
            sent = os.write(self._fd, data)
        except BlockingIOError:
            sent = 0
        if sent < len(data):
            await self._stream.send_all(memoryview(data)[sent:])

    def _busy_wait_readable(self, seconds: float) -> bool:
        fd = self._poll_fd
        if self._closed or fd < 0:
            return False
        poller = self._poller
        if poller is None:
            if hasattr(select, "poll"):
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                self._poller = poller = poller.poll
            else:  # Windows
                self._poller = poller = lambda timeout: select.select([fd], [], [], timeout)[0]
        clock = time.perf_counter
        end = clock() + seconds
        while True:
            if poller(0):
                return True
            if clock() >= end:
                return False

    async def _wait(self, api: Api, pending: _Pending, timeout_ms: int | None) -> Response:
        if not pending.event.is_set():
            if timeout_ms is None:
                # request.timeout.ms (or the timeout given at start) is
                # enforced by the watchdog, without a timer per request.
                await pending.event.wait()
            else:
                with trio.move_on_after(timeout_ms / 1000 if timeout_ms >= 0 else math.inf) as scope:
                    await pending.event.wait()
                if scope.cancelled_caught:
                    error = KafkaTimeoutError(f"{api.name} to {self.host}:{self.port} got no response in {timeout_ms} ms")
                    await self._fail(error)
                    raise error
        if pending.error is not None:
            raise pending.error
        assert pending.response is not None
        return pending.response

    async def _watch(self) -> None:
        """Fail the connection (every pending request gets
        KafkaTimeoutError) once a request waited past its deadline. Sleeps
        until the earliest deadline; ``_start`` moves it earlier if needed."""
        while not self._closed:
            earliest = math.inf
            now = trio.current_time()
            for pending in self._pending.values():
                if pending.deadline <= now:
                    error = KafkaTimeoutError(f"{pending.api.name} to {self.host}:{self.port} got no response in {pending.timeout_ms} ms")
                    await self._fail(error)
                    return
                if pending.deadline < earliest:
                    earliest = pending.deadline
            with trio.CancelScope(deadline=earliest) as scope:
                self._watch_scope = scope
                await trio.sleep_forever()
            self._watch_scope = None

    async def _request(self, api: Api, version: int, body: Body) -> Response:
        """One request of the connection's own (ApiVersions, SASL) and its
        answer, with the version it was decoded with."""
        handle = await self._start(api, version, body, True)
        assert handle is not None
        return await self._wait(api, handle._pending, None)

    async def _reader(self) -> None:
        try:
            while True:
                # A large response (a fetch) whose size is known is received
                # straight into its final buffer; everything else in chunks.
                into = self._proto.receive_buffer(_DIRECT_FRAME_BYTES) if self._raw else None
                data: bytes | bytearray | int
                try:
                    if self._raw:
                        data = await self._receive_raw(into)
                    else:
                        data = await self._stream.receive_some(_RECV_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    await self._fail(self._lost(exc))
                    return
                finally:
                    if into is not None:
                        into.release()
                if not data:
                    await self._fail(self._lost(None))
                    return
                if isinstance(data, int):  # received into ``into``
                    self._proto.received(data)
                else:
                    self._proto.receive_data(data)
                while True:
                    try:
                        response = self._proto.next_response()
                    except FrameTooLargeError as exc:
                        if self._raw and not self._answered and _is_tls_record_header(exc.size):
                            # A TLS listener answering a plain connection
                            # (Apache Kafka's SSLEngine sends an alert).
                            await self._fail(KafkaConnectionError(f"{self.host}:{self.port} answered with TLS, not Kafka: {_TLS_LISTENER_HINT}"))
                            return
                        # Typed (size, cap): the connection is closed and
                        # every pending request fails with it.
                        await self._fail(FrameTooLargeError(f"bad response from {self.host}:{self.port}: {exc}", size=exc.size, max_bytes=exc.max_bytes))
                        return
                    except (ProtocolError, ValueError) as exc:
                        await self._fail(ProtocolError(f"bad response from {self.host}:{self.port}: {exc}"))
                        return
                    if response is None:
                        break
                    self._answered = True
                    self._note_throttle(response)
                    pending = self._pending.pop(response.correlation_id, None)
                    if pending is not None:
                        pending.response = response
                        pending.event.set()
        finally:
            if not self._closed:
                await self._fail(KafkaConnectionError("reader stopped"))

    def _note_throttle(self, response: Response) -> None:
        """Note a response's ``throttle_time_ms`` (quotas, KIP-13/KIP-219):
        where the client waits it out, no request is sent on this
        connection until it has passed."""
        throttle = getattr(response.body, "throttle_time_ms", None)
        if self.throttles is not None and throttle is not None:
            self.throttles.record(response.api.key, throttle)
        if not throttle or throttle <= 0:
            return
        self.throttle_time_ms = throttle
        self.throttle_count += 1
        if client_throttles(response.api.key, response.version):
            self.throttled_until = max(self.throttled_until, trio.current_time() + throttle / 1000.0)
            log.debug("%s:%d throttled %s for %d ms (quota); not sending until then", self.host, self.port, response.api.name, throttle)
        else:
            log.debug("%s:%d delayed %s by %d ms (quota)", self.host, self.port, response.api.name, throttle)

    async def _receive_raw(self, into: memoryview | None) -> bytes | int:
        """Plain TCP: read what the socket holds, into ``into`` (then return
        the byte count) or as bytes (at most `_RECV_BYTES_RAW`); 0 or
        ``b""`` at EOF.

        When the previous read emptied the socket (the usual case: each
        response arrives whole and is read at once) it first waits until
        the socket is readable, so that waiting for a response costs no
        failing read (a system call and an exception) beforehand; otherwise
        (more was buffered) it reads first. Either way a checkpoint, as
        trio's socket reads are.

        Raises:
            OSError: The connection broke.
            trio.ClosedResourceError: The connection was closed meanwhile.
        """
        fd = self._fd
        if self._drained:
            await trio.lowlevel.wait_readable(fd)
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                if into is None:
                    data: bytes | int = os.read(fd, _RECV_BYTES_RAW)
                    self._drained = len(data) < _RECV_BYTES_RAW  # type: ignore[arg-type]
                else:
                    data = os.readv(fd, (into,))
                    self._drained = data < len(into)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                continue
            if not self._drained:
                await trio.lowlevel.cancel_shielded_checkpoint()
            return data

    def _lost(self, exc: BaseException | None) -> BaseException:
        """The error for a broken stream (``exc``; ``None`` for an EOF).

        `SslAuthenticationError` when TLS failed: with TLS 1.3 a broker
        checks the client's certificate only after the client's side of the
        handshake is done, so its refusal arrives on the first read, as an
        alert or (a broker that does not send one) as the connection closing
        before the first response. Otherwise `KafkaConnectionError`.
        """
        cause = None if self._raw or exc is None else _ssl_cause(exc)
        if cause is not None and not isinstance(cause, ssl.SSLEOFError):
            error: BaseException = ssl_authentication_error(cause, host=self.host)
            error.__cause__ = cause
            return error
        if not self._raw and not self._answered:
            if self._client_certificate:
                why = "it probably refused our certificate (ssl.certificate.location)"
            else:
                why = "it probably requires a client certificate (ssl.client.auth=required): set ssl.certificate.location"
            error = SslAuthenticationError(
                f"TLS connection to {self.host}:{self.port} closed by the broker right after the handshake, before any answer: {why}"
            )
            error.__cause__ = cause
            return error
        partial = self._proto.partial_response_bytes
        if partial:
            # A response cut off: the broker did answer (no TLS mismatch);
            # a disconnect, reported at once (Kafka's NetworkException).
            why = "closed the connection" if exc is None else f"broke the connection ({exc.__cause__ or exc})"
            return KafkaConnectionError(f"{self.host}:{self.port} {why} in the middle of a response ({partial} bytes of it received)")
        if exc is None:
            if self._raw and not self._answered:
                # The bundled broker's TLS listener closes a plain connection
                # without a word.
                return KafkaConnectionError(f"{self.host}:{self.port} closed the connection before any answer: {_TLS_LISTENER_HINT}")
            return KafkaConnectionError(f"{self.host}:{self.port} closed the connection")
        return KafkaConnectionError(f"lost connection to {self.host}:{self.port}: {exc.__cause__ or exc}")

    async def _fail(self, error: BaseException) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_reason = error
        for pending in self._pending.values():
            pending.error = error
            pending.event.set()
        self._pending.clear()
        if self._watch_scope is not None:  # ends the watchdog
            self._watch_scope.cancel()
        with trio.CancelScope(shield=True):
            if self._raw:
                await self._stream.aclose()
            else:
                # No TLS close_notify exchange (Kafka needs none, and a
                # broken peer must not hold the close up).
                await trio.aclose_forcefully(self._stream)

    async def aclose(self) -> None:
        """Close the connection; pending requests fail with
        `KafkaConnectionError`."""
        await self._fail(KafkaConnectionError(f"connection to {self.host}:{self.port} closed by the client"))


def _connect_failure(exc: OSError) -> str:
    """Why a connect failed, without trio's "all attempts to connect to
    HOST:PORT failed" repeating the address the caller names: the reasons
    of the attempts (``Connection refused``), each once."""
    attempts = getattr(exc.__cause__, "exceptions", None)
    if not attempts:
        return str(exc)
    reasons = [os.strerror(a.errno) if isinstance(a, OSError) and a.errno else str(a) for a in attempts]
    return "; ".join(dict.fromkeys(reasons))
