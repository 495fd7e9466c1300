"""The group coordinator and offset manager of the bundled broker
(`kclient.broker.group`), spoken to with raw requests: a real broker
process registered in a real ZooKeeper, over loopback.

Covers the ``__consumer_offsets`` layout (Java's ``String.hashCode``
placement, Kafka's record schemas, byte for byte), FindCoordinator,
OffsetCommit v0-7 / OffsetFetch v0-5, the membership protocol (KIP-394
member ids, generations, rebalances, session expiry, LeaveGroup),
ListGroups / DescribeGroups / DeleteGroups, offset expiry with
tombstones, and a restart after which the broker loads its groups and
offsets back from the log.
"""

from __future__ import annotations

import concurrent.futures
import struct
import uuid

import attrs
import pytest
from helpers.raw import SocketClient, fetch_body, make_topic, peer_has_read_all
from helpers.wait import retry, wait_for, wait_for_async

from kclient.broker.group.records import (
    OFFSETS_TOPIC,
    GroupKey,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
    partition_for,
)
from kclient.protocol import consumer_protocol as cp
from kclient.protocol.messages import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from kclient.protocol.records import iter_record_set
from kclient.testing import BrokerProcess

TIMEOUT = 30.0
OFFSETS_PARTITIONS = 4
BROKER_PROPERTIES = {
    "num.partitions": 2,
    "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
    "offsets.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 500,
    "offsets.retention.check.interval.ms": 200,
}


# ---------------------------------------------------------------- pure: placement and records


@pytest.mark.unit
def test_java_string_hash_matches_java():
    # Values of Java's String.hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("my-group") == -1906497762
    # A supplementary character hashes as its two UTF-16 code units.
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00
    # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("my-group", 50) == 1906497762 % 50


def _s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


@pytest.mark.unit
def test_offset_records_are_kafkas_layout():
    key = encode_offset_key("g", "orders", 3)
    assert key == struct.pack(">h", 1) + _s16("g") + _s16("orders") + struct.pack(">i", 3)
    assert decode_key(key) == OffsetKey("g", "orders", 3)
    # v0 keys (Kafka 0.8.2) have the same layout.
    assert decode_key(struct.pack(">h", 0) + key[2:]) == OffsetKey("g", "orders", 3)
    v3 = encode_offset_value(OffsetAndMetadata(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=7))
    assert v3 == struct.pack(">hqi", 3, 42, 7) + _s16("m") + struct.pack(">q", 1000)
    v1 = encode_offset_value(OffsetAndMetadata(offset=42, metadata="", commit_timestamp=1000, expire_timestamp=5000))
    assert v1 == struct.pack(">hq", 1, 42) + _s16("") + struct.pack(">qq", 1000, 5000)
    v0 = struct.pack(">hq", 0, 9) + _s16("x") + struct.pack(">q", 77)
    assert decode_offset_value(v0) == OffsetAndMetadata(offset=9, metadata="x", commit_timestamp=77)
    assert decode_offset_value(v3).leader_epoch == 7 and decode_offset_value(v1).expire_timestamp == 5000


