"""Static group membership (KIP-345, ``group.instance.id``; issue 27) in
the bundled broker's group coordinator and in kclient's poll consumer,
against one bundled broker for the module:

- a static member that restarts within ``session.timeout.ms`` gets its
  partitions back with no rebalance (same generation, the other member's
  listener not called, every record read once);
- the member id it replaced is fenced (FENCED_INSTANCE_ID on Heartbeat,
  SyncGroup, OffsetCommit, JoinGroup and LeaveGroup), spoken to with raw
  requests and through kclient's `GroupMember`;
- a static member that does not come back is removed when its session
  times out, and the group rebalances; one that sits out a rebalance stays
  in the group (its partitions assigned to it) until then;
- LeaveGroup v3+ by instance id; DescribeGroups v4 and the group metadata
  records in ``__consumer_offsets`` carry the instance ids (rebuilt after
  a reload);
- the model (`kclient.broker.group.membership.Group`) and the config
  checks, as unit tests.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import importlib.util
import threading
import uuid

import pytest
import trio
from helpers.groups import group_broker_properties, poll_settings
from helpers.raw import SocketClient, fetch_body, make_topic
from helpers.skips import require
from helpers.static_members import StaticPoller, fill, restart_within_session
from helpers.wait import retry, wait_for

from kclient import Consumer, ConsumerConnector
from kclient.broker.group.membership import STABLE, Group, Member
from kclient.broker.group.records import OFFSETS_TOPIC, GroupKey, decode_group_value, decode_key, encode_group_value, partition_for
from kclient.client.cluster import Cluster
from kclient.client.consumer.group.coordinator import GroupCoordinator
from kclient.client.consumer.group.membership import GroupMember
from kclient.client.consumer.poll.config import poll_settings as settings_of
from kclient.errors import FENCED_INSTANCE_ID, NONE, UNKNOWN_MEMBER_ID, ConfigError, FencedInstanceIdError
from kclient.net.settings import ConnectionSettings
from kclient.protocol import consumer_protocol as cp
from kclient.protocol.messages import DESCRIBE_GROUPS, FETCH, FIND_COORDINATOR, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, OFFSET_COMMIT, SYNC_GROUP
from kclient.protocol.records import iter_record_set
from kclient.testing import BrokerProcess

PARTITIONS = 4
OFFSETS_PARTITIONS = 3
TIMEOUT = 30.0
wait_until = functools.partial(wait_for, timeout=90.0, interval=0.05)


@pytest.fixture(scope="module")
def static_broker():
    with BrokerProcess(properties=group_broker_properties(PARTITIONS), keep_port=True) as proc:
        yield proc


@pytest.fixture
def group() -> str:
    return f"static-{uuid.uuid4().hex[:10]}"


# ---------------------------------------------------------------- raw requests


def client(broker, name: str) -> SocketClient:
    return SocketClient(broker.host, broker.port, client_id=name, timeout=TIMEOUT)


def join(c, group, instance, member_id="", *, session_ms=6000, rebalance_ms=10000, topics=("t",), version=5) -> dict:
    metadata = cp.encode_subscription(list(topics), None, version=0)
    body = {
        "group_id": group,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": rebalance_ms,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": metadata}],
    }
    return c.request(JOIN_GROUP, version, body)


def sync(c, group, generation, member_id, instance, assignments=()) -> dict:
    body = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments],
    }
    return c.request(SYNC_GROUP, 3, body)


def heartbeat(c, group, generation, member_id, instance) -> int:
    body = {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance}
    return c.request(HEARTBEAT, 3, body)["error_code"]


def commit(c, group, topic, generation, member_id, instance) -> int:
    partition = {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "commit_timestamp": -1, "committed_metadata": ""}
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": [partition]}],
    }
    return c.request(OFFSET_COMMIT, 7, body)["topics"][0]["partitions"][0]["error_code"]


def leave(c, group, *members) -> dict:
    return c.request(LEAVE_GROUP, 3, {"group_id": group, "members": [{"member_id": m, "group_instance_id": i} for m, i in members]})


def describe(c, group) -> dict:
    return c.request(DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False})["groups"][0]


def instances(c, group) -> dict[str, str]:
    """``{group instance id: member id}`` as DescribeGroups v4 gives them."""
    return {m["group_instance_id"]: m["member_id"] for m in describe(c, group)["members"]}


def find_coordinator(c, group) -> None:
    retry(lambda: c.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0}), ok=lambda r: r["error_code"] == 0, what="coordinator")


def group_records(c, group) -> list:
    """The group's metadata records in ``__consumer_offsets``, oldest first."""
    index = partition_for(group, OFFSETS_PARTITIONS)
    data = c.request(FETCH, 11, fetch_body(OFFSETS_TOPIC, [(index, 0)]))["responses"][0]["partitions"][0]["records"]
    return [decode_group_value(r.value) for r in iter_record_set(data) if r.value is not None and decode_key(r.key) == GroupKey(group)]


