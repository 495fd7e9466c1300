"""The Python snippets of the README and of the docs' home page, quickstart
and guides run, so they cannot go stale: each ``python`` code block is
extracted and executed in a fresh interpreter.

Snippets that start their own broker (``BrokerProcess``,
``ZooKeeperProcess``) run as written. Snippets written against a broker at
``127.0.0.1:9092`` and ZooKeeper at ``127.0.0.1:2181`` get the addresses of
this session's test broker and ZooKeeper instead, with records already in
topic ``events``. The Spark snippet runs when PySpark and Java are there
(in CI always), on a few flights produced first, and its output topic is
read back."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_spark

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "README.md", ROOT / "docs" / "index.md", ROOT / "docs" / "quickstart.md", *sorted((ROOT / "docs" / "guides").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)

pytestmark = pytest.mark.timeout(300)


def python_blocks() -> list[tuple[str, str]]:
    """``(file:line, code)`` of every python block of `SOURCES`."""
    found = []
    for path in SOURCES:
        text = path.read_text()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{path.relative_to(ROOT).as_posix()}:{line}", m[1]))
    return found


BLOCKS = python_blocks()


def run_snippet(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def point_at(code: str, broker, zookeeper) -> str:
    """The snippet with the documented addresses replaced by the test servers'."""
    return (code.replace("127.0.0.1:9092", broker.bootstrap)
            .replace('"127.0.0.1", 9092', f'"{broker.host}", {broker.port}')
            .replace("127.0.0.1:2181", zookeeper.connect))


@pytest.fixture(scope="module")
def events(zk_broker):
    """Records in topic ``events`` (partition 0 among others) on the ZooKeeper-registered session broker."""
    from kclient import Producer, ProducerData

    with Producer({"bootstrap.servers": zk_broker.bootstrap}) as producer:
        producer.send([ProducerData("events", b"user-%d" % i, [b"event %d" % i], partition=i % 2) for i in range(6)])
    return "events"


@pytest.fixture(scope="module")
def acl_broker():
    """A broker with kclient's ACL authorizer and the snippets' principal
    (``User:ANONYMOUS``, plaintext) a super user: the ACL snippets manage
    ACLs there (the session broker has no authorizer and answers
    SECURITY_DISABLED)."""
    from kclient.testing import BrokerProcess

    with BrokerProcess(properties={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}) as proc:
        yield proc


@pytest.mark.unit
def test_the_snippets_are_found():
    where = [w for w, _ in BLOCKS]
    assert sum(w.startswith("README.md") for w in where) >= 3
    assert sum(w.startswith("docs/quickstart.md") for w in where) == 2
    assert any(w.startswith("docs/guides/producer.md") for w in where)


@pytest.mark.parametrize("where,code", [b for b in BLOCKS if "kclient.spark" not in b[1]], ids=[w for w, c in BLOCKS if "kclient.spark" not in c])
def test_snippet_runs(where, code, zookeeper, zk_broker, events, request):
    broker = request.getfixturevalue("acl_broker") if "kclient.acl" in code else zk_broker
    done = run_snippet(point_at(code, broker, zookeeper))
    assert done.returncode == 0, f"{where} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if "ConsumerConnector(config)" in code and "greetings" in code:
        # The group snippets print what was produced, then stop on consumer.timeout.ms.
        assert sorted(line.split()[-1] for line in done.stdout.splitlines() if line.startswith("greetings")) == ["hello", "hey", "hi"]
        assert done.stdout.rstrip().endswith("no more messages")
    elif "Consumer(config) as consumer" in code and "greetings" in code:
        # The poll consumer snippet reads the three records it produced.
        assert sorted(line.split()[-1] for line in done.stdout.splitlines()) == ["b'bonjour'", "b'hello'", "b'hi'"], done.stdout
    elif "SimpleConsumer(broker.host" in code:
        assert "b'hello'" in done.stdout and "b'hi'" in done.stdout, done.stdout
    elif "SimpleConsumer(\"127.0.0.1\", 9092" in code and "EARLIEST_TIME" in code:
        assert "b'event 0'" in done.stdout, done.stdout
    elif "Consumer.create(config)" in code and "bootstrap.servers" in code:
        # The broker-coordinated group snippet reads the "events" records.
        assert "b'event 0'" in done.stdout and "b'event 5'" in done.stdout, done.stdout
    elif "statistics_callback=report" in code:
        assert "messages fetched, 0 behind" in done.stdout, done.stdout


