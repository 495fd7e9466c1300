"""TLS contexts for the client and for a broker listener (stdlib `ssl`).

The contexts are plain `ssl.SSLContext` objects; the connection code wraps
its stream with them (``trio.SSLStream(stream, context,
server_hostname=host)`` on the client, ``server_side=True`` on the broker).
Both refuse anything older than TLS 1.2.

Client (`client_ssl_context`): the broker's certificate must chain to
``ssl.ca.location`` (the system's CAs if unset) and, with
``ssl.endpoint.identification.algorithm=https`` (the default), name the
host connected to; ``ssl.certificate.location`` / ``ssl.key.location`` /
``ssl.key.password`` give a certificate for mutual TLS.

Broker (`server_ssl_context`): KIP-651's PEM stores: ``ssl.keystore.location``
is one PEM file with the private key and the certificate chain (the key
decrypted with ``ssl.key.password``), ``ssl.truststore.location`` a PEM
file of CAs for client certificates, and ``ssl.client.auth`` none /
requested / required gives `ssl.CERT_NONE` / `ssl.CERT_OPTIONAL` /
`ssl.CERT_REQUIRED`.

A failed handshake becomes `SslAuthenticationError` naming the cause
through `ssl_authentication_error`. Unreadable files, bad PEM and wrong
key passwords raise `ConfigError` naming the property when the context is
built, never later and never by prompting on a terminal.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable

from kclient.errors import ConfigError, SslAuthenticationError
from kclient.security.settings import ClientSecurity, ListenerSecurity, SslClientAuth

__all__ = [
    "MINIMUM_TLS_VERSION",
    "client_ssl_context",
    "server_ssl_context",
    "ssl_authentication_error",
]

#: The oldest TLS version either side accepts.
MINIMUM_TLS_VERSION = ssl.TLSVersion.TLSv1_2

_VERIFY_MODES = {
    SslClientAuth.NONE: ssl.CERT_NONE,
    SslClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
    SslClientAuth.REQUIRED: ssl.CERT_REQUIRED,
}


def _key_password(password: str | None, prop: str) -> Callable[[], bytes]:
    """A password callback for `ssl.SSLContext.load_cert_chain`.

    Without a password OpenSSL would prompt on the terminal for an
    encrypted key; this callback raises instead.
    """

    def callback() -> bytes:
        if password is None:
            raise ConfigError(f"Missing required configuration {prop}: the private key is encrypted")
        return password.encode("utf-8")

    return callback


def _load_chain(
    context: ssl.SSLContext, certfile: str, keyfile: str | None, password: str | None, names: tuple[str, str, str]
) -> None:
    """``load_cert_chain`` with errors naming the properties
    ``names = (certificate prop, key prop, password prop)``."""
    cert_prop, key_prop, password_prop = names
    for prop, path in ((cert_prop, certfile), (key_prop, keyfile)):
        if path is not None and not os.path.isfile(path):
            raise ConfigError(f"Invalid value {path!r} for configuration {prop}: no such file")
    try:
        context.load_cert_chain(certfile, keyfile, password=_key_password(password, password_prop))
    except ConfigError:
        raise
    except ssl.SSLError as exc:
        reason = exc.reason or ""
        if password is not None and (reason in ("BAD_DECRYPT", "BAD_PASSWORD_READ") or _encrypted_key(keyfile or certfile)):
            # OpenSSL often says no more than "PEM lib" for a wrong password.
            raise ConfigError(f"Invalid value for configuration {password_prop}: it does not decrypt the private key") from None
        if reason == "KEY_VALUES_MISMATCH":
            raise ConfigError(
                f"Invalid configuration {key_prop or cert_prop}: the private key does not match the certificate"
            ) from None
        where = cert_prop if keyfile is None else f"{cert_prop} / {key_prop}"
        raise ConfigError(
            f"Invalid value {certfile!r} for configuration {where}: not a PEM private key and certificate chain ({exc})"
        ) from None
    except OSError as exc:
        raise ConfigError(f"Cannot read {cert_prop} / {key_prop}: {exc.strerror or exc}") from None


def _encrypted_key(path: str) -> bool:
    """Whether the PEM file holds an encrypted private key (PKCS#8
    ``ENCRYPTED PRIVATE KEY`` or a legacy ``Proc-Type: 4,ENCRYPTED`` header)."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError:
        return False
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in text or b"Proc-Type: 4,ENCRYPTED" in text