def two_static_members(a, b, group, topic) -> tuple[str, str, int]:
    """``inst-a`` joins alone (generation 1), then ``inst-b`` joins and
    ``inst-a`` rejoins (generation 2); the leader gives each one
    partition. Returns ``(a's member id, b's member id, generation)``."""
    first = retry(lambda: join(a, group, "inst-a"), ok=lambda r: r["error_code"] != 14, what="load")
    assert first["error_code"] == NONE  # no MEMBER_ID_REQUIRED for a static member
    ma = first["member_id"]
    assert ma.startswith("inst-a-") and first["leader"] == ma and first["generation_id"] == 1
    assert first["members"] == [{"member_id": ma, "group_instance_id": "inst-a", "metadata": first["members"][0]["metadata"]}]
    assert sync(a, group, 1, ma, "inst-a", [(ma, cp.encode_assignment([(topic, [0, 1])], None, version=0))])["error_code"] == NONE
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(join, b, group, "inst-b")
        retry(lambda: heartbeat(a, group, 1, ma, "inst-a"), ok=lambda code: code == 27, what="REBALANCE_IN_PROGRESS")
        again = join(a, group, "inst-a", ma)
        joined_b = pending.result(TIMEOUT)
    mb = joined_b["member_id"]
    assert again["generation_id"] == joined_b["generation_id"] == 2 and again["leader"] == ma
    plan = [(ma, cp.encode_assignment([(topic, [0])], None, version=0)), (mb, cp.encode_assignment([(topic, [1])], None, version=0))]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        follower = pool.submit(sync, b, group, 2, mb, "inst-b")
        assert sync(a, group, 2, ma, "inst-a", plan)["error_code"] == NONE
        assert follower.result(TIMEOUT)["assignment"] == plan[1][1]
    return ma, mb, 2


def test_restarted_static_member_replaces_its_old_id_without_a_rebalance(static_broker, group, topic):
    with client(static_broker, "a") as a, client(static_broker, "b") as b, client(static_broker, "a-restarted") as a2:
        make_topic(a, topic)
        find_coordinator(a, group)
        ma, mb, generation = two_static_members(a, b, group, topic)
        leader_assignment = cp.encode_assignment([(topic, [0])], None, version=0)

        # The restarted instance (no member id) is answered at once: same
        # generation, a new member id, the leader named as before (so it
        # syncs as a follower) and no member list.
        rejoined = join(a2, group, "inst-a")
        ma2 = rejoined["member_id"]
        assert rejoined["error_code"] == NONE and ma2 != ma and ma2.startswith("inst-a-")
        assert (rejoined["generation_id"], rejoined["leader"], rejoined["members"]) == (generation, ma, [])
        assert heartbeat(b, group, generation, mb, "inst-b") == NONE  # no rebalance
        assert sync(a2, group, generation, ma2, "inst-a")["assignment"] == leader_assignment
        assert describe(a2, group)["group_state"] == STABLE
        assert instances(a2, group) == {"inst-a": ma2, "inst-b": mb}

        # The old member id is fenced on every request naming the instance id.
        assert heartbeat(a, group, generation, ma, "inst-a") == FENCED_INSTANCE_ID
        assert sync(a, group, generation, ma, "inst-a")["error_code"] == FENCED_INSTANCE_ID
        assert commit(a, group, topic, generation, ma, "inst-a") == FENCED_INSTANCE_ID
        assert join(a, group, "inst-a", ma)["error_code"] == FENCED_INSTANCE_ID
        assert leave(a, group, (ma, "inst-a"))["members"] == [{"member_id": ma, "group_instance_id": "inst-a", "error_code": FENCED_INSTANCE_ID}]
        # Without its instance id it is just unknown; an unknown instance id too.
        assert heartbeat(a, group, generation, ma, None) == UNKNOWN_MEMBER_ID
        assert heartbeat(a, group, generation, ma2, "inst-zzz") == UNKNOWN_MEMBER_ID
        # The new id works: commits, heartbeats; still no rebalance.
        assert commit(a2, group, topic, generation, ma2, "inst-a") == NONE
        assert heartbeat(a2, group, generation, ma2, "inst-a") == NONE

        # The replacement was stored: the last group record names the new id,
        # the generation unchanged, and the instance ids (record v3).
        last = retry(lambda: group_records(a2, group), ok=lambda rs: rs and {m.member_id for m in rs[-1].members} == {ma2, mb}, what="stored")[-1]
        assert last.generation == generation and last.leader == ma2
        assert {m.group_instance_id: m.member_id for m in last.members} == {"inst-a": ma2, "inst-b": mb}
        assert {m.member_id: m.assignment for m in last.members}[ma2] == leader_assignment

        # LeaveGroup v3 by instance id alone (an administrator's removal):
        # the group rebalances without inst-b; an unknown instance id is refused.
        left = leave(a, group, ("", "inst-b"), ("", "inst-nobody"))
        assert left["members"] == [
            {"member_id": "", "group_instance_id": "inst-b", "error_code": NONE},
            {"member_id": "", "group_instance_id": "inst-nobody", "error_code": UNKNOWN_MEMBER_ID},
        ]
        assert heartbeat(a2, group, generation, ma2, "inst-a") == 27
        alone = join(a2, group, "inst-a", ma2)
        assert (alone["generation_id"], alone["leader"]) == (generation + 1, ma2)
        assert instances(a2, group) == {"inst-a": ma2}


