"""Clients that are never closed: interpreter exit, Ctrl-C, garbage
collection (issue 13, "Exit").

Each exit case runs a script in a subprocess against a real broker (and a
real ZooKeeper for the ConsumerConnector) with a timeout: the script must
exit on its own, and what it sent / committed is then counted from outside.
"""

from __future__ import annotations

import gc
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
import warnings
import weakref
from pathlib import Path

import pytest
from helpers.records import partition_messages
from helpers.wait import wait_for

from kclient import Producer, ProducerData, SimpleConsumer
from kclient.testing import BrokerProcess
from kclient.zk import paths
from kclient.zk.client import ZkClient

ROOT = Path(__file__).resolve().parents[1]
#: The longest any script may run before the test calls it hung.
HANG = 60.0


def script_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_script(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=script_env(),
        cwd=str(ROOT),
    )


def run_script(code: str, *args: str, timeout: float = HANG) -> tuple[int, str, str]:
    """Run ``code``; returns (returncode, stdout, stderr). Fails the test if
    it has not exited after ``timeout`` seconds."""
    proc = start_script(code, *args)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the script did not exit within {timeout} s (hung)\nstdout:\n{out}\nstderr:\n{err}")
    return proc.returncode, out, err


def wait_for_line(proc: subprocess.Popen, expected: str, timeout: float = HANG) -> None:
    """Read ``proc``'s stdout until a line equal to ``expected``."""
    result: list[str] = []

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            result.append(line)
            if line.strip() == expected:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive() or not result or result[-1].strip() != expected:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the script never printed {expected!r}; stdout: {result!r}\nstderr:\n{err}")


def finish(proc: subprocess.Popen, timeout: float = HANG) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the script did not exit within {timeout} s (hung)\nstdout:\n{out}\nstderr:\n{err}")
    return proc.returncode, out, err


def count_records(port: int, topic: str, partitions: int) -> int:
    return sum(len(partition_messages(f"127.0.0.1:{port}", topic, p, client_id="exit-test-reader")) for p in range(partitions))


@pytest.fixture
def stalled_broker():
    """A broker of this test's own, to SIGSTOP (SIGCONT on the way out)."""
    with BrokerProcess(properties={"num.partitions": 1}) as proc:
        try:
            yield proc
        finally:
            os.kill(proc.pid, signal.SIGCONT)


# -- async Producer ------------------------------------------------------------------

UNCLOSED_ASYNC = """
import logging, sys
logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
from kclient import Producer, ProducerData
p = Producer({"metadata.broker.list": sys.argv[1], "producer.type": "async",
              "queue.buffering.max.ms": 60000, "batch.num.messages": 200})
for i in range(1050):
    p.send(ProducerData(sys.argv[2], key=None, messages=[b"r%d" % i]))
print("SENT", flush=True)
# no close(): the exit hook must flush
"""


def test_unclosed_async_producer_delivers_everything_at_exit(broker, topic):
    rc, out, err = run_script(UNCLOSED_ASYNC, broker.bootstrap, topic)
    assert rc == 0, err
    assert "SENT" in out
    assert "ERROR" not in err and "Traceback" not in err, err
    assert count_records(broker.port, topic, 2) == 1050


STALLED = """
import logging, sys, threading
logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
from kclient import Producer, ProducerData
from tests.helpers.wait import wait_for
p = Producer({"metadata.broker.list": sys.argv[1], "producer.type": "async",
              "queue.buffering.max.ms": 60000, "batch.num.messages": 200,
              "close.timeout.ms": int(sys.argv[3]), "message.send.max.retries": 0,
              "max.in.flight.requests.per.connection": 1})
p.send(ProducerData(sys.argv[2], key=None, messages=[b"first"]))
p.flush()  # connected and the metadata known
print("READY", flush=True)
sys.stdin.readline()  # the broker is stopped now
for i in range(1000):
    p.send(ProducerData(sys.argv[2], key=None, messages=[b"r%d" % i]))
wait_for(lambda: p.statistics().queued_messages <= 800, "the first batch of 200 in flight", interval=0.01)

def announce_close():  # IN_CLOSE once close() or the exit flush has begun
    wait_for(lambda: p.closed, "the close", timeout=60, interval=0.01)
    print("IN_CLOSE", flush=True)

threading.Thread(target=announce_close, daemon=True).start()
MODE = sys.argv[4]
if MODE == "close":
    print("CLOSING", flush=True)
    try:
        p.close()
    except KeyboardInterrupt as exc:
        print("NOTES", getattr(exc, "__notes__", None), flush=True)
        raise SystemExit(3)
elif MODE == "close_timeout":
    from kclient.errors import FailedToSendMessageError
    try:
        p.close(timeout_ms=1000)
    except FailedToSendMessageError as exc:
        print("LOST", exc.lost_messages, flush=True)
        print("POSSIBLY", exc.possibly_written, flush=True)
print("EXITING", flush=True)
"""


def abandoned_counts(err: str) -> list[int]:
    return [int(n) for n in re.findall(r"(\d+) record\(s\) abandoned, not delivered", err)]


