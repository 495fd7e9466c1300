"""`AdminConfig`: the admin client's settings under Kafka's admin client
property names (https://kafka.apache.org/documentation/#adminclientconfigs)."""

from __future__ import annotations

from typing import ClassVar

import attrs

from kclient.config.base import prop
from kclient.config.convert import HostPort, at_least, to_host_ports, to_int, to_str
from kclient.config.security import _ClientSecurityConfig

__all__ = ["AdminConfig"]


@attrs.frozen(kw_only=True)
class AdminConfig(_ClientSecurityConfig):
    """Settings of `kclient.client.admin.AdminClient` (Kafka's admin client
    names and defaults).

    ``bootstrap.servers`` is required; the classic ``metadata.broker.list``
    is its alias, as for the producer. The broker connections are secured by
    ``security.protocol`` and the ``ssl.*`` / ``sasl.*`` properties (KIP-43,
    KIP-84, KIP-152; see `kclient.config.security`).

    Raises:
        ConfigError: Naming the property, for a bad value, or for security
            properties that do not fit together.
    """

    IGNORED: ClassVar[frozenset[str]] = frozenset(
        {"connections.max.idle.ms", "metadata.max.age.ms", "receive.buffer.bytes", "send.buffer.bytes", "reconnect.backoff.ms"}
    )

    bootstrap_servers: tuple[HostPort, ...] = prop("bootstrap.servers", to_host_ports, aliases=["metadata.broker.list"])
    """Brokers to bootstrap from, ``"host:port,host:port"``. Required."""
    client_id: str = prop("client.id", to_str, "kclient-admin")
    """Sent in every request header."""
    request_timeout_ms: int = prop("request.timeout.ms", to_int, 30000, at_least(1))
    """Response timeout of each request (ms); also the connect timeout."""
    default_api_timeout_ms: int = prop("default.api.timeout.ms", to_int, 60000, at_least(1))
    """How long a call (``create_topics`` ...) may take in all, retries included,
    when it is given no ``timeout_ms`` (ms)."""
    retry_backoff_ms: int = prop("retry.backoff.ms", to_int, 100, at_least(0))
    """Pause before retrying a retriable error (NOT_CONTROLLER, no broker) (ms)."""

    def __attrs_post_init__(self) -> None:
        self._check_security()