def test_static_member_sitting_out_a_rebalance_stays_assigned_until_the_sync_deadline(static_broker, group, topic):
    """A static member that does not rejoin stays in the next generation
    (the leader assigns to it); as in Kafka, one that then does not sync
    within the rebalance timeout is removed (pending sync expiry)."""
    with client(static_broker, "a") as a, client(static_broker, "b") as b, client(static_broker, "c") as c:
        make_topic(a, topic)
        find_coordinator(a, group)
        first = retry(lambda: join(a, group, "inst-a", session_ms=3000, rebalance_ms=1000), ok=lambda r: r["error_code"] != 14, what="load")
        ma = first["member_id"]
        assert sync(a, group, 1, ma, "inst-a", [(ma, b"")])["error_code"] == NONE
        # inst-a stops heartbeating; a dynamic member joins: the rebalance
        # ends after the rebalance timeout without inst-a, which stays a
        # member (the new leader assigns to it too).
        handed = join(c, group, None, session_ms=3000, rebalance_ms=1000)
        assert handed["error_code"] == 79  # MEMBER_ID_REQUIRED: a dynamic member (KIP-394)
        joined_c = join(c, group, None, handed["member_id"], session_ms=3000, rebalance_ms=1000)
        mc = joined_c["member_id"]
        assert joined_c["generation_id"] == 2 and joined_c["leader"] == mc
        assert {m["member_id"]: m["group_instance_id"] for m in joined_c["members"]} == {ma: "inst-a", mc: None}
        assert sync(c, group, 2, mc, None, [(mc, b""), (ma, b"")])["error_code"] == NONE
        assert instances(b, group) == {"inst-a": ma, None: mc}
        # It never syncs: removed, the group rebalances.
        retry(lambda: heartbeat(c, group, 2, mc, None), ok=lambda code: code == 27, what="inst-a's sync deadline")
        assert heartbeat(a, group, 2, ma, "inst-a") == UNKNOWN_MEMBER_ID
        assert instances(b, group) == {None: mc}


