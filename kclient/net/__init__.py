"""trio networking for the clients: :class:`~kclient.net.connection.BrokerConnection`
(one pipelined connection to one broker, with timeouts)."""
