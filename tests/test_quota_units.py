"""Client quotas without a broker: the KIP-546 messages byte for byte, the
windowed rate and its throttle time, KIP-55 precedence, the ZooKeeper
entity paths, and which versions the client waits out (KIP-219)."""

from __future__ import annotations

import warnings

import pytest

from kclient.broker.quotas.entities import entity_from_path, entity_path, make_entity
from kclient.broker.quotas.manager import QuotaManager
from kclient.broker.quotas.rate import SampledRate
from kclient.errors import ConfigError
from kclient.protocol.messages import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS
from kclient.protocol.messages.client_quotas import (
    AlterClientQuotasEntry,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterClientQuotasResult,
    ComponentData,
    DescribeClientQuotasEntry,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    OpData,
    ValueData,
)
from kclient.protocol.throttle import client_throttles

pytestmark = pytest.mark.unit


def _s(text: str) -> str:
    """int16 length + UTF-8 (a v0 string), hex."""
    return len(text).to_bytes(2, "big").hex() + text.encode().hex()


def test_describe_client_quotas_v0_bytes():
    body = DescribeClientQuotasRequest(components=[ComponentData(entity_type="user", match_type=0, match="alice")], strict=True)
    expected = "00000001" + _s("user") + "00" + _s("alice") + "01"
    assert DESCRIBE_CLIENT_QUOTAS.request(0).encode(body).hex() == expected
    assert DESCRIBE_CLIENT_QUOTAS.request(0).decode_message(bytes.fromhex(expected)) == body
    response = DescribeClientQuotasResponse(
        throttle_time_ms=7,
        entries=[DescribeClientQuotasEntry(entity=[EntityData(entity_type="client-id", entity_name=None)], values=[ValueData(key="producer_byte_rate", value=1024.0)])],
    )
    # float64 1024.0 = 0x4090000000000000; a null name is int16 -1.
    expected = "00000007" + "0000" + "ffff" + "00000001" + "00000001" + _s("client-id") + "ffff" + "00000001" + _s("producer_byte_rate") + "4090000000000000"
    assert DESCRIBE_CLIENT_QUOTAS.response(0).encode(response).hex() == expected
    assert DESCRIBE_CLIENT_QUOTAS.response(0).decode_message(bytes.fromhex(expected)) == response


def test_alter_client_quotas_v0_bytes():
    body = AlterClientQuotasRequest(
        entries=[AlterClientQuotasEntry(entity=[EntityData(entity_type="user", entity_name="bob")], ops=[OpData(key="consumer_byte_rate", value=0.5, remove=True)])],
        validate_only=False,
    )
    expected = "00000001" + "00000001" + _s("user") + _s("bob") + "00000001" + _s("consumer_byte_rate") + "3fe0000000000000" + "01" + "00"
    assert ALTER_CLIENT_QUOTAS.request(0).encode(body).hex() == expected
    assert ALTER_CLIENT_QUOTAS.request(0).decode_message(bytes.fromhex(expected)) == body
    response = AlterClientQuotasResponse(entries=[AlterClientQuotasResult(error_code=42, error_message="x", entity=[EntityData(entity_type="ip", entity_name="1.2.3.4")])])
    expected = "00000000" + "00000001" + "002a" + _s("x") + "00000001" + _s("ip") + _s("1.2.3.4")
    assert ALTER_CLIENT_QUOTAS.response(0).encode(response).hex() == expected


def test_v1_is_flexible():
    body = DescribeClientQuotasRequest(components=[ComponentData(entity_type="user", match_type=1, match=None)], strict=False)
    # compact array of 1 (0x02), compact string, int8, compact null (0x00), tags, bool, tags.
    expected = "02" + "05" + b"user".hex() + "01" + "00" + "00" + "00" + "00"
    assert DESCRIBE_CLIENT_QUOTAS.request(1).encode(body).hex() == expected


