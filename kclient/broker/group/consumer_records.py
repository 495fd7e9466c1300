"""The ``__consumer_offsets`` records of consumer-protocol groups (KIP-848),
byte for byte Kafka's (``group-coordinator`` message definitions
``ConsumerGroup*Key`` / ``ConsumerGroup*Value``).

A key is an int16 version, then its fields (not flexible); the version
tells the record type. A value is an int16 version (0), then a flexible
struct (KIP-482; the tagged fields, such as the member's classic-protocol
metadata, are never written here and are skipped when read):

- 3 group metadata: key ``group_id``; value ``epoch`` (the group epoch);
- 5 member metadata: key ``group_id``, ``member_id``; value the member's
  instance and rack ids, client id and host, subscription (names and
  regex), rebalance timeout and server assignor;
- 6 target assignment metadata: key ``group_id``; value ``assignment_epoch``;
- 7 target assignment of a member: key ``group_id``, ``member_id``; value
  its ``topic_partitions``;
- 8 current assignment of a member: key ``group_id``, ``member_id``; value
  its epochs, reconciliation state and its assigned and pending-revocation
  partitions.

(Version 4, the subscribed topics' metadata, is a cache Kafka keeps; here
the topics are read from the broker's metadata again.) A null value is a
tombstone. `group_records` gives every record of a group's current state,
so the records to write after a change are those that differ from what
was written before.

Pure: no I/O.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kclient.broker.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from kclient.broker.group.reconciliation import STABLE, UNKNOWN, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, MemberAssignment, Partitions, freeze
from kclient.errors import ProtocolError
from kclient.protocol.schema import Field, StructCodec

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
#: The key versions of consumer-protocol group records (4: not used here).
KEY_VERSIONS = frozenset({GROUP_METADATA, 4, MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})

#: Kafka's ``MemberState`` byte of each reconciliation state.
STATE_BYTES = {STABLE: 0, UNREVOKED_PARTITIONS: 1, UNRELEASED_PARTITIONS: 2, UNKNOWN: 127}
_STATES = {b: s for s, b in STATE_BYTES.items()}

_VERSION = struct.Struct(">h")
_GROUP_KEY = StructCodec((Field("group_id", "string"),), 0, False)
_MEMBER_KEY = StructCodec((Field("group_id", "string"), Field("member_id", "string")), 0, False)
_TOPIC_PARTITIONS = (Field("topic_id", "uuid"), Field("partitions", ("array", "int32")))
_VALUES: dict[int, StructCodec] = {
    GROUP_METADATA: StructCodec((Field("epoch", "int32"),), 0, True),
    MEMBER_METADATA: StructCodec(
        (
            Field("instance_id", "nullable_string"),
            Field("rack_id", "nullable_string"),
            Field("client_id", "string"),
            Field("client_host", "string"),
            Field("subscribed_topic_names", ("array", "string")),
            Field("subscribed_topic_regex", "nullable_string"),
            Field("rebalance_timeout_ms", "int32"),
            Field("server_assignor", "nullable_string"),
        ),
        0,
        True,
    ),
    TARGET_ASSIGNMENT_METADATA: StructCodec((Field("assignment_epoch", "int32"),), 0, True),
    TARGET_ASSIGNMENT_MEMBER: StructCodec((Field("topic_partitions", _TOPIC_PARTITIONS),), 0, True),
    CURRENT_MEMBER_ASSIGNMENT: StructCodec(
        (
            Field("member_epoch", "int32"),
            Field("previous_member_epoch", "int32"),
            Field("state", "int8"),
            Field("assigned_partitions", _TOPIC_PARTITIONS),
            Field("partitions_pending_revocation", _TOPIC_PARTITIONS),
        ),
        0,
        True,
    ),
}


def _key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    if member_id is None:
        return _VERSION.pack(version) + _GROUP_KEY.encode({"group_id": group_id})
    return _VERSION.pack(version) + _MEMBER_KEY.encode({"group_id": group_id, "member_id": member_id})


def _value(version: int, fields: dict[str, Any]) -> bytes:
    return _VERSION.pack(0) + _VALUES[version].encode(fields)


def _partitions(partitions: Partitions) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(partitions.items(), key=lambda i: str(i[0]))]


def _member_records(group_id: str, m: ConsumerGroupMember, target: Partitions) -> Iterable[tuple[bytes, bytes]]:
    yield _key(MEMBER_METADATA, group_id, m.member_id), _value(
        MEMBER_METADATA,
        {
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "server_assignor": m.server_assignor,
        },
    )
    yield _key(TARGET_ASSIGNMENT_MEMBER, group_id, m.member_id), _value(TARGET_ASSIGNMENT_MEMBER, {"topic_partitions": _partitions(target)})
    a = m.assignment
    yield _key(CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), _value(
        CURRENT_MEMBER_ASSIGNMENT,
        {
            "member_epoch": a.member_epoch,
            "previous_member_epoch": a.previous_member_epoch,
            "state": STATE_BYTES[a.state],
            "assigned_partitions": _partitions(a.assigned),
            "partitions_pending_revocation": _partitions(a.pending_revocation),
        },
    )


def group_records(group: ConsumerGroup) -> dict[bytes, bytes]:
    """Every record of ``group``'s current state, key -> value.

    Args:
        group: The group.

    Returns:
        The records (none for a deleted group).
    """
    if group.dead:
        return {}
    gid = group.group_id
    out = {
        _key(GROUP_METADATA, gid): _value(GROUP_METADATA, {"epoch": group.group_epoch}),
        _key(TARGET_ASSIGNMENT_METADATA, gid): _value(TARGET_ASSIGNMENT_METADATA, {"assignment_epoch": group.assignment_epoch}),
    }
    for m in group.members.values():
        out.update(_member_records(gid, m, group.target.get(m.member_id, {})))
    return out


def records_to_write(written: Mapping[bytes, bytes], now: Mapping[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """The records that bring ``written`` to ``now``: new and changed ones,
    and tombstones for keys gone (Kafka writes the member's tombstones in
    the order current assignment, target assignment, metadata, which the
    key versions' descending order gives)."""
    changed: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in now.items() if written.get(k) != v]
    gone = sorted((k for k in written if k not in now), key=lambda k: -_VERSION.unpack_from(k)[0])
    return changed + [(k, None) for k in gone]


