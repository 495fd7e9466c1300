"""Step 5 of the event handler's send path: one attempt of writing the
pending batches of some partitions to their leaders and reading the
answers (Kafka's producer ``Sender``: ``sendProduceRequests`` and
``handleProduceResponse``).

An attempt groups the partitions by leader and writes, leader by leader and
back to back on each connection (the broker answers a connection's requests
in order), as few Produce requests as ``max.request.size`` allows, with the
highest Produce version both sides support (capped by ``api.version``); each
batch is encoded in the message format that version carries (Kafka
protocol guide: v3+ record batch v2, v2 message set v1, v0-1 message set
v0). Then it awaits every answer and records, per partition, which batch
failed first (`PartitionSend.fail`) and which may be in the log anyway
(`PartitionSend.may_be_written`): written and not answered, or answered
with REQUEST_TIMED_OUT / NOT_ENOUGH_REPLICAS_AFTER_APPEND. Acknowledged
batches are dropped; the records of tracked ones (sent with a delivery
callback or future) get their `RecordMetadata`. The retries around the
attempts are `kclient.client.producer.event_handler`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kclient.client.producer.batching import BatchBuilder, PartitionSend
from kclient.client.producer.delivery import RecordMetadata
from kclient.client.producer.settings import ProducerSettings
from kclient.errors import (
    DUPLICATE_SEQUENCE_NUMBER,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    REQUEST_TIMED_OUT,
    AuthenticationError,
    KafkaError,
    LeaderNotAvailableError,
    MessageSizeTooLargeError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
    error_for_code,
)
from kclient.protocol.messages import PRODUCE
from kclient.protocol.messages.produce import PartitionProduceData, PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceData
from kclient.protocol.records import codecs as _codecs
from kclient.protocol.records.formats import ZSTD_MIN_PRODUCE_VERSION, produce_magic_max

if TYPE_CHECKING:  # pragma: no cover
    from kclient.client.cluster import Cluster

__all__ = ["APPENDED_CODES", "PARTITION_OVERHEAD", "Sender"]

#: Per-partition overhead of a Produce request besides the batch (bytes).
PARTITION_OVERHEAD = 16
#: Produce error codes that the broker sends after (possibly) appending.
APPENDED_CODES = frozenset((REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND))

#: One written Produce request: ``(node_id, [(part, batch index), ...],
#: PendingResponse or None with acks=0)``.
Written = tuple[int, list[tuple[PartitionSend, int]], Any]
#: ``(id(part), batch index) -> (base offset, LogAppendTime in ms or -1)``.
Offsets = dict[tuple[int, int], tuple[int, int]]


class Sender:
    """Writes partitions' batches to their leaders and reads the answers.

    Args:
        cluster: The producer's `Cluster` (its ``metadata``,
            ``broker_connection``).
        settings: The send-path settings (``acks``, ``timeout_ms``,
            ``max_request_bytes``, ``codec``, ``max_produce_version``).
        batches: Re-encodes a partition's chunks for the message format the
            leader's Produce version carries.
    """

    def __init__(self, cluster: Cluster, settings: ProducerSettings, batches: BatchBuilder) -> None:
        self._cluster = cluster
        self._settings = settings
        self._batches = batches

    async def send_round(self, parts: list[PartitionSend]) -> None:
        """One attempt: write every request, then read every response;
        per-partition errors are recorded on the parts.

        Args:
            parts: The partitions with pending batches.
        """
        await self.read_round(await self.write_round(parts), parts)

    # -- writing --------------------------------------------------------------

    async def write_round(self, parts: list[PartitionSend]) -> list[Written]:
        """Group ``parts`` by leader and write their Produce requests, leader
        by leader (a part without a leader fails with
        `LeaderNotAvailableError`).

        Args:
            parts: The partitions with pending batches.

        Returns:
            The requests written, in order (the plan `read_round` reads).
        """
        by_leader: dict[int, list[PartitionSend]] = {}
        metadata = self._cluster.metadata
        for part in parts:
            leader = -1
            infos = metadata.partitions_for(part.topic)
            p = part.partition
            # Sorted by id, so usually partition p is at index p (a lookup,
            # not a scan: a request may carry thousands of partitions).
            if 0 <= p < len(infos) and infos[p].partition == p:
                leader = infos[p].leader
            else:
                leader = next((info.leader for info in infos if info.partition == p), -1)
            if leader < 0:
                part.fail(0, LeaderNotAvailableError(f"topic {part.topic!r} partition {part.partition} has no leader"))
                continue
            by_leader.setdefault(leader, []).append(part)
        plan: list[Written] = []
        for node, group in by_leader.items():
            plan.extend(await self.write_to_leader(node, group))
        return plan

    async def write_to_leader(self, node_id: int, parts: list[PartitionSend]) -> list[Written]:
        """Write the batches of ``parts`` to broker ``node_id`` in as few
        Produce requests as ``max.request.size`` allows, back to back (the
        broker answers a connection's requests in order). Each request
        takes the next batch of each partition while it stays within the
        limit.

        Args:
            node_id: The leader's broker id.
            parts: Its partitions.

        Returns:
            The requests written; a part that could not be written is
            failed (`PartitionSend.fail`) instead.
        """
        s = self._settings
        try:
            conn = await self._cluster.broker_connection(node_id)
            version = conn.version_for(PRODUCE, ceiling=s.max_produce_version)
        except KafkaError as exc:
            for part in parts:
                part.fail(0, exc)
            return []
        parts = self._encodable(node_id, version, parts)
        cursor = {id(part): 0 for part in parts}
        active = parts
        written: list[Written] = []
        while active:
            chosen = self._next_request(active, cursor)
            try:
                handle = await conn.start_request(PRODUCE, self._produce_body(chosen), version=version, expect_response=s.acks != 0)
            except KafkaError as exc:
                for part in active:
                    part.fail(cursor[id(part)], exc)
                break
            written.append((node_id, chosen, handle))
            for part, _ in chosen:
                cursor[id(part)] += 1
            active = [part for part in active if cursor[id(part)] < len(part.batches)]
        return written

    def _encodable(self, node_id: int, version: int, parts: list[PartitionSend]) -> list[PartitionSend]:
        """The parts that Produce ``version`` can carry, each encoded in its
        message format; the others failed (zstd below Produce v7, KIP-110;
        headers in a v0/v1 message set, KIP-82; a record too large)."""
        s = self._settings
        if s.codec == _codecs.ZSTD and version < ZSTD_MIN_PRODUCE_VERSION and any(p.codec for p in parts):
            cap = "" if s.max_produce_version is None else f" (api.version caps it at v{s.max_produce_version})"
            exc = UnsupportedCompressionTypeError(f"zstd needs Produce v{ZSTD_MIN_PRODUCE_VERSION}+, broker {node_id} supports v{version}{cap}")
            for part in parts:
                if part.codec:
                    part.fail(0, exc)
            parts = [p for p in parts if not p.codec]
        magic = produce_magic_max(version)
        for part in parts:
            try:
                self._batches.use_magic(part, magic)
            except (MessageSizeTooLargeError, UnsupportedForMessageFormatError, TypeError) as exc:
                part.fail(0, exc)
        return [p for p in parts if p.error is None]

    def _next_request(self, active: list[PartitionSend], cursor: dict[int, int]) -> list[tuple[PartitionSend, int]]:
        """The next batch of each active part while the request stays within
        ``max.request.size`` (the first one always)."""
        budget = self._settings.max_request_bytes
        chosen: list[tuple[PartitionSend, int]] = []
        for part in active:
            i = cursor[id(part)]
            n = len(part.batches[i]) + PARTITION_OVERHEAD + len(part.topic)
            if chosen and n > budget:
                continue
            chosen.append((part, i))
            budget -= n
        return chosen

    def _produce_body(self, chosen: list[tuple[PartitionSend, int]]) -> ProduceRequest:
        """The Produce request carrying batch ``i`` of each ``(part, i)``
        (Kafka protocol guide, Produce API)."""
        s = self._settings
        topics: dict[str, list[PartitionProduceData]] = {}
        new = object.__new__
        for part, i in chosen:
            # PartitionProduceData(index=..., records=...) built as the
            # codec's message reader builds messages: both fields set, no
            # keyword call (a third of the request's encode time at 64
            # partitions).
            data = new(PartitionProduceData)
            data.index = part.partition
            data.records = part.batches[i]
            topics.setdefault(part.topic, []).append(data)
        return ProduceRequest(
            transactional_id=s.transactional_id,
            acks=s.acks,
            timeout_ms=s.timeout_ms,
            topic_data=[TopicProduceData(name=t, partition_data=pd) for t, pd in topics.items()],
        )

    # -- reading --------------------------------------------------------------

    async def read_round(self, plan: list[Written], parts: list[PartitionSend], spin: float = 0.0) -> None:
        """Await every response of ``plan`` in order, record per-partition
        errors, then drop each part's acknowledged batches (everything before
        its first failed batch) and resolve their tracked records.

        Args:
            plan: The requests `write_round` wrote.
            parts: The partitions of the attempt.
            spin: Poll each response's socket that long (s) before sleeping
                (``socket.busy.poll.us``).
        """
        acked: list[tuple[PartitionSend, int]] = []  # (part, batch index) acknowledged in this round
        offsets: Offsets = {}  # (id(part), batch index) -> (base offset, log append time), tracked parts only
        for node_id, chosen, handle in plan:
            if handle is None:  # acks=0: written is all there is
                continue
            response = await _await_response(handle, chosen, spin)
            if response is None:
                continue
            if any(part.tracked for part, _ in chosen):
                note_offsets(response, chosen, offsets)
            errored = _record_errors(node_id, response, chosen)
            if errored is None:
                acked.extend(chosen)
            else:
                acked.extend(c for c in chosen if id(c[0]) not in errored)
        for part, i in acked:
            # Acknowledged, but kept for a retry behind an earlier failed
            # batch of its partition: it is in the log.
            if part.failed_from is not None and i > part.failed_from:
                part.may_be_written(i)
        for part in parts:
            cut = len(part.batches) if part.failed_from is None else part.failed_from
            if part.tracked and cut:
                resolve_acked(part, cut, offsets)
            part.drop_acknowledged(cut)


async def _await_response(handle: Any, chosen: list[tuple[PartitionSend, int]], spin: float) -> Any:
    """The response to one written request, or None when none came (its
    batches failed; written, then no answer: the broker may have appended
    them, unless authentication failed)."""
    if spin:
        handle.busy_wait(spin)
    try:
        return await handle.wait()
    except KafkaError as exc:
        written = not isinstance(exc, AuthenticationError)
        for part, i in chosen:
            part.fail(i, exc)
            if written:
                part.may_be_written(i)
        return None


def _record_errors(node_id: int, response: ProduceResponse, chosen: list[tuple[PartitionSend, int]]) -> set[int] | None:
    """Fail the batches of ``chosen`` whose partition answered with an error
    code; return the ``id()`` of their parts (None: no error)."""
    errored = None
    for t in response.responses:
        name = t.name
        for pr in t.partition_responses:
            code = pr.error_code
            if not code or code == DUPLICATE_SEQUENCE_NUMBER:
                # 46: an idempotent batch the leader already holds (a retry
                # of one whose answer was lost): written.
                continue
            msg = pr.error_message or ""
            err = error_for_code(code)(f"topic {name!r} partition {pr.index} on broker {node_id}" + (f": {msg}" if msg else ""))
            for part, i in chosen:
                if part.topic == name and part.partition == pr.index:
                    part.fail(i, err)
                    if code in APPENDED_CODES:
                        part.may_be_written(i)
                    if errored is None:
                        errored = set()
                    errored.add(id(part))
    return errored


def note_offsets(response: ProduceResponse, chosen: list[tuple[PartitionSend, int]], offsets: Offsets) -> None:
    """Remember the base offset and LogAppendTime of each acknowledged batch
    of a tracked partition in ``chosen``.

    Args:
        response: The Produce response (LogAppendTime -1 below v2).
        chosen: The request's ``(part, batch index)`` pairs.
        offsets: Filled: ``(id(part), batch index) -> (base offset, log
            append time in ms or -1)``.
    """
    answers: dict[tuple[str, int], PartitionProduceResponse] = {(t.name, pr.index): pr for t in response.responses for pr in t.partition_responses}
    for part, i in chosen:
        if part.tracked:
            pr = answers.get((part.topic, part.partition))
            if pr is not None and (not pr.error_code or pr.error_code == DUPLICATE_SEQUENCE_NUMBER):
                offsets[(id(part), i)] = (pr.base_offset, pr.log_append_time_ms)


def resolve_acked(part: PartitionSend, cut: int, offsets: Offsets) -> None:
    """Resolve the tracked records of ``part``'s first ``cut`` batches (all
    acknowledged): offset = the batch's base offset + the record's index in
    it (-1 with acks=0); timestamp = LogAppendTime if the broker set one,
    else the record's CreateTime.

    Args:
        part: A partition with tracked records.
        cut: How many of its batches, from the first, were acknowledged.
        offsets: What `note_offsets` noted.
    """
    tracked = part.tracked
    assert tracked is not None
    topic, partition = part.topic, part.partition
    for i in range(cut):
        base, append_time = offsets.get((id(part), i), (-1, -1))
        for j, r in enumerate(part.chunks[i]):
            t = tracked.pop(id(r), None)
            if t is None:
                continue
            key, value = r[0], r[1]
            t[0].succeeded(
                t[1],
                RecordMetadata(
                    topic,
                    partition,
                    base + j if base >= 0 else -1,
                    append_time if append_time is not None and append_time >= 0 else r[2],
                    -1 if key is None else len(key),
                    -1 if value is None else len(value),
                ),
            )
