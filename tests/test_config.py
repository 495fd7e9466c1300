"""Configs from Kafka property names, files and overrides; plug-in loading."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import attrs
import pytest

from kclient.client.producer.partitioner import DefaultPartitioner, Partitioner
from kclient.client.serde import DefaultEncoder, Encoder, StringDecoder, StringEncoder
from kclient.config import (
    BrokerConfig,
    ConsumerConfig,
    ProducerConfig,
    load_properties,
    parse_overrides,
)
from kclient.errors import ConfigError
from kclient.plugins import load_plugin, resolve_dotted

pytestmark = pytest.mark.unit

BROKERS = {"metadata.broker.list": "localhost:9092"}


def producer(**props: Any) -> ProducerConfig:
    return ProducerConfig.from_properties({**BROKERS, **props})


# -- ProducerConfig ------------------------------------------------------------


def test_producer_defaults() -> None:
    c = producer()
    assert c.metadata_broker_list == (("localhost", 9092),)
    assert c.producer_type == "sync" and not c.is_async
    assert c.request_required_acks == 1  # kclient's deliberate default
    assert c.request_timeout_ms == 10000
    assert c.serializer_class == "kclient.DefaultEncoder"
    assert c.key_serializer_class == "kclient.DefaultEncoder"
    assert c.partitioner_class == "kclient.DefaultPartitioner"
    assert c.compression_codec == "none" and c.compressed_topics == ()
    assert c.message_send_max_retries == 3 and c.retry_backoff_ms == 100
    assert c.topic_metadata_refresh_interval_ms == 600000
    assert c.client_id == ""
    assert c.queue_buffering_max_ms == 5  # Kafka 4.0's linger.ms (0.8: 5000)
    assert c.queue_buffering_max_messages == 100000  # issue 28: librdkafka's (0.8: 10000)
    assert c.queue_enqueue_timeout_ms == -1
    assert c.batch_num_messages == 10000  # issue 28: librdkafka's 10000 (0.8: 200)
    assert c.send_buffer_bytes == 102400
    assert c.event_handler is None and c.callback_handler is None
    assert c.enable_idempotence is False
    assert c.max_request_size == 1048576


def test_dotted_names_and_snake_case_build_the_same_config() -> None:
    props = {
        "metadata.broker.list": "h1:9092, h2:9093,[::1]:9094",
        "producer.type": "async",
        "request.required.acks": "-1",
        "request.timeout.ms": "2500",
        "compression.codec": "gzip",
        "compressed.topics": "a, b",
        "client.id": "demo",
        "batch.num.messages": "50",
        "enable.idempotence": "true",
    }
    from_props = ProducerConfig.from_properties(props)
    direct = ProducerConfig(
        metadata_broker_list=[("h1", 9092), "h2:9093", ("::1", 9094)],
        producer_type="async",
        request_required_acks=-1,
        request_timeout_ms=2500,
        compression_codec="gzip",
        compressed_topics=["a", "b"],
        client_id="demo",
        batch_num_messages=50,
        enable_idempotence=True,
    )
    assert from_props == direct
    assert direct.metadata_broker_list == (("h1", 9092), ("h2", 9093), ("::1", 9094))
    assert direct.is_async and direct.enable_idempotence


@pytest.mark.parametrize(
    ("alias", "canonical", "attribute", "value", "stored"),
    [
        ("queue.time", "queue.buffering.max.ms", "queue_buffering_max_ms", "250", 250),
        ("queue.size", "queue.buffering.max.messages", "queue_buffering_max_messages", "500", 500),
        ("queue.enqueueTimeout.ms", "queue.enqueue.timeout.ms", "queue_enqueue_timeout_ms", "0", 0),
        ("acks", "request.required.acks", "request_required_acks", "all", -1),
        ("compression.type", "compression.codec", "compression_codec", "lz4", "lz4"),
    ],
)
def test_07_and_new_client_aliases_map_to_the_same_field(
    alias: str, canonical: str, attribute: str, value: str, stored: Any
) -> None:
    via_alias = producer(**{alias: value})
    via_name = producer(**{canonical: value})
    assert getattr(via_alias, attribute) == getattr(via_name, attribute) == stored
    assert via_alias == via_name


def test_bootstrap_servers_is_an_alias() -> None:
    c = ProducerConfig.from_properties({"bootstrap.servers": "k:1"})
    assert c.metadata_broker_list == (("k", 1),)


def test_canonical_name_wins_over_alias(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        c = producer(**{"queue.time": "1", "queue.buffering.max.ms": "2"})
    assert c.queue_buffering_max_ms == 2
    assert "queue.time" in caplog.text


def test_linger_names_rank_queue_buffering_max_ms_then_queue_time_then_linger_ms(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 27: the linger may be given as ``queue.buffering.max.ms``,
    0.7's ``queue.time`` or ``linger.ms``; given twice with different
    values, the first of those names wins and the other is logged."""
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        assert producer(**{"linger.ms": "7", "queue.time": "8"}).queue_buffering_max_ms == 8
        assert producer(**{"linger.ms": "7", "queue.buffering.max.ms": "9"}).queue_buffering_max_ms == 9
    assert "linger.ms='7' is ignored in favour of queue.time='8'" in caplog.text
    assert "linger.ms='7' is ignored in favour of queue.buffering.max.ms='9'" in caplog.text
    caplog.clear()
    assert producer(**{"linger.ms": "7", "queue.buffering.max.ms": "7"}).queue_buffering_max_ms == 7
    assert caplog.text == ""  # the same value twice: nothing to say


