"""ZooKeeper paths and JSON documents of the Kafka 0.8 layout (pure).

Everything here is bytes and values in, bytes and values out: no kazoo, no
sockets, no clock reads (timestamps are passed in). Source: the
"Distribution" section of the Kafka 0.8 documentation
(https://kafka.apache.org/082/documentation.html: "ZooKeeper Directories", "Broker Node Registry",
"Broker Topic Registry", "Consumer Id Registry", "Consumer Offsets",
"Partition Owner registry"); the documents are written the way Kafka writes them, so Kafka's own tools
read them:

- ``/brokers/ids/<id>`` -> `BrokerRegistration` JSON (ephemeral)
- ``/brokers/topics/<topic>`` -> `TopicAssignment` JSON, partition ->
  replicas (persistent)
- ``/brokers/topics/<topic>/partitions/<p>/state`` -> `PartitionState`
  JSON: leader, isr, epochs (ephemeral, as the 0.8 documentation lists
  it; Kafka's controller writes it persistent)
- ``/controller`` -> `ControllerRegistration` JSON (ephemeral)
- ``/cluster/id`` -> ``{"version":"1","id":"<cluster id>"}`` (persistent)
- ``/consumers/<group>/ids/<consumer_id>`` -> `ConsumerRegistration`
  JSON (ephemeral)
- ``/consumers/<group>/owners/<topic>/<p>`` -> the owning consumer thread id,
  ``<consumer_id>-<n>`` (ephemeral)
- ``/consumers/<group>/offsets/<topic>/<p>`` -> the next offset to consume,
  decimal text (persistent)

`range_assignment` is the "Consumer rebalancing algorithm" of the same
section (steps 1-7) with one fix: the first ``len(partitions) %
len(consumers)`` consumer threads in sorted order take one partition more,
so every partition has exactly one owner (the documented ``N =
partitions / consumers`` alone would leave the remainder unowned; Kafka's
``RangeAssignor`` does the same).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"
CLUSTER_ID_PATH = "/cluster/id"
CONSUMERS_PATH = "/consumers"

#: Subscription patterns of `ConsumerRegistration`: a static
#: ``{topic: streams}`` map, or one regular expression (Whitelist /
#: Blacklist) with its stream count.
STATIC_PATTERN = "static"
WHITELIST_PATTERN = "white_list"
BLACKLIST_PATTERN = "black_list"


def broker_path(broker_id: int) -> str:
    """``/brokers/ids/<broker_id>``."""
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    """``/brokers/topics/<topic>``."""
    return f"{BROKER_TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    """``/brokers/topics/<topic>/partitions``."""
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<topic>/partitions/<partition>``."""
    return f"{topic_partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<topic>/partitions/<partition>/state``."""
    return f"{partition_path(topic, partition)}/state"


def consumer_group_path(group: str) -> str:
    """``/consumers/<group>``."""
    return f"{CONSUMERS_PATH}/{group}"


def consumer_ids_path(group: str) -> str:
    """``/consumers/<group>/ids``."""
    return f"{consumer_group_path(group)}/ids"


def consumer_id_path(group: str, consumer_id: str) -> str:
    """``/consumers/<group>/ids/<consumer_id>``."""
    return f"{consumer_ids_path(group)}/{consumer_id}"


def owners_path(group: str, topic: str) -> str:
    """``/consumers/<group>/owners/<topic>``."""
    return f"{consumer_group_path(group)}/owners/{topic}"


def owner_path(group: str, topic: str, partition: int) -> str:
    """``/consumers/<group>/owners/<topic>/<partition>``."""
    return f"{owners_path(group, topic)}/{int(partition)}"


def offsets_path(group: str, topic: str) -> str:
    """``/consumers/<group>/offsets/<topic>``."""
    return f"{consumer_group_path(group)}/offsets/{topic}"


def offset_path(group: str, topic: str, partition: int) -> str:
    """``/consumers/<group>/offsets/<topic>/<partition>``."""
    return f"{offsets_path(group, topic)}/{int(partition)}"


# ---------------------------------------------------------------- encoding


def _dumps(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=False).encode("utf-8")


def _loads(data: bytes | str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what}: not JSON: {data!r}") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"{what}: expected a JSON object, got {data!r}")
    return doc


