"""The message classes (`kclient.protocol.messages`, declared with
`kclient.protocol.types`) and the codec that reads into and writes from
them: for every request and response version of every API, a message
encodes to the same bytes as the equivalent dict, decodes to the same values,
and the generated reader builds what the one-field-at-a-time reference
builds."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import attrs
import pytest
from helpers.examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_schema_codec import _struct

from kclient.errors import ProtocolError
from kclient.protocol.messages import ALL_APIS, APIS, FETCH, METADATA
from kclient.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kclient.protocol.messages.metadata import MetadataRequest
from kclient.protocol.schema import Field, StructCodec, fields_of
from kclient.protocol.types import Int32, NullableString, NullableVersions, String, Versions

pytestmark = pytest.mark.unit

_APIS = list({id(a): a for a in (*APIS.values(), *ALL_APIS.values())}.values())

# (label, fields, version, flexible, message class) of every API version.
_SCHEMAS = [
    (f"{api.name} v{version} {kind}", tuple(fields), version, api.flexible(version), message)
    for api in _APIS
    for version in range(api.min_version, api.max_version + 1)
    for kind, fields, message in (("request", api.request_fields, api.request_type), ("response", api.response_fields, api.response_type))
]


def _as_dict(message: Any, fields) -> Any:
    """A message's values for the fields of one version, as the dict codec
    reads them (nested messages too)."""
    out = {}
    for f in fields:
        value = getattr(message, f.name)
        if f.struct_type is not None and value is not None:
            value = _as_dict(value, f.type[1]) if _single(f) else [_as_dict(item, f.type) for item in value]
        out[f.name] = value
    return out


def _present(fields, version):
    return tuple(f for f in fields if f.present_in(version))


def _single(f) -> bool:
    """Whether ``f`` is one struct (``("struct", fields)``), not an array."""
    return isinstance(f.type, tuple) and f.type[:1] in (("struct",), ("nullable_struct",))


def _nested_present(fields, version):
    def nested(f):
        if _single(f):
            return attrs.evolve(f, type=(f.type[0], _nested_present(f.type[1], version)))
        return attrs.evolve(f, type=_nested_present(f.type, version))

    return tuple(nested(f) if f.struct_type is not None else f for f in _present(fields, version))


def test_every_api_declares_its_message_classes():
    for api in _APIS:
        assert api.request_type is not None and api.response_type is not None, api.name
        assert api.request_fields == fields_of(api.request_type)
        assert api.response_fields == fields_of(api.response_type)
        for version in range(api.min_version, api.max_version + 1):
            assert api.request(version).message is api.request_type
            assert api.response(version).message is api.response_type


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_message_encodes_and_decodes_as_the_dict(data):
    label, fields, version, flexible, message = data.draw(st.sampled_from(_SCHEMAS), label="schema")
    fast = StructCodec(fields, version, flexible, message=message)
    ref = StructCodec(fields, version, flexible, generated=False, message=message)
    value = data.draw(_struct(fields, version), label=label)
    encoded = fast.encode(value)
    decoded = fast.decode_message(encoded)
    assert type(decoded) is message
    assert _as_dict(decoded, _nested_present(fields, version)) == fast.decode(encoded)
    # The message writes the same bytes as the dict, both ways.
    assert fast.encode(decoded) == encoded
    assert ref.encode(decoded) == encoded
    # The reference reader builds an equal message.
    reference, pos = ref.read_message(encoded, 0)
    assert pos == len(encoded)
    assert reference == decoded
    # Truncated bytes: an error, never a message.
    if len(encoded) > 1:
        cut = data.draw(st.integers(0, len(encoded) - 1), label="cut")
        with pytest.raises(ProtocolError):
            fast.decode_message(encoded[:cut])


def test_the_fields_of_other_versions_take_their_defaults_and_share_nothing():
    codec = FETCH.request(3)
    body = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, topics=[FetchTopic(topic="t", partitions=[FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1 << 20)])])
    encoded = codec.encode(body)
    first = codec.decode_message(encoded)
    second = codec.decode_message(encoded)
    # Not in v3: the class defaults (Kafka's), and a fresh list each time.
    assert first.session_epoch == -1 and first.rack_id == "" and first.forgotten_topics_data == []
    assert first.forgotten_topics_data is not second.forgotten_topics_data
    assert first.topics[0].partitions[0].fetch_offset == 42
    assert first.topics[0].partitions[0].current_leader_epoch == -1
    # The message and the dict the old callers build give the same bytes.
    topics = [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 42, "partition_max_bytes": 1 << 20}]}]
    assert encoded == codec.encode({"max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "topics": topics})


def test_a_nullable_array_is_declared_and_kept_null():
    (topics,) = [f for f in METADATA.request_fields if f.name == "topics"]
    assert topics.nullable  # null: every topic (v1+)
    codec = METADATA.request(4)
    decoded = codec.decode_message(codec.encode(MetadataRequest(topics=None, allow_auto_topic_creation=True)))
    assert decoded.topics is None and decoded.allow_auto_topic_creation is True


def test_a_bad_value_in_a_message_names_the_field_and_leaves_the_buffer():
    codec = FETCH.request(11)
    body = FetchRequest(topics=[FetchTopic(topic="t", partitions=[FetchPartition(partition=1 << 40)])])
    out = bytearray(b"keep")
    with pytest.raises(ValueError, match="field 'topics': field 'partitions': field 'partition'"):
        codec.write(out, body)
    assert out == b"keep"


@attrs.define(kw_only=True)
class _Item:
    id: Int32 = -1


@attrs.define(kw_only=True)
class _Body:
    name: String = ""
    since_three: Annotated[Int32, Versions("3+")] = 7
    items: list[_Item] | None = attrs.Factory(list)
    ids: list[Int32] = attrs.Factory(list)
    later_null: Annotated[NullableString, NullableVersions("2+")] = ""


@attrs.define(kw_only=True)
class _Wrong:
    when: uuid.UUID = uuid.UUID(int=0)


def test_fields_of_reads_the_annotations():
    fields = fields_of(_Body)
    assert fields == (
        Field("name", "string"),
        Field("since_three", "int32", "3+", 7),
        Field("items", (Field("id", "int32", "0+", -1),)),
        Field("ids", ("array", "int32")),
        Field("later_null", "string", "0-1"),
        Field("later_null", "nullable_string", "2+"),
    )
    assert fields[2].nullable and fields[2].struct_type is _Item
    assert not fields[3].nullable
    with pytest.raises(TypeError, match="_Wrong.when"):
        fields_of(_Wrong)
