"""The Spark data source's pure parts: options, offset ranges, micro-batch
caps, offsets JSON and the columnar decoder (no Spark, no broker)."""

from __future__ import annotations

import pytest
from helpers.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient import ConfigError, CorruptRecordError, ProducerConfig
from kclient.protocol.records import build_batch, build_message_set
from kclient.spark.columns import TIMESTAMP_TYPE_CREATE, TIMESTAMP_TYPE_LOG_APPEND, TIMESTAMP_TYPE_NONE, decode_columns
from kclient.spark.offsets import OffsetRange, cap_offsets, offsets_from_json, offsets_to_json, plan_ranges
from kclient.spark.options import EARLIEST, LATEST, read_options, write_options

pytestmark = pytest.mark.unit

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


# -- options -------------------------------------------------------------------


def test_options_are_case_insensitive_and_typed():
    opts = read_options(
        {**BOOT, "SUBSCRIBE": "a, b,a", "minpartitions": "4", "FailOnDataLoss": "FALSE", "includeHeaders": "true", "kafka.request.timeout.ms": "2500"},
        streaming=False,
    )
    assert opts.subscription.topics == ("a", "b")
    assert opts.min_partitions == 4
    assert opts.fail_on_data_loss is False
    assert opts.include_headers is True
    assert opts.request_timeout_ms == 2500
    assert opts.bootstrap == (("127.0.0.1", 9092),)
    assert (opts.starting.kind, opts.ending.kind) == ("earliest", "latest")


def test_streaming_defaults_start_at_latest():
    opts = read_options({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "100"}, streaming=True)
    assert opts.starting.kind == "latest"
    assert opts.max_offsets_per_trigger == 100