def test_typed_values_are_accepted() -> None:
    c = producer(**{"request.required.acks": 0, "enable.idempotence": False, "compression.codec": 2})
    assert c.request_required_acks == 0 and c.compression_codec == "snappy"
    assert producer(**{"compression.codec": "4"}).compression_codec == "zstd"
    assert producer(**{"compression.codec": "GZIP"}).compression_codec == "gzip"


def test_key_serializer_defaults_to_serializer() -> None:
    c = producer(**{"serializer.class": "kclient.StringEncoder"})
    assert c.key_serializer_class == "kclient.StringEncoder"
    c = producer(**{"serializer.class": "kclient.StringEncoder", "key.serializer.class": "kclient.DefaultEncoder"})
    assert c.key_serializer_class == "kclient.DefaultEncoder"
    assert ProducerConfig(metadata_broker_list="h:1", key_serializer_class=None).key_serializer_class == (
        "kclient.DefaultEncoder"
    )


def test_plugins_are_stored_as_given() -> None:
    enc = StringEncoder()
    c = producer(**{"serializer.class": enc, "partitioner.class": DefaultPartitioner})
    assert c.serializer_class is enc and c.key_serializer_class is enc
    assert c.partitioner_class is DefaultPartitioner


def test_codec_for_topic() -> None:
    assert producer().codec_for("t") == "none"
    assert producer(**{"compression.codec": "gzip"}).codec_for("t") == "gzip"
    c = producer(**{"compression.codec": "gzip", "compressed.topics": "a,b"})
    assert (c.codec_for("a"), c.codec_for("x")) == ("gzip", "none")


def test_round_trip_and_changes() -> None:
    c = producer(**{"producer.type": "async", "queue.size": "1000"})
    assert ProducerConfig.from_properties(c.as_properties()) == c
    assert ProducerConfig.from_properties(c) is c
    d = c.with_properties({"queue.time": "5"})
    assert d.queue_buffering_max_ms == 5 and d.queue_buffering_max_messages == 1000
    assert attrs.evolve(c, producer_type="sync") == c.with_properties({"producer.type": "sync"})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        c.client_id = "x"  # type: ignore[misc]


def test_table_knows_kafka_names() -> None:
    table = ProducerConfig.properties()
    assert table["queue_buffering_max_ms"].name == "queue.buffering.max.ms"
    assert "queue.time" in table["queue_buffering_max_ms"].aliases
    assert table["metadata_broker_list"].aliases == ("bootstrap.servers",)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("producer.type", "asynchronous"),  # bad enum
        ("producer.type", 1),  # wrong type
        ("request.required.acks", "2"),  # out of range
        ("request.required.acks", "one"),  # not a number
        ("request.timeout.ms", "0"),
        ("request.timeout.ms", "10s"),
        ("request.timeout.ms", 1.5),
        ("request.timeout.ms", True),
        ("compression.codec", "brotli"),
        ("compression.codec", 7),
        ("message.send.max.retries", "-1"),
        ("queue.enqueue.timeout.ms", "-2"),
        ("queue.enqueueTimeout.ms", "-5"),  # an alias: both spellings are named
        ("queue.buffering.max.messages", "0"),
        ("batch.num.messages", "0"),
        ("enable.idempotence", "yes"),
        ("serializer.class", "not a path!"),
        ("serializer.class", ""),
        ("partitioner.class", None),
        ("serializer.encoding", "no-such-codec"),
        ("metadata.broker.list", "localhost"),
        ("metadata.broker.list", "localhost:http"),
        ("metadata.broker.list", "localhost:70000"),
        ("metadata.broker.list", ""),
        ("client.id", 42),
    ],
)
def test_bad_producer_value_names_key_and_value(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_properties({**BROKERS, key: value})
    message = str(info.value)
    canonical = next(
        s.name for s in ProducerConfig.properties().values() if key == s.name or key in s.aliases
    )
    assert canonical in message and key in message
    if value not in ("", None):
        assert str(value) in message or repr(value) in message


def test_bad_value_through_snake_case_constructor() -> None:
    with pytest.raises(ConfigError, match="queue.buffering.max.ms"):
        ProducerConfig(metadata_broker_list="h:1", queue_buffering_max_ms=-3)


def test_missing_required_property() -> None:
    with pytest.raises(ConfigError, match="metadata.broker.list"):
        ProducerConfig.from_properties({})
    with pytest.raises(ConfigError, match="metadata.broker.list"):
        ProducerConfig()


def test_cross_field_checks() -> None:
    with pytest.raises(ConfigError, match="batch.num.messages"):
        producer(**{"producer.type": "async", "batch.num.messages": "500", "queue.buffering.max.messages": "100"})
    # Only async mode queues, so sync mode does not care.
    producer(**{"batch.num.messages": "500", "queue.buffering.max.messages": "100"})
    with pytest.raises(ConfigError, match="request.required.acks"):
        producer(**{"enable.idempotence": "true"})
    assert producer(**{"enable.idempotence": "true", "acks": "all"}).enable_idempotence


def test_unknown_key_raises_by_default() -> None:
    """Issue 27: a typo is an error (Kafka 0.8 only logged it), for every
    config class and every way of building one."""
    with pytest.raises(ConfigError, match=r"'auto\.offset\.rest' is not a known config for ConsumerConfig; did you mean 'auto\.offset\.reset'\?"):
        ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "zk:1", "auto.offset.rest": "earliest"})
    with pytest.raises(ConfigError, match="did you mean 'linger.ms'"):
        producer(**{"linger.msx": "5"})
    with pytest.raises(ConfigError, match="'prot' is not a known config for BrokerConfig; did you mean 'port'"):
        BrokerConfig.from_properties({"prot": "1"})
    from kclient.config import AdminConfig

    with pytest.raises(ConfigError, match="'request.timeout' is not a known config for AdminConfig; did you mean 'request.timeout.ms'"):
        AdminConfig.from_properties({"bootstrap.servers": "a:1", "request.timeout": "5"})
    with pytest.raises(ConfigError, match="no.such"):
        producer().with_properties({"no.such": 1})
    with pytest.raises(ConfigError, match="no.such"):
        BrokerConfig.from_properties({}).with_properties({"no.such": 1})


