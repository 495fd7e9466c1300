"""Message format v0 and v1 (magic 0/1), byte for byte.

Facts used, each checked against an independent source:
* golden sets built by kafka-python 3.0 (../shared/vectors/record_batches.json);
* the sizes Kafka's ``LegacyRecord`` gives (``RECORD_OVERHEAD_V0`` = 14,
  ``_V1`` = 22) and a line a real Kafka 0.8.2 DumpLogSegments printed for
  key "key" / value "value" (size and CRC from a real broker, quoted in
  tests/test_dump_log.py);
* the layouts of the Kafka documentation
  (https://kafka.apache.org/documentation/#messageformat, "Record Batch"
  and "Old Message Format"), derived by hand below;
* kafka-python's own reader (an independent implementation) for sets we build.
"""

from __future__ import annotations

import json
import pathlib
import struct
import warnings
import zlib

import pytest
from helpers.examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.errors import CorruptRecordError
from kclient.protocol.records import build_batch, codecs, iter_record_set, legacy
from kclient.protocol.records.legacy import (
    assign_legacy_offsets,
    build_entry,
    build_message,
    build_message_set,
    iter_legacy_records,
    read_message,
    validate_legacy_entry,
)

pytestmark = pytest.mark.unit

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "vectors"
if not VECTORS.exists():
    VECTORS = pathlib.Path("/work/shared/vectors")

LEGACY_CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4]


def _hex(v):
    return None if v is None else bytes.fromhex(v)


def _legacy_vectors():
    return [v for v in json.loads((VECTORS / "record_batches.json").read_text()) if v["format"] in ("v0", "v1")]


def _plain(records):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


# ------------------------------------------------------------------ golden vectors


def test_golden_vectors_cover_every_legacy_format_and_codec():
    got = {(v["format"], v["codec"]) for v in _legacy_vectors()}
    assert got == {(f, c) for f in ("v0", "v1") for c in ("none", "gzip", "snappy", "lz4")}


@pytest.mark.parametrize("vector", _legacy_vectors(), ids=lambda v: f"{v['format']}-{v['codec']}")
def test_golden_vector_decodes(vector):
    raw = bytes.fromhex(vector["hex"])
    expected = [
        (r["offset"], -1 if r["timestamp"] is None else r["timestamp"], _hex(r["key"]), _hex(r["value"]), ())
        for r in vector["records"]
    ]
    assert _plain(iter_legacy_records(raw)) == expected
    assert _plain(iter_record_set(raw)) == expected  # the generic entry point dispatches on magic


@pytest.mark.parametrize("vector", [v for v in _legacy_vectors() if v["codec"] == "none"], ids=lambda v: v["format"])
def test_golden_uncompressed_vector_encodes_byte_exact(vector):
    magic = int(vector["format"][1])
    records = [(_hex(r["key"]), _hex(r["value"]), r["timestamp"]) for r in vector["records"]]
    assert build_message_set(records, magic=magic, base_offset=vector["base_offset"]) == bytes.fromhex(vector["hex"])


@pytest.mark.parametrize("vector", [v for v in _legacy_vectors() if v["codec"] != "none"], ids=lambda v: f"{v['format']}-{v['codec']}")
def test_golden_compressed_vector_is_one_wrapper(vector):
    raw = bytes.fromhex(vector["hex"])
    wrapper = read_message(raw)
    assert wrapper.size == len(raw)
    assert wrapper.key is None
    assert codecs.NAMES[wrapper.codec] == vector["codec"]
    assert wrapper.is_valid
    info = validate_legacy_entry(raw)
    assert info.record_count == len(vector["records"])
    # kafka-python leaves the wrapper offset at 0 (the broker assigns it):
    # Kafka's rule then keeps the inner offsets (base 0 - 4 < 0), see legacy docstring
    assert wrapper.offset == 0


