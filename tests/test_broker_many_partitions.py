"""A Produce and a Fetch of thousands of partitions against the bundled
broker (issue 28 reworked their per-partition paths): each partition gets
exactly its own answer, whatever its neighbours' fate.

One Produce v8 request names 2,048 partitions of a topic (one v2 batch
each: most good, some above ``message.max.bytes``, some with a broken
CRC), partitions the topic does not have, and a topic that does not
exist. Every partition answers its own error code; the good ones get
offset 0 and their records read back intact with one Fetch of every
partition (short answers read into the response, one long answer sent
from its file), and the refused ones hold nothing. Against a real broker
process; nothing is timed.
"""

from __future__ import annotations

import pytest
from helpers.raw import SocketClient, fetch_body

from kclient.client.admin import AdminClient, NewTopic
from kclient.errors import CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, NONE, UNKNOWN_TOPIC_OR_PARTITION
from kclient.protocol.messages import FETCH, PRODUCE
from kclient.protocol.records import build_batch, iter_record_set
from kclient.testing import BrokerProcess

pytestmark = pytest.mark.timeout(300)

TIMEOUT = 60.0  # seconds any single exchange may take before the test fails
PARTITIONS = 2048
MAX_MESSAGE = 20_000  # message.max.bytes of the broker here
TOPIC = "many"
LONG = 0  # the partition whose answer is long enough for sendfile (> 16 KiB)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker with a topic of `PARTITIONS` partitions, no auto-creation."""
    with BrokerProcess(
        log_dir=tmp_path_factory.mktemp("many") / "logs",
        properties={"num.partitions": 1, "message.max.bytes": MAX_MESSAGE, "auto.create.topics.enable": False},
    ) as proc:
        with AdminClient({"bootstrap.servers": proc.bootstrap, "request.timeout.ms": 120_000}) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], timeout_ms=120_000)
        yield proc


def _fate(p: int) -> int:
    """The error code partition ``p`` of the request is meant to get."""
    if p % 7 == 3:
        return MESSAGE_TOO_LARGE
    if p % 11 == 5:
        return CORRUPT_MESSAGE
    return NONE


def _batch(p: int) -> bytes:
    fate = _fate(p)
    if fate == MESSAGE_TOO_LARGE:
        return build_batch([(None, b"x" * (MAX_MESSAGE + 100), 1_700_000_000_000)])
    batch = bytearray(build_batch([(f"k{p}".encode(), f"value of {p}".encode(), 1_700_000_000_000 + p)]))
    if fate == CORRUPT_MESSAGE:
        batch[-1] ^= 0xFF  # a record byte: the CRC-32C no longer matches
    return bytes(batch)


def test_every_partition_of_a_2048_partition_produce_gets_its_own_answer(broker):
    unknown = list(range(PARTITIONS, PARTITIONS + 4))
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30_000,
        "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": p, "records": _batch(p)} for p in [*range(PARTITIONS), *unknown]]},
            {"name": "no-such-topic", "partition_data": [{"index": p, "records": _batch(0)} for p in range(3)]},
        ],
    }
    with SocketClient(broker.host, broker.port, client_id="many", timeout=TIMEOUT) as c:
        response = c.request(PRODUCE, 8, body)
        answers = {(t["name"], p["index"]): p for t in response["responses"] for p in t["partition_responses"]}
        assert len(answers) == PARTITIONS + len(unknown) + 3
        for p in range(PARTITIONS):
            got = answers[(TOPIC, p)]
            assert got["error_code"] == _fate(p), (p, got)
            assert got["base_offset"] == (0 if _fate(p) == NONE else -1), (p, got)
        for p in unknown:
            assert answers[(TOPIC, p)]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
        for p in range(3):
            assert answers[("no-such-topic", p)]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION

        # A long answer among the short ones: more batches on one partition.
        long_values = [bytes([65 + i]) * 9_000 for i in range(3)]
        for value in long_values:
            data = [{"index": LONG, "records": build_batch([(None, value, 1_700_000_000_000)])}]
            extra = {"transactional_id": None, "acks": 1, "timeout_ms": 30_000, "topic_data": [{"name": TOPIC, "partition_data": data}]}
            assert c.request(PRODUCE, 8, extra)["responses"][0]["partition_responses"][0]["error_code"] == NONE

        for version in (4, 11):
            fetched = c.request(FETCH, version, fetch_body(TOPIC, [(p, 0) for p in range(PARTITIONS)], partition_max_bytes=1_048_576))
            parts = fetched["responses"][0]["partitions"]
            assert [part["partition_index"] for part in parts] == list(range(PARTITIONS))
            for p, part in enumerate(parts):
                assert part["error_code"] == NONE, (p, part)
                records = list(iter_record_set(part["records"] or b""))
                if _fate(p) != NONE:
                    assert (records, part["high_watermark"]) == ([], 0), p
                    continue
                expected = [f"value of {p}".encode()] + (long_values if p == LONG else [])
                assert [r.value for r in records] == expected, p
                assert [r.offset for r in records] == list(range(len(expected)))
                assert records[0].key == f"k{p}".encode() and records[0].timestamp == 1_700_000_000_000 + p
                assert part["high_watermark"] == len(expected)