def test_bad_auto_offset_reset_names_earliest_and_latest() -> None:
    with pytest.raises(ConfigError, match="auto.offset.reset") as info:
        ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "zk:1", "auto.offset.reset": "beginning"})
    assert "earliest" in str(info.value) and "latest" in str(info.value)
    assert "smallest" in str(info.value) and "largest" in str(info.value)  # the 0.8 names still work


def test_unknown_key_warns_and_is_ignored_with_strict_false(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        c = ProducerConfig.from_properties({**BROKERS, "no.such.setting": "1"}, strict=False)
    assert c == producer()
    assert "'no.such.setting' is not a known config" in caplog.text
    assert caplog.records[0].levelno == logging.WARNING


def test_non_mapping_source() -> None:
    with pytest.raises(ConfigError):
        ProducerConfig.from_properties(42)  # type: ignore[arg-type]


# -- files and overrides ---------------------------------------------------------

SERVER_PROPERTIES = """\
# A server.properties as Kafka ships it, trimmed.
broker.id=3
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
listeners=PLAINTEXT://127.0.0.1:19092
log.dirs={logs}/a,{logs}/b
num.partitions = 4
log.segment.bytes: 1048576
auto.create.topics.enable=false
message.max.bytes=2000000
socket.request.max.bytes=\\
  209715200
zookeeper.connect=localhost:2181
"""


@pytest.fixture
def server_properties(tmp_path: Path) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(SERVER_PROPERTIES.format(logs=tmp_path / "logs"), encoding="utf-8")
    return path


def test_broker_from_file(server_properties: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        c = BrokerConfig.from_file(server_properties)
    assert caplog.text == ""  # stock Kafka keys are known (and ignored) quietly
    assert c.broker_id == 3
    assert c.listeners == (("PLAINTEXT", "127.0.0.1", 19092),)
    assert (c.listen_host, c.listen_port) == ("127.0.0.1", 19092)
    assert (c.advertised_host, c.advertised_port) == ("127.0.0.1", 19092)
    assert c.log_dirs == (str(tmp_path / "logs" / "a"), str(tmp_path / "logs" / "b"))
    assert c.num_partitions == 4
    assert c.log_segment_bytes == 1048576
    assert c.auto_create_topics_enable is False
    assert c.message_max_bytes == 2000000
    assert c.socket_request_max_bytes == 209715200
    assert c.zookeeper_connect == "localhost:2181"


def test_broker_overrides_like_kafka_server_start(server_properties: Path) -> None:
    c = BrokerConfig.from_file(
        server_properties,
        ["broker.id=7", "listeners=PLAINTEXT://:0", "num.partitions = 8", "log.dirs=/data/x=y"],
    )
    assert c.broker_id == 7
    assert (c.listen_host, c.listen_port) == ("0.0.0.0", 0)
    assert (c.advertised_host, c.advertised_port) == ("127.0.0.1", 0)
    assert c.num_partitions == 8
    assert c.log_dirs == ("/data/x=y",)  # split on the first '=' only
    assert c.log_segment_bytes == 1048576  # untouched by overrides


def test_bad_overrides_and_files(server_properties: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="key=value"):
        BrokerConfig.from_file(server_properties, ["broker.id"])
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["=3"])
    with pytest.raises(ConfigError, match="num.partitions"):
        BrokerConfig.from_file(server_properties, ["num.partitions=0"])
    with pytest.raises(ConfigError, match="missing.properties"):
        BrokerConfig.from_file(tmp_path / "missing.properties")
    assert parse_overrides(["a=1", "a=2", " b = x "]) == {"a": "2", "b": "x"}


def test_load_properties_handles_java_syntax(tmp_path: Path) -> None:
    path = tmp_path / "p.properties"
    path.write_bytes(b"! comment\na=1\nb : two\nc three\nd=caf\\u00e9\ne=x\\\n   y\n")
    assert load_properties(path) == {"a": "1", "b": "two", "c": "three", "d": "caf\u00e9", "e": "xy"}
    latin = tmp_path / "latin.properties"
    latin.write_bytes("name=caf\u00e9\n".encode("iso-8859-1"))
    assert load_properties(latin) == {"name": "caf\u00e9"}


def test_producer_from_properties_path(tmp_path: Path) -> None:
    path = tmp_path / "producer.properties"
    path.write_text("metadata.broker.list=a:1\nproducer.type=async\nqueue.size=42\nbatch.num.messages=42\n")
    c = ProducerConfig.from_properties(path)
    assert c.is_async and c.queue_buffering_max_messages == 42 and c.batch_num_messages == 42
    assert ProducerConfig.from_properties(str(path)) == c


# -- BrokerConfig ------------------------------------------------------------------


def test_broker_defaults() -> None:
    c = BrokerConfig()
    assert c.broker_id == 0 and c.port == 9092 and c.host_name == ""
    assert c.log_dirs == ("/tmp/kafka-logs",)
    assert c.num_partitions == 1
    assert c.log_segment_bytes == 1073741824
    assert c.log_index_interval_bytes == 4096
    assert c.auto_create_topics_enable is True
    assert c.message_max_bytes == 1048588
    assert c.socket_request_max_bytes == 104857600
    assert (c.listen_host, c.listen_port) == ("127.0.0.1", 9092)  # loopback only unless told (issue 15)
    assert (c.advertised_host, c.advertised_port) == ("127.0.0.1", 9092)


def test_broker_addresses() -> None:
    c = BrokerConfig.from_properties({"host.name": "10.0.0.5", "port": "9999"})
    assert (c.listen_host, c.listen_port, c.advertised_host, c.advertised_port) == ("10.0.0.5", 9999, "10.0.0.5", 9999)
    c = BrokerConfig.from_properties(
        {"port": "1", "listeners": "PLAINTEXT://0.0.0.0:9093", "advertised.host.name": "kafka.example", "advertised.port": "19093"}
    )
    assert (c.listen_host, c.listen_port, c.advertised_host, c.advertised_port) == (
        "0.0.0.0", 9093, "kafka.example", 19093
    )
    assert c.advertised_port_number == 19093
    c = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://[::1]:9092,CONTROLLER://:9093",
            "controller.listener.names": "CONTROLLER",
            "advertised.listeners": "PLAINTEXT://ext:1234",
        }
    )
    assert c.listeners == (("PLAINTEXT", "::1", 9092), ("CONTROLLER", "", 9093))
    assert (c.listen_host, c.advertised_host, c.advertised_port) == ("::1", "ext", 1234)


