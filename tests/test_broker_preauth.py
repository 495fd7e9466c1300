"""What a peer that has not logged in can cost the broker (issue 30, holes
1-3), against one real broker process with a PLAINTEXT and a
SASL_PLAINTEXT listener and small limits:

1. a frame declared before the SASL login completes may not exceed
   ``sasl.server.max.receive.size`` (Kafka's 512 KiB): a larger size
   closes the connection from the size alone; a costly token under the cap
   (SCRAM's SASLprep of a 500 KB user name) is evaluated off the event
   loop, and so is the parsing of a large frame, so other connections are
   answered meanwhile;
2. frames read before the login take from their own share of the request
   memory (``queued.max.unauthenticated.request.bytes``), so silent peers
   that never log in cannot hold back an authenticated producer; and time
   a read is held back by the budget counts toward
   ``socket.request.read.timeout.ms``;
3. a failed login's answer is held back for
   ``connection.failed.authentication.delay.ms`` (KIP-306) while other
   connections are served, and the connection is then closed; a failed TLS
   handshake (no client certificate on an mTLS listener, bytes that are
   not TLS) is closed after the same delay.

Every check is an ordering or a condition (a response not there yet when
another one arrived, one connection closed before another), never an
elapsed-time threshold; every wait has a deadline. Linux only (the kernel's
TCP queues in /proc/net/tcp show what the broker has read).
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import struct
import sys
import time
import uuid

import pytest
from helpers.raw import SocketClient, body_dict, make_topic, peer_has_read_all, produce_body, tcp_sockets
from helpers.wait import wait_for

from kclient.protocol.connection import ClientConnection
from kclient.protocol.messages import API_VERSIONS, METADATA, PRODUCE, SASL_AUTHENTICATE, SASL_HANDSHAKE
from kclient.protocol.records.v2 import build_batch
from kclient.testing import BrokerProcess, TestCertificates, security_properties

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/net/tcp: Linux only"),
]

MIB = 1 << 20
#: socket.request.max.bytes and queued.max.request.bytes: two frames at
#: Kafka's default sasl.server.max.receive.size fill the budget.
BUDGET = MIB
SASL_MAX_RECEIVE_SIZE = 524288  # Kafka's default, not configured
READ_TIMEOUT_MS = 10000  # socket.request.read.timeout.ms, and connections.max.idle.ms
FAILED_AUTH_DELAY_MS = 5000  # connection.failed.authentication.delay.ms
TIMEOUT = 30.0
USERS = {"alice": "alice-secret"}
_SIZE = struct.Struct(">i")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    with TestCertificates(tmp_path_factory.mktemp("preauth-certs")) as certificates:
        yield certificates


@pytest.fixture(scope="module")
def broker(certs):
    props = security_properties(
        certs, listeners=["PLAINTEXT", "SASL_PLAINTEXT", "MTLS:SSL"], mechanisms=["PLAIN", "SCRAM-SHA-256"], plain_users=USERS
    )
    props.update(
        {
            "socket.request.max.bytes": BUDGET,
            "queued.max.request.bytes": BUDGET,
            "socket.request.read.timeout.ms": READ_TIMEOUT_MS,
            "connections.max.idle.ms": READ_TIMEOUT_MS,
            "connection.failed.authentication.delay.ms": FAILED_AUTH_DELAY_MS,
            "connection.rejection.log.interval.ms": 0,
            "num.partitions": 1,
        }
    )
    with BrokerProcess(properties=props) as proc:
        yield proc


def _client(broker, listener: str, timeout: float = TIMEOUT) -> SocketClient:
    return SocketClient("127.0.0.1", broker.ports[listener], client_id="preauth", timeout=timeout)


def _api_versions(client: SocketClient) -> dict:
    return client.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})


def _send(client: SocketClient, api, version: int, body: dict) -> bytes:
    """Encode a request on ``client``'s connection state; returns its frame (not sent)."""
    return client.conn.send(api, version, body)[1]


def _response(client: SocketClient) -> dict:
    """The next response on ``client`` (after `_send` and ``sendall``)."""
    deadline = time.monotonic() + client.timeout
    while True:
        response = client.conn.next_response()
        if response is not None:
            return body_dict(response.body, response.version)
        assert time.monotonic() < deadline, "no response in time"
        chunk = client.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("broker closed the connection")
        client.conn.receive_data(chunk)


def _has_bytes_or_eof(sock: socket.socket) -> bool:
    """Whether anything (a response, EOF or a reset) is waiting on ``sock``, without waiting."""
    return bool(select.select([sock], [], [], 0)[0])


def _closed(sock: socket.socket) -> bool:
    """Whether the broker closed ``sock`` (EOF or reset), without waiting; data is read and dropped."""
    if not _has_bytes_or_eof(sock):
        return False
    try:
        return sock.recv(1 << 20, socket.MSG_DONTWAIT) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except BlockingIOError:
        return False