@pytest.mark.parametrize(
    ("options", "streaming", "named"),
    [
        ({"subscribe": "a"}, False, "kafka.bootstrap.servers"),
        ({**BOOT}, False, "'subscribe', 'subscribePattern' or 'assign'"),
        ({**BOOT, "subscribe": "a", "assign": '{"a":[0]}'}, False, "given: subscribe, assign"),
        ({**BOOT, "subscribePattern": "a["}, False, "subscribePattern"),
        ({**BOOT, "assign": '{"a": "0"}'}, False, "assign"),
        ({**BOOT, "assign": "[1]"}, False, "assign"),
        ({**BOOT, "subscribe": "a", "startingOffsets": "latest"}, False, "startingOffsets"),
        ({**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, False, "startingOffsets"),
        ({**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, True, "startingOffsets"),
        ({**BOOT, "subscribe": "a", "startingOffsets": "{not json"}, True, "startingOffsets"),
        ({**BOOT, "subscribe": "a", "endingOffsets": "earliest"}, False, "endingOffsets"),
        ({**BOOT, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, False, "endingOffsets"),
        ({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, True, "endingOffsets"),
        ({**BOOT, "subscribe": "a", "minPartitions": "0"}, False, "minPartitions"),
        ({**BOOT, "subscribe": "a", "minPartitions": "many"}, False, "minPartitions"),
        ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "-5"}, True, "maxOffsetsPerTrigger"),
        ({**BOOT, "subscribe": "a", "failOnDataLoss": "maybe"}, False, "failOnDataLoss"),
        ({**BOOT, "subscribe": "a", "startingTimestamp": "yesterday"}, False, "startingTimestamp"),
        ({**BOOT, "subscribe": "a", "startingOffsetsByTimestamp": '{"a":{"0":-7}}'}, False, "startingOffsetsByTimestamp"),
        ({**BOOT, "subscribe": "a", "startingOffsetsByTimestampStrategy": "skip"}, False, "startingOffsetsByTimestampStrategy"),
        ({**BOOT, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, False, "kafka.auto.offset.reset"),
        ({**BOOT, "subscribe": "a", "kafka.value.deserializer": "x"}, False, "kafka.value.deserializer"),
        ({**BOOT, "subscribe": "a", "kafka.security.protocol": "TLS"}, False, "kafka.security.protocol"),
        ({**BOOT, "subscribe": "a", "kafka.security.protocol": "SASL_SSL"}, False, "kafka.sasl.mechanism"),
        ({"kafka.bootstrap.servers": "localhost", "subscribe": "a"}, False, "kafka.bootstrap.servers"),
        ({**BOOT, "subscribe": "a", "minOffsetsPerTrigger": "5"}, True, "minOffsetsPerTrigger"),
    ],
)
def test_bad_read_options_name_the_option(options, streaming, named):
    with pytest.raises(ConfigError) as info:
        read_options(options, streaming=streaming)
    assert named in str(info.value)


def test_timestamp_options_take_precedence_like_spark():
    opts = read_options(
        {**BOOT, "subscribe": "a", "startingOffsets": "earliest", "startingOffsetsByTimestamp": '{"a":{"0":5}}', "startingTimestamp": "7"},
        streaming=False,
    )
    assert (opts.starting.kind, opts.starting.timestamp) == ("timestamp", 7)
    opts = read_options({**BOOT, "subscribe": "a", "startingOffsets": "earliest", "startingOffsetsByTimestamp": '{"a":{"0":5}}'}, streaming=False)
    assert opts.starting.kind == "timestamps" and dict(opts.starting.offsets) == {("a", 0): 5}
    opts = read_options({**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"0":-2,"1":10}}', "endingOffsets": '{"a":{"0":-1,"1":20}}'}, streaming=False)
    assert dict(opts.starting.offsets) == {("a", 0): EARLIEST, ("a", 1): 10}
    assert dict(opts.ending.offsets) == {("a", 0): LATEST, ("a", 1): 20}


def test_write_options():
    opts = write_options({**BOOT, "topic": "out", "kafka.acks": "all", "kafka.linger.ms": "5"})
    assert opts.topic == "out"
    assert opts.producer_config["request.required.acks"] == "-1"
    assert opts.producer_config["metadata.broker.list"] == "127.0.0.1:9092"
    assert opts.producer_config["producer.type"] == "async"
    # kafka.linger.ms (an alias of queue.buffering.max.ms) replaces the sink's default, quietly.
    assert "queue.buffering.max.ms" not in opts.producer_config
    assert ProducerConfig.from_properties(opts.producer_config, strict=True).queue_buffering_max_ms == 5
    with pytest.raises(ConfigError, match="kafka.bootstrap.servers"):
        write_options({"topic": "out"})
    with pytest.raises(ConfigError, match="kafka.key.serializer"):
        write_options({**BOOT, "kafka.key.serializer": "x"})


def test_sink_takes_kafka_batch_size_in_bytes():
    """Issue 28: the producer batches per partition by ``batch.size``
    bytes, as Kafka's, so ``kafka.batch.size`` reaches the sink's producer
    (it was dropped with a warning while kclient batched by count)."""
    opts = write_options({**BOOT, "topic": "out", "kafka.batch.size": "65536"})
    assert ProducerConfig.from_properties(opts.producer_config, strict=True).batch_size == 65536


def test_sink_uses_the_producers_default_linger():
    """Issue 27: the sink's producer lingers Kafka 4.0's 5 ms, the
    producer's own default (the sink sets no linger of its own)."""
    opts = write_options({**BOOT, "topic": "out"})
    assert not {"queue.buffering.max.ms", "queue.time", "linger.ms"} & set(opts.producer_config)
    assert ProducerConfig.from_properties(opts.producer_config).queue_buffering_max_ms == 5


@pytest.mark.parametrize(
    ("options", "streaming", "named", "hint"),
    [
        ({"topic": "out", "kafka.lingr.ms": "5"}, None, "kafka.lingr.ms", "did you mean 'kafka.linger.ms'"),
        ({"topic": "out", "kafka.buffer.memry": "5"}, None, "kafka.buffer.memry", "did you mean 'kafka.buffer.memory'"),
        ({"topik": "out"}, None, "topik", "did you mean 'topic'"),
        ({"subscribe": "a", "kafka.sesion.timeout.ms": "5"}, False, "kafka.sesion.timeout.ms", "did you mean 'kafka.session.timeout.ms'"),
        ({"subscribe": "a", "startingOffset": "earliest"}, True, "startingoffset", "did you mean 'startingoffsets'"),
    ],
)
def test_unknown_options_are_errors(options, streaming, named, hint):
    """Issue 27: an option the source or sink does not know, or a
    `kafka.*` name its client's config does not know, fails at planning
    with a "did you mean"; ``failOnUnknownOptions=false`` logs and ignores
    it instead."""
    def parse(opts):
        return write_options(opts) if streaming is None else read_options(opts, streaming=streaming)

    with pytest.raises(ConfigError, match="failOnUnknownOptions") as info:
        parse({**BOOT, **options})
    assert repr(named) in str(info.value) and hint in str(info.value)
    parsed = parse({**BOOT, **options, "failOnUnknownOptions": "false"})
    if streaming is None:
        assert not any(name in parsed.producer_config for name in ("lingr.ms", "buffer.memry", "topik"))
        ProducerConfig.from_properties(parsed.producer_config)  # what is left is all known
    with pytest.raises(ConfigError, match="failOnUnknownOptions"):
        parse({**BOOT, **options, "failOnUnknownOptions": "maybe"})


def test_known_options_of_another_client_are_not_errors():
    """A consumer setting the reader has no use for (it joins no group) is
    still ignored with a warning, not refused: it is not a typo."""
    opts = read_options({**BOOT, "subscribe": "a", "kafka.group.id": "g", "kafka.session.timeout.ms": "6000", "kafka.fetch.max.bytes": "1"}, streaming=False)
    assert opts.subscription.topics == ("a",)


# -- offset ranges -------------------------------------------------------------


def test_one_range_per_partition_and_empty_ones_dropped():
    start = {("a", 0): 0, ("a", 1): 5, ("b", 0): 7}
    end = {("a", 0): 10, ("a", 1): 5, ("b", 0): 9}
    ranges = plan_ranges(start, end, {("a", 0): ("h", 1)})
    assert ranges == [OffsetRange("a", 0, 0, 10, ("h", 1)), OffsetRange("b", 0, 7, 9, None)]


def test_min_partitions_splits_big_ranges_in_proportion():
    start = {("a", 0): 0, ("a", 1): 0}
    end = {("a", 0): 900, ("a", 1): 100}
    ranges = plan_ranges(start, end, min_partitions=10)
    assert sum(1 for r in ranges if r.partition == 0) == 9
    assert sum(1 for r in ranges if r.partition == 1) == 1
    for p, total in ((0, 900), (1, 100)):
        mine = [r for r in ranges if r.partition == p]
        assert mine[0].from_offset == 0 and mine[-1].until_offset == total
        assert all(a.until_offset == b.from_offset for a, b in zip(mine, mine[1:]))


def test_max_records_per_partition():
    ranges = plan_ranges({("a", 0): 0}, {("a", 0): 25}, max_records_per_partition=10)
    assert [(r.from_offset, r.until_offset) for r in ranges] == [(0, 9), (9, 17), (17, 25)]
    assert all(r.size <= 10 for r in ranges)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.dictionaries(st.integers(0, 20), st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=8),
    st.integers(1, 40),
)
def test_ranges_cover_exactly_the_offsets(spans, min_partitions):
    start = {("t", p): min(a, b) for p, (a, b) in spans.items()}
    end = {("t", p): max(a, b) for p, (a, b) in spans.items()}
    ranges = plan_ranges(start, end, min_partitions=min_partitions)
    covered = {}
    for r in ranges:
        assert r.size > 0
        covered.setdefault(r.partition, []).extend(range(r.from_offset, r.until_offset))
    for (_, p), e in end.items():
        assert covered.get(p, []) == list(range(start[("t", p)], e))


@settings(max_examples=examples(300), deadline=None)
@given(
    st.dictionaries(st.integers(0, 30), st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1, max_size=12),
    st.integers(1, 5_000),
)
def test_cap_never_exceeds_the_budget_and_never_goes_backwards(spans, budget):
    start = {("t", p): min(a, b) for p, (a, b) in spans.items()}
    latest = {("t", p): max(a, b) for p, (a, b) in spans.items()}
    end = cap_offsets(start, latest, budget)
    taken = sum(end[tp] - start[tp] for tp in latest)
    waiting = sum(latest[tp] - start[tp] for tp in latest)
    assert taken == min(budget, waiting)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)


def test_cap_shares_by_what_waits():
    assert cap_offsets({("t", 0): 0, ("t", 1): 0}, {("t", 0): 300, ("t", 1): 100}, 40) == {("t", 0): 30, ("t", 1): 10}
    # a partition missing from start has nothing waiting: it stays at latest
    assert cap_offsets({("t", 0): 0}, {("t", 0): 100, ("t", 1): 100}, 50) == {("t", 0): 50, ("t", 1): 100}


def test_offsets_json_round_trip():
    offsets = {("b", 1): 5, ("a", 10): 7, ("a", 2): 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"2": 0, "10": 7}, "b": {"1": 5}}
    assert offsets_from_json(as_json) == offsets
    assert offsets_from_json('{"a": {"2": 0}}') == {("a", 2): 0}
    with pytest.raises(ConfigError):
        offsets_from_json('{"a": 3}')


