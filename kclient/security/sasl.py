"""SASL mechanisms for Kafka: PLAIN and SCRAM-SHA-256 / SCRAM-SHA-512.

After a SaslHandshake (KIP-43) names the mechanism, the client and the
broker trade opaque tokens, each in a SaslAuthenticate request / response
(KIP-152). This module makes and checks those tokens; it never touches a
socket. The caller's loop on the client side is::

    mech = client_mechanism("SCRAM-SHA-256", "alice", "alice-secret")
    token = mech.initial_response()
    while token is not None:
        response = ...send SaslAuthenticate(auth_bytes=token)...
        raise_for_code(response.error_code, response.error_message)
        token = mech.evaluate_challenge(response.auth_bytes)

and on the broker side, for each SaslAuthenticate request::

    try:
        reply = server.evaluate_response(request.auth_bytes)
    except SaslAuthenticationFailedError as exc:
        ...answer error_code 58 with str(exc) and close...
    ...answer auth_bytes=reply; once server.is_complete the session is
    authenticated as server.authorization_id...

PLAIN follows RFC 4616 (``[authzid] NUL authcid NUL passwd``). SCRAM
follows RFC 5802 and KIP-84 and is done by the ``scramp`` library
(`scramp.ScramClient`, `scramp.ScramMechanism`); this module only adapts
it to the token-step API and to Kafka's errors. Kafka needs at least 4096
iterations (and makes at most 16384), uses no channel binding (the GS2
header is ``n,,``) and stores, per user and mechanism, the credential
string ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` in
ZooKeeper's ``/config/users/<user>`` node.

Broker-side failures raise `SaslAuthenticationFailedError` (code 58)
with the same few words Kafka sends, whatever went wrong: no detail tells
an attacker whether the user exists. An unknown SCRAM user gets a
made-up salt and fails at the proof, like a wrong password.

SCRAM credentials and their ZooKeeper form are in
`kclient.security.credentials`; the ``sasl.jaas.config`` parser is in
`kclient.security.jaas` (both re-exported here).
"""

from __future__ import annotations

import abc
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping

import scramp

from kclient.errors import (
    ConfigError,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)

# Credentials and JAAS parsing have their own modules; their names are
# re-exported here, where the mechanisms that use them live.
from kclient.security.credentials import (
    SCRAM_MAX_ITERATIONS,
    SCRAM_MECHANISMS,
    SCRAM_MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    make_scram_credential,
    parse_scram_user_config,
    scram_user_config,
    scram_user_path,
)
from kclient.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    jaas_plain_users,
    jaas_username_password,
    parse_jaas_config,
)

__all__ = [
    "PLAIN",
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MECHANISMS",
    "SCRAM_MIN_ITERATIONS",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "SUPPORTED_MECHANISMS",
    "JaasEntry",
    "PlainClient",
    "PlainServer",
    "SaslClient",
    "SaslServer",
    "ScramClient",
    "ScramCredential",
    "ScramServer",
    "client_mechanism",
    "jaas_plain_users",
    "jaas_username_password",
    "make_scram_credential",
    "parse_jaas_config",
    "parse_scram_user_config",
    "scram_user_config",
    "scram_user_path",
    "server_mechanism",
]

PLAIN = "PLAIN"
#: Every mechanism kclient speaks, in the order a broker would list them.
SUPPORTED_MECHANISMS: tuple[str, ...] = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)

#: What the broker says on any failed authentication (Kafka's wording).
_PLAIN_FAILED = "Authentication failed: Invalid username or password"
_SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


# --------------------------------------------------------------------------
# Client side
# --------------------------------------------------------------------------


