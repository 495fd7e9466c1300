"""Skipping a test whose outside dependency is missing, except in CI.

In CI (the ``CI`` environment variable is set, as ``.ci/run`` does after
installing everything) a missing dependency fails the test instead, so a
broken CI image cannot silently skip tests.
"""

from __future__ import annotations

import os

import pytest


def require(reason: str | None, *, name: str, needs: str) -> None:
    """Skip the calling test with ``"<needs>: <reason>"`` when ``reason``
    (why ``name`` is unavailable) is not None; in CI fail instead."""
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required in CI but unavailable: {reason}", pytrace=False)
    pytest.skip(f"{needs}: {reason}")
