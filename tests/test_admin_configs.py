"""AdminClient.describe_configs / incremental_alter_configs and
``kclient configs --bootstrap-server`` on the bundled broker (the
conformance suite runs the same against Apache Kafka 3.9 and 4.x and
compares with Kafka's own kafka-configs)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from helpers.wait import wait_for

from kclient import AdminClient, NewTopic
from kclient.client.admin import AlterConfigOp, ConfigEntry, ConfigResource, ConfigSynonym
from kclient.errors import InvalidConfigurationError, UnknownTopicOrPartitionError


@pytest.fixture
def admin(broker):
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as client:
        yield client


def new_topic(admin, **config) -> str:
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1, config=config)])
    return name


def test_describe_alter_and_delete(admin):
    topic = new_topic(admin, **{"retention.ms": "3600000"})
    resource = ConfigResource("topic", topic)
    [entry] = admin.describe_configs([resource], names=["retention.ms"], include_synonyms=True)[resource].values()
    assert entry == ConfigEntry("retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG", False, False, False, (ConfigSynonym("retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"),))
    admin.incremental_alter_configs({resource: [AlterConfigOp("retention.ms", op="delete"), AlterConfigOp("cleanup.policy", "compact")]})

    def compacted():
        configs = admin.describe_configs([resource])[resource]
        return configs if configs["cleanup.policy"].value == "compact" else None

    configs = wait_for(compacted, "cleanup.policy=compact")
    assert configs["retention.ms"].source == "DEFAULT_CONFIG"
    assert configs["cleanup.policy"].source == "DYNAMIC_TOPIC_CONFIG"


def test_errors(admin):
    topic = new_topic(admin)
    with pytest.raises(InvalidConfigurationError):
        admin.incremental_alter_configs({ConfigResource("topic", topic): [AlterConfigOp("retention.ms", "soon")]})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_configs([ConfigResource("topic", "no-such-topic-cfg")])
    with pytest.raises(ValueError):
        ConfigResource("cluster", "x")
    with pytest.raises(ValueError):
        AlterConfigOp("retention.ms", "1", op="replace")


def test_cli(broker, admin):
    topic = new_topic(admin, **{"segment.ms": "600000"})
    where = [sys.executable, "-m", "kclient", "configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "topics", "--entity-name", topic]
    out = subprocess.run([*where, "--alter", "--add-config", "retention.ms=60000", "--delete-config", "segment.ms"], capture_output=True, text=True, check=True).stdout
    assert out == f"Completed updating config for topic {topic}.\n"
    out = subprocess.run([*where, "--describe"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [f"Dynamic configs for topic {topic} are:", "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}"]
    bad = subprocess.run([*where[:6], "--entity-type", "broker-loggers", "--entity-name", "1", "--describe"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "supports topics and brokers, and the quota entities users, clients and ips" in bad.stderr
