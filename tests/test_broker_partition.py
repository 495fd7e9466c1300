"""A partition's replication state on one broker, without sockets (a real
Log on disk): the leader's high watermark while an ISR change is being
written, and a follower append in flight while the role changes.

Once the leader has asked for a replica to join the ISR, the write can
land in ZooKeeper before the leader applies it; from that moment the
controller may elect the joining replica. So the high watermark (what
acks=-1 acknowledges) must not pass the joining replica's log end offset
while the change is in flight (Kafka's "maximal ISR", KIP-497).
"""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from kclient.broker.partition import Partition
from kclient.broker.replica_fetcher import ReplicaFetcher
from kclient.protocol.messages.fetch import PartitionData
from kclient.protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from kclient.protocol.records.v2 import build_batch
from kclient.storage import Log, LogConfig
from kclient.storage.append_info import analyze_records

pytestmark = pytest.mark.unit


def leader(tmp_path, requests: list) -> Partition:
    def request_isr_change(part: Partition, isr: tuple[int, ...]) -> None:
        # What ReplicaManager.request_isr_change does before its writer runs.
        if part.begin_isr_change(isr):
            requests.append(isr)

    part = Partition("t", 0, Log(tmp_path / "t-0", LogConfig()), 1, request_isr_change=request_isr_change, notify=lambda key: None)
    part.make_leader(
        LeaderAndIsrPartitionState(leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2, 3], partition_epoch=0, controller_epoch=1),
        now_ms=1000,
    )
    return part


def append(part: Partition, n: int) -> int:
    part.log.append(build_batch([(None, b"v", 1000) for _ in range(n)]))
    return part.log.log_end_offset


def test_the_high_watermark_waits_for_a_replica_joining_the_isr(tmp_path):
    async def main() -> None:
        requests: list = []
        part = leader(tmp_path, requests)
        leo = append(part, 5)
        part.record_follower_fetch(2, leo, 1001)
        assert part.high_watermark == 5
        # Replica 3 catches up: the leader asks for ISR [1, 2, 3].
        part.record_follower_fetch(3, leo, 1002)
        assert requests == [(1, 2, 3)] and part.isr == (1, 2) and part.pending_isr == (1, 2, 3)
        # More records; replica 2 (in the ISR) has them, replica 3 not yet.
        leo = append(part, 4)
        part.record_follower_fetch(2, leo, 1003)
        assert part.high_watermark == 5  # not 9: replica 3 may already be in ZooKeeper's ISR
        part.record_follower_fetch(3, leo, 1004)
        assert part.high_watermark == 9
        # The write lands and is applied.
        part.apply_isr((1, 2, 3), 1)
        part.end_isr_change()
        assert part.isr == (1, 2, 3) and part.pending_isr == () and not part.isr_change_pending

    trio.run(main)


def test_an_isr_change_not_written_stops_holding_the_high_watermark_back(tmp_path):
    async def main() -> None:
        requests: list = []
        part = leader(tmp_path, requests)
        part.record_follower_fetch(3, part.log.log_end_offset, 1001)  # 3 caught up at offset 0
        assert requests == [(1, 2, 3)]
        assert not part.begin_isr_change((1, 2))  # one change at a time
        leo = append(part, 3)
        part.record_follower_fetch(2, leo, 1002)
        assert part.high_watermark == 0
        # The znode moved (the controller wrote it): nothing applied, and
        # the high watermark follows the ISR [1, 2] alone again at once.
        part.end_isr_change()
        assert part.isr == (1, 2) and part.high_watermark == 3

    trio.run(main)


# ---------------------------------------------------------------- a follower append in flight


class _Appends:
    def __init__(self) -> None:
        self.notified: list = []

    def notify(self, key) -> None:
        self.notified.append(key)


def follower(tmp_path) -> tuple[Partition, ReplicaFetcher, _Appends]:
    part = Partition("t", 0, Log(tmp_path / "t-0", LogConfig()), 2, request_isr_change=lambda p, isr: None, notify=lambda key: None)
    part.make_follower(LeaderAndIsrPartitionState(leader=1, leader_epoch=3, isr=[1, 2], replicas=[1, 2], partition_epoch=0, controller_epoch=1))
    appends = _Appends()
    fetcher = ReplicaFetcher(None, 2, 1, ("127.0.0.1", 9), notify=appends.notify)
    fetcher.partitions[part.key] = part  # as add() leaves it once truncated
    return part, fetcher, appends


