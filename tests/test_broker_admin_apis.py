"""The bundled broker's answers to CreatePartitions (KIP-195), OffsetDelete
(KIP-496) and the ListGroups filters (v4 states, KIP-518; v5 types,
KIP-848), request by request, without Java: the error codes and messages
Kafka's Admin client and tools rely on (``kafka-topics --alter
--partitions``, ``kafka-consumer-groups --delete-offsets`` and ``--list
--state`` / ``--type``; tests/test_kafka_tools_on_bundled.py runs the tools
themselves)."""

from __future__ import annotations

import functools
import uuid

from helpers.raw import SocketClient
from helpers.wait import retry as _retry

from kclient.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    GROUP_ID_NOT_FOUND,
    INVALID_PARTITIONS,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from kclient.protocol.messages import CREATE_PARTITIONS, FIND_COORDINATOR, LIST_GROUPS, METADATA, OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH

TIMEOUT = 30.0


def client(broker) -> SocketClient:
    return SocketClient(broker.host, broker.port, client_id="test-admin-apis", timeout=TIMEOUT)


#: Call until the answer is the awaited one (coordinator loading, topic creation).
retry = functools.partial(_retry, timeout=TIMEOUT)


def partitions_of(c: SocketClient, topic: str) -> dict[int, int]:
    """``{partition: leader}`` from Metadata (auto-creating the topic)."""
    body = retry(
        lambda: c.request(METADATA, 4, {"topics": [{"name": topic}], "allow_auto_topic_creation": True}),
        ok=lambda r: r["topics"][0]["error_code"] == 0 and all(p["leader_id"] >= 0 for p in r["topics"][0]["partitions"]),
        what=f"leaders of {topic}",
    )
    return {p["partition_index"]: p["leader_id"] for p in body["topics"][0]["partitions"]}


def create_partitions(c: SocketClient, *topics: dict, version: int = 1, validate_only: bool = False) -> list[tuple[str, int, str | None]]:
    body = c.request(CREATE_PARTITIONS, version, {"topics": list(topics), "timeout_ms": 10_000, "validate_only": validate_only})
    return [(r["name"], r["error_code"], r["error_message"]) for r in body["results"]]


def test_create_partitions_answers_as_kafka(broker):
    topic = f"grow-{uuid.uuid4().hex[:8]}"
    with client(broker) as c:
        assert partitions_of(c, topic) == {0: 0, 1: 0}  # num.partitions=2 on the session broker
        grow = {"name": topic, "count": 4, "assignments": None}
        duplicate = "Duplicate topic in request."
        assert create_partitions(c, grow, grow) == [(topic, INVALID_REQUEST, duplicate), (topic, INVALID_REQUEST, duplicate)]
        assert create_partitions(c, grow, validate_only=True) == [(topic, NONE, None)]
        assert partitions_of(c, topic) == {0: 0, 1: 0}
        assert create_partitions(c, {**grow, "count": 2}) == [(topic, INVALID_PARTITIONS, "Topic already has 2 partitions.")]
        assert create_partitions(c, {**grow, "count": 1}) == [
            (topic, INVALID_PARTITIONS, "Topic currently has 2 partitions, which is higher than the requested 1.")
        ]
        assert create_partitions(c, {**grow, "name": "no-such-topic-x"}) == [
            ("no-such-topic-x", UNKNOWN_TOPIC_OR_PARTITION, "The topic 'no-such-topic-x' does not exist.")
        ]
        assert create_partitions(c, {**grow, "assignments": [{"broker_ids": [0]}]}) == [
            (topic, INVALID_REPLICA_ASSIGNMENT, "Increasing the number of partitions by 2 but 1 assignments provided.")
        ]
        assert create_partitions(c, {**grow, "assignments": [{"broker_ids": [7]}, {"broker_ids": [0]}]}) == [
            (topic, INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 7.")
        ]
        assert create_partitions(c, {**grow, "assignments": [{"broker_ids": [0]}, {"broker_ids": [0]}]}) == [(topic, NONE, None)]
        assert partitions_of(c, topic) == {0: 0, 1: 0, 2: 0, 3: 0}
        assert create_partitions(c, {**grow, "count": 5}, version=0) == [(topic, NONE, None)]
        assert partitions_of(c, topic) == dict.fromkeys(range(5), 0)


def commit(c: SocketClient, group: str, topic: str, offsets: dict[int, int]) -> dict[int, int]:
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "commit_timestamp": -1, "committed_metadata": ""}
                    for p, o in offsets.items()
                ],
            }
        ],
    }
    response = c.request(OFFSET_COMMIT, 7, body)
    return {p["partition_index"]: p["error_code"] for t in response["topics"] for p in t["partitions"]}


def committed(c: SocketClient, group: str, topic: str) -> dict[int, int]:
    body = c.request(OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]})
    return {p["partition_index"]: p["committed_offset"] for t in body["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}


def test_offset_delete_and_list_groups_filters(broker):
    topic, group = f"offsets-{uuid.uuid4().hex[:8]}", f"offsets-group-{uuid.uuid4().hex[:8]}"
    with client(broker) as c:
        partitions_of(c, topic)
        retry(lambda: c.request(FIND_COORDINATOR, 2, {"key": group, "key_type": 0}), ok=lambda r: r["error_code"] == 0, what="coordinator")
        assert commit(c, group, topic, {0: 5, 1: 7}) == {0: NONE, 1: NONE}
        # ListGroups: the offsets-only group is an Empty classic group.
        for version, body, listed in (
            (2, {}, True),
            (3, {}, True),
            (4, {"states_filter": ["Empty"]}, True),
            (4, {"states_filter": ["stable", "Dead"]}, False),
            (5, {"states_filter": [], "types_filter": ["Classic"]}, True),
            (5, {"states_filter": [], "types_filter": ["consumer"]}, False),
        ):
            # COORDINATOR_LOAD_IN_PROGRESS while other __consumer_offsets partitions load (as Kafka): a client retries.
            answer = retry(
                lambda version=version, body=body: c.request(LIST_GROUPS, version, {"states_filter": [], "types_filter": [], **body}),
                ok=lambda r: r["error_code"] != COORDINATOR_LOAD_IN_PROGRESS,
                what="ListGroups once the offsets partitions are loaded",
            )
            assert answer["error_code"] == NONE
            mine = [g for g in answer["groups"] if g["group_id"] == group]
            assert bool(mine) == listed, (version, body, answer)
            if mine and version >= 4:
                assert mine[0]["group_state"] == "Empty"
            if mine and version >= 5:
                assert mine[0]["group_type"] == "classic"
        # OffsetDelete: one partition deleted, an unknown topic named.
        body = c.request(
            OFFSET_DELETE,
            0,
            {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}, {"name": "no-such-topic-y", "partitions": [{"partition_index": 0}]}]},
        )
        assert body["error_code"] == NONE
        answers = {(t["name"], p["partition_index"]): p["error_code"] for t in body["topics"] for p in t["partitions"]}
        assert answers == {(topic, 0): NONE, ("no-such-topic-y", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert committed(c, group, topic) == {1: 7}
        body = c.request(OFFSET_DELETE, 0, {"group_id": f"never-{uuid.uuid4().hex[:8]}", "topics": [{"name": topic, "partitions": [{"partition_index": 1}]}]})
        assert (body["error_code"], body["topics"]) == (GROUP_ID_NOT_FOUND, [])