def test_static_member_rejoining_during_a_rebalance(static_broker, group, topic):
    """A restarted instance joining while the group prepares a rebalance
    takes part in it under its new id (the leader's role moves with it);
    one joining while the group completes a rebalance starts another one
    (the leader may have assigned to the old id): the parked SyncGroups
    are answered REBALANCE_IN_PROGRESS, the replaced id's FENCED_INSTANCE_ID."""
    with (
        client(static_broker, "a") as a, client(static_broker, "b") as b, client(static_broker, "c") as c,
        client(static_broker, "a2") as a2, client(static_broker, "a3") as a3,
        concurrent.futures.ThreadPoolExecutor(4) as pool,
    ):
        make_topic(a, topic)
        find_coordinator(a, group)
        ma, mb, generation = two_static_members(a, b, group, topic)
        # A dynamic member joins: PreparingRebalance.
        handed = join(c, group, None)
        assert handed["error_code"] == 79
        joining_c = pool.submit(join, c, group, None, handed["member_id"])
        retry(lambda: heartbeat(b, group, generation, mb, "inst-b"), ok=lambda code: code == 27, what="REBALANCE_IN_PROGRESS")
        # inst-a restarts now: parked with the others under its new id.
        joining_a2 = pool.submit(join, a2, group, "inst-a")
        retry(lambda: heartbeat(a, group, generation, ma, "inst-a"), ok=lambda code: code == FENCED_INSTANCE_ID, what="the old id fenced")
        rejoined_b = join(b, group, "inst-b", mb)
        joined_a2, joined_c = joining_a2.result(TIMEOUT), joining_c.result(TIMEOUT)
        ma2, mc = joined_a2["member_id"], joined_c["member_id"]
        assert rejoined_b["generation_id"] == joined_a2["generation_id"] == joined_c["generation_id"] == generation + 1
        assert joined_a2["leader"] == ma2  # the leader's role moved to the new id
        assert {m["member_id"]: m["group_instance_id"] for m in joined_a2["members"]} == {ma2: "inst-a", mb: "inst-b", mc: None}
        # CompletingRebalance: b's SyncGroup is parked waiting for the leader;
        # inst-a restarts again before the leader syncs.
        sent = b.requests_sent
        syncing_b = pool.submit(sync, b, group, generation + 1, mb, "inst-b")
        wait_for(lambda: b.requests_sent > sent and describe(c, group)["group_state"] == "CompletingRebalance", "b's SyncGroup to be sent")
        joining_a3 = pool.submit(join, a3, group, "inst-a")
        assert syncing_b.result(TIMEOUT)["error_code"] == 27  # REBALANCE_IN_PROGRESS: another rebalance
        assert sync(a2, group, generation + 1, ma2, "inst-a")["error_code"] == FENCED_INSTANCE_ID
        again_b = pool.submit(join, b, group, "inst-b", mb)
        again_c = join(c, group, None, mc)
        joined_a3 = joining_a3.result(TIMEOUT)
        assert again_b.result(TIMEOUT)["generation_id"] == again_c["generation_id"] == joined_a3["generation_id"] == generation + 2
        assert instances(c, group) == {"inst-a": joined_a3["member_id"], "inst-b": mb, None: mc}


def test_instance_ids_are_loaded_back_after_a_restart(static_broker, group, topic):
    """The group metadata record keeps the instance ids: after the broker
    restarts (the coordinator loads the group back), a restarted instance
    still replaces its old member id with no rebalance."""
    with client(static_broker, "a") as a, client(static_broker, "b") as b:
        make_topic(a, topic)
        find_coordinator(a, group)
        ma, mb, generation = two_static_members(a, b, group, topic)
    static_broker.stop()
    static_broker.start()
    with client(static_broker, "a-restarted") as a2, client(static_broker, "b") as b:
        find_coordinator(a2, group)
        rejoined = retry(lambda: join(a2, group, "inst-a"), ok=lambda r: r["error_code"] != 14, what="the group to load")
        assert (rejoined["error_code"], rejoined["generation_id"], rejoined["leader"]) == (NONE, generation, ma)
        ma2 = rejoined["member_id"]
        assert ma2 != ma
        assert heartbeat(b, group, generation, mb, "inst-b") == NONE
        assert heartbeat(b, group, generation, ma, "inst-a") == FENCED_INSTANCE_ID
        assert sync(a2, group, generation, ma2, "inst-a")["assignment"] == cp.encode_assignment([(topic, [0])], None, version=0)
        assert instances(a2, group) == {"inst-a": ma2, "inst-b": mb}