def fetched(base_offset: int, n: int, high_watermark: int) -> PartitionData:
    batch = build_batch([(None, b"v", 1000) for _ in range(n)], base_offset=base_offset, partition_leader_epoch=3)
    return PartitionData(records=batch, high_watermark=high_watermark)


def test_a_role_change_waits_for_the_follower_append_in_flight(tmp_path):
    """The fetcher holds the partition's replication lock across its
    append: whoever changes the role (ReplicaManager on LeaderAndIsr) gets
    the lock only once the append landed, so a new leader's epoch starts at
    the log end offset that includes it."""
    part, fetcher, appends = follower(tmp_path)
    started, release = threading.Event(), threading.Event()
    real_append = part.log.append_as_follower

    def slow_append(data):
        started.set()
        release.wait(10)
        return real_append(data)

    part.log.append_as_follower = slow_append

    async def main() -> None:
        seen = {}
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetcher._apply, part, fetched(0, 4, 4), 3)
            await trio.to_thread.run_sync(started.wait, 10)

            async def change_role() -> None:
                async with part.replication_lock:
                    seen["leo"] = part.log.log_end_offset

            nursery.start_soon(change_role)
            await trio.testing.wait_all_tasks_blocked()  # change_role has asked for the lock
            assert "leo" not in seen  # still waiting for the append
            release.set()
        assert seen["leo"] == 4 and part.log.log_end_offset == 4
        assert appends.notified == [part.key]

    trio.run(main)


def test_a_fetch_answered_after_the_role_changed_is_not_appended(tmp_path):
    part, fetcher, appends = follower(tmp_path)

    async def main() -> None:
        await fetcher._apply(part, fetched(0, 2, 2), 3)
        assert part.log.log_end_offset == 2
        # It became leader (epoch 4) while the next fetch was out.
        part.make_leader(LeaderAndIsrPartitionState(leader=2, leader_epoch=4, isr=[2], replicas=[1, 2], partition_epoch=1, controller_epoch=1), now_ms=1000)
        await fetcher._apply(part, fetched(2, 3, 5), 3)
        assert part.log.log_end_offset == 2 and part.leader_epoch_start_offset == 2
        # And a follower again in a newer epoch: an answer to the old epoch's
        # request is dropped too (it must truncate first).
        part.make_follower(LeaderAndIsrPartitionState(leader=1, leader_epoch=5, isr=[1, 2], replicas=[1, 2], partition_epoch=2, controller_epoch=1))
        await fetcher._apply(part, fetched(2, 3, 5), 3)
        assert part.log.log_end_offset == 2
        assert appends.notified == [part.key]

    trio.run(main)


def test_append_records_to_leader_moves_the_high_watermark_as_after_leader_append(tmp_path):
    """A leader alone in its ISR has the log move the high watermark within
    the append; with followers in the ISR (or one joining it) it waits for
    them, as `after_leader_append`; a retried idempotent batch moves
    nothing; every append wakes the partition's fetch waiters."""
    woken: list = []
    part = Partition("t", 0, Log(tmp_path / "t-0", LogConfig()), 1, request_isr_change=lambda p, isr: None, notify=woken.append)
    state = LeaderAndIsrPartitionState(leader=1, leader_epoch=3, isr=[1], replicas=[1, 2], partition_epoch=0, controller_epoch=1)
    part.make_leader(state, now_ms=1000)
    woken.clear()
    data = build_batch([(None, b"v", 1000)] * 2, producer_id=9, producer_epoch=0, base_sequence=0)
    result = part.append_records_to_leader(data, 1001, tuple(analyze_records(data)))
    assert (result.base_offset, result.last_offset, result.duplicate) == (0, 1, False)
    assert part.high_watermark == part.log.log_end_offset == 2 and woken == [("t", 0)]
    assert part.log.leader_epoch_cache.entries() == [(3, 0)]
    again = part.append_records_to_leader(data, 1002, None)  # (the general path of the log)
    assert again.duplicate and part.log.log_end_offset == 2 and woken == [("t", 0)]
    part.record_follower_fetch(2, 2, 1003)  # replica 2 caught up: asked to join
    part.begin_isr_change((1, 2))
    part.append_records_to_leader(build_batch([(None, b"w", 1000)]), 1004, None)
    assert part.log.log_end_offset == 3 and part.high_watermark == 2  # waits for the joining replica
    part.apply_isr((1, 2), 1)
    part.end_isr_change()
    part.append_records_to_leader(build_batch([(None, b"x", 1000)]), 1005, None)
    assert part.log.log_end_offset == 4 and part.high_watermark == 2
    part.record_follower_fetch(2, 4, 1006)
    assert part.high_watermark == 4
    part.log.close()
