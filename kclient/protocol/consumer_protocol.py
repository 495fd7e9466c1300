"""The "consumer" embedded protocol carried inside JoinGroup and SyncGroup.

Group members of `protocol_type` "consumer" put a
`ConsumerProtocolSubscription` in each JoinGroup protocol's `metadata`,
and the leader sends each member a `ConsumerProtocolAssignment` in
SyncGroup's `assignment`. Both are an int16 version followed by the
(never flexible) struct of that version. Source:
`ConsumerProtocolSubscription.json` / `ConsumerProtocolAssignment.json`
(in Kafka's ``clients/src/main/resources/common/message``; the protocol
guide does not describe this embedded format) and KIP-429 (v1 owned partitions), KIP-792 (v2 generation id) and KIP-881
(v3 rack id). Versions 0-3 of both are implemented; the assignment has the
same layout in every version.

Like Kafka's own consumers, a reader accepts versions newer than it knows:
it decodes them as the newest known version and ignores the bytes after it
(newer versions only append fields).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from kclient.errors import ProtocolError
from kclient.protocol import primitives as p
from kclient.protocol.schema import Field, StructCodec

#: The `protocol_type` of JoinGroup/SyncGroup for consumer groups.
PROTOCOL_TYPE = "consumer"
#: Highest version of `ConsumerProtocolSubscription` implemented.
SUBSCRIPTION_MAX_VERSION = 3
#: Highest version of `ConsumerProtocolAssignment` implemented.
ASSIGNMENT_MAX_VERSION = 3

_TOPIC_PARTITION = (
    Field("topic", "string"),
    Field("partitions", ("array", "int32")),
)

_SUBSCRIPTION_FIELDS = (
    Field("topics", ("array", "string")),
    Field("user_data", "nullable_bytes"),
    Field("owned_partitions", _TOPIC_PARTITION, "1+"),
    Field("generation_id", "int32", "2+", default=-1),
    Field("rack_id", "nullable_string", "3+"),
)

_ASSIGNMENT_FIELDS = (
    Field("assigned_partitions", _TOPIC_PARTITION),
    Field("user_data", "nullable_bytes"),
)

_SUBSCRIPTION = [StructCodec(_SUBSCRIPTION_FIELDS, v, False) for v in range(SUBSCRIPTION_MAX_VERSION + 1)]
_ASSIGNMENT = [StructCodec(_ASSIGNMENT_FIELDS, v, False) for v in range(ASSIGNMENT_MAX_VERSION + 1)]

TopicPartitions = tuple[str, tuple[int, ...]]


@attrs.frozen
class Subscription:
    """A decoded `ConsumerProtocolSubscription`.

    `owned_partitions` is a tuple of `(topic, (partition, ...))`; fields a
    version lacks keep their defaults (no owned partitions, generation -1,
    no rack).
    """

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartitions, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@attrs.frozen
class Assignment:
    """A decoded `ConsumerProtocolAssignment`: `assigned_partitions` is a
    tuple of `(topic, (partition, ...))`."""

    version: int
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    user_data: bytes | None = None


def _check_version(version: int, highest: int, what: str) -> None:
    if not 0 <= version <= highest:
        raise ValueError(f"{what} version {version} is not implemented (0-{highest})")


def _pairs(items: Iterable[tuple[str, Iterable[int]]]) -> list[dict[str, Any]]:
    return [{"topic": topic, "partitions": list(partitions)} for topic, partitions in items]


def _tuples(items: list[dict[str, Any]] | None) -> tuple[TopicPartitions, ...]:
    return tuple((item["topic"], tuple(item["partitions"] or ())) for item in items or ())


def _read_version(data: p.Buffer, what: str) -> tuple[int, int]:
    if len(data) < 2:
        raise ProtocolError(f"{what} of {len(data)} bytes has no version")
    version, pos = p.read_int16(data, 0)
    if version < 0:
        raise ProtocolError(f"unsupported {what} version {version}")
    return version, pos


def _read_body(data: p.Buffer, structs: list[StructCodec], max_version: int, what: str) -> tuple[int, dict[str, Any]]:
    """The version and the body of an embedded struct: (version, dict). A
    version above ``max_version`` is read with the newest struct known and
    its extra bytes are ignored (newer versions only append fields); a known
    version must use every byte."""
    version, pos = _read_version(data, what)
    body, end = structs[min(version, max_version)].read(data, pos)
    if version <= max_version and end != len(data):
        raise ProtocolError(f"{len(data) - end} unexpected trailing bytes after a v{version} {what}")
    return version, body


def encode_subscription(
    topics: Iterable[str],
    user_data: bytes | None = None,
    *,
    owned_partitions: Iterable[tuple[str, Iterable[int]]] = (),
    generation_id: int = -1,
    rack_id: str | None = None,
    version: int = 1,
) -> bytes:
    """Encode a `ConsumerProtocolSubscription` for a JoinGroup protocol's metadata.

    Args:
        topics: The subscribed topic names.
        user_data: Assignor-specific bytes, or None.
        owned_partitions: `(topic, partitions)` pairs the member owns
            (v1+, KIP-429); dropped by v0.
        generation_id: The member's last generation (v2+, KIP-792).
        rack_id: The member's rack (v3+, KIP-881).
        version: The version to write, 0-3.

    Returns:
        The int16 version followed by the struct of that version.

    Raises:
        ValueError: If `version` is not 0-3 or a value cannot be encoded.
    """
    _check_version(version, SUBSCRIPTION_MAX_VERSION, "subscription")
    out = bytearray()
    p.write_int16(out, version)
    _SUBSCRIPTION[version].write(
        out,
        {
            "topics": list(topics),
            "user_data": user_data,
            "owned_partitions": _pairs(owned_partitions),
            "generation_id": generation_id,
            "rack_id": rack_id,
        },
    )
    return bytes(out)


def decode_subscription(data: bytes) -> Subscription:
    """Decode a `ConsumerProtocolSubscription` (a JoinGroup member's metadata).

    Args:
        data: The metadata bytes.

    Returns:
        The subscription; a version above 3 is read as v3 and its extra
            bytes are ignored.

    Raises:
        ProtocolError: If the bytes are truncated, carry trailing bytes
            (for v0-3) or a negative version.
    """
    version, body = _read_body(data, _SUBSCRIPTION, SUBSCRIPTION_MAX_VERSION, "subscription")
    return Subscription(
        version=version,
        topics=tuple(body["topics"] or ()),
        user_data=body["user_data"] if body["user_data"] is None else bytes(body["user_data"]),
        owned_partitions=_tuples(body.get("owned_partitions")),
        generation_id=body.get("generation_id", -1),
        rack_id=body.get("rack_id"),
    )


def encode_assignment(
    assigned_partitions: Iterable[tuple[str, Iterable[int]]],
    user_data: bytes | None = None,
    *,
    version: int = 0,
) -> bytes:
    """Encode a `ConsumerProtocolAssignment` for SyncGroup.

    Args:
        assigned_partitions: `(topic, partitions)` pairs assigned to the member.
        user_data: Assignor-specific bytes, or None.
        version: The version to write, 0-3 (all have the same layout).

    Returns:
        The int16 version followed by the struct.

    Raises:
        ValueError: If `version` is not 0-3 or a value cannot be encoded.
    """
    _check_version(version, ASSIGNMENT_MAX_VERSION, "assignment")
    out = bytearray()
    p.write_int16(out, version)
    _ASSIGNMENT[version].write(out, {"assigned_partitions": _pairs(assigned_partitions), "user_data": user_data})
    return bytes(out)


def decode_assignment(data: bytes) -> Assignment:
    """Decode a `ConsumerProtocolAssignment` (a SyncGroup response's assignment).

    Args:
        data: The assignment bytes. Empty bytes (what a coordinator sends a
            member the leader assigned nothing, e.g. after an error) decode
            as an empty v0 assignment.

    Returns:
        The assignment; a version above 3 is read as v3 and its extra bytes
            are ignored.

    Raises:
        ProtocolError: If the bytes are truncated, carry trailing bytes
            (for v0-3) or a negative version.
    """
    if len(data) == 0:
        return Assignment(version=0)
    version, body = _read_body(data, _ASSIGNMENT, ASSIGNMENT_MAX_VERSION, "assignment")
    return Assignment(
        version=version,
        assigned_partitions=_tuples(body["assigned_partitions"]),
        user_data=body["user_data"] if body["user_data"] is None else bytes(body["user_data"]),
    )


__all__ = [
    "ASSIGNMENT_MAX_VERSION",
    "PROTOCOL_TYPE",
    "SUBSCRIPTION_MAX_VERSION",
    "Assignment",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]
