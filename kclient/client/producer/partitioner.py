"""Partitioners: choose the partition of a keyed message.

`DefaultPartitioner` puts a key where the Java client puts it:
``toPositive(murmur2(key)) % num_partitions`` over the *serialized* key bytes
(Java ``org.apache.kafka.common.utils.Utils.murmur2`` and ``toPositive``), so
kclient, the Java producer, kafka-python and librdkafka's ``murmur2_random``
partitioner agree. A null key goes to a random partition.

Custom partitioners subclass `Partitioner` (or just define
``partition(key, num_partitions)``) and are named by ``partitioner.class``.
"""

from __future__ import annotations

import abc
import functools
import random
import struct
from collections.abc import Callable

from kclient._accel import speedups as _speedups
from kclient.plugins import PluginInterface

__all__ = ["DefaultPartitioner", "Partitioner", "fast_murmur2", "murmur2", "to_positive"]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
_U32 = struct.Struct("<I")


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """32-bit MurmurHash2 of ``data`` exactly as Kafka's Java ``Utils.murmur2``.

    Seed ``0x9747b28c``, little-endian 4-byte blocks, Java's ``>>>`` shifts.

    Args:
        data: The bytes to hash (bytes, bytearray or memoryview).

    Returns:
        The Java ``int``: a signed value in ``[-2**31, 2**31)``
        (kafka-python's ``murmur2`` returns the same bits as an unsigned
        value).
    """
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    length = len(view)
    h = (_SEED ^ length) & _MASK
    tail = length & ~3
    for (k,) in _U32.iter_unpack(view[:tail]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    rest = length & 3
    if rest:
        if rest == 3:
            h ^= view[tail + 2] << 16
        if rest >= 2:
            h ^= view[tail + 1] << 8
        h ^= view[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java ``Utils.toPositive``: clear the sign bit.

    Args:
        number: A Java ``int`` (e.g. a `murmur2` hash).

    Returns:
        ``number & 0x7fffffff``.
    """
    return number & 0x7FFFFFFF


# Keys repeat (a carrier code, a user id): the pure-Python path remembers
# recent short ones; the compiled murmur2 is cheaper than the cache lookup.
_cached_murmur2 = functools.lru_cache(maxsize=4096)(murmur2)
_c_murmur2: Callable[[bytes], int] | None = _speedups.murmur2 if _speedups is not None else None
#: `murmur2` of a ``bytes`` key, compiled when available (same value).
fast_murmur2: Callable[[bytes], int] = _c_murmur2 if _c_murmur2 is not None else murmur2


class Partitioner(PluginInterface):
    """Chooses a partition for a message from its serialized key.

    Subclasses implement `partition`. Any class defining a
    ``partition`` method counts as a Partitioner for ``isinstance`` checks,
    so plug-ins need not inherit from this class.
    """

    plugin_method = "partition"

    @abc.abstractmethod
    def partition(self, key: bytes | None, num_partitions: int) -> int:
        """Choose the partition for a message.

        Args:
            key: the key as serialized by ``key.serializer.class``, or
                ``None`` for a message without a key.
            num_partitions: how many partitions the topic has (>= 1).

        Returns:
            A partition in ``range(num_partitions)``.
        """


class DefaultPartitioner(Partitioner):
    """Kafka's default: murmur2 of the key bytes, random for a null key.

    ``partition(key, n) == to_positive(murmur2(key)) % n`` for a key (bytes,
    bytearray or memoryview); a uniform ``int(rng.random() * n)`` for ``None``. ``rng`` is a
    ``random.Random`` (pass a seeded one for repeatable tests).
    Raises ``ValueError`` if ``num_partitions < 1`` and ``TypeError`` for a
    key that is not bytes-like (serialize it with an Encoder first).
    """

    def __init__(self, *, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random()
        #: ``random()``: the uniform [0, 1) source behind null keys' random
        #: partitions (the compiled collate step draws from it too).
        self.random = self._rng.random

    def partition(self, key: bytes | bytearray | memoryview | None, num_partitions: int) -> int:
        """Choose the partition for a message.

        Args:
            key: The serialized key (bytes-like), or ``None`` for a random
                partition.
            num_partitions: How many partitions the topic has.

        Returns:
            ``to_positive(murmur2(key)) % num_partitions``, or a uniform
            random partition for ``None``.

        Raises:
            ValueError: ``num_partitions < 1``.
            TypeError: ``key`` is not bytes-like.
        """
        if num_partitions < 1:
            raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
        if key is None:
            return int(self.random() * num_partitions)  # uniform, cheaper than randrange
        if type(key) is bytes and _c_murmur2 is not None:
            h = _c_murmur2(key)
        elif type(key) is bytes and len(key) <= 256:
            h = _cached_murmur2(key)
        elif isinstance(key, (bytes, bytearray, memoryview)):
            h = murmur2(key)
        else:
            raise TypeError(
                f"DefaultPartitioner needs the serialized key (bytes), got {type(key).__name__}; "
                "set key.serializer.class to an Encoder that produces bytes"
            )
        return (h & 0x7FFFFFFF) % num_partitions
