"""The broker's side of TLS and SASL, per listener and per connection.

A listener (KIP-103) has a security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT
or SASL_SSL. `ListenerRuntime` holds what a listener needs while serving:
its `kclient.security.settings.ListenerSecurity`, its TLS context
(`kclient.security.tls.server_ssl_context`, KIP-651 PEM stores) and the
address it advertises in Metadata.

TLS (SSL, SASL_SSL): `tls_handshake` wraps an accepted stream in
``trio.SSLStream(..., server_side=True)`` and completes the handshake
within `SSL_HANDSHAKE_TIMEOUT` seconds. A plaintext client or garbage
fails the handshake: the connection is closed and the failure logged,
rate-limited (`RateLimitedLog`). With ``ssl.client.auth`` requested or
required, the principal is the client certificate's subject
(``User:CN=...,O=...``, RFC 2253 order as Kafka's X500Principal prints it).

SASL (SASL_PLAINTEXT, SASL_SSL): `SaslAuthenticator` runs Kafka's
server-side state machine (KIP-43, KIP-152):

- before authentication only ApiVersions, SaslHandshake and
  SaslAuthenticate are accepted; any other request closes the connection
  (Kafka: "Unexpected Kafka request ... during SASL handshake");
- SaslHandshake names a mechanism of ``sasl.enabled.mechanisms``; another
  one is answered UNSUPPORTED_SASL_MECHANISM (33) with the enabled list,
  then the connection is closed;
- after a v1 handshake each token travels in a SaslAuthenticate v0/v1
  request (KIP-152); after a v0 handshake the tokens are raw size-prefixed
  frames without a Kafka header (the pre-KIP-152 flow), answered the same
  way (an empty frame for PLAIN);
- before authentication a frame may not exceed the listener's
  ``sasl.server.max.receive.size`` (524288 bytes by default): a larger
  declared size closes the connection (`kclient.broker.server`);
- each token is evaluated in a worker thread (at most
  `SASL_EVALUATION_THREADS`), never on the event loop;
- a failed authentication is answered SASL_AUTHENTICATION_FAILED (58)
  with a generic message (never whether the user exists), held back for
  ``connection.failed.authentication.delay.ms`` (KIP-306), then the
  connection is closed; it is logged with the peer address, rate-limited.

PLAIN users come from the listener's JAAS config
(``listener.name.<l>.plain.sasl.jaas.config`` or ``sasl.jaas.config``),
SCRAM users (KIP-84) from ZooKeeper ``/config/users/<name>``
(`ScramCredentialStore`), read afresh at each SCRAM login, so a user
added with ``kclient configs`` can log in at once.
"""

from __future__ import annotations

import logging
import ssl
import struct
import time
from typing import Any

import attrs
import trio