@pytest.mark.unit
def test_group_records_are_kafkas_layout():
    assert encode_group_key("g") == struct.pack(">h", 2) + _s16("g")
    assert decode_key(encode_group_key("g")) == GroupKey("g")
    member = MemberRecord("m-1", "client", "/127.0.0.1", 30000, 10000, b"\x00\x01", b"\x02")
    record = GroupRecord("consumer", 5, "range", "m-1", 1234, (member,))
    data = encode_group_value(record)
    expected = (
        struct.pack(">h", 3) + _s16("consumer") + struct.pack(">i", 5) + _s16("range") + _s16("m-1") + struct.pack(">q", 1234)
        + struct.pack(">i", 1) + _s16("m-1") + struct.pack(">h", -1) + _s16("client") + _s16("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000) + struct.pack(">i", 2) + b"\x00\x01" + struct.pack(">i", 1) + b"\x02"
    )
    assert data == expected
    assert decode_group_value(data) == record
    # Version 0 (no rebalance timeout, no state timestamp) still loads.
    v0 = encode_group_value(GroupRecord("consumer", 1, None, None, -1, ()), version=0)
    assert decode_group_value(v0) == GroupRecord("consumer", 1, None, None, -1, ())


# ---------------------------------------------------------------- the broker


@pytest.fixture(scope="module")
def gzk(zookeeper) -> str:
    """This module's own chroot: the session ZooKeeper's root holds other
    brokers (with their own ``__consumer_offsets``)."""
    return zookeeper.connect_string(f"groups-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def gbroker(gzk):
    with BrokerProcess(properties={"zookeeper.connect": gzk, **BROKER_PROPERTIES}) as proc:
        yield proc


def client(broker, name: str = "test-groups") -> SocketClient:
    return SocketClient(broker.host, broker.port, client_id=name, timeout=TIMEOUT)


def find_coordinator(c: SocketClient, group: str) -> dict:
    return retry(lambda: c.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0}), ok=lambda r: r["error_code"] == 0, what="coordinator")


def commit(c, group, topic, offsets, *, version=7, generation=-1, member="", metadata="meta", retention=-1) -> dict:
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "group_instance_id": None,
        "retention_time_ms": retention,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "commit_timestamp": -1, "committed_metadata": metadata}
                    for p, o in offsets.items()
                ],
            }
        ],
    }
    response = c.request(OFFSET_COMMIT, version, body)
    return {p["partition_index"]: p["error_code"] for t in response["topics"] for p in t["partitions"]}


def fetch_offsets(c, group, topic=None, partitions=(0, 1), *, version=5) -> dict:
    topics = None if topic is None else [{"name": topic, "partition_indexes": list(partitions)}]
    return c.request(OFFSET_FETCH, version, {"group_id": group, "topics": topics})


def test_find_coordinator_creates_the_compacted_offsets_topic(gbroker, gzk):
    with client(gbroker) as c:
        for version in (0, 1, 2):
            body = retry(
                lambda v=version: c.request(FIND_COORDINATOR, v, {"key": "some-group", "key_type": 0}), ok=lambda r: r["error_code"] == 0
            )
            assert (body["node_id"], body["host"], body["port"]) == (0, gbroker.host, gbroker.port)
        meta = c.request(METADATA, 4, {"topics": [{"name": OFFSETS_TOPIC}], "allow_auto_topic_creation": False})
        (t,) = meta["topics"]
        assert t["error_code"] == 0 and t["is_internal"] is True
        assert len(t["partitions"]) == OFFSETS_PARTITIONS
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=gzk)
    zk.start(timeout=TIMEOUT)
    try:
        data, _ = zk.get(f"/config/topics/{OFFSETS_TOPIC}")
    finally:
        zk.stop()
        zk.close()
    assert b'"cleanup.policy": "compact"' in data or b'"cleanup.policy":"compact"' in data


@pytest.mark.parametrize("version", range(8))
def test_offset_commit_and_fetch_every_version(gbroker, topic, version):
    group = f"simple-{version}-{uuid.uuid4().hex[:6]}"
    with client(gbroker) as c:
        make_topic(c, topic)
        find_coordinator(c, group)
        errors = retry(lambda: commit(c, group, topic, {0: 10 + version, 1: 20}, version=version), ok=lambda e: 14 not in e.values())
        assert errors == {0: 0, 1: 0}
        if version == 0:
            # Kafka 0.8.1's API: v0 commits and fetches go to ZooKeeper
            # (as Kafka in ZooKeeper mode, up to 3.9), not to __consumer_offsets.
            body = c.request(OFFSET_FETCH, 0, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1, 5]}]})
            got = {p["partition_index"]: (p["committed_offset"], p["error_code"]) for p in body["topics"][0]["partitions"]}
            assert got == {0: (10, 0), 1: (20, 0), 5: (-1, 3)}
            assert fetch_offsets(c, group, topic, (0,))["topics"][0]["partitions"][0]["committed_offset"] == -1
            return
        for fetch_version in (1, 2, 3, 4, 5):
            body = fetch_offsets(c, group, topic, (0, 1, 5), version=fetch_version)
            got = {p["partition_index"]: (p["committed_offset"], p["metadata"], p["error_code"]) for p in body["topics"][0]["partitions"]}
            assert got == {0: (10 + version, "meta", 0), 1: (20, "meta", 0), 5: (-1, "", 0)}
            if fetch_version >= 2:
                assert body["error_code"] == 0
                everything = fetch_offsets(c, group, None, version=fetch_version)
                assert {(t["name"], p["partition_index"], p["committed_offset"]) for t in everything["topics"] for p in t["partitions"]} == {
                    (topic, 0, 10 + version),
                    (topic, 1, 20),
                }


