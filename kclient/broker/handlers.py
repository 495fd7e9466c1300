"""Request handlers of the bundled broker, one coroutine per API.

`SUPPORTED_VERSIONS` is what ApiVersions advertises: each API up to its
last non-flexible version (the one below ``flexible_from`` in
`kclient.protocol.messages`; this broker implements no flexible encoding
except ApiVersions v3, answered natively as KIP-511 asks), OffsetFetch from
v1, and Fetch from v0 (message formats v0/v1 are served,
`kclient.broker.convert`). Every handler takes
the decoded request ``dict`` and returns the response ``dict`` for the
schemas in `kclient.protocol.messages`, or ``None`` for "send nothing"
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
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from kclient.broker.alter_configs import ConfigAlterer
from kclient.broker.append_notifier import AppendNotifier
from kclient.broker.compacted import first_keyless_record, keyless_error
from kclient.broker.components import BrokerComponents
from kclient.broker.convert import AppendRejected, prepare_append
from kclient.broker.describe_configs import ConfigHelper
from kclient.broker.fetch import FetchHandler, leader_error
from kclient.broker.group.apis import GroupApis
from kclient.broker.group.records import OFFSETS_TOPIC
from kclient.broker.state import BrokerState, TopicFormat
from kclient.errors import (
    COORDINATOR_NOT_AVAILABLE,
    ILLEGAL_SASL_STATE,
    INVALID_REQUIRED_ACKS,
    LEADER_NOT_AVAILABLE,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    BrokerResponseError,
    KafkaError,
    error_for_code,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.list_offsets import LATEST_TIMESTAMP, MAX_TIMESTAMP
from kclient.protocol.records import iter_record_set
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
    3: (0, 8),  # Metadata
    8: (0, 7),  # OffsetCommit
    9: (0, 5),  # OffsetFetch (v0 reads ZooKeeper, as Kafka up to 3.9)
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
    22: (0, 1),  # InitProducerId
    23: (0, 3),  # OffsetsForLeaderEpoch (KIP-101, KIP-279)
    32: (0, 3),  # DescribeConfigs (KIP-133, KIP-226, KIP-569)
    33: (0, 1),  # AlterConfigs (KIP-133)
    44: (0, 0),  # IncrementalAlterConfigs (KIP-339; v1 is flexible)
    36: (0, 1),  # SaslAuthenticate (KIP-152; v1: session lifetime, KIP-368)
    42: (0, 1),  # DeleteGroups (KIP-229)
    37: (0, 1),  # CreatePartitions (KIP-195; v2 is flexible)
    47: (0, 0),  # OffsetDelete (KIP-496)
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


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection instead of
    answering (e.g. a failed Produce with acks=0)."""


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


Handler = Callable[[RequestHeader, dict], Awaitable["dict | None"]]


