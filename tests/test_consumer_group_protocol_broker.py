"""The bundled broker's consumer group protocol (KIP-848,
``group.protocol=consumer``), driven with raw ConsumerGroupHeartbeat
requests against one broker process: members join and get partitions, a
partition moves to its new owner only after the old owner's heartbeat no
longer lists it, members leave or time out, epochs fence, static members
come back without a rebalance, ConsumerGroupDescribe, OffsetCommit with
member epochs, and ListGroups' group type."""

from __future__ import annotations

import uuid

import pytest
from helpers.groups import group_broker_properties
from helpers.raw import SocketClient, make_topic
from helpers.wait import retry, wait_for

from kclient.broker.topic_ids import topic_id
from kclient.errors import (
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_REQUEST,
    NON_EMPTY_GROUP,
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_TOPIC_ID,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
    UNSUPPORTED_VERSION,
)
from kclient.protocol.messages import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    JOIN_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    OFFSET_FETCH_FULL,
)
from kclient.testing import BrokerProcess

PARTITIONS = 4
#: Session timeout of consumer-protocol members in this broker (ms).
SESSION_MS = 1500

_NO_REBALANCE_TIMEOUT = -1


@pytest.fixture(scope="module")
def broker():
    """One standalone broker whose consumer-protocol members time out quickly."""
    properties = {
        **group_broker_properties(PARTITIONS),
        "group.consumer.session.timeout.ms": SESSION_MS,
        "group.consumer.min.session.timeout.ms": 1000,
        "group.consumer.heartbeat.interval.ms": 200,
        "group.consumer.min.heartbeat.interval.ms": 100,
    }
    with BrokerProcess(properties=properties) as proc:
        yield proc


@pytest.fixture(scope="module")
def client(broker):
    with SocketClient(broker.host, broker.port, client_id="kip848-test", timeout=30.0) as c:
        retry(lambda: c.request(FIND_COORDINATOR, 1, {"key": "warm-up", "key_type": 0}), lambda r: r["error_code"] == NONE, "coordinator")
        yield c


@pytest.fixture
def topic(client) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    make_topic(client, name)
    return name


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def heartbeat(c: SocketClient, group: str, member_id: str, epoch: int, *, topics=None, owned=None, version: int = 1, **extra) -> dict:
    """One ConsumerGroupHeartbeat; ``owned`` is ``{topic: [partitions]}``."""
    body = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000 if epoch == 0 else _NO_REBALANCE_TIMEOUT,
        "subscribed_topic_names": topics,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None if owned is None else [{"topic_id": topic_id(t), "partitions": ps} for t, ps in owned.items()],
    }
    body.update(extra)
    return c.request(CONSUMER_GROUP_HEARTBEAT, version, body)


def join(c: SocketClient, group: str, topics: list[str], **extra) -> dict:
    return heartbeat(c, group, extra.pop("member_id", None) or uuid.uuid4().hex, 0, topics=topics, owned={}, **extra)


def partitions_of(response: dict, topic: str) -> set[int] | None:
    """The response's assignment of ``topic`` (None: no assignment sent)."""
    assignment = response["assignment"]
    if assignment is None:
        return None
    return {p for tp in assignment["topic_partitions"] if tp["topic_id"] == topic_id(topic) for p in tp["partitions"]}


def describe(c: SocketClient, group: str) -> dict:
    return c.request(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]