# -- columns -------------------------------------------------------------------


def _v2(base_offset, records, **kw):
    return build_batch(records, base_offset=base_offset, **kw)


def test_decode_columns_v2_with_bounds_and_types():
    buf = _v2(0, [(b"k0", b"v0", 1000), (None, b"v1", 1001, [("h", b"x")])]) + _v2(
        2, [(b"k2", None, 5000), (b"k3", b"v3", 5001)], timestamp_type_log_append=True
    )
    cols = decode_columns(buf, 1, 3, "t-0")
    assert cols.offsets == [1, 2]
    assert cols.keys == [None, b"k2"]
    assert cols.values == [b"v1", None]
    assert cols.timestamps[0] == 1001
    assert cols.timestamp_types == [TIMESTAMP_TYPE_CREATE, TIMESTAMP_TYPE_LOG_APPEND]
    assert [(h.key, h.value) for h in cols.headers[0]] == [("h", b"x")]
    assert cols.next_offset == 4  # one past the last complete batch


def test_decode_columns_legacy_formats():
    v1 = build_message_set([(b"k", b"v", 77)], magic=1, base_offset=3)
    cols = decode_columns(v1, 0, 100)
    assert (cols.offsets, cols.timestamps, cols.timestamp_types) == ([3], [77], [TIMESTAMP_TYPE_CREATE])
    v0 = build_message_set([(b"k", b"v", 77)], magic=0, base_offset=4)
    cols = decode_columns(v0, 0, 100)
    assert (cols.offsets, cols.timestamp_types) == ([4], [TIMESTAMP_TYPE_NONE])


def test_decode_columns_keeps_a_partial_batch_for_the_next_fetch():
    whole = _v2(0, [(None, b"a", 1)])
    second = _v2(1, [(None, b"b", 2)])
    cols = decode_columns(whole + second[:-3], 0, 10)
    assert cols.values == [b"a"] and cols.next_offset == 1


def test_decode_columns_names_a_corrupt_batch():
    good = _v2(0, [(None, b"good", 1)])
    bad = bytearray(_v2(1, [(None, b"evil", 2)]))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="t-3 offset 1"):
        decode_columns(good + bytes(bad), 0, 10, "t-3")
    assert decode_columns(good + bytes(bad), 0, 1, "t-3").values == [b"good"]
