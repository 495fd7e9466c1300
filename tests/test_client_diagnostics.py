"""What a client says when a broker misbehaves (issue 30, hole 6), against
real sockets: a peer that answers ApiVersions with garbage, and a proxy in
front of a real broker that cuts one response off by closing the
connection.

- garbage: the `ProtocolError` is the cause of the
  `NoBrokersAvailableError` and is named in its message (it once read as
  an unreachable broker);
- a response cut off: a `KafkaConnectionError` (Kafka's NetworkException:
  a disconnect) saying so, at once, never a `KafkaTimeoutError` after
  ``request.timeout.ms``; a producer retries it as any disconnect.

Request timeouts here are far longer than the pytest timeout, so a client
that waited for one would fail the test by hanging; nothing asserts on
elapsed time.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from kclient import AdminClient, FetchRequest, Producer, ProducerData, SimpleConsumer
from kclient.errors import KafkaConnectionError, NoBrokersAvailableError, ProtocolError
from kclient.protocol.messages import FETCH, METADATA, PRODUCE
from kclient.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)

LONG_MS = 600_000  # a request timeout no test may wait for


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


class Peer:
    """A loopback TCP server running ``handle(conn)`` per connection in
    threads."""

    def __init__(self, handle) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.handle = handle
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        except (EOFError, OSError):
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.server.close()


class CuttingProxy:
    """Forwards frames to a broker; the first ``cuts`` responses to
    ``api_key`` are cut in half and the client's connection closed."""

    def __init__(self) -> None:
        self.target = 0  # the broker's port, set once it runs
        self.api_key = -1
        self.cuts = 0
        self.cut_done = threading.Event()
        self.lock = threading.Lock()
        self.peer = Peer(self._handle)

    def cut(self, api_key: int, times: int = 1) -> None:
        with self.lock:
            self.api_key, self.cuts = api_key, times
            self.cut_done.clear()

    def _take_cut(self, api_key: int) -> bool:
        with self.lock:
            if api_key != self.api_key or self.cuts <= 0:
                return False
            self.cuts -= 1
            if not self.cuts:
                self.cut_done.set()
            return True

    def _handle(self, conn: socket.socket) -> None:
        with socket.create_connection(("127.0.0.1", self.target)) as upstream:
            while True:
                request = _read_frame(conn)
                (api_key,) = struct.unpack(">h", request[:2])
                upstream.sendall(struct.pack(">i", len(request)) + request)
                response = _read_frame(upstream)
                if self._take_cut(api_key):
                    conn.sendall(struct.pack(">i", len(response)) + response[: len(response) // 2])
                    return  # closes the client's connection mid-response
                conn.sendall(struct.pack(">i", len(response)) + response)


@pytest.fixture(scope="module")
def proxied() -> Iterator[tuple[BrokerProcess, CuttingProxy]]:
    """A broker advertising a cutting proxy's port (so every client
    connection, bootstrap or not, goes through the proxy)."""
    proxy = CuttingProxy()
    props = {"num.partitions": 1, "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.peer.port}"}
    with BrokerProcess(properties=props) as broker:
        proxy.target = broker.port
        yield broker, proxy
    proxy.peer.close()


def test_garbage_api_versions_answer_is_a_visible_protocol_error():
    def garbage(conn: socket.socket) -> None:
        request = _read_frame(conn)
        answer = request[4:8] + b"\xff\xff\xff\x7f\x01\x02\x03"  # its correlation id, then nonsense
        conn.sendall(struct.pack(">i", len(answer)) + answer)
        _read_frame(conn)  # until the client hangs up

    peer = Peer(garbage)
    try:
        with AdminClient({"bootstrap.servers": f"127.0.0.1:{peer.port}", "request.timeout.ms": LONG_MS}) as admin:
            with pytest.raises(NoBrokersAvailableError) as info:
                admin.list_topics()
    finally:
        peer.close()
    assert isinstance(info.value.__cause__, ProtocolError), repr(info.value.__cause__)
    assert "ProtocolError: bad response from 127.0.0.1" in str(info.value)


def test_a_fetch_response_cut_off_is_a_disconnect_at_once(proxied):
    broker, proxy = proxied
    with Producer({"bootstrap.servers": broker.bootstrap, "request.required.acks": 1}) as producer:
        producer.send(ProducerData("cut-fetch", None, [b"x" * 1000] * 200, partition=0))
    proxy.cut(FETCH.key)
    with SimpleConsumer("127.0.0.1", proxy.peer.port, so_timeout_ms=LONG_MS, buffer_size=1 << 20, client_id="cut") as consumer:
        with pytest.raises(KafkaConnectionError, match=r"closed the connection in the middle of a response \(\d+ bytes of it received\)"):
            list(consumer.fetch(FetchRequest("cut-fetch", 0, 0, 1 << 20)))
    assert proxy.cut_done.is_set()


@pytest.mark.parametrize("api", [METADATA, PRODUCE], ids=lambda a: a.name)
def test_a_producer_retries_a_response_cut_off(proxied, api):
    """The cut costs one retry, not ``request.timeout.ms``: with the
    timeout far beyond the pytest timeout, a client that waited for it
    would hang here."""
    _, proxy = proxied
    topic = f"cut-{api.name.lower()}"
    config = {"bootstrap.servers": f"127.0.0.1:{proxy.peer.port}", "request.required.acks": 1, "request.timeout.ms": LONG_MS}
    with Producer(config) as producer:
        if api is PRODUCE:
            producer.send(ProducerData(topic, None, [b"first"], partition=0))  # metadata and connection in place
        proxy.cut(api.key)
        producer.send(ProducerData(topic, None, [b"v"], partition=0))
    assert proxy.cut_done.is_set()
