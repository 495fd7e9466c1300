"""Helpers over the message classes: the partition states of a
LeaderAndIsr / UpdateMetadata request in either shape, a one-partition
ListOffsets request, and the one OffsetFetch message set behind both
OffsetFetch schemas."""

from __future__ import annotations

import pytest

from kclient.protocol.messages import ALL_APIS, APIS, OFFSET_FETCH, OFFSET_FETCH_FULL, offset_fetch
from kclient.protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrTopicState
from kclient.protocol.messages.list_offsets import LATEST_TIMESTAMP, LIST_OFFSETS, ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kclient.protocol.messages.update_metadata import UpdateMetadataPartitionState, UpdateMetadataRequest, UpdateMetadataTopicState
from kclient.protocol.partition_states import partition_states

pytestmark = pytest.mark.unit


def test_partition_states_of_both_shapes_and_both_requests():
    ungrouped = LeaderAndIsrPartitionState(topic_name="a", partition_index=0, leader=1)
    grouped = LeaderAndIsrPartitionState(partition_index=2, leader=3)
    request = LeaderAndIsrRequest(ungrouped_partition_states=[ungrouped], topic_states=[LeaderAndIsrTopicState(topic_name="b", partition_states=[grouped])])
    assert partition_states(request) == [("a", ungrouped), ("b", grouped)]
    state = UpdateMetadataPartitionState(partition_index=5)
    assert partition_states(UpdateMetadataRequest(topic_states=[UpdateMetadataTopicState(topic_name="c", partition_states=[state])])) == [("c", state)]
    assert partition_states(UpdateMetadataRequest()) == []


@pytest.mark.parametrize("version", range(LIST_OFFSETS.min_version, LIST_OFFSETS.max_version + 1))
def test_list_offsets_for_partition_encodes_as_the_request_built_by_hand(version):
    made = ListOffsetsRequest.for_partition("t", 3, LATEST_TIMESTAMP, replica_id=2, current_leader_epoch=7, max_num_offsets=4)
    by_hand = ListOffsetsRequest(
        replica_id=2,
        isolation_level=0,
        topics=[ListOffsetsTopic(name="t", partitions=[ListOffsetsPartition(partition_index=3, current_leader_epoch=7, timestamp=LATEST_TIMESTAMP, max_num_offsets=4)])],
    )
    assert made == by_hand
    assert LIST_OFFSETS.request(version).encode(made) == LIST_OFFSETS.request(version).encode(by_hand)


def test_both_offset_fetch_schemas_share_one_message_set():
    assert APIS[9] is OFFSET_FETCH and ALL_APIS[9] is OFFSET_FETCH_FULL
    assert (OFFSET_FETCH.max_version, OFFSET_FETCH_FULL.max_version) == (5, 9)
    assert OFFSET_FETCH.request_type is OFFSET_FETCH_FULL.request_type is offset_fetch.OffsetFetchRequest
    assert OFFSET_FETCH.response_type is OFFSET_FETCH_FULL.response_type is offset_fetch.OffsetFetchResponse
    # Kafka's names for the v8+ nested structs are the same classes.
    assert offset_fetch.OffsetFetchRequestTopics is offset_fetch.OffsetFetchRequestTopic
    assert offset_fetch.OffsetFetchResponseTopics is offset_fetch.OffsetFetchResponseTopic
    assert offset_fetch.OffsetFetchResponsePartitions is offset_fetch.OffsetFetchResponsePartition
