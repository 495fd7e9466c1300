"""The client side of TLS and SASL (KIP-43 SaslHandshake, KIP-152
SaslAuthenticate, KIP-84 SCRAM): configuration, connections, fail-fast.

Part one needs no broker: config parsing, the Spark options, and
`BrokerConnection` against an in-process peer (`_SecurePeer`) that speaks
just enough Kafka (ApiVersions, SaslHandshake, SaslAuthenticate, with
kclient's own server-side SASL mechanisms) over TLS with ``trustme``
certificates. Part two (end to end against the bundled broker) is below.
"""

from __future__ import annotations

import logging
import ssl
import struct

import pytest
import trio
import trustme

from kclient.config import ConsumerConfig, ProducerConfig
from kclient.errors import (
    AuthenticationError,
    ConfigError,
    KafkaConnectionError,
    NotSupportedError,
    ProtocolError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from kclient.net.connection import BrokerConnection
from kclient.protocol import primitives as p
from kclient.protocol.connection import FrameBuffer, encode_response
from kclient.protocol.messages import ALL_APIS, API_VERSIONS, METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE
from kclient.protocol.messages.metadata import MetadataRequest
from kclient.security.sasl import PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, make_scram_credential, server_mechanism
from kclient.security.settings import ClientSecurity, SecurityProtocol

BROKERS = {"metadata.broker.list": "127.0.0.1:9092"}
GROUP = {"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"}
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}


# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------


@pytest.mark.unit
def test_producer_config_reads_kafka_security_names() -> None:
    c = ProducerConfig.from_properties(
        {
            **BROKERS,
            "security.protocol": "sasl_ssl",
            "ssl.cafile": "/ca.pem",
            "ssl.endpoint.identification.algorithm": "none",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": "alice",
            "sasl.password": " pass word ",
        }
    )
    assert c.security_protocol is SecurityProtocol.SASL_SSL
    assert c.ssl_ca_location == "/ca.pem"
    assert c.sasl_mechanism == SCRAM_SHA_512
    assert c.security == ClientSecurity(
        security_protocol="SASL_SSL",
        ssl_ca_location="/ca.pem",
        ssl_endpoint_identification_algorithm="",
        sasl_mechanism=SCRAM_SHA_512,
        sasl_username="alice",
        sasl_password=" pass word ",  # a password is kept as given
    )
    assert "pass word" not in repr(c)
    assert ProducerConfig.from_properties(c.as_properties()) == c


@pytest.mark.unit
def test_consumer_config_reads_kafka_security_names_and_jaas() -> None:
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="bob-secret";'
    c = ConsumerConfig.from_properties({**GROUP, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas})
    assert (c.security.sasl_username, c.security.sasl_password) == ("bob", "bob-secret")
    assert c.security.sasl_client().mechanism == SCRAM_SHA_256


@pytest.mark.unit
def test_plaintext_is_the_default_and_ignores_ssl_and_sasl_keys() -> None:
    c = ProducerConfig.from_properties({**BROKERS, "sasl.mechanism": "PLAIN", "ssl.ca.location": "/nowhere"})
    assert c.security == ClientSecurity()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_SSL"}, "sasl.mechanism"),
        ({**SASL, "sasl.mechanism": "MD5"}, "sasl.mechanism"),
        ({**SASL, "sasl.username": ""}, "sasl.username"),
        ({**SASL, "sasl.password": None}, "sasl.password"),
        ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"}, "ssl.endpoint.identification.algorithm"),
        ({"security.protocol": "SSL", "ssl.key.location": "/k.pem"}, "ssl.certificate.location"),
        ({**SASL, "sasl.password": 1234}, "sasl.password"),
        ({**SASL, "sasl.jaas.config": "nonsense", "sasl.username": None, "sasl.password": None}, "sasl.jaas.config"),
    ],
)
def test_bad_security_values_name_the_property(props: dict, named: str) -> None:
    for build in (lambda: ProducerConfig.from_properties({**BROKERS, **props}), lambda: ConsumerConfig.from_properties({**GROUP, **props})):
        with pytest.raises(ConfigError) as info:
            build()
        assert named in str(info.value)
        assert "1234" not in str(info.value)  # a password is never echoed


@pytest.mark.unit
def test_gssapi_is_not_supported() -> None:
    with pytest.raises(NotSupportedError, match="sasl.mechanism"):
        ProducerConfig.from_properties({**BROKERS, **SASL, "sasl.mechanism": "GSSAPI"})


