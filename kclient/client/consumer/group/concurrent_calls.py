"""Awaiting several calls at once on the connector's trio loop, with the
error of a single call: the ZooKeeper-coordinated core sets its three
watches, and reads a new assignment's committed offsets and leaders, each
set at once (every call is a round trip).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import trio

_A = TypeVar("_A")
_B = TypeVar("_B")


async def all_of(*calls: Awaitable[Any]) -> list[Any]:
    """Await several calls concurrently.

    Args:
        *calls: The awaitables.

    Returns:
        Their results, in order.

    Raises:
        Exception: the first exception (in order) of a call, as itself
            (not wrapped in an exception group, so that callers catch
            `KafkaError` as from a single call), once all have finished.
    """
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    async def one(i: int, call: Awaitable[Any]) -> None:
        try:
            results[i] = await call
        except Exception as exc:
            errors[i] = exc

    async with trio.open_nursery() as nursery:
        for i, call in enumerate(calls):
            nursery.start_soon(one, i, call)
    for error in errors:
        if error is not None:
            raise error
    return results


async def both(a: Awaitable[_A], b: Awaitable[_B]) -> tuple[_A, _B]:
    """Await two calls concurrently (`all_of`, typed).

    Args:
        a: The first awaitable.
        b: The second.

    Returns:
        Their results.

    Raises:
        Exception: as `all_of`.
    """
    first, second = await all_of(a, b)
    return first, second


__all__ = ["all_of", "both"]
