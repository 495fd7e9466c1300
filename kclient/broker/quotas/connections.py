"""Connection creation rate quotas (KIP-612), as Kafka's
``ConnectionQuotas`` applies them.

- ``max.connection.creation.rate``: new connections per second accepted
  on each listener; over it, the next connection waits (Kafka's acceptor
  stops accepting for the throttle time) before it is served.
- the ``connection_creation_rate`` quota of ``/config/ips/<ip>`` (or of
  ``/config/ips/<default>``): new connections per second from one IP
  address; a connection over it is closed after the throttle time and
  not counted (Kafka's ``ConnectionThrottledException``).

Rates are measured as the byte quotas' (`kclient.broker.quotas.rate`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import trio

from kclient.broker.quotas.manager import QuotaManager
from kclient.broker.quotas.rate import SampledRate

__all__ = ["ConnectionRateQuotas"]

log = logging.getLogger("kclient.broker")


class _RefusalLog(Protocol):
    def log(self, kind: str, message: str, *args: Any) -> bool: ...


class ConnectionRateQuotas:
    """Per-listener and per-IP connection creation rates.

    Args:
        max_rate: ``max.connection.creation.rate`` (per listener).
        quotas: The broker's quota manager (the IP entities).
        window_num: ``quota.window.num``.
        window_size: ``quota.window.size.seconds``.
        clock: Seconds, monotonic.
    """

    def __init__(self, max_rate: int, quotas: QuotaManager, window_num: int, window_size: float, clock: Callable[[], float]) -> None:
        self.max_rate = max_rate
        self.quotas = quotas
        self.window_num = window_num
        self.window_size = window_size
        self.clock = clock
        self._listeners: dict[str, SampledRate] = {}
        self._ips: dict[str, SampledRate] = {}

    def _rate(self, table: dict[str, SampledRate], key: str) -> SampledRate:
        rate = table.get(key)
        if rate is None:
            rate = table[key] = SampledRate(self.window_num, self.window_size)
        return rate

    def listener_delay(self, listener: str) -> float:
        """Record a new connection on ``listener``; the seconds to wait
        before serving it (0 within ``max.connection.creation.rate``)."""
        if self.max_rate >= 2147483647:
            return 0.0
        rate = self._rate(self._listeners, listener)
        now = self.clock()
        rate.record(1, now)
        return rate.throttle_time(self.max_rate, now)

    def ip_throttle(self, address: str) -> float:
        """Record a new connection from ``address``; the seconds after
        which to close it when over its ``connection_creation_rate`` (not
        counted then), else 0."""
        quota = self.quotas.ip_rate(address)
        if quota is None:
            return 0.0
        rate = self._rate(self._ips, address)
        now = self.clock()
        rate.record(1, now)
        delay = rate.throttle_time(quota, now)
        if delay > 0:
            rate.unrecord(1, now)
        return delay

    async def admit(self, stream: trio.abc.AsyncResource, listener: str, address: str, peer: str, refusals: _RefusalLog) -> bool:
        """Wait out ``max.connection.creation.rate``; False (the connection
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
        delay = self.ip_throttle(address)
        if delay <= 0:
            return True
        refusals.log("connection-rate", "closing connection from %s after %.3f s: over its connection_creation_rate", peer, delay)
        await trio.sleep(delay)
        with trio.CancelScope(shield=True):
            await stream.aclose()
        return False
