"""Client receive buffers under a hostile peer (issue 13, part 3).

The peer here is a fake broker (a raw trio server): it answers ApiVersions
like a broker, then lies. A response size prefix costs the client nothing
until the bytes it announces arrive, and a response larger than its request
asked for is refused as soon as its size is read, with `FrameTooLargeError`
naming the size and the cap; the connection is then closed.
"""

from __future__ import annotations

import random
import struct
import tracemalloc

import attrs
import pytest
import trio

from kclient.errors import FrameTooLargeError, KafkaTimeoutError
from kclient.net.connection import BrokerConnection
from kclient.protocol import connection as pc
from kclient.protocol.connection import (
    DEFAULT_RESPONSE_BYTES,
    ClientConnection,
    FrameBuffer,
    encode_response,
    fetch_response_bound,
    parse_request_header,
)
from kclient.protocol.messages import API_VERSIONS, APIS, FETCH, METADATA
from kclient.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kclient.protocol.messages.metadata import MetadataRequest

HUNDRED_MIB = 100 * 1024 * 1024


def _fetch_body(
    partition_max_bytes: int, partitions: int = 1, max_bytes: int = 0x7FFFFFFF
) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic="t",
                partitions=[
                    FetchPartition(
                        partition=p,
                        fetch_offset=0,
                        partition_max_bytes=partition_max_bytes,
                        log_start_offset=-1,
                    )
                    for p in range(partitions)
                ],
            )
        ],
    )


# --- sans-I/O ---------------------------------------------------------------------


@pytest.mark.unit
def test_in_place_frame_grows_with_the_bytes_received(monkeypatch):
    """A frame received in place starts small and doubles as it fills: the
    buffer never holds more than max(first chunk, 2 x bytes received), and the
    frames come out whole and in order, in place or fed. (Without spare
    buffers: a spare is memory held already, see the next test.)"""
    monkeypatch.setattr(pc, "FIRST_CHUNK_BYTES", 64)
    monkeypatch.setattr(pc, "SPARE_BUFFERS", 0)
    rng = random.Random(13)
    frames = [rng.randbytes(n) for n in (5000, 300, 64, 129, 10_000, 0, 1)]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    for mode in ("direct", "mixed"):
        fb = FrameBuffer()
        got, pos = [], 0
        while pos < len(stream):
            into = fb.receive_buffer(64)
            step = rng.randint(1, 700)
            if into is not None and (mode == "direct" or rng.random() < 0.5):
                n = min(step, len(into), len(stream) - pos)
                into[:n] = stream[pos : pos + n]
                into.release()
                fb.received(n)
            else:
                if into is not None:
                    into.release()
                n = min(step, len(stream) - pos)
                fb.feed(stream[pos : pos + n])
            pos += n
            if fb._big is not None:
                assert len(fb._big) <= max(64, 2 * fb._big_fill), (
                    len(fb._big),
                    fb._big_fill,
                )
            while (f := fb.next_frame()) is not None:
                got.append(bytes(f))
        assert got == frames, mode


def _receive_in_place(fb: FrameBuffer, frame: bytes, step: int = 100) -> bytearray:
    stream = struct.pack(">i", len(frame)) + frame
    fb.feed(stream[:8])
    pos = 8
    while pos < len(stream):
        into = fb.receive_buffer(64)
        assert into is not None
        n = min(step, len(into), len(stream) - pos)
        into[:n] = stream[pos : pos + n]
        into.release()
        fb.received(n)
        pos += n
    got = fb.next_frame()
    assert isinstance(got, bytearray) and got == frame
    return got


