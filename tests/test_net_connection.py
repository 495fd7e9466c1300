"""BrokerConnection against peers that misbehave on purpose: one that never
answers (request.timeout.ms is enforced by the connection's watchdog, with
no timer per request) and one that reads slowly (a request larger than the
socket buffer still goes out whole, in order)."""

from __future__ import annotations

import functools
import struct

import pytest
import trio

from kclient.errors import KafkaConnectionError, KafkaTimeoutError
from kclient.net.connection import BrokerConnection
from kclient.protocol.messages import METADATA, PRODUCE


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
                    await trio.sleep(chunk_delay)

    async with trio.open_nursery() as nursery:
        task_status.started(port)
        await trio.serve_listeners(handler, listeners, handler_nursery=nursery)


async def test_request_timeout_fails_every_pending_request():
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_silent_peer)
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, request_timeout_ms=300, negotiate=False)
        first = await conn.start_request(METADATA, {"topics": []}, version=0)
        second = await conn.start_request(METADATA, {"topics": []}, version=0)
        start = trio.current_time()
        with pytest.raises(KafkaTimeoutError, match=r"Metadata to 127\.0\.0\.1:\d+ got no response in 300 ms"):
            await first.wait()
        assert trio.current_time() - start >= 0.25
        # the connection is failed as a whole: responses are ordered, so the
        # ones behind a lost response can never be matched
        with pytest.raises(KafkaTimeoutError):
            await second.wait()
        assert conn.closed
        with pytest.raises(KafkaConnectionError, match="is closed"):
            await conn.start_request(METADATA, {"topics": []}, version=0)
        nursery.cancel_scope.cancel()


async def test_a_shorter_per_request_timeout_moves_the_watchdog_earlier():
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_silent_peer)
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, request_timeout_ms=60_000, negotiate=False)
        # the watchdog now sleeps until this request's deadline, 60 s away
        await conn.start_request(METADATA, {"topics": []}, version=0)
        start = trio.current_time()
        with trio.fail_after(20):
            with pytest.raises(KafkaTimeoutError, match="got no response in 200 ms"):
                await conn.request(METADATA, {"topics": []}, version=0, timeout_ms=200)
        assert trio.current_time() - start < 20
        nursery.cancel_scope.cancel()


async def test_a_request_bigger_than_the_socket_buffer_goes_out_whole():
    received: list[bytes] = []
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lambda task_status: _silent_peer(task_status, received=received, chunk_delay=0.001))
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, negotiate=False)
        records = bytes(range(256)) * (16 * 1024)  # 4 MiB, far more than a socket buffer
        body = {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
        small = {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"after"}]}]}
        async with trio.open_nursery() as writers:
            writers.start_soon(functools.partial(conn.start_request, PRODUCE, body, version=3, expect_response=False))
            await trio.sleep(0)
            writers.start_soon(functools.partial(conn.start_request, PRODUCE, small, version=3, expect_response=False))
        with trio.fail_after(30):
            while sum(map(len, received)) < len(records) + 100:
                await trio.sleep(0.01)
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
            handles = [await conn.start_request(METADATA, {"topics": []}, version=0) for _ in range(40)]
            for h in handles:
                with trio.fail_after(10):
                    assert await h.wait() == {"brokers": [], "topics": []}
        assert await conn.request(METADATA, {"topics": []}, version=0) == {"brokers": [], "topics": []}
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_responses_larger_than_one_read_are_received_whole():
    pad = 20  # 600 KB: more than a 64 KiB plain-TCP read, received in place
    async with trio.open_nursery() as nursery:
        port = await nursery.start(functools.partial(_answering_peer, mode="batch", pad=pad))
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, negotiate=False)
        handles = [await conn.start_request(METADATA, {"topics": []}, version=0) for _ in range(5)]
        for h in handles:
            with trio.fail_after(10):
                body = await h.wait()
            assert [t["name"][:5] for t in body["topics"]] == [f"{i:05d}" for i in range(pad)]
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_a_peer_that_closes_fails_the_pending_requests():
    async with trio.open_nursery() as nursery:
        port = await nursery.start(functools.partial(_answering_peer, mode="close"))
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, negotiate=False)
        handle = await conn.start_request(METADATA, {"topics": []}, version=0)
        with trio.fail_after(10), pytest.raises(KafkaConnectionError, match="closed the connection"):
            await handle.wait()
        assert conn.closed
        nursery.cancel_scope.cancel()
