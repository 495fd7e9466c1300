"""Security settings parsed from Kafka's property names.

Client side, `ClientSecurity.from_properties` reads (librdkafka's names,
which Kafka's Java client shares where both exist):

- ``security.protocol``: ``PLAINTEXT`` (default), ``SSL``,
  ``SASL_PLAINTEXT`` or ``SASL_SSL`` (any case);
- ``ssl.ca.location`` (or ``ssl.cafile``): PEM file (or directory) of
  the CAs to trust; the system's CAs if unset;
- ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``:
  the client's certificate (chain) and private key for mutual TLS;
- ``ssl.endpoint.identification.algorithm``: ``https`` (default, check
  the broker's host name against its certificate) or empty / ``none``;
- ``sasl.mechanism`` (or ``sasl.mechanisms``): ``PLAIN``,
  ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` (KIP-43, KIP-84);
- ``sasl.username`` and ``sasl.password``, or a Java client's
  ``sasl.jaas.config`` with ``username=... password=...``.

Broker side, `parse_listeners` reads ``listeners`` with
``listener.security.protocol.map`` (Kafka's default maps PLAINTEXT, SSL,
SASL_PLAINTEXT and SASL_SSL to themselves) and
`ListenerSecurity.from_properties` reads a listener's TLS and SASL
settings, each ``<key>`` first as ``listener.name.<listener>.<key>``:

- ``ssl.keystore.type=PEM``, ``ssl.keystore.location`` (one PEM file with
  the private key and the certificate chain), ``ssl.key.password``
  (KIP-651);
- ``ssl.truststore.type=PEM``, ``ssl.truststore.location``;
- ``ssl.client.auth``: ``none`` (default), ``requested``, ``required``
  (on a SASL_SSL listener only in its ``listener.name.<listener>.`` form,
  as KIP-684 says);
- ``sasl.enabled.mechanisms``, and the PLAIN users from
  ``listener.name.<listener>.plain.sasl.jaas.config`` or
  ``sasl.jaas.config`` (PlainLoginModule ``user_<name>="<password>"``);
- ``sasl.server.max.receive.size`` (default 524288 bytes): the largest
  frame read before the SASL login completes.

Every problem raises `ConfigError` naming the property, the way
`kclient.config` does (``Invalid value 'X' for configuration NAME: why``,
``Missing required configuration NAME``); values that are secrets are
never echoed. A feature Kafka has but kclient does not (GSSAPI, JKS
keystores) raises `NotSupportedError`, a `ConfigError`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from kclient.errors import ConfigError, NotSupportedError
from kclient.security.sasl import (
    PLAIN,
    SUPPORTED_MECHANISMS,
    SaslClient,
    client_mechanism,
    jaas_plain_users,
    jaas_username_password,
    parse_jaas_config,
)

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "SASL_SERVER_MAX_RECEIVE_SIZE",
    "ClientSecurity",
    "ListenerEndpoint",
    "ListenerSecurity",
    "SecurityProtocol",
    "SslClientAuth",
    "broker_listener_security",
    "parse_listeners",
    "parse_sasl_mechanism",
    "parse_security_protocol",
    "parse_security_protocol_map",
]


class SecurityProtocol(str, enum.Enum):
    """Kafka's ``security.protocol`` values."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_ssl(self) -> bool:
        """Whether the connection is wrapped in TLS."""
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        """Whether SASL authentication (KIP-43) follows the connect."""
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    def __str__(self) -> str:
        return self.value


class SslClientAuth(str, enum.Enum):
    """The broker's ``ssl.client.auth``: does it ask for a client certificate?"""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"

    def __str__(self) -> str:
        return self.value


#: Kafka's default ``listener.security.protocol.map`` (each protocol's own name).
DEFAULT_PROTOCOL_MAP: dict[str, SecurityProtocol] = {p.value: p for p in SecurityProtocol}

#: Kafka's default ``sasl.server.max.receive.size`` (bytes): the largest
#: frame read before a SASL login completes.
SASL_SERVER_MAX_RECEIVE_SIZE = 524288

#: SASL mechanisms Kafka has and kclient does not.
_KAFKA_ONLY_MECHANISMS = ("GSSAPI", "OAUTHBEARER")
_ENDPOINT_HTTPS = "https"


def _invalid(name: str, value: Any, why: str, *, secret: bool = False) -> ConfigError:
    shown = "" if secret else f" {value!r}"
    return ConfigError(f"Invalid value{shown} for configuration {name}: {why}")


