"""Consumer statistics: what a consumer fetched, and how far behind it is.

Both consumers keep the counters of a `FetchStatistics` and give a
snapshot with ``statistics()``, as the Producer does:
`kclient.SimpleConsumer.statistics` (also `kclient.TrioSimpleConsumer`)
and `kclient.ConsumerConnector.statistics`. Per partition, the lag is the
partition's high watermark at the last fetch minus the consumer's position
(the next offset it will fetch), librdkafka's ``consumer_lag`` (its
STATISTICS.md, "partitions" object). A consumer can also call an
application callback every ``statistics.interval.ms`` with a snapshot, as
librdkafka's ``statistics.interval.ms`` and ``stats_cb`` do
(`StatisticsReporter`).
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Callable, Mapping

import attrs

from kclient._accel import speedups
from kclient.client.consumer.message_set import ByteBufferMessageSet
from kclient.clock import now_ms
from kclient.net.throttle_stats import ThrottleTracker
from kclient.protocol.messages import FETCH
from kclient.protocol.primitives import Buffer

__all__ = ["ConsumerStatistics", "FetchStatistics", "PartitionStatistics", "StatisticsReporter"]

log = logging.getLogger(__name__)


@attrs.frozen
class PartitionStatistics:
    """One partition in a `ConsumerStatistics`.

    Attributes:
        topic: The topic.
        partition: The partition.
        fetched_messages: Messages fetched from it so far.
        fetched_bytes: Bytes of record data fetched from it so far.
        position: The next offset the consumer will fetch (-1 before the
            first fetch).
        high_watermark: The partition's high watermark at the last fetch
            (-1 before the first).
        lag: ``high_watermark - position`` (at least 0), or None while
            either is unknown.
    """

    topic: str
    partition: int
    fetched_messages: int
    fetched_bytes: int
    position: int
    high_watermark: int

    @property
    def lag(self) -> int | None:
        if self.position < 0 or self.high_watermark < 0:
            return None
        return max(0, self.high_watermark - self.position)


@attrs.frozen
class ConsumerStatistics:
    """A snapshot of a consumer's fetch counters.

    Attributes:
        timestamp_ms: When the snapshot was taken (ms since the epoch).
        fetch_requests: Fetch requests answered.
        fetched_messages: Messages fetched, over every partition.
        fetched_bytes: Bytes of record data fetched, over every partition.
        partitions: ``{(topic, partition): PartitionStatistics}``.
        fetch_throttle_time_avg: The average ``throttle_time_ms`` (ms) of
            the Fetch responses over the last 2 windows of 30 s (Kafka's
            consumer metric ``fetch-throttle-time-avg``; non-zero when a
            ``consumer_byte_rate`` quota throttled the consumer, KIP-13).
        fetch_throttle_time_max: The longest of them (ms;
            ``fetch-throttle-time-max``).
    """

    timestamp_ms: int
    fetch_requests: int
    fetched_messages: int
    fetched_bytes: int
    partitions: Mapping[tuple[str, int], PartitionStatistics]
    fetch_throttle_time_avg: float = 0.0
    fetch_throttle_time_max: float = 0.0

    def metrics(self) -> dict[str, float]:
        """The throttle times by Kafka's consumer metric names.

        Returns:
            ``{"fetch-throttle-time-avg": ms, "fetch-throttle-time-max": ms}``.
        """
        return {"fetch-throttle-time-avg": self.fetch_throttle_time_avg, "fetch-throttle-time-max": self.fetch_throttle_time_max}

    @property
    def lag(self) -> int:
        """The sum of the partitions' known lags."""
        return sum(p.lag or 0 for p in self.partitions.values())


