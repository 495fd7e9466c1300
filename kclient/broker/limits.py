"""The broker's global limits: request memory and connections.

`RequestMemory` is the request memory pool of ``queued.max.request.bytes``
(Kafka's ``MemoryPool``): every byte of a request frame is taken from it
before it is received, one receive at a time, and given back once the
request has been answered. A connection that would go over the budget
waits before it reads more (back-pressure). A declared frame size costs
nothing by itself: a client that sends a size and then nothing holds at
most the one receive it is waiting on.

Frames being read at the same time could each hold part of the budget and
all wait for more, which would stall the broker until its read timeouts
fire. To rule that out, the *oldest* frame being read is never held back:
it only waits for its client. So the pool's use stays under
``queued.max.request.bytes + socket.request.max.bytes`` (the budget, plus
what the oldest frame may take beyond it).

Connections that have not authenticated yet (a SASL listener before the
login completes) read from their own small share,
``queued.max.unauthenticated.request.bytes``, with the same rule (their
frames are at most ``sasl.server.max.receive.size`` each), so peers that
never log in cannot hold back an authenticated client: the total stays
under ``queued.max.request.bytes + socket.request.max.bytes +
queued.max.unauthenticated.request.bytes + sasl.server.max.receive.size``.

`ConnectionLimits` counts the connections being served, in total
(``max.connections``) and per client IP address
(``max.connections.per.ip``, ``max.connections.per.ip.overrides``).
"""

from __future__ import annotations

import ipaddress
import logging
import socket

import trio

from kclient.config import BrokerConfig

log = logging.getLogger("kclient.broker")

__all__ = ["ConnectionLimits", "RequestMemory", "normalize_address"]


class _Pool:
    """One budget of `RequestMemory`: bytes taken, frames being read
    (oldest first) and the connections waiting for it."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self.reading: dict[object, None] = {}
        self.lot = trio.lowlevel.ParkingLot()

    def is_oldest(self, token: object) -> bool:
        return next(iter(self.reading), None) is token

    def fits(self, token: object, nbytes: int) -> bool:
        return self.limit is None or self.used + nbytes <= self.limit or self.is_oldest(token)

    def must_wait(self, token: object, nbytes: int) -> bool:
        """Whether `RequestMemory.reserve` would wait: others wait already
        (and this is not the oldest frame) or the bytes do not fit."""
        if self.limit is None:
            return False
        return bool(len(self.lot) and not self.is_oldest(token)) or not self.fits(token, nbytes)

    def wake(self) -> None:
        if len(self.lot):
            self.lot.unpark_all()


class _Frame:
    """A frame being read: its token in `RequestMemory`."""

    __slots__ = ("pool",)

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool


class RequestMemory:
    """The request memory budget shared by every connection.

    Two pools: the frames of authenticated connections share ``limit``
    (``queued.max.request.bytes``); the frames of connections that have
    not authenticated yet (a SASL listener before its login completes)
    share ``unauthenticated_limit`` (kclient's
    ``queued.max.unauthenticated.request.bytes``) and never take from the
    first, so peers that have not logged in, however many and however
    silent, cannot hold back an authenticated client's requests. In each
    pool the oldest frame being read may go over the limit.

    Args:
        limit: Most bytes the authenticated frames take at once (the
            oldest frame being read aside); ``None``: unbounded (only
            counted).
        unauthenticated_limit: The same for the frames read before
            authentication; ``None``: unbounded.

    Attributes:
        peak: Most bytes ever taken at once (both pools).
        waits: How many times a connection had to wait for the budget.
    """

    def __init__(self, limit: int | None, unauthenticated_limit: int | None = None) -> None:
        self._authenticated = _Pool(limit)
        self._unauthenticated = _Pool(unauthenticated_limit)
        self.peak = 0
        self.waits = 0

    @property
    def limit(self) -> int | None:
        """The authenticated connections' budget (bytes; None: unbounded)."""
        return self._authenticated.limit

    @property
    def unauthenticated_limit(self) -> int | None:
        """The budget of the connections not yet authenticated (bytes)."""
        return self._unauthenticated.limit

    @property
    def used(self) -> int:
        """Bytes taken now, both pools."""
        return self._authenticated.used + self._unauthenticated.used

    @property
    def unauthenticated_used(self) -> int:
        """Bytes taken now by frames read before authentication."""
        return self._unauthenticated.used

    def begin(self, authenticated: bool = True) -> object:
        """Register a frame whose size has just been read.

        Args:
            authenticated: Whether its connection has authenticated (its
                bytes come from the unauthenticated share otherwise).

        Returns:
            Its token, for `reserve`, `release` and `done_reading`.
        """
        frame = _Frame(self._authenticated if authenticated else self._unauthenticated)
        frame.pool.reading[frame] = None
        return frame

    def done_reading(self, token: object) -> None:
        """The frame is complete (or abandoned): it no longer counts as being
        read, so the next oldest frame may go over the budget. Idempotent."""
        pool = _pool(token)
        if pool.reading.pop(token, 0) is None:
            pool.wake()

    def must_wait(self, token: object, nbytes: int) -> bool:
        """Whether `reserve` of ``nbytes`` for ``token`` would wait now.

        Args:
            token: From `begin`.
            nbytes: Bytes about to be reserved.

        Returns:
            True if the frame is held back by its budget.
        """
        return _pool(token).must_wait(token, nbytes)

    async def reserve(self, token: object, nbytes: int) -> None:
        """Take ``nbytes`` for the frame ``token``, waiting while they do not
        fit (behind the connections already waiting, unless this frame is
        the oldest being read). Cancelling the wait takes nothing.

        Args:
            token: From `begin`.
            nbytes: How many bytes are about to be received.
        """
        pool = _pool(token)
        if pool.must_wait(token, nbytes):
            self.waits += 1
            await pool.lot.park()
            while not pool.fits(token, nbytes):
                await pool.lot.park()
        pool.used += nbytes
        self.peak = max(self.peak, self.used)

    def release(self, token: object, nbytes: int) -> None:
        """Give back ``nbytes`` taken for ``token`` (received bytes whose
        request is answered, or a reservation that was not filled).

        Args:
            token: From `begin`.
            nbytes: Bytes to give back.
        """
        if nbytes:
            pool = _pool(token)
            pool.used -= nbytes
            pool.wake()


