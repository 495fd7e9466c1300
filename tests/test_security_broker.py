"""The bundled broker's TLS and SASL listeners (issue 15) against real
peers: confluent-kafka (librdkafka) and kafka-python, and raw sockets for
what the clients do not show (error codes, the v0 raw-token flow, garbage).

One ZooKeeper (SCRAM users, KIP-84) and one broker with every listener for
the module: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL and MTLS (SSL with
``ssl.client.auth=required``). Certificates come from trustme at run time.
"""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid

import pytest
import trio
from helpers.raw import SocketClient

from kclient.broker import Broker
from kclient.config import BrokerConfig
from kclient.protocol.messages import API_VERSIONS, METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE
from kclient.testing import BrokerProcess, TestCertificates, client_properties, kafka_python_options, security_properties
from kclient.zk.users import add_scram_user, describe_user_config

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
TIMEOUT = 20


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    with TestCertificates(tmp_path_factory.mktemp("certs")) as certificates:
        yield certificates


@pytest.fixture(scope="module")
def secure_zk(zookeeper) -> str:
    """The secured broker's own chroot: alone in it, it leads every
    partition (the session ZooKeeper's root holds other brokers)."""
    return zookeeper.connect_string("secure-broker")


@pytest.fixture(scope="module")
def secure_broker(certs, secure_zk):
    add_scram_user(secure_zk, SCRAM_USER, {"SCRAM-SHA-256": SCRAM_PASSWORD, "SCRAM-SHA-512": SCRAM_PASSWORD})
    props = security_properties(certs, plain_users=PLAIN_USERS)
    props.update({"zookeeper.connect": secure_zk, "broker.id": 1515, "num.partitions": 1})
    with BrokerProcess(properties=props) as proc:
        yield proc


def _topic() -> str:
    return f"sec-{uuid.uuid4().hex[:10]}"


CASES = {
    "SSL": ("SSL", "SSL", {}),
    "SASL_PLAINTEXT-PLAIN": ("SASL_PLAINTEXT", "SASL_PLAINTEXT", {"mechanism": "PLAIN", "username": "alice", "password": "alice-secret"}),
    "SASL_PLAINTEXT-SCRAM-SHA-256": (
        "SASL_PLAINTEXT", "SASL_PLAINTEXT", {"mechanism": "SCRAM-SHA-256", "username": SCRAM_USER, "password": SCRAM_PASSWORD}),
    "SASL_PLAINTEXT-SCRAM-SHA-512": (
        "SASL_PLAINTEXT", "SASL_PLAINTEXT", {"mechanism": "SCRAM-SHA-512", "username": SCRAM_USER, "password": SCRAM_PASSWORD}),
    "SASL_SSL-PLAIN": ("SASL_SSL", "SASL_SSL", {"mechanism": "PLAIN", "username": "bob", "password": "bob-secret"}),
    "SASL_SSL-SCRAM-SHA-512": ("SASL_SSL", "SASL_SSL", {"mechanism": "SCRAM-SHA-512", "username": SCRAM_USER, "password": SCRAM_PASSWORD}),
    "MTLS": ("MTLS", "SSL", {"client": "dave"}),
}


def _client_props(broker, certs, case: str) -> dict:
    listener, protocol, extra = CASES[case]
    extra = dict(extra)
    client = extra.pop("client", None)
    props = client_properties(protocol, certs, client_certificate=certs.client_certificate(client) if client else None, **extra)
    props["bootstrap.servers"] = broker.bootstrap_for(listener)
    return props


