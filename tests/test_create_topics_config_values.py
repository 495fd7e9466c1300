"""CreateTopics checks each topic config's value, as Apache Kafka does
(LogConfig.validate): a bad value fails the topic with INVALID_CONFIG and
nothing is created. Found by tests/conformance/test_admin.py: the bundled
broker checked the names only and created the topic with retention.ms=soon."""

from __future__ import annotations

import uuid

import pytest

from kclient import AdminClient, NewTopic
from kclient.errors import InvalidConfigurationError


@pytest.mark.parametrize(
    "config",
    [{"retention.ms": "soon"}, {"cleanup.policy": "shred"}, {"message.timestamp.type": "WallClock"}, {"unclean.leader.election.enable": "maybe"}],
)
def test_bad_value_is_invalid_config(broker, config):
    name = f"badcfg-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        with pytest.raises(InvalidConfigurationError) as raised:
            admin.create_topics([NewTopic(name, 1, 1, config=config)])
        assert raised.value.code == 40
        [(key, value)] = config.items()
        assert f"Invalid value {value} for configuration {key}" in str(raised.value)
        assert name not in admin.list_topics()
