"""KIP-360 for the idempotent producer without a ``transactional.id``
(issue 29), against the bundled broker and Apache Kafka 4.

Kafka's broker answers InitProducerId without a transactional id with a
new producer id and epoch 0 whatever producer id and epoch the request
carries (``TransactionCoordinator.handleInitProducerId``: "always blindly
accept the request"); the epoch bump of KIP-360 is the producer's own
(``TransactionManager.bumpIdempotentProducerEpoch``): after
OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID it keeps its producer
id, takes the next epoch and restarts every partition at sequence 0,
which the partition leader accepts. Both brokers give the same answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio
from helpers.groups import group_kafka
from helpers.raw import SocketClient, fetch_body
from helpers.wait import retry
from test_txn_coordinator_broker import request

import kclient
from kclient import ProducerData
from kclient.client.producer.core import TrioProducer
from kclient.client.producer.idempotence import MAX_PRODUCER_EPOCH, IdempotentProducerState
from kclient.errors import COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST, NONE, FailedToSendMessageError, OutOfOrderSequenceNumberError
from kclient.protocol.messages import FETCH
from kclient.protocol.messages.init_producer_id import INIT_PRODUCER_ID_FULL, InitProducerIdRequest
from kclient.protocol.records.scan import scan_batches
from kclient.protocol.records.v2 import read_header
from kclient.testing import BrokerProcess


@pytest.fixture(scope="module")
def bundled() -> Iterator[BrokerProcess]:
    with BrokerProcess(properties={"num.partitions": 1}, keep_port=True) as proc:
        yield proc


@pytest.fixture(scope="module")
def kafka4() -> Iterator[Any]:
    with group_kafka(1) as kafka:
        yield kafka


@pytest.fixture(params=["bundled", pytest.param("kafka4", marks=pytest.mark.apache_kafka)])
def broker(request: pytest.FixtureRequest) -> Any:
    """The bundled broker, then Apache Kafka 4."""
    return request.getfixturevalue(request.param)


def init_producer_id(broker: Any, version: int, *, transactional_id: str | None = None, producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int, int]:
    """One InitProducerId: ``(error code, producer id, epoch)``."""
    body = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000, producer_id=producer_id, producer_epoch=producer_epoch)
    # Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its producer id manager has a block
    answer = retry(lambda: request(broker, INIT_PRODUCER_ID_FULL, body, version), lambda a: a.error_code != COORDINATOR_LOAD_IN_PROGRESS, "InitProducerId")
    return answer.error_code, answer.producer_id, answer.producer_epoch


def test_init_producer_id_without_a_transactional_id_always_gives_a_new_id(broker):
    """v3/v4 with the producer's id and epoch (its own, a made-up one, the
    highest epoch): a new producer id with epoch 0 each time, as Kafka 4
    answers; an empty transactional id is INVALID_REQUEST."""
    code, first, epoch = init_producer_id(broker, 4)
    assert (code, epoch) == (NONE, 0) and first >= 0
    seen = {first}
    for version, pid, ep in [(3, first, 0), (4, first, 0), (4, first, 7), (4, 987_654_321, 3), (4, first, MAX_PRODUCER_EPOCH)]:
        code, pid_given, epoch = init_producer_id(broker, version, producer_id=pid, producer_epoch=ep)
        assert (code, epoch) == (NONE, 0), (version, pid, ep)
        assert pid_given not in seen
        seen.add(pid_given)
    assert init_producer_id(broker, 4, transactional_id="")[0] == INVALID_REQUEST


def batch_headers(broker: Any, topic: str) -> list[Any]:
    """The v2 batch headers of ``topic``-0 (one broker: the leader)."""
    host, port = broker.bootstrap.rsplit(":", 1)
    with SocketClient(host, int(port), client_id="kip360-reader", timeout=15) as c:
        part = c.request(FETCH, 4, fetch_body(topic, [(0, 0)]))["responses"][0]["partitions"][0]
    assert part["error_code"] == NONE, part
    data = part["records"] or b""
    return [read_header(data, info.position) for info in scan_batches(data)]


def idempotent(broker: Any) -> dict[str, Any]:
    return {"metadata.broker.list": broker.bootstrap, "enable.idempotence": "true", "request.required.acks": -1, "message.send.max.retries": 5, "retry.backoff.ms": 100}


def test_the_producer_bumps_its_epoch_after_out_of_order_sequence(broker, topic):
    """A gap in the sequence is refused (OUT_OF_ORDER_SEQUENCE_NUMBER); the
    producer keeps its id, takes the next epoch and starts again at
    sequence 0, which the leader accepts."""
    with kclient.AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([kclient.NewTopic(topic, 1, 1)])

    async def run() -> tuple[int, int]:
        async with TrioProducer(idempotent(broker)) as producer:
            await producer.send(ProducerData(topic, messages=[b"ok"]))
            state = producer.event_handler.idempotence
            first = (state.producer_id, state.producer_epoch)
            assert state.epoch_bump and first[0] >= 0
            state._next[(topic, 0)] += 5  # a gap the broker must refuse
            with pytest.raises(FailedToSendMessageError) as info:
                await producer.send(ProducerData(topic, messages=[b"refused"]))
            assert isinstance(info.value.__cause__, OutOfOrderSequenceNumberError)
            assert (state.producer_id, state.producer_epoch) == (first[0], first[1] + 1)
            await producer.send(ProducerData(topic, messages=[b"after"]))
            await producer.send(ProducerData(topic, messages=[b"more"]))
            return first

    pid, epoch = trio.run(run)
    headers = retry(lambda: batch_headers(broker, topic), lambda h: len(h) >= 3, "the three batches")
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [(pid, epoch, 0), (pid, epoch + 1, 0), (pid, epoch + 1, 1)]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("epoch_bump", "epoch", "after"),
    [(True, 4, (77, 5)), (True, MAX_PRODUCER_EPOCH, (-1, -1)), (False, 4, (-1, -1))],
    ids=["kip360", "highest-epoch", "older-broker"],
)
def test_reset_bumps_the_epoch_or_drops_the_id(epoch_bump, epoch, after):
    """KIP-360's bump keeps the producer id; at the highest epoch, or when
    the broker has no InitProducerId v3 (before Kafka 2.5), the id is
    dropped and the next send asks for a new one. Sequences restart at 0
    either way."""
    state = IdempotentProducerState(None)  # type: ignore[arg-type]  # no request is sent
    state.producer_id, state.producer_epoch, state.epoch_bump = 77, epoch, epoch_bump
    state._next[("t", 0)] = 12
    state.reset("test")
    assert (state.producer_id, state.producer_epoch) == after
    assert state.next_sequence(("t", 0)) == 0 and state.resets == 1