def test_broker_aliases_and_precedence() -> None:
    assert BrokerConfig.from_properties({"log.dir": "/x"}).log_dirs == ("/x",)
    assert BrokerConfig.from_properties({"log.dir": "/x", "log.dirs": "/y,/z"}).log_dirs == ("/y", "/z")
    assert BrokerConfig.from_properties({"node.id": "5"}).broker_id == 5


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("broker.id", "-1"),
        ("broker.id", "x"),
        ("port", "65536"),
        ("port", "-1"),
        ("listeners", "127.0.0.1:9092"),
        ("listeners", "SSL://:9093,SSL://:9094"),
        ("num.partitions", "0"),
        ("log.segment.bytes", "10"),
        ("log.dirs", " , "),
        ("auto.create.topics.enable", "maybe"),
        ("message.max.bytes", "-1"),
        ("socket.request.max.bytes", "0"),
        ("advertised.port", "99999"),
    ],
)
def test_bad_broker_value_names_key_and_value(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({key: value})
    assert key in str(info.value) and value.strip(" ,") in str(info.value)


# -- ConsumerConfig ------------------------------------------------------------------


def test_consumer_defaults_follow_kafka_08() -> None:
    c = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "zk:2181/kafka"})
    assert c.client_id == "g" and c.consumer_id is None
    assert c.socket_timeout_ms == 30000 and c.fetch_message_max_bytes == 1048576
    assert c.auto_commit_enable and c.auto_commit_interval_ms == 60000
    assert c.queued_max_message_chunks == 2 and c.rebalance_max_retries == 4
    assert c.fetch_min_bytes == 1 and c.fetch_wait_max_ms == 100
    assert c.auto_offset_reset == "largest" and c.consumer_timeout_ms == -1
    assert c.offsets_storage == "zookeeper" and c.partition_assignment_strategy == ("range",)
    assert c.zookeeper_session_timeout_ms == 6000 and c.zookeeper_sync_time_ms == 2000
    assert c.with_properties({"auto.offset.reset": "earliest"}).auto_offset_reset == "smallest"


