"""The security rows (issue 15): produce and consume over SASL_SSL against
PLAINTEXT, kclient and the same peers as ``run.py`` (confluent-kafka,
kafka-python), against ONE bundled broker.

    python benchmarks/security.py [--quick] [--repeat N] [--json PATH]
                                  [--clients NAME[,NAME...]] [--mechanism M] [--no-pin]

(``make bench`` runs it after ``spark.py``.) One session:

- makes a test CA and the broker's certificate with ``trustme``
  (`kclient.testing.TestCertificates`; nothing is read from the repository);
- starts one ZooKeeper (`kclient.testing.ZooKeeperProcess`) and adds the
  SCRAM user ``bench`` there (`kclient.zk.users.add_scram_user`, what
  ``kclient configs --alter --add-config 'SCRAM-SHA-512=[password=...]'``
  writes); ``--mechanism PLAIN`` uses a JAAS PLAIN user instead and no
  ZooKeeper (the fallback when Java / ZooKeeper is not available);
- starts one bundled broker (`kclient.testing.BrokerProcess`) with two
  listeners, ``PLAINTEXT`` and ``SASL_SSL``
  (`kclient.testing.security_properties`: PEM keystore and truststore,
  KIP-651; ``sasl.enabled.mechanisms`` = the mechanism);
- with 2+ cores, pins the broker and ZooKeeper to the first core, this
  process and every client process to the second (as ``run.py``);
- pre-creates every topic (1 partition) by making its directory before the
  broker starts, so each run writes into a fresh topic;
- then, ``--repeat`` times (default 3), for each workload (200,000 x 100 B
  and 20,000 x 1,000 B; ``--quick``: 2,000 and 300) and each client, once
  over PLAINTEXT and once over SASL_SSL (the order alternates between
  repeats), in a fresh process each (``benchmarks/worker.py``, the settings
  of ``run.py``'s throughput rows: acks=1, linger 5 ms, 16 KB batches):

  1. **produce** the records into a fresh topic, then sum the topic's log
     end offset (ListOffsets, untimed) and fail unless it is the count;
  2. **consume** that topic back from offset 0 (kclient
     ``SimpleConsumer.multifetch``, 1 MB per fetch; confluent-kafka
     ``Consumer.assign`` + ``consume()``; kafka-python ``KafkaConsumer.assign``
     + ``poll()``); the worker fails unless it read every record and every
     value byte.

  The SASL_SSL runs of every client use the same properties (Kafka's names,
  `kclient.testing.client_properties`: ``security.protocol=SASL_SSL``,
  ``ssl.ca.location``, host-name check on, ``sasl.mechanism``,
  ``sasl.username``, ``sasl.password``; kafka-python gets them as keyword
  arguments, `kclient.testing.kafka_python_options`). Each client opens
  its connections, does the TLS handshake and SASL exchange inside the
  timed section or just before it, as in real use; at these counts that is
  a few milliseconds of the run.

records/s = records / seconds of the timed section (median of the repeats).
The table gives each client's PLAINTEXT and SASL_SSL rates, SASL_SSL ÷
PLAINTEXT (the cost of TLS + SASL for that client) and kclient ÷ the peer
over SASL_SSL. JSON goes to ``benchmarks/results/security.json`` (that
folder is gitignored).

Timings are never asserted: the exit status is 1 only when a run failed or
a count is wrong.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
for _p in (str(_ROOT), str(_HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import run as suite  # noqa: E402  benchmarks/run.py, importable only after the sys.path insert

DEFAULT_JSON = _HERE / "results" / "security.json"
KCLIENT = "kclient"
CLIENTS = [KCLIENT, "confluent-kafka", "kafka-python"]
PROTOCOLS = ["PLAINTEXT", "SASL_SSL"]
PHASES = ["produce", "consume"]
USER, PASSWORD = "bench", "bench-secret"


def workloads(quick: bool) -> list[dict[str, Any]]:
    """The two record sizes, with their counts (full or ``--quick``)."""
    if quick:
        return [dict(name="100B", size=100, count=2_000), dict(name="1000B", size=1000, count=300)]
    return [dict(name="100B", size=100, count=200_000), dict(name="1000B", size=1000, count=20_000)]


def workload_label(w: dict[str, Any]) -> str:
    return f"{w['count']:,} x {w['size']:,} B"


class CountError(Exception):
    """A correctness failure: a count that is not what was produced."""


class Session:
    """ZooKeeper (for SCRAM), one broker with PLAINTEXT and SASL_SSL listeners, the pinning."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="kclient-bench-sec-"))
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir()
        self.certs: Any = None
        self.zookeeper: Any = None
        self.broker: Any = None
        self.checker: Any = None
        self.mechanism: str = args.mechanism
        self.notes: list[str] = []
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if len(cpus) >= 2 and not args.no_pin:
            self.broker_cpu, self.client_cpu = cpus[0], cpus[1]
        else:
            self.broker_cpu = self.client_cpu = None

    def log(self, msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    def start(self, topics: list[str]) -> None:
        from kclient import SimpleConsumer
        from kclient.testing import (
            BrokerProcess,
            TestCertificates,
            security_properties,
            zookeeper_unavailable_reason,
        )

        for topic in topics:  # 1 partition each, made before the broker starts
            (self.log_dir / f"{topic}-0").mkdir()
        if self.client_cpu is not None:
            os.sched_setaffinity(0, {self.client_cpu})
        self.certs = TestCertificates(self.workdir / "certs")
        if self.mechanism.startswith("SCRAM"):
            reason = zookeeper_unavailable_reason()
            if reason:
                self.notes.append(f"{self.mechanism} needs ZooKeeper ({reason}); fell back to PLAIN (a JAAS user)")
                self.mechanism = "PLAIN"
        properties: dict[str, Any] = security_properties(
            self.certs,
            listeners=PROTOCOLS,
            mechanisms=[self.mechanism],
            plain_users={USER: PASSWORD} if self.mechanism == "PLAIN" else {},
        )
        properties["num.partitions"] = 1
        if self.mechanism.startswith("SCRAM"):
            from kclient.testing import ZooKeeperProcess
            from kclient.zk.users import add_scram_user

            self.zookeeper = ZooKeeperProcess().start()
            if self.broker_cpu is not None:
                suite.pin_process(self.zookeeper.pid, self.broker_cpu)
            add_scram_user(self.zookeeper.connect, USER, {self.mechanism: PASSWORD})
            properties["zookeeper.connect"] = self.zookeeper.connect
        self.broker = BrokerProcess(log_dir=self.log_dir, properties=properties, startup_timeout=120)
        self.broker.start()
        if self.broker_cpu is not None:
            suite.pin_process(self.broker.pid, self.broker_cpu)
        host, port = self.broker.bootstrap_for("PLAINTEXT").rsplit(":", 1)
        self.checker = SimpleConsumer(host, int(port), so_timeout_ms=30000, client_id="bench-check")
        self.log(
            f"broker pid {self.broker.pid}: PLAINTEXT {self.broker.bootstrap_for('PLAINTEXT')}, "
            f"SASL_SSL {self.broker.bootstrap_for('SASL_SSL')} ({self.mechanism}); "
            + (f"broker pinned to cpu {self.broker_cpu}, clients to cpu {self.client_cpu}" if self.broker_cpu is not None else "not pinned")
        )

    def security(self, protocol: str) -> dict[str, str]:
        """The client properties of ``protocol`` (Kafka's names)."""
        from kclient.testing import client_properties

        if protocol == "PLAINTEXT":
            return {}
        return client_properties(protocol, self.certs, mechanism=self.mechanism, username=USER, password=PASSWORD)

    def spec(self, w: dict[str, Any], kind: str, client: str, protocol: str, topic: str) -> dict[str, Any]:
        return dict(
            kind=kind,
            client=client,
            topic=topic,
            bootstrap=self.broker.bootstrap_for(protocol),
            security=self.security(protocol),
            size=w["size"],
            count=w["count"],
            partitions=1,
            payload_file=str(suite.make_payloads(self.workdir, "random", w["size"])),
            linger_ms=suite.LINGER_MS,
            batch_bytes=suite.BATCH_BYTES,
            acks=1,
            cpu=self.client_cpu,
        )

    def run_worker(self, spec: dict[str, Any]) -> dict[str, Any]:
        """One measurement in a fresh process (``run.py``'s way: os.sync()
        first, broker CPU counted around it)."""
        import subprocess

        os.sync()
        b0 = suite.proc_cpu_seconds(self.broker.pid)
        proc = subprocess.run([sys.executable, str(suite.WORKER), json.dumps(spec)], capture_output=True, text=True, timeout=1200, cwd=str(_ROOT))
        b1 = suite.proc_cpu_seconds(self.broker.pid)
        lines = [line for line in proc.stdout.splitlines() if line.startswith(suite.RESULT_PREFIX)]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr or proc.stdout)[-2000:]
            raise CountError(f"{spec['kind']} {spec['client']} over {spec['security'].get('security.protocol', 'PLAINTEXT')} exited {proc.returncode}:\n{tail}")
        result = json.loads(lines[-1][len(suite.RESULT_PREFIX) :])
        result["broker_cpu_s"] = b1 - b0
        return result

    def end_offset(self, topic: str) -> int:
        from kclient import OffsetRequest

        return self.checker.get_offsets_before(topic, 0, OffsetRequest.LATEST_TIME, 1)[0]

    def stop(self) -> None:
        if self.checker is not None:
            try:
                self.checker.close()
            except Exception:
                pass
        if self.broker is not None:
            self.broker.cleanup()
        if self.zookeeper is not None:
            self.zookeeper.cleanup()
        if self.certs is not None:
            self.certs.cleanup()
        shutil.rmtree(self.workdir, ignore_errors=True)


