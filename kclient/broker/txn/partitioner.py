"""Which partition of ``__transaction_state`` holds a transactional id.

Kafka's ``TransactionStateManager.partitionFor``:
``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``
(Java's ``String.hashCode`` over the id's UTF-16 code units; ``Utils.abs``
maps ``Integer.MIN_VALUE`` to 0 where ``Math.abs`` would leave it
negative). The leader of that partition is the id's transaction
coordinator (FindCoordinator with key type 1, KIP-98).

Pure: no I/O.
"""

from __future__ import annotations

from kclient.broker.group.records import java_string_hash

#: ``transaction.state.log.num.partitions``'s default.
DEFAULT_NUM_PARTITIONS = 50

_INT_MIN = -(1 << 31)


def java_utils_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` of a Java int: ``abs(n)``, but 0 for
    ``Integer.MIN_VALUE`` (-2**31), whose ``Math.abs`` overflows.

    Args:
        n: A signed 32-bit int.

    Returns:
        A non-negative int.
    """
    return 0 if n == _INT_MIN else abs(n)


def partition_for(transactional_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``.

    Args:
        transactional_id: The producer's ``transactional.id``.
        num_partitions: ``transaction.state.log.num.partitions`` (the
            partition count of ``__transaction_state``).

    Returns:
        The partition index, in 0 .. ``num_partitions`` - 1.

    Raises:
        ValueError: ``num_partitions`` is not positive.
    """
    if num_partitions <= 0:
        raise ValueError(f"transaction.state.log.num.partitions must be positive, not {num_partitions}")
    return java_utils_abs(java_string_hash(transactional_id)) % num_partitions


__all__ = ["DEFAULT_NUM_PARTITIONS", "java_utils_abs", "partition_for"]
