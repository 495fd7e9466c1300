"""BrokerConnection against peers that misbehave on purpose: one that never
answers (request.timeout.ms is enforced by the connection's watchdog, with
no timer per request) and one that reads slowly (a request larger than the
socket buffer still goes out whole, in order)."""

from __future__ import annotations

import functools
import struct

import attrs
import pytest
import trio
from helpers.wait import retry_async, wait_for_async

from kclient.errors import KafkaConnectionError, KafkaTimeoutError
from kclient.net.connection import BrokerConnection
from kclient.protocol.messages import FETCH, METADATA, PRODUCE
from kclient.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kclient.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kclient.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData


async def _silent_peer(task_status=trio.TASK_STATUS_IGNORED, *, received: list | None = None, chunk_delay: float = 0.0):
    """A TCP peer that reads everything and answers nothing."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def handler(stream):
        async with stream:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                if received is not None:
                    received.append(data)
                if chunk_delay:
                    await trio.sleep(chunk_delay)  # kept: a slow reader, so the sender's buffer fills

    async with trio.open_nursery() as nursery:
        task_status.started(port)
        await trio.serve_listeners(handler, listeners, handler_nursery=nursery)


async def test_request_timeout_fails_every_pending_request():
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_silent_peer)
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, request_timeout_ms=300, negotiate=False)
        first = await conn.start_request(METADATA, MetadataRequest(topics=[]), version=0)
        second = await conn.start_request(METADATA, MetadataRequest(topics=[]), version=0)
        with pytest.raises(KafkaTimeoutError, match=r"Metadata to 127\.0\.0\.1:\d+ got no response in 300 ms"):
            await first.wait()  # failed by the watchdog, after the request timeout
        # the connection is failed as a whole: responses are ordered, so the
        # ones behind a lost response can never be matched
        with pytest.raises(KafkaTimeoutError):
            await second.wait()
        assert conn.closed
        with pytest.raises(KafkaConnectionError, match="is closed"):
            await conn.start_request(METADATA, MetadataRequest(topics=[]), version=0)
        nursery.cancel_scope.cancel()


async def test_a_shorter_per_request_timeout_moves_the_watchdog_earlier():
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_silent_peer)
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, request_timeout_ms=60_000, negotiate=False)
        # the watchdog now sleeps until this request's deadline, 60 s away
        await conn.start_request(METADATA, MetadataRequest(topics=[]), version=0)
        with trio.fail_after(20):  # not the 60 s deadline: the shorter one woke the watchdog
            with pytest.raises(KafkaTimeoutError, match="got no response in 200 ms"):
                await conn.request(METADATA, MetadataRequest(topics=[]), version=0, timeout_ms=200)
        nursery.cancel_scope.cancel()


async def test_a_request_bigger_than_the_socket_buffer_goes_out_whole():
    received: list[bytes] = []
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lambda task_status: _silent_peer(task_status, received=received, chunk_delay=0.001))
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, negotiate=False)
        records = bytes(range(256)) * (16 * 1024)  # 4 MiB, far more than a socket buffer
        body = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=records)])])
        small = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=b"after")])])
        async with trio.open_nursery() as writers:
            writers.start_soon(functools.partial(conn.start_request, PRODUCE, body, version=3, expect_response=False))
            await trio.sleep(0)  # kept: a checkpoint (no time passes), so the big request starts first
            writers.start_soon(functools.partial(conn.start_request, PRODUCE, small, version=3, expect_response=False))
        await wait_for_async(lambda: sum(map(len, received)) >= len(records) + 100, "both requests at the peer")
        data = b"".join(received)
        (size,) = struct.unpack_from(">i", data, 0)
        frame = data[4 : 4 + size]
        assert frame.endswith(records)  # the big frame arrived whole, first
        (size2,) = struct.unpack_from(">i", data, 4 + size)
        assert data[8 + size : 8 + size + size2].endswith(b"after")
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def _answering_peer(task_status=trio.TASK_STATUS_IGNORED, *, mode: str, pad: int = 0):
    """A TCP peer answering Metadata v0 requests with an empty Metadata
    (with ``pad`` topics of 30,000-byte names): ``mode`` "batch" answers every
    request read so far in one write, "bytewise" writes each answer one
    byte at a time, "close" closes the connection instead of answering."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    topics = [{"error_code": 0, "name": f"{i:05d}" + "x" * 29_995, "partitions": []} for i in range(pad)]
    body = METADATA.response(0).encode({"brokers": [], "topics": topics})

    async def handler(stream):
        buf = bytearray()
        async with stream:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                if mode == "close":
                    return
                buf += data
                answers = bytearray()
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    correlation_id = struct.unpack_from(">i", buf, 8)[0]
                    del buf[: 4 + size]
                    answers += struct.pack(">ii", 4 + len(body), correlation_id) + body
                if mode == "bytewise":
                    for i in range(len(answers)):
                        await stream.send_all(answers[i : i + 1])
                elif answers:
                    await stream.send_all(bytes(answers))

    async with trio.open_nursery() as nursery:
        task_status.started(port)
        await trio.serve_listeners(handler, listeners, handler_nursery=nursery)


