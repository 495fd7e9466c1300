"""``kclient dump-log`` on transactional logs (KIP-98): the transactional
and control flags and the producer id/epoch of each batch, the COMMIT /
ABORT marker of each control record, and the aborted-transaction index
(``.txnindex``).

Two halves: unit tests on synthetic bytes (batches from
`kclient.protocol.records.v2.build_batch`, markers from
`kclient.protocol.records.control`, index entries from
`kclient.storage.txn_index.AbortedTxn`), damage included; and a comparison
with Apache Kafka 4.x itself: a confluent-kafka transactional producer
commits and aborts transactions on a Kafka 4 broker (one per module), and
``kclient dump-log`` and Kafka's own DumpLogSegments (``kafka-dump-log.sh``,
run from the jars) must print the same fields for the same segment and
``.txnindex`` files."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import uuid
import zipfile

import pytest
from helpers.groups import group_kafka
from helpers.wait import wait_for

from kclient.protocol.records import build_batch
from kclient.protocol.records.control import (
    ABORT,
    COMMIT,
    EndTransactionMarker,
    build_end_txn_marker_batch,
)
from kclient.storage.txn_index import ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex
from kclient.testing.kafka import kafka_classpath
from kclient.testing.maven import require_java
from kclient.tools.dump_log import dump_files, main

SEG = "00000000000000000000"
PID, EPOCH = 4242, 7


def fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+): (\S+)", line))


def dump(*paths, **kw) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    rc = dump_files([str(p) for p in paths], out=out, err=err, **kw)
    return rc, out.getvalue().splitlines(), err.getvalue()


def marker_batch(control_type: int, coordinator_epoch: int, base_offset: int, producer_id: int = PID) -> bytes:
    marker = EndTransactionMarker(control_type, coordinator_epoch)
    return build_end_txn_marker_batch(marker, producer_id=producer_id, producer_epoch=EPOCH, timestamp_ms=900 + base_offset, base_offset=base_offset)


def txn_batch(rows, base_offset: int, base_sequence: int, producer_id: int = PID) -> bytes:
    return build_batch(
        rows, base_offset=base_offset, producer_id=producer_id, producer_epoch=EPOCH,
        base_sequence=base_sequence, is_transactional=True,
    )


def control_batch(key: bytes | None, value: bytes | None, base_offset: int) -> bytes:
    """A control batch of one record with any key and value (damage)."""
    return build_batch(
        [(key, value, 950)], base_offset=base_offset, producer_id=PID, producer_epoch=EPOCH,
        is_transactional=True, is_control=True,
    )


def write_segment(tmp_path, *batches: bytes):
    path = tmp_path / f"{SEG}.log"
    path.write_bytes(b"".join(batches))
    return path


def batch_lines(lines: list[str]) -> list[dict[str, str]]:
    return [fields(line) for line in lines if line.startswith("baseOffset: ")]


def record_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("| ")]


# ------------------------------------------------------------------ segments


@pytest.mark.unit
def test_transactional_and_control_batches(tmp_path):
    path = write_segment(
        tmp_path,
        txn_batch([(b"k1", b"v1", 100, [("h", b"x")]), (b"k2", b"v2", 101)], 0, 0),
        marker_batch(COMMIT, 3, 2),
        txn_batch([(b"k3", b"v3", 102)], 3, 2),
        marker_batch(ABORT, 2**31 - 1, 4),
        build_batch([(b"plain", b"p", 103)], base_offset=5),
    )
    rc, lines, err = dump(path)
    assert rc == 0 and err == ""
    heads = batch_lines(lines)
    assert [(h["baseOffset"], h["isTransactional"], h["isControl"]) for h in heads] == [
        ("0", "true", "false"), ("2", "true", "true"), ("3", "true", "false"), ("4", "true", "true"), ("5", "false", "false"),
    ]
    assert [(h["producerId"], h["producerEpoch"]) for h in heads] == [(str(PID), str(EPOCH))] * 4 + [("-1", "-1")]
    assert [(h["baseSequence"], h["lastSequence"]) for h in heads] == [("0", "1"), ("-1", "-1"), ("2", "2"), ("-1", "-1"), ("-1", "-1")]
    assert all(h["isvalid"] == "true" and h["count"] == ("2" if h["baseOffset"] == "0" else "1") for h in heads)
    assert record_lines(lines) == []  # batch lines only without --deep-iteration

    rc, lines, _ = dump(path, deep_iteration=True)
    assert rc == 0
    records = record_lines(lines)
    assert records[0] == "| offset: 0 CreateTime: 100 keySize: 2 valueSize: 2 sequence: 0 headerKeys: [h]"
    assert records[2] == "| offset: 2 CreateTime: 902 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3"
    assert records[4].endswith(" endTxnMarker: ABORT coordinatorEpoch: 2147483647")

    rc, lines, _ = dump(path, print_data_log=True)
    records = record_lines(lines)
    assert rc == 0 and len(records) == 6
    assert records[0].endswith("headerKeys: [h] key: k1 payload: v1") and records[3].endswith("key: k3 payload: v3")
    # a control record prints its marker, never a key or payload
    assert records[2].endswith("headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert "key:" not in records[4] and "payload:" not in records[4]


@pytest.mark.unit
def test_marker_of_a_newer_version_reads_its_version_0_fields(tmp_path):
    # Kafka reads a newer key / value version by its version-0 fields; the bytes after them are ignored.
    key = (1).to_bytes(2, "big") + COMMIT.to_bytes(2, "big") + b"\x00\x00"
    value = (1).to_bytes(2, "big") + (12).to_bytes(4, "big") + b"more"
    path = write_segment(tmp_path, control_batch(key, value, 0))
    rc, lines, _ = dump(path, deep_iteration=True)
    assert rc == 0
    assert record_lines(lines)[0].endswith("keySize: 6 valueSize: 10 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 12")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("control_type", "text"),
    [(2, "controlType: LEADER_CHANGE(2)"), (5, "controlType: KRAFT_VERSION(5)"), (99, "controlType: UNKNOWN(99)")],
)
def test_other_control_types_print_their_type(tmp_path, control_type, text):
    key = (0).to_bytes(2, "big") + control_type.to_bytes(2, "big")
    path = write_segment(tmp_path, control_batch(key, b"\x00\x00", 0))
    rc, lines, _ = dump(path, print_data_log=True)
    assert rc == 0
    assert record_lines(lines)[0].endswith(f"headerKeys: [] {text}")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (None, b"\x00\x00\x00\x00\x00\x01", "control record key must have at least 4 bytes, found null"),
        (b"\x00\x01", b"\x00\x00\x00\x00\x00\x01", "control record key must have at least 4 bytes, found 2 bytes"),
        (b"\xff\xff\x00\x01", b"\x00\x00\x00\x00\x00\x01", "invalid control record key version -1"),
        (b"\x00\x00\x00\x01", None, "end transaction marker must have at least 6 bytes, found null"),
        (b"\x00\x00\x00\x00", b"\x00\x00\x00\x01", "end transaction marker must have at least 6 bytes, found 4 bytes"),
        (b"\x00\x00\x00\x00", b"\xff\xfe\x00\x00\x00\x01", "invalid end transaction marker version -2"),
    ],
)
def test_corrupt_control_record_is_reported_and_the_dump_goes_on(tmp_path, key, value, reason):
    path = write_segment(
        tmp_path,
        txn_batch([(b"k0", b"v0", 100)], 0, 0),
        marker_batch(COMMIT, 1, 1),
        control_batch(key, value, 2),
        txn_batch([(b"k3", b"v3", 101)], 3, 1),
        marker_batch(ABORT, 1, 4),
    )
    rc, lines, err = dump(path, print_data_log=True)
    assert rc == 1 and "Traceback" not in err
    records = record_lines(lines)
    assert records[1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 1")  # the good entries before it
    assert records[2].startswith("| offset: 2 CreateTime: 950 ")
    assert records[2].endswith(f"headerKeys: [] cannot read the control record: {reason}")
    assert records[3].endswith("key: k3 payload: v3") and records[4].endswith("endTxnMarker: ABORT coordinatorEpoch: 1")
    assert [h["isvalid"] for h in batch_lines(lines)] == ["true"] * 5  # the batch itself is sound


# ------------------------------------------------------------------ .txnindex


def txn_index_path(tmp_path, base_offset: int = 0):
    return tmp_path / f"{base_offset:020d}.txnindex"


ENTRIES = [AbortedTxn(PID, 3, 4, 5), AbortedTxn(77, 6, 9, 7), AbortedTxn(2**40, 2**33, 2**33 + 10, 2**33 + 11)]
ENTRY_LINES = [
    f"version: 0 producerId: {PID} firstOffset: 3 lastOffset: 4 lastStableOffset: 5",
    "version: 0 producerId: 77 firstOffset: 6 lastOffset: 9 lastStableOffset: 7",
    f"version: 0 producerId: {2**40} firstOffset: {2**33} lastOffset: {2**33 + 10} lastStableOffset: {2**33 + 11}",
]


@pytest.mark.unit
def test_txn_index_prints_each_aborted_transaction(tmp_path):
    path = txn_index_path(tmp_path)
    path.write_bytes(b"".join(txn.encode() for txn in ENTRIES))
    assert dump(path) == (0, [f"Dumping {path}", *ENTRY_LINES], "")


@pytest.mark.unit
def test_txn_index_written_by_the_storage_layer(tmp_path):
    path = txn_index_path(tmp_path, 100)
    index = TransactionIndex(path, 100)
    index.append(AbortedTxn(5, 100, 104, 105))
    index.append(AbortedTxn(6, 98, 110, 98))
    index.close()
    assert dump(path) == (
        0,
        [
            f"Dumping {path}",
            "version: 0 producerId: 5 firstOffset: 100 lastOffset: 104 lastStableOffset: 105",
            "version: 0 producerId: 6 firstOffset: 98 lastOffset: 110 lastStableOffset: 98",
        ],
        "",
    )


@pytest.mark.unit
def test_empty_txn_index_prints_nothing(tmp_path):
    path = txn_index_path(tmp_path)
    path.write_bytes(b"")
    assert dump(path) == (0, [f"Dumping {path}"], "")  # as Kafka: no entries, no lines


@pytest.mark.unit
@pytest.mark.parametrize("tail", [1, 20, ABORTED_TXN_SIZE - 1])
def test_truncated_txn_index_prints_the_good_entries_then_the_damage(tmp_path, tail):
    path = txn_index_path(tmp_path)
    data = b"".join(txn.encode() for txn in ENTRIES[:2]) + ENTRIES[2].encode()[:tail]
    path.write_bytes(data)
    rc, lines, err = dump(path)
    assert rc == 1 and err == ""
    assert lines[1:3] == ENTRY_LINES[:2]
    assert lines[3:] == [
        f"Found {tail} invalid bytes at the end of {path.name} (from position {2 * ABORTED_TXN_SIZE}: "
        f"a partial aborted transaction entry of {tail} bytes, an entry has {ABORTED_TXN_SIZE})"
    ]
    assert path.read_bytes() == data  # only read: the dump cuts nothing off


@pytest.mark.unit
@pytest.mark.parametrize("version", [1, -1])
def test_txn_index_entry_of_an_unknown_version_stops_the_dump(tmp_path, version):
    path = txn_index_path(tmp_path)
    bad = AbortedTxn(9, 10, 11, 12, version=version)
    path.write_bytes(ENTRIES[0].encode() + bad.encode() + ENTRIES[1].encode())
    rc, lines, _ = dump(path)
    assert rc == 1
    assert lines[1:] == [
        ENTRY_LINES[0],
        f"Found {2 * ABORTED_TXN_SIZE} invalid bytes at the end of {path.name} (from position {ABORTED_TXN_SIZE}: "
        f"aborted transaction version {version} is unknown (the current version is 0))",
    ]


@pytest.mark.unit
def test_command_line_takes_segments_and_txn_indexes(tmp_path, capsys):
    log = write_segment(tmp_path, txn_batch([(b"k", b"v", 1)], 0, 0), marker_batch(ABORT, 0, 1))
    index = txn_index_path(tmp_path)
    index.write_bytes(AbortedTxn(PID, 0, 1, 2).encode())
    assert main(["--files", f"{log},{index}", "--deep-iteration"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3].endswith("endTxnMarker: ABORT coordinatorEpoch: 0")
    assert out[-2:] == [f"Dumping {index}", f"version: 0 producerId: {PID} firstOffset: 0 lastOffset: 1 lastStableOffset: 2"]


# ------------------------------------------------------------------ against Apache Kafka 4.x

TOPIC = "dump-log-txn"
#: The markers the producers' transactions leave in the partition, in order.
MARKERS = ["COMMIT", "ABORT", "ABORT", "COMMIT"]


def _dump_log_segments_class(classpath: list[str]) -> str:
    """DumpLogSegments' class: in ``kafka-tools`` since Kafka 4.1 (Java),
    in the broker's jar (Scala) before."""
    for name in ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"):
        entry = name.replace(".", "/") + ".class"
        for jar in classpath:
            with zipfile.ZipFile(jar) as archive:
                if entry in archive.namelist():
                    return name
    raise AssertionError("no DumpLogSegments class in the Kafka 4 jars")