@attrs.frozen
class BrokerRegistration:
    """``/brokers/ids/<id>``: where a live broker listens ("Broker Node
    Registry" of the Kafka 0.8 documentation). ``timestamp`` is ms since the epoch; ``jmx_port`` -1 for none;
    ``endpoints`` Kafka's ``["PLAINTEXT://host:port"]``. Written as Kafka
    0.10+ writes it (version 4, with ``listener_security_protocol_map``);
    versions 1-3 documents (no endpoints / no map) are read too."""

    broker_id: int
    host: str
    port: int
    timestamp: int
    jmx_port: int = -1
    endpoints: tuple[str, ...] = ()
    version: int = 4
    #: ``listener_security_protocol_map`` as read (listener name -> protocol);
    #: empty when the document has none (every endpoint is then named by
    #: its protocol, as before KIP-103).
    protocol_map: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)

    def endpoint_for(self, security_protocol: str) -> tuple[str, int] | None:
        """Where a client using ``security_protocol`` connects (KIP-103).

        A Kafka client uses the endpoint of the listener named like its
        ``security.protocol`` (``SASL_SSL://...``), else the first endpoint
        whose listener maps to that protocol in
        ``listener_security_protocol_map``. A PLAINTEXT client falls back to
        the legacy ``host`` / ``port`` fields.

        Args:
            security_protocol: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or
                ``SASL_SSL``.

        Returns:
            ``(host, port)``, or ``None`` when the broker has no such endpoint.
        """
        wanted = str(security_protocol).upper()
        parsed = []
        for endpoint in self.endpoints:
            name, sep, rest = endpoint.partition("://")
            if not sep:
                continue
            host, _, port_text = rest.rpartition(":")
            try:
                parsed.append((name.upper(), host.strip("[]"), int(port_text)))
            except ValueError:
                continue
        for name, host, port in parsed:
            if name == wanted:
                return host, port
        mapping = {str(k).upper(): str(v).upper() for k, v in self.protocol_map.items()}
        for name, host, port in parsed:
            if mapping.get(name) == wanted:
                return host, port
        if wanted == "PLAINTEXT":
            return self.host, self.port
        return None

    @classmethod
    def create(
        cls,
        broker_id: int,
        host: str,
        port: int,
        timestamp: int,
        jmx_port: int = -1,
        listeners: Sequence[tuple[str, str, str, int]] = (),
    ) -> BrokerRegistration:
        """A registration for a broker reached at ``host:port``.

        Args:
            broker_id: The broker's id.
            host: The legacy ``host`` field (the first listener's host).
            port: The legacy ``port`` field.
            timestamp: Registration time, ms since the epoch.
            jmx_port: -1 for none.
            listeners: ``(listener name, security protocol, advertised
                host, advertised port)`` of every listener, written as
                ``endpoints`` and ``listener_security_protocol_map``
                (KIP-103); empty: one PLAINTEXT listener at ``host:port``.

        Returns:
            The registration.
        """
        if not listeners:
            listeners = (("PLAINTEXT", "PLAINTEXT", host, port),)
        endpoints = tuple(f"{name}://{f'[{h}]' if ':' in h else h}:{p}" for name, _, h, p in listeners)
        protocol_map = {name: protocol for name, protocol, _, _ in listeners}
        return cls(broker_id, host, port, timestamp, jmx_port, endpoints, protocol_map=protocol_map)

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "listener_security_protocol_map": dict(self.protocol_map) or {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": list(self.endpoints),
            "jmx_port": self.jmx_port,
            "host": self.host,
            "timestamp": str(self.timestamp),
            "port": self.port,
            "version": self.version,
        }
        return _dumps(doc)

    @classmethod
    def from_json(cls, broker_id: int, data: bytes | str) -> BrokerRegistration:
        """Parse a ``/brokers/ids/<id>`` node's data.

        A broker with only ``endpoints`` (host null, Kafka with non-PLAINTEXT
        listeners first) gets host/port from its first endpoint.

        Args:
            broker_id: The id from the node's path.
            data: The node's JSON content.

        Returns:
            The registration.

        Raises:
            ValueError: A malformed document.
        """
        doc = _loads(data, f"broker {broker_id}")
        endpoints = tuple(doc.get("endpoints") or ())
        host, port = doc.get("host"), doc.get("port", -1)
        if (not host or port in (None, -1)) and endpoints:
            rest = endpoints[0].split("://", 1)[-1]
            host, _, port_text = rest.rpartition(":")
            host = host.strip("[]")
            port = int(port_text)
        if not host:
            raise ValueError(f"broker {broker_id}: no host in {data!r}")
        return cls(
            int(broker_id),
            str(host),
            int(port),
            int(doc.get("timestamp", 0) or 0),
            int(doc.get("jmx_port", -1)),
            endpoints,
            int(doc.get("version", 1)),
            dict(doc.get("listener_security_protocol_map") or {}),
        )


