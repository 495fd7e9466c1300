"""Ambiguous outcomes (issue 13, part 4), against a real bundled broker.

A failure after a Produce request was written (no response in
``request.timeout.ms``: the broker process is frozen with SIGSTOP, or killed
with SIGKILL while frozen) is reported as *possibly written*; a failure
before anything was written (the broker is gone: connection refused) as *not
sent*. The records actually in the log afterwards are counted: possibly
written ⊇ in the log, and not sent ∩ in the log = ∅.
"""

from __future__ import annotations

import os
import signal
import uuid
from types import SimpleNamespace

import pytest
from helpers.raw import held_connections
from helpers.records import partition_messages
from helpers.wait import wait_for

from kclient import Producer, ProducerData
from kclient.client.producer.callbacks import CallbackHandler
from kclient.client.producer.event_handler import DefaultEventHandler, ProducerContext
from kclient.client.producer.settings import ProducerSettings
from kclient.errors import (
    FailedToSendMessageError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from kclient.protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from kclient.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)

N = 20


@pytest.fixture
def proc(tmp_path):
    broker = BrokerProcess(log_dir=tmp_path / "logs", properties={"num.partitions": 1})
    broker.start()
    yield broker
    if broker.pid is not None:
        try:
            os.kill(broker.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    broker.cleanup()


def _config(proc: BrokerProcess, **extra) -> dict:
    config = {
        "metadata.broker.list": proc.bootstrap,
        "producer.type": "sync",
        "request.required.acks": 1,
        "message.send.max.retries": 0,
        "retry.backoff.ms": 20,
        "request.timeout.ms": 1000,
    }
    config.update(extra)
    return config


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(N)]


def _in_log(proc: BrokerProcess, topic: str) -> list[bytes]:
    values = [bytes(m.message.payload) for m in partition_messages(proc, topic, 0)]
    return [v for v in values if v != b"warm-up"]


def _wait_for_log(proc: BrokerProcess, topic: str) -> list[bytes]:
    """The records in the log once the resumed broker has finished every
    connection its clients closed: it reads a connection's end only after
    answering the request before it, so what it read while frozen is
    appended (or refused) by then."""
    wait_for(lambda: not held_connections(local_port=proc.port), "the broker to finish its closed connections")
    return _in_log(proc, topic)


def _topic() -> str:
    return f"maybe-{uuid.uuid4().hex[:8]}"


def test_sync_timeout_after_the_write_is_possibly_written_and_may_be_in_the_log(proc):
    topic = _topic()
    values = _values("a")
    with Producer(_config(proc)) as producer:
        producer.send(ProducerData(topic, messages=[b"warm-up"]))
        os.kill(
            proc.pid, signal.SIGSTOP
        )  # the request goes into its socket buffer, unanswered
        try:
            with pytest.raises(
                FailedToSendMessageError, match=rf"{N} possibly written"
            ) as info:
                producer.send(ProducerData(topic, messages=values))
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    err = info.value
    assert (err.lost_messages, err.possibly_written, err.not_sent) == (N, N, 0)
    assert err.possibly_written_partitions == {(topic, 0): N}
    # The broker, resumed, reads the request it was sent and appends it:
    # the "failed" records are in the log, as "possibly written" warned.
    in_log = _wait_for_log(proc, topic)
    assert set(in_log) <= set(values) and len(in_log) <= err.possibly_written
    assert len(in_log) in (0, N)


def test_sigkill_mid_flight_possibly_written_covers_the_log_after_restart(proc):
    topic = _topic()
    values = _values("k")
    with Producer(_config(proc)) as producer:
        producer.send(ProducerData(topic, messages=[b"warm-up"]))
        os.kill(proc.pid, signal.SIGSTOP)
        with pytest.raises(FailedToSendMessageError) as info:
            producer.send(ProducerData(topic, messages=values))
        proc.kill()  # a crash with the request in flight
    err = info.value
    assert (err.possibly_written, err.not_sent) == (N, 0)
    proc.start()
    in_log = _in_log(proc, topic)
    assert set(in_log) <= set(values) and len(in_log) <= err.possibly_written


