"""The `kclient` Spark data source against a real bundled broker, in the
test session's one local[2] Spark session (`spark`, tests/conftest.py)."""

from __future__ import annotations

import functools
import json
import socket
import uuid

import pytest
from helpers import records as test_records
from helpers.wait import wait_for

from kclient import OffsetRequest, Producer, ProducerData, SimpleConsumer
from kclient.testing import BrokerProcess

PARTITIONS = 3


@pytest.fixture(scope="module")
def sbroker():
    with BrokerProcess(properties={"num.partitions": str(PARTITIONS)}) as proc:
        yield proc


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


#: ``produce(broker, topic, records)``: ProducerData sent in one call, acks=-1.
produce = functools.partial(test_records.produce, acks=-1, per_send=None)


def numbered(topic: str, n: int, *, partitions: int = PARTITIONS, ts0: int | None = None) -> list[ProducerData]:
    """n records spread round-robin over the partitions: value b"v<i>";
    with ts0, record i has timestamp ts0 + 1000 * i."""
    return [
        ProducerData(topic, key=b"k%d" % i, messages=[b"v%d" % i], timestamp_ms=None if ts0 is None else ts0 + 1000 * i, partition=i % partitions)
        for i in range(n)
    ]


def log_end(broker, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    with SimpleConsumer(broker.host, broker.port, so_timeout_ms=10_000, client_id="t") as c:
        return {p: c.get_offsets_before(topic, p, OffsetRequest.LATEST_TIME, 1)[0] for p in range(partitions)}


def reader(spark, broker, **options):
    r = spark.read.format("kclient").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


# -- schema and batch reads ----------------------------------------------------


def test_schema_is_sparks_kafka_schema(spark, sbroker):
    topic = _name("schema")
    produce(sbroker, topic, numbered(topic, 3))
    df = reader(spark, sbroker, subscribe=topic)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]
    with_headers = reader(spark, sbroker, subscribe=topic, includeHeaders="true")
    assert with_headers.schema.fields[-1].name == "headers"
    assert with_headers.schema.fields[-1].dataType.simpleString() == "array<struct<key:string,value:binary>>"


def test_batch_read_every_record_once_with_its_offset(spark, sbroker):
    topic = _name("batch")
    n = 600
    produce(sbroker, topic, numbered(topic, n))
    df = reader(spark, sbroker, subscribe=topic)
    assert df.rdd.getNumPartitions() == PARTITIONS  # one task per topic-partition
    rows = df.select("key", "value", "topic", "partition", "offset", "timestampType").collect()
    assert len(rows) == n
    assert {r.topic for r in rows} == {topic}
    by_partition: dict[int, list] = {}
    for r in rows:
        by_partition.setdefault(r.partition, []).append(r)
        i = int(bytes(r.value)[1:])
        assert bytes(r.key) == b"k%d" % i and i % PARTITIONS == r.partition
        assert r.timestampType == 0  # CreateTime
    for prs in by_partition.values():
        assert sorted(r.offset for r in prs) == list(range(n // PARTITIONS))
    # the offset of record i in its partition is i // PARTITIONS (sent in order)
    assert all(r.offset == int(bytes(r.value)[1:]) // PARTITIONS for r in rows)


def test_starting_and_ending_offsets_select_exact_ranges(spark, sbroker):
    topic = _name("ranges")
    produce(sbroker, topic, numbered(topic, 90))  # 30 per partition
    df = reader(
        spark,
        sbroker,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 5, "1": -2, "2": 29}}),
        endingOffsets=json.dumps({topic: {"0": 10, "1": 3, "2": -1}}),
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(5, 10)] + [(1, o) for o in range(3)] + [(2, 29)]
    assign = reader(spark, sbroker, assign=json.dumps({topic: [1]}), startingOffsets="earliest")
    assert {r.partition for r in assign.select("partition").collect()} == {1}
    assert assign.count() == 30


def test_offsets_json_must_name_every_partition(spark, sbroker):
    topic = _name("partial")
    produce(sbroker, topic, numbered(topic, 6))
    df = reader(spark, sbroker, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 0}}))
    with pytest.raises(Exception, match="must name every partition"):
        df.count()


