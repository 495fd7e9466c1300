"""Brokers with an ACL authorizer for the ACL client tests (AdminClient,
``kclient acls``, the peers' admin clients), set up alike
on both sides: a PLAINTEXT listener whose principal (``User:ANONYMOUS``)
is a super user, as the admin tools use it, and a SASL_PLAINTEXT listener
with PLAIN users ``alice`` and ``bob`` whose rights the ACLs decide.

- `kafka_with_acls`: Apache Kafka 4.x (KRaft, ``StandardAuthorizer``);
- `bundled_with_acls`: the bundled broker in a ZooKeeper chroot, with
  Kafka's ZooKeeper-mode authorizer class name (``AclAuthorizer``);
- `sasl_client`: client properties of a SASL user (Kafka's names);
- `as_tuples`: bindings as plain tuples, for comparing the answers of
  different clients and brokers.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from helpers.skips import require
from helpers.wait import wait_for
from kclient.acl import AclBinding, AclBindingFilter
from kclient.client.admin import AdminClient
from kclient.testing import BrokerProcess, KafkaProcess, ZooKeeperProcess, java_unavailable_reason

#: SASL/PLAIN users of the SASL listener.
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
#: ``super.users``: the PLAINTEXT listener's principal and ``admin``.
SUPER_USERS = "User:ANONYMOUS;User:admin"
KAFKA_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ZK_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"

_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";"


@contextlib.contextmanager
def kafka_with_acls(**extra: Any) -> Iterator[KafkaProcess]:
    """Apache Kafka 4.x with ``StandardAuthorizer``, super users
    `SUPER_USERS` and a SASL_PLAINTEXT listener for `USERS`. Skips without
    Java 17+."""
    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka (Java 17+)")
    props = {"authorizer.class.name": KAFKA_AUTHORIZER, "super.users": SUPER_USERS, **extra}
    with KafkaProcess("4", listeners=("PLAINTEXT", "SASL_PLAINTEXT"), plain_users=USERS, properties=props) as proc:
        yield proc


def bundled_acl_properties(zookeeper: ZooKeeperProcess, **extra: Any) -> dict[str, Any]:
    """Properties of a bundled broker set up as `kafka_with_acls`, in a
    new ZooKeeper chroot of the session ZooKeeper."""
    return {
        "zookeeper.connect": zookeeper.connect_string(f"acls-{uuid.uuid4().hex[:8]}"),
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": _JAAS,
        "authorizer.class.name": ZK_AUTHORIZER,
        "super.users": SUPER_USERS,
        "num.partitions": 1,
        "offsets.topic.num.partitions": 1,
        "offsets.topic.replication.factor": 1,
        "group.initial.rebalance.delay.ms": 0,
        **extra,
    }


@contextlib.contextmanager
def bundled_with_acls(zookeeper: ZooKeeperProcess, **extra: Any) -> Iterator[BrokerProcess]:
    """The bundled broker with an ACL authorizer (`bundled_acl_properties`)."""
    with BrokerProcess(properties=bundled_acl_properties(zookeeper, **extra)) as proc:
        yield proc


def sasl_client(broker: BrokerProcess | KafkaProcess, user: str) -> dict[str, str]:
    """Client properties (Kafka's names) of ``user`` on the SASL listener."""
    return {
        "bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


Row = tuple[str, str, str, str, str, str, str]


def as_tuples(bindings: Iterable[AclBinding]) -> set[Row]:
    """``(resource type, name, pattern type, principal, host, operation,
    permission)`` with Kafka's enum names, one per binding."""
    return {
        (b.pattern.resource_type.name, b.pattern.name, b.pattern.pattern_type.name, b.entry.principal, b.entry.host, b.entry.operation.name, b.entry.permission_type.name)
        for b in bindings
    }


def settled(broker: BrokerProcess | KafkaProcess, prefix: str, expected: set[Row], timeout: float = 30.0) -> None:
    """Wait until the broker describes exactly ``expected`` among the
    bindings whose resource name starts with ``prefix``: a change is
    acknowledged once stored (in KRaft, once the controller committed it)
    and reaches the answering broker's authorizer moments later."""
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:

        def mine() -> set[Row]:
            return {row for row in as_tuples(admin.describe_acls(AclBindingFilter())) if row[1].startswith(prefix)}

        wait_for(lambda: mine() == expected, f"the ACLs of {prefix!r} to be {sorted(expected)}", timeout=timeout, detail=lambda: str(sorted(mine())))
