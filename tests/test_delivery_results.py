"""Per-record delivery results (issue 14): ``send(data, callback=...)`` and
``send_with_result`` of the blocking Producer (sync and async) and the
TrioProducer, against real bundled broker subprocesses.

Every offset a result reports is checked against what the SimpleConsumer
reads back at that offset.
"""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time

import pytest
import trio
from helpers.records import partition_messages

from kclient import AdminClient, NewTopic, RecordFuture, RecordMetadata
from kclient.client.producer.callbacks import CallbackHandler
from kclient.client.producer.core import TrioProducer
from kclient.client.producer.producer import Producer, ProducerData
from kclient.errors import (
    FailedToSendMessageError,
    InvalidTopicError,
    KafkaConnectionError,
    MessageSizeTooLargeError,
    NoBrokersAvailableError,
    QueueFullError,
    UnknownTopicOrPartitionError,
)
from kclient.testing import BrokerProcess

PARTITIONS = 3


@pytest.fixture(scope="module")
def broker3():
    with BrokerProcess(properties={"num.partitions": PARTITIONS}) as proc:
        yield proc


@pytest.fixture(scope="module")
def strict_broker():
    """No auto-created topics, and records over 2,000 bytes refused."""
    with BrokerProcess(properties={"num.partitions": 1, "auto.create.topics.enable": False, "message.max.bytes": 2000}) as proc:
        yield proc


def config(broker, **props):
    base = {"metadata.broker.list": broker.bootstrap, "retry.backoff.ms": 20}
    base.update({k.replace("_", "."): v for k, v in props.items()})
    return base


def read_partition(broker, topic, partition):
    """{offset: (key, value, timestamp)} of every record of one partition."""
    return {m.offset: (m.message.key, m.message.payload, m.message.timestamp) for m in partition_messages(broker, topic, partition)}


def check_against_log(broker, topic, sent):
    """``sent``: [(key, value, RecordMetadata)]. Every metadata names the
    offset at which the consumer finds that very record, once each."""
    logs = {p: read_partition(broker, topic, p) for p in {m.partition for _, _, m in sent}}
    seen = set()
    for key, value, m in sent:
        assert m.topic == topic
        assert m.offset >= 0
        assert (m.partition, m.offset) not in seen
        seen.add((m.partition, m.offset))
        got_key, got_value, ts = logs[m.partition][m.offset]
        assert (got_key, got_value) == (key, value)
        assert m.timestamp == ts
        assert m.serialized_key_size == (-1 if key is None else len(key))
        assert m.serialized_value_size == (-1 if value is None else len(value))
    assert len(seen) == sum(len(log) for log in logs.values())


def records(topic, n, keyed=True):
    """ProducerData with 1-3 messages each, ``n`` messages in all."""
    out, i = [], 0
    while i < n:
        k = min(1 + i % 3, n - i)
        out.append(ProducerData(topic, key=f"k{i}".encode() if keyed else None, messages=[f"v{i + j}".encode() for j in range(k)]))
        i += k
    return out


def flat(data):
    return [(d.key, m) for d in data for m in d.messages]


# -- async mode ----------------------------------------------------------------------


def test_async_futures_offsets_match_the_log(broker3, topic):
    data = records(topic, 300)
    with Producer(config(broker3, producer_type="async", batch_num_messages=50, queue_buffering_max_ms=5)) as producer:
        futures = []
        for d in data:
            futures += producer.send_with_result(d)
        producer.flush()
        assert all(f.done() for f in futures)
        metas = [f.result(timeout=0) for f in futures]
    assert len(futures) == 300 and all(isinstance(f, RecordFuture) for f in futures)
    assert all(type(m) is RecordMetadata for m in metas)
    assert len({m.partition for m in metas}) == PARTITIONS
    check_against_log(broker3, topic, [(k, v, m) for (k, v), m in zip(flat(data), metas)])


