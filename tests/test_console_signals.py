"""Ctrl-C (SIGINT) at random points of ``kclient console-consumer`` and
``kclient console-producer``, run as subprocesses against one bundled
broker for the module (issue 27).

The consumer must print exactly one ``Processed a total of N messages``
line, N the records it printed. The producer must send every line it read
before the signal, or name the lines it could not deliver on stderr: every
line is accounted for, in the topic or named lost.

The point of each signal is drawn from a seeded `random.Random` (the run
number), among points defined by what the tool did (its signal handlers in
place, k lines printed, k lines read from the pipe), and sometimes a short
random delay after one. Before the interpreter reaches kclient's code (the
first tens of milliseconds of ``python -m kclient``) SIGINT is Python's own
KeyboardInterrupt: each run first waits until the tool took SIGTERM over
(``/proc/PID/status``), which `kclient.cli.main` does before anything else.
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from helpers.records import partition_messages, produce
from helpers.wait import wait_for

from kclient.testing import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
RUNS = 20
#: Runs of the consumer in a group (each joins a new group: slower).
GROUP_RUNS = 8
PARTITIONS = 2
#: Records in the consumer's topic.
RECORDS = 400

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/PID/status (Linux)")


@pytest.fixture(scope="module")
def broker():
    with BrokerProcess(properties={"num.partitions": PARTITIONS}) as proc:
        yield proc


@pytest.fixture(scope="module")
def records_topic(broker) -> str:
    topic = "signals-consumer"
    produce(broker, topic, [f"record-{i:04d}" for i in range(RECORDS)], per_send=50)
    return topic


def start(*args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "kclient", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )


def signals_taken_over(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the tool catches SIGTERM (Python alone does not): its
    `kclient.tools.shutdown.ShutdownSignals` is installed."""
    assert proc.poll() is None, f"the tool exited ({proc.returncode}) before taking the signals over"
    with open(f"/proc/{proc.pid}/status") as status:
        for line in status:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def unread_bytes(pipe) -> int:
    """Bytes written to the tool's stdin that it has not read yet."""
    return struct.unpack("i", fcntl.ioctl(pipe.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


class LineCollector:
    """Reads a pipe's lines in a thread (so the test can wait for them)."""

    def __init__(self, pipe) -> None:
        self.lines: list[bytes] = []
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe) -> None:
        for line in pipe:
            self.lines.append(line)

    def join(self) -> list[bytes]:
        self._thread.join(60)
        assert not self._thread.is_alive()
        return self.lines


def finish(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def interrupt_consumer(broker, topic: str, rng: random.Random, *extra: str) -> tuple[str, list[str]]:
    """Run the console consumer, SIGINT it at a random point, check its
    summary line; returns the point and the records printed."""
    proc = start("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning", *extra)
    out = LineCollector(proc.stdout)
    err = LineCollector(proc.stderr)
    try:
        wait_for(lambda: signals_taken_over(proc), "the consumer's signal handlers")
        point = rng.choice(["started", "delay", "lines", "all"])
        if point == "delay":
            time.sleep(rng.uniform(0, 0.6))  # a random point in connecting or reading
        elif point == "lines":
            k = rng.randint(1, RECORDS)
            wait_for(lambda: len(out.lines) >= k, f"{k} records printed", detail=lambda: repr(err.lines))
        elif point == "all":
            wait_for(lambda: len(out.lines) >= RECORDS, "every record printed", detail=lambda: repr(err.lines))
        proc.send_signal(signal.SIGINT)
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    printed = out.join()
    stderr = b"".join(err.join()).decode()
    assert proc.returncode == 0, (point, stderr)
    assert stderr == f"Processed a total of {len(printed)} messages\n", (point, stderr)
    values = [line.rstrip(b"\n").decode() for line in printed]
    assert len(set(values)) == len(values) and set(values) <= {f"record-{i:04d}" for i in range(RECORDS)}, values
    if point == "all":
        assert len(values) == RECORDS
    return point, values


@pytest.mark.parametrize("run", range(RUNS))
def test_console_consumer_prints_one_summary_line_at_any_sigint(broker, records_topic, run):
    interrupt_consumer(broker, records_topic, random.Random(run))


@pytest.mark.parametrize("run", range(GROUP_RUNS))
def test_console_consumer_in_a_group_commits_what_it_printed_at_any_sigint(broker, records_topic, run):
    """``--group``: the summary line, and the group's committed offsets
    count exactly the records printed."""
    group = f"signals-group-{run}"
    point, values = interrupt_consumer(broker, records_topic, random.Random(500 + run), "--group", group)
    committed = subprocess.run(
        [sys.executable, "-m", "kclient", "consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", group],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    rows = [line.split() for line in committed.stdout.splitlines()[1:] if line.strip() and line.split()[0] == group]
    assert sum(int(row[3]) for row in rows if row[3] != "-") == len(values), (point, committed.stdout, committed.stderr)


LOSS = re.compile(r"^kclient console-producer: error: FailedToSendMessageError: (\d+) of (\d+) lines? read (?:was|were) not delivered \(lines? ([\d,-]+)\)")


def lines_named(ranges: str) -> set[int]:
    named: set[int] = set()
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        named.update(range(int(first), int(last or first) + 1))
    return named


@pytest.mark.parametrize("run", range(RUNS))
def test_console_producer_sends_or_names_every_line_read_at_any_sigint(broker, run):
    rng = random.Random(1000 + run)
    topic = f"signals-producer-{run}"
    proc = start("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic)
    err = LineCollector(proc.stderr)
    written: list[str] = []
    try:
        wait_for(lambda: signals_taken_over(proc), "the producer's signal handlers")
        point = rng.choice(["started", "read", "read-one-by-one", "end-of-input"])
        if point != "started":
            k = rng.randint(1, 6)
            lines = [f"run{run}-line{j}" for j in range(1, k + 1)]
            chunks = [lines] if point != "read-one-by-one" else [[line] for line in lines]
            for chunk in chunks:
                proc.stdin.write("".join(f"{line}\n" for line in chunk).encode())
                proc.stdin.flush()
                written += chunk
                # Read by the tool: from now on it must send these lines.
                wait_for(lambda: unread_bytes(proc.stdin) == 0, "the tool reading its input", detail=lambda: repr(err.lines))
            if point == "read-one-by-one":
                time.sleep(rng.uniform(0, 0.3))  # a random point in sending
            if point == "end-of-input":
                proc.stdin.close()  # end of input and the signal race
        proc.send_signal(signal.SIGINT)
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        if not proc.stdin.closed:
            proc.stdin.close()
    stderr = b"".join(err.join()).decode()
    lost: set[int] = set()
    if proc.returncode == 1:
        match = LOSS.match(stderr)
        assert match and stderr.count("\n") == 1, (point, stderr)
        lost = lines_named(match[3])
        assert int(match[1]) == len(lost) and int(match[2]) == len(written), (point, stderr)
    else:
        assert proc.returncode in (0, 130) and stderr == "", (point, proc.returncode, stderr)
    delivered = [m.message.payload.decode() for p in range(PARTITIONS) for m in partition_messages(broker, topic, p)]
    assert len(set(delivered)) == len(delivered) and set(delivered) <= set(written), (point, delivered, written)
    for number, line in enumerate(written, 1):
        assert line in delivered or number in lost, (point, line, delivered, stderr)
