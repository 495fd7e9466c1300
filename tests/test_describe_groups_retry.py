"""DescribeGroups answered NOT_COORDINATOR (a new Kafka 4 cluster while its
group coordinator starts, or a coordinator that moved) is retried at the
coordinator looked up again, as Kafka's admin client does. Found by
tests/conformance/test_admin.py: AdminClient.describe_consumer_groups raised
NotCoordinatorError against a fresh Kafka 4.4 broker."""

from __future__ import annotations

import pytest
import trio

from kclient.client import admin_groups
from kclient.errors import NONE, NOT_COORDINATOR
from kclient.protocol.messages.describe_groups import DescribedGroup, DescribeGroupsResponse

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
