"""The broker's data plane of replication, driven by hand.

Two real broker processes without ZooKeeper; the test plays the controller
and sends them the LeaderAndIsr and UpdateMetadata requests a controller
sends (Kafka protocol guide). What is checked is what each broker does with
them: the follower copies the leader's log (Fetch with ``replica_id``), the
leader keeps the ISR and the high watermark, ``acks=-1`` waits for the ISR,
``min.insync.replicas`` refuses writes, consumers never read above the high
watermark, and a follower that comes back truncates to the new leader's log
(leader epochs, KIP-101 / KIP-279) before it copies again. The controller
itself (elections, ZooKeeper) is tested in test_controller.py and the whole
cluster in test_cluster_failover.py.
"""

from __future__ import annotations

import functools

import pytest
from helpers.raw import SocketClient, fetch_body, fetch_records, produce_records
from helpers.wait import wait_for

from kclient.errors import (
    FENCED_LEADER_EPOCH,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    STALE_CONTROLLER_EPOCH,
)
from kclient.protocol.messages import FETCH, LEADER_AND_ISR, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH, UPDATE_METADATA
from kclient.testing import BrokerProcess

TOPIC = "replicated"
PROPS = {
    "auto.create.topics.enable": "false",
    "replica.lag.time.max.ms": 1500,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 100,
}


@pytest.fixture(scope="module")
def brokers():
    a = BrokerProcess(properties={**PROPS, "broker.id": 1})
    b = BrokerProcess(properties={**PROPS, "broker.id": 2})
    with a, b:
        yield {1: a, 2: b}


class Controller:
    """Sends what a controller would send; epochs grow with each call."""

    def __init__(self, brokers: dict[int, BrokerProcess]) -> None:
        self.brokers = brokers
        self.controller_epoch = 1

    def client(self, broker_id: int) -> SocketClient:
        b = self.brokers[broker_id]
        return SocketClient(b.host, b.port, client_id="test-controller", timeout=10)

    def state(self, leader: int, leader_epoch: int, isr, replicas=(1, 2)) -> dict:
        return {
            "topic_name": TOPIC,
            "partition_index": 0,
            "controller_epoch": self.controller_epoch,
            "leader": leader,
            "leader_epoch": leader_epoch,
            "isr": list(isr),
            "partition_epoch": 0,
            "zk_version": 0,
            "replicas": list(replicas),
            "offline_replicas": [],
            "is_new": False,
        }

    def send(self, leader: int, leader_epoch: int, isr, *, to=(1, 2), controller_epoch=None) -> dict[int, dict]:
        epoch = self.controller_epoch if controller_epoch is None else controller_epoch
        state = {**self.state(leader, leader_epoch, isr), "controller_epoch": epoch}
        live = [bid for bid, b in self.brokers.items() if b.running]
        leaders = [
            {"broker_id": leader, "host_name": self.brokers[leader].host, "port": self.brokers[leader].port}
        ] if leader in live else []
        answers = {}
        for bid in to:
            if not self.brokers[bid].running:
                continue
            with self.client(bid) as c:
                answers[bid] = c.request(
                    LEADER_AND_ISR,
                    1,
                    {"controller_id": 99, "controller_epoch": epoch, "ungrouped_partition_states": [state], "live_leaders": leaders},
                )
                c.request(
                    UPDATE_METADATA,
                    4,
                    {
                        "controller_id": 99,
                        "controller_epoch": epoch,
                        "ungrouped_partition_states": [state],
                        "live_brokers": [
                            {
                                "id": i,
                                "endpoints": [{"port": self.brokers[i].port, "host": self.brokers[i].host, "listener": "PLAINTEXT", "security_protocol": 0}],
                                "rack": None,
                            }
                            for i in live
                        ],
                    },
                )
        return answers


def produce(broker: BrokerProcess, values: list[bytes], *, acks: int) -> dict:
    """One raw Produce to TOPIC-0, acks=-1 waiting at most 3 s for the ISR."""
    return produce_records(broker, TOPIC, values, acks=acks, timeout_ms=3000, client_timeout=15)


