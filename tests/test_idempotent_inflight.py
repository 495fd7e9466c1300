"""The idempotent producer with several batches of a partition in flight
(``max.in.flight.requests.per.connection`` up to 5 with
``enable.idempotence=true``, as Kafka's producer since 1.0, KAFKA-5494),
against a scripted leader: no process, no socket.

The scripted leader checks sequences as Kafka's broker does
(kclient/storage/producer_state.py): it appends a batch whose base sequence
follows the last one appended for its producer id, answers
DUPLICATE_SEQUENCE_NUMBER for one of the last 5 it appended, and
OUT_OF_ORDER_SEQUENCE_NUMBER otherwise; a script injects error codes for
given (base sequence, attempt) pairs before that check (nothing appended).
The tests check the ordering rules: retries resent in sequence order with
the same sequences and bytes, OUT_OF_ORDER behind a failed batch retried
after it, a final failure dooming the later batches of its partition, at
most ``max_in_flight`` batches unacknowledged per partition.
"""

from __future__ import annotations

import itertools
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from kclient.client.producer.data import ProducerData
from kclient.client.producer.event_handler import DefaultEventHandler, ProducerContext
from kclient.client.producer.idempotence import MAX_IN_FLIGHT
from kclient.client.producer.settings import ProducerSettings
from kclient.config import ProducerConfig
from kclient.errors import (
    DUPLICATE_SEQUENCE_NUMBER,
    MESSAGE_TOO_LARGE,
    NOT_LEADER_OR_FOLLOWER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    REQUEST_TIMED_OUT,
    ConfigError,
    FailedToSendMessageError,
    MessageSizeTooLargeError,
)
from kclient.protocol.messages import INIT_PRODUCER_ID
from kclient.protocol.messages.init_producer_id import InitProducerIdResponse
from kclient.protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from kclient.protocol.records import iter_record_set
from kclient.protocol.records.v2 import read_header

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("autojump_clock")]


class _Handle:
    def __init__(self, leader: ScriptedLeader, code: int, base_offset: int) -> None:
        self.leader = leader
        self.code = code
        self.base_offset = base_offset

    async def wait(self, timeout_ms: int | None = None) -> ProduceResponse:
        await trio.sleep(0.01)  # the network's round trip (virtual time: the tests run on an autojump clock)
        self.leader.outstanding -= 1
        pr = PartitionProduceResponse(index=0, error_code=self.code, base_offset=self.base_offset)
        return ProduceResponse(responses=[TopicProduceResponse(name="t", partition_responses=[pr])])