def test_two_members_share_and_a_partition_moves_only_after_its_revocation(client, topic, group):
    a = join(client, group, [topic])
    assert a["error_code"] == NONE and a["member_epoch"] == 1 and a["heartbeat_interval_ms"] == 200
    a_id = a["member_id"]
    assert partitions_of(a, topic) == set(range(PARTITIONS))
    # A acknowledges its partitions.
    assert heartbeat(client, group, a_id, 1, owned={topic: list(range(PARTITIONS))})["member_epoch"] == 1

    b = join(client, group, [topic])
    b_id = b["member_id"]
    # B is at the new epoch, but every partition is still A's: it gets none yet.
    assert b["member_epoch"] == 2 and partitions_of(b, topic) == set()
    # A is told to keep half: the rest is pending revocation; its epoch stays.
    a = heartbeat(client, group, a_id, 1, owned={topic: list(range(PARTITIONS))})
    kept = partitions_of(a, topic)
    assert a["member_epoch"] == 1 and kept is not None and len(kept) == PARTITIONS // 2
    revoked = set(range(PARTITIONS)) - kept
    # While A still lists the revoked partitions, B waits for them.
    assert heartbeat(client, group, a_id, 1, owned={topic: list(range(PARTITIONS))})["member_epoch"] == 1
    b = heartbeat(client, group, b_id, 2, owned={topic: []})
    assert b["error_code"] == NONE and b["assignment"] is None
    # A acknowledges the revocation: it moves to epoch 2; then B gets them.
    a = heartbeat(client, group, a_id, 1, owned={topic: sorted(kept)})
    assert a["member_epoch"] == 2 and a["assignment"] is None
    b = heartbeat(client, group, b_id, 2, owned={topic: []})
    assert b["member_epoch"] == 2 and partitions_of(b, topic) == revoked

    group_desc = describe(client, group)
    assert group_desc["error_code"] == NONE and group_desc["group_state"] == "Stable" or group_desc["group_state"] == "Reconciling"
    members = {m["member_id"]: m for m in group_desc["members"]}
    assert set(members) == {a_id, b_id}
    assert group_desc["group_epoch"] == 2 and group_desc["assignment_epoch"] == 2 and group_desc["assignor_name"] == "uniform"
    tps = members[b_id]["assignment"]["topic_partitions"]
    assert [(tp["topic_name"], set(tp["partitions"])) for tp in tps] == [(topic, revoked)]
    assert members[b_id]["subscribed_topic_names"] == [topic] and members[b_id]["member_epoch"] == 2

    # B leaves: A gets everything back at the next epoch.
    left = heartbeat(client, group, b_id, -1)
    assert left["error_code"] == NONE and left["member_epoch"] == -1
    a = heartbeat(client, group, a_id, 2, owned={topic: sorted(kept)})
    assert a["member_epoch"] == 3 and partitions_of(a, topic) == set(range(PARTITIONS))
    assert describe(client, group)["group_epoch"] == 3


def test_a_member_that_stops_heartbeating_is_removed(client, topic, group):
    a = join(client, group, [topic])
    b = join(client, group, [topic])
    a_id, b_id = a["member_id"], b["member_id"]

    def b_gone() -> bool:
        heartbeat(client, group, a_id, describe_epoch(client, group, a_id), owned=None)
        return {m["member_id"] for m in describe(client, group)["members"]} == {a_id}

    wait_for(b_gone, "member B expired", timeout=SESSION_MS / 1000 * 10)
    # Its late heartbeat is refused: it must join again.
    assert heartbeat(client, group, b_id, b["member_epoch"])["error_code"] == UNKNOWN_MEMBER_ID


def describe_epoch(c: SocketClient, group: str, member_id: str) -> int:
    return next(m["member_epoch"] for m in describe(c, group)["members"] if m["member_id"] == member_id)


def test_fencing_and_request_errors(client, topic, group):
    a = join(client, group, [topic])
    a_id, epoch = a["member_id"], a["member_epoch"]
    assert heartbeat(client, group, a_id, epoch + 5)["error_code"] == FENCED_MEMBER_EPOCH
    assert heartbeat(client, group, "no-such-member", 1)["error_code"] == UNKNOWN_MEMBER_ID
    assert join(client, group, [topic], server_assignor="sticky")["error_code"] == UNSUPPORTED_ASSIGNOR
    # v1: the consumer names its own member id.
    assert heartbeat(client, group, "", 0, topics=[topic], owned={}, version=1)["error_code"] == INVALID_REQUEST
    # v0: the coordinator gives one.
    v0 = heartbeat(client, group, "", 0, topics=[topic], owned={}, version=0)
    assert v0["error_code"] == NONE and v0["member_id"]
    # Joining without a subscription, or with partitions, is invalid.
    assert heartbeat(client, group, uuid.uuid4().hex, 0, topics=None, owned={})["error_code"] == INVALID_REQUEST
    assert heartbeat(client, group, uuid.uuid4().hex, 0, topics=[topic], owned={topic: [0]})["error_code"] == INVALID_REQUEST
    # The range assignor, by name.
    assert join(client, f"{group}-range", [topic], server_assignor="range")["error_code"] == NONE
    assert describe(client, f"{group}-range")["assignor_name"] == "range"


