"""SCRAM credential administration (KIP-554, issue 30) against one bundled
broker with ZooKeeper, a PLAINTEXT listener (User:ANONYMOUS, a super user)
and a SASL_PLAINTEXT listener (PLAIN and both SCRAM mechanisms) under the
ACL authorizer: AlterUserScramCredentials / DescribeUserScramCredentials
through kclient's AdminClient, a user so created logging in with kclient
and confluent-kafka, Kafka's per-user errors, the quotas of the same
ZooKeeper node kept, and the cluster permissions Kafka asks for."""

from __future__ import annotations

import json
import uuid

import pytest
from helpers.raw import SocketClient

from kclient import AdminClient
from kclient.client.admin_quotas import ClientQuotaAlteration
from kclient.client.admin_scram import ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion
from kclient.errors import (
    ClusterAuthorizationFailedError,
    DuplicateResourceError,
    ResourceNotFoundError,
    SaslAuthenticationFailedError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from kclient.protocol.messages import ALTER_USER_SCRAM_CREDENTIALS
from kclient.testing import BrokerProcess, client_properties, security_properties
from kclient.zk.client import ZkClient

ck = pytest.importorskip("confluent_kafka")

PLAIN_USERS = {"admin": "admin-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def scram_zk(zookeeper) -> str:
    return zookeeper.connect_string("scram-admin")


@pytest.fixture(scope="module")
def broker(scram_zk):
    props = security_properties(listeners=["PLAINTEXT", "SASL_PLAINTEXT"], mechanisms=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], plain_users=PLAIN_USERS)
    props.update({"zookeeper.connect": scram_zk, "broker.id": 1554, "num.partitions": 1})
    props.update({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS;User:admin"})
    with BrokerProcess(properties=props) as proc:
        yield proc


@pytest.fixture(scope="module")
def admin(broker):
    with AdminClient({"bootstrap.servers": broker.bootstrap_for("PLAINTEXT")}) as client:
        yield client


@pytest.fixture(scope="module")
def zk(scram_zk):
    client = ZkClient(scram_zk, connection_timeout_ms=10000)
    client.start()
    yield client
    client.close()


def _user(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _sasl(broker, mechanism: str, user: str, password: str) -> dict:
    props = client_properties("SASL_PLAINTEXT", mechanism=mechanism, username=user, password=password)
    return {**props, "bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT")}


def test_alter_then_describe(admin):
    alice = _user("alice")
    done = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(alice, "SCRAM-SHA-256", "pw", iterations=8192), UserScramCredentialUpsertion(alice, "SCRAM-SHA-512", "pw")]
    )
    assert done == {alice: None}
    result = admin.describe_user_scram_credentials([alice])
    assert result.users() == [alice]
    assert result.description(alice).credential_infos == (ScramCredentialInfo("SCRAM-SHA-256", 8192), ScramCredentialInfo("SCRAM-SHA-512", 4096))
    assert alice in admin.describe_user_scram_credentials().descriptions
    assert alice in admin.describe_user_scram_credentials([]).descriptions


def test_a_user_created_through_the_api_logs_in_with_kclient_and_confluent_kafka(broker, admin):
    dave = _user("dave")
    assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(dave, "SCRAM-SHA-512", "dave-secret", iterations=4096)]) == {dave: None}
    with AdminClient(_sasl(broker, "SCRAM-SHA-512", dave, "dave-secret")) as client:
        client.list_topics()
    producer = ck.Producer(_sasl(broker, "SCRAM-SHA-512", dave, "dave-secret"))
    assert producer.list_topics(timeout=20).brokers
    with AdminClient({**_sasl(broker, "SCRAM-SHA-512", dave, "wrong"), "request.timeout.ms": 10000}) as client:
        with pytest.raises(SaslAuthenticationFailedError):
            client.list_topics()


def test_delete(admin, broker):
    erin = _user("erin")
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(erin, "SCRAM-SHA-256", "pw"), UserScramCredentialUpsertion(erin, "SCRAM-SHA-512", "pw")])
    assert admin.alter_user_scram_credentials([UserScramCredentialDeletion(erin, "SCRAM-SHA-256")]) == {erin: None}
    assert admin.describe_user_scram_credentials([erin]).description(erin).credential_infos == (ScramCredentialInfo("SCRAM-SHA-512", 4096),)
    with AdminClient({**_sasl(broker, "SCRAM-SHA-256", erin, "pw"), "request.timeout.ms": 10000}) as client:
        with pytest.raises(SaslAuthenticationFailedError):
            client.list_topics()
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(erin, "SCRAM-SHA-512")])
    result = admin.describe_user_scram_credentials([erin])
    assert result.users() == [] and isinstance(result.errors[erin], ResourceNotFoundError)
    assert erin not in admin.describe_user_scram_credentials().descriptions
    error = admin.alter_user_scram_credentials([UserScramCredentialDeletion(erin, "SCRAM-SHA-512")])[erin]
    assert isinstance(error, ResourceNotFoundError) and "does not exist" in str(error)


