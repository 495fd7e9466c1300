"""``kclient dump-log`` on real segment files: written by kclient's Log (the
broker's storage), by the bundled broker itself, or byte by byte to make
damage. The expected lines follow Kafka's DumpLogSegments; where a line a
real Kafka 0.8.2 printed for the same record is quoted below, the values
must agree."""

from __future__ import annotations

import argparse
import io
import re
import struct
import warnings

import pytest
from helpers.wait import wait_for

from kclient.protocol.records import build_batch, codecs
from kclient.protocol.records.legacy import build_message_set
from kclient.storage.log import Log, LogConfig
from kclient.tools import dump_log
from kclient.tools.dump_log import dump_files

SEG = "00000000000000000000"

V2_KEYS = [
    "baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producerId", "producerEpoch",
    "partitionLeaderEpoch", "isTransactional", "isControl", "position", "CreateTime", "size", "magic",
    "compresscodec", "crc", "isvalid",
]  # Kafka 2.x DumpLogSegments.printBatchLevel, in order
LEGACY_KEYS = ["offset", "position", "CreateTime", "size", "magic", "compresscodec", "crc", "isvalid"]


def fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+): (\S+)", line))


def keys(line: str) -> list[str]:
    return re.findall(r"(\w+): ", line)


def dump(*paths, **kw) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    rc = dump_files([str(p) for p in paths], out=out, err=err, **kw)
    return rc, out.getvalue().splitlines(), err.getvalue()


def make_log(tmp_path, *record_sets, interval=0):
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=interval))
    for data in record_sets:
        log.append(data)
    log.close()
    return tmp_path / "t-0" / f"{SEG}.log"


# ------------------------------------------------------------------ v2


@pytest.mark.unit
def test_v2_batch_line_matches_kafka(tmp_path):
    # Key "key", value "value" sent to Kafka 1.0, whose DumpLogSegments printed:
    kafka10 = (
        "baseOffset: 0 lastOffset: 0 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 0 isTransactional: false position: 0 CreateTime: 1524709879130 isvalid: true "
        "size: 76 magic: 2 compresscodec: NONE crc: 2857248333"
    )
    path = make_log(tmp_path, build_batch([(b"key", b"value", 1524709879130)], partition_leader_epoch=0))
    rc, lines, err = dump(path)
    assert rc == 0 and err == ""
    assert lines == [
        f"Dumping {path}",
        "Starting offset: 0",
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 CreateTime: 1524709879130 "
        "size: 76 magic: 2 compresscodec: NONE crc: 2857248333 isvalid: true",
    ]
    ours = fields(lines[2])
    assert {k: ours[k] for k in fields(kafka10)} == fields(kafka10)  # same bytes, same CRC as real Kafka
    assert keys(lines[2]) == V2_KEYS


@pytest.mark.unit
def test_v2_deep_iteration_and_print_data_log(tmp_path):
    batch = build_batch(
        [(b"k1", b"hello", 1000, [("h1", b"x"), ("h2", None)]), (None, b"\xff\xfe", 1005), (b"k3", None, 1003)],
        producer_id=42, producer_epoch=3, base_sequence=2147483646, codec=codecs.ZSTD, is_transactional=True,
    )
    path = make_log(tmp_path, build_batch([(b"a", b"b", 1)]), batch)
    rc, lines, _ = dump(path, deep_iteration=True)
    assert rc == 0
    head = fields(lines[4])
    assert head["baseOffset"] == "1" and head["lastOffset"] == "3" and head["count"] == "3"
    # sequences wrap at Integer.MAX_VALUE like Kafka's incrementSequence
    assert (head["baseSequence"], head["lastSequence"]) == ("2147483646", "0")
    assert (head["producerId"], head["producerEpoch"], head["isTransactional"]) == ("42", "3", "true")
    assert (head["compresscodec"], head["CreateTime"], head["position"]) == ("ZSTD", "1005", "70")
    assert lines[5:] == [
        "| offset: 1 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: 2147483646 headerKeys: [h1,h2]",
        "| offset: 2 CreateTime: 1005 keySize: -1 valueSize: 2 sequence: 2147483647 headerKeys: []",
        "| offset: 3 CreateTime: 1003 keySize: 2 valueSize: -1 sequence: 0 headerKeys: []",
    ]
    rc, lines, _ = dump(path, print_data_log=True)  # implies deep iteration
    assert lines[3] == "| offset: 0 CreateTime: 1 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: a payload: b"
    assert lines[5].endswith("headerKeys: [h1,h2] key: k1 payload: hello")
    assert lines[6].endswith("headerKeys: [] payload: \ufffd\ufffd")  # null key omitted, bytes as UTF-8
    assert lines[7].endswith("headerKeys: [] key: k3")  # null value omitted


