"""``isolation.level`` as each consumer takes it (KIP-98): Kafka's two
values, any case, and a `ConfigError` naming the setting and the allowed
values for anything else, raised before a connection is opened.
No broker: the config paths only."""

from __future__ import annotations

import pytest

from kclient import ConfigError, Consumer, ConsumerConfig, SimpleConsumer
from kclient.client.consumer.simple import TrioSimpleConsumer
from kclient.protocol.records.read_committed import READ_COMMITTED, READ_UNCOMMITTED, isolation_level_code
from kclient.spark.options import read_options

pytestmark = pytest.mark.unit

BOOT = "127.0.0.1:9"  # the discard port: nothing is ever sent there
BAD = "read_maybe"
ALLOWED = r"read_uncommitted, read_committed"


def test_isolation_level_code_takes_kafkas_names():
    assert isolation_level_code(None) == READ_UNCOMMITTED == 0
    assert isolation_level_code("read_uncommitted") == READ_UNCOMMITTED
    assert isolation_level_code(" Read_Committed ") == READ_COMMITTED == 1
    for bad in (BAD, "", 1, True):
        with pytest.raises(ConfigError, match=rf"isolation\.level: expected one of {ALLOWED}"):
            isolation_level_code(bad)


def test_consumer_config_and_the_connector_name_the_property():
    config = ConsumerConfig.from_properties({"group.id": "g", "bootstrap.servers": BOOT})
    assert config.isolation_level == "read_uncommitted"
    config = ConsumerConfig.from_properties({"group.id": "g", "bootstrap.servers": BOOT, "isolation.level": "READ_COMMITTED"})
    assert config.isolation_level == "read_committed"
    with pytest.raises(ConfigError, match=rf"{BAD}.*isolation\.level: expected one of {ALLOWED}"):
        ConsumerConfig.from_properties({"group.id": "g", "bootstrap.servers": BOOT, "isolation.level": BAD})
    with pytest.raises(ConfigError, match=rf"isolation\.level: expected one of {ALLOWED}"):
        Consumer.create({"group.id": "g", "bootstrap.servers": BOOT, "isolation.level": BAD})


def test_poll_consumer_names_the_property():
    with pytest.raises(ConfigError, match=rf"isolation\.level: expected one of {ALLOWED}"):
        Consumer({"bootstrap.servers": BOOT, "isolation.level": BAD})


def test_simple_consumer_takes_a_keyword_or_the_config_property():
    assert TrioSimpleConsumer("h", 1).isolation_level == READ_UNCOMMITTED
    assert TrioSimpleConsumer("h", 1, isolation_level="read_committed").isolation_level == READ_COMMITTED
    assert TrioSimpleConsumer("h", 1, config={"isolation.level": "read_committed"}).isolation_level == READ_COMMITTED
    config = ConsumerConfig.from_properties({"group.id": "g", "bootstrap.servers": BOOT, "isolation.level": "read_committed"})
    assert TrioSimpleConsumer("h", 1, config=config).isolation_level == READ_COMMITTED
    # the keyword wins over the config
    assert TrioSimpleConsumer("h", 1, config={"isolation.level": "read_committed"}, isolation_level="read_uncommitted").isolation_level == READ_UNCOMMITTED
    for kwargs in ({"isolation_level": BAD}, {"config": {"isolation.level": BAD}}):
        with pytest.raises(ConfigError, match=rf"isolation\.level: expected one of {ALLOWED}"):
            SimpleConsumer("h", 1, **kwargs)


def test_spark_source_takes_kafka_isolation_level():
    base = {"kafka.bootstrap.servers": BOOT, "subscribe": "t"}
    assert read_options(base, streaming=False).isolation_level == "read_uncommitted"
    assert read_options({**base, "kafka.isolation.level": "Read_Committed"}, streaming=True).isolation_level == "read_committed"
    with pytest.raises(ConfigError, match=rf"kafka\.isolation\.level: expected one of {ALLOWED}"):
        read_options({**base, "kafka.isolation.level": BAD}, streaming=False)
