"""The Fetch handler (v0-11) with its long poll.

Semantics (``FetchRequest.json``, KIP-74, KIP-227 and Kafka's
``ReplicaManager.fetchMessages``):

- partitions are read in request order; each gets at most
  ``min(partition_max_bytes, bytes left of the request's max_bytes)``; the
  first batch of the first partition that has data is returned whole even
  if it is larger (KIP-74), so a consumer always makes progress; a read may
  end with a partial batch, which clients drop;
- if fewer than ``min_bytes`` bytes are available and no partition has an
  error, the request waits up to ``max_wait_ms``, woken early by any append
  to a requested partition, and is then read again; a client that
  disconnects meanwhile ends the wait (`ClientGone`), so it does not
  hold a task for ``max_wait_ms`` (unless it pipelined more requests,
  whose pending bytes hide the disconnect until they are read);
- an offset outside ``[log_start_offset, log_end_offset]`` gets
  OFFSET_OUT_OF_RANGE, an unknown topic or partition
  UNKNOWN_TOPIC_OR_PARTITION;
- read_committed (v4+ ``isolation_level`` 1, KIP-98): a consumer reads up
  to the last stable offset and gets it as ``last_stable_offset``, with the
  aborted transactions of the segments read (from their ``.txnindex``); a
  read_uncommitted fetch answers the high watermark as
  ``last_stable_offset`` and no aborted transaction;
- fetch sessions (v7+) are not kept: the answer's session id is 0, so
  clients keep sending full fetch requests; an incremental request (epoch
  > 0) gets FETCH_SESSION_ID_NOT_FOUND;
- zero copy: v4+ gets the stored bytes as they are, as
  `kclient.storage.FileSlice` ranges of the segment files
  (`kclient.storage.Log.read_slice`) that the server sends with
  ``os.sendfile`` (`kclient.broker.zerocopy`); the response owns the
  slices until it is sent (or dropped), so a segment deleted by retention
  meanwhile stays readable until then;
- message formats (``KafkaApis`` down-conversion): v2-3 can carry message
  sets up to v1 and v0-1 only v0,
  so newer batches are down-converted for them with exact offsets
  (`kclient.broker.convert.down_convert`); zstd batches have no v0/v1
  form, so a v0-3 read that meets one gets UNSUPPORTED_COMPRESSION_TYPE.
  Fetch v4-9 get zstd batches as stored, as Kafka does for a topic whose
  ``compression.type`` is ``producer`` (KIP-110 refuses v4-9 only for
  topics configured as zstd, a setting this broker does not have).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Set
from typing import TYPE_CHECKING, Any

import trio

from kclient.broker.convert import down_convert, has_zstd
from kclient.broker.zerocopy import release_slices
from kclient.clock import now_ms
from kclient.errors import (
    FENCED_LEADER_EPOCH,
    FETCH_SESSION_ID_NOT_FOUND,
    KAFKA_STORAGE_ERROR,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_COMPRESSION_TYPE,
    BrokerResponseError,
    CorruptRecordError,
)
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from kclient.protocol.records.codecs import CodecError
from kclient.protocol.records.formats import fetch_magic

if TYPE_CHECKING:
    from kclient.broker.append_notifier import AppendNotifier
    from kclient.broker.metadata_cache import MetadataCache
    from kclient.broker.partition import Partition
    from kclient.storage import FileSlice, Log

log = logging.getLogger("kclient.broker")

_NO_LIMIT = 0x7FFFFFFF
#: ``isolation_level`` of a read_committed Fetch / ListOffsets (KIP-98).
READ_COMMITTED = 1


class ClientGone(Exception):
    """The client closed its connection while its Fetch long poll waited;
    there is no one to answer."""


def _partition_error(index: int, error: int, hw: int = -1, start: int = -1) -> PartitionData:
    return PartitionData(
        partition_index=index,
        error_code=error,
        high_watermark=hw,
        last_stable_offset=hw,
        log_start_offset=start,
        aborted_transactions=[],
        preferred_read_replica=-1,
        records=b"",
    )


class _Empty:
    """An empty read at or above the high watermark."""

    def __init__(self, hw: int, log_start_offset: int) -> None:
        self.high_watermark = hw
        self.log_start_offset = log_start_offset


def leader_error(metadata_cache: MetadataCache, topic: str, index: int, part: Partition | None, current_leader_epoch: int = -1) -> int:
    """Whether this broker may answer for ``topic``-``index`` as its leader.

    Args:
        metadata_cache: The partitions the cluster has.
        topic: The topic.
        index: The partition.
        part: The hosted `kclient.broker.partition.Partition`, or None.
        current_leader_epoch: The leader epoch the request names (KIP-320),
            -1 for none.

    Returns:
        NONE if this broker leads it (at the epoch named: older
            FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH), else
            NOT_LEADER_OR_FOLLOWER for a partition the cluster has,
            UNKNOWN_TOPIC_OR_PARTITION for one it has not.
    """
    if part is None:
        known = metadata_cache.partition(topic, index) is not None
        return NOT_LEADER_OR_FOLLOWER if known else UNKNOWN_TOPIC_OR_PARTITION
    if current_leader_epoch >= 0:
        if current_leader_epoch < part.leader_epoch:
            return FENCED_LEADER_EPOCH
        if current_leader_epoch > part.leader_epoch:
            return UNKNOWN_LEADER_EPOCH
    if not part.is_leader:
        return NOT_LEADER_OR_FOLLOWER
    return NONE


class FetchHandler:
    """Answers Fetch requests (see the module docstring).

    Args:
        partitions: The hosted partitions, ``(topic, partition) ->``
            `kclient.broker.partition.Partition` (the replica manager's).
        metadata_cache: The partitions the cluster has.
        appends: Wakes long polls when a partition they read grows.
        clock: The wall clock in ms (when a follower fetched).
        offline: The partitions whose log directory is offline (KIP-112):
            answered KAFKA_STORAGE_ERROR.
        storage_error: Called with ``(topic, partition, error)`` when a read
            fails with an ``OSError``: the partition is answered
            KAFKA_STORAGE_ERROR and the callee takes its log directory
            offline (Kafka's ``ReplicaManager.readFromLocalLog``, KIP-112);
            the other partitions of the request are read as usual. Called
            in the thread that reads, the event loop's (`read` runs there).
            None: such a read is answered UNKNOWN_SERVER_ERROR.
    """

    def __init__(
        self,
        partitions: Mapping[tuple[str, int], Partition],
        metadata_cache: MetadataCache,
        appends: AppendNotifier,
        *,
        clock: Callable[[], int] = now_ms,
        offline: Set[tuple[str, int]] = frozenset(),
        storage_error: Callable[[str, int, OSError], None] | None = None,
    ) -> None:
        self.offline = offline
        self.storage_error = storage_error
        self.partitions = partitions
        self.metadata_cache = metadata_cache
        self.appends = appends
        self.clock = clock

    def read(self, body: FetchRequest, version: int, *, zero_copy: bool = True) -> tuple[list[FetchableTopicResponse], int, bool]:
        """Read every requested partition once.

        Args:
            body: The Fetch request.
            version: The Fetch request's version.
            zero_copy: For v4+, return `kclient.storage.FileSlice` objects
                instead of bytes.

        Returns:
            ``(responses, total_record_bytes, any_error)`` where ``responses``
                is the Fetch response's ``responses`` array. Records are
                down-converted bytes for ``version`` < 4; for v4+ they are
                `kclient.storage.FileSlice` objects when ``zero_copy`` (the caller
                owns them: `kclient.broker.zerocopy.release_slices`), else bytes
                read from the files. An empty read is ``b""``.
        """
        responses: list[FetchableTopicResponse] = []
        try:
            return _read_fetch(
                self.partitions, self.metadata_cache, self.clock, body, version, zero_copy, responses, self.offline, self.storage_error
            )
        except BaseException:
            release_slices(responses)
            raise

    async def handle(
        self, header: RequestHeader, body: FetchRequest, *, peer_gone: Callable[[], Awaitable[bool]] | None = None
    ) -> FetchResponse:
        """Answer a Fetch request v0-11 (see the module docstring).

        Waits up to ``max_wait_ms`` (ms) for ``min_bytes`` (bytes) of records.
        Reads superseded during the long poll, and every read when cancelled,
        are released here.

        Args:
            header: The request header.
            body: The Fetch request.
            peer_gone: Awaited while waiting: True once the client disconnected,
                False when it cannot tell.

        Returns:
            The response. For v4+ its ``records`` are
                `kclient.storage.FileSlice` objects owned by the caller (encode
                them with `kclient.broker.zerocopy.encode_spliced_response`).

        Raises:
            ClientGone: ``peer_gone()`` said the client is gone.
        """
        version = header.api_version
        if version >= 7 and body.session_epoch not in (-1, 0):
            log.info("incremental fetch (session %s epoch %s) from %s: no such session", body.session_id, body.session_epoch, header.client_id)
            return FetchResponse(error_code=FETCH_SESSION_ID_NOT_FOUND)
        min_bytes = body.min_bytes
        max_wait_ms = body.max_wait_ms
        if min_bytes <= 0 or max_wait_ms <= 0:
            # No long poll: one read, answered at once (nothing to wait for).
            responses, _, _ = self.read(body, version)
            return FetchResponse(responses=responses)
        keys = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
        deadline = trio.current_time() + max_wait_ms / 1000.0
        while True:
            event = self.appends.register(keys)
            try:
                responses, total, any_error = self.read(body, version)
                if total >= min_bytes or any_error or not keys or trio.current_time() >= deadline:
                    break
                release_slices(responses)
                with trio.move_on_at(deadline):
                    if peer_gone is None:
                        await event.wait()
                    elif await _wait_unless_gone(event, peer_gone):
                        raise ClientGone
            finally:
                self.appends.unregister(keys, event)
        return FetchResponse(responses=responses)


def _leader_or_storage_error(
    cache: MetadataCache, topic: str, index: int, part: Partition | None, epoch: int, offline: Set[tuple[str, int]]
) -> int:
    """`leader_error`, but KAFKA_STORAGE_ERROR for a partition whose log
    dir is offline (KIP-112; Kafka's ``HostedPartition.Offline``)."""
    if part is None and offline and (topic, index) in offline:
        return KAFKA_STORAGE_ERROR
    return leader_error(cache, topic, index, part, epoch)


def _read_fetch(
    hosted: Mapping[tuple[str, int], Partition],
    cache: MetadataCache,
    clock: Callable[[], int],
    body: FetchRequest,
    version: int,
    zero_copy: bool,
    responses: list[FetchableTopicResponse],
    offline: Set[tuple[str, int]] = frozenset(),
    storage_error: Callable[[str, int, OSError], None] | None = None,
) -> tuple[list[FetchableTopicResponse], int, bool]:
    remaining = body.max_bytes if version >= 3 else _NO_LIMIT
    replica_id = body.replica_id
    follower = replica_id >= 0
    read_committed = version >= 4 and body.isolation_level == READ_COMMITTED and not follower
    to_magic = fetch_magic(version)
    use_slices = zero_copy and to_magic >= 2
    min_one = True
    total = 0
    any_error = False
    for topic in body.topics:
        name = topic.topic
        parts: list[PartitionData] = []
        responses.append(FetchableTopicResponse(topic=name, partitions=parts))
        for p in topic.partitions:
            index = p.partition
            part = hosted.get((name, index))
            epoch = p.current_leader_epoch
            # (the common case, a led partition and no epoch named, inline)
            if part is None or epoch >= 0 or not part.is_leader:
                code = _leader_or_storage_error(cache, name, index, part, epoch, offline)
                if code != NONE or part is None:
                    parts.append(_partition_error(index, code))
                    any_error = True
                    continue
            plog = part.log
            limit = min(p.partition_max_bytes, remaining)
            fetch_offset = p.fetch_offset
            # Consumers read below the high watermark (read_committed: the
            # last stable offset), followers to the log end.
            hw = plog.high_watermark
            bound = _read_bound(plog, hw, follower, read_committed)
            try:
                if bound is not None and bound <= fetch_offset <= plog.log_end_offset:
                    records: Any = b""
                    result: Any = _Empty(hw, plog.log_start_offset)
                elif use_slices:
                    result = plog.read_slice(fetch_offset, max(limit, 0), min_one_batch=min_one, max_offset=bound)
                    records = result if result.length else b""
                    if not result.length:
                        result.release()
                    else:
                        _open_now(result)
                else:
                    result = plog.read(fetch_offset, max(limit, 0), min_one_batch=min_one, max_offset=bound)
                    records = result.records
                if follower:
                    part.record_follower_fetch(replica_id, fetch_offset, clock())
            except BrokerResponseError as exc:
                code = exc.code if exc.code is not None else UNKNOWN_SERVER_ERROR
                if code != OFFSET_OUT_OF_RANGE:
                    log.warning("fetch from %s-%d failed: %s", name, index, exc)
                parts.append(_partition_error(index, code, plog.high_watermark, plog.log_start_offset))
                any_error = True
                continue
            except OSError as exc:
                if storage_error is None:
                    log.exception("fetch from %s-%d failed", name, index)
                    parts.append(_partition_error(index, UNKNOWN_SERVER_ERROR, plog.high_watermark, plog.log_start_offset))
                else:
                    storage_error(name, index, exc)  # KIP-112: its log dir goes offline
                    parts.append(_partition_error(index, KAFKA_STORAGE_ERROR))
                any_error = True
                continue
            except Exception:
                log.exception("fetch from %s-%d failed", name, index)
                parts.append(_partition_error(index, UNKNOWN_SERVER_ERROR, plog.high_watermark, plog.log_start_offset))
                any_error = True
                continue
            if records and to_magic < 2:
                try:
                    if has_zstd(records):
                        log.info("fetch v%d from %s-%d: zstd batches have no v%d form", version, name, index, to_magic)
                        parts.append(_partition_error(index, UNSUPPORTED_COMPRESSION_TYPE, hw, result.log_start_offset))
                        any_error = True
                        continue
                    records = down_convert(records, to_magic, fetch_offset=fetch_offset, max_bytes=max(limit, 0))
                except (CorruptRecordError, CodecError) as exc:
                    log.warning("fetch v%d from %s-%d: cannot down-convert the stored data: %s", version, name, index, exc)
                    parts.append(_partition_error(index, UNKNOWN_SERVER_ERROR, hw, result.log_start_offset))
                    any_error = True
                    continue
            if records:
                size = len(records)
                min_one = False
                remaining -= size
                total += size
            hw = plog.high_watermark
            if read_committed:
                parts.append(_committed_data(index, plog, fetch_offset, bound, result.log_start_offset, records))
                continue
            parts.append(
                PartitionData(
                    partition_index=index,
                    error_code=NONE,
                    high_watermark=hw,
                    last_stable_offset=hw,
                    log_start_offset=result.log_start_offset,
                    aborted_transactions=[],
                    preferred_read_replica=-1,
                    records=records,
                )
            )
    return responses, total, any_error


def _open_now(piece: FileSlice) -> None:
    """Open the slice's segment file now (a rolled segment holds no
    descriptor until read, `kclient.storage.handles`): a file that cannot
    be opened fails this read, answered KAFKA_STORAGE_ERROR, instead of the
    send of a response whose size already went out. The descriptor stays
    in the handle cache for the send.

    Raises:
        OSError: The open failed (the slice is released then).
    """
    try:
        with piece.hold():
            pass
    except BaseException:
        piece.release()
        raise


def _read_bound(plog: Log, hw: int, follower: bool, read_committed: bool) -> int | None:
    """Where a fetch stops: a follower at the log end (``None``), a
    read_committed consumer at the last stable offset, others at the high
    watermark ``hw``."""
    if follower:
        return None
    return plog.last_stable_offset if read_committed else hw


def _committed_data(index: int, plog: Log, fetch_offset: int, lso: int | None, log_start_offset: int, records: Any) -> PartitionData:
    """A read_committed answer: the last stable offset the read stopped at
    and the aborted transactions overlapping the records (KIP-98; Kafka's
    ``FetchResponse`` ``lastStableOffset`` / ``abortedTransactions``)."""
    if lso is None:  # (a consumer's read always has its bound)
        lso = plog.last_stable_offset
    aborted = [AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset) for t in plog.aborted_transactions(fetch_offset, lso)] if records else []
    return PartitionData(
        partition_index=index,
        error_code=NONE,
        high_watermark=plog.high_watermark,
        last_stable_offset=lso,
        log_start_offset=log_start_offset,
        aborted_transactions=aborted,
        preferred_read_replica=-1,
        records=records,
    )


async def _wait_unless_gone(event: trio.Event, peer_gone: Callable[[], Awaitable[bool]]) -> bool:
    """Wait for ``event``; return True early if ``peer_gone()`` reports the
    client gone (False once the event fired)."""
    gone = False
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            """Cancel the wait if the client is gone."""
            nonlocal gone
            if await peer_gone():
                gone = True
                nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        await event.wait()
        nursery.cancel_scope.cancel()
    return gone