@pytest.mark.unit
def test_log_append_time_and_control_batches(tmp_path):
    marker = build_batch(
        [(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 7), 50)],
        producer_id=9, producer_epoch=0, is_transactional=True, is_control=True,
    )
    lat = build_batch([(b"k", b"v", 77)], timestamp_type_log_append=True)
    path = make_log(tmp_path, lat, marker)
    rc, lines, _ = dump(path, print_data_log=True)
    assert rc == 0
    assert "LogAppendTime: 77" in lines[2]
    assert lines[3].startswith("| offset: 0 LogAppendTime: 77 ")
    assert fields(lines[4])["isControl"] == "true"
    assert lines[5].endswith("endTxnMarker: COMMIT coordinatorEpoch: 7")  # no key/payload for control records


# ------------------------------------------------------------------ v0 / v1


@pytest.mark.unit
def test_legacy_entry_lines(tmp_path):
    v0 = build_message_set([(b"key", b"value")], magic=0)
    v1 = build_message_set([(None, b"value", 1524709879130)], magic=1)
    path = make_log(tmp_path, v0, v1)
    rc, lines, _ = dump(path)
    assert rc == 0
    assert lines[2] == "offset: 0 position: 0 NoTimestampType: -1 size: 34 magic: 0 compresscodec: NONE crc: 592888119 isvalid: true"
    # Kafka 0.8.2's DumpLogSegments printed for the same message:
    kafka082 = fields("offset: 0 position: 0 isvalid: true payloadsize: 5 magic: 0 compresscodec: NoCompressionCodec crc: 592888119 keysize: 3")
    ours = fields(lines[2])
    assert all(ours[k] == kafka082[k] for k in ("offset", "position", "isvalid", "magic", "crc"))
    assert keys(lines[3]) == LEGACY_KEYS
    assert fields(lines[3])["position"] == "34" and fields(lines[3])["size"] == str(12 + 22 + 5)  # null key, "value"
    rc, lines, _ = dump(path, print_data_log=True)
    assert lines[3] == "| offset: 0 NoTimestampType: -1 keySize: 3 valueSize: 5 isValid: true crc: 592888119 key: key payload: value"
    assert lines[5].startswith("| offset: 1 CreateTime: 1524709879130 keySize: -1 valueSize: 5 isValid: true crc: ")
    assert lines[5].endswith(" payload: value")


@pytest.mark.unit
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.SNAPPY, codecs.LZ4], ids=lambda c: codecs.NAMES[c])
def test_compressed_legacy_wrapper(tmp_path, magic, codec):
    # The Log refuses compressed v0/v1 appends (inner offsets), so write the segment bytes directly.
    wrapper = build_message_set([(b"a", b"1", 10), (b"b", b"2", 30), (b"c", b"3", 20)], magic=magic, codec=codec, base_offset=5)
    path = tmp_path / f"{SEG}.log"
    path.write_bytes(build_message_set([(b"x", b"y", 1)], magic=magic, base_offset=4) + wrapper)
    rc, lines, err = dump(path, deep_iteration=True)
    assert rc == 0 and err == ""
    entry = fields(lines[4])
    assert entry["offset"] == "7" and entry["compresscodec"] == codecs.JAVA_NAMES[codec] and entry["isvalid"] == "true"
    assert entry["size"] == str(len(wrapper))
    ts = ["CreateTime: 10", "CreateTime: 30", "CreateTime: 20"] if magic else ["NoTimestampType: -1"] * 3
    assert [line.split(" keySize")[0] for line in lines[5:]] == [f"| offset: {o} {t}" for o, t in zip((5, 6, 7), ts)]


# ------------------------------------------------------------------ indexes


@pytest.mark.unit
def test_index_file(tmp_path):
    batches = [build_batch([(b"k", b"v" * 100, i)] * 3, base_offset=0) for i in range(6)]
    path = make_log(tmp_path, *batches, interval=250)
    index = path.with_suffix(".index")
    entries = [struct.unpack_from(">ii", index.read_bytes(), i) for i in range(0, index.stat().st_size, 8)]
    assert entries, "the log wrote no index entries"
    rc, lines, err = dump(index)
    assert rc == 0 and err == ""
    assert lines == [f"Dumping {index}"] + [f"offset: {o} position: {p}" for o, p in entries]


