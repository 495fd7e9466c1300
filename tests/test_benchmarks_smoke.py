"""The benchmark suite (benchmarks/run.py) runs end to end in --quick mode.

Only correctness is checked here: every run succeeded (the suite itself
verifies log end offsets after each produce and record counts after each
consume), every row counted the records it should, and the JSON report has
its documented shape. Timings are never asserted: performance is measured
by `make bench`, not by tests.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.skips import require

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"

GROUP_KEYS = {"name", "kind", "title", "size", "count", "partitions", "runs", "rows", "ratios", "settings", "clients"}
ROW_KEYS = {"runs", "failed", "records", "records_per_s", "mb_per_s", "elapsed_s", "cpu_s_per_million", "cpu_s", "peak_rss_mb", "broker_cpu_s", "cpu_us_per_record"}
SCALING_KEYS = {"kind", "group", "partitions", "kclient_records_per_s", "confluent_records_per_s", "kclient_cpu_us_per_record", "confluent_cpu_us_per_record", "ratio", "ratio_vs_1p"}


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("bench") / "quick.json"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"benchmarks/run.py --quick failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return json.loads(out.read_text()), proc.stdout


def installed(client: str) -> bool:
    if client == "kclient-stream":  # the ConsumerConnector row also needs a ZooKeeper
        from kclient.testing import zookeeper_unavailable_reason

        return zookeeper_unavailable_reason() is None
    module = {
        "kclient": "kclient",
        "kclient-list": "kclient",
        "kclient-callback": "kclient",
        "kclient-futures": "kclient",
        "kclient-no-busy-poll": "kclient",
        "kclient-poll": "kclient",
        "kafka-python": "kafka",
        "aiokafka": "aiokafka",
        "confluent-kafka": "confluent_kafka",
        "confluent-kafka-defaults": "confluent_kafka",
    }[client]
    return importlib.util.find_spec(module) is not None


def test_report_shape(quick_report) -> None:
    report, _ = quick_report
    assert report["quick"] is True and report["repeat"] == 1
    assert report["failures"] == []
    for key in ("nproc", "cpu_model", "python"):
        assert key in report["machine"]
    assert report["versions"]["kclient"]
    names = [g["name"] for g in report["groups"]]
    assert names == [
        "produce-100B-1p",
        "produce-100B-8p",
        "produce-1000B-1p",
        "produce-1000B-8p",
        "produce-1000B-1p-1MB",
        "produce-1000B-8p-1MB",
        "memory-100B-1p",
        "latency-100B-1p",
        "consume-100B-1p",
        "consume-100B-8p",
        "consume-1000B-1p",
        "consume-1000B-8p",
        "compression-gzip",
        "compression-snappy",
        "compression-lz4",
        "compression-zstd",
        "broker-bounds",
        "txn-produce-100B-1p-idempotent",
        "txn-produce-100B-1p-every100",
        "txn-produce-100B-1p-every1000",
        "txn-produce-100B-1p-every10000",
        "scaling-produce-100B-1p",
        "scaling-produce-100B-64p",
        "scaling-consume-100B-1p",
        "scaling-consume-100B-64p",
    ]
    for g in report["groups"]:
        assert GROUP_KEYS <= set(g), g["name"]
        for label, row in g["rows"].items():
            assert ROW_KEYS <= set(row), (g["name"], label)
    assert any("KafkaStream" in n for n in report["notes"])
    assert isinstance(report["targets"], list)
    for t in report["targets"]:
        assert {"issue", "target", "group", "ratio", "minimum", "maximum", "met"} <= set(t)
        assert (t["minimum"] is None) != (t["maximum"] is None), t
    # issue 16: the scaling rows (1 and 64 partitions with --quick), kclient vs confluent-kafka
    scaling = report["scaling"]
    if installed("confluent-kafka"):
        assert [(r["kind"], r["partitions"]) for r in scaling] == [("produce", 1), ("produce", 64), ("consume", 1), ("consume", 64)]
        for r in scaling:
            assert SCALING_KEYS <= set(r), r
            assert r["ratio"] > 0 and r["kclient_cpu_us_per_record"] > 0
        issue16 = {t["target"] for t in report["targets"] if t["issue"] == 16}
        assert any("at N partitions" in t for t in issue16)
        assert any("p99" in t for t in issue16)
    # issue 29: the transactional rows' table, each commit interval against the idempotent row
    if installed("confluent-kafka"):
        txn = report["transactions"]
        assert [r["commit_every"] for r in txn] == [0, 100, 1_000, 10_000]
        assert txn[0]["kclient_vs_idempotent"] == txn[0]["confluent_vs_idempotent"] == 1.0
        assert all(r["ratio"] > 0 for r in txn)
        assert not any(t["group"].startswith("txn-") for t in report["targets"])
    # issue 16: producer memory at N and 10N records, one queue bound, a line in MB
    memory = [t for t in report["targets"] if t["group"] == "memory-100B-1p"]
    assert len(memory) == 1 and memory[0]["issue"] == 16 and memory[0]["unit"] == "MB"
    assert memory[0]["target"].startswith("producer memory bounded by queue.buffering.max.messages")
    assert memory[0]["maximum"] > 0 and memory[0]["minimum"] is None


def test_every_client_row_counted_every_record(quick_report) -> None:
    report, _ = quick_report
    for g in report["groups"]:
        if g["kind"] == "bounds":
            continue
        expected_clients = [c for c in g["clients"] if installed(c)]
        assert expected_clients and "kclient" in expected_clients, g["name"]
        for client in expected_clients:
            if g["kind"] == "memory":  # one row per record count
                labels = {f"{client} {count:,} records": count for count in g["counts"]}
            elif g["kind"] == "compression":
                labels = {f"{client} produce": g["count"], f"{client} consume": g["count"]}
            else:
                labels = {client: g["count"]}
            for label, count in labels.items():
                row = g["rows"][label]
                assert row["runs"] == 1 and row["failed"] == 0, (g["name"], label)
                assert row["records"] == count, (g["name"], label, row["records"])
        for run in g["runs"]:
            result = run["result"]
            if run["kind"] in ("produce", "latency"):
                # the suite compared the topic's log end offsets with the count
                assert result["log_end_offsets"] == result.get("expected_end_offsets", run.get("count", g["count"])), (g["name"], run["client"])
            else:
                assert result["bytes"] == g["count"] * g["size"], (g["name"], run["client"])
        if g["kind"] in ("produce", "consume"):
            assert set(g["ratios"]) == {c for c in expected_clients if c != "kclient"}


def test_latency_and_bounds_rows(quick_report) -> None:
    report, _ = quick_report
    latency = next(g for g in report["groups"] if g["kind"] == "latency")
    for row in latency["rows"].values():
        assert row["records"] == latency["count"]
        assert row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
    # "kclient" polls for its acknowledgements, "kclient-no-busy-poll" keeps the default
    settings = {run["client"]: run["result"]["settings"] for run in latency["runs"]}
    assert settings["kclient"]["socket.busy.poll.us"] == latency["busy_poll_us"] > 0
    assert "socket.busy.poll.us" not in settings["kclient-no-busy-poll"]
    assert latency["ratios"]["kclient-no-busy-poll"] > 0
    bounds = next(g for g in report["groups"] if g["kind"] == "bounds")
    assert set(bounds["rows"]) >= {"raw-append-fsync", "broker-fetch", "raw-sendfile"}
    pairs = ("ingest / raw append+fsync", "fetch / raw sendfile")
    assert set(bounds["ratios"]) == {f"{k}{suffix}" for k in pairs for suffix in ("", ", paired median", ", per repeat")}
    for k in pairs:  # one paired ratio per repeat, the median among them
        per_repeat = bounds["ratios"][f"{k}, per repeat"]
        assert len(per_repeat) == report["repeat"] and min(per_repeat) <= bounds["ratios"][f"{k}, paired median"] + 0.01
    assert bounds["rows"]["broker-fetch"]["records"] == bounds["count"]
    total = bounds["count"] * bounds["size"]
    append = next(r for r in bounds["runs"] if r["client"] == "raw-append-fsync")
    assert append["result"]["bytes"] == total


def test_every_topic_deleted_after_its_last_run(quick_report) -> None:
    """The suite deletes each topic once no later run uses it (so that the
    page cache holds one row's data): every topic a run named is deleted,
    each once."""
    report, _ = quick_report
    used = {run["topic"] for g in report["groups"] for run in g["runs"] if "topic" in run}
    assert used and sorted(report["deleted_topics"]) == sorted(used)


def test_memory_rows(quick_report) -> None:
    """Issue 16's producer memory rows: kclient at N and 10N records with
    queue.buffering.max.messages fixed, the peak RSS of each run and the
    growth between them (its size is not asserted: `make bench` judges it)."""
    report, stdout = quick_report
    g = next(g for g in report["groups"] if g["kind"] == "memory")
    assert g["counts"] == [g["count"], 10 * g["count"]] and g["queue_max_messages"] == 10_000
    for run in g["runs"]:
        assert run["result"]["settings"]["queue.buffering.max.messages"] == 10_000
    (m,) = report["memory"]
    assert [r["records"] for r in m["rows"]] == g["counts"]
    assert all(r["peak_rss_mb"] > 0 and r["records_per_s"] > 0 for r in m["rows"])
    assert m["growth_mb"] == m["rows"][1]["peak_rss_mb"] - m["rows"][0]["peak_rss_mb"]
    assert "producer memory (issue 16)" in stdout and "peak RSS growth from" in stdout
    assert "producer memory bounded by queue.buffering.max.messages" in stdout


def test_table_printed(quick_report) -> None:
    _, stdout = quick_report
    assert "records/s" in stdout and "kclient ÷ this" in stdout
    assert "issue 5 targets" in stdout and "issue 16 targets" in stdout
    assert "CPU µs per record" in stdout
    if installed("confluent-kafka"):
        assert "cost as work grows" in stdout
    assert "JSON written to" in stdout


def test_security_benchmark_quick(tmp_path) -> None:
    """benchmarks/security.py --quick (issue 15): every client over PLAINTEXT
    and SASL_SSL, counts checked by the script itself (exit 1 on a wrong
    one); here only the exit status and the JSON's shape."""
    out = tmp_path / "security.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "security.py"), "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"benchmarks/security.py --quick failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    report = json.loads(out.read_text())
    assert report["problems"] == [] and report["repeat"] == 1
    assert report["mechanism"] in ("SCRAM-SHA-512", "PLAIN")
    clients = report["clients"]
    assert "kclient" in clients
    assert len(report["rows"]) == 2 * 2 * len(clients)  # produce/consume x two workloads x clients
    for row in report["rows"]:
        assert row["plaintext_records_per_s"] > 0 and row["sasl_ssl_records_per_s"] > 0, row
    assert "SASL_SSL/PLAINTEXT" in proc.stdout


def test_cluster_benchmark_quick(tmp_path, zookeeper) -> None:
    """benchmarks/cluster.py --quick (issue 11): the replication rows and
    the failover row run on a 3-broker cluster; only the report's shape and
    the record counts (checked by the script) are verified."""
    out = tmp_path / "cluster.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cluster.py"), "--quick", "--kills", "1", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"benchmarks/cluster.py --quick failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    report = json.loads(out.read_text())
    assert set(report) == {"count", "repeat", "replication", "failover"}
    assert "kclient" in report["replication"]
    for row in report["replication"].values():
        assert row["rf3_acks_all_records_per_s"] > 0 and row["rf1_acks_1_records_per_s"] > 0
    assert len(report["failover"]["failover_s"]) == 1
    assert "failover (leader SIGKILL" in proc.stdout


