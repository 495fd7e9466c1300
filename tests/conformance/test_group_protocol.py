"""The classic group membership and offset APIs, spoken with raw requests to
each broker's group coordinator (Kafka protocol guide, group membership and
offset APIs; KIP-394 member ids; KIP-896 removed versions): the same
sequence of requests gets the same answers from the bundled broker, Kafka 4
and Kafka 3.9, except where Kafka itself changed on purpose (asserted per
broker, with the reason).
"""

from __future__ import annotations

import concurrent.futures
import functools
import uuid

import pytest
from helpers.raw import SocketClient
from helpers.raw import make_topic as raw_make_topic
from helpers.wait import retry as _retry

from kclient.protocol import consumer_protocol as cp
from kclient.protocol.messages import (
    API_VERSIONS,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
)

TIMEOUT = 60.0
#: Coordinator errors answered while the group's ``__consumer_offsets``
#: partition is created, elected or loaded.
NOT_READY = (14, 15, 16)


def client(target, name: str) -> SocketClient:
    return SocketClient(target.host, target.port, client_id=name, timeout=TIMEOUT)


#: Call until the answer is the awaited one (coordinator loading, topic creation).
retry = functools.partial(_retry, timeout=TIMEOUT)


#: Auto-create a topic and wait for its leaders (within this module's TIMEOUT).
make_topic = functools.partial(raw_make_topic, timeout=TIMEOUT)


def commit_body(group: str, topic: str, offsets: dict[int, int], *, generation: int = -1, member: str = "", metadata: str = "meta") -> dict:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "group_instance_id": None,
        "retention_time_ms": -1,
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


def commit(c, group, topic, offsets, *, version=7, **kw) -> dict[int, int]:
    response = c.request(OFFSET_COMMIT, version, commit_body(group, topic, offsets, **kw))
    return {p["partition_index"]: p["error_code"] for t in response["topics"] for p in t["partitions"]}


def committed(c, group, topic, partition=0) -> int:
    body = c.request(OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [partition]}]})
    return body["topics"][0]["partitions"][0]["committed_offset"]


def ready(c, group: str) -> None:
    """FindCoordinator answers, and the coordinator has loaded the group's
    partition (a Heartbeat is answered with a membership error, not a
    coordinator error)."""
    retry(lambda: c.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0}), lambda r: r["error_code"] == 0, "coordinator")
    retry(lambda: c.request(OFFSET_FETCH, 5, {"group_id": group, "topics": []})["error_code"], lambda code: code not in NOT_READY, "a loaded coordinator")


def join(c, group, member_id="", *, version=5, session_ms=10000, protocols=("range",)) -> dict:
    metadata = cp.encode_subscription(["t"], None, version=0)
    body = {
        "group_id": group,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": 20000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": n, "metadata": metadata} for n in protocols],
        "reason": None,
    }
    return c.request(JOIN_GROUP, version, body)


def sync(c, group, generation, member_id, assignments=()) -> dict:
    body = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments],
    }
    return c.request(SYNC_GROUP, 3, body)


def heartbeat(c, group, generation, member_id) -> int:
    return c.request(HEARTBEAT, 3, {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None})["error_code"]


