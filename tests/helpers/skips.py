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


def missing_dependencies() -> list[tuple[str, str]]:
    """What this run will skip for want of an outside program, and why.

    Returns:
        ``[(the tests, the reason), ...]``; empty when nothing is missing.
        Cheap: nothing is started or fetched (the JVM jar sets are fetched
        on first use, `kclient.testing.maven`).
    """
    import importlib.util
    import shutil
    import sys
    from pathlib import Path

    from kclient.testing import java_unavailable_reason

    missing: list[tuple[str, str]] = []
    java = java_unavailable_reason()
    if java is not None:
        missing.append(("the ZooKeeper, Apache Kafka and Spark tests", java))
    for module in ("pyspark", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            missing.append(("the Spark tests", f"{module} is not installed (pip install 'kclient[spark]')"))
    if not (shutil.which("kcat") or shutil.which("kafkacat")):
        missing.append(("the kcat interop tests", "kcat is not on PATH (Debian/Ubuntu: apt-get install kcat)"))
    if not (Path(sys.executable).parent / "mkdocs").is_file():
        missing.append(("the docs build test", "mkdocs is not installed (pip install 'kclient[docs]')"))
    if not shutil.which("openssl"):
        missing.append(("one CA-directory test", "the openssl command is not on PATH"))
    return missing


def skip_summary() -> str:
    """One line for the start of a run: what will be skipped and why, or
    that nothing will (in CI a missing dependency fails its tests instead)."""
    missing = missing_dependencies()
    if not missing:
        return "kclient: every outside dependency is here (Java 17+, kcat, mkdocs, openssl): no test will be skipped for want of one"
    verb = "will fail (CI)" if os.environ.get("CI") else "will skip"
    return f"kclient: {verb} " + "; ".join(f"{what}: {why}" for what, why in missing)
