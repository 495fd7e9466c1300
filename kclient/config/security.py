"""The client security properties shared by `ProducerConfig` and
`ConsumerConfig`: ``security.protocol``, ``ssl.*`` and ``sasl.*`` under
Kafka's (and librdkafka's) names.

- ``security.protocol``: ``PLAINTEXT`` (default), ``SSL``,
  ``SASL_PLAINTEXT`` or ``SASL_SSL``;
- ``ssl.ca.location`` (alias ``ssl.cafile``), ``ssl.certificate.location``,
  ``ssl.key.location``, ``ssl.key.password``,
  ``ssl.endpoint.identification.algorithm`` (``https``, the default, or
  empty / ``none``);
- ``sasl.mechanism`` (alias ``sasl.mechanisms``): ``PLAIN``,
  ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` (KIP-43, KIP-84);
  ``sasl.username``, ``sasl.password``, or a Java client's
  ``sasl.jaas.config``.

Each value is checked as it is set, and the whole set (a SASL protocol
without a mechanism or user, a key without a certificate) by
`kclient.security.settings.ClientSecurity.from_properties` when the config
is built; a problem raises `ConfigError` naming the property, never echoing
a password. The parsed settings are the config's ``security`` attribute.
"""

from __future__ import annotations

from typing import Any

import attrs

from kclient.config.base import _KafkaConfig, prop
from kclient.config.convert import to_optional_str
from kclient.security.settings import ClientSecurity, SecurityProtocol, parse_sasl_mechanism, parse_security_protocol

__all__ = ["SECURITY_PROPERTIES"]

#: Every client security property (canonical names), in declaration order.
SECURITY_PROPERTIES: tuple[str, ...] = (
    "security.protocol",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
)


def _to_protocol(value: Any) -> SecurityProtocol:
    return parse_security_protocol("security.protocol", value)


def _to_mechanism(value: Any) -> str | None:
    text = to_optional_str(value)
    return None if text is None else parse_sasl_mechanism("sasl.mechanism", text)


def _to_secret(value: Any) -> str | None:
    """A password: a string kept as given (no stripping); empty is unset."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {type(value).__name__}")
    return value or None


def _to_endpoint_algorithm(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {type(value).__name__}")
    text = value.strip().lower()
    if text in ("", "none"):
        return ""
    if text == "https":
        return "https"
    raise ValueError("expected https, none or empty")


@attrs.frozen(kw_only=True)
class _ClientSecurityConfig(_KafkaConfig):
    """Base of the client configs: the security properties (module docstring).

    Subclasses call `_check_security` from their ``__attrs_post_init__``.
    """

    security_protocol: SecurityProtocol = prop("security.protocol", _to_protocol, SecurityProtocol.PLAINTEXT)
    """``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``."""
    ssl_ca_location: str | None = prop("ssl.ca.location", to_optional_str, None, aliases=["ssl.cafile"])
    """PEM file (or hashed directory) of the CAs trusted for the broker's
    certificate; ``None`` trusts the system's CAs."""
    ssl_certificate_location: str | None = prop("ssl.certificate.location", to_optional_str, None)
    """The client's certificate chain (PEM), for mutual TLS."""
    ssl_key_location: str | None = prop("ssl.key.location", to_optional_str, None)
    """The client's private key (PEM); may be in the certificate file."""
    ssl_key_password: str | None = prop("ssl.key.password", _to_secret, None, secret=True)
    """Password of an encrypted ``ssl.key.location``."""
    ssl_endpoint_identification_algorithm: str = prop(
        "ssl.endpoint.identification.algorithm", _to_endpoint_algorithm, "https"
    )
    """``https`` (check that the broker's certificate names the host
    connected to) or ``""`` (``none``: do not check)."""
    sasl_mechanism: str | None = prop("sasl.mechanism", _to_mechanism, None, aliases=["sasl.mechanisms"])
    """``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``; required with SASL."""
    sasl_username: str | None = prop("sasl.username", to_optional_str, None)
    """The SASL user; required with SASL unless ``sasl.jaas.config`` names it."""
    sasl_password: str | None = prop("sasl.password", _to_secret, None, secret=True)
    """The SASL password."""
    sasl_jaas_config: str | None = prop("sasl.jaas.config", _to_secret, None, secret=True)
    """A Java client's ``PlainLoginModule`` / ``ScramLoginModule required
    username="..." password="...";``, read when ``sasl.username`` and
    ``sasl.password`` are unset."""
    security: ClientSecurity = attrs.field(init=False, repr=False, eq=False)
    """The security properties parsed (`ClientSecurity`), for the connections."""

    def security_properties(self) -> dict[str, Any]:
        """The security properties that are set, under their Kafka names.

        Returns:
            ``{"security.protocol": ..., "ssl.ca.location": ..., ...}``
            without the unset ones.
        """
        table = self.properties()
        out: dict[str, Any] = {}
        for attr, spec in table.items():
            if spec.name in SECURITY_PROPERTIES:
                value = getattr(self, attr)
                if value is not None:
                    out[spec.name] = value
        return out

    def _check_security(self) -> None:
        """Parse the security properties together (`ClientSecurity.from_properties`).

        Raises:
            ConfigError: naming the property: SASL without ``sasl.mechanism``,
                ``sasl.username`` or ``sasl.password``; ``ssl.key.location``
                without ``ssl.certificate.location``; a bad ``sasl.jaas.config``.
        """
        object.__setattr__(self, "security", ClientSecurity.from_properties(self.security_properties()))