def decode_record_key(key: bytes) -> tuple[int, str, str | None]:
    """``(key version, group id, member id or None)`` of a consumer group
    record key.

    Raises:
        kclient.errors.ProtocolError: Not a consumer group record key.
    """
    if len(key) < 2:
        raise ProtocolError("record key too short for its version")
    (version,) = _VERSION.unpack_from(key)
    if version in (GROUP_METADATA, 4, TARGET_ASSIGNMENT_METADATA):
        return version, _GROUP_KEY.decode(memoryview(key)[2:])["group_id"], None
    if version in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
        fields = _MEMBER_KEY.decode(memoryview(key)[2:])
        return version, fields["group_id"], fields["member_id"]
    raise ProtocolError(f"key version {version} is no consumer group record")


def _decode_value(version: int, value: bytes) -> dict[str, Any]:
    return _VALUES[version].decode(memoryview(value)[2:])


def _frozen(entries: list[dict[str, Any]]) -> dict[uuid.UUID, frozenset[int]]:
    return freeze({e["topic_id"]: e["partitions"] for e in entries})


def _apply_member(group: ConsumerGroup, version: int, member_id: str, value: bytes | None) -> None:
    if value is None:
        if version == CURRENT_MEMBER_ASSIGNMENT:
            group.remove(member_id)
        elif version == TARGET_ASSIGNMENT_MEMBER:
            group.target.pop(member_id, None)
        return
    fields = _decode_value(version, value)
    if version == TARGET_ASSIGNMENT_MEMBER:
        group.target[member_id] = _frozen(fields["topic_partitions"])
        return
    member = group.members.get(member_id) or ConsumerGroupMember(member_id=member_id)
    if version == MEMBER_METADATA:
        member.instance_id, member.rack_id = fields["instance_id"], fields["rack_id"]
        member.client_id, member.client_host = fields["client_id"], fields["client_host"]
        member.subscribed_topic_names = tuple(fields["subscribed_topic_names"])
        member.subscribed_topic_regex = fields["subscribed_topic_regex"]
        member.rebalance_timeout_ms, member.server_assignor = fields["rebalance_timeout_ms"], fields["server_assignor"]
        group.add(member)
    else:
        group.add(member)
        assignment = MemberAssignment(
            state=_STATES.get(fields["state"], UNKNOWN),
            member_epoch=fields["member_epoch"],
            previous_member_epoch=fields["previous_member_epoch"],
            assigned=_frozen(fields["assigned_partitions"]),
            pending_revocation=_frozen(fields["partitions_pending_revocation"]),
        )
        group.set_assignment(member, assignment)


def replay(groups: dict[str, ConsumerGroup], key: bytes, value: bytes | None) -> None:
    """Apply one record, read back from ``__consumer_offsets``, to ``groups``.

    Args:
        groups: group id -> group, updated in place (a group is created by
            its first record, removed by its metadata tombstone).
        key: The record key.
        value: The record value, None for a tombstone.

    Raises:
        kclient.errors.ProtocolError: Bytes that are no consumer group record.
    """
    version, group_id, member_id = decode_record_key(key)
    if version == 4:
        return
    if version == GROUP_METADATA and value is None:
        groups.pop(group_id, None)
        return
    group = groups.setdefault(group_id, ConsumerGroup(group_id))
    if member_id is not None:
        _apply_member(group, version, member_id, value)
    elif value is not None and version == GROUP_METADATA:
        group.group_epoch = _decode_value(version, value)["epoch"]
    elif value is not None:
        group.assignment_epoch = _decode_value(version, value)["assignment_epoch"]


__all__ = [
    "CURRENT_MEMBER_ASSIGNMENT",
    "GROUP_METADATA",
    "KEY_VERSIONS",
    "MEMBER_METADATA",
    "STATE_BYTES",
    "TARGET_ASSIGNMENT_MEMBER",
    "TARGET_ASSIGNMENT_METADATA",
    "decode_record_key",
    "group_records",
    "records_to_write",
    "replay",
]