def test_consumer_group_coordination_follows_the_connection_properties() -> None:
    zk = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "zk:2181"})
    assert zk.group_coordination == "zookeeper" and zk.bootstrap_servers is None
    broker = ConsumerConfig.from_properties({"group.id": "g", "bootstrap.servers": "k:1,l:2"})
    assert broker.group_coordination == "broker" and broker.bootstrap_servers == (("k", 1), ("l", 2))
    assert broker.zookeeper_connect is None
    both = ConsumerConfig.from_properties({"group.id": "g", "bootstrap.servers": "k:1", "zookeeper.connect": "zk:2181"})
    assert both.group_coordination == "zookeeper"
    assert both.with_properties({"group.coordination": "broker"}).group_coordination == "broker"
    assert (broker.session_timeout_ms, broker.heartbeat_interval_ms, broker.rebalance_timeout_ms) == (10000, 3000, 60000)
    assert (zk.offsets_channel_backoff_ms, zk.offsets_channel_socket_timeout_ms, zk.offsets_commit_max_retries) == (1000, 10000, 5)
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        ConsumerConfig.from_properties({"group.id": "g"})
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "zk:2181", "group.coordination": "broker"})
    with pytest.raises(ConfigError, match="group.coordination"):
        ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "zk:2181", "group.coordination": "raft"})
    with pytest.raises(ConfigError, match="heartbeat.interval.ms"):
        ConsumerConfig.from_properties({"group.id": "g", "bootstrap.servers": "k:1", "session.timeout.ms": "3000"})


def test_consumer_validation() -> None:
    with pytest.raises(ConfigError, match="group.id"):
        ConsumerConfig.from_properties({"zookeeper.connect": "zk:2181"})
    base = {"group.id": "g", "zookeeper.connect": "zk:2181"}
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        ConsumerConfig.from_properties({**base, "auto.offset.reset": "middle"})
    with pytest.raises(ConfigError, match="socket.timeout.ms"):
        ConsumerConfig.from_properties({**base, "socket.timeout.ms": "50", "fetch.wait.max.ms": "100"})


# -- plug-ins --------------------------------------------------------------------------


class UpperEncoder(Encoder):
    """A custom encoder, loadable by its dotted path."""

    def to_message(self, value: Any) -> bytes | None:
        return None if value is None else str(value).upper().encode()


class NeedsArgument(Encoder):
    def __init__(self, required: int) -> None:
        self.required = required

    def to_message(self, value: Any) -> bytes | None:
        return b""


def test_load_plugin_by_dotted_path() -> None:
    enc = load_plugin(f"{__name__}.UpperEncoder", Encoder)
    assert isinstance(enc, UpperEncoder) and enc.to_message("a") == b"A"
    assert isinstance(load_plugin("kclient.client.producer.partitioner.DefaultPartitioner", Partitioner), DefaultPartitioner)
    assert resolve_dotted("kclient.client.serde.StringEncoder.to_message") is StringEncoder.to_message


def test_load_plugin_defaults_from_the_package_namespace() -> None:
    c = producer()
    assert isinstance(load_plugin(c.serializer_class, Encoder), DefaultEncoder)
    assert isinstance(load_plugin(c.partitioner_class, Partitioner), DefaultPartitioner)


def test_load_plugin_by_class_and_instance() -> None:
    p = DefaultPartitioner(rng=random.Random(1))
    assert load_plugin(p, Partitioner) is p
    assert isinstance(load_plugin(DefaultPartitioner, Partitioner), DefaultPartitioner)


def test_load_plugin_passes_only_accepted_kwargs() -> None:
    config = producer(**{"serializer.encoding": "utf-16-le"})
    enc = load_plugin(StringEncoder, Encoder, config=config)
    assert enc.to_message("é") == "é".encode("utf-16-le")
    assert isinstance(load_plugin(UpperEncoder, Encoder, config=config), UpperEncoder)
    assert StringDecoder(config=config).from_bytes(enc.to_message("hé")) == "hé"


def test_duck_typed_plugin_is_accepted() -> None:
    class Duck:
        def to_message(self, value: Any) -> bytes | None:
            return b"quack"

    assert load_plugin(Duck, Encoder).to_message(1) == b"quack"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("no_such_module_xyz.Encoder", "no module named 'no_such_module_xyz'"),
        ("kclient.client.serde.NoSuchEncoder", "has no attribute 'NoSuchEncoder'"),
        ("kclient.client.producer.partitioner.DefaultPartitioner", "is not a subclass"),
        ("kclient.client.serde.__doc__", "is not a"),
        ("not a path", "not a dotted path"),
        (f"{__name__}.NeedsArgument", "Cannot instantiate NeedsArgument"),
        (42, "is not a"),
    ],
)
def test_load_plugin_failures_are_config_errors(value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match="serializer.class") as info:
        load_plugin(value, Encoder, property_name="serializer.class")
    assert message in str(info.value)


