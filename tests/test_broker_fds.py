"""The broker within a descriptor budget: 2,000 partitions served under
``ulimit -n 1024`` (a real broker process started with that
``RLIMIT_NOFILE``), because segment files and indexes open lazily and idle
descriptors are bounded (kclient.storage.handles; Kafka 2.x's lazy
indexes, KAFKA-7283)."""

from __future__ import annotations

import os
import time

import pytest
from helpers.raw import SocketClient, fetch_body

from kclient.client.admin import AdminClient, NewTopic
from kclient.errors import NONE
from kclient.protocol.messages import FETCH, PRODUCE
from kclient.protocol.records import iter_record_set
from kclient.protocol.records.v2 import build_batch
from kclient.testing import BrokerProcess

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the broker's descriptors in /proc")

LIMIT = 1024
PARTITIONS = 2000
TOPIC = "many"
BIG = 20 * 1024  # above the broker's sendfile threshold: those partitions go out with os.sendfile


def value_of(p: int) -> bytes:
    return (b"big-%d-" % p).ljust(BIG, b"x") if p % 100 == 0 else b"v%d" % p


def broker_files(broker: BrokerProcess) -> tuple[int, list[str]]:
    """The broker's open descriptor count and the names of the files it
    has open under its log directory."""
    names = []
    fds = os.listdir(f"/proc/{broker.pid}/fd")
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{broker.pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(broker.log_dir) + os.sep):
            names.append(os.path.basename(target))
    return len(fds), names


def produce_all(broker: BrokerProcess) -> None:
    now = int(time.time() * 1000)
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 60000,
        "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": p, "records": build_batch([(None, value_of(p), now)])} for p in range(PARTITIONS)]}
        ],
    }
    with SocketClient(broker.host, broker.port, client_id="fds-producer", timeout=120) as c:
        reply = c.request(PRODUCE, 7, body)
    parts = reply["responses"][0]["partition_responses"]
    assert len(parts) == PARTITIONS
    assert [p["index"] for p in parts if p["error_code"] != NONE] == []
    assert {p["base_offset"] for p in parts} == {0}


def read_all(broker: BrokerProcess, version: int) -> dict[int, list[bytes]]:
    with SocketClient(broker.host, broker.port, client_id="fds-consumer", timeout=120) as c:
        reply = c.request(FETCH, version, fetch_body(TOPIC, [(p, 0) for p in range(PARTITIONS)]))
    got = {}
    for part in reply["responses"][0]["partitions"]:
        assert part["error_code"] == NONE
        got[part["partition_index"]] = [r.value for r in iter_record_set(part["records"] or b"")]
    return got


def test_two_thousand_partitions_under_ulimit_1024():
    expected = {p: [value_of(p)] for p in range(PARTITIONS)}
    with BrokerProcess(properties={"num.partitions": 1}, max_open_files=LIMIT, startup_timeout=120) as broker:
        with open(f"/proc/{broker.pid}/limits") as f:
            assert any(line.startswith("Max open files") and f" {LIMIT} " in line for line in f)
        with AdminClient({"bootstrap.servers": broker.bootstrap, "request.timeout.ms": 120000}) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], timeout_ms=120000)
        produce_all(broker)
        assert read_all(broker, 11) == expected  # zero-copy path (v4+)
        assert read_all(broker, 3) == expected  # copying path
        count, names = broker_files(broker)
        assert count < LIMIT * 3 // 4, count
        # only segment data files stay open; no index, checkpoint or snapshot
        assert names and all(n.endswith(".log") for n in names), sorted({n.split(".", 1)[-1] for n in names})

        broker.stop()
        broker.start()  # loads 2,000 logs under the same limit
        assert read_all(broker, 11) == expected
        count, names = broker_files(broker)
        assert count < LIMIT * 3 // 4, count
        assert all(n.endswith(".log") for n in names)
        assert "Too many open files" not in broker.output()