def _load_trust(context: ssl.SSLContext, location: str, prop: str) -> None:
    """``load_verify_locations`` from a PEM file or a hashed CA directory."""
    try:
        if os.path.isdir(location):
            context.load_verify_locations(capath=location)
        elif os.path.isfile(location):
            context.load_verify_locations(cafile=location)
        else:
            raise ConfigError(f"Invalid value {location!r} for configuration {prop}: no such file or directory")
    except ssl.SSLError as exc:
        raise ConfigError(f"Invalid value {location!r} for configuration {prop}: not a PEM file of certificates ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"Cannot read {prop} {location!r}: {exc.strerror or exc}") from None


def client_ssl_context(settings: ClientSecurity) -> ssl.SSLContext:
    """The client's TLS context for ``security.protocol`` SSL or SASL_SSL.

    Args:
        settings: The client's parsed settings.

    Returns:
        A client-side context: TLS 1.2+, the broker's certificate verified
        against ``ssl.ca.location`` (or the system's CAs), the host name
        checked unless ``ssl.endpoint.identification.algorithm`` is empty,
        the client certificate loaded if configured. Pass the broker's
        host as ``server_hostname`` when wrapping (also for SNI).

    Raises:
        ConfigError: naming the property for a file that cannot be read or
            parsed, a key that does not match, a wrong or missing
            ``ssl.key.password``, or a protocol without TLS.
    """
    if not settings.security_protocol.uses_ssl:
        raise ConfigError(f"security.protocol={settings.security_protocol.value} does not use TLS")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = MINIMUM_TLS_VERSION
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = settings.check_hostname
    if settings.ssl_ca_location is not None:
        _load_trust(context, settings.ssl_ca_location, "ssl.ca.location")
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if settings.ssl_certificate_location is not None:
        _load_chain(
            context,
            settings.ssl_certificate_location,
            settings.ssl_key_location,
            settings.ssl_key_password,
            ("ssl.certificate.location", "ssl.key.location", "ssl.key.password"),
        )
    return context


def server_ssl_context(listener: ListenerSecurity) -> ssl.SSLContext:
    """A broker listener's TLS context (KIP-651 PEM stores).

    Args:
        listener: The listener's settings (an SSL or SASL_SSL listener).

    Returns:
        A server-side context: TLS 1.2+, the key and chain from
        ``ssl.keystore.location``, client certificates asked for per
        ``ssl.client.auth`` and checked against ``ssl.truststore.location``
        (the system's CAs if unset).

    Raises:
        ConfigError: naming the property for a missing keystore, an
            unreadable or malformed PEM file or a wrong ``ssl.key.password``.
    """
    name = listener.listener.name
    if not listener.listener.protocol.uses_ssl:
        raise ConfigError(f"listener {name} ({listener.listener.protocol.value}) does not use TLS")
    if listener.ssl_keystore_location is None:
        raise ConfigError(f"Missing required configuration ssl.keystore.location for listener {name}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MINIMUM_TLS_VERSION
    _load_chain(
        context,
        listener.ssl_keystore_location,
        None,
        listener.ssl_key_password,
        ("ssl.keystore.location", "ssl.keystore.location", "ssl.key.password"),
    )
    context.verify_mode = _VERIFY_MODES[listener.ssl_client_auth]
    if listener.ssl_client_auth is not SslClientAuth.NONE:
        if listener.ssl_truststore_location is not None:
            _load_trust(context, listener.ssl_truststore_location, "ssl.truststore.location")
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def ssl_authentication_error(exc: ssl.SSLError, *, host: str | None = None) -> SslAuthenticationError:
    """Name the cause of a failed TLS handshake.

    Args:
        exc: What `ssl` raised during the handshake.
        host: The broker's host name, for the message.

    Returns:
        An `SslAuthenticationError` (raise it ``from exc``) whose message
        says which check failed and which property governs it: an untrusted
        certificate (``ssl.ca.location``), a host-name mismatch
        (``ssl.endpoint.identification.algorithm``), an expired
        certificate, or the peer refusing our certificate
        (``ssl.certificate.location``).
    """
    where = f"TLS handshake with {host} failed" if host else "TLS handshake failed"
    if isinstance(exc, ssl.SSLCertVerificationError):
        code, message = exc.verify_code, exc.verify_message or str(exc)
        if code in (62, 64) or "hostname mismatch" in message.lower() or "ip address mismatch" in message.lower():
            why = f"host name mismatch: {message} (ssl.endpoint.identification.algorithm=https)"
        elif code in (2, 18, 19, 20, 21):
            why = f"certificate not trusted: {message} (check ssl.ca.location)"
        elif code in (9, 10):
            why = f"certificate not valid now: {message}"
        else:
            why = f"certificate verification failed: {message}"
        return SslAuthenticationError(f"{where}: {why}")
    reason = getattr(exc, "reason", None) or str(exc)
    lowered = reason.lower()
    if "certificate_required" in lowered or "certificate required" in lowered:
        why = f"the peer requires a certificate ({reason}; set ssl.certificate.location)"
    elif "bad_certificate" in lowered or "unknown_ca" in lowered or "certificate_unknown" in lowered:
        why = f"the peer refused our certificate ({reason})"
    elif "peer did not return a certificate" in str(exc).lower() or "no_certificate" in lowered:
        why = f"the client sent no certificate ({reason}; ssl.client.auth=required)"
    elif isinstance(exc, ssl.SSLEOFError) or "eof occurred" in lowered:
        # With TLS 1.3 the server checks the client certificate after the
        # client has finished its handshake, so a refusal can reach the
        # client as a bare close rather than an alert.
        why = (
            f"the peer closed the connection during the handshake ({reason}): it may require a client "
            "certificate (set ssl.certificate.location), or it is not a TLS listener"
        )
    elif "version" in lowered or "protocol" in lowered:
        why = f"no common TLS version ({reason}; TLS 1.2 or newer is required)"
    else:
        why = reason
    return SslAuthenticationError(f"{where}: {why}")
