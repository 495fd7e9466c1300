"""``isolation.level`` in kclient's own consumers (KIP-98, issue 29):
SimpleConsumer, the poll Consumer, the ConsumerConnector and the Spark
source's reader, against the bundled broker.

One module-scoped broker and one topic of one partition, written by
kclient's transactional Producer: committed, aborted and interleaved
transactions, plain records, then a transaction left open with a committed
one after it. ``read_committed`` must hand out exactly the committed and
plain records, each once, up to the last stable offset (the open
transaction's first offset); ``read_uncommitted`` every data record up to
the high watermark; neither mode a transaction marker. The last test ends
the open transaction and reads on past it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from helpers.wait import wait_for

import kclient
from kclient import Consumer, ConsumerTimeoutError, TopicPartition
from kclient.client.consumer.simple import FetchRequest, OffsetRequest, SimpleConsumer
from kclient.testing import BrokerProcess

PROPERTIES = {
    "num.partitions": 1,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
}
TIMEOUT_MS = 30_000
#: Fetch rounds a reader may take before it is said to be stuck.
MAX_ROUNDS = 500


@pytest.fixture(scope="module")
def broker():
    with BrokerProcess(properties=PROPERTIES, keep_port=True) as proc:
        yield proc


@attrs.define
class Layout:
    """The topic as written: ``records`` the data records ``(offset,
    value)`` in offset order (from a read_uncommitted SimpleConsumer, checked
    against what was sent), ``lso`` the open transaction's first offset,
    ``hw`` the high watermark."""

    topic: str
    open_producer: kclient.Producer
    records: list[tuple[int, bytes]] = attrs.Factory(list)
    lso: int = -1
    hw: int = -1

    def committed(self, start: int = 0, end: int | None = None) -> list[bytes]:
        """What read_committed hands out from ``start`` up to ``end`` (the LSO)."""
        end = self.lso if end is None else end
        return [v for o, v in self.records if start <= o < end and v[:1] in (b"c", b"p")]


#: Every data record, in the order written (the topic's offset order).
WRITTEN = [
    *(f"c{i}" for i in range(5)),
    *(f"a{i}" for i in range(5)),
    *(f"p{i}" for i in range(3)),
    *(f"c{i}" for i in range(5, 10)),
    "ax0",
    "c10",
    "ax1",
    "c11",
    *(f"o{i}" for i in range(3)),
    "c12",
]
#: What read_committed sees while the last transaction is open.
COMMITTED = [v for v in WRITTEN if v[0] in "cp" and v != "c12"]


def _producer(broker: BrokerProcess, txn_id: str | None = None) -> kclient.Producer:
    cfg = {"bootstrap.servers": broker.bootstrap, "serializer.class": "kclient.StringEncoder", "linger.ms": 1}
    if txn_id is not None:
        cfg.update({"producer.type": "async", "transactional.id": f"{txn_id}-{uuid.uuid4().hex[:8]}"})
    return kclient.Producer(cfg)


def _send(producer: kclient.Producer, topic: str, values: list[str]) -> None:
    producer.send([kclient.ProducerData(topic, "k", values)])
    producer.flush()


def _simple(broker: BrokerProcess, **kwargs) -> SimpleConsumer:
    host, port = broker.bootstrap.rsplit(":", 1)
    return SimpleConsumer(host, int(port), TIMEOUT_MS, **kwargs)


def _fetch_all(consumer: SimpleConsumer, topic: str, start: int, end: int, max_size: int = 1 << 20) -> list[tuple[int, bytes]]:
    """Every message from ``start`` until the position reaches ``end``,
    following each set's ``next_offset`` (past markers and skipped batches)."""
    got: list[tuple[int, bytes]] = []
    offset = start
    for _ in range(MAX_ROUNDS):
        if offset >= end:
            return got
        ms = consumer.fetch(FetchRequest(topic, 0, offset, max_size))
        got += [(m.offset, m.message.payload) for m in ms]
        assert ms.next_offset > offset or offset >= end, f"stuck at offset {offset}"
        offset = ms.next_offset
    raise AssertionError(f"no end after {MAX_ROUNDS} fetches; at {offset}")