@pytest.mark.unit
@pytest.mark.parametrize("pure", [False, True])
def test_frame_buffers_are_reused_only_once_nobody_holds_them(monkeypatch, pure):
    """A large frame's buffer is received into again for a later frame, but
    only after its reader dropped it and every view of it: what a reader
    still holds never changes."""
    monkeypatch.setattr(pc, "FIRST_CHUNK_BYTES", 64)
    if pure:
        monkeypatch.setattr(pc, "_new_buffer", pc._new_buffer_py)
        monkeypatch.setattr(pc, "_resize_buffer", pc._resize_buffer_py)
    rng = random.Random(7)
    fb = FrameBuffer()
    a = _receive_in_place(fb, rng.randbytes(3000))
    a_id = id(a)
    view = memoryview(a)[100:200]
    kept = bytes(view)
    del a
    b = _receive_in_place(fb, rng.randbytes(3000))  # a's buffer is still viewed: not reused
    assert id(b) != a_id and bytes(view) == kept
    c = _receive_in_place(fb, rng.randbytes(2500))  # b is held, a viewed: a new one again
    c_id = id(c)
    assert c_id not in (a_id, id(b)) and bytes(view) == kept
    view.release()
    b_id = id(b)
    del b  # the spares are now b's and c's buffers (a's was the oldest: dropped)
    d = _receive_in_place(fb, rng.randbytes(5000))  # into b's buffer, grown as needed
    assert id(d) == b_id
    e = _receive_in_place(fb, rng.randbytes(2000))  # c and d are held: a new one
    assert id(e) not in (id(c), id(d))
    del c
    f = _receive_in_place(fb, rng.randbytes(1000))  # into c's buffer (made shorter)
    assert id(f) == c_id and len(f) == 1000
    assert len(fb._spares) <= pc.SPARE_BUFFERS


@pytest.mark.unit
def test_a_lying_size_prefix_allocates_nothing_it_announces():
    fb = FrameBuffer()
    fb.feed(struct.pack(">i", HUNDRED_MIB - 1) + b"x" * 100)
    into = fb.receive_buffer(64)
    assert into is not None and len(into) <= pc.FIRST_CHUNK_BYTES
    into.release()
    assert fb.pending_frame_size() == HUNDRED_MIB - 1 and fb.next_frame() is None


@pytest.mark.unit
def test_fetch_response_cap_follows_the_fetch_asked_for():
    one = fetch_response_bound(11, _fetch_body(1 << 20))
    assert 1 << 20 < one < (1 << 20) + 1024
    eight = fetch_response_bound(11, _fetch_body(1 << 20, partitions=8))
    assert 8 << 20 < eight < (8 << 20) + 2048
    # the request's max_bytes bounds the sum of the partitions' (v3+)
    assert (
        fetch_response_bound(11, _fetch_body(1 << 20, partitions=8, max_bytes=1 << 20))
        < (1 << 20) + 2048
    )
    conn = ClientConnection()
    assert conn.response_cap(METADATA, 1, MetadataRequest(topics=None)) == DEFAULT_RESPONSE_BYTES
    assert (
        conn.response_cap(FETCH, 11, _fetch_body(1 << 20))
        == DEFAULT_RESPONSE_BYTES + one
    )


@pytest.mark.unit
def test_a_fetch_sent_as_a_dict_has_the_cap_of_the_request_it_encodes_to():
    """A raw-protocol caller's Fetch given as a dict of fields (the codec
    encodes both) is capped as the message it encodes to."""
    message = _fetch_body(1 << 20, partitions=3, max_bytes=2 << 20)
    as_dict = attrs.asdict(message)
    for version in (3, 11):
        cap = DEFAULT_RESPONSE_BYTES + fetch_response_bound(version, message)
        by_message, by_dict = ClientConnection(), ClientConnection()
        assert by_message.send(FETCH, version, message)[1] == by_dict.send(FETCH, version, as_dict)[1]
        for conn in (by_message, by_dict):
            conn.receive_data(struct.pack(">i", cap + 1))
            with pytest.raises(FrameTooLargeError) as info:
                conn.next_response()
            assert info.value.max_bytes == cap