def test_golden_v0_lz4_vector_carries_the_kip57_broken_header_checksum():
    raw = bytes.fromhex(next(v["hex"] for v in _legacy_vectors() if v["format"] == "v0" and v["codec"] == "lz4"))
    frame = read_message(raw).value
    # Kafka's MessageCompressionTest.testLZ4FramingV0 header: 04 22 4D 18 60 40 1A
    assert frame[:7] == bytes.fromhex("04224d1860401a")
    assert frame[6] == codecs.lz4_header_checksum(frame, broken=True)
    assert frame[6] != codecs.lz4_header_checksum(frame)
    with pytest.raises(codecs.CodecError):  # a strict (magic 1/2) reader rejects it ...
        codecs.decompress(codecs.LZ4, frame)
    assert codecs.decompress_legacy(codecs.LZ4, frame, 0)  # ... the magic 0 reader ignores HC as Kafka does


# ------------------------------------------------------------------ hand derivations


def test_v0_message_key_k_value_v_by_hand():
    # v0 message: crc 4 + magic 1 + attributes 1 + key length 4 + "k" 1
    #             + value length 4 + "v" 1 = 16 bytes; + 12 log overhead = 28
    body = b"\x00" + b"\x00" + b"\x00\x00\x00\x01" + b"k" + b"\x00\x00\x00\x01" + b"v"  # magic..value
    crc = zlib.crc32(body)
    expected = struct.pack(">qi", 7, 16) + struct.pack(">I", crc) + body
    assert build_message(b"k", b"v", magic=0) == expected[12:]
    assert build_message_set([(b"k", b"v")], magic=0, base_offset=7) == expected
    assert len(expected) == 28
    assert legacy.message_size(b"k", b"v", 0) == 16


def test_v1_message_key_k_value_v_by_hand():
    # v1 adds the 8-byte timestamp after attributes: 16 + 8 = 24 bytes, + 12 = 36
    body = b"\x01" + b"\x00" + struct.pack(">q", 1234) + b"\x00\x00\x00\x01k" + b"\x00\x00\x00\x01v"
    expected = struct.pack(">qi", 0, 24) + struct.pack(">I", zlib.crc32(body)) + body
    assert build_message_set([(b"k", b"v", 1234)], magic=1) == expected
    assert len(expected) == 36


def test_null_key_and_value_are_length_minus_one():
    msg = build_message(None, None, magic=0)
    assert msg[6:] == b"\xff\xff\xff\xff" * 2
    assert len(msg) == legacy.RECORD_OVERHEAD[0] == 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0 = 14 B
    assert len(build_message(None, None, magic=1)) == legacy.RECORD_OVERHEAD[1] == 22  # RECORD_OVERHEAD_V1 = 22 B
    assert _plain(iter_legacy_records(build_message_set([(None, None, 5), (b"", b"", 6)], magic=1))) == [
        (0, 5, None, None, ()),
        (1, 6, b"", b"", ()),
    ]


def test_seed_004_worked_sizes_and_real_kafka_crc():
    # Seed 004, v0: key "key", value "value": "12B + 14B + 3B + 5B = 34B", and
    # Kafka 0.8.2's DumpLogSegments printed "crc: 592888119 keysize: 3" for it.
    entry = build_message_set([(b"key", b"value")], magic=0)
    assert len(entry) == 12 + 14 + 3 + 5 == 34
    assert read_message(entry).crc == 592888119
    # then key=null, value "value": "12B + 14B + 5B = 31B" (file grows 34 -> 65)
    assert len(build_message_set([(None, b"value")], magic=0)) == 31
    # v1: "此条消息在v1版本中会占用42B"
    assert len(build_message_set([(b"key", b"value", 0)], magic=1)) == 42
    # 10 messages with a null key and a 6-byte value: "v0 ... 320B, v1 ... 400B"
    ten = [(None, b"abcdef", 0)] * 10
    assert len(build_message_set(ten, magic=0)) == 320
    assert len(build_message_set(ten, magic=1)) == 400
    # v1 with one 16 KiB value and no key: "12B+22B+16384B=16418B"
    assert len(build_message_set([(None, b"x" * 16384, 0)], magic=1)) == 16418


