"""Real peer clients against the bundled broker: kafka-python 3.x (idempotent
producer by default) and confluent-kafka (librdkafka) each produce to it and
consume back with assign(), and each consumes what the other produced.
Every loop has a deadline; record contents are compared exactly."""

from __future__ import annotations

import collections
import functools

import pytest
from helpers import peers
from helpers.raw import SocketClient, fetch_body
from helpers.wait import wait_for

from kclient.protocol.messages import FETCH
from kclient.protocol.records import iter_record_set, scan_batches
from kclient.protocol.records.v2 import read_header

pytestmark = pytest.mark.interop


N = 250
DEADLINE = 30.0  # seconds for a whole produce or consume phase
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def make_records(n: int = N, tag: str = "") -> list[tuple[bytes, bytes, tuple]]:
    """(key, value, headers) with repeating keys, a null key now and then
    and a header on every record."""
    out = []
    for i in range(n):
        key = None if i % 41 == 40 else f"key-{i % 17}".encode()
        value = f'{{"i": {i}, "tag": "{tag}", "pad": "{"x" * (i % 50)}"}}'.encode()
        out.append((key, value, (("seq", str(i).encode()),)))
    return out


# ---------------------------------------------------------------- peers


# The peer clients (tests/helpers/peers.py) with this module's settings: 30 s
# phases, an idempotent confluent producer, kafka-python finding the
# topic's partitions itself.
kp_produce = functools.partial(peers.kp_produce, deadline=DEADLINE)
kp_consume = functools.partial(peers.kp_consume, deadline=DEADLINE)
ck_produce = functools.partial(peers.ck_produce, deadline=DEADLINE, idempotent=True)
ck_consume = functools.partial(peers.ck_consume, deadline=DEADLINE)


# ---------------------------------------------------------------- checks


def check(records, placed: list[tuple[int, int]], got: list[tuple], partitions: int) -> None:
    """Every produced record read back once, with its key, value and
    headers, at the partition and offset the producer was told; offsets in
    each partition are 0..count-1; equal keys share a partition."""
    assert len(got) == len(records), f"read {len(got)} of {len(records)} records"
    by_position = {(p, o): (k, v, h) for p, o, k, v, h in got}
    assert len(by_position) == len(got), "a record was read twice"
    for (k, v, h), (p, o) in zip(records, placed):
        assert by_position[(p, o)] == (k, v, h)
    per_partition = collections.defaultdict(list)
    for p, o, *_ in got:
        per_partition[p].append(o)
    for p, offsets in per_partition.items():
        assert 0 <= p < partitions
        assert sorted(offsets) == list(range(len(offsets)))
    key_home = {}
    for (k, _, _), (p, _) in zip(records, placed):
        if k is not None:
            assert key_home.setdefault(k, p) == p, f"key {k!r} went to two partitions"


def raw_batches(bootstrap: str, topic: str, partition: int) -> list:
    """The v2 batch headers stored for a partition, read with kclient's own
    protocol layer over a plain socket."""
    host, port = bootstrap.rsplit(":", 1)
    with SocketClient(host, int(port), client_id="interop-check", timeout=10) as client:
        body = client.request(FETCH, 4, fetch_body(topic, [(partition, 0)], partition_max_bytes=50_000_000))
    records = bytes(body["responses"][0]["partitions"][0]["records"])
    return [read_header(records, info.position) for info in scan_batches(records)], list(iter_record_set(records))


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("compression", CODECS)
def test_kafka_python_round_trip(broker, topic, compression):
    num_partitions = broker.properties["num.partitions"]
    records = make_records(tag=compression)
    placed = kp_produce(broker.bootstrap, topic, records, compression=compression)
    got = kp_consume(broker.bootstrap, topic, len(records))
    check(records, placed, got, num_partitions)
    # The idempotent producer's batches carry its producer id and sequences.
    headers, stored = raw_batches(broker.bootstrap, topic, placed[0][0])
    assert headers and all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)
    assert [r.offset for r in stored] == list(range(len(stored)))


@pytest.mark.parametrize("compression", CODECS)
def test_confluent_round_trip(broker, topic, compression):
    num_partitions = broker.properties["num.partitions"]
    records = make_records(tag=compression)
    placed = ck_produce(broker.bootstrap, topic, records, compression=compression)
    got = ck_consume(broker.bootstrap, topic, len(records), partitions=range(num_partitions))
    check(records, placed, got, num_partitions)


def test_kafka_python_produces_confluent_consumes(broker, topic):
    num_partitions = broker.properties["num.partitions"]
    records = make_records(tag="kp->ck")
    placed = kp_produce(broker.bootstrap, topic, records, compression="gzip")
    got = ck_consume(broker.bootstrap, topic, len(records), partitions=range(num_partitions))
    check(records, placed, got, num_partitions)


def test_confluent_produces_kafka_python_consumes(broker, topic):
    num_partitions = broker.properties["num.partitions"]
    records = make_records(tag="ck->kp")
    placed = ck_produce(broker.bootstrap, topic, records, compression="lz4")
    got = kp_consume(broker.bootstrap, topic, len(records))
    check(records, placed, got, num_partitions)


def test_consumers_wait_for_late_records(broker, topic):
    """Both consumers start on an empty topic (Fetch long polls) and get
    records produced afterwards by the other client."""
    import threading

    num_partitions = broker.properties["num.partitions"]
    records = make_records(40, tag="late")
    kp_produce(broker.bootstrap, topic, records[:1])  # create the topic
    results: dict[str, list] = {}
    read: list[tuple] = []

    def consume_ck():
        results["ck"] = ck_consume(broker.bootstrap, topic, len(records), partitions=range(num_partitions), into=read)

    thread = threading.Thread(target=consume_ck)
    thread.start()
    try:
        # It has read what there is: it now waits at the log end for the rest.
        wait_for(lambda: read, "the consumer to read the first record", timeout=DEADLINE)
        ck_produce(broker.bootstrap, topic, records[1:])
    finally:
        thread.join(DEADLINE + 10)
    assert not thread.is_alive()
    got = results["ck"]
    assert collections.Counter((k, v, h) for _, _, k, v, h in got) == collections.Counter(records)