def test_old_member_id_is_fenced_through_group_member(static_broker, group, topic):
    """kclient's GroupMember as two processes of one instance: the first
    one's Heartbeat raises FencedInstanceIdError once the second joined."""

    async def scenario() -> None:
        settings = ConnectionSettings("fenced", 10000, 10000, None)
        async with trio.open_nursery() as nursery:
            cluster = Cluster.open(nursery, [(static_broker.host, static_broker.port)], settings, retry_backoff_ms=100, metadata_max_age_ms=300000)
            try:
                coordinator = GroupCoordinator(cluster, group, retry_backoff_ms=100, group_instance_id="inst-a")
                old = GroupMember(coordinator, session_timeout_ms=6000, rebalance_timeout_ms=5000, assignors=["range"], group_instance_id="inst-a")
                new = GroupMember(coordinator, session_timeout_ms=6000, rebalance_timeout_ms=5000, assignors=["range"], group_instance_id="inst-a")

                async def counts(topics: set[str]) -> dict[str, int]:
                    return dict.fromkeys(topics, PARTITIONS)

                joined = await old.join([topic], counts)
                assert joined.assignment == tuple((topic, p) for p in range(PARTITIONS))
                again = await new.join([topic], counts)
                assert (again.generation, again.assignment) == (joined.generation, joined.assignment)
                assert again.member_id != joined.member_id
                with pytest.raises(FencedInstanceIdError):
                    await old.heartbeat()
                with pytest.raises(FencedInstanceIdError):
                    await coordinator.commit_offsets({(topic, 0): 1}, generation=old.generation, member_id=old.member_id)
                await coordinator.commit_offsets({(topic, 0): 1}, generation=new.generation, member_id=new.member_id)
                await new.heartbeat()
                await new.leave()  # no LeaveGroup: the member stays until its session ends
                assert (new.member_id, new.generation) == ("", -1)
            finally:
                await cluster.aclose()
            nursery.cancel_scope.cancel()

    with client(static_broker, "setup") as c:
        make_topic(c, topic)
        find_coordinator(c, group)
    trio.run(scenario)
    with client(static_broker, "admin") as c:
        assert set(instances(c, group)) == {"inst-a"}
        assert describe(c, group)["group_state"] == STABLE


# ---------------------------------------------------------------- kclient.Consumer


def consumer_settings(broker, group: str, **extra) -> dict:
    return poll_settings(broker.bootstrap, group, **{"session.timeout.ms": 10000, **extra})


@pytest.mark.parametrize("restarting", ["leader", "follower"])
def test_consumer_restarted_within_session_gets_its_partitions_back_without_rebalance(static_broker, group, topic, restarting):
    restart_within_session(static_broker, topic, PARTITIONS, lambda: consumer_settings(static_broker, group), leader_restarts=restarting == "leader")
    with client(static_broker, "admin") as c:
        assert set(instances(c, group)) == {"static-a", "static-b"}
        records = group_records(c, group)
        generations = [r.generation for r in records if r.members]
        # The restart wrote a record of the same generation with a new member id.
        assert generations[-1] == generations[-2]
        assert records[-1].members != records[-2].members


def test_consumer_not_back_within_session_is_removed_and_the_group_rebalances(static_broker, group, topic):
    produced = fill(static_broker, topic, PARTITIONS, 2, "a")
    make = functools.partial(consumer_settings, static_broker, group, **{"session.timeout.ms": 2000})
    gone, stays = StaticPoller(make(), topic, "gone", "gone"), StaticPoller(make(), topic, "stays", "stays")
    gone.start()
    stays.start()
    try:
        wait_until(
            lambda: gone.partitions and stays.partitions and len(gone.partitions | stays.partitions) == PARTITIONS
            and set(gone.consumed()) | set(stays.consumed()) >= produced,
            "the two static members to split the partitions",
        )
        with client(static_broker, "admin") as c:
            assert set(instances(c, group)) == {"gone", "stays"}
        calls = len(stays.listener.calls)
        gone.stop()
        # Its partitions wait for it until its session ends, then go to the other.
        wait_until(lambda: stays.partitions == set(range(PARTITIONS)), "the remaining member to get every partition")
        assert [kind for kind, _ in stays.listener.calls[calls:]] == ["revoked", "assigned"]
        with client(static_broker, "admin") as c:
            assert set(instances(c, group)) == {"stays"}
        later = fill(static_broker, topic, PARTITIONS, 1, "b")
        wait_until(lambda: set(stays.consumed()) >= later, "the remaining member to read the later records")
    finally:
        stays.stop()


