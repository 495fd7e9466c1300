"""Compression codecs as Kafka clients write and read them (codec ids of
attributes bits 0-2; see kclient/protocol/records/codecs.py): xerial-framed snappy like the Java client and raw snappy like
librdkafka, LZ4 frames with independent blocks (and the KIP-57 header
checksum of magic 0), zstd as a stream of frames, gzip; corrupt or
truncated payloads give a clear error naming the codec."""

from __future__ import annotations

import gzip
import os
import struct
import warnings

import pytest
from helpers.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.errors import CorruptRecordError
from kclient.protocol.records import build_batch, codecs, v2
from kclient.protocol.records.codecs import CodecError

pytestmark = pytest.mark.unit

ALL = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]
NAMES = lambda c: codecs.NAMES[c]  # noqa: E731


@settings(max_examples=examples(60), deadline=None)
@given(st.binary(max_size=5000), st.sampled_from(ALL))
def test_round_trip(data, codec):
    assert codecs.decompress(codec, codecs.compress(codec, data)) == data


@pytest.mark.parametrize("codec", ALL, ids=NAMES)
def test_round_trip_large_and_empty(codec):
    big = os.urandom(300_000) + b"\x00" * 700_000  # ~1 MB, several blocks / chunks
    assert codecs.decompress(codec, codecs.compress(codec, big)) == big
    assert codecs.decompress(codec, codecs.compress(codec, b"")) == b""


def test_codec_ids_and_names():
    assert [codecs.codec_id(n) for n in ("none", "GZIP", " snappy", "lz4", "zstd", "3", 4)] == [0, 1, 2, 3, 4, 3, 4]
    with pytest.raises(ValueError, match="unknown compression codec"):
        codecs.codec_id("brotli")
    with pytest.raises(CodecError, match="unknown codec id 7"):
        codecs.decompress(7, b"x")


# ------------------------------------------------------------------ snappy


def test_snappy_writes_xerial_framing_like_java():
    import snappy

    data = bytes(range(256)) * 300  # 76800 bytes -> 3 chunks of <= 32 KiB input
    out = codecs.compress(codecs.SNAPPY, data)
    # header: magic 82 'SNAPPY' 00, int32 version 1, int32 compatible version 1
    assert out[:8] == bytes.fromhex("82534e4150505900")
    assert struct.unpack_from(">ii", out, 8) == (1, 1)
    pos, chunks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        chunks.append(snappy.decompress(out[pos + 4 : pos + 4 + n]))  # each chunk is a raw snappy block
        pos += 4 + n
    assert pos == len(out)
    assert [len(c) for c in chunks] == [32768, 32768, 76800 - 65536]
    assert b"".join(chunks) == data


def test_snappy_reads_raw_blocks_like_librdkafka_writes():
    import snappy

    data = b"librdkafka writes raw snappy " * 100
    assert codecs.decompress(codecs.SNAPPY, snappy.compress(data)) == data


def test_snappy_reads_kafka_python_xerial():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.codec import snappy_encode

    data = os.urandom(1000) * 70
    framed = snappy_encode(data, xerial_compatible=True, xerial_blocksize=32 * 1024)
    assert framed[:8] == codecs.XERIAL_MAGIC
    assert codecs.decompress(codecs.SNAPPY, framed) == data


def test_snappy_corrupt_and_truncated():
    framed = codecs.compress(codecs.SNAPPY, b"abc" * 20000)
    with pytest.raises(CodecError, match="snappy.*runs past"):
        codecs.decompress(codecs.SNAPPY, framed[:-5])
    with pytest.raises(CodecError, match="snappy: truncated xerial block length"):
        codecs.decompress(codecs.SNAPPY, framed[:18])
    with pytest.raises(CodecError, match="snappy: truncated xerial header"):
        codecs.decompress(codecs.SNAPPY, framed[:12])
    with pytest.raises(CodecError, match="snappy: corrupt"):
        codecs.decompress(codecs.SNAPPY, b"\xff\xff\xff\xff\x0fnot snappy at all")