class SaslClient(abc.ABC):
    """One client-side SASL exchange (KIP-43 mechanism, KIP-152 tokens).

    Call `initial_response` once, send its bytes, then feed every token the
    broker answers to `evaluate_challenge` and send what it returns, until
    it returns ``None``; `is_complete` is then true. An object serves one
    exchange; make a new one to re-authenticate.
    """

    #: The mechanism name sent in SaslHandshake.
    mechanism: str

    def __init__(self) -> None:
        self._complete = False
        self._started = False

    @property
    def is_complete(self) -> bool:
        """Whether the exchange finished and the broker was satisfied."""
        return self._complete

    def initial_response(self) -> bytes:
        """The first token, sent before the broker says anything.

        Returns:
            The bytes of the first SaslAuthenticate request.

        Raises:
            IllegalSaslStateError: called twice.
        """
        if self._started:
            raise IllegalSaslStateError(f"{self.mechanism}: the initial response was already sent")
        self._started = True
        return self._initial_response()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """Process the broker's token and return the next one to send.

        Args:
            challenge: ``auth_bytes`` of the SaslAuthenticate response.

        Returns:
            The next token, or ``None`` when the exchange is complete.

        Raises:
            SaslAuthenticationFailedError: the broker's token is malformed, an
                error, or (SCRAM) does not prove that it knows the password.
            IllegalSaslStateError: called before `initial_response` or after
                the exchange completed.
        """
        if not self._started:
            raise IllegalSaslStateError(f"{self.mechanism}: a challenge arrived before the initial response")
        if self._complete:
            raise IllegalSaslStateError(f"{self.mechanism}: a challenge arrived after authentication completed")
        return self._evaluate(bytes(challenge))

    @abc.abstractmethod
    def _initial_response(self) -> bytes: ...

    @abc.abstractmethod
    def _evaluate(self, challenge: bytes) -> bytes | None: ...


class PlainClient(SaslClient):
    """SASL/PLAIN (RFC 4616, KIP-43): one token ``authzid NUL user NUL password``.

    The password travels in clear: use it over SASL_SSL.

    Args:
        username: The authentication identity (``sasl.username``).
        password: Its password (``sasl.password``).
        authorization_id: Identity to act as; Kafka accepts only empty or
            the username itself.

    Raises:
        ConfigError: the username or password is empty or contains NUL.
    """

    mechanism = PLAIN

    def __init__(self, username: str, password: str, authorization_id: str = "") -> None:
        super().__init__()
        for what, value in (("username", username), ("password", password)):
            if not value:
                raise ConfigError(f"Missing required configuration sasl.{what} for SASL/PLAIN")
            if "\0" in value:
                raise ConfigError(f"Invalid value for configuration sasl.{what}: NUL is not allowed (RFC 4616)")
        if "\0" in authorization_id:
            raise ConfigError("Invalid SASL/PLAIN authorization id: NUL is not allowed (RFC 4616)")
        self._message = "\0".join((authorization_id, username, password)).encode("utf-8")

    def _initial_response(self) -> bytes:
        return self._message

    def _evaluate(self, challenge: bytes) -> bytes | None:
        # RFC 4616: the server sends no data; Kafka answers an empty token.
        self._complete = True
        return None


class ScramClient(SaslClient):
    """SASL/SCRAM-SHA-256 or -512 (RFC 5802, KIP-84) via `scramp.ScramClient`.

    Tokens: client-first, then client-final in answer to server-first; the
    server-final is checked (the broker must prove it holds the credential)
    and ends the exchange. No channel binding, as in Kafka.

    Args:
        mechanism: ``"SCRAM-SHA-256"`` or ``"SCRAM-SHA-512"``.
        username: ``sasl.username``; ``,`` and ``=`` are escaped as RFC 5802
            says.
        password: ``sasl.password``.
        nonce: Client nonce, for tests only (random by default).

    Raises:
        UnsupportedSaslMechanismError: ``mechanism`` is not a SCRAM mechanism.
        ConfigError: the username or password is empty.
    """

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None) -> None:
        super().__init__()
        if mechanism not in SCRAM_MECHANISMS:
            raise UnsupportedSaslMechanismError(f"{mechanism!r} is not one of {', '.join(SCRAM_MECHANISMS)}")
        for what, value in (("username", username), ("password", password)):
            if not value:
                raise ConfigError(f"Missing required configuration sasl.{what} for SASL/{mechanism}")
        self.mechanism = mechanism
        try:
            self._scram = scramp.ScramClient([mechanism], username, password, c_nonce=nonce)
        except scramp.ScramException as exc:
            raise ConfigError(f"Invalid SASL/{mechanism} credentials: {exc}") from None
        self._step = 0

    def _initial_response(self) -> bytes:
        first: str = self._scram.get_client_first()
        return first.encode("utf-8")

    def _evaluate(self, challenge: bytes) -> bytes | None:
        step, self._step = self._step, self._step + 1
        try:
            text = challenge.decode("utf-8")
            if step == 0:
                self._scram.set_server_first(text)
                client_final: str = self._scram.get_client_final()
                return client_final.encode("utf-8")
            self._scram.set_server_final(text)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError(f"{self.mechanism}: the broker's message is not UTF-8") from None
        except scramp.ScramException as exc:
            raise SaslAuthenticationFailedError(f"{self.mechanism}: {exc}") from exc
        self._complete = True
        return None


