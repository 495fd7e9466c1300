"""Client quotas on a real bundled broker in ZooKeeper mode (KIP-13,
KIP-55, KIP-219, KIP-546): a throttled producer and consumer move data at
their quota (bytes counted over the whole run, against a quota far below
what the machine does), see ``throttle_time_ms`` and lose nothing; a user
quota precedes a client-id quota; quotas set with kclient's AdminClient
and with ``kclient configs``. The broker measures over 2 windows of 1 s
(``quota.window.num``) so the first window's allowance is small next to
a 20-second run."""

from __future__ import annotations

import logging
import re
import time
import uuid

import pytest
from helpers.groups import poll_settings
from helpers.raw import SocketClient, produce_body
from helpers.records import partition_messages
from helpers.skips import require
from helpers.wait import retry

from kclient import AdminClient, Consumer
from kclient.cli import main as cli_main
from kclient.client.admin import NewTopic
from kclient.client.admin_quotas import ClientQuotaAlteration, ClientQuotaFilterComponent
from kclient.client.producer.producer import Producer, ProducerData
from kclient.protocol.messages import ALTER_CLIENT_QUOTAS, API_VERSIONS, DESCRIBE_CLIENT_QUOTAS, PRODUCE
from kclient.protocol.records.v2 import build_batch
from kclient.testing import BrokerProcess, java_unavailable_reason, kafka_tool
from kclient.zk.users import alter_user_config

QUOTA = 200_000  # bytes/s
RECORD = b"q" * 1000


@pytest.fixture(scope="module")
def quota_broker(zookeeper):
    chroot = f"{zookeeper.connect}/quotas-{uuid.uuid4().hex[:8]}"
    with BrokerProcess(properties={"zookeeper.connect": chroot, "broker.id": 0, "num.partitions": 1, "quota.window.num": 2}) as proc:
        proc.zk_chroot = chroot
        yield proc


@pytest.fixture(scope="module")
def admin(quota_broker):
    with AdminClient({"bootstrap.servers": quota_broker.bootstrap}) as client:
        yield client


def _throttles(caplog, api: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"throttled {api} for" in r.getMessage()]


def test_throttled_producer_sends_at_its_quota(quota_broker, admin, caplog):
    topic = f"quota-produce-{uuid.uuid4().hex[:6]}"
    admin.alter_client_quotas([ClientQuotaAlteration({"client-id": "quota-producer"}, {"producer_byte_rate": QUOTA})])
    assert admin.describe_client_quotas([ClientQuotaFilterComponent.of_entity("client-id", "quota-producer")]) == {
        (("client-id", "quota-producer"),): {"producer_byte_rate": float(QUOTA)}
    }
    count = 4000  # 4 MB: about 20 s at the quota
    props = {"metadata.broker.list": quota_broker.bootstrap, "client.id": "quota-producer", "producer.type": "async", "batch.num.messages": 10, "request.required.acks": 1}
    with caplog.at_level(logging.DEBUG, logger="kclient.net.connection"), Producer(props) as producer:
        start = time.monotonic()
        for _ in range(count):
            producer.send(ProducerData(topic, None, [RECORD]))
        producer.flush()
        elapsed = time.monotonic() - start
        stats = producer.statistics()
    # Kafka's producer metrics (produce-throttle-time-avg/max): the quota shows.
    assert stats.produce_throttle_time_max > 0 and 0 < stats.produce_throttle_time_avg <= stats.produce_throttle_time_max
    assert stats.metrics() == {"produce-throttle-time-avg": stats.produce_throttle_time_avg, "produce-throttle-time-max": stats.produce_throttle_time_max}
    rate = count * len(RECORD) / elapsed
    assert 0.9 * QUOTA <= rate <= 1.1 * QUOTA, f"{rate:.0f} bytes/s against a quota of {QUOTA}"
    assert _throttles(caplog, "Produce"), "the producer never saw throttle_time_ms"
    assert len(partition_messages(quota_broker, topic, 0)) == count


