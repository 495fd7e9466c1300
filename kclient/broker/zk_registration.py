"""The bundled broker's ZooKeeper registration (Kafka 0.8 documentation
https://kafka.apache.org/082/documentation.html, "Distribution": "Broker
Node Registry" and "Broker Topic Registry").

With ``zookeeper.connect`` set, `BrokerRegistrar`:

- registers ``/brokers/ids/<broker.id>`` as an ephemeral node with Kafka's
  JSON (host, port, endpoints, jmx_port, timestamp, version); a node held
  by another live session (the same ``broker.id`` used twice) fails the
  start-up once that node has outlived ``zookeeper.session.timeout.ms``
  (a broker killed and restarted quickly waits for its old session to
  expire, as Kafka 0.8 did);
- creates ``/cluster/id`` if absent, and takes the id it holds when its
  ``meta.properties`` was new (every broker of a cluster reports one
  cluster id); an older ``meta.properties`` with another id fails the
  start-up (Kafka's InconsistentClusterIdException);
- registers the topics of its logs that ZooKeeper does not know (logs
  from a standalone run) with itself as their only replica (the
  controller, `kclient.broker.controller`, then elects their leaders);
- after its session is lost and a new one established, registers all of it
  again.

The ZooKeeper calls run in worker threads (``trio.to_thread``); kazoo's
state changes reach the trio loop through ``TrioToken.run_sync_soon``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import trio
from kazoo.client import KazooState

from kclient.broker.meta import store_cluster_id
from kclient.broker.state import BrokerState
from kclient.clock import now_ms
from kclient.errors import ConfigError, ZooKeeperError
from kclient.zk.client import TrioZk, ZkClient
from kclient.zk.paths import (
    CLUSTER_ID_PATH,
    BrokerRegistration,
    TopicAssignment,
    broker_path,
    decode_cluster_id,
    encode_cluster_id,
    topic_path,
)

log = logging.getLogger("kclient.broker")

_RESYNC = object()


class BrokerRegistrar:
    """Keeps one broker's registration in ZooKeeper (see the module
    docstring). ``state`` is the broker's
    `BrokerState`. Use from the broker's
    trio loop: ``await start()``, run `run` as a task, call
    `topic_created` (trio thread) when a topic is created, and
    ``await close()`` at shutdown (ends the session: the ephemeral nodes go
    at once)."""

    def __init__(
        self,
        state: BrokerState,
        connect: str,
        *,
        session_timeout_ms: int,
        connection_timeout_ms: int,
        listeners: Sequence[tuple[str, str, str, int]] = (),
    ) -> None:
        self.state = state
        #: ``(name, security protocol, advertised host, port)`` of each
        #: listener, registered as the broker's endpoints (KIP-103).
        self.listeners = tuple(listeners)
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.client = ZkClient(connect, session_timeout_ms=session_timeout_ms, connection_timeout_ms=connection_timeout_ms)
        self._zk: TrioZk | None = None
        self._send, self._receive = trio.open_memory_channel(math.inf)
        self._lost = False
        self.controller_epoch = 1

    async def start(self) -> None:
        """Connect to ZooKeeper and register the broker and its topics.

        Raises:
            kclient.errors.ZkTimeoutError: No connection within
                ``zookeeper.connection.timeout.ms``.
            kclient.errors.ZooKeeperError: Another live broker holds this
                ``broker.id``.
        """
        self._zk = TrioZk(self.client)
        await trio.to_thread.run_sync(self.client.start)
        try:
            self.client.add_state_listener(self._on_state)
            await self._zk.run(self._register_all)
        except BaseException:
            await trio.to_thread.run_sync(self.client.close)
            raise

    def _on_state(self, state: KazooState) -> None:
        # kazoo's connection thread: never block here.
        if state == KazooState.LOST:
            self._lost = True
            log.warning("ZooKeeper session lost; will register broker %d again on reconnect", self.state.broker_id)
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            assert self._zk is not None
            self._zk.deliver(self._send.send_nowait, _RESYNC)

    def topic_created(self, topic: str, partitions: int) -> None:
        """Queue the registration of a new topic (trio thread; never blocks)."""
        self._send.send_nowait(topic)

    async def run(self) -> None:
        """Register topics as they are created (and everything again after a
        new session) until cancelled. Failures are logged and retried on the
        next event."""
        assert self._zk is not None
        async for item in self._receive:
            try:
                if item is _RESYNC:
                    await self._zk.run(self._register_all)
                else:
                    count = self.state.logs.topics().get(item, 0)
                    await self._zk.run(self._register_topic, item, count)
            except ZooKeeperError as exc:
                log.error("ZooKeeper registration of %s failed: %s", "broker" if item is _RESYNC else f"topic {item}", exc)

    async def close(self) -> None:
        """End the ZooKeeper session (ephemeral nodes disappear)."""
        await trio.to_thread.run_sync(self.client.close)

    # ------------------------------------------------------------ blocking, in worker threads

    def _register_all(self) -> None:
        zk = self.client
        state = self.state
        broker_id = state.broker_id
        now = now_ms()
        zk.create_persistent_if_absent(CLUSTER_ID_PATH, encode_cluster_id(state.cluster_id))
        stored = zk.get(CLUSTER_ID_PATH)
        zk_cluster_id = decode_cluster_id(stored) if stored else state.cluster_id
        if zk_cluster_id != state.cluster_id:
            if not state.cluster_id_is_new:
                raise ConfigError(
                    f"The cluster id {zk_cluster_id} in ZooKeeper does not match the cluster id {state.cluster_id} "
                    f"in {state.log_dirs[0]}/meta.properties (Kafka's InconsistentClusterIdException): "
                    "the log directory belongs to another cluster"
                )
            store_cluster_id(state.log_dirs[0], broker_id, zk_cluster_id)
            state.cluster_id = zk_cluster_id
        state.cluster_id_is_new = False
        registration = BrokerRegistration.create(broker_id, state.advertised_host, state.advertised_port, now, listeners=self.listeners)
        path = broker_path(broker_id)
        deadline = time.monotonic() + self.session_timeout_ms / 1000.0 + 1.0
        while not zk.create_ephemeral_if_absent(path, registration.to_json()):
            owner = zk.owner_session(path)
            if owner == zk.session_id:
                zk.write_ephemeral(path, registration.to_json())
                break
            if time.monotonic() > deadline:
                raise ZooKeeperError(
                    f"A broker is already registered on the path {path}: broker.id={broker_id} is in use by "
                    f"another live broker (its ZooKeeper session outlived zookeeper.session.timeout.ms="
                    f"{self.session_timeout_ms} ms)"
                )
            log.info("%s exists (an older session of this broker?); waiting for it to expire", path)
            time.sleep(0.5)
        log.info("registered broker %d at %s with endpoints %s", broker_id, path, ", ".join(registration.endpoints))
        for topic, count in sorted(state.logs.topics().items()):
            self._register_topic(topic, count)

    def _register_topic(self, topic: str, count: int) -> None:
        """A topic this broker holds logs of, unknown to ZooKeeper (logs
        from a standalone run): registered with this broker as its only
        replica; the controller elects it leader."""
        if count <= 0:
            return
        zk = self.client
        broker_id = self.state.broker_id
        assignment = TopicAssignment(dict.fromkeys(range(count), (broker_id,)))
        if zk.create_persistent_if_absent(topic_path(topic), assignment.to_json()):
            log.info("registered local topic %s (%d partitions on broker %d) in ZooKeeper", topic, count, broker_id)


__all__ = ["BrokerRegistrar"]
