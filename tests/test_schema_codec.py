"""The generated struct codecs (`kclient.protocol.schema`) against the
one-field-at-a-time reference, for every schema kclient has: the same
bytes, the same values, and on bad values or truncated bytes the same
error, with the output buffer left as it was."""

from __future__ import annotations

import pytest
from helpers.examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.errors import ProtocolError
from kclient.protocol.consumer_protocol import _ASSIGNMENT_FIELDS, _SUBSCRIPTION_FIELDS
from kclient.protocol.messages import ALL_APIS, APIS
from kclient.protocol.schema import StructCodec

pytestmark = pytest.mark.unit

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _schemas() -> list[tuple[str, tuple, int, bool]]:
    """(label, fields, version, flexible) for every request and response
    version of every API, and the consumer protocol's structs."""
    out = []
    apis = {id(a): a for a in (*APIS.values(), *ALL_APIS.values())}.values()
    for api in apis:
        for version in range(api.min_version, api.max_version + 1):
            for kind, fields in (("request", api.request_fields), ("response", api.response_fields)):
                out.append((f"{api.name} v{version} {kind}", tuple(fields), version, api.flexible(version)))
    for version in range(2):
        out.append((f"subscription v{version}", tuple(_SUBSCRIPTION_FIELDS), version, False))
        out.append((f"assignment v{version}", tuple(_ASSIGNMENT_FIELDS), version, False))
    return out


SCHEMAS = _schemas()


def _value(t, version: int):
    """A strategy for values of field type ``t`` (None sometimes where the
    type allows it)."""
    if isinstance(t, str):
        if t in _INTS:
            bits = _INTS[t]
            return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        if t == "uint32":
            return st.integers(0, (1 << 32) - 1)
        if t == "float64":
            return st.floats(allow_nan=False)
        if t == "bool":
            return st.booleans()
        if t == "uuid":
            return st.uuids() | st.none()
        if t == "string":
            return st.text(max_size=6)
        if t == "nullable_string":
            return st.text(max_size=6) | st.none()
        if t == "bytes":
            return st.binary(max_size=6)
        return st.binary(max_size=6) | st.none()  # nullable_bytes, records
    if isinstance(t, tuple) and t[0] == "array":
        return st.lists(_value(t[1], version), max_size=3) | st.none()
    if isinstance(t, tuple) and t[0] in ("struct", "nullable_struct"):
        one = _struct(t[1], version)
        return one | st.none() if t[0] == "nullable_struct" else one
    return st.lists(_struct(t, version), max_size=3) | st.none()


def _struct(fields, version: int):
    present = [f for f in fields if f.present_in(version)]
    # Each field is given or left out (its default is then written).
    return st.fixed_dictionaries({}, optional={f.name: _value(f.type, version) for f in present})


def _codecs(fields, version, flexible):
    return StructCodec(fields, version, flexible), StructCodec(fields, version, flexible, generated=False)


def _outcome(fn):
    try:
        return ("ok", fn())
    except (ValueError, ProtocolError) as exc:
        return (type(exc).__name__, str(exc))


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_codec_writes_and_reads_as_the_reference(data):
    label, fields, version, flexible = data.draw(st.sampled_from(SCHEMAS), label="schema")
    fast, ref = _codecs(fields, version, flexible)
    value = data.draw(_struct(fields, version), label=label)
    prefix = bytes(data.draw(st.binary(max_size=3), label="prefix"))
    a, b = bytearray(prefix), bytearray(prefix)
    fast.write(a, value)
    ref.write(b, value)
    assert a == b
    encoded = bytes(a)
    for buf in (encoded, memoryview(encoded), bytearray(encoded)):
        got, pos = fast.read(buf, len(prefix))
        want, want_pos = ref.read(buf, len(prefix))
        assert pos == want_pos == len(encoded)
        assert got == want
    # Every cut of the bytes: the same error (or the same value) both ways.
    for cut in sorted(set(data.draw(st.lists(st.integers(len(prefix), len(encoded)), max_size=6), label="cuts"))):
        short = encoded[:cut]
        assert _outcome(lambda short=short: fast.read(short, len(prefix))) == _outcome(lambda short=short: ref.read(short, len(prefix)))


def _bad(t):
    """A value that field type ``t`` refuses (``...`` for a bool, which
    takes any value)."""
    if isinstance(t, str):
        if t in _INTS:
            return 1 << _INTS[t]
        if t == "uint32":
            return -1
        if t in ("string", "bytes"):
            return None  # null where a value is required
        if t == "float64":
            return "not a number"
        return ... if t == "bool" else object()  # a bool takes anything
    return 7  # an int where an array is expected


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_codec_refuses_what_the_reference_refuses(data):
    """A value that does not fit: the same ValueError naming the field, and
    the generated writer leaves the buffer as it was (a nested struct's
    partial output included)."""
    label, fields, version, flexible = data.draw(st.sampled_from(SCHEMAS), label="schema")
    fast, ref = _codecs(fields, version, flexible)
    value = data.draw(_struct(fields, version), label=label)
    present = [f for f in fields if f.present_in(version)]
    if not present:
        return
    field = data.draw(st.sampled_from(present), label="broken field")
    bad = _bad(field.type)
    if bad is ...:
        return
    value = {**value, field.name: bad}
    prefix = b"\x01\x02"
    a, b = bytearray(prefix), bytearray(prefix)
    fast_error = _outcome(lambda: fast.write(a, value))
    ref_error = _outcome(lambda: ref.write(b, value))
    assert fast_error == ref_error
    if fast_error[0] != "ok":
        assert fast_error[0] == "ValueError" and repr(field.name) in fast_error[1]
        assert a == prefix


def test_a_nested_bad_value_names_its_path_and_leaves_the_buffer():
    from kclient.protocol.messages import FETCH

    codec = FETCH.response(11)
    partition = {"partition_index": 0, "error_code": 0, "high_watermark": 1 << 70, "records": b"abc"}
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 1, "records": b"x"}, partition]}]}
    out = bytearray(b"keep")
    with pytest.raises(ValueError, match="field 'responses': field 'partitions': field 'high_watermark'"):
        codec.write(out, body)
    assert out == b"keep"


def test_fixed_fields_are_packed_together():
    """The Fetch response's partition header (five fixed fields in v11) is
    one struct; values still come out under their names."""
    from kclient.protocol.messages import FETCH

    codec = FETCH.response(11)
    body = {
        "throttle_time_ms": 5,
        "error_code": 0,
        "session_id": 9,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": 2,
                        "error_code": 1,
                        "high_watermark": 10,
                        "last_stable_offset": 9,
                        "log_start_offset": 3,
                        "aborted_transactions": [{"producer_id": 4, "first_offset": 5}],
                        "preferred_read_replica": -1,
                        "records": None,
                    }
                ],
            }
        ],
    }
    encoded = codec.encode(body)
    assert codec.decode(encoded) == body
    assert StructCodec(FETCH.response_fields, 11, False, generated=False).encode(body) == encoded
