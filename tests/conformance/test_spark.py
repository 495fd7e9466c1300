"""The Spark source against each broker, and Spark's own Kafka connector
beside it.

The ``kclient`` source (`kclient.spark`) reads (batch, and streaming with a
checkpoint, stopped and resumed) and writes against Apache Kafka 4.x and
the bundled broker; Spark's own ``format("kafka")`` (``spark-sql-kafka-0-10``
on Kafka's Java client) does the same against both, the other direction of
compatibility; and both sources read the same rows, column for column, from
the same topic. Everything runs in the test session's one SparkSession
(`spark` / `spark_kafka` in tests/conftest.py), whose class path holds
Spark's connector.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from helpers import records as test_records
from helpers.wait import wait_for

from kclient import Producer, ProducerData

#: The brokers these scenarios run against (fixtures of conftest.py).
SPARK_BROKERS = {"bundled": "bundled_target", "kafka-4": "kafka4_target"}
#: Spark's two Kafka sources: kclient's and Spark's own.
FORMATS = ("kclient", "kafka")
#: Records per partition of the produced topics.
PER_PARTITION = 25
#: Partitions of every topic here (the targets' ``num.partitions``).
PARTITIONS = 2
#: Base of the records' CreateTime timestamps (ms): an hour ago. Not a fixed
#: date: Kafka's time-based retention (7 days) goes by the records'
#: timestamps and deleted a 2024-stamped log at its first retention check,
#: five minutes into the session.
TS0 = int(time.time() * 1000) - 3_600_000


@pytest.fixture(params=list(SPARK_BROKERS))
def broker(request):
    """The bundled broker, then Apache Kafka 4.x."""
    return request.getfixturevalue(SPARK_BROKERS[request.param])


@pytest.fixture(params=FORMATS)
def session_for(request):
    """``(format, SparkSession)``: the `kclient` source in the session
    `spark`, Spark's own ``kafka`` source in `spark_kafka` (skipped when
    its jars are missing)."""
    fmt = request.param
    return fmt, request.getfixturevalue("spark_kafka" if fmt == "kafka" else "spark")


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def records(topic: str, start: int, count: int) -> list[ProducerData]:
    """Records ``start .. start + count - 1``, alternating partitions:
    key ``k<i>`` (none for every fifth), value ``v<i>``, CreateTime
    ``TS0 + i``, a header ``("i", b"<i>")`` on every third, followed by
    one with a null value on every sixth."""
    return [
        ProducerData(
            topic,
            key=None if i % 5 == 0 else b"k%d" % i,
            messages=[b"v%d" % i],
            partition=i % PARTITIONS,
            timestamp_ms=TS0 + i,
            headers=([("i", b"%d" % i)] + ([("null", None)] if i % 6 == 0 else [])) if i % 3 == 0 else None,
        )
        for i in range(start, start + count)
    ]


def produce(broker, data: list[ProducerData]) -> None:
    """Send ``data`` with kclient in one call, acks=-1, and wait for every acknowledgement."""
    test_records.produce(broker, data[0].topic, data, acks=-1, per_send=None, config=broker.client_properties())


def create_topic(broker, topic: str, partitions: int) -> None:
    """CreateTopics, then wait until the broker's metadata shows every
    partition with a leader (Kafka answers CreateTopics first)."""
    from kclient import AdminClient, NewTopic
    from kclient.errors import UnknownTopicOrPartitionError

    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])

        def led() -> bool:
            try:
                found = admin.describe_topics([topic]).get(topic)
            except UnknownTopicOrPartitionError:
                return False
            return found is not None and len(found.partitions) == partitions and all(p.leader >= 0 for p in found.partitions)

        wait_for(led, f"a leader for every partition of {topic}", timeout=60)


def expected_rows(topic: str, data: list[ProducerData]) -> list[tuple]:
    """The rows Spark's Kafka schema gives for ``data`` produced into an
    empty topic: ``(key, value, topic, partition, offset, timestamp ms,
    timestampType, headers)`` sorted by partition and offset."""
    next_offset = [0] * PARTITIONS
    rows = []
    for d in data:
        offset = next_offset[d.partition]
        next_offset[d.partition] += 1
        headers = tuple((k, v) for k, v in d.headers) if d.headers else None
        rows.append((d.key, d.messages[0], topic, d.partition, offset, d.timestamp_ms, 0, headers))
    return sorted(rows, key=lambda r: (r[3], r[4]))


def as_tuple(row) -> tuple:
    """A Spark row of the Kafka schema (``includeHeaders=true``) as
    plain values, the timestamp in ms since the epoch."""
    # PySpark hands timestamps over as naive local times, which .timestamp() reads so.
    ts = None if row.timestamp is None else round(row.timestamp.timestamp() * 1000)
    headers = None if row.headers is None else tuple((h.key, None if h.value is None else bytes(h.value)) for h in row.headers)
    key = None if row.key is None else bytes(row.key)
    value = None if row.value is None else bytes(row.value)
    return (key, value, row.topic, row.partition, row.offset, ts, row.timestampType, headers)


def read_rows(spark, fmt: str, broker, topic: str, **options) -> list[tuple]:
    """Every row of ``topic`` read in batch through ``fmt``, sorted by
    partition and offset."""
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic).option("includeHeaders", "true")
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted((as_tuple(r) for r in reader.load().collect()), key=lambda r: (r[3], r[4]))


# ------------------------------------------------------------ batch read


def test_batch_read_every_record_once_with_its_columns(broker, session_for):
    """A batch read returns every record once, with its key, value,
    partition, offset, CreateTime timestamp and headers."""
    fmt, spark = session_for
    topic = _topic(f"spark-batch-{fmt}")
    data = records(topic, 0, PARTITIONS * PER_PARTITION)
    produce(broker, data)
    assert read_rows(spark, fmt, broker, topic) == expected_rows(topic, data)


def test_offset_ranges_select_the_same_rows(broker, session_for):
    """``startingOffsets`` / ``endingOffsets`` as JSON (and -2 = earliest,
    -1 = latest) select exactly the range asked for."""
    fmt, spark = session_for
    topic = _topic(f"spark-range-{fmt}")
    data = records(topic, 0, PARTITIONS * PER_PARTITION)
    produce(broker, data)
    starting = json.dumps({topic: {"0": 3, "1": -2}})
    ending = json.dumps({topic: {"0": 10, "1": -1}})
    got = read_rows(spark, fmt, broker, topic, startingOffsets=starting, endingOffsets=ending)
    want = [r for r in expected_rows(topic, data) if (r[3] == 0 and 3 <= r[4] < 10) or r[3] == 1]
    assert got == want


def test_schema_is_the_same_as_sparks_own(spark_kafka, broker):
    """Both sources declare the same columns, types and nullability."""
    topic = _topic("spark-schema")
    produce(broker, records(topic, 0, 2))
    schemas = {}
    for fmt in FORMATS:
        for headers in ("false", "true"):
            df = spark_kafka.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic).option("includeHeaders", headers).load()
            schemas[fmt, headers] = df.schema.jsonValue()
    assert schemas["kclient", "false"] == schemas["kafka", "false"]
    assert schemas["kclient", "true"] == schemas["kafka", "true"]


def test_both_sources_read_the_same_rows(spark_kafka, broker):
    """The same topic read with ``format("kclient")`` and Spark's own
    ``format("kafka")``: the same rows, column for column (null keys,
    null headers on records without any, timestamps to the millisecond)."""
    topic = _topic("spark-same")
    data = records(topic, 0, PARTITIONS * PER_PARTITION)
    produce(broker, data)
    ours = read_rows(spark_kafka, "kclient", broker, topic)
    theirs = read_rows(spark_kafka, "kafka", broker, topic)
    assert ours == theirs == expected_rows(topic, data)
    # without includeHeaders too, and as Spark sees them (no conversion here)
    frames = [spark_kafka.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic).load() for fmt in FORMATS]
    assert frames[0].exceptAll(frames[1]).count() == 0 and frames[1].exceptAll(frames[0]).count() == 0


# ------------------------------------------------------------ streaming


def _stream_once(spark, fmt: str, broker, topic: str, checkpoint: str, seen: list) -> list[int]:
    """One ``Trigger.AvailableNow`` run of a streaming read of ``topic``
    through ``fmt`` (at most 10 offsets a micro-batch), appending
    ``(partition, offset, value)`` of every row to ``seen``; returns the
    rows of each micro-batch."""

    def keep(batch, batch_id: int) -> None:
        seen.extend((r.partition, r.offset, bytes(r.value)) for r in batch.select("partition", "offset", "value").collect())

    stream = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .load()
    )
    query = stream.writeStream.option("checkpointLocation", checkpoint).foreachBatch(keep).trigger(availableNow=True).start()
    deadline = time.monotonic() + 240
    while query.isActive and time.monotonic() < deadline:
        query.awaitTermination(1)
    if query.isActive:
        query.stop()
        pytest.fail(f"the {fmt} streaming query did not finish within 240 s: {query.lastProgress}")
    assert query.exception() is None, query.exception()
    return [p["numInputRows"] for p in query.recentProgress]


def test_streaming_read_resumes_from_its_checkpoint(broker, session_for, tmp_path):
    """A streaming read with a checkpoint, stopped and started again after
    more records arrived: every record read exactly once, in offset order
    per partition."""
    fmt, spark = session_for
    topic = _topic(f"spark-stream-{fmt}")
    checkpoint = str(tmp_path / "checkpoint")
    first, second = records(topic, 0, 30), records(topic, 30, 20)
    seen: list = []
    produce(broker, first)
    batches = _stream_once(spark, fmt, broker, topic, checkpoint, seen)
    assert sum(batches) == len(first) and len(seen) == len(first)
    produce(broker, second)
    batches = _stream_once(spark, fmt, broker, topic, checkpoint, seen)
    assert sum(batches) == len(second), f"the resumed run read {batches}"
    want = [(r[3], r[4], r[1]) for r in expected_rows(topic, first + second)]
    assert sorted(seen) == want  # nothing twice, nothing missing
    for partition in range(PARTITIONS):
        offsets = [offset for p, offset, _ in seen if p == partition]
        assert offsets == sorted(offsets)


# ---------------------------------------------------------------- write


def test_write_lands_every_row(broker, session_for):
    """A batch write of keys, values, explicit partitions and headers lands
    every row where it was sent; the other source reads it back the same."""
    fmt, spark = session_for
    topic = _topic(f"spark-write-{fmt}")
    rows = [(None if i % 7 == 0 else f"k{i}", f"v{i}", i % PARTITIONS, [("i", b"%d" % i)] if i % 3 == 0 else None) for i in range(40)]
    df = spark.createDataFrame(rows, "key string, value string, partition int, headers array<struct<key:string,value:binary>>")
    df.write.mode("append").format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).save()
    got = read_rows(spark, "kclient", broker, topic)
    by_value = lambda row: row[1]  # noqa: E731 - values are unique; keys may be null
    want = [((None if k is None else k.encode()), v.encode(), p, None if h is None else tuple(h)) for k, v, p, h in rows]
    assert sorted(((r[0], r[1], r[3], r[7]) for r in got), key=by_value) == sorted(want, key=by_value)
    for partition in range(PARTITIONS):
        assert [r[4] for r in got if r[3] == partition] == list(range(sum(1 for row in rows if row[2] == partition)))
    if fmt == "kafka":
        assert read_rows(spark, "kafka", broker, topic) == got


def test_both_sinks_partition_keys_alike_and_write_null_values(spark_kafka, broker):
    """Rows with keys and no ``partition`` column land on the partition the
    key hashes to (murmur2, Kafka's default partitioner) through either
    sink, and a null ``value`` is written as a null value (a tombstone)."""
    rows = [(f"key-{i}", None if i % 10 == 0 else f"v{i}") for i in range(60)]
    df = spark_kafka.createDataFrame(rows, "key string, value string")
    landed = {}
    for fmt in FORMATS:
        topic = _topic(f"spark-keyed-{fmt}")
        create_topic(broker, topic, 6)
        df.write.mode("append").format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).save()
        got = read_rows(spark_kafka, "kclient", broker, topic)
        landed[fmt] = {r[0].decode(): (r[3], r[1]) for r in got}
        assert len(got) == len(rows)
    assert landed["kclient"] == landed["kafka"]
    assert {k: v for k, (_, v) in landed["kclient"].items()} == {k: None if v is None else v.encode() for k, v in rows}
    assert len({p for p, _ in landed["kclient"].values()}) > 1


def test_transactional_records_read_alike(spark_kafka, kafka4_target):
    """Kafka 4.x: committed and aborted transactions read with
    ``read_uncommitted`` (the default of both sources) give the same rows,
    aborted records included, and the offsets of the commit and abort
    markers left out; with ``kafka.isolation.level=read_committed`` both
    give the committed rows alike (issue 29)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = kafka4_target
    topic = _topic("spark-txn")
    create_topic(broker, topic, 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(60)
    for prefix, commit in ((b"c", True), (b"a", False), (b"d", True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, value=prefix + b"%d" % i, partition=0)
        producer.flush(60)  # the aborted records too reach the log before the marker
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
    del producer  # librdkafka's threads end with it
    ours = read_rows(spark_kafka, "kclient", broker, topic)
    theirs = read_rows(spark_kafka, "kafka", broker, topic)
    assert ours == theirs
    assert [(r[1], r[4]) for r in ours] == [(b"c0", 0), (b"c1", 1), (b"c2", 2), (b"a0", 4), (b"a1", 5), (b"a2", 6), (b"d0", 8), (b"d1", 9), (b"d2", 10)]
    committed = read_rows(spark_kafka, "kafka", broker, topic, **{"kafka.isolation.level": "read_committed"})
    assert [r[1] for r in committed] == [b"c0", b"c1", b"c2", b"d0", b"d1", b"d2"]
    assert read_rows(spark_kafka, "kclient", broker, topic, **{"kafka.isolation.level": "read_committed"}) == committed


def test_a_missing_topic_is_no_rows_for_kclient_an_error_for_spark(spark_kafka, broker):
    """A ``subscribe``d topic that does not exist: the kclient source reads
    no rows (and never creates it; a stream picks it up once it exists);
    Spark's own source fails with UnknownTopicOrPartitionException (its
    admin client describes the topic). A documented difference
    (docs/spark.md)."""
    topic = _topic("spark-missing")
    assert read_rows(spark_kafka, "kclient", broker, topic) == []
    with pytest.raises(Exception, match="UnknownTopicOrPartition"):
        read_rows(spark_kafka, "kafka", broker, topic)
    assert read_rows(spark_kafka, "kclient", broker, topic) == []  # still not created


def test_both_sources_select_the_same_rows_for_the_same_options(spark_kafka, broker):
    """The read options that choose rows (``assign``, ``subscribePattern``,
    timestamps, ``minPartitions``) give the same rows through either
    source."""
    tag = uuid.uuid4().hex[:8]
    topic = f"spark-opts-{tag}"
    data = records(topic, 0, PARTITIONS * PER_PARTITION)
    produce(broker, data)
    cases = [
        {"assign": json.dumps({topic: [1]})},
        {"subscribePattern": f"spark-opts-{tag}.*"},
        {"startingTimestamp": str(TS0 + 20), "endingTimestamp": str(TS0 + 31)},
        {"startingOffsetsByTimestamp": json.dumps({topic: {"0": TS0 + 10, "1": TS0 + 41}})},
        {"minPartitions": "7"},
    ]
    for options in cases:
        subscribe = {} if ("assign" in options or "subscribePattern" in options) else {"subscribe": topic}
        got = {}
        for fmt in FORMATS:
            reader = spark_kafka.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("includeHeaders", "true")
            for key, value in {**subscribe, **options}.items():
                reader = reader.option(key, value)
            got[fmt] = sorted((as_tuple(r) for r in reader.load().collect()), key=lambda r: (r[3], r[4]))
        assert got["kclient"] == got["kafka"], options
        assert got["kclient"], options


def test_streaming_write_lands_every_row(broker, session_for, tmp_path):
    """A stream from one topic to another through the same source and
    sink (``writeStream.format(fmt)``, AvailableNow, with a checkpoint):
    every value arrives once, with its key."""
    fmt, spark = session_for
    source, sink = _topic(f"spark-sin-{fmt}"), _topic(f"spark-sout-{fmt}")
    data = records(source, 0, 30)
    produce(broker, data)
    stream = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
    )
    query = (
        stream.writeStream.format(fmt)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    deadline = time.monotonic() + 240
    while query.isActive and time.monotonic() < deadline:
        query.awaitTermination(1)
    if query.isActive:
        query.stop()
        pytest.fail(f"the {fmt} streaming write did not finish within 240 s: {query.lastProgress}")
    assert query.exception() is None, query.exception()
    got = sorted((r[1], r[0]) for r in read_rows(spark, "kclient", broker, sink))
    assert got == sorted((d.messages[0], d.key) for d in data)


@pytest.mark.parametrize("api_version", ["0.8.2", "0.10.0"])
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_old_message_formats_read_alike(spark_kafka, bundled_target, api_version, codec):
    """Message formats v0 and v1 sent (a producer capped at Kafka 0.8.2 /
    0.10.0; Kafka 4 refuses them, KIP-896), plain and compressed, into a
    topic that stores v2 (converted on append, as Kafka 2.x+ does): both
    sources read the same rows; v0 messages have no timestamp (-1, in a v2
    batch with CreateTime)."""
    broker = bundled_target
    topic = _topic(f"spark-v-{api_version}-{codec}")
    conf = {"bootstrap.servers": broker.bootstrap, "request.required.acks": -1, "compression.type": codec, "api.version": api_version, "producer.type": "sync"}
    with Producer(conf) as producer:
        producer.send([ProducerData(topic, key=b"k%d" % i, messages=[b"v%d" % i, b"w%d" % i], partition=0, timestamp_ms=TS0 + i) for i in range(3)])
    ours = read_rows(spark_kafka, "kclient", broker, topic)
    theirs = read_rows(spark_kafka, "kafka", broker, topic)
    assert ours == theirs
    assert [r[1] for r in ours] == [b"v0", b"w0", b"v1", b"w1", b"v2", b"w2"]
    assert {r[5] for r in ours} == ({-1} if api_version == "0.8.2" else {TS0, TS0 + 1, TS0 + 2})