def test_timestamp_options(spark, sbroker):
    topic = _name("times")
    ts0 = 1_700_000_000_000
    produce(sbroker, topic, numbered(topic, 30, ts0=ts0))  # record i at ts0 + 1000 i, partition i % 3
    # startingTimestamp: the first record at or after it, in every partition
    df = reader(spark, sbroker, subscribe=topic, startingTimestamp=str(ts0 + 15_500))
    values = sorted(int(bytes(r.value)[1:]) for r in df.select("value").collect())
    assert values == list(range(16, 30))
    # endingTimestamp as well
    df = reader(spark, sbroker, subscribe=topic, startingTimestamp=str(ts0 + 3_000), endingTimestamp=str(ts0 + 9_000))
    assert sorted(int(bytes(r.value)[1:]) for r in df.select("value").collect()) == list(range(3, 9))
    # per partition
    by_ts = {topic: {"0": ts0 + 27_000, "1": ts0, "2": ts0 + 29_000}}
    df = reader(spark, sbroker, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_ts))
    got = sorted(int(bytes(r.value)[1:]) for r in df.select("value").collect())
    assert got == sorted([27] + list(range(1, 30, 3)) + [29])
    # the timestamp column is the record's time
    row = reader(spark, sbroker, subscribe=topic).where("value = cast('v7' as binary)").select("timestamp").first()
    assert int(row.timestamp.timestamp() * 1000) == ts0 + 7000
    # no record that late: an error by default, the latest offset on request
    late = str(ts0 + 10_000_000)
    with pytest.raises(Exception, match="no record at or after the timestamp"):
        reader(spark, sbroker, subscribe=topic, startingTimestamp=late).count()
    assert reader(spark, sbroker, subscribe=topic, startingTimestamp=late, startingOffsetsByTimestampStrategy="latest").count() == 0


def test_subscribe_pattern(spark, sbroker):
    tag = uuid.uuid4().hex[:6]
    wanted = [f"pat-{tag}-a", f"pat-{tag}-b"]
    for t in [*wanted, f"other-{tag}"]:
        produce(sbroker, t, numbered(t, 6))
    df = reader(spark, sbroker, subscribePattern=f"pat-{tag}-.*")
    assert sorted({r.topic for r in df.select("topic").collect()}) == wanted
    assert df.count() == 12


def test_min_partitions_splits_offset_ranges(spark, sbroker):
    topic = _name("split")
    produce(sbroker, topic, numbered(topic, 300))
    df = reader(spark, sbroker, subscribe=topic, minPartitions="9")
    assert df.rdd.getNumPartitions() == 9
    rows = df.select("partition", "offset").collect()
    assert len(rows) == 300 and len({(r.partition, r.offset) for r in rows}) == 300


def test_headers_written_and_read_back(spark, sbroker):
    topic = _name("headers")
    produce(sbroker, topic, [ProducerData(topic, key=b"k", messages=[b"v"], headers=[("trace", b"abc"), ("empty", None)], partition=0)])
    row = reader(spark, sbroker, subscribe=topic, includeHeaders="true").select("headers").first()
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in row.headers] == [("trace", b"abc"), ("empty", None)]


