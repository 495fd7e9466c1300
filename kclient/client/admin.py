"""The admin client: create, delete, list and describe topics (KIP-4).

`AdminClient` is blocking, like the other blocking clients: one trio loop
in a background thread (`kclient.sync.LoopThread`) runs `TrioAdminClient`.

CreateTopics and DeleteTopics go to the controller that Metadata v1+ names
(``controller_id``), as Kafka's admin client sends them; a broker that
answers NOT_CONTROLLER (41) — the controller moved — makes the client
refresh the metadata and send the topics again to the new controller
until the call's timeout. List and describe read one Metadata response
(Kafka protocol guide, https://kafka.apache.org/protocol#The_Messages_Metadata),
from the controller when it is known: it answered CreateTopics and
DeleteTopics only once its own metadata showed the change, so a client
reads back what it did (the other brokers learn it moments later).

Example::

    from kclient.client.admin import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        admin.create_topics([NewTopic("events", 6, 3, config={"min.insync.replicas": "2"})])
        for p in admin.describe_topics(["events"])["events"].partitions:
            print(p.partition, p.leader, p.replicas, p.isr)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import trio

from kclient.acl import AclBinding, AclBindingFilter
from kclient.client import admin_acls, admin_configs, admin_groups, admin_offsets, admin_quotas, admin_scram, admin_transactions
from kclient.client.admin_acls import AclDeletion
from kclient.client.admin_configs import AlterConfigOp, ConfigEntry, ConfigResource, ConfigSynonym
from kclient.client.admin_groups import GroupDescription, GroupListing
from kclient.client.admin_quotas import ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilterComponent
from kclient.client.admin_scram import DescribeUserScramCredentialsResult, UserScramCredentialDeletion, UserScramCredentialUpsertion
from kclient.client.admin_transactions import TransactionDescription, TransactionListing
from kclient.client.cluster import BrokerInfo, Cluster, ClusterMetadata, PartitionInfo, no_brokers_available, request_metadata
from kclient.client.loop_closer import LoopClientCloser
from kclient.config.admin import AdminConfig
from kclient.errors import (
    NONE,
    NOT_CONTROLLER,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    error_for_code,
)
from kclient.net.connection import BrokerConnection
from kclient.net.settings import ConnectionSettings
from kclient.protocol.messages import CREATE_TOPICS, DELETE_TOPICS
from kclient.protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kclient.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kclient.protocol.schema import Api, Body
from kclient.sync import ClosingClient, LoopThread, track

__all__ = [
    "AclDeletion",
    "AdminClient",
    "AlterConfigOp",
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilterComponent",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSynonym",
    "GroupDescription",
    "GroupListing",
    "NewTopic",
    "TopicDescription",
    "TransactionDescription",
    "TransactionListing",
    "TrioAdminClient",
]

log = logging.getLogger(__name__)

#: Kafka's internal topics (Metadata v1+ marks them ``is_internal``).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class TopicResult(Protocol):
    """A topic's entry of a CreateTopics or DeleteTopics response."""

    @property
    def name(self) -> str | None: ...

    @property
    def error_code(self) -> int: ...

    @property
    def error_message(self) -> str | None: ...


def _config_dict(value: Mapping[str, str] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (value or {}).items()}


def _assignment(value: Mapping[int, Sequence[int]] | None) -> dict[int, tuple[int, ...]] | None:
    return None if value is None else {int(p): tuple(int(b) for b in r) for p, r in value.items()}


@attrs.frozen
class NewTopic:
    """A topic to create: ``NewTopic(name, num_partitions, replication_factor,
    replica_assignment=None, config={})``.

    Attributes:
        name: The topic name.
        num_partitions: Partition count; -1 for the broker's
            ``num.partitions`` (KIP-464).
        replication_factor: Replicas per partition; -1 for the broker's
            ``default.replication.factor`` (KIP-464).
        replica_assignment: ``{partition: [broker ids]}``, the first the
            preferred leader, instead of the counts (which must then be -1).
        config: Topic configs (``{"min.insync.replicas": "2"}``).
    """

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: dict[int, tuple[int, ...]] | None = attrs.field(default=None, converter=_assignment)
    config: dict[str, str] = attrs.field(factory=dict, converter=_config_dict)

    def to_request(self) -> CreatableTopic:
        """The topic's entry of a CreateTopics request.

        Returns:
            The entry: the counts, or -1 for both with a replica
                assignment.
        """
        assignments = [CreatableReplicaAssignment(partition_index=p, broker_ids=list(r)) for p, r in sorted((self.replica_assignment or {}).items())]
        return CreatableTopic(
            name=self.name,
            num_partitions=-1 if assignments else self.num_partitions,
            replication_factor=-1 if assignments else self.replication_factor,
            assignments=assignments,
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in sorted(self.config.items())],
        )