def _unread_by_broker(sock: socket.socket) -> int | None:
    """Bytes written on ``sock`` that the broker has not read yet (this
    end's send queue plus the broker end's receive queue), None if the
    connection is not listed."""
    here, there = sock.getsockname()[1], sock.getpeername()[1]
    rows = tcp_sockets() or []
    mine = [s for s in rows if (s.local_port, s.remote_port) == (here, there)]
    theirs = [s for s in rows if (s.local_port, s.remote_port) == (there, here)]
    if not (mine and theirs):
        return None
    return mine[0].tx_queue + theirs[0].rx_queue


def _login(client: SocketClient) -> None:
    assert client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    assert client.request(SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"})["error_code"] == 0


# -- hole 1 -----------------------------------------------------------------


def test_a_frame_over_the_pre_login_cap_is_refused_from_its_size_alone(broker):
    """A 1 MiB SCRAM client-first message (twice sasl.server.max.receive.size,
    within socket.request.max.bytes) is refused once its 4-byte size has
    arrived, while its sender is still sending; another listener is served
    meanwhile."""
    with _client(broker, "PLAINTEXT") as other, _client(broker, "SASL_PLAINTEXT", timeout=READ_TIMEOUT_MS / 2000) as attacker:
        assert attacker.request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        name = b"u" * (BUDGET - 64)
        frame = _send(attacker, SASL_AUTHENTICATE, 1, {"auth_bytes": b"n,,n=" + name + b",r=nonce"})
        size = len(frame) - 4
        assert SASL_MAX_RECEIVE_SIZE < size <= BUDGET
        attacker.sock.sendall(frame[: 64 * 1024])  # the rest is never sent
        assert _api_versions(other)["error_code"] == 0
        # Closed within half the read timeout: from the size, not by the read timeout.
        assert attacker.closed_by_broker()
    wait_for(lambda: f"invalid receive (size = {size} larger than {SASL_MAX_RECEIVE_SIZE})" in broker.output(), "the refusal logged")


def test_a_costly_login_token_is_evaluated_off_the_event_loop(broker):
    """A SCRAM client-first message with a 500 KB user name (under the cap;
    SASLprep costs about a second of CPU): once the broker has read it,
    ApiVersions on the PLAINTEXT listener is answered before the token's
    answer comes (on the event loop, the token would be answered first)."""
    with _client(broker, "PLAINTEXT") as other, _client(broker, "SASL_PLAINTEXT") as attacker:
        assert _api_versions(other)["error_code"] == 0  # connected and served once
        assert attacker.request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        frame = _send(attacker, SASL_AUTHENTICATE, 1, {"auth_bytes": b"n,,n=" + b"u" * 500_000 + b",r=nonce"})
        assert len(frame) - 4 <= SASL_MAX_RECEIVE_SIZE
        attacker.sock.sendall(frame)
        wait_for(lambda: peer_has_read_all(attacker.sock), "the broker to read the whole token")
        assert _api_versions(other)["error_code"] == 0
        assert not _has_bytes_or_eof(attacker.sock), "the login token was answered before a request of another listener"
        reply = _response(attacker)
        assert reply["error_code"] == 0 and bytes(reply["auth_bytes"]).startswith(b"r=nonce")


def test_a_large_frame_is_parsed_off_the_event_loop(broker):
    """A Metadata request naming 340,000 topics (1 MB of small structs,
    about half a second of parsing), cut one byte short so that it is
    malformed: once the broker has read it, ApiVersions on another
    connection is answered while the malformed request's connection is
    still open (parsed on the event loop, it would be closed first)."""
    with _client(broker, "PLAINTEXT") as other, _client(broker, "PLAINTEXT") as sender:
        assert _api_versions(other)["error_code"] == 0  # connected and served once
        frame = _send(sender, METADATA, 1, {"topics": [{"name": "a"}] * 340_000})[:-1]
        assert len(frame) - 4 <= BUDGET
        sender.sock.sendall(_SIZE.pack(len(frame) - 4) + frame[4:])
        wait_for(lambda: peer_has_read_all(sender.sock), "the broker to read the whole frame")
        assert _api_versions(other)["error_code"] == 0
        assert not _has_bytes_or_eof(sender.sock), "the malformed frame's connection was closed before a request of another connection was answered"
        assert sender.closed_by_broker()


# -- hole 2 -----------------------------------------------------------------


def test_silent_peers_before_login_do_not_hold_back_an_authenticated_producer(broker):
    """Two peers that never log in each declare a frame of
    sasl.server.max.receive.size and send all of it but one byte: together
    they hold as much as queued.max.request.bytes, from their own share.
    An authenticated producer's acks=1 send is acknowledged while both are
    still open."""
    topic = f"preauth-{uuid.uuid4().hex[:8]}"
    with _client(broker, "PLAINTEXT") as admin:
        make_topic(admin, topic)
    with _client(broker, "SASL_PLAINTEXT") as producer:
        _login(producer)
        attackers = [socket.create_connection(("127.0.0.1", broker.ports["SASL_PLAINTEXT"]), timeout=TIMEOUT) for _ in range(2)]
        try:
            for sock in attackers:
                sock.sendall(_SIZE.pack(SASL_MAX_RECEIVE_SIZE) + b"\0" * (SASL_MAX_RECEIVE_SIZE - 1))
            wait_for(lambda: all(peer_has_read_all(sock) for sock in attackers), "the broker to read both silent frames")
            body = produce_body(topic, 0, build_batch([(None, b"acknowledged", int(time.time() * 1000))]), acks=1)
            reply = producer.request(PRODUCE, 7, body)
            assert reply["responses"][0]["partition_responses"][0]["error_code"] == 0
            assert not any(_closed(sock) for sock in attackers), "a silent peer was closed before the producer was answered"
        finally:
            for sock in attackers:
                sock.close()


def test_time_held_back_by_the_budget_counts_toward_the_read_timeout(broker):
    """A frame held back by the request budget is closed
    socket.request.read.timeout.ms after its first byte: before a
    connection opened later that is closed after the same time idle
    (connections.max.idle.ms). Were the held-back time not counted, it
    would stay open until the holder's timeout plus its own."""
    port = broker.ports["PLAINTEXT"]
    holder = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    held = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    try:
        holder.sendall(_SIZE.pack(BUDGET) + b"\0" * (BUDGET - 1))  # the whole budget, one byte short
        wait_for(lambda: peer_has_read_all(holder), "the broker to read the holder's bytes")
        held.sendall(_SIZE.pack(BUDGET) + b"\0" * 100)
        wait_for(lambda: _unread_by_broker(held) == 100, "the broker to read the held frame's size and hold back its bytes")
        idle = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        try:
            wait_for(lambda: _closed(idle) or _closed(held), "a connection to be closed", timeout=READ_TIMEOUT_MS / 1000 * 4)
            assert _closed(held), "the idle connection opened later was closed first"
        finally:
            idle.close()
    finally:
        holder.close()
        held.close()


# -- hole 3 -----------------------------------------------------------------


def test_a_failed_login_is_answered_only_after_the_delay(broker):
    """Three wrong passwords on three connections: once the broker has read
    them, ApiVersions on another connection is answered while none of the
    three has its answer; each gets SASL_AUTHENTICATION_FAILED no sooner
    than connection.failed.authentication.delay.ms after sending, then the
    connection is closed, so one connection gets one guess per delay."""
    with _client(broker, "PLAINTEXT") as other:
        guessers = [_client(broker, "SASL_PLAINTEXT") for _ in range(3)]
        try:
            for guesser in guessers:
                assert guesser.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
            sent_at = []
            for i, guesser in enumerate(guessers):
                frame = _send(guesser, SASL_AUTHENTICATE, 1, {"auth_bytes": f"\0alice\0guess-{i}".encode()})
                sent_at.append(time.monotonic())
                guesser.sock.sendall(frame)
            wait_for(lambda: all(peer_has_read_all(g.sock) for g in guessers), "the broker to read the guesses")
            assert _api_versions(other)["error_code"] == 0
            assert not any(_has_bytes_or_eof(g.sock) for g in guessers), "a failed login was answered before the delay"
            for guesser, sent in zip(guessers, sent_at):
                reply = _response(guesser)
                assert reply["error_code"] == 58
                # The broker slept the delay after reading the guess, which it read after it was sent.
                assert time.monotonic() - sent >= FAILED_AUTH_DELAY_MS / 1000
                assert guesser.closed_by_broker()
        finally:
            for guesser in guessers:
                guesser.close()


def _eof_now(sock: socket.socket) -> bool:
    """Whether the broker has closed ``sock`` by now (what it sent before,
    such as a TLS alert, is read and dropped), without waiting."""
    while _has_bytes_or_eof(sock):
        try:
            if sock.recv(1 << 20, socket.MSG_DONTWAIT) == b"":
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except BlockingIOError:
            return False
    return False


def test_a_failed_tls_handshake_is_closed_only_after_the_delay(broker, certs):
    """KIP-306 for TLS, as Kafka treats a failed handshake (its
    SslAuthenticationException): a client without a certificate on the
    mTLS listener, and one sending a plaintext request there, are closed no
    sooner than connection.failed.authentication.delay.ms after the broker
    read them, while another connection is served meanwhile. Before, they
    were closed at once (one handshake guess per round trip)."""
    port = broker.ports["MTLS"]
    context = ssl.create_default_context(cafile=certs.ca_location)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as garbage, socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
        sent = time.monotonic()
        garbage.sendall(ClientConnection(client_id="plain").send(API_VERSIONS, 0, {})[1])
        # TLS 1.3: the client's side of the handshake completes; the broker
        # then refuses the missing certificate. `probe` reads the same TCP
        # connection below TLS (the alert, then the close).
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls, socket.socket(fileno=os.dup(tls.fileno())) as probe:
            wait_for(lambda: peer_has_read_all(garbage) and peer_has_read_all(probe), "the broker to read both handshakes")
            with _client(broker, "PLAINTEXT") as other:
                assert _api_versions(other)["error_code"] == 0
            assert not _eof_now(garbage) and not _eof_now(probe), "a failed TLS handshake was closed before the delay"
            for sock in (garbage, probe):
                wait_for(lambda s=sock: _eof_now(s), "the broker to close the failed handshake", timeout=TIMEOUT)
                assert time.monotonic() - sent >= FAILED_AUTH_DELAY_MS / 1000
