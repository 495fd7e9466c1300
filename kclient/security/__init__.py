"""Security groundwork: TLS and SASL for clients and the bundled broker.

Pure modules, no sockets, no trio, no ZooKeeper: callers do the I/O.

- `kclient.security.settings`: the client's ``security.protocol`` /
  ``ssl.*`` / ``sasl.*`` properties parsed into `ClientSecurity`; the
  broker's ``listeners`` and ``listener.security.protocol.map`` parsed into
  `ListenerEndpoint` values, and each listener's ``ssl.*`` / ``sasl.*``
  properties into `ListenerSecurity`.
- `kclient.security.tls`: stdlib `ssl.SSLContext` objects for the client
  and for a broker listener (PEM keystore and truststore, KIP-651), and the
  translation of a failed handshake into `SslAuthenticationError`.
- `kclient.security.sasl`: SASL mechanisms for the SaslHandshake (KIP-43)
  and SaslAuthenticate (KIP-152) exchange: PLAIN (RFC 4616) and
  SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, KIP-84, via ``scramp``), client
  and server side; Kafka's SCRAM credential strings and ZooKeeper user
  config; a JAAS ``sasl.jaas.config`` parser.
"""

from __future__ import annotations
