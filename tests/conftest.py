"""Shared fixtures: a real bundled broker in a subprocess, a real ZooKeeper
server, unique topic names; and the guard that keeps the ``unit`` marker
true (a test marked ``unit`` starts no process and opens no network
connection, so ``pytest -m unit`` runs them alone, quickly)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import uuid

import pytest
from helpers.acl_clients import bundled_with_acls, kafka_with_acls
from helpers.examples import QUICK_EXAMPLES, QUICK_PROFILE, quick_run
from helpers.skips import require, skip_summary
from hypothesis import settings

from kclient.testing import BrokerProcess, ZooKeeperProcess, zookeeper_unavailable_reason

settings.register_profile(QUICK_PROFILE, max_examples=QUICK_EXAMPLES)


def pytest_configure(config) -> None:
    """Load the quick Hypothesis profile (`helpers.examples`: fewer examples
    per property test) for ``-m unit`` and with ``KCLIENT_QUICK=1``; other
    runs (``make test``) keep the full counts."""
    if quick_run(config.option.markexpr):
        settings.load_profile(QUICK_PROFILE)


def pytest_sessionstart(session) -> None:
    """Say in one line, before the first test, what this run will skip for
    want of an outside program (Java, kcat, ...) and why."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        line = skip_summary()
        if "not apache_kafka" in (session.config.option.markexpr or ""):
            line += "; deselected on purpose: the Apache Kafka tests (-m 'not apache_kafka'; make test runs them)"
        reporter.write_line(line)


#: Fixtures that start Apache Kafka (tests/conformance/conftest.py).
_KAFKA_FIXTURES = frozenset({"kafka4_target", "kafka39_target", "acl_kafka"})
#: Parameters of the conformance `target` fixture that are Apache Kafka.
_KAFKA_TARGETS = frozenset({"kafka-4", "kafka-3.9"})


def pytest_collection_modifyitems(config, items) -> None:
    """Mark ``apache_kafka`` every test that runs Apache Kafka's JVM (its
    broker, tools or jars) or compares with it: the whole conformance suite
    (its bundled-broker cells are the baseline of the Kafka ones), and the
    ``test_kafka_*`` / ``test_jvm_setup`` modules. ``make test-pure``
    deselects them (`make test` runs them)."""
    marker = pytest.mark.apache_kafka
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = list(callspec.params.values()) if callspec is not None else []
        if (
            "conformance" in item.path.parts
            or item.path.name.startswith("test_kafka_")
            or item.path.name == "test_jvm_setup.py"
            or _KAFKA_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or any(isinstance(v, str) and v in _KAFKA_TARGETS for v in params)
        ):
            item.add_marker(marker)
    _group_for_xdist(config, items)


#: Session fixtures worth starting once per run, not once per xdist worker:
#: a test using one of these runs in that fixture's group. The groups are
#: also the longest, so they are handed out first.
_SHARED_GROUPS = (("kafka", _KAFKA_FIXTURES | {"target", "zk_target", "bundled_target"}), ("spark", frozenset({"spark", "spark_kafka"})))
_FIRST = tuple(name for name, _ in _SHARED_GROUPS)


def _xdist_group(item) -> str:
    if item.get_closest_marker("apache_kafka") is not None:
        return "kafka"
    names = set(getattr(item, "fixturenames", ()))
    for name, fixtures in _SHARED_GROUPS:
        if names & fixtures:
            return name
    return item.path.name


def _group_for_xdist(config, items) -> None:
    """Give every test an ``xdist_group`` for ``pytest -n N --dist
    loadgroup`` (`make test`): the tests of one module run in one worker, so
    its module-scoped broker starts once, and every test of the Apache Kafka
    (``apache_kafka``) or Spark session fixtures runs in one worker, so each
    of those JVMs starts once per run. Under xdist those two long groups
    come first, so that they start at once on their own workers while the
    other modules fill the rest. Without xdist the marker is unused and the
    order is left alone."""
    groups = {}
    for item in items:
        groups[item] = group = _xdist_group(item)
        item.add_marker(pytest.mark.xdist_group(group))
    if getattr(config.option, "dist", "no") != "no":
        items.sort(key=lambda item: _FIRST.index(groups[item]) if groups[item] in _FIRST else len(_FIRST))


#: Fixtures that start a process (a broker, ZooKeeper, Apache Kafka, Spark's
#: JVM): a test marked ``unit`` may not use them (checked when it runs, and
#: statically by tests/test_unit_marker.py).
PROCESS_FIXTURES = frozenset(
    {"broker", "zookeeper", "zk_broker", "spark", "spark_kafka", "target", "zk_target", "bundled_target"} | _KAFKA_FIXTURES
)


def _refuse(what: str):
    def refused(*args, **kwargs):
        raise AssertionError(f"a test marked unit {what}: drop its unit marker (pytest -m unit runs only tests that need no process and no network)")

    return refused


