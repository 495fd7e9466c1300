"""Raw Kafka frames against a live broker, for the broker tests.

Request bodies are built here once (`produce_body`, `fetch_body`) and sent
over one loopback connection, blocking (`SocketClient`) or in trio
(`TrioClient`), both encoding and decoding with
`kclient.protocol.connection.ClientConnection`. A body lists every field of
the newest version a test uses; fields an older version does not have are
not encoded. Responses come back as dicts too (`body_dict`: the fields of
the version answered, by name), as raw-protocol tests read them. `produce_records`, `fetch_records` and `make_topic` are the
one-call forms the broker tests share; `peer_has_read_all` and
`held_connections` read the kernel's TCP queues (/proc/net/tcp) to see
that a broker has read a request or finished a connection.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

import attrs
import trio

from helpers.wait import retry
from kclient.errors import NONE
from kclient.protocol.connection import ClientConnection, Response
from kclient.protocol.messages import FETCH, METADATA, PRODUCE
from kclient.protocol.records import iter_record_set
from kclient.protocol.records.v2 import build_batch
from kclient.protocol.schema import fields_of


def body_dict(body: Any, version: int) -> dict[str, Any]:
    """A message as the dict of its fields in ``version`` by name, nested
    structs as dicts too (what the codec's dict decode gives).

    Args:
        body: A request or response message.
        version: The version it was decoded with.

    Returns:
        The dict.
    """
    out: dict[str, Any] = {}
    for field in fields_of(type(body)):
        if field.present_in(version):
            value = getattr(body, field.name)
            if field.struct_type is not None and value is not None:
                value = body_dict(value, version) if attrs.has(type(value)) else [body_dict(item, version) for item in value]
            out[field.name] = value
    return out


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


#: /proc/net/tcp states in which a process still holds the socket open.
_HELD_STATES = {"01": "ESTABLISHED", "08": "CLOSE_WAIT"}


class TcpSocket(NamedTuple):
    """One row of Linux's /proc/net/tcp{,6}."""

    local_port: int
    remote_port: int
    #: The kernel's state code in hex (``01`` ESTABLISHED, ``08`` CLOSE_WAIT, ``0A`` LISTEN, ...).
    state: str
    #: Bytes written and not yet acknowledged by the peer.
    tx_queue: int
    #: Bytes received and not yet read by the process.
    rx_queue: int


def tcp_sockets() -> list[TcpSocket] | None:
    """Every TCP socket of this machine as /proc/net/tcp{,6} lists them,
    or None where those files do not exist (not Linux).

    Returns:
        The sockets (of every process: the broker's too).
    """
    rows: list[TcpSocket] = []
    found = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        found = True
        for line in lines:
            fields = line.split()
            tx, rx = fields[4].split(":")
            rows.append(TcpSocket(int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16), fields[3], int(tx, 16), int(rx, 16)))
    return rows if found else None


def peer_has_read_all(sock: Any) -> bool:
    """True once every byte written to ``sock`` (a loopback TCP connection,
    a `socket.socket` or a trio socket) has reached the peer's kernel and
    been read from it by the peer process: the broker has taken the whole
    request off the wire and is handling it (its server reads a
    connection's next frame only once the previous one is answered, so a
    request it has read and not answered is parked on the broker).

    Reads the send queue of this end and the receive queue of the peer's
    end from /proc/net/tcp{,6}; where they are not listed (not Linux) it
    returns True: the state cannot be seen there.

    Args:
        sock: The client's end of the connection.

    Returns:
        Whether nothing written is still queued on either end.
    """
    sockets = tcp_sockets()
    if sockets is None:
        return True
    here, there = sock.getsockname()[1], sock.getpeername()[1]
    mine = [s for s in sockets if (s.local_port, s.remote_port) == (here, there)]
    theirs = [s for s in sockets if (s.local_port, s.remote_port) == (there, here)]
    return bool(mine and theirs) and mine[0].tx_queue == 0 and theirs[0].rx_queue == 0


def held_connections(*, local_port: int | None = None, remote_port: int | None = None) -> list[TcpSocket]:
    """The TCP connections with these ports that a process still holds
    open (ESTABLISHED, or CLOSE_WAIT: the peer closed, the process has not
    noticed yet). With ``local_port`` a broker's port: the connections the
    broker has not finished (it reads a closed connection's end only after
    answering the request before it); with ``remote_port`` a broker's port:
    the clients' connections to it. Empty where /proc/net/tcp is missing.

    Args:
        local_port: The port of the holding end, or None for any.
        remote_port: The port of the other end, or None for any.

    Returns:
        The matching sockets.
    """
    return [
        s
        for s in tcp_sockets() or []
        if s.state in _HELD_STATES and local_port in (None, s.local_port) and remote_port in (None, s.remote_port)
    ]


