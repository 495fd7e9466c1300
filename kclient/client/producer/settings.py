"""What the producer's send path reads from its configuration, and which
message format a Produce version carries.

`settings_from_config` reads a `kclient.config.ProducerConfig` once into
a frozen `ProducerSettings`; `produce_version_cap` turns ``api.version``
into the highest Produce version to send. Which message format a Produce
version carries (v3+ record batch v2, zstd from v7; v2 message set v1;
v0-1 message set v0) is owned by `kclient.protocol.records.formats`; the
names below are aliases of it kept for importers of this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from kclient.protocol.records import codecs as _codecs
from kclient.protocol.records.formats import (
    PRODUCE_MAGIC1_MIN_VERSION,
    PRODUCE_MAGIC2_MIN_VERSION,
    ZSTD_MIN_PRODUCE_VERSION,
    produce_magic_max,
)

if TYPE_CHECKING:  # pragma: no cover
    from kclient.config import ProducerConfig

#: Alias of `formats.PRODUCE_MAGIC2_MIN_VERSION` (Produce v3, record batch v2).
MIN_PRODUCE_VERSION = PRODUCE_MAGIC2_MIN_VERSION
#: Alias of `formats.PRODUCE_MAGIC1_MIN_VERSION` (Produce v2, message set v1).
MIN_MAGIC1_PRODUCE_VERSION = PRODUCE_MAGIC1_MIN_VERSION
#: Alias of `formats.ZSTD_MIN_PRODUCE_VERSION` (Produce v7, KIP-110).
MIN_ZSTD_PRODUCE_VERSION = ZSTD_MIN_PRODUCE_VERSION
#: Alias of `formats.produce_magic_max`: the message format a Produce
#: request of a version carries (2 for v3+, 1 for v2, 0 for v0-1).
magic_for_produce_version = produce_magic_max


def produce_version_cap(api_version: tuple[int, ...] | None) -> int | None:
    """Highest Produce version a client of a Kafka release sends, as
    kafka-python picks it.

    Args:
        api_version: The release as ``(major, minor, patch)`` (kclient's
            ``api.version``), or ``None`` for auto.

    Returns:
        0.8.x -> 0, 0.9 -> 1, 0.10.x -> 2, 0.11 -> 3, 1.0 -> 4, 1.1 -> 5,
        2.0 -> 6, 2.1-2.3 -> 7, 2.4+ -> 8; ``None`` for auto (no cap beyond
        what the broker advertises).
    """
    if api_version is None:
        return None
    for release, version in (((2, 4), 8), ((2, 1), 7), ((2, 0), 6), ((1, 1), 5), ((1, 0), 4), ((0, 11), 3), ((0, 10), 2), ((0, 9), 1)):
        if tuple(api_version[:2]) >= release:
            return version
    return 0


@attrs.frozen
class ProducerSettings:
    """The producer settings the send path reads, taken from a
    ProducerConfig once (see `settings_from_config`).

    ``acks``: request.required.acks (0, 1, -1); ``timeout_ms``:
    request.timeout.ms, the time the broker may wait for acks (ms);
    ``retries``: message.send.max.retries; ``backoff_ms``: retry.backoff.ms; ``backoff_max_ms``: retry.backoff.max.ms
    (ms); ``codec``: Kafka codec id (0 none, 1 gzip, 2 snappy, 3 lz4,
    4 zstd); ``compressed_topics``: frozenset of topics to compress (empty =
    all when a codec is set); ``max_request_bytes``: the most bytes a Produce
    request (and so a record batch) may carry; ``max_produce_version``: the
    cap from ``api.version`` (`produce_version_cap`), None for none;
    ``idempotence``: enable.idempotence (KIP-98: producer id and sequence
    numbers, see `kclient.client.producer.idempotence`); ``busy_poll_us``:
    socket.busy.poll.us, how long a send that waits for its
    acknowledgement polls the socket before sleeping (µs);
    ``transactional_id``: transactional.id (Produce requests carry it and
    batches their transactional bit), or None; ``max_in_flight``:
    max.in.flight.requests.per.connection (with idempotence, the batches of
    one partition in flight at once).
    """

    acks: int = 1
    timeout_ms: int = 10000
    retries: int = 3
    backoff_ms: int = 100
    backoff_max_ms: int = 1000
    codec: int = 0
    compressed_topics: frozenset[str] = frozenset()
    max_request_bytes: int = 1_048_576
    max_produce_version: int | None = None
    idempotence: bool = False
    busy_poll_us: int = 0
    transactional_id: str | None = None
    max_in_flight: int = 1


def settings_from_config(config: ProducerConfig) -> ProducerSettings:
    """Read the send-path settings off a config (the one place the send
    path reads configuration).

    Args:
        config: The producer's `kclient.config.ProducerConfig`.

    Returns:
        The frozen settings.

    Raises:
        ValueError: an unknown compression codec (a validated config
            never has one).
    """
    return ProducerSettings(
        acks=config.request_required_acks,
        timeout_ms=config.request_timeout_ms,
        retries=config.message_send_max_retries,
        backoff_ms=config.retry_backoff_ms,
        backoff_max_ms=max(config.retry_backoff_max_ms, config.retry_backoff_ms),
        codec=_codecs.codec_id(config.compression_codec),
        compressed_topics=frozenset(config.compressed_topics),
        max_request_bytes=config.max_request_size,
        max_produce_version=produce_version_cap(getattr(config, "api_version", None)),
        idempotence=bool(getattr(config, "enable_idempotence", False)),
        busy_poll_us=int(getattr(config, "socket_busy_poll_us", 0)),
        transactional_id=getattr(config, "transactional_id", None),
        max_in_flight=int(getattr(config, "max_in_flight_requests_per_connection", 1)),
    )


__all__ = [
    "MIN_MAGIC1_PRODUCE_VERSION",
    "MIN_PRODUCE_VERSION",
    "MIN_ZSTD_PRODUCE_VERSION",
    "ProducerSettings",
    "magic_for_produce_version",
    "produce_version_cap",
    "settings_from_config",
]
