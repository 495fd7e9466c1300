"""`kclient.Consumer` with the consumer group protocol
(``group.protocol=consumer``, KIP-848) against the bundled broker's
coordinator (`kclient.broker.group.consumer_apis`), one broker for the
module: the scenarios of `helpers.consumer_protocol`, the same ones
tests/test_consumer_protocol_kafka.py runs against Apache Kafka 4.x
(subscribe, poll and commit; two members splitting the partitions and
one taking them all after the other closes; kept partitions consumed
while a member joins, counted by listener calls; a member past
``max.poll.interval.ms`` leaving and joining again; a pattern
subscription; a restarted static member getting its partitions back;
a Java member, Kafka 4's ``kafka-console-consumer``, sharing the group),
and a member that rides out a restart of the broker (its coordinator).
The restart is the module's last test."""

from __future__ import annotations

import pytest
from helpers import consumer_protocol as scenarios
from helpers.consumer_protocol import Recorder, fill, new_group, settings, wait_until
from helpers.groups import group_broker_properties
from helpers.skips import require

from kclient import Consumer
from kclient.testing import BrokerProcess, java_unavailable_reason


@pytest.fixture(scope="module")
def broker():
    props = {
        **group_broker_properties(scenarios.PARTITIONS),
        # Quicker heartbeats than the 5 s default, so that reconciliations finish soon.
        "group.consumer.min.heartbeat.interval.ms": 200,
        "group.consumer.heartbeat.interval.ms": 300,
    }
    with BrokerProcess(properties=props, keep_port=True) as proc:
        yield proc


def test_subscribe_poll_commit_with_the_consumer_protocol(broker, topic):
    scenarios.subscribe_poll_commit(broker, topic)


def test_two_members_split_and_one_takes_all_with_the_consumer_protocol(broker, topic):
    scenarios.two_members_split_and_one_takes_all(broker, topic)


def test_kept_partitions_are_consumed_while_a_member_joins(broker, topic):
    scenarios.kept_partitions_consumed_while_a_member_joins(broker, topic)


def test_a_member_that_stops_polling_leaves_and_rejoins(broker, topic):
    scenarios.member_that_stops_polling_leaves_and_rejoins(broker, topic)


def test_pattern_subscription_and_unsubscribe_with_the_consumer_protocol(broker, topic):
    scenarios.pattern_subscription_and_unsubscribe(broker, topic)


def test_a_restarted_static_member_gets_its_partitions_back(broker, topic):
    scenarios.restarted_static_member_gets_its_partitions_back(broker, topic)


def test_positions_committed_before_revocation_hand_over(broker, topic):
    scenarios.positions_committed_before_revocation_hand_over(broker, topic)


def test_an_unknown_server_assignor_is_raised_by_poll(broker, topic):
    scenarios.unknown_server_assignor_is_raised_by_poll(broker, topic)


def test_a_subscription_change_moves_the_assignment(broker, topic):
    scenarios.subscription_change_moves_the_assignment(broker, topic)


def test_a_java_member_and_a_kclient_member_share_a_group(broker, topic):
    require(java_unavailable_reason(), name="Java 17+", needs="runs Apache Kafka 4's console consumer (Java 17+)")
    scenarios.java_member_and_kclient_member_share_a_group(broker, topic)


def test_a_member_rides_out_a_coordinator_restart(broker, topic):
    """The broker is killed and started again. The restarted coordinator
    reads the group back from ``__consumer_offsets``
    (`kclient.broker.group.consumer_records`), as Kafka's does: the member
    goes on with its partitions (no rebalance, no listener call) and reads
    what is produced after the restart."""
    log: list = []
    before = fill(broker, topic, 3, "b")
    with Consumer(settings(broker, new_group())) as consumer:
        consumer.subscribe([topic], listener=Recorder("member", log))
        seen: set[str] = set()
        wait_until(lambda: seen.update(r.value.decode() for r in consumer.poll(timeout_ms=50)) or seen >= before, "the records before the restart")
        owned = sorted(consumer.assignment())
        calls = len(log)
        broker.kill()
        broker.start()
        after = fill(broker, topic, 3, "a")

        wait_until(lambda: seen.update(r.value.decode() for r in consumer.poll(timeout_ms=50)) or seen >= after, "the records after the restart")
        assert log[calls:] == [] and sorted(consumer.assignment()) == owned
