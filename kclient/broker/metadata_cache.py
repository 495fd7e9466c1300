"""The broker's view of the cluster, as the controller last described it.

Kafka's ``MetadataCache``: every broker keeps the live brokers (with the
endpoint of each listener) and every partition's leader, leader epoch,
replicas and ISR, from the controller's UpdateMetadata requests (Kafka
protocol guide, "UpdateMetadata"; the controller design in Kafka's
"Replication" documentation). Any broker can then answer a Metadata
request for the whole cluster.

UpdateMetadata partition states are upserts. A state whose leader is
`LEADER_DURING_DELETE` (-2, Kafka's ``LeaderAndIsr.LeaderDuringDelete``)
removes the partition; a topic with no partitions left is gone. The live
broker list is replaced by each request.

Trio-thread only (no locks): the handlers and the replica manager run on
the broker's trio loop. `changed` wakes tasks that wait for the cache to
change (CreateTopics waiting for its new partitions' leaders).
"""

from __future__ import annotations

import logging

import attrs
import trio

from kclient.protocol.messages.update_metadata import UpdateMetadataRequest
from kclient.protocol.partition_states import partition_states

log = logging.getLogger("kclient.broker")

#: The leader id that marks a partition being deleted (Kafka's
#: ``LeaderAndIsr.LeaderDuringDelete``).
LEADER_DURING_DELETE = -2
#: No leader (Kafka's ``LeaderAndIsr.NoLeader``).
NO_LEADER = -1


@attrs.frozen
class Endpoint:
    """One listener of a broker: its advertised ``host`` and ``port``, the
    ``listener`` name and the security protocol id (0 PLAINTEXT, 1 SSL,
    2 SASL_PLAINTEXT, 3 SASL_SSL: Kafka's ``SecurityProtocol`` ids)."""

    host: str
    port: int
    listener: str = "PLAINTEXT"
    security_protocol: int = 0


@attrs.frozen
class BrokerNode:
    """A live broker: its id, its endpoints (listener name -> `Endpoint`,
    in registration order) and rack."""

    id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str | None) -> Endpoint | None:
        """The endpoint of ``listener`` (``None``: the first one)."""
        if not self.endpoints:
            return None
        if listener is None:
            return self.endpoints[0]
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        return None


@attrs.frozen
class PartitionMetadata:
    """What the controller said of one partition."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    zk_version: int = 0
    controller_epoch: int = 0


class MetadataCache:
    """Live brokers and partition states (see the module docstring)."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerNode] = {}
        self._topics: dict[str, dict[int, PartitionMetadata]] = {}
        self.controller_id: int = -1
        self.controller_epoch: int = 0
        self._changed = trio.Event()

    # ------------------------------------------------------------ queries

    def topics(self) -> list[str]:
        """Every topic known, sorted."""
        return sorted(self._topics)

    def has_topic(self, topic: str) -> bool:
        """True if the cache holds at least one partition of ``topic``."""
        return topic in self._topics

    def partitions(self, topic: str) -> dict[int, PartitionMetadata]:
        """``{partition: PartitionMetadata}`` of ``topic`` (empty if unknown)."""
        return dict(self._topics.get(topic, {}))

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        """The state of one partition, or ``None``."""
        return self._topics.get(topic, {}).get(partition)

    def all_leaders_known(self, topic: str, partitions: int | None = None) -> bool:
        """True once ``topic`` has ``partitions`` partitions (any number if
        ``None``), each with a leader."""
        parts = self._topics.get(topic)
        if not parts or (partitions is not None and len(parts) < partitions):
            return False
        return all(p.leader >= 0 for p in parts.values())

    def live_broker_ids(self) -> list[int]:
        """Ids of the live brokers, sorted."""
        return sorted(self.brokers)

    async def wait_changed(self) -> None:
        """Return after the next update of the cache."""
        await self._changed.wait()

    # ------------------------------------------------------------ updates

    def update(self, body: UpdateMetadataRequest, version: int) -> None:
        """Apply an UpdateMetadata request (v0-5,
        `kclient.protocol.messages.UPDATE_METADATA`)."""
        self.controller_id = body.controller_id
        self.controller_epoch = max(self.controller_epoch, body.controller_epoch)
        brokers: dict[int, BrokerNode] = {}
        for b in body.live_brokers:
            if version == 0:
                endpoints: tuple[Endpoint, ...] = (Endpoint(b.v0_host, b.v0_port),)
            else:
                endpoints = tuple(Endpoint(ep.host, ep.port, ep.listener or "PLAINTEXT", ep.security_protocol) for ep in b.endpoints)
            brokers[b.id] = BrokerNode(b.id, endpoints, b.rack)
        self.brokers = brokers
        for topic, state in partition_states(body):
            self.upsert(
                PartitionMetadata(
                    topic,
                    state.partition_index,
                    state.leader,
                    state.leader_epoch,
                    tuple(state.isr),
                    tuple(state.replicas),
                    tuple(state.offline_replicas),
                    state.zk_version,
                    state.controller_epoch,
                ),
                notify=False,
            )
        self._notify()

    def upsert(self, meta: PartitionMetadata, *, notify: bool = True) -> None:
        """Set (or, with leader -2, remove) one partition's state."""
        if meta.leader == LEADER_DURING_DELETE:
            parts = self._topics.get(meta.topic)
            if parts is not None:
                parts.pop(meta.partition, None)
                if not parts:
                    del self._topics[meta.topic]
        else:
            self._topics.setdefault(meta.topic, {})[meta.partition] = meta
        if notify:
            self._notify()

    def remove_topic(self, topic: str) -> None:
        """Forget every partition of ``topic``."""
        if self._topics.pop(topic, None) is not None:
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


__all__ = ["BrokerNode", "Endpoint", "LEADER_DURING_DELETE", "MetadataCache", "NO_LEADER", "PartitionMetadata"]