def _text(props: Mapping[str, Any], name: str, *, secret: bool = False) -> str | None:
    """``props[name]`` as a stripped string; ``None`` if absent or empty."""
    value = props.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(name, value, "expected a string", secret=secret)
    value = value if secret else value.strip()
    return value or None


def _first(props: Mapping[str, Any], *names: str, secret: bool = False) -> tuple[str, str | None]:
    """The first of ``names`` (a property and its aliases) that is set, as
    ``(name, value)``; two different values for aliases are an error."""
    found = [(n, v) for n in names if (v := _text(props, n, secret=secret)) is not None]
    if len({v for _, v in found}) > 1:
        raise ConfigError(f"Conflicting configurations {found[0][0]} and {found[1][0]}: set only one")
    return found[0] if found else (names[0], None)


def parse_security_protocol(name: str, value: Any) -> SecurityProtocol:
    """A ``security.protocol`` value (any case) as a `SecurityProtocol`.

    Args:
        name: The property's name, for the error.
        value: A `SecurityProtocol` or its name (``"SASL_SSL"``).

    Returns:
        The protocol.

    Raises:
        ConfigError: Naming ``name``: not a string, or no protocol.
    """
    if isinstance(value, SecurityProtocol):
        return value
    if not isinstance(value, str):
        raise _invalid(name, value, "expected a string")
    try:
        return SecurityProtocol(value.strip().upper())
    except ValueError:
        raise _invalid(name, value, f"expected one of {', '.join(p.value for p in SecurityProtocol)}") from None


def parse_sasl_mechanism(name: str, value: str) -> str:
    """A ``sasl.mechanism`` value, upper-cased and checked.

    Args:
        name: The property's name, for the error.
        value: The mechanism (``"SCRAM-SHA-256"``, any case).

    Returns:
        The mechanism's name.

    Raises:
        NotSupportedError: A mechanism Kafka has and kclient does not
            (GSSAPI, OAUTHBEARER).
        ConfigError: Naming ``name``: no mechanism.
    """
    mechanism = value.strip().upper()
    if mechanism in SUPPORTED_MECHANISMS:
        return mechanism
    if mechanism in _KAFKA_ONLY_MECHANISMS:
        raise NotSupportedError(
            f"Invalid value {value!r} for configuration {name}: kclient supports {', '.join(SUPPORTED_MECHANISMS)}"
        )
    raise _invalid(name, value, f"expected one of {', '.join(SUPPORTED_MECHANISMS)}")


# --------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------


def _security_protocol(value: Any) -> SecurityProtocol:
    return parse_security_protocol("security.protocol", value)


def _sasl_mechanism(value: str | None) -> str | None:
    return None if value is None else parse_sasl_mechanism("sasl.mechanism", value)