def test_write_then_read_back(spark, sbroker):
    a, b = _name("out-a"), _name("out-b")
    rows = [(f"k{i}", f"value-{i}", a if i % 2 else b, i % PARTITIONS) for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value string, topic string, partition int")
    df.write.mode("append").format("kclient").option("kafka.bootstrap.servers", sbroker.bootstrap).save()
    assert sum(log_end(sbroker, a).values()) == 100 and sum(log_end(sbroker, b).values()) == 100
    back = reader(spark, sbroker, subscribe=f"{a},{b}").selectExpr("cast(key as string) k", "cast(value as string) v", "topic", "partition").collect()
    assert sorted((r.k, r.v, r.topic, r.partition) for r in back) == sorted(rows)
    # the topic option wins over the column; headers and null keys pass through
    c = _name("out-c")
    df2 = spark.createDataFrame(
        [(None, b"x", "ignored", [("h", b"1")])], "key binary, value binary, topic string, headers array<struct<key:string,value:binary>>"
    )
    df2.write.mode("append").format("kclient").option("kafka.bootstrap.servers", sbroker.bootstrap).option("topic", c).save()
    got = reader(spark, sbroker, subscribe=c, includeHeaders="true").first()
    assert got.key is None and bytes(got.value) == b"x" and got.headers[0].key == "h"


def test_write_errors_fail_the_job(spark, sbroker):
    topic = _name("bad-partition")
    produce(sbroker, topic, numbered(topic, 3))
    df = spark.createDataFrame([("v", 7)], "value string, partition int")
    with pytest.raises(Exception, match="partition 7"):
        df.write.mode("append").format("kclient").option("kafka.bootstrap.servers", sbroker.bootstrap).option("topic", topic).save()
    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="'value' column"):
        no_value.write.mode("append").format("kclient").option("kafka.bootstrap.servers", sbroker.bootstrap).option("topic", topic).save()
    with pytest.raises(Exception, match="'topic' option or a 'topic' column"):
        spark.createDataFrame([("v",)], "value string").write.mode("append").format("kclient").option("kafka.bootstrap.servers", sbroker.bootstrap).save()
    assert sum(log_end(sbroker, topic).values()) == 3  # nothing half-written by the failed jobs


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "'subscribe', 'subscribePattern' or 'assign'"),
        ({"subscribe": "x", "startingOffsets": "latest"}, "startingOffsets"),
        ({"subscribe": "x", "minPartitions": "-1"}, "minPartitions"),
        ({"subscribe": "x", "kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
    ],
)
def test_bad_options_fail_at_planning_naming_the_option(spark, sbroker, options, named):
    with pytest.raises(Exception) as info:
        reader(spark, sbroker, **options).count()
    assert named in str(info.value)


def test_broker_down_is_a_clear_error(spark):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    df = (
        spark.read.format("kclient")
        .option("kafka.bootstrap.servers", f"127.0.0.1:{port}")
        .option("kafka.request.timeout.ms", "2000")
        .option("subscribe", "anything")
        .load()
    )
    with pytest.raises(Exception, match="NoBrokersAvailable|no broker answered"):
        df.count()
    with pytest.raises(Exception, match="could not be sent .* no broker answered"):
        spark.createDataFrame([("v",)], "value string").write.mode("append").format("kclient").option(
            "kafka.bootstrap.servers", f"127.0.0.1:{port}"
        ).option("topic", "anything").save()
    stream = spark.readStream.format("kclient").option("kafka.bootstrap.servers", f"127.0.0.1:{port}").option("subscribe", "anything").load()
    query = stream.writeStream.format("noop").trigger(availableNow=True).start()
    with pytest.raises(Exception, match="NoBrokersAvailableError: no broker answered"):
        query.awaitTermination(60)
    assert not query.isActive
    assert "Exception Group" not in str(query.exception())  # the KafkaError itself reaches the user


def test_offsets_past_the_log_end_are_data_loss(spark, sbroker):
    topic = _name("loss")
    produce(sbroker, topic, numbered(topic, 9))  # 3 per partition
    ending = json.dumps({topic: {"0": 10, "1": -1, "2": -1}})
    df = reader(spark, sbroker, subscribe=topic, endingOffsets=ending, **{"kafka.request.timeout.ms": "3000"})
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        df.count()
    lenient = reader(spark, sbroker, subscribe=topic, endingOffsets=ending, failOnDataLoss="false")
    assert lenient.count() == 9


@pytest.fixture(scope="module")
def small_log_broker():
    """A broker that keeps little: 1 KiB segments, 4 KiB per partition,
    retention checked every 100 ms."""
    props = {"num.partitions": "1", "log.segment.bytes": "1024", "log.retention.bytes": "4096", "log.retention.check.interval.ms": "100"}
    with BrokerProcess(properties=props) as proc:
        yield proc