@pytest.mark.unit
def test_a_client_fails_at_construction_on_an_unreadable_ca_file(tmp_path) -> None:
    from kclient import SimpleConsumer

    with pytest.raises(ConfigError, match="ssl.ca.location"):
        SimpleConsumer("127.0.0.1", 9092, config={"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "missing.pem")})


@pytest.mark.unit
def test_simple_consumer_keeps_the_classic_signature() -> None:
    from kclient.client.consumer.simple import TrioSimpleConsumer

    c = TrioSimpleConsumer("h", 1, 500, 1024, "cid")
    assert (c.host, c.port, c.so_timeout_ms, c.client_id) == ("h", 1, 500, "cid")
    assert c.security == ClientSecurity()
    c = TrioSimpleConsumer("h", 1, 500, 1024, "cid", config={**SASL, "unrelated.key": "x"})
    assert c.security.sasl_mechanism == PLAIN
    c = TrioSimpleConsumer("h", 1, config=ConsumerConfig.from_properties({**GROUP, **SASL}))
    assert c.security.sasl_username == "alice"
    with pytest.raises(ConfigError, match="sasl.username"):
        TrioSimpleConsumer("h", 1, config={**SASL, "sasl.username": ""})


@pytest.mark.unit
def test_zookeeper_broker_registration_gives_the_endpoint_of_the_protocol() -> None:
    from kclient.zk.paths import BrokerRegistration

    # as Kafka 2.x+ writes it with several listeners (host null when the
    # first listener is not PLAINTEXT)
    doc = (
        '{"listener_security_protocol_map":{"INTERNAL":"SASL_SSL","SSL":"SSL","PLAINTEXT":"PLAINTEXT"},'
        '"endpoints":["INTERNAL://b1:9095","SSL://b1:9093","PLAINTEXT://b1:9092"],"jmx_port":-1,"host":null,'
        '"timestamp":"1","port":-1,"version":4}'
    )
    reg = BrokerRegistration.from_json(1, doc)
    assert reg.endpoint_for("SSL") == ("b1", 9093)
    assert reg.endpoint_for("SASL_SSL") == ("b1", 9095)  # by listener_security_protocol_map
    assert reg.endpoint_for("PLAINTEXT") == ("b1", 9092)
    assert reg.endpoint_for("SASL_PLAINTEXT") is None
    old = BrokerRegistration.from_json(2, '{"host":"b2","port":9092,"version":1}')
    assert old.endpoint_for("PLAINTEXT") == ("b2", 9092) and old.endpoint_for("SSL") is None


# --------------------------------------------------------------------------
# Spark options
# --------------------------------------------------------------------------


@pytest.mark.unit
def test_spark_reader_passes_security_options_through() -> None:
    from kclient.spark.options import read_options

    opts = read_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9093",
            "subscribe": "t",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.ca.location": "/ca.pem",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.username": "alice",
            "kafka.sasl.password": "Secret",
        },
        streaming=False,
    )
    assert opts.security.security_protocol is SecurityProtocol.SASL_SSL
    assert (opts.security.ssl_ca_location, opts.security.sasl_password) == ("/ca.pem", "Secret")


@pytest.mark.unit
def test_spark_reader_maps_java_pem_stores_and_refuses_jks() -> None:
    from kclient.spark.options import read_options

    base = {"kafka.bootstrap.servers": "127.0.0.1:9093", "subscribe": "t", "kafka.security.protocol": "SSL"}
    opts = read_options(
        {
            **base,
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/ca.pem",
            "kafka.ssl.keystore.type": "PEM",
            "kafka.ssl.keystore.location": "/client.pem",
            "kafka.ssl.keystore.password": "kp",
        },
        streaming=False,
    )
    assert (opts.security.ssl_ca_location, opts.security.ssl_certificate_location, opts.security.ssl_key_password) == ("/ca.pem", "/client.pem", "kp")
    with pytest.raises(ConfigError, match="kafka.ssl.truststore.location.*kafka.ssl.ca.location"):
        read_options({**base, "kafka.ssl.truststore.location": "/t.jks"}, streaming=False)


@pytest.mark.unit
def test_spark_security_errors_name_the_kafka_option() -> None:
    from kclient.spark.options import read_options, write_options

    base = {"kafka.bootstrap.servers": "127.0.0.1:9093", "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"}
    with pytest.raises(ConfigError, match="option 'kafka.sasl.username'"):
        read_options({**base, "subscribe": "t"}, streaming=False)
    with pytest.raises(ConfigError, match="option 'kafka.sasl.username'"):
        write_options({**base, "topic": "t"})