@pytest.fixture(scope="module")
def layout(broker) -> Iterator[Layout]:
    topic = f"rc-{uuid.uuid4().hex[:8]}"
    committer, aborter, plain, opener = _producer(broker, "committer"), _producer(broker, "aborter"), _producer(broker), _producer(broker, "opener")
    with committer, aborter, plain, opener:
        for p in (committer, aborter, opener):
            p.init_transactions(TIMEOUT_MS)
        committer.begin_transaction()
        _send(committer, topic, WRITTEN[0:3])
        _send(committer, topic, WRITTEN[3:5])  # a transaction of two batches
        committer.commit_transaction(TIMEOUT_MS)
        aborter.begin_transaction()
        _send(aborter, topic, WRITTEN[5:10])
        aborter.abort_transaction(TIMEOUT_MS)
        _send(plain, topic, WRITTEN[10:13])
        committer.begin_transaction()
        _send(committer, topic, WRITTEN[13:18])
        committer.commit_transaction(TIMEOUT_MS)
        # Interleaved: an aborted transaction around a committed one.
        aborter.begin_transaction()
        _send(aborter, topic, ["ax0"])
        committer.begin_transaction()
        _send(committer, topic, ["c10"])
        committer.commit_transaction(TIMEOUT_MS)
        _send(aborter, topic, ["ax1"])
        aborter.abort_transaction(TIMEOUT_MS)
        committer.begin_transaction()
        _send(committer, topic, ["c11"])
        committer.commit_transaction(TIMEOUT_MS)
        # Left open: the last stable offset stays at its first record.
        opener.begin_transaction()
        _send(opener, topic, ["o0", "o1", "o2"])
        committer.begin_transaction()
        _send(committer, topic, ["c12"])
        committer.commit_transaction(TIMEOUT_MS)
        layout = Layout(topic, opener)
        with _simple(broker) as c:
            wait_for(lambda: len(_fetch_all(c, topic, 0, c.get_offsets_before(topic, 0, OffsetRequest.LATEST_TIME, 1)[0])) == len(WRITTEN), "every record written")
            layout.hw = c.get_offsets_before(topic, 0, OffsetRequest.LATEST_TIME, 1)[0]
            layout.records = _fetch_all(c, topic, 0, layout.hw)
        layout.lso = next(o for o, v in layout.records if v == b"o0")
        yield layout


# ----------------------------------------------------------------- SimpleConsumer


def test_simple_consumer_read_uncommitted_sees_every_data_record_and_no_marker(broker, layout):
    values = [v for _, v in layout.records]
    assert values == [v.encode() for v in WRITTEN]
    offsets = [o for o, _ in layout.records]
    # the markers took offsets no message was handed out for
    assert len(offsets) == len(set(offsets)) and layout.hw > offsets[-1] + 1 > len(offsets)
    with _simple(broker, config={"isolation.level": "read_uncommitted"}) as c:
        assert c.get_offsets_before(layout.topic, 0, OffsetRequest.LATEST_TIME, 1) == [layout.hw]


@pytest.mark.parametrize("how", ["keyword", "config"])
def test_simple_consumer_read_committed_stops_at_the_lso(broker, layout, how):
    kwargs = {"isolation_level": "read_committed"} if how == "keyword" else {"config": {"isolation.level": "READ_COMMITTED"}}
    with _simple(broker, **kwargs) as c:
        (end,) = c.get_offsets_before(layout.topic, 0, OffsetRequest.LATEST_TIME, 5)
        assert end == layout.lso
        got = _fetch_all(c, layout.topic, 0, end)
        assert [v for _, v in got] == [v.encode() for v in COMMITTED]
        # at the LSO a fetch returns nothing and does not move
        ms = c.fetch(FetchRequest(layout.topic, 0, end))
        assert (ms.messages(), ms.next_offset) == ([], end)
        # multifetch: the same partition from two places, one round trip each
        first, second = c.multifetch([FetchRequest(layout.topic, 0, 0), FetchRequest(layout.topic, 0, layout.records[7][0])])
        assert [m.message.payload for m in first] == [v.encode() for v in COMMITTED]
        assert [m.message.payload for m in second] == layout.committed(layout.records[7][0])


def test_simple_consumer_read_committed_from_every_offset_and_small_fetches(broker, layout):
    """From every offset below the LSO (inside aborted transactions and on
    markers too), with whole answers and with answers of a batch or two,
    read_committed hands out exactly the committed records from there."""
    with _simple(broker, isolation_level="read_committed") as c:
        for start in range(layout.lso + 1):
            got = _fetch_all(c, layout.topic, start, layout.lso)
            assert [v for _, v in got] == layout.committed(start), start
        small = _fetch_all(c, layout.topic, 0, layout.lso, max_size=160)
        assert [v for _, v in small] == layout.committed()


# ----------------------------------------------------------------- poll Consumer


def _poll_all(broker: BrokerProcess, isolation: str, **extra) -> tuple[list[bytes], int, int]:
    """Values a poll Consumer reads from the start until its position
    reaches its end offset; with that position and end offset."""
    tp = TopicPartition(extra.pop("topic"), 0)
    cfg = {"bootstrap.servers": broker.bootstrap, "isolation.level": isolation, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100, **extra}
    with Consumer(cfg) as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        values: list[bytes] = []
        for _ in range(MAX_ROUNDS):
            if consumer.position(tp) >= end:
                break
            values += [r.value for r in consumer.poll(timeout_ms=1000)]
        else:
            raise AssertionError(f"position {consumer.position(tp)} never reached {end}")
        # nothing more comes: a poll at the end returns nothing
        values += [r.value for r in consumer.poll(timeout_ms=200)]
        return values, consumer.position(tp), end


