"""kclient's clients over TLS, SASL PLAIN and SCRAM-SHA-256/512 on every
target (users made with Kafka's own kafka-storage / kafka-configs on the
Kafka side, kclient's zk.users on the bundled side), and the errors a wrong
password or an untrusted CA give: the same class, code and words whatever
the broker."""

from __future__ import annotations

import pytest

from conformance.client_support import create_topic, unique_topic
from kclient import AdminClient, AuthenticationError, FetchRequest, Producer, ProducerData, SimpleConsumer
from kclient.errors import SaslAuthenticationFailedError, SslAuthenticationError

SECURED = [("SSL", None), ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512")]


def consumer_for(target, props: dict[str, str]) -> SimpleConsumer:
    host, port = props["bootstrap.servers"].rsplit(":", 1)
    config = {k: v for k, v in props.items() if k != "bootstrap.servers"}
    return SimpleConsumer(host, int(port), so_timeout_ms=10_000, buffer_size=1 << 16, client_id="conformance-security", config=config)


@pytest.mark.parametrize("listener,mechanism", SECURED)
def test_every_client_over_each_secured_listener(target, listener, mechanism):
    props = target.client_properties(listener, mechanism)
    topic = unique_topic("sec")
    with AdminClient(props) as admin:
        from kclient import NewTopic

        admin.create_topics([NewTopic(topic, 1, 1)])
    create_topic(target, unique_topic("sec-ready"), partitions=1)  # the PLAINTEXT side is up too
    with Producer(props | {"request.required.acks": -1, "compression.type": "lz4"}) as producer:
        [future] = producer.send_with_result(ProducerData(topic, b"k", [b"secret"], partition=0, headers=[("h", b"1")]))
        assert (future.result(timeout=30).partition, future.result().offset) == (0, 0)
    with consumer_for(target, props) as consumer:
        got = [(m.offset, m.message.key, m.message.payload, [(h.key, h.value) for h in m.message.headers]) for m in consumer.fetch(FetchRequest(topic, 0, 0))]
        assert got == [(0, b"k", b"secret", [("h", b"1")])]
        assert [p.partition for p in consumer.partitions_for(topic)] == [0]
    with AdminClient(props) as admin:
        assert topic in admin.list_topics()


def wrong_password(target, mechanism: str, user: str | None = None) -> dict[str, str]:
    props = target.client_properties("SASL_SSL", mechanism)
    props["sasl.password"] = "not-the-password"
    if user is not None:
        props["sasl.username"] = user
    return props


#: What each mechanism's failure says on every broker (Kafka's own texts:
#: PlainServerCallbackHandler / ScramSaslServer, via SaslAuthenticate's
#: error_message, KIP-152).
FAILED = {
    "PLAIN": "Authentication failed: Invalid username or password",
    "SCRAM-SHA-256": "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256",
    "SCRAM-SHA-512": "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", [None, "nobody"])
def test_wrong_password_is_the_same_clear_error(target, mechanism, user):
    props = wrong_password(target, mechanism, user)
    with pytest.raises(SaslAuthenticationFailedError) as raised:
        with consumer_for(target, props) as consumer:
            consumer.partitions_for("anything")
    assert raised.value.code == 58
    assert isinstance(raised.value, AuthenticationError)
    assert FAILED[mechanism] in str(raised.value)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_wrong_password_fails_producer_and_admin(target, mechanism):
    props = wrong_password(target, mechanism)
    with pytest.raises(SaslAuthenticationFailedError) as raised:
        with AdminClient(props | {"default.api.timeout.ms": 10_000}) as admin:
            admin.list_topics()
    assert FAILED[mechanism] in str(raised.value)
    with Producer(props | {"message.send.max.retries": 0, "request.required.acks": 1}) as producer:
        with pytest.raises(Exception) as failed:
            producer.send(ProducerData(unique_topic("sec-nope"), b"k", [b"v"]))
    cause = failed.value if isinstance(failed.value, SaslAuthenticationFailedError) else failed.value.__cause__
    assert type(cause) is SaslAuthenticationFailedError
    assert FAILED[mechanism] in str(cause)


@pytest.mark.parametrize("listener,mechanism", [("SSL", None), ("SASL_SSL", "PLAIN")])
def test_untrusted_ca_fails_clearly(target, listener, mechanism):
    props = target.client_properties(listener, mechanism)
    props["ssl.ca.location"] = target.certificates.untrusted_ca_location()
    with pytest.raises(SslAuthenticationError) as raised:
        with consumer_for(target, props) as consumer:
            consumer.partitions_for("anything")
    assert str(raised.value) == f"TLS handshake with {target.host} failed: certificate not trusted: unable to get local issuer certificate (check ssl.ca.location)"
    with pytest.raises(SslAuthenticationError):
        with AdminClient(props | {"default.api.timeout.ms": 10_000}) as admin:
            admin.list_topics()


def _error_of(target, props):
    try:
        with consumer_for(target, props | {"request.timeout.ms": "5000"}) as consumer:
            consumer.partitions_for("anything")
    except Exception as exc:
        return exc
    return None


def test_ssl_client_on_the_sasl_ssl_listener(target):
    """TLS without SASL on the SASL_SSL listener: every broker answers
    ApiVersions, then closes the connection at the first other request."""
    from kclient.errors import KafkaConnectionError

    props = target.client_properties("SSL")
    props["bootstrap.servers"] = target.bootstrap_for("SASL_SSL")
    error = _error_of(target, props)
    assert type(error) is KafkaConnectionError
    assert str(error) == f"{props['bootstrap.servers']} closed the connection"


def test_plaintext_client_on_the_ssl_listener(target):
    """Plain Kafka to a TLS listener: Apache Kafka answers with a TLS alert
    (Java's SSLEngine), the bundled broker closes the connection; kclient
    says the same thing for both."""
    from kclient.errors import KafkaConnectionError

    address = target.bootstrap_for("SSL")
    error = _error_of(target, {"bootstrap.servers": address})
    assert type(error) is KafkaConnectionError
    assert str(error).startswith(f"{address} ")
    assert str(error).endswith(": if its listener uses TLS, set security.protocol=SSL or SASL_SSL")