def consume(broker: BrokerProcess, offset: int = 0) -> tuple[int, list[bytes], int]:
    """(error, values, high watermark) read by a consumer from ``offset``."""
    return fetch_records(broker, TOPIC, 0, offset, client_timeout=15)


wait_until = functools.partial(wait_for, timeout=15.0)


def isr_of(broker: BrokerProcess) -> list[int]:
    with SocketClient(broker.host, broker.port, client_id="test-md", timeout=10) as c:
        md = c.request(METADATA, 8, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
                                     "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
    return md["topics"][0]["partitions"][0]["isr_nodes"]


def test_follower_copies_the_leader_and_acks_all_waits_for_it(brokers):
    ctl = Controller(brokers)
    answers = ctl.send(leader=1, leader_epoch=0, isr=(1, 2))
    assert all(a["partition_errors"][0]["error_code"] == NONE for a in answers.values())

    r = produce(brokers[1], [b"a0", b"a1", b"a2"], acks=-1)
    assert r["error_code"] == NONE and r["base_offset"] == 0
    # Answered only once the follower had the records: the high watermark
    # passed them, so a consumer sees them at once.
    error, values, hw = consume(brokers[1])
    assert (error, values, hw) == (NONE, [b"a0", b"a1", b"a2"], 3)

    # The follower refuses consumers (it does not lead) ...
    assert consume(brokers[2])[0] == NOT_LEADER_OR_FOLLOWER
    # ... but holds the records: make it leader (epoch 1) and read them there.
    ctl.send(leader=2, leader_epoch=1, isr=(1, 2))
    assert produce(brokers[1], [b"x"], acks=1)["error_code"] == NOT_LEADER_OR_FOLLOWER
    # Visible once the new leader's high watermark covers them: at once if
    # its last fetch brought high watermark 3, else when broker 1, now its
    # follower, has fetched (Kafka's new leaders behave the same).
    wait_until(lambda: consume(brokers[2])[:2] == (NONE, [b"a0", b"a1", b"a2"]), what="the records on the new leader")
    r = produce(brokers[2], [b"b3"], acks=-1)
    assert (r["error_code"], r["base_offset"]) == (NONE, 3)
    # Broker 1 copied it too. Leader again (epoch 2), it exposes it once the
    # high watermark moves: when broker 2, now its follower, has fetched.
    ctl.send(leader=1, leader_epoch=2, isr=(1, 2))
    wait_until(lambda: consume(brokers[1])[1] == [b"a0", b"a1", b"a2", b"b3"], what="the high watermark to reach 4")
    with SocketClient(brokers[1].host, brokers[1].port, client_id="t", timeout=10) as c:
        ans = c.request(OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": 2, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": 2, "leader_epoch": 0}]}]})
    p = ans["topics"][0]["partitions"][0]
    # Epoch 0 ended where epoch 1 began (offset 3).
    assert (p["error_code"], p["leader_epoch"], p["end_offset"]) == (NONE, 0, 3)


def test_stale_controller_and_stale_leader_epoch_are_refused(brokers):
    ctl = Controller(brokers)
    ctl.controller_epoch = 5
    ctl.send(leader=1, leader_epoch=10, isr=(1, 2))
    old = ctl.send(leader=2, leader_epoch=11, isr=(1, 2), controller_epoch=4)
    assert all(a["error_code"] == STALE_CONTROLLER_EPOCH for a in old.values())
    older_leader = ctl.send(leader=2, leader_epoch=9, isr=(1, 2))
    assert all(a["partition_errors"][0]["error_code"] == STALE_CONTROLLER_EPOCH for a in older_leader.values())
    # A fetch naming an older leader epoch is fenced (KIP-320).
    with SocketClient(brokers[1].host, brokers[1].port, client_id="t", timeout=10) as c:
        body = fetch_body(TOPIC, [(0, 0)])
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = 9
        part = c.request(FETCH, 11, body)["responses"][0]["partitions"][0]
    assert part["error_code"] == FENCED_LEADER_EPOCH