@pytest.mark.parametrize("max_poll_records", [500, 1])
def test_poll_consumer_read_committed_sees_exactly_the_committed_records(broker, layout, max_poll_records):
    values, position, end = _poll_all(broker, "read_committed", topic=layout.topic, **{"max.poll.records": max_poll_records})
    assert end == layout.lso
    assert values == [v.encode() for v in COMMITTED]
    assert position == layout.lso  # past the last markers before the open transaction


def test_poll_consumer_read_uncommitted_sees_every_data_record(broker, layout):
    values, position, end = _poll_all(broker, "read_uncommitted", topic=layout.topic)
    assert (end, position) == (layout.hw, layout.hw)  # past the last commit marker
    assert values == [v.encode() for v in WRITTEN]


# ----------------------------------------------------------------- ConsumerConnector


def _connector_values(broker: BrokerProcess, topic: str, isolation: str, expected: int) -> list[bytes]:
    """The values a ConsumerConnector's stream hands out: every one until
    ``expected`` arrived, then until ``consumer.timeout.ms`` passes with
    nothing new (so one too many would be seen)."""
    settings = {
        "group.id": f"rc-{uuid.uuid4().hex[:8]}",
        "bootstrap.servers": broker.bootstrap,
        "auto.offset.reset": "smallest",
        "auto.commit.enable": False,
        "consumer.timeout.ms": 1000,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "rebalance.backoff.ms": 200,
        "isolation.level": isolation,
    }
    values: list[bytes] = []
    with Consumer.create(settings) as connector:
        (stream,) = connector.create_message_streams({topic: 1})[topic]
        for _ in range(MAX_ROUNDS):
            try:
                values.append(next(stream).message)
            except ConsumerTimeoutError:
                if len(values) >= expected:
                    return values
    raise AssertionError(f"read {len(values)} of {expected}")


def test_connector_read_committed_sees_exactly_the_committed_records(broker, layout):
    assert _connector_values(broker, layout.topic, "read_committed", len(COMMITTED)) == [v.encode() for v in COMMITTED]


def test_connector_read_uncommitted_sees_every_data_record(broker, layout):
    assert _connector_values(broker, layout.topic, "read_uncommitted", len(WRITTEN)) == [v.encode() for v in WRITTEN]


# ----------------------------------------------------------------- Spark source


def _spark_read(broker: BrokerProcess, topic: str, isolation: str | None) -> tuple[int, list[bytes]]:
    """The Spark source's latest offset and what its task reader returns
    for the planned range (no Spark: the reader and planner themselves)."""
    from kclient.spark.admin import ClusterView
    from kclient.spark.offsets import OffsetRange
    from kclient.spark.options import read_options
    from kclient.spark.reader import read_range

    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic}
    if isolation is not None:
        options["kafka.isolation.level"] = isolation
    opts = read_options(options, streaming=False)
    (latest,) = ClusterView(opts).latest([(topic, 0)]).values()
    batches = read_range(OffsetRange(topic, 0, 0, latest), opts)
    return latest, [v for b in batches for v in b.column("value").to_pylist()]


def test_spark_reader_read_committed_and_uncommitted(broker, layout):
    assert _spark_read(broker, layout.topic, "read_committed") == (layout.lso, [v.encode() for v in COMMITTED])
    assert _spark_read(broker, layout.topic, None) == (layout.hw, [v.encode() for v in WRITTEN])


# ----------------------------------------------------------------- console consumer


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_console_consumer_takes_isolation_level_as_a_consumer_property(broker, layout, isolation):
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-m", "kclient", "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", layout.topic,
         "--from-beginning", "--timeout-ms", "1500", "--consumer-property", f"isolation.level={isolation}"],
        capture_output=True, text=True, timeout=60, cwd=root, env=dict(os.environ, PYTHONPATH=str(root)),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == (COMMITTED if isolation == "read_committed" else WRITTEN)


# ----------------------------------------------------------------- after the open transaction ends (last)


def test_z_once_the_open_transaction_commits_read_committed_reads_on(broker, layout):
    """Runs last: the open transaction commits; read_committed readers move
    on to its records and the committed one written after it."""
    layout.open_producer.commit_transaction(TIMEOUT_MS)
    everything = [v.encode() for v in WRITTEN if v[0] in "cpo"]
    with _simple(broker, isolation_level="read_committed") as c:
        wait_for(lambda: c.get_offsets_before(layout.topic, 0, OffsetRequest.LATEST_TIME, 1) == [layout.hw + 1], "the LSO at the new high watermark")
        assert [v for _, v in _fetch_all(c, layout.topic, 0, layout.hw + 1)] == everything
    values, position, end = _poll_all(broker, "read_committed", topic=layout.topic)
    assert (values, position, end) == (everything, layout.hw + 1, layout.hw + 1)
    assert _spark_read(broker, layout.topic, "read_committed") == (layout.hw + 1, everything)
