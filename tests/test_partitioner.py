"""DefaultPartitioner and murmur2 agree with Kafka's Java client and kafka-python."""

from __future__ import annotations

import random

import pytest
from helpers.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner as KafkaPythonPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kclient.client.producer.partitioner import DefaultPartitioner, Partitioner, murmur2, to_positive

pytestmark = pytest.mark.unit

# org.apache.kafka.common.utils.UtilsTest.testMurmur2 (Java ints, signed).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), sorted(JAVA_MURMUR2.items()))
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_accepts_any_bytes_like() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"xfoobar")[1:]) == -790332482


@settings(max_examples=examples(500))
@given(st.binary(max_size=300))
def test_murmur2_matches_kafka_python(data: bytes) -> None:
    ours = murmur2(data)
    assert -(2**31) <= ours < 2**31
    assert ours & 0xFFFFFFFF == kafka_python_murmur2(data)


class _OneTopicCluster:
    """The slice of kafka-python's ClusterMetadata its partitioner reads."""

    def __init__(self, n: int) -> None:
        self.n = n

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.n))

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.n))


@settings(max_examples=examples(300))
@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_partition_choice_matches_kafka_python(key: bytes, n: int) -> None:
    theirs = KafkaPythonPartitioner().partition("t", key, key, b"v", b"v", _OneTopicCluster(n))
    assert DefaultPartitioner().partition(key, n) == theirs


def test_known_keys_land_where_java_puts_them() -> None:
    p = DefaultPartitioner()
    for key, h in JAVA_MURMUR2.items():
        for n in (1, 3, 8, 100):
            assert p.partition(key, n) == to_positive(h) % n
    # toPositive(-973932308) = 1173551340; % 8 == 4
    assert p.partition(b"21", 8) == 4


def test_keyed_partition_is_stable_for_every_bytes_type() -> None:
    p = DefaultPartitioner()
    expected = p.partition(b"carrier-UA", 8)
    assert all(p.partition(b"carrier-UA", 8) == expected for _ in range(20))
    assert p.partition(bytearray(b"carrier-UA"), 8) == expected
    assert p.partition(memoryview(b"carrier-UA"), 8) == expected
    assert p.partition(b"k" * 1000, 7) == to_positive(murmur2(b"k" * 1000)) % 7


def test_null_key_spreads_over_partitions() -> None:
    p = DefaultPartitioner(rng=random.Random(7))
    counts = [0] * 8
    for _ in range(4000):
        counts[p.partition(None, 8)] += 1
    assert all(c > 350 for c in counts), counts


def test_bad_arguments() -> None:
    p = DefaultPartitioner()
    with pytest.raises(ValueError):
        p.partition(b"k", 0)
    with pytest.raises(TypeError, match="serialized key"):
        p.partition("text", 4)  # type: ignore[arg-type]


def test_duck_typed_partitioner_counts_as_partitioner() -> None:
    class Fixed:
        def partition(self, key: bytes | None, num_partitions: int) -> int:
            return 0

    assert isinstance(Fixed(), Partitioner)
    assert not isinstance(object(), Partitioner)
    with pytest.raises(TypeError):
        Partitioner()  # type: ignore[abstract]