def test_membership_and_offsets(target):
    """Join (v3 without and v5 with KIP-394's MEMBER_ID_REQUIRED), sync,
    heartbeats, commits by generation, a second member's rebalance, the
    leader's assignments, DescribeGroups / ListGroups / DeleteGroups, and
    LeaveGroup: every answer the same on every broker."""
    topic = f"members-{uuid.uuid4().hex[:6]}"
    group = f"members-{uuid.uuid4().hex[:6]}"
    pool = concurrent.futures.ThreadPoolExecutor(2)
    with client(target, "member-a") as a, client(target, "member-b") as b, client(target, "admin") as admin:
        make_topic(admin, topic)
        ready(admin, group)
        assert heartbeat(admin, group, 0, "nobody") == 25  # UNKNOWN_MEMBER_ID
        assert commit(admin, group, "no-such-" + uuid.uuid4().hex[:6], {0: 1}) == {0: 3}  # UNKNOWN_TOPIC_OR_PARTITION
        assert commit(admin, group, topic, {0: 1}, metadata="x" * 5000) == {0: 12}  # OFFSET_METADATA_TOO_LARGE
        assert commit(admin, group + "-none", topic, {0: 1}, generation=3, member="m") == {0: 22}  # ILLEGAL_GENERATION

        first = join(a, group, version=3)  # v0-3: a member id at once
        assert (first["error_code"], first["generation_id"], first["protocol_name"]) == (0, 1, "range")
        ma = first["member_id"]
        assert first["leader"] == ma and ma.startswith("member-a-")
        assignment_a = cp.encode_assignment([(topic, [0, 1])], None, version=0)
        synced = sync(a, group, 1, ma, [(ma, assignment_a)])
        assert (synced["error_code"], synced["assignment"]) == (0, assignment_a)
        assert heartbeat(a, group, 1, ma) == 0
        assert heartbeat(a, group, 0, ma) == 22  # ILLEGAL_GENERATION
        assert heartbeat(a, group, 1, "stranger") == 25
        assert commit(a, group, topic, {0: 5}, generation=1, member=ma) == {0: 0}
        assert commit(a, group, topic, {0: 5}) == {0: 25}  # a standalone commit while the group has members

        def join_b() -> tuple[dict, dict]:
            required = join(b, group)  # v5: MEMBER_ID_REQUIRED, then join with the id (KIP-394)
            return required, join(b, group, required["member_id"])

        pending = pool.submit(join_b)
        retry(lambda: heartbeat(a, group, 1, ma), lambda code: code == 27, "REBALANCE_IN_PROGRESS")
        assert commit(a, group, topic, {0: 6}, generation=1, member=ma) == {0: 0}  # allowed while preparing
        rejoined = join(a, group, ma)
        required, joined_b = pending.result(TIMEOUT)
        assert required["error_code"] == 79 and required["member_id"]
        assert rejoined["generation_id"] == joined_b["generation_id"] == 2
        mb = joined_b["member_id"]
        leader_id = rejoined["leader"]
        assert leader_id == joined_b["leader"] == ma  # the member that stayed leads
        assert sorted(m["member_id"] for m in rejoined["members"]) == sorted([ma, mb]) and joined_b["members"] == []
        to_a = cp.encode_assignment([(topic, [0])], None, version=0)
        to_b = cp.encode_assignment([(topic, [1])], None, version=0)
        follower = pool.submit(sync, b, group, 2, mb)
        assert sync(a, group, 2, ma, [(ma, to_a), (mb, to_b)])["assignment"] == to_a
        assert follower.result(TIMEOUT)["assignment"] == to_b
        assert commit(a, group, topic, {0: 7}, generation=1, member=ma) == {0: 22}  # an old generation

        described = admin.request(DESCRIBE_GROUPS, 4, {"groups": [group, "never-" + group], "include_authorized_operations": False})
        # Matched by group id: Kafka 4 answers the groups of one request in
        # its own order (grouped by __consumer_offsets partition), Kafka 3.9
        # and the bundled broker in the request's order.
        by_id = {g["group_id"]: g for g in described["groups"]}
        mine, unknown = by_id[group], by_id["never-" + group]
        assert (mine["error_code"], mine["group_state"], mine["protocol_type"], mine["protocol_data"]) == (0, "Stable", "consumer", "range")
        members = {m["member_id"]: m for m in mine["members"]}
        assert set(members) == {ma, mb} and members[mb]["member_assignment"] == to_b
        assert (members[ma]["client_id"], members[ma]["client_host"]) == ("member-a", "/127.0.0.1")
        assert (unknown["error_code"], unknown["group_state"], unknown["members"]) == (0, "Dead", [])
        listed = admin.request(LIST_GROUPS, 2, {})
        assert (group, "consumer") in {(g["group_id"], g["protocol_type"]) for g in listed["groups"]}
        assert admin.request(DELETE_GROUPS, 1, {"groups_names": [group]})["results"] == [{"group_id": group, "error_code": 68}]  # NON_EMPTY_GROUP

        left = b.request(LEAVE_GROUP, 3, {"group_id": group, "members": [{"member_id": mb, "group_instance_id": None}]})
        assert (left["error_code"], left["members"][0]["error_code"]) == (0, 0)
        assert heartbeat(a, group, 2, ma) == 27
        alone = join(a, group, ma)
        assert (alone["generation_id"], alone["leader"]) == (3, ma)
        assert sync(a, group, 3, ma, [(ma, assignment_a)])["error_code"] == 0
        assert a.request(LEAVE_GROUP, 0, {"group_id": group, "member_id": ma})["error_code"] == 0
        assert admin.request(DESCRIBE_GROUPS, 0, {"groups": [group]})["groups"][0]["group_state"] == "Empty"
        assert heartbeat(a, group, 3, ma) == 25
        assert committed(admin, group, topic) == 6  # the offsets outlive the members
        assert admin.request(DELETE_GROUPS, 1, {"groups_names": [group]})["results"] == [{"group_id": group, "error_code": 0}]
        assert committed(admin, group, topic) == -1
        assert admin.request(DELETE_GROUPS, 0, {"groups_names": [group]})["results"] == [{"group_id": group, "error_code": 69}]  # GROUP_ID_NOT_FOUND
    pool.shutdown()