def test_a_classic_group_and_a_consumer_group_do_not_mix(client, topic, group):
    consumer = join(client, group, [topic])
    assert consumer["error_code"] == NONE
    join_classic = {
        "group_id": group,
        "session_timeout_ms": 10000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    assert client.request(JOIN_GROUP, 0, join_classic)["error_code"] == INCONSISTENT_GROUP_PROTOCOL
    assert client.request(DELETE_GROUPS, 0, {"groups_names": [group]})["results"][0]["error_code"] == NON_EMPTY_GROUP
    # DescribeGroups (v0-4) describes classic groups only: a consumer group is Dead there, as in Kafka.
    described = client.request(DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False})["groups"][0]
    assert (described["error_code"], described["group_state"], described["members"]) == (NONE, "Dead", [])
    # A classic group with a member: not a consumer group.
    classic = f"{group}-classic"
    joined = client.request(JOIN_GROUP, 0, {**join_classic, "group_id": classic})
    assert joined["error_code"] == NONE
    assert join(client, classic, [topic])["error_code"] == GROUP_ID_NOT_FOUND
    # An unknown group for ConsumerGroupDescribe.
    assert describe(client, f"{group}-none")["error_code"] == GROUP_ID_NOT_FOUND


def test_static_member_comes_back_without_a_rebalance(client, topic, group):
    first = join(client, group, [topic], instance_id="instance-1")
    other = join(client, group, [topic])
    assert first["error_code"] == NONE
    # Everyone settles.
    a_parts = set(range(PARTITIONS))
    a = heartbeat(client, group, first["member_id"], 1, owned={topic: sorted(a_parts)})
    a_parts = partitions_of(a, topic) or a_parts
    a = heartbeat(client, group, first["member_id"], 1, owned={topic: sorted(a_parts)})
    assert a["member_epoch"] == 2
    b = heartbeat(client, group, other["member_id"], 2, owned={topic: []})
    assert partitions_of(b, topic) == set(range(PARTITIONS)) - a_parts
    # The instance id is taken while its member is in the group.
    assert join(client, group, [topic], instance_id="instance-1")["error_code"] == UNRELEASED_INSTANCE_ID
    # It leaves for now (epoch -2), and comes back under a new member id.
    assert heartbeat(client, group, first["member_id"], -2, instance_id="instance-1")["member_epoch"] == -2
    epoch_before = describe(client, group)["group_epoch"]
    back = join(client, group, [topic], instance_id="instance-1")
    assert back["error_code"] == NONE and back["member_id"] != first["member_id"]
    assert partitions_of(back, topic) == a_parts and back["member_epoch"] == epoch_before
    assert describe(client, group)["group_epoch"] == epoch_before