def test_stalled_broker_exit_is_bounded_and_logs_what_was_not_delivered(stalled_broker, topic):
    close_timeout_ms = 2000
    proc = start_script(STALLED, stalled_broker.bootstrap, topic, str(close_timeout_ms), "exit")
    wait_for_line(proc, "READY")
    os.kill(stalled_broker.pid, signal.SIGSTOP)
    proc.stdin.write("go\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    # Bounded: it exits (finish fails a hang) once close.timeout.ms is spent,
    # abandoning what the stopped broker did not take.
    rc, out, err = finish(proc)
    os.kill(stalled_broker.pid, signal.SIGCONT)
    assert rc == 0, err
    assert "EXITING" in out
    assert abandoned_counts(err) == [1000], err
    assert re.search(r"ERROR .*1000 record\(s\) abandoned.*close\.timeout\.ms=2000 at exit", err), err
    assert re.search(r"ERROR .*at exit: 1000 message\(s\) were not delivered: 1000 abandoned at close", err), err
    # After SIGCONT the broker may still append the batch that was in flight
    # (reported as "sent but not acknowledged"), never more.
    assert 1 <= count_records(stalled_broker.port, topic, 1) <= 1 + 200


def test_ctrl_c_during_exit_flush_reports_abandoned_and_exits_nonzero(stalled_broker, topic):
    proc = start_script(STALLED, stalled_broker.bootstrap, topic, "60000", "exit")
    wait_for_line(proc, "READY")
    os.kill(stalled_broker.pid, signal.SIGSTOP)
    proc.stdin.write("go\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    wait_for_line(proc, "EXITING")
    wait_for_line(proc, "IN_CLOSE")  # inside the exit flush (60 s budget)
    proc.send_signal(signal.SIGINT)
    rc, _, err = finish(proc, timeout=20)  # well inside the 60 s flush budget: Ctrl-C ended it
    os.kill(stalled_broker.pid, signal.SIGCONT)
    assert rc == -signal.SIGINT, (rc, err)
    assert abandoned_counts(err) == [1000], err
    assert "interrupted by KeyboardInterrupt" in err, err


def test_ctrl_c_during_close_reports_abandoned(stalled_broker, topic):
    proc = start_script(STALLED, stalled_broker.bootstrap, topic, "60000", "close")
    wait_for_line(proc, "READY")
    os.kill(stalled_broker.pid, signal.SIGSTOP)
    proc.stdin.write("go\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    wait_for_line(proc, "CLOSING")
    wait_for_line(proc, "IN_CLOSE")  # inside close()
    proc.send_signal(signal.SIGINT)
    rc, out, err = finish(proc, timeout=20)
    os.kill(stalled_broker.pid, signal.SIGCONT)
    assert rc == 3, (rc, out, err)
    assert abandoned_counts(err) == [1000], err
    assert "1000 record(s) abandoned" in out  # the note on the KeyboardInterrupt


def test_close_with_timeout_abandons_and_counts(stalled_broker, topic):
    proc = start_script(STALLED, stalled_broker.bootstrap, topic, "60000", "close_timeout")
    wait_for_line(proc, "READY")
    os.kill(stalled_broker.pid, signal.SIGSTOP)
    proc.stdin.write("go\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    rc, out, err = finish(proc, timeout=30)  # inside close.timeout.ms=60000: close's own timeout_ms=1000 ended it
    os.kill(stalled_broker.pid, signal.SIGCONT)
    assert rc == 0, err
    assert re.search(r"^LOST 1000$", out, re.MULTILINE), out
    assert abandoned_counts(err) == [1000], err
    # One batch of 200 was written (max.in.flight 1) and is unanswered: it
    # may be in the log. The other 800 were never written: not sent, not
    # "possibly written".
    assert re.search(r"^POSSIBLY 200$", out, re.MULTILINE), (out, err)
    # Where the other 800 were (the queue, or the batches the send thread
    # took them into) depends on timing; none of them was sent.
    split = re.search(r"(\d+) still queued, (\d+) batched and never sent, (\d+) sent and not acknowledged", err)
    assert split, err
    queued, batched, sent = map(int, split.groups())
    assert (queued + batched, sent) == (800, 200), err


@pytest.mark.unit
def test_close_timeout_ms_property():
    from kclient.config import ProducerConfig

    assert ProducerConfig.from_properties({"metadata.broker.list": "h:1"}).close_timeout_ms == 5000
    assert ProducerConfig.from_properties({"metadata.broker.list": "h:1", "close.timeout.ms": "250"}).close_timeout_ms == 250


# -- sync Producer, SimpleConsumer ---------------------------------------------------

UNCLOSED_OTHERS = """
import logging, sys
logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
from kclient import Producer, ProducerData, SimpleConsumer
from kclient.client.consumer.simple import FetchRequest
p = Producer({"metadata.broker.list": sys.argv[1]})
p.send(ProducerData(sys.argv[2], key=None, messages=[b"one", b"two"]))
c = SimpleConsumer("127.0.0.1", int(sys.argv[3]), 10000, 65536, "exit-test")
print(len(list(c.fetch(FetchRequest(sys.argv[2], 0, 0, 1 << 20)))) + len(list(c.fetch(FetchRequest(sys.argv[2], 1, 0, 1 << 20)))), flush=True)
# neither is closed
"""


def test_unclosed_sync_producer_and_simple_consumer_exit(broker, topic):
    rc, out, err = run_script(UNCLOSED_OTHERS, broker.bootstrap, topic, str(broker.port), timeout=30)
    assert rc == 0, err
    assert out.split() == ["2"]
    assert "Traceback" not in err and "ERROR" not in err, err


# -- ConsumerConnector ---------------------------------------------------------------

UNCLOSED_CONNECTOR = """
import logging, sys, threading
logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
from kclient.client.consumer.group.connector import ConsumerConnector
connector = ConsumerConnector({"group.id": sys.argv[2], "zookeeper.connect": sys.argv[1],
                               "auto.offset.reset": "smallest", "auto.commit.enable": True,
                               "auto.commit.interval.ms": 600000, "consumer.timeout.ms": -1,
                               "zookeeper.session.timeout.ms": 4000, "rebalance.backoff.ms": 200})
[stream] = connector.create_message_streams({sys.argv[3]: 1})[sys.argv[3]]
got = threading.Event()
seen = []

def read():  # an application thread, not daemon, blocked in the stream at exit
    for m in stream:
        seen.append(m)
        if len(seen) == int(sys.argv[4]):
            got.set()
    print("STREAM ENDED", flush=True)

threading.Thread(target=read).start()
assert got.wait(60), len(seen)
print("CONSUMED", len(seen), flush=True)
# no shutdown(): the exit hook must commit, leave the group and end the stream
"""


def test_unclosed_connector_commits_and_leaves_group_at_exit(zookeeper, zk_broker, topic):
    n = 20
    with Producer({"metadata.broker.list": zk_broker.bootstrap}) as producer:
        for i in range(n):
            producer.send(ProducerData(topic, key=str(i).encode(), messages=[b"v%d" % i]))
    group = f"g-{uuid.uuid4().hex[:10]}"
    rc, out, err = run_script(UNCLOSED_CONNECTOR, zookeeper.connect, group, topic, str(n))
    assert rc == 0, err
    assert f"CONSUMED {n}" in out and "STREAM ENDED" in out, (out, err)
    zk = ZkClient(zookeeper.connect)
    zk.start()
    try:
        committed = 0
        for p in zk.get_children(paths.offsets_path(group, topic)) or []:
            data = zk.get(f"{paths.offsets_path(group, topic)}/{p}")
            value = data[0] if isinstance(data, tuple) else data
            committed += int(value)
        assert committed == n
        assert not zk.get_children(f"/consumers/{group}/ids")
    finally:
        zk.close()


# -- garbage collection ------------------------------------------------------------------


def kclient_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kclient-")]


def wait_no_kclient_threads(before: set) -> None:
    wait_for(lambda: not set(kclient_threads()) - before, "the kclient threads to end")


def test_garbage_collected_open_clients_warn_and_are_closed(broker, topic):
    before = set(kclient_threads())
    producer = Producer({"metadata.broker.list": broker.bootstrap, "producer.type": "async", "queue.buffering.max.ms": 60000})
    for i in range(10):
        producer.send(ProducerData(topic, key=None, messages=[b"gc%d" % i]))
    consumer = SimpleConsumer("127.0.0.1", broker.port, 10000, 65536, "gc-test")
    refs = [weakref.ref(producer), weakref.ref(consumer)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del producer, consumer
        gc.collect()
    messages = sorted(str(w.message) for w in caught if issubclass(w.category, ResourceWarning))
    del caught  # the warnings' ``source`` holds the clients
    gc.collect()
    assert [r() for r in refs] == [None, None]  # nothing else keeps them alive
    assert len(messages) == 2, messages
    assert messages[0].startswith("unclosed <Producer async open")
    assert messages[1].startswith("unclosed <SimpleConsumer 127.0.0.1:")
    wait_no_kclient_threads(before)  # closed in the background...
    assert count_records(broker.port, topic, 2) == 10  # ...after flushing


def test_closed_clients_do_not_warn(broker, topic):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Producer({"metadata.broker.list": broker.bootstrap, "producer.type": "async"}) as producer:
            producer.send(ProducerData(topic, key=None, messages=[b"x"]))
        with SimpleConsumer("127.0.0.1", broker.port, 10000, 65536, "gc-test"):
            pass
        del producer
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_client_threads_are_daemon(broker):
    config = {"metadata.broker.list": broker.bootstrap, "producer.type": "async", "client.id": "daemon-check"}
    with Producer(config), SimpleConsumer("127.0.0.1", broker.port, 10000, 65536, "daemon-check"):
        threads = [t for t in kclient_threads() if "daemon-check" in t.name or t.name.startswith("kclient-simple-consumer")]
        assert len(threads) == 2 and all(t.daemon for t in threads)