def test_v2_worked_sizes_of_seed_004():
    # Same seed, v2: key "key" value "value" -> 76 B; key null -> 73 B;
    # 10 records with null key and 6-byte values -> 191 B.
    assert len(build_batch([(b"key", b"value", 0)])) == 76
    assert len(build_batch([(None, b"value", 0)])) == 73
    assert len(build_batch([(None, b"abcdef", 0)] * 10)) == 191


def test_compressed_v1_wrapper_layout_by_hand():
    recs = [(b"a", b"1", 10), (b"b", b"2", 30), (b"c", b"3", 20)]
    raw = build_message_set(recs, magic=1, base_offset=100, codec=codecs.GZIP)
    offset, size, crc, magic, attrs, ts = struct.unpack_from(">qiIbbq", raw)
    assert (offset, magic, attrs, ts) == (102, 1, codecs.GZIP, 30)  # last inner offset; max inner timestamp
    assert size == len(raw) - 12
    assert struct.unpack_from(">i", raw, 26)[0] == -1  # null key
    (vlen,) = struct.unpack_from(">i", raw, 30)
    assert 34 + vlen == len(raw)
    inner = codecs.decompress(codecs.GZIP, raw[34:])
    # inner set: relative offsets 0, 1, 2, attributes 0 (CreateTime), own timestamps
    assert inner == b"".join(build_entry(i, build_message(k, v, magic=1, timestamp=t)) for i, (k, v, t) in enumerate(recs))
    assert crc == zlib.crc32(raw[16:])


def test_compressed_v0_inner_offsets_are_absolute():
    raw = build_message_set([(b"a", b"1"), (b"b", b"2")], magic=0, base_offset=40, codec=codecs.SNAPPY)
    wrapper = read_message(raw)
    assert wrapper.offset == 41
    inner = legacy.decompress_inner(wrapper)
    assert [m.offset for m in inner] == [40, 41]
    assert [r.offset for r in iter_legacy_records(raw)] == [40, 41]
    assert [r.timestamp for r in iter_legacy_records(raw)] == [-1, -1]


# ------------------------------------------------------------------ offsets and timestamps


def _wrapper_with(inner_offsets, wrapper_offset, *, magic=1, codec=codecs.GZIP, attributes_extra=0, wrapper_ts=None):
    inner = b"".join(
        build_entry(o, build_message(f"k{o}".encode(), b"v", magic=magic, timestamp=1000 + i))
        for i, o in enumerate(inner_offsets)
    )
    payload = codecs.compress_legacy(codec, inner, magic)
    ts = wrapper_ts if wrapper_ts is not None else 1000 + len(inner_offsets) - 1
    return build_entry(wrapper_offset, build_message(None, payload, magic=magic, timestamp=ts, attributes=codec | attributes_extra))


def test_v1_absolute_offsets_follow_the_seed_formula():
    # Seed 004's picture: six inner messages with inner offsets 0..5, the wrapper
    # holds 1030; AO = AO_last + (IO - IO_last) -> 1025..1030.
    raw = _wrapper_with(range(6), 1030)
    assert [r.offset for r in iter_legacy_records(raw)] == [1025, 1026, 1027, 1028, 1029, 1030]
    # inner offsets need not start at 0: only the distance to the last one counts
    raw = _wrapper_with([3, 4, 7], 50)
    assert [r.offset for r in iter_legacy_records(raw)] == [46, 47, 50]


def test_v1_wrapper_offset_below_last_inner_keeps_inner_offsets():
    # A producer's set (wrapper offset 0): base 0 - 2 < 0, Kafka keeps the inner offsets.
    raw = _wrapper_with(range(3), 0)
    assert [r.offset for r in iter_legacy_records(raw)] == [0, 1, 2]


