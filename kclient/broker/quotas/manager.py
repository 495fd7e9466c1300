"""Byte-rate quotas per user and client id (KIP-13, KIP-55), as Kafka's
``ClientQuotaManager`` applies them.

Each request type with a byte quota (Produce: the request's bytes,
``producer_byte_rate``; Fetch: the response's record bytes,
``consumer_byte_rate``) looks up the quota of its client in KIP-55's
order, the first entity that sets the key winning:

1. ``/config/users/<user>/clients/<client-id>``
2. ``/config/users/<user>/clients/<default>``
3. ``/config/users/<user>``
4. ``/config/users/<default>/clients/<client-id>``
5. ``/config/users/<default>/clients/<default>``
6. ``/config/users/<default>``
7. ``/config/clients/<client-id>``
8. ``/config/clients/<default>``

All connections the matched entity covers share one rate (a user's quota
is shared by every client of that user; a default applies to each user or
client id separately), measured over ``quota.window.num`` windows of
``quota.window.size.seconds`` (`kclient.broker.quotas.rate`). A client
over its quota gets the delay that brings its rate back to the quota as
``throttle_time_ms``, and the broker mutes its connection for that long
(`kclient.broker.quotas.throttle`). The user is the authenticated
principal's name (``ANONYMOUS`` on a connection without authentication,
as Kafka). ``request_percentage`` (KIP-124) is the share of a second each
request takes on the broker's thread (`kclient.broker.quotas.request_time`),
throttled the same way for every API but the cluster actions and SASL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import trio

from kclient.broker.quotas.entities import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    IP,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
    ZkQuotaStore,
    entity_from_path,
)
from kclient.broker.quotas.rate import SampledRate
from kclient.broker.quotas.request_time import RequestTimeMeter
from kclient.errors import ConfigError
from kclient.zk.client import TrioZk, ZkClient

__all__ = ["QuotaManager"]

log = logging.getLogger("kclient.broker")

_D = None  # the default entity's name


def _precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """Entities to look at, best first, each with the key of the rate it
    shares (KIP-55; Kafka's metric tags ``user`` / ``client-id``)."""
    return [
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, _D), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, _D)), (user, client_id)),
        (((CLIENT_ID, _D), (USER, _D)), (user, client_id)),
        (((USER, _D),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, _D),), ("", client_id)),
    ]