@attrs.frozen
class ClientSecurity:
    """A client's parsed security settings.

    Build it with `from_properties` from a Kafka property mapping; the
    constructor takes the same values already typed and checks how they
    fit together.

    Attributes:
        security_protocol: ``security.protocol``.
        ssl_ca_location: ``ssl.ca.location``: PEM file or directory of
            trusted CAs; ``None`` for the system's.
        ssl_certificate_location: ``ssl.certificate.location``: client
            certificate chain (PEM; may hold the key too).
        ssl_key_location: ``ssl.key.location``: client private key (PEM).
        ssl_key_password: ``ssl.key.password``: the key's password.
        ssl_endpoint_identification_algorithm: ``"https"`` (check the host
            name) or ``""`` (do not).
        sasl_mechanism: ``sasl.mechanism``; ``None`` without SASL.
        sasl_username: ``sasl.username``.
        sasl_password: ``sasl.password``.

    Raises:
        ConfigError: naming the property: SASL without a mechanism, user or
            password; a key without a certificate.
    """

    security_protocol: SecurityProtocol = attrs.field(default=SecurityProtocol.PLAINTEXT, converter=_security_protocol)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = attrs.field(default=None, repr=False)
    ssl_endpoint_identification_algorithm: str = _ENDPOINT_HTTPS
    sasl_mechanism: str | None = attrs.field(default=None, converter=_sasl_mechanism)
    sasl_username: str | None = None
    sasl_password: str | None = attrs.field(default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.ssl_endpoint_identification_algorithm not in (_ENDPOINT_HTTPS, ""):
            raise _invalid(
                "ssl.endpoint.identification.algorithm",
                self.ssl_endpoint_identification_algorithm,
                "expected https or empty (none)",
            )
        if self.security_protocol.uses_ssl and self.ssl_key_location and not self.ssl_certificate_location:
            raise ConfigError(
                "Missing required configuration ssl.certificate.location: ssl.key.location is set without a certificate"
            )
        if self.security_protocol.uses_sasl:
            why = f"(security.protocol={self.security_protocol.value})"
            if self.sasl_mechanism is None:
                raise ConfigError(
                    f"Missing required configuration sasl.mechanism {why}: one of {', '.join(SUPPORTED_MECHANISMS)}"
                )
            if not self.sasl_username:
                raise ConfigError(f"Missing required configuration sasl.username {why}")
            if not self.sasl_password:
                raise ConfigError(f"Missing required configuration sasl.password {why}")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> ClientSecurity:
        """Read the security properties out of a client's property mapping.

        Other keys are ignored; ``ssl.*`` keys are ignored unless the
        protocol uses TLS and ``sasl.*`` keys unless it uses SASL, as Kafka
        does. An empty string counts as unset.

        Args:
            props: Kafka property names -> values (strings, as from a
                ``.properties`` file, or typed values).

        Returns:
            The settings.

        Raises:
            ConfigError: naming the property (never echoing a password).
            NotSupportedError: ``sasl.mechanism`` GSSAPI or OAUTHBEARER.
        """
        protocol = parse_security_protocol("security.protocol", props.get("security.protocol") or SecurityProtocol.PLAINTEXT)
        kwargs: dict[str, Any] = {"security_protocol": protocol}
        if protocol.uses_ssl:
            kwargs["ssl_ca_location"] = _first(props, "ssl.ca.location", "ssl.cafile")[1]
            kwargs["ssl_certificate_location"] = _text(props, "ssl.certificate.location")
            kwargs["ssl_key_location"] = _text(props, "ssl.key.location")
            kwargs["ssl_key_password"] = _text(props, "ssl.key.password", secret=True)
            algorithm = props.get("ssl.endpoint.identification.algorithm", _ENDPOINT_HTTPS)
            if algorithm is None:
                algorithm = ""
            if not isinstance(algorithm, str) or algorithm.strip().lower() not in (_ENDPOINT_HTTPS, "", "none"):
                raise _invalid("ssl.endpoint.identification.algorithm", algorithm, "expected https, none or empty")
            kwargs["ssl_endpoint_identification_algorithm"] = "" if algorithm.strip().lower() in ("", "none") else _ENDPOINT_HTTPS
        if protocol.uses_sasl:
            name, mechanism = _first(props, "sasl.mechanism", "sasl.mechanisms")
            kwargs["sasl_mechanism"] = parse_sasl_mechanism(name, mechanism) if mechanism is not None else None
            username = _text(props, "sasl.username")
            password = _text(props, "sasl.password", secret=True)
            jaas = _text(props, "sasl.jaas.config", secret=True)
            if jaas is not None and username is None and password is None:
                username, password = jaas_username_password(parse_jaas_config(jaas, "sasl.jaas.config"), "sasl.jaas.config")
            kwargs["sasl_username"] = username
            kwargs["sasl_password"] = password
        return cls(**kwargs)

    @property
    def check_hostname(self) -> bool:
        """Whether TLS checks the broker's host name (endpoint identification ``https``)."""
        return self.ssl_endpoint_identification_algorithm == _ENDPOINT_HTTPS

    def sasl_client(self) -> SaslClient:
        """A fresh client-side SASL mechanism for one connection.

        Returns:
            A `kclient.security.sasl.SaslClient` for ``sasl.mechanism``.

        Raises:
            ConfigError: the protocol does not use SASL.
        """
        if not self.security_protocol.uses_sasl or self.sasl_mechanism is None:
            raise ConfigError(f"security.protocol={self.security_protocol.value} does not use SASL")
        assert self.sasl_username is not None and self.sasl_password is not None
        return client_mechanism(self.sasl_mechanism, self.sasl_username, self.sasl_password)


# --------------------------------------------------------------------------
# Broker listeners
# --------------------------------------------------------------------------


@attrs.frozen
class ListenerEndpoint:
    """One entry of ``listeners``: unpacks as ``(name, protocol, host, port)``.

    Attributes:
        name: Listener name, upper case (``"SASL_SSL"``, ``"INTERNAL"``).
        protocol: Its security protocol, from ``listener.security.protocol.map``.
        host: Address to bind; empty means every interface.
        port: Port; 0 picks a free one.
    """

    name: str
    protocol: SecurityProtocol
    host: str
    port: int

    def __iter__(self) -> Iterator[Any]:
        return iter((self.name, self.protocol, self.host, self.port))

    @property
    def config_prefix(self) -> str:
        """Kafka's prefix for per-listener properties: ``listener.name.<name lower case>.``."""
        return f"listener.name.{self.name.lower()}."


_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?:\[(?P<ip6>[^\]]*)\]|(?P<host>[^:/\[\]]*)):(?P<port>[0-9]+)")
_LISTENER_NAME = re.compile(r"[A-Za-z0-9_]+")


