"""The SimpleConsumer against every target: fetch, multifetch,
get_offsets_before by LATEST / EARLIEST and by time, what happens at the
log end and past it, fetch sizes, and the message formats a producer capped
at an old release writes."""

from __future__ import annotations

import pytest

from conformance.client_support import create_topic, log_end, read_partition, simple_consumer, unique_topic, wait_for
from kclient import FetchRequest, OffsetOutOfRangeError, OffsetRequest, Producer, ProducerData
from kclient.errors import UnknownTopicOrPartitionError

NOW = 1_700_000_000_000
#: Topics holding records stamped NOW (2023) keep them: with the default
#: retention.ms (7 days) Kafka's first retention check, 30 s after it
#: starts, would delete them (by the records' largest timestamp, KIP-33).
KEEP = {"retention.ms": "-1"}


@pytest.fixture(scope="module")
def filled(request):
    """Per target: a 2-partition topic, partition 0 holding 6 records
    (timestamps NOW + 0, 1000, ... 5000 ms; keys k0..k5; 3 batches), partition 1 holding 2."""
    made: dict[str, str] = {}

    def fill(target):
        if target.name not in made:
            topic = create_topic(target, unique_topic("sc"), partitions=2, config=KEEP)
            with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": -1}) as producer:
                for start in (0, 2, 4):
                    producer.send(
                        [ProducerData(topic, f"k{i}".encode(), [f"v{i}".encode()], timestamp_ms=NOW + 1000 * i, partition=0) for i in range(start, start + 2)]
                    )
                producer.send(ProducerData(topic, b"p1", [b"a", b"b"], partition=1, timestamp_ms=NOW))
            made[target.name] = topic
        return made[target.name]

    return fill


def records(message_set):
    return [(m.offset, m.message.key, m.message.payload, m.message.timestamp) for m in message_set]


def test_fetch_from_start_and_middle(target, filled):
    topic = filled(target)
    with simple_consumer(target) as consumer:
        everything = consumer.fetch(FetchRequest(topic, 0, 0))
        assert records(everything) == [(i, f"k{i}".encode(), f"v{i}".encode(), NOW + 1000 * i) for i in range(6)]
        assert everything.high_watermark == 6
        # From the middle of a batch: the batch's earlier record is skipped.
        assert [r[0] for r in records(consumer.fetch(FetchRequest(topic, 0, 3)))] == [3, 4, 5]


def test_multifetch_in_request_order(target, filled):
    topic = filled(target)
    with simple_consumer(target) as consumer:
        reqs = [FetchRequest(topic, 1, 1), FetchRequest(topic, 0, 4)]
        response = consumer.multifetch(reqs)
        sets = list(response)
        assert [records(s) for s in sets] == [
            [(1, b"p1", b"b", NOW)],
            [(4, b"k4", b"v4", NOW + 4000), (5, b"k5", b"v5", NOW + 5000)],
        ]
        assert [s.high_watermark for s in sets] == [2, 6]
        assert [records(s) for s in consumer.multifetch_iter(reqs)] == [records(s) for s in sets]


def test_offsets_latest_and_earliest(target, filled):
    topic = filled(target)
    with simple_consumer(target) as consumer:
        assert consumer.get_offsets_before(topic, 0, OffsetRequest.LATEST_TIME, 1) == [6]
        assert consumer.get_offsets_before(topic, 0, OffsetRequest.EARLIEST_TIME, 1) == [0]
        assert consumer.get_offsets_before(topic, 1, OffsetRequest.LATEST_TIME, 1) == [2]
        empty = create_topic(target, unique_topic("sc-empty"), partitions=1)
        assert consumer.get_offsets_before(empty, 0, OffsetRequest.LATEST_TIME, 1) == [0]
        assert consumer.get_offsets_before(empty, 0, OffsetRequest.EARLIEST_TIME, 1) == [0]


def test_offsets_before_several(target, filled):
    """``max_num_offsets`` > 1: ListOffsets v0 (bundled broker, Kafka 3.9)
    lists each segment's base offset under the log end, newest first; Kafka
    4 removed ListOffsets v0 (KIP-896) and v1+ answers one offset."""
    topic = filled(target)
    with simple_consumer(target) as consumer:
        latest = consumer.get_offsets_before(topic, 0, OffsetRequest.LATEST_TIME, 10)
        earliest = consumer.get_offsets_before(topic, 0, OffsetRequest.EARLIEST_TIME, 10)
    if target.name == "kafka-4":
        assert (latest, earliest) == ([6], [0])
    else:
        assert (latest, earliest) == ([6, 0], [0])