def kafka_dump_log(*args: str) -> list[str]:
    """Kafka's own ``kafka-dump-log.sh`` (DumpLogSegments) run from the jars; its stdout lines."""
    classpath = kafka_classpath("4")
    command = [
        require_java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", os.pathsep.join(classpath), _dump_log_segments_class(classpath), *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return result.stdout.splitlines()


def kclient_dump_log(*args: str) -> tuple[int, list[str], str]:
    """``kclient dump-log`` as a user runs it."""
    result = subprocess.run([sys.executable, "-m", "kclient", "dump-log", *args], capture_output=True, text=True, timeout=120)
    return result.returncode, result.stdout.splitlines(), result.stderr


def comparable(lines: list[str]) -> list[tuple[str, dict[str, str]]]:
    """Each line's kind and fields, with what differs by Kafka version
    only set aside: Kafka 3+/4 add ``deleteHorizonMs``, print the codec in
    lower case and say ``Log starting offset`` (kclient: Kafka 2.x's
    ``Starting offset``, the same ``offset`` field); ``Dumping`` lines name
    the file only."""
    rows = []
    for line in lines:
        if not line.strip():
            continue
        found = fields(line)
        found.pop("deleteHorizonMs", None)
        if "compresscodec" in found:
            found["compresscodec"] = found["compresscodec"].lower()
        kinds = {"|": "record", "baseOffset:": "batch", "version:": "aborted"}
        kind = next((k for prefix, k in kinds.items() if line.startswith(prefix)), "other")
        rows.append((kind, found))
    return rows


def _produce_transactions(bootstrap: str) -> None:
    """Producer A commits {k1, k2}, aborts {k3}; then A opens a
    transaction (a1), B writes b1 and aborts while A's is still open (so
    B's entry's last stable offset is a1's offset, not its marker's + 1),
    and A commits."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(60)

    def producer(txn_id: str):
        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{txn_id}-{uuid.uuid4().hex[:6]}", "linger.ms": 5})
        p.init_transactions(60)
        return p

    a, b = producer("a"), producer("b")
    a.begin_transaction()
    a.produce(TOPIC, b"v1", b"k1", partition=0, headers=[("h1", b"x"), ("h2", None)])
    a.produce(TOPIC, b"v2", b"k2", partition=0)
    a.commit_transaction(60)
    a.begin_transaction()
    a.produce(TOPIC, b"v3", b"k3", partition=0)
    a.flush(60)  # on the broker before the abort (else librdkafka drops it unsent)
    a.abort_transaction(60)
    a.begin_transaction()
    a.produce(TOPIC, b"a1", b"ka", partition=0)
    a.flush(60)
    b.begin_transaction()
    b.produce(TOPIC, b"b1", b"kb", partition=0)
    b.flush(60)
    b.abort_transaction(60)
    a.commit_transaction(60)
    a.flush(10)
    b.flush(10)


@pytest.fixture(scope="module")
def kafka_txn_files():
    """Kafka 4's segment and ``.txnindex`` of a partition holding committed
    and aborted transactions, once the broker has written every marker."""
    with group_kafka(1, **{"transaction.state.log.num.partitions": 1}) as kafka:
        _produce_transactions(kafka.bootstrap)
        directory = kafka.log_dir / f"{TOPIC}-0"
        log, index = directory / f"{SEG}.log", directory / f"{SEG}.txnindex"

        def written() -> bool:  # markers are written after EndTxn returns: poll the files
            if not (log.exists() and index.exists() and index.stat().st_size == 2 * ABORTED_TXN_SIZE):
                return False
            _, lines, _ = dump(log, deep_iteration=True)
            return [fields(line).get("endTxnMarker") for line in record_lines(lines) if "endTxnMarker" in line] == MARKERS

        wait_for(written, "Kafka's markers and aborted-transaction index on disk", timeout=180)
        yield log, index


@pytest.mark.apache_kafka
@pytest.mark.parametrize("option", ["", "--deep-iteration", "--print-data-log"])
def test_same_output_as_kafka_dump_log_segments(kafka_txn_files, option):
    log, index = kafka_txn_files
    args = [a for a in (option, "--files", f"{log},{index}") if a]
    rc, ours, err = kclient_dump_log(*args)
    assert rc == 0 and err == "", err
    theirs = kafka_dump_log(*args)
    assert comparable(ours) == comparable(theirs), "\n".join(["kclient:", *ours, "Kafka:", *theirs])
    kinds = [kind for kind, _ in comparable(theirs)]
    records = {"": 0, "--deep-iteration": 9, "--print-data-log": 9}[option]  # 5 data records, 4 markers
    assert (kinds.count("batch"), kinds.count("record"), kinds.count("aborted")) == (8, records, 2)


@pytest.mark.apache_kafka
def test_kafka_transactions_as_dumped(kafka_txn_files):
    log, index = kafka_txn_files
    rc, lines, _ = kclient_dump_log("--print-data-log", str(log), str(index))
    assert rc == 0
    heads = batch_lines(lines)
    records = record_lines(lines)
    data = [h for h in heads if h["isControl"] == "false"]
    controls = [h for h in heads if h["isControl"] == "true"]
    assert all(h["isTransactional"] == "true" and int(h["producerId"]) >= 0 for h in heads)
    assert [fields(r)["endTxnMarker"] for r in records if "endTxnMarker" in r] == MARKERS
    assert len(controls) == 4 and all(h["count"] == "1" and h["baseSequence"] == "-1" for h in controls)
    payloads = {fields(r)["key"]: (fields(r)["offset"], fields(r)["payload"]) for r in records if " key: " in r}
    assert sorted(payloads) == ["k1", "k2", "k3", "ka", "kb"]
    assert re.search(r"headerKeys: \[h1,h2\] key: k1 payload: v1$", records[0])
    pid_a, pid_b = data[0]["producerId"], next(h["producerId"] for h in data if h["producerId"] != data[0]["producerId"])
    # The index: A's abort of k3, then B's abort of kb while A's transaction (ka) was open.
    k3, ka, kb = (int(payloads[k][0]) for k in ("k3", "ka", "kb"))
    abort_markers = [int(fields(r)["offset"]) for r in records if "endTxnMarker: ABORT" in r]
    entries = [fields(line) for line in lines if line.startswith("version: ")]
    assert entries == [
        {"version": "0", "producerId": pid_a, "firstOffset": str(k3), "lastOffset": str(abort_markers[0]), "lastStableOffset": str(abort_markers[0] + 1)},
        {"version": "0", "producerId": pid_b, "firstOffset": str(kb), "lastOffset": str(abort_markers[1]), "lastStableOffset": str(ka)},
    ]