def test_throttled_consumer_fetches_at_its_quota(quota_broker, admin, caplog):
    topic = f"quota-fetch-{uuid.uuid4().hex[:6]}"
    count = 4000
    # Small batches: a Fetch returns at least one whole batch (KIP-74),
    # which must fit what the quota allows in a window.
    free = {"metadata.broker.list": quota_broker.bootstrap, "client.id": "quota-free", "producer.type": "async", "batch.num.messages": 10}
    with Producer(free) as producer:
        for i in range(count):
            producer.send(ProducerData(topic, None, [str(i).encode() + RECORD]))
        producer.flush()
        assert producer.statistics().metrics() == {"produce-throttle-time-avg": 0.0, "produce-throttle-time-max": 0.0}  # no quota
    admin.alter_client_quotas([ClientQuotaAlteration({"client-id": "quota-consumer"}, {"consumer_byte_rate": QUOTA})])
    settings = poll_settings(quota_broker.bootstrap, None, **{"client.id": "quota-consumer", "max.partition.fetch.bytes": 10_000})
    seen: set[bytes] = set()
    total = 0
    with caplog.at_level(logging.DEBUG, logger="kclient.net.connection"), Consumer(settings) as consumer:
        consumer.assign([(topic, 0)])
        start = time.monotonic()
        deadline = start + 120
        while len(seen) < count and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=500):
                seen.add(record.value)
                total += len(record.value)
        elapsed = time.monotonic() - start
        stats = consumer.statistics()
    assert stats.fetch_throttle_time_max > 0, stats.metrics()  # Kafka's fetch-throttle-time-max
    assert set(stats.metrics()) == {"fetch-throttle-time-avg", "fetch-throttle-time-max"}
    assert len(seen) == count
    rate = total / elapsed
    assert 0.9 * QUOTA <= rate <= 1.1 * QUOTA, f"{rate:.0f} bytes/s against a quota of {QUOTA}"
    assert _throttles(caplog, "Fetch"), "the consumer never saw throttle_time_ms"


def test_user_quota_precedes_client_id_quota_set_with_kclient_configs(quota_broker, admin, caplog, capsys):
    """KIP-55: /config/users/<user> comes before /config/clients/<client-id>;
    on a PLAINTEXT listener the user is ANONYMOUS."""
    topic = f"quota-precedence-{uuid.uuid4().hex[:6]}"
    base = ["configs", "--bootstrap-server", quota_broker.bootstrap]
    assert cli_main([*base, "--entity-type", "clients", "--entity-name", "quota-prec", "--alter", "--add-config", "producer_byte_rate=1000000000"]) == 0
    assert cli_main([*base, "--entity-type", "users", "--entity-name", "ANONYMOUS", "--alter", "--add-config", "producer_byte_rate=50000"]) == 0
    try:
        assert cli_main([*base, "--entity-type", "users", "--entity-name", "ANONYMOUS", "--describe"]) == 0
        assert "Quota configs for user-principal 'ANONYMOUS' are producer_byte_rate=50000.0" in capsys.readouterr().out
        props = {"metadata.broker.list": quota_broker.bootstrap, "client.id": "quota-prec", "producer.type": "async", "batch.num.messages": 10}
        with caplog.at_level(logging.DEBUG, logger="kclient.net.connection"), Producer(props) as producer:
            for _ in range(150):
                producer.send(ProducerData(topic, None, [RECORD]))
            producer.flush()
        assert _throttles(caplog, "Produce"), "the user's 50 kB/s quota did not apply"
    finally:
        assert cli_main([*base, "--entity-type", "users", "--entity-name", "ANONYMOUS", "--alter", "--delete-config", "producer_byte_rate"]) == 0
    assert admin.describe_client_quotas([ClientQuotaFilterComponent.of_entity("user", "ANONYMOUS")]) == {}
    assert len(partition_messages(quota_broker, topic, 0)) == 150


# Each command run by Kafka's kafka-configs and by kclient configs in turn,
# on the same broker: the same output.
_SAME_AS_KAFKA = [
    ["--entity-type", "clients", "--entity-name", "cmp-app", "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048"],
    ["--entity-type", "clients", "--entity-name", "cmp-app", "--describe"],
    ["--entity-type", "users", "--entity-name", "cmp-alice", "--entity-type", "clients", "--entity-name", "cmp-app", "--alter", "--add-config", "consumer_byte_rate=7.5"],
    ["--entity-type", "users", "--entity-name", "cmp-alice", "--entity-type", "clients", "--describe"],
    ["--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default", "--alter", "--add-config", "request_percentage=50"],
    ["--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default", "--describe"],
    ["--entity-type", "ips", "--entity-name", "10.9.8.7", "--alter", "--add-config", "connection_creation_rate=100"],
    ["--entity-type", "ips", "--entity-name", "10.9.8.7", "--describe"],
    ["--entity-type", "clients", "--entity-name", "cmp-app", "--alter", "--delete-config", "consumer_byte_rate"],
    ["--entity-type", "clients", "--entity-name", "cmp-app", "--describe"],
]