def test_async_callbacks_fire_once_per_record_on_the_send_thread(broker3, topic):
    data = records(topic, 200, keyed=False)
    calls: list = []
    threads = set()

    def on_completion(metadata, exc):
        threads.add(threading.current_thread().name)
        calls.append((metadata, exc))

    with Producer(config(broker3, producer_type="async", client_id="cb", batch_num_messages=40)) as producer:
        producer.send(data[:10], callback=on_completion)  # a list
        for d in data[10:]:
            producer.send(d, callback=on_completion)
        producer.send(ProducerData(topic, messages=[b"no callback"]))  # mixed with plain sends
        producer.flush()
        assert len(calls) == 200
    assert len(calls) == 200
    assert all(exc is None for _, exc in calls)
    assert threads == {"kclient-producer-cb-send"}
    # Each record once: the metadata are distinct and name every record.
    by_value = {}
    for m, _ in calls:
        assert (m.partition, m.offset) not in by_value
        by_value[(m.partition, m.offset)] = m
    logs = {p: read_partition(broker3, topic, p) for p in range(PARTITIONS)}
    values = sorted(logs[m.partition][m.offset][1] for m, _ in calls)
    assert values == sorted(v for _, v in flat(data))
    assert sum(len(log) for log in logs.values()) == 201


def test_async_done_callbacks_and_waiting_from_another_thread(broker3, topic):
    with Producer(config(broker3, producer_type="async", queue_buffering_max_ms=50)) as producer:
        [future] = producer.send_with_result(ProducerData(topic, key=b"k", messages=[b"v"]))
        done = threading.Event()
        seen = []
        future.add_done_callback(lambda f: (seen.append((threading.current_thread().name, f.result())), done.set()))
        got = []
        waiter = threading.Thread(target=lambda: got.append(future.result(timeout=30)))
        waiter.start()
        meta = future.result(timeout=30)
        waiter.join(30)
        assert done.wait(30)
        assert got == [meta] and seen[0][1] == meta
        assert future.exception() is None and not future.cancel() and not future.cancelled()
        late = []
        future.add_done_callback(late.append)  # already done: called at once, here
        assert late == [future]
    check_against_log(broker3, topic, [(b"k", b"v", meta)])


@pytest.mark.unit
def test_result_timeout_while_pending():
    """A future nobody resolves times out as concurrent.futures' does."""
    f = RecordFuture()
    with pytest.raises(concurrent.futures.TimeoutError):
        f.result(timeout=0.01)
    with pytest.raises(concurrent.futures.TimeoutError):
        f.exception(timeout=0)
    assert f.running() and not f.done()


def test_log_append_time_is_the_timestamp(topic):
    with BrokerProcess(properties={"num.partitions": 1, "log.message.timestamp.type": "LogAppendTime"}) as broker:
        before = time.time_ns() // 1_000_000
        with Producer(config(broker)) as producer:
            futures = producer.send_with_result(ProducerData(topic, messages=[b"a", b"b"], timestamp_ms=1000))
        metas = [f.result() for f in futures]
        assert all(m.timestamp >= before for m in metas)  # the broker's clock, not CreateTime 1000
        check_against_log(broker, topic, [(None, b"a", metas[0]), (None, b"b", metas[1])])


# -- sync mode -------------------------------------------------------------------------


def test_sync_futures_are_done_when_send_returns(broker3, topic):
    data = records(topic, 30)
    with Producer(config(broker3)) as producer:
        futures = producer.send_with_result(data)
        assert len(futures) == 30 and all(f.done() for f in futures)
        more = producer.send_with_result(ProducerData(topic, key=b"x", messages=[b"y"]))
    metas = [f.result(timeout=0) for f in futures + more]
    check_against_log(broker3, topic, [(k, v, m) for (k, v), m in zip([*flat(data), (b"x", b"y")], metas)])
    # CreateTime: the send time the producer stamped
    assert all(m.timestamp > 0 for m in metas)


def test_sync_callbacks_run_on_the_calling_thread_before_send_returns(broker3, topic):
    calls = []
    with Producer(config(broker3)) as producer:
        producer.send(records(topic, 7), callback=lambda m, e: calls.append((threading.current_thread(), m, e)))
        assert len(calls) == 7
    assert {t for t, _, _ in calls} == {threading.current_thread()}
    assert all(e is None and m.offset >= 0 for _, m, e in calls)


