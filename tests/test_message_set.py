"""ByteBufferMessageSet iteration without a broker: the v2 fast path (header
unpacked once, records decoded straight from the fetched buffer) against
records built here, and its hand-offs to the general readers."""

from __future__ import annotations

import os
import struct

import pytest

from kclient.client.consumer.message_set import ByteBufferMessageSet, Message, MessageAndOffset
from kclient.errors import CorruptRecordError, MessageSizeTooLargeError
from kclient.protocol.records import build_message_set, codecs
from kclient.protocol.records.v2 import Header, build_batch, decode_records

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000


def _set(buf, start=0) -> ByteBufferMessageSet:
    return ByteBufferMessageSet("t", 0, buf, start, -1, -1, 0, 1 << 20)


def _rows(ms) -> list[tuple]:
    return [(mo.offset, mo.message.key, mo.message.payload, mo.message.timestamp, mo.message.headers) for mo in ms]


def _varied_records(n: int) -> list[tuple]:
    """Keys null / empty / long, values of every varint width (up to three
    bytes), headers on some, timestamp deltas of one, two and three bytes."""
    out = []
    for i in range(n):
        key = None if i % 3 == 0 else (b"" if i % 3 == 1 else os.urandom(70 + i))
        value = None if i % 11 == 5 else os.urandom((0, 1, 63, 64, 100, 1000, 8191, 8192, 20000)[i % 9])
        headers = () if i % 4 else (("h", b"x"), ("k2", None))
        out.append((key, value, TS + (0, 5, 100, 9000, 70000)[i % 5], headers))
    return out


@pytest.mark.parametrize("as_view", [False, True], ids=["bytes", "memoryview"])
def test_fast_path_decodes_every_field(as_view):
    recs = [_varied_records(40), _varied_records(3), _varied_records(1)]
    buf = b"".join(build_batch(r, base_offset=b) for r, b in zip(recs, (0, 40, 43)))
    if as_view:
        buf = memoryview(b"\x00" * 7 + buf)[7:]
    got = _rows(_set(buf))
    want = []
    for base, r in zip((0, 40, 43), recs):
        for i, (k, v, ts, hs) in enumerate(r):
            want.append((base + i, k, v, ts, tuple(Header(hk, hv) for hk, hv in hs)))
    assert got == want
    assert all(type(v) is bytes for _, _, v, _, _ in got if v is not None)
    mo = next(iter(_set(buf)))
    assert type(mo) is MessageAndOffset and type(mo.message) is Message


def test_start_offset_inside_a_batch_and_partial_tail():
    b1 = build_batch([(None, b"a%d" % i, TS) for i in range(10)], base_offset=100)
    b2 = build_batch([(None, b"b%d" % i, TS) for i in range(5)], base_offset=110)
    buf = b1 + b2 + b2[:30]
    got = _rows(_set(buf, start=107))
    assert [r[0] for r in got] == [107, 108, 109, 110, 111, 112, 113, 114]
    assert got[0][2] == b"a7"


def test_log_append_time_control_and_compressed_batches():
    lat = bytearray(build_batch([(None, b"x", TS), (None, b"y", TS + 3)], base_offset=0, timestamp_type_log_append=True))
    struct.pack_into(">q", lat, 35, TS + 999)  # maxTimestamp: the broker's append time
    from kclient.protocol.records.v2 import compute_crc

    struct.pack_into(">I", lat, 17, compute_crc(lat))
    control = build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", TS)], base_offset=2, is_control=True)
    gz = build_batch([(b"k", b"v" * 300, TS + i) for i in range(4)], base_offset=3, codec=codecs.GZIP)
    got = _rows(_set(bytes(lat) + control + gz))
    assert [(o, ts) for o, _, _, ts, _ in got] == [(0, TS + 999), (1, TS + 999), (3, TS), (4, TS + 1), (5, TS + 2), (6, TS + 3)]
    assert got[2][1:3] == (b"k", b"v" * 300)


def test_crc_mismatch_in_a_later_batch_raises_after_the_good_ones():
    good = build_batch([(None, b"ok", TS)], base_offset=0)
    bad = bytearray(build_batch([(None, b"bad", TS)], base_offset=1))
    bad[-1] ^= 0xFF
    it = iter(_set(good + bytes(bad)))
    assert next(it).offset == 0
    with pytest.raises(CorruptRecordError, match="t-0 offset 1.*CRC"):
        next(it)


