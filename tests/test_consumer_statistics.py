"""Consumer statistics (issue 14): SimpleConsumer and ConsumerConnector
count fetched messages and bytes and give each partition's lag (high
watermark minus position), like the Producer's ``statistics()``, and call a
statistics callback every ``statistics.interval.ms`` as librdkafka does."""

from __future__ import annotations

import threading
import uuid

import pytest
from helpers import records
from helpers.wait import wait_for

from kclient import (
    ConfigError,
    ConsumerConnector,
    ConsumerTimeoutError,
    FetchRequest,
    SimpleConsumer,
)
from kclient.client.consumer.statistics import FetchStatistics, PartitionStatistics


def produce(bootstrap: str, topic: str, partition: int, n: int, codec: str = "none") -> None:
    """Values ``v000``, ``v001``, ... (``n``) to ``partition`` in one send:
    one batch, compressed with ``codec``."""
    records.produce(bootstrap, topic, [b"v%03d" % i for i in range(n)], partition=partition, per_send=None, config={"compression.type": codec})


def test_simple_consumer_counts_fetched_messages_bytes_and_lag(broker, topic):
    produce(broker.bootstrap, topic, 0, 10, "gzip")
    produce(broker.bootstrap, topic, 0, 5)
    with SimpleConsumer(broker.host, broker.port, so_timeout_ms=10_000) as consumer:
        assert consumer.statistics().fetched_messages == 0 and not consumer.statistics().partitions
        first = consumer.fetch(FetchRequest(topic, 0, 3, 1 << 20))
        assert len(first.messages()) == 12
        stats = consumer.statistics()
        part = stats.partitions[(topic, 0)]
        assert (part.fetched_messages, part.position, part.high_watermark, part.lag) == (12, 15, 15, 0)
        assert part.fetched_bytes == first.size_in_bytes > 0
        assert (stats.fetch_requests, stats.fetched_messages, stats.fetched_bytes) == (1, 12, first.size_in_bytes)

        produce(broker.bootstrap, topic, 0, 4)
        more = consumer.fetch(FetchRequest(topic, 0, 15, 1 << 20))
        assert len(more.messages()) == 4
        part = consumer.statistics().partitions[(topic, 0)]
        assert (part.fetched_messages, part.position, part.high_watermark, part.lag) == (16, 19, 19, 0)
    assert consumer.statistics().fetch_requests == 2  # still readable after close


