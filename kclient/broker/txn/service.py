"""The transaction coordinator of a running broker: the pure
`kclient.broker.txn.transaction_coordinator.TransactionCoordinator` with
its I/O (`kclient.broker.txn.state_log.TransactionStateLog`,
`kclient.broker.txn.marker_channel.TransactionMarkerChannel`) and its
timers, in Kafka's call order:

- a request's step: write its record (acks=all), then
  `TransactionCoordinator.after_write` gives the answer and, for EndTxn
  and aborts, the markers, which the marker channel writes;
- every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``:
  abort the transactions older than their timeout (fencing the producer's
  epoch), then write their markers;
- every ``transaction.remove.expired.transaction.cleanup.interval.ms``:
  tombstone the ids idle past ``transactional.id.expiration.ms``.

Trio-thread only: the coordinator's methods run between awaits, so one at
a time, as Kafka holds the metadata's lock.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from kclient.broker.txn.coordinator import TxnDecision
from kclient.broker.txn.marker_channel import TransactionMarkerChannel
from kclient.broker.txn.state_log import TransactionStateLog
from kclient.broker.txn.state_manager import TransactionStateManager
from kclient.broker.txn.transaction_coordinator import TransactionCoordinator, TxnStep

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from kclient.broker.metadata_cache import MetadataCache
    from kclient.broker.state import TopicOverrides
    from kclient.broker.topic_admin import TopicAdmin
    from kclient.config import BrokerConfig

log = logging.getLogger("kclient.broker.txn")


class TransactionService:
    """One broker's transaction coordinator at work (see the module
    docstring). The replica manager calls ``state_log.leadership_changed``;
    run `run` in the broker's nursery.

    Args:
        config: The broker's configuration (``transaction.*``).
        broker_id: This broker's id.
        metadata_cache: The cluster's partitions and brokers.
        topic_admin: Creates ``__transaction_state``.
        topic_overrides: Its topic configs.
        allocate_producer_id: Gives a new, unused producer id.
        clock: The wall clock in ms.
    """

    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        metadata_cache: MetadataCache,
        topic_admin: TopicAdmin,
        topic_overrides: TopicOverrides,
        allocate_producer_id: Callable[[], int],
        *,
        clock: Callable[[], int],
    ) -> None:
        self.config = config
        manager = TransactionStateManager(
            config.transaction_state_log_num_partitions,
            clock=clock,
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        )
        self.coordinator = TransactionCoordinator(
            manager,
            allocate_producer_id,
            max_timeout_ms=config.transaction_max_timeout_ms,
            offsets_topic_partitions=config.offsets_topic_num_partitions,
        )
        self.state_log = TransactionStateLog(config, metadata_cache, topic_admin, topic_overrides, self.coordinator, clock=clock)
        self.markers = TransactionMarkerChannel(
            self.coordinator,
            metadata_cache,
            self.state_log.append,
            listener=config.inter_broker_listener_name,
            broker_id=broker_id,
            request_timeout_ms=config.offsets_commit_timeout_ms,
        )
        self.state_log.on_markers.append(self.markers.write_markers)

    async def execute(self, step: TxnStep) -> TxnDecision:
        """Carry a request's step out: write its record if it has one, then
        start its markers.

        Args:
            step: The coordinator's step.

        Returns:
            The decision to answer with.
        """
        if step.write is None:
            return step.answer
        error = await self.state_log.append(step.write)
        decision = self.coordinator.after_write(step.write, error)
        if decision.markers is not None:
            self.markers.write_markers(decision.markers, step.write.coordinator_epoch)
        return decision

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the loading, the marker channel and the timers until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.markers.run)
            await nursery.start(self.state_log.run)
            nursery.start_soon(self._every, self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms, self.abort_timed_out_transactions)
            nursery.start_soon(self._every, self.config.transaction_remove_expired_transaction_cleanup_interval_ms, self.expire_transactional_ids)
            task_status.started()

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[int]]) -> None:
        while True:
            await trio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:
                log.exception("transaction coordinator timer failed")

    async def abort_timed_out_transactions(self) -> int:
        """Abort the transactions older than their timeout (their markers
        are written next).

        Returns:
            How many aborts were written.
        """
        written = 0
        for write in self.coordinator.abort_timed_out_transactions():
            log.info("transaction %r timed out: aborting it", write.transactional_id)
            decision = await self.execute(TxnStep(write.decision, write))
            written += decision.markers is not None
        return written

    async def expire_transactional_ids(self) -> int:
        """Tombstone the ids idle past ``transactional.id.expiration.ms``.

        Returns:
            How many were removed.
        """
        removed = 0
        for write in self.coordinator.expire_transactional_ids():
            error = await self.state_log.append(write)
            self.coordinator.after_expiration_write(write, error)
            removed += error == 0
        return removed


__all__ = ["TransactionService"]
