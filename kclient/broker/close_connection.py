"""The signal a request handler raises when Kafka closes the connection
instead of answering.

Kafka's ``RequestHandlerHelper`` closes the connection where a request has
no error response to send: a Produce with ``acks=0`` that failed in any way
(an authorization failure, an unknown topic, a rejected batch) gets no
answer, so the client learns of the failure by the disconnect
(``KafkaApis.handleProduceRequest``).
"""

from __future__ import annotations

__all__ = ["CloseConnection"]


class CloseConnection(Exception):
    """Raised by a handler (or an authorization guard) when Kafka would
    close the connection instead of answering (e.g. a failed Produce with
    acks=0); the message says why, for the broker's rate-limited log."""
