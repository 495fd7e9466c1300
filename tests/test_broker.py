"""The bundled broker over loopback: raw frames built with
kclient.protocol.connection.ClientConnection, answered by a real broker
subprocess (kclient.testing.BrokerProcess)."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import attrs
import pytest
import trio
from helpers.raw import TrioClient, fetch_body, peer_has_read_all, produce_body
from helpers.wait import retry_async, wait_for_async

from kclient.broker.handlers import SUPPORTED_VERSIONS
from kclient.protocol.connection import encode_unsupported_api_versions
from kclient.protocol.messages import API_VERSIONS, FETCH, FIND_COORDINATOR, INIT_PRODUCER_ID, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, PRODUCE
from kclient.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from kclient.protocol.records import build_batch as _build_batch
from kclient.protocol.records import iter_record_set, scan_batches
from kclient.testing import BrokerProcess

#: The first frame each real client sends on a new connection, captured on
#: loopback (the project's shared golden vectors, first_requests.json):
#: librdkafka 2.16 via confluent-kafka and Debian's librdkafka 2.0.2 via kcat
#: send ApiVersions v3, kafka-python 3.0 sends ApiVersions v4.
FIRST_REQUESTS = [
    {
        "client": "confluent-kafka (librdkafka) first request",
        "hex": (
            "000000400012000300000001000772646b61666b610017636f6e666c75656e74"
            "2d6b61666b612d707974686f6e16322e31362e312d72646b61666b612d322e31"
            "362e3000"
        ),
        "api_version": 3,
        "correlation_id": 1,
    },
    {
        "client": "kafka-python first request",
        "hex": (
            "0000002c0012000400000001000c6b61666b612d707974686f6e000d6b61666b"
            "612d707974686f6e07332e302e313200"
        ),
        "api_version": 4,
        "correlation_id": 1,
    },
    {
        "client": "kcat (Debian's librdkafka) first request",
        "hex": (
            "000000240012000300000001000772646b61666b61000b6c696272646b61666b"
            "6106322e302e3200"
        ),
        "api_version": 3,
        "correlation_id": 1,
    },
]

TIMEOUT = 15  # seconds any single exchange may take before the test fails


def build_batch(*args, **kwargs) -> bytes:
    """A v2 batch as the broker stores it: its leader stamps its leader
    epoch (0 on a standalone broker) into every batch (KIP-101)."""
    kwargs.setdefault("partition_leader_epoch", 0)
    return _build_batch(*args, **kwargs)


# ---------------------------------------------------------------- helpers


async def connect(broker) -> TrioClient:
    return await TrioClient.connect(broker, client_id="test-broker", timeout=TIMEOUT)


def records(n: int, *, prefix: str = "r", ts: int = 1_700_000_000_000) -> list[tuple]:
    return [(f"k{i}".encode(), f"{prefix}{i}".encode() * 3, ts + i) for i in range(n)]


async def produce(client: TrioClient, topic: str, partition: int, batch: bytes, *, acks: int = 1, version: int = 8) -> dict:
    body = await client.request(PRODUCE, version, produce_body(topic, partition, batch, acks=acks))
    (t,) = body["responses"]
    (p,) = t["partition_responses"]
    return p


async def fetch(client: TrioClient, topic: str, partition: int, offset: int, *, version: int = 11, **kw) -> dict:
    body = await client.request(FETCH, version, fetch_body(topic, [(partition, offset)], **kw))
    (t,) = body["responses"]
    (p,) = t["partitions"]
    return p


async def metadata(client: TrioClient, topics, *, version: int = 8, allow_auto: bool = True) -> dict:
    if topics is None:
        # "All topics" is a null array (v1+). The schema writes [] for None,
        # so patch the encoded empty array (int32 0) into a null one (-1).
        assert 1 <= version <= 3
        _, data = client.conn.send(METADATA, version, {"topics": []})
        assert data.endswith(b"\x00\x00\x00\x00")
        await client.send_raw(data[:-4] + b"\xff\xff\xff\xff")
        return (await client.receive()).body
    return await client.request(
        METADATA,
        version,
        {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": allow_auto,
        },
    )


async def list_offsets(client: TrioClient, topic: str, partition: int, timestamp: int, *, version: int = 1, max_num_offsets: int = 1) -> dict:
    body = await client.request(
        LIST_OFFSETS,
        version,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "timestamp": timestamp, "max_num_offsets": max_num_offsets}],
                }
            ],
        },
    )
    return body["topics"][0]["partitions"][0]


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    return struct.pack(">q", base_offset) + batch[8:]


async def create(client: TrioClient, topic: str) -> None:
    body = await metadata(client, [topic])
    assert body["topics"][0]["error_code"] == 0


# ---------------------------------------------------------------- ApiVersions


# Fetch 0-3 are served with down-converted message sets (issue 3);
# FindCoordinator 0-2 answers with this broker and OffsetFetch 1-5 with "no
# committed offset" (issue 4); OffsetFetch v0 reads ZooKeeper (issue 25).
EXPECTED_VERSIONS = {
    0: (0, 8), 1: (0, 11), 2: (0, 5), 3: (0, 12), 4: (0, 3), 5: (0, 1), 6: (0, 5), 8: (0, 9), 9: (0, 9), 10: (0, 2),
    11: (0, 5), 12: (0, 3), 13: (0, 3), 14: (0, 3), 15: (0, 4), 16: (0, 5),
    17: (0, 1), 18: (0, 3), 19: (0, 4), 20: (0, 3), 22: (0, 4), 23: (0, 3), 32: (0, 3), 33: (0, 1), 36: (0, 1), 37: (0, 1), 42: (0, 1),
    44: (0, 0), 47: (0, 0), 68: (0, 1), 69: (0, 0),
    27: (0, 1),  # WriteTxnMarkers (issue 29: the transaction markers in the log)
    # Transactions (issue 29): InitProducerId with a transactional id,
    # AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, Describe/ListTransactions.
    24: (0, 3), 25: (0, 3), 26: (0, 4), 65: (0, 0), 66: (0, 1),
    28: (0, 3),  # TxnOffsetCommit (issue 29: group offsets inside a transaction)
    48: (0, 0), 49: (0, 0),  # Describe/AlterClientQuotas (issue 30, KIP-546)
    50: (0, 0), 51: (0, 0),  # Describe/AlterUserScramCredentials (issue 30, KIP-554)
    29: (0, 3), 30: (0, 3), 31: (0, 3),  # DescribeAcls, CreateAcls, DeleteAcls (issue 30)
}


@pytest.mark.unit
def test_advertised_table_matches_protocol_notes():
    assert SUPPORTED_VERSIONS == EXPECTED_VERSIONS


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_api_versions(broker, version):
    client = await connect(broker)
    body = await client.request(
        API_VERSIONS, version, {"client_software_name": "kclient-tests", "client_software_version": "0.1"}
    )
    assert body["error_code"] == 0
    got = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert got == EXPECTED_VERSIONS
    if version >= 1:
        assert body["throttle_time_ms"] == 0
    await client.aclose()


@pytest.mark.parametrize("vector", FIRST_REQUESTS, ids=lambda v: v["client"].split()[0])
async def test_first_requests_of_real_clients(broker, vector):
    """The exact first frame each real client sends gets an answer it can
    use: v3 natively, v4 with the KIP-511 reply (header v0, v0 body,
    error 35, the supported ranges including ApiVersions 0-3)."""
    client = await connect(broker)
    await client.send_raw(bytes.fromhex(vector["hex"]))
    frame = await client.receive_raw_frame()
    (size, correlation_id) = struct.unpack(">ii", frame[:8])
    assert size == len(frame) - 4
    assert correlation_id == vector["correlation_id"]
    if vector["api_version"] <= 3:
        body = API_VERSIONS.response(vector["api_version"]).decode(frame[8:])
        assert body["error_code"] == 0
        got = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        assert got == EXPECTED_VERSIONS
    else:
        expected = encode_unsupported_api_versions(
            vector["correlation_id"], [(k, lo, hi) for k, (lo, hi) in sorted(EXPECTED_VERSIONS.items())]
        )
        assert frame == expected
        body = API_VERSIONS.response(0).decode(frame[8:])
        assert body["error_code"] == 35
        assert {"api_key": 18, "min_version": 0, "max_version": 3} in body["api_keys"]
    # The connection stays usable: the client retries with a version we have.
    body = await client.request(API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
    assert body["error_code"] == 0
    await client.aclose()


# ---------------------------------------------------------------- Metadata


@pytest.mark.parametrize("version", range(9))
async def test_metadata_auto_creates_topic(broker, topic, version):
    client = await connect(broker)
    body = await metadata(client, [topic], version=version)
    (broker_entry,) = body["brokers"]
    assert (broker_entry["host"], broker_entry["port"]) == (broker.host, broker.port)
    (t,) = body["topics"]
    assert t["name"] == topic and t["error_code"] == 0
    assert [p["partition_index"] for p in t["partitions"]] == list(range(broker.properties["num.partitions"]))
    for p in t["partitions"]:
        assert p["error_code"] == 0
        assert p["leader_id"] == broker_entry["node_id"]
        assert p["replica_nodes"] == [broker_entry["node_id"]] == p["isr_nodes"]
        if version >= 7:
            assert p["leader_epoch"] == 0
    if version >= 1:
        assert body["controller_id"] == broker_entry["node_id"]
    if version >= 2:
        assert isinstance(body["cluster_id"], str) and len(body["cluster_id"]) == 22
    # Asking again gives the same answer (no second creation, stable epoch).
    again = await metadata(client, [topic], version=version)
    assert again["topics"] == body["topics"]
    await client.aclose()


async def test_metadata_all_topics_and_no_auto_create(broker, topic):
    client = await connect(broker)
    await create(client, topic)
    everything = await metadata(client, None, version=1)
    assert topic in {t["name"] for t in everything["topics"]}
    v0_all = await metadata(client, [], version=0)
    assert topic in {t["name"] for t in v0_all["topics"]}
    none = await metadata(client, [], version=1)
    assert none["topics"] == []
    missing = await metadata(client, [topic + "-absent"], version=4, allow_auto=False)
    assert missing["topics"][0]["error_code"] == 3
    assert missing["topics"][0]["partitions"] == []
    bad = await metadata(client, ["no/slashes"], version=4)
    assert bad["topics"][0]["error_code"] == 17
    assert (await metadata(client, [], version=2))["cluster_id"] == (await metadata(client, None, version=3))["cluster_id"]
    await client.aclose()


# ---------------------------------------------------------------- Produce / Fetch


@pytest.mark.parametrize("acks", [1, -1])
async def test_produce_then_fetch_exact_bytes(broker, topic, acks):
    client = await connect(broker)
    await create(client, topic)
    batch1 = build_batch(records(3))
    batch2 = build_batch(records(2, prefix="second"), base_offset=77)  # the broker reassigns it
    r1 = await produce(client, topic, 0, batch1, acks=acks)
    assert (r1["error_code"], r1["base_offset"], r1["log_start_offset"]) == (0, 0, 0)
    r2 = await produce(client, topic, 0, batch2, acks=acks)
    assert (r2["error_code"], r2["base_offset"]) == (0, 3)
    for version in (4, 7, 11):
        p = await fetch(client, topic, 0, 0, version=version)
        assert p["error_code"] == 0
        assert p["high_watermark"] == 5
        assert p["last_stable_offset"] == 5
        assert bytes(p["records"]) == batch1 + with_base_offset(batch2, 3)
        if version >= 5:
            assert p["log_start_offset"] == 0
        assert p["aborted_transactions"] == []
    # Fetching from an offset inside the second batch returns that batch.
    p = await fetch(client, topic, 0, 4)
    assert bytes(p["records"]) == with_base_offset(batch2, 3)
    # The other partition stayed empty.
    p = await fetch(client, topic, 1, 0)
    assert (p["error_code"], p["high_watermark"], bytes(p["records"])) == (0, 0, b"")
    await client.aclose()


async def test_produce_acks_0_sends_no_response(broker, topic):
    client = await connect(broker)
    await create(client, topic)
    batch = build_batch(records(4))
    await client.send(
        PRODUCE,
        7,
        {
            "transactional_id": None,
            "acks": 0,
            "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        },
        expect_response=False,
    )
    # The next response on the connection answers the next request: had the
    # broker answered the produce, ClientConnection would see a correlation
    # id mismatch.
    p = await list_offsets(client, topic, 0, -1)
    assert (p["error_code"], p["offset"]) == (0, 4)
    f = await fetch(client, topic, 0, 0)
    assert bytes(f["records"]) == batch
    await client.aclose()


async def test_produce_auto_creates_topic_and_unknown_partition(broker, topic):
    client = await connect(broker)
    r = await produce(client, topic, 1, build_batch(records(1)))
    assert (r["error_code"], r["base_offset"]) == (0, 0)
    r = await produce(client, topic, 99, build_batch(records(1)))
    assert r["error_code"] == 3
    await client.aclose()


async def test_bad_acks_are_rejected(broker, topic):
    # Produce v0-2 are served since issue 3 (tests/test_formats_broker.py).
    client = await connect(broker)
    await create(client, topic)
    r = await produce(client, topic, 0, build_batch(records(1)), acks=2)
    assert r["error_code"] == 21
    p = await list_offsets(client, topic, 0, -1)
    assert p["offset"] == 0  # nothing was written
    await client.aclose()


async def test_init_producer_id_hands_out_increasing_ids(broker):
    client = await connect(broker)
    ids = []
    for version in (0, 1, 1):
        body = await client.request(INIT_PRODUCER_ID, version, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert body["error_code"] == 0 and body["producer_epoch"] == 0
        ids.append(body["producer_id"])
    assert ids == sorted(set(ids))
    # An idempotent batch carrying that producer id is accepted as is.
    topic = f"idempotent-{ids[0]}"
    await create(client, topic)
    batch = build_batch(records(2), producer_id=ids[0], producer_epoch=0, base_sequence=0)
    r = await produce(client, topic, 0, batch)
    assert r["error_code"] == 0
    assert bytes((await fetch(client, topic, 0, 0))["records"]) == batch
    await client.aclose()


async def test_fetch_long_poll_wakes_on_append(broker, topic):
    consumer = await connect(broker)
    producer = await connect(broker)
    await create(consumer, topic)
    batch = build_batch(records(2))
    result = {}
    sent = trio.Event()

    async def long_poll():
        await consumer.send(FETCH, 11, fetch_body(topic, [(0, 0)], max_wait_ms=TIMEOUT * 1000 - 3000, min_bytes=1))
        sent.set()
        (t,) = (await consumer.receive()).body["responses"]
        (result["p"],) = t["partitions"]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(long_poll)
        await sent.wait()
        await wait_for_async(lambda: peer_has_read_all(consumer.stream.socket), "the broker to read the fetch (it parks)")
        assert "p" not in result
        r = await produce(producer, topic, 0, batch)
        assert r["error_code"] == 0
    p = result["p"]
    assert p["error_code"] == 0
    assert bytes(p["records"]) == batch
    await consumer.aclose()
    await producer.aclose()


async def test_fetch_long_poll_times_out_empty(broker, topic):
    client = await connect(broker)
    await create(client, topic)
    p = await fetch(client, topic, 0, 0, max_wait_ms=100, min_bytes=1)
    assert (p["error_code"], bytes(p["records"]), p["high_watermark"]) == (0, b"", 0)
    await client.aclose()


async def test_fetch_size_limits(broker, topic):
    """partition_max_bytes and max_bytes cap the answer, except that the
    first batch of the first non-empty partition comes whole (KIP-74)."""
    client = await connect(broker)
    await create(client, topic)
    batches = [build_batch([(None, bytes([i]) * 1000, 1000 + i)]) for i in range(3)]
    for b in batches:
        assert (await produce(client, topic, 0, b))["error_code"] == 0
    await produce(client, topic, 1, batches[0])
    size = len(batches[0])
    # Smaller than one batch: the first batch anyway.
    p = await fetch(client, topic, 0, 0, partition_max_bytes=10)
    assert bytes(p["records"]) == batches[0]
    # Two and a half batches: two whole ones plus a cut one the reader drops.
    p = await fetch(client, topic, 0, 0, partition_max_bytes=size * 2 + size // 2)
    data = bytes(p["records"])
    assert len(data) == size * 2 + size // 2
    assert [i.base_offset for i in scan_batches(data)] == [0, 1]
    assert [r.value for r in iter_record_set(data)] == [bytes([0]) * 1000, bytes([1]) * 1000]
    # Request max_bytes: the first partition uses it all, the second gets nothing.
    body = await client.request(FETCH, 11, fetch_body(topic, [(0, 0), (1, 0)], max_bytes=size))
    p0, p1 = body["responses"][0]["partitions"]
    assert bytes(p0["records"]) == batches[0]
    assert bytes(p1["records"]) == b"" and p1["high_watermark"] == 1
    # max_bytes below one batch: still the first batch (KIP-74), nothing more.
    body = await client.request(FETCH, 11, fetch_body(topic, [(1, 0), (0, 0)], max_bytes=5))
    p1, p0 = body["responses"][0]["partitions"]
    assert bytes(p1["records"]) == batches[0]
    assert bytes(p0["records"]) == b""
    await client.aclose()


async def test_fetch_errors(broker, topic):
    client = await connect(broker)
    await create(client, topic)
    await produce(client, topic, 0, build_batch(records(3)))
    for offset in (4, 1000, -1):
        p = await fetch(client, topic, 0, offset)
        assert p["error_code"] == 1, offset
        assert p["high_watermark"] == 3
    p = await fetch(client, topic, 0, 3)  # the log end: empty, no error
    assert (p["error_code"], bytes(p["records"])) == (0, b"")
    p = await fetch(client, topic + "-absent", 0, 0, max_wait_ms=5000, min_bytes=1)
    assert p["error_code"] == 3
    p = await fetch(client, topic, 7, 0)
    assert p["error_code"] == 3
    await client.aclose()


async def test_fetch_sessions_are_not_kept(broker, topic):
    client = await connect(broker)
    await create(client, topic)
    body = fetch_body(topic, [(0, 0)])
    body["session_epoch"] = 0  # ask for a new session
    answer = await client.request(FETCH, 7, body)
    assert (answer["error_code"], answer["session_id"]) == (0, 0)
    body["session_id"], body["session_epoch"] = 12345, 3  # an incremental fetch
    answer = await client.request(FETCH, 7, body)
    assert answer["error_code"] == 70
    await client.aclose()


# ---------------------------------------------------------------- ListOffsets


async def test_list_offsets(broker, topic):
    client = await connect(broker)
    await create(client, topic)
    empty = await list_offsets(client, topic, 0, -1, version=0, max_num_offsets=10)
    assert (empty["error_code"], empty["old_style_offsets"]) == (0, [0])
    await produce(client, topic, 0, build_batch([(b"a", b"1", 1000), (b"b", b"2", 1500)]))
    await produce(client, topic, 0, build_batch([(b"c", b"3", 2000)]))
    v0 = await list_offsets(client, topic, 0, -1, version=0, max_num_offsets=10)
    assert v0["old_style_offsets"] == [3, 0]
    assert (await list_offsets(client, topic, 0, -1, version=0, max_num_offsets=1))["old_style_offsets"] == [3]
    assert (await list_offsets(client, topic, 0, -2, version=0, max_num_offsets=10))["old_style_offsets"] == [0]
    for version in (1, 2, 3, 4, 5):
        latest = await list_offsets(client, topic, 0, -1, version=version)
        earliest = await list_offsets(client, topic, 0, -2, version=version)
        assert (latest["error_code"], latest["offset"], latest["timestamp"]) == (0, 3, -1)
        assert (earliest["error_code"], earliest["offset"], earliest["timestamp"]) == (0, 0, -1)
        if version >= 4:
            assert latest["leader_epoch"] == 0
    by_time = await list_offsets(client, topic, 0, 1800)
    assert (by_time["offset"], by_time["timestamp"]) == (2, 2000)
    # The first record with a timestamp at or after the one asked for.
    by_time = await list_offsets(client, topic, 0, 1200)
    assert (by_time["offset"], by_time["timestamp"]) == (1, 1500)
    by_time = await list_offsets(client, topic, 0, 0)
    assert (by_time["offset"], by_time["timestamp"]) == (0, 1000)
    future = await list_offsets(client, topic, 0, 10**13)
    assert (future["error_code"], future["offset"], future["timestamp"]) == (0, -1, -1)
    unknown = await list_offsets(client, topic + "-absent", 0, -1)
    assert unknown["error_code"] == 3
    unknown0 = await list_offsets(client, topic, 9, -1, version=0)
    assert unknown0["error_code"] == 3
    await client.aclose()


# ---------------------------------------------------------------- validation


async def test_corrupt_batch_rejected_and_earlier_data_intact(broker, topic):
    client = await connect(broker)
    await create(client, topic)
    good = build_batch(records(3))
    assert (await produce(client, topic, 0, good))["error_code"] == 0
    bad = bytearray(build_batch(records(2, prefix="bad")))
    bad[-3] ^= 0x01  # flip a bit in the last record's value
    assert (await produce(client, topic, 0, bytes(bad)))["error_code"] == 2
    # A good batch followed by a corrupt one: nothing of the set is written.
    assert (await produce(client, topic, 0, good + bytes(bad)))["error_code"] == 2
    # A partial batch at the end.
    assert (await produce(client, topic, 0, good + good[:30]))["error_code"] == 2
    # Not a v2 batch at all.
    wrong_magic = bytearray(good)
    wrong_magic[16] = 1
    assert (await produce(client, topic, 0, bytes(wrong_magic)))["error_code"] in (2, 87)
    assert (await produce(client, topic, 0, b""))["error_code"] == 87
    p = await fetch(client, topic, 0, 0)
    assert p["high_watermark"] == 3
    assert bytes(p["records"]) == good
    # Several good batches in one set are accepted, offsets assigned in turn.
    r = await produce(client, topic, 0, good + good)
    assert (r["error_code"], r["base_offset"]) == (0, 3)
    assert (await list_offsets(client, topic, 0, -1))["offset"] == 9
    await client.aclose()


@pytest.fixture(scope="module")
def strict_broker():
    """A broker with small limits and no topic auto-creation."""
    with BrokerProcess(
        properties={
            "message.max.bytes": 2000,
            "socket.request.max.bytes": 100_000,
            "auto.create.topics.enable": False,
            "num.partitions": 1,
        }
    ) as proc:
        yield proc


async def test_no_auto_create(strict_broker):
    client = await connect(strict_broker)
    body = await metadata(client, ["strict"], version=8)
    assert body["topics"][0]["error_code"] == 3
    r = await produce(client, "strict", 0, build_batch(records(1)))
    assert r["error_code"] == 3
    await client.aclose()


async def test_message_too_large(tmp_path):
    log_dir = tmp_path / "logs"
    with BrokerProcess(log_dir=log_dir, properties={"message.max.bytes": 2000}) as b:
        client = await connect(b)
        await create(client, "big")
        small = build_batch([(None, b"x" * 100, 1)])
        big = build_batch([(None, b"y" * 3000, 2)])
        assert len(big) > 2000
        assert (await produce(client, "big", 0, small))["error_code"] == 0
        assert (await produce(client, "big", 0, big))["error_code"] == 10
        p = await fetch(client, "big", 0, 0)
        assert (p["high_watermark"], bytes(p["records"])) == (1, small)
        await client.aclose()


# ---------------------------------------------------------------- robustness


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


GARBAGE = {
    "negative-size": b"\xff\xff\xff\xfe" + b"junk",
    "huge-size": struct.pack(">i", 200_000) + b"\x00" * 64,
    "truncated-header": _frame(b"\x00\x03\x00"),
    "short-client-id": _frame(struct.pack(">hhih", 3, 1, 7, 40) + b"abc"),
    "unknown-api-key": _frame(struct.pack(">hhih", 999, 0, 7, -1)),
    "unsupported-fetch-version": _frame(struct.pack(">hhih", 1, 0, 7, -1) + b"\x00" * 40),
    "undecodable-metadata": _frame(struct.pack(">hhih", 3, 1, 7, -1) + struct.pack(">i", 1_000_000)),
    "trailing-bytes": _frame(struct.pack(">hhih", 3, 1, 7, -1) + struct.pack(">i", 0) + b"extra"),
    "random": _frame(bytes(range(7, 107))),
    "empty-frame": _frame(b""),
}


async def test_librdkafka_all_topics_metadata_v12_with_its_array_placeholder_is_answered(strict_broker):
    """librdkafka (2.x) asks for every topic with Metadata v9+ by leaving
    its 4-byte array count placeholder in the body: a compact null array
    and three bytes more, which Kafka's broker reads past. The frame as
    confluent-kafka 2.16 sends it (correlation id 3, client id rdkafka)."""
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    client = await connect(strict_broker)
    await client.send_raw(_frame(frame))
    answer = await client.receive_raw_frame()
    assert struct.unpack_from(">i", answer, 4)[0] == 3  # the correlation id: answered, not closed
    body = await client.request(API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
    assert body["error_code"] == 0
    await client.aclose()


@pytest.mark.parametrize("name", sorted(GARBAGE))
async def test_garbage_does_not_kill_the_broker(strict_broker, name):
    victim = await connect(strict_broker)
    await victim.send_raw(GARBAGE[name])
    assert await victim.closed_by_broker()
    await victim.aclose()

    after = await connect(strict_broker)
    body = await after.request(API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
    assert body["error_code"] == 0
    await after.aclose()


@pytest.mark.parametrize("name", sorted(GARBAGE))
async def test_data_survives_garbage(broker, topic, name):
    client = await connect(broker)
    await create(client, topic)
    batch = build_batch(records(5))
    assert (await produce(client, topic, 0, batch))["error_code"] == 0
    victim = await connect(broker)
    payload = GARBAGE[name]
    if name == "huge-size":  # the session broker allows 100 MB frames
        payload = b"\x7f\xff\xff\xff" + b"\x00" * 64
    await victim.send_raw(payload)
    assert await victim.closed_by_broker()
    await victim.aclose()
    # The first connection still works and the data reads back intact.
    assert bytes((await fetch(client, topic, 0, 0))["records"]) == batch
    fresh = await connect(broker)
    assert bytes((await fetch(fresh, topic, 0, 0))["records"]) == batch
    await fresh.aclose()
    await client.aclose()


async def test_pipelined_requests_are_answered_in_order(broker, topic):
    client = await connect(broker)
    await create(client, topic)
    batches = [build_batch(records(1, prefix=f"p{i}")) for i in range(20)]
    wire = b""
    for b in batches:
        _, data = client.conn.send(
            PRODUCE,
            8,
            {
                "transactional_id": None,
                "acks": 1,
                "timeout_ms": 1000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": b}]}],
            },
        )
        wire += data
        _, data = client.conn.send(METADATA, 1, {"topics": []})
        wire += data
    await client.send_raw(wire)  # everything in one write
    offsets = []
    for _ in batches:
        r = await client.receive()
        offsets.append(r.body["responses"][0]["partition_responses"][0]["base_offset"])
        m = await client.receive()
        assert m.api is METADATA
    assert offsets == list(range(20))
    await client.aclose()


# ---------------------------------------------------------------- restart


async def test_restart_keeps_data_and_cluster_id(tmp_path):
    proc = BrokerProcess(log_dir=tmp_path / "logs")
    try:
        proc.start()
        client = await connect(proc)
        first = await metadata(client, ["durable"])
        batch = build_batch(records(4))
        assert (await produce(client, "durable", 0, batch))["error_code"] == 0
        await client.aclose()
        assert proc.stop() == 0
        assert (tmp_path / "logs" / "meta.properties").exists()
        assert (tmp_path / "logs" / "durable-0" / f"{0:020d}.log").exists()

        proc.start()
        client = await connect(proc)
        second = await metadata(client, ["durable"])
        assert second["cluster_id"] == first["cluster_id"]
        assert bytes((await fetch(client, "durable", 0, 0))["records"]) == batch
        r = await produce(client, "durable", 0, batch)
        assert r["base_offset"] == 4
        await client.aclose()
    finally:
        proc.cleanup()


# ---------------------------------------------------------------- CLI


async def test_cli_properties_file_and_sigint(tmp_path):
    """``kclient broker server.properties --override ...``: the file is read,
    overrides win, and SIGINT stops the broker cleanly (status 0)."""
    import os
    import signal
    import subprocess

    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka-style server.properties\n"
        "broker.id=7\n"
        "num.partitions=3\n"
        "port=9\n"  # overridden to 0 by BrokerProcess
        f"log.dirs={tmp_path / 'ignored'}\n"
    )
    proc = BrokerProcess(log_dir=tmp_path / "logs", config_file=props)
    try:
        proc.start()
        client = await connect(proc)
        body = await metadata(client, ["from-file"])
        assert body["brokers"][0]["node_id"] == 7 == body["controller_id"]
        assert len(body["topics"][0]["partitions"]) == 3
        await client.aclose()
        os.kill(proc.pid, signal.SIGINT)
        await wait_for_async(lambda: not proc.running, "the broker to exit on SIGINT", timeout=TIMEOUT, interval=0.05)
        assert proc.stop() == 0
        assert "received SIGINT" in proc.output()
        assert (tmp_path / "logs" / "from-file-2").is_dir()
        assert not (tmp_path / "ignored").exists()
    finally:
        proc.cleanup()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    out = subprocess.run([sys.executable, "-m", "kclient", "broker", "--override", "nonsense"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2
    assert "key=value" in out.stderr


async def test_malformed_api_versions_gets_invalid_request(broker):
    client = await connect(broker)
    _, data = client.conn.send(API_VERSIONS, 3, {"client_software_name": "abc", "client_software_version": "1"})
    # Cut the body short: the length says 4 bytes of name, 2 follow.
    broken = bytearray(data[: len(data) - 6])
    struct.pack_into(">i", broken, 0, len(broken) - 4)
    await client.send_raw(bytes(broken))
    response = await client.receive()
    assert response.body["error_code"] == 42
    # The connection stays open.
    body = await client.request(API_VERSIONS, 2, {})
    assert body["error_code"] == 0
    await client.aclose()


# ---------------------------------------------------------------- FindCoordinator / OffsetFetch


@pytest.mark.parametrize(("version", "key_type"), [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1)])
async def test_find_coordinator_names_this_broker(broker, version, key_type):
    client = await connect(broker)
    body = await client.request(FIND_COORDINATOR, version, {"key": "some-group", "key_type": key_type})
    assert body["error_code"] == 0
    assert (body["node_id"], body["host"], body["port"]) == (0, broker.host, broker.port)
    if version >= 1:
        assert body["throttle_time_ms"] == 0 and body["error_message"] is None
    await client.aclose()


async def test_find_coordinator_unknown_key_type(broker):
    client = await connect(broker)
    body = await client.request(FIND_COORDINATOR, 2, {"key": "g", "key_type": 7})
    assert body["error_code"] == 42  # INVALID_REQUEST
    assert body["node_id"] == -1 and body["error_message"]
    # The connection stays usable.
    body = await client.request(FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})
    assert body["error_code"] == 0
    await client.aclose()


#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
_COORDINATOR_NOT_READY = {14, 15, 16}


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
async def test_offset_fetch_reports_nothing_committed(broker, topic, version):
    client = await connect(broker)
    await create(client, topic)
    # The first FindCoordinator creates the offsets topic, which the
    # coordinator then loads: until then OffsetFetch answers a retriable
    # coordinator error, as in Kafka.
    await client.request(FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})
    body = await retry_async(
        lambda: client.request(OFFSET_FETCH, version, {"group_id": "g", "topics": [{"name": topic, "partition_indexes": [0, 1]}]}),
        lambda body: not {p["error_code"] for t in body["topics"] for p in t["partitions"]} & _COORDINATOR_NOT_READY,
        "OffsetFetch answered by a ready coordinator",
    )
    (t,) = body["topics"]
    assert t["name"] == topic
    assert [(p["partition_index"], p["committed_offset"], p["error_code"]) for p in t["partitions"]] == [(0, -1, 0), (1, -1, 0)]
    if version >= 2:
        assert body["error_code"] == 0
        # A null topic array asks for every committed offset: there are none.
        _, data = client.conn.send(OFFSET_FETCH, version, {"group_id": "g", "topics": []})
        assert data.endswith(b"\x00\x00\x00\x00")
        await client.send_raw(data[:-4] + b"\xff\xff\xff\xff")
        assert (await client.receive()).body["topics"] == []
    await client.aclose()


async def test_offset_commit_and_fetch_v0_need_zookeeper(broker, topic):
    """v0 of OffsetCommit and OffsetFetch keep offsets in ZooKeeper (Kafka
    0.8.1): a broker without ZooKeeper answers UNSUPPORTED_VERSION, as
    Kafka's KRaft mode does."""
    client = await connect(broker)
    await create(client, topic)
    body = await client.request(OFFSET_FETCH, 0, {"group_id": "g", "topics": [{"name": topic, "partition_indexes": [0]}]})
    assert [(p["committed_offset"], p["error_code"]) for p in body["topics"][0]["partitions"]] == [(-1, 35)]
    partitions = [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]
    body = await client.request(OFFSET_COMMIT, 0, {"group_id": "g", "topics": [{"name": topic, "partitions": partitions}]})
    assert body["topics"][0]["partitions"][0]["error_code"] == 35
    await client.aclose()