def _confluent_round_trip(props: dict, topic: str, values: list[bytes]) -> list[bytes]:
    producer = ck.Producer({**props, "message.timeout.ms": TIMEOUT * 1000})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT) == 0
    consumer = ck.Consumer({**props, "group.id": "g", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                got.append(message.value())
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("case", list(CASES))
def test_confluent_kafka_produces_and_consumes(secure_broker, certs, case):
    props = _client_props(secure_broker, certs, case)
    values = [f"{case}-{i}".encode() for i in range(5)]
    assert _confluent_round_trip(props, _topic(), values) == values


@pytest.mark.parametrize("case", list(CASES))
def test_kafka_python_produces_and_consumes(secure_broker, certs, case):
    options = kafka_python_options(_client_props(secure_broker, certs, case))
    topic = _topic()
    values = [f"{case}-{i}".encode() for i in range(5)]
    producer = kafka.KafkaProducer(**options, request_timeout_ms=TIMEOUT * 1000)
    try:
        for value in values:
            producer.send(topic, value).get(timeout=TIMEOUT)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(**options, auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT * 1000)
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek(kafka.TopicPartition(topic, 0), 0)
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == len(values):
                break
    finally:
        consumer.close()
    assert got == values


def test_metadata_answers_with_the_listener_of_the_request(secure_broker, certs):
    for case, listener in (("SSL", "SSL"), ("SASL_PLAINTEXT-PLAIN", "SASL_PLAINTEXT")):
        admin = ck.Producer(_client_props(secure_broker, certs, case))
        brokers = admin.list_topics(timeout=TIMEOUT).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", secure_broker.ports[listener])]


def _errors_within(props: dict, seconds: float = 10.0) -> list:
    """Start a confluent producer and collect its error_cb errors until one
    arrives (or ``seconds`` pass)."""
    errors: list = []
    producer = ck.Producer({**props, "error_cb": errors.append, "message.timeout.ms": 5000, "reconnect.backoff.ms": 1000})
    deadline = time.monotonic() + seconds
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    return errors


@pytest.mark.parametrize(
    ("case", "override", "expected"),
    [
        ("SASL_PLAINTEXT-PLAIN", {"sasl.password": "wrong"}, "authentication failed"),
        ("SASL_SSL-PLAIN", {"sasl.username": "nobody"}, "authentication failed"),
        ("SASL_PLAINTEXT-SCRAM-SHA-256", {"sasl.password": "wrong"}, "authentication failed"),
        ("SASL_PLAINTEXT-SCRAM-SHA-512", {"sasl.username": "nobody"}, "authentication failed"),
    ],
)
def test_bad_credentials_fail_fast_with_confluent_kafka(secure_broker, certs, case, override, expected):
    errors = _errors_within({**_client_props(secure_broker, certs, case), **override})
    assert errors, "no error reported"  # within _errors_within's deadline
    assert expected in errors[0].str().lower()


def test_untrusted_broker_certificate_fails_fast(secure_broker, certs):
    props = _client_props(secure_broker, certs, "SSL")
    props["ssl.ca.location"] = certs.untrusted_ca_location()
    errors = _errors_within(props)
    assert errors and "certificate verify failed" in errors[0].str().lower()


def _tls_refused(port: int, context: ssl.SSLContext) -> bool:
    """Whether the broker ends the TLS connection instead of answering an
    ApiVersions request (with TLS 1.3 the refusal of a client certificate
    arrives after the client's side of the handshake, on the first read)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(_frame(API_VERSIONS, 0, {}))
                return tls.recv(10) == b""
        except (ssl.SSLError, ConnectionError):
            return True


def test_untrusted_or_missing_client_certificate_is_refused(secure_broker, certs):
    mallory = certs.untrusted_client_certificate()
    context = ssl.create_default_context(cafile=certs.ca_location)
    context.load_cert_chain(mallory.certificate_location, mallory.key_location)
    assert _tls_refused(secure_broker.ports["MTLS"], context)
    assert _tls_refused(secure_broker.ports["MTLS"], ssl.create_default_context(cafile=certs.ca_location))
    # the same client with a trusted certificate is answered
    dave = certs.client_certificate("dave")
    context = ssl.create_default_context(cafile=certs.ca_location)
    context.load_cert_chain(dave.certificate_location, dave.key_location)
    assert not _tls_refused(secure_broker.ports["MTLS"], context)


def test_kafka_python_wrong_password_fails_fast(secure_broker, certs, caplog):
    """kafka-python reads the SASL_AUTHENTICATION_FAILED answer (it then
    keeps retrying its bootstrap until max_block_ms, its own policy)."""
    options = kafka_python_options({**_client_props(secure_broker, certs, "SASL_PLAINTEXT-PLAIN"), "sasl.password": "nope"})
    with caplog.at_level("WARNING", logger="kafka"):
        with pytest.raises(kafka.errors.KafkaError):
            # kafka-python 3.x retries its bootstrap for bootstrap_timeout_ms.
            # Bounds well above the broker's answer (after its 100 ms KIP-306
            # delay), so a loaded machine still reads it.
            bounded = {"bootstrap_timeout_ms": 15000} if "bootstrap_timeout_ms" in kafka.KafkaProducer.DEFAULT_CONFIG else {}
            kafka.KafkaProducer(**options, request_timeout_ms=15000, max_block_ms=15000, **bounded)
    failures = [r for r in caplog.records if "SaslAuthenticationFailedError" in r.getMessage()]
    assert failures, "kafka-python did not read the SASL_AUTHENTICATION_FAILED answer"
    assert "Invalid username or password" in caplog.text


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL", "MTLS"])
@pytest.mark.parametrize("payload", [b"", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", bytes(range(256)) * 4])
def test_plaintext_and_garbage_on_tls_listeners_are_refused(secure_broker, certs, listener, payload):
    good = ck.Producer({**_client_props(secure_broker, certs, "SSL"), "message.timeout.ms": TIMEOUT * 1000})
    topic = _topic()
    good.produce(topic, b"before")
    assert good.flush(TIMEOUT) == 0
    with socket.create_connection(("127.0.0.1", secure_broker.ports[listener]), timeout=TIMEOUT) as sock:
        if payload:
            sock.sendall(payload)
        else:  # a plaintext Kafka client: ApiVersions v0
            with SocketClient("127.0.0.1", secure_broker.ports[listener], client_id="plain", timeout=TIMEOUT) as plain:
                with pytest.raises(ConnectionError):
                    plain.request(API_VERSIONS, 0, {})
            sock.sendall(b"\0\0\0\x0a\0\x12\0\0\0\0\0\x01\0\0")
        assert _closed(sock)
    good.produce(topic, b"after")
    assert good.flush(TIMEOUT) == 0


def _frame(api, version: int, body: dict, correlation_id: int = 1) -> bytes:
    from kclient.protocol.connection import ClientConnection

    return ClientConnection(client_id="raw").send(api, version, body)[1]


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    return _read_exact(sock, size)


def test_wrong_password_gets_error_58_with_a_generic_message_then_close(secure_broker):
    with SocketClient("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"], client_id="raw", timeout=TIMEOUT) as client:
        handshake = client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert handshake["error_code"] == 0 and "PLAIN" in handshake["mechanisms"]
        reply = client.request(SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0wrong"})
        assert reply["error_code"] == 58
        assert "alice" not in reply["error_message"] and "wrong" not in reply["error_message"]
        assert client.closed_by_broker()
    with SocketClient("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"], client_id="raw", timeout=TIMEOUT) as client:
        reply = client.request(SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert reply["error_code"] == 33 and "SCRAM-SHA-256" in reply["mechanisms"]
        assert client.closed_by_broker()
    assert "failed SASL/PLAIN authentication from 127.0.0.1" in secure_broker.output()


def test_requests_before_authentication_close_the_connection(secure_broker):
    with SocketClient("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"], client_id="raw", timeout=TIMEOUT) as client:
        versions = client.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}
        assert keys[17] == (0, 1) and keys[36] == (0, 1)
        with pytest.raises(ConnectionError):
            client.request(METADATA, 1, {"topics": None})


def test_v0_handshake_then_raw_tokens(secure_broker):
    """The pre-KIP-152 flow: SaslHandshake v0, then tokens as bare size-prefixed frames."""
    with SocketClient("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"], client_id="raw", timeout=TIMEOUT) as client:
        assert client.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = b"\0alice\0alice-secret"
        client.sock.sendall(struct.pack(">i", len(token)) + token)
        assert _read_frame(client.sock) == b""
        metadata = client.request(METADATA, 1, {"topics": None})
        assert metadata["brokers"][0]["port"] == secure_broker.ports["SASL_PLAINTEXT"]
    with SocketClient("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"], client_id="raw", timeout=TIMEOUT) as client:
        assert client.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = b"\0alice\0bad"
        client.sock.sendall(struct.pack(">i", len(token)) + token)
        assert client.closed_by_broker()


def test_kclient_configs_adds_a_scram_user_who_can_log_in(secure_broker, certs, secure_zk):
    user = f"erin-{uuid.uuid4().hex[:6]}"
    command = [sys.executable, "-m", "kclient", "configs", "--zookeeper", secure_zk, "--alter",
               "--add-config", "SCRAM-SHA-256=[iterations=8192,password=erin-secret],SCRAM-SHA-512=[password=erin-secret]",
               "--entity-type", "users", "--entity-name", user]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=secure_broker_root())
    assert done.returncode == 0, done.stderr
    assert "erin-secret" not in str(describe_user_config(secure_zk, user))
    described = subprocess.run(command[:6] + ["--describe", "--entity-type", "users", "--entity-name", user],
                               capture_output=True, text=True, timeout=60, cwd=secure_broker_root())
    assert "SCRAM-SHA-256=iterations=8192" in described.stdout and "SCRAM-SHA-512=iterations=4096" in described.stdout
    props = client_properties("SASL_SSL", certs, mechanism="SCRAM-SHA-256", username=user, password="erin-secret")
    props["bootstrap.servers"] = secure_broker.bootstrap_for("SASL_SSL")
    assert _confluent_round_trip(props, _topic(), [b"hi"]) == [b"hi"]
    deleted = subprocess.run(command[:6] + ["--alter", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", user],
                             capture_output=True, text=True, timeout=60, cwd=secure_broker_root())
    assert deleted.returncode == 0, deleted.stderr
    errors = _errors_within(props)
    assert errors and "authentication failed" in errors[0].str().lower()


def secure_broker_root() -> str:
    """The folder holding the kclient package under test (so ``python -m
    kclient`` runs the same code)."""
    from pathlib import Path

    import kclient

    return str(Path(kclient.__file__).resolve().parents[1])


def test_configs_errors_are_one_line():
    done = subprocess.run([sys.executable, "-m", "kclient", "configs", "--zookeeper", "127.0.0.1:1", "--alter",
                           "--add-config", "SCRAM-SHA-256=[iterations=8192]", "--entity-type", "users", "--entity-name", "x"],
                          capture_output=True, text=True, timeout=60, cwd=secure_broker_root())
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "password is missing" in done.stderr


async def test_default_bind_is_loopback(tmp_path):
    config = BrokerConfig.from_properties({"port": 0, "log.dirs": str(tmp_path)})
    broker = Broker(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        try:
            assert [address for address, _ in broker.listeners[0].addresses] == ["127.0.0.1"]
            assert broker.ports == {"PLAINTEXT": broker.port}
        finally:
            broker.stop()


def test_start_up_log_says_loopback_only(tmp_path):
    with BrokerProcess(log_dir=tmp_path / "logs") as proc:
        pass
    # BrokerProcess passes host.name; run the CLI without it
    proc = subprocess.Popen([sys.executable, "-m", "kclient", "broker", "--override", "port=0", "--override",
                             f"log.dirs={tmp_path / 'logs2'}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=secure_broker_root(), text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("kclient broker listening on 127.0.0.1:") and line.rstrip().endswith("(PLAINTEXT)")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "127.0.0.1 only (loopback, the default)" in err


def test_refusals_are_logged_rate_limited(secure_broker):
    """Each kind of refusal is one log line per interval, with a count of those held back."""
    import logging

    from kclient.broker.security import RateLimitedLog

    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("test.ratelimit")
    logger.addHandler(Collect())
    limited = RateLimitedLog(logger, interval=0.2)
    assert limited.log("a", "refused %s", "x")
    assert not any(limited.log("a", "refused %s", "y") for _ in range(5))
    assert limited.log("b", "other")  # another kind is not held back
    time.sleep(0.25)  # kept: the 0.2 s interval elapsing is what is under test
    assert limited.log("a", "refused %s", "z")
    assert records == ["refused x", "other", "refused z (5 more since the last report)"]
    assert "TLS handshake failed" in secure_broker.output()
