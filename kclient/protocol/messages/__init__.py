"""Declarative request/response schemas, one module per Kafka API.

``APIS`` maps an API key to its :class:`~kclient.protocol.schema.Api`;
``choose_version`` picks the highest version both sides support
(ApiVersions negotiation).
"""

from __future__ import annotations

from kclient.protocol.messages.api_versions import API_VERSIONS
from kclient.protocol.messages.fetch import FETCH
from kclient.protocol.messages.find_coordinator import FIND_COORDINATOR
from kclient.protocol.messages.init_producer_id import INIT_PRODUCER_ID
from kclient.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, LIST_OFFSETS
from kclient.protocol.messages.metadata import METADATA
from kclient.protocol.messages.offset_fetch import OFFSET_FETCH
from kclient.protocol.messages.produce import PRODUCE
from kclient.protocol.schema import Api

APIS: dict[int, Api] = {api.key: api for api in (PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_FETCH, FIND_COORDINATOR, API_VERSIONS, INIT_PRODUCER_ID)}


def choose_version(api: Api, broker_versions: dict[int, tuple[int, int]], *, floor: int | None = None, ceiling: int | None = None) -> int:
    """Highest version of ``api`` that kclient and the broker both support.

    ``broker_versions`` maps api key -> (min, max) from an ApiVersions
    response. ``floor``/``ceiling`` narrow kclient's own range (e.g. Produce
    needs v3+ for record batch v2). Raises
    :class:`kclient.errors.UnsupportedVersionError` when the ranges do not meet.
    """
    from kclient.errors import UnsupportedVersionError

    lo = api.min_version if floor is None else max(api.min_version, floor)
    hi = api.max_version if ceiling is None else min(api.max_version, ceiling)
    if api.key not in broker_versions:
        raise UnsupportedVersionError(f"broker does not support {api.name}")
    b_lo, b_hi = broker_versions[api.key]
    best = min(hi, b_hi)
    if best < max(lo, b_lo):
        raise UnsupportedVersionError(f"{api.name}: kclient supports {lo}-{hi}, broker {b_lo}-{b_hi}")
    return best


__all__ = [
    "APIS",
    "API_VERSIONS",
    "FETCH",
    "FIND_COORDINATOR",
    "INIT_PRODUCER_ID",
    "LIST_OFFSETS",
    "METADATA",
    "OFFSET_FETCH",
    "PRODUCE",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "choose_version",
]
