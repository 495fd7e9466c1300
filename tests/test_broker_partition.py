"""The leader's high watermark while an ISR change is being written
(kclient.broker.partition.Partition, no sockets: a real Log on disk).

Once the leader has asked for a replica to join the ISR, the write can
land in ZooKeeper before the leader applies it; from that moment the
controller may elect the joining replica. So the high watermark (what
acks=-1 acknowledges) must not pass the joining replica's log end offset
while the change is in flight (Kafka's "maximal ISR", KIP-497).
"""

from __future__ import annotations

import trio

from kclient.broker.partition import Partition
from kclient.protocol.records.v2 import build_batch
from kclient.storage import Log, LogConfig


def leader(tmp_path, requests: list) -> Partition:
    def request_isr_change(part: Partition, isr: tuple[int, ...]) -> None:
        # What ReplicaManager.request_isr_change does before its writer runs.
        if part.begin_isr_change(isr):
            requests.append(isr)

    part = Partition("t", 0, Log(tmp_path / "t-0", LogConfig()), 1, request_isr_change=request_isr_change, notify=lambda key: None)
    part.make_leader(
        {"leader": 1, "leader_epoch": 0, "isr": [1, 2], "replicas": [1, 2, 3], "zk_version": 0, "controller_epoch": 1},
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
