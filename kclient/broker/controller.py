"""The controller: one broker of a ZooKeeper cluster decides who leads
what (Kafka's ZooKeeper-era ``KafkaController``; Kafka documentation,
"Replication" and the ZooKeeper layout of "Distribution").

Every broker runs a `Controller`; the one that creates the ephemeral
``/controller`` node (``{"version":1,"brokerid":N,"timestamp":"ms"}``) is
active; it creates the node and increments ``/controller_epoch`` in one
ZooKeeper transaction, so the node never names it beside the previous
controller's epoch (Kafka 2.2+ does the same). When its session ends the node
disappears and every broker races to take over. All events (ZooKeeper
watches fire on kazoo's thread) are queued and handled one at a time on
the broker's trio loop, as Kafka's ``ControllerEventManager`` does.

When active it:

- on election, reads the live brokers, every topic's replica assignment
  and every partition's state znode, creates the states of partitions that
  have none, elects leaders for partitions without a live one, and sends
  each replica its LeaderAndIsr, then every live broker UpdateMetadata;
- on a new topic (``/brokers/topics`` children): writes each partition's
  state (leader = first live replica, ISR = live replicas, leader epoch 0)
  and tells the replicas;
- on a broker leaving (``/brokers/ids`` children): elects a new leader
  for each partition it led, from the ISR's live members in replica order;
  with none, from any live replica if ``unclean.leader.election.enable``
  (per topic or broker), else the partition stays offline (leader -1, ISR
  kept) until an ISR member returns; removes it from other partitions' ISR.
  Each change bumps the leader epoch and is a conditional write of the
  state znode;
- on a broker joining: sends it metadata and its partitions' states, and
  elects leaders for offline partitions it can lead;
- on ``/isr_change_notification`` (leaders' ISR changes): re-reads those
  partitions and sends every broker fresh metadata;
- on partitions added to a topic (CreatePartitions, KIP-195, which only
  the active controller serves): creates the new partitions' states and
  tells the replicas, as for a new topic;
- on ``/log_dir_event_notification`` (a broker's log dir failed, KIP-112;
  `kclient.broker.log_dir_failure`): its replicas there are offline until
  it registers again; leaders move to another in-sync replica, ISRs shrink;
- on ``/admin/delete_topics/<topic>`` (with ``delete.topic.enable``):
  StopReplica with deletion to the replicas, removes the topic's znodes and
  tells every broker (leader -2 in UpdateMetadata).

Requests go out through `kclient.broker.controller_channel`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import trio
from kazoo.client import KazooState
from kazoo.recipe.watchers import DataWatch

from kclient.broker.controller_channel import ControllerChannel
from kclient.broker.log_dir_failure import LOG_DIR_EVENT_PATH, decode_log_dir_event
from kclient.broker.metadata_cache import LEADER_DURING_DELETE
from kclient.broker.topic_configs import parse_boolean
from kclient.broker.zk_topics import (
    DELETE_TOPICS_PATH,
    TOPIC_CONFIG_PATH,
    decode_topic_config,
    topic_config_path,
)
from kclient.clock import now_ms
from kclient.errors import KafkaError
from kclient.protocol.messages import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from kclient.protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from kclient.protocol.messages.stop_replica import (
    StopReplicaPartitionV0,
    StopReplicaRequest,
)
from kclient.protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kclient.zk.client import TrioZk
from kclient.zk.paths import (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    CONTROLLER_PATH,
    BrokerRegistration,
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    partition_state_path,
    topic_path,
)

if TYPE_CHECKING:
    from kclient.broker.replica_manager import ReplicaManager
    from kclient.config import BrokerConfig
    from kclient.zk.client import ZkClient

log = logging.getLogger("kclient.broker.controller")

T = TypeVar("T")

CONTROLLER_EPOCH_PATH = "/controller_epoch"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"

#: Kafka's SecurityProtocol ids, for UpdateMetadata endpoints.
_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


@attrs.define
class _Partition:
    replicas: tuple[int, ...]
    state: PartitionState | None = None
    zk_version: int = 0


class Controller:
    """Runs on every broker with ``zookeeper.connect`` (see the module
    docstring). Run `run` as a broker task.

    Args:
        config: The broker's configuration.
        broker_id: This broker's id.
        zk: The broker's ZooKeeper session.
        replica_manager: This broker's replica manager (its own controller
            requests are handed to it directly).
        clock: The wall clock in ms (the controller registration's timestamp).
    """

    def __init__(
        self, config: BrokerConfig, broker_id: int, zk: ZkClient, replica_manager: ReplicaManager, *, clock: Callable[[], int] = now_ms
    ) -> None:
        self.config = config
        self.clock = clock
        self.broker_id = broker_id
        self.zk = zk
        self.active = False
        self.epoch = 0
        self.live: dict[int, BrokerRegistration] = {}
        #: The ZooKeeper session that owns each live broker's registration:
        #: a new one under the same id is a restart, even when the children
        #: of /brokers/ids look unchanged (Kafka's broker epoch, KIP-380).
        self.sessions: dict[int, int] = {}
        self.partitions: dict[tuple[str, int], _Partition] = {}
        #: Replicas on a live broker whose log dir failed (KIP-112): not
        #: elected, not in the ISR, until their broker registers again.
        self.offline_replicas: dict[tuple[str, int], set[int]] = {}
        self.channel = ControllerChannel(
            replica_manager,
            backoff_ms=min(self.config.replica_fetch_backoff_ms, 500),
            timeout_ms=self.config.replica_socket_timeout_ms,
        )
        self._send, self._receive = trio.open_memory_channel(math.inf)
        self._tzk: TrioZk | None = None
        self._watches: list[Any] = []

    # ------------------------------------------------------------ plumbing

    def _enqueue(self, *event: Any) -> None:
        if self._tzk is not None:
            self._tzk.deliver(self._send.send_nowait, event)

    async def _zk(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` (a blocking ZooKeeper call) in a worker thread."""
        return await trio.to_thread.run_sync(fn, *args)

    def _children_watch(self, kind: str) -> Callable[[list[str]], None]:
        """A children watch queueing ``(kind, children)`` events."""

        def deliver(children: list[str]) -> None:
            self._send.send_nowait((kind, list(children)))

        return deliver

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Install the watches and handle events until cancelled."""
        self._tzk = TrioZk(self.zk)
        async with trio.open_nursery() as nursery:
            await nursery.start(self.channel.run)
            kazoo = self.zk.kazoo
            for path in (BROKER_IDS_PATH, BROKER_TOPICS_PATH, ISR_CHANGE_NOTIFICATION_PATH, DELETE_TOPICS_PATH, LOG_DIR_EVENT_PATH):
                await self._zk(self.zk.ensure_path, path)

            def on_controller(data: bytes | None, stat: Any, event: Any = None) -> None:
                if data is None:
                    self._enqueue("elect")
                elif event is not None:
                    self._enqueue("check")

            self._watches.append(await self._zk(DataWatch, kazoo, CONTROLLER_PATH, on_controller))
            for path, kind in (
                (BROKER_IDS_PATH, "brokers"),
                (BROKER_TOPICS_PATH, "topics"),
                (ISR_CHANGE_NOTIFICATION_PATH, "isr"),
                (DELETE_TOPICS_PATH, "delete"),
                (LOG_DIR_EVENT_PATH, "logdir"),
            ):
                await self._tzk.watch_children(path, self._children_watch(kind))
            self.zk.add_state_listener(self._on_session)
            self._send.send_nowait(("elect",))
            task_status.started()
            async for event in self._receive:
                try:
                    await self._handle(event)
                except KafkaError as exc:
                    log.error("controller event %s failed: %s; retrying", event[0], exc)
                    await trio.sleep(0.5)
                    self._send.send_nowait(("elect",) if not self.active else event)
                except Exception:
                    log.exception("controller event %s failed", event[0])

    def _on_session(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            self._enqueue("resign")
        elif state == KazooState.CONNECTED:
            self._enqueue("elect")

    def close(self) -> None:
        self.channel.close()

    async def _handle(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind in ("elect", "check"):
            await self._elect()
        elif kind == "resign":
            self._resign()
        elif not self.active:
            return
        elif kind == "brokers":
            await self._brokers_changed({int(b) for b in event[1] if b.isdigit()})
        elif kind == "topics":
            await self._topics_changed(set(event[1]))
        elif kind == "isr":
            await self._isr_changed(event[1])
        elif kind == "delete":
            await self._delete_topics(event[1])
        elif kind == "partitions":
            await self._partitions_added(event[1])
        elif kind == "logdir":
            await self._log_dirs_failed(event[1])

    # ------------------------------------------------------------ election

    async def _elect(self) -> None:
        data = await self._zk(self.zk.get, CONTROLLER_PATH)
        if data is not None:
            try:
                holder = int(json.loads(data)["brokerid"])
            except (ValueError, KeyError, TypeError):
                holder = -1
            owner = await self._zk(self.zk.owner_session, CONTROLLER_PATH)
            if holder != self.broker_id or owner != self.zk.session_id:
                # Another broker, or this broker's previous session (its node
                # goes when that session expires; the watch then fires).
                self._resign()
                return
            if self.active:
                return
            self.epoch = await self._zk(self._current_epoch)
        else:
            # One ZooKeeper transaction: /controller names this broker only
            # together with the epoch it has as controller (a reader never
            # sees the new controller beside the old epoch).
            registration = ControllerRegistration(self.broker_id, self.clock()).to_json()
            epoch = await self._zk(self.zk.create_ephemeral_and_increment, CONTROLLER_PATH, registration, CONTROLLER_EPOCH_PATH)
            if epoch is None:
                self._resign()
                return
            self.epoch = epoch
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        await self._initialize()

    def _current_epoch(self) -> int:
        found = self.zk.get_versioned(CONTROLLER_EPOCH_PATH)
        return int(found[0] or b"0") if found else 0

    def _resign(self) -> None:
        if self.active:
            log.info("broker %d is no longer the controller", self.broker_id)
        self.active = False
        self.channel.set_brokers({})

    async def _initialize(self) -> None:
        registered = await self._zk(self._read_brokers, None)
        self.live = {bid: reg for bid, (reg, _) in registered.items()}
        self.sessions = {bid: session for bid, (_, session) in registered.items()}
        self._update_channel()
        self.partitions = {}
        topics = await self._zk(self.zk.get_children, BROKER_TOPICS_PATH)
        for topic in sorted(topics):
            await self._load_topic(topic)
        changed = await self._zk(self._initialize_states, list(self.partitions))
        changed |= await self._zk(self._elect_leaders, list(self.partitions), set())
        # LeaderAndIsr first, as on every other change: a broker elected
        # here (its leader died with the old controller) must lead before
        # its own Metadata names it, or it answers Fetch and Produce with
        # NOT_LEADER_OR_FOLLOWER while naming itself the leader.
        self._send_leader_and_isr(list(self.partitions))
        self._send_metadata_to(set(self.live))
        deletions = await self._zk(self.zk.get_children, DELETE_TOPICS_PATH)
        if deletions:
            await self._delete_topics(deletions)

    def _read_brokers(self, only: set[int] | None) -> dict[int, tuple[BrokerRegistration, int]]:
        """The registered brokers (all, or those in ``only``): their
        registrations and the sessions that own them, read in one round trip."""
        ids = [int(c) for c in self.zk.get_children(BROKER_IDS_PATH) if c.isdigit() and (only is None or int(c) in only)]
        brokers = {}
        for bid, found in zip(ids, self.zk.owners_and_data([f"{BROKER_IDS_PATH}/{bid}" for bid in ids])):
            if found is None:
                continue
            try:
                brokers[bid] = (BrokerRegistration.from_json(bid, found[0]), found[1])
            except ValueError as exc:
                log.warning("broker %d registration unreadable: %s", bid, exc)
        return brokers

    def _update_channel(self) -> None:
        self.channel.set_brokers({bid: self._inter_broker_address(reg) for bid, reg in self.live.items()})

    def _inter_broker_address(self, reg: BrokerRegistration) -> tuple[str, int]:
        name = self.config.inter_broker_listener_name
        for ep in reg.endpoints:
            listener, _, rest = ep.partition("://")
            host, _, port = rest.rpartition(":")
            if name is None or listener.upper() == name.upper():
                return host.strip("[]"), int(port)
        return reg.host, reg.port

    async def _load_topic(self, topic: str) -> list[tuple[str, int]]:
        data = await self._zk(self.zk.get, topic_path(topic))
        if data is None:
            return []
        try:
            assignment = TopicAssignment.from_json(data)
        except (ValueError, KeyError) as exc:
            log.warning("topic %s: unreadable assignment: %s", topic, exc)
            return []
        keys = []
        for p, replicas in sorted(assignment.partitions.items()):
            key = (topic, int(p))
            found = await self._zk(self.zk.get_versioned, partition_state_path(topic, int(p)))
            entry = _Partition(tuple(replicas))
            if found is not None:
                entry.state = PartitionState.from_json(found[0])
                entry.zk_version = found[1]
            self.partitions[key] = entry
            keys.append(key)
        return keys

    # ------------------------------------------------------------ partition states (blocking, worker thread)

    def _initialize_states(self, keys: list[tuple[str, int]]) -> set[tuple[str, int]]:
        """Create the state znodes of new partitions with a live replica."""
        changed = set()
        for key in keys:
            entry = self.partitions.get(key)
            if entry is None or entry.state is not None:
                continue
            live = [r for r in entry.replicas if r in self.live]
            if not live:
                continue
            state = PartitionState(live[0], tuple(live), 0, self.epoch)
            version = self.zk.create_versioned(partition_state_path(*key), state.to_json())
            if version is None:  # written meanwhile: take it
                found = self.zk.get_versioned(partition_state_path(*key))
                if found is None:
                    continue
                entry.state, entry.zk_version = PartitionState.from_json(found[0]), found[1]
            else:
                entry.state, entry.zk_version = state, version
                log.info("%s-%d: new partition, leader %d, ISR %s", *key, state.leader, list(state.isr))
            changed.add(key)
        return changed

    def _unclean_allowed(self, topic: str) -> bool:
        data = self.zk.get(topic_config_path(topic))
        if data:
            try:
                value = decode_topic_config(data).get("unclean.leader.election.enable")
                if value is not None:
                    return parse_boolean(value)
            except ValueError:
                pass
        return self.config.unclean_leader_election_enable

    def _elect_leaders(self, keys: list[tuple[str, int]], dead: set[int]) -> set[tuple[str, int]]:
        """New leaders for partitions whose leader is not live, and ISRs
        without the ``dead`` brokers; conditional writes (re-read and retried
        on a version conflict). Returns the partitions changed."""
        changed = set()
        for key in keys:
            for _ in range(10):
                entry = self.partitions.get(key)
                if entry is None or entry.state is None:
                    break
                st = entry.state
                new = self._next_state(key, entry, dead)
                if new is None:
                    break
                version = self.zk.set_versioned(partition_state_path(*key), new.to_json(), entry.zk_version)
                if version is None:
                    found = self.zk.get_versioned(partition_state_path(*key))
                    if found is None:
                        break
                    entry.state, entry.zk_version = PartitionState.from_json(found[0]), found[1]
                    continue
                log.info(
                    "%s-%d: leader %d -> %d (epoch %d), ISR %s -> %s", *key, st.leader, new.leader, new.leader_epoch, list(st.isr), list(new.isr)
                )
                entry.state, entry.zk_version = new, version
                changed.add(key)
                break
        return changed

    def _next_state(self, key: tuple[str, int], entry: _Partition, dead: set[int]) -> PartitionState | None:
        st = entry.state
        assert st is not None
        offline = self.offline_replicas.get(key, ())
        live = {r for r in self.live if r not in offline}
        isr = tuple(r for r in st.isr if r in live)
        if st.leader in live:
            if isr == st.isr or not isr:
                return None
            return PartitionState(st.leader, isr, st.leader_epoch + 1, self.epoch)
        candidates = [r for r in entry.replicas if r in isr]
        if candidates:
            return PartitionState(candidates[0], isr, st.leader_epoch + 1, self.epoch)
        others = [r for r in entry.replicas if r in live]
        if others and self._unclean_allowed(key[0]):
            log.warning("%s-%d: unclean leader election of %d (no live ISR member; data may be lost)", *key, others[0])
            return PartitionState(others[0], (others[0],), st.leader_epoch + 1, self.epoch)
        if st.leader == -1:
            return None
        # Offline: no leader; the ISR keeps the last members so that one of
        # them is elected when it returns.
        log.warning("%s-%d: no live in-sync replica (ISR %s): offline", *key, list(st.isr))
        return PartitionState(-1, st.isr, st.leader_epoch + 1, self.epoch)

    # ------------------------------------------------------------ requests

    def _partition_state(self, key: tuple[str, int], *, deleting: bool = False) -> UpdateMetadataPartitionState:
        """The UpdateMetadata partition state of ``key`` (leader -2 when
        ``deleting``)."""
        entry = self.partitions[key]
        st = entry.state or PartitionState(-1, (), 0, self.epoch)
        return UpdateMetadataPartitionState(
            topic_name=key[0],
            partition_index=key[1],
            controller_epoch=st.controller_epoch,
            leader=LEADER_DURING_DELETE if deleting else st.leader,
            leader_epoch=st.leader_epoch,
            isr=list(st.isr),
            zk_version=entry.zk_version,
            replicas=list(entry.replicas),
            offline_replicas=[r for r in entry.replicas if r not in self.live or r in self.offline_replicas.get(key, ())],
        )

    def _leader_and_isr_state(self, key: tuple[str, int], *, is_new: bool = False) -> LeaderAndIsrPartitionState:
        """The LeaderAndIsr partition state of ``key`` (its partition epoch
        is the state znode's version, as in ZooKeeper-mode Kafka)."""
        entry = self.partitions[key]
        st = entry.state or PartitionState(-1, (), 0, self.epoch)
        return LeaderAndIsrPartitionState(
            topic_name=key[0],
            partition_index=key[1],
            controller_epoch=st.controller_epoch,
            leader=st.leader,
            leader_epoch=st.leader_epoch,
            isr=list(st.isr),
            partition_epoch=entry.zk_version,
            replicas=list(entry.replicas),
            is_new=is_new,
        )

    def _live_brokers(self) -> list[UpdateMetadataBroker]:
        brokers = []
        for bid, reg in sorted(self.live.items()):
            endpoints = []
            for ep in reg.endpoints:
                listener, _, rest = ep.partition("://")
                host, _, port = rest.rpartition(":")
                protocol = reg.protocol_map.get(listener, listener).upper()
                endpoints.append(
                    UpdateMetadataEndpoint(port=int(port), host=host.strip("[]"), listener=listener, security_protocol=_PROTOCOL_IDS.get(protocol, 0))
                )
            if not endpoints:
                endpoints.append(UpdateMetadataEndpoint(port=reg.port, host=reg.host, listener="PLAINTEXT", security_protocol=0))
            brokers.append(UpdateMetadataBroker(id=bid, endpoints=endpoints, rack=None))
        return brokers

    def _send_metadata_to(self, brokers: set[int], keys: list[tuple[str, int]] | None = None, *, deleting: bool = False) -> None:
        keys = list(self.partitions) if keys is None else keys
        body = UpdateMetadataRequest(
            controller_id=self.broker_id,
            controller_epoch=self.epoch,
            ungrouped_partition_states=[self._partition_state(k, deleting=deleting) for k in keys if k in self.partitions],
            live_brokers=self._live_brokers(),
        )
        for bid in brokers:
            self.channel.send(bid, UPDATE_METADATA, 4, body)

    def _send_leader_and_isr(self, keys: list[tuple[str, int]], *, only: set[int] | None = None, is_new: bool = False) -> None:
        per_broker: dict[int, list[LeaderAndIsrPartitionState]] = {}
        for key in keys:
            entry = self.partitions.get(key)
            if entry is None or entry.state is None:
                continue
            state = self._leader_and_isr_state(key, is_new=is_new)
            for r in entry.replicas:
                if r in self.live and (only is None or r in only):
                    per_broker.setdefault(r, []).append(state)
        for bid, states in per_broker.items():
            leaders = {s.leader for s in states if s.leader in self.live}
            live_leaders = []
            for leader in sorted(leaders):
                host, port = self._inter_broker_address(self.live[leader])
                live_leaders.append(LeaderAndIsrLiveLeader(broker_id=leader, host_name=host, port=port))
            self.channel.send(
                bid,
                LEADER_AND_ISR,
                1,
                LeaderAndIsrRequest(
                    controller_id=self.broker_id, controller_epoch=self.epoch, ungrouped_partition_states=states, live_leaders=live_leaders
                ),
            )

    # ------------------------------------------------------------ events

    async def _brokers_changed(self, current: set[int]) -> None:
        registered = await self._zk(self._read_brokers, current)
        bounced = {bid for bid, (_, session) in registered.items() if bid in self.live and session != self.sessions.get(bid)}
        if bounced:
            # Its old session ended and a new one registered the same id
            # between two reads (or in one): a restart. As Kafka's
            # controller does, handle it as gone, then as back.
            log.info("broker(s) %s registered again under a new ZooKeeper session: a restart", sorted(bounced))
            await self._apply_brokers({bid: v for bid, v in registered.items() if bid not in bounced})
        await self._apply_brokers(registered)

    async def _apply_brokers(self, registered: dict[int, tuple[BrokerRegistration, int]]) -> None:
        """Make ``registered`` the live brokers: elect leaders away from the
        gone ones and tell the new ones what they host."""
        known = set(self.live)
        gone = known - set(registered)
        new = set(registered) - known
        if not gone and not new:
            return
        for bid in new:
            self.live[bid], self.sessions[bid] = registered[bid]
        for bid in gone:
            self.live.pop(bid, None)
            self.sessions.pop(bid, None)
        for replicas in self.offline_replicas.values():
            replicas -= gone | new  # a restarted broker's log dirs are online again
        log.info("brokers changed: live %s (new %s, gone %s)", sorted(self.live), sorted(new), sorted(gone))
        self._update_channel()
        keys = list(self.partitions)
        changed = await self._zk(self._initialize_states, keys)
        changed |= await self._zk(self._elect_leaders, keys, gone)
        # As Kafka's controller batches them: LeaderAndIsr before
        # UpdateMetadata, so that a broker's partitions know their new leader
        # and ISR by the time its Metadata answers show them (one queue per
        # broker keeps the order).
        if changed:
            self._send_leader_and_isr(sorted(changed))
        self._send_metadata_to(set(self.live))
        if new:
            # Returning brokers learn every partition they host.
            self._send_leader_and_isr([k for k, e in self.partitions.items() if set(e.replicas) & new], only=new)

    async def _log_dirs_failed(self, children: list[str]) -> None:
        """Log dir event notifications (KIP-112, Kafka's
        ``LogDirEventNotification``): the broker's replicas in a failed
        directory are offline; leaders move to another in-sync replica and
        the ISRs shrink (see `kclient.broker.log_dir_failure`)."""
        keys: set[tuple[str, int]] = set()
        for child in sorted(children):
            path = f"{LOG_DIR_EVENT_PATH}/{child}"
            data = await self._zk(self.zk.get, path)
            event = decode_log_dir_event(data) if data else None
            await self._zk(self.zk.delete, path)
            if event is None or event[0] not in self.live:
                continue
            broker, partitions = event
            hosted = partitions or [k for k, e in self.partitions.items() if broker in e.replicas]
            for key in hosted:
                if key in self.partitions:
                    self.offline_replicas.setdefault(key, set()).add(broker)
                    keys.add(key)
            log.warning("broker %d: a log dir failed; replicas offline: %s", broker, ", ".join(f"{t}-{p}" for t, p in sorted(hosted)))
        if not keys:
            return
        changed = await self._zk(self._elect_leaders, sorted(keys), set())
        if changed:
            self._send_leader_and_isr(sorted(changed))
        self._send_metadata_to(set(self.live))

    async def _topics_changed(self, topics: set[str]) -> None:
        known = {t for t, _ in self.partitions}
        added = sorted(topics - known)
        if not added:
            return
        keys = []
        for topic in added:
            keys.extend(await self._load_topic(topic))
        changed = await self._zk(self._initialize_states, keys)
        changed |= await self._zk(self._elect_leaders, keys, set())
        log.info("new topics %s", added)
        self._send_leader_and_isr(sorted(k for k in keys), is_new=True)
        self._send_metadata_to(set(self.live))

    def partitions_added(self, topic: str) -> None:
        """Tell the active controller that ``/brokers/topics/<topic>`` now
        holds more partitions (CreatePartitions, KIP-195, written by this
        broker's `kclient.broker.topic_admin.TopicAdmin`); Kafka's
        ``PartitionModifications`` event."""
        self._send.send_nowait(("partitions", topic))

    async def _partitions_added(self, topic: str) -> None:
        known = {k for k in self.partitions if k[0] == topic}
        if not known:
            return  # a new or deleted topic: the topics watch handles it
        keys = [k for k in await self._load_topic(topic) if k not in known]
        if not keys:
            return
        await self._zk(self._initialize_states, keys)
        await self._zk(self._elect_leaders, keys, set())
        log.info("%s: new partitions %s", topic, [p for _, p in keys])
        self._send_leader_and_isr(sorted(keys), is_new=True)
        self._send_metadata_to(set(self.live))

    async def _isr_changed(self, children: list[str]) -> None:
        if not children:
            return
        keys = set()
        for child in children:
            path = f"{ISR_CHANGE_NOTIFICATION_PATH}/{child}"
            data = await self._zk(self.zk.get, path)
            if data:
                try:
                    for p in json.loads(data).get("partitions", []):
                        keys.add((p["topic"], int(p["partition"])))
                except (ValueError, KeyError, TypeError):
                    log.warning("unreadable ISR change notification %s", child)
            await self._zk(self.zk.delete, path)
        for key in keys:
            entry = self.partitions.get(key)
            if entry is None:
                continue
            found = await self._zk(self.zk.get_versioned, partition_state_path(*key))
            if found is not None:
                entry.state, entry.zk_version = PartitionState.from_json(found[0]), found[1]
        self._send_metadata_to(set(self.live), sorted(keys))

    async def _delete_topics(self, topics: list[str]) -> None:
        for topic in sorted(set(topics)):
            admin = f"{DELETE_TOPICS_PATH}/{topic}"
            if not self.config.delete_topic_enable:
                log.warning("topic %s marked for deletion, but delete.topic.enable is false", topic)
                continue
            keys = [k for k in self.partitions if k[0] == topic]
            per_broker: dict[int, list[StopReplicaPartitionV0]] = {}
            for key in keys:
                for r in self.partitions[key].replicas:
                    per_broker.setdefault(r, []).append(StopReplicaPartitionV0(topic_name=topic, partition_index=key[1]))
            for bid, parts in per_broker.items():
                self.channel.send(
                    bid,
                    STOP_REPLICA,
                    0,
                    StopReplicaRequest(controller_id=self.broker_id, controller_epoch=self.epoch, delete_partitions=True, ungrouped_partitions=parts),
                )
            self._send_metadata_to(set(self.live), keys, deleting=True)
            for key in keys:
                del self.partitions[key]
            await self._zk(functools.partial(self.zk.delete, topic_path(topic), recursive=True))
            await self._zk(self.zk.delete, topic_config_path(topic))
            await self._zk(self.zk.delete, admin)
            log.info("deleted topic %s (%d partitions)", topic, len(keys))


__all__ = ["CONTROLLER_EPOCH_PATH", "Controller", "DELETE_TOPICS_PATH", "ISR_CHANGE_NOTIFICATION_PATH", "TOPIC_CONFIG_PATH"]