@pytest.mark.unit
def test_readme_group_snippet_cannot_block_forever():
    """The ConsumerConnector snippet ends by itself: it sets consumer.timeout.ms and produces its data."""
    [code] = [c for w, c in BLOCKS if w.startswith("README.md") and "ConsumerConnector(config)" in c]
    assert re.search(r'"consumer\.timeout\.ms":\s*\d+', code) and "producer.send" in code


@pytest.mark.unit
def test_readme_states_the_prerequisites_next_to_the_commands():
    text = (ROOT / "README.md").read_text()
    block = text[text.index("make demo") - 200 : text.index("make test") + 200]
    # Java 17+ is the one prerequisite beyond python3 and make: ZooKeeper and
    # Kafka come from Maven Central, and no Debian zookeeper package is needed.
    assert "Java 17+" in block and "python3" in block and "make" in block
    assert "zookeeper package" not in block


@pytest.mark.parametrize("where,code", [b for b in BLOCKS if "kclient.spark" in b[1]], ids=[w for w, c in BLOCKS if "kclient.spark" in c])
def test_spark_snippet_runs(where, code, broker, topic):
    require_spark()
    from kclient import FetchRequest, Producer, ProducerData, SimpleConsumer

    flights = [{"carrier": "UA", "dep_delay": 10.0}, {"carrier": "UA", "dep_delay": 20.0}, {"carrier": "AA", "dep_delay": -3.0}]
    source, sink = f"{topic}-flights", f"{topic}-by-carrier"
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        producer.send([ProducerData(source, None, [json.dumps(f).encode() for f in flights])])
    code = code.replace('"127.0.0.1:9092"', repr(broker.bootstrap)).replace('"subscribe", "flights"', f'"subscribe", {source!r}')
    code = code.replace('"flights_by_carrier"', repr(sink))
    done = run_snippet(code + "\nspark.stop()\n", timeout=280)
    assert done.returncode == 0, f"{where} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    rows = {}
    with SimpleConsumer(broker.host, broker.port, so_timeout_ms=10_000) as consumer:
        for p in consumer.partitions_for(sink):
            for m in consumer.fetch(FetchRequest(sink, p.partition, 0, 1 << 20)):
                rows[m.message.key.decode()] = json.loads(m.message.payload)
    assert rows["UA"]["flights"] == 2 and rows["UA"]["mean_delay"] == 15.0 and rows["AA"]["flights"] == 1


def test_readme_api_table_is_what_the_broker_answers(zk_broker):
    """The README's "Supported Kafka APIs" table lists exactly the APIs and
    version ranges a running bundled broker advertises in ApiVersions."""
    import trio

    from kclient.net.connection import BrokerConnection
    from kclient.protocol.messages import API_VERSIONS

    section = (ROOT / "README.md").read_text().split("## Supported Kafka APIs", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for name, key, versions in re.findall(r"^\| (\w+) \((\d+)\) \| ([\d-]+) \|", section, re.MULTILINE):
        lo, _, hi = versions.partition("-")
        documented[int(key)] = (name, int(lo), int(hi or lo))

    async def ask():
        async with trio.open_nursery() as nursery:
            conn = await BrokerConnection.connect(nursery, zk_broker.host, zk_broker.port, client_id="readme")
            try:
                return await conn.request(API_VERSIONS, None, version=0)
            finally:
                await conn.aclose()
                nursery.cancel_scope.cancel()

    answer = trio.run(ask)
    advertised = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
    assert {k: (lo, hi) for k, (_, lo, hi) in documented.items()} == advertised