def parse_security_protocol_map(value: str | Mapping[str, Any] | None) -> dict[str, SecurityProtocol]:
    """Parse ``listener.security.protocol.map``.

    Args:
        value: ``"NAME:PROTOCOL,..."`` or a mapping; ``None`` or empty for
            Kafka's default (`DEFAULT_PROTOCOL_MAP`). A value given
            replaces the default entirely, as in Kafka.

    Returns:
        Upper-case listener name -> protocol.

    Raises:
        ConfigError: naming ``listener.security.protocol.map`` for an entry
            that is not ``NAME:PROTOCOL``, an unknown protocol or a name
            given twice.
    """
    prop = "listener.security.protocol.map"
    if value is None or (isinstance(value, str) and not value.strip()):
        return dict(DEFAULT_PROTOCOL_MAP)
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, str):
        items = []
        for entry in value.split(","):
            if not entry.strip():
                continue
            name, sep, protocol = entry.partition(":")
            if not sep:
                raise _invalid(prop, value, f"{entry.strip()!r} is not NAME:PROTOCOL")
            items.append((name, protocol))
    else:
        raise _invalid(prop, value, "expected NAME:PROTOCOL,...")
    result: dict[str, SecurityProtocol] = {}
    for name, protocol in items:
        key = name.strip().upper()
        if not _LISTENER_NAME.fullmatch(key):
            raise _invalid(prop, value, f"{name.strip()!r} is not a listener name (letters, digits, _)")
        if key in result:
            raise _invalid(prop, value, f"listener {key} is mapped twice")
        result[key] = parse_security_protocol(prop, protocol)
    return result


def parse_listeners(listeners: str | Iterable[str | tuple[str, str, int]], protocol_map: str | Mapping[str, Any] | None = None) -> list[ListenerEndpoint]:
    """Parse ``listeners`` (``NAME://host:port,...``) with the protocol map.

    Args:
        listeners: The ``listeners`` value, e.g.
            ``"SASL_SSL://127.0.0.1:9093,PLAINTEXT://:9092"``; IPv6 hosts in
            brackets; an empty host binds every interface. A sequence of
            such strings or of ``(name, host, port)`` tuples works too.
        protocol_map: ``listener.security.protocol.map`` (see
            `parse_security_protocol_map`).

    Returns:
        The listeners in the order given.

    Raises:
        ConfigError: naming ``listeners`` for a malformed entry, a port out
            of range, a name or a port used twice; naming
            ``listener.security.protocol.map`` for a listener it does not map.
    """
    prop = "listeners"
    mapping = parse_security_protocol_map(protocol_map)
    items: list[Any]
    if isinstance(listeners, str):
        items = listeners.split(",")
    elif isinstance(listeners, Iterable):
        items = list(listeners)
    else:
        raise _invalid(prop, listeners, "expected NAME://host:port,...")
    result: list[ListenerEndpoint] = []
    for item in items:
        if isinstance(item, (tuple, list)) and len(item) == 3:  # (name, host, port), as kclient.config stores it
            item = f"{item[0]}://[{item[1]}]:{item[2]}" if ":" in str(item[1]) else f"{item[0]}://{item[1]}:{item[2]}"
        if not isinstance(item, str):
            raise _invalid(prop, listeners, f"{item!r} is not NAME://host:port")
        if not item.strip():
            continue
        m = _LISTENER.fullmatch(item.strip())
        if m is None:
            raise _invalid(prop, listeners, f"{item.strip()!r} is not NAME://host:port")
        name = m["name"].upper()
        host = m["ip6"] if m["ip6"] is not None else m["host"]
        port = int(m["port"])
        if port > 65535:
            raise _invalid(prop, listeners, f"port {port} of listener {name} is not in 0..65535")
        if name not in mapping:
            raise ConfigError(
                f"No security protocol defined for listener {name} in configuration listener.security.protocol.map "
                f"(mapped: {', '.join(mapping) or 'none'})"
            )
        if any(e.name == name for e in result):
            raise _invalid(prop, listeners, f"listener {name} is given twice; each listener needs its own name")
        if port and any(e.port == port for e in result):
            raise _invalid(prop, listeners, f"port {port} is used by two listeners")
        result.append(ListenerEndpoint(name, mapping[name], host, port))
    if not result:
        raise _invalid(prop, listeners, "expected at least one NAME://host:port")
    return result