def test_acks_zero_gives_partition_but_no_offset(broker3, topic):
    with Producer(config(broker3, request_required_acks=0)) as producer:
        futures = producer.send_with_result(ProducerData(topic, key=b"k", messages=[b"a", b"b"]))
    metas = [f.result() for f in futures]
    assert [m.offset for m in metas] == [-1, -1]
    assert metas[0].partition == metas[1].partition >= 0


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_too_large_and_unknown_topic_reach_their_records(strict_broker, mode):
    """A record the broker refuses (MESSAGE_TOO_LARGE) and a topic that does
    not exist (auto-create off) fail their own records; the good record of
    the same batch (another partition) is delivered."""
    created = f"delivery-ok-{mode}"
    with AdminClient({"bootstrap.servers": strict_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(created, 2, 1)])
    # message.max.bytes limits a whole batch: the big record goes to its own partition
    big = ProducerData(created, messages=[b"x" * 5000], partition=1)
    good = ProducerData(created, messages=[b"fine"], partition=0)
    missing = ProducerData(f"no-such-topic-{mode}", messages=[b"lost"])
    calls = []
    with Producer(config(strict_broker, producer_type=mode, message_send_max_retries=1, queue_buffering_max_ms=1000, batch_num_messages=100)) as producer:
        futures = producer.send_with_result([good, big, missing])
        if mode == "async":
            producer.send([good, big], callback=lambda m, e: calls.append((m, e)))
        producer.flush()
        assert all(f.done() for f in futures)
        assert len(calls) == (2 if mode == "async" else 0)
        if mode == "async":
            producer.close()  # every failure reached its future or callback: reported once (issue 27)
    ok, too_big, lost = futures
    assert ok.result().offset >= 0
    err = too_big.exception()
    assert isinstance(err, FailedToSendMessageError) and isinstance(err.__cause__, MessageSizeTooLargeError)
    assert set(err.failed_partitions) == {(created, 1)} and f"{created}-1" in str(err)
    with pytest.raises(FailedToSendMessageError):
        too_big.result()
    err = lost.exception()
    assert isinstance(err, FailedToSendMessageError) and isinstance(err.__cause__, UnknownTopicOrPartitionError)
    assert f"no-such-topic-{mode}" in str(err)
    if mode == "async":
        (m1, e1), (m2, e2) = calls
        assert e1 is None and m1.offset == ok.result().offset + 1
        assert m2 is None and isinstance(e2.__cause__, MessageSizeTooLargeError)


def test_sync_send_with_callback_raises_after_calling_back(strict_broker):
    calls = []
    with Producer(config(strict_broker, message_send_max_retries=0)) as producer, pytest.raises(FailedToSendMessageError) as info:
        producer.send(ProducerData("no-such-topic-sync-cb", messages=[b"a", b"b"]), callback=lambda m, e: calls.append((m, e)))
    assert [m for m, _ in calls] == [None, None]
    assert all(isinstance(e.__cause__, UnknownTopicOrPartitionError) for _, e in calls)
    assert isinstance(info.value.__cause__, UnknownTopicOrPartitionError)


def test_record_larger_than_max_request_size_fails_client_side(broker3, topic):
    with Producer(config(broker3, producer_type="async", max_request_size=4096)) as producer:
        small, big = producer.send_with_result([ProducerData(topic, messages=[b"s"], partition=0), ProducerData(topic, messages=[b"b" * 10_000], partition=1)])
        assert isinstance(big.exception(timeout=30).__cause__, MessageSizeTooLargeError)
        assert small.result(timeout=30).offset >= 0
        producer.close()  # the failure went into its future: not raised again (issue 27)


def test_failures_reported_to_a_future_or_callback_are_not_raised_again_by_close(strict_broker):
    """Issue 27: each failure is reported once. Records that failed into
    their future or delivery callback do not make ``close()`` (the end of a
    ``with`` block) raise the same failure again."""
    calls = []
    with Producer(config(strict_broker, producer_type="async", message_send_max_retries=0)) as producer:
        [future] = producer.send_with_result(ProducerData("no-such-topic-once", messages=[b"a"]))
        producer.send(ProducerData("no-such-topic-once-cb", messages=[b"b", b"c"]), callback=lambda m, e: calls.append(e))
        assert isinstance(future.exception(timeout=60), FailedToSendMessageError)
    # The with block closed the producer without raising.
    assert len(calls) == 2 and all(isinstance(e, FailedToSendMessageError) for e in calls)
    assert producer.statistics().failed_messages == 3


