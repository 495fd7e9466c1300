"""``make test-pure`` reruns only the tests of the code that has a compiled
twin (``PURE_TESTS`` in the Makefile). These checks keep that list honest:
every file it names exists, and every kclient module that chooses between
the compiled and the pure path (it imports ``kclient._accel``) is one whose
tests the list was written for. A new such module fails here until its
tests join the list and the module joins ``_COVERED``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent

#: The modules that pick a compiled or pure implementation, each with the
#: test module of PURE_TESTS that runs its pure path.
_COVERED = {
    "kclient/client/consumer/fetcher.py": "tests/test_consumer_fetcher.py",
    "kclient/client/consumer/chunk.py": "tests/test_consumer_streams.py",
    "kclient/client/consumer/message_set.py": "tests/test_message_set.py",
    "kclient/client/consumer/statistics.py": "tests/test_consumer_statistics.py",
    "kclient/client/producer/accumulator.py": "tests/test_accumulator.py",
    "kclient/client/producer/data.py": "tests/test_producer.py",
    "kclient/client/producer/event_handler.py": "tests/test_producer.py",
    "kclient/client/producer/partitioner.py": "tests/test_partitioner.py",
    "kclient/client/producer/producer.py": "tests/test_producer.py",
    "kclient/client/producer/queue.py": "tests/test_producer.py",
    "kclient/client/producer/routing.py": "tests/test_accumulator.py",
    "kclient/protocol/connection.py": "tests/test_protocol.py",
    "kclient/protocol/records/rows.py": "tests/test_protocol.py",
    "kclient/protocol/records/v2.py": "tests/test_protocol.py",
}


def _pure_tests() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    match = re.search(r"^PURE_TESTS\s*:=\s*((?:.*\\\n)*.*)$", text, re.MULTILINE)
    assert match, "the Makefile defines no PURE_TESTS"
    return match.group(1).replace("\\\n", " ").split()


def _imports_accel(path: Path) -> bool:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module == "kclient._accel" or (node.module == "kclient" and any(a.name == "_accel" for a in node.names))):
            return True
        if isinstance(node, ast.Import) and any(a.name == "kclient._accel" for a in node.names):
            return True
    return False


def test_every_pure_test_file_exists():
    files = _pure_tests()
    assert "tests/test_speedups.py" in files
    missing = [f for f in files if not (ROOT / f).is_file()]
    assert not missing, f"PURE_TESTS names files that do not exist: {missing}"


def test_every_module_with_a_compiled_twin_has_its_tests_in_pure_tests():
    users = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "kclient").rglob("*.py") if _imports_accel(p))
    assert users, "no module imports kclient._accel: the scan is broken"
    unknown = [u for u in users if u not in _COVERED]
    assert not unknown, f"these modules choose a compiled path but their tests are not known to be in PURE_TESTS: {unknown}; add their tests to the Makefile's PURE_TESTS and the modules to _COVERED"
    listed = set(_pure_tests())
    absent = sorted({t for m, t in _COVERED.items() if m in users and t not in listed})
    assert not absent, f"PURE_TESTS lacks {absent}"
