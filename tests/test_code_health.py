"""The code's health, as issue 26 defines it, checked on every run:
``mypy --strict`` clean, ``ruff check`` clean, no function rated E or F
for cyclomatic complexity (radon), no module over 1,000 lines.

Each check has a list of what is not there yet (issue 26 works through
them): a new offender fails, and so does an entry of a list that no longer
needs to be there (the lists only shrink, to empty).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kclient"

#: The parts of kclient that ``mypy --strict`` passes (the configuration is
#: ``[tool.mypy]`` in pyproject.toml): all of it.
TYPED = ["kclient"]

#: Functions still rated E or F (``module:qualified name``).
COMPLEX: set[str] = set()

#: Modules still over 1,000 lines.
LONG: set[str] = set()

MAX_LINES = 1000


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_mypy_strict_passes_on_the_typed_parts():
    pytest.importorskip("mypy", reason="mypy is in the test extra")
    env = {**os.environ, "MYPY_CACHE_DIR": str(ROOT / ".mypy_cache")}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", *TYPED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, f"mypy --strict on {TYPED}:\n{result.stdout}{result.stderr}"


def test_ruff_is_clean():
    """``ruff check .`` over the whole repository (the rules are
    ``[tool.ruff]`` in pyproject.toml) reports nothing."""
    pytest.importorskip("ruff", reason="ruff is in the test extra")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check .:\n{result.stdout}{result.stderr}"


def _complex_functions() -> set[str]:
    from radon.complexity import cc_visit

    found = set()
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for block in cc_visit(path.read_text()):
            for item in [block, *getattr(block, "methods", [])]:
                if item.complexity > 30:  # radon's E starts at 31
                    name = f"{item.classname}.{item.name}" if getattr(item, "classname", None) else item.name
                    found.add(f"{rel}:{name}")
    return found


def test_no_function_is_rated_e_or_f():
    pytest.importorskip("radon", reason="radon is in the test extra")
    found = _complex_functions()
    new = sorted(found - COMPLEX)
    assert not new, f"functions rated E or F (cyclomatic complexity over 30): {new}; split them"
    gone = sorted(COMPLEX - found)
    assert not gone, f"no longer E or F: remove them from COMPLEX: {gone}"


@pytest.mark.unit
def test_no_module_is_over_1000_lines():
    found = {path.relative_to(ROOT).as_posix() for path in _sources() if len(path.read_text().splitlines()) > MAX_LINES}
    new = sorted(found - LONG)
    assert not new, f"modules over {MAX_LINES} lines: {new}; split them"
    gone = sorted(LONG - found)
    assert not gone, f"no longer over {MAX_LINES} lines: remove them from LONG: {gone}"
