"""How a client opens its broker connections, as one value: the client id
sent in every request header, the connect and request timeouts, the
security settings (``security.protocol``, ``ssl.*``, ``sasl.*``) and the
TLS context built once from them. A `kclient.client.cluster.Cluster` and a
`kclient.client.consumer.simple.TrioSimpleConsumer` hold one and open every
connection with `ConnectionSettings.connect`.
"""

from __future__ import annotations

import ssl

import attrs
import trio

from kclient.net.connection import BrokerConnection
from kclient.security.settings import ClientSecurity
from kclient.security.tls import client_ssl_context


@attrs.frozen
class ConnectionSettings:
    """The settings of a client's broker connections.

    Args:
        client_id: Sent in every request header (``client.id``).
        connect_timeout_ms: TCP connect plus TLS handshake timeout (ms).
        request_timeout_ms: Default response timeout of each request (ms).
        security: ``security.protocol`` with its ``ssl.*`` / ``sasl.*``
            settings; None for PLAINTEXT.
        ssl_context: The TLS context of every connection (see
            `with_tls_context`); None: built per connection when
            ``security`` asks for TLS.
    """

    client_id: str | None = "kclient"
    connect_timeout_ms: int = 10000
    request_timeout_ms: int = 30000
    security: ClientSecurity | None = None
    ssl_context: ssl.SSLContext | None = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def with_timeout(cls, timeout_ms: int, *, client_id: str | None = "kclient", security: ClientSecurity | None = None) -> ConnectionSettings:
        """Settings whose connect and request timeouts are one value (the
        admin client's ``request.timeout.ms``, a tool's timeout).

        Args:
            timeout_ms: Both timeouts (ms).
            client_id: Sent in every request header.
            security: The security settings; None for PLAINTEXT.

        Returns:
            The settings (no TLS context yet: see `with_tls_context`).
        """
        return cls(client_id, timeout_ms, timeout_ms, security)

    @property
    def uses_ssl(self) -> bool:
        """Whether the connections run over TLS (SSL, SASL_SSL)."""
        return self.security is not None and self.security.security_protocol.uses_ssl

    def with_tls_context(self) -> ConnectionSettings:
        """These settings with their TLS context built once (the ``ssl.*``
        files are read now, and a bad one fails here, not at the first
        connection).

        Returns:
            The same settings when they use no TLS or have a context
            already, else a copy holding one.

        Raises:
            ConfigError: an ``ssl.*`` file cannot be used.
        """
        if self.ssl_context is not None or not self.uses_ssl:
            return self
        assert self.security is not None
        return attrs.evolve(self, ssl_context=client_ssl_context(self.security))

    async def connect(self, nursery: trio.Nursery, host: str, port: int) -> BrokerConnection:
        """Open a connection with these settings (TCP, TLS, ApiVersions,
        SASL: see `kclient.net.connection.BrokerConnection.connect`).

        Args:
            nursery: Runs the connection's reader task.
            host: The broker's host.
            port: The broker's port.

        Returns:
            The open, authenticated connection.

        Raises:
            KafkaConnectionError: the broker cannot be reached, or the TLS
                handshake does not finish, within ``connect_timeout_ms``.
            AuthenticationError: the TLS handshake or the SASL exchange
                failed.
        """
        return await BrokerConnection.connect(
            nursery,
            host,
            port,
            client_id=self.client_id,
            connect_timeout_ms=self.connect_timeout_ms,
            request_timeout_ms=self.request_timeout_ms,
            security=self.security,
            ssl_context=self.ssl_context,
        )


__all__ = ["ConnectionSettings"]
