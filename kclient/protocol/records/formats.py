"""Which message format (magic byte) goes where: the one owner of the
version facts that tie Kafka releases and request versions to record
formats.

The three formats are message set v0 (magic 0), message set v1 (magic 1,
timestamps and relative offsets: KIP-32, KIP-31) and record batch v2
(magic 2, KIP-98). A Kafka release writes one of them
(``log.message.format.version``), a Produce request version limits what a
client may send and a Fetch version limits what a broker may answer with
(Kafka protocol guide, "The Messages":
https://kafka.apache.org/protocol#The_Messages_Produce and
https://kafka.apache.org/protocol#The_Messages_Fetch; Kafka documentation,
"Message Format": https://kafka.apache.org/documentation/#messageformat):

| Kafka release / request | magic |
|---|---|
| Kafka 0.8.x, 0.9.x; Produce v0-1; Fetch v0-1 | 0 |
| Kafka 0.10.x; Produce v2; Fetch v2-3 | 1 |
| Kafka 0.11.0 and later; Produce v3+; Fetch v4+ | 2 |

zstd (codec 4, KIP-110) needs record batch v2 and Produce v7+ / Fetch v10+.

Pure: integers in, integers out.
"""

from __future__ import annotations

__all__ = [
    "FETCH_MAGIC1_MIN_VERSION",
    "FETCH_MAGIC2_MIN_VERSION",
    "KAFKA_MAGIC1_MIN_VERSION",
    "KAFKA_MAGIC2_MIN_VERSION",
    "PRODUCE_MAGIC1_MIN_VERSION",
    "PRODUCE_MAGIC2_MIN_VERSION",
    "ZSTD_MIN_FETCH_VERSION",
    "ZSTD_MIN_PRODUCE_VERSION",
    "fetch_magic",
    "magic_for_kafka_version",
    "produce_magic_max",
]

#: First Kafka release writing message format v1 (KIP-32): 0.10.0.
KAFKA_MAGIC1_MIN_VERSION = (0, 10, 0)
#: First Kafka release writing record batch v2 (KIP-98): 0.11.0.
KAFKA_MAGIC2_MIN_VERSION = (0, 11, 0)

#: First Produce version carrying message set v1 (v0-1 carry v0 only).
PRODUCE_MAGIC1_MIN_VERSION = 2
#: First Produce version carrying record batch v2 (and nothing older).
PRODUCE_MAGIC2_MIN_VERSION = 3
#: First Fetch version whose response may carry message set v1.
FETCH_MAGIC1_MIN_VERSION = 2
#: First Fetch version whose response may carry record batch v2.
FETCH_MAGIC2_MIN_VERSION = 4

#: First Produce version that may carry zstd batches (KIP-110).
ZSTD_MIN_PRODUCE_VERSION = 7
#: First Fetch version that may receive zstd batches (KIP-110).
ZSTD_MIN_FETCH_VERSION = 10


def magic_for_kafka_version(version: tuple[int, int, int]) -> int:
    """The message format a Kafka release writes.

    Args:
        version: The release as ``(major, minor, patch)``, e.g. ``(0, 10, 2)``
            (``kclient.config.parse_kafka_version`` turns ``"0.10.2-IV0"``
            into that).

    Returns:
        0 for 0.8.x and 0.9.x, 1 for 0.10.x (all its IV steps), 2 for 0.11.0
            and later (Kafka's ``ApiVersion`` / ``RecordVersion`` table).
    """
    if version < KAFKA_MAGIC1_MIN_VERSION:
        return 0
    if version < KAFKA_MAGIC2_MIN_VERSION:
        return 1
    return 2


def produce_magic_max(produce_version: int) -> int:
    """Newest message format a Produce request may carry.

    Args:
        produce_version: The Produce request version.

    Returns:
        0 for v0-1, 1 for v2, 2 for v3+.
    """
    if produce_version >= PRODUCE_MAGIC2_MIN_VERSION:
        return 2
    return 1 if produce_version >= PRODUCE_MAGIC1_MIN_VERSION else 0


def fetch_magic(fetch_version: int) -> int:
    """Newest message format a Fetch response may carry (a broker
    down-converts newer data, as Kafka's ``KafkaApis`` does).

    Args:
        fetch_version: The Fetch request version.

    Returns:
        0 for v0-1, 1 for v2-3, 2 for v4+.
    """
    if fetch_version >= FETCH_MAGIC2_MIN_VERSION:
        return 2
    return 1 if fetch_version >= FETCH_MAGIC1_MIN_VERSION else 0
