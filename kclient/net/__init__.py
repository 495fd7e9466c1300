"""trio networking for the clients: `BrokerConnection`
(one pipelined connection to one broker, with timeouts)."""