def test_kclient_configs_prints_what_kafka_configs_prints(quota_broker, capsys):
    require(java_unavailable_reason(), name="Java", needs="runs Kafka's kafka-configs")
    for args in _SAME_AS_KAFKA:
        theirs = kafka_tool("kafka-configs", "--bootstrap-server", quota_broker.bootstrap, *args, timeout=180).stdout
        capsys.readouterr()
        assert cli_main(["configs", "--bootstrap-server", quota_broker.bootstrap, *args]) == 0
        assert capsys.readouterr().out.strip() == theirs.strip(), args
    # and Kafka's reads what kclient wrote
    assert cli_main(["configs", "--bootstrap-server", quota_broker.bootstrap, "--entity-type", "clients", "--entity-name", "cmp-b", "--alter", "--add-config", "producer_byte_rate=99"]) == 0
    theirs = kafka_tool("kafka-configs", "--bootstrap-server", quota_broker.bootstrap, "--entity-type", "clients", "--entity-name", "cmp-b", "--describe", timeout=180).stdout
    assert theirs.strip() == "Quota configs for client-id 'cmp-b' are producer_byte_rate=99.0"


@pytest.mark.parametrize("version", [3, 7])
def test_produce_answers_carry_throttle_time_old_and_new_versions(quota_broker, admin, version):
    """Produce v3 (before KIP-219: the response is delayed) and v7 (the
    connection is muted after it): both answers carry throttle_time_ms and
    the connection serves the next request after the throttle."""
    client_id = f"quota-raw-v{version}"
    admin.alter_client_quotas([ClientQuotaAlteration({"client-id": client_id}, {"producer_byte_rate": 10_000})])
    topic = f"quota-raw-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])
    batch = build_batch([(None, b"r" * 20_000, int(time.time() * 1000))])
    with SocketClient(quota_broker.host, quota_broker.port, client_id=client_id, timeout=60) as c:
        throttles = []
        for _ in range(2):
            response = c.request(PRODUCE, version, produce_body(topic, 0, batch))
            assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
            throttles.append(response["throttle_time_ms"])
        assert throttles[-1] > 0, throttles
        assert c.request(API_VERSIONS, 0, {})["error_code"] == 0
    assert len(partition_messages(quota_broker, topic, 0)) == 2



def test_request_percentage_throttles_any_request(quota_broker, admin):
    """KIP-124: a client over its request_percentage (its requests' time
    on the broker's thread, here 0.01 % of a second; set for the user and
    client id, which comes before the default quotas other tests of the
    module leave, KIP-55) gets throttle_time_ms
    on any response (ApiVersions v2 here), and its connection is muted,
    then served again."""
    admin.alter_client_quotas([ClientQuotaAlteration({"user": "ANONYMOUS", "client-id": "quota-requests"}, {"request_percentage": 0.01})])
    try:
        with SocketClient(quota_broker.host, quota_broker.port, client_id="quota-requests", timeout=60) as c:
            # The quota reaches the broker through its /config/changes watch:
            # ask until a response carries a throttle.
            retry(lambda: c.request(API_VERSIONS, 2, {})["throttle_time_ms"], lambda t: t > 0, "a throttled ApiVersions answer", timeout=120, interval=0)
            assert c.request(API_VERSIONS, 2, {})["error_code"] == 0
        with SocketClient(quota_broker.host, quota_broker.port, client_id="quota-free", timeout=60) as c:
            assert [c.request(API_VERSIONS, 2, {})["throttle_time_ms"] for _ in range(50)] == [0] * 50
    finally:
        admin.alter_client_quotas([ClientQuotaAlteration({"user": "ANONYMOUS", "client-id": "quota-requests"}, {"request_percentage": None})])

def _alter_ip_quota(client: SocketClient, rate: float | None) -> None:
    op = {"key": "connection_creation_rate", "value": rate or 0.0, "remove": rate is None}
    body = client.request(ALTER_CLIENT_QUOTAS, 0, {"entries": [{"entity": [{"entity_type": "ip", "entity_name": "127.0.0.1"}], "ops": [op]}], "validate_only": False})
    assert body["entries"][0]["error_code"] == 0


def test_connections_over_the_ip_connection_creation_rate_are_closed(quota_broker):
    """KIP-612: new connections from an IP over its connection_creation_rate
    are closed (after the throttle time); the ones within it are served."""
    host, port = quota_broker.host, quota_broker.port
    with SocketClient(host, port, client_id="quota-ip-admin", timeout=30) as keeper:
        _alter_ip_quota(keeper, 2.0)
        try:
            served = closed = 0
            for _ in range(8):
                with SocketClient(host, port, client_id="quota-ip", timeout=30) as c:
                    try:
                        assert c.request(API_VERSIONS, 0, {})["error_code"] == 0
                        served += 1
                    except ConnectionError:
                        closed += 1
            assert served >= 1 and closed >= 1, (served, closed)
        finally:
            _alter_ip_quota(keeper, None)
    with SocketClient(host, port, client_id="quota-ip", timeout=30) as c:
        assert c.request(API_VERSIONS, 0, {})["error_code"] == 0