def _wait_log_start_above(broker, topic: str, offset: int) -> int:
    """The partition's log start offset once it is above ``offset`` (0 and
    up: the value returned is true)."""
    with SimpleConsumer(broker.host, broker.port, so_timeout_ms=10_000, client_id="t") as c:

        def above() -> int | None:
            start = c.get_offsets_before(topic, 0, OffsetRequest.EARLIEST_TIME, 1)[0]
            return start if start > offset else None

        return wait_for(above, f"the log start above {offset}", interval=0.1)


def test_records_deleted_by_retention_are_data_loss(spark, small_log_broker):
    topic = _name("retention")
    with Producer({"metadata.broker.list": small_log_broker.bootstrap, "producer.type": "sync"}) as p:
        for i in range(0, 200, 5):  # small requests: a batch must fit in one 1 KiB segment
            p.send([ProducerData(topic, messages=[b"%04d" % j + bytes(100)], partition=0) for j in range(i, i + 5)])
    log_start = _wait_log_start_above(small_log_broker, topic, 0)
    assert log_start > 0, "retention deleted nothing"
    starting = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="were deleted"):
        reader(spark, small_log_broker, subscribe=topic, startingOffsets=starting).count()
    rows = reader(spark, small_log_broker, subscribe=topic, startingOffsets=starting, failOnDataLoss="false").select("offset").collect()
    offsets = sorted(r.offset for r in rows)
    assert offsets[-1] == 199 and offsets == list(range(offsets[0], 200)) and offsets[0] >= log_start


# -- streaming -----------------------------------------------------------------


def _stream(spark, broker, topic: str, out, checkpoint, **options):
    r = spark.readStream.format("kclient").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    query = (
        r.load()
        .selectExpr("topic", "partition", "offset", "cast(value as string) as value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the AvailableNow query did not finish"
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))
    return [p["numInputRows"] for p in query.recentProgress]


def test_streaming_checkpoint_restart_and_rate_limit(spark, sbroker, tmp_path):
    topic = _name("stream")
    produce(sbroker, topic, numbered(topic, 300))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    batches = _stream(spark, sbroker, topic, out, checkpoint, startingOffsets="earliest", maxOffsetsPerTrigger="70")
    assert sum(batches) == 300
    assert max(batches) <= 70 and batches.count(70) >= 4  # the cap is honoured, and used
    # stopped; more records arrive; the query resumes from its checkpoint
    produce(sbroker, topic, [ProducerData(topic, key=b"k", messages=[b"v%d" % i], partition=i % PARTITIONS) for i in range(300, 450)])
    batches = _stream(spark, sbroker, topic, out, checkpoint, startingOffsets="earliest", maxOffsetsPerTrigger="70")
    assert sum(batches) == 150 and max(batches) <= 70
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 450
    assert len({(r.partition, r.offset) for r in rows}) == 450  # no record read twice
    assert sorted(int(r.value[1:]) for r in rows) == list(range(450))  # none lost


def test_streaming_starts_at_latest_and_picks_up_new_records(spark, sbroker, tmp_path):
    topic = _name("latest")
    produce(sbroker, topic, numbered(topic, 30))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    assert sum(_stream(spark, sbroker, topic, out, checkpoint)) == 0  # startingOffsets defaults to latest
    produce(sbroker, topic, [ProducerData(topic, messages=[b"new%d" % i], partition=i % PARTITIONS) for i in range(12)])
    assert sum(_stream(spark, sbroker, topic, out, checkpoint)) == 12
    assert sorted(r.value for r in spark.read.parquet(str(out)).collect()) == sorted(f"new{i}" for i in range(12))


