"""benchmarks/commit_latency.py runs end to end in --quick mode (issue 12's
benchmark row). Only the output's shape is checked: one line and one JSON
row per client, each with its commit count; timings are never asserted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "commit_latency.py"
LABELS = (
    "kclient offsets.storage=zookeeper",
    "kclient offsets.storage=kafka",
    "kclient group.coordination=broker",
    "confluent-kafka commit(asynchronous=False)",
)


def test_commit_latency_quick_run_prints_every_client(zookeeper, tmp_path) -> None:
    pytest.importorskip("confluent_kafka")
    out = tmp_path / "commit.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(out)], check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    lines = [line for line in proc.stdout.splitlines() if "commits=" in line]
    assert len(lines) == len(LABELS)
    for label, line in zip(LABELS, lines):
        assert re.fullmatch(rf"{re.escape(label)}\s+commits=20\s+p50=\d+\.\d\d ms\s+p99=\d+\.\d\d ms", line), line
    report = json.loads(out.read_text())
    assert report["commits"] == 20 and list(report["results"]) == list(LABELS)
    for row in report["results"].values():
        assert row["commits"] == 20 and {"p50_ms", "p99_ms", "mean_ms"} <= set(row)