def test_offsets_by_time(target, filled):
    """By time: ListOffsets v0 (bundled broker, Kafka 3.9) answers the
    base offsets of the segments last modified before that time (and the
    log end for a time after the active segment's), by the file's
    modification time, not the records' timestamps; Kafka 4 has no v0
    (KIP-896) and answers with v1's meaning, the first offset whose record
    timestamp is at or after it (KIP-79), none when no record is that new."""
    topic = filled(target)
    with simple_consumer(target) as consumer:
        by_record_time = consumer.get_offsets_before(topic, 0, NOW + 2500, 1)
        far_past = consumer.get_offsets_before(topic, 0, 1, 10)
        far_future = consumer.get_offsets_before(topic, 0, 2 * NOW, 10)
    if target.name == "kafka-4":
        assert (by_record_time, far_past, far_future) == ([3], [0], [])
    else:
        # Every segment was written after NOW + 2500 ms (2023): no offset.
        assert (by_record_time, far_past, far_future) == ([], [], [6, 0])


def test_at_and_past_the_log_end(target, filled):
    topic = filled(target)
    with simple_consumer(target) as consumer:
        at_end = consumer.fetch(FetchRequest(topic, 0, 6))
        assert records(at_end) == []
        assert at_end.error is None
        assert at_end.high_watermark == 6
        for offset in (7, 1000, -1):
            with pytest.raises(OffsetOutOfRangeError) as raised:
                consumer.fetch(FetchRequest(topic, 0, offset))
            assert raised.value.code == 1
            # multifetch: the error travels with the partition's set.
            past, fine = consumer.multifetch([FetchRequest(topic, 0, offset), FetchRequest(topic, 1, 0)])
            assert (past.error_code, type(past.error)) == (1, OffsetOutOfRangeError)
            with pytest.raises(OffsetOutOfRangeError):
                list(past)
            assert [m.offset for m in fine] == [0, 1]


def test_long_poll_at_the_log_end_returns_empty_after_the_wait(target, filled):
    topic = filled(target)
    with simple_consumer(target) as consumer:
        at_end = consumer.fetch(FetchRequest(topic, 1, 2), max_wait_ms=200, min_bytes=1)
        assert records(at_end) == []
        assert at_end.error is None


def test_unknown_topic_and_partition(target, filled):
    topic = filled(target)
    with simple_consumer(target) as consumer:
        with pytest.raises(UnknownTopicOrPartitionError) as raised:
            consumer.fetch(FetchRequest(topic, 9, 0))
        assert raised.value.code == 3
        [missing] = consumer.multifetch([FetchRequest(unique_topic("sc-none"), 0, 0)])
        assert type(missing.error) is UnknownTopicOrPartitionError
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.get_offsets_before(topic, 9, OffsetRequest.LATEST_TIME, 1)


def test_fetch_smaller_than_the_first_batch(target):
    """A max_size below the first batch's size: since Fetch v3 (KIP-74)
    the broker returns that whole first batch anyway, so a consumer always
    makes progress."""
    topic = create_topic(target, unique_topic("sc-small"), partitions=1)
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": -1}) as producer:
        producer.send(ProducerData(topic, b"k", [b"x" * 2000, b"y"], partition=0))
        producer.send(ProducerData(topic, b"k", [b"z"], partition=0))
    with simple_consumer(target) as consumer:
        small = consumer.fetch(FetchRequest(topic, 0, 0, max_size=100))
        small.check_fits()
        assert [(m.offset, m.message.payload) for m in small] == [(0, b"x" * 2000), (1, b"y")]


@pytest.mark.parametrize("api_version,magic", [("0.8.2", 0), ("0.10.0", 1), (None, 2)])
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_message_formats(target, api_version, magic, codec):
    """A producer capped at an old release writes message format v0 / v1
    (Produce v0-v2). Kafka 4 removed those Produce versions (KIP-896) and
    refuses the send; Kafka 3.9 converts them to v2 on append (its message
    format is always v2 since 3.0, KIP-724), as the bundled broker keeps them."""
    topic = create_topic(target, unique_topic(f"sc-v{magic}"), partitions=1, config=KEEP)
    conf = {"bootstrap.servers": target.bootstrap, "request.required.acks": 1, "compression.type": codec, "message.send.max.retries": 0}
    if api_version:
        conf["api.version"] = api_version
    from kclient import FailedToSendMessageError, UnsupportedVersionError

    with Producer(conf) as producer:
        if target.name == "kafka-4" and magic < 2:
            with pytest.raises(FailedToSendMessageError) as failed:
                producer.send(ProducerData(topic, b"k", [b"a", b"b"], partition=0, timestamp_ms=NOW))
            assert type(failed.value.__cause__) is UnsupportedVersionError
            return
        producer.send(ProducerData(topic, b"k", [b"a", b"b"], partition=0, timestamp_ms=NOW))
    with simple_consumer(target) as consumer:
        got = [(m.offset, m.message.key, m.message.payload, m.message.timestamp) for m in consumer.fetch(FetchRequest(topic, 0, 0))]
        assert log_end(consumer, topic, 0) == 2
    # v0 has no timestamp (-1).
    assert got == [(0, b"k", b"a", NOW if magic else -1), (1, b"k", b"b", NOW if magic else -1)]


