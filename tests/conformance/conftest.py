"""The conformance suite: every scenario here runs against each broker the
same way — the bundled broker, Apache Kafka 4.x (KRaft) and Apache Kafka 3.9
(ZooKeeper mode) — through the parametrized `target` fixture.

Each broker is started once per session, with PLAINTEXT, SSL and SASL_SSL
listeners from one `TestCertificates`, the PLAIN user ``alice`` and the
SCRAM user ``bob`` (both SCRAM-SHA-256 and -512; created with Kafka's own
tools on the Kafka side, with kclient's ``zk.users`` on the bundled side).
Both the bundled broker and Kafka 3.9 are registered in the session
ZooKeeper (each under its own chroot), so ZooKeeper-coordinated
``ConsumerConnector`` scenarios run against them.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from helpers.skips import require
from helpers.wait import wait_for

from kclient.testing import BrokerProcess, KafkaProcess, TestCertificates, client_properties, java_unavailable_reason, security_properties
from kclient.tools.common import fetch_metadata

#: The brokers every conformance scenario runs against, in order.
BROKERS = ("bundled", "kafka-4", "kafka-3.9")
#: The users every target knows.
PLAIN_USERS = {"alice": "alice-secret"}
SCRAM_USERS = {"bob": "bob-secret"}
#: Client listeners of every target (PLAINTEXT first).
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
#: Partitions of auto-created topics on every target.
PARTITIONS = 2


@attrs.define
class Target:
    """One broker under test, whichever implementation it is.

    Attributes:
        name: ``"bundled"``, ``"kafka-4"`` or ``"kafka-3.9"``.
        process: The `BrokerProcess` or `KafkaProcess`.
        certificates: The CA and keystore every listener uses.
        zookeeper_connect: ``host:port/chroot`` the broker is registered
            in, or None (Kafka 4 has no ZooKeeper).
    """

    name: str
    process: Any
    certificates: TestCertificates
    zookeeper_connect: str | None

    @property
    def is_kafka(self) -> bool:
        """Apache Kafka rather than the bundled broker."""
        return self.name.startswith("kafka-")

    @property
    def release(self) -> str | None:
        """``"4"`` or ``"3.9"`` for Apache Kafka (its tools' release), None for the bundled broker."""
        return self.name.removeprefix("kafka-") if self.is_kafka else None

    @property
    def host(self) -> str:
        return self.process.host

    @property
    def port(self) -> int:
        """The PLAINTEXT port."""
        return int(self.bootstrap.rsplit(":", 1)[1])

    @property
    def bootstrap(self) -> str:
        """PLAINTEXT ``host:port``."""
        return self.process.bootstrap

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` of the ``PLAINTEXT``, ``SSL`` or ``SASL_SSL`` listener."""
        return self.process.bootstrap_for(listener)

    def client_properties(self, listener: str = "PLAINTEXT", mechanism: str | None = None) -> dict[str, str]:
        """Security properties plus ``bootstrap.servers`` for one listener;
        SASL logs in as ``alice`` (PLAIN) or ``bob`` (SCRAM)."""
        user: dict[str, str] = {}
        if listener.upper().startswith("SASL"):
            mechanism = (mechanism or "PLAIN").upper()
            name, password = next(iter((PLAIN_USERS if mechanism == "PLAIN" else SCRAM_USERS).items()))
            user = {"mechanism": mechanism, "username": name, "password": password}
        props = client_properties(listener, self.certificates, **user)
        props["bootstrap.servers"] = self.bootstrap_for(listener)
        return props

    def __repr__(self) -> str:
        return f"<Target {self.name} {self.bootstrap}>"


def require_java() -> None:
    """Skip without Java 17+ (fail in CI)."""
    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka (Java 17+)")


@pytest.fixture(scope="session")
def conformance_certificates(tmp_path_factory):
    with TestCertificates(tmp_path_factory.mktemp("conformance-certs")) as certificates:
        yield certificates


@pytest.fixture(scope="session")
def bundled_target(zookeeper, conformance_certificates):
    from kclient.zk.users import add_scram_user

    chroot = zookeeper.connect_string("conformance-bundled")
    for user, password in SCRAM_USERS.items():
        add_scram_user(chroot, user, {"SCRAM-SHA-256": password, "SCRAM-SHA-512": password})
    props = security_properties(conformance_certificates, listeners=LISTENERS, plain_users=PLAIN_USERS)
    props.update({"zookeeper.connect": chroot, "num.partitions": PARTITIONS, "broker.id": 1})
    with BrokerProcess(properties=props) as proc:
        # It listens before it has elected itself controller through
        # ZooKeeper: wait for Metadata to name one, as Kafka's start-up does.
        wait_for(
            lambda: fetch_metadata([(proc.host, proc.port)], [], timeout_ms=5000).controller_id >= 0,
            "the bundled broker to name a controller",
        )
        yield Target("bundled", proc, conformance_certificates, chroot)


@pytest.fixture(scope="session")
def kafka4_target(conformance_certificates):
    require_java()
    with KafkaProcess(
        "4",
        listeners=LISTENERS,
        certificates=conformance_certificates,
        plain_users=PLAIN_USERS,
        scram_users=SCRAM_USERS,
        properties={"num.partitions": PARTITIONS},
    ) as proc:
        yield Target("kafka-4", proc, conformance_certificates, None)


@pytest.fixture(scope="session")
def kafka39_target(zookeeper, conformance_certificates):
    require_java()
    chroot = zookeeper.connect_string("conformance-kafka-3.9")
    with KafkaProcess(
        "3.9",
        zookeeper=chroot,
        listeners=LISTENERS,
        certificates=conformance_certificates,
        plain_users=PLAIN_USERS,
        scram_users=SCRAM_USERS,
        properties={"num.partitions": PARTITIONS},
    ) as proc:
        yield Target("kafka-3.9", proc, conformance_certificates, chroot)


_FIXTURES = {"bundled": "bundled_target", "kafka-4": "kafka4_target", "kafka-3.9": "kafka39_target"}


@pytest.fixture(params=BROKERS)
def target(request) -> Target:
    """Each broker in turn (`BROKERS`); the test's id names it."""
    return request.getfixturevalue(_FIXTURES[request.param])


@pytest.fixture(params=[b for b in BROKERS if b != "kafka-4"])
def zk_target(request) -> Target:
    """The brokers registered in ZooKeeper (the bundled broker, Kafka 3.9):
    for the ZooKeeper-coordinated ConsumerConnector."""
    return request.getfixturevalue(_FIXTURES[request.param])
