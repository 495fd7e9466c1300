"""Testing your own application against a real broker with pytest and
`kclient.testing`: copy the fixtures into your ``conftest.py``.

The "application" here is two functions, `publish_signups` and
`count_signups`; the tests run them against a bundled broker started once
per test session (`kclient.testing.BrokerProcess`: a subprocess on a free
loopback port with a temporary log directory, stopped and removed at the
end), each test on a topic of its own so tests never see each other's data.

    python -m pytest examples/test_app_with_kclient.py
    KCLIENT_BOOTSTRAP=127.0.0.1:9092 python -m pytest examples/test_app_with_kclient.py   # an existing broker
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from kclient import FetchRequest, OffsetRequest, Producer, ProducerData, SimpleConsumer

# --- the application under test ------------------------------------------------


def publish_signups(bootstrap: str, topic: str, users: list[dict]) -> None:
    """Publish one JSON record per user, keyed by country."""
    config = {"bootstrap.servers": bootstrap, "serializer.class": "kclient.StringEncoder", "key.serializer.class": "kclient.StringEncoder"}
    with Producer(config) as producer:
        producer.send([ProducerData(topic, key=u["country"], messages=[json.dumps(u)]) for u in users])


def count_signups(bootstrap: str, topic: str) -> dict[str, int]:
    """Signups per country, read from every partition of ``topic``."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    counts: dict[str, int] = {}
    with SimpleConsumer(host, int(port), so_timeout_ms=10_000) as consumer:
        for p in consumer.partitions_for(topic):
            end = consumer.get_offsets_before(topic, p.partition, OffsetRequest.LATEST_TIME, 1)[0]
            offset = 0
            while offset < end:
                for m in consumer.fetch(FetchRequest(topic, p.partition, offset, 1 << 20)):
                    country = json.loads(m.message.payload)["country"]
                    counts[country] = counts.get(country, 0) + 1
                    offset = m.next_offset
    return counts


# --- fixtures: put these in your conftest.py -------------------------------------


@pytest.fixture(scope="session")
def kafka_bootstrap():
    """The bootstrap address of a broker for the whole session: the one in
    ``KCLIENT_BOOTSTRAP`` if set, else a bundled broker of our own."""
    if os.environ.get("KCLIENT_BOOTSTRAP"):
        yield os.environ["KCLIENT_BOOTSTRAP"]
        return
    from kclient.testing import BrokerProcess

    with BrokerProcess(properties={"num.partitions": "3"}) as broker:
        yield broker.bootstrap


@pytest.fixture
def topic(request) -> str:
    """A topic no other test uses (auto-created on first use)."""
    return f"{request.node.name}-{uuid.uuid4().hex[:8]}"


# --- tests --------------------------------------------------------------------------


def test_signups_are_counted_per_country(kafka_bootstrap, topic):
    publish_signups(kafka_bootstrap, topic, [{"name": "ada", "country": "uk"}, {"name": "alan", "country": "uk"}, {"name": "grace", "country": "us"}])
    assert count_signups(kafka_bootstrap, topic) == {"uk": 2, "us": 1}


def test_no_signups_no_counts(kafka_bootstrap, topic):
    publish_signups(kafka_bootstrap, topic, [])
    publish_signups(kafka_bootstrap, topic, [{"name": "linus", "country": "fi"}])
    assert count_signups(kafka_bootstrap, topic) == {"fi": 1}