# ---------------------------------------------------------------- zero-copy responses


def _spliced_fixture(tmp_path, n_batches: int = 6, *, segment_bytes: int = 600, pad: int = 0):
    from kclient.storage import Log, LogConfig

    plog = Log(tmp_path / "t-0", LogConfig(segment_bytes=segment_bytes))
    batches = [build_batch(records(3, prefix=f"b{i}-" + "x" * pad)) for i in range(n_batches)]
    for b in batches:
        plog.append(b)
    if n_batches >= 6 and segment_bytes == 600:
        assert len(plog.segments) > 1  # the reads span segment files
    return plog, batches


def _fetch_response_body(plog, reads) -> FetchResponse:
    parts = []
    for index, (offset, max_bytes) in enumerate(reads):
        piece = plog.read_slice(offset, max_bytes)
        parts.append(
            PartitionData(
                partition_index=index,
                high_watermark=piece.high_watermark,
                last_stable_offset=piece.high_watermark,
                log_start_offset=piece.log_start_offset,
                records=piece,
            )
        )
    return FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=parts)])


@pytest.mark.unit
@pytest.mark.parametrize("version", [4, 7, 11])
def test_spliced_fetch_response_equals_the_copied_one(tmp_path, version):
    """Header bytes + file slices add up to exactly the frame the schema
    would encode with the bytes copied in: every records length prefix
    equals its slice length; empty reads stay plain bytes."""
    from kclient.broker.zerocopy import SplicedResponse, encode_spliced_response
    from kclient.protocol.connection import encode_response

    plog, batches = _spliced_fixture(tmp_path)
    end = plog.log_end_offset
    reads = [(0, 10_000), (4, 100), (end, 1000), (9, 1 << 20)]  # whole segment, cut batch, empty, later segment
    body = _fetch_response_body(plog, reads)
    copied = attrs.evolve(
        body, responses=[FetchableTopicResponse(topic="t", partitions=[attrs.evolve(p, records=p.records.read()) for p in body.responses[0].partitions])]
    )
    expected = encode_response(FETCH, version, 42, copied)
    response = encode_spliced_response(FETCH, version, 42, body, min_sendfile_bytes=1)
    assert isinstance(response, SplicedResponse)
    with response:
        assert len(response.slices) == 3
        assert response.size == len(expected)
        assert response.to_bytes() == expected
    assert all(p.records.released for p in body.responses[0].partitions)
    decoded = FETCH.response(version).decode_message(expected[8:])
    got = b"".join(bytes(p.records) for p in decoded.responses[0].partitions[:1])
    assert got.startswith(batches[0])
    plog.close()