def test_rate_throttle_brings_the_rate_back_to_the_quota():
    rate = SampledRate(11, 1.0)
    rate.record(30_000, 0.0)
    # 30 000 bytes over the least window (10 s) is 3 000/s; quota 1 000/s.
    assert rate.rate(0.0) == pytest.approx(3000.0)
    delay = rate.throttle_time(1000.0, 0.0)
    assert delay == pytest.approx(20.0)
    assert rate.throttle_time(10_000.0, 0.0) == 0.0


def test_a_client_waiting_its_throttles_sends_at_its_quota():
    rate, now, sent, quota = SampledRate(11, 1.0), 0.0, 0, 100_000.0
    while now < 120.0:
        rate.record(10_000, now)
        sent += 10_000
        now += rate.throttle_time(quota, now) + 0.001
    # The first windows allow a burst (as Kafka's); over two minutes it fades.
    assert sent / now == pytest.approx(quota, rel=0.1)


def test_kip55_precedence():
    quotas = QuotaManager(11, 1.0, None, lambda: 0.0)
    quotas.quotas = {
        make_entity({"client-id": None}): {"producer_byte_rate": 8.0},
        make_entity({"client-id": "app"}): {"producer_byte_rate": 7.0},
        make_entity({"user": None}): {"producer_byte_rate": 6.0},
        make_entity({"user": "alice"}): {"producer_byte_rate": 3.0, "consumer_byte_rate": 30.0},
        make_entity({"user": "alice", "client-id": "app"}): {"producer_byte_rate": 1.0},
    }
    assert quotas.quota("producer_byte_rate", "alice", "app") == (1.0, ("alice", "app"))
    assert quotas.quota("producer_byte_rate", "alice", "other") == (3.0, ("alice", ""))
    assert quotas.quota("consumer_byte_rate", "alice", "app") == (30.0, ("alice", ""))
    assert quotas.quota("producer_byte_rate", "bob", "app") == (6.0, ("bob", ""))
    del quotas.quotas[make_entity({"user": None})]
    assert quotas.quota("producer_byte_rate", "bob", "app") == (7.0, ("", "app"))
    assert quotas.quota("producer_byte_rate", "bob", "x") == (8.0, ("", "x"))
    assert quotas.quota("consumer_byte_rate", "bob", "x") is None


def test_entity_paths_as_kafka_writes_them():
    entity = make_entity({"user": "CN=a b", "client-id": None})
    assert entity_path(entity) == "users/CN%3Da%20b/clients/<default>"
    assert entity_from_path(entity_path(entity)) == entity
    assert entity_path(make_entity({"ip": "10.0.0.1"})) == "ips/10.0.0.1"
    assert entity_from_path("topics/t") is None
    with pytest.raises(ConfigError):
        make_entity({"ip": "1.2.3.4", "user": "x"})


def test_kip219_client_side_versions():
    assert client_throttles(0, 6) and not client_throttles(0, 5)
    assert client_throttles(1, 8) and not client_throttles(1, 7)
    assert client_throttles(48, 0)


def _peer_build(peer_cls, values, **kwargs):
    """A kafka-python message (or nested struct) from the dict codec's values."""
    args = dict(kwargs)
    for name, field in peer_cls._struct.fields.items():
        if name in values:
            value = values[name]
            if field.is_struct_array() and value is not None:
                value = [_peer_build(field.data_class, item) for item in value]
            args[name] = value
    return peer_cls(**args)


_SAMPLES = {
    ("DescribeClientQuotas", "request"): DescribeClientQuotasRequest(
        components=[ComponentData(entity_type="user", match_type=0, match="alice"), ComponentData(entity_type="client-id", match_type=1, match=None)], strict=True
    ),
    ("DescribeClientQuotas", "response"): DescribeClientQuotasResponse(
        throttle_time_ms=5,
        entries=[DescribeClientQuotasEntry(entity=[EntityData(entity_type="user", entity_name=None)], values=[ValueData(key="consumer_byte_rate", value=1e6)])],
    ),
    ("AlterClientQuotas", "request"): AlterClientQuotasRequest(
        entries=[AlterClientQuotasEntry(entity=[EntityData(entity_type="ip", entity_name="10.0.0.1")], ops=[OpData(key="connection_creation_rate", value=3.5)])],
        validate_only=True,
    ),
    ("AlterClientQuotas", "response"): AlterClientQuotasResponse(
        throttle_time_ms=1, entries=[AlterClientQuotasResult(error_code=0, entity=[EntityData(entity_type="client-id", entity_name="app")])]
    ),
}