def client_mechanism(mechanism: str, username: str, password: str) -> SaslClient:
    """A client-side mechanism for ``sasl.mechanism``.

    Args:
        mechanism: ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        username: ``sasl.username``.
        password: ``sasl.password``.

    Returns:
        A fresh `PlainClient` or `ScramClient`.

    Raises:
        UnsupportedSaslMechanismError: any other mechanism (GSSAPI, OAUTHBEARER).
        ConfigError: empty username or password.
    """
    if mechanism == PLAIN:
        return PlainClient(username, password)
    if mechanism in SCRAM_MECHANISMS:
        return ScramClient(mechanism, username, password)
    raise UnsupportedSaslMechanismError(f"{mechanism!r}: kclient supports {', '.join(SUPPORTED_MECHANISMS)}")


# --------------------------------------------------------------------------
# Server side
# --------------------------------------------------------------------------


class SaslServer(abc.ABC):
    """One broker-side SASL exchange.

    Feed each client token to `evaluate_response` and send back what it
    returns; once `is_complete`, the client is `authorization_id`. Any
    failure raises `SaslAuthenticationFailedError` (code 58) with Kafka's
    generic message, and the object refuses further tokens.
    """

    #: The mechanism name (as in SaslHandshake).
    mechanism: str

    def __init__(self) -> None:
        self._complete = False
        self._failed = False
        self.authorization_id: str | None = None

    @property
    def is_complete(self) -> bool:
        """Whether the client proved its identity."""
        return self._complete

    def evaluate_response(self, response: bytes) -> bytes:
        """Check a client token and return the token to answer.

        Args:
            response: ``auth_bytes`` of the client's SaslAuthenticate request.

        Returns:
            The ``auth_bytes`` of the SaslAuthenticate response (empty for
            PLAIN).

        Raises:
            SaslAuthenticationFailedError: bad token, unknown user or wrong
                password, all with the same message.
            IllegalSaslStateError: a token after completion or failure.
        """
        if self._complete or self._failed:
            state = "completed" if self._complete else "failed"
            raise IllegalSaslStateError(f"{self.mechanism}: a token arrived after authentication {state}")
        try:
            return self._evaluate(bytes(response))
        except SaslAuthenticationFailedError:
            self._failed = True
            raise

    @abc.abstractmethod
    def _evaluate(self, response: bytes) -> bytes: ...


class PlainServer(SaslServer):
    """SASL/PLAIN on the broker (RFC 4616) against a user -> password map.

    The map is what ``user_<name>="<password>"`` entries of a
    PlainLoginModule JAAS config give (see `jaas_plain_users`). Passwords
    are compared with `hmac.compare_digest`, and an unknown user costs the
    same comparison as a known one.

    Args:
        users: User name -> password.
    """

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        super().__init__()
        self._users = users

    def _evaluate(self, response: bytes) -> bytes:
        parts = response.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailedError(_PLAIN_FAILED)
        authzid, authcid, passwd = parts
        try:
            username = authcid.decode("utf-8")
            authzid_text = authzid.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError(_PLAIN_FAILED) from None
        expected = self._users.get(username)
        known = expected is not None
        # Compare fixed-size digests, and against something even for an
        # unknown user: the time says neither the length nor who exists.
        reference = expected.encode("utf-8") if expected is not None else _UNKNOWN_USER_KEY
        matches = hmac.compare_digest(hashlib.sha256(reference).digest(), hashlib.sha256(passwd).digest())
        if not (known and matches and username and passwd):
            raise SaslAuthenticationFailedError(_PLAIN_FAILED)
        if authzid_text and authzid_text != username:
            # Kafka refuses to act as another identity.
            raise SaslAuthenticationFailedError(_PLAIN_FAILED)
        self.authorization_id = username
        self._complete = True
        return b""


#: Key for the made-up salts of unknown users; one per process.
_UNKNOWN_USER_KEY = secrets.token_bytes(32)


