"""User quotas on authenticated connections (KIP-55): the quota of
``/config/users/<user>`` applies to the SASL principal ``User:<user>``
and not to another user; kclient's producer and confluent-kafka's
(librdkafka's ``throttle_cb``) both see the broker's ``throttle_time_ms``.
A standalone broker keeps the quotas AlterClientQuotas sets in memory."""

from __future__ import annotations

import logging
import uuid

import pytest
from helpers.records import partition_messages

from kclient import AdminClient
from kclient.client.admin_quotas import ClientQuotaAlteration
from kclient.client.producer.producer import Producer, ProducerData
from kclient.errors import ClusterAuthorizationFailedError
from kclient.testing import BrokerProcess, client_properties, security_properties

ck = pytest.importorskip("confluent_kafka")

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
RECORD = b"s" * 1000


@pytest.fixture(scope="module")
def sasl_broker():
    props = security_properties(listeners=["PLAINTEXT", "SASL_PLAINTEXT"], mechanisms=["PLAIN"], plain_users=USERS)
    with BrokerProcess(properties={**props, "num.partitions": 1, "quota.window.num": 2}) as proc:
        with AdminClient({"bootstrap.servers": proc.bootstrap_for("PLAINTEXT")}) as admin:
            admin.alter_client_quotas([ClientQuotaAlteration({"user": "alice"}, {"producer_byte_rate": 20_000})])
        yield proc


def _sasl(broker, user: str) -> dict:
    props = client_properties("SASL_PLAINTEXT", mechanism="PLAIN", username=user, password=USERS[user])
    props["bootstrap.servers"] = broker.bootstrap_for("SASL_PLAINTEXT")
    return props


def _produce(broker, user: str, topic: str, count: int, caplog) -> list[str]:
    props = {**_sasl(broker, user), "client.id": f"quota-{user}", "producer.type": "async", "batch.num.messages": 10}
    props["metadata.broker.list"] = props.pop("bootstrap.servers")
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="kclient.net.connection"), Producer(props) as producer:
        for _ in range(count):
            producer.send(ProducerData(topic, None, [RECORD]))
        producer.flush()
    return [r.getMessage() for r in caplog.records if "throttled Produce" in r.getMessage()]


def test_the_user_quota_applies_to_that_principal_only(sasl_broker, caplog):
    topic = f"quota-sasl-{uuid.uuid4().hex[:6]}"
    assert _produce(sasl_broker, "bob", topic, 60, caplog) == []
    assert _produce(sasl_broker, "alice", topic, 60, caplog), "alice's 20 kB/s quota did not apply"
    assert len(partition_messages(sasl_broker, topic, 0)) == 120


def test_confluent_kafka_sees_the_throttle(sasl_broker):
    topic = f"quota-ck-{uuid.uuid4().hex[:6]}"
    throttles = []
    producer = ck.Producer({**_sasl(sasl_broker, "alice"), "client.id": "quota-ck", "batch.num.messages": 10, "throttle_cb": throttles.append})
    for _ in range(60):
        producer.produce(topic, RECORD)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(0)
    assert throttles and max(t.throttle_time for t in throttles) > 0
    assert len(partition_messages(sasl_broker, topic, 0)) == 60


@pytest.fixture(scope="module")
def authz_broker():
    users = {**USERS, "admin": "admin-secret"}
    props = security_properties(listeners=["SASL_PLAINTEXT"], mechanisms=["PLAIN"], plain_users=users)
    props.update({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"})
    with BrokerProcess(properties={**props, "num.partitions": 1}) as proc:
        yield proc, users


def _admin(broker, users, user: str) -> AdminClient:
    props = client_properties("SASL_PLAINTEXT", mechanism="PLAIN", username=user, password=users[user])
    return AdminClient({**props, "bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT")})


def test_client_quotas_need_the_cluster_config_operations(authz_broker):
    """With an authorizer, AlterClientQuotas needs ALTER_CONFIGS and
    DescribeClientQuotas DESCRIBE_CONFIGS on the cluster (as Kafka): bob
    has neither, the super user may."""
    broker, users = authz_broker
    change = [ClientQuotaAlteration({"user": "bob"}, {"producer_byte_rate": 1e9})]
    with _admin(broker, users, "bob") as bob:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.alter_client_quotas(change)
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_client_quotas()
    with _admin(broker, users, "admin") as admin:
        admin.alter_client_quotas(change)
        assert admin.describe_client_quotas() == {(("user", "bob"),): {"producer_byte_rate": 1e9}}
