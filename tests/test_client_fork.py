"""Clients inherited across ``fork()`` (issue 30, hole 5), against the
bundled broker: a client created before ``os.fork`` (or before a
``multiprocessing`` fork-start-method worker) fails in the child at once
with `ClientForkedError` instead of hanging on the parent's loop thread;
``close()`` there returns at once; the child's exit (through kclient's
exit hook, which once tried to close the parent's clients and waited
forever) does not wait on the parent's threads; the parent's clients go on
working.

Each scenario runs in a fresh interpreter (the test process itself is
never forked); the parent there waits for its child with a generous
deadline, a hang detector, not a speed assertion.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(180)

CHILD_DEADLINE = 60.0  # seconds: a child still running then is hung

_PRELUDE = """
import json, os, sys, time
from kclient import AdminClient, Consumer, Producer, ProducerData, SimpleConsumer, FetchRequest

BOOT, TOPIC, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = BOOT.rsplit(":", 1)

def attempt(fn):
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__
    return "returned"

def parent_works(producer, admin):
    producer.send(ProducerData(TOPIC, None, [b"parent-after"], partition=0))
    producer.flush()
    return TOPIC in admin.list_topics()

producer = Producer({"bootstrap.servers": BOOT, "request.required.acks": 1, "producer.type": MODE})
producer.send(ProducerData(TOPIC, None, [b"parent-before"], partition=0))
producer.flush()
admin = AdminClient({"bootstrap.servers": BOOT})
consumer = Consumer({"bootstrap.servers": BOOT})
simple = SimpleConsumer(host, int(port), so_timeout_ms=10000, buffer_size=1 << 16, client_id="fork")
"""

_FORK = """
read, write = os.pipe()
pid = os.fork()
if pid == 0:  # the child: use the inherited clients, then exit normally
    os.close(read)
    result = {}
    if SCENARIO == "use":
        result = {
            "send": attempt(lambda: producer.send(ProducerData(TOPIC, None, [b"child"], partition=0))),
            "flush": attempt(producer.flush),
            "admin": attempt(admin.list_topics),
            "assign": attempt(lambda: consumer.assign([(TOPIC, 0)])),
            "fetch": attempt(lambda: list(simple.fetch(FetchRequest(TOPIC, 0, 0, 1 << 16)))),
            "close": [attempt(c.close) for c in (producer, admin, consumer, simple)],
        }
    os.write(write, json.dumps(result).encode())
    os.close(write)
    sys.exit(0)  # a normal exit: kclient's exit hook runs
os.close(write)
deadline = time.monotonic() + DEADLINE
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        status = "hung"
        break
    time.sleep(0.05)  # polling a child process for its exit
with os.fdopen(read) as f:
    child = f.read()
print(json.dumps({"status": status, "child": json.loads(child or "null"), "parent": parent_works(producer, admin)}))
for c in (producer, admin, consumer, simple):
    c.close()
"""

_MULTIPROCESSING = """
import multiprocessing

def worker(queue):
    queue.put({
        "send": attempt(lambda: producer.send(ProducerData(TOPIC, None, [b"worker"], partition=0))),
        "poll": attempt(lambda: consumer.poll(100)),
    })

if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    process = ctx.Process(target=worker, args=(queue,))
    process.start()
    process.join(DEADLINE)
    hung = process.is_alive()
    if hung:
        process.kill()
        process.join()
    result = queue.get(timeout=DEADLINE) if not hung else None
    print(json.dumps({"status": "hung" if hung else process.exitcode, "child": result, "parent": parent_works(producer, admin)}))
    for c in (producer, admin, consumer, simple):
        c.close()
"""


def _run(broker, topic: str, mode: str, body: str, scenario: str = "", cwd=None) -> dict:
    script = _PRELUDE + f"SCENARIO = {scenario!r}\nDEADLINE = {CHILD_DEADLINE!r}\n" + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", script, broker.bootstrap, topic, mode],
        capture_output=True,
        text=True,
        timeout=CHILD_DEADLINE * 2 + 30,
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_inherited_clients_fail_at_once_in_the_child(broker, topic, mode, tmp_path):
    out = _run(broker, topic, mode, _FORK, "use", cwd=tmp_path)
    assert out["status"] == 0, out  # exited, and normally (0 is waitpid's status of exit(0))
    child = out["child"]
    assert {k: child[k] for k in ("send", "flush", "admin", "assign", "fetch")} == dict.fromkeys(("send", "flush", "admin", "assign", "fetch"), "ClientForkedError")
    assert child["close"] == ["returned"] * 4
    assert out["parent"] is True


def test_the_childs_exit_does_not_wait_on_the_parents_clients(broker, topic, tmp_path):
    """The child leaves the clients alone and just exits: kclient's exit
    hook must not try to close the parent's clients there."""
    out = _run(broker, topic, "async", _FORK, "exit", cwd=tmp_path)
    assert out["status"] == 0, out
    assert out["parent"] is True


def test_multiprocessing_fork_worker(broker, topic, tmp_path):
    out = _run(broker, topic, "async", _MULTIPROCESSING, cwd=tmp_path)
    assert out["status"] == 0, out
    assert out["child"] == {"send": "ClientForkedError", "poll": "ClientForkedError"}
    assert out["parent"] is True


def test_the_error_says_to_create_clients_after_fork():
    from kclient.errors import ClientForkedError, IllegalStateError
    from kclient.sync import forked_error

    error = forked_error("<Producer sync>")
    assert isinstance(error, ClientForkedError) and isinstance(error, IllegalStateError)
    assert "Create kclient clients after fork" in str(error)