def test_consumer_fenced_by_a_newer_instance_raises_from_poll(static_broker, group, topic):
    """Two live consumers with one instance id: the second replaces the
    first, whose commits are then refused with FencedInstanceIdError."""
    fill(static_broker, topic, PARTITIONS, 1, "a")
    settings = consumer_settings(static_broker, group, **{"group.instance.id": "twin"})
    with Consumer(settings) as first:
        first.subscribe([topic])
        wait_until(lambda: first.poll(timeout_ms=100) or first.assignment(), "the first twin to join")
        with Consumer(settings) as second:
            second.subscribe([topic])
            wait_until(lambda: second.poll(timeout_ms=100) or second.assignment(), "the second twin to take the instance id")
            with client(static_broker, "admin") as c:
                assert instances(c, group)["twin"] == second.group_metadata().member_id

            def fenced() -> bool:
                try:
                    first.poll(timeout_ms=100)
                except FencedInstanceIdError:
                    return True
                return False

            # A heartbeat finds the first twin fenced: its poll raises, and
            # keeps raising (it never rejoins, which would fence the second).
            wait_until(fenced, "the first twin's poll to raise FencedInstanceIdError")
            with pytest.raises(FencedInstanceIdError):
                first.poll(timeout_ms=100)
            with pytest.raises(FencedInstanceIdError):
                first.commit()
            second.poll(timeout_ms=100)
            assert len(second.assignment()) == PARTITIONS
            with client(static_broker, "admin") as c:
                assert instances(c, group)["twin"] == second.group_metadata().member_id


# ---------------------------------------------------------------- unit: model and config


def _member(member_id: str, instance: str | None) -> Member:
    return Member(
        member_id=member_id, client_id="c", client_host="/h", session_timeout_ms=1000, rebalance_timeout_ms=1000,
        protocol_type="consumer", protocols=[("range", b"m")], assignment=b"x-" + member_id.encode(), group_instance_id=instance,
    )


@pytest.mark.unit
def test_group_maps_instance_ids_and_fences_replaced_members():
    group = Group("g")
    group.add(_member("a-1", "a"))
    group.add(_member("d-1", None))
    group.leader_id = "a-1"
    assert group.static_members == {"a": "a-1"}
    assert group.validate_member("a-1", "a") == NONE
    assert group.validate_member("d-1", None) == NONE
    assert group.validate_member("x", None) == UNKNOWN_MEMBER_ID
    assert group.validate_member("a-1", "unknown") == UNKNOWN_MEMBER_ID
    old, new = group.replace_static_member("a", "a-1", "a-2")
    assert (old.member_id, new.member_id, new.assignment, new.group_instance_id) == ("a-1", "a-2", b"x-a-1", "a")
    assert group.leader_id == "a-2" and set(group.members) == {"a-2", "d-1"}
    assert group.validate_member("a-1", "a") == FENCED_INSTANCE_ID
    assert group.validate_member("a-1", None) == UNKNOWN_MEMBER_ID
    assert group.remove("a-1") is None and group.static_members == {"a": "a-2"}
    assert group.remove("a-2") is new and group.static_members == {}


@pytest.mark.unit
def test_group_record_round_trip_rebuilds_instance_ids():
    group = Group("g", STABLE)
    group.protocol_type, group.protocol_name, group.generation_id = "consumer", "range", 7
    group.add(_member("a-1", "a"))
    group.add(_member("d-1", None))
    group.leader_id = "d-1"
    record = decode_group_value(encode_group_value(group.to_record()))
    assert [(m.member_id, m.group_instance_id) for m in record.members] == [("a-1", "a"), ("d-1", None)]
    loaded = Group.from_record("g", record, 0.0)
    assert loaded.static_members == {"a": "a-1"} and loaded.generation_id == 7 and loaded.is_(STABLE)
    assert loaded.members["a-1"].group_instance_id == "a" and loaded.members["a-1"].assignment == b"x-a-1"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"group.instance.id": "a b"}, "only ASCII letters"),
        ({"group.instance.id": "x" * 250}, "longer than 249"),
    ],
)
def test_consumer_refuses_bad_instance_ids(props, message):
    with pytest.raises(ConfigError, match=message):
        settings_of({"bootstrap.servers": "localhost:1", "group.id": "g", **props})
    with pytest.raises(ConfigError, match="needs a group.id"):
        settings_of({"bootstrap.servers": "localhost:1", "group.instance.id": "ok"})
    assert settings_of({"bootstrap.servers": "localhost:1", "group.id": "g", "group.instance.id": "ok.A_1-"}).config.group_instance_id == "ok.A_1-"