@pytest.mark.parametrize("mode", ["batch", "bytewise"])
async def test_pipelined_responses_in_one_read_or_byte_by_byte(mode):
    async with trio.open_nursery() as nursery:
        port = await nursery.start(functools.partial(_answering_peer, mode=mode))
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, negotiate=False)
        for _ in range(3):
            handles = [await conn.start_request(METADATA, MetadataRequest(topics=[]), version=0) for _ in range(40)]
            for h in handles:
                with trio.fail_after(10):
                    assert await h.wait() == MetadataResponse(brokers=[], topics=[])
        assert await conn.request(METADATA, MetadataRequest(topics=[]), version=0) == MetadataResponse(brokers=[], topics=[])
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_responses_larger_than_one_read_are_received_whole():
    pad = 20  # 600 KB: more than a 64 KiB plain-TCP read, received in place
    async with trio.open_nursery() as nursery:
        port = await nursery.start(functools.partial(_answering_peer, mode="batch", pad=pad))
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, negotiate=False)
        handles = [await conn.start_request(METADATA, MetadataRequest(topics=[]), version=0) for _ in range(5)]
        for h in handles:
            with trio.fail_after(10):
                body = await h.wait()
            assert [t.name[:5] for t in body.topics] == [f"{i:05d}" for i in range(pad)]
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_a_peer_that_closes_fails_the_pending_requests():
    async with trio.open_nursery() as nursery:
        port = await nursery.start(functools.partial(_answering_peer, mode="close"))
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, negotiate=False)
        handle = await conn.start_request(METADATA, MetadataRequest(topics=[]), version=0)
        with trio.fail_after(10), pytest.raises(KafkaConnectionError, match="closed the connection"):
            await handle.wait()
        assert conn.closed
        nursery.cancel_scope.cancel()


def test_busy_wait_polls_without_yielding_until_the_first_bytes(broker, topic):
    """``PendingResponse.busy_wait`` (socket.busy.poll.us): against the
    real broker, a Fetch the broker holds for ``max_wait_ms`` is polled for
    without letting other tasks run; the poll gives up after its budget,
    and a second one returns once the held response arrives."""
    from kclient.client.admin import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)], timeout_ms=30000)
    held_ms = 600

    async def main():
        async with trio.open_nursery() as nursery:
            conn = await BrokerConnection.connect(nursery, broker.host, broker.port)
            body = FetchRequest(
                replica_id=-1, max_wait_ms=held_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                topics=[FetchTopic(topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20, log_start_offset=-1)])],
            )
            # the partition may still be electing its leader: wait for a Fetch answered without error
            await retry_async(
                lambda: conn.request(FETCH, attrs.evolve(body, max_wait_ms=0)),
                lambda response: response.responses[0].partitions[0].error_code == 0,
                "a Fetch answered without error",
            )
            handle = await conn.start_request(FETCH, body)
            ran: list[int] = []

            async def mark():
                ran.append(1)

            nursery.start_soon(mark)  # runs at the next checkpoint
            assert handle.busy_wait(0.05) is False  # the broker holds the fetch (empty partition)
            assert ran == []  # no checkpoint while polling
            assert handle.busy_wait(30.0) is True  # the held response arrives after max_wait_ms
            assert ran == [] and not handle.done  # polled, not read: the reader reads it
            response = await handle.wait()
            assert ran == [1]
            assert response.responses[0].partitions[0].error_code == 0
            assert handle.busy_wait(0.0) is True  # already answered
            await conn.aclose()
            assert conn._busy_wait_readable(0.01) is False  # closed: nothing to poll
            nursery.cancel_scope.cancel()

    trio.run(main)
