"""ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69),
KIP-848, tested byte for byte.

kafka-python has no classes for these APIs, so each layout is spelled out
by hand from the schemas (``ConsumerGroupHeartbeatRequest.json`` ...) and
the Kafka protocol guide (https://kafka.apache.org/protocol): every version
is flexible (compact strings and arrays, length + 1 as an unsigned varint,
0 for null; a tagged-field section, here empty, closing every struct); the
heartbeat response's ``Assignment`` is a nullable struct, preceded by one
byte, -1 (0xff) for null and 1 for a struct.
"""

from __future__ import annotations

import struct
import uuid

import attrs
import pytest

from kclient.errors import ProtocolError
from kclient.protocol.messages import ALL_APIS, CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT
from kclient.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeAssignment,
    ConsumerGroupDescribeGroup,
    ConsumerGroupDescribeMember,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeTopicPartitions,
)
from kclient.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
)
from kclient.protocol.schema import Field

pytestmark = pytest.mark.unit

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")
NO_TAGS = b"\x00"


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def cstr(v: str | None) -> bytes:
    """A compact (nullable) string: length + 1 (0 for null), UTF-8 bytes.
    Lengths here stay below 127, so the varint is one byte."""
    if v is None:
        return b"\x00"
    raw = v.encode()
    return bytes([len(raw) + 1]) + raw


def carray(items: list[bytes] | None) -> bytes:
    """A compact (nullable) array of already encoded items."""
    if items is None:
        return b"\x00"
    return bytes([len(items) + 1]) + b"".join(items)


def heartbeat_request_bytes(version: int) -> bytes:
    topic = TOPIC_ID.bytes + carray([i32(0), i32(2)]) + NO_TAGS
    return (
        cstr("g")
        + cstr("m-1")
        + i32(3)
        + cstr("i-1")
        + cstr(None)  # rack id
        + i32(45000)
        + carray([cstr("t1"), cstr("t2")])
        + (cstr("t.*") if version >= 1 else b"")
        + cstr("uniform")
        + carray([topic])
        + NO_TAGS
    )


def heartbeat_request() -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m-1",
        member_epoch=3,
        instance_id="i-1",
        rebalance_timeout_ms=45000,
        subscribed_topic_names=["t1", "t2"],
        subscribed_topic_regex="t.*",
        server_assignor="uniform",
        topic_partitions=[ConsumerGroupHeartbeatTopicPartitions(topic_id=TOPIC_ID, partitions=[0, 2])],
    )


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_layout(version):
    codec = CONSUMER_GROUP_HEARTBEAT.request(version)
    expected = heartbeat_request_bytes(version)
    assert codec.encode(heartbeat_request()) == expected
    decoded = codec.decode_message(expected)
    want = heartbeat_request()
    if version == 0:
        want.subscribed_topic_regex = None  # v1+ only: its default in v0
    assert decoded == want
    assert codec.encode(decoded) == expected


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_null_fields_mean_unchanged(version):
    """A heartbeat that changes nothing: every nullable field null."""
    codec = CONSUMER_GROUP_HEARTBEAT.request(version)
    body = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=7)
    expected = (
        cstr("g") + cstr("m") + i32(7) + cstr(None) + cstr(None) + i32(-1) + b"\x00" + (cstr(None) if version >= 1 else b"") + cstr(None) + b"\x00" + NO_TAGS
    )
    assert codec.encode(body) == expected
    assert codec.decode_message(expected) == body


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_with_an_assignment(version):
    codec = CONSUMER_GROUP_HEARTBEAT.response(version)
    body = ConsumerGroupHeartbeatResponse(
        member_id="m-1",
        member_epoch=4,
        heartbeat_interval_ms=5000,
        assignment=ConsumerGroupHeartbeatAssignment(topic_partitions=[ConsumerGroupHeartbeatTopicPartitions(topic_id=TOPIC_ID, partitions=[1])]),
    )
    topic = TOPIC_ID.bytes + carray([i32(1)]) + NO_TAGS
    expected = i32(0) + i16(0) + cstr(None) + cstr("m-1") + i32(4) + i32(5000) + b"\x01" + carray([topic]) + NO_TAGS + NO_TAGS
    assert codec.encode(body) == expected
    assert codec.decode_message(expected) == body
    assert codec.decode(expected)["assignment"] == {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [1]}]}


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_null_assignment_and_error(version):
    codec = CONSUMER_GROUP_HEARTBEAT.response(version)
    body = ConsumerGroupHeartbeatResponse(error_code=110, error_message="fenced", member_epoch=-1)
    expected = i32(0) + i16(110) + cstr("fenced") + cstr(None) + i32(-1) + i32(0) + b"\xff" + NO_TAGS
    assert codec.encode(body) == expected
    assert codec.decode_message(expected) == body
    assert codec.decode(expected)["assignment"] is None


