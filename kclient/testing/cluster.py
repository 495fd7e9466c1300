"""A real multi-broker cluster on loopback: `Cluster` runs a ZooKeeper
(or uses a given one) and N bundled brokers (`BrokerProcess`) that share
one ``zookeeper.connect`` with a chroot of their own, so several clusters
can share one ZooKeeper.

Example::

    from kclient.testing import Cluster

    with Cluster(brokers=3) as cluster:
        cluster.create_topic("events", partitions=3, replication_factor=3)
        leader = cluster.leader("events", 0)
        cluster.kill(leader)                       # SIGKILL
        new = cluster.wait_for_leader("events", 0, exclude={leader})
        cluster.start_broker(leader)               # same port, same logs
        cluster.wait_for_isr("events", 0, {1, 2, 3})

Leaders, ISRs and the controller are read from ZooKeeper (the partition
state znodes the controller writes; the Kafka documentation's
"Replication" and "ZooKeeper Directories"), not from a broker.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kclient.client.admin import AdminClient
from kclient.testing.broker import BrokerProcess
from kclient.testing.process import BrokerProcessError, ServerGroup, cleanup_all, wait_for
from kclient.testing.zookeeper import ZooKeeperProcess
from kclient.zk.client import ZkClient

__all__ = ["Cluster", "CLUSTER_DEFAULTS", "metadata_shows_leaders"]

log = logging.getLogger("kclient.testing")


#: Broker properties every `Cluster` broker gets unless ``properties``
#: overrides them: short ZooKeeper sessions and replica timeouts so that a
#: killed broker is noticed within seconds, and topics replicated over the
#: cluster by default.
CLUSTER_DEFAULTS: dict[str, Any] = {
    "zookeeper.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 5000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "replica.socket.timeout.ms": 5000,
}


def metadata_shows_leaders(brokers: Collection[BrokerProcess], topic: str, partitions: Collection[int], leader: int | None = None) -> bool:
    """True if every one of ``brokers`` answers Metadata for ``topic`` with
    exactly ``partitions``, each with a leader (``leader``, if given). Each
    broker learns from the controller on its own queue, so one broker
    knowing says nothing of the others.
    """
    from kclient.errors import KafkaError
    from kclient.tools.common import fetch_metadata

    for broker in brokers:
        try:
            parts = fetch_metadata([(broker.host, broker.port)], [topic], timeout_ms=5000).partitions_for(topic)
        except KafkaError:
            return False
        if {p.partition for p in parts} != set(partitions) or any(p.leader < 0 or leader not in (None, p.leader) for p in parts):
            return False
    return True


class Cluster(ServerGroup):
    """ZooKeeper plus ``brokers`` bundled brokers (ids 1..N) as
    subprocesses on loopback; a context manager.

    Args:
        brokers: How many brokers.
        properties: Broker properties for all brokers, on top of
            `CLUSTER_DEFAULTS` and ``default.replication.factor`` =
            ``min(3, brokers)`` (a value may be a callable taking the broker
            id, for per-broker settings).
        zookeeper: A running `ZooKeeperProcess` (or a ``host:port``
            connect string) to use; None starts one (stopped with the
            cluster). The cluster lives under its own chroot either way.
        chroot: The chroot (default ``kclient-cluster-<random>``).
        startup_timeout: Seconds each broker may take to listen.

    Raises:
        BrokerProcessError: A broker did not start, or the brokers did not
            all register and elect a controller in time.
        ZooKeeperUnavailableError: ZooKeeper was to be started and java or
            its jars are missing.
    """

    def __init__(
        self,
        brokers: int = 3,
        properties: Mapping[str, Any] | None = None,
        zookeeper: ZooKeeperProcess | str | None = None,
        *,
        chroot: str | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, got {brokers}")
        self.size = brokers
        self.properties = dict(properties or {})
        self._given_zookeeper = zookeeper
        self._own_zookeeper: ZooKeeperProcess | None = None
        self.chroot = (chroot or f"kclient-cluster-{uuid.uuid4().hex[:8]}").strip("/")
        self.startup_timeout = startup_timeout
        self.brokers: dict[int, BrokerProcess] = {}
        self._zk: ZkClient | None = None

    # ------------------------------------------------------------ lifecycle

    @property
    def zookeeper_connect(self) -> str:
        """The brokers' ``zookeeper.connect`` (``host:port/chroot``)."""
        zk = self._given_zookeeper if self._given_zookeeper is not None else self._own_zookeeper
        if zk is None:
            raise BrokerProcessError("the cluster is not started")
        base = zk if isinstance(zk, str) else zk.connect
        return f"{base}/{self.chroot}"

    def broker_properties(self, broker_id: int) -> dict[str, Any]:
        """The properties broker ``broker_id`` runs with."""
        props: dict[str, Any] = {**CLUSTER_DEFAULTS, "default.replication.factor": min(3, self.size)}
        for key, value in self.properties.items():
            props[key] = value(broker_id) if callable(value) else value
        props["broker.id"] = broker_id
        props["zookeeper.connect"] = self.zookeeper_connect
        return props

    def start(self) -> Cluster:
        """Start ZooKeeper (unless given) and the brokers (in parallel), then
        wait until every broker is registered and a controller is elected.

        Returns:
            ``self``.

        Raises:
            BrokerProcessError: See the class.
        """
        if self._given_zookeeper is None and self._own_zookeeper is None:
            self._own_zookeeper = ZooKeeperProcess().start()
        try:
            for bid in range(1, self.size + 1):
                if bid not in self.brokers:
                    self.brokers[bid] = BrokerProcess(
                        properties=self.broker_properties(bid), keep_port=True, startup_timeout=self.startup_timeout
                    )
            with ThreadPoolExecutor(max_workers=self.size) as pool:
                for future in [pool.submit(b.start) for b in self.brokers.values() if not b.running]:
                    future.result()
            wait_for(lambda: len(self.registered_brokers()) == self.size or None, self.startup_timeout, "every broker to register")
            self.wait_for_controller()
        except BaseException:
            self.cleanup()
            raise
        return self

    def cleanup(self) -> None:
        """Stop the brokers, delete their data, close the ZooKeeper session
        and stop ZooKeeper if the cluster started it."""
        cleanup_all(list(self.brokers.values()))
        self.brokers.clear()
        if self._zk is not None:
            self._zk.close()
            self._zk = None
        self._stop_own_zookeeper()

    @property
    def bootstrap(self) -> str:
        """``"host:port,host:port,..."`` of the running brokers, for
        ``bootstrap.servers`` / ``metadata.broker.list``."""
        return ",".join(b.bootstrap for _, b in sorted(self.brokers.items()) if b.running)

    def broker(self, broker_id: int) -> BrokerProcess:
        """The `BrokerProcess` of ``broker_id``.

        Raises:
            KeyError: No such broker.
        """
        return self.brokers[broker_id]

    def kill(self, broker_id: int) -> None:
        """SIGKILL broker ``broker_id`` (a crash: its ZooKeeper session
        expires after ``zookeeper.session.timeout.ms``)."""
        log.info("killing broker %d", broker_id)
        self.brokers[broker_id].kill()

    def stop_broker(self, broker_id: int) -> None:
        """Stop broker ``broker_id`` cleanly (SIGTERM)."""
        log.info("stopping broker %d", broker_id)
        self.brokers[broker_id].stop()

    def start_broker(self, broker_id: int) -> BrokerProcess:
        """Start broker ``broker_id`` again on the same port and log
        directory, and wait until it is registered in ZooKeeper again.

        Returns:
            Its `BrokerProcess`.
        """
        broker = self.brokers[broker_id]
        # Its previous registration may outlive a SIGKILL by a session timeout.
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                broker.start()
                break
            except BrokerProcessError:
                if time.monotonic() > deadline:
                    raise
                log.info("broker %d did not start yet (old session still registered?); retrying", broker_id)
                time.sleep(1.0)
        wait_for(lambda: broker_id in self.registered_brokers() or None, self.startup_timeout, f"broker {broker_id} to register")
        return broker

    # ------------------------------------------------------------ ZooKeeper reads

    @property
    def zk(self) -> ZkClient:
        """A `kclient.zk.client.ZkClient` session on the cluster's chroot."""
        if self._zk is None:
            zk = ZkClient(self.zookeeper_connect, session_timeout_ms=10000, connection_timeout_ms=10000)
            zk.start()
            self._zk = zk
        return self._zk

    def registered_brokers(self) -> list[int]:
        """Broker ids under ``/brokers/ids``."""
        try:
            return sorted(int(c) for c in self.zk.get_children("/brokers/ids") if c.isdigit())
        except Exception:  # the chroot does not exist yet
            return []

    def controller_id(self) -> int:
        """The broker id in ``/controller``; -1 when there is none."""
        data = self.zk.get("/controller")
        return int(json.loads(data)["brokerid"]) if data else -1

    def controller_epoch(self) -> int:
        """``/controller_epoch``; 0 before the first election."""
        data = self.zk.get("/controller_epoch")
        return int(data) if data else 0

    def assignment(self, topic: str) -> dict[int, list[int]]:
        """``/brokers/topics/<topic>``: ``{partition: [replica ids]}``
        (empty for an unknown topic)."""
        data = self.zk.get(f"/brokers/topics/{topic}")
        if not data:
            return {}
        return {int(p): list(r) for p, r in json.loads(data)["partitions"].items()}

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """The partition's state znode as a dict (``leader``,
        ``leader_epoch``, ``isr``, ``controller_epoch``, ``version``); None
        when absent."""
        data = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data) if data else None

    def leader(self, topic: str, partition: int = 0) -> int:
        """The partition's leader; -1 for none (or no state yet)."""
        state = self.partition_state(topic, partition)
        return int(state["leader"]) if state else -1

    def isr(self, topic: str, partition: int = 0) -> list[int]:
        """The partition's in-sync replicas (empty for no state yet)."""
        state = self.partition_state(topic, partition)
        return list(state["isr"]) if state else []

    # ------------------------------------------------------------ waiting

    _wait = staticmethod(wait_for)  # the name tests/test_controller.py uses

    def wait_for_controller(self, exclude: Collection[int] = (), timeout: float = 30.0) -> int:
        """Wait until a broker not in ``exclude`` is the controller.

        Returns:
            Its id.

        Raises:
            BrokerProcessError: Not within ``timeout`` seconds.
        """

        def probe() -> int | None:
            cid = self.controller_id()
            return cid if cid >= 0 and cid not in exclude else None

        return wait_for(probe, timeout, f"a controller not in {sorted(exclude)}")

    def wait_for_leader(self, topic: str, partition: int = 0, *, exclude: Collection[int] = (), timeout: float = 30.0) -> int:
        """Wait until the partition has a leader not in ``exclude``.

        Returns:
            The leader's id.

        Raises:
            BrokerProcessError: Not within ``timeout`` seconds.
        """

        def probe() -> int | None:
            leader = self.leader(topic, partition)
            return leader if leader >= 0 and leader not in exclude else None

        return wait_for(probe, timeout, f"{topic}-{partition} to have a leader not in {sorted(exclude)}")

    def wait_for_isr(self, topic: str, partition: int, isr: Collection[int], timeout: float = 30.0) -> list[int]:
        """Wait until the partition's ISR is exactly ``isr`` (any order).

        Returns:
            The ISR as the state znode lists it.

        Raises:
            BrokerProcessError: Not within ``timeout`` seconds.
        """
        want = set(isr)

        def probe() -> list[int] | None:
            current = self.isr(topic, partition)
            return current if set(current) == want else None

        return wait_for(probe, timeout, f"{topic}-{partition} to have ISR {sorted(want)}")

    # ------------------------------------------------------------ topics

    def admin(self) -> AdminClient:
        """A new `kclient.client.admin.AdminClient` on the cluster (close it)."""
        from kclient.client.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        replica_assignment: Mapping[int, Collection[int]] | None = None,
        timeout: float = 30.0,
    ) -> dict[int, list[int]]:
        """Create a topic with CreateTopics (through the admin client) and
        wait until every partition has a leader.

        Args:
            name: The topic.
            partitions: Partition count.
            replication_factor: Replicas per partition (default
                ``min(3, brokers)``).
            config: Topic configs (``{"min.insync.replicas": 2}``).
            replica_assignment: ``{partition: [broker ids]}`` instead of
                the counts.
            timeout: Seconds to wait.

        Returns:
            The replica assignment written to ZooKeeper.

        Raises:
            BrokerResponseError: The broker refused (`TopicAlreadyExistsError`, ...).
        """
        from kclient.client.admin import NewTopic

        rf = min(3, self.size) if replication_factor is None else replication_factor
        topic = NewTopic(
            name,
            -1 if replica_assignment else partitions,
            -1 if replica_assignment else rf,
            replica_assignment=replica_assignment,  # type: ignore[arg-type]
            config={k: str(v) for k, v in (config or {}).items()},
        )
        with self.admin() as admin:
            admin.create_topics([topic], timeout_ms=int(timeout * 1000))
        assignment = self.assignment(name)
        for p in assignment:
            self.wait_for_leader(name, p, timeout=timeout)
        self.wait_for_metadata(name, timeout=timeout)
        return assignment

    def wait_for_metadata(self, topic: str, timeout: float = 30.0) -> None:
        """Wait until every running broker's Metadata shows each partition
        of ``topic`` (as ZooKeeper assigns them) with a leader. The
        controller sends a broker its LeaderAndIsr before the UpdateMetadata
        that carries the same change, so the leaders then serve the topic.

        Raises:
            BrokerProcessError: Not within ``timeout`` seconds.
        """

        def probe() -> bool | None:
            want = set(self.assignment(topic))
            running = [b for b in self.brokers.values() if b.running]
            return True if want and metadata_shows_leaders(running, topic, want) else None

        wait_for(probe, timeout, f"every broker's metadata to show {topic} with leaders")

    def __repr__(self) -> str:
        running = [bid for bid, b in sorted(self.brokers.items()) if b.running]
        return f"<Cluster {self.chroot} brokers={sorted(self.brokers)} running={running}>"
