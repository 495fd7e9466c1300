"""TLS certificates and security properties for tests of secured brokers.

Certificates come from ``trustme`` at run time (imported only when used;
nothing is committed to a repository). A test with one broker serving every
security protocol is a few lines::

    from kclient.testing import BrokerProcess, TestCertificates, client_properties, security_properties

    certs = TestCertificates(tmp_path)
    props = security_properties(certs, plain_users={"alice": "alice-secret"})
    with BrokerProcess(properties=props) as broker:
        conf = client_properties("SASL_SSL", certs, mechanism="PLAIN", username="alice", password="alice-secret")
        conf["bootstrap.servers"] = broker.bootstrap_for("SASL_SSL")
        ...  # confluent_kafka.Producer(conf), kclient's clients ...

The broker properties use Kafka's names (KIP-103 listeners, KIP-651 PEM
stores, KIP-43 / KIP-84 SASL), so they also fit a real Kafka broker.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from kclient.security.sasl import PLAIN_LOGIN_MODULE, SUPPORTED_MECHANISMS

__all__ = [
    "ALL_LISTENERS",
    "ClientCertificate",
    "TestCertificates",
    "client_properties",
    "kafka_python_options",
    "security_properties",
]

#: Every security protocol as its own listener, plus ``MTLS``: an SSL
#: listener that requires client certificates (mutual TLS).
ALL_LISTENERS: tuple[str, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "MTLS:SSL")


@attrs.frozen
class ClientCertificate:
    """A client certificate for mutual TLS.

    Attributes:
        certificate_location: PEM certificate (chain) file (``ssl.certificate.location``).
        key_location: PEM private key file (``ssl.key.location``).
        principal: The principal the broker sees (``User:CN=<name>``).
    """

    certificate_location: str
    key_location: str
    principal: str


class TestCertificates:
    """A test CA, a server certificate for ``127.0.0.1`` / ``localhost``
    as a Kafka PEM keystore (KIP-651: one file, key then chain), the CA as a
    PEM truststore, and client certificates for mutual TLS.

    Args:
        directory: Where the PEM files go; default a new temporary
            directory (removed by `cleanup`).
        hosts: Names and addresses the server certificate is valid for.

    Raises:
        ImportError: ``trustme`` is not installed (``pip install trustme``).
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, directory: str | os.PathLike[str] | None = None, *, hosts: Iterable[str] = ("127.0.0.1", "localhost")) -> None:
        import trustme

        self._tmp = None
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kclient-certs-")
            directory = self._tmp.name
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._trustme = trustme
        self.ca = trustme.CA()
        self.ca_location = str(self.directory / "ca.pem")
        self.ca.cert_pem.write_to_path(self.ca_location)
        server = self.ca.issue_cert(*hosts)
        self.keystore_location = str(self.directory / "server.keystore.pem")
        # Kafka's PEM keystore (KIP-651) takes the key only as PKCS#8
        # ("BEGIN PRIVATE KEY"); trustme writes EC keys as SEC1, which
        # Apache Kafka's broker refuses ("algid parse error").
        Path(self.keystore_location).write_bytes(
            _pkcs8(server.private_key_pem.bytes()) + b"".join(blob.bytes() for blob in server.cert_chain_pems)
        )
        self._clients: dict[str, ClientCertificate] = {}

    @property
    def truststore_location(self) -> str:
        """The CA as a PEM truststore (``ssl.truststore.location``): the
        broker trusts client certificates it signed."""
        return self.ca_location

    def client_certificate(self, name: str = "client") -> ClientCertificate:
        """A client certificate signed by this CA, for mutual TLS (made once per name).

        Args:
            name: Its common name.

        Returns:
            The files and the principal.
        """
        if name not in self._clients:
            cert = self.ca.issue_cert(f"{name}@kclient.test", common_name=name)
            cert_path = self.directory / f"client-{name}.pem"
            key_path = self.directory / f"client-{name}.key"
            cert_path.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
            cert.private_key_pem.write_to_path(str(key_path))
            self._clients[name] = ClientCertificate(str(cert_path), str(key_path), f"User:CN={name}")
        return self._clients[name]

    def untrusted_ca_location(self) -> str:
        """The certificate of another CA, which did not sign the broker's
        certificate: a client trusting only it must fail the handshake."""
        path = self.directory / "untrusted-ca.pem"
        if not path.exists():
            self._trustme.CA().cert_pem.write_to_path(str(path))
        return str(path)

    def untrusted_client_certificate(self, name: str = "mallory") -> ClientCertificate:
        """A client certificate from another CA: the broker must refuse it."""
        other = self._trustme.CA()
        cert = other.issue_cert(f"{name}@kclient.test", common_name=name)
        cert_path = self.directory / f"untrusted-{name}.pem"
        key_path = self.directory / f"untrusted-{name}.key"
        cert_path.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
        cert.private_key_pem.write_to_path(str(key_path))
        return ClientCertificate(str(cert_path), str(key_path), f"User:CN={name}")

    def cleanup(self) -> None:
        """Remove the temporary directory (if this object made it)."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> TestCertificates:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def _pkcs8(key_pem: bytes) -> bytes:
    """A PEM private key rewritten as unencrypted PKCS#8."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def security_properties(
    certificates: TestCertificates | None = None,
    *,
    listeners: Iterable[str] = ALL_LISTENERS,
    host: str = "127.0.0.1",
    mechanisms: Iterable[str] = SUPPORTED_MECHANISMS,
    plain_users: Mapping[str, str] | None = None,
    ssl_client_auth: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Broker properties (Kafka's names) for listeners of the given protocols.

    Each entry of ``listeners`` is ``NAME`` (a protocol's own name) or
    ``NAME:PROTOCOL``; each listener gets a free port (``:0``). A listener
    named ``MTLS`` requires client certificates unless ``ssl_client_auth``
    says otherwise.

    Args:
        certificates: Needed for SSL / SASL_SSL listeners.
        listeners: The listeners, first one first (`BrokerProcess.port`).
        host: The address every listener binds.
        mechanisms: ``sasl.enabled.mechanisms``.
        plain_users: PLAIN user -> password (JAAS ``user_<name>``); default
            ``{"alice": "alice-secret"}``.
        ssl_client_auth: Listener name -> ``none`` / ``requested`` /
            ``required`` (``listener.name.<l>.ssl.client.auth``).

    Returns:
        ``{property: value}`` for `kclient.testing.BrokerProcess`'s
        ``properties`` (add ``zookeeper.connect`` for SCRAM users).

    Raises:
        ValueError: a TLS listener without ``certificates``.
    """
    names: list[str] = []
    protocol_map: list[str] = []
    for entry in listeners:
        name, _, protocol = entry.partition(":")
        name, protocol = name.upper(), (protocol or name).upper()
        names.append(f"{name}://{host}:0")
        protocol_map.append(f"{name}:{protocol}")
    props: dict[str, str] = {
        "listeners": ",".join(names),
        "listener.security.protocol.map": ",".join(protocol_map),
    }
    protocols = {entry.partition(":")[0].upper(): (entry.partition(":")[2] or entry).upper() for entry in listeners}
    auth = {k.upper(): v for k, v in (ssl_client_auth or {}).items()}
    if "MTLS" in protocols and "MTLS" not in auth:
        auth["MTLS"] = "required"
    if any(p in ("SSL", "SASL_SSL") for p in protocols.values()):
        if certificates is None:
            raise ValueError("TLS listeners need certificates=TestCertificates(...)")
        props.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": certificates.keystore_location,
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": certificates.truststore_location,
            }
        )
    for name, value in auth.items():
        props[f"listener.name.{name.lower()}.ssl.client.auth"] = value
    if any(p in ("SASL_PLAINTEXT", "SASL_SSL") for p in protocols.values()):
        enabled = [m.upper() for m in mechanisms]
        props["sasl.enabled.mechanisms"] = ",".join(enabled)
        if "PLAIN" in enabled:
            users = {"alice": "alice-secret"} if plain_users is None else plain_users
            entries = " ".join(f"user_{user}={_jaas_quote(password)}" for user, password in users.items())
            jaas = f"{PLAIN_LOGIN_MODULE} required {entries};"
            for name, protocol in protocols.items():
                if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                    props[f"listener.name.{name.lower()}.plain.sasl.jaas.config"] = jaas
    return props


def client_properties(
    security_protocol: str,
    certificates: TestCertificates | None = None,
    *,
    mechanism: str | None = None,
    username: str | None = None,
    password: str | None = None,
    client_certificate: ClientCertificate | None = None,
    ca_location: str | None = None,
) -> dict[str, str]:
    """A client's security properties (librdkafka's and Kafka's names:
    confluent-kafka and kclient take them as they are).

    Args:
        security_protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
        certificates: The test CA (``ssl.ca.location``).
        mechanism: ``sasl.mechanism``.
        username: ``sasl.username``.
        password: ``sasl.password``.
        client_certificate: For mutual TLS.
        ca_location: Trust this CA file instead (e.g.
            `TestCertificates.untrusted_ca_location`).

    Returns:
        ``{property: value}``; add ``bootstrap.servers``.
    """
    protocol = security_protocol.upper()
    props = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        ca = ca_location or (certificates.ca_location if certificates is not None else None)
        if ca:
            props["ssl.ca.location"] = ca
        if client_certificate is not None:
            props["ssl.certificate.location"] = client_certificate.certificate_location
            props["ssl.key.location"] = client_certificate.key_location
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        props["sasl.mechanism"] = (mechanism or "PLAIN").upper()
        if username is not None:
            props["sasl.username"] = username
        if password is not None:
            props["sasl.password"] = password
    return props


def kafka_python_options(properties: Mapping[str, str]) -> dict[str, Any]:
    """The same settings as kafka-python keyword arguments.

    Args:
        properties: What `client_properties` returned.

    Returns:
        ``security_protocol``, ``ssl_cafile``, ``ssl_certfile``,
        ``ssl_keyfile``, ``sasl_mechanism``, ``sasl_plain_username``,
        ``sasl_plain_password`` as set.
    """
    names = {
        "security.protocol": "security_protocol",
        "ssl.ca.location": "ssl_cafile",
        "ssl.certificate.location": "ssl_certfile",
        "ssl.key.location": "ssl_keyfile",
        "sasl.mechanism": "sasl_mechanism",
        "sasl.username": "sasl_plain_username",
        "sasl.password": "sasl_plain_password",
        "bootstrap.servers": "bootstrap_servers",
    }
    return {names[k]: v for k, v in properties.items() if k in names}