def test_import_error_inside_plugin_module_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_plugin_mod.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="importing broken_plugin_mod failed") as info:
        load_plugin("broken_plugin_mod.Encoder", Encoder)
    assert isinstance(info.value.__cause__, ImportError)


# -- encoders ------------------------------------------------------------------------------


def test_default_encoder() -> None:
    enc = DefaultEncoder()
    data = b"abc"
    assert enc.to_message(data) is data
    buf = bytearray(b"xy")
    out = enc.to_message(buf)
    buf[0] = 0
    assert out == b"xy" and type(out) is bytes
    assert enc.to_message(memoryview(b"mv")) == b"mv"
    assert enc.to_message(None) is None
    with pytest.raises(TypeError, match="StringEncoder"):
        enc.to_message("text")
    with pytest.raises(TypeError, match="int"):
        enc.to_message(5)


def test_string_encoder() -> None:
    assert StringEncoder().to_message("héllo") == "héllo".encode()
    assert StringEncoder("latin-1").to_message("é") == b"\xe9"
    assert StringEncoder().to_message(None) is None
    assert StringEncoder().to_message(b"raw") == b"raw"
    with pytest.raises(TypeError):
        StringEncoder().to_message(3.5)
    with pytest.raises(LookupError):
        StringEncoder("no-such-codec")


def test_broker_request_read_timeout_and_its_request_timeout_alias():
    """A size prefix followed by nothing is closed after this timeout; the
    clients' name ``request.timeout.ms`` sets it too (issue 13)."""
    assert BrokerConfig.from_properties({}).socket_request_read_timeout_ms == 30000
    assert BrokerConfig.from_properties({"request.timeout.ms": "1234"}).socket_request_read_timeout_ms == 1234
    assert BrokerConfig.from_properties({"socket.request.read.timeout.ms": "4321"}).socket_request_read_timeout_ms == 4321
    with pytest.raises(ConfigError, match="request.timeout.ms"):
        BrokerConfig.from_properties({"request.timeout.ms": "0"})


# -- Modern names, unknown keys, strict mode, the reference page (issue 14) --------

_CONSUMER_BASE = {"group.id": "g", "zookeeper.connect": "zk:2181"}
_PRODUCER_BASE = {"metadata.broker.list": "a:1"}

#: (config class, modern alias, classic name, attribute, value given, value stored)
_MODERN_ALIASES = [
    (ConsumerConfig, "enable.auto.commit", "auto.commit.enable", "auto_commit_enable", "false", False),
    (ConsumerConfig, "max.partition.fetch.bytes", "fetch.message.max.bytes", "fetch_message_max_bytes", "2048", 2048),
    (ConsumerConfig, "fetch.max.wait.ms", "fetch.wait.max.ms", "fetch_wait_max_ms", "250", 250),
    (ConsumerConfig, "receive.buffer.bytes", "socket.receive.buffer.bytes", "socket_receive_buffer_bytes", "4096", 4096),
    (ConsumerConfig, "request.timeout.ms", "socket.timeout.ms", "socket_timeout_ms", "12000", 12000),
    (ProducerConfig, "linger.ms", "queue.buffering.max.ms", "queue_buffering_max_ms", "7", 7),
    (ProducerConfig, "metadata.max.age.ms", "topic.metadata.refresh.interval.ms", "topic_metadata_refresh_interval_ms", "300000", 300000),
    (ProducerConfig, "bootstrap.servers", "metadata.broker.list", "metadata_broker_list", "k:1,l:2", (("k", 1), ("l", 2))),
    (ProducerConfig, "acks", "request.required.acks", "request_required_acks", "all", -1),
    (ProducerConfig, "retries", "message.send.max.retries", "message_send_max_retries", "9", 9),
    (ProducerConfig, "compression.type", "compression.codec", "compression_codec", "zstd", "zstd"),
]


def _base(cls: type) -> dict[str, str]:
    return dict(_CONSUMER_BASE if cls is ConsumerConfig else _PRODUCER_BASE)


@pytest.mark.parametrize(("cls", "modern", "classic", "attribute", "value", "stored"), _MODERN_ALIASES)
def test_modern_name_and_classic_name_build_the_same_config(
    cls: type, modern: str, classic: str, attribute: str, value: str, stored: Any
) -> None:
    base = _base(cls)
    base.pop(classic, None)
    via_modern = cls.from_properties({**base, modern: value})
    via_classic = cls.from_properties({**base, classic: value})
    assert getattr(via_modern, attribute) == stored
    assert via_modern == via_classic
    assert modern in cls.properties()[attribute].aliases


@pytest.mark.parametrize(("cls", "modern", "classic", "attribute", "value", "stored"), _MODERN_ALIASES)
def test_modern_and_classic_name_in_conflict_is_reported(
    cls: type, modern: str, classic: str, attribute: str, value: str, stored: Any, caplog: pytest.LogCaptureFixture
) -> None:
    base = _base(cls)
    base.pop(classic, None)
    # Give the modern name some other valid value: the classic name wins, and the clash is logged.
    other = {ConsumerConfig: {"enable.auto.commit": "true"}, ProducerConfig: {"acks": "0", "compression.type": "gzip",
             "bootstrap.servers": "other:9"}}[cls].get(modern, "31000")
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        c = cls.from_properties({**base, modern: other, classic: value})
    assert getattr(c, attribute) == stored
    assert f"{modern}=" in caplog.text and f"in favour of {classic}=" in caplog.text