def test_stream_phases_quick(zookeeper) -> None:
    """benchmarks/stream_phases.py: a few small runs, each consuming every
    record (it stops at the count, or fails on consumer.timeout.ms), each
    with its phases, page faults, GC runs and thread CPU printed."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "stream_phases.py"), "--partitions", "2", "--count", "3000", "--size", "200", "--runs", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"benchmarks/stream_phases.py failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    runs = [line for line in proc.stdout.splitlines() if line.startswith("run ")]
    assert len(runs) == 2, proc.stdout
    for line in runs:
        assert "join" in line and "records/s" in line and "page faults" in line and "gc runs" in line, line
    assert proc.stdout.count("thread CPU ms:") == 2


@pytest.mark.apache_kafka
@pytest.mark.timeout(900)
def test_kafka_reference_benchmark_quick(tmp_path) -> None:
    """benchmarks/kafka_reference.py --quick (issue 25): the bundled broker
    beside Apache Kafka's, kclient beside Kafka's Java client and
    librdkafka, the kclient Spark source beside Spark's format("kafka");
    counts are checked by the script (exit 1 on a wrong one), here the
    exit status, the ratio lines and the JSON's shape. No speed is
    asserted."""
    from conftest import require_spark

    from kclient.testing import java_unavailable_reason

    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka (Java 17+)")
    require_spark()
    pytest.importorskip("confluent_kafka")
    out = tmp_path / "kafka_reference.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kafka_reference.py"), "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"benchmarks/kafka_reference.py --quick failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    report = json.loads(out.read_text())
    assert report["quick"] is True and report["repeat"] == 1 and report["failures"] == []
    rows = {(r["row"], r["client"]): r for r in report["broker_rows"]}
    for kind in ("produce", "consume"):
        for partitions in (1, 64):
            for client in ("kclient", "confluent-kafka", "java"):
                row = rows[f"{kind}-100B-{partitions}p", client]
                assert row["bundled_records_per_s"] > 0 and row["kafka_records_per_s"] > 0, row
                assert row["bundled_over_kafka"] > 0, row
            assert rows[f"{kind}-100B-{partitions}p", "kclient"]["kclient_over_java"] > 0
    for kind in ("read_aggregate", "write"):
        assert report["spark"][kind]["kclient_over_kafka"] > 0, report["spark"]
    stdout = proc.stdout
    assert "bundled/Kafka" in stdout and "kclient/Java" in stdout and "kclient/librdkafka" in stdout and "kclient/Spark" in stdout
    assert re.search(r"^produce-100B-1p\s+kclient\s+[\d,]+\s+[\d,]+\s+[\d.]+$", stdout, re.M), stdout
    assert re.search(r"^read\+aggregate\s+[\d,]+\s+[\d,]+\s+[\d.]+$", stdout, re.M), stdout


def test_partitions_benchmark_quick() -> None:
    """benchmarks/partitions.py (issue 28: default settings across
    partition counts) runs, every record is in the logs (it checks the log
    end offsets and exits 1 otherwise), and it prints its table."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "partitions.py"), "--partitions", "1,16", "--records", "2000", "--no-pin"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split(" | ") for line in proc.stdout.splitlines() if re.match(r"^\d+ \| ", line)]
    assert [row[0] for row in rows] == ["1", "16"]
    assert all(row[3].endswith("x") for row in rows), proc.stdout
