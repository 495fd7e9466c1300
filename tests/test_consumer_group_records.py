"""The ``__consumer_offsets`` records of consumer-protocol groups (KIP-848):
Kafka's layouts (``ConsumerGroup*Key`` / ``ConsumerGroup*Value``, spelled
out by hand here), and a group's state read back from its records."""

from __future__ import annotations

import struct
import uuid

import pytest

from kclient.broker.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from kclient.broker.group.consumer_records import group_records, records_to_write, replay
from kclient.broker.group.reconciliation import UNREVOKED_PARTITIONS, MemberAssignment, freeze

pytestmark = pytest.mark.unit

T1 = uuid.UUID("0123456789abcdef0123456789abcdef")


def s16(text: str) -> bytes:
    """A non-flexible string: int16 length, UTF-8."""
    return struct.pack(">h", len(text)) + text.encode()


def group() -> ConsumerGroup:
    g = ConsumerGroup("g")
    g.group_epoch, g.assignment_epoch = 5, 5
    m = ConsumerGroupMember(member_id="m", client_id="c", client_host="/1.2.3.4", rebalance_timeout_ms=3000, subscribed_topic_names=("t",))
    g.add(m)
    g.target["m"] = freeze({T1: {0}})
    g.set_assignment(m, MemberAssignment(state=UNREVOKED_PARTITIONS, member_epoch=4, previous_member_epoch=3, assigned=freeze({T1: {0}}), pending_revocation=freeze({T1: {1}})))
    return g


def test_kafkas_layouts():
    records = group_records(group())
    # ConsumerGroupMetadataKey v3 -> ConsumerGroupMetadataValue v0 (flexible: int32 epoch, no tags).
    assert records[struct.pack(">h", 3) + s16("g")] == struct.pack(">hi", 0, 5) + b"\x00"
    # ConsumerGroupCurrentMemberAssignmentKey v8: epochs, the MemberState byte (1: unrevoked), compact arrays.
    value = records[struct.pack(">h", 8) + s16("g") + s16("m")]
    topic = lambda p: T1.bytes + b"\x02" + struct.pack(">i", p) + b"\x00"  # noqa: E731
    assert value == struct.pack(">hiib", 0, 4, 3, 1) + b"\x02" + topic(0) + b"\x02" + topic(1) + b"\x00"
    # ConsumerGroupMemberMetadataValue v0: nullable instance and rack ids, ids, subscription, timeout, assignor.
    member = records[struct.pack(">h", 5) + s16("g") + s16("m")]
    assert member == struct.pack(">h", 0) + b"\x00\x00" + b"\x02c" + b"\x09/1.2.3.4" + b"\x02\x02t" + b"\x00" + struct.pack(">i", 3000) + b"\x00" + b"\x00"


def test_a_group_read_back_from_its_records():
    original = group()
    loaded: dict[str, ConsumerGroup] = {}
    for key, value in group_records(original).items():
        replay(loaded, key, value)
    g = loaded["g"]
    assert (g.group_epoch, g.assignment_epoch, g.target) == (5, 5, original.target)
    m = g.members["m"]
    assert m.assignment == original.members["m"].assignment
    assert (m.client_id, m.client_host, m.rebalance_timeout_ms, m.subscribed_topic_names) == ("c", "/1.2.3.4", 3000, ("t",))
    assert g.partition_epochs == {(T1, 0): 4, (T1, 1): 4}
    assert group_records(g) == group_records(original)


def test_a_member_removed_is_tombstoned_and_read_back_removed():
    g = group()
    written = group_records(g)
    g.remove("m")
    delta = records_to_write(written, group_records(g))
    tombstones = [k for k, v in delta if v is None]
    assert [struct.unpack_from(">h", k)[0] for k in tombstones] == [8, 7, 5]  # Kafka's order
    loaded: dict[str, ConsumerGroup] = {}
    for key, value in [*written.items(), *delta]:
        replay(loaded, key, value)
    assert loaded["g"].members == {} and loaded["g"].partition_epochs == {}


def test_offsets_of_a_group_with_consumer_protocol_members_do_not_expire():
    """The offsets manager asks its ``in_use`` predicates (the consumer
    group coordinator's) before expiring a group's offsets."""
    import trio

    from kclient.broker.group.metadata_manager import GroupMetadataManager
    from kclient.broker.group.records import OffsetAndMetadata
    from kclient.config import BrokerConfig
    from kclient.errors import NONE

    class Overrides:
        def update(self, topic, configs):
            pass

    class Leader:
        is_leader = True

    manager = GroupMetadataManager(BrokerConfig(), None, None, Overrides())  # type: ignore[arg-type]
    for index in range(manager.num_partitions):
        manager.loaded[index] = Leader()  # type: ignore[assignment]
    old = OffsetAndMetadata(offset=1, metadata="", commit_timestamp=0, leader_epoch=-1, expire_timestamp=-1)
    manager.offsets = {"busy": {("t", 0): old}, "idle": {("t", 0): old}}
    manager.in_use.append(lambda group_id: group_id == "busy")
    appended = []

    async def append(group_id, records):
        appended.append(group_id)
        return NONE

    manager.append = append  # type: ignore[method-assign]
    assert trio.run(manager.expire_offsets, 10**12) == 1
    assert appended == ["idle"] and manager.offsets == {"busy": {("t", 0): old}}