def test_build_message_set_v1_compressed_assigns_last_offset_to_wrapper():
    raw = build_message_set([(b"x", b"y", i) for i in range(5)], magic=1, base_offset=1000, codec=codecs.LZ4)
    assert read_message(raw).offset == 1004
    assert [m.offset for m in legacy.decompress_inner(read_message(raw))] == [0, 1, 2, 3, 4]
    assert [r.offset for r in iter_legacy_records(raw)] == list(range(1000, 1005))


def test_log_append_time_wrapper_timestamp_applies_to_inner_records():
    raw = _wrapper_with(range(3), 9, attributes_extra=legacy.ATTR_TIMESTAMP_TYPE, wrapper_ts=777)
    assert [r.timestamp for r in iter_legacy_records(raw)] == [777, 777, 777]
    # CreateTime wrapper: inner timestamps stay
    raw = _wrapper_with(range(3), 9, wrapper_ts=777)
    assert [r.timestamp for r in iter_legacy_records(raw)] == [1000, 1001, 1002]


def test_log_append_time_flag_in_builder():
    raw = build_message_set([(b"a", b"1", 5), (b"b", b"2", 9)], magic=1, codec=codecs.GZIP, timestamp_type_log_append=True)
    wrapper = read_message(raw)
    assert wrapper.is_log_append_time and wrapper.timestamp == 9
    assert all(m.attributes == 0 for m in legacy.decompress_inner(wrapper))  # inner stays CreateTime
    plain = build_message_set([(b"a", b"1", 5)], magic=1, timestamp_type_log_append=True)
    assert read_message(plain).attributes == legacy.ATTR_TIMESTAMP_TYPE
    assert read_message(build_message_set([(b"a", b"1", 5)], magic=0, timestamp_type_log_append=True)).attributes == 0


# ------------------------------------------------------------------ round trips

keys = st.one_of(st.none(), st.binary(max_size=40))
values = st.one_of(st.none(), st.binary(max_size=300))


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(keys, values, st.integers(min_value=0, max_value=2**42)), min_size=1, max_size=15),
    st.integers(min_value=0, max_value=2**40),
    st.sampled_from([0, 1]),
    st.sampled_from(LEGACY_CODECS),
)
def test_round_trip_every_magic_and_codec(records, base_offset, magic, codec):
    raw = build_message_set(records, magic=magic, base_offset=base_offset, codec=codec)
    got = list(iter_legacy_records(raw))
    assert [(r.key, r.value) for r in got] == [(k, v) for k, v, _ in records]
    assert [r.offset for r in got] == list(range(base_offset, base_offset + len(records)))
    assert [r.timestamp for r in got] == ([ts for _, _, ts in records] if magic == 1 else [-1] * len(records))
    info = validate_legacy_entry(raw) if codec else None
    if info is not None:
        assert info.record_count == len(records)
        assert info.max_timestamp == (max(ts for _, _, ts in records) if magic == 1 else -1)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: codecs.NAMES[c])
def test_round_trip_one_megabyte_value(magic, codec):
    big = bytes(range(256)) * 4096  # 1 MiB
    raw = build_message_set([(b"big", big, 1), (None, b"", 2)], magic=magic, codec=codec, base_offset=3)
    got = list(iter_legacy_records(raw))
    assert [(r.offset, r.key, r.value) for r in got] == [(3, b"big", big), (4, None, b"")]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.SNAPPY, codecs.LZ4], ids=lambda c: codecs.NAMES[c])