class QuotaManager:
    """The broker's client quotas (see the module docstring).

    Args:
        window_num: ``quota.window.num``.
        window_size: ``quota.window.size.seconds``.
        zk: The broker's ZooKeeper session (None: a standalone broker keeps
            the quotas AlterClientQuotas sets in memory).
        clock: Seconds, monotonic (``trio.current_time``).
    """

    def __init__(self, window_num: int, window_size: float, zk: ZkClient | None, clock: Callable[[], float]) -> None:
        self.window_num = window_num
        self.window_size = window_size
        self.store = ZkQuotaStore(zk) if zk is not None else None
        self.clock = clock
        #: entity -> {quota key: value}.
        self.quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._rates: dict[tuple[str, str, str], SampledRate] = {}
        #: The request time meter, installed with the first
        #: ``request_percentage`` quota.
        self.meter: RequestTimeMeter | None = None

    async def load(self) -> None:
        """Read every quota entity from ZooKeeper (at start-up)."""
        if self.store is not None:
            self.quotas = await TrioZk(self.store.zk).run(self.store.read_all)
            if self.quotas:
                log.info("client quotas: %d entities", len(self.quotas))
            self._meter_if_needed()

    async def entity_changed(self, path: str) -> None:
        """Re-read the entity at ``/config/<path>`` (a change notification;
        `kclient.broker.config_changes.ConfigChangeListener`)."""
        entity = entity_from_path(path)
        if entity is None or self.store is None:
            return
        quotas = await TrioZk(self.store.zk).run(self.store.read, entity)
        self._set(entity, quotas)

    def _set(self, entity: QuotaEntity, quotas: Mapping[str, float]) -> None:
        if quotas:
            self.quotas[entity] = dict(quotas)
        else:
            self.quotas.pop(entity, None)
        log.info("client quotas of %s: %s", dict(entity), dict(quotas) or "none")
        self._meter_if_needed()

    def _meter_if_needed(self) -> None:
        """Install the request time meter once a ``request_percentage``
        quota exists (call in the broker's trio thread)."""
        if self.meter is None and any(REQUEST_PERCENTAGE in q for q in self.quotas.values()):
            self.meter = RequestTimeMeter()
            trio.lowlevel.add_instrument(self.meter)
            log.info("request_percentage quotas: measuring request time (KIP-124)")

    def quota(self, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """The quota ``key`` of a client and the rate it shares, or None.

        Args:
            key: ``producer_byte_rate`` or ``consumer_byte_rate``.
            user: The principal's name.
            client_id: The request header's client id.
        """
        if not self.quotas:
            return None
        for entity, shared in _precedence(user, client_id):
            value = self.quotas.get(entity, {}).get(key)
            if value is not None:
                return value, shared
        return None

    def record(self, key: str, user: str, client_id: str, size: float) -> float:
        """Record ``size`` bytes (or, for ``request_percentage``, percent
        of a second) of a client; the throttle time (seconds, 0 when within
        its quota or without one). A request-time throttle is at most one
        window (Kafka's ``ClientRequestQuotaManager``)."""
        found = self.quota(key, user, client_id)
        if found is None:
            return 0.0
        value, shared = found
        rate = self._rates.get((key, shared[0], shared[1]))
        if rate is None:
            rate = self._rates[(key, shared[0], shared[1])] = SampledRate(self.window_num, self.window_size)
        now = self.clock()
        rate.record(size, now)
        delay = rate.throttle_time(value, now)
        return min(delay, self.window_size) if key == REQUEST_PERCENTAGE else delay

    def max_value_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """The most bytes a client may move in the quota window
        (quota x (``quota.window.num`` - 1) x window size; Kafka's
        ``getMaxValueInQuotaWindow``), or None without a quota."""
        found = self.quota(key, user, client_id)
        if found is None:
            return None
        return found[0] * max(1, self.window_num - 1) * self.window_size

    def unrecord(self, key: str, user: str, client_id: str, size: float) -> None:
        """Take back bytes `record` counted (a throttled Fetch answered empty)."""
        found = self.quota(key, user, client_id)
        if found is not None and (rate := self._rates.get((key, found[1][0], found[1][1]))) is not None:
            rate.unrecord(size, self.clock())

    def ip_rate(self, address: str) -> float | None:
        """``connection_creation_rate`` of an IP address (its entity, else
        the default IP entity; KIP-612)."""
        for name in (address, _D):
            value = self.quotas.get(((IP, name),), {}).get(CONNECTION_CREATION_RATE)
            if value is not None:
                return value
        return None

    def describe(self, matches: list[tuple[str, int, str | None]], strict: bool) -> dict[QuotaEntity, dict[str, float]]:
        """The entities a DescribeClientQuotas filter matches (KIP-546).

        Args:
            matches: ``(entity type, match type, name)``: match type 0 the
                name exactly, 1 the default entity, 2 any specified name.
            strict: Only entities with no other component.
        """
        out = {}
        for entity, quotas in self.quotas.items():
            parts = dict(entity)
            if strict and set(parts) != {m[0] for m in matches}:
                continue
            if all(_matches(parts, m) for m in matches):
                out[entity] = dict(quotas)
        return out

    async def alter(self, entity: QuotaEntity, set_: Mapping[str, float], remove: list[str], validate_only: bool) -> None:
        """Change an entity's quotas (AlterClientQuotas): in ZooKeeper,
        with a change notification, or in memory on a standalone broker.

        Raises:
            ConfigError: a key the entity type does not have, a value <= 0.
        """
        allowed = {k for kind, _ in entity for k in QUOTA_KEYS[kind]}
        for key in [*set_, *remove]:
            if key not in allowed:
                raise ConfigError(f"Invalid quota config key {key!r} for entity {dict(entity)}")
        for key, value in set_.items():
            if value <= 0:
                raise ConfigError(f"Invalid quota value {value} for {key}: must be positive")
        if validate_only:
            return
        if self.store is not None:
            await TrioZk(self.store.zk).run(self.store.alter, entity, set_, remove)
            quotas = await TrioZk(self.store.zk).run(self.store.read, entity)
        else:
            quotas = {k: v for k, v in self.quotas.get(entity, {}).items() if k not in remove} | dict(set_)
        self._set(entity, quotas)


def _matches(parts: dict[str, str | None], match: tuple[str, int, str | None]) -> bool:
    kind, match_type, name = match
    if kind not in parts:
        return False
    if match_type == 0:
        return parts[kind] == name and name is not None
    if match_type == 1:
        return parts[kind] is None
    return parts[kind] is not None