@pytest.mark.unit
def test_index_mismatch_and_damage_reported(tmp_path):
    path = make_log(tmp_path, build_batch([(b"k", b"v", 1)] * 2), build_batch([(b"k", b"v", 2)] * 2), interval=0)
    index = path.with_suffix(".index")
    index.write_bytes(struct.pack(">ii", 2, 0) + struct.pack(">ii", 3, 999) + b"\x01\x02\x03")
    rc, lines, err = dump(index)
    assert rc == 1
    assert lines[1:] == ["offset: 2 position: 0", "offset: 3 position: 999", f"Found 3 invalid bytes at the end of {index.name} (a partial index entry)"]
    assert f"Mismatches in :{index.resolve()}" in err
    assert "  Index offset: 2, log offset: 1" in err and "  Index offset: 3, log offset: -1" in err


@pytest.mark.unit
def test_empty_index_and_time_index(tmp_path):
    empty = tmp_path / f"{SEG}.index"
    empty.write_bytes(b"")
    tindex = tmp_path / "00000000000000000100.timeindex"
    tindex.write_bytes(struct.pack(">qi", 1000, 0) + struct.pack(">qi", 2000, 5) + b"\x00" * 12)  # zero tail: preallocated
    rc, lines, _ = dump(empty, tindex)
    assert rc == 0
    assert lines == [
        f"Dumping {empty}", f"{empty} is empty.",
        f"Dumping {tindex}", "timestamp: 1000 offset: 100", "timestamp: 2000 offset: 105",
    ]


# ------------------------------------------------------------------ damage


@pytest.mark.unit
def test_truncated_tail(tmp_path):
    a, b = build_batch([(b"k", b"v", 1)]), build_batch([(b"k2", b"v2", 2)], base_offset=1)
    path = tmp_path / f"{SEG}.log"
    path.write_bytes(a + b[:-5])
    rc, lines, _ = dump(path, deep_iteration=True)
    assert rc == 1
    assert fields(lines[2])["baseOffset"] == "0"
    assert lines[-1] == (
        f"Found {len(b) - 5} invalid bytes at the end of {SEG}.log "
        f"(from position {len(a)}: a batch of {len(b)} bytes starts here but the file ends after {len(b) - 5})"
    )


@pytest.mark.unit
def test_garbage_in_the_middle_stops_where_it_starts(tmp_path):
    good = build_batch([(b"k", b"v", 1)])
    rest = b"\x00" * 16 + b"\x09" + b"garbage" * 10 + build_batch([(b"k", b"v", 2)], base_offset=1)
    path = tmp_path / f"{SEG}.log"
    path.write_bytes(good + rest)
    rc, lines, err = dump(path)
    assert rc == 1 and err == ""
    assert lines[-1] == f"Found {len(rest)} invalid bytes at the end of {SEG}.log (from position {len(good)}: unknown magic byte 9 at byte {len(good)})"
    tiny = tmp_path / "00000000000000000009.log"
    tiny.write_bytes(good + struct.pack(">qi", 1, 3) + b"\x00\x00\x00\x00\x02" + b"\x00" * 10)
    rc, lines, _ = dump(tiny)
    assert rc == 1 and "claims size 3" in lines[-1] and f"from position {len(good)}" in lines[-1]


@pytest.mark.unit
def test_crc_mismatch_is_flagged_and_the_dump_goes_on(tmp_path):
    a = build_batch([(b"k", b"value-a", 1)])
    b = bytearray(build_batch([(b"k", b"value-b", 2)], base_offset=1))
    b[-3] ^= 0xFF
    c = build_message_set([(b"k", b"value-c", 3)], magic=1, base_offset=2)
    d = bytearray(build_message_set([(b"k", b"value-d", 4)], magic=1, base_offset=3))
    d[-1] ^= 0xFF
    path = tmp_path / f"{SEG}.log"
    path.write_bytes(a + bytes(b) + c + bytes(d))
    rc, lines, _ = dump(path, deep_iteration=True)
    assert rc == 1
    batch_lines = [line for line in lines[2:] if not line.startswith("|")]
    assert [fields(line)["isvalid"] for line in batch_lines] == ["true", "false", "true", "false"]
    assert lines[-1].endswith("isValid: false crc: " + fields(batch_lines[3])["crc"])


