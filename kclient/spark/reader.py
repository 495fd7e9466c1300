"""One Spark task's read: an offset range of one partition, fetched from
the partition's leader and handed to Spark as Arrow record batches.

Runs on the executors. Each task opens its own connection (a
`kclient.SimpleConsumer`) to the leader planned on the driver, and asks the
cluster again when that broker is gone or no longer leads the partition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from kclient.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from kclient.protocol.primitives import Buffer
from kclient.protocol.records.scan import LOG_OVERHEAD
from kclient.spark.columns import Columns, decode_columns
from kclient.spark.offsets import OffsetRange
from kclient.spark.options import ReadOptions

if TYPE_CHECKING:
    from kclient.client.consumer.simple import SimpleConsumer

log = logging.getLogger(__name__)

__all__ = ["DataLossError", "arrow_schema", "read_range", "spark_schema"]

#: Fetch sizes grow up to this when a single batch is larger than the
#: configured fetch size (bytes).
MAX_FETCH_BYTES = 256 << 20

_HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


class DataLossError(KafkaError):
    """Records a query should have read are gone (deleted by retention,
    truncated, or their partition removed) and `failOnDataLoss` is true.
    The message says which offsets and how to go on (`failOnDataLoss=false`
    skips them with a warning)."""

    name = "DATA_LOSS"


def spark_schema(include_headers: bool) -> str:
    """The schema of Spark's Kafka source as a DDL string."""
    base = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
    return base + (", headers array<struct<key:string,value:binary>>" if include_headers else "")


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the record batches `read_range` yields."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _HEADER_TYPE))
    return pa.schema(fields)


