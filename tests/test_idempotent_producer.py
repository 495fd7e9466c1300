"""The idempotent producer (``enable.idempotence=true``, KIP-98) against
three real brokers and a real ZooKeeper: producer id and sequence numbers
in the record batches, a resent batch written once, sequences that go on
across a leader failover, and the reset after OUT_OF_ORDER_SEQUENCE_NUMBER.
No mocks; waits are bounded by deadlines, never asserted as speeds."""

from __future__ import annotations

import os
import signal
import threading
import uuid

import pytest
import trio
from helpers.raw import SocketClient, produce_body
from helpers.three_brokers import ThreeBrokers, wait_until

from kclient import Producer, ProducerData
from kclient.client.producer.batching import BatchBuilder, PartitionSend
from kclient.client.producer.core import TrioProducer
from kclient.errors import FailedToSendMessageError, OutOfOrderSequenceNumberError
from kclient.protocol.messages import PRODUCE


@pytest.fixture(scope="module")
def cluster(zookeeper):
    with ThreeBrokers(zookeeper) as c:
        yield c


@pytest.fixture
def topic(cluster) -> str:
    cluster.wait_all_registered()  # a test before may have killed one
    name = f"idem-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name)
    return name


def idempotent(cluster, **extra) -> dict:
    return {
        "metadata.broker.list": cluster.bootstrap,
        "enable.idempotence": "true",
        "request.required.acks": -1,
        "message.send.max.retries": 12,
        "retry.backoff.ms": 200,
        "request.timeout.ms": 3000,
        **extra,
    }


def test_batches_carry_the_producer_id_and_consecutive_sequences(cluster, topic):
    with Producer(idempotent(cluster)) as producer:
        producer.send(ProducerData(topic, messages=[b"a0", b"a1", b"a2"]))
        producer.send(ProducerData(topic, messages=[b"b0"]))
        producer.send(ProducerData(topic, messages=[b"c0", b"c1"]))
    headers = cluster.batch_headers(topic)
    assert [h.records_count for h in headers] == [3, 1, 2]
    assert [h.base_sequence for h in headers] == [0, 3, 4]
    assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0
    assert {h.producer_epoch for h in headers} == {0}
    assert cluster.values(topic) == [b"a0", b"a1", b"a2", b"b0", b"c0", b"c1"]


def test_two_producers_get_different_producer_ids(cluster, topic):
    with Producer(idempotent(cluster)) as one, Producer(idempotent(cluster)) as two:
        one.send(ProducerData(topic, messages=[b"1"]))
        two.send(ProducerData(topic, messages=[b"2"]))
    first, second = cluster.batch_headers(topic)
    assert first.producer_id != second.producer_id
    assert (first.base_sequence, second.base_sequence) == (0, 0)


async def test_the_same_batch_sent_twice_is_written_once(cluster, topic):
    """The batch the producer numbered, resent byte for byte (what a retry
    does), is answered with its first offset and not appended again; the
    producer's next batch follows it."""
    async with TrioProducer(idempotent(cluster)) as producer:
        await producer.send(ProducerData(topic, messages=[b"first"]))
        state = producer.event_handler.idempotence
        assert state is not None and state.producer_id >= 0
        part = PartitionSend(topic, 0)
        part.records = [(None, b"twice", 0)]
        BatchBuilder(producer.settings).build(part, stamp=state.stamp)
        assert part.sequences == [1]
        leader = cluster.brokers[cluster.leader(topic)]

        def send_raw() -> dict:
            with SocketClient(leader.host, leader.port, client_id="test-resend", timeout=15) as c:
                reply = c.request(PRODUCE, 7, produce_body(topic, 0, part.batches[0], acks=-1))
            return reply["responses"][0]["partition_responses"][0]

        once = await trio.to_thread.run_sync(send_raw)
        again = await trio.to_thread.run_sync(send_raw)
        assert (once["error_code"], once["base_offset"]) == (0, 1)
        assert (again["error_code"], again["base_offset"]) == (0, 1)
        await producer.send(ProducerData(topic, messages=[b"last"]))
    assert cluster.values(topic) == [b"first", b"twice", b"last"]
    assert [h.base_sequence for h in cluster.batch_headers(topic)] == [0, 1, 2]