def test_heartbeat_response_empty_assignment_is_not_null():
    """An empty assignment (all partitions revoked) differs from null (no change)."""
    codec = CONSUMER_GROUP_HEARTBEAT.response(1)
    body = ConsumerGroupHeartbeatResponse(member_epoch=2, assignment=ConsumerGroupHeartbeatAssignment())
    encoded = codec.encode(body)
    assert encoded.endswith(b"\x01" + carray([]) + NO_TAGS + NO_TAGS)
    assert codec.decode_message(encoded).assignment == ConsumerGroupHeartbeatAssignment()


def test_a_truncated_assignment_is_an_error():
    codec = CONSUMER_GROUP_HEARTBEAT.response(0)
    encoded = codec.encode(ConsumerGroupHeartbeatResponse(assignment=ConsumerGroupHeartbeatAssignment(topic_partitions=[ConsumerGroupHeartbeatTopicPartitions(topic_id=TOPIC_ID)])))
    for cut in range(len(encoded)):
        with pytest.raises(ProtocolError):
            codec.decode_message(encoded[:cut])


def test_a_non_struct_assignment_is_refused_naming_the_field():
    codec = CONSUMER_GROUP_HEARTBEAT.response(0)
    out = bytearray(b"keep")
    with pytest.raises(ValueError, match="field 'assignment'"):
        codec.write(out, {"assignment": 7})
    assert out == b"keep"


def describe_response() -> ConsumerGroupDescribeResponse:
    assignment = ConsumerGroupDescribeAssignment(topic_partitions=[ConsumerGroupDescribeTopicPartitions(topic_id=TOPIC_ID, topic_name="t1", partitions=[0, 1])])
    member = ConsumerGroupDescribeMember(
        member_id="m-1",
        instance_id=None,
        rack_id="r",
        member_epoch=5,
        client_id="c",
        client_host="/127.0.0.1",
        subscribed_topic_names=["t1"],
        subscribed_topic_regex=None,
        assignment=assignment,
        target_assignment=ConsumerGroupDescribeAssignment(),
    )
    group = ConsumerGroupDescribeGroup(group_id="g", group_state="Stable", group_epoch=5, assignment_epoch=5, assignor_name="uniform", members=[member])
    missing = ConsumerGroupDescribeGroup(error_code=69, error_message="Group g2 not found.", group_id="g2")
    return ConsumerGroupDescribeResponse(throttle_time_ms=1, groups=[group, missing])


def test_describe_request_layout():
    codec = CONSUMER_GROUP_DESCRIBE.request(0)
    body = ConsumerGroupDescribeRequest(group_ids=["g", "h"], include_authorized_operations=True)
    expected = carray([cstr("g"), cstr("h")]) + b"\x01" + NO_TAGS
    assert codec.encode(body) == expected
    assert codec.decode_message(expected) == body


def test_describe_response_layout():
    codec = CONSUMER_GROUP_DESCRIBE.response(0)
    topic = TOPIC_ID.bytes + cstr("t1") + carray([i32(0), i32(1)]) + NO_TAGS
    member = (
        cstr("m-1")
        + cstr(None)
        + cstr("r")
        + i32(5)
        + cstr("c")
        + cstr("/127.0.0.1")
        + carray([cstr("t1")])
        + cstr(None)
        + carray([topic])
        + NO_TAGS  # assignment: a plain (non-nullable) struct, no marker byte
        + carray([])
        + NO_TAGS  # target assignment
        + NO_TAGS
    )
    group = i16(0) + cstr(None) + cstr("g") + cstr("Stable") + i32(5) + i32(5) + cstr("uniform") + carray([member]) + i32(-(2**31)) + NO_TAGS
    missing = i16(69) + cstr("Group g2 not found.") + cstr("g2") + cstr("") + i32(0) + i32(0) + cstr("") + carray([]) + i32(-(2**31)) + NO_TAGS
    expected = i32(1) + carray([group, missing]) + NO_TAGS
    assert codec.encode(describe_response()) == expected
    assert codec.decode_message(expected) == describe_response()
    assert codec.encode(codec.decode(expected)) == expected


def test_registered_with_the_other_apis():
    assert ALL_APIS[68] is CONSUMER_GROUP_HEARTBEAT
    assert ALL_APIS[69] is CONSUMER_GROUP_DESCRIBE
    assert (CONSUMER_GROUP_HEARTBEAT.min_version, CONSUMER_GROUP_HEARTBEAT.max_version, CONSUMER_GROUP_HEARTBEAT.flexible_from) == (0, 1, 0)
    assert (CONSUMER_GROUP_DESCRIBE.min_version, CONSUMER_GROUP_DESCRIBE.max_version, CONSUMER_GROUP_DESCRIBE.flexible_from) == (0, 0, 0)


# ---------------------------------------------------------------- Metadata v0-12 (topic ids)


