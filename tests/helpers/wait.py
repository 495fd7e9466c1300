"""Waiting for a condition, never for a fixed time."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], what: str, timeout: float = 30.0, interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns a true value.

    Args:
        predicate: Returns a true value once the awaited state holds.
        what: Named in the failure message.
        timeout: Seconds before failing.
        interval: Seconds between polls.

    Returns:
        The first true value ``predicate`` returned.

    Raises:
        AssertionError: ``timeout`` passed first (``"timed out waiting for <what>"``).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)