def _pool(token: object) -> _Pool:
    assert isinstance(token, _Frame)
    return token.pool


def normalize_address(address: str) -> str:
    """A client IP address as the limits key it: an IPv4-mapped IPv6
    address (``::ffff:10.0.0.1``) becomes the IPv4 address, any other is
    returned in its canonical text form (unparsable text as is)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


class ConnectionLimits:
    """Connections being served, in total and per client IP address.

    Args:
        config: Gives ``max.connections``, ``max.connections.per.ip`` and
            ``max.connections.per.ip.overrides``.
    """

    def __init__(self, config: BrokerConfig) -> None:
        self.max_connections = config.max_connections
        self.per_ip = config.max_connections_per_ip
        self.total = 0
        self._by_ip: dict[str, int] = {}
        self._overrides: dict[str, int] = {}
        for host, limit in config.max_connections_per_ip_overrides:
            for address in _resolve(host):
                self._overrides[address] = limit

    def limit_for(self, address: str) -> int:
        """The connection limit of one (normalized) client address."""
        return self._overrides.get(address, self.per_ip)

    def admit(self, address: str) -> str | None:
        """Count a new connection from ``address`` if the limits allow it.

        Returns:
            ``None`` when admitted (call `leave` when it ends), else the
            property that refused it, formatted for the log.
        """
        if self.total >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        limit = self.limit_for(address)
        count = self._by_ip.get(address, 0)
        if count >= limit:
            name = "max.connections.per.ip.overrides" if address in self._overrides else "max.connections.per.ip"
            return f"{name} ({limit}) reached for {address}"
        self.total += 1
        self._by_ip[address] = count + 1
        return None

    def leave(self, address: str) -> None:
        """A connection admitted from ``address`` has ended."""
        self.total -= 1
        count = self._by_ip.get(address, 0) - 1
        if count > 0:
            self._by_ip[address] = count
        else:
            self._by_ip.pop(address, None)


def _resolve(host: str) -> list[str]:
    """The addresses an override names: itself if it is an IP address, else
    what the host name resolves to now (nothing, with a warning, if it does
    not resolve)."""
    try:
        return [normalize_address(str(ipaddress.ip_address(host)))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        log.warning("max.connections.per.ip.overrides: cannot resolve %s (%s); its override is ignored", host, exc)
        return []
    return sorted({normalize_address(str(info[4][0])) for info in infos})