def _listener_value(props: Mapping[str, Any], listener: ListenerEndpoint, key: str, *, secret: bool = False) -> tuple[str, str | None]:
    """``(property name, value)`` of ``key`` for ``listener``: the
    ``listener.name.<l>.`` form first, then the plain key."""
    for name in (listener.config_prefix + key, key):
        value = _text(props, name, secret=secret)
        if value is not None:
            return name, value
    return key, None


def _pem_only(props: Mapping[str, Any], listener: ListenerEndpoint, key: str) -> None:
    name, value = _listener_value(props, listener, key)
    if value is not None and value.upper() != "PEM":
        raise NotSupportedError(f"Invalid value {value!r} for configuration {name}: kclient reads PEM only (KIP-651)")


@attrs.frozen
class ListenerSecurity:
    """A broker listener's TLS and SASL settings.

    Attributes:
        listener: The endpoint.
        ssl_keystore_location: PEM file with the private key and the
            certificate chain (``ssl.keystore.location``, KIP-651).
        ssl_key_password: Password of that key (``ssl.key.password``; kclient
            also takes ``ssl.keystore.password``, which Kafka refuses for PEM).
        ssl_truststore_location: PEM file of CAs trusted for client
            certificates (``ssl.truststore.location``).
        ssl_client_auth: ``ssl.client.auth``.
        sasl_enabled_mechanisms: ``sasl.enabled.mechanisms``.
        plain_users: PLAIN user -> password, from the JAAS config.
        sasl_server_max_receive_size: ``sasl.server.max.receive.size``:
            the largest frame (bytes, default 524288) the broker reads from
            a connection of a SASL listener before its login completes; a
            larger declared size closes the connection from the size alone
            (Kafka's InvalidReceiveException).
    """

    listener: ListenerEndpoint
    ssl_keystore_location: str | None = None
    ssl_key_password: str | None = attrs.field(default=None, repr=False)
    ssl_truststore_location: str | None = None
    ssl_client_auth: SslClientAuth = SslClientAuth.NONE
    sasl_enabled_mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = attrs.field(factory=dict, repr=lambda users: f"<{len(users)} users>")
    sasl_server_max_receive_size: int = SASL_SERVER_MAX_RECEIVE_SIZE

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], listener: ListenerEndpoint) -> ListenerSecurity:
        """Read ``listener``'s settings from the broker's properties.

        Each key is looked up as ``listener.name.<listener lower case>.<key>``
        first, then as ``<key>``. TLS keys are read for SSL and SASL_SSL
        listeners, SASL keys for SASL_PLAINTEXT and SASL_SSL.

        Args:
            props: The broker's properties.
            listener: One of `parse_listeners`' results.

        Returns:
            The settings.

        Raises:
            ConfigError: naming the property: no keystore on a TLS listener,
                a truststore password with PEM, a bad ``ssl.client.auth``,
                no ``sasl.enabled.mechanisms`` or PLAIN users, a bad JAAS
                config.
            NotSupportedError: a JKS / PKCS12 store, inline PEM values, or
                a GSSAPI / OAUTHBEARER mechanism.
        """
        kwargs: dict[str, Any] = {"listener": listener}
        protocol = listener.protocol
        where = f"listener {listener.name} ({protocol.value})"
        if protocol.uses_ssl:
            _pem_only(props, listener, "ssl.keystore.type")
            _pem_only(props, listener, "ssl.truststore.type")
            for key in ("ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates"):
                name, value = _listener_value(props, listener, key, secret=True)
                if value is not None:
                    raise NotSupportedError(f"Configuration {name} (inline PEM) is not supported: use a file location")
            name, keystore = _listener_value(props, listener, "ssl.keystore.location")
            if keystore is None:
                raise ConfigError(f"Missing required configuration ssl.keystore.location for {where}")
            kwargs["ssl_keystore_location"] = keystore
            _, key_password = _listener_value(props, listener, "ssl.key.password", secret=True)
            if key_password is None:
                _, key_password = _listener_value(props, listener, "ssl.keystore.password", secret=True)
            kwargs["ssl_key_password"] = key_password
            kwargs["ssl_truststore_location"] = _listener_value(props, listener, "ssl.truststore.location")[1]
            name, trust_password = _listener_value(props, listener, "ssl.truststore.password", secret=True)
            if trust_password is not None:
                raise ConfigError(f"Invalid configuration {name}: a trust store password cannot be specified for PEM format")
            auth_values: dict[str, SslClientAuth] = {}
            for name in (f"{listener.config_prefix}ssl.client.auth", "ssl.client.auth"):
                client_auth = _text(props, name)
                if client_auth is not None:
                    try:
                        auth_values[name] = SslClientAuth(client_auth.lower())
                    except ValueError:
                        raise _invalid(name, client_auth, "expected none, requested or required") from None
            # KIP-684: SASL already authenticates, so a SASL_SSL listener
            # asks for certificates only when told so for itself.
            names = [f"{listener.config_prefix}ssl.client.auth"]
            if protocol is not SecurityProtocol.SASL_SSL:
                names.append("ssl.client.auth")
            for name in names:
                if name in auth_values:
                    kwargs["ssl_client_auth"] = auth_values[name]
                    break
        if protocol.uses_sasl:
            name, enabled = _listener_value(props, listener, "sasl.enabled.mechanisms")
            if enabled is None:
                raise NotSupportedError(
                    f"Missing required configuration sasl.enabled.mechanisms for {where}: Kafka's default GSSAPI is "
                    f"not supported; use {', '.join(SUPPORTED_MECHANISMS)}"
                )
            mechanisms = tuple(dict.fromkeys(parse_sasl_mechanism(name, m) for m in enabled.split(",") if m.strip()))
            if not mechanisms:
                raise _invalid(name, enabled, "expected at least one mechanism")
            kwargs["sasl_enabled_mechanisms"] = mechanisms
            kwargs["sasl_server_max_receive_size"] = _max_receive_size(props, listener)
            if PLAIN in mechanisms:
                candidates = (f"{listener.config_prefix}plain.sasl.jaas.config", "sasl.jaas.config")
                jaas_name, jaas = _first_set(props, candidates)
                if jaas is None:
                    raise ConfigError(
                        f"Missing required configuration {candidates[0]} for PLAIN on {where}: a PlainLoginModule "
                        'with user_<name>="<password>" entries'
                    )
                kwargs["plain_users"] = jaas_plain_users(parse_jaas_config(jaas, jaas_name), jaas_name)
        return cls(**kwargs)


