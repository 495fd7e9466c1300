"""The broker process's garbage collector settings (issue 28).

A Produce or Fetch of many partitions makes a few objects per partition
(the request's and the response's per-partition entries, the append's
batch facts) that live until the response is sent. With CPython's default
young-generation threshold (700 container allocations) a request of 2,048
partitions survives dozens of young collections, so its short-lived
objects are promoted to the oldest generation, and every few requests a
full collection walks the broker's whole heap (every hosted partition's
log, segments and indexes): measured with
``benchmarks/broker_partitions.py``, about 3 µs of broker CPU per partition
entry of such a request, 10-20 % of its cost.

Kafka's broker runs on the JVM, whose young generation is sized to hold a
request's garbage (G1 sizes it to its pause goal). `tune_gc` does the same
for the CPython broker: a young generation large enough for a request's
objects to die there, the older generations' ratios left as CPython sets
them. Cyclic garbage is still collected, a little later.
"""

from __future__ import annotations

import gc

#: Container objects allocated (net) between young collections: room for
#: the per-partition objects of a request of a few thousand partitions.
YOUNG_GENERATION_THRESHOLD = 50_000


def tune_gc() -> tuple[int, ...]:
    """Set the collector's thresholds for a broker process (see the module
    docstring): the young generation's to `YOUNG_GENERATION_THRESHOLD`
    unless it is already larger, the others unchanged. Process-wide: call it
    from the broker's entry point, not from a library.

    Returns:
        The thresholds before (``gc.get_threshold()``).
    """
    before = gc.get_threshold()
    young, *older = before
    gc.set_threshold(max(young, YOUNG_GENERATION_THRESHOLD), *older)
    return before


__all__ = ["YOUNG_GENERATION_THRESHOLD", "tune_gc"]