def test_offset_commit_refusals(gbroker, topic):
    group = f"refusals-{uuid.uuid4().hex[:6]}"
    with client(gbroker) as c:
        make_topic(c, topic)
        find_coordinator(c, group)
        assert commit(c, group, "no-such-topic-" + uuid.uuid4().hex[:6], {0: 1}) == {0: 3}  # UNKNOWN_TOPIC_OR_PARTITION
        assert commit(c, group, topic, {0: 1}, metadata="x" * 5000) == {0: 12}  # OFFSET_METADATA_TOO_LARGE
        # The empty group id: accepted by the offset APIs, refused by the
        # membership APIs (Kafka's GroupCoordinator.isValidGroupId).
        assert commit(c, "", topic, {0: 1}) == {0: 0}
        assert join(c, "")["error_code"] == 24  # INVALID_GROUP_ID
        # A generation for a group that does not exist.
        assert commit(c, group, topic, {0: 1}, generation=3, member="m") == {0: 22}  # ILLEGAL_GENERATION


def test_commits_are_kafka_records_in_the_offsets_partition(gbroker, topic):
    group = f"records-{uuid.uuid4().hex[:6]}"
    with client(gbroker) as c:
        make_topic(c, topic)
        find_coordinator(c, group)
        assert commit(c, group, topic, {1: 99}, metadata="hello") == {1: 0}
        index = partition_for(group, OFFSETS_PARTITIONS)
        body = c.request(FETCH, 11, fetch_body(OFFSETS_TOPIC, [(index, 0)], max_wait_ms=0))
        data = body["responses"][0]["partitions"][0]["records"]
    found = [r for r in iter_record_set(data) if decode_key(r.key) == OffsetKey(group, topic, 1)]
    assert found, "the commit is not in its __consumer_offsets partition"
    assert found[-1].key[:2] == b"\x00\x01" and found[-1].value[:2] == b"\x00\x03"
    value = decode_offset_value(found[-1].value)
    assert (value.offset, value.metadata) == (99, "hello")


# ---------------------------------------------------------------- membership


def join(c, group, member_id="", *, version=5, session_ms=6000, rebalance_ms=10000, topics=("t",), protocols=("range",)):
    metadata = cp.encode_subscription(list(topics), None, version=0)
    return c.request(
        JOIN_GROUP,
        version,
        {
            "group_id": group,
            "session_timeout_ms": session_ms,
            "rebalance_timeout_ms": rebalance_ms,
            "member_id": member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": name, "metadata": metadata} for name in protocols],
        },
    )