class SocketClient:
    """A blocking loopback connection speaking raw Kafka frames.

    ``timeout`` bounds every socket operation and every `request`;
    ``nodelay`` sets TCP_NODELAY. ``requests_sent`` counts the requests
    written whole to the socket (another thread can wait for one to be on
    the wire, then for the broker to read it: `peer_has_read_all`).
    """

    def __init__(self, host: str, port: int, *, client_id: str, timeout: float, nodelay: bool = False) -> None:
        self.timeout = timeout
        self.requests_sent = 0
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if nodelay:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(client_id=client_id)

    def request(self, api, version: int, body: dict) -> dict:
        """Send one request and return the decoded response body; raises
        ConnectionError if the broker closes the connection instead."""
        _, data = self.conn.send(api, version, body)
        self.sock.sendall(data)
        self.requests_sent += 1
        deadline = time.monotonic() + self.timeout
        while True:
            response = self.conn.next_response()
            if response is not None:
                return body_dict(response.body, response.version)
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
        except TimeoutError:
            pass
        raise AssertionError("the broker did not close the connection")

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def __enter__(self) -> SocketClient:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def produce_records(
    broker: Any,
    topic: str,
    values: list[bytes],
    *,
    acks: int,
    partition: int = 0,
    timeout_ms: int = 5000,
    client_timeout: float = 20.0,
) -> dict:
    """Produce ``values`` (null keys, timestamped now) as one v2 batch in
    one Produce v7 request over a fresh raw connection to ``broker`` (not
    the partition's leader necessarily: the answer says).

    Args:
        broker: Anything with ``host`` and ``port``.
        topic: The topic.
        values: The record values.
        acks: The request's ``acks`` (-1, 0 or 1).
        partition: The partition.
        timeout_ms: The request's ``timeout_ms`` (how long acks=-1 waits
            for the ISR).
        client_timeout: Seconds the connection waits for the answer.

    Returns:
        The partition's response (``error_code``, ``base_offset``, ...).
    """
    now = int(time.time() * 1000)
    with SocketClient(broker.host, broker.port, client_id="test-producer", timeout=client_timeout) as c:
        body = produce_body(topic, partition, build_batch([(None, v, now) for v in values]), acks=acks)
        body["timeout_ms"] = timeout_ms
        response = c.request(PRODUCE, 7, body)
    return response["responses"][0]["partition_responses"][0]


def fetch_records(broker: Any, topic: str, partition: int = 0, offset: int = 0, *, client_timeout: float = 20.0) -> tuple[int, list[bytes], int]:
    """One Fetch v11 of a partition from ``offset`` over a fresh raw
    connection to ``broker`` (a consumer: up to the high watermark).

    Args:
        broker: Anything with ``host`` and ``port``.
        topic: The topic.
        partition: The partition.
        offset: The fetch offset.
        client_timeout: Seconds the connection waits for the answer.

    Returns:
        ``(error code, the record values, high watermark)``; no values
        with an error.
    """
    with SocketClient(broker.host, broker.port, client_id="test-consumer", timeout=client_timeout) as c:
        part = c.request(FETCH, 11, fetch_body(topic, [(partition, offset)]))["responses"][0]["partitions"][0]
    values = [r.value for r in iter_record_set(part["records"] or b"")] if part["error_code"] == NONE else []
    return part["error_code"], values, part["high_watermark"]


def make_topic(c: SocketClient, topic: str, timeout: float = 30.0) -> dict:
    """Auto-create ``topic`` through Metadata v4 (``allow_auto_topic_creation``)
    and ask again until every partition has a leader.

    Args:
        c: A connection to a broker with ``auto.create.topics.enable``.
        topic: The topic.
        timeout: Seconds before failing.

    Returns:
        The last Metadata response.
    """
    return retry(
        lambda: c.request(METADATA, 4, {"topics": [{"name": topic}], "allow_auto_topic_creation": True}),
        lambda r: r["topics"][0]["error_code"] == 0 and all(p["leader_id"] >= 0 for p in r["topics"][0]["partitions"]),
        "topic",
        timeout=timeout,
    )


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
        """The next response (its body a dict: `body_dict`)."""
        with trio.fail_after(self.timeout):
            while True:
                response = self.conn.next_response()
                if response is not None:
                    return attrs.evolve(response, body=body_dict(response.body, response.version))
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