@pytest.mark.unit
def test_spliced_response_without_data_is_plain_bytes(tmp_path):
    from kclient.broker.zerocopy import encode_spliced_response

    plog, _ = _spliced_fixture(tmp_path, 3)
    body = _fetch_response_body(plog, [(plog.log_end_offset, 1000)])
    data = encode_spliced_response(FETCH, 11, 1, body)
    assert isinstance(data, bytes)
    assert body.responses[0].partitions[0].records.released
    plog.close()


@pytest.mark.unit
def test_small_slices_are_inlined_large_ones_sent_from_the_file(tmp_path):
    """Below SENDFILE_MIN_BYTES a slice is read into the bytes (one send);
    from it on, the slice stays in its file. The frame is the same."""
    from kclient.broker.zerocopy import SENDFILE_MIN_BYTES, SplicedResponse, encode_spliced_response

    plog, _ = _spliced_fixture(tmp_path, 40, segment_bytes=1 << 30, pad=300)
    small, large = 2000, 20_000
    assert small < SENDFILE_MIN_BYTES <= large
    body = _fetch_response_body(plog, [(0, small), (10, large), (20, small)])
    pieces = [p.records for p in body.responses[0].partitions]
    copied = encode_spliced_response(FETCH, 11, 5, _fetch_response_body(plog, [(0, small), (10, large), (20, small)]), min_sendfile_bytes=1 << 30)
    assert isinstance(copied, bytearray)  # one buffer, the slices read into it
    response = encode_spliced_response(FETCH, 11, 5, body)
    assert isinstance(response, SplicedResponse)
    with response:
        assert response.slices == [pieces[1]]
        assert pieces[0].released and pieces[2].released
        assert [type(p) for p in response.parts] == [bytearray, type(pieces[1]), bytearray]
        assert response.to_bytes() == copied
    assert pieces[1].released
    plog.close()


