"""Protocol layer, byte for byte: primitives, schemas, headers, record batch v2."""

from __future__ import annotations

import json
import pathlib
import struct

import pytest
from helpers.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.errors import CorruptRecordError, ProtocolError, UnsupportedVersionError
from kclient.protocol import primitives as p
from kclient.protocol.connection import (
    ClientConnection,
    FrameBuffer,
    decode_request,
    encode_response,
    encode_unsupported_api_versions,
    parse_request_header,
)
from kclient.protocol.messages import API_VERSIONS, APIS, FETCH, LIST_OFFSETS, METADATA, PRODUCE, choose_version
from kclient.protocol.records import build_batch, iter_record_set, scan_batches, v2

pytestmark = pytest.mark.unit

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "vectors"
if not VECTORS.exists():  # CI clones next to ../shared; a checkout elsewhere may not have it
    VECTORS = pathlib.Path("/work/shared/vectors")


def _hex_or_none(v):
    return None if v is None else bytes.fromhex(v)


# --- primitives --------------------------------------------------------------


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_zigzag_varint_round_trip(n):
    out = bytearray()
    p.write_varint(out, n)
    assert len(out) == p.varint_size(n)
    assert p.read_varint(bytes(out), 0) == (n, len(out))


@pytest.mark.parametrize(
    "value, encoded",
    [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"), (300, "d804")],
)
def test_zigzag_known_bytes(value, encoded):
    # zigzag(n) = (n << 1) ^ (n >> 63), then 7 bits per byte, low group first:
    # 300 -> 600 = 0b100_1011000 -> 0xd8 (0x58|0x80), 0x04
    out = bytearray()
    p.write_varint(out, value)
    assert out.hex() == encoded


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_uvarint_round_trip(n):
    out = bytearray()
    p.write_uvarint(out, n)
    assert p.read_uvarint(bytes(out), 0) == (n, len(out))


@given(st.one_of(st.none(), st.text(max_size=200)))
def test_strings_round_trip(s):
    for w, r in ((p.write_string, p.read_string), (p.write_compact_string, p.read_compact_string)):
        out = bytearray()
        w(out, s)
        assert r(bytes(out), 0) == (s, len(out))


def test_string_encodings_exact():
    out = bytearray()
    p.write_string(out, "ab")
    p.write_string(out, None)
    p.write_compact_string(out, "ab")
    p.write_compact_string(out, None)
    assert out.hex() == "0002" "6162" "ffff" "03" "6162" "00"


def test_truncated_primitives_raise():
    with pytest.raises(ProtocolError):
        p.read_int32(b"\x00\x00", 0)
    with pytest.raises(ProtocolError):
        p.read_string(b"\x00\x05ab", 0)
    with pytest.raises(ProtocolError):
        p.read_uvarint(b"\x80\x80", 0)


# --- schemas -----------------------------------------------------------------


def test_produce_request_v3_exact_bytes():
    batch = b"\x01\x02\x03"
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 1500, "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": batch}]}]}
    encoded = PRODUCE.request(3).encode(body)
    expected = (
        b"\xff\xff"  # transactional_id null
        + struct.pack(">hi", 1, 1500)
        + struct.pack(">i", 1)
        + b"\x00\x01t"
        + struct.pack(">i", 1)
        + struct.pack(">i", 2)
        + struct.pack(">i", 3)
        + batch
    )
    assert encoded == expected
    decoded = PRODUCE.request(3).decode(encoded)
    assert bytes(decoded["topic_data"][0]["partition_data"][0]["records"]) == batch


def test_fields_appear_only_in_their_versions():
    assert "transactional_id" not in PRODUCE.request(2).names
    assert "transactional_id" in PRODUCE.request(3).names
    assert "max_num_offsets" not in LIST_OFFSETS.request(1).names
    v0 = LIST_OFFSETS.request(0)
    v1 = LIST_OFFSETS.request(1)
    body = {"replica_id": -1, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1, "max_num_offsets": 3}]}]}
    # v0 partition: int32 index, int64 timestamp, int32 max_num_offsets = 16 bytes; v1 lacks the last 4
    assert len(v0.encode(body)) - len(v1.encode(body)) == 4