def _described(broker, user: str) -> dict:
    with SocketClient(broker.host, broker.port, client_id="quota-describe", timeout=30) as c:
        body = c.request(DESCRIBE_CLIENT_QUOTAS, 0, {"components": [{"entity_type": "user", "match_type": 0, "match": user}], "strict": True})
    return {v["key"]: v["value"] for entry in body["entries"] or [] for v in entry["values"]}


@pytest.fixture(scope="module")
def second_broker(quota_broker):
    with BrokerProcess(properties={"zookeeper.connect": quota_broker.zk_chroot, "broker.id": 1, "num.partitions": 1, "quota.window.num": 2}) as proc:
        yield proc


def test_a_quota_change_reaches_every_broker(quota_broker, second_broker, admin):
    """AlterClientQuotas on one broker, or a write to ZooKeeper as
    kafka-configs.sh --zookeeper does, is applied by every broker through
    its /config/changes notification."""
    admin.alter_client_quotas([ClientQuotaAlteration({"user": "notify-user"}, {"producer_byte_rate": 123.0})])
    retry(lambda: _described(second_broker, "notify-user"), lambda q: q == {"producer_byte_rate": 123.0}, "broker 1 to apply AlterClientQuotas")
    alter_user_config(quota_broker.zk_chroot, "notify-user", {"consumer_byte_rate": "456"}, ["producer_byte_rate"])
    for broker in (quota_broker, second_broker):
        retry(lambda b=broker: _described(b, "notify-user"), lambda q: q == {"consumer_byte_rate": 456.0}, "the ZooKeeper write to be applied")


@pytest.fixture(scope="module")
def rate_broker():
    with BrokerProcess(properties={"max.connection.creation.rate": 1, "quota.window.num": 2}, verbose=True) as proc:
        yield proc


def test_connections_over_the_listener_creation_rate_wait(rate_broker):
    """KIP-612: over max.connection.creation.rate (1/s here), a new
    connection waits for the throttle before it is served (8 at once: the
    second waits about 1 s, the last about 7 s; the broker logs each wait
    at DEBUG); all are served."""
    clients = [SocketClient(rate_broker.host, rate_broker.port, client_id=f"rate-{i}", timeout=60) for i in range(8)]
    try:
        for c in clients:
            assert c.request(API_VERSIONS, 0, {})["error_code"] == 0
    finally:
        for c in clients:
            c.close()
    waits = [line for line in rate_broker.output().splitlines() if "(max.connection.creation.rate)" in line]
    assert len(waits) >= 6, waits



@pytest.fixture(scope="module")
def listeners_rate_broker():
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connection.creation.rate": 1,
        "listener.name.internal.max.connection.creation.rate": 1000,
        "quota.window.num": 2,
    }
    with BrokerProcess(properties=props, verbose=True) as proc:
        yield proc


def _waited_ports(broker) -> set[int]:
    """Client ports of the connections the broker held back (its DEBUG line per wait)."""
    lines = [line for line in broker.output().splitlines() if "(max.connection.creation.rate)" in line]
    return {int(m.group(1)) for line in lines if (m := re.search(r"connection from [\d.]+:(\d+) waits", line))}


def test_the_broker_wide_creation_rate_spares_the_inter_broker_listener(listeners_rate_broker):
    """KIP-612 as Kafka's ConnectionQuotas: max.connection.creation.rate
    (1/s) is one budget for every client listener (a first connection on
    OTHER waits behind PLAINTEXT's burst), the inter-broker listener is not
    counted in it nor held back by it, and
    listener.name.internal.max.connection.creation.rate (1000/s) is that
    listener's own limit (a burst of 4 is served at once). Before, each
    listener had its own max.connection.creation.rate: OTHER's first
    connection went through and INTERNAL's burst waited."""
    broker = listeners_rate_broker

    def connect(listener: str, i: int) -> SocketClient:
        host, port = broker.bootstrap_for(listener).rsplit(":", 1)
        return SocketClient(host, int(port), client_id=f"{listener.lower()}-{i}", timeout=60)

    clients = [connect("PLAINTEXT", i) for i in range(3)] + [connect("OTHER", 0)]
    internal = [connect("INTERNAL", i) for i in range(4)]
    try:
        # A connection's wait is logged before it is served: once all are
        # answered, the log names every one that waited.
        for c in internal + clients:
            assert c.request(API_VERSIONS, 0, {})["error_code"] == 0
        waited = _waited_ports(broker)
        assert clients[3].sock.getsockname()[1] in waited  # OTHER shares the broker-wide budget
        assert not waited & {c.sock.getsockname()[1] for c in internal}
    finally:
        for c in clients + internal:
            c.close()