def test_retry_after_a_possibly_written_attempt_stays_possibly_written(proc):
    """Attempt 1 times out after the write; the retry cannot even connect
    (the frozen broker never answers ApiVersions): the batch stays
    possibly written, and it is in the log once the broker resumes. (With
    a broker that had answered, the retry would have written it a second
    time: only enable.idempotence, issue 11, prevents that.)"""
    topic = _topic()
    values = _values("r")
    with Producer(_config(proc, **{"message.send.max.retries": 1})) as producer:
        producer.send(ProducerData(topic, messages=[b"warm-up"]))
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises(FailedToSendMessageError, match="after 1 retry") as info:
                producer.send(ProducerData(topic, messages=values))
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    err = info.value
    assert (err.possibly_written, err.not_sent) == (N, 0)
    in_log = _wait_for_log(proc, topic)
    assert set(in_log) <= set(values) and len(in_log) <= err.possibly_written


def test_connection_refused_is_not_sent_and_not_in_the_log(proc):
    topic = _topic()
    values = _values("c")
    with Producer(_config(proc)) as producer:
        producer.send(ProducerData(topic, messages=[b"warm-up"]))
        port = proc.port
        proc.stop()
        wait_for(lambda: not held_connections(remote_port=port), "the producer's connection to see the broker close")
        with pytest.raises(FailedToSendMessageError, match="not sent") as info:
            producer.send(ProducerData(topic, messages=values))
    err = info.value
    assert (err.lost_messages, err.possibly_written, err.not_sent) == (N, 0, N)
    assert err.possibly_written_partitions == {}
    proc.start()
    assert _in_log(proc, topic) == []


class _Recorder(CallbackHandler):
    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def on_send_error(self, events, exc) -> None:
        self.errors.append(exc)


def test_async_producer_hook_and_close_carry_possibly_written(proc):
    topic = _topic()
    values = _values("s")
    recorder = _Recorder()
    config = _config(
        proc,
        **{
            "producer.type": "async",
            "queue.buffering.max.ms": 5,
            "callback.handler": recorder,
        },
    )
    producer = Producer(config)
    try:
        producer.send(ProducerData(topic, messages=[b"warm-up"]))
        producer.flush()
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            producer.send(ProducerData(topic, messages=values))
            with pytest.raises(
                FailedToSendMessageError, match=rf"{N} possibly written, 0 not sent"
            ) as info:
                producer.close()
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    finally:
        try:
            producer.close()
        except FailedToSendMessageError:
            pass
    assert info.value.possibly_written == N and info.value.not_sent == 0
    assert len(recorder.errors) == 1 and recorder.errors[0].possibly_written == N
    in_log = _wait_for_log(proc, topic)
    assert set(in_log) <= set(values) and len(in_log) <= N


# --- the event handler's bookkeeping, against a scripted connection ------------------


class _Handle:
    def __init__(self, outcome) -> None:
        self.outcome = outcome

    async def wait(self, timeout_ms=None):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return ProduceResponse(
            responses=[
                TopicProduceResponse(
                    name="t",
                    partition_responses=[
                        PartitionProduceResponse(index=0, error_code=self.outcome, base_offset=0)
                    ],
                )
            ]
        )


class _ScriptedCluster:
    """One topic ``t`` with one partition led by broker 1, whose Produce
    requests meet ``script`` in order: an exception raised by the write
    (``("write", exc)``), one raised while waiting, or an error code."""

    def __init__(self, script: list) -> None:
        self.script = list(script)
        info = SimpleNamespace(partition=0, leader=1)
        self.metadata = SimpleNamespace(partitions_for=lambda topic: (info,))
        self._info = info

    async def partitions_for(self, topic):
        return (self._info,)

    async def refresh_metadata(self, topics):
        return None

    async def broker_connection(self, node_id):
        cluster = self

        class _Conn:
            def version_for(self, api, ceiling=None):
                return 8

            async def start_request(
                self, api, body, version=None, expect_response=True
            ):
                step = cluster.script.pop(0)
                if isinstance(step, tuple):
                    raise step[1]
                return _Handle(step)

        return _Conn()