def test_a_retry_after_a_lost_answer_is_not_written_twice(cluster, topic):
    """The leader is frozen (SIGSTOP) with the Produce request in its
    socket, so the producer times out and retries; once it runs again it
    appends the first attempt, and the retry is recognised as a duplicate."""
    values = [f"v{i}".encode() for i in range(10)]
    leader = cluster.brokers[cluster.leader(topic)]
    with Producer(idempotent(cluster, **{"request.timeout.ms": 500})) as producer:
        producer.send(ProducerData(topic, messages=[b"warm-up"]))
        os.kill(leader.pid, signal.SIGSTOP)
        resume = threading.Timer(1.6, os.kill, (leader.pid, signal.SIGCONT))
        resume.start()
        try:
            producer.send(ProducerData(topic, messages=values))
        finally:
            resume.join()
            os.kill(leader.pid, signal.SIGCONT)
    got = wait_until(lambda: (lambda v: v if len(v) >= 11 else None)(cluster.values(topic)), what="the records in the log")
    assert got == [b"warm-up", *values]


def test_sequences_continue_across_a_leader_failover(cluster, topic):
    with Producer(idempotent(cluster)) as producer:
        for i in range(5):
            producer.send(ProducerData(topic, messages=[f"a{i}".encode(), f"b{i}".encode()]))
        old = cluster.kill_leader(topic)
        new = cluster.wait_new_leader(topic, old)
        for i in range(5, 10):
            producer.send(ProducerData(topic, messages=[f"a{i}".encode(), f"b{i}".encode()]))
    assert cluster.leader(topic) == new
    headers = cluster.batch_headers(topic)
    assert len({h.producer_id for h in headers}) == 1
    assert [h.base_sequence for h in headers] == list(range(0, 20, 2))
    assert cluster.values(topic) == [f"{x}{i}".encode() for i in range(10) for x in "ab"]


async def test_out_of_order_sequence_fails_the_batch_by_name_and_restarts_numbering(cluster, topic):
    """The failed batch is reported; the numbering restarts at 0 under the
    same producer id with the next epoch (KIP-360: the broker advertises
    InitProducerId v3+), and the leader accepts it."""
    async with TrioProducer(idempotent(cluster)) as producer:
        await producer.send(ProducerData(topic, messages=[b"ok"]))
        state = producer.event_handler.idempotence
        first_id, first_epoch = state.producer_id, state.producer_epoch
        assert state.epoch_bump
        state._next[(topic, 0)] += 5  # a gap the broker must refuse
        with pytest.raises(FailedToSendMessageError) as info:
            await producer.send(ProducerData(topic, key=b"k", messages=[b"refused"]))
        err = info.value
        assert isinstance(err.__cause__, OutOfOrderSequenceNumberError)
        assert err.failed_partitions == {(topic, 0): 1}
        assert err.failed_records == {(topic, 0): [(b"k", b"refused")]}
        assert err.possibly_written == 0
        assert state.resets == 1 and (state.producer_id, state.producer_epoch) == (first_id, first_epoch + 1)
        await producer.send(ProducerData(topic, messages=[b"after"]))
        assert (state.producer_id, state.producer_epoch) == (first_id, first_epoch + 1)
    headers = cluster.batch_headers(topic)
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [(first_id, first_epoch, 0), (first_id, first_epoch + 1, 0)]
    assert cluster.values(topic) == [b"ok", b"after"]


def test_idempotence_needs_record_batch_v2(cluster, topic):
    """api.version below 0.11 caps Produce below v3, which cannot carry a
    producer id: the records fail, none is written without numbering."""
    with Producer(idempotent(cluster, **{"api.version": "0.10"})) as producer:
        with pytest.raises(FailedToSendMessageError, match="record batch v2") as info:
            producer.send(ProducerData(topic, messages=[b"x"]))
    assert info.value.failed_records == {(topic, 0): [(None, b"x")]}
    assert cluster.values(topic) == []