SAMPLE_BODIES = {
    (3, "request"): {"topics": [{"name": "a"}, {"name": "b"}], "allow_auto_topic_creation": False},
    (3, "response"): {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "abc",
        "controller_id": 0,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "is_internal": False,
                "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 0, "leader_epoch": 0, "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []}],
                "topic_authorized_operations": -2147483648,
            }
        ],
        "cluster_authorized_operations": -2147483648,
    },
    (1, "request"): {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1000,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 5, "log_start_offset": -1, "partition_max_bytes": 100}]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    },
}


@pytest.mark.parametrize("api_key, kind", list(SAMPLE_BODIES))
def test_every_version_round_trips(api_key, kind):
    api = APIS[api_key]
    body = SAMPLE_BODIES[(api_key, kind)]
    for version in range(api.min_version, api.max_version + 1):
        codec = api.request(version) if kind == "request" else api.response(version)
        encoded = codec.encode(body)
        decoded = codec.decode(encoded)
        assert codec.encode(decoded) == encoded
        for name in codec.names:
            if name in body and not isinstance(body[name], list):
                assert decoded[name] == body[name]


def test_flexible_api_versions_v3_uses_compact_forms():
    body = {"client_software_name": "kc", "client_software_version": "1"}
    # compact string = uvarint(len+1) + bytes; struct ends with an empty tag section
    assert API_VERSIONS.request(3).encode(body) == b"\x03kc" b"\x021" b"\x00"
    response = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}], "throttle_time_ms": 0}
    encoded = API_VERSIONS.response(3).encode(response)
    assert encoded == b"\x00\x00" b"\x02" b"\x00\x12\x00\x00\x00\x03\x00" b"\x00\x00\x00\x00" b"\x00"
    assert API_VERSIONS.response(3).decode(encoded)["api_keys"][0]["max_version"] == 3


def test_trailing_bytes_are_an_error():
    with pytest.raises(ProtocolError):
        METADATA.request(0).decode(b"\x00\x00\x00\x00\x99")


def test_absurd_array_length_is_an_error_not_a_huge_allocation():
    with pytest.raises(ProtocolError):
        METADATA.request(0).decode(b"\x7f\xff\xff\xff")


def test_choose_version_picks_highest_common():
    assert choose_version(FETCH, {1: (0, 17)}) == FETCH.max_version
    assert choose_version(FETCH, {1: (0, 6)}) == 6
    assert choose_version(PRODUCE, {0: (0, 8)}, floor=3) == 8
    with pytest.raises(UnsupportedVersionError):
        choose_version(PRODUCE, {0: (0, 2)}, floor=3)
    with pytest.raises(UnsupportedVersionError):
        choose_version(LIST_OFFSETS, {2: (1, 9)}, ceiling=0)


# --- framing and headers ------------------------------------------------------


def test_real_clients_first_frames_parse_one_byte_at_a_time():
    for vector in json.loads((VECTORS / "first_requests.json").read_text()):
        raw = bytes.fromhex(vector["hex"])
        frames = FrameBuffer()
        got = []
        for b in raw:
            frames.feed(bytes([b]))
            f = frames.next_frame()
            if f is not None:
                got.append(f)
        assert len(got) == 1 and got[0] == raw[4:]
        header = parse_request_header(got[0])
        assert (header.api_key, header.api_version, header.correlation_id) == (vector["api_key"], vector["api_version"], vector["correlation_id"])
        if header.api_version <= API_VERSIONS.max_version:
            body = decode_request(header, got[0])
            assert body.client_software_name


def test_kip511_reply_is_header_v0_and_v0_body():
    reply = encode_unsupported_api_versions(7, [(18, 0, 3)])
    # size, correlation id, error 35, array of one (18, 0, 3)
    assert reply == struct.pack(">iih", 16, 7, 35) + struct.pack(">ihhh", 1, 18, 0, 3)