def to_record_batch(cols: Columns, topic: str, partition: int, schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
    """Arrow arrays from decoded columns (one C-level conversion per column)."""
    n = len(cols)
    micros = pa.array(cols.timestamps, pa.int64())
    micros = pc.multiply(micros, 1000)
    arrays = [
        pa.array(cols.keys, pa.binary()),
        pa.array(cols.values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(cols.offsets, pa.int64()),
        micros.cast(pa.timestamp("us", tz="UTC")),
        pa.array(cols.timestamp_types, pa.int32()),
    ]
    if include_headers:
        # As Spark's own source: a record without headers has null headers, not [].
        arrays.append(pa.array([[{"key": h.key, "value": h.value} for h in hs] if hs else None for hs in cols.headers], _HEADER_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_range(r: OffsetRange, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Yield the records of `r` as Arrow record batches (one per fetch).

    Args:
        r: the range (and its planned leader).
        opts: the read's options (timeouts, fetch size, failOnDataLoss,
            includeHeaders).

    Raises:
        DataLossError: offsets of the range are gone and `failOnDataLoss` is
            true.
        NoBrokersAvailableError: no broker can be reached within the
            timeouts and retries.
        KafkaTimeoutError: the cluster does not answer within the timeouts
            and retries.
        CorruptRecordError: a fetched batch is damaged.
    """
    from kclient.client.consumer.simple import FetchRequest, SimpleConsumer

    schema = arrow_schema(opts.include_headers)
    where = f"{r.topic}-{r.partition}"
    offset = r.from_offset
    fetch_bytes = opts.fetch_max_bytes
    leader = r.leader
    attempts = 0
    consumer = None
    deadline = time.monotonic() + opts.poll_timeout_ms / 1000
    try:
        while offset < r.until_offset:
            if consumer is None:
                if leader is None:
                    leader = _find_leader(r, opts)
                    if leader is None:  # the partition is gone and failOnDataLoss=false
                        return
                consumer = SimpleConsumer(
                    leader[0], leader[1], so_timeout_ms=opts.request_timeout_ms, client_id=opts.client_id, config=opts.security, isolation_level=opts.isolation_level
                )
            try:
                (message_set,) = consumer.multifetch([FetchRequest(r.topic, r.partition, offset, fetch_bytes)])
                error = message_set.error
                if error is not None:
                    raise error
            except OffsetOutOfRangeError:
                offset = _out_of_range(consumer, r, offset, opts)
                continue
            except (NotLeaderForPartitionError, LeaderNotAvailableError, UnknownTopicOrPartitionError, KafkaConnectionError, KafkaTimeoutError) as exc:
                attempts += 1
                if attempts > opts.offset_retries + 3 or time.monotonic() > deadline:
                    raise
                log.info("%s: %s; looking up the leader again (attempt %d)", where, exc, attempts)
                consumer.close()
                consumer, leader = None, None
                time.sleep(opts.retry_backoff_ms / 1000 * attempts)
                continue
            # read_committed: aborted transactions' batches left out, their
            # offsets still passed (next_offset over the whole answer)
            cols = decode_columns(message_set.visible_buffer, offset, r.until_offset, where)
            if len(cols):
                attempts = 0
                deadline = time.monotonic() + opts.poll_timeout_ms / 1000
                yield to_record_batch(cols, r.topic, r.partition, schema, opts.include_headers)
            next_offset = max(cols.next_offset, message_set.next_offset)
            if next_offset > offset:
                offset = next_offset
                continue
            # Nothing at or after `offset` came back.
            needed = _first_batch_size(message_set.buffer)
            if needed > len(message_set.buffer):  # one batch is larger than the fetch size
                if fetch_bytes >= MAX_FETCH_BYTES:
                    raise MessageSizeTooLargeError(f"{where}: the batch at offset {offset} is {needed} bytes, over {MAX_FETCH_BYTES}")
                fetch_bytes = min(MAX_FETCH_BYTES, max(needed, fetch_bytes * 2))
                continue
            high_watermark = message_set.high_watermark
            if 0 <= high_watermark <= offset:
                _lost(opts, f"{where}: offsets {offset}..{r.until_offset - 1} were planned but the partition ends at {high_watermark} (the log was truncated)")
                return
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"{where}: no records at offset {offset} within kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}")
            time.sleep(opts.retry_backoff_ms / 1000)
    finally:
        if consumer is not None:
            consumer.close()


def _lost(opts: ReadOptions, message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(message + ". Some data may have been lost; set failOnDataLoss=false to go on without it.")
    log.warning("%s; skipped (failOnDataLoss=false)", message)


def _out_of_range(consumer: SimpleConsumer, r: OffsetRange, offset: int, opts: ReadOptions) -> int:
    """Where to go on after OFFSET_OUT_OF_RANGE at `offset`."""
    from kclient.client.consumer.simple import OffsetRequest

    where = f"{r.topic}-{r.partition}"
    earliest = consumer.get_offsets_before(r.topic, r.partition, OffsetRequest.EARLIEST_TIME, 1)
    latest = consumer.get_offsets_before(r.topic, r.partition, OffsetRequest.LATEST_TIME, 1)
    start = earliest[-1] if earliest else 0
    end = latest[0] if latest else 0
    if offset < start:
        _lost(opts, f"{where}: offsets {offset}..{min(start, r.until_offset) - 1} were deleted (the log now starts at {start})")
        return min(start, r.until_offset)
    _lost(opts, f"{where}: offsets {offset}..{r.until_offset - 1} are past the log end {end} (the log was truncated)")
    return r.until_offset


def _find_leader(r: OffsetRange, opts: ReadOptions) -> tuple[str, int] | None:
    from kclient.spark.admin import ClusterView
    from kclient.spark.options import Subscription

    found = ClusterView(opts).partitions(Subscription(topics=(r.topic,)))
    leader = found.get((r.topic, r.partition))
    if leader is None:
        if (r.topic, r.partition) not in found:
            _lost(opts, f"{r.topic}-{r.partition}: the partition no longer exists")
            return None
        raise LeaderNotAvailableError(f"{r.topic}-{r.partition} has no leader")
    return leader


def _first_batch_size(buf: Buffer) -> int:
    """Total bytes of the first batch in `buf` (its size field plus the
    12-byte log overhead), or 0 when `buf` is too short to say."""
    if len(buf) < LOG_OVERHEAD:
        return 0
    return int.from_bytes(bytes(buf[8:LOG_OVERHEAD]), "big", signed=True) + LOG_OVERHEAD