def _max_receive_size(props: Mapping[str, Any], listener: ListenerEndpoint) -> int:
    """The listener's ``sasl.server.max.receive.size`` (bytes, at least 1)."""
    name, value = _listener_value(props, listener, "sasl.server.max.receive.size")
    if value is None:
        return SASL_SERVER_MAX_RECEIVE_SIZE
    try:
        size = int(value)
    except ValueError:
        raise _invalid(name, value, "expected an integer") from None
    if size < 1:
        raise _invalid(name, value, "must be at least 1")
    return size


def _first_set(props: Mapping[str, Any], names: Iterable[str]) -> tuple[str, str | None]:
    for name in names:
        value = _text(props, name, secret=True)
        if value is not None:
            return name, value
    return "", None


def broker_listener_security(props: Mapping[str, Any]) -> list[ListenerSecurity]:
    """Every listener of a broker with its security settings.

    Args:
        props: The broker's properties; ``listeners`` is required here.

    Returns:
        One `ListenerSecurity` per listener, in order.

    Raises:
        ConfigError: see `parse_listeners` and `ListenerSecurity.from_properties`.
    """
    listeners = props.get("listeners")
    if listeners is None or (isinstance(listeners, str) and not listeners.strip()):
        raise ConfigError("Missing required configuration listeners")
    endpoints = parse_listeners(listeners, props.get("listener.security.protocol.map"))
    return [ListenerSecurity.from_properties(props, endpoint) for endpoint in endpoints]

