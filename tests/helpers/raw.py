"""Raw Kafka frames against a live broker, for the broker tests.

Request bodies are built here once (`produce_body`, `fetch_body`) and sent
over one loopback connection, blocking (`SocketClient`) or in trio
(`TrioClient`), both encoding and decoding with
`kclient.protocol.connection.ClientConnection`. A body lists every field of
the newest version a test uses; fields an older version does not have are
not encoded.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable
from typing import Any

import trio

from kclient.protocol.connection import ClientConnection, Response


def produce_body(topic: str, partition: int, records: bytes, *, acks: int = 1) -> dict:
    """A Produce request body (any version) for one partition."""
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def fetch_body(
    topic: str,
    partitions: Iterable[tuple[int, int]],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = 50_000_000,
    partition_max_bytes: int = 10_000_000,
) -> dict:
    """A Fetch request body (any version 0-11) reading ``(partition,
    offset)`` pairs of one topic."""
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": off, "log_start_offset": -1, "partition_max_bytes": partition_max_bytes}
                    for p, off in partitions
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


class SocketClient:
    """A blocking loopback connection speaking raw Kafka frames.

    ``timeout`` bounds every socket operation and every `request`;
    ``nodelay`` sets TCP_NODELAY.
    """

    def __init__(self, host: str, port: int, *, client_id: str, timeout: float, nodelay: bool = False) -> None:
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if nodelay:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(client_id=client_id)

    def request(self, api, version: int, body: dict) -> dict:
        """Send one request and return the decoded response body; raises
        ConnectionError if the broker closes the connection instead."""
        _, data = self.conn.send(api, version, body)
        self.sock.sendall(data)
        deadline = time.monotonic() + self.timeout
        while True:
            response = self.conn.next_response()
            if response is not None:
                return response.body
            assert time.monotonic() < deadline, "no response in time"
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self.conn.receive_data(chunk)

    def closed_by_broker(self) -> bool:
        """True once the broker closes the connection (EOF or reset);
        fails the test if that does not happen within the timeout."""
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            pass
        raise AssertionError("the broker did not close the connection")

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def __enter__(self) -> SocketClient:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class TrioClient:
    """One trio loopback connection speaking raw Kafka frames; every wait
    is bounded by ``timeout`` seconds."""

    def __init__(self, stream: trio.SocketStream, *, client_id: str, timeout: float) -> None:
        self.stream = stream
        self.timeout = timeout
        self.conn = ClientConnection(client_id=client_id)

    @classmethod
    async def connect(cls, broker: Any, *, client_id: str, timeout: float) -> Any:
        """Connect to ``broker`` (anything with ``host`` and ``port``)."""
        with trio.fail_after(timeout):
            return cls(await trio.open_tcp_stream(broker.host, broker.port), client_id=client_id, timeout=timeout)

    async def send(self, api, version: int, body: dict, *, expect_response: bool = True) -> int:
        """Send one request; returns its correlation id."""
        correlation_id, data = self.conn.send(api, version, body, expect_response=expect_response)
        await self.stream.send_all(data)
        return correlation_id

    async def receive(self) -> Response:
        """The next response."""
        with trio.fail_after(self.timeout):
            while True:
                response = self.conn.next_response()
                if response is not None:
                    return response
                data = await self.stream.receive_some(1 << 20)
                if not data:
                    raise ConnectionError("broker closed the connection")
                self.conn.receive_data(data)

    async def request(self, api, version: int, body: dict) -> dict:
        """Send one request and return the decoded response body (of the
        same version)."""
        await self.send(api, version, body)
        response = await self.receive()
        assert response.version == version
        return response.body

    async def send_raw(self, data: bytes) -> None:
        """Send bytes as they are."""
        await self.stream.send_all(data)

    async def receive_raw_frame(self) -> bytes:
        """One whole response frame, size prefix included, undecoded."""
        buf = b""
        with trio.fail_after(self.timeout):
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                data = await self.stream.receive_some(65536)
                if not data:
                    raise ConnectionError("broker closed the connection")
                buf += data
        return buf

    async def closed_by_broker(self) -> bool:
        """True once the broker closes the connection (EOF or reset)."""
        with trio.fail_after(self.timeout):
            try:
                while await self.stream.receive_some(65536):
                    pass
            except trio.BrokenResourceError:
                pass
        return True

    async def aclose(self) -> None:
        """Close the connection."""
        await self.stream.aclose()