def test_offset_commit_checks_the_member_epoch(client, topic, group):
    a = join(client, group, [topic])
    a_id, epoch = a["member_id"], a["member_epoch"]

    def commit(version: int, member_epoch: int, offset: int) -> int:
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": member_epoch,
            "member_id": a_id,
            "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": ""}]}],
        }
        return client.request(OFFSET_COMMIT, version, body)["topics"][0]["partitions"][0]["error_code"]

    assert commit(9, epoch, 5) == NONE
    assert commit(9, epoch - 1, 6) == STALE_MEMBER_EPOCH
    assert commit(8, epoch, 7) == UNSUPPORTED_VERSION
    fetched = client.request(OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}], "require_stable": False})
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 5

    def fetch_v9(member_id, member_epoch) -> dict:
        body = {"groups": [{"group_id": group, "member_id": member_id, "member_epoch": member_epoch, "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": True}
        return client.request(OFFSET_FETCH_FULL, 9, body)["groups"][0]

    mine = fetch_v9(a_id, epoch)
    assert mine["error_code"] == NONE and mine["topics"][0]["partitions"][0]["committed_offset"] == 5
    assert fetch_v9(a_id, epoch - 1)["error_code"] == STALE_MEMBER_EPOCH
    assert fetch_v9("someone-else", epoch)["error_code"] == UNKNOWN_MEMBER_ID
    assert fetch_v9(None, -1)["topics"][0]["partitions"][0]["committed_offset"] == 5  # an admin client
    v8 = client.request(OFFSET_FETCH_FULL, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": False})["groups"][0]
    assert [(t["name"], [p["committed_offset"] for p in t["partitions"]]) for t in v8["topics"]] == [(topic, [5])]


def test_list_groups_gives_the_group_type(client, topic, group):
    join(client, group, [topic])

    def listed(types: list[str]) -> dict[str, dict]:
        body = client.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": types})
        return {g["group_id"]: g for g in body["groups"]}

    entry = listed([])[group]
    assert entry["group_type"] == "consumer" and entry["protocol_type"] == "consumer"
    assert group in listed(["consumer"]) and group not in listed(["classic"])


def test_a_topic_created_later_is_assigned(client, topic, group):
    later = f"{topic}-later"
    a = join(client, group, [topic, later])
    a_id = a["member_id"]
    assert partitions_of(a, later) == set()
    make_topic(client, later)
    a = heartbeat(client, group, a_id, a["member_epoch"], owned={topic: sorted(partitions_of(a, topic) or ())})
    assert partitions_of(a, later) == set(range(PARTITIONS)) and a["member_epoch"] == 2


def test_metadata_gives_topic_ids(client, topic):
    """Metadata v10+ carries the topic ids assignments name (KIP-516); v12
    finds a topic by id alone."""
    from kclient.protocol.messages.metadata import METADATA_FULL

    by_name = client.request(METADATA_FULL, 12, {"topics": [{"topic_id": None, "name": topic}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    (entry,) = by_name["topics"]
    assert entry["error_code"] == NONE and entry["topic_id"] == topic_id(topic) and len(entry["partitions"]) == PARTITIONS
    by_id = client.request(METADATA_FULL, 12, {"topics": [{"topic_id": topic_id(topic), "name": None}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert by_id["topics"][0]["name"] == topic
    missing = uuid.uuid4()
    unknown = client.request(METADATA_FULL, 12, {"topics": [{"topic_id": missing, "name": None}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert unknown["topics"][0]["error_code"] == UNKNOWN_TOPIC_ID and unknown["topics"][0]["topic_id"] == missing
    everything = client.request(METADATA_FULL, 10, {"topics": None, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
    assert {t["name"]: t["topic_id"] for t in everything["topics"]}[topic] == topic_id(topic)


def test_a_member_that_does_not_revoke_in_time_is_removed(client, topic, group):
    """A member keeping partitions past its rebalance timeout is fenced and
    its partitions go to the member waiting for them."""
    a = heartbeat(client, group, uuid.uuid4().hex, 0, topics=[topic], owned={}, rebalance_timeout_ms=300)
    a_id = a["member_id"]
    everything = {topic: list(range(PARTITIONS))}
    heartbeat(client, group, a_id, 1, owned=everything)
    b = join(client, group, [topic])
    a = heartbeat(client, group, a_id, 1, owned=everything)  # told to revoke half; never does
    assert a["member_epoch"] == 1 and len(partitions_of(a, topic) or ()) == PARTITIONS // 2

    def b_has_everything() -> bool:
        return partitions_of(heartbeat(client, group, b["member_id"], describe_epoch(client, group, b["member_id"]), owned={topic: []}), topic) == set(range(PARTITIONS))

    wait_for(b_has_everything, "B given A's partitions once A was removed", timeout=30)
    assert heartbeat(client, group, a_id, 1, owned=everything)["error_code"] == UNKNOWN_MEMBER_ID


def test_a_regex_subscription(client, topic, group):
    """v1's ``subscribed_topic_regex``: every topic whose whole name matches."""
    other = f"{topic}-x"
    make_topic(client, other)
    a = heartbeat(client, group, uuid.uuid4().hex, 0, topics=None, owned={}, subscribed_topic_regex=f"{topic}(-x)?")
    assert a["error_code"] == NONE
    assert partitions_of(a, topic) == set(range(PARTITIONS)) and partitions_of(a, other) == set(range(PARTITIONS))
    assert describe(client, group)["members"][0]["subscribed_topic_regex"] == f"{topic}(-x)?"
    bad = heartbeat(client, f"{group}-bad", uuid.uuid4().hex, 0, topics=None, owned={}, subscribed_topic_regex="(")
    assert bad["error_code"] == INVALID_REQUEST


def test_offset_delete_refuses_subscribed_topics(client, topic, group):
    """OffsetDelete (KIP-496) in a consumer group with members: the
    subscribed topic's offsets stay (GROUP_SUBSCRIBED_TO_TOPIC), another
    topic's are deleted."""
    other = f"{topic}-other"
    make_topic(client, other)
    a = join(client, group, [topic])

    def commit(name: str) -> int:
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": a["member_epoch"],
            "member_id": a["member_id"],
            "group_instance_id": None,
            "topics": [{"name": name, "partitions": [{"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1, "committed_metadata": ""}]}],
        }
        return client.request(OFFSET_COMMIT, 9, body)["topics"][0]["partitions"][0]["error_code"]

    assert commit(topic) == NONE and commit(other) == NONE
    body = {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}, {"name": other, "partitions": [{"partition_index": 0}]}]}
    deleted = client.request(OFFSET_DELETE, 0, body)
    assert deleted["error_code"] == NONE
    assert [(t["name"], t["partitions"][0]["error_code"]) for t in deleted["topics"]] == [(topic, GROUP_SUBSCRIBED_TO_TOPIC), (other, NONE)]
    fetched = client.request(OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}, {"name": other, "partition_indexes": [0]}], "require_stable": False})
    assert [t["partitions"][0]["committed_offset"] for t in fetched["topics"]] == [3, -1]
