"""Every example in ``examples/`` (apart from the flights demos, which have
their own tests) runs against a bundled broker of this test session and
checks its own results: each exits 0 and prints its ``OK:`` line.

Each example takes the broker's bootstrap address (and ZooKeeper's, for the
group consumer) from argv, so it is pointed at the test broker here."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from kclient.testing import BrokerProcess

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def broker3():
    """A broker whose auto-created topics get 3 partitions (the custom
    partitioner example routes to partitions 0, 1 and 2+)."""
    with BrokerProcess(properties={"num.partitions": 3}) as proc:
        yield proc


def run(*args: str, env: dict | None = None) -> str:
    done = subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True, timeout=200, env={**os.environ, **(env or {})}, cwd=EXAMPLES.parent)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.parametrize("example", ["partitioner_and_encoder.py", "async_callbacks.py", "trio_api.py", "compression.py", "exactly_once.py"])
def test_example_runs_against_a_test_broker(broker3, example):
    out = run(str(EXAMPLES / example), broker3.bootstrap)
    assert "OK:" in out, out


def test_custom_partitioner_puts_each_region_in_its_partition(broker3):
    out = run(str(EXAMPLES / "partitioner_and_encoder.py"), broker3.bootstrap)
    assert "partition 0 offset 1: eu {'id': 3, 'total': 1.25}" in out
    assert "partition 1 offset 0: us {'id': 2, 'total': 20}" in out


def test_compression_example_shows_every_codec_smaller(broker3):
    out = run(str(EXAMPLES / "compression.py"), broker3.bootstrap)
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        assert f"{codec}:" in out


def test_example_reads_the_address_from_the_environment(broker3):
    out = run(str(EXAMPLES / "trio_api.py"), env={"KCLIENT_BOOTSTRAP": broker3.bootstrap})
    assert "OK: 200 records" in out


def test_group_consumer_example_commits_and_resumes(zookeeper, zk_broker):
    out = run(str(EXAMPLES / "group_consumer.py"), zk_broker.bootstrap, zookeeper.connect)
    assert "OK: 10 records, committed, then only the 2 new ones" in out


@pytest.mark.interop
def test_poll_consumer_example_shares_commits_and_resumes(broker3):
    """examples/poll_consumer.py: two kclient.Consumer members of one group
    handle every record once between them, and a new member resumes after
    their commits."""
    out = run(str(EXAMPLES / "poll_consumer.py"), broker3.bootstrap)
    assert "none twice" in out
    assert "OK: a new member resumed after the commits and read only ['order 12', 'order 13', 'order 14']" in out


def test_peers_example_crosses_records_both_ways(broker3):
    out = run(str(EXAMPLES / "peers.py"), broker3.bootstrap)
    assert "confluent-kafka -> kclient: 100 records" in out
    assert "kclient -> kafka-python: 100 records" in out


def test_pytest_fixture_example_passes_its_own_tests(broker3):
    out = run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLES / "test_app_with_kclient.py"), env={"KCLIENT_BOOTSTRAP": broker3.bootstrap})
    assert "2 passed" in out, out


def test_pytest_fixture_example_starts_its_own_broker_without_an_address():
    env = {k: v for k, v in os.environ.items() if k != "KCLIENT_BOOTSTRAP"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLES / "test_app_with_kclient.py")],
                          check=False, capture_output=True, text=True, timeout=200, env=env, cwd=EXAMPLES.parent)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
