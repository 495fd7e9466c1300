"""Per-partition batching for the producer: split a partition's records
into chunks that fit one Produce request and encode each chunk as ONE
record batch v2, or as one v0/v1 message set when the leader's Produce
version cannot carry v2 (the whole set compressed into one wrapper
message, never message by message).

Sizes follow the Kafka protocol guide ("Record Batch", "Record", "Record
Header") and the v0/v1 message format of the Kafka design docs ("Message
Format"). `BatchBuilder` does the work for the `DefaultEventHandler`;
`PartitionSend` carries one partition's state through a send.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from kclient.client.producer.settings import ProducerSettings
from kclient.errors import MessageSizeTooLargeError, UnsupportedForMessageFormatError
from kclient.protocol.primitives import varint_size
from kclient.protocol.records import Header, build_batch, build_message_set, legacy, v2
from kclient.protocol.records.formats import produce_magic_max
from kclient.protocol.records.scan import LOG_OVERHEAD

#: Per-record overhead assumed when sizing v2 batches (bytes), the worst case
#: owned by `kclient.protocol.records.v2.RECORD_OVERHEAD`.
RECORD_OVERHEAD = v2.RECORD_OVERHEAD
#: Room left for a codec's worst-case growth of incompressible data (lz4
#: adds n/255, gzip and xerial-framed snappy a few bytes per block).
COMPRESSION_MARGIN = 1 / 32
#: Per-message size of a v1 message set entry beyond key and value (bytes):
#: the log overhead (offset 8 + size 4) plus Kafka's
#: ``LegacyRecord.RECORD_OVERHEAD_V1`` (22), 12 + 22 = 34; used for v0 too
#: (8 bytes less there, so an upper bound).
LEGACY_RECORD_OVERHEAD = LOG_OVERHEAD + legacy.RECORD_OVERHEAD[1]
#: v2 batch header (bytes), `kclient.protocol.records.v2.HEADER_SIZE`.
BATCH_OVERHEAD = v2.HEADER_SIZE


class PartitionSend:
    """Send state of one topic-partition within one event handler ``handle``
    call: its records, their chunks, the encoded batches not acknowledged
    yet, and the first error."""

    __slots__ = (
        "topic", "partition", "records", "codec", "chunks", "batches", "counts", "magic", "error", "failed_from", "header_bytes", "maybe",
        "producer_id", "producer_epoch", "sequences", "tracked",
    )

    def __init__(self, topic: str, partition: int, records: list[Any] | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.records: list[Any] = records if records is not None else []
        self.codec = 0
        self.chunks: list[list[Any]] = []  # records of each batch not yet acknowledged, in order
        self.batches: list[bytes] = []  # the chunks encoded in message format ``magic``
        self.counts: list[int] = []  # records per batch
        self.magic = 2
        self.error: BaseException | None = None
        self.failed_from: int | None = None  # first batch index not written in this round
        self.header_bytes = 0  # encoded size of every record header queued here (0: no record has headers)
        # id() of every pending record that some attempt may have written
        # (request written, outcome unknown); None while there is none.
        self.maybe: set[int] | None = None
        # Idempotent producer (KIP-98): the producer id and epoch the chunks
        # were numbered under and each pending chunk's base sequence; None
        # for a producer without enable.idempotence.
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: list[int] | None = None
        # Records sent with a delivery callback or future: id() of the
        # record tuple -> (DeliveryReport, index in its ProducerData); None
        # while there is none (the usual case).
        self.tracked: dict[int, tuple[Any, int]] | None = None

    @property
    def pending_messages(self) -> int:
        """How many records are pending (in chunks not acknowledged yet)."""
        return sum(self.counts)

    def fail(self, index: int, error: BaseException) -> None:
        """Record that batch ``index`` (and so every later one) was not
        written in this round; the first failure's error is the one
        reported.

        Args:
            index: The batch's index in ``batches``.
            error: Why it failed.
        """
        if self.failed_from is None or index < self.failed_from:
            self.failed_from = index
            self.error = error
        elif self.error is None:
            self.error = error

    def may_be_written(self, index: int) -> None:
        """Record that batch ``index`` may be in the log (its request was
        written and no answer settled it, or it was acknowledged behind a
        failed batch).

        Args:
            index: The batch's index in ``batches``.
        """
        if self.maybe is None:
            self.maybe = set()
        self.maybe.update(map(id, self.chunks[index]))

    def possibly_written(self) -> int:
        """How many of the pending records some attempt may have written."""
        maybe = self.maybe
        if not maybe:
            return 0
        return sum(1 for chunk in self.chunks for r in chunk if id(r) in maybe)

    def drop_acknowledged(self, cut: int) -> None:
        """Forget the first ``cut`` batches (acknowledged) and start the next
        round with no failure.

        Args:
            cut: How many batches, from the first, were acknowledged.
        """
        del self.batches[:cut]
        del self.chunks[:cut]
        del self.counts[:cut]
        if self.sequences is not None:
            del self.sequences[:cut]
        self.failed_from = None

    def clear_batches(self) -> None:
        """Drop every chunk and batch (the partition failed before its first
        request)."""
        self.batches = []
        self.chunks = []
        self.counts = []
        self.sequences = None


def v2_record_size(key: bytes | None, value: bytes | None, timestamp_delta: int, offset_delta: int) -> int:
    """Encoded size of a v2 record without headers, its length prefix
    included (Kafka protocol guide, "Record"; zigzag varints).

    Args:
        key: The serialized key, or None.
        value: The serialized value, or None.
        timestamp_delta: Its timestamp less the batch's first (ms).
        offset_delta: Its offset less the batch's base offset.

    Returns:
        The size in bytes.
    """
    body = 2 + varint_size(timestamp_delta) + varint_size(offset_delta)
    body += 1 if key is None else varint_size(len(key)) + len(key)
    body += 1 if value is None else varint_size(len(value)) + len(value)
    return body + varint_size(body)


_key_of = itemgetter(0)
_value_of = itemgetter(1)


def headers_size(headers: Sequence[Any]) -> int:
    """Upper bound of the encoded size of a record's headers (Kafka protocol
    guide, "Record Header").

    Args:
        headers: `Header` objects or ``(str, bytes | None)`` pairs.

    Returns:
        The bound in bytes: the count and each key and value length taken
        as 5-byte varints.
    """
    total = 5
    for h in headers:
        hk, hv = (h.key, h.value) if isinstance(h, Header) else h
        total += 10 + len(hk.encode("utf-8")) + (len(hv) if hv is not None else 0)
    return total


class BatchBuilder:
    """Chunks and encodes partitions' records per `ProducerSettings`.

    Args:
        settings: the producer's send-path settings; a batch must fit in
            one request next to the request's own fields, so
            ``max_batch_bytes`` is ``max.request.size`` less 512 bytes
            (at least 1024).
    """

    def __init__(self, settings: ProducerSettings) -> None:
        self.settings = settings
        self.max_batch_bytes = max(1024, settings.max_request_bytes - 512)
        # A transactional producer's batches carry the transactional bit (KIP-98).
        self._transactional = settings.transactional_id is not None

    def build(self, part: PartitionSend, magic: int | None = None, stamp: Callable[[PartitionSend], None] | None = None) -> None:
        """Split a partition's records into chunks that fit a request and
        encode them.

        Args:
            part: The partition; its ``records`` move into ``chunks`` and
                ``batches``.
            magic: The message format; default: the format the
                ``api.version`` cap allows, else v2.
            stamp: Called once the chunks are known and before they are
                encoded, to set ``part``'s producer id, epoch and base
                sequences (the idempotent producer's
                `IdempotentProducerState.stamp`).

        Raises:
            MessageSizeTooLargeError: one record alone does not fit.
            UnsupportedForMessageFormatError: records with headers for a
                v0/v1 message set.
            TypeError: a key or value is not bytes after serialization.
        """
        s = self.settings
        codec = s.codec if s.codec and (not s.compressed_topics or part.topic in s.compressed_topics) else 0
        if magic is None:
            magic = 2 if s.max_produce_version is None else produce_magic_max(s.max_produce_version)
        part.codec = codec
        part.chunks = self.chunk(part, part.records, codec, magic)
        part.counts = [len(c) for c in part.chunks]
        part.records = []
        if stamp is not None:
            stamp(part)
        self.encode(part, magic)

    def chunk(self, part: PartitionSend, records: list[Any], codec: int, magic: int) -> list[list[Any]]:
        """Split records into as few chunks as fit ``max_batch_bytes`` each.

        Args:
            part: The partition (names it in errors; ``header_bytes``).
            records: ``(key, value, timestamp[, headers])`` tuples.
            codec: The Kafka codec id; room is left for its worst-case
                growth.
            magic: The message format the chunks will be encoded in.

        Returns:
            The chunks, in order (``[records]`` when everything fits).

        Raises:
            MessageSizeTooLargeError: one record alone does not fit.
        """
        s = self.settings
        limit = self.max_batch_bytes
        if codec:
            limit -= int(limit * COMPRESSION_MARGIN)
        overhead = RECORD_OVERHEAD if magic == 2 else LEGACY_RECORD_OVERHEAD
        # Usually everything fits in one batch: check that at C speed first.
        total = (
            BATCH_OVERHEAD
            + overhead * len(records)
            + sum(map(len, filter(None, map(_key_of, records))))
            + sum(map(len, filter(None, map(_value_of, records))))
            + part.header_bytes
        )
        if total <= limit:
            return [records]
        chunks = []
        start = 0
        size = BATCH_OVERHEAD
        base_ts = records[0][2]
        for i, r in enumerate(records):
            k, v = r[0], r[1]
            if magic == 2 and len(r) == 3:
                # The exact v2 record size (the worst-case estimate above
                # would split a batch sized to the limit in two).
                n = v2_record_size(k, v, r[2] - base_ts, i - start)
            else:
                n = overhead + (len(k) if k is not None else 0) + (len(v) if v is not None else 0)
                if len(r) == 4 and r[3]:
                    n += headers_size(r[3])
            if size + n > limit:
                if BATCH_OVERHEAD + n > limit:
                    raise MessageSizeTooLargeError(
                        f"a record of about {n} bytes for topic {part.topic!r} partition {part.partition} is larger "
                        f"than max.request.size ({s.max_request_bytes} bytes)"
                    )
                chunks.append(records[start:i])
                start = i
                size = BATCH_OVERHEAD
                base_ts = r[2]
                if magic == 2 and len(r) == 3:
                    n = v2_record_size(k, v, 0, 0)
            size += n
        chunks.append(records[start:] if start else records)
        return chunks

    def encode(self, part: PartitionSend, magic: int) -> None:
        """Encode every pending chunk of a partition, each as one record
        batch v2 or one message set v0/v1 (whole-set compressed).

        Args:
            part: The partition; its ``batches`` and ``magic`` are set.
            magic: The message format (2, 1 or 0).

        Raises:
            UnsupportedForMessageFormatError: records with headers for a
                v0/v1 message set.
            TypeError: a key or value is not bytes after serialization.
        """
        codec = part.codec
        if magic < 2 and part.sequences is not None:
            raise UnsupportedForMessageFormatError(
                f"topic {part.topic!r} partition {part.partition}: an idempotent producer needs record batch v2 "
                f"(Produce v3+, KIP-98) to carry its producer id and sequence numbers, not message format v{magic}"
            )
        if magic < 2 and part.header_bytes:
            raise UnsupportedForMessageFormatError(
                f"records for topic {part.topic!r} partition {part.partition} carry headers, which message format "
                f"v{magic} cannot hold (headers need record batch v2, KIP-82)"
            )
        try:
            if magic == 2 and part.sequences is not None:
                pid, epoch = part.producer_id, part.producer_epoch
                part.batches = [
                    build_batch(c, codec=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=self._transactional)
                    for c, seq in zip(part.chunks, part.sequences)
                ]
            elif magic == 2:
                part.batches = [build_batch(c, codec=codec) for c in part.chunks]
            else:
                part.batches = [build_message_set(c, magic=magic, codec=codec) for c in part.chunks]
        except TypeError as exc:
            raise TypeError(
                f"cannot encode a record for topic {part.topic!r}: keys and values must be bytes after "
                f"serialization (check serializer.class / key.serializer.class): {exc}"
            ) from None
        part.magic = magic

    def use_magic(self, part: PartitionSend, magic: int) -> None:
        """Re-encode a partition's pending chunks for another message format
        (a leader that negotiated another Produce version than expected),
        re-chunking when the per-record overhead grows (v2 -> v0/v1).

        Args:
            part: The partition.
            magic: The message format the leader accepts.

        Raises:
            MessageSizeTooLargeError: one record alone does not fit.
            UnsupportedForMessageFormatError: records with headers for a
                v0/v1 message set.
        """
        if part.magic == magic:
            return
        if magic < 2 <= part.magic and part.sequences is None:
            records = [r for c in part.chunks for r in c]
            part.chunks = self.chunk(part, records, part.codec, magic)
            part.counts = [len(c) for c in part.chunks]
        self.encode(part, magic)


__all__ = [
    "BATCH_OVERHEAD",
    "COMPRESSION_MARGIN",
    "LEGACY_RECORD_OVERHEAD",
    "RECORD_OVERHEAD",
    "BatchBuilder",
    "PartitionSend",
    "headers_size",
    "v2_record_size",
]