def test_close_raises_a_failure_nobody_was_told_about(strict_broker):
    """Issue 27: a failure of records sent without a future or callback is
    still raised by ``close()``, counting only those records, even when
    records with a future failed in the same batch."""
    producer = Producer(config(strict_broker, producer_type="async", message_send_max_retries=0))
    [future] = producer.send_with_result(ProducerData("no-such-topic-told", messages=[b"a"]))
    producer.send(ProducerData("no-such-topic-untold", messages=[b"b", b"c"]))
    with pytest.raises(FailedToSendMessageError, match="no-such-topic-untold") as info:
        producer.close()
    assert info.value.lost_messages == 2
    assert isinstance(future.exception(timeout=0), FailedToSendMessageError)
    assert "1 more failed into their futures or callbacks" in str(info.value)


def test_invalid_topic_raises_and_calls_nothing(broker3):
    calls = []
    with Producer(config(broker3, producer_type="async")) as producer:
        with pytest.raises(InvalidTopicError):
            producer.send(ProducerData("bad topic", messages=[b"x"]), callback=lambda m, e: calls.append(e))
        with pytest.raises(InvalidTopicError):
            producer.send_with_result(ProducerData("bad topic", messages=[b"x"]))
    assert calls == []


# -- close ------------------------------------------------------------------------------------


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_close_fails_every_pending_future():
    """Records that cannot be delivered (no broker) and are abandoned at
    close(timeout_ms) fail with FailedToSendMessageError: nothing is left
    pending."""
    producer = Producer(
        {
            "metadata.broker.list": f"127.0.0.1:{dead_port()}",
            "producer.type": "async",
            "message.send.max.retries": 1000,
            "retry.backoff.ms": 50,
            "batch.num.messages": 5,
        }
    )
    futures = []
    calls = []
    for i in range(20):
        futures += producer.send_with_result(ProducerData("t", messages=[b"%d" % i]))
        producer.send(ProducerData("t", messages=[b"cb"]), callback=lambda m, e: calls.append(e))
    with pytest.raises(FailedToSendMessageError):
        producer.close(timeout_ms=300)
    assert all(f.done() for f in futures)
    assert all(isinstance(f.exception(), FailedToSendMessageError) for f in futures)
    assert len(calls) == 20 and all(isinstance(e, FailedToSendMessageError) for e in calls)


def test_close_after_failed_retries_resolves_with_the_connection_error():
    producer = Producer({"metadata.broker.list": f"127.0.0.1:{dead_port()}", "producer.type": "async", "message.send.max.retries": 1, "retry.backoff.ms": 10})
    futures = producer.send_with_result([ProducerData("t", messages=[b"a"]), ProducerData("u", messages=[b"b"])])
    producer.close()  # both failures went into their futures: not raised again (issue 27)
    for f in futures:
        err = f.exception(timeout=0)
        assert isinstance(err, FailedToSendMessageError)
        assert isinstance(err.__cause__, (KafkaConnectionError, NoBrokersAvailableError))


# -- the queue and the hooks -------------------------------------------------------------------


class Holding(CallbackHandler):
    """Holds the send thread in before_sending_data until released."""

    def __init__(self):
        self.release = threading.Event()
        self.entered = threading.Event()

    def before_sending_data(self, batch):
        self.entered.set()
        assert self.release.wait(30)
        return batch


def test_queue_full_fails_the_futures_it_could_not_queue(broker3, topic):
    hold = Holding()
    cfg = config(broker3, producer_type="async", queue_buffering_max_messages=2, queue_enqueue_timeout_ms=0, batch_num_messages=1, queue_buffering_max_ms=0)
    calls = []
    with Producer(cfg, callback_handler=hold) as producer:
        try:
            producer.send(ProducerData(topic, messages=[b"first"]))
            assert hold.entered.wait(30)  # the send thread holds "first"
            futures = producer.send_with_result([ProducerData(topic, messages=[b"q1", b"q2"]), ProducerData(topic, messages=[b"over"])])
            with pytest.raises(QueueFullError) as info:
                producer.send(ProducerData(topic, messages=[b"over2"]), callback=lambda m, e: calls.append(e))
            assert [type(d) for d in info.value.not_enqueued] == [ProducerData]
            assert [d.messages for d in info.value.not_enqueued] == [(b"over2",)]
        finally:
            hold.release.set()
        producer.flush()
    q1, q2, over = futures
    assert q1.result().offset + 1 == q2.result().offset
    assert isinstance(over.exception(), QueueFullError)
    assert len(calls) == 1 and isinstance(calls[0], QueueFullError)


