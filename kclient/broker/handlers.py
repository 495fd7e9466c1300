"""Request handlers of the bundled broker, one coroutine per API.

`SUPPORTED_VERSIONS` is what ApiVersions advertises: each API up to its
last non-flexible version (the one below ``flexible_from`` in
`kclient.protocol.messages`; this broker implements no flexible encoding
except ApiVersions v3, answered natively as KIP-511 asks), OffsetFetch from
v1, and Fetch from v0 (message formats v0/v1 are served,
`kclient.broker.convert`). Every handler takes
the request message (``FetchRequest``, ``ProduceRequest``, ...: the
classes of `kclient.protocol.messages`, as Kafka's generated ``*Data``
classes) and returns the response message, or ``None`` for "send nothing"
(Produce with acks=0). Errors are Kafka's error codes in the response's
error fields (Kafka protocol guide, "Error Codes"); a handler raises
`CloseConnection` where Kafka closes the connection instead.

Storage calls (`kclient.storage.Log`) are plain blocking file I/O on
the page cache; the handlers make them on the trio thread, which
serialises them (an append may fsync there when
``log.flush.interval.messages`` says so). The broker's periodic tasks
(flush, retention, checkpoints; `kclient.broker.server`) run theirs in
worker threads: the storage engine is thread-safe.

As Kafka's ``KafkaApis``, the handlers are built over the broker's
components (`kclient.broker.components.BrokerComponents`: the replica
manager, the topic admin, the group coordinator, the metadata cache) and
its `kclient.broker.state.BrokerState`; no component imports this module.
The API-specific work is delegated (fetch reads to `kclient.broker.fetch`,
format conversion to `kclient.broker.convert`, configs to
`kclient.broker.describe_configs` and `kclient.broker.alter_configs`, the
group APIs to `kclient.broker.group.apis`), so what is left is request
plumbing.
"""

from __future__ import annotations

