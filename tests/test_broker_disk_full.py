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
  restart reads back every acknowledged record;
- a follower whose directory fills takes it offline (no crashed fetcher,
  no traceback), the controller drops it from the ISR and the leader goes
  on taking acks=all writes;
- a Fetch whose read fails (a rolled segment file deleted underneath: its
  lazy reopen gets ENOENT) answers KAFKA_STORAGE_ERROR for that partition,
  takes its directory offline and closes every file the broker had open
  there, while a partition of the other directory in the same request is
  read as usual.

Waits poll with a deadline; nothing asserts on elapsed time.
"""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def _small_tmpfs(path: Path) -> Iterator[Path]:
    """Mount a 1 MiB tmpfs at ``path`` (a real ENOSPC once full) for the
    caller's block; skip where mounting is not permitted."""
    path.mkdir()
    failure = _mount(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)])
    if failure is not None:
        pytest.skip(f"cannot mount a small tmpfs for a full log dir (needs root or CAP_SYS_ADMIN): {failure}")
    try:
        yield path
    finally:
        _mount(["umount", "-l", str(path)])


@pytest.fixture
def small_dir(tmp_path) -> Iterator[Path]:
    """A 1 MiB tmpfs (a real ENOSPC once full)."""
    with _small_tmpfs(tmp_path / "small") as path:
        yield path


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


def test_a_follower_whose_log_dir_fills_takes_it_offline_and_leaves_the_isr(zookeeper, small_dir):
    """Three brokers, broker 3's only log dir the 1 MiB tmpfs: once its
    follower appends fail its directory goes offline (the broker and its
    fetcher go on, no traceback), the controller drops it from the ISR, and
    the leader takes every acks=all write; all of them read back."""
    from helpers.three_brokers import ThreeBrokers

    cluster = ThreeBrokers(zookeeper)
    follower = cluster.brokers[3]
    follower.properties.update({"log.dirs": str(small_dir), "log.segment.bytes": 256 * 1024, "log.index.size.max.bytes": 64 * 1024})
    topic = "disk-follower"
    with cluster:
        cluster.create_topic(topic, partitions=3, replication_factor=3)
        partition = next(p for p in range(3) if cluster.leader(topic, p) != 3)
        leader = cluster.brokers[cluster.leader(topic, partition)]
        acknowledged: list[bytes] = []
        with SocketClient(leader.host, leader.port, client_id="disk-full", timeout=20.0) as client:
            for i in range(300):  # 2.4 MB: more than broker 3's 1 MiB holds
                value = b"%06d" % i + VALUE
                batch = build_batch([(None, value, int(time.time() * 1000))])
                body = client.request(PRODUCE, 8, produce_body(topic, partition, batch, acks=-1))
                code = body["responses"][0]["partition_responses"][0]["error_code"]
                assert code == 0, (i, code)
                acknowledged.append(value)
        wait_for(lambda: "offline" in follower.output(), "broker 3's log dir to go offline", timeout=30.0)
        wait_for(
            lambda: 3 not in cluster.partition(topic, partition, leader)["isr_nodes"], "the controller to drop broker 3 from the ISR", timeout=30.0
        )
        assert follower.running
        assert cluster.values(topic, partition) == acknowledged  # none lost, none doubled
        output = follower.output()
    assert "Traceback" not in output
    assert f"follower append to {topic}-{partition} failed" in output


@pytest.fixture(scope="module")
def read_failure(tmp_path_factory) -> Iterator[tuple[BrokerProcess, Path, Path, list[str]]]:
    """One broker, log dirs ``big`` (disk-0) and a 1 MiB tmpfs (disk-1);
    disk-1 has rolled a segment, which then loses its file: the segment
    holds no descriptor once rolled, so its next read reopens it and fails
    (ENOENT). Yields the broker, both dirs and the files the broker had
    open under the tmpfs before."""
    root = tmp_path_factory.mktemp("read-failure")
    with _small_tmpfs(root / "small") as small:
        big = root / "big"
        props = {"log.dirs": f"{big},{small}", "num.partitions": 2, "log.segment.bytes": 20 * 1024}
        with BrokerProcess(properties=props) as proc:
            client = Client(proc)
            assert client.produce(0, [b"first"]) == 0
            assert (big / f"{TOPIC}-0").is_dir() and (small / f"{TOPIC}-1").is_dir()
            for i in range(4):  # 8 KB each: rolls after two
                assert client.produce(1, [b"%06d" % i + VALUE]) == 0
            client.close()
            segments = sorted((small / f"{TOPIC}-1").glob("*.log"))
            assert len(segments) >= 2, segments
            open_before = _open_files_under(proc, small)
            segments[0].unlink()
            yield proc, big, small, open_before


def _open_files_under(proc: BrokerProcess, path: Path) -> list[str]:
    """The files under ``path`` that the broker process has open."""
    fd_dir = Path(f"/proc/{proc.pid}/fd")
    found = []
    for fd in fd_dir.iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue  # closed meanwhile
        if target.startswith(str(path) + "/"):
            found.append(target)
    return found


def _fetch_both(proc: BrokerProcess) -> dict[int, dict]:
    """One Fetch (v11) of disk-0 and disk-1 from offset 0; partition -> answer."""
    with SocketClient(proc.host, proc.port, client_id="disk-read", timeout=20.0) as client:
        body = client.request(FETCH, 11, fetch_body(TOPIC, [(0, 0), (1, 0)], max_bytes=1 << 20, partition_max_bytes=1 << 20))
    return {p["partition_index"]: p for p in body["responses"][0]["partitions"]}


def test_a_failed_read_answers_storage_error_for_its_partition_only(read_failure):
    proc, _, _, _ = read_failure
    parts = _fetch_both(proc)
    assert parts[1]["error_code"] == KAFKA_STORAGE_ERROR
    assert parts[0]["error_code"] == 0
    assert [r.value for r in iter_record_set(bytes(parts[0]["records"]))] == [b"first"]
    # The directory is offline: disk-1 answers KAFKA_STORAGE_ERROR from
    # now on, disk-0 still takes appends.
    client = Client(proc)
    assert client.produce(1, [b"more"]) == KAFKA_STORAGE_ERROR
    assert client.produce(0, [b"after"]) == 0
    assert client.read_all(0) == [b"first", b"after"]
    client.close()
    output = proc.output()
    assert "Traceback" not in output
    assert f"fetch to {TOPIC}-1 failed" in output


def test_an_offline_log_dir_has_no_file_left_open(read_failure):
    proc, big, small, open_before = read_failure
    assert open_before, "the broker had no file open in the tmpfs to begin with"
    assert _fetch_both(proc)[1]["error_code"] == KAFKA_STORAGE_ERROR
    assert _open_files_under(proc, small) == []
    assert _open_files_under(proc, big)  # the other directory's stay open
    assert "Traceback" not in proc.output()