def test_client_connection_pairs_responses_fed_byte_by_byte():
    conn = ClientConnection("me")
    cid1, data1 = conn.send(METADATA, 1, {"topics": None})
    cid2, data2 = conn.send(API_VERSIONS, 3, {"client_software_name": "a", "client_software_version": "b"})
    # the request header v1: api key, version, correlation id, client id
    assert data1[4:16] == struct.pack(">hhih", 3, 1, cid1, 2) + b"me"
    assert parse_request_header(data2[4:]).correlation_id == cid2
    resp1 = encode_response(METADATA, 1, cid1, SAMPLE_BODIES[(3, "response")])
    # ApiVersions v3 answered with the KIP-511 v0 body: the client must read it as v0
    resp2 = encode_unsupported_api_versions(cid2, [(18, 0, 2)])
    stream = resp1 + resp2
    out = []
    for b in stream:
        conn.receive_data(bytes([b]))
        r = conn.next_response()
        if r is not None:
            out.append(r)
    assert [r.correlation_id for r in out] == [cid1, cid2]
    assert out[0].body.brokers[0].port == 9092
    assert out[1].version == 0 and out[1].body.error_code == 35


def test_response_with_wrong_correlation_id_is_a_protocol_error():
    conn = ClientConnection()
    conn.send(METADATA, 0, {"topics": []})
    conn.receive_data(encode_response(METADATA, 0, 999, {"brokers": [], "topics": []}))
    with pytest.raises(ProtocolError):
        conn.next_response()


def test_oversized_and_negative_frames_rejected_before_buffering():
    fb = FrameBuffer(max_frame_bytes=100)
    fb.feed(struct.pack(">i", 101))
    with pytest.raises(ProtocolError):
        fb.next_frame()
    fb = FrameBuffer()
    fb.feed(struct.pack(">i", -5))
    with pytest.raises(ProtocolError):
        fb.next_frame()


def test_large_frames_received_in_place_mixed_with_fed_chunks():
    """FrameBuffer.receive_buffer (the client's fetch path): the rest of a
    large frame goes straight into the buffer next_frame returns; bytes fed
    while it is being filled (or after it) come out in stream order."""
    import random

    rng = random.Random(5)
    frames = [bytes(rng.randbytes(n)) for n in (300, 5, 1000, 0, 700, 2000, 64)]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    for mode in ("direct", "feed", "mixed"):
        fb = FrameBuffer()
        got, pos = [], 0
        while pos < len(stream):
            step = rng.randint(1, 150)
            into = fb.receive_buffer(256) if mode != "feed" else None
            if into is not None and (mode == "direct" or rng.random() < 0.5):
                n = min(step, len(into), len(stream) - pos)
                into[:n] = stream[pos : pos + n]
                into.release()  # the buffer grows in place
                fb.received(n)
            else:
                if into is not None:
                    into.release()
                n = min(step, len(stream) - pos)
                fb.feed(stream[pos : pos + n])
            pos += n
            while (f := fb.next_frame()) is not None:
                got.append(bytes(f))
        assert got == frames, mode
        assert fb.buffered == 0 and fb.receive_buffer(256) is None
    # a fetch response received in place hands out read-only records views
    records = build_batch([(None, b"x" * 300, 1)])
    conn = ClientConnection()
    cid, _ = conn.send(FETCH, 4, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1, "isolation_level": 0, "topics": []})
    partition = {"partition_index": 0, "error_code": 0, "high_watermark": 1, "last_stable_offset": 1, "aborted_transactions": None, "records": records}
    body = {"throttle_time_ms": 0, "responses": [{"topic": "t", "partitions": [partition]}]}
    resp = encode_response(FETCH, 4, cid, body)
    conn.receive_data(resp[:10])
    into = conn.receive_buffer(64)
    assert into is not None
    into[: len(resp) - 10] = resp[10:]
    into.release()
    conn.received(len(resp) - 10)
    got = conn.next_response().body.responses[0].partitions[0].records
    assert bytes(got) == records and got.readonly
    big = FrameBuffer(max_frame_bytes=100)
    big.feed(struct.pack(">i", 101) + b"x")
    assert big.receive_buffer(10) is None  # invalid size: next_frame raises
    with pytest.raises(ProtocolError):
        big.next_frame()


