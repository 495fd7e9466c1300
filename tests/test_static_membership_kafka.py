"""Static membership (KIP-345) of `kclient.Consumer` against Apache Kafka
4.x itself (KRaft, classic group protocol; one broker for the module):
the restart scenario of tests/test_static_membership.py, so the client
side is checked against Kafka's own group coordinator (which answers a
returning static leader with ``skip_assignment``, JoinGroup v9, KIP-814)."""

from __future__ import annotations

import uuid

import pytest
from helpers.groups import group_kafka, poll_settings
from helpers.static_members import restart_within_session

pytestmark = pytest.mark.apache_kafka

PARTITIONS = 4


@pytest.fixture(scope="module")
def kafka():
    with group_kafka(PARTITIONS) as proc:
        yield proc


@pytest.mark.parametrize("restarting", ["leader", "follower"])
def test_static_member_restarted_within_session_keeps_its_partitions_on_kafka(kafka, topic, restarting):
    group = f"k4-static-{uuid.uuid4().hex[:8]}"
    # Kafka's group.min.session.timeout.ms is 6 s: the restart happens well within 10 s.
    settings = lambda: poll_settings(kafka.bootstrap, group, **{"session.timeout.ms": 10000})  # noqa: E731
    restart_within_session(kafka, topic, PARTITIONS, settings, leader_restarts=restarting == "leader", acks=-1)
