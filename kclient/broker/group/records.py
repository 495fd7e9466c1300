"""The records of ``__consumer_offsets``, byte for byte Kafka's.

Every record's key and value start with an int16 schema version (Kafka's
``GroupMetadataManager`` and the ``OffsetCommitKey`` / ``OffsetCommitValue``
/ ``GroupMetadataKey`` / ``GroupMetadataValue`` message definitions):

- offset commit key, versions 0 and 1 (written: 1): ``group`` string,
  ``topic`` string, ``partition`` int32;
- offset commit value: v0 ``offset`` int64, ``metadata`` string,
  ``commit_timestamp`` int64; v1 adds ``expire_timestamp`` int64 (written
  when the commit carried a retention time, OffsetCommit v2-4); v2 is v0;
  v3 (written otherwise) puts ``leader_epoch`` int32 after the offset
  (KIP-320);
- group metadata key, version 2: ``group`` string;
- group metadata value v0-3 (written: 3): ``protocol_type`` string,
  ``generation`` int32, ``protocol`` and ``leader`` nullable strings,
  ``current_state_timestamp`` int64 (v2+), then the members: ``member_id``,
  ``group_instance_id`` (v3+, nullable), ``client_id``, ``client_host``,
  ``rebalance_timeout`` int32 (v1+), ``session_timeout`` int32,
  ``subscription`` and ``assignment`` bytes.

A null value is a tombstone: the offset or the group was deleted (the
topic is compacted, ``cleanup.policy=compact``).

Pure: no I/O.
"""

from __future__ import annotations

import struct
from typing import Any

import attrs

from kclient.errors import ProtocolError
from kclient.protocol.schema import Field, StructCodec

#: The internal topic of committed offsets and group metadata.
OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3

_VERSION = struct.Struct(">h")

_OFFSET_KEY = StructCodec((Field("group", "string"), Field("topic", "string"), Field("partition", "int32")), 0, False)
_GROUP_KEY = StructCodec((Field("group", "string"),), 0, False)

_OFFSET_VALUE_FIELDS = (
    Field("offset", "int64"),
    Field("leader_epoch", "int32", "3+", default=-1),
    Field("metadata", "string"),
    Field("commit_timestamp", "int64"),
    Field("expire_timestamp", "int64", "1", default=-1),
)
_OFFSET_VALUE = [StructCodec(_OFFSET_VALUE_FIELDS, v, False) for v in range(4)]