@pytest.mark.unit
def test_response_over_its_requests_cap_is_a_typed_error_naming_size_and_cap():
    conn = ClientConnection()
    conn.send(METADATA, 1, MetadataRequest(topics=None))
    conn.receive_data(struct.pack(">i", HUNDRED_MIB))
    with pytest.raises(
        FrameTooLargeError,
        match=rf"response of {HUNDRED_MIB} bytes exceeds the cap of {DEFAULT_RESPONSE_BYTES} bytes for Metadata v1",
    ) as info:
        conn.next_response()
    assert (info.value.size, info.value.max_bytes) == (
        HUNDRED_MIB,
        DEFAULT_RESPONSE_BYTES,
    )
    # a fetch's cap is its own bound plus the base: 100 MiB passes a 100 MiB fetch
    conn = ClientConnection()
    conn.send(FETCH, 11, _fetch_body(HUNDRED_MIB))
    conn.receive_data(struct.pack(">i", HUNDRED_MIB))
    assert conn.next_response() is None
    conn = ClientConnection()
    conn.send(FETCH, 11, _fetch_body(1 << 20))
    size = (1 << 20) + DEFAULT_RESPONSE_BYTES + 4096
    conn.receive_data(struct.pack(">i", size))
    with pytest.raises(
        FrameTooLargeError, match=r"for Fetch v11 .*a Fetch may take \d+ bytes"
    ):
        conn.next_response()


# --- over a socket: a fake broker that lies ---------------------------------------------


async def _lying_broker(
    task_status=trio.TASK_STATUS_IGNORED, *, claim: int, then: int = 0
):
    """Answers ApiVersions normally; answers the next request with a size
    prefix of ``claim`` bytes, ``then`` bytes of it, and then silence."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def handler(stream):
        async with stream:
            frames = FrameBuffer()
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    header = parse_request_header(frame)
                    if header.api_key == API_VERSIONS.key:
                        body = {
                            "error_code": 0,
                            "api_keys": [
                                {
                                    "api_key": a.key,
                                    "min_version": a.min_version,
                                    "max_version": a.max_version,
                                }
                                for a in APIS.values()
                            ],
                            "throttle_time_ms": 0,
                        }
                        await stream.send_all(
                            encode_response(
                                API_VERSIONS,
                                header.api_version,
                                header.correlation_id,
                                body,
                            )
                        )
                        continue
                    await stream.send_all(
                        struct.pack(">ii", claim, header.correlation_id) + b"\0" * then
                    )
                    await trio.sleep_forever()  # kept: a peer that stalls mid-response

    async with trio.open_nursery() as nursery:
        task_status.started(port)
        await trio.serve_listeners(handler, listeners, handler_nursery=nursery)


async def test_response_claiming_100_mib_then_silence_costs_little_and_times_out():
    """The fetch asked for 100 MiB, so the claim is within its cap: the client
    waits for the bytes (which never come) without allocating them, and the
    request fails with its timeout."""
    tracemalloc.start()
    try:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(
                lambda task_status: _lying_broker(
                    task_status, claim=HUNDRED_MIB, then=300_000
                )
            )
            conn = await BrokerConnection.connect(
                nursery, "127.0.0.1", port, request_timeout_ms=500
            )
            assert conn.api_versions  # ApiVersions was answered normally
            tracemalloc.reset_peak()
            base, _ = tracemalloc.get_traced_memory()
            with pytest.raises(
                KafkaTimeoutError, match="Fetch to .* got no response in 500 ms"
            ):
                await conn.request(FETCH, _fetch_body(HUNDRED_MIB), version=11)
            _, peak = tracemalloc.get_traced_memory()
            assert conn.closed
            nursery.cancel_scope.cancel()
    finally:
        tracemalloc.stop()
    # 100 MiB announced; a few MB at most held (1 MiB first chunk, its
    # doubling, the socket layer's 1 MiB receive buffer)
    assert peak - base < 8 * 1024 * 1024, peak - base


async def test_response_over_the_cap_fails_the_request_typed_and_closes_the_connection():
    async with trio.open_nursery() as nursery:
        port = await nursery.start(
            lambda task_status: _lying_broker(task_status, claim=HUNDRED_MIB)
        )
        conn = await BrokerConnection.connect(
            nursery, "127.0.0.1", port, request_timeout_ms=5000
        )
        with trio.fail_after(3):  # refused from the size alone, not by the timeout
            with pytest.raises(
                FrameTooLargeError,
                match=rf"response of {HUNDRED_MIB} bytes exceeds the cap of \d+ bytes for Fetch",
            ) as info:
                await conn.request(FETCH, _fetch_body(1 << 20), version=11)
        assert (
            info.value.size == HUNDRED_MIB and info.value.max_bytes < 10 * 1024 * 1024
        )
        assert conn.closed
        nursery.cancel_scope.cancel()