from kclient.broker.offload import run_in_worker
from kclient.errors import (
    ILLEGAL_SASL_STATE,
    NONE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    ConfigError,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    ZooKeeperError,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from kclient.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from kclient.protocol.messages.sasl_handshake import (
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kclient.security.sasl import (
    SCRAM_MECHANISMS,
    SaslServer,
    ScramCredential,
    parse_scram_user_config,
    scram_user_path,
    server_mechanism,
)
from kclient.security.settings import ListenerSecurity
from kclient.security.tls import server_ssl_context

log = logging.getLogger("kclient.broker")

__all__ = [
    "ListenerRuntime",
    "RateLimitedLog",
    "SASL_EVALUATION_THREADS",
    "SSL_HANDSHAKE_TIMEOUT",
    "SaslAuthenticator",
    "SaslClose",
    "ScramCredentialStore",
    "certificate_principal",
    "tls_handshake",
]

#: Seconds a client has to complete the TLS handshake.
SSL_HANDSHAKE_TIMEOUT = 10.0
#: Most worker threads evaluating SASL tokens at once, over every
#: connection: the CPU work of a token (SCRAM's SASLprep of a user name
#: costs about 2.5 us per character) never runs on the event loop, and
#: logins in progress cannot take every worker thread.
SASL_EVALUATION_THREADS = 2
#: API keys of the SASL exchange (KIP-43, KIP-152).
_SIZE = struct.Struct(">i")


class RateLimitedLog:
    """Log a kind of event at most once per ``interval`` seconds, with the
    number of events of that kind held back since the last line.

    Args:
        logger: Where to log.
        interval: Seconds between two lines of the same kind.
        level: The logging level.
    """

    def __init__(self, logger: logging.Logger, interval: float = 10.0, level: int = logging.WARNING) -> None:
        self.logger = logger
        self.interval = interval
        self.level = level
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._latest: dict[str, tuple[str, tuple[Any, ...]]] = {}

    def log(self, kind: str, message: str, *args: Any) -> bool:
        """Log ``message % args`` unless a ``kind`` line was logged less
        than ``interval`` seconds ago (then count it).

        Args:
            kind: Events of one kind share the limit.
            message: A %-format string.
            *args: Its arguments.

        Returns:
            Whether a line was logged.
        """
        now = time.monotonic()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._held[kind] = self._held.get(kind, 0) + 1
            self._latest[kind] = (message, args)
            return False
        held = self._held.pop(kind, 0)
        self._latest.pop(kind, None)
        self._last[kind] = now
        if held:
            message += " (%d more since the last report)"
            args = (*args, held)
        self.logger.log(self.level, message, *args)
        return True

    def flush(self, force: bool = False) -> int:
        """Report the events held back of each kind whose last line is at
        least ``interval`` seconds old: one line (the latest such event,
        with the count), so that a burst that stopped is still counted
        within about one interval. Call it periodically.

        Args:
            force: Report every kind held back, however recent its last line
                (when stopping).

        Returns:
            How many lines were logged.
        """
        now = time.monotonic()
        lines = 0
        for kind in list(self._held):
            if not force and now - self._last.get(kind, now) < self.interval:
                continue
            held = self._held.pop(kind)
            message, args = self._latest.pop(kind)
            self._last[kind] = now
            self.logger.log(self.level, message + " (%d such since the last report, this one included)", *args, held)
            lines += 1
        return lines


@attrs.define
class ListenerRuntime:
    """One listener being served.

    Attributes:
        security: Its settings (endpoint, TLS, SASL).
        ssl_context: Server-side TLS context, for SSL and SASL_SSL.
        port: The bound port.
        advertised_host: Host given in Metadata to clients of this listener.
        advertised_port: Port given in Metadata to clients of this listener.
        addresses: ``(address, port)`` of each bound socket.
    """

    security: ListenerSecurity
    ssl_context: ssl.SSLContext | None = None
    port: int = 0
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 0
    addresses: list[tuple[str, int]] = attrs.Factory(list)

    @classmethod
    def create(cls, security: ListenerSecurity) -> ListenerRuntime:
        """Build the TLS context now, so that a bad keystore fails at start-up.

        Args:
            security: The listener's settings.

        Returns:
            The runtime (port and advertised address filled in later).

        Raises:
            ConfigError: naming the property (unreadable keystore, wrong key password...).
        """
        context = server_ssl_context(security) if security.listener.protocol.uses_ssl else None
        return cls(security, context)

    @property
    def name(self) -> str:
        """The listener name."""
        return self.security.listener.name

    @property
    def uses_ssl(self) -> bool:
        """Whether connections are wrapped in TLS."""
        return self.security.listener.protocol.uses_ssl

    @property
    def uses_sasl(self) -> bool:
        """Whether connections must authenticate with SASL first."""
        return self.security.listener.protocol.uses_sasl


def certificate_principal(cert: dict[str, Any] | None) -> str | None:
    """Kafka's principal for a client certificate: ``User:`` and the
    subject in RFC 2253 order (most specific first, ``CN=alice,O=Example``),
    as Kafka's default principal builder gives for mutual TLS.

    Args:
        cert: What `ssl.SSLObject.getpeercert` returned.

    Returns:
        The principal, or ``None`` without a certificate.
    """
    if not cert or not cert.get("subject"):
        return None
    short = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
             "stateOrProvinceName": "ST", "localityName": "L", "domainComponent": "DC", "emailAddress": "EMAILADDRESS"}
    parts = []
    for rdn in reversed(cert["subject"]):
        parts.append("+".join(f"{short.get(k, k)}={v}" for k, v in rdn))
    return "User:" + ",".join(parts)


async def tls_handshake(
    stream: trio.abc.Stream, listener: ListenerRuntime, peer: str, failures: RateLimitedLog, failure_delay: float = 0.0
) -> trio.SSLStream[trio.abc.Stream] | None:
    """Wrap ``stream`` in TLS and complete the handshake (server side).

    A failed handshake (an untrusted or missing client certificate, bytes
    that are not TLS) is an authentication failure, as in Kafka (its
    ``SslAuthenticationException``): it returns only after
    ``failure_delay``, so the connection is closed that much later
    (KIP-306's ``connection.failed.authentication.delay.ms``). Only this
    connection's task waits; the event loop serves the others meanwhile.

    Args:
        stream: The accepted TCP stream.
        listener: The listener (its context).
        peer: ``host:port`` of the client, for the log.
        failures: Where failed handshakes are logged (rate-limited).
        failure_delay: Seconds to wait after a failed handshake.

    Returns:
        The TLS stream, or ``None`` if the handshake failed or timed out
        (the caller closes ``stream``).
    """
    assert listener.ssl_context is not None
    tls = trio.SSLStream(stream, listener.ssl_context, server_side=True)
    try:
        with trio.fail_after(SSL_HANDSHAKE_TIMEOUT):
            await tls.do_handshake()
    except trio.TooSlowError:
        failures.log("tls-timeout", "closing connection from %s on listener %s: no TLS handshake within %.0f s",
                     peer, listener.name, SSL_HANDSHAKE_TIMEOUT)
        return None
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, ssl.SSLError) else exc
        reason = getattr(cause, "reason", None) or str(cause) or type(cause).__name__
        failures.log("tls-failed", "closing connection from %s on listener %s: TLS handshake failed (%s)",
                     peer, listener.name, reason)
        await trio.sleep(failure_delay)
        return None
    return tls


