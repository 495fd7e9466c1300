"""The ``unit`` marker stays true.

``pytest -m unit`` runs, in seconds, the tests that start no process (no
broker, ZooKeeper, Apache Kafka, Spark, peer client) and open no network
connection. A test is marked by its module (``pytestmark``) or by its own
``@pytest.mark.unit``. These checks read every test module's source: no
test marked unit asks, itself or through the fixtures it uses (the
module's, tests/conftest.py's, tests/conformance/conftest.py's), for a
fixture that starts a process: `conftest.PROCESS_FIXTURES`, or a module
fixture that starts a broker, a cluster or a subprocess. When a unit test
runs, tests/conftest.py checks its fixtures again and refuses its sockets
and subprocesses.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import PROCESS_FIXTURES

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parent
#: A fixture whose source says one of these starts a process.
STARTS_A_PROCESS = re.compile(r"\b(BrokerProcess|ZooKeeperProcess|KafkaProcess|Cluster|ThreeBrokers|subprocess|Popen)\b")


def _is_unit_mark(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "unit" and ast.unparse(node) == "pytest.mark.unit"


def _marks_unit(value: ast.expr) -> bool:
    """Whether a ``pytestmark`` value is or lists ``pytest.mark.unit``."""
    items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    return any(_is_unit_mark(item) for item in items)


def _fixtures(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any("fixture" in ast.unparse(d) for d in node.decorator_list)
    }


def _conftest_fixtures() -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    found = {}
    for path in (TESTS / "conftest.py", TESTS / "conformance" / "conftest.py"):
        found.update(_fixtures(ast.parse(path.read_text())))
    return found


def _closure(names, fixtures, seen: set[str]) -> set[str]:
    """``names`` and every fixture they ask for, transitively."""
    out: set[str] = set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        out.add(name)
        node = fixtures.get(name)
        if node is not None:
            out |= _closure([a.arg for a in node.args.args], fixtures, seen)
    return out


def _module_is_unit(tree: ast.Module) -> bool:
    """Whether the module's ``pytestmark`` marks every test unit."""
    return any(
        isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets) and _marks_unit(node.value)
        for node in tree.body
    )


def _unit_tests(tree: ast.Module):
    """The test functions of a module that are marked unit."""
    module_unit = _module_is_unit(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
            if module_unit or any(_is_unit_mark(d) for d in node.decorator_list):
                yield node


def unit_tests_using_processes() -> tuple[list[str], int]:
    """``(offenders, unit tests seen)``: every test marked unit whose
    fixtures start a process, as ``"module::test: fixtures"``."""
    shared = _conftest_fixtures()
    offenders: list[str] = []
    seen_units = 0
    for path in sorted(TESTS.rglob("test_*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        own = _fixtures(tree)
        fixtures = {**shared, **own}
        starting = set(PROCESS_FIXTURES) | {name for name, node in own.items() if STARTS_A_PROCESS.search(ast.get_source_segment(source, node) or "")}
        autouse = [name for name, node in own.items() if "autouse=True" in "".join(ast.unparse(d) for d in node.decorator_list)]
        for node in _unit_tests(tree):
            seen_units += 1
            used = _closure([a.arg for a in node.args.args] + autouse, fixtures, set()) & starting
            if used:
                offenders.append(f"{path.relative_to(TESTS)}::{node.name}: {sorted(used)}")
    return offenders, seen_units


def test_no_unit_test_uses_a_fixture_that_starts_a_process():
    offenders, seen = unit_tests_using_processes()
    assert seen > 100, f"only {seen} unit tests found: the scan is broken"
    assert not offenders, "tests marked unit that start processes (drop their unit marker):\n" + "\n".join(offenders)


def test_the_scan_sees_module_marks_decorators_and_fixture_chains(tmp_path, monkeypatch):
    (tmp_path / "conformance").mkdir()
    (tmp_path / "conftest.py").write_text("import pytest\n@pytest.fixture\ndef broker():\n    yield 1\n")
    (tmp_path / "conformance" / "conftest.py").write_text("")
    (tmp_path / "test_marked_module.py").write_text(
        "import pytest\npytestmark = [pytest.mark.timeout(5), pytest.mark.unit]\n"
        "@pytest.fixture\ndef client(broker):\n    return broker\n"
        "def test_pure():\n    pass\n"
        "def test_through_a_fixture(client):\n    pass\n"
    )
    (tmp_path / "test_marked_tests.py").write_text(
        "import pytest\n"
        "@pytest.fixture\ndef own_cluster():\n    with Cluster() as c:\n        yield c\n"
        "@pytest.mark.unit\ndef test_own_process(own_cluster):\n    pass\n"
        "def test_not_marked(broker):\n    pass\n"
    )
    monkeypatch.setattr(__import__(__name__), "TESTS", tmp_path)
    offenders, seen = unit_tests_using_processes()
    assert seen == 3
    assert offenders == [
        "test_marked_module.py::test_through_a_fixture: ['broker']",
        "test_marked_tests.py::test_own_process: ['own_cluster']",
    ]


def test_the_marker_is_registered(pytestconfig):
    assert any(line.startswith("unit:") for line in pytestconfig.getini("markers"))