def _metadata_bodies(kind: str, version: int) -> list[dict]:
    if kind == "request":
        named = {"topics": [{"topic_id": None, "name": "t1"}], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False, "include_topic_authorized_operations": True}
        by_id = {**named, "topics": [{"topic_id": TOPIC_ID, "name": None if version >= 10 else "t2"}]}
        return [named, by_id, {**named, "topics": None if version >= 1 else []}]
    partition = {"error_code": 0, "partition_index": 1, "leader_id": 3, "leader_epoch": 7, "replica_nodes": [3, 4], "isr_nodes": [3], "offline_replicas": [4]}
    topic = {"error_code": 0, "name": "t1", "topic_id": TOPIC_ID, "is_internal": False, "partitions": [partition], "topic_authorized_operations": -(2**31)}
    unknown = {**topic, "error_code": 100, "name": None if version >= 12 else "", "partitions": []}
    return [
        {
            "throttle_time_ms": 5,
            "brokers": [{"node_id": 3, "host": "h", "port": 9092, "rack": None}],
            "cluster_id": "c",
            "controller_id": 3,
            "topics": [topic, unknown],
            "cluster_authorized_operations": -(2**31),
        }
    ]


#: kafka-python's names of Metadata fields that Kafka's JSON names otherwise.
_KAFKA_PYTHON_NAMES = {"topic_authorized_operations": "authorized_operations", "cluster_authorized_operations": "authorized_operations"}


def _their_names(value):
    """Fields (or a body) with kafka-python's names."""
    if isinstance(value, dict):
        return {_KAFKA_PYTHON_NAMES.get(k, k): _their_names(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_their_names(v) for v in value]
    if isinstance(value, tuple) and value and isinstance(value[0], Field):
        return tuple(attrs.evolve(f, name=_KAFKA_PYTHON_NAMES.get(f.name, f.name), type=_their_names(f.type)) for f in value)
    return value


@pytest.mark.parametrize("version", range(13))
@pytest.mark.parametrize("kind", ["request", "response"])
def test_metadata_full_is_kafka_pythons(kind, version):
    """Metadata v0-12 as the broker serves it: the same bytes as
    kafka-python's classes generated from Kafka's JSON (which reach v12)."""
    from test_protocol_groups import by_name, new_class

    from kclient.protocol.messages.metadata import METADATA_FULL

    codec = METADATA_FULL.request(version) if kind == "request" else METADATA_FULL.response(version)
    fields = METADATA_FULL.request_fields if kind == "request" else METADATA_FULL.response_fields
    cls = new_class(METADATA_FULL, kind, version)
    assert cls is not None
    for body in _metadata_bodies(kind, version):
        theirs = bytes(cls(**by_name(cls._struct, _their_names(fields), version, _their_names(body))).encode())
        assert codec.encode(body) == theirs
        assert codec.encode(codec.decode_message(theirs)) == theirs


def test_metadata_and_metadata_full_share_one_message_set():
    """`METADATA` (v0-8, the clients') and `METADATA_FULL` (v0-12, the
    broker's) are one set of classes: versions 0-8 encode alike, and a topic
    name is a plain ``string`` before it turns nullable (request v10+,
    response v12+): ``""`` and a real name give a string's bytes, ``None``
    is refused."""
    from kclient.protocol.messages.metadata import METADATA, METADATA_FULL, MetadataRequest, MetadataRequestTopic

    assert METADATA.request_type is METADATA_FULL.request_type and METADATA.response_type is METADATA_FULL.response_type
    assert (METADATA.max_version, METADATA_FULL.max_version) == (8, 12)
    request = MetadataRequest(topics=[MetadataRequestTopic(name=""), MetadataRequestTopic(name="ab")], allow_auto_topic_creation=False)
    for version in range(9):
        for kind in ("request", "response"):
            for body in _metadata_bodies(kind, version):
                ours, full = (METADATA.request(version), METADATA_FULL.request(version)) if kind == "request" else (METADATA.response(version), METADATA_FULL.response(version))
                assert ours.encode(body) == full.encode(body)
        assert METADATA.request(version).encode(request) == METADATA_FULL.request(version).encode(request)
    # int32 count, then int16 length + bytes per name.
    assert METADATA_FULL.request(0).encode(request) == b"\x00\x00\x00\x02" + b"\x00\x00" + b"\x00\x02ab"
    # v9 (flexible): compact array and strings (length + 1), each topic's empty
    # tagged fields; then the three flags and the body's tagged fields.
    assert METADATA_FULL.request(9).encode(request) == b"\x03" + b"\x01\x00" + b"\x03ab\x00" + b"\x00\x00\x00\x00"
    nameless = MetadataRequest(topics=[MetadataRequestTopic(name=None, topic_id=TOPIC_ID)])
    for version in range(10):
        with pytest.raises(ValueError, match="string may not be null"):
            METADATA_FULL.request(version).encode(nameless)
    assert METADATA_FULL.request(10).encode(nameless)[:18] == b"\x02" + TOPIC_ID.bytes + b"\x00"
    unknown = {"brokers": [], "topics": [{"error_code": 100, "name": None, "topic_id": TOPIC_ID}]}
    for version in range(12):
        with pytest.raises(ValueError, match="string may not be null"):
            METADATA_FULL.response(version).encode(unknown)
    assert METADATA_FULL.response(12).decode_message(METADATA_FULL.response(12).encode(unknown)).topics[0].name is None