def test_lost_follower_leaves_the_isr_and_min_insync_replicas_refuses_acks_all(brokers):
    ctl = Controller(brokers)
    ctl.controller_epoch = 6
    ctl.send(leader=1, leader_epoch=20, isr=(1, 2))
    before = consume(brokers[1])[1]
    brokers[2].kill()
    try:
        # replica.lag.time.max.ms=1500: the leader drops broker 2 from the ISR.
        wait_until(lambda: isr_of(brokers[1]) == [1], what="ISR to shrink to [1]")
        # acks=-1 with ISR {1} and min.insync.replicas=1: written.
        r = produce(brokers[1], [b"alone"], acks=-1)
        assert r["error_code"] == NONE
    finally:
        brokers[2].start()
    # Broker 2 is back (standalone, it leads what it hosts until told
    # otherwise): the controller makes it a follower again; it truncates to
    # the leader's log, catches up and rejoins the ISR.
    ctl.send(leader=1, leader_epoch=21, isr=(1,))
    wait_until(lambda: isr_of(brokers[1]) == [1, 2], what="broker 2 to rejoin the ISR")
    assert consume(brokers[1])[1] == before + [b"alone"]
    ctl.send(leader=2, leader_epoch=22, isr=(1, 2))
    wait_until(lambda: consume(brokers[2])[1] == before + [b"alone"], what="broker 2 to serve every record")


def test_consumers_stop_at_the_high_watermark_and_an_unclean_leader_truncates_the_old_one():
    props = {**PROPS, "min.insync.replicas": 2, "replica.lag.time.max.ms": 4000}
    a = BrokerProcess(properties={**props, "broker.id": 1})
    b = BrokerProcess(properties={**props, "broker.id": 2})
    with a, b:
        ctl = Controller({1: a, 2: b})
        ctl.send(leader=1, leader_epoch=0, isr=(1, 2))
        assert produce(a, [b"r0", b"r1"], acks=-1)["error_code"] == NONE
        b.kill()
        # Broker 2 is still in the ISR (for replica.lag.time.max.ms): an
        # acks=1 write is in the leader's log but not committed, so consumers
        # stop at the high watermark (2) while the log end offset is 3.
        assert produce(a, [b"uncommitted"], acks=1)["error_code"] == NONE
        error, values, hw = consume(a)
        assert (error, values, hw) == (NONE, [b"r0", b"r1"], 2)
        with SocketClient(a.host, a.port, client_id="t", timeout=10) as c:
            latest = c.request(LIST_OFFSETS, 1, {"replica_id": -1, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "timestamp": -1}]}]})
        assert latest["topics"][0]["partitions"][0]["offset"] == 2
        # Once broker 2 leaves the ISR, min.insync.replicas=2 refuses acks=-1
        # writes and appends nothing.
        wait_until(lambda: isr_of(a) == [1], what="ISR to shrink")
        assert produce(a, [b"refused"], acks=-1)["error_code"] == NOT_ENOUGH_REPLICAS
        assert consume(a)[1] == [b"r0", b"r1", b"uncommitted"]

        # Broker 1 dies; broker 2, which never got "uncommitted", comes back
        # and is made leader (epoch 1: an unclean election, it was out of the ISR).
        a.kill()
        b.start()
        ctl.send(leader=2, leader_epoch=1, isr=(2,), to=(2,))
        assert produce(b, [b"from-2"], acks=1)["error_code"] == NONE
        # Broker 1 returns as a follower: KIP-101 truncation drops the record
        # it alone had (offset 2), then it copies the new leader's log.
        a.start()
        ctl.send(leader=2, leader_epoch=1, isr=(2,))
        wait_until(lambda: isr_of(b) == [1, 2], what="broker 1 to rejoin the ISR")
        ctl.send(leader=1, leader_epoch=2, isr=(1, 2))
        wait_until(lambda: consume(a)[1] == [b"r0", b"r1", b"from-2"], what="broker 1 to serve the new leader's log")