@pytest.mark.unit
def test_spark_writer_hands_security_options_to_the_producer() -> None:
    from kclient.spark.options import write_options

    opts = write_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9093",
            "topic": "t",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.username": "alice",
            "kafka.sasl.password": "Secret",
            "kafka.ssl.endpoint.identification.algorithm": "",
        }
    )
    config = ProducerConfig.from_properties(dict(opts.producer_config))
    assert config.security.security_protocol is SecurityProtocol.SASL_SSL
    assert (config.security.sasl_username, config.security.sasl_password, config.security.check_hostname) == ("alice", "Secret", False)


# --------------------------------------------------------------------------
# BrokerConnection against an in-process TLS / SASL peer
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server_cert(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("localhost", "127.0.0.1")


class _SecurePeer:
    """Serves ApiVersions, SaslHandshake and SaslAuthenticate (and answers
    Metadata with no brokers) on 127.0.0.1, optionally over TLS; counts the
    connections it accepted."""

    def __init__(
        self,
        *,
        context: ssl.SSLContext | None = None,
        mechanisms: tuple[str, ...] = (),
        plain_users: dict[str, str] | None = None,
        scram_users: dict[str, str] | None = None,
    ) -> None:
        self.context = context
        self.mechanisms = mechanisms
        self.plain_users = plain_users or {}
        self.scram = {(m, u): make_scram_credential(m, pw) for u, pw in (scram_users or {}).items() for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
        self.connections = 0
        self.authenticated: list[str] = []
        self.port = 0

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            task_status.started(self.port)
            await trio.serve_listeners(self._handle, listeners, handler_nursery=nursery)

    async def _handle(self, stream: trio.abc.Stream) -> None:
        self.connections += 1
        if self.context is not None:
            stream = trio.SSLStream(stream, self.context, server_side=True)
        try:
            await self._serve(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ProtocolError):
            pass  # a TLS ClientHello on a plaintext peer is a bad frame size
        finally:
            await trio.aclose_forcefully(stream)

    async def _serve(self, stream: trio.abc.Stream) -> None:
        frames = FrameBuffer()
        sasl = None
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            frames.feed(data)
            while (frame := frames.next_frame()) is not None:
                api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
                _, pos = p.read_string(frame, 8)
                api = ALL_APIS[api_key]
                if api.flexible(version):
                    _, pos = p.read_tagged_fields(frame, pos)
                body = api.request(version).decode(memoryview(frame)[pos:])
                close = False
                if api_key == API_VERSIONS.key:
                    keys = [{"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version} for a in (API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE)]
                    out = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
                elif api_key == SASL_HANDSHAKE.key:
                    try:
                        sasl = server_mechanism(body["mechanism"], self.mechanisms, plain_users=self.plain_users, scram_lookup=lambda m, u: self.scram.get((m, u)))
                        out = {"error_code": 0, "mechanisms": list(self.mechanisms)}
                    except UnsupportedSaslMechanismError:
                        out = {"error_code": 33, "mechanisms": list(self.mechanisms)}
                elif api_key == SASL_AUTHENTICATE.key:
                    try:
                        token = sasl.evaluate_response(body["auth_bytes"])
                        out = {"error_code": 0, "error_message": None, "auth_bytes": token, "session_lifetime_ms": 0}
                        if sasl.is_complete:
                            self.authenticated.append(sasl.authorization_id)
                    except SaslAuthenticationFailedError as exc:
                        out = {"error_code": 58, "error_message": str(exc).split(": ", 1)[-1], "auth_bytes": b"", "session_lifetime_ms": 0}
                        close = True
                elif api_key == METADATA.key:
                    out = {"brokers": [], "topics": [], "cluster_id": "c", "controller_id": -1}
                else:
                    return
                await stream.send_all(encode_response(api, version, correlation_id, out))
                if close:
                    return


def _server_context(cert: trustme.LeafCert, *, client_ca: trustme.CA | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    if client_ca is not None:
        client_ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _ca_file(ca: trustme.CA, tmp_path, name: str = "ca.pem") -> str:
    path = tmp_path / name
    ca.cert_pem.write_to_path(str(path))
    return str(path)


async def _connect(nursery, port: int, props: dict, host: str = "127.0.0.1", **kwargs) -> BrokerConnection:
    security = ClientSecurity.from_properties(props)
    return await BrokerConnection.connect(nursery, host, port, security=security, connect_timeout_ms=5000, request_timeout_ms=5000, **kwargs)


async def test_tls_connection_negotiates_and_requests(ca, server_cert, tmp_path) -> None:
    peer = _SecurePeer(context=_server_context(server_cert))
    async with trio.open_nursery() as nursery:
        port = await nursery.start(peer.serve)
        for host in ("127.0.0.1", "localhost"):
            conn = await _connect(nursery, port, {"security.protocol": "SSL", "ssl.ca.location": _ca_file(ca, tmp_path)}, host=host)
            assert conn.uses_tls and conn.api_versions[SASL_HANDSHAKE.key] == (0, 1)
            body = await conn.request(METADATA, MetadataRequest(topics=[], allow_auto_topic_creation=False))
            assert body.cluster_id == "c"
            await conn.aclose()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("mechanism", [PLAIN, SCRAM_SHA_256, SCRAM_SHA_512])
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
async def test_sasl_authenticates(mechanism, protocol, ca, server_cert, tmp_path) -> None:
    context = _server_context(server_cert) if protocol == "SASL_SSL" else None
    peer = _SecurePeer(context=context, mechanisms=(PLAIN, SCRAM_SHA_256, SCRAM_SHA_512), plain_users={"alice": "alice-secret"}, scram_users={"alice": "alice-secret"})
    props = {"security.protocol": protocol, "ssl.ca.location": _ca_file(ca, tmp_path), "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": "alice-secret"}
    async with trio.open_nursery() as nursery:
        port = await nursery.start(peer.serve)
        conn = await _connect(nursery, port, props)
        assert conn.sasl_mechanism == mechanism and peer.authenticated == ["alice"]
        body = await conn.request(METADATA, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        assert body.cluster_id == "c"
        await conn.aclose()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("mechanism", [PLAIN, SCRAM_SHA_256])
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "alice-secret")])
async def test_bad_credentials_raise_sasl_authentication_failed(mechanism, user, password) -> None:
    peer = _SecurePeer(mechanisms=(PLAIN, SCRAM_SHA_256), plain_users={"alice": "alice-secret"}, scram_users={"alice": "alice-secret"})
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    async with trio.open_nursery() as nursery:
        port = await nursery.start(peer.serve)
        with pytest.raises(SaslAuthenticationFailedError, match="Authentication failed") as info:
            await _connect(nursery, port, props)
        assert isinstance(info.value, AuthenticationError) and not info.value.retriable
        assert info.value.code == 58 and repr(user) in str(info.value) and password not in str(info.value)
        assert peer.connections == 1
        nursery.cancel_scope.cancel()


async def test_a_mechanism_the_broker_does_not_enable_lists_the_enabled_ones() -> None:
    peer = _SecurePeer(mechanisms=(SCRAM_SHA_512,), scram_users={"alice": "x"})
    async with trio.open_nursery() as nursery:
        port = await nursery.start(peer.serve)
        with pytest.raises(UnsupportedSaslMechanismError, match="sasl.mechanism=PLAIN; it enables: SCRAM-SHA-512"):
            await _connect(nursery, port, SASL)
        nursery.cancel_scope.cancel()


async def test_untrusted_certificate_is_a_typed_error(server_cert, tmp_path) -> None:
    peer = _SecurePeer(context=_server_context(server_cert))
    other = trustme.CA()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(peer.serve)
        with pytest.raises(SslAuthenticationError, match="certificate not trusted.*ssl.ca.location") as info:
            await _connect(nursery, port, {"security.protocol": "SSL", "ssl.ca.location": _ca_file(other, tmp_path)})
        assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError) and not info.value.retriable
        nursery.cancel_scope.cancel()


async def test_host_name_mismatch_is_a_typed_error_unless_the_check_is_off(ca, tmp_path) -> None:
    cert = ca.issue_cert("broker.example.com")  # names neither 127.0.0.1 nor localhost
    peer = _SecurePeer(context=_server_context(cert))
    props = {"security.protocol": "SSL", "ssl.ca.location": _ca_file(ca, tmp_path)}
    async with trio.open_nursery() as nursery:
        port = await nursery.start(peer.serve)
        with pytest.raises(SslAuthenticationError, match="host name mismatch.*ssl.endpoint.identification.algorithm"):
            await _connect(nursery, port, props, host="localhost")
        conn = await _connect(nursery, port, {**props, "ssl.endpoint.identification.algorithm": ""}, host="localhost")
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_mutual_tls(ca, server_cert, tmp_path) -> None:
    client_ca = trustme.CA()
    client = client_ca.issue_cert("client@example.com")
    client.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "client.pem"))
    peer = _SecurePeer(context=_server_context(server_cert, client_ca=client_ca))
    props = {"security.protocol": "SSL", "ssl.ca.location": _ca_file(ca, tmp_path)}
    async with trio.open_nursery() as nursery:
        port = await nursery.start(peer.serve)
        conn = await _connect(nursery, port, {**props, "ssl.certificate.location": str(tmp_path / "client.pem")})
        assert conn.api_versions
        await conn.aclose()
        # without a certificate: refused, typed (TLS 1.3 reports it on the first read)
        with pytest.raises(SslAuthenticationError, match="certificate"):
            await _connect(nursery, port, props)
        nursery.cancel_scope.cancel()