class Replacing(CallbackHandler):
    """Replaces every dequeued item by an upper-cased copy (a new, untracked
    ProducerData)."""

    def after_dequeuing_existing_data(self, data):
        return [ProducerData(data.topic, data.key, [m.upper() for m in data.messages])]


def test_records_a_hook_replaced_resolve_without_an_offset(broker3, topic):
    with Producer(config(broker3, producer_type="async"), callback_handler=Replacing()) as producer:
        futures = producer.send_with_result(ProducerData(topic, key=b"k", messages=[b"a", b"b"]))
        producer.flush()
        metas = [f.result(timeout=0) for f in futures]
    assert [(m.topic, m.partition, m.offset) for m in metas] == [(topic, -1, -1)] * 2


class Comparing(CallbackHandler):
    """Hooks see ProducerData that compare equal to the data sent."""

    def __init__(self):
        self.seen = []

    def before_sending_data(self, batch):
        self.seen.extend(batch)
        return batch


def test_hooks_see_data_equal_to_what_was_sent(broker3, topic):
    hook = Comparing()
    sent = ProducerData(topic, key=b"k", messages=[b"v"], timestamp_ms=5)
    with Producer(config(broker3), callback_handler=hook) as producer:
        producer.send_with_result(sent)
    assert hook.seen == [sent] and sent == hook.seen[0]
    assert hash(hook.seen[0]) == hash(sent) and isinstance(hook.seen[0], ProducerData)


# -- trio --------------------------------------------------------------------------------------------


def test_trio_producer_results_and_callbacks(broker3, topic):
    data = records(topic, 12)
    calls = []

    async def main():
        async with TrioProducer(config(broker3)) as p:
            futures = await p.send_with_result(data)
            await p.send(ProducerData(topic, key=b"cb", messages=[b"c1", b"c2"]), callback=lambda m, e: calls.append((m, e)))
            bad = await p.send_with_result(ProducerData(topic, messages=[b"z" * 10_000_000]))
            return futures, bad

    futures, bad = trio.run(main)
    assert all(f.done() for f in futures)
    assert len(calls) == 2 and all(e is None for _, e in calls)
    sent = [(k, v, f.result()) for (k, v), f in zip(flat(data), futures)]
    sent += [(b"cb", v, m) for v, (m, _) in zip([b"c1", b"c2"], calls)]
    check_against_log(broker3, topic, sent)
    assert isinstance(bad[0].exception().__cause__, MessageSizeTooLargeError)


def test_idempotent_producer_results_match_the_log(broker3, topic):
    data = records(topic, 60)
    with Producer(config(broker3, producer_type="async", enable_idempotence=True, request_required_acks=-1, batch_num_messages=20)) as producer:
        futures = producer.send_with_result(data)
        producer.flush()
    check_against_log(broker3, topic, [(k, v, f.result(timeout=0)) for (k, v), f in zip(flat(data), futures)])


def test_plain_sends_keep_no_delivery_state(broker3, topic):
    """Without a callback or futures the send path stays the plain one:
    no report is kept and the send thread does not look for any."""
    with Producer(config(broker3, producer_type="async")) as producer:
        for i in range(50):
            producer.send(ProducerData(topic, messages=[b"%d" % i]))
        producer.send([ProducerData(topic, messages=[b"list"])])
        producer.flush()
        assert producer._thread.tracking is False and not producer._reports
        producer.send(ProducerData(topic, messages=[b"cb"]), callback=lambda m, e: None)
        producer.flush()
        assert producer._thread.tracking is True and not producer._reports  # resolved: nothing kept