def sync(c, group, generation, member_id, assignments=(), *, version=3):
    return c.request(
        SYNC_GROUP,
        version,
        {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None,
         "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]},
    )


def heartbeat(c, group, generation, member_id) -> int:
    return c.request(HEARTBEAT, 3, {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None})["error_code"]


def join_with_id(c, group, **kw) -> dict:
    """JoinGroup v4+: MEMBER_ID_REQUIRED first (KIP-394), then join."""
    first = join(c, group, **kw)
    assert first["error_code"] == 79 and first["member_id"]  # MEMBER_ID_REQUIRED
    return join(c, group, first["member_id"], **kw)


def test_membership_protocol(gbroker, topic):
    group = f"members-{uuid.uuid4().hex[:6]}"
    pool = concurrent.futures.ThreadPoolExecutor(4)
    with client(gbroker, "member-a") as a, client(gbroker, "member-b") as b, client(gbroker, "admin") as admin:
        make_topic(admin, topic)
        find_coordinator(admin, group)
        retry(lambda: heartbeat(admin, group, 0, "nobody"), ok=lambda code: code == 25)  # loaded, unknown member
        # v0-3 get a member id at once.
        first = join(a, group, version=3)
        assert first["error_code"] == 0 and first["generation_id"] == 1
        assert first["leader"] == first["member_id"] and first["protocol_name"] == "range"
        assert [m["member_id"] for m in first["members"]] == [first["member_id"]]
        ma = first["member_id"]
        assert ma.startswith("member-a-")
        assignment_a = cp.encode_assignment([(topic, [0, 1])], None, version=0)
        assert sync(a, group, 1, ma, [(ma, assignment_a)]) == {"throttle_time_ms": 0, "error_code": 0, "assignment": assignment_a}
        assert heartbeat(a, group, 1, ma) == 0
        assert heartbeat(a, group, 0, ma) == 22  # ILLEGAL_GENERATION
        assert heartbeat(a, group, 1, "stranger") == 25  # UNKNOWN_MEMBER_ID
        assert commit(a, group, topic, {0: 5}, generation=1, member=ma) == {0: 0}
        assert commit(a, group, topic, {0: 5}, generation=-1, member="") == {0: 25}  # the group has members

        # A second member (v5: KIP-394): the join waits for the first to rejoin.
        pending_b = pool.submit(join_with_id, b, group)
        retry(lambda: heartbeat(a, group, 1, ma), ok=lambda code: code == 27, what="REBALANCE_IN_PROGRESS")
        assert commit(a, group, topic, {0: 6}, generation=1, member=ma) == {0: 0}  # allowed while preparing
        rejoin_a = join(a, group, ma)
        joined_b = pending_b.result(TIMEOUT)
        assert rejoin_a["generation_id"] == joined_b["generation_id"] == 2
        mb = joined_b["member_id"]
        leader, follower = (a, b) if rejoin_a["leader"] == ma else (b, a)
        leader_id = rejoin_a["leader"]
        follower_id = mb if leader_id == ma else ma
        assert rejoin_a["leader"] == joined_b["leader"]
        leader_view = rejoin_a if leader_id == ma else joined_b
        assert sorted(m["member_id"] for m in leader_view["members"]) == sorted([ma, mb])
        assert (joined_b if leader_id == ma else rejoin_a)["members"] == []
        # The follower's SyncGroup waits for the leader's assignments.
        to_follower = cp.encode_assignment([(topic, [1])], None, version=0)
        to_leader = cp.encode_assignment([(topic, [0])], None, version=0)
        sent = follower.requests_sent
        follower_sync = pool.submit(sync, follower, group, 2, follower_id)
        wait_for(lambda: follower.requests_sent > sent and peer_has_read_all(follower.sock), "the broker to read the follower's SyncGroup")
        assert not follower_sync.done()  # parked: its answer (below) carries the leader's assignment
        assert sync(leader, group, 2, leader_id, [(leader_id, to_leader), (follower_id, to_follower)])["assignment"] == to_leader
        assert follower_sync.result(TIMEOUT)["assignment"] == to_follower
        assert commit(a, group, topic, {0: 7}, generation=1, member=ma) == {0: 22}  # old generation

        described = admin.request(DESCRIBE_GROUPS, 4, {"groups": [group, "never-seen-" + group], "include_authorized_operations": False})
        mine, unknown = described["groups"]
        assert (mine["error_code"], mine["group_state"], mine["protocol_type"], mine["protocol_data"]) == (0, "Stable", "consumer", "range")
        members = {m["member_id"]: m for m in mine["members"]}
        assert set(members) == {ma, mb}
        assert members[follower_id]["member_assignment"] == to_follower
        assert members[ma]["client_id"] == "member-a" and members[ma]["client_host"] == "/127.0.0.1"
        assert (unknown["error_code"], unknown["group_state"], unknown["members"]) == (0, "Dead", [])
        listed = admin.request(LIST_GROUPS, 2, {})
        assert (group, "consumer") in {(g["group_id"], g["protocol_type"]) for g in listed["groups"]}

        assert admin.request(DELETE_GROUPS, 1, {"groups_names": [group]})["results"] == [{"group_id": group, "error_code": 68}]  # NON_EMPTY_GROUP

        # b leaves: a must rejoin alone (generation 3).
        left = b.request(LEAVE_GROUP, 3, {"group_id": group, "members": [{"member_id": mb, "group_instance_id": None}]})
        assert left["error_code"] == 0 and left["members"][0]["error_code"] == 0
        assert heartbeat(a, group, 2, ma) == 27
        alone = join(a, group, ma)
        assert alone["generation_id"] == 3 and alone["leader"] == ma
        assert sync(a, group, 3, ma, [(ma, assignment_a)])["error_code"] == 0

        # a stops heartbeating: its session (1 s) expires and the group empties.
        short = join(a, group, ma, session_ms=1000)
        assert short["generation_id"] == 4
        assert sync(a, group, 4, ma, [(ma, assignment_a)])["error_code"] == 0
        retry(lambda: admin.request(DESCRIBE_GROUPS, 0, {"groups": [group]})["groups"][0]["group_state"], ok=lambda s: s == "Empty", what="expiry")
        assert heartbeat(a, group, 4, ma) == 25
        # The committed offset survives the members; the empty group can be deleted.
        assert fetch_offsets(admin, group, topic, (0,))["topics"][0]["partitions"][0]["committed_offset"] == 6
        assert admin.request(DELETE_GROUPS, 1, {"groups_names": [group]})["results"] == [{"group_id": group, "error_code": 0}]
        assert fetch_offsets(admin, group, topic, (0,))["topics"][0]["partitions"][0]["committed_offset"] == -1
        assert admin.request(DELETE_GROUPS, 0, {"groups_names": [group]})["results"] == [{"group_id": group, "error_code": 69}]
    pool.shutdown()


def test_inconsistent_protocols_and_session_timeouts(gbroker):
    group = f"protocols-{uuid.uuid4().hex[:6]}"
    with client(gbroker, "p1") as c:
        find_coordinator(c, group)
        assert retry(lambda: join(c, group, session_ms=100), ok=lambda r: r["error_code"] != 14)["error_code"] == 26  # INVALID_SESSION_TIMEOUT
        first = join(c, group, version=3, protocols=("range",))
        assert first["error_code"] == 0
        with client(gbroker, "p2") as other:
            assert join(other, group, version=3, protocols=("roundrobin",))["error_code"] == 23  # INCONSISTENT_GROUP_PROTOCOL
        assert join(c, group, "unknown-member", version=3)["error_code"] == 25
        assert c.request(LEAVE_GROUP, 0, {"group_id": group, "member_id": first["member_id"]})["error_code"] == 0


def test_offsets_expire_with_tombstones(gbroker, topic):
    group = f"expiry-{uuid.uuid4().hex[:6]}"
    with client(gbroker) as c:
        make_topic(c, topic)
        find_coordinator(c, group)
        # OffsetCommit v2-4 carry a retention time: 1 ms.
        assert retry(lambda: commit(c, group, topic, {0: 3}, version=2, retention=1), ok=lambda e: e[0] != 14) == {0: 0}
        assert commit(c, group, topic, {1: 4}, version=2) == {1: 0}  # broker retention (7 days)
        retry(
            lambda: fetch_offsets(c, group, topic, (0, 1))["topics"][0]["partitions"],
            ok=lambda ps: [p["committed_offset"] for p in ps] == [-1, 4],
            what="expiry",
        )
        index = partition_for(group, OFFSETS_PARTITIONS)
        body = c.request(FETCH, 11, fetch_body(OFFSETS_TOPIC, [(index, 0)], max_wait_ms=0))
        data = body["responses"][0]["partitions"][0]["records"]
    values = [r.value for r in iter_record_set(data) if decode_key(r.key) == OffsetKey(group, topic, 0)]
    assert values[-1] is None and decode_offset_value(values[0]).expire_timestamp > 0


def test_restart_loads_groups_and_offsets(zookeeper, tmp_path, topic):
    group = f"restart-{uuid.uuid4().hex[:6]}"
    properties = {"zookeeper.connect": zookeeper.connect + "/restart-" + uuid.uuid4().hex[:6], **BROKER_PROPERTIES}
    with BrokerProcess(log_dir=tmp_path / "logs", properties=properties) as broker:
        with client(broker) as c:
            make_topic(c, topic)
            find_coordinator(c, group)
            joined = retry(lambda: join(c, group, version=3), ok=lambda r: r["error_code"] == 0)
            member = joined["member_id"]
            assignment = cp.encode_assignment([(topic, [0, 1])], None, version=0)
            assert sync(c, group, 1, member, [(member, assignment)])["error_code"] == 0
            assert commit(c, group, topic, {0: 11, 1: 12}, generation=1, member=member) == {0: 0, 1: 0}
        broker.stop()
        broker.start()
        with client(broker) as c:
            find_coordinator(c, group)
            body = retry(lambda: fetch_offsets(c, group, topic, (0, 1)), ok=lambda r: r["error_code"] != 14, what="load")
            assert [p["committed_offset"] for p in body["topics"][0]["partitions"]] == [11, 12]
            # The group came back Stable with its member and generation.
            assert heartbeat(c, group, 1, member) == 0
            described = c.request(DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False})["groups"][0]
            assert described["group_state"] == "Stable"
            assert [(m["member_id"], m["member_assignment"]) for m in described["members"]] == [(member, assignment)]
        assert "loaded 1 group(s), 2 committed offset(s)" in broker.output()