def test_log_start_offset_and_partitions_for(target, filled):
    topic = filled(target)
    with simple_consumer(target) as consumer:
        fetched = consumer.fetch(FetchRequest(topic, 0, 0))
        assert (fetched.high_watermark, fetched.log_start_offset) == (6, 0)
        parts = consumer.partitions_for(topic)
        assert [(p.partition, len(p.replicas), len(p.isr), p.leader >= 0) for p in parts] == [(0, 1, 1, True), (1, 1, 1, True)]
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.partitions_for(unique_topic("sc-absent"))


def test_deleted_topic(target):
    from kclient import AdminClient

    topic = create_topic(target, unique_topic("sc-deleted"), partitions=1)
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": -1}) as producer:
        producer.send(ProducerData(topic, b"k", [b"v"], partition=0))
    with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
        admin.delete_topics([topic])
    with simple_consumer(target) as consumer:

        def gone():
            try:
                consumer.fetch(FetchRequest(topic, 0, 0))
            except UnknownTopicOrPartitionError:
                return True
            return False

        wait_for(gone, f"{topic} gone")

        # Kafka 3.9 (ZooKeeper mode) deletes asynchronously: ListOffsets
        # may still answer a moment after Fetch says the partition is gone.
        def offsets_gone():
            try:
                consumer.get_offsets_before(topic, 0, OffsetRequest.LATEST_TIME, 1)
            except UnknownTopicOrPartitionError:
                return True
            return False

        wait_for(offsets_gone, "ListOffsets to say so")


def test_transactional_batches_and_their_markers(target):
    """Records a transactional Java producer wrote (kafka-producer-perf-test
    with a transactional id), on every broker (the bundled one serves
    transactions since issue 29): a read-uncommitted fetch returns each
    record and skips the commit markers, and the message set's next_offset
    leads past a marker."""
    from kclient.testing import kafka_tool

    topic = create_topic(target, unique_topic("sc-txn"), partitions=1)
    result = kafka_tool(
        "kafka-producer-perf-test",
        "--topic", topic, "--num-records", "6", "--record-size", "10", "--throughput", "-1",
        "--transactional-id", unique_topic("txn"), "--transaction-duration-ms", "1",
        "--producer-props", f"bootstrap.servers={target.bootstrap}", "acks=all", "batch.size=1", "linger.ms=0", "max.block.ms=20000",
        release=target.release or "4",
        check=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    with simple_consumer(target) as consumer:
        end = log_end(consumer, topic, 0)
        records = read_partition(consumer, topic, 0)
    offsets = [r[0] for r in records]
    assert len(records) == 6
    assert all(r[2] is not None and len(r[2]) == 10 for r in records)
    # Every transaction ends with a marker: more offsets than records,
    # and the last offset of the log is a marker's.
    assert end > 6
    assert offsets[-1] < end - 1
    assert offsets == sorted(offsets)
    with simple_consumer(target) as consumer:
        at_marker = consumer.fetch(FetchRequest(topic, 0, end - 1))
        assert list(at_marker) == []
        assert at_marker.next_offset == end


def test_multifetch_of_many_partitions_is_pipelined(target):
    """More than 64 partitions without a long poll go as several Fetch
    requests written together (PIPELINE_PARTITIONS): every broker answers
    them in order."""
    partitions = 70
    topic = create_topic(target, unique_topic("sc-many"), partitions=partitions)
    with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": 1}) as producer:
        producer.send([ProducerData(topic, f"k{p}".encode(), [f"v{p}".encode()], partition=p) for p in range(partitions)])
    with simple_consumer(target) as consumer:
        requests = [FetchRequest(topic, p, 0) for p in range(partitions)]
        got = [[(m.offset, m.message.key, m.message.payload) for m in s] for s in consumer.multifetch(requests)]
        assert got == [[(0, f"k{p}".encode(), f"v{p}".encode())] for p in range(partitions)]
        streamed = [[(m.offset, m.message.key, m.message.payload) for m in s] for s in consumer.multifetch_iter(requests)]
        assert streamed == got


def test_long_poll_returns_when_a_record_arrives(target):
    import threading

    topic = create_topic(target, unique_topic("sc-poll"), partitions=1)
    result: list = []
    with simple_consumer(target) as consumer:
        poller = threading.Thread(target=lambda: result.append(list(consumer.fetch(FetchRequest(topic, 0, 0), max_wait_ms=30_000, min_bytes=1))))
        poller.start()
        with Producer({"bootstrap.servers": target.bootstrap, "request.required.acks": 1}) as producer:
            producer.send(ProducerData(topic, b"k", [b"arrived"], partition=0))
        poller.join(60)
        assert not poller.is_alive()
    [[message]] = result
    assert (message.offset, message.message.payload) == (0, b"arrived")
