"""What a read_committed reader skips in fetched record batches (KIP-98):
the rule lives in `kclient.protocol.records.read_committed`, where the
consumers use it too; re-exported here for the broker's code and tests."""

from __future__ import annotations

from kclient.protocol.records.read_committed import (
    ABORTED,
    CONTROL,
    UNSTABLE,
    VISIBLE,
    AbortedTransactionFilter,
    BatchDecision,
    committed_batches,
    decide_batches,
)

__all__ = [
    "ABORTED",
    "CONTROL",
    "UNSTABLE",
    "VISIBLE",
    "AbortedTransactionFilter",
    "BatchDecision",
    "committed_batches",
    "decide_batches",
]