@pytest.mark.parametrize("api", [DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS], ids=lambda a: a.name)
@pytest.mark.parametrize("kind", ["request", "response"])
@pytest.mark.parametrize("version", [0, 1])
def test_kafka_python_reads_and_writes_the_same_bytes(api, kind, version):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka.protocol.admin as kp

    peer_cls = getattr(kp, f"{api.name}{kind.capitalize()}")
    codec = getattr(api, kind)(version)
    encoded = codec.encode(_SAMPLES[(api.name, kind)])
    values = codec.decode(encoded)
    assert peer_cls.decode(encoded, version=version).to_dict(json=False) == values
    assert _peer_build(peer_cls, values, version=version).encode(version=version) == encoded
    assert codec.decode_message(encoded) == _SAMPLES[(api.name, kind)]


# ------------------------------------------------------------ throttling a connection


def _throttled(version: int, acks_zero: bool = False):
    """Run apply_quota on a Produce over its quota under trio's mock clock:
    (the response, the session, the virtual seconds the call took)."""
    import trio
    import trio.testing

    from kclient.broker.quotas.throttle import ClientSession, apply_quota, client_session
    from kclient.protocol.connection import RequestHeader
    from kclient.protocol.messages.produce import ProduceResponse

    out = {}

    async def main():
        quotas = QuotaManager(11, 1.0, None, trio.current_time)
        quotas.quotas = {make_entity({"client-id": "app"}): {"producer_byte_rate": 1000.0}}
        session = ClientSession()
        client_session.set(session)
        header = RequestHeader(api_key=0, api_version=version, correlation_id=1, client_id="app", body_offset=0)
        start = trio.current_time()
        # 20 000 bytes over the least window (10 s): 2 000/s, twice the quota: 10 s.
        result = await apply_quota(quotas, header, None, None if acks_zero else ProduceResponse(), 20_000)
        out.update(result=result, session=session, took=trio.current_time() - start, start=start)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return out


def test_kip219_versions_answer_at_once_and_mute_the_connection():
    out = _throttled(8)
    assert out["result"].throttle_time_ms == 10_000
    assert out["took"] == 0
    assert out["session"].muted_until == pytest.approx(out["start"] + 10.0)
    assert out["session"].respond_after == 0


def test_older_versions_get_a_delayed_response():
    out = _throttled(5)
    assert out["result"].throttle_time_ms == 10_000
    assert out["took"] == 0  # the request's memory is given back first
    assert out["session"].respond_after == pytest.approx(out["start"] + 10.0)
    assert out["session"].muted_until == 0


def test_acks_zero_mutes_the_connection():
    out = _throttled(5, acks_zero=True)
    assert out["result"] is None
    assert out["session"].muted_until == pytest.approx(out["start"] + 10.0)


