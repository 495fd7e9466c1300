"""Which implementation of the per-record loops runs: compiled or pure Python.

kclient ships a Cython module, `kclient._speedups`, with compiled versions
of its hottest per-record loops (encoding and decoding v2 records,
murmur2). It is optional: the package installs and works without a C
compiler, and every compiled function has a pure-Python twin that the test
suite compares it with.

``speedups`` is that module, or None when kclient runs pure Python: when it
was not built, or when the environment variable ``KCLIENT_PURE_PYTHON`` is
set to anything but ``""`` or ``"0"`` when kclient is first imported (the
test suite runs once that way). The choice is logged at DEBUG on the
``kclient.accel`` logger.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

__all__ = ["PURE_PYTHON_ENV", "speedups"]

log = logging.getLogger("kclient.accel")

#: The environment variable that forces the pure-Python path.
PURE_PYTHON_ENV = "KCLIENT_PURE_PYTHON"


def _load() -> ModuleType | None:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        log.debug("%s is set: kclient runs its pure-Python record encoding and decoding", PURE_PYTHON_ENV)
        return None
    try:
        from kclient import _speedups
    except ImportError as exc:
        log.debug("kclient._speedups is not built (%s): kclient runs its pure-Python record encoding and decoding", exc)
        return None
    log.debug("kclient._speedups loaded: compiled record encoding and decoding")
    module: ModuleType = _speedups
    return module


#: The compiled module, or None for the pure-Python path.
speedups: ModuleType | None = _load()
