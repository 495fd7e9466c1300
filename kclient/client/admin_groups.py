"""Consumer groups kept by the brokers' group coordinators, as an admin
sees them: list the groups, describe their members and assignments, and
read their committed offsets (Kafka's ``AdminClient.listConsumerGroups``,
``describeConsumerGroups`` and ``listConsumerGroupOffsets``; KIP-88 for
OffsetFetch of every partition of a group).

A group's coordinator is the broker FindCoordinator names (the leader of
the group's ``__consumer_offsets`` partition); ListGroups goes to every
broker, each answering for the groups it coordinates. These functions work
on a `kclient.client.cluster.Cluster`; `kclient.client.admin.AdminClient`
exposes them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs
import trio

from kclient.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NONE,
    NOT_COORDINATOR,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    error_for_code,
)
from kclient.protocol.consumer_protocol import decode_assignment
from kclient.protocol.messages import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
)
from kclient.protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse
from kclient.protocol.messages.describe_groups import DescribedGroup, DescribeGroupsRequest, DescribeGroupsResponse
from kclient.protocol.messages.find_coordinator import COORDINATOR_GROUP, FindCoordinatorRequest, FindCoordinatorResponse
from kclient.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kclient.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic, OffsetCommitResponse
from kclient.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

if TYPE_CHECKING:
    from kclient.client.cluster import Cluster
    from kclient.net.connection import BrokerConnection

__all__ = [
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "alter_group_offsets",
    "delete_groups",
    "describe_groups",
    "find_coordinator",
    "list_group_offsets",
    "list_groups",
]

log = logging.getLogger(__name__)

#: Coordinator errors worth asking again after a backoff.
RETRIABLE_COORDINATOR_ERRORS = frozenset({COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR})

class _Answer(Protocol):
    """An answer with a top-level ``error_code`` (a Kafka error code)."""

    @property
    def error_code(self) -> int: ...


_R = TypeVar("_R", bound=_Answer)


@attrs.frozen
class GroupListing:
    """A group as ListGroups names it.

    Attributes:
        group_id: The group.
        protocol_type: ``"consumer"`` for Kafka consumers; empty for a
            group that has only committed offsets.
        coordinator_id: The broker that answered for it.
    """

    group_id: str
    protocol_type: str
    coordinator_id: int


@attrs.frozen
class MemberDescription:
    """One member of a group.

    Attributes:
        member_id: The id the coordinator gave it.
        client_id: Its ``client.id``.
        client_host: The address it connected from.
        assignment: ``((topic, partition), ...)`` it was assigned (empty
            when the assignment is not the ``consumer`` protocol's).
        group_instance_id: Its static ``group.instance.id`` (KIP-345;
            DescribeGroups v4+), None for a dynamic member.
    """

    member_id: str
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]
    group_instance_id: str | None = None


@attrs.frozen
class GroupDescription:
    """A group as DescribeGroups describes it.

    Attributes:
        group_id: The group.
        state: ``Stable``, ``PreparingRebalance``, ``CompletingRebalance``,
            ``Empty`` or ``Dead``.
        protocol_type: ``"consumer"`` for Kafka consumers.
        protocol: The assignor chosen (``range``, ``roundrobin``, ...).
        members: The members (`MemberDescription`).
        coordinator_id: The group's coordinator.
    """

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    coordinator_id: int


async def find_coordinator(cluster: Cluster, group: str, *, timeout_ms: int, backoff_ms: int, key_type: int = COORDINATOR_GROUP) -> tuple[int, BrokerConnection]:
    """The group's coordinator (FindCoordinator, key type 0), or a
    transactional id's (key type 1, KIP-98), retried with ``backoff_ms``
    while it is not available or still loading (a new cluster creates
    ``__transaction_state`` on the first lookup).

    Args:
        cluster: The client's cluster view.
        group: The group id, or the ``transactional.id`` with key type 1.
        timeout_ms: How long to keep trying (ms).
        backoff_ms: Pause between attempts (ms).
        key_type: ``COORDINATOR_GROUP`` (0) or ``COORDINATOR_TRANSACTION``
            (1, which needs FindCoordinator v1+).

    Returns:
        ``(node_id, connection)``.

    Raises:
        CoordinatorNotAvailableError: Still none at the deadline (or the
            broker's other FindCoordinator error).
        UnsupportedVersionError: Key type 1 and a broker without
            FindCoordinator v1+ (Kafka before 0.11: no transactions).
        NoBrokersAvailableError: No broker answered.
    """
    what = "group" if key_type == COORDINATOR_GROUP else "transactional id"
    deadline = trio.current_time() + timeout_ms / 1000
    while True:
        try:
            conn = await cluster.any_connection()
            version = conn.version_for(FIND_COORDINATOR, floor=0 if key_type == COORDINATOR_GROUP else 1, ceiling=2)
            r: FindCoordinatorResponse = await conn.request(FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=key_type), version=version)
            code = r.error_code
            if code == NONE:
                return r.node_id, await cluster.connection(r.host, r.port)
            error: KafkaError = error_for_code(code)(f"FindCoordinator for {what} {group!r}: {r.error_message or error_for_code(code).name}")
            if code not in RETRIABLE_COORDINATOR_ERRORS:
                raise error
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            error = exc
        if trio.current_time() + backoff_ms / 1000 >= deadline:
            raise error
        log.debug("coordinator of %s %r: %s; retrying", what, group, error)
        await trio.sleep(backoff_ms / 1000)


async def list_groups(cluster: Cluster) -> list[GroupListing]:
    """Every group the live brokers coordinate (ListGroups to each).

    Args:
        cluster: The client's cluster view (its metadata is refreshed).

    Returns:
        The groups, sorted by id.

    Raises:
        BrokerResponseError: A broker's ListGroups error
            (e.g. `CoordinatorLoadInProgressError`).
        KafkaConnectionError: A live broker could not be reached.
    """
    md = await cluster.refresh_metadata((), allow_auto_create=False)
    out = []
    for node_id in sorted(md.brokers):
        conn = await cluster.broker_connection(node_id)
        r: ListGroupsResponse = await conn.request(LIST_GROUPS, ListGroupsRequest(), version=conn.version_for(LIST_GROUPS, ceiling=2))
        if r.error_code != NONE:
            raise error_for_code(r.error_code)(f"ListGroups on broker {node_id}")
        out += [GroupListing(g.group_id, g.protocol_type, node_id) for g in r.groups]
    return sorted(out, key=lambda g: g.group_id)


def _assignment(protocol_type: str, data: bytes | memoryview | None) -> tuple[tuple[str, int], ...]:
    if protocol_type != "consumer" or not data:
        return ()
    try:
        decoded = decode_assignment(bytes(data))
    except (ProtocolError, ValueError):
        return ()
    return tuple(sorted((t, p) for t, parts in decoded.assigned_partitions for p in parts))


async def _describe_group(conn: BrokerConnection, group: str) -> DescribedGroup:
    request = DescribeGroupsRequest(groups=[group], include_authorized_operations=False)
    r: DescribeGroupsResponse = await conn.request(DESCRIBE_GROUPS, request, version=conn.version_for(DESCRIBE_GROUPS, ceiling=4))
    g: DescribedGroup = r.groups[0]
    return g


async def describe_groups(cluster: Cluster, groups: list[str], *, timeout_ms: int, backoff_ms: int) -> dict[str, GroupDescription]:
    """DescribeGroups of each group at its coordinator. ``cluster``,
    ``timeout_ms`` (for each group) and ``backoff_ms`` as in
    `find_coordinator`.

    Args:
        groups: The group ids.

    Returns:
        ``{group_id: GroupDescription}``; a group the coordinator does not
        know is described with state ``Dead`` and no members, as Kafka does.

    Raises:
        BrokerResponseError: A group's DescribeGroups error; NOT_COORDINATOR,
            COORDINATOR_LOAD_IN_PROGRESS and COORDINATOR_NOT_AVAILABLE only
            once ``timeout_ms`` has passed (until then the coordinator is
            looked up again, as Kafka's admin client does: a new Kafka 4
            cluster answers NOT_COORDINATOR while its group coordinator
            starts up).
    """
    out = {}
    for group in groups:
        node_id, g = await _at_coordinator(cluster, group, _describe_group, timeout_ms=timeout_ms, backoff_ms=backoff_ms)
        if g.error_code != NONE:
            raise error_for_code(g.error_code)(f"DescribeGroups {group!r}")
        members = tuple(
            MemberDescription(m.member_id, m.client_id, m.client_host, _assignment(g.protocol_type, m.member_assignment), m.group_instance_id)
            for m in g.members
        )
        out[group] = GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members, node_id)
    return out


async def _fetch_all_offsets(conn: BrokerConnection, group: str) -> OffsetFetchResponse:
    r: OffsetFetchResponse = await conn.request(OFFSET_FETCH, OffsetFetchRequest(group_id=group, topics=None), version=conn.version_for(OFFSET_FETCH, floor=2))
    return r


async def list_group_offsets(cluster: Cluster, group: str, *, timeout_ms: int, backoff_ms: int) -> dict[tuple[str, int], int]:
    """Every committed offset of a group (OffsetFetch v2+ with null
    topics, KIP-88), at its coordinator; retried while the coordinator
    loads or moves. Args as `find_coordinator` (``timeout_ms`` bounds the
    OffsetFetch retries too).

    Returns:
        ``{(topic, partition): offset}`` of the partitions with a commit.

    Raises:
        BrokerResponseError: The group's or a partition's OffsetFetch error.
    """
    _, r = await _at_coordinator(cluster, group, _fetch_all_offsets, timeout_ms=timeout_ms, backoff_ms=backoff_ms)
    if r.error_code != NONE:
        raise error_for_code(r.error_code)(f"OffsetFetch of group {group!r}")
    out = {}
    for t in r.topics:
        for p in t.partitions:
            if p.error_code != NONE:
                raise error_for_code(p.error_code)(f"OffsetFetch of group {group!r}, {t.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = p.committed_offset
    return out


async def _delete_group(conn: BrokerConnection, group: str) -> DeletableGroupResult:
    request = DeleteGroupsRequest(groups_names=[group])
    r: DeleteGroupsResponse = await conn.request(DELETE_GROUPS, request, version=conn.version_for(DELETE_GROUPS, ceiling=2))
    result: DeletableGroupResult = r.results[0]
    return result


async def delete_groups(cluster: Cluster, groups: list[str], *, timeout_ms: int, backoff_ms: int) -> dict[str, KafkaError | None]:
    """DeleteGroups (KIP-229) of each group at its coordinator: the group
    and its committed offsets are removed. Args as `find_coordinator`.

    Args:
        groups: The group ids.

    Returns:
        ``{group_id: None}`` for each deleted group, else the group's error:
        `GroupIdNotFoundError` (69, no such group), `GroupNotEmptyError`
        (68, it has members), ... (Kafka's admin client reports them per
        group too).
    """
    out: dict[str, KafkaError | None] = {}
    for group in groups:
        _, r = await _at_coordinator(cluster, group, _delete_group, timeout_ms=timeout_ms, backoff_ms=backoff_ms)
        out[group] = None if r.error_code == NONE else error_for_code(r.error_code)(f"DeleteGroups {group!r}")
    return out


@attrs.frozen
class _CommitAnswer:
    """An OffsetCommit response with its first partition error as
    ``error_code`` (the response has no top-level one)."""

    error_code: int
    topic_partition: tuple[str, int]


async def alter_group_offsets(cluster: Cluster, group: str, offsets: Mapping[tuple[str, int], int], *, timeout_ms: int, backoff_ms: int) -> None:
    """Commit ``offsets`` for a group as an admin does (Kafka's
    ``AdminClient.alterConsumerGroupOffsets``): OffsetCommit with
    generation -1 and no member id, which the coordinator accepts only
    while the group has no members. Args as `find_coordinator`.

    Args:
        offsets: ``{(topic, partition): offset}``.

    Raises:
        BrokerResponseError: A partition's OffsetCommit error
            (`UnknownMemberIdError` or `IllegalGenerationError` while the
            group has members, `UnknownTopicOrPartitionError`, ...).
    """
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset))
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )

    async def commit(conn: BrokerConnection, _group: str) -> _CommitAnswer:
        r: OffsetCommitResponse = await conn.request(OFFSET_COMMIT, request, version=conn.version_for(OFFSET_COMMIT, floor=2, ceiling=8))
        failed = [(p.error_code, (t.name, p.partition_index)) for t in r.topics for p in t.partitions if p.error_code != NONE]
        return _CommitAnswer(*failed[0]) if failed else _CommitAnswer(NONE, ("", -1))

    if not offsets:
        return
    _, answer = await _at_coordinator(cluster, group, commit, timeout_ms=timeout_ms, backoff_ms=backoff_ms)
    if answer.error_code != NONE:
        topic, partition = answer.topic_partition
        raise error_for_code(answer.error_code)(f"OffsetCommit of group {group!r}, {topic}-{partition}")


async def _at_coordinator(
    cluster: Cluster,
    group: str,
    send: Callable[[BrokerConnection, str], Awaitable[_R]],
    *,
    timeout_ms: int,
    backoff_ms: int,
) -> tuple[int, _R]:
    """``send`` to the group's coordinator, looked up again (after
    ``backoff_ms``) while the answer's ``error_code`` says the coordinator
    moved, loads or is not available, until ``timeout_ms`` has passed; then
    the last answer is returned, whatever its error."""
    deadline = trio.current_time() + timeout_ms / 1000
    while True:
        node_id, conn = await find_coordinator(cluster, group, timeout_ms=timeout_ms, backoff_ms=backoff_ms)
        answer = await send(conn, group)
        code = answer.error_code
        if code not in RETRIABLE_COORDINATOR_ERRORS or trio.current_time() + backoff_ms / 1000 >= deadline:
            return node_id, answer
        log.debug("%r at broker %d: %s; looking for the coordinator again", group, node_id, error_for_code(code).name)
        await trio.sleep(backoff_ms / 1000)