def test_errors(admin):
    nobody, frank = _user("nobody"), _user("frank")
    result = admin.describe_user_scram_credentials([nobody])
    assert isinstance(result.errors[nobody], ResourceNotFoundError)
    assert str(result.errors[nobody]).endswith(f"RESOURCE_NOT_FOUND: Attempt to describe a user credential that does not exist: {nobody}")
    with pytest.raises(ResourceNotFoundError):
        result.description(nobody)
    result = admin.describe_user_scram_credentials([nobody, nobody])
    assert isinstance(result.errors[nobody], DuplicateResourceError) and result.users() == [nobody]
    few = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(frank, "SCRAM-SHA-256", "pw", iterations=4095)])
    assert isinstance(few[frank], UnacceptableCredentialError) and str(few[frank]).endswith("Too few iterations")
    many = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(frank, "SCRAM-SHA-256", "pw", iterations=16385)])
    assert isinstance(many[frank], UnacceptableCredentialError) and str(many[frank]).endswith("Too many iterations")
    twice = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(frank, "SCRAM-SHA-256", "pw"), UserScramCredentialDeletion(frank, "SCRAM-SHA-256")])
    assert isinstance(twice[frank], DuplicateResourceError)
    unknown = admin.alter_user_scram_credentials([UserScramCredentialDeletion(frank, "SCRAM-SHA-1")])
    assert isinstance(unknown[frank], UnsupportedSaslMechanismError)
    with pytest.raises(UnsupportedSaslMechanismError):
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(frank, "SCRAM-SHA-1", "pw")])
    empty = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("", "SCRAM-SHA-256", "pw")])
    assert isinstance(empty[""], UnacceptableCredentialError)
    assert not admin.describe_user_scram_credentials([frank]).descriptions, "a failed request changed nothing"


def test_an_unknown_mechanism_byte_on_the_wire_is_refused(broker):
    """kclient's AdminClient refuses to salt for an unknown mechanism, so a
    raw request checks the broker's own answer (33)."""
    upsertion = {"name": "gina", "mechanism": 7, "iterations": 4096, "salt": b"s" * 16, "salted_password": b"p" * 32}
    host, port = broker.bootstrap_for("PLAINTEXT").rsplit(":", 1)
    with SocketClient(host, int(port), client_id="scram-raw", timeout=20) as client:
        response = client.request(ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [upsertion]})
    assert [(r["user"], r["error_code"], r["error_message"]) for r in response["results"]] == [("gina", 33, "Unknown SCRAM mechanism")]


def test_credentials_keep_the_quotas_of_the_same_node_and_notify(admin, zk):
    henry = _user("henry")
    admin.alter_client_quotas([ClientQuotaAlteration({"user": henry}, {"producer_byte_rate": 2048})])
    before = set(zk.get_children("/config/changes"))
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(henry, "SCRAM-SHA-256", "pw", iterations=8192)])
    config = json.loads(zk.get(f"/config/users/{henry}"))["config"]
    assert config["producer_byte_rate"] == "2048" and config["SCRAM-SHA-256"].endswith(",iterations=8192")
    notes = [json.loads(zk.get(f"/config/changes/{c}")) for c in set(zk.get_children("/config/changes")) - before]
    assert {"version": 2, "entity_path": f"users/{henry}"} in notes
    assert admin.describe_client_quotas()[(("user", henry),)] == {"producer_byte_rate": 2048.0}
    admin.alter_client_quotas([ClientQuotaAlteration({"user": henry}, {"producer_byte_rate": 4096})])
    assert admin.describe_user_scram_credentials([henry]).description(henry).credential_infos == (ScramCredentialInfo("SCRAM-SHA-256", 8192),)


def test_cluster_permissions_as_kafka(broker, admin):
    """Describe needs DESCRIBE and Alter ALTER on the cluster (KafkaApis): bob has neither."""
    ivy = _user("ivy")
    props = client_properties("SASL_PLAINTEXT", mechanism="PLAIN", username="bob", password=PLAIN_USERS["bob"])
    with AdminClient({**props, "bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT")}) as bob:
        refused = bob.alter_user_scram_credentials([UserScramCredentialUpsertion(ivy, "SCRAM-SHA-256", "pw")])
        assert isinstance(refused[ivy], ClusterAuthorizationFailedError)
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_user_scram_credentials()
    assert isinstance(admin.describe_user_scram_credentials([ivy]).errors[ivy], ResourceNotFoundError)