def _unknown_user_credential(mechanism: str, username: str) -> ScramCredential:
    """A credential no password matches, stable per user within the process,
    so that an unknown user's exchange looks like a known user's (RFC 5802
    section 9: do not reveal whether a user exists)."""
    digest = hmac.new(_UNKNOWN_USER_KEY, f"{mechanism}\0{username}".encode(), hashlib.sha256).digest()
    size = hashlib.new(SCRAM_MECHANISMS[mechanism]).digest_size
    return ScramCredential(digest[:24], secrets.token_bytes(size), secrets.token_bytes(size), SCRAM_MIN_ITERATIONS)


class ScramServer(SaslServer):
    """SASL/SCRAM on the broker (RFC 5802, KIP-84) via `scramp.ScramMechanism`.

    Tokens: client-first -> server-first, client-final -> server-final.
    The credential is fetched by ``lookup(username)`` between the two
    (the broker reads it from its cache of ``/config/users``, see
    `parse_scram_user_config`).

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        lookup: User name -> credential for ``mechanism``, or ``None`` if
            the user has none.
        nonce: Server nonce, for tests only (random by default).

    Raises:
        UnsupportedSaslMechanismError: ``mechanism`` is not a SCRAM mechanism.
    """

    def __init__(
        self, mechanism: str, lookup: Callable[[str], ScramCredential | None], *, nonce: str | None = None
    ) -> None:
        super().__init__()
        if mechanism not in SCRAM_MECHANISMS:
            raise UnsupportedSaslMechanismError(f"{mechanism!r} is not one of {', '.join(SCRAM_MECHANISMS)}")
        self.mechanism = mechanism
        self._lookup = lookup
        self._username: str | None = None
        self._scram = scramp.ScramMechanism(mechanism).make_server(self._auth_info, s_nonce=nonce)
        self._step = 0

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        credential = self._lookup(username)
        if credential is None or credential.iterations < SCRAM_MIN_ITERATIONS:
            credential = _unknown_user_credential(self.mechanism, username)
        else:
            self._username = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _evaluate(self, response: bytes) -> bytes:
        step, self._step = self._step, self._step + 1
        try:
            text = response.decode("utf-8")
            if step == 0:
                self._scram.set_client_first(text)
                server_first: str = self._scram.get_server_first()
                return server_first.encode("utf-8")
            self._scram.set_client_final(text)
            final: str = self._scram.get_server_final()
        except (UnicodeDecodeError, scramp.ScramException):
            raise SaslAuthenticationFailedError(_SCRAM_FAILED.format(self.mechanism)) from None
        except SaslAuthenticationFailedError:
            raise
        except Exception:
            raise SaslAuthenticationFailedError(_SCRAM_FAILED.format(self.mechanism)) from None
        if self._username is None:  # unknown user whose proof matched a made-up key: impossible, but never accept
            raise SaslAuthenticationFailedError(_SCRAM_FAILED.format(self.mechanism))
        self.authorization_id = self._username
        self._complete = True
        return final.encode("utf-8")


def server_mechanism(
    mechanism: str,
    enabled: tuple[str, ...] | list[str] | frozenset[str],
    *,
    plain_users: Mapping[str, str] | None = None,
    scram_lookup: Callable[[str, str], ScramCredential | None] | None = None,
) -> SaslServer:
    """The broker's answer to a SaslHandshake naming ``mechanism`` (KIP-43).

    Args:
        mechanism: What the client asked for.
        enabled: The listener's ``sasl.enabled.mechanisms``.
        plain_users: User -> password for PLAIN.
        scram_lookup: ``(mechanism, username) -> credential or None`` for SCRAM.

    Returns:
        A fresh `PlainServer` or `ScramServer`.

    Raises:
        UnsupportedSaslMechanismError: ``mechanism`` is not enabled, not
            supported, or has no user source (code 33; the handshake
            response lists ``enabled``).
    """
    if mechanism not in enabled or mechanism not in SUPPORTED_MECHANISMS:
        raise UnsupportedSaslMechanismError(f"{mechanism!r} is not enabled; enabled: {', '.join(enabled)}")
    if mechanism == PLAIN:
        if plain_users is None:
            raise UnsupportedSaslMechanismError("PLAIN has no users configured")
        return PlainServer(plain_users)
    if scram_lookup is None:
        raise UnsupportedSaslMechanismError(f"{mechanism} has no credential store")
    return ScramServer(mechanism, lambda username: scram_lookup(mechanism, username))