@pytest.mark.unit
def test_a_short_slice_whose_file_ends_early_fails_the_frame_and_releases_every_slice(tmp_path, monkeypatch):
    """A short slice is read into the frame's buffer; if its file holds
    fewer bytes than the slice promised, the frame cannot be built:
    SpliceError names the file, and no slice stays held."""
    from kclient.broker.zerocopy import SpliceError, encode_spliced_response
    from kclient.storage import fileslice

    plog, _ = _spliced_fixture(tmp_path, 40, segment_bytes=1 << 30, pad=300)
    body = _fetch_response_body(plog, [(0, 2000), (10, 20_000), (20, 2000)])
    pieces = [p.records for p in body.responses[0].partitions]
    real = fileslice.FileSlice.readinto
    monkeypatch.setattr(fileslice.FileSlice, "readinto", lambda self, buffer, offset=0: real(self, buffer, offset) - (self is pieces[2]))
    with pytest.raises(SpliceError, match="ended 1 bytes before the end of its slice"):
        encode_spliced_response(FETCH, 11, 5, body)
    assert all(p.released for p in pieces)
    plog.close()


@pytest.mark.unit
@pytest.mark.parametrize("preadv", [True, False])
def test_file_slice_readinto_reads_the_slice_bytes(tmp_path, monkeypatch, preadv):
    """readinto gives the same bytes as read, from any offset and into a
    shorter buffer, with preadv or (where the platform lacks it) pread."""
    from kclient.storage import fileslice

    if not preadv:
        monkeypatch.setattr(fileslice, "_preadv", None)
    plog, _ = _spliced_fixture(tmp_path, 10, segment_bytes=1 << 30, pad=100)
    piece = plog.read_slice(2, 1 << 20)
    whole = piece.read()
    assert len(whole) == piece.length > 100
    for offset, room in ((0, piece.length), (7, 50), (piece.length - 3, 10), (piece.length, 5)):
        buf = bytearray(b"\xee" * room)
        got = piece.readinto(memoryview(buf), offset)
        assert got == max(0, min(room, piece.length - offset))
        assert bytes(buf[:got]) == whole[offset : offset + got]
        assert buf[got:] == b"\xee" * (room - got)
    piece.release()
    with pytest.raises(ValueError, match="released"):
        piece.readinto(bytearray(10))
    plog.close()


