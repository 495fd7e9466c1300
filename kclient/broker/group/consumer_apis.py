"""Request handlers of the consumer group protocol (KIP-848):
ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69), and the
group APIs whose answer depends on a group being a consumer-protocol one
(`kclient.broker.group.consumer_coordinator`):

- OffsetCommit to a consumer group carries the member epoch in
  ``generation_id_or_member_epoch``; it is accepted when it is the
  member's current epoch (STALE_MEMBER_EPOCH otherwise, UNKNOWN_MEMBER_ID
  for a member not in the group, UNSUPPORTED_VERSION below v9 as Kafka
  requires of consumer-protocol members) and stored as every commit is;
- JoinGroup on a consumer group with members: INCONSISTENT_GROUP_PROTOCOL;
- ListGroups lists consumer groups with group type ``consumer`` (v5
  ``types_filter``, KIP-848);
- DeleteGroups of a consumer group with members: NON_EMPTY_GROUP;
- OffsetDelete in a consumer group with members: GROUP_SUBSCRIBED_TO_TOPIC
  for the partitions of topics it subscribes to (KIP-496);
- OffsetFetch v6-9: v6-7 as v5 (v7's ``require_stable`` passed on,
  KIP-447); v8+ fetches for several groups at once
  (KIP-709) and v9 names the member and its epoch, checked as for
  OffsetCommit when the group is a consumer group (KIP-848).

Every other request goes on to the classic handlers
(`kclient.broker.group.apis.GroupApis`). The records of what a request
changed (and of members expired meanwhile) are written to
``__consumer_offsets`` before it is answered, as Kafka does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs

from kclient.broker.group.apis import GroupApis, client_host, txn_offset_commit_response
from kclient.broker.group.consumer_coordinator import ConsumerGroupCoordinator
from kclient.clock import now_ms
from kclient.errors import (
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    INCONSISTENT_GROUP_PROTOCOL,
    NON_EMPTY_GROUP,
    NONE,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeAssignment,
    ConsumerGroupDescribeGroup,
    ConsumerGroupDescribeMember,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeTopicPartitions,
)
from kclient.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from kclient.protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse
from kclient.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kclient.protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
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
from kclient.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup
from kclient.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse

if TYPE_CHECKING:
    from kclient.broker.group.consumer_group import ConsumerGroup
    from kclient.broker.group.reconciliation import Partitions

log = logging.getLogger("kclient.broker.group")

#: ``group_type`` of consumer-protocol groups in ListGroups v5+.
CONSUMER_GROUP_TYPE = "consumer"


def _commit_response(body: OffsetCommitRequest, results: Mapping[tuple[str, int], int]) -> OffsetCommitResponse:
    topics: dict[str, list[OffsetCommitResponsePartition]] = {}
    for t in body.topics:
        parts = topics.setdefault(t.name, [])
        for p in t.partitions:
            parts.append(OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=results[(t.name, p.partition_index)]))
    return OffsetCommitResponse(topics=[OffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in topics.items()])


def _describe_assignment(partitions: Partitions, names: Mapping[uuid.UUID, str]) -> ConsumerGroupDescribeAssignment:
    return ConsumerGroupDescribeAssignment(
        topic_partitions=[
            ConsumerGroupDescribeTopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
            for t, ps in sorted(partitions.items(), key=lambda i: names.get(i[0], str(i[0])))
        ]
    )


def describe_group(group: ConsumerGroup) -> ConsumerGroupDescribeGroup:
    """ConsumerGroupDescribe's entry for one group.

    Args:
        group: The group.

    Returns:
        Its state, epochs, assignor and members (current and target
        assignments with topic ids and names).
    """
    names = {info.topic_id: name for name, info in group.topics.items()}
    return ConsumerGroupDescribeGroup(
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor,
        members=[
            ConsumerGroupDescribeMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_describe_assignment(m.assignment.assigned, names),
                target_assignment=_describe_assignment(group.target.get(m.member_id, {}), names),
            )
            for m in group.members.values()
        ],
    )


class ConsumerGroupApis:
    """The handlers of the module docstring.

    Args:
        coordinator: The consumer-protocol groups.
        classic: The classic group handlers, for everything else.
        clock: The wall clock in ms (commit timestamps).
    """

    def __init__(self, coordinator: ConsumerGroupCoordinator, classic: GroupApis, *, clock: Callable[[], int] = now_ms) -> None:
        self.coordinator = coordinator
        self.classic = classic
        self.clock = clock

    async def consumer_group_heartbeat(self, header: RequestHeader, body: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        """ConsumerGroupHeartbeat v0-1 (KIP-848): see
        `kclient.broker.group.consumer_coordinator.ConsumerGroupCoordinator.heartbeat`."""
        response = self.coordinator.heartbeat(body, header.api_version, client_id=header.client_id or "", client_host=client_host.get())
        code = await self.persist(body.group_id)
        if code != NONE and response.error_code == NONE:
            response = ConsumerGroupHeartbeatResponse(error_code=code, error_message="The group's records could not be written.")
        if response.error_code != NONE:
            log.info("ConsumerGroupHeartbeat of group %r from %s: error %d (%s)", body.group_id, header.client_id, response.error_code, response.error_message)
        return response

    async def persist(self, group_id: str) -> int:
        """Write the records of what changed in ``group_id`` and in the
        groups whose members expired meanwhile.

        Args:
            group_id: The group of the request.

        Returns:
            NONE, or the error of writing ``group_id``'s records.
        """
        coordinator = self.coordinator
        groups = {group_id} | coordinator.dirty
        coordinator.dirty.clear()
        result = NONE
        for gid in sorted(groups):
            pending = coordinator.pending_records(gid)
            if pending is None:
                continue
            group, now, records = pending
            code = await coordinator.manager.append(gid, records)
            if code == NONE:
                group.written = now
                coordinator.forget(group)
            else:
                log.info("consumer group %r: %d record(s) not written: error %d", gid, len(records), code)
                coordinator.dirty.add(gid)
                if gid == group_id:
                    result = code
        return result

    async def consumer_group_describe(self, header: RequestHeader, body: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
        """ConsumerGroupDescribe v0 (KIP-848): each group's state, epochs,
        assignor and members; GROUP_ID_NOT_FOUND for a group that is not a
        consumer group here (authorized operations are not computed: the
        KIP-430 "omitted" value)."""
        coordinator = self.coordinator
        coordinator.check_deadlines(coordinator.clock())
        groups = []
        for group_id in body.group_ids:
            code = coordinator.manager.status(group_id)
            group = coordinator.group(group_id) if code == NONE else None
            if code != NONE:
                groups.append(ConsumerGroupDescribeGroup(group_id=group_id, error_code=code))
            elif group is None:
                groups.append(ConsumerGroupDescribeGroup(group_id=group_id, error_code=GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found."))
            else:
                groups.append(describe_group(group))
        return ConsumerGroupDescribeResponse(groups=groups)

    async def offset_commit(self, header: RequestHeader, body: OffsetCommitRequest) -> OffsetCommitResponse:
        """OffsetCommit: a consumer group's commit is checked against the
        member's epoch (module docstring), then stored; any other group's
        goes to the classic handler."""
        group_id = body.group_id
        if header.api_version == 0 or not self.coordinator.is_consumer_group(group_id):
            return await self.classic.offset_commit(header, body)
        code = self.coordinator.validate_offset_commit(group_id, body.member_id, body.generation_id_or_member_epoch, header.api_version)
        if code != NONE:
            log.info("OffsetCommit for consumer group %r from %s: error %d", group_id, header.client_id, code)
            return _commit_response(body, {(t.name, p.partition_index): code for t in body.topics for p in t.partitions})
        return _commit_response(body, await self._store(body))

    async def txn_offset_commit(self, header: RequestHeader, body: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        """TxnOffsetCommit: to a consumer group, checked against the
        member's epoch as Kafka 4's ``ConsumerGroup.validateOffsetCommit``
        for a transactional commit, then appended in the producer's
        transaction; any other group's goes to the classic handler."""
        group_id = body.group_id
        if not self.coordinator.is_consumer_group(group_id):
            return await self.classic.txn_offset_commit(header, body)
        results, valid = self.classic.checked_offsets(body.topics)
        code = self.coordinator.validate_txn_offset_commit(group_id, body.member_id, body.generation_id, body.group_instance_id)
        if code == NONE and valid:
            code = await self.coordinator.manager.store_txn_offsets(group_id, body.producer_id, body.producer_epoch, valid)
        if code != NONE:
            log.info("TxnOffsetCommit for consumer group %r from %s: error %d", group_id, header.client_id, code)
        results.update(dict.fromkeys(valid, code))
        return txn_offset_commit_response(body, results)

    async def _store(self, body: OffsetCommitRequest) -> dict[tuple[str, int], int]:
        """Store a validated commit's offsets: ``{(topic, partition): error}``."""
        results, valid = self.classic.checked_offsets(body.topics)
        if valid:
            code = await self.coordinator.manager.store_offsets(body.group_id, valid)
            results.update(dict.fromkeys(valid, code))
        return results

    async def offset_fetch(self, header: RequestHeader, body: OffsetFetchRequest) -> OffsetFetchResponse:
        """OffsetFetch v0-9: v0-7 by the classic handler (v6 answers as
        v5, flexible; v7+ ``require_stable``, KIP-447);
        v8-9 group by group (module docstring)."""
        version = header.api_version
        if version < 8:
            return await self.classic.offset_fetch(header, body)
        as_v7 = attrs.evolve(header, api_version=7)
        groups = []
        for g in body.groups:
            code = self.coordinator.validate_offset_fetch(g.group_id, g.member_id, g.member_epoch) if version >= 9 else NONE
            if code != NONE:
                groups.append(OffsetFetchResponseGroup(group_id=g.group_id, error_code=code))
                continue
            one = await self.classic.offset_fetch(as_v7, OffsetFetchRequest(group_id=g.group_id, topics=g.topics, require_stable=body.require_stable))
            groups.append(OffsetFetchResponseGroup(group_id=g.group_id, topics=one.topics, error_code=one.error_code))
        return OffsetFetchResponse(groups=groups)

    async def join_group(self, header: RequestHeader, body: JoinGroupRequest) -> JoinGroupResponse:
        """JoinGroup: INCONSISTENT_GROUP_PROTOCOL for a consumer group with
        members; an empty one is forgotten and the group becomes a
        classic one."""
        if self.coordinator.is_active(body.group_id):
            return JoinGroupResponse(
                error_code=INCONSISTENT_GROUP_PROTOCOL, generation_id=-1, protocol_type=None, protocol_name="" if header.api_version < 7 else None, leader="", member_id=body.member_id
            )
        if self.coordinator.is_consumer_group(body.group_id):
            self.coordinator.drop(body.group_id)
            await self.persist(body.group_id)
        return await self.classic.join_group(header, body)

    async def list_groups(self, header: RequestHeader, body: ListGroupsRequest) -> ListGroupsResponse:
        """ListGroups: the classic groups, and the consumer groups as group
        type ``consumer`` (protocol type ``consumer``), each filtered by
        ``states_filter`` / ``types_filter`` when given (without case)."""
        response = await self.classic.list_groups(header, body)
        consumer = self.coordinator.list_groups()
        ids = {g for g, _ in consumer}
        response.groups = [g for g in response.groups if g.group_id not in ids]
        states = {s.lower() for s in body.states_filter}
        types = {t.lower() for t in body.types_filter}
        if not types or CONSUMER_GROUP_TYPE in types:
            response.groups.extend(
                ListedGroup(group_id=g, protocol_type="consumer", group_state=s, group_type=CONSUMER_GROUP_TYPE)
                for g, s in consumer
                if not states or s.lower() in states
            )
        return response

    async def offset_delete(self, header: RequestHeader, body: OffsetDeleteRequest) -> OffsetDeleteResponse:
        """OffsetDelete (KIP-496): in a consumer group with members, the
        partitions of subscribed topics are refused with
        GROUP_SUBSCRIBED_TO_TOPIC and the others deleted by the classic
        handler (NONE where nothing was committed); any other group goes to
        the classic handler."""
        group = self.coordinator.group(body.group_id) if self.coordinator.is_active(body.group_id) else None
        if group is None:
            return await self.classic.offset_delete(header, body)
        subscribed = set(group.topics) | group.subscribed_topic_names()
        rest = attrs.evolve(body, topics=[t for t in body.topics if t.name not in subscribed])
        response = await self.classic.offset_delete(header, rest) if rest.topics else OffsetDeleteResponse()
        if response.error_code not in (NONE, GROUP_ID_NOT_FOUND):
            return response
        results = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
        topics = [
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=GROUP_SUBSCRIBED_TO_TOPIC if t.name in subscribed else results.get((t.name, p.partition_index), NONE),
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ]
        return OffsetDeleteResponse(error_code=NONE, topics=topics)

    async def delete_groups(self, header: RequestHeader, body: DeleteGroupsRequest) -> DeleteGroupsResponse:
        """DeleteGroups: NON_EMPTY_GROUP for a consumer group with members;
        an empty one is deleted with its offsets (NONE even without
        offsets); other groups as the classic handler answers."""
        coordinator = self.coordinator
        refused = {g for g in body.groups_names if coordinator.is_active(g)}
        empty = {g for g in body.groups_names if g not in refused and coordinator.is_consumer_group(g)}
        rest = [g for g in body.groups_names if g not in refused]
        classic = await self.classic.delete_groups(header, attrs.evolve(body, groups_names=rest)) if rest else DeleteGroupsResponse()
        codes = {r.group_id: r.error_code for r in classic.results}
        for g in empty:
            coordinator.drop(g)
            code = await self.persist(g)
            if codes.get(g) == GROUP_ID_NOT_FOUND or code != NONE:
                codes[g] = code
        codes.update(dict.fromkeys(refused, NON_EMPTY_GROUP))
        return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=g, error_code=codes[g]) for g in body.groups_names])


__all__ = ["CONSUMER_GROUP_TYPE", "ConsumerGroupApis", "describe_group"]