class ScriptedLeader:
    """The leader of ``t-0`` (broker 1), checking sequences like Kafka's
    broker; ``inject`` maps ``(base sequence, attempt)`` to an error code
    answered instead (nothing appended), ``appended_then`` to one answered
    after the append."""

    def __init__(self, inject: dict[tuple[int, int], int] | None = None, appended_then: dict[tuple[int, int], int] | None = None) -> None:
        self.inject = dict(inject or {})
        self.appended_then = dict(appended_then or {})
        self.log: list[bytes] = []  # appended values, in offset order
        self.writes: list[tuple[int, int, bytes]] = []  # (producer id, base sequence, batch bytes)
        self.attempts: Counter[tuple[int, int]] = Counter()
        self.expected: dict[int, int] = {}  # producer id -> next sequence
        self.recent: dict[int, list[tuple[int, int]]] = {}  # producer id -> [(base sequence, base offset)], last 5
        self.wasted = 0  # retries answered OUT_OF_ORDER (sent before an earlier batch was settled)
        self.outstanding = 0  # written, answer not read yet
        self.max_outstanding = 0
        self._pids = itertools.count(1000)
        info = SimpleNamespace(partition=0, leader=1)
        self.metadata = SimpleNamespace(partitions_for=lambda topic: (info,))
        self._info = info

    # -- the Cluster's surface the event handler uses -----------------------

    async def partitions_for(self, topic: str) -> tuple[Any, ...]:
        return (self._info,)

    async def refresh_metadata(self, topics: Any) -> None:
        return None

    async def broker_connection(self, node_id: int) -> Any:
        return self._connection()

    async def any_connection(self) -> Any:
        return self._connection()

    def _connection(self) -> Any:
        leader = self

        class _Conn:
            # InitProducerId v1 only: no KIP-360 epoch bump (a reset gets a new producer id)
            api_versions = {INIT_PRODUCER_ID.key: (0, 1)}

            def version_for(self, api: Any, ceiling: int | None = None) -> int:
                return 1 if api is INIT_PRODUCER_ID else 8

            async def request(self, api: Any, body: Any, version: int | None = None) -> InitProducerIdResponse:
                await trio.lowlevel.checkpoint()
                return InitProducerIdResponse(error_code=0, producer_id=next(leader._pids), producer_epoch=0)

            async def start_request(self, api: Any, body: Any, version: int | None = None, expect_response: bool = True) -> _Handle:
                await trio.lowlevel.checkpoint()
                (data,) = body.topic_data[0].partition_data
                return leader.produce(bytes(data.records))

        return _Conn()

    # -- the broker's sequence check ----------------------------------------

    def produce(self, batch: bytes) -> _Handle:
        h = read_header(batch, 0)
        pid, seq = h.producer_id, h.base_sequence
        retry = any(w[:2] == (pid, seq) for w in self.writes)
        self.writes.append((pid, seq, batch))
        attempt = self.attempts[(pid, seq)]
        self.attempts[(pid, seq)] += 1
        self.outstanding += 1
        self.max_outstanding = max(self.max_outstanding, self.outstanding)
        code = self.inject.get((seq, attempt))
        if code is not None:
            return _Handle(self, code, -1)
        recent = self.recent.setdefault(pid, [])
        duplicate = next((offset for s, offset in recent if s == seq), None)
        if duplicate is not None:
            return _Handle(self, DUPLICATE_SEQUENCE_NUMBER, duplicate)
        if seq != self.expected.get(pid, 0):
            self.wasted += retry
            return _Handle(self, OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        base = len(self.log)
        self.log.extend(r.value for r in iter_record_set(batch))
        self.expected[pid] = seq + h.last_offset_delta + 1
        recent.append((seq, base))
        del recent[:-5]
        return _Handle(self, self.appended_then.get((seq, attempt), 0), base)

    def sequences(self) -> list[int]:
        """The base sequence of every batch written, in write order."""
        return [seq for _, seq, _ in self.writes]


async def _handler(leader: ScriptedLeader, max_in_flight: int = 5, retries: int = 3) -> DefaultEventHandler:
    passthrough = SimpleNamespace(passthrough=True)
    settings = ProducerSettings(acks=-1, retries=retries, backoff_ms=1, backoff_max_ms=1, idempotence=True, max_in_flight=max_in_flight)
    handler = DefaultEventHandler()
    await handler.open(ProducerContext(None, settings, leader, passthrough, passthrough, SimpleNamespace(partition=lambda key, n: 0)))
    return handler


async def _pipeline(handler: DefaultEventHandler, batches: list[list[bytes]], in_order: bool = False) -> list[FailedToSendMessageError | None]:
    """Submit ``batches`` one after another as the async producer does
    (each `start` returns once its requests are written), completing each
    in a task of its own, or (``in_order``) one after another in submission
    order by one task, as `kclient.client.producer.core.TrioProducer`'s
    completer does (a batch's answers are then read after the earlier
    batches are done); the outcome of each."""
    results: list[FailedToSendMessageError | None] = [None] * len(batches)

    async def complete(i: int, finish: Any) -> None:
        try:
            await finish()
        except FailedToSendMessageError as exc:
            results[i] = exc

    send, receive = trio.open_memory_channel[tuple[int, Any]](len(batches))

    async def completer() -> None:
        async for i, finish in receive:
            await complete(i, finish)

    async with trio.open_nursery() as nursery:
        if in_order:
            nursery.start_soon(completer)
        for i, values in enumerate(batches):
            finish = await handler.start([ProducerData("t", messages=values)])
            if in_order:
                send.send_nowait((i, finish))
            else:
                nursery.start_soon(complete, i, finish)
        send.close()
    return results


def _batches(n: int, size: int = 2) -> list[list[bytes]]:
    return [[f"b{i}r{j}".encode() for j in range(size)] for i in range(n)]


@pytest.mark.parametrize("in_order", [False, True], ids=["concurrent", "completed-in-order"])
async def test_a_retried_batch_and_the_later_ones_behind_it_are_resent_in_sequence_order(in_order):
    """Batch 2 of 4 gets NOT_LEADER, so the leader answers batches 3 and 4
    OUT_OF_ORDER_SEQUENCE_NUMBER (it expects batch 2's sequence): all three
    are resent in the order 2, 3, 4 with the same sequences and bytes, and
    the log holds every record once, in send order."""
    leader = ScriptedLeader({(2, 0): NOT_LEADER_OR_FOLLOWER})
    handler = await _handler(leader)
    batches = _batches(4)
    results = await _pipeline(handler, batches, in_order)
    assert results == [None] * 4
    assert leader.sequences() == [0, 2, 4, 6, 2, 4, 6]
    first = {seq: batch for _, seq, batch in leader.writes[:4]}
    assert all(batch == first[seq] for _, seq, batch in leader.writes[4:])
    assert leader.log == [v for b in batches for v in b]
    assert leader.wasted == 0 and handler.idempotence.resets == 0  # type: ignore[union-attr]
    assert leader.max_outstanding == 4


@pytest.mark.parametrize("in_order", [False, True], ids=["concurrent", "completed-in-order"])
async def test_later_retries_wait_until_the_earlier_batch_is_settled(in_order):
    """Batch 2 fails twice: batches 3 and 4 are not resent until it is
    acknowledged (none of their retries is wasted on OUT_OF_ORDER)."""
    leader = ScriptedLeader({(2, 0): NOT_LEADER_OR_FOLLOWER, (2, 1): NOT_LEADER_OR_FOLLOWER})
    handler = await _handler(leader)
    batches = _batches(4)
    assert await _pipeline(handler, batches, in_order) == [None] * 4
    assert leader.sequences() == [0, 2, 4, 6, 2, 2, 4, 6]
    assert leader.log == [v for b in batches for v in b] and leader.wasted == 0


async def test_a_retry_of_a_batch_already_appended_is_a_duplicate():
    """Batch 2 of 3 is appended but answered REQUEST_TIMED_OUT (the outcome
    unknown to the producer) while batch 3 is appended after it: batch 2's
    retry is answered DUPLICATE_SEQUENCE_NUMBER, which is success; nothing
    is written twice."""
    leader = ScriptedLeader(appended_then={(2, 0): REQUEST_TIMED_OUT})
    handler = await _handler(leader)
    batches = _batches(3)
    assert await _pipeline(handler, batches) == [None] * 3
    assert leader.sequences() == [0, 2, 4, 2]
    assert leader.log == [v for b in batches for v in b]


async def test_a_final_failure_dooms_the_later_batches_of_its_partition():
    """Batch 2 of 4 is refused for good (MESSAGE_TOO_LARGE): batches 3
    (NOT_LEADER, retriable) and 4 (OUT_OF_ORDER), which the leader can
    never append without it, fail too and are never resent, and the
    producer id is replaced: the next batch starts again at sequence 0
    under a new one."""
    leader = ScriptedLeader({(2, 0): MESSAGE_TOO_LARGE, (4, 0): NOT_LEADER_OR_FOLLOWER})
    handler = await _handler(leader)
    batches = _batches(4)
    results = await _pipeline(handler, batches)
    assert results[0] is None
    for err in results[1:]:
        assert isinstance(err, FailedToSendMessageError) and err.possibly_written == 0
    assert isinstance(results[1].__cause__, MessageSizeTooLargeError)  # type: ignore[union-attr]
    assert leader.log == batches[0]
    state = handler.idempotence
    assert state is not None and state.resets == 1
    assert await _pipeline(handler, [[b"after"]]) == [None]
    assert leader.log == [*batches[0], b"after"]
    assert [w[:2] for w in leader.writes] == [(1000, 0), (1000, 2), (1000, 4), (1000, 6), (1001, 0)]


@pytest.mark.parametrize("max_in_flight", [1, 2, 5])
async def test_at_most_max_in_flight_batches_of_a_partition_are_unacknowledged(max_in_flight):
    leader = ScriptedLeader()
    handler = await _handler(leader, max_in_flight=max_in_flight)
    batches = _batches(12, size=1)
    assert await _pipeline(handler, batches) == [None] * 12
    assert leader.max_outstanding == max_in_flight
    assert leader.log == [v for b in batches for v in b]
    assert leader.sequences() == list(range(12))


def test_more_than_5_in_flight_with_idempotence_is_a_config_error():
    base = {"metadata.broker.list": "localhost:9092", "enable.idempotence": "true", "request.required.acks": -1}
    ProducerConfig.from_properties({**base, "max.in.flight.requests.per.connection": MAX_IN_FLIGHT})
    with pytest.raises(ConfigError, match=r"max\.in\.flight\.requests\.per\.connection.*enable\.idempotence"):
        ProducerConfig.from_properties({**base, "max.in.flight.requests.per.connection": 6})
    ProducerConfig.from_properties({**base, "enable.idempotence": "false", "max.in.flight.requests.per.connection": 6})
