"""Hypothesis example counts that follow the kind of run.

``make test`` runs every property test with its full count. A quick run
(``pytest -m unit``, or any run with ``KCLIENT_QUICK=1``) loads the
`QUICK_PROFILE` Hypothesis profile (tests/conftest.py registers and loads
it), which runs `QUICK_EXAMPLES` examples per property test. A test that
sets its own count takes it through `examples`, so that the quick profile
lowers it too::

    @settings(max_examples=examples(400), deadline=None)
"""

from __future__ import annotations

import os

from hypothesis import settings

#: The Hypothesis profile of quick runs.
QUICK_PROFILE = "quick"
#: Examples per property test in a quick run.
QUICK_EXAMPLES = 20


def quick_run(markexpr: str | None) -> bool:
    """Whether a run is quick.

    Args:
        markexpr: The run's ``-m`` expression (None or ``""`` without one).

    Returns:
        True for ``-m unit`` or when ``KCLIENT_QUICK=1`` is set.
    """
    return os.environ.get("KCLIENT_QUICK") == "1" or (markexpr or "").strip() == "unit"


def examples(full: int) -> int:
    """A property test's example count for this run.

    Args:
        full: The count of a full run (``make test``).

    Returns:
        ``full``; under the quick profile at most its ``max_examples``.
    """
    if settings.get_current_profile_name() == QUICK_PROFILE:
        return min(full, settings().max_examples)
    return full