@pytest.mark.unit
def test_undecodable_records_do_not_stop_the_dump(tmp_path):
    batch = bytearray(build_batch([(b"k", b"v" * 500, 1)] * 4, codec=codecs.GZIP))
    batch[80:90] = b"\x00" * 10  # damage the gzip stream, keep the CRC wrong too
    wrapper = bytearray(build_message_set([(b"k", b"v" * 300, 1)] * 2, magic=1, codec=codecs.SNAPPY, base_offset=4))
    wrapper[60:64] = b"\xff\xff\xff\x7f"  # a xerial chunk length past the end
    after = build_batch([(b"ok", b"fine", 9)], base_offset=6)
    path = tmp_path / f"{SEG}.log"
    path.write_bytes(bytes(batch) + bytes(wrapper) + after)
    rc, lines, err = dump(path, print_data_log=True)
    assert rc == 1 and "Traceback" not in err
    assert lines[3].startswith("| cannot read the records of the batch at position 0: ")
    assert lines[5].startswith(f"| cannot read the records of the message at position {len(batch)}: ")
    assert "snappy" in lines[5]
    assert lines[-1].endswith("key: ok payload: fine")


@pytest.mark.unit
def test_non_consecutive_offsets_go_to_stderr(tmp_path):
    path = tmp_path / f"{SEG}.log"
    path.write_bytes(build_batch([(b"a", b"1", 1)], base_offset=0) + build_batch([(b"b", b"2", 2)], base_offset=5))
    rc, _, err = dump(path, deep_iteration=True)
    assert rc == 0
    assert err.splitlines() == [f"Non-consecutive offsets in {path.resolve()}", "  0 is followed by 5"]


@pytest.mark.unit
def test_unknown_and_missing_files(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("hi")
    rc, lines, err = dump(other, tmp_path / f"{SEG}.log")
    assert rc == 1
    assert f"Ignoring unknown file {other}" in err
    assert "Cannot read" in err and "No such file" in err
    empty = tmp_path / "00000000000000000042.log"
    empty.write_bytes(b"")
    assert dump(empty) == (0, [f"Dumping {empty}", "Starting offset: 42"], "")


# ------------------------------------------------------------------ command line


@pytest.mark.unit
def test_register_adds_the_dump_log_subcommand(tmp_path, capsys):
    path = make_log(tmp_path, build_batch([(b"key", b"value", 5)]))
    parser = argparse.ArgumentParser(prog="kclient")
    dump_log.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["dump-log", str(path), "--deep-iteration"])
    assert args.func(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Dumping {path}" and out[3].startswith("| offset: 0 CreateTime: 5")
    args = parser.parse_args(["dump-log", "--files", f"{path},{path.with_suffix('.index')}", "--print-data-log"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out.count("Dumping ") == 2 and "key: key payload: value" in out
    args = parser.parse_args(["dump-log"])
    assert args.func(args) == 2


# ------------------------------------------------------------------ written by the broker


@pytest.mark.interop
def test_segment_written_by_the_bundled_broker(broker, topic):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka

    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip", linger_ms=50, request_timeout_ms=10000)
    try:
        futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0) for i in range(20)]
        producer.flush(timeout=30)
        offsets = [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(timeout=10)
    assert offsets == list(range(20))
    segment = broker.log_dir / f"{topic}-0" / f"{SEG}.log"
    wait_for(lambda: segment.exists() and segment.stat().st_size > 0, "the segment written", timeout=10)
    rc, lines, err = dump(segment, print_data_log=True)
    assert rc == 0, (lines, err)
    batches = [fields(line) for line in lines[2:] if not line.startswith("|")]
    records = [line for line in lines[2:] if line.startswith("|")]
    assert batches and all(b["isvalid"] == "true" and b["magic"] == "2" and b["compresscodec"] == "GZIP" for b in batches)
    assert sum(int(b["count"]) for b in batches) == 20
    assert [fields(r)["offset"] for r in records] == [str(i) for i in range(20)]
    assert records[7].endswith("key: k7 payload: v7")
    assert int(batches[0]["producerId"]) >= 0 and batches[0]["baseSequence"] == "0"  # kafka-python is idempotent
