"""The pure parts of the poll consumer's KIP-848 membership
(``group.protocol=consumer``): the member id it makes up, the leave
epochs, the reconciliation plan (revoked first, kept partitions
untouched, topic ids not named yet left for later), the heartbeat fields
sent only when changed, the settings each group protocol refuses, and
topic names read from Metadata v10+ and ConsumerGroupDescribe. Nothing
here starts a process or opens a connection."""

from __future__ import annotations

import base64
import uuid

import pytest

from kclient.client.consumer.poll.config import poll_settings
from kclient.client.consumer.poll.protocol_settings import check_group_protocol_settings
from kclient.client.consumer.poll.reconciliation import SentFields, leave_epoch, new_member_id, normalize, plan_reconciliation
from kclient.client.consumer.poll.topic_names import ZERO_ID, names_from_describe, names_from_metadata
from kclient.client.consumer.poll.types import TopicPartition
from kclient.errors import ConfigError, InvalidGroupIdError
from kclient.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeAssignment,
    ConsumerGroupDescribeGroup,
    ConsumerGroupDescribeMember,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeTopicPartitions,
)
from kclient.protocol.messages.metadata import MetadataResponse, MetadataResponsePartition, MetadataResponseTopic

pytestmark = pytest.mark.unit

A, B, C = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
NAMES = {A: "a", B: "b"}


def tps(*pairs: tuple[str, int]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(t, p) for t, p in pairs)


def test_member_ids_are_kafka_uuid_strings():
    ids = {new_member_id() for _ in range(200)}
    assert len(ids) == 200
    for member_id in ids:
        assert len(member_id) == 22 and not member_id.startswith("-")
        assert len(base64.urlsafe_b64decode(member_id + "==")) == 16


def test_leave_epochs():
    assert leave_epoch(None) == -1
    assert leave_epoch("instance-1") == -2


def test_reconciliation_revokes_only_what_moved_and_adds_the_rest():
    plan = plan_reconciliation(tps(("a", 0), ("a", 1), ("b", 0)), normalize({A: [1, 2], B: [0]}), NAMES)
    assert plan.revoked == tps(("a", 0))
    assert plan.added == tps(("a", 2))
    assert plan.assigned == tps(("a", 1), ("a", 2), ("b", 0))
    assert plan.resolved == {A: frozenset({1, 2}), B: frozenset({0})}
    assert plan.unresolved == frozenset()


def test_reconciliation_leaves_unnamed_topics_for_later():
    plan = plan_reconciliation(tps(("a", 0)), normalize({A: [0], C: [3]}), NAMES)
    assert plan.unresolved == {C}
    assert plan.assigned == tps(("a", 0)) and not plan.revoked and not plan.added
    assert plan.resolved == {A: frozenset({0})}


def test_an_empty_target_revokes_everything():
    plan = plan_reconciliation(tps(("a", 0), ("b", 1)), normalize({A: [], B: []}), NAMES)
    assert plan.revoked == tps(("a", 0), ("b", 1))
    assert plan.assigned == () and plan.added == () and plan.resolved == {}


def test_heartbeat_fields_are_sent_when_joining_and_when_changed():
    sent = SentFields()
    first = sent.next_fields(send_all=True, rebalance_timeout_ms=300000, topics={"b", "a"}, assignor="uniform", owned={})
    assert first.rebalance_timeout_ms == 300000
    assert first.subscribed_topic_names == ["a", "b"]
    assert first.server_assignor == "uniform"
    assert first.topic_partitions == []
    same = sent.next_fields(send_all=False, rebalance_timeout_ms=300000, topics={"a", "b"}, assignor="uniform", owned={})
    assert (same.rebalance_timeout_ms, same.subscribed_topic_names, same.server_assignor, same.topic_partitions) == (-1, None, None, None)
    owned = sent.next_fields(send_all=False, rebalance_timeout_ms=300000, topics={"a", "b"}, assignor="uniform", owned={A: frozenset({2, 0})})
    assert owned.topic_partitions == [(A, [0, 2])] and owned.subscribed_topic_names is None
    topics = sent.next_fields(send_all=False, rebalance_timeout_ms=300000, topics={"a"}, assignor="uniform", owned={A: frozenset({0, 2})})
    assert topics.subscribed_topic_names == ["a"] and topics.topic_partitions is None
    sent.reset()
    again = sent.next_fields(send_all=False, rebalance_timeout_ms=300000, topics={"a"}, assignor=None, owned={A: frozenset({0, 2})})
    assert again.rebalance_timeout_ms == 300000 and again.subscribed_topic_names == ["a"] and again.topic_partitions == [(A, [0, 2])]
    assert again.server_assignor is None  # none configured: the coordinator chooses


def test_settings_each_group_protocol_refuses():
    for key, value in (("session.timeout.ms", 6000), ("heartbeat.interval.ms", 300), ("partition.assignment.strategy", "range")):
        with pytest.raises(ConfigError, match=f"{key} cannot be set when group.protocol=consumer"):
            poll_settings({"bootstrap.servers": "localhost:9092", "group.id": "g", "group.protocol": "consumer", key: value})
    with pytest.raises(ConfigError, match="group.remote.assignor cannot be set when group.protocol=classic"):
        poll_settings({"bootstrap.servers": "localhost:9092", "group.id": "g", "group.remote.assignor": "uniform"})
    settings = poll_settings({"bootstrap.servers": "localhost:9092", "group.id": "g", "group.protocol": "consumer", "group.remote.assignor": "range"})
    assert (settings.config.group_protocol, settings.config.group_remote_assignor) == ("consumer", "range")
    check_group_protocol_settings({"group.protocol": "classic", "session.timeout.ms": 6000, "group.remote.assignor": ""})


def test_topic_names_from_metadata_and_describe():
    response = MetadataResponse(
        topics=[
            MetadataResponseTopic(name="a", topic_id=A, partitions=[MetadataResponsePartition(partition_index=0)]),
            MetadataResponseTopic(name="missing", topic_id=ZERO_ID, error_code=3),
        ]
    )
    assert names_from_metadata(response) == {A: "a"}
    member = ConsumerGroupDescribeMember(
        member_id="m",
        assignment=ConsumerGroupDescribeAssignment(topic_partitions=[ConsumerGroupDescribeTopicPartitions(topic_id=A, topic_name="a", partitions=[0])]),
        target_assignment=ConsumerGroupDescribeAssignment(topic_partitions=[ConsumerGroupDescribeTopicPartitions(topic_id=B, topic_name="b", partitions=[1])]),
    )
    described = ConsumerGroupDescribeResponse(groups=[ConsumerGroupDescribeGroup(group_id="g", members=[member])])
    assert names_from_describe(described) == {A: "a", B: "b"}
    refused = ConsumerGroupDescribeResponse(groups=[ConsumerGroupDescribeGroup(group_id="g", error_code=InvalidGroupIdError.code)])
    with pytest.raises(InvalidGroupIdError):
        names_from_describe(refused)