def test_control_batch_with_a_bad_crc_is_corrupt_too():
    control = bytearray(build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", TS)], base_offset=0, is_control=True))
    control[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(_set(bytes(control) + build_batch([(None, b"v", TS)], base_offset=1)))


def test_malformed_record_with_a_valid_crc_is_corrupt():
    from kclient.protocol.records.v2 import compute_crc

    batch = bytearray(build_batch([(None, b"v" * 10, TS), (None, b"w", TS)], base_offset=5))
    batch[61 + 5] = 0x7E  # first record's value length (63): far past the record
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    with pytest.raises(CorruptRecordError, match="t-0 offset 5"):
        list(_set(bytes(batch)))
    # after the messages of the good batches before it
    good = build_batch([(None, b"ok", TS), (None, b"ok2", TS)], base_offset=3)
    got = []
    with pytest.raises(CorruptRecordError, match="t-0 offset 5"):
        for mo in _set(good + bytes(batch)):
            got.append(mo.offset)
    assert got == [3, 4]


def test_legacy_entries_then_v2_batches():
    v1 = build_message_set([(None, b"old0", TS), (None, b"old1", TS)], magic=1, base_offset=0)
    v2 = build_batch([(None, b"new", TS)], base_offset=2)
    got = _rows(_set(v1 + v2))
    assert [(o, v) for o, _, v, _, _ in got] == [(0, b"old0"), (1, b"old1"), (2, b"new")]


def test_first_batch_too_large_and_error_codes():
    batch = build_batch([(None, b"z" * 500, TS)])
    with pytest.raises(MessageSizeTooLargeError):
        list(_set(batch[:100]))
    ms = ByteBufferMessageSet("t", 0, b"", 0, -1, -1, 1, 100)
    with pytest.raises(Exception, match="t-0"):
        list(ms)


def test_decode_records_keeps_its_tuple_layout():
    recs = _varied_records(12)
    batch = build_batch(recs, base_offset=9)
    rows = decode_records(batch)
    assert [(o, ts, k, v) for o, ts, k, v, _ in rows] == [(9 + i, ts, k, v) for i, (k, v, ts, _) in enumerate(recs)]
    assert rows == decode_records(memoryview(b"\x01" + batch)[1:])


def _txn(pid: int, base: int, values: list[bytes]) -> bytes:
    return build_batch([(None, v, TS) for v in values], base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)


def _marker(pid: int, base: int, commit: bool) -> bytes:
    from kclient.protocol.records.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch

    return build_end_txn_marker_batch(EndTransactionMarker(COMMIT if commit else ABORT, 0), producer_id=pid, producer_epoch=0, timestamp_ms=TS, base_offset=base)


def test_read_committed_set_leaves_out_aborted_transactions_and_markers():
    """A read_committed answer (``aborted_transactions``, KIP-98): records of
    the aborted transactions and every control batch are left out, on the
    compiled and the pure path alike; ``next_offset`` still passes them, so
    a reader moves past an answer that holds nothing visible."""
    buf = (
        _txn(7, 0, [b"c0", b"c1"])  # producer 7, committed at 2
        + _marker(7, 2, True)
        + _txn(8, 3, [b"a0", b"a1"])  # producer 8, interleaved, aborted at 6
        + _txn(7, 5, [b"c2"])  # producer 7 again, committed at 7
        + _marker(8, 6, False)
        + _marker(7, 7, True)
        + build_batch([(None, b"plain", TS)], base_offset=8)
        + _txn(8, 9, [b"a2"])  # aborted at 10: the set ends with nothing visible
        + _marker(8, 10, False)
    )
    aborted = ((8, 3), (8, 9))
    committed = ByteBufferMessageSet("t", 0, buf, 0, aborted_transactions=aborted)
    assert [(m.offset, m.message.payload) for m in committed] == [(0, b"c0"), (1, b"c1"), (5, b"c2"), (8, b"plain")]
    assert committed.next_offset == 11
    # from inside the aborted transaction's batch
    assert [m.offset for m in ByteBufferMessageSet("t", 0, buf, 4, aborted_transactions=aborted)] == [5, 8]
    # only the tail: nothing visible, the position still moves past it
    tail = ByteBufferMessageSet("t", 0, buf, 9, aborted_transactions=aborted)
    assert (tail.messages(), tail.next_offset) == ([], 11)
    # read_uncommitted: every data record, still no marker
    assert [m.message.payload for m in _set(buf)] == [b"c0", b"c1", b"a0", b"a1", b"c2", b"plain", b"a2"]
    assert _set(buf).visible_buffer is buf