def test_streaming_write(spark, sbroker, tmp_path):
    source, sink = _name("s-in"), _name("s-out")
    produce(sbroker, source, numbered(source, 60))
    query = (
        spark.readStream.format("kclient")
        .option("kafka.bootstrap.servers", sbroker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(cast(value as string)) as value")
        .writeStream.format("kclient")
        .option("kafka.bootstrap.servers", sbroker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    back = reader(spark, sbroker, subscribe=sink).selectExpr("cast(value as string) v").collect()
    assert sorted(r.v for r in back) == sorted(f"V{i}" for i in range(60))


def test_streaming_pattern_picks_up_new_topics_from_earliest(spark, sbroker, tmp_path):
    tag = uuid.uuid4().hex[:6]
    first, later = f"grow-{tag}-a", f"grow-{tag}-b"
    produce(sbroker, first, numbered(first, 9))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run():
        query = (
            spark.readStream.format("kclient")
            .option("kafka.bootstrap.servers", sbroker.bootstrap)
            .option("subscribePattern", f"grow-{tag}-.*")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("topic", "partition", "offset")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None
        return sum(p["numInputRows"] for p in query.recentProgress)

    assert run() == 9
    produce(sbroker, later, numbered(later, 6))  # a new topic: its partitions start at earliest
    produce(sbroker, first, numbered(first, 3))
    assert run() == 9
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r.topic, r.partition, r.offset) for r in rows) == sorted(
        [(first, p, o) for p in range(PARTITIONS) for o in range(4)] + [(later, p, o) for p in range(PARTITIONS) for o in range(2)]
    )


def test_read_committed_skips_aborted_and_open_transactions(spark, sbroker):
    """``kafka.isolation.level=read_committed`` (KIP-98): a batch read sees
    the committed transactions' records, not the aborted one's, and stops
    at the open transaction; ``read_uncommitted`` sees every data record
    and no transaction marker."""
    topic = _name("rc")
    cfg = {"bootstrap.servers": sbroker.bootstrap, "producer.type": "async", "linger.ms": 1, "serializer.class": "kclient.StringEncoder"}
    with Producer({**cfg, "transactional.id": _name("rc-a")}) as p, Producer({**cfg, "transactional.id": _name("rc-b")}) as q:
        p.init_transactions(30_000)
        q.init_transactions(30_000)
        for values, commit in ((["c0", "c1"], True), (["a0", "a1"], False), (["c2"], True)):
            p.begin_transaction()
            p.send([ProducerData(topic, "k", values)])  # one key: one partition
            p.flush()
            if commit:
                p.commit_transaction(30_000)
            else:
                p.abort_transaction(30_000)
        q.begin_transaction()
        q.send([ProducerData(topic, "k", ["o0"])])
        q.flush()
        p.begin_transaction()
        p.send([ProducerData(topic, "k", ["c3"])])  # committed, but after the open transaction
        p.commit_transaction(30_000)

        def values(isolation: str) -> list[bytes]:
            rows = reader(spark, sbroker, subscribe=topic, **{"kafka.isolation.level": isolation}).orderBy("offset").collect()
            return [bytes(r.value) for r in rows]

        assert values("read_committed") == [b"c0", b"c1", b"c2"]
        assert values("read_uncommitted") == [b"c0", b"c1", b"a0", b"a1", b"c2", b"o0", b"c3"]
        q.abort_transaction(30_000)
    wait_for(lambda: values("read_committed") == [b"c0", b"c1", b"c2", b"c3"], "the LSO past the aborted open transaction")


def test_review_fixes_fail_at_planning(spark, sbroker):
    topic = _name("fixed")
    produce(sbroker, topic, numbered(topic, 3))
    custom = spark.read.format("kclient").schema("value string").option("kafka.bootstrap.servers", sbroker.bootstrap).option("subscribe", topic).load()
    with pytest.raises(Exception, match="fixed schema"):
        custom.count()
    with pytest.raises(Exception, match="kafka.isolation.level"):
        reader(spark, sbroker, subscribe=topic, **{"kafka.isolation.level": "read_maybe"}).count()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="request.required.acks"):
        df.write.mode("append").format("kclient").option("kafka.bootstrap.servers", sbroker.bootstrap).option("topic", topic).option("kafka.acks", "2").save()
    with pytest.raises(Exception, match="mode\\('append'\\)"):
        df.write.mode("overwrite").format("kclient").option("kafka.bootstrap.servers", sbroker.bootstrap).option("topic", topic).save()
    assert sum(log_end(sbroker, topic).values()) == 3