def test_lag_is_high_watermark_minus_position(broker, topic):
    produce(broker.bootstrap, topic, 1, 3)
    produce(broker.bootstrap, topic, 1, 3)
    with SimpleConsumer(broker.host, broker.port, so_timeout_ms=10_000) as consumer:
        # Two batches of the same size; a max_size that holds the first and
        # a few bytes of the second (a partial batch, not counted):
        first = consumer.fetch(FetchRequest(topic, 1, 0, 1 << 20))
        consumer.fetch(FetchRequest(topic, 1, 0, first.size_in_bytes // 2 + 10))
        part = consumer.statistics().partitions[(topic, 1)]
        assert part.high_watermark == 6 and part.position == 3 and part.lag == 3


def test_statistics_callback_runs_every_interval_until_close(broker, topic):
    produce(broker.bootstrap, topic, 0, 2)
    got = []
    event = threading.Event()

    def on_stats(stats):
        got.append(stats)
        if len(got) >= 3:
            event.set()

    with SimpleConsumer(broker.host, broker.port, statistics_interval_ms=50, statistics_callback=on_stats) as consumer:
        consumer.fetch(FetchRequest(topic, 0, 0, 1 << 20))
        assert event.wait(10), len(got)
    count = len(got)
    assert got[-1].fetched_messages == 2 and got[-1].partitions[(topic, 0)].lag == 0
    # close() ended the reporting thread: no report can come after this.
    wait_for(lambda: not [t for t in threading.enumerate() if t.name.endswith("-stats")], "the statistics thread to end")
    assert len(got) == count, "reports went on after close()"


def test_a_failing_callback_is_logged_and_reporting_goes_on(broker, caplog):
    calls = []

    def bad(stats):
        calls.append(stats)
        raise RuntimeError("boom")

    with SimpleConsumer(broker.host, broker.port, statistics_interval_ms=30, statistics_callback=bad):
        wait_for(lambda: len(calls) >= 2, "two reports", timeout=10, interval=0.02)
    assert "the statistics callback failed" in caplog.text


@pytest.mark.parametrize("kwargs", [{"statistics_interval_ms": 100}, {"statistics_callback": print}, {"statistics_interval_ms": -1}])
def test_interval_and_callback_go_together(broker, kwargs):
    with pytest.raises(ConfigError, match="statistics"):
        SimpleConsumer(broker.host, broker.port, **kwargs)


@pytest.mark.unit
def test_counters_keep_totals_of_forgotten_partitions():
    stats = FetchStatistics()
    stats.record("t", 0, 5, 100, 5, 9)
    stats.record("t", 1, 2, 40, 2, -1)
    assert stats.snapshot().partitions[("t", 1)].lag is None  # no high watermark yet
    stats.forget("t", 0)
    snap = stats.snapshot()
    assert (snap.fetched_messages, snap.fetched_bytes, list(snap.partitions)) == (7, 140, [("t", 1)])
    assert PartitionStatistics("t", 0, 0, 0, 10, 4).lag == 0  # never negative


@pytest.mark.unit
def test_fetched_position_walks_headers_as_scan_batches_does():
    """The position count_fetched records is the offset after the last
    complete batch, as walking the set with scan_batches gives: every
    format, a partial batch at the end, an impossible header (the walk
    stops there; iterating the set reports it)."""
    import random

    from kclient.client.consumer.statistics import fetched_position
    from kclient.errors import CorruptRecordError
    from kclient.protocol.records import codecs, legacy, v2
    from kclient.protocol.records.scan import scan_batches

    def by_scan(buf, start):
        position = start
        try:
            for info in scan_batches(buf):
                position = info.next_offset
        except CorruptRecordError:
            pass
        return position

    recs = [(None, b"v%d" % i, 1000 + i) for i in range(5)]
    whole = (
        legacy.build_message_set(recs[:2], magic=0, base_offset=0)
        + legacy.build_message_set(recs[2:4], magic=1, base_offset=2, codec=codecs.GZIP)
        + v2.build_batch(recs, base_offset=4)
        + v2.build_batch(recs[:1], base_offset=9, is_control=True)
        + v2.build_batch(recs, base_offset=10)
    )
    rng = random.Random(7)
    cases = [whole[:n] for n in range(0, len(whole) + 1, 7)] + [whole]
    for _ in range(200):
        damaged = bytearray(whole)
        damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        cases.append(bytes(damaged))
    assert fetched_position(whole, 0) == 15
    for buf in cases:
        for start in (0, 3):
            assert fetched_position(buf, start) == by_scan(buf, start)
            assert fetched_position(memoryview(buf), start) == by_scan(buf, start)


def test_consumer_connector_statistics_and_callback(zookeeper, zk_broker, topic):
    produce(zk_broker.bootstrap, topic, 0, 8)
    produce(zk_broker.bootstrap, topic, 2, 3)
    reports = []
    config = {"group.id": f"stats-{uuid.uuid4().hex[:8]}", "zookeeper.connect": zookeeper.connect, "auto.offset.reset": "earliest",
              "consumer.timeout.ms": 1500, "statistics.interval.ms": 50}
    with ConsumerConnector(config, statistics_callback=reports.append) as connector:
        [stream] = connector.create_message_streams({topic: 1})[topic]
        got = []
        try:
            for m in stream:
                got.append(m)
        except ConsumerTimeoutError:
            pass
        assert len(got) == 11
        stats = connector.statistics()
        assert stats.fetched_messages == 11 and stats.fetched_bytes > 0 and stats.fetch_requests >= 1
        assert stats.partitions[(topic, 0)].position == 8 and stats.partitions[(topic, 0)].lag == 0
        assert stats.partitions[(topic, 2)].fetched_messages == 3
        assert stats.lag == 0
    assert reports and reports[-1].fetched_messages == 11
    with pytest.raises(ConfigError, match="statistics"):
        ConsumerConnector({**config, "statistics.interval.ms": 0}, statistics_callback=print)