@attrs.frozen
class TopicAssignment:
    """``/brokers/topics/<topic>``: ``{partition: (replica broker ids)}``
    (``{"version":1,"partitions":{"0":[0],"1":[0]}}``)."""

    partitions: Mapping[int, tuple[int, ...]]
    version: int = 1

    def to_json(self) -> bytes:
        return _dumps(
            {"version": self.version, "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())}}
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> TopicAssignment:
        doc = _loads(data, "topic assignment")
        parts = doc.get("partitions")
        if not isinstance(parts, dict):
            raise ValueError(f"topic assignment: no partitions map in {data!r}")
        return cls({int(p): tuple(int(b) for b in r) for p, r in parts.items()}, int(doc.get("version", 1)))

    @property
    def partition_ids(self) -> list[int]:
        """The partition numbers, sorted."""
        return sorted(self.partitions)


@attrs.frozen
class PartitionState:
    """``/brokers/topics/<topic>/partitions/<p>/state``: the partition's
    ``leader`` broker id (-1: none), ``isr`` (in-sync replica ids),
    ``leader_epoch`` and ``controller_epoch``."""

    leader: int
    isr: tuple[int, ...]
    leader_epoch: int = 0
    controller_epoch: int = 1
    version: int = 1

    def to_json(self) -> bytes:
        return _dumps(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": self.version,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> PartitionState:
        doc = _loads(data, "partition state")
        return cls(
            int(doc["leader"]),
            tuple(int(b) for b in doc.get("isr", ())),
            int(doc.get("leader_epoch", 0)),
            int(doc.get("controller_epoch", 0)),
            int(doc.get("version", 1)),
        )


@attrs.frozen
class ControllerRegistration:
    """``/controller``: ``{"version":1,"brokerid":0,"timestamp":"<ms>"}``."""

    broker_id: int
    timestamp: int
    version: int = 1

    def to_json(self) -> bytes:
        return _dumps({"version": self.version, "brokerid": self.broker_id, "timestamp": str(self.timestamp)})

    @classmethod
    def from_json(cls, data: bytes | str) -> ControllerRegistration:
        doc = _loads(data, "controller")
        return cls(int(doc["brokerid"]), int(doc.get("timestamp", 0) or 0), int(doc.get("version", 1)))


def encode_cluster_id(cluster_id: str) -> bytes:
    """``/cluster/id`` content: ``{"version":"1","id":"<cluster id>"}``."""
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | str) -> str:
    """The cluster id from ``/cluster/id`` content.

    Kafka writes ``{"version":"1","id":...}`` there since Kafka 0.10.1
    (KIP-78).

    Args:
        data: The node's JSON content.

    Returns:
        The cluster id.

    Raises:
        ValueError: The content is not a JSON object.
        KeyError: It has no ``id``.
    """
    return str(_loads(data, "cluster id")["id"])


@attrs.frozen
class ConsumerRegistration:
    """``/consumers/<group>/ids/<consumer_id>`` ("Consumer Id Registry" of the Kafka 0.8 documentation):
    ``subscription`` maps a topic (pattern ``static``) or one regular
    expression (pattern ``white_list`` / ``black_list``) to a stream count;
    ``timestamp`` is ms since the epoch (written as a string, as Kafka
    does)."""

    subscription: Mapping[str, int]
    pattern: str = STATIC_PATTERN
    timestamp: int = 0
    version: int = 1

    def to_json(self) -> bytes:
        return _dumps(
            {
                "version": self.version,
                "subscription": dict(self.subscription),
                "pattern": self.pattern,
                "timestamp": str(self.timestamp),
            }
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> ConsumerRegistration:
        doc = _loads(data, "consumer registration")
        sub = doc.get("subscription")
        if not isinstance(sub, dict):
            raise ValueError(f"consumer registration: no subscription map in {data!r}")
        pattern = doc.get("pattern", STATIC_PATTERN)
        if pattern not in (STATIC_PATTERN, WHITELIST_PATTERN, BLACKLIST_PATTERN):
            raise ValueError(f"consumer registration: unknown pattern {pattern!r}")
        return cls(
            {str(k): int(v) for k, v in sub.items()},
            pattern,
            int(doc.get("timestamp", 0) or 0),
            int(doc.get("version", 1)),
        )


def encode_offset(offset: int) -> bytes:
    """``/consumers/<group>/offsets/<topic>/<p>`` content: decimal text."""
    return str(int(offset)).encode("ascii")


def decode_offset(data: bytes | str) -> int:
    """Parse a ``/consumers/<group>/offsets/<topic>/<p>`` node.

    Args:
        data: The node's content, decimal text.

    Returns:
        The offset.

    Raises:
        ValueError: The content is not an integer.
    """
    if isinstance(data, bytes):
        data = data.decode("ascii")
    return int(data.strip())


def consumer_thread_id(consumer_id: str, index: int) -> str:
    """``<consumer_id>-<index>``: the id of one stream of a consumer, the
    unit the rebalancing algorithm assigns partitions to and the content of
    an owner node."""
    return f"{consumer_id}-{index}"


def thread_sort_key(thread_id: str) -> tuple[str, int]:
    """Sort key of a consumer thread id: consumer id, then the stream number
    as an integer (``c-2`` before ``c-10``), as Kafka's ConsumerThreadId
    orders them."""
    consumer, sep, index = thread_id.rpartition("-")
    if sep and index.isdigit():
        return consumer, int(index)
    return thread_id, -1


def range_assignment(partitions: Iterable[int], thread_ids: Iterable[str]) -> dict[str, list[int]]:
    """The range assignment of one topic.

    The "Consumer rebalancing algorithm" of the Kafka 0.8 documentation,
    steps 4-7, with the remainder fix described in the module docstring.
    ``partitions`` are sorted numerically, ``thread_ids`` with
    `thread_sort_key`; with ``N = len(partitions) // len(threads)`` and
    ``extra = len(partitions) % len(threads)`` the thread at sorted position
    ``i`` gets ``N + (1 if i < extra else 0)`` consecutive partitions
    starting at ``i * N + min(i, extra)``. Every partition gets exactly one
    thread; threads beyond the partition count get an empty list.

    Args:
        partitions: The topic's partition ids.
        thread_ids: The consumer thread ids subscribed to the topic (see
            `consumer_thread_id`).

    Returns:
        ``{thread_id: [partition, ...]}`` for every thread.
    """
    parts = sorted({int(p) for p in partitions})
    threads = sorted(set(thread_ids), key=thread_sort_key)
    result: dict[str, list[int]] = {t: [] for t in threads}
    if not threads:
        return result
    per, extra = divmod(len(parts), len(threads))
    for i, thread in enumerate(threads):
        start = i * per + min(i, extra)
        count = per + (1 if i < extra else 0)
        result[thread] = parts[start : start + count]
    return result


def threads_for(consumer_id: str, subscription: Mapping[str, int], topics: Sequence[str] | None = None) -> dict[str, list[str]]:
    """The thread ids of one consumer, by topic.

    Args:
        consumer_id: The consumer's id.
        subscription: ``{topic: streams}`` for a static subscription; for a
            wildcard one, its single stream count applies to each of
            ``topics``.
        topics: The topics matching a wildcard subscription; ``None`` for a
            static one.

    Returns:
        ``{topic: [thread ids]}``.
    """
    if topics is None:
        return {t: [consumer_thread_id(consumer_id, i) for i in range(n)] for t, n in subscription.items()}
    (n,) = subscription.values() if subscription else (0,)
    return {t: [consumer_thread_id(consumer_id, i) for i in range(n)] for t in topics}


__all__ = [
    "BLACKLIST_PATTERN",
    "BROKERS_PATH",
    "BROKER_IDS_PATH",
    "BROKER_TOPICS_PATH",
    "BrokerRegistration",
    "CLUSTER_ID_PATH",
    "CONSUMERS_PATH",
    "CONTROLLER_PATH",
    "ConsumerRegistration",
    "ControllerRegistration",
    "PartitionState",
    "STATIC_PATTERN",
    "TopicAssignment",
    "WHITELIST_PATTERN",
    "broker_path",
    "consumer_group_path",
    "consumer_id_path",
    "consumer_ids_path",
    "consumer_thread_id",
    "decode_cluster_id",
    "decode_offset",
    "encode_cluster_id",
    "encode_offset",
    "offset_path",
    "offsets_path",
    "owner_path",
    "owners_path",
    "partition_path",
    "partition_state_path",
    "range_assignment",
    "thread_sort_key",
    "threads_for",
    "topic_partitions_path",
    "topic_path",
]