# ------------------------------------------------------------------ lz4


def _lz4_flags(frame: bytes):
    flg, bd = frame[4], frame[5]
    return {
        "version": flg >> 6,
        "block_independent": bool(flg & 0x20),
        "block_checksum": bool(flg & 0x10),
        "content_size": bool(flg & 0x08),
        "content_checksum": bool(flg & 0x04),
        "block_max": {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}[(bd >> 4) & 7],
    }


def test_lz4_frames_use_independent_blocks():
    data = os.urandom(200_000)  # several 64 KiB blocks
    frame = codecs.compress(codecs.LZ4, data)
    assert frame[:4] == codecs.LZ4_FRAME_MAGIC
    flags = _lz4_flags(frame)
    assert flags["version"] == 1 and flags["block_independent"]  # Java rejects linked blocks
    assert not flags["block_checksum"] and not flags["content_checksum"]
    end = 6 + (8 if flags["content_size"] else 0)
    assert frame[end] == codecs.lz4_header_checksum(frame)
    assert codecs.decompress(codecs.LZ4, frame) == data


def test_xxh32_known_values():
    assert codecs.xxh32(b"") == 0x02CC5D05
    assert codecs.xxh32(b"abc") == 0x32D153FF
    assert codecs.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_header_checksum_matches_liblz4():
    import lz4.frame

    for store_size in (False, True):
        for n in (0, 10, 70000):
            frame = lz4.frame.compress(b"z" * n, block_linked=False, store_size=store_size)
            end = 6 + (8 if frame[4] & 0x08 else 0)
            assert frame[end] == codecs.lz4_header_checksum(frame)


def test_lz4_magic0_uses_the_kip57_broken_header_checksum():
    frame = codecs.compress_lz4_magic0(b"old kafka" * 50)
    # Kafka's MessageCompressionTest: V0 header 04 22 4D 18 60 40 1A (HC over magic+FLG+BD);
    # the correct HC of the same descriptor (what liblz4 writes, and magic 1 uses) is 0x82.
    assert frame[:7] == bytes.fromhex("04224d1860401a")
    assert codecs.lz4_header_checksum(frame) == 0x82
    assert not _lz4_flags(frame)["content_size"]  # 0.8/0.9 readers do not know that field
    assert codecs.decompress_lz4_magic0(frame) == b"old kafka" * 50
    assert codecs.decompress_legacy(codecs.LZ4, frame, 0) == b"old kafka" * 50
    with pytest.raises(CodecError, match="lz4"):
        codecs.decompress_legacy(codecs.LZ4, frame, 1)  # magic 1 checks HC, like Java


def test_lz4_magic0_reader_ignores_the_checksum_byte():
    good = codecs.compress(codecs.LZ4, b"new frame")  # correct HC, with content size
    assert codecs.decompress_lz4_magic0(good) == b"new frame"
    weird = bytearray(good)
    weird[6 + 8] ^= 0x5A
    assert codecs.decompress_lz4_magic0(bytes(weird)) == b"new frame"


def test_lz4_legacy_codec_selection():
    assert codecs.compress_legacy(codecs.LZ4, b"x", 0)[:7] == bytes.fromhex("04224d1860401a")
    assert codecs.decompress(codecs.LZ4, codecs.compress_legacy(codecs.LZ4, b"x", 1)) == b"x"


def test_lz4_concatenated_frames():
    a, b = codecs.compress(codecs.LZ4, b"first "), codecs.compress(codecs.LZ4, b"second")
    assert codecs.decompress(codecs.LZ4, a + b) == b"first second"


def test_lz4_corrupt_and_truncated():
    frame = codecs.compress(codecs.LZ4, os.urandom(5000))
    with pytest.raises(CodecError, match="lz4: truncated"):
        codecs.decompress(codecs.LZ4, frame[:-4])
    with pytest.raises(CodecError, match="lz4"):
        codecs.decompress(codecs.LZ4, frame[:5])
    with pytest.raises(CodecError, match="lz4: corrupt"):
        codecs.decompress(codecs.LZ4, b"\x04\x22\x4d\x18" + b"\x00" * 20)
    with pytest.raises(CodecError, match="lz4: not an LZ4 frame"):
        codecs.decompress_lz4_magic0(b"nope nope nope")


