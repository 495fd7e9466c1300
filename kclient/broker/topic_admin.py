"""Creating and deleting topics: auto-creation, CreateTopics (KIP-4),
DeleteTopics and CreatePartitions (KIP-195).

In a ZooKeeper cluster any broker creates a topic the way Kafka's
ZooKeeper-era ``AdminZkClient`` does: it writes the topic's configs to
``/config/topics/<topic>`` (``{"version":1,"config":{...}}``) and its
replica assignment to ``/brokers/topics/<topic>``; the controller
(`kclient.broker.controller`) notices the new topic, elects the leaders and
tells the brokers. Deleting writes ``/admin/delete_topics/<topic>``. The
CreateTopics / DeleteTopics answers wait (up to the request's
``timeout_ms``) until this broker's metadata shows the change, as Kafka's
delayed operations do.

A standalone broker (no ``zookeeper.connect``) creates the logs and leads
them itself at once, so an auto-creating Produce succeeds in the same
request.

CreatePartitions adds partitions as ZooKeeper-era Kafka's
``AdminZkClient.addPartitions`` does: the active controller assigns the new
partitions (continuing the existing numbering and replication factor, or
as the request assigns them), rewrites ``/brokers/topics/<topic>`` with the
old and new partitions and creates the new partitions' states; the answer
waits until this broker's metadata shows them with leaders. A standalone
broker creates and leads the new logs itself.

Replicas are assigned as Kafka's ``AdminUtils.assignReplicasToBrokers``
does without racks: partition ``p``'s first replica is broker
``(p + start) mod n`` of the sorted live brokers and the followers follow
it at a distance that shifts by one every ``n`` partitions, so leaders and
followers spread evenly.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import trio

from kclient.broker.metadata_cache import MetadataCache
from kclient.broker.replica_manager import ReplicaManager
from kclient.broker.state import TopicOverrides
from kclient.broker.topic_configs import validate_topic_configs
from kclient.broker.zk_topics import (
    DELETE_TOPICS_PATH,
    TOPIC_CONFIG_PATH,
    encode_topic_config,
    topic_config_path,
)
from kclient.errors import (
    INVALID_CONFIG,
    INVALID_PARTITIONS,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION,
    LEADER_NOT_AVAILABLE,
    NONE,
    NOT_CONTROLLER,
    REQUEST_TIMED_OUT,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_OR_PARTITION,
    InvalidTopicError,
    TopicAlreadyExistsError,
    error_for_code,
)
from kclient.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kclient.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kclient.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kclient.protocol.messages.stop_replica import (
    StopReplicaPartitionV0,
    StopReplicaRequest,
)
from kclient.storage import LogManager, validate_topic_name
from kclient.zk.paths import BROKER_IDS_PATH, TopicAssignment, topic_path

if TYPE_CHECKING:
    from kclient.broker.controller import Controller
    from kclient.config import BrokerConfig
    from kclient.zk.client import ZkClient

log = logging.getLogger("kclient.broker")


class _TopicResult(Protocol):
    """A per-topic result of CreateTopics / CreatePartitions."""

    name: str
    error_code: int
    error_message: str | None

#: Topic configs CreateTopics accepts (Kafka's topic-level names).
TOPIC_CONFIGS = frozenset(
    {
        "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
        "flush.ms", "index.interval.bytes", "max.message.bytes", "message.format.version",
        "message.timestamp.difference.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "retention.bytes", "retention.ms",
        "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
        "unclean.leader.election.enable", "message.downconversion.enable", "max.compaction.lag.ms",
    }
)


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    shift: int | None = None,
    first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Kafka's rack-unaware replica assignment (see the module docstring).

    Args:
        brokers: Live broker ids.
        partitions: Number of partitions (>= 1).
        replication_factor: Replicas per partition (1 .. len(brokers)).
        start_index: Where the first partition's leader is taken (default
            random, as Kafka).
        shift: The initial follower shift (default random).
        first_partition: The id of the first partition to assign (partitions
            added to an existing topic, KIP-195, continue its numbering).

    Returns:
        ``{partition: (replica ids...)}``, the first replica the preferred leader.

    Raises:
        ValueError: Bad counts.
    """
    ids = sorted(brokers)
    n = len(ids)
    if partitions < 1:
        raise ValueError(f"number of partitions must be at least 1, got {partitions}")
    if replication_factor < 1 or replication_factor > n:
        raise ValueError(f"replication factor {replication_factor} needs 1..{n} live brokers ({n} available)")
    start = random.randrange(n) if start_index is None else start_index % n
    next_shift = random.randrange(n) if shift is None else shift % n
    result: dict[int, tuple[int, ...]] = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (next_shift + j) % (n - 1)) % n])
        result[p] = tuple(replicas)
    return result


