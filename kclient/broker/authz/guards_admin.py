"""The authorization checks of the group, offset, topic-admin and config
APIs, as Kafka's ``KafkaApis`` makes them (see
`kclient.broker.authz.guards_data` for how a guard works):

- OffsetCommit: READ on the group (else every partition
  GROUP_AUTHORIZATION_FAILED), READ on each topic. TxnOffsetCommit: WRITE on
  the transactional id first.
- OffsetFetch: DESCRIBE on the group; the offsets of topics the principal
  may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED (named) or left out
  (all topics).
- JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat:
  READ on the group. DescribeGroups, ConsumerGroupDescribe: DESCRIBE on
  each group. ListGroups: every group with DESCRIBE on the cluster, else
  the groups the principal may DESCRIBE. DeleteGroups: DELETE on each group.
  OffsetDelete: DELETE on the group, READ on each topic.
- FindCoordinator: DESCRIBE on the group or transactional id.
- CreateTopics: CREATE on the cluster or on each topic. DeleteTopics: DELETE
  on each topic. CreatePartitions: ALTER on each topic.
- DescribeConfigs / AlterConfigs / IncrementalAlterConfigs:
  DESCRIBE_CONFIGS / ALTER_CONFIGS on each topic, or on the cluster for
  broker and broker-logger resources.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from kclient.acl import AclOperation, ResourceType
from kclient.broker.authz.check import Call, Check, Guard
from kclient.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.alter_configs import AlterConfigsResourceResponse
from kclient.protocol.messages.consumer_group_describe import ConsumerGroupDescribeGroup
from kclient.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from kclient.protocol.messages.create_partitions import CreatePartitionsTopicResult
from kclient.protocol.messages.create_topics import CreatableTopicResult
from kclient.protocol.messages.delete_groups import DeletableGroupResult
from kclient.protocol.messages.delete_topics import DeletableTopicResult
from kclient.protocol.messages.describe_configs import DescribeConfigsResult
from kclient.protocol.messages.describe_groups import DescribedGroup
from kclient.protocol.messages.find_coordinator import FindCoordinatorResponse
from kclient.protocol.messages.heartbeat import HeartbeatResponse
from kclient.protocol.messages.join_group import JoinGroupResponse
from kclient.protocol.messages.leave_group import LeaveGroupResponse
from kclient.protocol.messages.offset_commit import OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic
from kclient.protocol.messages.offset_delete import OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic
from kclient.protocol.messages.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kclient.protocol.messages.sync_group import SyncGroupResponse
from kclient.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic

__all__ = ["ADMIN_GUARDS"]

#: `DescribeConfigsResource.resource_type` codes (``ConfigResource.Type``).
_CONFIG_TOPIC = 2
_AUTHORIZATION_FAILED = "Authorization failed."


# ---------------------------------------------------------------- offsets


def _commit_topics(topics: list[Any], code: int, topic_cls: Any, partition_cls: Any) -> list[Any]:
    return [topic_cls(name=t.name, partitions=[partition_cls(partition_index=p.partition_index, error_code=code) for p in t.partitions]) for t in topics]


def _commit_guard(response_cls: Any, topic_cls: Any, partition_cls: Any, *, transactional: bool) -> Guard:
    async def guard(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
        if transactional and not check.transactional_id(AclOperation.WRITE, body.transactional_id):
            return response_cls(topics=_commit_topics(body.topics, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, topic_cls, partition_cls))
        if not check.group(AclOperation.READ, body.group_id):
            return response_cls(topics=_commit_topics(body.topics, GROUP_AUTHORIZATION_FAILED, topic_cls, partition_cls))
        allowed, denied = check.split(body.topics, lambda t: t.name, AclOperation.READ)
        if not denied:
            return await call(body)
        response = await call(attrs.evolve(body, topics=allowed)) if allowed else response_cls()
        response.topics.extend(_commit_topics(denied, TOPIC_AUTHORIZATION_FAILED, topic_cls, partition_cls))
        return response

    return guard


def _fetched_topics(check: Check, requested: list[Any] | None, answered: list[Any]) -> list[Any]:
    """OffsetFetch's topics: those the principal may DESCRIBE, the named
    others as TOPIC_AUTHORIZATION_FAILED."""
    kept = [t for t in answered if check.topic(AclOperation.DESCRIBE, t.name, log_denied=requested is not None)]
    if requested is not None:
        names = {t.name for t in kept}
        for t in requested:
            if t.name not in names and not check.topic(AclOperation.DESCRIBE, t.name, log_denied=False):
                kept.append(
                    OffsetFetchResponseTopic(
                        name=t.name,
                        partitions=[OffsetFetchResponsePartition(partition_index=p, error_code=TOPIC_AUTHORIZATION_FAILED) for p in t.partition_indexes],
                    )
                )
    return kept


def _describable(check: Check, requested: list[Any] | None) -> list[Any] | None:
    if requested is None:
        return None
    return [t for t in requested if check.topic(AclOperation.DESCRIBE, t.name)]


async def offset_fetch(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """OffsetFetch: DESCRIBE on each group, DESCRIBE on each topic."""
    if header.api_version >= 8:
        denied = [g for g in body.groups if not check.group(AclOperation.DESCRIBE, g.group_id)]
        allowed = [attrs.evolve(g, topics=_describable(check, g.topics)) for g in body.groups if g not in denied]
        response = await call(attrs.evolve(body, groups=allowed)) if allowed else OffsetFetchResponse()
        by_id = {g.group_id: g for g in body.groups}
        for group in response.groups:
            group.topics = _fetched_topics(check, by_id[group.group_id].topics if group.group_id in by_id else None, group.topics)
        response.groups.extend(OffsetFetchResponseGroup(group_id=g.group_id, error_code=GROUP_AUTHORIZATION_FAILED) for g in denied)
        return response
    if not check.group(AclOperation.DESCRIBE, body.group_id):
        if header.api_version >= 2:
            return OffsetFetchResponse(error_code=GROUP_AUTHORIZATION_FAILED)
        return OffsetFetchResponse(
            topics=[
                OffsetFetchResponseTopic(
                    name=t.name, partitions=[OffsetFetchResponsePartition(partition_index=p, error_code=GROUP_AUTHORIZATION_FAILED) for p in t.partition_indexes]
                )
                for t in body.topics or []
            ]
        )
    response = await call(attrs.evolve(body, topics=_describable(check, body.topics)))
    response.topics = _fetched_topics(check, body.topics, response.topics)
    return response


async def offset_delete(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """OffsetDelete: DELETE on the group, READ on each topic."""
    if not check.group(AclOperation.DELETE, body.group_id):
        return OffsetDeleteResponse(error_code=GROUP_AUTHORIZATION_FAILED)
    allowed, denied = check.split(body.topics, lambda t: t.name, AclOperation.READ)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, topics=allowed))
    response.topics.extend(_commit_topics(denied, TOPIC_AUTHORIZATION_FAILED, OffsetDeleteResponseTopic, OffsetDeleteResponsePartition))
    return response


# ---------------------------------------------------------------- groups


def _group_read(error_response: Callable[[], Any]) -> Guard:
    async def guard(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
        if check.group(AclOperation.READ, body.group_id):
            return await call(body)
        return error_response()

    return guard


async def describe_groups(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """DescribeGroups: DESCRIBE on each group (KIP-430 operations when asked)."""
    allowed, denied = check.split(body.groups, lambda g: g, AclOperation.DESCRIBE, ResourceType.GROUP)
    response = await call(attrs.evolve(body, groups=allowed))
    response.groups.extend(DescribedGroup(error_code=GROUP_AUTHORIZATION_FAILED, group_id=g) for g in denied)
    if body.include_authorized_operations:
        for group in response.groups:
            if group.error_code == 0:
                group.authorized_operations = check.authorized_operations(ResourceType.GROUP, group.group_id)
    return response


async def consumer_group_describe(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """ConsumerGroupDescribe: DESCRIBE on each group."""
    allowed, denied = check.split(body.group_ids, lambda g: g, AclOperation.DESCRIBE, ResourceType.GROUP)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, group_ids=allowed))
    response.groups.extend(ConsumerGroupDescribeGroup(error_code=GROUP_AUTHORIZATION_FAILED, error_message=_AUTHORIZATION_FAILED, group_id=g) for g in denied)
    return response


async def list_groups(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """ListGroups: all with DESCRIBE on the cluster, else the groups the principal may DESCRIBE."""
    response = await call(body)
    if not check.cluster(AclOperation.DESCRIBE, log_denied=False):
        response.groups = [g for g in response.groups if check.group(AclOperation.DESCRIBE, g.group_id, log_denied=False)]
    return response


async def delete_groups(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """DeleteGroups: DELETE on each group."""
    allowed, denied = check.split(body.groups_names, lambda g: g, AclOperation.DELETE, ResourceType.GROUP)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, groups_names=allowed))
    response.results.extend(DeletableGroupResult(group_id=g, error_code=GROUP_AUTHORIZATION_FAILED) for g in denied)
    return response


async def consumer_group_heartbeat(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """ConsumerGroupHeartbeat: READ on the group, DESCRIBE on each subscribed topic."""
    if not check.group(AclOperation.READ, body.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=GROUP_AUTHORIZATION_FAILED, error_message=_AUTHORIZATION_FAILED)
    denied = sorted({t for t in body.subscribed_topic_names or [] if not check.topic(AclOperation.DESCRIBE, t)})
    if denied:
        return ConsumerGroupHeartbeatResponse(error_code=TOPIC_AUTHORIZATION_FAILED, error_message=f"Topics {denied} are not authorized.")
    return await call(body)


async def find_coordinator(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """FindCoordinator: DESCRIBE on the group (key type 0) or transactional id (1)."""
    if body.key_type == 1:
        if not check.transactional_id(AclOperation.DESCRIBE, body.key):
            return FindCoordinatorResponse(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error_message=_AUTHORIZATION_FAILED, node_id=-1, host="", port=-1)
    elif not check.group(AclOperation.DESCRIBE, body.key):
        return FindCoordinatorResponse(error_code=GROUP_AUTHORIZATION_FAILED, error_message=_AUTHORIZATION_FAILED, node_id=-1, host="", port=-1)
    return await call(body)


# ---------------------------------------------------------------- topics and configs


def _in_request_order(names: list[str], results: list[Any]) -> list[Any]:
    order = {n: i for i, n in enumerate(names)}
    return sorted(results, key=lambda r: order.get(r.name, len(order)))


async def create_topics(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """CreateTopics: CREATE on the cluster, else on each topic."""
    if check.cluster(AclOperation.CREATE, log_denied=False):
        return await call(body)
    allowed, denied = check.split(body.topics, lambda t: t.name, AclOperation.CREATE)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, topics=allowed))
    response.topics.extend(CreatableTopicResult(name=t.name, error_code=TOPIC_AUTHORIZATION_FAILED, error_message=_AUTHORIZATION_FAILED) for t in denied)
    response.topics = _in_request_order([t.name for t in body.topics], response.topics)
    return response


async def delete_topics(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """DeleteTopics: DELETE on each topic."""
    allowed, denied = check.split(body.topic_names, lambda t: t, AclOperation.DELETE)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, topic_names=allowed))
    response.responses.extend(DeletableTopicResult(name=t, error_code=TOPIC_AUTHORIZATION_FAILED, error_message=_AUTHORIZATION_FAILED) for t in denied)
    response.responses = _in_request_order(body.topic_names, response.responses)
    return response


async def create_partitions(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
    """CreatePartitions: ALTER on each topic."""
    allowed, denied = check.split(body.topics, lambda t: t.name, AclOperation.ALTER)
    if not denied:
        return await call(body)
    response = await call(attrs.evolve(body, topics=allowed))
    response.results.extend(
        CreatePartitionsTopicResult(name=t.name, error_code=TOPIC_AUTHORIZATION_FAILED, error_message="The topic authorization is failed.") for t in denied
    )
    response.results = _in_request_order([t.name for t in body.topics], response.results)
    return response


def _config_allowed(check: Check, operation: AclOperation, resource: Any) -> int:
    """0, or the error of a config resource the principal may not use."""
    if resource.resource_type == _CONFIG_TOPIC:
        return 0 if check.topic(operation, resource.resource_name) else TOPIC_AUTHORIZATION_FAILED
    return 0 if check.cluster(operation) else CLUSTER_AUTHORIZATION_FAILED


def _configs_guard(operation: AclOperation, results_field: str, result_cls: Any) -> Guard:
    async def guard(check: Check, header: RequestHeader, body: Any, call: Call) -> Any:
        errors = [_config_allowed(check, operation, r) for r in body.resources]
        if not any(errors):
            return await call(body)
        allowed = [r for r, e in zip(body.resources, errors, strict=True) if not e]
        response = await call(attrs.evolve(body, resources=allowed))
        answered = iter(getattr(response, results_field))
        merged = []
        for resource, error in zip(body.resources, errors, strict=True):
            if error:
                merged.append(
                    result_cls(error_code=error, error_message=_AUTHORIZATION_FAILED, resource_type=resource.resource_type, resource_name=resource.resource_name)
                )
            else:
                merged.append(next(answered))
        setattr(response, results_field, merged)
        return response

    return guard


#: API key -> guard.
ADMIN_GUARDS: dict[int, Guard] = {
    8: _commit_guard(OffsetCommitResponse, OffsetCommitResponseTopic, OffsetCommitResponsePartition, transactional=False),
    9: offset_fetch,
    10: find_coordinator,
    11: _group_read(lambda: JoinGroupResponse(error_code=GROUP_AUTHORIZATION_FAILED)),
    12: _group_read(lambda: HeartbeatResponse(error_code=GROUP_AUTHORIZATION_FAILED)),
    13: _group_read(lambda: LeaveGroupResponse(error_code=GROUP_AUTHORIZATION_FAILED)),
    14: _group_read(lambda: SyncGroupResponse(error_code=GROUP_AUTHORIZATION_FAILED)),
    15: describe_groups,
    16: list_groups,
    19: create_topics,
    20: delete_topics,
    28: _commit_guard(TxnOffsetCommitResponse, TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition, transactional=True),
    32: _configs_guard(AclOperation.DESCRIBE_CONFIGS, "results", DescribeConfigsResult),
    33: _configs_guard(AclOperation.ALTER_CONFIGS, "responses", AlterConfigsResourceResponse),
    37: create_partitions,
    42: delete_groups,
    44: _configs_guard(AclOperation.ALTER_CONFIGS, "responses", AlterConfigsResourceResponse),
    47: offset_delete,
    68: consumer_group_heartbeat,
    69: consumer_group_describe,
}