import contextvars
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from kclient.broker.alter_configs import ConfigAlterer
from kclient.broker.append_notifier import AppendNotifier
from kclient.broker.authz.principal import RequestContext
from kclient.broker.close_connection import CloseConnection
from kclient.broker.compacted import first_keyless_record, keyless_error
from kclient.broker.components import BrokerComponents
from kclient.broker.convert import AppendRejected, prepare_append
from kclient.broker.describe_configs import ConfigHelper
from kclient.broker.fetch import READ_COMMITTED, FetchHandler, leader_error
from kclient.broker.group.apis import GroupApis
from kclient.broker.group.consumer_apis import ConsumerGroupApis
from kclient.broker.group.consumer_coordinator import ConsumerGroupCoordinator
from kclient.broker.group.records import OFFSETS_TOPIC
from kclient.broker.partition import Partition
from kclient.broker.quotas.apis import ClientQuotaApis
from kclient.broker.scram.apis import UserScramApis
from kclient.broker.scram.store import ZkScramStore
from kclient.broker.state import BrokerState, TopicFormat
from kclient.broker.topic_ids import topic_id
from kclient.broker.txn.apis import TransactionApis
from kclient.broker.txn_markers_api import WriteTxnMarkersApi
from kclient.errors import (
    COORDINATOR_NOT_AVAILABLE,
    ILLEGAL_SASL_STATE,
    INVALID_REQUIRED_ACKS,
    KAFKA_STORAGE_ERROR,
    LEADER_NOT_AVAILABLE,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    BrokerResponseError,
    KafkaError,
    error_for_code,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kclient.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from kclient.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from kclient.protocol.messages.create_topics import (
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kclient.protocol.messages.delete_topics import (
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kclient.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from kclient.protocol.messages.fetch import FetchRequest, FetchResponse
from kclient.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kclient.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from kclient.protocol.messages.leader_and_isr import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)
from kclient.protocol.messages.list_offsets import (
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kclient.protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kclient.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kclient.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from kclient.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from kclient.protocol.messages.sasl_handshake import (
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kclient.protocol.messages.stop_replica import (
    StopReplicaRequest,
    StopReplicaResponse,
)
from kclient.protocol.messages.update_metadata import (
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kclient.protocol.records import iter_record_set
from kclient.protocol.types import Records
from kclient.storage import Log

__all__ = [
    "SUPPORTED_VERSIONS",
    "AppendNotifier",
    "BrokerState",
    "CloseConnection",
    "RequestHandlers",
    "TopicFormat",
    "listener_address",
    "listener_name",
    "supported_triples",
]

log = logging.getLogger("kclient.broker")

#: api key -> (min, max) version the broker advertises in ApiVersions.
#: Produce 0-2 and Fetch 0-3 carry message sets v0/v1 (converted on append
#: and down-converted on fetch, `kclient.broker.convert`); the ranges
#: contain Produce 0, 3 and 7, Fetch 4 and 10 and FindCoordinator 0, which
#: librdkafka < 2.11.1 looks for (without FindCoordinator its LZ4 feature
#: stays off and its v2 producer sends lz4 batches uncompressed). The group
#: APIs (`kclient.broker.group`) are served up to their last non-flexible
#: version; peers negotiate down to them.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 8),  # Produce
    1: (0, 11),  # Fetch
    2: (0, 5),  # ListOffsets
    3: (0, 12),  # Metadata (v9+ flexible; v10+ topic ids, KIP-516)
    8: (0, 9),  # OffsetCommit (v8+ flexible; v9: consumer-protocol members, KIP-848)
    9: (0, 9),  # OffsetFetch (v0 reads ZooKeeper, as Kafka up to 3.9; v6+ flexible; v8+ several groups; v9 member epochs, KIP-848)
    10: (0, 2),  # FindCoordinator
    11: (0, 5),  # JoinGroup (v4+: KIP-394 member ids)
    12: (0, 3),  # Heartbeat
    13: (0, 3),  # LeaveGroup
    14: (0, 3),  # SyncGroup
    15: (0, 4),  # DescribeGroups
    16: (0, 5),  # ListGroups (v3+ flexible; v4 states filter, KIP-518; v5 types filter, KIP-848)
    4: (0, 3),  # LeaderAndIsr (controller -> broker)
    5: (0, 1),  # StopReplica (controller -> broker)
    6: (0, 5),  # UpdateMetadata (controller -> broker)
    17: (0, 1),  # SaslHandshake (KIP-43; v1: tokens in SaslAuthenticate)
    18: (0, 3),  # ApiVersions
    19: (0, 4),  # CreateTopics (KIP-4)
    20: (0, 3),  # DeleteTopics (KIP-4)
    22: (0, 4),  # InitProducerId (v3: KIP-360 epoch bump; v4: PRODUCER_FENCED, KIP-588)
    24: (0, 3),  # AddPartitionsToTxn (KIP-98; v4 is the brokers' batched form, KIP-890)
    25: (0, 3),  # AddOffsetsToTxn (KIP-98)
    26: (0, 4),  # EndTxn (KIP-98; v5 is KIP-890's)
    65: (0, 0),  # DescribeTransactions (KIP-664)
    66: (0, 1),  # ListTransactions (KIP-664; v1 duration filter, KIP-994)
    23: (0, 3),  # OffsetsForLeaderEpoch (KIP-101, KIP-279)
    27: (0, 1),  # WriteTxnMarkers (KIP-98; from a transaction coordinator)
    28: (0, 3),  # TxnOffsetCommit (KIP-98; v3 group metadata, KIP-447; v4 is KIP-890's)
    32: (0, 3),  # DescribeConfigs (KIP-133, KIP-226, KIP-569)
    33: (0, 1),  # AlterConfigs (KIP-133)
    44: (0, 0),  # IncrementalAlterConfigs (KIP-339; v1 is flexible)
    36: (0, 1),  # SaslAuthenticate (KIP-152; v1: session lifetime, KIP-368)
    42: (0, 1),  # DeleteGroups (KIP-229)
    37: (0, 1),  # CreatePartitions (KIP-195; v2 is flexible)
    47: (0, 0),  # OffsetDelete (KIP-496)
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848)
    69: (0, 0),  # ConsumerGroupDescribe (KIP-848)
    48: (0, 0),  # DescribeClientQuotas (KIP-546; v1 is flexible)
    49: (0, 0),  # AlterClientQuotas (KIP-546; v1 is flexible)
    50: (0, 0),  # DescribeUserScramCredentials (KIP-554; flexible)
    51: (0, 0),  # AlterUserScramCredentials (KIP-554; flexible)
    29: (0, 3),  # DescribeAcls (KIP-11, KIP-290; kclient.broker.authz)
    30: (0, 3),  # CreateAcls
    31: (0, 3),  # DeleteAcls
}
# The SASL APIs are advertised on every listener, as Kafka does; on a
# listener without SASL, or once authenticated, they are answered
# ILLEGAL_SASL_STATE (the exchange itself is kclient.broker.security's).

#: ``(host, port)`` of the listener the current connection came in on
#: (set per connection task by the server); Metadata and FindCoordinator
#: answer with it, as Kafka answers with the address of the request's
#: listener name (KIP-103). ``None``: the broker's first listener.
listener_address: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "kclient_listener_address", default=None
)
#: The name of that listener (``None``: the first one); Metadata gives
#: other brokers' endpoints of the same listener name.
listener_name: contextvars.ContextVar[str | None] = contextvars.ContextVar("kclient_listener_name", default=None)


def supported_triples() -> list[tuple[int, int, int]]:
    """``[(api_key, min_version, max_version), ...]`` sorted by key, as the
    ApiVersions response (and the KIP-511 reply) lists them."""
    return [(key, lo, hi) for key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())]


def _code_name(code: int) -> str:
    return error_for_code(code).name


def _first_record_at(plog: Log, offset: int, timestamp: int, batch_max_ts: int) -> tuple[int, int]:
    """Kafka's ListOffsets answer for a timestamp: the first *record* at or
    after ``offset`` whose timestamp is ``>= timestamp``
    (``LogSegment.findOffsetByTimestamp``). The log locates the batch;
    this looks inside it. Falls back to ``(offset, batch_max_ts)``."""
    try:
        data = plog.read(offset, 1, min_one_batch=True).records
        for rec in iter_record_set(data):
            if rec.offset >= offset and rec.timestamp >= timestamp:
                return rec.offset, rec.timestamp
    except Exception as exc:  # a batch it cannot decode: keep the batch answer
        log.debug("cannot look inside the batch at offset %d of %s: %s", offset, plog, exc)
    return offset, batch_max_ts


#: A handler: the request header and message in, the response message
#: (None: no response) out.
Handler = Callable[[RequestHeader, Any], Awaitable[object | None]]


class RequestHandlers:
    """Dispatches decoded requests to the per-API handlers.

    ``await handle(header, body, peer_gone=...)`` returns the response
    message or None (no response). Raises `CloseConnection` where Kafka
    would close the connection, and `kclient.broker.fetch.ClientGone`
    when the client disconnected during a Fetch long poll. The caller has
    already checked the version against `SUPPORTED_VERSIONS`.

    Args:
        components: The broker's components (and, through them, its state).
    """

    def __init__(self, components: BrokerComponents) -> None:
        state = components.state
        self.state = state
        self.zk = components.zk
        #: Client quotas (`kclient.broker.quotas`).
        self.quotas = components.quotas
        self.metadata_cache = components.metadata_cache
        self.replica_manager = components.replica_manager
        self.topic_admin = components.topic_admin
        #: Each API's authorization checks and the ACL APIs (`kclient.broker.authz`).
        self.authorization = components.authorization
        #: The group APIs (`kclient.broker.group.apis`).
        self.group_apis = GroupApis(
            state.config, state.broker_id, self.metadata_cache, components.group_coordinator, zk=components.zk, clock=state.clock
        )
        #: The consumer group protocol (KIP-848) and the group APIs it changes.
        self.consumer_group_apis = ConsumerGroupApis(
            ConsumerGroupCoordinator(state.config, components.group_coordinator.manager, self.metadata_cache), self.group_apis, clock=state.clock
        )
        #: The transaction APIs (`kclient.broker.txn.apis`).
        self.txn_apis = TransactionApis(components.transactions, self.metadata_cache, state.broker_id, state.producer_ids)
        self.fetch_handler = FetchHandler(
            self.replica_manager.partitions, self.metadata_cache, state.appends, clock=state.clock,
            offline=self.replica_manager.log_dir_failures.offline_partitions,
            storage_error=self.replica_manager.log_dir_failures.read_error,
        )
        #: WriteTxnMarkers on the partitions this broker leads (KIP-98).
        self.txn_markers_api = WriteTxnMarkersApi(
            self.replica_manager.partitions,
            self.metadata_cache,
            lambda t: state.topic_overrides.format(t).magic,
            clock=state.clock,
            on_marker=[components.group_coordinator.manager.txn_completed],  # TxnOffsetCommit's pending offsets
        )
        self.config_helper = ConfigHelper(state.config, state.broker_id, self.metadata_cache, self.replica_manager.topic_config)
        self.config_alterer = ConfigAlterer(
            state.config,
            state.broker_id,
            self.metadata_cache,
            state.topic_overrides,
            self.replica_manager.topic_config_changed,
            zk=components.zk,
        )
        #: DescribeClientQuotas / AlterClientQuotas (KIP-546).
        self.client_quota_apis = ClientQuotaApis(components.quotas)
        #: DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554).
        self.user_scram_apis = UserScramApis(ZkScramStore(components.zk) if components.zk is not None else None)
        self._table: dict[int, Handler] = {
            0: self.produce,
            1: self.fetch,
            2: self.list_offsets,
            3: self.metadata,
            9: self.consumer_group_apis.offset_fetch,
            10: self.find_coordinator,
            8: self.consumer_group_apis.offset_commit,
            11: self.consumer_group_apis.join_group,
            12: self.group_apis.heartbeat,
            13: self.group_apis.leave_group,
            14: self.group_apis.sync_group,
            15: self.group_apis.describe_groups,
            16: self.consumer_group_apis.list_groups,
            42: self.consumer_group_apis.delete_groups,
            47: self.consumer_group_apis.offset_delete,
            68: self.consumer_group_apis.consumer_group_heartbeat,
            69: self.consumer_group_apis.consumer_group_describe,
            17: self.sasl_handshake,
            18: self.api_versions,
            22: self.init_producer_id,
            24: self.txn_apis.add_partitions_to_txn,
            25: self.txn_apis.add_offsets_to_txn,
            26: self.txn_apis.end_txn,
            65: self.txn_apis.describe_transactions,
            66: self.txn_apis.list_transactions,
            23: self.offset_for_leader_epoch,
            27: self.txn_markers_api.write_txn_markers,
            28: self.consumer_group_apis.txn_offset_commit,
            19: self.create_topics,
            20: self.delete_topics,
            37: self.create_partitions,
            32: self.describe_configs,
            33: self.alter_configs,
            44: self.incremental_alter_configs,
            4: self.leader_and_isr,
            5: self.stop_replica,
            6: self.update_metadata,
            36: self.sasl_authenticate,
            48: self.client_quota_apis.describe_client_quotas,
            49: self.client_quota_apis.alter_client_quotas,
            50: self.user_scram_apis.describe_user_scram_credentials,
            51: self.user_scram_apis.alter_user_scram_credentials,
        }

    async def handle(
        self,
        header: RequestHeader,
        body: Any,
        *,
        peer_gone: Callable[[], Awaitable[bool]] | None = None,
        context: RequestContext | None = None,
    ) -> object | None:
        """Answer one request (see the class docstring).

        Args:
            header: The request header.
            body: The request message (an instance of the API's
                ``request_type``).
            peer_gone: An async function that returns True once the client has
                closed the connection (False: it cannot tell, data is pending);
                a Fetch long poll watches it while waiting.
            context: Who sent the request, from where
                (`kclient.broker.authz.principal.RequestContext`); the
                authorizer's checks run on it (None: not checked).

        Returns:
            The response message, or ``None`` when the request gets no
                response (Produce with acks=0).

        Raises:
            CloseConnection: Kafka would close the connection instead of
                answering (no handler for the API key, a failed Produce with
                acks=0).
        """
        response: object | None = await self.authorization.handle(header, body, context, lambda checked: self._handle(header, checked, peer_gone))
        return response

    async def _handle(self, header: RequestHeader, body: Any, peer_gone: Callable[[], Awaitable[bool]] | None) -> object | None:
        if header.api_key == 1:
            return await self.fetch(header, body, peer_gone=peer_gone)
        handler = self._table.get(header.api_key)
        if handler is None:
            raise CloseConnection(f"no handler for api key {header.api_key}")
        return await handler(header, body)

    async def fetch(
        self, header: RequestHeader, body: FetchRequest, *, peer_gone: Callable[[], Awaitable[bool]] | None = None
    ) -> FetchResponse:
        """Fetch v0-11: `kclient.broker.fetch.FetchHandler.handle`."""
        return await self.fetch_handler.handle(header, body, peer_gone=peer_gone)

    # ------------------------------------------------------------ ApiVersions

    async def api_versions(self, header: RequestHeader, body: ApiVersionsRequest) -> ApiVersionsResponse:
        """ApiVersions v0-3: every API and version range this broker serves.
        v3 requests carry the client software name/version (KIP-511), logged
        at DEBUG."""
        if header.api_version >= 3:
            log.debug("client %s runs %s %s", header.client_id, body.client_software_name, body.client_software_version)
        return ApiVersionsResponse(
            error_code=NONE,
            api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in supported_triples()],
        )

    # ------------------------------------------------------------ SASL

    async def sasl_handshake(self, header: RequestHeader, body: SaslHandshakeRequest) -> SaslHandshakeResponse:
        """SaslHandshake outside an authentication (a listener without SASL,
        or after it completed): ILLEGAL_SASL_STATE, as Kafka's KafkaApis."""
        return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE)

    async def sasl_authenticate(self, header: RequestHeader, body: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
        """SaslAuthenticate outside an authentication: ILLEGAL_SASL_STATE."""
        return SaslAuthenticateResponse(
            error_code=ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication or on a listener without SASL",
        )

    def _address(self) -> tuple[str, int]:
        """The advertised address of the current connection's listener."""
        return listener_address.get() or (self.state.advertised_host, self.state.advertised_port)

    # ------------------------------------------------------------ Metadata

    async def metadata(self, header: RequestHeader, body: MetadataRequest) -> MetadataResponse:
        """Metadata v0-12. ``topics`` null (v1+) or empty (v0) means every
        topic; listed topics that do not exist are created when
        ``auto.create.topics.enable`` and the request allows it (v4+
        ``allow_auto_topic_creation``), else UNKNOWN_TOPIC_OR_PARTITION.
        v10+ gives each topic's id (`kclient.broker.topic_ids`); v12 may ask
        for a topic by id alone (UNKNOWN_TOPIC_ID when none has it).
        This broker leads every partition with a stable leader epoch 0 and
        is the controller."""
        state = self.state
        requested = body.topics
        cache = self.metadata_cache
        names: list[str]
        topics: list[MetadataResponseTopic] = []
        if requested is None or (header.api_version == 0 and not requested):
            names = cache.topics()
            allow_create = False
        else:
            # In request order, once each; v0-3 have no flag and allow it.
            names, unknown_ids = self._requested_names(requested)
            topics.extend(MetadataResponseTopic(error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=i) for i in unknown_ids)
            allow_create = body.allow_auto_topic_creation
        for name in names:
            error = await self.topic_admin.ensure_topic(name, allow_create=allow_create)
            partitions = []
            if error == NONE:
                live = cache.brokers
                for index, meta in sorted(cache.partitions(name).items()):
                    partitions.append(
                        MetadataResponsePartition(
                            error_code=NONE if meta.leader >= 0 and meta.leader in live else LEADER_NOT_AVAILABLE,
                            partition_index=index,
                            leader_id=meta.leader if meta.leader in live else -1,
                            leader_epoch=meta.leader_epoch,
                            replica_nodes=list(meta.replicas),
                            isr_nodes=list(meta.isr),
                            offline_replicas=[r for r in meta.replicas if r not in live],
                        )
                    )
            topics.append(
                MetadataResponseTopic(
                    error_code=error, name=name, topic_id=topic_id(name) if error == NONE else None, is_internal=name == OFFSETS_TOPIC, partitions=partitions
                )
            )
        return MetadataResponse(
            brokers=self._live_brokers(),
            cluster_id=state.cluster_id,
            # In a cluster: the controller of the last UpdateMetadata, -1 before
            # the first (as Kafka); a standalone broker is its own controller.
            controller_id=cache.controller_id if cache.controller_id >= 0 or self.zk is not None else state.broker_id,
            topics=topics,
        )

    def _requested_names(self, requested: list[MetadataRequestTopic]) -> tuple[list[str], list[uuid.UUID]]:
        """``(names, unknown ids)`` of a Metadata request's topics, in
        request order and once each: a topic asked for by id alone (v12) is
        named by the topic that has that id."""
        by_id: dict[uuid.UUID, str] | None = None
        names: list[str] = []
        unknown: list[uuid.UUID] = []
        for t in requested:
            if t.name is not None:
                names.append(t.name)
                continue
            if by_id is None:
                by_id = {topic_id(n): n for n in self.metadata_cache.topics()}
            name = by_id.get(t.topic_id) if t.topic_id is not None else None
            if name is None:
                unknown.append(t.topic_id or uuid.UUID(int=0))
            else:
                names.append(name)
        return list(dict.fromkeys(names)), list(dict.fromkeys(unknown))

    def _live_brokers(self) -> list[MetadataResponseBroker]:
        """Every live broker with its endpoint of the current connection's
        listener name (this broker: the address the client connected to)."""
        state = self.state
        name = listener_name.get()
        brokers: list[MetadataResponseBroker] = []
        for node_id, node in sorted(self.metadata_cache.brokers.items()):
            if node_id == state.broker_id:
                continue
            ep = node.endpoint(name) or node.endpoint(None)
            if ep is not None:
                brokers.append(MetadataResponseBroker(node_id=node_id, host=ep.host, port=ep.port, rack=node.rack))
        host, port = self._address()
        brokers.append(MetadataResponseBroker(node_id=state.broker_id, host=host, port=port, rack=None))
        brokers.sort(key=lambda b: b.node_id)
        return brokers

    # ------------------------------------------------------------ Produce

    async def produce(self, header: RequestHeader, body: ProduceRequest) -> ProduceResponse | None:
        """Produce v0-8. v0-2 carry message sets v0/v1, v3+ record batches
        v2 only; each partition's set is validated and converted to the
        topic's stored format by `kclient.broker.convert.prepare_append`
        (Kafka's error codes: CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
        INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE for zstd below v7,
        UNSUPPORTED_FOR_MESSAGE_FORMAT) before any of it is appended; the log
        assigns the offsets. ``acks`` 1 and -1 are answered after the append
        (one replica: the same thing); ``acks`` 0 gets no response, or a
        closed connection if any partition failed, as Kafka does; any other
        value gets INVALID_REQUIRED_ACKS. ``log_append_time_ms`` (v2+) is
        the broker time stamped on a LogAppendTime topic, else -1."""
        version = header.api_version
        acks = body.acks
        responses = []
        waits: list[tuple[PartitionProduceResponse, Partition, int]] = []  # (partition response, partition, required offset)
        failed = False
        valid_acks = acks in (0, 1, -1)
        for topic_data in body.topic_data:
            name = topic_data.name
            parts = []
            topic_error = await self.topic_admin.ensure_topic(name, allow_create=True) if valid_acks else INVALID_REQUIRED_ACKS
            if topic_error != NONE:
                parts = [PartitionProduceResponse(index=pdata.index, base_offset=-1, error_code=topic_error) for pdata in topic_data.partition_data]
                failed = failed or bool(parts)
            else:
                # One format and one append time for the topic's partitions.
                fmt = self.state.topic_overrides.format(name)
                now = self.state.clock()
                for pdata in topic_data.partition_data:
                    entry = PartitionProduceResponse(index=pdata.index, base_offset=-1)
                    part = self._append(name, entry, pdata.records, version, acks, fmt, now)
                    if part is None:
                        failed = True
                    elif acks == -1:
                        waits.append((entry, part, part.log.log_end_offset))
                    parts.append(entry)
            responses.append(TopicProduceResponse(name=name, partition_responses=parts))
        if waits:
            # acks=-1: answer once every ISR member has the records (the high
            # watermark passed them), or after timeout_ms (REQUEST_TIMED_OUT).
            deadline = trio.current_time() + max(0, body.timeout_ms) / 1000.0
            for entry, part, required in waits:
                code = await part.wait_for_replication(required, deadline)
                if code != NONE:
                    log.info("produce to %s-%d (acks=-1): %s", part.topic, part.partition, _code_name(code))
                    entry.error_code = code
        if acks == 0:
            if failed:
                raise CloseConnection("a Produce with acks=0 failed")
            return None
        return ProduceResponse(responses=responses)

    def _append(
        self, topic: str, entry: PartitionProduceResponse, records: Records, version: int, acks: int, fmt: TopicFormat, now: int
    ) -> Partition | None:
        """Validate, convert and append one partition's record set as its
        leader, and fill in its response ``entry`` (``error_code``,
        ``base_offset``, ``log_start_offset``, ``log_append_time_ms``; for a
        keyless record on a compacted topic, `kclient.broker.compacted`,
        ``error_message`` and ``record_errors``). ``fmt`` is the topic's
        stored format and ``now`` the append time (ms). Returns the
        partition once appended, else None (``entry`` then holds the
        error)."""
        partition = entry.index
        part = self.replica_manager.partitions.get((topic, partition))
        if part is None:
            known = self.metadata_cache.partition(topic, partition) is not None
            entry.error_code = NOT_LEADER_OR_FOLLOWER if known else UNKNOWN_TOPIC_OR_PARTITION
            if self.replica_manager.log_dir_failures.is_offline(topic, partition):
                entry.error_code = KAFKA_STORAGE_ERROR  # its log dir is offline (KIP-112)
            return None
        plog = part.log
        if not part.is_leader or acks == -1:
            try:
                part.check_leader()
                part.check_min_isr(acks)
            except BrokerResponseError as exc:
                log.info("produce to %s-%d refused: %s", topic, partition, exc)
                entry.error_code = exc.code if exc.code is not None else UNKNOWN_SERVER_ERROR
                entry.log_start_offset = plog.log_start_offset
                return None
        try:
            prepared = prepare_append(
                records if records is not None else b"",
                produce_version=version,
                stored_magic=fmt.magic,
                log_append_time_ms=now if fmt.log_append_time else None,
                max_message_bytes=self.state.message_max_bytes,
                codec=fmt.codec,
            )
        except AppendRejected as exc:
            log.info("produce v%d to %s-%d rejected (error %d): %s", version, topic, partition, exc.code, exc)
            entry.error_code, entry.log_start_offset = exc.code, plog.log_start_offset
            return None
        if plog.config.compact:
            keyless = first_keyless_record(prepared.records)
            if keyless is not None:
                code, message, record_errors = keyless_error(topic, version, keyless)
                log.info("produce v%d to %s-%d rejected: %s (record %d)", version, topic, partition, message, keyless)
                entry.error_code, entry.error_message, entry.record_errors = code, message, record_errors
                entry.log_start_offset = plog.log_start_offset
                return None
        try:
            result = part.append_records_to_leader(prepared.records, now, prepared.batches)
        except BrokerResponseError as exc:
            log.info("produce to %s-%d rejected by the log: %s", topic, partition, exc)
            entry.error_code = exc.code if exc.code is not None else UNKNOWN_SERVER_ERROR
            entry.log_start_offset = plog.log_start_offset
            return None
        except OSError as exc:
            # A full disk or an I/O error: the log dir goes offline (KIP-112).
            self.replica_manager.log_dir_failures.storage_error(topic, partition, "append", exc)
            entry.error_code, entry.log_start_offset = KAFKA_STORAGE_ERROR, -1
            return None
        except Exception:
            log.exception("append to %s-%d failed", topic, partition)
            entry.error_code, entry.log_start_offset = UNKNOWN_SERVER_ERROR, -1
            return None
        if result.duplicate:
            log.debug("produce to %s-%d: duplicate batch (already at offset %d)", topic, partition, result.base_offset)
        entry.base_offset, entry.log_start_offset = result.base_offset, plog.log_start_offset
        entry.log_append_time_ms = prepared.log_append_time_ms
        return part

    # ------------------------------------------------------------ ListOffsets

    async def list_offsets(self, header: RequestHeader, body: ListOffsetsRequest) -> ListOffsetsResponse:
        """ListOffsets v0-5. v0 (getOffsetsBefore) answers up to
        ``max_num_offsets`` offsets, descending, from
        `kclient.storage.Log.offsets_before`; v1+ answers one
        ``(timestamp, offset)``: -1 = latest (log end offset), -2 = earliest
        (log start offset), else the first batch whose max timestamp is at
        least the one asked for (offset -1 if none)."""
        return ListOffsetsResponse(
            topics=[
                ListOffsetsTopicResponse(
                    name=t.name, partitions=[self._list_offset(t.name, p, header.api_version, body.replica_id, body.isolation_level) for p in t.partitions]
                )
                for t in body.topics
            ]
        )

    def _list_offset(self, name: str, p: ListOffsetsPartition, version: int, replica_id: int, isolation_level: int = 0) -> ListOffsetsPartitionResponse:
        """One partition's ListOffsets answer (see `list_offsets`; read_committed, v2+: up to the last stable offset, KIP-98)."""
        index = p.partition_index
        ts = p.timestamp
        entry = ListOffsetsPartitionResponse(partition_index=index, error_code=NONE)
        part = self.replica_manager.partition(name, index)
        code = self._leader_error(name, index, part, p.current_leader_epoch)
        if code != NONE or part is None:
            entry.error_code = code
            return entry
        plog = part.log
        # Consumers see offsets up to the high watermark; followers
        # (replica_id >= 0) up to the log end offset (Kafka's rule).
        limit = plog.log_end_offset if replica_id >= 0 else plog.last_stable_offset if isolation_level == READ_COMMITTED else plog.high_watermark
        if version == 0:
            offsets: list[int] = []
            for o in plog.offsets_before(ts, p.max_num_offsets):
                o = min(o, limit)
                if o not in offsets:
                    offsets.append(o)
            entry.old_style_offsets = offsets
        elif ts == LATEST_TIMESTAMP:
            entry.offset, entry.leader_epoch = limit, part.leader_epoch
        else:
            found = plog.offset_for_timestamp(ts)
            if found is None or found[0] >= limit:
                entry.offset = -1 if ts >= 0 or ts == MAX_TIMESTAMP else limit
            else:
                offset, found_ts = found
                if ts >= 0:
                    offset, found_ts = _first_record_at(plog, offset, ts, found_ts)
                entry.timestamp, entry.offset, entry.leader_epoch = found_ts, offset, part.leader_epoch
        return entry

    # ------------------------------------------------------------ groups

    async def find_coordinator(self, header: RequestHeader, body: FindCoordinatorRequest) -> FindCoordinatorResponse:
        """FindCoordinator v0-2:
        `kclient.broker.group.apis.GroupApis.find_coordinator`, answering
        with the endpoints of the current connection's listener name; key
        type 1 (a transactional id):
        `kclient.broker.txn.apis.TransactionApis.find_coordinator`."""
        if body.key_type == 1:
            return await self.txn_apis.find_coordinator(body, self._address(), listener_name.get())
        return await self.group_apis.find_coordinator(header, body, self._address(), listener_name.get())

    # ------------------------------------------------------------ replication

    def _leader_error(self, topic: str, index: int, part: Partition | None, current_leader_epoch: int = -1) -> int:
        """`kclient.broker.fetch.leader_error` for this broker."""
        return leader_error(self.metadata_cache, topic, index, part, current_leader_epoch)

    async def leader_and_isr(self, header: RequestHeader, body: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """LeaderAndIsr v0-3 from the controller:
        `kclient.broker.replica_manager.ReplicaManager.leader_and_isr`."""
        return await self.replica_manager.leader_and_isr(body, header.api_version)

    async def update_metadata(self, header: RequestHeader, body: UpdateMetadataRequest) -> UpdateMetadataResponse:
        """UpdateMetadata v0-5 from the controller: refreshes the metadata cache."""
        return await self.replica_manager.update_metadata(body, header.api_version)

    async def stop_replica(self, header: RequestHeader, body: StopReplicaRequest) -> StopReplicaResponse:
        """StopReplica v0-1 from the controller."""
        return await self.replica_manager.stop_replica(body, header.api_version)

    async def offset_for_leader_epoch(self, header: RequestHeader, body: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
        """OffsetsForLeaderEpoch v0-3 (KIP-101, KIP-279): for each
        partition led here, the largest leader epoch up to the one asked for
        and the offset where the next epoch starts in this log (the log end
        offset for the current epoch); ``(-1, -1)`` for an epoch older than
        the log's first. Followers truncate to it before fetching."""
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                index = p.partition
                part = self.replica_manager.partition(t.topic, index)
                code = self._leader_error(t.topic, index, part, p.current_leader_epoch)
                if code != NONE or part is None:
                    parts.append(EpochEndOffset(error_code=code, partition=index, leader_epoch=-1, end_offset=-1))
                    continue
                epoch, end = part.log.end_offset_for_epoch(p.leader_epoch)
                parts.append(EpochEndOffset(error_code=NONE, partition=index, leader_epoch=epoch, end_offset=end))
            topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        return OffsetForLeaderEpochResponse(topics=topics)

    # ------------------------------------------------------------ topics

    async def create_topics(self, header: RequestHeader, body: CreateTopicsRequest) -> CreateTopicsResponse:
        """CreateTopics v0-4: `kclient.broker.topic_admin.TopicAdmin.create_topics`."""
        return await self.topic_admin.create_topics(body, header.api_version)

    async def delete_topics(self, header: RequestHeader, body: DeleteTopicsRequest) -> DeleteTopicsResponse:
        """DeleteTopics v0-3: `kclient.broker.topic_admin.TopicAdmin.delete_topics`."""
        return await self.topic_admin.delete_topics(body, header.api_version)

    async def create_partitions(self, header: RequestHeader, body: CreatePartitionsRequest) -> CreatePartitionsResponse:
        """CreatePartitions v0-1: `kclient.broker.topic_admin.TopicAdmin.create_partitions`."""
        return await self.topic_admin.create_partitions(body, header.api_version)

    async def describe_configs(self, header: RequestHeader, body: DescribeConfigsRequest) -> DescribeConfigsResponse:
        """DescribeConfigs v0-3 (KIP-133, KIP-226, KIP-569):
        `kclient.broker.describe_configs.ConfigHelper`."""
        return await self.config_helper.describe_configs(body, header.api_version)

    async def alter_configs(self, header: RequestHeader, body: AlterConfigsRequest) -> AlterConfigsResponse:
        """AlterConfigs v0-1 (KIP-133): `kclient.broker.alter_configs.ConfigAlterer`."""
        return await self.config_alterer.alter_configs(body, header.api_version)

    async def incremental_alter_configs(self, header: RequestHeader, body: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
        """IncrementalAlterConfigs v0 (KIP-339): `kclient.broker.alter_configs.ConfigAlterer`."""
        return await self.config_alterer.incremental_alter_configs(body, header.api_version)

    # ------------------------------------------------------------ InitProducerId

    async def init_producer_id(self, header: RequestHeader, body: InitProducerIdRequest) -> InitProducerIdResponse:
        """InitProducerId (KIP-98): a new producer id with epoch 0 for an
        idempotent producer, whatever producer id and epoch a v3+ request
        carries (as Kafka's ``TransactionCoordinator``: KIP-360's bump of
        an idempotent producer's epoch is the producer's own); a
        transactional id goes to the transaction coordinator. In a cluster the ids come from blocks claimed in
        ZooKeeper (`kclient.broker.meta.claim_producer_id_block`), so no two
        brokers hand out the same id; the partition leaders check the
        sequence numbers (`kclient.storage.Log.append`)."""
        state = self.state
        txn = body.transactional_id
        if txn is not None:
            return await self.txn_apis.init_producer_id(header, body)
        if state.producer_ids.needs_block and state.producer_ids.zk is not None:
            try:
                await trio.to_thread.run_sync(state.producer_ids.ensure_block)
            except KafkaError as exc:
                log.warning("InitProducerId: %s", exc)
                return InitProducerIdResponse(error_code=COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
        if txn is None:
            pid, epoch = state.producer_ids.allocate(), 0
        else:
            known = state.transactional_ids.get(txn)
            if known is None or known[1] >= 0x7FFE:
                pid, epoch = state.producer_ids.allocate(), 0
            else:
                pid, epoch = known[0], known[1] + 1
            state.transactional_ids[txn] = (pid, epoch)
        log.debug("InitProducerId for %s: producer id %d epoch %d", txn or header.client_id, pid, epoch)
        return InitProducerIdResponse(error_code=NONE, producer_id=pid, producer_epoch=epoch)