def test_enable_auto_commit_false_turns_auto_commit_off(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        c = ConsumerConfig.from_properties({**_CONSUMER_BASE, "enable.auto.commit": "false"})
    assert c.auto_commit_enable is False
    assert caplog.text == ""  # known, so no "ignored" warning any more
    assert ConsumerConfig.from_properties({**_CONSUMER_BASE, "enable.auto.commit": False}).auto_commit_enable is False


@pytest.mark.parametrize(
    ("given", "stored"), [("earliest", "smallest"), ("latest", "largest"), ("smallest", "smallest"), ("LARGEST", "largest")]
)
def test_auto_offset_reset_accepts_earliest_latest(given: str, stored: str) -> None:
    c = ConsumerConfig.from_properties({**_CONSUMER_BASE, "auto.offset.reset": given})
    assert c.auto_offset_reset == stored


def test_auto_offset_reset_rejects_other_words() -> None:
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        ConsumerConfig.from_properties({**_CONSUMER_BASE, "auto.offset.reset": "none"})


@pytest.mark.parametrize(
    ("cls", "key", "suggestion"),
    [
        (ConsumerConfig, "enable.auto.comit", "enable.auto.commit"),
        (ConsumerConfig, "auto.comit.enable", "auto.commit.enable"),
        (ProducerConfig, "linger.msec", "linger.ms"),
        (ProducerConfig, "bootstrap.server", "bootstrap.servers"),
    ],
)
def test_unknown_key_warning_says_did_you_mean(
    cls: type, key: str, suggestion: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        c = cls.from_properties({**_base(cls), key: "1"}, strict=False)
    assert c == cls.from_properties(_base(cls))
    assert f"{key!r} is not a known config for {cls.__name__}; did you mean {suggestion!r}?" in caplog.text
    assert "ignored" in caplog.text


def test_unknown_key_with_nothing_close_has_no_suggestion(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        ProducerConfig.from_properties({**BROKERS, "zzzz": "1"}, strict=False)
    assert "'zzzz' is not a known config for ProducerConfig" in caplog.text
    assert "did you mean" not in caplog.text


def test_strict_makes_an_unknown_key_an_error_with_the_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"'enable\.auto\.comit' is not a known config for ConsumerConfig; "
                       r"did you mean 'enable\.auto\.commit'\?"):
        ConsumerConfig.from_properties({**_CONSUMER_BASE, "enable.auto.comit": "false"}, strict=True)
    # Known names, aliases included, are fine in strict mode.
    c = ConsumerConfig.from_properties({**_CONSUMER_BASE, "enable.auto.commit": "false"}, strict=True)
    assert c.auto_commit_enable is False
    with pytest.raises(ConfigError, match="no.such"):
        c.with_properties({"no.such": 1}, strict=True)


def test_strict_from_file_and_broker(tmp_path: Path) -> None:
    path = tmp_path / "p.properties"
    path.write_text("metadata.broker.list=a:1\nlinger.msx=5000\n")
    assert ProducerConfig.from_file(path, strict=False).queue_buffering_max_ms == 5
    with pytest.raises(ConfigError, match="did you mean 'linger.ms'"):
        ProducerConfig.from_file(path)
    with pytest.raises(ConfigError, match="did you mean 'linger.ms'"):
        ProducerConfig.from_file(path, strict=True)
    with pytest.raises(ConfigError, match="'prot' is not a known config for BrokerConfig; did you mean 'port'"):
        BrokerConfig.from_properties({"prot": "1"}, strict=True)
    # Kafka's known-and-ignored broker keys and security properties are not unknown.
    BrokerConfig.from_properties({"num.io.threads": "8", "ssl.keystore.type": "PEM"}, strict=True)


@pytest.mark.parametrize(
    ("cls", "key", "hint"),
    [
        (ConsumerConfig, "fetch.max.bytes", "set fetch.message.max.bytes"),
    ],
)
def test_modern_names_with_another_meaning_are_not_aliased(
    cls: type, key: str, hint: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        c = cls.from_properties({**_base(cls), key: "16384"}, strict=False)
    assert c == cls.from_properties(_base(cls))  # ignored, not mapped to a different meaning
    assert f"{key!r} is not supported by {cls.__name__}" in caplog.text and hint in caplog.text
    assert all(key not in spec.aliases for spec in cls.properties().values())
    with pytest.raises(ConfigError, match=hint):
        cls.from_properties({**_base(cls), key: "16384"}, strict=True)
    with pytest.raises(ConfigError, match=hint):
        cls.from_properties({**_base(cls), key: "16384"})  # strict by default


def test_reference_page_is_in_sync_with_the_declarations() -> None:
    from kclient.config import reference

    page = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
    assert page.read_text(encoding="utf-8") == reference.render_page(), (
        f"docs/configuration.md is out of date with kclient/config/; regenerate it with: {reference.REGENERATE}"
    )


def test_reference_page_lists_every_property_alias_default_and_unit() -> None:
    from kclient.config import reference

    for cls in reference.CONFIG_CLASSES:
        section = reference.render_class(cls)
        docs = reference.field_docs(cls)
        for attr, spec in cls.properties().items():
            row = next(line for line in section.splitlines() if line.startswith(f"| {reference.code_name(spec.name)} |"))
            assert all(reference.code_name(alias) in row for alias in spec.aliases)
            assert docs[attr] and docs[attr].replace("|", "\\|") in row  # every property is documented
    section = reference.render_class(ConsumerConfig)
    c = reference.code_name
    assert f"| {c('auto.commit.enable')} | {c('enable.auto.commit')} | `true` |  |" in section
    assert f"| {c('fetch.wait.max.ms')} | {c('fetch.max.wait.ms')} | `100` | ms |" in section
    assert f"| {c('fetch.message.max.bytes')} | {c('max.partition.fetch.bytes')} | `1048576` | bytes |" in section
    assert f"| {c('group.id')} |  | **required** |" in section and "same as `group.id`" in section
    assert "`fetch.max.bytes`" in section  # listed as not mapped
    assert f"| {c('session.timeout.ms')} |  | `10000` | ms |" in section
    # A name wraps only after its dots.
    assert c("metadata.broker.list") == "<code>metadata.<wbr>broker.<wbr>list</code>"


def test_select_known_filters_a_shared_properties_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 27: a tool reading a properties file shared by several clients
    (``--command-config client.properties``) keeps the keys its client's
    config takes and logs the others, as Kafka's tools do; keys typed on
    the command line are not filtered."""
    from kclient.config import AdminConfig
    from kclient.tools.common import client_properties

    shared = tmp_path / "client.properties"
    shared.write_text("security.protocol=PLAINTEXT\nacks=all\nlinger.ms=5\nrequest.timeout.ms=1000\nreceive.buffer.bytes=1\n")
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        props = client_properties(str(shared), ["client.id=x"], "--command-property", keep=AdminConfig.select_known)
    assert props == {"security.protocol": "PLAINTEXT", "request.timeout.ms": "1000", "receive.buffer.bytes": "1", "client.id": "x"}
    assert "'acks' is not a known config for AdminConfig" in caplog.text and "'linger.ms'" in caplog.text
    assert str(shared) in caplog.text
    AdminConfig.from_properties({**props, "bootstrap.servers": "h:1"})  # what is left builds a strict config
    with pytest.raises(ConfigError, match="did you mean 'client.id'"):
        AdminConfig.from_properties({**client_properties(None, ["client.idd=x"], "--command-property", keep=AdminConfig.select_known), "bootstrap.servers": "h:1"})


def test_console_producer_lingers_5_ms_and_filters_its_config_file(tmp_path: Path) -> None:
    """Issue 27: ``console-producer`` (async by default) gets the producer's
    5 ms linger, not 0.8's 5 s; its ``--producer.config`` file may hold keys
    of other clients (left out), its ``--producer-property`` may not."""
    import argparse

    from kclient.tools.console_producer import producer_properties

    shared = tmp_path / "client.properties"
    shared.write_text("group.id=readers\nacks=all\n")

    def args(*props: str) -> argparse.Namespace:
        return argparse.Namespace(
            producer_config=str(shared), producer_property=list(props), bootstrap_server="h:1",
            sync=False, compression_codec=None, request_required_acks=None,
        )

    cfg = ProducerConfig.from_properties(producer_properties(args()))
    assert cfg.is_async and cfg.queue_buffering_max_ms == 5 and cfg.request_required_acks == -1
    assert ProducerConfig.from_properties(producer_properties(args("linger.ms=50"))).queue_buffering_max_ms == 50
    with pytest.raises(ConfigError, match="did you mean 'linger.ms'"):
        ProducerConfig.from_properties(producer_properties(args("linger.msx=50")))


@pytest.mark.unit
def test_max_in_flight_defaults_to_5_with_idempotence_and_1_without():
    """Kafka's default (5) where the sequence numbers keep each partition's
    order across retries; Kafka 0.8's one batch at a time otherwise; a set
    value wins."""
    from kclient.config import ProducerConfig

    base = {"metadata.broker.list": "h:9092"}
    assert ProducerConfig.from_properties(base).max_in_flight_requests_per_connection == 1
    assert ProducerConfig.from_properties({**base, "enable.idempotence": True, "acks": "all"}).max_in_flight_requests_per_connection == 5
    assert ProducerConfig.from_properties({**base, "transactional.id": "t"}).max_in_flight_requests_per_connection == 5
    assert ProducerConfig.from_properties({**base, "enable.idempotence": True, "acks": "all", "max.in.flight.requests.per.connection": 2}).max_in_flight_requests_per_connection == 2
    assert ProducerConfig.from_properties({**base, "max.in.flight.requests.per.connection": 3}).max_in_flight_requests_per_connection == 3
