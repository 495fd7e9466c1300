"""The Kafka protocol's field types as Python annotations, for the message
classes of `kclient.protocol.messages`.

Each message (a request or response body, or a struct nested in one) is an
``attrs`` class whose attributes are annotated with these aliases: the
Python type a value has (``int``, ``str``, ``bytes``, ``list[...]``) and, in
``typing.Annotated`` metadata, the wire type Kafka's message JSON files give
it (``int32``, ``nullable_string``, ...; see the Kafka protocol guide,
https://kafka.apache.org/protocol#protocol_types). A field present in only
some versions adds `Versions`::

    @attrs.define(kw_only=True)
    class FetchPartition:
        partition: Int32 = 0
        current_leader_epoch: Annotated[Int32, Versions("9+")] = -1

`kclient.protocol.schema.fields_of` reads a class back into the schema's
`kclient.protocol.schema.Field` list, so the class is the one declaration
of a message for every version of its API. An array is ``list[T]`` (``T`` a
message class or one of these aliases), ``list[T] | None`` where Kafka lets
it be null.

Pure: no I/O.
"""

from __future__ import annotations

import uuid
from typing import Annotated

import attrs

__all__ = [
    "Bool",
    "Bytes",
    "Float64",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "NullableBytes",
    "NullableString",
    "Records",
    "String",
    "UInt32",
    "Uuid",
    "NullableVersions",
    "Versions",
]


@attrs.frozen
class Versions:
    """The versions a field exists in, as Kafka's message JSON writes them
    (``"3+"``, ``"0-2"``, ``"5"``); a field without it exists in all
    (``"0+"``)."""

    spec: str


@attrs.frozen
class NullableVersions:
    """The versions in which a string may be null, for a field Kafka made
    nullable in a later version (``nullableVersions`` in Kafka's message
    JSON): ``Annotated[NullableString, NullableVersions("6+")]`` is a
    ``string`` before version 6 and a ``nullable_string`` from it."""

    spec: str


#: A signed 8-bit integer (``int8``).
Int8 = Annotated[int, "int8"]
#: A signed 16-bit integer (``int16``): error codes, API keys and versions.
Int16 = Annotated[int, "int16"]
#: A signed 32-bit integer (``int32``): partitions, broker ids, times in ms.
Int32 = Annotated[int, "int32"]
#: A signed 64-bit integer (``int64``): offsets, timestamps in ms, producer ids.
Int64 = Annotated[int, "int64"]
#: An unsigned 32-bit integer (``uint32``).
UInt32 = Annotated[int, "uint32"]
#: A 64-bit IEEE 754 float (``float64``).
Float64 = Annotated[float, "float64"]
#: A boolean (``bool``: one byte, 0 or 1).
Bool = Annotated[bool, "bool"]
#: A 128-bit UUID (``uuid``): topic ids (KIP-516).
Uuid = Annotated[uuid.UUID | None, "uuid"]
#: A string that may not be null (``string``; compact in flexible versions).
String = Annotated[str, "string"]
#: A string or null (``nullable_string``).
NullableString = Annotated[str | None, "nullable_string"]
#: Bytes that may not be null (``bytes``); decoded as a slice of the frame
#: (a ``memoryview`` when the frame is one).
Bytes = Annotated[bytes | memoryview, "bytes"]
#: Bytes or null (``nullable_bytes``).
NullableBytes = Annotated[bytes | memoryview | None, "nullable_bytes"]
#: A record set (``records``): record batches as bytes, or null. Decoded
#: as a slice of the frame, not copied.
Records = Annotated[bytes | bytearray | memoryview | None, "records"]