@pytest.mark.unit
def test_consumer_connector_refuses_group_instance_id():
    with pytest.raises(ConfigError, match="poll consumer, kclient.Consumer"):
        ConsumerConnector({"group.id": "g", "bootstrap.servers": "localhost:1", "group.coordination": "broker", "group.instance.id": "a"})


# ---------------------------------------------------------------- a librdkafka static member


class ConfluentStaticPoller(threading.Thread):
    """A confluent-kafka (librdkafka) Consumer with ``group.instance.id``
    ``instance``, polling and committing each record until `stop`."""

    def __init__(self, broker, group: str, topic: str, instance: str) -> None:
        super().__init__(name=f"confluent-{instance}", daemon=True)
        self.config = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "group.instance.id": instance,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        }
        self.topic = topic
        self.values: list[str] = []
        self.partitions: set[int] = set()
        self.assigned_calls = 0
        self.error: BaseException | None = None
        self.halt = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        from confluent_kafka import Consumer as ConfluentConsumer

        try:
            consumer = ConfluentConsumer(self.config)
            try:
                consumer.subscribe([self.topic], on_assign=lambda c, tps: setattr(self, "assigned_calls", self.assigned_calls + 1))
                while not self.halt.is_set():
                    msg = consumer.poll(0.1)
                    if msg is not None and not msg.error():
                        with self.lock:
                            self.values.append(msg.value().decode())
                        consumer.commit(message=msg, asynchronous=False)
                    self.partitions = {tp.partition for tp in consumer.assignment()}
            finally:
                consumer.close()  # a static member: librdkafka sends no LeaveGroup
        except BaseException as exc:
            self.error = exc

    def consumed(self) -> list[str]:
        with self.lock:
            return list(self.values)

    def stop(self) -> None:
        self.halt.set()
        self.join(90.0)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


@pytest.mark.interop
def test_confluent_static_member_restarts_in_a_group_shared_with_kclient(static_broker, group, topic):
    require(None if importlib.util.find_spec("confluent_kafka") else "not installed", name="confluent-kafka", needs="needs confluent-kafka")
    produced = fill(static_broker, topic, PARTITIONS, 3, "a")
    mine = StaticPoller(consumer_settings(static_broker, group, **{"partition.assignment.strategy": "range"}), topic, "kclient-1", "kclient-1")
    theirs = ConfluentStaticPoller(static_broker, group, topic, "librdkafka-1")
    mine.start()
    wait_until(lambda: len(mine.partitions) == PARTITIONS, "the kclient member to join alone")
    theirs.start()
    restarted: ConfluentStaticPoller | None = None
    try:
        wait_until(
            lambda: mine.partitions and theirs.partitions and not mine.partitions & theirs.partitions
            and len(mine.partitions | theirs.partitions) == PARTITIONS and set(mine.consumed()) | set(theirs.consumed()) >= produced,
            "kclient and librdkafka to split the partitions",
            detail=lambda: f"kclient {mine.partitions}, librdkafka {theirs.partitions}",
        )
        wait_until(lambda: mine.generation[0] >= 0, "the kclient member's generation")
        owned, generation, calls = set(theirs.partitions), mine.generation, list(mine.listener.calls)
        with client(static_broker, "admin") as c:
            assert set(instances(c, group)) == {"kclient-1", "librdkafka-1"}
        theirs.stop()
        produced |= fill(static_broker, topic, PARTITIONS, 2, "b")
        restarted = ConfluentStaticPoller(static_broker, group, topic, "librdkafka-1")
        restarted.start()
        everyone = [mine, theirs, restarted]
        wait_until(
            lambda: restarted.partitions == owned and set().union(*(p.consumed() for p in everyone)) >= produced,
            "the restarted librdkafka member to get its partitions back and every record to be read",
            detail=lambda: f"restarted {restarted.partitions} (wanted {owned}), kclient {mine.partitions}",
        )
        assert mine.generation == generation and mine.listener.calls == calls  # no rebalance for the kclient member
        counts = collections.Counter(v for p in everyone for v in p.consumed())
        assert set(counts) == produced and [v for v, n in counts.items() if n != 1] == []
    finally:
        for p in (mine, restarted):
            if p is not None and p.is_alive():
                p.stop()