def test_connection_creation_rates():
    from kclient.broker.quotas.connections import ConnectionRateQuotas

    now = [100.0]
    quotas = QuotaManager(11, 1.0, None, lambda: now[0])
    rates = ConnectionRateQuotas(5, quotas, 11, 1.0, lambda: now[0])
    # 50 connections at once fit the first windows (5/s over at least 10 s).
    assert all(rates.listener_delay("PLAINTEXT") == 0 for _ in range(50))
    assert rates.listener_delay("PLAINTEXT") == pytest.approx(0.2)  # 51 / 10.2 s = 5/s
    assert rates.listener_delay("OTHER") > 0  # the broker-wide rate counts every listener
    assert rates.ip_throttle("10.0.0.1") == 0  # no IP quota
    # The inter-broker listener is exempt from the broker-wide rate (its own
    # limit defaults to it); a listener may set its own (KIP-612).
    protected = ConnectionRateQuotas(5, quotas, 11, 1.0, lambda: now[0], listener_rates={"OWN": 1}, protected_listener="INTERNAL")
    assert all(protected.listener_delay("PLAINTEXT") == 0 for _ in range(50))
    assert protected.listener_delay("PLAINTEXT") > 0
    assert protected.listener_delay("INTERNAL") == 0
    assert protected.listener_delay("OWN") > 0  # 1/s: 52 connections broker-wide, and its own rate
    own = ConnectionRateQuotas(99, quotas, 11, 1.0, lambda: now[0], listener_rates={"OWN": 1})
    own_delays = [own.listener_delay("OWN") for _ in range(12)]
    assert own_delays[:10] == [0.0] * 10 and own_delays[11] > 0  # 1/s on OWN, far under the broker's 99/s
    assert own.listener_delay("PLAINTEXT") == 0
    quotas.quotas = {make_entity({"ip": None}): {"connection_creation_rate": 1.0}}
    delays = [rates.ip_throttle("10.0.0.1") for _ in range(12)]
    assert delays[:10] == [0.0] * 10 and all(d > 0 for d in delays[10:])
    # a throttled connection is not counted: the delay does not grow
    assert delays[10] == delays[11]


def test_listener_connection_creation_rate_config():
    from kclient.config.broker import BrokerConfig

    config = BrokerConfig.from_properties({"listener.name.internal.max.connection.creation.rate": "7", "max.connection.creation.rate": 3})
    assert config.max_connection_creation_rate_for("INTERNAL") == 7
    assert config.max_connection_creation_rate_for("PLAINTEXT") == 3  # the broker's, as Kafka's prefixed configs
    with pytest.raises(ConfigError, match="listener.name.internal.max.connection.creation.rate"):
        BrokerConfig.from_properties({"listener.name.internal.max.connection.creation.rate": "-1"})


def test_request_time_meter_counts_task_steps_only():
    import trio

    from kclient.broker.quotas.request_time import RequestTimeMeter

    async def main():
        meter = RequestTimeMeter()
        trio.lowlevel.add_instrument(meter)
        first = meter.take()  # the step begun before the meter: not counted
        await trio.sleep(0.05)  # waiting is not run time
        second = meter.take()
        return first, second

    first, second = trio.run(main)
    assert first == 0.0
    assert 0.0 <= second < 0.05


def test_request_time_throttle_is_at_most_one_window():
    quotas = QuotaManager(11, 1.0, None, lambda: 0.0)
    quotas.quotas = {make_entity({"client-id": "app"}): {"request_percentage": 1.0}}
    assert quotas.record("request_percentage", "u", "app", 5000.0) == 1.0


def test_throttle_tracker_is_kafkas_windowed_avg_and_max():
    from kclient.net.throttle_stats import ThrottleTracker

    now = [0.0]
    tracker = ThrottleTracker(30.0, 2, lambda: now[0])
    assert (tracker.avg(0), tracker.max(0)) == (0.0, 0.0)  # no sample yet
    for ms in (0, 100, 200):
        tracker.record(0, ms)
    tracker.record(1, 50)
    assert (tracker.avg(0), tracker.max(0)) == (100.0, 200.0)  # zeros count in the average, as Kafka's sensor
    assert (tracker.avg(1), tracker.max(1)) == (50.0, 50.0)  # per API
    now[0] = 31.0
    tracker.record(0, 10)  # a second window; the first is still live
    assert tracker.max(0) == 200.0 and tracker.avg(0) == pytest.approx(310 / 4)
    now[0] = 65.0  # the first window is older than 2 x 30 s: gone
    assert (tracker.avg(0), tracker.max(0)) == (10.0, 10.0)