async def _send(
    script: list, *, records: int, batch_bytes: int, retries: int = 0
) -> FailedToSendMessageError | None:
    passthrough = SimpleNamespace(passthrough=True)
    settings = ProducerSettings(
        retries=retries, backoff_ms=1, max_request_bytes=batch_bytes
    )
    handler = DefaultEventHandler()
    cluster = _ScriptedCluster(script)
    await handler.open(
        ProducerContext(
            None,
            settings,
            cluster,
            passthrough,
            passthrough,
            SimpleNamespace(partition=lambda key, n: 0),
        )
    )
    try:
        await handler.handle(
            [ProducerData("t", messages=[b"x" * 100 for _ in range(records)])]
        )
    except FailedToSendMessageError as exc:
        return exc
    return None


@pytest.mark.unit
@pytest.mark.parametrize(
    ("script", "possibly"),
    [
        ([KafkaTimeoutError("no response")], 10),  # written, then no answer
        ([KafkaConnectionError("lost after the write")], 10),
        ([7], 10),  # REQUEST_TIMED_OUT: appended, replication unsure
        ([20], 10),  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
        ([6], 0),  # NOT_LEADER_OR_FOLLOWER: refused before the append
        ([("write", KafkaConnectionError("refused"))], 0),  # never written
    ],
)
async def test_each_failure_is_classified_possibly_written_or_not_sent(
    script, possibly
):
    exc = await _send(script, records=10, batch_bytes=1 << 20)
    assert exc is not None and exc.lost_messages == 10
    assert (exc.possibly_written, exc.not_sent) == (possibly, 10 - possibly)


@pytest.mark.unit
async def test_a_batch_acknowledged_behind_a_failed_one_counts_as_possibly_written():
    # 1 KiB batches (the smallest): 8 records, then 2, in two requests. The
    # first is refused (not leader), the second appended; both are kept for
    # the (absent) retry, and the second's 2 records are in the log.
    exc = await _send([6, 0], records=10, batch_bytes=1024)
    assert exc is not None and exc.lost_messages == 10
    assert (exc.possibly_written, exc.not_sent) == (2, 8)


@pytest.mark.unit
async def test_possibly_written_sticks_through_a_retry_that_is_not_sent():
    exc = await _send(
        [KafkaTimeoutError("no response"), ("write", KafkaConnectionError("refused"))],
        records=10,
        batch_bytes=1 << 20,
        retries=1,
    )
    assert exc is not None and (exc.possibly_written, exc.not_sent) == (10, 0)


def test_async_close_timeout_counts_records_in_flight_as_possibly_written(proc):
    """close(timeout_ms) abandons a batch whose request was written and not
    answered: it is counted as possibly written, not as not sent."""
    topic = _topic()
    values = _values("t")
    producer = Producer(
        _config(
            proc,
            **{
                "producer.type": "async",
                "queue.buffering.max.ms": 5,
                "request.timeout.ms": 10_000,
            },
        )
    )
    try:
        producer.send(ProducerData(topic, messages=[b"warm-up"]))
        producer.flush()
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            producer.send(ProducerData(topic, messages=values))
            wait_for(
                lambda: producer.statistics().queued_messages == 0 and any(c.rx_queue for c in held_connections(local_port=proc.port)),
                "the batch taken off the queue and written (unread in the frozen broker's socket)",
            )
            with pytest.raises(
                FailedToSendMessageError, match=rf"\[{N} possibly written, 0 not sent\]"
            ) as info:
                producer.close(timeout_ms=300)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    finally:
        try:
            producer.close()
        except FailedToSendMessageError:
            pass
    assert (
        info.value.lost_messages,
        info.value.possibly_written,
        info.value.not_sent,
    ) == (N, N, 0)
    in_log = _wait_for_log(proc, topic)
    assert set(in_log) <= set(values) and len(in_log) <= N
