"""DescribeGroups answered NOT_COORDINATOR (a new Kafka 4 cluster while its
group coordinator starts, or a coordinator that moved) is retried at the
coordinator looked up again, as Kafka's admin client does. Found by
tests/conformance/test_admin.py: AdminClient.describe_consumer_groups raised
NotCoordinatorError against a fresh Kafka 4.4 broker."""

from __future__ import annotations

import pytest
import trio

from kclient.client import admin_groups
from kclient.errors import COORDINATOR_LOAD_IN_PROGRESS, NONE, NOT_COORDINATOR, NotCoordinatorError
from kclient.protocol.messages.describe_groups import DescribedGroup, DescribeGroupsResponse
from kclient.protocol.messages.offset_fetch import OffsetFetchResponse, OffsetFetchResponsePartition, OffsetFetchResponseTopic

pytestmark = pytest.mark.unit


class FakeConnection:
    def __init__(self, codes):
        self.codes = list(codes)
        self.asked = 0

    def version_for(self, api, **bounds):
        return 4

    async def request(self, api, body, version=None):
        self.asked += 1
        code = self.codes.pop(0)
        return DescribeGroupsResponse(groups=[DescribedGroup(error_code=code, group_id=body.groups[0], group_state="Dead", protocol_type="", protocol_data="", members=[])])


def test_not_coordinator_is_retried(monkeypatch):
    conn = FakeConnection([NOT_COORDINATOR, NOT_COORDINATOR, NONE])

    async def find(cluster, group, *, timeout_ms, backoff_ms):
        return 1, conn

    monkeypatch.setattr(admin_groups, "find_coordinator", find)
    described = trio.run(lambda: admin_groups.describe_groups(None, ["g"], timeout_ms=5000, backoff_ms=1))
    assert described["g"].state == "Dead"
    assert conn.asked == 3


def test_not_coordinator_past_the_deadline_is_raised(monkeypatch):
    conn = FakeConnection([NOT_COORDINATOR] * 1000)

    async def find(cluster, group, *, timeout_ms, backoff_ms):
        return 1, conn

    monkeypatch.setattr(admin_groups, "find_coordinator", find)
    with pytest.raises(NotCoordinatorError):
        trio.run(lambda: admin_groups.describe_groups(None, ["g"], timeout_ms=20, backoff_ms=1))
    assert conn.asked >= 2


class FakeOffsetFetchConnection:
    def __init__(self, codes):
        self.codes = list(codes)
        self.asked = 0

    def version_for(self, api, **bounds):
        return 7

    async def request(self, api, body, version=None):
        self.asked += 1
        partitions = [OffsetFetchResponsePartition(partition_index=0, committed_offset=6), OffsetFetchResponsePartition(partition_index=1)]
        return OffsetFetchResponse(error_code=self.codes.pop(0), topics=[OffsetFetchResponseTopic(name="t", partitions=partitions)])


def test_offset_fetch_is_retried_while_the_coordinator_loads(monkeypatch):
    conn = FakeOffsetFetchConnection([COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, NONE])

    async def find(cluster, group, *, timeout_ms, backoff_ms):
        return 1, conn

    monkeypatch.setattr(admin_groups, "find_coordinator", find)
    offsets = trio.run(lambda: admin_groups.list_group_offsets(None, "g", timeout_ms=5000, backoff_ms=1))
    assert offsets == {("t", 0): 6}
    assert conn.asked == 3
