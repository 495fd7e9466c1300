"""Request handlers of the group APIs: FindCoordinator, OffsetCommit,
TxnOffsetCommit (KIP-98, KIP-447), OffsetFetch, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups,
DescribeGroups, DeleteGroups and OffsetDelete (Kafka protocol guide, "The
Messages"; KIP-229 for DeleteGroups, KIP-496 for OffsetDelete).

Each takes the request header and the request message (the classes of
`kclient.protocol.messages`) and returns the response message; the version
differences are handled here, the semantics in
`kclient.broker.group.coordinator`.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kclient.broker.group.records import OFFSETS_TOPIC, OffsetAndMetadata
from kclient.clock import now_ms
from kclient.errors import (
    COORDINATOR_NOT_AVAILABLE,
    INVALID_GROUP_ID,
    INVALID_REQUEST,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSTABLE_OFFSET_COMMIT,
    UNSUPPORTED_VERSION,
    KafkaError,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from kclient.protocol.messages.describe_groups import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kclient.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kclient.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kclient.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kclient.protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
)
from kclient.protocol.messages.list_groups import (
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kclient.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kclient.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kclient.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kclient.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kclient.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kclient.zk.paths import offset_path

if TYPE_CHECKING:
    from kclient.broker.group.coordinator import GroupCoordinator
    from kclient.broker.metadata_cache import MetadataCache
    from kclient.config import BrokerConfig
    from kclient.zk.client import ZkClient

log = logging.getLogger("kclient.broker.group")

#: The client's host of the current connection (set per connection by the
#: server); JoinGroup records it for DescribeGroups as Kafka does ("/ip").
client_host: contextvars.ContextVar[str] = contextvars.ContextVar("kclient_client_host", default="")


class GroupApis:
    """The group API handlers over one `GroupCoordinator`.

    Args:
        config: The broker's configuration (``offset.metadata.max.bytes``).
        broker_id: This broker's id.
        metadata_cache: The partitions and brokers the cluster has.
        coordinator: The group coordinator.
        zk: The ZooKeeper session (OffsetCommit / OffsetFetch v0), or None
            for a standalone broker.
        clock: The wall clock in ms (commit timestamps).
    """

    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        metadata_cache: MetadataCache,
        coordinator: GroupCoordinator,
        *,
        zk: ZkClient | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.config = config
        self.clock = clock
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.coordinator = coordinator
        self.zk = zk

    # ------------------------------------------------------------ FindCoordinator

    async def find_coordinator(
        self, header: RequestHeader, body: FindCoordinatorRequest, address: tuple[str, int], listener: str | None
    ) -> FindCoordinatorResponse:
        """FindCoordinator v0-2: the leader of the group's
        ``__consumer_offsets`` partition (created on first use);
        COORDINATOR_NOT_AVAILABLE while it has no live leader. Transactional
        ids (key type 1) are coordinated by the broker asked."""
        key_type = body.key_type

        def answer(code: int, node_id: int = -1, host: str = "", port: int = -1, message: str | None = None) -> FindCoordinatorResponse:
            return FindCoordinatorResponse(error_code=code, error_message=message, node_id=node_id, host=host, port=port)

        if key_type == 1:
            return answer(NONE, self.broker_id, *address)
        if key_type != 0:
            return answer(INVALID_REQUEST, message=f"unknown coordinator key type {key_type}")
        group = body.key
        code = await self.coordinator.manager.ensure_topic()
        if code != NONE:
            return answer(code, message=f"{OFFSETS_TOPIC} is being created")
        index = self.coordinator.manager.partition_for(group)
        cache = self.metadata_cache
        meta = cache.partition(OFFSETS_TOPIC, index)
        if meta is None or meta.leader < 0:
            return answer(COORDINATOR_NOT_AVAILABLE, message=f"{OFFSETS_TOPIC}-{index} has no leader")
        if meta.leader == self.broker_id:
            log.debug("FindCoordinator for group %r: this broker (partition %d)", group, index)
            return answer(NONE, self.broker_id, *address)
        node = cache.brokers.get(meta.leader)
        ep = None if node is None else (node.endpoint(listener) or node.endpoint(None))
        if ep is None:
            return answer(COORDINATOR_NOT_AVAILABLE, message=f"broker {meta.leader} is not alive")
        log.debug("FindCoordinator for group %r: broker %d (partition %d)", group, meta.leader, index)
        return answer(NONE, meta.leader, ep.host, ep.port)

    # ------------------------------------------------------------ offsets

    async def offset_commit(self, header: RequestHeader, body: OffsetCommitRequest) -> OffsetCommitResponse:
        """OffsetCommit v0-7. v0 offsets go to ZooKeeper, not to the
        coordinator (`_commit_to_zookeeper`); v1's per-partition commit timestamps are ignored
        (the broker stamps its own time, as Kafka does since KIP-211); v2-4
        ``retention_time_ms`` (-1: the broker's ``offsets.retention.minutes``)
        sets an expire timestamp. Partitions of unknown topics get
        UNKNOWN_TOPIC_OR_PARTITION, metadata over ``offset.metadata.max.bytes``
        OFFSET_METADATA_TOO_LARGE; the rest share the commit's error."""
        version = header.api_version
        group_id = body.group_id
        # The fields of other versions are at their defaults (-1, "", -1).
        generation = body.generation_id_or_member_epoch
        member_id = body.member_id
        results, valid = self.checked_offsets(body.topics, body.retention_time_ms)
        if valid and version == 0:
            results.update(await self._commit_to_zookeeper(group_id, valid))
        elif valid:
            code = await self.coordinator.commit_offsets(group_id, member_id, generation, valid, group_instance_id=body.group_instance_id)
            if code != NONE:
                log.info("OffsetCommit for group %r from %s: error %d", group_id, header.client_id, code)
            for tp in valid:
                results[tp] = code
        topics: dict[str, list[OffsetCommitResponsePartition]] = {}
        for t in body.topics:
            parts = topics.setdefault(t.name, [])
            for p in t.partitions:
                parts.append(OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=results[(t.name, p.partition_index)]))
        return OffsetCommitResponse(topics=[OffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in topics.items()])

    async def txn_offset_commit(self, header: RequestHeader, body: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        """TxnOffsetCommit v0-3 (KIP-98; v2+ committed leader epochs,
        KIP-320; v3+ the consumer's generation, member id and instance id,
        KIP-447): the offsets are appended in the producer's transaction
        and become the group's when it commits
        (`kclient.broker.group.coordinator.GroupCoordinator.commit_txn_offsets`).
        Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION,
        metadata over ``offset.metadata.max.bytes``
        OFFSET_METADATA_TOO_LARGE, the rest share the commit's error, as
        Kafka's ``KafkaApis.handleTxnOffsetCommitRequest``."""
        results, valid = self.checked_offsets(body.topics)
        if valid:
            code = await self.coordinator.commit_txn_offsets(
                body.group_id,
                body.producer_id,
                body.producer_epoch,
                valid,
                member_id=body.member_id,
                generation_id=body.generation_id,
                group_instance_id=body.group_instance_id,
            )
            if code != NONE:
                log.info("TxnOffsetCommit for group %r from %s: error %d", body.group_id, header.client_id, code)
            results.update(dict.fromkeys(valid, code))
        return txn_offset_commit_response(body, results)

    def checked_offsets(self, topics: Iterable[Any], retention_ms: int = -1) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], OffsetAndMetadata]]:
        """An OffsetCommit's or TxnOffsetCommit's partitions checked:
        ``({partition: error} of those refused, {partition: offset} of the
        others)`` (UNKNOWN_TOPIC_OR_PARTITION for an unknown partition,
        OFFSET_METADATA_TOO_LARGE over ``offset.metadata.max.bytes``),
        stamped with the broker's time.

        Args:
            topics: The request's topics (``name``, ``partitions`` with
                ``partition_index``, ``committed_offset``,
                ``committed_metadata``, ``committed_leader_epoch``).
            retention_ms: OffsetCommit v2-4's ``retention_time_ms``: the
                offsets expire this long after now (ms); -1: never set.

        Returns:
            The refused partitions' errors and the valid partitions' offsets.
        """
        now = self.clock()
        expire = now + retention_ms if retention_ms >= 0 else -1
        max_metadata = self.config.offset_metadata_max_bytes
        results: dict[tuple[str, int], int] = {}
        valid: dict[tuple[str, int], OffsetAndMetadata] = {}
        for t in topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                metadata = p.committed_metadata or ""
                if self.metadata_cache.partition(*tp) is None:
                    results[tp] = UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata.encode()) > max_metadata:
                    results[tp] = OFFSET_METADATA_TOO_LARGE
                else:
                    valid[tp] = OffsetAndMetadata(
                        offset=p.committed_offset, metadata=metadata, commit_timestamp=now, leader_epoch=p.committed_leader_epoch, expire_timestamp=expire
                    )
        return results, valid

    async def _commit_to_zookeeper(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> dict[tuple[str, int], int]:
        """OffsetCommit v0 writes each offset to ZooKeeper, at
        ``/consumers/<group>/offsets/<topic>/<partition>`` (Kafka 0.8.1's
        offset storage, where kclient's ZooKeeper-coordinated consumer keeps
        its offsets too), as Kafka does in ZooKeeper mode up to 3.9. Without
        ZooKeeper it is UNSUPPORTED_VERSION, as in Kafka's KRaft mode; Kafka
        4.0 removed v0 (KIP-896).

        Args:
            group_id: The group.
            offsets: The validated partitions' offsets.

        Returns:
            ``{(topic, partition): error code}``.
        """
        zk = self.zk
        if zk is None:
            return dict.fromkeys(offsets, UNSUPPORTED_VERSION)
        if not group_id:
            return dict.fromkeys(offsets, INVALID_GROUP_ID)
        results: dict[tuple[str, int], int] = {}
        for (topic, partition), committed in offsets.items():
            try:
                await trio.to_thread.run_sync(zk.write_persistent, offset_path(group_id, topic, partition), str(committed.offset).encode())
                results[(topic, partition)] = NONE
            except KafkaError as exc:
                log.warning("OffsetCommit v0 of group %r: writing %s-%d to ZooKeeper failed: %s", group_id, topic, partition, exc)
                results[(topic, partition)] = exc.code or UNKNOWN_SERVER_ERROR
        return results

    async def _fetch_from_zookeeper(self, group_id: str, partitions: list[tuple[str, int]]) -> OffsetFetchResponse:
        """OffsetFetch v0 reads ZooKeeper (see `_commit_to_zookeeper`); a
        partition without an offset there, or unknown, is -1 with
        UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers.

        Args:
            group_id: The group.
            partitions: The requested partitions.

        Returns:
            The OffsetFetch v0 response.
        """
        zk = self.zk
        topics: dict[str, list[OffsetFetchResponsePartition]] = {}
        for topic, partition in partitions:
            offset, code = -1, UNKNOWN_TOPIC_OR_PARTITION
            if zk is None:
                code = UNSUPPORTED_VERSION
            elif group_id and self.metadata_cache.partition(topic, partition) is not None:
                try:
                    data = await trio.to_thread.run_sync(zk.get, offset_path(group_id, topic, partition))
                except KafkaError as exc:
                    data, code = None, exc.code or UNKNOWN_SERVER_ERROR
                if data is not None:
                    offset, code = int(data), NONE
            topics.setdefault(topic, []).append(
                OffsetFetchResponsePartition(partition_index=partition, committed_offset=offset, metadata="", error_code=code)
            )
        return OffsetFetchResponse(topics=[OffsetFetchResponseTopic(name=n, partitions=ps) for n, ps in topics.items()], error_code=NONE)

    async def offset_fetch(self, header: RequestHeader, body: OffsetFetchRequest) -> OffsetFetchResponse:
        """OffsetFetch v0-7 (v0 from ZooKeeper, `_fetch_from_zookeeper`):
        the committed offsets of the listed partitions
        (-1 where none), or of every committed partition when ``topics``
        is null (v2+). A coordinator error is the top-level error (v2+)
        and each partition's (v1, and v2+ as Kafka fills both). With
        ``require_stable`` (v7+, KIP-447) a partition with a pending
        transactional offset is -1 with UNSTABLE_OFFSET_COMMIT, as Kafka's
        ``OffsetMetadataManager.fetchOffsets``."""
        version = header.api_version
        group_id = body.group_id
        requested = body.topics
        partitions = None if requested is None else [(t.name, i) for t in requested for i in t.partition_indexes]
        if version == 0:
            return await self._fetch_from_zookeeper(group_id, partitions or [])
        code, committed = self.coordinator.fetch_offsets(group_id, partitions)
        if partitions is None:
            partitions = sorted(committed)
        topics: dict[str, list[OffsetFetchResponsePartition]] = {}
        pending = self.coordinator.manager.pending_txn
        unstable = {tp for tp in partitions if pending.is_pending(group_id, tp)} if body.require_stable and code == NONE else set()
        for tp in partitions:
            c = None if tp in unstable else committed.get(tp)
            topics.setdefault(tp[0], []).append(
                OffsetFetchResponsePartition(
                    partition_index=tp[1],
                    committed_offset=c.offset if c else -1,
                    committed_leader_epoch=c.leader_epoch if c else -1,
                    metadata=c.metadata if c else "",
                    error_code=UNSTABLE_OFFSET_COMMIT if tp in unstable else (code if version < 2 else NONE),
                )
            )
        if code != NONE and version >= 2:
            topics = {}
        return OffsetFetchResponse(topics=[OffsetFetchResponseTopic(name=n, partitions=ps) for n, ps in topics.items()], error_code=code)

    # ------------------------------------------------------------ membership

    async def join_group(self, header: RequestHeader, body: JoinGroupRequest) -> JoinGroupResponse:
        """JoinGroup v0-5 (v4+: MEMBER_ID_REQUIRED for a member without an
        id, KIP-394; v5+: static members' ``group_instance_id``, KIP-345)."""
        version = header.api_version
        result = await self.coordinator.join_group(
            body.group_id,
            body.member_id,
            client_id=header.client_id or "",
            client_host=client_host.get(),
            session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=body.rebalance_timeout_ms,  # -1 (v0): the session timeout
            protocol_type=body.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
            require_known_member_id=version >= 4,
            group_instance_id=body.group_instance_id,  # (None before v5)
        )
        if version < 7 and result.protocol_name is None:
            result = attrs.evolve(result, protocol_name="")  # a string before v7
        return result

    async def sync_group(self, header: RequestHeader, body: SyncGroupRequest) -> SyncGroupResponse:
        """SyncGroup v0-3: the leader's assignments stored, each member's
        own returned (v3+: a static member's ``group_instance_id`` checked,
        KIP-345)."""
        return await self.coordinator.sync_group(
            body.group_id,
            body.generation_id,
            body.member_id,
            {a.member_id: bytes(a.assignment) for a in body.assignments},
            # (v5+; null in the versions without them)
            protocol_type=body.protocol_type,
            protocol_name=body.protocol_name,
            group_instance_id=body.group_instance_id,  # (None before v3)
        )

    async def heartbeat(self, header: RequestHeader, body: HeartbeatRequest) -> HeartbeatResponse:
        """Heartbeat v0-3 (v3+: a static member's ``group_instance_id``
        checked, KIP-345)."""
        code = self.coordinator.heartbeat(body.group_id, body.member_id, body.generation_id, body.group_instance_id)
        return HeartbeatResponse(error_code=code)

    async def leave_group(self, header: RequestHeader, body: LeaveGroupRequest) -> LeaveGroupResponse:
        """LeaveGroup v0-3: one member (v0-2) or a batch answered per
        member (v3+, KIP-345: each with its ``group_instance_id``; a
        static member may be named by its instance id alone)."""
        version = header.api_version
        members: list[tuple[str, str | None]] = [(body.member_id, None)] if version < 3 else [(m.member_id, m.group_instance_id) for m in body.members]
        code, results = self.coordinator.leave_group(body.group_id, members)
        if version < 3 and code == NONE and results:
            code = results[0][2]
        return LeaveGroupResponse(
            error_code=code, members=[MemberResponse(member_id=m, group_instance_id=i, error_code=c) for m, i, c in results]
        )

    # ------------------------------------------------------------ admin

    async def list_groups(self, header: RequestHeader, body: ListGroupsRequest) -> ListGroupsResponse:
        """ListGroups v0-5: the groups this broker coordinates, those in one
        of ``states_filter`` (v4+, KIP-518) and of one of ``types_filter``
        (v5+, KIP-848) when given (an empty filter takes all; names compare
        without case, as Kafka's). Every group here is a ``classic`` one."""
        code, groups = self.coordinator.list_groups()
        states = {s.lower() for s in body.states_filter}
        types = {t.lower() for t in body.types_filter}
        if types and "classic" not in types:
            groups = []
        return ListGroupsResponse(
            error_code=code,
            groups=[
                ListedGroup(group_id=g, protocol_type=t, group_state=s, group_type="classic")
                for g, t, s in groups
                if not states or s.lower() in states
            ],
        )

    async def describe_groups(self, header: RequestHeader, body: DescribeGroupsRequest) -> DescribeGroupsResponse:
        """DescribeGroups v0-4 (v4+: each member's ``group_instance_id``;
        authorized operations are not computed: the KIP-430 "omitted"
        value)."""
        return DescribeGroupsResponse(groups=[self.coordinator.describe_group(g) for g in body.groups])

    async def delete_groups(self, header: RequestHeader, body: DeleteGroupsRequest) -> DeleteGroupsResponse:
        """DeleteGroups v0-1 (KIP-229)."""
        results = []
        for group_id in body.groups_names:
            results.append(DeletableGroupResult(group_id=group_id, error_code=await self.coordinator.delete_group(group_id)))
        return DeleteGroupsResponse(results=results)

    async def offset_delete(self, header: RequestHeader, body: OffsetDeleteRequest) -> OffsetDeleteResponse:
        """OffsetDelete v0 (KIP-496): a partition of a topic this broker
        does not know is answered UNKNOWN_TOPIC_OR_PARTITION, the others as
        `kclient.broker.group.coordinator.GroupCoordinator.delete_offsets`
        decides."""
        cache = self.metadata_cache
        known: list[tuple[str, int]] = []
        unknown: set[tuple[str, int]] = set()
        for t in body.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if cache.partition(*tp) is not None:
                    known.append(tp)
                else:
                    unknown.add(tp)
        code, errors = await self.coordinator.delete_offsets(body.group_id, known)
        if code != NONE:
            return OffsetDeleteResponse(error_code=code)
        errors.update(dict.fromkeys(unknown, UNKNOWN_TOPIC_OR_PARTITION))
        topics: dict[str, list[OffsetDeleteResponsePartition]] = {}
        for (topic, partition), error in errors.items():
            topics.setdefault(topic, []).append(OffsetDeleteResponsePartition(partition_index=partition, error_code=error))
        return OffsetDeleteResponse(error_code=NONE, topics=[OffsetDeleteResponseTopic(name=t, partitions=ps) for t, ps in topics.items()])


def txn_offset_commit_response(body: TxnOffsetCommitRequest, results: dict[tuple[str, int], int]) -> TxnOffsetCommitResponse:
    """The TxnOffsetCommit response of ``body`` with each partition's error
    from ``results``."""
    topics: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
    for t in body.topics:
        parts = topics.setdefault(t.name, [])
        for p in t.partitions:
            parts.append(TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=results[(t.name, p.partition_index)]))
    return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in topics.items()])


__all__ = ["GroupApis", "client_host", "txn_offset_commit_response"]