class RequestHandlers:
    """Dispatches decoded requests to the per-API handlers.

    ``await handle(header, body, peer_gone=...)`` returns the response body
    dict or None (no response). Raises `CloseConnection` where Kafka
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
        self.metadata_cache = components.metadata_cache
        self.replica_manager = components.replica_manager
        self.topic_admin = components.topic_admin
        #: The group APIs (`kclient.broker.group.apis`).
        self.group_apis = GroupApis(
            state.config, state.broker_id, self.metadata_cache, components.group_coordinator, zk=components.zk, clock=state.clock
        )
        self.fetch_handler = FetchHandler(self.replica_manager.partitions, self.metadata_cache, state.appends, clock=state.clock)
        self.config_helper = ConfigHelper(state.config, state.broker_id, self.metadata_cache, self.replica_manager.topic_config)
        self.config_alterer = ConfigAlterer(
            state.config,
            state.broker_id,
            self.metadata_cache,
            state.topic_overrides,
            self.replica_manager.topic_config_changed,
            zk=components.zk,
        )
        self._table: dict[int, Handler] = {
            0: self.produce,
            1: self.fetch,
            2: self.list_offsets,
            3: self.metadata,
            9: self.offset_fetch,
            10: self.find_coordinator,
            8: self.group_apis.offset_commit,
            11: self.group_apis.join_group,
            12: self.group_apis.heartbeat,
            13: self.group_apis.leave_group,
            14: self.group_apis.sync_group,
            15: self.group_apis.describe_groups,
            16: self.group_apis.list_groups,
            42: self.group_apis.delete_groups,
            47: self.group_apis.offset_delete,
            17: self.sasl_handshake,
            18: self.api_versions,
            22: self.init_producer_id,
            23: self.offset_for_leader_epoch,
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
        }

    async def handle(
        self, header: RequestHeader, body: dict, *, peer_gone: Callable[[], Awaitable[bool]] | None = None
    ) -> dict | None:
        """Answer one request (see the class docstring).

        Args:
            header: The request header.
            body: The decoded request body.
            peer_gone: An async function that returns True once the client has
                closed the connection (False: it cannot tell, data is pending);
                a Fetch long poll watches it while waiting.

        Returns:
            The response body, or ``None`` when the request gets no response
                (Produce with acks=0).

        Raises:
            CloseConnection: Kafka would close the connection instead of
                answering (no handler for the API key, a failed Produce with
                acks=0).
        """
        if header.api_key == 1:
            return await self.fetch(header, body, peer_gone=peer_gone)
        handler = self._table.get(header.api_key)
        if handler is None:
            raise CloseConnection(f"no handler for api key {header.api_key}")
        return await handler(header, body)

    async def fetch(self, header: RequestHeader, body: dict, *, peer_gone: Callable[[], Awaitable[bool]] | None = None) -> dict:
        """Fetch v0-11: `kclient.broker.fetch.FetchHandler.handle`."""
        return await self.fetch_handler.handle(header, body, peer_gone=peer_gone)

    # ------------------------------------------------------------ ApiVersions

    async def api_versions(self, header: RequestHeader, body: dict) -> dict:
        """ApiVersions v0-3: every API and version range this broker serves.
        v3 requests carry the client software name/version (KIP-511), logged
        at DEBUG."""
        if header.api_version >= 3:
            log.debug(
                "client %s runs %s %s",
                header.client_id,
                body.get("client_software_name"),
                body.get("client_software_version"),
            )
        return {
            "error_code": NONE,
            "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in supported_triples()],
            "throttle_time_ms": 0,
        }

    # ------------------------------------------------------------ SASL

    async def sasl_handshake(self, header: RequestHeader, body: dict) -> dict:
        """SaslHandshake outside an authentication (a listener without SASL,
        or after it completed): ILLEGAL_SASL_STATE, as Kafka's KafkaApis."""
        return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}

    async def sasl_authenticate(self, header: RequestHeader, body: dict) -> dict:
        """SaslAuthenticate outside an authentication: ILLEGAL_SASL_STATE."""
        return {
            "error_code": ILLEGAL_SASL_STATE,
            "error_message": "SaslAuthenticate request received after successful authentication or on a listener "
            "without SASL",
            "auth_bytes": b"",
            "session_lifetime_ms": 0,
        }

    def _address(self) -> tuple[str, int]:
        """The advertised address of the current connection's listener."""
        return listener_address.get() or (self.state.advertised_host, self.state.advertised_port)

    # ------------------------------------------------------------ Metadata

    async def metadata(self, header: RequestHeader, body: dict) -> dict:
        """Metadata v0-8. ``topics`` null (v1+) or empty (v0) means every
        topic; listed topics that do not exist are created when
        ``auto.create.topics.enable`` and the request allows it (v4+
        ``allow_auto_topic_creation``), else UNKNOWN_TOPIC_OR_PARTITION.
        This broker leads every partition with a stable leader epoch 0 and
        is the controller."""
        state = self.state
        version = header.api_version
        requested = body.get("topics")
        cache = self.metadata_cache
        if requested is None or (version == 0 and not requested):
            names = cache.topics()
            allow_create = False
        else:
            names = []
            seen = set()
            for t in requested:
                if t["name"] not in seen:
                    seen.add(t["name"])
                    names.append(t["name"])
            allow_create = bool(body.get("allow_auto_topic_creation", True)) if version >= 4 else True
        topics = []
        for name in names:
            error = await self.topic_admin.ensure_topic(name, allow_create=allow_create)
            partitions = []
            if error == NONE:
                live = cache.brokers
                for index, meta in sorted(cache.partitions(name).items()):
                    offline = [r for r in meta.replicas if r not in live]
                    partitions.append(
                        {
                            "error_code": NONE if meta.leader >= 0 and meta.leader in live else LEADER_NOT_AVAILABLE,
                            "partition_index": index,
                            "leader_id": meta.leader if meta.leader in live else -1,
                            "leader_epoch": meta.leader_epoch,
                            "replica_nodes": list(meta.replicas),
                            "isr_nodes": list(meta.isr),
                            "offline_replicas": offline,
                        }
                    )
            topics.append({"error_code": error, "name": name, "is_internal": name == OFFSETS_TOPIC, "partitions": partitions})
        return {
            "throttle_time_ms": 0,
            "brokers": self._live_brokers(),
            "cluster_id": state.cluster_id,
            # In a cluster: the controller of the last UpdateMetadata, -1 before
            # the first (as Kafka); a standalone broker is its own controller.
            "controller_id": cache.controller_id if cache.controller_id >= 0 or self.zk is not None else state.broker_id,
            "topics": topics,
        }

    def _live_brokers(self) -> list[dict]:
        """Every live broker with its endpoint of the current connection's
        listener name (this broker: the address the client connected to)."""
        state = self.state
        name = listener_name.get()
        brokers = []
        for node_id, node in sorted(self.metadata_cache.brokers.items()):
            if node_id == state.broker_id:
                continue
            ep = node.endpoint(name) or node.endpoint(None)
            if ep is not None:
                brokers.append({"node_id": node_id, "host": ep.host, "port": ep.port, "rack": node.rack})
        host, port = self._address()
        brokers.append({"node_id": state.broker_id, "host": host, "port": port, "rack": None})
        brokers.sort(key=lambda b: b["node_id"])
        return brokers

    # ------------------------------------------------------------ Produce

    async def produce(self, header: RequestHeader, body: dict) -> dict | None:
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
        acks = body["acks"]
        responses = []
        waits: list[tuple[dict, Any, int]] = []  # (partition response, Partition, required offset)
        failed = False
        for topic_data in body["topic_data"]:
            name = topic_data["name"]
            parts = []
            topic_error = NONE
            if acks in (0, 1, -1):
                topic_error = await self.topic_admin.ensure_topic(name, allow_create=True)
            for pdata in topic_data["partition_data"]:
                index = pdata["index"]
                append_time = -1
                part = None
                details: dict[str, Any] = {}
                if acks not in (0, 1, -1):
                    error, base, start = INVALID_REQUIRED_ACKS, -1, -1
                elif topic_error != NONE:
                    error, base, start = topic_error, -1, -1
                else:
                    error, base, start, append_time, part = self._append(name, index, pdata["records"], version, acks, details)
                if error != NONE:
                    failed = True
                entry = {
                    "index": index,
                    "error_code": error,
                    "base_offset": base,
                    "log_append_time_ms": append_time,
                    "log_start_offset": start,
                    "record_errors": [],
                    "error_message": None,
                }
                entry.update(details)
                parts.append(entry)
                if acks == -1 and error == NONE and part is not None:
                    waits.append((entry, part, part.log.log_end_offset))
            responses.append({"name": name, "partition_responses": parts})
        if waits:
            # acks=-1: answer once every ISR member has the records (the high
            # watermark passed them), or after timeout_ms (REQUEST_TIMED_OUT).
            deadline = trio.current_time() + max(0, body.get("timeout_ms", 0)) / 1000.0
            for entry, part, required in waits:
                code = await part.wait_for_replication(required, deadline)
                if code != NONE:
                    log.info("produce to %s-%d (acks=-1): %s", part.topic, part.partition, _code_name(code))
                    entry["error_code"] = code
        if acks == 0:
            if failed:
                raise CloseConnection("a Produce with acks=0 failed")
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    def _append(
        self, topic: str, partition: int, records, version: int, acks: int, details: dict[str, Any] | None = None
    ) -> tuple[int, int, int, int, Any]:
        """Validate, convert and append one partition's record set as its
        leader; returns ``(error_code, base_offset, log_start_offset,
        log_append_time_ms, partition)``. A compacted topic refuses records
        without a key (`kclient.broker.compacted`); ``details`` then gets
        the response's ``error_message`` and ``record_errors``."""
        state = self.state
        part = self.replica_manager.partition(topic, partition)
        if part is None:
            known = self.metadata_cache.partition(topic, partition) is not None
            return (NOT_LEADER_OR_FOLLOWER if known else UNKNOWN_TOPIC_OR_PARTITION), -1, -1, -1, None
        plog = part.log
        try:
            part.check_leader()
            part.check_min_isr(acks)
        except BrokerResponseError as exc:
            log.info("produce to %s-%d refused: %s", topic, partition, exc)
            return exc.code, -1, plog.log_start_offset, -1, None
        fmt = state.topic_overrides.format(topic)
        now = state.clock()
        try:
            prepared = prepare_append(
                records if records is not None else b"",
                produce_version=version,
                stored_magic=fmt.magic,
                log_append_time_ms=now if fmt.log_append_time else None,
                max_message_bytes=state.message_max_bytes,
                codec=fmt.codec,
            )
        except AppendRejected as exc:
            log.info("produce v%d to %s-%d rejected (error %d): %s", version, topic, partition, exc.code, exc)
            return exc.code, -1, plog.log_start_offset, -1, None
        if plog.config.compact:
            keyless = first_keyless_record(prepared.records)
            if keyless is not None:
                code, message, record_errors = keyless_error(topic, version, keyless)
                log.info("produce v%d to %s-%d rejected: %s (record %d)", version, topic, partition, message, keyless)
                if details is not None:
                    details.update(error_message=message, record_errors=record_errors)
                return code, -1, plog.log_start_offset, -1, None
        try:
            result = plog.append(
                prepared.records, now_ms=now, leader_epoch=part.leader_epoch, validate_producer_state=True, batches=prepared.batches
            )
        except BrokerResponseError as exc:
            log.info("produce to %s-%d rejected by the log: %s", topic, partition, exc)
            return (exc.code if exc.code is not None else UNKNOWN_SERVER_ERROR), -1, plog.log_start_offset, -1, None
        except Exception:
            log.exception("append to %s-%d failed", topic, partition)
            return UNKNOWN_SERVER_ERROR, -1, -1, -1, None
        if getattr(result, "duplicate", False):
            log.debug("produce to %s-%d: duplicate batch (already at offset %d)", topic, partition, result.base_offset)
        else:
            part.after_leader_append()
        return NONE, result.base_offset, plog.log_start_offset, prepared.log_append_time_ms, part

    # ------------------------------------------------------------ ListOffsets

    async def list_offsets(self, header: RequestHeader, body: dict) -> dict:
        """ListOffsets v0-5. v0 (getOffsetsBefore) answers up to
        ``max_num_offsets`` offsets, descending, from
        `kclient.storage.Log.offsets_before`; v1+ answers one
        ``(timestamp, offset)``: -1 = latest (log end offset), -2 = earliest
        (log start offset), else the first batch whose max timestamp is at
        least the one asked for (offset -1 if none)."""
        version = header.api_version
        replica_id = body.get("replica_id", -1)
        topics = []
        for t in body["topics"]:
            name = t["name"]
            parts = []
            for p in t["partitions"]:
                index = p["partition_index"]
                ts = p["timestamp"]
                entry: dict[str, Any] = {"partition_index": index, "error_code": NONE}
                part = self.replica_manager.partition(name, index)
                code = self._leader_error(name, index, part, p.get("current_leader_epoch", -1))
                if code != NONE:
                    entry["error_code"] = code
                    entry.update(old_style_offsets=[], timestamp=-1, offset=-1, leader_epoch=-1)
                    parts.append(entry)
                    continue
                plog = part.log
                # Consumers see offsets up to the high watermark; followers
                # (replica_id >= 0) up to the log end offset (Kafka's rule).
                limit = plog.log_end_offset if replica_id >= 0 else plog.high_watermark
                if version == 0:
                    offsets = []
                    for o in plog.offsets_before(ts, p.get("max_num_offsets", 1)):
                        o = min(o, limit)
                        if o not in offsets:
                            offsets.append(o)
                    entry["old_style_offsets"] = offsets
                elif ts == LATEST_TIMESTAMP:
                    entry.update(timestamp=-1, offset=limit, leader_epoch=part.leader_epoch)
                else:
                    found = plog.offset_for_timestamp(ts)
                    if found is None or found[0] >= limit:
                        entry.update(timestamp=-1, offset=-1 if ts >= 0 or ts == MAX_TIMESTAMP else limit, leader_epoch=-1)
                    else:
                        offset, found_ts = found
                        if ts >= 0:
                            offset, found_ts = _first_record_at(plog, offset, ts, found_ts)
                        entry.update(timestamp=found_ts, offset=offset, leader_epoch=part.leader_epoch)
                parts.append(entry)
            topics.append({"name": name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # ------------------------------------------------------------ groups

    async def find_coordinator(self, header: RequestHeader, body: dict) -> dict:
        """FindCoordinator v0-2:
        `kclient.broker.group.apis.GroupApis.find_coordinator`, answering
        with the endpoints of the current connection's listener name."""
        return await self.group_apis.find_coordinator(header, body, self._address(), listener_name.get())

    async def offset_fetch(self, header: RequestHeader, body: dict) -> dict:
        """OffsetFetch v0-5: `kclient.broker.group.apis.GroupApis.offset_fetch`."""
        return await self.group_apis.offset_fetch(header, body)

    # ------------------------------------------------------------ replication

    def _leader_error(self, topic: str, index: int, part: Any, current_leader_epoch: int = -1) -> int:
        """`kclient.broker.fetch.leader_error` for this broker."""
        return leader_error(self.metadata_cache, topic, index, part, current_leader_epoch)

    async def leader_and_isr(self, header: RequestHeader, body: dict) -> dict:
        """LeaderAndIsr v0-3 from the controller:
        `kclient.broker.replica_manager.ReplicaManager.leader_and_isr`."""
        return await self.replica_manager.leader_and_isr(body, header.api_version)

    async def update_metadata(self, header: RequestHeader, body: dict) -> dict:
        """UpdateMetadata v0-5 from the controller: refreshes the metadata cache."""
        return await self.replica_manager.update_metadata(body, header.api_version)

    async def stop_replica(self, header: RequestHeader, body: dict) -> dict:
        """StopReplica v0-1 from the controller."""
        return await self.replica_manager.stop_replica(body, header.api_version)

    async def offset_for_leader_epoch(self, header: RequestHeader, body: dict) -> dict:
        """OffsetsForLeaderEpoch v0-3 (KIP-101, KIP-279): for each
        partition led here, the largest leader epoch up to the one asked for
        and the offset where the next epoch starts in this log (the log end
        offset for the current epoch); ``(-1, -1)`` for an epoch older than
        the log's first. Followers truncate to it before fetching."""
        topics = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                index = p["partition"]
                part = self.replica_manager.partition(t["topic"], index)
                code = self._leader_error(t["topic"], index, part, p.get("current_leader_epoch", -1))
                if code != NONE:
                    parts.append({"error_code": code, "partition": index, "leader_epoch": -1, "end_offset": -1})
                    continue
                epoch, end = part.log.end_offset_for_epoch(p["leader_epoch"])
                parts.append({"error_code": NONE, "partition": index, "leader_epoch": epoch, "end_offset": end})
            topics.append({"topic": t["topic"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # ------------------------------------------------------------ topics

    async def create_topics(self, header: RequestHeader, body: dict) -> dict:
        """CreateTopics v0-4: `kclient.broker.topic_admin.TopicAdmin.create_topics`."""
        return await self.topic_admin.create_topics(body, header.api_version)

    async def delete_topics(self, header: RequestHeader, body: dict) -> dict:
        """DeleteTopics v0-3: `kclient.broker.topic_admin.TopicAdmin.delete_topics`."""
        return await self.topic_admin.delete_topics(body, header.api_version)

    async def create_partitions(self, header: RequestHeader, body: dict) -> dict:
        """CreatePartitions v0-1: `kclient.broker.topic_admin.TopicAdmin.create_partitions`."""
        return await self.topic_admin.create_partitions(body, header.api_version)

    async def describe_configs(self, header: RequestHeader, body: dict) -> dict:
        """DescribeConfigs v0-3 (KIP-133, KIP-226, KIP-569):
        `kclient.broker.describe_configs.ConfigHelper`."""
        return await self.config_helper.describe_configs(body, header.api_version)

    async def alter_configs(self, header: RequestHeader, body: dict) -> dict:
        """AlterConfigs v0-1 (KIP-133): `kclient.broker.alter_configs.ConfigAlterer`."""
        return await self.config_alterer.alter_configs(body, header.api_version, incremental=False)

    async def incremental_alter_configs(self, header: RequestHeader, body: dict) -> dict:
        """IncrementalAlterConfigs v0 (KIP-339): `kclient.broker.alter_configs.ConfigAlterer`."""
        return await self.config_alterer.alter_configs(body, header.api_version, incremental=True)

    # ------------------------------------------------------------ InitProducerId

    async def init_producer_id(self, header: RequestHeader, body: dict) -> dict:
        """InitProducerId v0-1 (KIP-98): a new producer id with epoch 0 for
        an idempotent producer; a transactional id keeps its producer id and
        gets the next epoch. In a cluster the ids come from blocks claimed in
        ZooKeeper (`kclient.broker.meta.claim_producer_id_block`), so no two
        brokers hand out the same id; the partition leaders check the
        sequence numbers (`kclient.storage.Log.append`)."""
        state = self.state
        txn = body.get("transactional_id")
        if state.producer_ids.needs_block and state.producer_ids.zk is not None:
            try:
                await trio.to_thread.run_sync(state.producer_ids.ensure_block)
            except KafkaError as exc:
                log.warning("InitProducerId: %s", exc)
                return {"throttle_time_ms": 0, "error_code": COORDINATOR_NOT_AVAILABLE, "producer_id": -1, "producer_epoch": -1}
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
        return {"throttle_time_ms": 0, "error_code": NONE, "producer_id": pid, "producer_epoch": epoch}