@pytest.mark.unit
async def test_spliced_response_sent_through_a_tiny_socket_buffer(tmp_path):
    """The sendfile loop resumes after partial sends and full buffers
    (BlockingIOError) and sends every byte exactly once, in order."""
    import socket as socket_module

    from kclient.broker.zerocopy import encode_spliced_response

    plog, _ = _spliced_fixture(tmp_path, 100, segment_bytes=1 << 30, pad=2000)
    body = _fetch_response_body(plog, [(0, 1 << 20), (150, 1 << 20)])
    response = encode_spliced_response(FETCH, 11, 7, body)
    expected = response.to_bytes()
    a, b = trio.socket.socketpair()
    a.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_SNDBUF, 1024)
    sender = trio.SocketStream(a)
    received = bytearray()

    async def slow_reader():
        while len(received) < len(expected):
            chunk = await b.recv(97)
            assert chunk
            received.extend(chunk)
            await trio.sleep(0)  # kept: a checkpoint (no time passes), so the sender fills the small buffer between reads

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_reader)
            with response:
                await response.send(sender)
    assert bytes(received) == expected
    await sender.aclose()
    b.close()
    plog.close()


@pytest.mark.unit
def test_response_slices_are_found_at_any_depth_in_encoding_order():
    """iter_slices (what releases a Fetch response's file slices and checks
    the encoder took them all) finds every FileSlice in nested dicts and
    lists, subclasses included, in order, and nothing else."""
    from collections import OrderedDict

    from kclient.broker.zerocopy import iter_slices, release_slices
    from kclient.storage import FileSlice

    s = [FileSlice.empty(i, 0, i) for i in range(5)]

    class Parts(list):
        pass

    body = {
        "throttle_time_ms": 0,
        "responses": [
            {"topic": "a", "partitions": Parts([{"partition_index": 0, "records": s[0], "aborted": []}, {"records": b"x", "flag": True}])},
            OrderedDict(topic="b", partitions=[{"records": s[1]}, {"records": None}, {"nested": [[s[2]], {"deep": s[3]}]}]),
        ],
        "tail": s[4],
    }
    assert list(iter_slices(body)) == s
    assert list(iter_slices(s[0])) == [s[0]] and list(iter_slices(7)) == []
    release_slices(body)
    assert all(piece.released for piece in s)


def test_response_slices_are_found_in_messages_in_encoding_order():
    """A Fetch response message (the broker's) gives its partitions'
    slices in order; any other message is searched attribute by
    attribute, lists and nested messages included."""
    from kclient.broker.zerocopy import iter_slices, release_slices
    from kclient.storage import FileSlice

    s = [FileSlice.empty(i, 0, i) for i in range(4)]
    body = FetchResponse(
        responses=[
            FetchableTopicResponse(topic="a", partitions=[PartitionData(records=s[0]), PartitionData(records=b"x"), PartitionData(records=s[1])]),
            FetchableTopicResponse(topic="b", partitions=[PartitionData(records=None), PartitionData(records=s[2])]),
        ]
    )
    assert list(iter_slices(body)) == s[:3]
    assert list(iter_slices([body.responses[1], {"tail": s[3]}])) == [s[2], s[3]]
    release_slices(body)
    assert all(piece.released for piece in s[:3])
