"""Waiting for a condition, never for a fixed time.

- `wait_for`: poll a predicate until it returns a true value (blocking);
- `retry`: call until the result is acceptable, and return the result
  (a broker answering "not yet": coordinator loading, topic creation);
- `wait_for_async` / `retry_async`: the same for trio tests, polling
  between checkpoints.

A module that always waits with the same budget binds it once, e.g.
``wait_until = functools.partial(wait_for, timeout=DEADLINE)``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

T = TypeVar("T")
R = TypeVar("R")


def wait_for(predicate: Callable[[], T], what: str, timeout: float = 30.0, interval: float = 0.05, *, detail: Callable[[], str] | None = None) -> T:
    """Poll ``predicate`` until it returns a true value.

    Args:
        predicate: Returns a true value once the awaited state holds.
        what: Named in the failure message.
        timeout: Seconds before failing.
        interval: Seconds between polls.
        detail: Called on failure; its text ends the message (e.g. the
            stderr of the processes the test drives).

    Returns:
        The first true value ``predicate`` returned.

    Raises:
        AssertionError: ``timeout`` passed first (``"timed out waiting for
            <what> (last: <value>)"``).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what} (last: {value!r})" + (f"; {detail()}" if detail else "")
        time.sleep(interval)


def retry(call: Callable[[], R], ok: Callable[[R], object], what: str = "answer", timeout: float = 30.0, interval: float = 0.1) -> R:
    """Call ``call`` until ``ok(result)`` is true and return that result.

    Unlike `wait_for`, the result itself may be false (an empty dict, an
    error code 0): ``ok`` decides.

    Args:
        call: Makes one attempt (e.g. sends one request) and returns its result.
        ok: Says whether a result is the awaited one.
        what: Named in the failure message.
        timeout: Seconds before failing.
        interval: Seconds between attempts.

    Returns:
        The first result ``ok`` accepted.

    Raises:
        AssertionError: ``timeout`` passed first (``"no <what> in time:
            <last result>"``).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = call()
        if ok(result):
            return result
        assert time.monotonic() < deadline, f"no {what} in time: {result}"
        time.sleep(interval)


async def wait_for_async(predicate: Callable[[], T], what: str, timeout: float = 30.0, interval: float = 0.01) -> T:
    """`wait_for` inside trio: poll ``predicate`` between checkpoints.

    Args:
        predicate: Returns a true value once the awaited state holds (a
            plain function: it must not block).
        what: Named in the failure message.
        timeout: Seconds before failing.
        interval: Seconds between polls.

    Returns:
        The first true value ``predicate`` returned.

    Raises:
        AssertionError: ``timeout`` passed first.
    """
    deadline = trio.current_time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert trio.current_time() < deadline, f"timed out waiting for {what} (last: {value!r})"
        await trio.sleep(interval)


async def retry_async(call: Callable[[], Awaitable[R]], ok: Callable[[R], object], what: str = "answer", timeout: float = 30.0, interval: float = 0.05) -> R:
    """`retry` inside trio: await ``call()`` until ``ok(result)`` is true.

    Args:
        call: Makes one attempt (e.g. sends one request) and returns its result.
        ok: Says whether a result is the awaited one.
        what: Named in the failure message.
        timeout: Seconds before failing.
        interval: Seconds between attempts.

    Returns:
        The first result ``ok`` accepted.

    Raises:
        AssertionError: ``timeout`` passed first.
    """
    deadline = trio.current_time() + timeout
    while True:
        result = await call()
        if ok(result):
            return result
        assert trio.current_time() < deadline, f"no {what} in time: {result}"
        await trio.sleep(interval)
