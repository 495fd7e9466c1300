"""The documentation site builds with ``mkdocs build --strict`` and no built
page shows a raw Sphinx role (``:class:`X```): the docstrings are rendered
by mkdocstrings as Markdown, where such roles come out as literal text."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.skips import require

ROOT = Path(__file__).resolve().parent.parent
ROLES = ("class", "meth", "func", "mod", "attr", "data")
#: A role as written in reStructuredText (``:class:``); Markdown renders
#: ``:class:`Foo``` as the text ``:class:`` followed by a code span.
RAW_ROLE = re.compile(r":(%s):" % "|".join(ROLES))

pytestmark = pytest.mark.timeout(300)


def mkdocs_command() -> Path | None:
    """The venv's ``mkdocs`` script, next to the running interpreter."""
    script = Path(sys.executable).parent / ("mkdocs.exe" if os.name == "nt" else "mkdocs")
    return script if script.is_file() else None


def require_mkdocs() -> Path:
    """The ``mkdocs`` script; skips the test with the reason when it is not
    installed, or fails in CI (the ``CI`` environment variable is set), as
    ``require_zookeeper`` in conftest does."""
    script = mkdocs_command()
    reason = None if script is not None else f"mkdocs is not installed next to {sys.executable} (install kclient's docs extras)"
    require(reason, name="mkdocs", needs="needs mkdocs")
    assert script is not None
    return script


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built from this checkout into a temporary directory."""
    mkdocs = require_mkdocs()
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return site_dir


def test_site_builds_with_every_page(site):
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    assert "index.html" in pages
    assert "api/index.html" in pages


def test_no_built_page_shows_a_raw_sphinx_role(site):
    found = []
    for page in sorted(site.rglob("*.html")):
        text = page.read_text(encoding="utf-8", errors="replace")
        for m in RAW_ROLE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{page.relative_to(site).as_posix()}:{line}: :{m[1]}:")
    assert not found, "raw Sphinx roles in the built site:\n" + "\n".join(found)


def test_role_pattern_matches_what_markdown_makes_of_a_role():
    assert RAW_ROLE.search(":class:`Foo`")[1] == "class"
    assert RAW_ROLE.search("see :meth:<code>Foo.bar</code>")[1] == "meth"
    assert not RAW_ROLE.search("a key:value pair, a class: Foo")


def test_every_test_the_guarantees_page_names_exists():
    """docs/guarantees.md names, for each promise, the test that checks it
    (``tests/<file>.py::<test>``): each must be a test function of that file,
    so the page cannot point at a test that was renamed or removed."""
    page = (ROOT / "docs" / "guarantees.md").read_text()
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", page)
    assert len(named) >= 15, named
    missing = []
    for path, test in named:
        source = (ROOT / path).read_text() if (ROOT / path).is_file() else ""
        if not re.search(rf"^(async )?def {test}\(", source, re.M):
            missing.append(f"{path}::{test}")
    assert not missing, f"docs/guarantees.md names tests that do not exist: {missing}"
