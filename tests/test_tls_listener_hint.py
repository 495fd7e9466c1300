"""A plain connection to a TLS listener fails with one clear
KafkaConnectionError whether the listener answers with a TLS alert (Apache
Kafka, Java's SSLEngine) or closes the connection (the bundled broker).
Found by tests/conformance/test_security.py: against Kafka, kclient read the
alert as a 352 MB response size and raised FrameTooLargeError."""

from __future__ import annotations

import socket
import threading

import pytest
import trio

from kclient.errors import KafkaConnectionError
from kclient.net.connection import BrokerConnection, _is_tls_record_header

#: A TLS 1.2 fatal alert (unexpected_message), as Java sends it.
TLS_ALERT = bytes([21, 3, 3, 0, 2, 2, 10])


@pytest.mark.unit
def test_tls_record_headers():
    assert _is_tls_record_header(int.from_bytes(TLS_ALERT[:4], "big"))
    assert _is_tls_record_header(int.from_bytes(bytes([22, 3, 1, 0]), "big"))
    assert not _is_tls_record_header(1000)
    assert not _is_tls_record_header(-1)


def one_shot_server(reply: bytes) -> tuple[int, threading.Thread]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve():
        with server:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                if reply:
                    conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return port, thread


@pytest.mark.parametrize("reply", [TLS_ALERT, b""], ids=["alert", "close"])
def test_plain_connection_to_a_tls_listener(reply):
    port, thread = one_shot_server(reply)

    async def main():
        async with trio.open_nursery() as nursery:
            try:
                await BrokerConnection.connect(nursery, "127.0.0.1", port, request_timeout_ms=5000)
            except KafkaConnectionError as exc:
                return exc
            finally:
                nursery.cancel_scope.cancel()

    error = trio.run(main)
    thread.join(5)
    assert type(error) is KafkaConnectionError
    assert str(error).endswith(": if its listener uses TLS, set security.protocol=SSL or SASL_SSL")
