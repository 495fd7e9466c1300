"""A Kafka 4.0+ broker advertises Produce v0 (KAFKA-18659) but accepts v3+
only (KIP-896): kclient takes its Produce range to start at v3, so that a
producer capped at an old release fails with UnsupportedVersionError
instead of a closed connection (found by tests/conformance/test_simple_consumer.py
against Kafka 4.4)."""

from __future__ import annotations

import pytest

from kclient.errors import UnsupportedVersionError
from kclient.net.connection import _effective_versions
from kclient.protocol.messages import FETCH, LIST_OFFSETS, PRODUCE, choose_version

pytestmark = pytest.mark.unit

#: What Kafka 4.4 advertises for these (ApiVersions v4).
KAFKA_4 = {PRODUCE.key: (0, 13), FETCH.key: (4, 18), LIST_OFFSETS.key: (1, 11)}
#: What Kafka 3.9 advertises.
KAFKA_3_9 = {PRODUCE.key: (0, 11), FETCH.key: (0, 17), LIST_OFFSETS.key: (0, 9)}


def test_kafka_4_produce_starts_at_v3():
    versions = _effective_versions(KAFKA_4)
    assert versions[PRODUCE.key] == (3, 13)
    assert versions[FETCH.key] == (4, 18)
    with pytest.raises(UnsupportedVersionError, match="broker 3-13"):
        choose_version(PRODUCE, versions, ceiling=2)
    assert choose_version(PRODUCE, versions, ceiling=3) == 3


def test_older_brokers_unchanged():
    assert _effective_versions(KAFKA_3_9) == KAFKA_3_9
    assert choose_version(PRODUCE, _effective_versions(KAFKA_3_9), ceiling=0) == 0
    assert _effective_versions({PRODUCE.key: (0, 8)}) == {PRODUCE.key: (0, 8)}