def test_kafka_python_reads_what_we_build(magic, codec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record import MemoryRecords
    recs = [(b"k1", b"v1", 100), (None, b"v2", 101), (b"k3", None, 102)]
    raw = build_message_set(recs, magic=magic, codec=codec, base_offset=20)
    batch = MemoryRecords(raw).next_batch()
    got = [(r.offset, r.key, r.value) for r in batch]
    assert got == [(20, b"k1", b"v1"), (21, None, b"v2"), (22, b"k3", None)]


# ------------------------------------------------------------------ rejected input


def test_zstd_is_refused_for_v0_and_v1():
    for magic in (0, 1):
        with pytest.raises(codecs.CodecError, match="zstd.*magic 2"):
            build_message_set([(b"k", b"v", 1)], magic=magic, codec=codecs.ZSTD)
    # a wrapper that claims zstd anyway is corrupt on read
    forged = build_entry(0, build_message(None, codecs.compress(codecs.ZSTD, b"x"), magic=1, timestamp=0, attributes=codecs.ZSTD))
    with pytest.raises(CorruptRecordError, match="offset 0"):
        list(iter_legacy_records(forged))
    with pytest.raises(CorruptRecordError):
        validate_legacy_entry(forged)


def test_builder_rejects_headers_empty_sets_and_bad_magic():
    with pytest.raises(ValueError, match="headers"):
        build_message_set([(b"k", b"v", 1, [("h", b"x")])], magic=1)
    build_message_set([(b"k", b"v", 1, [])], magic=1)  # empty headers are fine
    with pytest.raises(ValueError):
        build_message_set([], magic=1)
    with pytest.raises(ValueError):
        build_message_set([(b"k", b"v", 1)], magic=2)


# ------------------------------------------------------------------ corruption


def test_crc_corruption_is_detected_and_names_the_offset():
    raw = bytearray(build_message_set([(b"k", b"value", 1), (b"k2", b"value2", 2)], magic=1, base_offset=5))
    raw[-1] ^= 0x01  # last byte of the second message's value
    with pytest.raises(CorruptRecordError, match="offset 6.*CRC"):
        list(iter_legacy_records(bytes(raw)))
    assert [r.offset for r in iter_legacy_records(bytes(raw), check_crc=False)] == [5, 6]
    with pytest.raises(CorruptRecordError, match="offset 6"):
        validate_legacy_entry(bytes(raw[read_message(raw).size :]))


def test_inner_crc_corruption_is_detected():
    inner = bytearray(build_entry(0, build_message(b"k", b"v", magic=1, timestamp=1)))
    inner[-1] ^= 0xFF
    payload = codecs.compress(codecs.GZIP, bytes(inner))
    raw = build_entry(0, build_message(None, payload, magic=1, timestamp=1, attributes=codecs.GZIP))
    assert read_message(raw).is_valid  # the wrapper itself is fine
    with pytest.raises(CorruptRecordError, match="inner.*CRC"):
        list(iter_legacy_records(raw))


def test_corrupt_compressed_value_names_the_offset():
    good = build_message_set([(b"k", b"v" * 100, 1)], magic=1, codec=codecs.GZIP, base_offset=77)
    wrapper = read_message(good)
    broken = build_entry(77, build_message(None, wrapper.value[:-10], magic=1, timestamp=1, attributes=codecs.GZIP))
    with pytest.raises(CorruptRecordError, match="offset 77.*gzip"):
        list(iter_legacy_records(broken))


def test_nested_compression_is_rejected():
    inner = build_message_set([(b"k", b"v", 1)], magic=1, codec=codecs.GZIP)  # a wrapper ...
    payload = codecs.compress(codecs.GZIP, inner)  # ... inside a wrapper
    raw = build_entry(0, build_message(None, payload, magic=1, timestamp=1, attributes=codecs.GZIP))
    with pytest.raises(CorruptRecordError, match="nested"):
        list(iter_legacy_records(raw))


def test_empty_inner_set_and_magic_mismatch_are_invalid():
    empty = build_entry(0, build_message(None, codecs.compress(codecs.GZIP, b""), magic=1, timestamp=1, attributes=codecs.GZIP))
    with pytest.raises(CorruptRecordError, match="no inner"):
        validate_legacy_entry(empty)
    v0_inside_v1 = build_entry(0, build_message(None, codecs.compress(codecs.GZIP, build_message_set([(b"k", b"v")], magic=0)), magic=1, timestamp=1, attributes=codecs.GZIP))
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_legacy_entry(v0_inside_v1)


def test_damaged_framing():
    raw = build_message_set([(b"key", b"value", 1)], magic=1)
    with pytest.raises(CorruptRecordError, match="size field"):
        validate_legacy_entry(raw + b"\x00")
    bad_len = bytearray(raw)
    struct.pack_into(">i", bad_len, 26, 50)  # key length past the end
    with pytest.raises(CorruptRecordError, match="key length 50"):
        read_message(bytes(bad_len))
    # a partial entry at the end of a fetch is dropped, not an error
    two = raw + build_message_set([(b"k2", b"v2", 2)], magic=1, base_offset=1)
    assert [r.key for r in iter_legacy_records(two[:-3])] == [b"key"]


# ------------------------------------------------------------------ broker helpers


def test_validate_describes_the_entry():
    raw = build_message_set([(b"a", b"1", 3), (b"b", b"2", 8)], magic=1, codec=codecs.SNAPPY, base_offset=10)
    info = validate_legacy_entry(raw)
    assert (info.offset, info.size, info.magic, info.codec, info.record_count) == (11, len(raw), 1, codecs.SNAPPY, 2)
    assert (info.timestamp, info.max_timestamp, info.inner_offsets, info.relative_offsets) == (8, 8, (0, 1), True)
    plain = validate_legacy_entry(build_message_set([(b"a", b"1")], magic=0, base_offset=4))
    assert (plain.offset, plain.codec, plain.record_count, plain.timestamp) == (4, 0, 1, -1)


def test_assign_offsets_uncompressed_and_v1_in_place():
    plain = build_message_set([(b"a", b"1", 3)], magic=1)
    new, last = assign_legacy_offsets(plain, 500)
    assert last == 500 and new[8:] == plain[8:] and struct.unpack_from(">q", new)[0] == 500
    wrapped = build_message_set([(b"a", b"1", 3), (b"b", b"2", 4)], magic=1, codec=codecs.GZIP)
    new, last = assign_legacy_offsets(wrapped, 500)
    assert last == 501 and new[8:] == wrapped[8:]  # no recompression, same CRC
    assert [r.offset for r in iter_legacy_records(new)] == [500, 501]


def test_assign_offsets_v0_recompresses_with_absolute_inner_offsets():
    wrapped = build_message_set([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], magic=0, codec=codecs.LZ4)
    new, last = assign_legacy_offsets(wrapped, 70)
    assert last == 72
    assert [m.offset for m in legacy.decompress_inner(read_message(new))] == [70, 71, 72]
    assert [(r.offset, r.key) for r in iter_legacy_records(new)] == [(70, b"a"), (71, b"b"), (72, b"c")]
    validate_legacy_entry(new)


def test_assign_offsets_log_append_time_rewrites_timestamp_and_crc():
    wrapped = build_message_set([(b"a", b"1", 3), (b"b", b"2", 4)], magic=1, codec=codecs.GZIP)
    new, _ = assign_legacy_offsets(wrapped, 0, log_append_time=99999)
    msg = read_message(new)
    assert msg.is_valid and msg.is_log_append_time and msg.timestamp == 99999
    assert [r.timestamp for r in iter_legacy_records(new)] == [99999, 99999]
    irregular = _wrapper_with([5, 9], 9)  # v1 inner offsets not 0..n-1: rebuilt
    new, last = assign_legacy_offsets(irregular, 10, log_append_time=5)
    assert last == 11 and [(r.offset, r.timestamp) for r in iter_legacy_records(new)] == [(10, 5), (11, 5)]
    assert validate_legacy_entry(new).inner_offsets == (0, 1)


def test_record_set_may_mix_formats():
    data = (
        build_message_set([(b"a", b"1")], magic=0, base_offset=0)
        + build_message_set([(b"b", b"2", 7), (b"c", b"3", 8)], magic=1, base_offset=1, codec=codecs.GZIP)
        + build_batch([(b"d", b"4", 9)], base_offset=3)
    )
    assert [(r.offset, r.key) for r in iter_record_set(data)] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    with pytest.raises(CorruptRecordError, match="v2"):
        list(iter_legacy_records(data))
