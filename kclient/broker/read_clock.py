"""The deadline of one request being read (``socket.request.read.timeout.ms``).

A request must arrive whole within ``socket.request.read.timeout.ms`` of
its first byte. Both kinds of waiting count: waiting for the client's
bytes (`ReadClock.receive`) and waiting for the request memory budget
(`ReadClock.reserve`, `kclient.broker.limits.RequestMemory`), so a read the
broker holds back cannot keep a connection open for longer.
"""

from __future__ import annotations

from typing import Any

import trio

from kclient.broker.limits import RequestMemory

__all__ = ["ReadClock"]


class ReadClock:
    """The deadline of one request: ``socket.request.read.timeout.ms``
    from its first byte. Time spent waiting for the client and time held
    back by the request budget both count, so a held-back read cannot keep
    a connection open for longer.

    Args:
        seconds: ``socket.request.read.timeout.ms`` in seconds, counted
            from now (the request's first byte).
    """

    def __init__(self, seconds: float) -> None:
        self.deadline = trio.current_time() + seconds

    async def receive(self, stream: Any, nbytes: int) -> bytes | bytearray:
        """Receive at most ``nbytes`` from ``stream``.

        Args:
            stream: A trio stream (a socket or TLS stream).
            nbytes: Most bytes to receive.

        Returns:
            The bytes; b"" at EOF.

        Raises:
            trio.TooSlowError: The time is up.
        """
        with trio.move_on_at(self.deadline) as scope:
            data: bytes | bytearray = await stream.receive_some(nbytes)
        if scope.cancelled_caught:
            raise trio.TooSlowError
        return data

    async def reserve(self, memory: RequestMemory, token: object, nbytes: int) -> None:
        """Take ``nbytes`` of the request budget for the frame ``token``,
        waiting at most until the deadline (`RequestMemory.reserve`).

        Args:
            memory: The broker's request memory.
            token: The frame's token (`RequestMemory.begin`).
            nbytes: Bytes about to be received.

        Raises:
            trio.TooSlowError: The time is up (nothing was taken).
        """
        with trio.move_on_at(self.deadline) as scope:
            await memory.reserve(token, nbytes)
        if scope.cancelled_caught:
            raise trio.TooSlowError