class SaslClose(Exception):
    """Send ``data`` (may be empty), then close the connection."""

    def __init__(self, data: bytes = b"") -> None:
        super().__init__()
        self.data = data


class ScramCredentialStore:
    """SCRAM credentials (KIP-84) from ZooKeeper ``/config/users/<name>``.

    `refresh` reads one user's node (in a worker thread) just before the
    user's SCRAM exchange needs it, so users added or changed by
    ``kclient configs`` count at once; `lookup` then answers from what was
    read. Without ZooKeeper there are no SCRAM users.

    Args:
        zk: A started `kclient.zk.ZkClient`, or ``None``.
    """

    def __init__(self, zk: Any = None) -> None:
        self.zk = zk
        self._users: dict[str, dict[str, ScramCredential]] = {}

    async def refresh(self, username: str) -> None:
        """Re-read ``username``'s credentials from ZooKeeper.

        A node that is missing or unreadable leaves the user without
        credentials (the login then fails like a wrong password).

        Args:
            username: The SCRAM user name.
        """
        if self.zk is None:
            return
        path = scram_user_path(username)
        try:
            data = await trio.to_thread.run_sync(self.zk.get, path)
            self._users[username] = parse_scram_user_config(data, path=path) if data else {}
        except (ZooKeeperError, ConfigError) as exc:
            log.warning("cannot read SCRAM credentials at %s: %s", path, exc)
            self._users.pop(username, None)

    def lookup(self, mechanism: str, username: str) -> ScramCredential | None:
        """The credential read by the last `refresh` of ``username``.

        Args:
            mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
            username: The user.

        Returns:
            The credential, or ``None``.
        """
        return self._users.get(username, {}).get(mechanism)


def _plain_message(exc: Exception) -> str:
    """The message without kclient's ``[Error 58] NAME: `` prefix (the
    client adds its own)."""
    text = str(exc)
    if text.startswith("[Error ") and ": " in text:
        return text.split(": ", 1)[1]
    return text


