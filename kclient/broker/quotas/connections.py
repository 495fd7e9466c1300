"""Connection creation rate quotas (KIP-612), as Kafka's
``ConnectionQuotas`` applies them.

- ``max.connection.creation.rate``: new connections per second accepted
  by the broker over all its listeners but the inter-broker one (when
  there are others: brokers reach each other whatever the clients do, as
  in Kafka's ``ConnectionQuotas.protectedListener``); over it, the next
  connection waits (Kafka's acceptor stops accepting for the throttle
  time) before it is served.
- ``listener.name.<listener>.max.connection.creation.rate``: the same per
  listener (defaulting to ``max.connection.creation.rate``, as Kafka's
  listener-prefixed configs do); a connection waits for the longer of the
  two throttles.
- the ``connection_creation_rate`` quota of ``/config/ips/<ip>`` (or of
  ``/config/ips/<default>``): new connections per second from one IP
  address; a connection over it is closed after the throttle time and
  not counted (Kafka's ``ConnectionThrottledException``).

Rates are measured as the byte quotas' (`kclient.broker.quotas.rate`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import trio

from kclient.broker.quotas.manager import QuotaManager
from kclient.broker.quotas.rate import SampledRate
from kclient.config.broker import BrokerConfig

__all__ = ["ConnectionRateQuotas", "connection_rate_quotas"]

log = logging.getLogger("kclient.broker")

#: Kafka's "no limit" for the connection creation rates (Int.MaxValue).
UNLIMITED = 2147483647


class _RefusalLog(Protocol):
    def log(self, kind: str, message: str, *args: Any) -> bool: ...


class ConnectionRateQuotas:
    """Broker-wide, per-listener and per-IP connection creation rates.

    Args:
        max_rate: ``max.connection.creation.rate`` (the broker's).
        quotas: The broker's quota manager (the IP entities).
        window_num: ``quota.window.num``.
        window_size: ``quota.window.size.seconds``.
        clock: Seconds, monotonic.
        listener_rates: Each listener's own limit
            (``listener.name.<listener>.max.connection.creation.rate``) by
            listener name; a listener not named has ``max_rate``.
        protected_listener: The inter-broker listener when the broker has
            others: its connections are not counted in the broker-wide
            rate nor held back by it (None: every listener counts).
    """

    def __init__(
        self,
        max_rate: int,
        quotas: QuotaManager,
        window_num: int,
        window_size: float,
        clock: Callable[[], float],
        *,
        listener_rates: Mapping[str, int] | None = None,
        protected_listener: str | None = None,
    ) -> None:
        self.max_rate = max_rate
        self.quotas = quotas
        self.window_num = window_num
        self.window_size = window_size
        self.clock = clock
        self.listener_rates = dict(listener_rates or {})
        self.protected_listener = protected_listener
        self._broker = SampledRate(window_num, window_size)
        self._listeners: dict[str, SampledRate] = {}
        self._ips: dict[str, SampledRate] = {}

    def _rate(self, table: dict[str, SampledRate], key: str) -> SampledRate:
        rate = table.get(key)
        if rate is None:
            rate = table[key] = SampledRate(self.window_num, self.window_size)
        return rate

    def _listener_limit(self, listener: str) -> int:
        return self.listener_rates.get(listener, self.max_rate)

    def _counts_broker_wide(self, listener: str) -> bool:
        return self.max_rate < UNLIMITED and listener != self.protected_listener

    def listener_delay(self, listener: str) -> float:
        """Record a new connection on ``listener``; the seconds to wait
        before serving it: the longer of the broker-wide and the
        listener's throttles (0 within both rates)."""
        now = self.clock()
        delay = 0.0
        if self._counts_broker_wide(listener):
            self._broker.record(1, now)
            delay = self._broker.throttle_time(self.max_rate, now)
        limit = self._listener_limit(listener)
        if limit < UNLIMITED:
            rate = self._rate(self._listeners, listener)
            rate.record(1, now)
            delay = max(delay, rate.throttle_time(limit, now))
        return delay

    def ip_throttle(self, address: str, listener: str | None = None) -> float:
        """Record a new connection from ``address``; the seconds after
        which to close it when over its ``connection_creation_rate`` (not
        counted then, neither in the broker's nor in ``listener``'s rate,
        as Kafka's ``updateListenerMetrics``), else 0."""
        quota = self.quotas.ip_rate(address)
        if quota is None:
            return 0.0
        rate = self._rate(self._ips, address)
        now = self.clock()
        rate.record(1, now)
        delay = rate.throttle_time(quota, now)
        if delay > 0:
            rate.unrecord(1, now)
            if listener is not None:
                self._unrecord_listener(listener, now)
        return delay

    def _unrecord_listener(self, listener: str, now: float) -> None:
        if self._counts_broker_wide(listener):
            self._broker.unrecord(1, now)
        if self._listener_limit(listener) < UNLIMITED:
            self._rate(self._listeners, listener).unrecord(1, now)

    async def admit(self, stream: trio.abc.AsyncResource, listener: str, address: str, peer: str, refusals: _RefusalLog) -> bool:
        """Wait out ``max.connection.creation.rate`` (the broker's and the listener's); False (the connection
        closed after the throttle time, the refusal logged) when ``address``
        is over its ``connection_creation_rate``.

        Args:
            stream: The new connection.
            listener: Its listener's name.
            address: The client's IP address.
            peer: ``host:port`` for the logs.
            refusals: The broker's rate-limited refusal log.
        """
        delay = self.listener_delay(listener)
        if delay > 0:
            log.debug("connection from %s waits %.3f s (max.connection.creation.rate)", peer, delay)
            await trio.sleep(delay)
        delay = self.ip_throttle(address, listener)
        if delay <= 0:
            return True
        refusals.log("connection-rate", "closing connection from %s after %.3f s: over its connection_creation_rate", peer, delay)
        await trio.sleep(delay)
        with trio.CancelScope(shield=True):
            await stream.aclose()
        return False


def connection_rate_quotas(config: BrokerConfig, listeners: list[str], quotas: QuotaManager, clock: Callable[[], float]) -> ConnectionRateQuotas:
    """The broker's connection creation rates from its config (KIP-612).

    Args:
        config: The broker config (``max.connection.creation.rate``, its
            ``listener.name.<listener>.`` overrides, ``quota.window.*``,
            ``inter.broker.listener.name``).
        listeners: The names of the listeners served (the first is the
            inter-broker listener when ``inter.broker.listener.name`` is
            not set).
        quotas: The broker's quota manager (the IP entities).
        clock: Seconds, monotonic.

    Returns:
        The rates, with the inter-broker listener exempt from the
        broker-wide rate when the broker has other listeners.
    """
    inter_broker = (config.inter_broker_listener_name or (listeners[0] if listeners else "")).upper()
    protected = inter_broker if len(listeners) > 1 and inter_broker in listeners else None
    return ConnectionRateQuotas(
        config.max_connection_creation_rate,
        quotas,
        config.quota_window_num,
        config.quota_window_size_seconds,
        clock,
        listener_rates={name: config.max_connection_creation_rate_for(name) for name in listeners},
        protected_listener=protected,
    )