async def test_tls_client_against_a_plaintext_peer_fails_within_the_connect_timeout() -> None:
    peer = _SecurePeer()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(peer.serve)
        with pytest.raises((KafkaConnectionError, SslAuthenticationError)):
            security = ClientSecurity.from_properties({"security.protocol": "SSL"})
            await BrokerConnection.connect(nursery, "127.0.0.1", port, security=security, connect_timeout_ms=500)
        nursery.cancel_scope.cancel()


async def test_cluster_does_not_retry_an_authentication_failure(caplog) -> None:
    from kclient.client.cluster import Cluster

    peer = _SecurePeer(mechanisms=(PLAIN,), plain_users={"alice": "alice-secret"})
    security = ClientSecurity.from_properties({**SASL, "sasl.password": "wrong"})
    async with trio.open_nursery() as nursery:
        port = await nursery.start(peer.serve)
        cluster = Cluster(nursery, [("127.0.0.1", port), ("localhost", port)], security=security, retry_backoff_ms=1)
        with caplog.at_level(logging.ERROR, logger="kclient.client.cluster"):
            with pytest.raises(SaslAuthenticationFailedError):
                await cluster.refresh_metadata(["t"])
            with pytest.raises(SaslAuthenticationFailedError):
                await cluster.partitions_for("t")
        # one attempt: neither the second bootstrap broker nor the retries connect again
        assert peer.connections == 1
        await cluster.aclose()
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------
# End to end: kclient clients against the bundled broker (TLS and SASL
# listeners, PEM keystores, PLAIN users from JAAS, SCRAM users in ZooKeeper)
# --------------------------------------------------------------------------

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";'
#: (listener name, security protocol); MTLS requires a client certificate,
#: BADNAME serves a certificate for another host name.
LISTENERS = (
    ("PLAINTEXT", "PLAINTEXT"),
    ("SSL", "SSL"),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT"),
    ("SASL_SSL", "SASL_SSL"),
    ("MTLS", "SSL"),
    ("BADNAME", "SSL"),
)


