"""The documentation site builds with ``mkdocs build --strict``, no built
page shows a raw Sphinx role (``:class:`X```: the docstrings are rendered
by mkdocstrings as Markdown, where such roles come out as literal text),
every internal link of every built page leads to a page and an anchor that
exist, and the API reference renders the public names and nothing else."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import pytest
from helpers.skips import require

ROOT = Path(__file__).resolve().parent.parent
ROLES = ("class", "meth", "func", "mod", "attr", "data")
#: A role as written in reStructuredText (``:class:``); Markdown renders
#: ``:class:`Foo``` as the text ``:class:`` followed by a code span.
RAW_ROLE = re.compile(rf":({'|'.join(ROLES)}):")

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


def nav_pages() -> list[str]:
    """The Markdown files named in mkdocs.yml's nav."""
    return re.findall(r":\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)


def test_site_builds_with_every_page(site):
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    assert "index.html" in pages
    assert "api/index.html" in pages
    for md in nav_pages():
        built = "index.html" if md == "index.md" else md[: -len(".md")] + "/index.html"
        assert built in pages, f"{md} is in the nav but {built} was not built"
    guides = {p.name for p in (ROOT / "docs" / "guides").glob("*.md")}
    assert {"producer.md", "simple-consumer.md", "consumer-groups.md", "broker.md", "formats.md", "interoperability.md", "testing.md"} <= guides
    assert {f"guides/{g}" for g in guides} <= set(nav_pages()), "a guide is missing from the nav"


class _Links(HTMLParser):
    """Collects a page's ``href`` / ``src`` values and its element ids."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name == "id":
                self.ids.add(value)
            elif name in ("href", "src") and not (tag == "link" and ("rel", "canonical") in attrs):
                self.links.append(value)


def parse_page(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def internal_link_problems(site: Path) -> list[str]:
    """Every relative link of every built page that leads nowhere: to a
    file that was not built, or to an anchor the target page lacks."""
    pages = {p: parse_page(p) for p in site.rglob("*.html")}
    problems = []
    for page, parsed in sorted(pages.items()):
        here = "file://" + page.as_posix()
        for link in parsed.links:
            if urlsplit(link).scheme or link.startswith("//"):
                continue  # external: http(s), mailto, data, javascript
            # An absolute path (404.html uses them) is relative to the site root.
            base = "file://" + site.as_posix() + "/" if link.startswith("/") else here
            url, fragment = urldefrag(urljoin(base, link.lstrip("/") if link.startswith("/") else link))
            target = Path(unquote(urlsplit(url).path))
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(site).as_posix()}: {link}"
            if not target.is_file():
                problems.append(f"{where} (no such file)")
            elif fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse_page(target).ids
                if unquote(fragment) not in ids:
                    problems.append(f"{where} (no anchor #{fragment})")
    return problems


def test_every_internal_link_leads_to_a_page_and_anchor(site):
    problems = internal_link_problems(site)
    assert not problems, "broken internal links:\n" + "\n".join(problems)


@pytest.mark.unit
def test_link_checker_finds_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2><a href="#here">ok</a><a href="../b/">ok</a>'
                                              '<a href="../missing/">bad</a><a href="../b/#nowhere">bad</a><a href="https://x.org/">ext</a>')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "index.html").write_text('<p id="there">b</p>')
    assert internal_link_problems(tmp_path) == ["a/index.html: ../missing/ (no such file)", "a/index.html: ../b/#nowhere (no anchor #nowhere)"]


@pytest.mark.unit
def test_api_reference_renders_the_public_names_only():
    """docs/api.md has a ``::: kclient.<Name>`` for every name `kclient`
    exports, and renders nothing but names exported by ``kclient``,
    ``kclient.testing`` or ``kclient.spark`` (no internal module)."""
    import kclient
    import kclient.testing

    spark_names = set(re.findall(r'"(\w+)"', re.search(r"__all__ = \[(.*?)\]", (ROOT / "kclient/spark/__init__.py").read_text(), re.S)[1]))
    public = {f"kclient.{n}" for n in kclient.__all__} | {f"kclient.testing.{n}" for n in kclient.testing.__all__} | {f"kclient.spark.{n}" for n in spark_names}
    rendered = re.findall(r"^::: ([\w.]+)", (ROOT / "docs" / "api.md").read_text(), re.M)
    assert len(rendered) == len(set(rendered)), "a name is rendered twice"
    assert not set(rendered) - public, f"api.md renders non-public objects: {sorted(set(rendered) - public)}"
    missing = {f"kclient.{n}" for n in kclient.__all__ if n not in ("BrokerProcess", "ZooKeeperProcess")} - set(rendered)
    assert not missing, f"api.md does not render: {sorted(missing)}"
    assert {"kclient.testing.BrokerProcess", "kclient.testing.ZooKeeperProcess"} <= set(rendered)


@pytest.mark.unit
def test_home_page_does_not_promise_what_exists():
    home = (ROOT / "docs" / "index.md").read_text()
    assert "later release" not in home
    assert "ConsumerConnector" in home and "quickstart.md" in home


def test_no_built_page_shows_a_raw_sphinx_role(site):
    found = []
    for page in sorted(site.rglob("*.html")):
        text = page.read_text(encoding="utf-8", errors="replace")
        for m in RAW_ROLE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{page.relative_to(site).as_posix()}:{line}: :{m[1]}:")
    assert not found, "raw Sphinx roles in the built site:\n" + "\n".join(found)


@pytest.mark.unit
def test_role_pattern_matches_what_markdown_makes_of_a_role():
    assert RAW_ROLE.search(":class:`Foo`")[1] == "class"
    assert RAW_ROLE.search("see :meth:<code>Foo.bar</code>")[1] == "meth"
    assert not RAW_ROLE.search("a key:value pair, a class: Foo")


@pytest.mark.unit
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