# --- record batch v2 ------------------------------------------------------------


def _vector_records(vector):
    return [
        (_hex_or_none(r["key"]), _hex_or_none(r["value"]), r["timestamp"], [(h[0], _hex_or_none(h[1])) for h in r["headers"]])
        for r in vector["records"]
    ]


def test_v2_golden_vectors_decode_and_uncompressed_encodes_byte_exact():
    vectors = [v for v in json.loads((VECTORS / "record_batches.json").read_text()) if v["format"] == "v2"]
    assert {v["codec"] for v in vectors} == {"none", "gzip", "snappy", "lz4", "zstd"}
    for vector in vectors:
        raw = bytes.fromhex(vector["hex"])
        records = list(iter_record_set(raw))
        expected = _vector_records(vector)
        assert [(r.key, r.value, r.timestamp, [(h.key, h.value) for h in r.headers]) for r in records] == expected
        assert [r.offset for r in records] == [r["offset"] for r in vector["records"]]
        if vector["codec"] == "none":
            # kafka-python writes partitionLeaderEpoch 0; kclient's default is -1 like Java
            assert build_batch(expected, partition_leader_epoch=0) == raw


def test_v2_header_layout_by_hand():
    batch = build_batch([(b"k", b"v", 1000)], base_offset=7, producer_id=42, producer_epoch=3, base_sequence=9)
    # record: attributes 0, tsDelta 0, offDelta 0, key len 1 -> 02 'k', value len 1 -> 02 'v', 0 headers
    record_body = b"\x00\x00\x00\x02k\x02v\x00"
    record = bytes([len(record_body) * 2]) + record_body
    assert batch[61:] == record
    assert len(batch) == 61 + len(record)
    fields = v2.HEADER.unpack_from(batch, 0)
    assert fields == (7, len(batch) - 12, -1, 2, fields[4], 0, 0, 1000, 1000, 42, 3, 9, 1)
    import crc32c

    assert fields[4] == crc32c.crc32c(batch[21:])


def test_v2_crc_checked_on_read():
    batch = bytearray(build_batch([(b"k", b"value", 1)]))
    batch[-2] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(iter_record_set(bytes(batch)))


def test_partial_batch_at_end_is_dropped():
    a = build_batch([(b"a", b"1", 1)], base_offset=0)
    b = build_batch([(b"b", b"2", 2)], base_offset=1)
    records = list(iter_record_set(a + b[:-3]))
    assert [r.key for r in records] == [b"a"]
    assert [i.base_offset for i in scan_batches(a + b)] == [0, 1]


record_strategy = st.tuples(
    st.one_of(st.none(), st.binary(max_size=64)),
    st.one_of(st.none(), st.binary(max_size=512)),
    st.integers(min_value=0, max_value=2**41),
    st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3),
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=20), st.integers(min_value=0, max_value=2**40), st.sampled_from([0, 1, 2, 3, 4]))
def test_v2_batch_round_trip(records, base_offset, codec):
    batch = build_batch(records, base_offset=base_offset, codec=codec)
    header = v2.validate_batch(batch)
    assert header.records_count == len(records)
    assert header.codec == codec
    got = list(v2.iter_records(batch))
    assert [(r.key, r.value, r.timestamp, [(h.key, h.value) for h in r.headers]) for r in got] == [
        (k, v, ts, list(hs)) for k, v, ts, hs in records
    ]
    assert [r.offset for r in got] == list(range(base_offset, base_offset + len(records)))


def test_control_batches_are_never_yielded():
    control = build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", 5)], base_offset=0, is_control=True, is_transactional=True)
    data = build_batch([(b"k", b"v", 5)], base_offset=1)
    assert [r.offset for r in iter_record_set(control + data)] == [1]