class _Pki:
    """Throwaway certificates (trustme) as PEM files: the broker's keystore
    (key + chain in one file, KIP-651), its CA, a client CA and a client
    certificate for mutual TLS, and a certificate naming another host."""

    def __init__(self, directory) -> None:
        self.ca = trustme.CA()
        self.client_ca = trustme.CA()
        self.dir = directory

        def write(name: str, blob) -> str:
            path = directory / name
            blob.write_to_path(str(path))
            return str(path)

        self.ca_file = write("ca.pem", self.ca.cert_pem)
        self.broker_keystore = write("broker.pem", self.ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem)
        self.other_host_keystore = write("other.pem", self.ca.issue_cert("broker.example.com").private_key_and_cert_chain_pem)
        self.client_ca_file = write("client-ca.pem", self.client_ca.cert_pem)
        self.client_keystore = write("client.pem", self.client_ca.issue_cert("client.example.com").private_key_and_cert_chain_pem)
        self.untrusted_ca_file = write("untrusted-ca.pem", trustme.CA().cert_pem)


def _add_scram_user(zk_connect: str, user: str, password: str, chroot: str = "") -> None:
    """What ``kclient configs --alter --add-config 'SCRAM-SHA-256=[password=...]'``
    writes (KIP-84): salted credentials in ZooKeeper ``/config/users/<user>``."""
    from kazoo.client import KazooClient

    from kclient.security.sasl import scram_user_config, scram_user_path

    data = scram_user_config({m: make_scram_credential(m, password) for m in (SCRAM_SHA_256, SCRAM_SHA_512)})
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    try:
        path = chroot + scram_user_path(user)
        if client.exists(path):
            client.set(path, data)
        else:
            client.create(path, data, makepath=True)
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> _Pki:
    return _Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure_broker(zookeeper, pki):
    """A bundled broker with a listener per security protocol, registered in
    the session ZooKeeper (SCRAM users live there)."""
    from kclient.testing import BrokerProcess

    chroot = f"/sec-client-{id(pki):x}"
    zk_connect = zookeeper.connect_string(chroot)
    _add_scram_user(zookeeper.connect, "alice", "alice-secret", chroot)
    props = {
        "zookeeper.connect": zk_connect,
        "num.partitions": 2,
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name, _ in LISTENERS),
        "listener.security.protocol.map": ",".join(f"{name}:{protocol}" for name, protocol in LISTENERS),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.broker_keystore,
        "listener.name.badname.ssl.keystore.location": pki.other_host_keystore,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": pki.client_ca_file,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": PLAIN_JAAS,
    }
    with BrokerProcess(properties=props) as proc:
        proc.zk_connect = zk_connect
        yield proc