class FetchStatistics:
    """The counters a consumer updates as it fetches (one writer: the
    consumer's trio thread; `snapshot` may be called from any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests = 0
        # (topic, partition) -> [messages, bytes, position, high watermark]
        self._partitions: dict[tuple[str, int], list[int]] = {}
        # Messages and bytes of partitions forgotten after a rebalance.
        self._gone_messages = 0
        self._gone_bytes = 0
        #: The Fetch responses' ``throttle_time_ms``: the consumer's fetch
        #: connections record into it (`kclient.net.throttle_stats`).
        self.throttles = ThrottleTracker()

    def request(self) -> None:
        """Count one answered Fetch request."""
        self._requests += 1

    def record(self, topic: str, partition: int, messages: int, nbytes: int, position: int, high_watermark: int) -> None:
        """Count one partition's part of a fetch.

        Args:
            topic: The topic.
            partition: The partition.
            messages: Messages fetched.
            nbytes: Bytes of record data fetched.
            position: The next offset to fetch now.
            high_watermark: The high watermark the broker reported (-1:
                not reported, the last one is kept).
        """
        key = (topic, partition)
        with self._lock:
            entry = self._partitions.get(key)
            if entry is None:
                entry = self._partitions[key] = [0, 0, -1, -1]
            entry[0] += messages
            entry[1] += nbytes
            entry[2] = position
            if high_watermark >= 0:
                entry[3] = high_watermark

    def forget(self, topic: str, partition: int) -> None:
        """Drop a partition the consumer no longer fetches (after a
        rebalance); its messages and bytes stay in the totals."""
        with self._lock:
            entry = self._partitions.pop((topic, partition), None)
            if entry is not None:
                self._gone_messages += entry[0]
                self._gone_bytes += entry[1]

    def snapshot(self) -> ConsumerStatistics:
        """The counters now.

        Returns:
            A `ConsumerStatistics`.
        """
        with self._lock:
            parts = {k: PartitionStatistics(k[0], k[1], *v) for k, v in self._partitions.items()}
            gone_messages = self._gone_messages
            gone_bytes = self._gone_bytes
            requests = self._requests
        return ConsumerStatistics(
            now_ms(),
            requests,
            gone_messages + sum(p.fetched_messages for p in parts.values()),
            gone_bytes + sum(p.fetched_bytes for p in parts.values()),
            parts,
            self.throttles.avg(FETCH.key),
            self.throttles.max(FETCH.key),
        )


class StatisticsReporter:
    """Calls ``callback(snapshot())`` every ``interval_ms`` on a daemon
    thread of its own (librdkafka's ``statistics.interval.ms`` with a
    ``stats_cb``), so a slow callback delays only the next report, never a
    fetch. An exception raised by the callback is logged and reporting goes
    on.

    Args:
        interval_ms: The period (ms, > 0).
        callback: Called with each `ConsumerStatistics`.
        snapshot: Returns the snapshot to report.
        name: The thread's name.
    """

    def __init__(self, interval_ms: int, callback: Callable[[ConsumerStatistics], object], snapshot: Callable[[], ConsumerStatistics], name: str) -> None:
        if interval_ms <= 0:
            raise ValueError(f"statistics interval must be > 0 ms, got {interval_ms}")
        self._interval = interval_ms / 1000
        self._callback = callback
        self._snapshot = snapshot
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._callback(self._snapshot())
            except Exception:
                log.exception("the statistics callback failed")

    def stop(self) -> None:
        """Stop reporting (idempotent); waits for a report under way unless
        called from the callback itself."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()


#: Every format's first fields: offset int64, size int32 (the bytes after
#: them); the magic byte at 16; a v2 batch's lastOffsetDelta int32 at 23
#: (see `kclient.protocol.records.scan`).
#: The compiled twin of `_fetched_position_py` (None: pure Python only).
_c_fetched_position: Callable[[Buffer, int], int | None] | None = speedups.fetched_position if speedups is not None else None

_HEAD = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
#: The least size (after offset and size) of a v2 batch, a v0 and a v1 entry.
_MIN_SIZE = {2: 61 - 12, 0: 14, 1: 22}


def fetched_position(buf: Buffer, start: int) -> int:
    """The offset after the last complete batch in a fetched record set (see
    `_fetched_position_py`; compiled where ``kclient._speedups`` is built).

    Args:
        buf: The partition's record bytes.
        start: The offset asked for.

    Returns:
        The next offset to fetch.
    """
    if _c_fetched_position is not None:
        position = _c_fetched_position(buf, start)
        if position is not None:
            return position
    return _fetched_position_py(buf, start)


def _fetched_position_py(buf: Buffer, start: int) -> int:
    """The offset after the last complete batch in a fetched record set, from
    the batch headers only: what walking it with
    `kclient.protocol.records.scan.scan_batches` gives (``start`` if there is
    none; the walk stops at a partial batch and, silently, at an impossible
    header, which iterating the set reports), without an object per batch.

    Args:
        buf: The partition's record bytes.
        start: The offset asked for.

    Returns:
        The next offset to fetch.
    """
    position: int = start
    end = len(buf)
    head = _HEAD.unpack_from
    pos = 0
    while pos + 17 <= end:
        offset, size = head(buf, pos)
        magic = buf[pos + 16]
        least = _MIN_SIZE.get(magic)
        if least is None or size < least or pos + 12 + size > end:
            break
        position = offset + _LAST_DELTA.unpack_from(buf, pos + 23)[0] + 1 if magic == 2 else offset + 1
        pos += 12 + size
    return position


def count_fetched(stats: FetchStatistics, message_set: ByteBufferMessageSet) -> None:
    """Count one partition of a SimpleConsumer fetch from its batch headers
    only (nothing is decompressed): the position becomes the offset after
    the last complete batch, and the messages are the offsets between the
    requested offset and that position (records removed by compaction
    included).

    Args:
        stats: The counters.
        message_set: The fetched partition.
    """
    if message_set.error_code:
        return
    start = message_set.start_offset
    position = max(fetched_position(message_set.buffer, start), start) if message_set.buffer else start
    stats.record(message_set.topic, message_set.partition, position - start, len(message_set.buffer), position, message_set.high_watermark)