def test_join_refusals(target):
    group = f"refusals-{uuid.uuid4().hex[:6]}"
    with client(target, "p1") as a, client(target, "p2") as b:
        ready(a, group)
        assert join(a, group, session_ms=100)["error_code"] == 26  # INVALID_SESSION_TIMEOUT (below group.min.session.timeout.ms)
        first = join(a, group, version=3, protocols=("range",))
        assert first["error_code"] == 0
        assert join(b, group, version=3, protocols=("roundrobin",))["error_code"] == 23  # INCONSISTENT_GROUP_PROTOCOL
        assert join(a, group, "unknown-member", version=3)["error_code"] == 25
        assert a.request(LEAVE_GROUP, 0, {"group_id": group, "member_id": first["member_id"]})["error_code"] == 0


def test_empty_group_id_where_kafka_accepts_it(target):
    """Kafka accepts the empty group id in OffsetCommit and OffsetFetch (for
    clients that commit without a group) and in DescribeGroups and
    DeleteGroups (to see and delete those offsets), and refuses it with
    INVALID_GROUP_ID in the membership APIs (GroupCoordinator.isValidGroupId).
    The bundled broker refused it everywhere before."""
    topic = f"empty-group-{uuid.uuid4().hex[:6]}"
    with client(target, "empty-group") as c:
        make_topic(c, topic)
        ready(c, "")
        assert commit(c, "", topic, {0: 42}) == {0: 0}
        fetched = c.request(OFFSET_FETCH, 5, {"group_id": "", "topics": [{"name": topic, "partition_indexes": [0]}]})
        assert fetched["error_code"] == 0
        assert (fetched["topics"][0]["partitions"][0]["committed_offset"], fetched["topics"][0]["partitions"][0]["error_code"]) == (42, 0)
        described = c.request(DESCRIBE_GROUPS, 4, {"groups": [""], "include_authorized_operations": False})["groups"][0]
        assert (described["error_code"], described["group_state"], described["members"]) == (0, "Empty", [])
        assert join(c, "")["error_code"] == 24  # INVALID_GROUP_ID
        assert heartbeat(c, "", 1, "m") == 24
        assert c.request(DELETE_GROUPS, 1, {"groups_names": [""]})["results"] == [{"group_id": "", "error_code": 0}]
        assert committed(c, "", topic) == -1


def fetch_v0(c, group, topic, partition=0) -> tuple[int, int]:
    body = c.request(OFFSET_FETCH, 0, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [partition]}]})
    p = body["topics"][0]["partitions"][0]
    return p["committed_offset"], p["error_code"]


def test_offset_commit_and_fetch_v0_use_zookeeper_until_kafka_4_removed_them(target):
    """OffsetCommit v0 and OffsetFetch v0 are Kafka 0.8.1's offset API,
    backed by ZooKeeper (``/consumers/<group>/offsets/<topic>/<partition>``):
    Kafka in ZooKeeper mode (3.9) still writes and reads them there, apart
    from the coordinator's ``__consumer_offsets``; the bundled broker does
    the same (it stored v0 commits in ``__consumer_offsets`` and had no
    OffsetFetch v0 before). Kafka 4.0 removed OffsetCommit v0-1 and
    OffsetFetch v0 (KIP-896): it advertises the new minimums and closes the
    connection of a request at a removed version, as for any unsupported
    version."""
    topic = f"versions-{uuid.uuid4().hex[:6]}"
    group = f"versions-{uuid.uuid4().hex[:6]}"
    with client(target, "versions") as c:
        versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in c.request(API_VERSIONS, 0, {})["api_keys"]}
        make_topic(c, topic)
        ready(c, group)
    commit_min, fetch_min = (2, 1) if target.name == "kafka-4" else (0, 0)
    assert (versions[OFFSET_COMMIT.key][0], versions[OFFSET_FETCH.key][0]) == (commit_min, fetch_min)
    with client(target, "versions") as c:
        if target.name == "kafka-4":
            with pytest.raises(ConnectionError):
                commit(c, group, topic, {0: 10}, version=0)
        else:
            assert fetch_v0(c, group, topic) == (-1, 3)  # nothing there: UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers
            assert commit(c, group, topic, {0: 10}, version=0) == {0: 0}
            assert fetch_v0(c, group, topic) == (10, 0)
            assert committed(c, group, topic) == -1, "a v0 commit is in ZooKeeper, not __consumer_offsets"
    with client(target, "versions") as c:
        if target.name == "kafka-4":
            with pytest.raises(ConnectionError):
                commit(c, group, topic, {0: 11}, version=1)
        else:
            assert commit(c, group, topic, {0: 11}, version=1) == {0: 0}
            assert committed(c, group, topic) == 11
            assert fetch_v0(c, group, topic) == (10, 0), "v1+ commits go to __consumer_offsets only"
    with client(target, "versions") as c:
        assert commit(c, group, topic, {0: 12}, version=2) == {0: 0}
        assert committed(c, group, topic) == 12
