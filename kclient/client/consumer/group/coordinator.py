"""The client side of a consumer group's coordinator (trio): find the
broker that coordinates the group, send it requests, commit and fetch
offsets kept in ``__consumer_offsets``.

Kafka protocol guide (https://kafka.apache.org/protocol), FindCoordinator
(v0 was 0.8.2's ConsumerMetadataRequest / GroupCoordinatorRequest),
OffsetCommit and OffsetFetch; Kafka documentation, "Offset management"
(https://kafka.apache.org/documentation/#impl_offsettracking): the
coordinator of a group is the leader of its ``__consumer_offsets``
partition, and answers

- ``COORDINATOR_NOT_AVAILABLE`` while no broker leads that partition (or
  the offsets topic is being created) and ``NOT_COORDINATOR`` when the
  request reached another broker: the coordinator is looked up again;
- ``COORDINATOR_LOAD_IN_PROGRESS`` while it loads the partition after
  becoming its leader: the same request is retried.

Each is retried after ``retry_backoff_ms`` (Kafka 0.8.2's
``offsets.channel.backoff.ms``); so are lost connections and timeouts
(after which the coordinator is looked up again too). A commit is tried
at most ``commit_retries + 1`` times (``offsets.commit.max.retries``); any
call gives up when ``timeout_ms`` has passed since it started, raising the
last error. Errors a retry cannot fix (an illegal generation, an unknown
member, metadata too large, ...) are raised at once, as the class named
after their Kafka error code.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import trio

from kclient.client.cluster import Cluster
from kclient.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NotCoordinatorError,
    RequestTimedOutError,
    UnstableOffsetCommitError,
    error_for_code,
)
from kclient.net.connection import BrokerConnection
from kclient.protocol.messages import FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH, OFFSET_FETCH_FULL
from kclient.protocol.messages.find_coordinator import COORDINATOR_GROUP, FindCoordinatorRequest, FindCoordinatorResponse
from kclient.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic, OffsetCommitResponse
from kclient.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse
from kclient.protocol.schema import Api, Body

log = logging.getLogger("kclient.consumer")

TopicPartition = tuple[str, int]
#: What a `GroupCoordinator.call`'s check makes of the response.
T = TypeVar("T")

#: Errors after which the coordinator is looked up again.
_REDISCOVER = (CoordinatorNotAvailableError, NotCoordinatorError, KafkaConnectionError, KafkaTimeoutError, RequestTimedOutError)
#: Errors after which the same coordinator is asked again.
_RETRY = (CoordinatorLoadInProgressError,)


class GroupCoordinator:
    """Finds a group's coordinator and talks to it (use on a trio loop).

    Args:
        cluster: The metadata cache and connection pool, or an async
            function building it on first use (e.g. once brokers are known).
        group_id: The ``group.id``.
        retry_backoff_ms: Pause before a retry (ms).
        timeout_ms: Longest a call may take, retries included (ms).
        commit_retries: Retries of a commit after its first attempt.
        group_instance_id: The static member's ``group.instance.id``
            (KIP-345), sent with its commits (OffsetCommit v7+), or None.
    """

    def __init__(
        self,
        cluster: Cluster | Callable[[], Awaitable[Cluster]],
        group_id: str,
        *,
        retry_backoff_ms: int = 1000,
        timeout_ms: int = 30000,
        commit_retries: int = 5,
        group_instance_id: str | None = None,
    ) -> None:
        self.cluster: Cluster | None = cluster if isinstance(cluster, Cluster) else None
        self._cluster_factory = None if isinstance(cluster, Cluster) else cluster
        self.group_id = group_id
        self.retry_backoff_ms = retry_backoff_ms
        self.timeout_ms = timeout_ms
        self.commit_retries = commit_retries
        self.group_instance_id = group_instance_id
        #: ``(node_id, host, port)`` of the coordinator, once found.
        self.coordinator_node: tuple[int, str, int] | None = None
        self._lock = trio.Lock()

    # ------------------------------------------------------------ discovery

    def mark_dead(self, why: object = None) -> None:
        """Forget the coordinator: the next request looks it up again.

        Args:
            why: What happened (logged).
        """
        if self.coordinator_node is not None:
            log.info("group %s: coordinator %d (%s:%d) marked dead: %s", self.group_id, *self.coordinator_node, why)
        self.coordinator_node = None

    async def get_cluster(self) -> Cluster:
        """The cluster, built on first use.

        Returns:
            The `Cluster`.
        """
        if self.cluster is None:
            assert self._cluster_factory is not None
            self.cluster = await self._cluster_factory()
        return self.cluster

    async def _find(self) -> tuple[int, str, int]:
        cluster = await self.get_cluster()
        conn = await cluster.any_connection()
        response: FindCoordinatorResponse = await conn.request(FIND_COORDINATOR, FindCoordinatorRequest(key=self.group_id, key_type=COORDINATOR_GROUP))
        code = response.error_code
        if code != NONE:
            raise error_for_code(code)(f"FindCoordinator for group {self.group_id!r}: {response.error_message or ''}".rstrip(": "))
        node = (response.node_id, response.host, response.port)
        log.info("group %s: coordinator is broker %d (%s:%d)", self.group_id, *node)
        return node

    async def connection(self) -> BrokerConnection:
        """A connection to the coordinator, looked up with FindCoordinator
        if not known (one attempt; `call` retries).

        Returns:
            The connection.

        Raises:
            CoordinatorNotAvailableError: no broker coordinates the group yet.
            NoBrokersAvailableError: no broker answered.
            KafkaConnectionError: the coordinator cannot be reached.
        """
        async with self._lock:
            if self.coordinator_node is None:
                self.coordinator_node = await self._find()
            _, host, port = self.coordinator_node
        cluster = await self.get_cluster()
        return await cluster.connection(host, port)

    # ------------------------------------------------------------ requests

    async def call(
        self,
        api: Api,
        body: Body,
        check: Callable[[Any], T],
        *,
        attempts: int | None = None,
        floor: int | None = None,
        ceiling: int | None = None,
        timeout_ms: int | None = None,
        request_timeout_ms: int | None = None,
        retry: tuple[type[Exception], ...] = (),
    ) -> T:
        """Send a request to the coordinator, retrying as the module
        docstring says.

        Args:
            api: The API.
            body: The request message (one for every version: the fields a
                version lacks are not sent).
            check: ``check(response) -> value``; raises the
                `BrokerResponseError` the response carries (retried when it
                is a coordinator error).
            attempts: At most this many attempts (None: until the timeout).
            floor: Lowest version to use.
            ceiling: Highest version to use.
            timeout_ms: Overrides the coordinator's ``timeout_ms``.
            request_timeout_ms: Response timeout of one attempt (default:
                the cluster's request timeout); a JoinGroup waits for the
                whole rebalance.
            retry: More errors to retry after ``retry_backoff_ms`` (asking
                the same coordinator again).

        Returns:
            What ``check`` returns.

        Raises:
            KafkaError: the last error, once the attempts or the time are
                used up, or at once for an error a retry cannot fix.
        """
        budget = (self.timeout_ms if timeout_ms is None else timeout_ms) / 1000
        deadline = trio.current_time() + budget
        attempt = 0
        retried: tuple[type[Exception], ...] = (*_REDISCOVER, *_RETRY, *retry)
        while True:
            attempt += 1
            try:
                conn = await self.connection()
                version = conn.version_for(api, floor=floor, ceiling=ceiling)
                remaining_ms = max(1, int((deadline - trio.current_time()) * 1000))
                per_request = request_timeout_ms if request_timeout_ms is not None else (await self.get_cluster()).request_timeout_ms
                response = await conn.request(api, body, version=version, timeout_ms=min(remaining_ms, per_request))
                return check(response)
            except retried as exc:
                if isinstance(exc, _REDISCOVER):
                    self.mark_dead(exc)
                if (attempts is not None and attempt >= attempts) or trio.current_time() + self.retry_backoff_ms / 1000 >= deadline:
                    log.warning("group %s: %s failed after %d attempt(s): %s", self.group_id, api.name, attempt, exc)
                    raise
                log.debug("group %s: %s attempt %d failed, retrying: %s", self.group_id, api.name, attempt, exc)
                await trio.sleep(self.retry_backoff_ms / 1000)

    async def commit_offsets(self, offsets: Mapping[TopicPartition, int], *, generation: int = -1, member_id: str = "", metadata: str = "") -> None:
        """Commit offsets (OffsetCommit v1+; Kafka documentation "Offset
        management"). With ``generation`` -1 and an empty ``member_id`` the
        commit is a standalone one, accepted for a group without broker
        members (the ZooKeeper-coordinated consumer's case).

        Args:
            offsets: ``{(topic, partition): next offset to consume}``.
            generation: The group generation (broker-coordinated groups).
            member_id: The member id (broker-coordinated groups); with it,
                a static member's ``group_instance_id`` is sent too.
            metadata: The metadata string stored with each offset.

        Raises:
            FencedInstanceIdError: another member holds this static
                member's instance id.
            BrokerResponseError: a partition's error (the first one), after
                the retries for coordinator errors.
            KafkaConnectionError, KafkaTimeoutError: the coordinator stayed
                unreachable.
        """
        if not offsets:
            return
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset, committed_metadata=metadata, commit_timestamp=-1, committed_leader_epoch=-1)
            )
        body = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=self.group_instance_id if member_id else None,
            retention_time_ms=-1,
            topics=[OffsetCommitRequestTopic(name=t, partitions=parts) for t, parts in by_topic.items()],
        )

        def check(response: OffsetCommitResponse) -> None:
            for t in response.topics:
                for part in t.partitions:
                    code = part.error_code
                    if code != NONE:
                        raise error_for_code(code)(f"OffsetCommit of group {self.group_id!r} for {t.name}-{part.partition_index}")

        await self.call(OFFSET_COMMIT, body, check, attempts=self.commit_retries + 1, floor=1)
        log.debug("group %s: committed %s", self.group_id, dict(offsets))

    async def fetch_offsets(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Fetch committed offsets (OffsetFetch v1+: from
        ``__consumer_offsets``).

        Args:
            keys: ``(topic, partition)`` pairs.

        Returns:
            ``{(topic, partition): committed offset}``; partitions without
            a committed offset are left out.

        Raises:
            BrokerResponseError: a partition's or the response's error,
                after the retries for coordinator errors.
            KafkaConnectionError, KafkaTimeoutError: the coordinator stayed
                unreachable.
        """
        return {key: offset for key, (offset, _, _) in (await self.fetch_committed(keys)).items()}

    async def fetch_committed(self, keys: Iterable[TopicPartition], *, require_stable: bool = False) -> dict[TopicPartition, tuple[int, str, int]]:
        """`fetch_offsets` with the metadata string and leader epoch
        committed with each offset.

        Args:
            keys: ``(topic, partition)`` pairs.
            require_stable: Ask for stable offsets only (OffsetFetch v7+,
                KIP-447), as Kafka's consumer does: while a transaction
                holds a pending offset of a partition the coordinator
                answers UNSTABLE_OFFSET_COMMIT, retried after
                ``retry_backoff_ms`` until ``timeout_ms``. A broker
                without v7 is asked without it (Kafka's consumer does the
                same).

        Returns:
            ``{(topic, partition): (offset, metadata, leader epoch)}``
            (metadata ``""`` when none, leader epoch -1 when not known:
            OffsetFetch v5+, KIP-320); partitions without a committed
            offset are left out.

        Raises:
            BrokerResponseError, KafkaConnectionError, KafkaTimeoutError: as
                `fetch_offsets` (`UnstableOffsetCommitError` when the
                transaction is still open at ``timeout_ms``).
        """
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(set(keys)):
            by_topic.setdefault(topic, []).append(partition)
        if not by_topic:
            return {}
        body = OffsetFetchRequest(
            group_id=self.group_id, topics=[OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()], require_stable=require_stable
        )

        def check(response: OffsetFetchResponse) -> dict[TopicPartition, tuple[int, str, int]]:
            code = response.error_code
            if code != NONE:
                raise error_for_code(code)(f"OffsetFetch of group {self.group_id!r}")
            result: dict[TopicPartition, tuple[int, str, int]] = {}
            for t in response.topics:
                for part in t.partitions:
                    code = part.error_code
                    if code != NONE:
                        raise error_for_code(code)(f"OffsetFetch of group {self.group_id!r} for {t.name}-{part.partition_index}")
                    if part.committed_offset >= 0:
                        result[(t.name, part.partition_index)] = (part.committed_offset, part.metadata or "", part.committed_leader_epoch)
            return result

        if require_stable:  # v8+ nests the answer per group: v7 is the highest this check reads
            return await self.call(OFFSET_FETCH_FULL, body, check, floor=1, ceiling=7, retry=(UnstableOffsetCommitError,))
        return await self.call(OFFSET_FETCH, body, check, floor=1)


__all__ = ["GroupCoordinator"]