@attrs.frozen
class TopicDescription:
    """A topic as Metadata describes it: each partition's leader (-1 for
    none), replicas and in-sync replicas (`kclient.client.cluster.PartitionInfo`)."""

    name: str
    partitions: tuple[PartitionInfo, ...]
    internal: bool = False


@attrs.frozen
class ClusterDescription:
    """The brokers, the controller and the cluster id from Metadata."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


class TrioAdminClient:
    """The admin client's trio core (see the module docstring).

    Call `attach` with a nursery before anything else, and `aclose` at the
    end.

    Args:
        config: An `AdminConfig` or Kafka property names
            (``{"bootstrap.servers": "h:9092"}``).

    Raises:
        ConfigError: A bad or missing property.
    """

    def __init__(self, config: AdminConfig | Mapping[str, Any]) -> None:
        self.config = AdminConfig.from_properties(config)
        self._cluster: Cluster | None = None

    def attach(self, nursery: trio.Nursery) -> None:
        """Use ``nursery`` for the connections' reader tasks.

        Args:
            nursery: A nursery of the loop the client runs on.
        """
        c = self.config
        settings = ConnectionSettings.with_timeout(c.request_timeout_ms, client_id=c.client_id, security=c.security)
        self._cluster = Cluster.open(nursery, c.bootstrap_servers, settings, retry_backoff_ms=c.retry_backoff_ms)

    @property
    def cluster(self) -> Cluster:
        assert self._cluster is not None, "attach() first"
        return self._cluster

    async def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        """One Metadata request (no auto-creation).

        Args:
            topics: The topics to describe; None for every topic.

        Returns:
            The snapshot, with ``controller_id`` (-1 from a v0 broker).

        Raises:
            NoBrokersAvailableError: No broker answered.
        """
        last: BaseException | None = None
        for _ in range(max(2, len(self.config.bootstrap_servers) + len(self.cluster.metadata.brokers))):
            try:
                metadata = await request_metadata(await self._reader(), topics)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
                await trio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            self.cluster.metadata = metadata
            return metadata
        raise no_brokers_available("no broker answered Metadata", last)

    async def _reader(self) -> BrokerConnection:
        # The last known controller first: it answered this client's
        # CreateTopics / DeleteTopics only once its own metadata showed the
        # change, so what the client did is what it reads back.
        md = self.cluster.metadata
        if md.controller_id in md.brokers:
            try:
                return await self.cluster.broker_connection(md.controller_id)
            except KafkaConnectionError:
                pass
        return await self.cluster.any_connection()

    async def _controller(self) -> BrokerConnection:
        md = await self.metadata([])
        if md.controller_id >= 0 and md.controller_id in md.brokers:
            return await self.cluster.broker_connection(md.controller_id)
        return await self.cluster.any_connection()

    async def _to_controller(
        self, api: Api, names: list[str], body_for: Callable[[list[str], int], Body], results_of: Callable[[Any], Iterable[TopicResult]], timeout_ms: int
    ) -> dict[str, tuple[int, str | None]]:
        """Send ``api`` for ``names`` to the controller; topics answered
        NOT_CONTROLLER, and all of them after a lost connection, are sent
        again to the new controller until ``timeout_ms`` has passed."""
        deadline = trio.current_time() + timeout_ms / 1000
        results: dict[str, tuple[int, str | None]] = {}
        pending = list(names)
        backoff = self.config.retry_backoff_ms / 1000
        while pending:
            left_ms = int((deadline - trio.current_time()) * 1000)
            try:
                conn = await self._controller()
                version = conn.version_for(api, ceiling=4 if api is CREATE_TOPICS else 3)
                response = await conn.request(
                    api, body_for(pending, max(0, left_ms)), version=version, timeout_ms=max(0, left_ms) + self.config.request_timeout_ms
                )
            except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailableError) as exc:
                if trio.current_time() + backoff >= deadline:
                    raise
                log.info("%s failed (%s); retrying", api.name, exc)
                await trio.sleep(backoff)
                continue
            retry = []
            for entry in results_of(response):
                code, name = entry.error_code, entry.name or ""
                if code == NOT_CONTROLLER:
                    retry.append(name)
                results[name] = (code, entry.error_message)
            pending = retry
            if pending:
                if trio.current_time() + backoff >= deadline:
                    break
                log.info("%s: broker %s is not the controller; retrying", api.name, conn)
                await trio.sleep(backoff)
        return results

    @staticmethod
    def _raise_first(results: Mapping[str, tuple[int, str | None]], names: Sequence[str], what: str) -> None:
        failed = [(n, *results[n]) for n in names if n in results and results[n][0] != NONE]
        if not failed:
            return
        name, code, message = failed[0]
        # The broker's message may name the topic itself (Kafka's "Topic 'x'
        # already exists."): then it is not prefixed with the name again.
        text = message if message and repr(name) in message else f"{what} {name!r}: {message or error_for_code(code).name}"
        if len(failed) > 1:
            text += "; also " + ", ".join(f"{n!r}: {error_for_code(c).name}" for n, c, _ in failed[1:])
        raise error_for_code(code)(text)

    async def create_topics(self, new_topics: Sequence[NewTopic], timeout_ms: int | None = None, validate_only: bool = False) -> None:
        """CreateTopics (API key 19) to the controller; returns once each
        topic's leaders are elected (the broker waits up to ``timeout_ms``).
        When several topics fail, the first one's error is raised and its
        message names the others.

        Args:
            new_topics: The topics.
            timeout_ms: How long the whole call may take (ms); default
                ``default.api.timeout.ms``.
            validate_only: Only check the request (KIP-108).

        Raises:
            TopicAlreadyExistsError: 36.
            InvalidReplicationFactorError: 38, more replicas than live brokers.
            InvalidPartitionsError: 37.
            InvalidReplicaAssignmentError: 39.
            InvalidConfigurationError: 40, an unknown topic config.
            InvalidTopicError: 17, an illegal name.
            RequestTimedOutError: 7, created but the leaders were not all
                elected within ``timeout_ms``.
            NotControllerError: 41, still no controller at the deadline.
            NoBrokersAvailableError: No broker answered.
        """
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        by_name = {t.name: t for t in new_topics}

        def body(names: list[str], left_ms: int) -> CreateTopicsRequest:
            return CreateTopicsRequest(topics=[by_name[n].to_request() for n in names], timeout_ms=left_ms, validate_only=validate_only)

        def results_of(response: CreateTopicsResponse) -> Iterable[TopicResult]:
            return response.topics

        names = list(by_name)
        results = await self._to_controller(CREATE_TOPICS, names, body, results_of, timeout)
        self._raise_first(results, names, "topic")

    async def delete_topics(self, names: Sequence[str], timeout_ms: int | None = None) -> None:
        """DeleteTopics (API key 20) to the controller; returns once the
        broker no longer has the topics (it waits up to ``timeout_ms``).

        Args:
            names: The topics.
            timeout_ms: How long the whole call may take (ms); default
                ``default.api.timeout.ms``.

        Raises:
            UnknownTopicOrPartitionError: 3, no such topic.
            InvalidRequestError: 42, the brokers have
                ``delete.topic.enable=false``.
            RequestTimedOutError: 7, marked for deletion but not yet gone.
            NotControllerError: 41, still no controller at the deadline.
            NoBrokersAvailableError: No broker answered.
        """
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        names = list(dict.fromkeys(names))

        def body(pending: list[str], left_ms: int) -> DeleteTopicsRequest:
            return DeleteTopicsRequest(topic_names=pending, timeout_ms=left_ms)

        def results_of(response: DeleteTopicsResponse) -> Iterable[TopicResult]:
            return response.responses

        results = await self._to_controller(DELETE_TOPICS, names, body, results_of, timeout)
        self._raise_first(results, names, "topic")

    async def list_topics(self, include_internal: bool = False) -> list[str]:
        """The topic names, sorted.

        Args:
            include_internal: Include ``__consumer_offsets`` and the like.

        Returns:
            The names.
        """
        md = await self.metadata(None)
        names = {n for n, code in md.topic_errors.items() if code == NONE}
        if not include_internal:
            names -= INTERNAL_TOPICS
        return sorted(names)

    async def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicDescription]:
        """Each topic's partitions: leader, replicas, ISR (Metadata).

        Args:
            names: The topics; None for every topic.

        Returns:
            ``{name: TopicDescription}``.

        Raises:
            UnknownTopicOrPartitionError: A named topic does not exist
                (or the topic's other Metadata error).
        """
        md = await self.metadata(None if names is None else list(names))
        out = {}
        for name in sorted(md.topic_errors) if names is None else names:
            code = md.topic_errors.get(name, NONE)
            if code != NONE:
                raise error_for_code(code)(f"topic {name!r}")
            out[name] = TopicDescription(name, md.partitions_for(name), name in INTERNAL_TOPICS)
        return out

    async def describe_cluster(self) -> ClusterDescription:
        """The brokers, the controller and the cluster id.

        Returns:
            A `ClusterDescription`.
        """
        md = await self.metadata([])
        return ClusterDescription(md.cluster_id, md.controller_id, tuple(md.brokers[b] for b in sorted(md.brokers)))

    async def list_consumer_groups(self) -> list[GroupListing]:
        """Every group the brokers coordinate (ListGroups to each broker).

        Returns:
            `GroupListing` per group, sorted by id.
        """
        return await admin_groups.list_groups(self.cluster)

    async def describe_consumer_groups(self, groups: Sequence[str]) -> dict[str, GroupDescription]:
        """Each group's state, protocol and members with their
        assignments (DescribeGroups at the group's coordinator).

        Args:
            groups: The group ids.

        Returns:
            ``{group_id: GroupDescription}``.
        """
        c = self.config
        return await admin_groups.describe_groups(self.cluster, list(groups), timeout_ms=c.default_api_timeout_ms, backoff_ms=c.retry_backoff_ms)

    async def list_consumer_group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (OffsetFetch of all partitions,
        KIP-88).

        Args:
            group: The group id.

        Returns:
            ``{(topic, partition): offset}``.
        """
        c = self.config
        return await admin_groups.list_group_offsets(self.cluster, group, timeout_ms=c.default_api_timeout_ms, backoff_ms=c.retry_backoff_ms)

    async def delete_consumer_groups(self, groups: Sequence[str]) -> dict[str, KafkaError | None]:
        """Delete groups and their committed offsets (DeleteGroups,
        KIP-229; `kclient.client.admin_groups.delete_groups`).

        Args:
            groups: The group ids.

        Returns:
            ``{group_id: None}`` per deleted group, else its error
            (`GroupIdNotFoundError`, `GroupNotEmptyError`, ...).
        """
        c = self.config
        return await admin_groups.delete_groups(self.cluster, list(groups), timeout_ms=c.default_api_timeout_ms, backoff_ms=c.retry_backoff_ms)

    async def alter_consumer_group_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit offsets for a group that has no members (OffsetCommit
        with generation -1; `kclient.client.admin_groups.alter_group_offsets`).

        Args:
            group: The group id.
            offsets: ``{(topic, partition): offset}``.

        Raises:
            BrokerResponseError: A partition's OffsetCommit error
                (`UnknownMemberIdError` while the group has members, ...).
        """
        c = self.config
        await admin_groups.alter_group_offsets(self.cluster, group, dict(offsets), timeout_ms=c.default_api_timeout_ms, backoff_ms=c.retry_backoff_ms)

    async def list_transactions(
        self, states: Collection[str] | None = None, producer_ids: Collection[int] | None = None, duration_filter_ms: int | None = None
    ) -> list[TransactionListing]:
        """The transactional ids the brokers coordinate (ListTransactions
        to each broker, KIP-664; Kafka's ``Admin.listTransactions``).

        Args:
            states: Only these states (``Ongoing``, ``CompleteCommit``, ...);
                None for every state.
            producer_ids: Only these producer ids; None for all.
            duration_filter_ms: Only transactions running longer than this
                (ms, KIP-994); None for all.

        Returns:
            `TransactionListing` per transactional id, sorted by id.

        Raises:
            BrokerResponseError: A broker's ListTransactions error.
            UnsupportedVersionError: A broker without ListTransactions (or
                without v1, for ``duration_filter_ms``).
        """
        c = self.config
        return await admin_transactions.list_transactions(
            self.cluster,
            states=states,
            producer_ids=producer_ids,
            duration_filter_ms=duration_filter_ms,
            timeout_ms=c.default_api_timeout_ms,
            backoff_ms=c.retry_backoff_ms,
        )

    async def describe_transactions(self, transactional_ids: Sequence[str]) -> dict[str, TransactionDescription]:
        """Each transactional id's state, producer id and epoch, timeout,
        start time and partitions (DescribeTransactions at its coordinator,
        KIP-664; Kafka's ``Admin.describeTransactions``).

        Args:
            transactional_ids: The ``transactional.id`` values.

        Returns:
            ``{transactional_id: TransactionDescription}``.

        Raises:
            TransactionalIdNotFoundError: An id the coordinator does not know.
            BrokerResponseError: An id's other DescribeTransactions error.
        """
        c = self.config
        return await admin_transactions.describe_transactions(
            self.cluster, list(transactional_ids), timeout_ms=c.default_api_timeout_ms, backoff_ms=c.retry_backoff_ms
        )

    async def list_offsets(self, query: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Partition offsets at a time (ListOffsets v1+ to each leader;
        `kclient.client.admin_offsets.list_offsets`).

        Args:
            query: ``{(topic, partition): timestamp}``: ms since the epoch,
                or -1 (latest) / -2 (earliest).

        Returns:
            ``{(topic, partition): offset}``; -1 for a timestamp later
            than every record.

        Raises:
            UnknownTopicOrPartitionError: A partition does not exist.
        """
        return await admin_offsets.list_offsets(self.cluster, dict(query))

    async def describe_configs(
        self, resources: Sequence[ConfigResource], names: Sequence[str] | None = None, include_synonyms: bool = False
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Configs of topics, brokers or broker loggers (DescribeConfigs;
        `kclient.client.admin_configs.describe_configs`).

        Args:
            resources: The `ConfigResource` values
                (``ConfigResource("topic", "events")``).
            names: Only these configs; None for all.
            include_synonyms: Also list each config's synonyms.

        Returns:
            ``{resource: {name: ConfigEntry}}``.

        Raises:
            UnknownTopicOrPartitionError: 3, no such topic.
            BrokerResponseError: The resource's other error.
        """
        return await admin_configs.describe_configs(self.cluster, resources, names, include_synonyms=include_synonyms)

    async def incremental_alter_configs(self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], validate_only: bool = False) -> None:
        """Change configs (IncrementalAlterConfigs, KIP-339;
        `kclient.client.admin_configs.incremental_alter_configs`).

        Args:
            changes: ``{ConfigResource: [AlterConfigOp, ...]}``
                (``{ConfigResource("topic", "events"): [AlterConfigOp("retention.ms", "60000")]}``).
            validate_only: Only check the changes.

        Raises:
            InvalidConfigurationError: 40, an unknown config.
            InvalidRequestError: 42, a bad value.
            UnknownTopicOrPartitionError: 3, no such topic.
            BrokerResponseError: The resource's other error.
        """
        await admin_configs.incremental_alter_configs(self.cluster, changes, validate_only=validate_only)

    async def describe_client_quotas(
        self, components: Sequence[ClientQuotaFilterComponent] = (), strict: bool = False
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Client quotas (DescribeClientQuotas, KIP-546;
        `kclient.client.admin_quotas.describe_client_quotas`).

        Args:
            components: The filter (``[ClientQuotaFilterComponent.of_entity("user", "alice")]``).
            strict: Only entities with no other component.

        Returns:
            ``{(("user", "alice"),): {"producer_byte_rate": 1024.0}}``.

        Raises:
            InvalidRequestError: 42, a malformed filter.
        """
        return await admin_quotas.describe_client_quotas(self.cluster, components, strict=strict)

    async def alter_client_quotas(self, alterations: Sequence[ClientQuotaAlteration], validate_only: bool = False) -> None:
        """Set or remove client quotas (AlterClientQuotas, KIP-546;
        `kclient.client.admin_quotas.alter_client_quotas`).

        Args:
            alterations: ``[ClientQuotaAlteration({"user": "alice"}, {"producer_byte_rate": 1024})]``
                (a value of None removes the key; a name of None is the default entity).
            validate_only: Only check the changes.

        Raises:
            InvalidRequestError: 42, an unknown entity type or key, a value <= 0.
        """
        await admin_quotas.alter_client_quotas(self.cluster, alterations, validate_only=validate_only)

    async def describe_user_scram_credentials(self, users: Sequence[str] | None = None) -> DescribeUserScramCredentialsResult:
        """Users' SCRAM mechanisms and iteration counts (DescribeUserScramCredentials,
        KIP-554; `kclient.client.admin_scram.describe_user_scram_credentials`:
        Args, Returns and Raises as there)."""
        return await admin_scram.describe_user_scram_credentials(self.cluster, users)

    async def alter_user_scram_credentials(
        self, alterations: Sequence[UserScramCredentialUpsertion | UserScramCredentialDeletion]
    ) -> dict[str, KafkaError | None]:
        """Add, replace or remove SCRAM credentials (AlterUserScramCredentials,
        KIP-554; `kclient.client.admin_scram.alter_user_scram_credentials`:
        Args, Returns and Raises as there)."""
        return dict(await admin_scram.alter_user_scram_credentials(self.cluster, alterations))
    async def create_acls(self, bindings: Sequence[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        """Create ACL bindings (CreateAcls, KIP-11;
        `kclient.client.admin_acls.create_acls`; Kafka's ``createAcls``).

        Args:
            bindings: `kclient.acl.AclBinding` values.

        Returns:
            ``{binding: None}`` per created binding, else its error
            (`InvalidRequestError`, `ClusterAuthorizationFailedError`,
            `SecurityDisabledError` without an authorizer, ...).

        Raises:
            ValueError: A binding with an ANY, MATCH or UNKNOWN field.
        """
        return await admin_acls.create_acls(self.cluster, bindings)

    async def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACL bindings matching a filter (DescribeAcls;
        `kclient.client.admin_acls.describe_acls`; Kafka's ``describeAcls``).

        Args:
            acl_filter: A `kclient.acl.AclBindingFilter`
                (``AclBindingFilter()`` matches all).

        Returns:
            The bindings, sorted.

        Raises:
            BrokerResponseError: The broker's error
                (`ClusterAuthorizationFailedError`, `SecurityDisabledError`, ...).
        """
        return await admin_acls.describe_acls(self.cluster, acl_filter)

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> dict[AclBindingFilter, AclDeletion]:
        """Delete the ACL bindings matching filters (DeleteAcls;
        `kclient.client.admin_acls.delete_acls`; Kafka's ``deleteAcls``).

        Args:
            filters: `kclient.acl.AclBindingFilter` values.

        Returns:
            ``{filter: AclDeletion}``: what each deleted, or its error.
        """
        return await admin_acls.delete_acls(self.cluster, filters)

    async def aclose(self) -> None:
        """Close the connections."""
        if self._cluster is not None:
            await self._cluster.aclose()


class AdminClient(ClosingClient):
    """Blocking admin client (see the module docstring): topics created,
    deleted, listed and described.

    Use as a context manager or call `close`; the exit hook of
    `kclient.sync` closes one left open.

    Args:
        config: An `AdminConfig` or Kafka property names
            (``{"bootstrap.servers": "h:9092"}``, ``security.protocol``,
            ``ssl.*``, ``sasl.*``, ``request.timeout.ms``,
            ``default.api.timeout.ms``, ``retry.backoff.ms``).

    Raises:
        ConfigError: A bad or missing property.

    Example::

        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            admin.create_topics([NewTopic("t", num_partitions=3, replication_factor=3)])
            admin.describe_topics(["t"])["t"].partitions[0].isr  # (1, 2, 3)
    """

    def __init__(self, config: AdminConfig | Mapping[str, Any]) -> None:
        core = TrioAdminClient(config)  # ConfigError before a thread starts
        self._loop = LoopThread(name="kclient-admin")
        self._core = core
        with self._loop.closing_on_error():
            self._loop.call_sync(core.attach, self._loop.nursery)
        self._closer = LoopClientCloser(f"<AdminClient client.id={core.config.client_id}>", 5.0, self._loop, core.aclose, ignore=(KafkaError,), logger=log)
        track(self._closer)

    def create_topics(self, new_topics: Sequence[NewTopic], timeout_ms: int | None = None, validate_only: bool = False) -> None:
        """Blocking `TrioAdminClient.create_topics`.

        Args:
            new_topics: The topics (`NewTopic`).
            timeout_ms: How long the call may take (ms).
            validate_only: Only check the request.

        Raises:
            BrokerResponseError: The first failing topic's Kafka error
                (`TopicAlreadyExistsError`, `InvalidReplicationFactorError`, ...).
        """
        self._loop.call(self._core.create_topics, list(new_topics), timeout_ms, validate_only)

    def delete_topics(self, names: Sequence[str], timeout_ms: int | None = None) -> None:
        """Blocking `TrioAdminClient.delete_topics`.

        Args:
            names: The topics.
            timeout_ms: How long the call may take (ms).

        Raises:
            BrokerResponseError: The first failing topic's Kafka error
                (`UnknownTopicOrPartitionError`, ...).
        """
        self._loop.call(self._core.delete_topics, list(names), timeout_ms)

    def list_topics(self, include_internal: bool = False) -> list[str]:
        """Blocking `TrioAdminClient.list_topics`.

        Args:
            include_internal: Include internal topics.

        Returns:
            The sorted topic names.
        """
        result: list[str] = self._loop.call(self._core.list_topics, include_internal)
        return result

    def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicDescription]:
        """Blocking `TrioAdminClient.describe_topics`.

        Args:
            names: The topics; None for all.

        Returns:
            ``{name: TopicDescription}``.

        Raises:
            UnknownTopicOrPartitionError: A named topic does not exist.
        """
        result: dict[str, TopicDescription] = self._loop.call(self._core.describe_topics, None if names is None else list(names))
        return result

    def describe_cluster(self) -> ClusterDescription:
        """Blocking `TrioAdminClient.describe_cluster`.

        Returns:
            The brokers, controller id and cluster id.
        """
        result: ClusterDescription = self._loop.call(self._core.describe_cluster)
        return result

    def list_consumer_groups(self) -> list[GroupListing]:
        """Blocking `TrioAdminClient.list_consumer_groups`.

        Returns:
            `GroupListing` per group, sorted by id.
        """
        result: list[GroupListing] = self._loop.call(self._core.list_consumer_groups)
        return result

    def describe_consumer_groups(self, groups: Sequence[str]) -> dict[str, GroupDescription]:
        """Blocking `TrioAdminClient.describe_consumer_groups`.

        Args:
            groups: The group ids.

        Returns:
            ``{group_id: GroupDescription}``.
        """
        result: dict[str, GroupDescription] = self._loop.call(self._core.describe_consumer_groups, list(groups))
        return result

    def list_consumer_group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """Blocking `TrioAdminClient.list_consumer_group_offsets`.

        Args:
            group: The group id.

        Returns:
            ``{(topic, partition): offset}``.
        """
        result: dict[tuple[str, int], int] = self._loop.call(self._core.list_consumer_group_offsets, group)
        return result

    def delete_consumer_groups(self, groups: Sequence[str]) -> dict[str, KafkaError | None]:
        """Blocking `TrioAdminClient.delete_consumer_groups`; Args and
        Returns as there."""
        result: dict[str, KafkaError | None] = self._loop.call(self._core.delete_consumer_groups, list(groups))
        return result

    def alter_consumer_group_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Blocking `TrioAdminClient.alter_consumer_group_offsets`; Args
        and Raises as there."""
        self._loop.call(self._core.alter_consumer_group_offsets, group, dict(offsets))

    def list_transactions(
        self, states: Collection[str] | None = None, producer_ids: Collection[int] | None = None, duration_filter_ms: int | None = None
    ) -> list[TransactionListing]:
        """Blocking `TrioAdminClient.list_transactions`; Args, Returns and
        Raises as there."""
        result: list[TransactionListing] = self._loop.call(
            self._core.list_transactions, None if states is None else list(states), None if producer_ids is None else list(producer_ids), duration_filter_ms
        )
        return result

    def describe_transactions(self, transactional_ids: Sequence[str]) -> dict[str, TransactionDescription]:
        """Blocking `TrioAdminClient.describe_transactions`; Args, Returns
        and Raises as there."""
        result: dict[str, TransactionDescription] = self._loop.call(self._core.describe_transactions, list(transactional_ids))
        return result

    def list_offsets(self, query: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Blocking `TrioAdminClient.list_offsets`; Args, Returns and
        Raises as there."""
        result: dict[tuple[str, int], int] = self._loop.call(self._core.list_offsets, dict(query))
        return result

    def describe_configs(
        self, resources: Sequence[ConfigResource], names: Sequence[str] | None = None, include_synonyms: bool = False
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Blocking `TrioAdminClient.describe_configs` (Kafka's
        ``describeConfigs``); Args, Returns and Raises as there.
        """
        result: dict[ConfigResource, dict[str, ConfigEntry]] = self._loop.call(self._core.describe_configs, list(resources), None if names is None else list(names), include_synonyms)
        return result

    def incremental_alter_configs(self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], validate_only: bool = False) -> None:
        """Blocking `TrioAdminClient.incremental_alter_configs` (Kafka's
        ``incrementalAlterConfigs``); Args and Raises as there.
        """
        self._loop.call(self._core.incremental_alter_configs, dict(changes), validate_only)

    def describe_client_quotas(
        self, components: Sequence[ClientQuotaFilterComponent] = (), strict: bool = False
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Blocking `TrioAdminClient.describe_client_quotas` (Kafka's
        ``describeClientQuotas``); Args, Returns and Raises as there."""
        result: dict[ClientQuotaEntity, dict[str, float]] = self._loop.call(self._core.describe_client_quotas, list(components), strict)
        return result

    def alter_client_quotas(self, alterations: Sequence[ClientQuotaAlteration], validate_only: bool = False) -> None:
        """Blocking `TrioAdminClient.alter_client_quotas` (Kafka's
        ``alterClientQuotas``); Args and Raises as there."""
        self._loop.call(self._core.alter_client_quotas, list(alterations), validate_only)

    def describe_user_scram_credentials(self, users: Sequence[str] | None = None) -> DescribeUserScramCredentialsResult:
        """Blocking `TrioAdminClient.describe_user_scram_credentials` (Kafka's
        ``describeUserScramCredentials``); Args, Returns and Raises as there."""
        result: DescribeUserScramCredentialsResult = self._loop.call(self._core.describe_user_scram_credentials, None if users is None else list(users))
        return result

    def alter_user_scram_credentials(
        self, alterations: Sequence[UserScramCredentialUpsertion | UserScramCredentialDeletion]
    ) -> dict[str, KafkaError | None]:
        """Blocking `TrioAdminClient.alter_user_scram_credentials` (Kafka's
        ``alterUserScramCredentials``); Args, Returns and Raises as there."""
        result: dict[str, KafkaError | None] = self._loop.call(self._core.alter_user_scram_credentials, list(alterations))
        return result
    def create_acls(self, bindings: Sequence[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        """Blocking `TrioAdminClient.create_acls` (Kafka's ``createAcls``);
        Args, Returns and Raises as there."""
        result: dict[AclBinding, KafkaError | None] = self._loop.call(self._core.create_acls, list(bindings))
        return result

    def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Blocking `TrioAdminClient.describe_acls` (Kafka's
        ``describeAcls``); Args, Returns and Raises as there."""
        result: list[AclBinding] = self._loop.call(self._core.describe_acls, acl_filter)
        return result

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> dict[AclBindingFilter, AclDeletion]:
        """Blocking `TrioAdminClient.delete_acls` (Kafka's ``deleteAcls``);
        Args and Returns as there."""
        result: dict[AclBindingFilter, AclDeletion] = self._loop.call(self._core.delete_acls, list(filters))
        return result

    def close(self) -> None:
        """Close the connections and the loop thread. Idempotent."""
        self._closer.close()

    def __repr__(self) -> str:
        return f"<AdminClient client.id={self._core.config.client_id} {self._state()}>"