# ---------------------------------------------------------------- acknowledged once replicated


async def test_commit_waits_for_the_isr_and_times_out(tmp_path):
    """A commit is acknowledged only once every ISR member has it: with a
    follower in the ISR that never fetches, it fails with REQUEST_TIMED_OUT
    after ``offsets.commit.timeout.ms``, and the cache keeps the old
    offset. Once the ISR is the leader alone, commits succeed."""
    import trio

    from kclient.broker.components import BrokerComponents
    from kclient.config import BrokerConfig
    from kclient.protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest

    config = BrokerConfig.from_properties(
        {"log.dirs": str(tmp_path / "logs"), "offsets.topic.num.partitions": 1, "offsets.commit.timeout.ms": 300}
    )
    state = BrokerComponents.open(config, advertised_host="127.0.0.1", advertised_port=9)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(state.group_coordinator.run)
            partition_state = LeaderAndIsrPartitionState(
                topic_name=OFFSETS_TOPIC, partition_index=0, controller_epoch=1, leader=0, leader_epoch=1,
                isr=[0, 1], partition_epoch=0, replicas=[0, 1], is_new=True,
            )
            body = LeaderAndIsrRequest(controller_id=0, controller_epoch=1, ungrouped_partition_states=[partition_state])
            assert (await state.replica_manager.leader_and_isr(body, 1)).partition_errors[0].error_code == 0
            manager = state.group_coordinator.manager
            await wait_for_async(lambda: manager.status("g") == 0, "the group's offsets loaded", timeout=TIMEOUT)
            committed = {("t", 0): OffsetAndMetadata(offset=5, commit_timestamp=1)}
            assert await manager.store_offsets("g", committed) == 7  # REQUEST_TIMED_OUT
            assert manager.offsets.get("g") is None
            # The controller shrinks the ISR to the leader: commits go through.
            body.ungrouped_partition_states = [attrs.evolve(partition_state, leader_epoch=2, isr=[0])]
            await state.replica_manager.leader_and_isr(body, 1)
            assert await manager.store_offsets("g", committed) == 0
            assert manager.offsets["g"] == committed
            nursery.cancel_scope.cancel()
    finally:
        state.close()
