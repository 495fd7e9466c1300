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