# ------------------------------------------------------------------ zstd


def test_zstd_several_concatenated_frames_decode():
    import zstandard

    frames = [
        zstandard.ZstdCompressor().compress(b"one "),
        zstandard.ZstdCompressor(level=19).compress(b"two " * 1000),
        zstandard.ZstdCompressor(write_content_size=False).compress(b"three"),  # no size in the header
    ]
    assert codecs.decompress(codecs.ZSTD, b"".join(frames)) == b"one " + b"two " * 1000 + b"three"


def test_zstd_streamed_frame_without_content_size():
    import io

    import zstandard

    buf = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buf, closefd=False) as w:
        for _ in range(50):
            w.write(os.urandom(1000))
    data = buf.getvalue()
    assert len(codecs.decompress(codecs.ZSTD, data)) == 50_000


def test_zstd_corrupt_and_truncated():
    frame = codecs.compress(codecs.ZSTD, os.urandom(3000))
    # zstandard's stream reader returns short data silently here; kclient must not
    with pytest.raises(CodecError, match="zstd: truncated"):
        codecs.decompress(codecs.ZSTD, frame[:-3])
    with pytest.raises(CodecError, match="zstd"):
        codecs.decompress(codecs.ZSTD, frame[: len(frame) // 2])
    with pytest.raises(CodecError, match="zstd: corrupt"):
        codecs.decompress(codecs.ZSTD, b"\x28\xb5\x2f\xfd" + b"\xff" * 16)


def test_zstd_is_v2_only():
    with pytest.raises(CodecError, match="zstd"):
        codecs.compress_legacy(codecs.ZSTD, b"x", 1)
    with pytest.raises(CodecError, match="zstd"):
        codecs.decompress_legacy(codecs.ZSTD, codecs.compress(codecs.ZSTD, b"x"), 0)


# ------------------------------------------------------------------ gzip


def test_gzip_is_deterministic_and_reads_multi_member_streams():
    data = b"gzip data " * 100
    a = codecs.compress(codecs.GZIP, data)
    assert a == codecs.compress(codecs.GZIP, data)  # mtime 0
    assert a[:2] == b"\x1f\x8b" and a[4:8] == b"\x00\x00\x00\x00"
    two = gzip.compress(b"member one ") + gzip.compress(b"member two")
    assert codecs.decompress(codecs.GZIP, two) == b"member one member two"


def test_gzip_corrupt_and_truncated():
    payload = codecs.compress(codecs.GZIP, os.urandom(2000))
    with pytest.raises(CodecError, match="gzip: truncated"):
        codecs.decompress(codecs.GZIP, payload[:-10])
    with pytest.raises(CodecError, match="gzip: corrupt"):
        codecs.decompress(codecs.GZIP, b"\x1f\x8b\x08\x00" + b"\xff" * 30)
    with pytest.raises(CodecError, match="gzip"):
        codecs.decompress(codecs.GZIP, b"definitely not gzip")


# ------------------------------------------------------------------ through the record readers


def _truncate_payload(batch: bytes, cut: int) -> bytes:
    """A v2 batch whose compressed records lost ``cut`` bytes, with length
    and CRC fixed up so that only the payload is wrong."""
    out = bytearray(batch[:-cut])
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, v2.compute_crc(out))
    return bytes(out)


@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD], ids=NAMES)
def test_truncated_payload_in_a_batch_is_a_corrupt_record_naming_the_offset(codec):
    batch = build_batch([(b"k", os.urandom(500), 1)] * 3, base_offset=4242, codec=codec)
    broken = _truncate_payload(batch, 7)
    with pytest.raises(CorruptRecordError, match=rf"offset 4242.*{codecs.NAMES[codec]}"):
        list(v2.iter_records(broken))
