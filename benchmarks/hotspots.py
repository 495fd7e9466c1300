"""Where kclient's time goes: py-spy profiles of the async produce path and
the SimpleConsumer consume path, run exactly as the benchmark runs them.

    python benchmarks/hotspots.py [--count N] [--size B] [--only produce|consume] [--rate HZ] [--out DIR]

Starts one bundled broker (pinned to the first core, the profiled client to
the second, as in ``run.py``), then runs ``benchmarks/worker.py`` under
``py-spy record --format raw --threads`` for

- produce: kclient async Producer, N x 100 B records (``--size``), 1
  partition (the ``produce-100B-1p`` row);
- consume: kclient SimpleConsumer multifetch loop over N x 100 B records,
  1 partition, produced beforehand (untimed) by confluent-kafka.

and prints, from the samples of the thread holding the GIL (``--gil``: the
client runs on one core, so that is where its CPU goes; a thread blocked in
epoll or on a lock is not counted), the share of samples per thread, the top functions by self time
and the top functions by inclusive time (both as % of all those samples,
import-time stacks left out). The raw py-spy files go to ``--out`` (default
``benchmarks/results/``) for flame graphs (``flamegraph.pl`` or speedscope).
Needs ``py-spy`` (``pip install -e '.[bench]'``) and permission to ptrace
the child, which a process has over its own children on most systems.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(1, str(_HERE.parent))

import run as bench  # noqa: E402  (benchmarks/run.py)

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*)\)$")


def py_spy() -> str:
    exe = shutil.which("py-spy", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if exe is None:
        raise SystemExit("py-spy is not installed: pip install -e '.[bench]'")
    return exe


def thread_label(name: str, frames: list[str]) -> str:
    text = ";".join(frames)
    if name == "MainThread" or ("worker.py" in text and "<module>" in text):
        return "MainThread (the benchmark loop: send() / iterating messages)"
    if name.endswith("-send") or "send_thread.py" in text:
        return f"{name or 'send thread'} (ProducerSendThread: the producer's trio loop: batches, serializes, sends)"
    if name.endswith("-trio") or "trio" in text:
        return f"{name or 'trio thread'} (a client's trio loop: I/O, decoding responses)"
    return name or "other thread"


def parse_raw(path: Path) -> dict:
    """Aggregate a py-spy raw file: per-thread shares, self and inclusive
    sample counts per function (file:function, line numbers dropped)."""
    threads: collections.Counter = collections.Counter()
    self_counts: collections.Counter = collections.Counter()
    incl_counts: collections.Counter = collections.Counter()
    total = 0
    skipped = 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        stack, _, count_text = line.rpartition(" ")
        try:
            count = int(count_text)
        except ValueError:
            continue
        frames = stack.split(";")
        thread = ""
        while frames and frames[0].startswith(("process ", "thread ")):
            head = frames.pop(0)
            if head.startswith("thread "):  # "thread (1277): MainThread"
                thread = head.split(": ", 1)[1] if ": " in head else ""
        if any("_find_and_load" in f or "_call_with_frames_removed" in f for f in frames):
            skipped += count  # imports, not the measured path
            continue
        names = []
        for f in frames:
            m = _FRAME.match(f)
            if m:
                file = m["file"].split(":")[0]
                names.append(f"{m['func']} ({file})")
            else:
                names.append(f)
        if not names:
            continue
        total += count
        threads[thread_label(thread, names)] += count
        self_counts[names[-1]] += count
        for name in set(names):
            incl_counts[name] += count
    return {"total": total, "import_samples": skipped, "threads": threads, "self": self_counts, "inclusive": incl_counts}


def report(title: str, agg: dict, top: int) -> str:
    total = agg["total"] or 1
    lines = [f"== {title}: {agg['total']} GIL-holding samples ({agg['import_samples']} import-time samples left out)"]
    lines.append("threads:")
    for name, n in agg["threads"].most_common():
        lines.append(f"  {100 * n / total:5.1f}%  {name}")
    lines.append(f"top {top} by self time:")
    for name, n in agg["self"].most_common(top):
        lines.append(f"  {100 * n / total:5.1f}%  {name}")
    lines.append(f"top {top} by inclusive time:")
    for name, n in agg["inclusive"].most_common(top + 8):
        lines.append(f"  {100 * n / total:5.1f}%  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1_000_000, help="records per profile (default 1,000,000)")
    ap.add_argument("--size", type=int, default=100, help="record value size in bytes (default 100; the suite's other size is 1000)")
    ap.add_argument("--only", choices=["produce", "consume"], default=None)
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second (default 200)")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--out", default=str(_HERE / "results"), help="directory for the raw py-spy files and profile.json")
    args = ap.parse_args(argv)
    exe = py_spy()
    from kclient.testing import BrokerProcess

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kclient-hotspots-"))
    logs = work / "logs"
    for topic in ("prof-produce", "prof-consume"):
        (logs / f"{topic}-0").mkdir(parents=True)
    cpus = sorted(os.sched_getaffinity(0))
    broker_cpu, client_cpu = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})
    payload = bench.make_payloads(work, "random", args.size)
    base = dict(size=args.size, count=args.count, partitions=1, payload_file=str(payload), linger_ms=bench.LINGER_MS, batch_bytes=bench.BATCH_BYTES, acks=1, cpu=client_cpu)
    results = {}
    texts = []
    try:
        with BrokerProcess(log_dir=logs, properties={"num.partitions": 1}, startup_timeout=120) as broker:
            if broker_cpu is not None:
                bench.pin_process(broker.pid, broker_cpu)
            base["bootstrap"] = broker.bootstrap
            jobs = []
            if args.only in (None, "produce"):
                jobs.append(("produce", dict(base, kind="produce", client="kclient", topic="prof-produce")))
            if args.only in (None, "consume"):
                fill = dict(base, kind="produce", client="confluent-kafka" if bench.importlib.util.find_spec("confluent_kafka") else "kclient", topic="prof-consume")
                subprocess.run([sys.executable, str(bench.WORKER), json.dumps(fill)], check=True, capture_output=True)
                jobs.append(("consume", dict(base, kind="consume", client="kclient", topic="prof-consume")))
            for name, spec in jobs:
                raw = out / f"profile-{name}.txt"
                cmd = [exe, "record", "--format", "raw", "--threads", "--gil", "--nolineno", "--rate", str(args.rate), "--output", str(raw), "--", sys.executable, str(bench.WORKER), json.dumps(spec)]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                line = next((x for x in proc.stdout.splitlines() if x.startswith(bench.RESULT_PREFIX)), None)
                if proc.returncode != 0 or line is None or not raw.exists():
                    print(f"{name}: py-spy or the worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}", file=sys.stderr)
                    continue
                result = json.loads(line[len(bench.RESULT_PREFIX) :])
                agg = parse_raw(raw)
                title = f"kclient {name}, {args.count:,} x {args.size} B, 1 partition: {result['records'] / result['elapsed_s']:,.0f} rec/s under py-spy at {args.rate} Hz"
                text = report(title, agg, args.top)
                texts.append(text)
                print(text + "\n", flush=True)
                total = agg["total"] or 1
                results[name] = {
                    "title": title,
                    "result": result,
                    "raw_file": str(raw),
                    "threads": {k: round(100 * v / total, 1) for k, v in agg["threads"].most_common()},
                    "self_pct": [[k, round(100 * v / total, 1)] for k, v in agg["self"].most_common(args.top)],
                    "inclusive_pct": [[k, round(100 * v / total, 1)] for k, v in agg["inclusive"].most_common(args.top + 8)],
                }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (out / "profile.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "profile.txt").write_text("\n\n".join(texts) + "\n")
    print(f"written: {out / 'profile.txt'}, {out / 'profile.json'} and the raw py-spy files")
    return 0 if len(results) == (1 if args.only else 2) else 1


if __name__ == "__main__":
    sys.exit(main())