_MEMBER_FIELDS = (
    Field("member_id", "string"),
    Field("group_instance_id", "nullable_string", "3+"),
    Field("client_id", "string"),
    Field("client_host", "string"),
    Field("rebalance_timeout", "int32", "1+", default=-1),
    Field("session_timeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"),
)
_GROUP_VALUE_FIELDS = (
    Field("protocol_type", "string"),
    Field("generation", "int32"),
    Field("protocol", "nullable_string"),
    Field("leader", "nullable_string"),
    Field("current_state_timestamp", "int64", "2+", default=-1),
    Field("members", _MEMBER_FIELDS),
)
_GROUP_VALUE = [StructCodec(_GROUP_VALUE_FIELDS, v, False) for v in range(4)]


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` of ``text``: ``s[0]*31^(n-1) + ... +
    s[n-1]`` over its UTF-16 code units, as a signed 32-bit int.

    Args:
        text: The string.

    Returns:
        The hash, in -2**31 .. 2**31-1.
    """
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group``: Kafka's
    ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``
    (``Utils.abs`` maps -2**31 to 0).

    Args:
        group: The group id.
        partitions: ``offsets.topic.num.partitions``.

    Returns:
        The partition index.
    """
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@attrs.frozen
class OffsetKey:
    """The key of a committed offset."""

    group: str
    topic: str
    partition: int


@attrs.frozen
class GroupKey:
    """The key of a group's metadata."""

    group: str


@attrs.frozen
class OffsetAndMetadata:
    """A committed offset: ``leader_epoch`` -1 when unknown,
    ``expire_timestamp`` -1 unless the commit gave a retention time (ms)."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1


@attrs.frozen
class MemberRecord:
    """One member in a group metadata record."""

    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@attrs.frozen
class GroupRecord:
    """A group metadata record's value."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberRecord, ...] = ()


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    """The key (version 1) of ``group``'s offset of ``topic``-``partition``."""
    return _VERSION.pack(OFFSET_KEY_VERSION) + _OFFSET_KEY.encode({"group": group, "topic": topic, "partition": partition})


def encode_group_key(group: str) -> bytes:
    """The key (version 2) of ``group``'s metadata."""
    return _VERSION.pack(GROUP_KEY_VERSION) + _GROUP_KEY.encode({"group": group})


def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    """An offset commit value: version 1 when it has an expire timestamp,
    else version 3 (as Kafka writes them)."""
    version = 1 if value.expire_timestamp >= 0 else 3
    return _VERSION.pack(version) + _OFFSET_VALUE[version].encode(attrs.asdict(value))


def encode_group_value(value: GroupRecord, version: int = GROUP_VALUE_VERSION) -> bytes:
    """A group metadata value (version 3 by default)."""
    body = attrs.asdict(value, recurse=False)
    body["members"] = [attrs.asdict(m) for m in value.members]
    return _VERSION.pack(version) + _GROUP_VALUE[version].encode(body)


def _split(data: bytes, what: str) -> tuple[int, memoryview]:
    if data is None or len(data) < 2:
        raise ProtocolError(f"{what} too short for its version")
    (version,) = _VERSION.unpack_from(data, 0)
    return version, memoryview(data)[2:]


def _decode_value(data: bytes, what: str, codecs: list[StructCodec]) -> dict[str, Any]:
    """The fields of a versioned value: its version (the first two bytes)
    picks its codec in ``codecs``."""
    version, rest = _split(data, what)
    if not 0 <= version < len(codecs):
        raise ProtocolError(f"unknown {what} version {version}")
    return codecs[version].decode(rest)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    """Decode a record key.

    Raises:
        kclient.errors.ProtocolError: Unknown key version or bad bytes.
    """
    version, rest = _split(data, "key")
    if version in (0, 1):
        return OffsetKey(**_OFFSET_KEY.decode(rest))
    if version == 2:
        return GroupKey(**_GROUP_KEY.decode(rest))
    raise ProtocolError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    """Decode an offset commit value (versions 0-3).

    Raises:
        kclient.errors.ProtocolError: Unknown version or bad bytes.
    """
    v = _decode_value(data, "offset commit value", _OFFSET_VALUE)
    return OffsetAndMetadata(
        offset=v["offset"],
        metadata=v["metadata"],
        commit_timestamp=v["commit_timestamp"],
        leader_epoch=v.get("leader_epoch", -1),
        expire_timestamp=v.get("expire_timestamp", -1),
    )


def decode_group_value(data: bytes) -> GroupRecord:
    """Decode a group metadata value (versions 0-3).

    Raises:
        kclient.errors.ProtocolError: Unknown version or bad bytes.
    """
    v = _decode_value(data, "group metadata value", _GROUP_VALUE)
    members = tuple(
        MemberRecord(
            member_id=m["member_id"],
            client_id=m["client_id"],
            client_host=m["client_host"],
            rebalance_timeout=m.get("rebalance_timeout", m["session_timeout"]),
            session_timeout=m["session_timeout"],
            subscription=bytes(m["subscription"]),
            assignment=bytes(m["assignment"]),
            group_instance_id=m.get("group_instance_id"),
        )
        for m in v["members"]
    )
    return GroupRecord(
        protocol_type=v["protocol_type"],
        generation=v["generation"],
        protocol=v["protocol"],
        leader=v["leader"],
        current_state_timestamp=v.get("current_state_timestamp", -1),
        members=members,
    )


__all__ = [
    "OFFSETS_TOPIC",
    "GroupKey",
    "GroupRecord",
    "MemberRecord",
    "OffsetAndMetadata",
    "OffsetKey",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "java_string_hash",
    "partition_for",
]