def _require_broker_sasl(broker) -> None:
    """The bundled broker serves SaslHandshake on its SASL listener: a
    failure here is the broker's, named before the client tests run."""

    async def probe() -> bool:
        async with trio.open_nursery() as nursery:
            host, port = broker.bootstrap_for("SASL_PLAINTEXT").rsplit(":", 1)
            try:
                conn = await _connect(nursery, int(port), SASL, host=host)
            except KafkaConnectionError:
                return False
            finally:
                nursery.cancel_scope.cancel()
            await conn.aclose()
            return True

    assert trio.run(probe), "the bundled broker does not answer SaslHandshake on its SASL_PLAINTEXT listener"


def _client_props(broker, pki: _Pki, listener: str, mechanism: str | None = None, *, user: str = "alice", password: str = "alice-secret") -> dict:
    protocol = dict(LISTENERS)[listener]
    props: dict = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        props["ssl.ca.location"] = pki.ca_file
    if listener == "MTLS":
        props["ssl.certificate.location"] = pki.client_keystore
    if protocol.startswith("SASL"):
        props.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return props


class _Attempts(logging.Handler):
    """Counts the client's connection attempts (``connecting to`` records)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("connecting to "):
            self.count += 1


@pytest.fixture
def attempts():
    handler = _Attempts()
    logger = logging.getLogger("kclient.net.connection")
    old = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)


def _produce_and_consume(broker, props: dict, listener: str, topic: str, n: int = 20) -> None:
    from kclient import FetchRequest, Producer, ProducerData, SimpleConsumer

    host, port = broker.bootstrap_for(listener).rsplit(":", 1)
    producer = Producer({**props, "metadata.broker.list": broker.bootstrap_for(listener), "request.required.acks": 1, "partitioner.class": "kclient.DefaultPartitioner"})
    try:
        producer.send(ProducerData(topic, None, [f"m{i}".encode() for i in range(n)], partition=0))
    finally:
        producer.close()
    with SimpleConsumer(host, int(port), 10_000, 64 * 1024, "sec-test", config=props) as consumer:
        values = [bytes(m.message.payload) for m in consumer.fetch(FetchRequest(topic, 0, 0, 1 << 20))]
    assert values == [f"m{i}".encode() for i in range(n)]


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SSL", None),
        ("MTLS", None),
        ("SASL_PLAINTEXT", PLAIN),
        ("SASL_PLAINTEXT", SCRAM_SHA_256),
        ("SASL_PLAINTEXT", SCRAM_SHA_512),
        ("SASL_SSL", PLAIN),
        ("SASL_SSL", SCRAM_SHA_256),
        ("SASL_SSL", SCRAM_SHA_512),
    ],
)
def test_e2e_produce_and_consume(secure_broker, pki, topic, listener, mechanism) -> None:
    if mechanism is not None:
        _require_broker_sasl(secure_broker)
    _produce_and_consume(secure_broker, _client_props(secure_broker, pki, listener, mechanism), listener, topic)


def _fails_fast(broker, props: dict, listener: str, topic: str, expected: type, match: str, attempts: _Attempts) -> None:
    """The Producer and the SimpleConsumer raise ``expected`` at once: one
    connection attempt each, however many retries the config allows."""
    from kclient import FetchRequest, Producer, ProducerData, SimpleConsumer

    host, port = broker.bootstrap_for(listener).rsplit(":", 1)
    attempts.count = 0
    producer = Producer({**props, "metadata.broker.list": broker.bootstrap_for(listener), "message.send.max.retries": 5, "retry.backoff.ms": 50})
    try:
        with pytest.raises(expected, match=match):
            producer.send(ProducerData(topic, None, [b"x"]))
        with pytest.raises(expected, match=match):  # no new attempt: the cluster remembers
            producer.send(ProducerData(topic, None, [b"y"]))
    finally:
        producer.close()
    assert attempts.count == 1
    with SimpleConsumer(host, int(port), 5_000, 64 * 1024, "sec-test", config=props) as consumer:
        with pytest.raises(expected, match=match):
            consumer.fetch(FetchRequest(topic, 0, 0, 1024))
    assert attempts.count == 2


@pytest.mark.parametrize("mechanism", [PLAIN, SCRAM_SHA_256])
def test_e2e_wrong_password_fails_fast(secure_broker, pki, topic, attempts, mechanism) -> None:
    _require_broker_sasl(secure_broker)
    props = _client_props(secure_broker, pki, "SASL_SSL", mechanism, password="wrong")
    _fails_fast(secure_broker, props, "SASL_SSL", topic, SaslAuthenticationFailedError, "Authentication failed", attempts)


@pytest.mark.parametrize("mechanism", [PLAIN, SCRAM_SHA_512])
def test_e2e_unknown_user_fails_fast(secure_broker, pki, topic, attempts, mechanism) -> None:
    _require_broker_sasl(secure_broker)
    props = _client_props(secure_broker, pki, "SASL_PLAINTEXT", mechanism, user="mallory")
    _fails_fast(secure_broker, props, "SASL_PLAINTEXT", topic, SaslAuthenticationFailedError, "Authentication failed", attempts)


def test_e2e_untrusted_certificate_fails_fast(secure_broker, pki, topic, attempts) -> None:
    _require_broker_sasl(secure_broker)
    props = {**_client_props(secure_broker, pki, "SASL_SSL", PLAIN), "ssl.ca.location": pki.untrusted_ca_file}
    _fails_fast(secure_broker, props, "SASL_SSL", topic, SslAuthenticationError, "certificate not trusted", attempts)


def test_e2e_host_name_mismatch_fails_fast(secure_broker, pki, topic, attempts) -> None:
    props = _client_props(secure_broker, pki, "BADNAME")
    _fails_fast(secure_broker, props, "BADNAME", topic, SslAuthenticationError, "host name mismatch", attempts)


def test_e2e_host_name_check_can_be_turned_off(secure_broker, pki, topic) -> None:
    props = {**_client_props(secure_broker, pki, "BADNAME"), "ssl.endpoint.identification.algorithm": ""}
    _produce_and_consume(secure_broker, props, "BADNAME", topic, n=3)


def test_e2e_mutual_tls_without_a_certificate_fails_fast(secure_broker, pki, topic, attempts) -> None:
    props = {**_client_props(secure_broker, pki, "MTLS")}
    del props["ssl.certificate.location"]
    _fails_fast(secure_broker, props, "MTLS", topic, SslAuthenticationError, "certificate", attempts)


def _require_zk_endpoint(broker, listener: str) -> None:
    """The broker registers ``listener``'s endpoint in ZooKeeper
    (``/brokers/ids/<id>`` ``endpoints``, KIP-103), where the
    ConsumerConnector looks leaders up."""
    from kazoo.client import KazooClient

    from kclient.zk.paths import BrokerRegistration, broker_path

    zk = KazooClient(hosts=broker.zk_connect)
    zk.start(timeout=15)
    try:
        broker_id = int(zk.get_children("/brokers/ids")[0])
        reg = BrokerRegistration.from_json(broker_id, zk.get(broker_path(broker_id))[0])
    finally:
        zk.stop()
        zk.close()
    host, port = broker.bootstrap_for(listener).rsplit(":", 1)
    assert reg.endpoint_for(dict(LISTENERS)[listener]) == (host, int(port)), reg.endpoints


def test_e2e_consumer_connector_group_over_sasl_ssl(secure_broker, pki, zookeeper, topic) -> None:
    """Two ConsumerConnectors of one group (ZooKeeper) read a topic over SASL_SSL."""
    import threading

    from kclient import Producer, ProducerData
    from kclient.client.consumer.group.connector import ConsumerConnector
    from kclient.errors import ConsumerTimeoutError

    _require_broker_sasl(secure_broker)
    _require_zk_endpoint(secure_broker, "SASL_SSL")
    props = _client_props(secure_broker, pki, "SASL_SSL", SCRAM_SHA_256)
    sent = [f"v{i}".encode() for i in range(40)]
    producer = Producer({**props, "metadata.broker.list": secure_broker.bootstrap_for("SASL_SSL")})
    try:
        for i, value in enumerate(sent):
            producer.send(ProducerData(topic, None, [value], partition=i % 2))
    finally:
        producer.close()
    group = f"sec-group-{topic}"
    consumer_props = {
        **props,
        "group.id": group,
        "zookeeper.connect": secure_broker.zk_connect,
        "auto.offset.reset": "smallest",
        "consumer.timeout.ms": 3000,
        "rebalance.backoff.ms": 200,
        "rebalance.max.retries": 50,
        "auto.commit.enable": False,
    }
    got: list[bytes] = []
    lock = threading.Lock()

    def drain(stream) -> None:
        try:
            for m in stream:
                with lock:
                    got.append(bytes(m.message))
        except ConsumerTimeoutError:
            pass

    with ConsumerConnector(consumer_props) as first, ConsumerConnector(consumer_props) as second:
        streams = [first.create_message_streams({topic: 1})[topic][0], second.create_message_streams({topic: 1})[topic][0]]
        threads = [threading.Thread(target=drain, args=(s,)) for s in streams]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert sorted(got) == sorted(sent)


def test_e2e_consumer_connector_fails_fast_on_a_wrong_password(secure_broker, pki, topic, attempts) -> None:
    """The fetcher hands the typed error to the stream instead of retrying."""
    from kclient import Producer, ProducerData
    from kclient.client.consumer.group.connector import ConsumerConnector

    _require_broker_sasl(secure_broker)
    _require_zk_endpoint(secure_broker, "SASL_SSL")
    good = _client_props(secure_broker, pki, "SASL_SSL", PLAIN)
    producer = Producer({**good, "metadata.broker.list": secure_broker.bootstrap_for("SASL_SSL")})
    try:
        producer.send(ProducerData(topic, None, [b"x"], partition=0))
    finally:
        producer.close()
    consumer_props = {
        **good,
        "sasl.password": "wrong",
        "group.id": f"sec-bad-{topic}",
        "zookeeper.connect": secure_broker.zk_connect,
        "auto.offset.reset": "smallest",
        "consumer.timeout.ms": 20000,
        "auto.commit.enable": False,
        "refresh.leader.backoff.ms": 50,
    }
    attempts.count = 0
    with ConsumerConnector(consumer_props) as connector:
        stream = connector.create_message_streams({topic: 1})[topic][0]
        with pytest.raises(SaslAuthenticationFailedError):
            next(iter(stream))
    assert 1 <= attempts.count <= 2  # one fetcher per leader, one attempt each; no retry loop


def test_e2e_spark_writes_and_reads_over_sasl_ssl(secure_broker, pki, topic, spark) -> None:
    """The Spark data source passes kafka.security.protocol / kafka.ssl.* /
    kafka.sasl.* to its producers (writes) and to the driver's and tasks'
    connections (reads)."""
    _require_broker_sasl(secure_broker)
    props = _client_props(secure_broker, pki, "SASL_SSL", SCRAM_SHA_512)
    options = {"kafka.bootstrap.servers": secure_broker.bootstrap_for("SASL_SSL"), **{f"kafka.{k}": v for k, v in props.items()}}
    rows = [(f"k{i}", f"value-{i}") for i in range(50)]
    df = spark.createDataFrame(rows, "key string, value string")
    df.write.mode("append").format("kclient").options(**options).option("topic", topic).save()
    back = spark.read.format("kclient").options(**options).option("subscribe", topic).load()
    got = back.selectExpr("cast(key as string) k", "cast(value as string) v").collect()
    assert sorted((r.k, r.v) for r in got) == sorted(rows)
    # a wrong password fails the read at planning, typed (the driver's metadata request)
    bad = {**options, "kafka.sasl.password": "wrong"}
    with pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED|SaslAuthenticationFailedError"):
        spark.read.format("kclient").options(**bad).option("subscribe", topic).load().collect()