def spread(values: list[float]) -> float:
    """Half the range of the repeats as a % of the median."""
    med = statistics.median(values)
    return 100 * (max(values) - min(values)) / 2 / med if med else 0.0


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """key ``client|workload|phase|protocol`` -> medians of its runs."""
    out = {}
    for key, results in runs.items():
        if not results:
            continue
        rates = [r["records"] / r["elapsed_s"] for r in results]
        out[key] = {
            "runs": len(results),
            "records_per_s": statistics.median(rates),
            "spread_pct": spread(rates),
            "mb_per_s": statistics.median(r["bytes"] / r["elapsed_s"] / 1e6 for r in results),
            "cpu_s_per_million": statistics.median(r["cpu_s"] / r["records"] * 1e6 for r in results),
            "broker_cpu_s": statistics.median(r["broker_cpu_s"] for r in results),
        }
    return out


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def build_rows(medians: dict[str, dict[str, Any]], clients: list[str], wls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for phase in PHASES:
        for w in wls:
            for client in clients:
                pt = medians.get(f"{client}|{w['name']}|{phase}|PLAINTEXT")
                ss = medians.get(f"{client}|{w['name']}|{phase}|SASL_SSL")
                kc = medians.get(f"{KCLIENT}|{w['name']}|{phase}|SASL_SSL")
                kc_pt = medians.get(f"{KCLIENT}|{w['name']}|{phase}|PLAINTEXT")
                row = {
                    "client": client,
                    "workload": f"{phase} {workload_label(w)}",
                    "plaintext_records_per_s": pt and pt["records_per_s"],
                    "sasl_ssl_records_per_s": ss and ss["records_per_s"],
                    "plaintext_spread_pct": pt and pt["spread_pct"],
                    "sasl_ssl_spread_pct": ss and ss["spread_pct"],
                    "sasl_ssl_cpu_s_per_million": ss and ss["cpu_s_per_million"],
                    "plaintext_cpu_s_per_million": pt and pt["cpu_s_per_million"],
                    "sasl_ssl_over_plaintext": (ss["records_per_s"] / pt["records_per_s"]) if pt and ss else None,
                    "kclient_over_this_sasl_ssl": (kc["records_per_s"] / ss["records_per_s"]) if kc and ss and client != KCLIENT else None,
                    "kclient_over_this_plaintext": (kc_pt["records_per_s"] / pt["records_per_s"]) if kc_pt and pt and client != KCLIENT else None,
                }
                rows.append(row)
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    def num(v: Any, spec: str = ",.0f") -> str:
        return "-" if v is None else format(v, spec)

    headers = ["client", "workload", "PLAINTEXT rec/s", "±%", "SASL_SSL rec/s", "±%", "SASL_SSL/PLAINTEXT", "kclient ÷ this (SASL_SSL)", "(PLAINTEXT)"]
    cells = [
        [
            r["client"],
            r["workload"],
            num(r["plaintext_records_per_s"]),
            num(r["plaintext_spread_pct"], ".0f"),
            num(r["sasl_ssl_records_per_s"]),
            num(r["sasl_ssl_spread_pct"], ".0f"),
            num(r["sasl_ssl_over_plaintext"], ".2f"),
            "" if r["client"] == KCLIENT else num(r["kclient_over_this_sasl_ssl"], ".2f") + "x",
            "" if r["client"] == KCLIENT else num(r["kclient_over_this_plaintext"], ".2f") + "x",
        ]
        for r in rows
    ]
    return table(headers, cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small counts (2,000 x 100 B, 300 x 1,000 B), 1 repeat unless --repeat")
    parser.add_argument("--repeat", type=int, default=None, help="measurements per row; the median is reported (default 3; 1 with --quick)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"where the results go (default {DEFAULT_JSON.relative_to(_ROOT)})")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated, of {', '.join(CLIENTS)}")
    parser.add_argument("--mechanism", default="SCRAM-SHA-512", choices=["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"], help="SASL mechanism (default SCRAM-SHA-512; PLAIN needs no ZooKeeper)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the broker and the clients to separate cores")
    args = parser.parse_args(argv)
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    if repeat < 1:
        parser.error("--repeat must be at least 1")
    wanted = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in CLIENTS]
    if unknown:
        parser.error(f"unknown client(s) {', '.join(unknown)}; choose from {', '.join(CLIENTS)}")

    started = _dt.datetime.now(_dt.timezone.utc)
    t0 = time.monotonic()
    skipped = {}
    clients = []
    for c in wanted:
        if importlib.util.find_spec(suite.MODULES[c]) is None:
            skipped[c] = f"{c} is not installed (pip install -e '.[bench]'); its rows are skipped"
        else:
            clients.append(c)
    wls = workloads(args.quick)
    info = suite.machine_info()
    vers = suite.versions()
    print(f"machine: {info['nproc']} cores, {info['cpu_model']}, Python {info['python']} ({info['platform']})")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items() if v and k in (KCLIENT, "confluent-kafka", "librdkafka", "kafka-python")))
    load = {"before": list(os.getloadavg())}

    plan = []  # (rep, workload, client, protocol, topic)
    for rep in range(repeat):
        for w in wls:
            for client in clients:
                order = PROTOCOLS if rep % 2 == 0 else PROTOCOLS[::-1]
                for protocol in order:
                    plan.append((rep, w, client, protocol, f"sec-{w['name']}-{client}-{protocol}-r{rep}".lower()))

    runs: dict[str, list[dict[str, Any]]] = {}
    problems: list[str] = []
    session = Session(args)
    mechanism = args.mechanism
    try:
        session.start([t for *_, t in plan])
        for i, (rep, w, client, protocol, topic) in enumerate(plan, 1):
            base = f"{client}|{w['name']}"
            try:
                produced = session.run_worker(session.spec(w, "produce", client, protocol, topic))
                landed = session.end_offset(topic)
                if landed != w["count"]:
                    raise CountError(f"{client} produce over {protocol}: {topic} holds {landed} records, produced {w['count']}")
                runs.setdefault(f"{base}|produce|{protocol}", []).append(produced)
                consumed = session.run_worker(session.spec(w, "consume", client, protocol, topic))
                if consumed["records"] != w["count"]:
                    raise CountError(f"{client} consume over {protocol}: read {consumed['records']} records of {w['count']}")
                runs.setdefault(f"{base}|consume|{protocol}", []).append(consumed)
                session.log(
                    f"[{i}/{len(plan)}] r{rep + 1} {workload_label(w)} {client} {protocol}: "
                    f"produce {produced['records'] / produced['elapsed_s']:,.0f} rec/s, consume {consumed['records'] / consumed['elapsed_s']:,.0f} rec/s"
                )
            except (CountError, RuntimeError, OSError) as exc:
                problems.append(str(exc))
                session.log(f"[{i}/{len(plan)}] FAILED: {exc}")
        mechanism = session.mechanism
    finally:
        session.stop()
    load["after"] = list(os.getloadavg())
    duration = time.monotonic() - t0

    medians = summarise(runs)
    rows = build_rows(medians, clients, wls)
    print()
    print(
        f"produce and consume, PLAINTEXT vs SASL_SSL ({mechanism}, TLS with host-name check), 1 partition, acks=1, "
        f"median of {repeat}; ±% = half the range of the repeats"
    )
    print(render(rows))
    notes = list(session.notes) + list(skipped.values())
    # This run keeps about two processes busy (the broker, a client), so
    # only a load beyond that, or a busy machine before it, means others ran.
    cores = os.cpu_count() or 1
    if load["before"][0] > 0.5 * cores or load["after"][0] > min(cores, 2) + 0.5:
        notes.append(f"load average {load['before'][0]:.2f} before, {load['after'][0]:.2f} after: the machine was shared; the figures are noisy")
    if session.broker_cpu is None:
        notes.append("broker and clients were NOT pinned to separate cores")
    for note in notes:
        print(f"note: {note}")
    print(f"took {duration:.0f} s")

    report = {
        "suite": "kclient security benchmark (issue 15)",
        "command": " ".join([Path(sys.executable).name, "benchmarks/security.py", *(argv if argv is not None else sys.argv[1:])]),
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(duration, 1),
        "quick": args.quick,
        "repeat": repeat,
        "mechanism": mechanism,
        "machine": info,
        "versions": vers,
        "load_average": load,
        "pinning": f"broker and ZooKeeper on cpu {session.broker_cpu}, clients on cpu {session.client_cpu}" if session.broker_cpu is not None else "none",
        "clients": clients,
        "workloads": wls,
        "notes": notes,
        "problems": problems,
        "rows": rows,
        "medians": medians,
        "runs": runs,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"JSON: {args.json}")
    expected_runs = len(plan)
    if problems or sum(len(v) for k, v in runs.items() if k.endswith(("|produce|PLAINTEXT", "|produce|SASL_SSL"))) != expected_runs:
        print("\nFAILED:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
