"""`kclient.Consumer` with Kafka 4.0's consumer group protocol
(``group.protocol=consumer``, KIP-848, ConsumerGroupHeartbeat) against
Apache Kafka 4.x itself (KRaft, one broker for the module): the
scenarios of `helpers.consumer_protocol` (subscribe, poll and commit; two
kclient members splitting the partitions and one taking them all after
the other closes; the partitions a member keeps consumed while another
joins, counted by listener calls; a member past ``max.poll.interval.ms``
leaving and joining again; a pattern subscription; a restarted static
member), and a Java consumer (``kafka-console-consumer`` with
``group.protocol=consumer``) and a kclient member sharing one group, each
partition read by one of them, every record once, both shown by
``kafka-consumer-groups --describe --members``."""

from __future__ import annotations

import pytest
from helpers import consumer_protocol as scenarios
from helpers.consumer_protocol import PARTITIONS
from helpers.groups import group_kafka

pytestmark = pytest.mark.apache_kafka


@pytest.fixture(scope="module")
def kafka():
    quick = {
        "group.coordinator.rebalance.protocols": "classic,consumer",
        # Quicker heartbeats than the 5 s default, so that reconciliations finish soon.
        "group.consumer.min.heartbeat.interval.ms": 200,
        "group.consumer.heartbeat.interval.ms": 300,
    }
    with group_kafka(PARTITIONS, **quick) as proc:
        yield proc


def test_subscribe_poll_commit_with_the_consumer_protocol(kafka, topic):
    scenarios.subscribe_poll_commit(kafka, topic)


def test_two_members_split_and_one_takes_all_with_the_consumer_protocol(kafka, topic):
    scenarios.two_members_split_and_one_takes_all(kafka, topic)


def test_kept_partitions_are_consumed_while_a_member_joins(kafka, topic):
    scenarios.kept_partitions_consumed_while_a_member_joins(kafka, topic)


def test_a_member_that_stops_polling_leaves_and_rejoins(kafka, topic):
    scenarios.member_that_stops_polling_leaves_and_rejoins(kafka, topic)


def test_pattern_subscription_and_unsubscribe_with_the_consumer_protocol(kafka, topic):
    scenarios.pattern_subscription_and_unsubscribe(kafka, topic)


def test_a_restarted_static_member_gets_its_partitions_back(kafka, topic):
    scenarios.restarted_static_member_gets_its_partitions_back(kafka, topic)


def test_positions_committed_before_revocation_hand_over(kafka, topic):
    scenarios.positions_committed_before_revocation_hand_over(kafka, topic)


def test_an_unknown_server_assignor_is_raised_by_poll(kafka, topic):
    scenarios.unknown_server_assignor_is_raised_by_poll(kafka, topic)


def test_a_subscription_change_moves_the_assignment(kafka, topic):
    scenarios.subscription_change_moves_the_assignment(kafka, topic)


def test_a_java_member_and_a_kclient_member_share_a_group(kafka, topic):
    scenarios.java_member_and_kclient_member_share_a_group(kafka, topic)