@pytest.fixture(autouse=True)
def unit_tests_stay_in_process(request, monkeypatch):
    """For a test marked ``unit``: fail it if it uses a process fixture
    (`PROCESS_FIXTURES`), connects or binds a socket, or starts a
    subprocess. Other tests are left alone."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    used = PROCESS_FIXTURES.intersection(request.fixturenames)
    assert not used, f"a test marked unit uses {sorted(used)}: drop its unit marker"
    monkeypatch.setattr(socket.socket, "connect", _refuse("connected a socket"))
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse("connected a socket"))
    monkeypatch.setattr(socket.socket, "bind", _refuse("bound a socket"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("started a process"))
    yield


#: Partitions of auto-created topics on the session broker.
BROKER_PARTITIONS = 2


@pytest.fixture(scope="session")
def broker():
    """A `kclient.testing.BrokerProcess` running for the whole test
    session on a free loopback port, with a temporary log directory,
    auto-created topics getting `BROKER_PARTITIONS` partitions."""
    # Every rejected request logged (not rate-limited): tests look for their own line.
    with BrokerProcess(properties={"num.partitions": BROKER_PARTITIONS, "connection.rejection.log.interval.ms": 0}) as proc:
        yield proc


@pytest.fixture
def topic(request) -> str:
    """A topic name no other test uses: the test's name (legal characters
    only) plus a random suffix."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:80].strip("-") or "t"
    return f"{base}-{uuid.uuid4().hex[:8]}"


def require_zookeeper() -> None:
    """Skip the calling test when java or ZooKeeper is missing, with the
    reason; in CI (the ``CI`` environment variable is set, as ``.ci/run``
    does after installing the ``zookeeper`` package) fail instead, so a
    broken CI image cannot silently skip the ZooKeeper tests."""
    require(zookeeper_unavailable_reason(), name="ZooKeeper", needs="needs a real ZooKeeper")


@pytest.fixture(scope="session")
def zookeeper():
    """A `kclient.testing.ZooKeeperProcess` (a real ZooKeeper server)
    for the whole session; skipped without java/ZooKeeper unless ``CI`` is
    set (then the tests fail)."""
    require_zookeeper()
    with ZooKeeperProcess() as zk:
        yield zk


@pytest.fixture(scope="session")
def zk_broker(zookeeper):
    """A bundled broker registered in the session ZooKeeper, auto-created
    topics getting 5 partitions."""
    with BrokerProcess(properties={"zookeeper.connect": zookeeper.connect, "num.partitions": 5}) as proc:
        yield proc


@pytest.fixture(scope="session")
def acl_bundled(zookeeper):
    """A bundled broker with Kafka's ZooKeeper-mode ACL authorizer
    (`helpers.acl_clients.bundled_with_acls`), shared by the ACL client
    tests of a worker: each names its own resources (a unique prefix)."""
    with bundled_with_acls(zookeeper) as proc:
        yield proc


@pytest.fixture(scope="session")
def acl_kafka():
    """Apache Kafka 4.x with ``StandardAuthorizer``
    (`helpers.acl_clients.kafka_with_acls`), started once per run (the
    Apache Kafka tests share one worker)."""
    with kafka_with_acls() as proc:
        yield proc


def spark_unavailable_reason() -> str | None:
    """Why the Spark tests cannot run here (PySpark, PyArrow or Java
    missing), or None."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        return f"pyspark/pyarrow not installed ({exc}); install kclient[spark]"
    from kclient.testing import java_unavailable_reason

    return java_unavailable_reason()


def require_spark() -> None:
    """Skip the calling test without PySpark or Java, with the reason; in CI
    (``CI`` set, as ``.ci/run`` does after installing Java) fail instead."""
    require(spark_unavailable_reason(), name="Spark", needs="needs Spark")


#: Why Spark's own Kafka connector is not on the session's class path, or
#: None when it is (set by the `spark` fixture).
_spark_kafka_unavailable: str | None = "the spark fixture has not started"


@pytest.fixture(scope="session")
def spark():
    """The one `local[2]` SparkSession of the test session, the `kclient`
    source registered, with Spark's own Kafka connector
    (``spark-sql-kafka-0-10``, the ``spark-kafka`` jar set of
    `kclient.testing.maven`) on its class path so that ``format("kafka")``
    runs beside ``format("kclient")``.

    Spark reads ``spark.jars`` only when its JVM starts, so every test uses
    this session rather than making (and stopping) its own. Skipped without
    PySpark or Java unless ``CI`` is set."""
    global _spark_kafka_unavailable
    require_spark()
    import kclient.spark
    from kclient.testing.maven import JarFetchError, jars

    try:
        connector = jars("spark-kafka")
        _spark_kafka_unavailable = None
    except JarFetchError as exc:
        connector = []
        _spark_kafka_unavailable = f"its jars could not be fetched ({str(exc).splitlines()[0] if str(exc) else exc!r})"
    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"}
    sigint = signal.getsignal(signal.SIGINT)
    session = kclient.spark.session("kclient-tests", conf=conf, jars=connector)
    # The SparkContext replaced SIGINT's handler with one that cancels its
    # jobs; the tests that interrupt themselves (Ctrl-C paths) and run in
    # the same process after it expect Python's.
    signal.signal(signal.SIGINT, sigint)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def spark_kafka(spark):
    """The session `spark`, for a test that also runs Spark's own
    ``format("kafka")``: skipped (failed in CI) when its jars are missing."""
    require(_spark_kafka_unavailable, name="Spark's Kafka connector", needs="needs spark-sql-kafka-0-10")
    return spark
