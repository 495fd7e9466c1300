"""Three real brokers against one real ZooKeeper, for the client failover
tests (tests/test_idempotent_producer.py, tests/test_client_failover.py).

The brokers use a short ZooKeeper session (a SIGKILLed broker's
registration goes within ~2 s, and the controller moves its leaderships)
and fetch often as followers, so failover takes a few seconds. Topics are
created with CreateTopics (replication factor 3) over a raw connection;
logs are read back with raw Fetch requests from the current leader.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from helpers.raw import SocketClient, fetch_body
from helpers.wait import wait_for
from kclient.errors import NOT_LEADER_OR_FOLLOWER
from kclient.protocol.messages import FETCH, METADATA
from kclient.protocol.records import iter_record_set
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import read_header
from kclient.testing import BrokerProcess

BROKER_PROPS = {
    "zookeeper.session.timeout.ms": 2000,
    "replica.lag.time.max.ms": 2000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 100,
    "auto.create.topics.enable": "false",
}


#: `helpers.wait.wait_for` polling every 0.1 s (the failover tests' pace).
wait_until = functools.partial(wait_for, interval=0.1)


class ThreeBrokers:
    """Brokers 1, 2, 3 registered under a fresh chroot of ``zookeeper``."""

    def __init__(self, zookeeper: Any) -> None:
        self.connect = zookeeper.connect_string(f"failover-{uuid.uuid4().hex[:8]}")
        self.brokers = {i: BrokerProcess(properties={**BROKER_PROPS, "zookeeper.connect": self.connect, "broker.id": i}) for i in (1, 2, 3)}

    def __enter__(self) -> ThreeBrokers:
        try:
            for b in self.brokers.values():
                b.start()
            self.wait_all_registered()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        for b in self.brokers.values():
            b.cleanup()

    # ------------------------------------------------------------ state

    def live(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values() if b.running]

    @property
    def bootstrap(self) -> str:
        """Every live broker, ``host:port,...``."""
        return ",".join(b.bootstrap for b in self.live())

    def metadata(self, topics: list[str] | None = None, broker: BrokerProcess | None = None) -> dict:
        """A Metadata v1 answer from ``broker``, or else from some live broker."""
        last: Exception | None = None
        for b in [broker] if broker is not None else self.live():
            try:
                with SocketClient(b.host, b.port, client_id="test-md", timeout=10) as c:
                    return c.request(METADATA, 1, {"topics": [{"name": t} for t in topics] if topics is not None else None})
            except (OSError, ConnectionError) as exc:
                last = exc
        raise AssertionError(f"no live broker answered Metadata: {last}")

    def partition(self, topic: str, partition: int = 0, broker: BrokerProcess | None = None) -> dict:
        md = self.metadata([topic], broker)
        for p in md["topics"][0]["partitions"] or ():
            if p["partition_index"] == partition:
                return p
        return {"leader_id": -1, "isr_nodes": [], "replica_nodes": []}

    def leader(self, topic: str, partition: int = 0) -> int:
        return self.partition(topic, partition)["leader_id"]

    def wait_all_registered(self) -> None:
        """Restart any stopped broker, then wait until Metadata lists all three."""
        for b in self.brokers.values():
            if not b.running:
                b.start()
        wait_until(lambda: len(self.metadata([])["brokers"]) == 3, what="three live brokers in Metadata")

    def create_topic(self, topic: str, partitions: int = 1, replication_factor: int = 3) -> None:
        """Create a topic and wait until every live broker's Metadata shows
        each partition with a leader and a full ISR (the controller tells
        each broker on its own queue, so one broker knowing is not enough)."""
        from kclient import AdminClient, NewTopic

        # The admin client sends CreateTopics to the controller.
        with AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in self.live())}) as admin:
            admin.create_topics([NewTopic(topic, partitions, replication_factor)], timeout_ms=30_000)
        for b in self.live():
            for p in range(partitions):
                wait_until(
                    lambda b=b, p=p: (lambda part: part["leader_id"] >= 0 and len(part["isr_nodes"]) == replication_factor)(self.partition(topic, p, b)),
                    what=f"{topic}-{p} to get a leader and a full ISR in the Metadata of {b.bootstrap}",
                )

    def kill_leader(self, topic: str, partition: int = 0) -> int:
        """SIGKILL the partition's leader; returns its broker id."""
        leader = self.leader(topic, partition)
        assert leader in self.brokers, leader
        self.brokers[leader].kill()
        return leader

    def wait_new_leader(self, topic: str, old: int, partition: int = 0) -> int:
        return wait_until(
            lambda: (lambda leader: leader if leader not in (-1, old) else 0)(self.leader(topic, partition)),
            what=f"a new leader of {topic}-{partition} (not broker {old})",
        )

    # ------------------------------------------------------------ reading

    def _fetch_from_leader(self, topic: str, partition: int) -> bytes:
        # A broker's Metadata can name a new leader before that leader's
        # LeaderAndIsr lands (separate controller queues): retry its refusal.
        return wait_until(lambda: self._try_fetch_from_leader(topic, partition), what=f"the leader of {topic}-{partition} to serve Fetch")[0]

    def _try_fetch_from_leader(self, topic: str, partition: int) -> tuple[bytes] | None:
        leader = self.brokers[self.leader(topic, partition)]
        out = b""
        offset = 0
        with SocketClient(leader.host, leader.port, client_id="test-reader", timeout=15) as c:
            while True:
                part = c.request(FETCH, 4, fetch_body(topic, [(partition, offset)]))["responses"][0]["partitions"][0]
                if part["error_code"] == NOT_LEADER_OR_FOLLOWER:
                    return None
                assert part["error_code"] == 0, part
                data = part["records"] or b""
                last = None
                for info in scan_batches(data):
                    h = read_header(data, info.position)
                    last = h.base_offset + h.last_offset_delta + 1
                    out += bytes(data[info.position : info.position + info.size])
                if last is None or last >= part["high_watermark"]:
                    return (out,)  # true even when empty
                offset = last

    def values(self, topic: str, partition: int = 0) -> list[bytes]:
        """Every value of the partition up to the high watermark, in offset
        order, read from its current leader."""
        return [r.value for r in iter_record_set(self._fetch_from_leader(topic, partition))]

    def batch_headers(self, topic: str, partition: int = 0) -> list:
        """The v2 batch headers of the partition (producer id, epoch, base
        sequence, ...), from its current leader."""
        data = self._fetch_from_leader(topic, partition)
        return [read_header(data, info.position) for info in scan_batches(data)]
