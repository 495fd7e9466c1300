"""No import circles between kclient's files.

The graph has one edge per import of one kclient module by another, at any
depth of the file: module level, inside functions (deferred imports) and
under ``if TYPE_CHECKING:`` all count, since each is a file that needs the
other. ``from kclient.a import b`` is an edge to ``kclient/a/b.py`` when
that file exists, else to ``kclient/a/__init__.py``; the implicit import
of a package's ``__init__`` when one of its modules is imported is not an
edge (every package would otherwise form a circle with its children), and
neither is an import of the compiled ``kclient._speedups``.

Circles are the strongly connected components of that graph with more than
one file. ``_KNOWN_CIRCLES`` lists those issue 26 found and has yet to
remove: a new circle, or a known one that grows, fails here, and so does an
entry that no longer exists (the list only shrinks, to empty).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kclient"

#: Circles that exist today (issue 26 removes them), each the set of its files.
_KNOWN_CIRCLES: list[frozenset[str]] = [
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """``{module: the kclient modules it imports}`` (see the module docstring)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    compiled = {_module_name(p.with_suffix(".py")) for p in PACKAGE.rglob("*.pyx")}

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "kclient"]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != "kclient":
                    continue
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in files or f"{source}.{a.name}" in compiled else source for a in node.names]
            else:
                continue
            for target in targets:
                if target in compiled:
                    continue
                found = owner(target)
                if found is not None and found != module:
                    graph[module].add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of ``graph`` with two or more
    modules (Tarjan's algorithm)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_deferred_and_type_checking_imports():
    graph = import_graph()
    assert len(graph) > 100
    # A known edge of each kind: module level, and (in the circles above)
    # deferred ones; the scan must see all of them.
    assert "kclient.errors" in graph["kclient.protocol.schema"]
    found = circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert found == [frozenset({"a", "b", "c"})]


def test_no_new_import_circles():
    found = circles(import_graph())
    new = [sorted(c) for c in found if not any(c <= known for known in _KNOWN_CIRCLES)]
    assert not new, f"import circles between kclient's files: {new}"


def test_the_known_circles_are_still_there():
    """An entry of ``_KNOWN_CIRCLES`` that is gone, or smaller, is removed or
    narrowed (the list is a ratchet)."""
    found = circles(import_graph())
    stale = [sorted(known) for known in _KNOWN_CIRCLES if known not in found]
    assert not stale, f"these circles are gone or smaller: update _KNOWN_CIRCLES to what remains: {stale}"
