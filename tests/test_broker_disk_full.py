"""A full disk on the bundled broker (issue 30, hole 4; KIP-112), with a
real full file system: the broker has two log directories, the second a
1 MiB tmpfs (mounted here; skipped where mounting is not permitted).

- appends to a partition of the full directory answer KAFKA_STORAGE_ERROR
  (56), not UNKNOWN_SERVER_ERROR, and the directory goes offline: Produce
  and Fetch of its partitions answer KAFKA_STORAGE_ERROR from then on;
- the partition of the other directory takes appends and reads as before;
- the broker logs the failure without a traceback, rate-limited (not a line
  per failed append);
- nothing acknowledged is lost: with room again (the tmpfs grown) a
  restart reads back every acknowledged record.

Waits poll with a deadline; nothing asserts on elapsed time.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.raw import SocketClient, fetch_body, produce_body
from helpers.wait import wait_for

from kclient.errors import KAFKA_STORAGE_ERROR
from kclient.protocol.messages import FETCH, PRODUCE
from kclient.protocol.records import build_batch, iter_record_set
from kclient.testing import BrokerProcess

pytestmark = pytest.mark.timeout(180)

TOPIC = "disk"
VALUE = b"x" * 8000


def _mount(cmd: list[str]) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


@pytest.fixture
def small_dir(tmp_path) -> Iterator[Path]:
    """A 1 MiB tmpfs (a real ENOSPC once full)."""
    path = tmp_path / "small"
    path.mkdir()
    failure = _mount(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)])
    if failure is not None:
        pytest.skip(f"cannot mount a small tmpfs for a full log dir (needs root or CAP_SYS_ADMIN): {failure}")
    try:
        yield path
    finally:
        _mount(["umount", "-l", str(path)])


class Client(SocketClient):
    def __init__(self, broker: BrokerProcess) -> None:
        super().__init__(broker.host, broker.port, client_id="disk-full", timeout=20.0)

    def produce(self, partition: int, values: list[bytes]) -> int:
        """Produce (v8, acks=1); returns the partition's error code."""
        batch = build_batch([(None, v, int(time.time() * 1000)) for v in values])
        body = self.request(PRODUCE, 8, produce_body(TOPIC, partition, batch))
        return body["responses"][0]["partition_responses"][0]["error_code"]

    def fetch(self, partition: int, offset: int) -> tuple[int, list[bytes]]:
        body = self.request(FETCH, 11, fetch_body(TOPIC, [(partition, offset)], max_bytes=1 << 20, partition_max_bytes=1 << 20))
        p = body["responses"][0]["partitions"][0]
        values = [r.value for r in iter_record_set(bytes(p["records"] or b"")) if r.offset >= offset] if p["error_code"] == 0 else []
        return p["error_code"], values

    def read_all(self, partition: int) -> list[bytes]:
        out: list[bytes] = []
        while True:
            code, values = self.fetch(partition, len(out))
            assert code == 0, code
            if not values:
                return out
            out += values


def test_full_log_dir_goes_offline_with_storage_errors_and_keeps_what_was_acknowledged(tmp_path, small_dir):
    big = tmp_path / "big"
    props = {
        "log.dirs": f"{big},{small_dir}",
        "num.partitions": 2,
        "log.segment.bytes": 256 * 1024,
        "log.index.size.max.bytes": 64 * 1024,
    }
    with BrokerProcess(properties=props) as proc:
        client = Client(proc)
        assert client.produce(0, [b"first"]) == 0  # creates the topic: p0 in big, p1 in small
        assert (big / f"{TOPIC}-0").is_dir() and (small_dir / f"{TOPIC}-1").is_dir()
        acknowledged: list[bytes] = []
        codes: list[int] = []
        for i in range(400):  # 3.2 MB: far more than 1 MiB holds
            value = b"%06d" % i + VALUE
            code = client.produce(1, [value])
            if code:
                codes.append(code)
                if len(codes) >= 20:
                    break
            elif not codes:
                acknowledged.append(value)
        assert codes and set(codes) == {KAFKA_STORAGE_ERROR}, codes[:5]
        assert acknowledged, "nothing fit before the disk was full"
        # The directory is offline: its partition answers KAFKA_STORAGE_ERROR.
        assert client.fetch(1, 0)[0] == KAFKA_STORAGE_ERROR
        # The other directory goes on.
        assert client.produce(0, [b"after"]) == 0
        assert client.read_all(0) == [b"first", b"after"]
        client.close()
        output = proc.output()
    assert "Traceback" not in output
    failure_lines = [ln for ln in output.splitlines() if f"to {TOPIC}-1 failed" in ln]
    assert 1 <= len(failure_lines) < len(codes), failure_lines  # rate-limited
    assert "offline" in output
    # Room again: everything acknowledged is read back after a restart.
    assert _mount(["mount", "-o", "remount,size=8m", str(small_dir)]) is None
    with BrokerProcess(properties=props) as proc:
        client = Client(proc)
        read = client.read_all(1)
        client.close()
    assert read[: len(acknowledged)] == acknowledged
    assert len(read) == len(acknowledged)  # the failed appends left nothing readable


def test_a_leader_whose_log_dir_fails_hands_leadership_to_an_in_sync_replica(zookeeper, small_dir):
    """Three brokers, broker 1's only log dir the 1 MiB tmpfs: once its
    appends fail, its log dir event notification makes the controller elect
    another in-sync replica; every record acknowledged (acks=all) is there."""
    from helpers.three_brokers import ThreeBrokers

    from kclient.errors import NOT_LEADER_OR_FOLLOWER

    cluster = ThreeBrokers(zookeeper)
    cluster.brokers[1].properties.update({"log.dirs": str(small_dir), "log.segment.bytes": 256 * 1024, "log.index.size.max.bytes": 64 * 1024})
    topic = "disk-failover"
    with cluster:
        cluster.create_topic(topic, partitions=3, replication_factor=3)
        [partition] = [p for p in range(3) if cluster.leader(topic, p) == 1]
        acknowledged: list[bytes] = []
        codes: list[int] = []
        with SocketClient(cluster.brokers[1].host, cluster.brokers[1].port, client_id="disk-full", timeout=20.0) as client:
            for i in range(400):
                value = b"%06d" % i + VALUE
                batch = build_batch([(None, value, int(time.time() * 1000))])
                body = client.request(PRODUCE, 8, produce_body(topic, partition, batch, acks=-1))
                code = body["responses"][0]["partition_responses"][0]["error_code"]
                if code:
                    codes.append(code)
                    break
                acknowledged.append(value)
        assert codes == [KAFKA_STORAGE_ERROR] or codes == [NOT_LEADER_OR_FOLLOWER], codes
        new = cluster.wait_new_leader(topic, 1, partition)
        assert new in (2, 3)
        assert 1 not in cluster.partition(topic, partition, cluster.brokers[new])["isr_nodes"]
        # The new leader's high watermark passes the last acknowledged
        # record once the remaining follower fetched from it.
        values = wait_for(lambda: (lambda v: v if len(v) >= len(acknowledged) else None)(cluster.values(topic, partition)), "the new leader to serve every acknowledged record", timeout=30.0)
        assert values[: len(acknowledged)] == acknowledged