def topic_exists_message(name: str) -> str:
    """Kafka's TOPIC_ALREADY_EXISTS message (``kafka-topics --create``
    prints it: "Topic 'orders' already exists.")."""
    return f"Topic '{name}' already exists."


def invalid_topic_message(name: str, exc: InvalidTopicError) -> str:
    """Kafka's INVALID_TOPIC_EXCEPTION message for an illegal name: its
    wording for illegal characters, else kclient's reason (without the
    exception's ``[Error 17] INVALID_TOPIC_EXCEPTION:`` prefix)."""
    if name and name not in (".", "..") and len(name) <= 249 and not re.fullmatch(r"[a-zA-Z0-9._-]+", name):
        return f"Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return str(exc).split(": ", 1)[-1]


def unknown_broker_message(brokers: Sequence[int]) -> str:
    """Kafka 4's INVALID_REPLICA_ASSIGNMENT message for a manual assignment
    naming a broker that is not registered (its first such broker)."""
    return f"The manual partition assignment includes broker {sorted(brokers)[0]}, but no such broker is registered."


class TopicAdmin:
    """Topic creation and deletion for one broker (see the module docstring).

    Args:
        config: The broker's configuration (``num.partitions``,
            ``default.replication.factor``, ``auto.create.topics.enable``,
            ``delete.topic.enable``).
        broker_id: This broker's id.
        logs: The log manager (a standalone broker creates logs in it).
        metadata_cache: Which topics and leaders exist.
        replica_manager: Leads a standalone broker's new partitions and
            deletes its replicas.
        topic_overrides: Where a standalone broker keeps a topic's configs.
        zk: The ZooKeeper session, or None for a standalone broker.
        controller: This broker's controller in a cluster, or None.
    """

    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        logs: LogManager,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        topic_overrides: TopicOverrides,
        *,
        zk: ZkClient | None = None,
        controller: Controller | None = None,
    ) -> None:
        self.config = config
        self.broker_id = broker_id
        self.logs = logs
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.topic_overrides = topic_overrides
        self.zk = zk
        #: This broker's `kclient.broker.controller.Controller` in a
        #: cluster; None for a standalone broker.
        self.controller = controller
        #: Called as ``listener(topic, partitions)`` on the trio thread after
        #: a standalone broker created a topic or added partitions.
        self.topic_listeners: list[Callable[[str, int], None]] = []

    def not_controller(self) -> bool:
        """Whether CreateTopics / DeleteTopics must be refused with
        NOT_CONTROLLER: in a cluster only the active controller serves them
        (as Kafka's ZooKeeper-mode brokers; clients send them to the
        ``controller_id`` of Metadata v1+, KIP-4)."""
        return self.controller is not None and not self.controller.active

    async def live_brokers(self) -> list[int]:
        """Live broker ids (from ZooKeeper in a cluster)."""
        if self.zk is None:
            return [self.broker_id]
        children = await trio.to_thread.run_sync(self.zk.get_children, BROKER_IDS_PATH)
        return sorted(int(c) for c in children if c.isdigit())

    async def ensure_topic(self, name: str, *, allow_create: bool) -> int:
        """The error code for using topic ``name`` (Produce, Metadata).

        Args:
            name: The topic.
            allow_create: Create the topic (with ``num.partitions`` partitions)
                if it is missing and ``auto.create.topics.enable`` is set.

        Returns:
            NONE if the topic exists (perhaps just created),
                INVALID_TOPIC_EXCEPTION for an illegal name that would have been
                created, else UNKNOWN_TOPIC_OR_PARTITION.
        """
        if self.metadata_cache.has_topic(name):
            return NONE
        if not (allow_create and self.config.auto_create_topics_enable):
            return UNKNOWN_TOPIC_OR_PARTITION
        return await self.auto_create(name)

    async def auto_create(self, name: str) -> int:
        """Auto-create ``name`` with ``num.partitions`` partitions and
        ``default.replication.factor`` replicas.

        Returns:
            NONE (standalone: created and led here), LEADER_NOT_AVAILABLE
                (cluster: written, leaders being elected), or the error.
        """
        partitions = self.config.num_partitions
        code, message = await self.create(name, partitions, self.config.default_replication_factor, {})
        if code == TOPIC_ALREADY_EXISTS:
            return NONE if self.metadata_cache.has_topic(name) else LEADER_NOT_AVAILABLE
        if code != NONE:
            log.info("not auto-creating topic %r: %s", name, message)
            return code
        log.info("auto-created topic %s with %d partition(s)", name, partitions)
        return NONE if self.zk is None else LEADER_NOT_AVAILABLE

    async def create(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        assignment: Mapping[int, Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> tuple[int, str | None]:
        """Create a topic; ``(error code, message)``. Does not wait for the
        leaders (see `create_topics`)."""
        try:
            validate_topic_name(name)
        except InvalidTopicError as exc:
            return INVALID_TOPIC_EXCEPTION, invalid_topic_message(name, exc)
        unknown = sorted(set(configs) - TOPIC_CONFIGS)
        if unknown:
            return INVALID_CONFIG, f"unknown topic config(s): {', '.join(unknown)}"
        if "min.insync.replicas" in configs:
            try:
                if int(configs["min.insync.replicas"]) < 1:
                    raise ValueError
            except ValueError:
                return INVALID_CONFIG, f"min.insync.replicas must be an int >= 1, got {configs['min.insync.replicas']!r}"
        # A bad value (retention.ms=soon) is INVALID_CONFIG for CreateTopics,
        # as Kafka's LogConfig.validate makes it (3.9 and 4.x alike).
        code, message = validate_topic_configs(dict(configs))
        if code != NONE:
            return INVALID_CONFIG, message
        live = await self.live_brokers()
        if assignment:
            if sorted(assignment) != list(range(len(assignment))):
                return INVALID_REPLICA_ASSIGNMENT, "partitions of a manual assignment must be 0..n-1"
            sizes = {len(r) for r in assignment.values()}
            if len(sizes) != 1 or any(len(set(r)) != len(r) for r in assignment.values()):
                return INVALID_REPLICA_ASSIGNMENT, "every partition needs the same number of distinct replicas"
            unknown_brokers = {b for r in assignment.values() for b in r} - set(live)
            if unknown_brokers:
                return INVALID_REPLICA_ASSIGNMENT, unknown_broker_message(sorted(unknown_brokers))
            replicas = {int(p): tuple(r) for p, r in assignment.items()}
        else:
            if partitions < 1:
                return INVALID_PARTITIONS, f"number of partitions must be at least 1, got {partitions}"
            if replication_factor < 1 or replication_factor > len(live):
                return INVALID_REPLICATION_FACTOR, f"replication factor {replication_factor} is larger than the {len(live)} live broker(s)"
            replicas = assign_replicas(live, partitions, replication_factor)
        if self.zk is None and any(r != (self.broker_id,) for r in replicas.values()):
            return INVALID_REPLICA_ASSIGNMENT, "a standalone broker can only hold replicas of itself"
        if validate_only:
            exists = self.metadata_cache.has_topic(name)
            return (TOPIC_ALREADY_EXISTS, topic_exists_message(name)) if exists else (NONE, None)
        if self.zk is None:
            return await self._create_locally(name, len(replicas), configs)
        return await trio.to_thread.run_sync(self._write_zk, name, replicas, dict(configs))

    async def _create_locally(self, name: str, partitions: int, configs: Mapping[str, str]) -> tuple[int, str | None]:
        try:
            self.logs.create_topic(name, partitions)
        except TopicAlreadyExistsError:
            return TOPIC_ALREADY_EXISTS, topic_exists_message(name)
        except InvalidTopicError as exc:
            return INVALID_TOPIC_EXCEPTION, invalid_topic_message(name, exc)
        if configs:
            self.topic_overrides.update(name, configs)
        await self.replica_manager.lead_locally(name, range(partitions), is_new=True)
        for listener in self.topic_listeners:
            listener(name, partitions)
        return NONE, None

    def _write_zk(self, name: str, replicas: dict[int, tuple[int, ...]], configs: dict[str, str]) -> tuple[int, str | None]:
        zk = self.zk
        assert zk is not None
        if zk.exists(topic_path(name)):
            return TOPIC_ALREADY_EXISTS, topic_exists_message(name)
        folded = name.replace(".", "_")
        for other in zk.get_children("/brokers/topics"):
            if other != name and other.replace(".", "_") == folded:
                return INVALID_TOPIC_EXCEPTION, f"topic {name!r} collides with existing topic {other!r}"
        zk.write_persistent(topic_config_path(name), encode_topic_config(configs))
        if zk.create_versioned(topic_path(name), TopicAssignment(replicas).to_json()) is None:
            return TOPIC_ALREADY_EXISTS, topic_exists_message(name)
        log.info("created topic %s: assignment %s", name, {p: list(r) for p, r in replicas.items()})
        return NONE, None

    async def delete(self, name: str) -> tuple[int, str | None]:
        """Mark ``name`` for deletion (standalone: delete it now)."""
        if not self.config.delete_topic_enable:
            return INVALID_REQUEST, "topic deletion is disabled (delete.topic.enable=false)"
        if self.zk is None:
            partitions = sorted(self.metadata_cache.partitions(name))
            if not partitions:
                return UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}"
            await self.replica_manager.stop_replica(
                StopReplicaRequest(
                    controller_id=self.broker_id,
                    controller_epoch=self.replica_manager.controller_epoch,
                    delete_partitions=True,
                    ungrouped_partitions=[StopReplicaPartitionV0(topic_name=name, partition_index=p) for p in partitions],
                ),
                0,
            )
            self.metadata_cache.remove_topic(name)
            self.topic_overrides.remove(name)
            return NONE, None
        exists = await trio.to_thread.run_sync(self.zk.exists, topic_path(name))
        if not exists:
            return UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}"
        if not self.metadata_cache.has_topic(name):
            # Gone from the metadata while the controller finishes deleting it.
            marked = await trio.to_thread.run_sync(self.zk.exists, f"{DELETE_TOPICS_PATH}/{name}")
            if marked:
                return UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} is being deleted"
        await trio.to_thread.run_sync(self.zk.create_persistent_if_absent, f"{DELETE_TOPICS_PATH}/{name}", b"")
        return NONE, None

    async def add_partitions(
        self, name: str, count: int, assignments: Sequence[Sequence[int]] | None, *, validate_only: bool = False
    ) -> tuple[int, str | None]:
        """Raise ``name``'s partition count to ``count`` (KIP-195);
        ``(error code, message)``. Does not wait for the new leaders (see
        `create_partitions`).

        Args:
            name: The topic.
            count: Its new partition count.
            assignments: One replica list per new partition, or None to
                assign them as Kafka does.
            validate_only: Check only.

        Returns:
            NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (being
            deleted), INVALID_PARTITIONS (not more than now),
            INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR.
        """
        current = self.metadata_cache.partitions(name)
        existing: dict[int, tuple[int, ...]]
        if self.zk is None:
            if not current:
                return UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            existing = dict.fromkeys(current, (self.broker_id,))
        else:
            data = await trio.to_thread.run_sync(self.zk.get, topic_path(name))
            if data is None:
                return UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            if await trio.to_thread.run_sync(self.zk.exists, f"{DELETE_TOPICS_PATH}/{name}"):
                return INVALID_TOPIC_EXCEPTION, f"The topic '{name}' is queued for deletion."
            existing = dict(TopicAssignment.from_json(data).partitions)
        old = len(existing)
        if count < old:
            return INVALID_PARTITIONS, f"Topic currently has {old} partitions, which is higher than the requested {count}."
        if count == old:
            return INVALID_PARTITIONS, f"Topic already has {old} partitions."
        added = count - old
        factor = len(existing[min(existing)])
        live = await self.live_brokers()
        if assignments is not None:
            if len(assignments) != added:
                return INVALID_REPLICA_ASSIGNMENT, f"Increasing the number of partitions by {added} but {len(assignments)} assignments provided."
            new = {old + i: tuple(r) for i, r in enumerate(assignments)}
            for p, replicas in new.items():
                if not replicas or len(set(replicas)) != len(replicas):
                    return INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers or no broker in the assignment of partition {p}: {list(replicas)}"
                if len(replicas) != factor:
                    return (
                        INVALID_REPLICA_ASSIGNMENT,
                        f"Inconsistent replication factor between partitions, partition 0 has {factor} while partition {p} has {len(replicas)}.",
                    )
            unknown = sorted({b for r in new.values() for b in r} - set(live))
            if unknown:
                # ZooKeeper-mode Kafka's text (AdminZkClient), like the other CreatePartitions messages here.
                return INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
        else:
            if factor > len(live):
                return INVALID_REPLICATION_FACTOR, f"replication factor {factor} is larger than the {len(live)} live broker(s)"
            ids = sorted(live)
            first = existing[min(existing)][0]
            start = ids.index(first) if first in ids else None
            new = assign_replicas(ids, added, factor, start_index=start, shift=start, first_partition=old)
        if validate_only:
            return NONE, None
        if self.zk is None:
            await self.replica_manager.lead_locally(name, range(old, count), is_new=True)
            for listener in self.topic_listeners:
                listener(name, count)
            log.info("topic %s: partitions %d..%d added", name, old, count - 1)
            return NONE, None
        code, message = await trio.to_thread.run_sync(self._write_partitions_zk, name, existing, new)
        if code == NONE and self.controller is not None:
            self.controller.partitions_added(name)
        return code, message

    def _write_partitions_zk(
        self, name: str, existing: dict[int, tuple[int, ...]], new: dict[int, tuple[int, ...]]
    ) -> tuple[int, str | None]:
        assert self.zk is not None
        found = self.zk.get_versioned(topic_path(name))
        if found is None:
            return UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        if dict(TopicAssignment.from_json(found[0]).partitions) != existing:
            return INVALID_PARTITIONS, f"The partitions of topic '{name}' changed meanwhile; retry."
        if self.zk.set_versioned(topic_path(name), TopicAssignment({**existing, **new}).to_json(), found[1]) is None:
            return INVALID_PARTITIONS, f"The partitions of topic '{name}' changed meanwhile; retry."
        log.info("topic %s: partitions added: %s", name, {p: list(r) for p, r in new.items()})
        return NONE, None

    # ------------------------------------------------------------ the APIs

    async def create_partitions(self, body: CreatePartitionsRequest, version: int) -> CreatePartitionsResponse:
        """CreatePartitions v0-1 (KIP-195): add each topic's partitions,
        then wait up to ``timeout_ms`` until this broker's metadata has a
        leader for each new partition (REQUEST_TIMED_OUT otherwise; the
        partitions stay added). In a cluster only the active controller
        serves it (NOT_CONTROLLER elsewhere), as in ZooKeeper-mode Kafka."""
        topics = body.topics
        if self.not_controller():
            message = "this broker is not the controller; send CreatePartitions to the controller_id of Metadata"
            return CreatePartitionsResponse(
                results=[CreatePartitionsTopicResult(name=t.name, error_code=NOT_CONTROLLER, error_message=message) for t in topics]
            )
        names = [t.name for t in topics]
        results: list[CreatePartitionsTopicResult] = []
        waiting: list[tuple[CreatePartitionsTopicResult, int]] = []
        for t in topics:
            entry = CreatePartitionsTopicResult(name=t.name, error_code=NONE, error_message=None)
            results.append(entry)
            if names.count(t.name) > 1:
                entry.error_code, entry.error_message = INVALID_REQUEST, "Duplicate topic in request."
                continue
            replicas = None if t.assignments is None else [a.broker_ids for a in t.assignments]
            entry.error_code, entry.error_message = await self.add_partitions(t.name, t.count, replicas, validate_only=body.validate_only)
            if entry.error_code == NONE and not body.validate_only:
                waiting.append((entry, t.count))
        await self._await_leaders("CreatePartitions", results, waiting, body.timeout_ms, "partitions of {!r} added; their leaders are not all elected yet")
        return CreatePartitionsResponse(results=results)

    async def _await_leaders(self, api: str, results: Sequence[_TopicResult], waiting: Sequence[tuple[_TopicResult, int]], timeout_ms: int, timed_out: str) -> None:
        """Wait up to ``timeout_ms`` until each ``(entry, count)`` of
        ``waiting`` has its ``count`` partitions led (REQUEST_TIMED_OUT and
        ``timed_out.format(name)`` in the entry otherwise), then log each
        failed entry of ``results`` under ``api``."""
        deadline = trio.current_time() + max(0, timeout_ms) / 1000.0
        for entry, count in waiting:
            if not await self._leaders_known(entry.name, count, deadline):
                entry.error_code = REQUEST_TIMED_OUT
                entry.error_message = timed_out.format(entry.name)
        for entry in results:
            if entry.error_code != NONE:
                log.info("%s %s: %s %s", api, entry.name, error_for_code(entry.error_code).name, entry.error_message or "")

    async def _leaders_known(self, name: str, count: int | None, deadline: float) -> bool:
        """Wait until this broker's metadata has ``count`` partitions (any
        number if None) of ``name``, each with a leader; False once
        ``deadline`` (``trio.current_time()``) passed first."""
        while not self.metadata_cache.all_leaders_known(name, count):
            if trio.current_time() >= deadline:
                return False
            with trio.move_on_at(deadline):
                await self.metadata_cache.wait_changed()
        return True

    async def create_topics(self, body: CreateTopicsRequest, version: int) -> CreateTopicsResponse:
        """CreateTopics v0-4 (KIP-4): create each topic, then wait up to
        ``timeout_ms`` until this broker's metadata has a leader for each
        of its partitions (REQUEST_TIMED_OUT otherwise; the topic stays
        created). ``num_partitions`` / ``replication_factor`` -1 (v4) take
        the broker defaults."""
        if self.not_controller():
            message = "this broker is not the controller; send CreateTopics to the controller_id of Metadata"
            return CreateTopicsResponse(
                topics=[CreatableTopicResult(name=t.name, error_code=NOT_CONTROLLER, error_message=message) for t in body.topics]
            )
        results: list[CreatableTopicResult] = []
        waiting: list[tuple[CreatableTopicResult, int]] = []
        seen: set[str] = set()
        for t in body.topics:
            entry = CreatableTopicResult(name=t.name, error_code=NONE, error_message=None)
            results.append(entry)
            if t.name in seen:
                entry.error_code, entry.error_message = INVALID_REQUEST, f"topic {t.name!r} is listed twice"
                continue
            seen.add(t.name)
            count = await self._create_one(t, entry, validate_only=body.validate_only)
            if count is not None:
                waiting.append((entry, count))
        await self._await_leaders("CreateTopics", results, waiting, body.timeout_ms, "topic {!r} created; its leaders are not all elected yet")
        return CreateTopicsResponse(topics=results)

    async def _create_one(self, t: CreatableTopic, entry: CreatableTopicResult, *, validate_only: bool) -> int | None:
        """Create one topic of a CreateTopics request and set its result
        ``entry``; returns its partition count when created (the leaders
        to wait for), else None."""
        partitions = t.num_partitions if t.num_partitions != -1 else self.config.num_partitions
        rf = t.replication_factor if t.replication_factor != -1 else self.config.default_replication_factor
        assignment = {a.partition_index: a.broker_ids for a in t.assignments}
        if assignment and (t.num_partitions != -1 or t.replication_factor != -1):
            entry.error_code, entry.error_message = INVALID_REQUEST, "give either an assignment or counts, not both"
            return None
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        entry.error_code, entry.error_message = await self.create(t.name, partitions, rf, configs, assignment or None, validate_only=validate_only)
        if entry.error_code != NONE or validate_only:
            return None
        return len(assignment) if assignment else partitions

    async def delete_topics(self, body: DeleteTopicsRequest, version: int) -> DeleteTopicsResponse:
        """DeleteTopics v0-3: mark each topic for deletion and wait up to
        ``timeout_ms`` until this broker's metadata no longer has it."""
        names = list(body.topic_names or [t.name for t in body.topics if t.name is not None])
        if self.not_controller():
            return DeleteTopicsResponse(responses=[DeletableTopicResult(name=n, error_code=NOT_CONTROLLER, error_message=None) for n in names])
        results = []
        waiting = []
        for name in names:
            code, message = await self.delete(name)
            entry = DeletableTopicResult(name=name, error_code=code, error_message=message)
            results.append(entry)
            if code == NONE:
                waiting.append((name, entry))
        deadline = trio.current_time() + max(0, body.timeout_ms) / 1000.0
        for name, entry in waiting:
            while self.metadata_cache.has_topic(name):
                if trio.current_time() >= deadline:
                    entry.error_code = REQUEST_TIMED_OUT
                    break
                with trio.move_on_at(deadline):
                    await self.metadata_cache.wait_changed()
        return DeleteTopicsResponse(responses=results)


__all__ = ["DELETE_TOPICS_PATH", "TOPIC_CONFIG_PATH", "TOPIC_CONFIGS", "TopicAdmin", "assign_replicas"]