def _scram_username(token: bytes) -> str | None:
    """The user name of a SCRAM client-first message (``n,,n=user,r=...``,
    ``=2C`` and ``=3D`` unescaped, RFC 5802 section 5.1)."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        return None
    for attribute in text.split(",")[2:]:
        if attribute.startswith("n="):
            return attribute[2:].replace("=2C", ",").replace("=3D", "=")
    return None


class SaslAuthenticator:
    """One connection's SASL state on a SASL_PLAINTEXT / SASL_SSL listener
    (Kafka's SaslServerAuthenticator states, KIP-43 and KIP-152).

    Each token is evaluated in a worker thread (``limiter``, at most
    `SASL_EVALUATION_THREADS` by default), never on the event loop.

    Args:
        listener: The listener.
        scram_store: Where SCRAM credentials come from.
        peer: ``host:port`` of the client, for the log.
        failures: Where failed authentications are logged (rate-limited).
        limiter: The worker threads' limiter, shared by the broker's
            connections (``None``: trio's default limiter).
    """

    def __init__(self, listener: ListenerRuntime, scram_store: ScramCredentialStore, peer: str,
                 failures: RateLimitedLog, limiter: trio.CapacityLimiter | None = None) -> None:
        self.limiter = limiter
        self.listener = listener
        self.scram_store = scram_store
        self.peer = peer
        self.failures = failures
        self.server: SaslServer | None = None
        self.raw_tokens = False
        self.principal: str | None = None
        self._scram_started = False

    @property
    def complete(self) -> bool:
        """Whether the client authenticated."""
        return self.principal is not None

    @property
    def max_receive_size(self) -> int:
        """The largest frame (bytes) read before the login completes
        (the listener's ``sasl.server.max.receive.size``)."""
        return self.listener.security.sasl_server_max_receive_size

    @property
    def expects_raw_token(self) -> bool:
        """Whether the next frame is a raw token (after a v0 handshake)."""
        return self.server is not None and self.raw_tokens and not self.complete

    def check_allowed(self, header: RequestHeader, api_name: str) -> None:
        """Refuse a request that may not come before authentication.

        Args:
            header: The request header.
            api_name: Its API's name, for the log.

        Raises:
            SaslClose: anything but ApiVersions, SaslHandshake and
                SaslAuthenticate (closed without a response, as Kafka does).
        """
        if header.api_key in (API_VERSIONS.key, SASL_HANDSHAKE.key, SASL_AUTHENTICATE.key):
            return
        self.failures.log(
            "sasl-unexpected",
            "closing connection from %s on listener %s: %s request before SASL authentication",
            self.peer, self.listener.name, api_name,
        )
        raise SaslClose

    def handshake(self, header: RequestHeader, body: SaslHandshakeRequest) -> tuple[SaslHandshakeResponse, bool]:
        """Answer a SaslHandshake (KIP-43).

        Args:
            header: Its header (v0: raw tokens follow; v1: SaslAuthenticate).
            body: The request (its ``mechanism``).

        Returns:
            ``(response, close after sending)``.
        """
        enabled = list(self.listener.security.sasl_enabled_mechanisms)
        if self.server is not None:
            log.info("closing connection from %s: a second SaslHandshake before authentication completed", self.peer)
            return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=enabled), True
        mechanism = body.mechanism or ""
        try:
            self.server = server_mechanism(
                mechanism,
                tuple(enabled),
                plain_users=self.listener.security.plain_users,
                scram_lookup=self.scram_store.lookup,
            )
        except UnsupportedSaslMechanismError:
            self.failures.log(
                "sasl-mechanism", "closing connection from %s on listener %s: SASL mechanism %r is not enabled",
                self.peer, self.listener.name, mechanism[:40],
            )
            return SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled), True
        self.raw_tokens = header.api_version == 0
        return SaslHandshakeResponse(error_code=NONE, mechanisms=enabled), False

    async def _evaluate(self, token: bytes) -> bytes:
        """Feed one client token to the mechanism; raises
        SaslAuthenticationFailedError / IllegalSaslStateError."""
        assert self.server is not None
        if self.server.mechanism in SCRAM_MECHANISMS and not self._scram_started:
            self._scram_started = True
            username = _scram_username(token)
            if username:
                await self.scram_store.refresh(username)
        # CPU work proportional to the token (SASLprep, decoding): in a
        # worker thread, so that other connections go on being served.
        reply = await run_in_worker(self.server.evaluate_response, token, limiter=self.limiter)
        if self.server.is_complete:
            self.principal = f"User:{self.server.authorization_id}"
            log.debug("connection from %s authenticated as %s with %s", self.peer, self.principal, self.server.mechanism)
        return reply

    def _log_failure(self) -> None:
        assert self.server is not None
        self.failures.log(
            "sasl-failed",
            "failed SASL/%s authentication from %s on listener %s",
            self.server.mechanism, self.peer.rsplit(":", 1)[0], self.listener.name,
        )

    async def authenticate(self, header: RequestHeader, body: SaslAuthenticateRequest) -> tuple[SaslAuthenticateResponse, bool]:
        """Answer a SaslAuthenticate (KIP-152).

        Args:
            header: Its header.
            body: The request (its ``auth_bytes``).

        Returns:
            ``(response, close after sending)``.
        """
        if self.server is None or self.raw_tokens:
            return SaslAuthenticateResponse(
                error_code=ILLEGAL_SASL_STATE, error_message="Unexpected SaslAuthenticate request before a SaslHandshake v1"
            ), True
        try:
            reply = await self._evaluate(bytes(body.auth_bytes or b""))
        except (SaslAuthenticationFailedError, IllegalSaslStateError) as exc:
            self._log_failure()
            message = _plain_message(exc) if isinstance(exc, SaslAuthenticationFailedError) else "Authentication failed"
            return SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED, error_message=message), True
        return SaslAuthenticateResponse(error_code=NONE, error_message=None, auth_bytes=reply), False

    async def raw_token(self, frame: bytes) -> bytes:
        """Answer a raw token after a v0 handshake: the reply token, size-prefixed.

        Args:
            frame: The frame's bytes (the token).

        Returns:
            The bytes to send.

        Raises:
            SaslClose: the authentication failed (Kafka closes without a
                response in this flow).
        """
        try:
            reply = await self._evaluate(bytes(frame))
        except (SaslAuthenticationFailedError, IllegalSaslStateError):
            self._log_failure()
            raise SaslClose from None
        return _SIZE.pack(len(reply)) + reply
