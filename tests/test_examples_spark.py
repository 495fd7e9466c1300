"""The streaming flights example runs end to end (on the first 20,000
flights): stopped, more records produced, resumed from its checkpoint, and
its totals checked against pandas by the example itself."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from conftest import require_spark

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "flights_streaming.py"


def test_streaming_flights_example_resumes_with_the_same_totals():
    require_spark()
    done = subprocess.run([sys.executable, str(EXAMPLE), "--limit", "20000"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "OK: 20,000 flights streamed in two runs" in done.stdout
    assert "resumed from the checkpoint): 10,000 more flights" in done.stdout
