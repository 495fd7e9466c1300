"""A transaction's state as ``__transaction_state`` records, and back
(Kafka's ``TransactionLog.keyToBytes`` / ``valueToBytes`` /
``readTxnRecordValue``).

The value of a transition lists the transaction's partitions grouped by
topic (sorted here, so that the bytes do not depend on set order), null in
state Empty. Read back, a value gives a `TransactionMetadata` whose last
epoch is unknown (-1), as Kafka's loader sets it.

Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict

from kclient.broker.txn.metadata import NO_PRODUCER_EPOCH, IllegalTransitionError, TransactionMetadata, TransactionState, TxnTransitMetadata
from kclient.protocol.messages.transaction_log import VALUE_VERSION, TransactionLogPartitions, TransactionLogValue, encode_key, encode_value


def transit_to_value(transit: TxnTransitMetadata) -> TransactionLogValue:
    """The record value of a transition.

    Args:
        transit: The prepared transition.

    Returns:
        The value.

    Raises:
        IllegalTransitionError: State Empty with partitions (Kafka refuses
            to write it).
    """
    if transit.txn_state == TransactionState.EMPTY and transit.topic_partitions:
        raise IllegalTransitionError(f"state Empty with partitions {sorted(transit.topic_partitions)}")
    partitions = None
    if transit.txn_state != TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in transit.topic_partitions:
            by_topic[topic].append(partition)
        partitions = [TransactionLogPartitions(topic=t, partition_ids=sorted(ps)) for t, ps in sorted(by_topic.items())]
    return TransactionLogValue(
        producer_id=transit.producer_id,
        previous_producer_id=transit.prev_producer_id,
        next_producer_id=transit.next_producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=int(transit.txn_state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp,
        client_transaction_version=transit.client_transaction_version,
    )


def record_for(transactional_id: str, transit: TxnTransitMetadata, version: int = VALUE_VERSION) -> tuple[bytes, bytes]:
    """The ``__transaction_state`` record of a transition.

    Args:
        transactional_id: The transaction's id.
        transit: The prepared transition.
        version: The value version (1; 0 for Kafka's transactions v0).

    Returns:
        ``(key, value)``.

    Raises:
        IllegalTransitionError: See `transit_to_value`.
    """
    return encode_key(transactional_id), encode_value(transit_to_value(transit), version)


def tombstone_for(transactional_id: str) -> tuple[bytes, None]:
    """The tombstone of an expired transactional id.

    Args:
        transactional_id: The id.

    Returns:
        ``(key, None)``.
    """
    return encode_key(transactional_id), None


def metadata_from_value(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The metadata a record value gives when the log is loaded.

    Args:
        transactional_id: The record key's id.
        value: The decoded value.

    Returns:
        The metadata (no pending state; last epoch -1; partitions only
        outside state Empty).

    Raises:
        IllegalTransitionError: An unknown state id.
    """
    state = TransactionState.from_id(value.transaction_status)
    md = TransactionMetadata(
        transactional_id,
        value.producer_id,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        producer_epoch=value.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=value.transaction_timeout_ms,
        state=state,
        txn_start_timestamp=value.transaction_start_timestamp_ms,
        txn_last_update_timestamp=value.transaction_last_update_timestamp_ms,
        client_transaction_version=value.client_transaction_version,
    )
    if state != TransactionState.EMPTY:
        for entry in value.transaction_partitions or ():
            md.add_partitions((entry.topic, p) for p in entry.partition_ids)
    return md


__all__ = ["metadata_from_value", "record_for", "tombstone_for", "transit_to_value"]