def test_async_pipelined_producer_keeps_each_partition_in_order(cluster, topic):
    """With several batches in flight (async mode), each partition still
    has one at a time: sequences follow each other with no gap."""
    config = idempotent(
        cluster,
        **{
            "producer.type": "async",
            "batch.num.messages": 7,
            "queue.buffering.max.ms": 1,
            "max.in.flight.requests.per.connection": 5,
        },
    )
    values = [f"q{i:03d}".encode() for i in range(200)]
    with Producer(config) as producer:
        for v in values:
            producer.send(ProducerData(topic, messages=[v]))
    assert cluster.values(topic) == values
    headers = cluster.batch_headers(topic)
    expected, seq = [], 0
    for h in headers:
        expected.append(seq)
        seq += h.records_count
    assert [h.base_sequence for h in headers] == expected and seq == 200


def _pipelined(cluster, **extra) -> dict:
    """An async idempotent producer keeping 5 batches of a partition in
    flight (small batches, so many are in flight when a broker dies)."""
    return idempotent(
        cluster,
        **{
            "producer.type": "async",
            "batch.num.messages": 20,
            "queue.buffering.max.ms": 1,
            "max.in.flight.requests.per.connection": 5,
            **extra,
        },
    )


def _check_exactly_once_in_order(cluster, topic, partitions, sent, acked) -> None:
    """Every acknowledged record is in the log exactly once and each
    partition's log is in send order; the counts (acknowledged, lost,
    duplicated) are in the failure message."""
    logs = {p: [int(v) for v in cluster.values(topic, p)] for p in range(partitions)}
    seen = [i for log in logs.values() for i in log]
    duplicated = len(seen) - len(set(seen))
    lost = len(acked - set(seen))
    counts = f"sent {len(sent)}, acknowledged {len(acked)}, lost {lost}, duplicated {duplicated}"
    assert duplicated == 0 and lost == 0, counts
    for p, log in logs.items():
        assert log == sorted(log), f"partition {p} out of send order ({counts})"
        assert all(i % partitions == p for i in log), counts
    assert len(acked) == len(sent), counts


@pytest.mark.parametrize("fault", ["killed-and-restarted", "leader-moved", "frozen"])
def test_five_in_flight_survive_a_leader_fault_exactly_once_in_order(cluster, fault):
    """With 5 batches per partition in flight, the leader of partition 0 is
    SIGKILLed mid-stream (and restarted, or left dead so the leadership
    stays moved), or frozen (SIGSTOP) past ``request.timeout.ms`` so that
    answers are lost and batches it appended later are resent: in-flight
    batches are retried in sequence order, the later ones answered
    OUT_OF_ORDER_SEQUENCE_NUMBER are resent after the earlier, resent ones
    already appended are answered as duplicates, and every record lands
    once, in order."""
    cluster.wait_all_registered()
    partitions = 2
    topic = f"idem5-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=partitions)
    acked: set[int] = set()
    errors: list[BaseException] = []
    lock = threading.Lock()

    def report(i: int):
        def done(metadata, error) -> None:
            with lock:
                if error is None:
                    acked.add(i)
                else:
                    errors.append(error)

        return done

    sent = list(range(3000))

    def send(indexes) -> None:
        for i in indexes:
            producer.send(ProducerData(topic, partition=i % partitions, messages=[b"%05d" % i]), callback=report(i))

    extra = {"request.timeout.ms": 500} if fault == "frozen" else {}
    with Producer(_pipelined(cluster, **extra)) as producer:
        state = producer._core.event_handler.idempotence
        assert state is not None and state.max_in_flight == 5
        send(sent[:1500])
        wait_until(lambda: len(acked) >= 300, what="the first acknowledgements")
        if fault == "frozen":
            leader = cluster.brokers[cluster.leader(topic, 0)]
            os.kill(leader.pid, signal.SIGSTOP)
            resume = threading.Timer(1.2, os.kill, (leader.pid, signal.SIGCONT))
            resume.start()
            try:
                send(sent[1500:])
            finally:
                resume.join()
                os.kill(leader.pid, signal.SIGCONT)
        else:
            old = cluster.kill_leader(topic, 0)
            send(sent[1500:])
            cluster.wait_new_leader(topic, old, 0)
            if fault == "killed-and-restarted":
                cluster.brokers[old].start()
        wait_until(lambda: len(acked) + len(errors) == len(sent), what="every record acknowledged or failed", timeout=60)
    _check_exactly_once_in_order(cluster, topic, partitions, sent, acked)
    assert errors == [] and state.resets == 0
