"""Request handlers of the transaction APIs (KIP-98, KIP-664):
FindCoordinator for a transactional id (key type 1), InitProducerId with
a transactional id, AddPartitionsToTxn v0-3, AddOffsetsToTxn v0-3,
EndTxn v0-4, DescribeTransactions v0 and ListTransactions v0-1.

Each takes the request header and message and returns the response
message; the semantics are
`kclient.broker.txn.transaction_coordinator.TransactionCoordinator`'s, the
I/O `kclient.broker.txn.service.TransactionService`'s. Error codes are
those the request's version understands
(`kclient.broker.txn.coordinator.error_for_version`: PRODUCER_FENCED
becomes INVALID_PRODUCER_EPOCH for older clients, KIP-588).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from kclient.broker.txn.coordinator import error_for_version
from kclient.broker.txn.state_log import TRANSACTION_STATE_TOPIC
from kclient.errors import COORDINATOR_NOT_AVAILABLE, NONE, OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_OR_PARTITION, KafkaError
from kclient.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kclient.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kclient.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeTransactionsState,
    DescribeTransactionsTopicData,
)
from kclient.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kclient.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kclient.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kclient.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse, ListTransactionsState

if TYPE_CHECKING:
    from kclient.broker.meta import ProducerIdAllocator
    from kclient.broker.metadata_cache import MetadataCache
    from kclient.broker.txn.service import TransactionService
    from kclient.protocol.connection import RequestHeader

log = logging.getLogger("kclient.broker.txn")

#: API keys, for `error_for_version`.
INIT_PRODUCER_ID_KEY, ADD_PARTITIONS_TO_TXN_KEY, ADD_OFFSETS_TO_TXN_KEY, END_TXN_KEY = 22, 24, 25, 26


class TransactionApis:
    """The transaction API handlers (see the module docstring).

    Args:
        service: The broker's transaction coordinator.
        metadata_cache: The leaders of ``__transaction_state``.
        broker_id: This broker's id.
        producer_ids: The broker's producer id allocator (its blocks are
            claimed before a new id is needed).
    """

    def __init__(self, service: TransactionService, metadata_cache: MetadataCache, broker_id: int, producer_ids: ProducerIdAllocator) -> None:
        self.service = service
        self.coordinator = service.coordinator
        self.metadata_cache = metadata_cache
        self.broker_id = broker_id
        self.producer_ids = producer_ids

    async def find_coordinator(self, body: FindCoordinatorRequest, address: tuple[str, int], listener: str | None) -> FindCoordinatorResponse:
        """FindCoordinator key type 1: the leader of the id's
        ``__transaction_state`` partition (the topic created on first use);
        COORDINATOR_NOT_AVAILABLE while it has no live leader.

        Args:
            body: The request.
            address: This broker's address on the request's listener.
            listener: The request's listener name.

        Returns:
            The response.
        """

        def answer(code: int, node_id: int = -1, host: str = "", port: int = -1, message: str | None = None) -> FindCoordinatorResponse:
            return FindCoordinatorResponse(error_code=code, error_message=message, node_id=node_id, host=host, port=port)

        code = await self.service.state_log.ensure_topic()
        if code != NONE:
            return answer(code, message=f"{TRANSACTION_STATE_TOPIC} is being created")
        index = self.coordinator.manager.partition_for(body.key)
        meta = self.metadata_cache.partition(TRANSACTION_STATE_TOPIC, index)
        if meta is None or meta.leader < 0:
            return answer(COORDINATOR_NOT_AVAILABLE, message=f"{TRANSACTION_STATE_TOPIC}-{index} has no leader")
        if meta.leader == self.broker_id:
            return answer(NONE, self.broker_id, *address)
        node = self.metadata_cache.brokers.get(meta.leader)
        ep = None if node is None else (node.endpoint(listener) or node.endpoint(None))
        if ep is None:
            return answer(COORDINATOR_NOT_AVAILABLE, message=f"broker {meta.leader} is not alive")
        return answer(NONE, meta.leader, ep.host, ep.port)

    async def init_producer_id(self, header: RequestHeader, body: InitProducerIdRequest) -> InitProducerIdResponse:
        """InitProducerId v0-4 with a transactional id (KIP-98; v3+ the
        KIP-360 epoch bump by producer id and epoch): the id's producer id
        with the next epoch, fencing the previous producer and aborting its
        open transaction (CONCURRENT_TRANSACTIONS until that abort is
        complete; the producer retries)."""
        if self.producer_ids.needs_block and self.producer_ids.zk is not None:
            try:
                await trio.to_thread.run_sync(self.producer_ids.ensure_block)
            except KafkaError as exc:
                log.warning("InitProducerId: %s", exc)
                return InitProducerIdResponse(error_code=COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
        step = self.coordinator.init_producer_id(body.transactional_id, body.transaction_timeout_ms, body.producer_id, body.producer_epoch)
        decision = await self.service.execute(step)
        error = error_for_version(INIT_PRODUCER_ID_KEY, header.api_version, decision.error)
        if error != NONE:
            return InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)
        log.debug("InitProducerId for %r: producer id %d epoch %d", body.transactional_id, decision.producer_id, decision.producer_epoch)
        return InitProducerIdResponse(error_code=NONE, producer_id=decision.producer_id, producer_epoch=decision.producer_epoch)

    async def add_partitions_to_txn(self, header: RequestHeader, body: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
        """AddPartitionsToTxn v0-3: every partition gets the request's error;
        with a partition this cluster does not have, none is added (it gets
        UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED), as
        Kafka answers."""
        partitions = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        unknown = {tp for tp in partitions if self.metadata_cache.partition(*tp) is None}
        if unknown:
            errors = {tp: UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else OPERATION_NOT_ATTEMPTED for tp in partitions}
        else:
            step = self.coordinator.add_partitions_to_txn(body.v3_and_below_transactional_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch, partitions)
            decision = await self.service.execute(step)
            errors = dict.fromkeys(partitions, error_for_version(ADD_PARTITIONS_TO_TXN_KEY, header.api_version, decision.error))
        results = [
            AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=[AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=errors[(t.name, p)]) for p in t.partitions],
            )
            for t in body.v3_and_below_topics
        ]
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=results)

    async def add_offsets_to_txn(self, header: RequestHeader, body: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
        """AddOffsetsToTxn v0-3: adds the group's ``__consumer_offsets`` partition."""
        step = self.coordinator.add_offsets_to_txn(body.transactional_id, body.producer_id, body.producer_epoch, body.group_id)
        decision = await self.service.execute(step)
        return AddOffsetsToTxnResponse(error_code=error_for_version(ADD_OFFSETS_TO_TXN_KEY, header.api_version, decision.error))

    async def end_txn(self, header: RequestHeader, body: EndTxnRequest) -> EndTxnResponse:
        """EndTxn v0-4: answered once PrepareCommit / PrepareAbort is
        written; the markers and the completion follow."""
        step = self.coordinator.end_txn(body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
        decision = await self.service.execute(step)
        return EndTxnResponse(error_code=error_for_version(END_TXN_KEY, header.api_version, decision.error))

    async def describe_transactions(self, header: RequestHeader, body: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
        """DescribeTransactions v0 (KIP-664)."""
        states = [
            DescribeTransactionsState(
                error_code=d.error,
                transactional_id=d.transactional_id,
                transaction_state=d.state,
                transaction_timeout_ms=d.transaction_timeout_ms,
                transaction_start_time_ms=d.transaction_start_time_ms,
                producer_id=d.producer_id,
                producer_epoch=d.producer_epoch,
                topics=[DescribeTransactionsTopicData(topic=t, partitions=ps) for t, ps in sorted(d.topics.items())],
            )
            for d in self.coordinator.describe(body.transactional_ids)
        ]
        return DescribeTransactionsResponse(transaction_states=states)

    async def list_transactions(self, header: RequestHeader, body: ListTransactionsRequest) -> ListTransactionsResponse:
        """ListTransactions v0-1 (KIP-664; v1 the duration filter, KIP-994)."""
        result = self.coordinator.manager.list_transactions(body.producer_id_filters, body.state_filters, body.duration_filter)
        states = [ListTransactionsState(transactional_id=t.transactional_id, producer_id=t.producer_id, transaction_state=t.state) for t in result.transactions]
        return ListTransactionsResponse(error_code=result.error, unknown_state_filters=result.unknown_state_filters, transaction_states=states)


__all__ = ["TransactionApis"]
