"""Sans-I/O framing for both ends of a Kafka connection (the h11 pattern).

Client side: `ClientConnection` turns requests into bytes
(``send``) and bytes into completed responses (``receive_data`` +
``next_response``), pairing each response with its request by correlation id.
Server side: `FrameBuffer` splits a byte stream into frames,
`parse_request_header` reads a request header, and
`encode_response` frames a response.

Frame = int32 big-endian size of what follows, then header, then body.
Request header v1: api_key int16, api_version int16, correlation_id int32,
client_id nullable string; v2 (flexible versions) adds a tagged-field
section. Response header v0: correlation_id; v1 adds tagged fields, except
that ApiVersions responses always use v0 (KIP-511). Source: Kafka protocol
guide https://kafka.apache.org/protocol, "Common Request and Response
Structure" and "Request and Response Headers".

Pure: no sockets, no clock.
"""

from __future__ import annotations

import collections
import struct
import sys
from typing import Any

import attrs

from kclient._accel import speedups
from kclient.errors import UNSUPPORTED_VERSION, FrameTooLargeError, ProtocolError
from kclient.protocol import primitives as p
from kclient.protocol.messages import API_VERSIONS, APIS, FETCH
from kclient.protocol.messages.fetch import FetchRequest
from kclient.protocol.schema import Api, Body

_SIZE = struct.Struct(">i")
_UNSUPPORTED_VERSION_BYTES = struct.pack(">h", UNSUPPORTED_VERSION)  # int16 error_code first in the body
_REQ_HEAD = struct.Struct(">hhi")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024
#: The largest response a client accepts to a request that is not a Fetch,
#: and what it accepts on top of a Fetch's own bound (response headers, the
#: one oversized first batch a broker returns whole, KIP-74).
DEFAULT_RESPONSE_BYTES = 8 * 1024 * 1024
#: A frame received in place starts with at most this much room; the buffer
#: then doubles as its bytes arrive (so a size prefix that lies costs
#: nothing until the bytes it announces do arrive). 1 MiB of records plus
#: room for the response's headers: the answer to a fetch of 1 MiB (the
#: consumers' default size) fits without growing, which would copy it.
FIRST_CHUNK_BYTES = (1 << 20) + (64 << 10)
#: How many buffers of large frames a connection keeps to receive later
#: frames into (two: one being read by the application while the next
#: response arrives), and the largest it keeps, bytes.
SPARE_BUFFERS = 2
SPARE_BUFFER_BYTES = 64 * 1024 * 1024


def _new_buffer_py(size: int) -> bytearray:
    return bytearray(size)


def _resize_buffer_py(buffer: bytearray, size: int) -> None:
    have = len(buffer)
    if size < have:
        del buffer[size:]
    elif size > have:
        buffer += bytes(size - have)


#: Reference counts tell when nobody holds a spare buffer (CPython); without
#: them no buffer is kept.
_getrefcount = getattr(sys, "getrefcount", None)

# Compiled: new bytes are not zeroed (every byte of a frame is received
# before the frame is handed out).
_new_buffer = speedups.new_buffer if speedups is not None else _new_buffer_py
_resize_buffer = speedups.resize_buffer if speedups is not None else _resize_buffer_py


def new_buffer(size: int) -> bytearray:
    """A ``bytearray`` of ``size`` bytes to be filled completely before it
    is read (compiled: not zeroed first; pure Python: zeroed).

    Args:
        size: Its length in bytes.

    Returns:
        The buffer.
    """
    return _new_buffer(size)

#: Per-partition and per-topic room in a Fetch response besides the records
#: (partition header, aborted transactions list, topic name), bytes.
FETCH_PARTITION_OVERHEAD = 64
FETCH_TOPIC_OVERHEAD = 64


class FrameBuffer:
    """Accumulates received bytes and yields complete frames (without their
    4-byte size). A size below 0 raises `ProtocolError`, one above
    ``max_frame_bytes`` `FrameTooLargeError`, before any of the frame is
    buffered. Memory follows the bytes received, never the size a prefix
    announces: a frame received in place (`receive_buffer`) starts with
    room for at most `FIRST_CHUNK_BYTES` (or what already arrived) and
    doubles as it fills."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_frame_bytes = max_frame_bytes
        # A large frame being received in place (see receive_buffer): its
        # buffer (grown as bytes arrive, up to _big_size), its size and how
        # many of its bytes have arrived. While it is set, _buf holds only
        # bytes that come after it.
        self._big: bytearray | None = None
        self._big_size = 0
        self._big_fill = 0
        #: Buffers of frames handed out, reused once nobody holds them.
        self._spares: list[bytearray] = []

    def _grow(self, need: int) -> bytearray:
        """Make room in the in-place frame for ``need`` bytes in all (at most
        its size): at least double the buffer, never past the frame."""
        big = self._big
        assert big is not None
        have = len(big)
        if need > have:
            _resize_buffer(big, min(self._big_size, max(need, 2 * have)))
        return big

    def _take_buffer(self, size: int, have: int) -> bytearray:
        """The buffer for a frame of ``size`` bytes received in place, ``have``
        of them here already: a buffer of an earlier frame that nobody holds
        any more (the frame's reader dropped it and every view of it), made
        as long as its memory allows, else a new one of
        `FIRST_CHUNK_BYTES` (or ``have``) at most."""
        first = min(size, max(have, FIRST_CHUNK_BYTES))
        pool = self._spares
        for i in range(len(pool)):
            # the pool's reference and getrefcount's argument only: no reader
            # and no memoryview of it is left
            if _getrefcount(pool[i]) <= 2:  # type: ignore[misc]
                spare = pool.pop(i)
                _resize_buffer(spare, min(size, max(first, len(spare))))
                return spare
        return _new_buffer(first)

    def _keep(self, big: bytearray) -> None:
        """Remember a frame's buffer handed out, to receive a later frame
        into once its reader is done with it: at most `SPARE_BUFFERS`
        buffers of at most `SPARE_BUFFER_BYTES` each. Receiving into memory
        that is mapped already spares the page faults of fresh memory (a
        response of 8 MiB touches 2,048 new pages) and the zeroing."""
        if len(big) > SPARE_BUFFER_BYTES or SPARE_BUFFERS <= 0 or _getrefcount is None:
            return
        pool = self._spares
        if len(pool) >= SPARE_BUFFERS:
            del pool[0]
        pool.append(big)

    def feed(self, data: p.Buffer) -> None:
        """Add received bytes."""
        big = self._big
        if big is not None:
            take = min(len(data), self._big_size - self._big_fill)
            big = self._grow(self._big_fill + take)
            big[self._big_fill : self._big_fill + take] = memoryview(data)[:take]
            self._big_fill += take
            if take == len(data):
                return
            data = memoryview(data)[take:]
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def receive_buffer(self, min_frame_bytes: int) -> memoryview | None:
        """Where to receive the rest of a large frame without intermediate copies.

        Saves a 1 MB fetch response two copies (into the accumulation buffer,
        then out of it) and the socket layer's per-call allocation. After
        receiving ``n`` bytes into the view, release the view (the buffer
        grows in place, which an exported view would prevent), then call
        `received`.

        Args:
            min_frame_bytes: Only frames of at least this many bytes (size
                prefix excluded) are received in place.

        Returns:
            A writable view of (some of) the missing bytes of the frame now
                being received, inside the ``bytearray`` that `next_frame`
                will return; ``None`` when the frame's size is not known yet,
                it is smaller than ``min_frame_bytes``, already complete or
                invalid (use `feed` then). The buffer grows with the bytes
                received: the view may be shorter than what is missing.
        """
        big = self._big
        if big is None:
            buf = self._buf
            pos = self._pos
            have = len(buf) - pos - 4
            if have < 0:
                return None
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < min_frame_bytes or size <= have or size > self.max_frame_bytes:
                return None  # small, complete, or invalid (next_frame raises)
            big = self._big = self._take_buffer(size, have)
            big[:have] = memoryview(buf)[pos + 4 :]
            self._big_size = size
            self._big_fill = have
            buf.clear()
            self._pos = 0
        elif self._big_fill == len(big):
            big = self._grow(self._big_fill + 1)
        return memoryview(big)[self._big_fill :]

    def received(self, n: int) -> None:
        """Record that bytes were written into the view `receive_buffer` returned.

        Args:
            n: How many bytes were written (at most the view's length).
        """
        self._big_fill += n

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        extra = self._big_fill + 4 if self._big is not None else 0
        return len(self._buf) - self._pos + extra

    def pending_frame_size(self) -> int | None:
        """Size of the frame now being received, if its size is known."""
        if self._big is not None:
            return self._big_size
        if self.buffered < 4:
            return None
        size: int = _SIZE.unpack_from(self._buf, self._pos)[0]
        return size

    def next_frame(self) -> bytes | bytearray | None:
        """The next complete frame, or None if more bytes are needed (a
        ``bytearray`` when it was received in place, else ``bytes``)."""
        big = self._big
        if big is not None:
            if self._big_fill < self._big_size:
                return None
            self._big = None  # handed over: not written or resized while anyone holds it
            self._keep(big)
            return big
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, pos)
        if size < 0:
            raise ProtocolError(f"frame size {size} outside 0..{self.max_frame_bytes}")
        if size > self.max_frame_bytes:
            raise FrameTooLargeError(f"frame size {size} outside 0..{self.max_frame_bytes}", size=size, max_bytes=self.max_frame_bytes)
        end = pos + 4 + size
        if len(buf) < end:
            return None
        with memoryview(buf) as view:  # one copy, not two (a bytearray slice copies too)
            frame = bytes(view[pos + 4 : end])
        if end == len(buf):
            buf.clear()
            self._pos = 0
        else:
            self._pos = end
            if end > 1 << 20 and end * 2 > len(buf):
                del buf[:end]
                self._pos = 0
        return frame


@attrs.frozen
class RequestHeader:
    """A decoded request header; ``body_offset`` is where the body starts."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def request_header_version(api: Api, version: int) -> int:
    """2 for flexible versions of ``api``, else 1."""
    return 2 if api.flexible(version) else 1


def response_header_version(api: Api, version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions is always 0 (KIP-511)."""
    if api.key == API_VERSIONS.key:
        return 0
    return 1 if api.flexible(version) else 0


def encode_request(api: Api, version: int, correlation_id: int, client_id: str | None, body: Body) -> bytearray:
    """Frame a request: size, header (v1 or v2), body encoded by the schema.

    Args:
        api: The request's API.
        version: The API version to encode.
        correlation_id: Echoed back in the response header.
        client_id: The header's client id (``None`` is a null string).
        body: Field values by name, as the schema of ``version`` names them.

    Returns:
        The ``bytearray`` the frame was built in, size prefix included (no
            final copy: a Produce request carries up to ``max.request.size``
            bytes of record batches).
    """
    out = bytearray(b"\x00\x00\x00\x00")
    out += _REQ_HEAD.pack(api.key, version, correlation_id)
    p.write_string(out, client_id)
    if request_header_version(api, version) == 2:
        out.append(0)
    api.request(version).write(out, body)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return out


def parse_request_header(frame: p.Buffer) -> RequestHeader:
    """Read the header of a request frame (without its size prefix).

    Only the fixed start (api_key, api_version, correlation_id, client_id) is
    read for unknown APIs/versions, so a broker can still answer them.

    Args:
        frame (bytes | bytearray | memoryview): The frame's bytes after the
            int32 size.

    Returns:
        The header, with the offset where the body starts.

    Raises:
        kclient.errors.ProtocolError: The frame is too short.
    """
    if len(frame) < 8:
        raise ProtocolError(f"request frame of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _REQ_HEAD.unpack_from(frame, 0)
    client_id, pos = p.read_string(frame, 8)
    api = APIS.get(api_key)
    if api is not None and api.min_version <= api_version <= api.max_version and api.flexible(api_version):
        _, pos = p.read_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_request(header: RequestHeader, frame: p.Buffer) -> Any:
    """Decode a request body with the schema for ``header``'s API version.

    Args:
        header: The frame's header, from `parse_request_header`.
        frame (bytes | bytearray | memoryview): The same bytes that were
            given to `parse_request_header`.

    Returns:
        The request message: an instance of the API's
            ``request_type`` (`kclient.protocol.messages`; the fields of
            other versions at their defaults).

    Raises:
        ValueError: kclient does not implement that API or version.
        kclient.errors.ProtocolError: The body bytes are malformed.
    """
    api = APIS.get(header.api_key)
    if api is None:
        raise ValueError(f"unknown api key {header.api_key}")
    return api.request(header.api_version).decode_message(memoryview(frame)[header.body_offset :])


def encode_response(api: Api, version: int, correlation_id: int, body: Body) -> bytes:
    """Frame a response: size, header (v0 or v1), body."""
    out = bytearray(b"\x00\x00\x00\x00")
    out += _SIZE.pack(correlation_id)
    if response_header_version(api, version) == 1:
        out.append(0)
    api.response(version).write(out, body)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_unsupported_api_versions(correlation_id: int, supported: list[tuple[int, int, int]]) -> bytes:
    """The KIP-511 answer to an ApiVersions request of a version the broker lacks.

    Args:
        correlation_id: The request's correlation id.
        supported: ``(api_key, min_version, max_version)`` of every API the
            broker supports.

    Returns:
        The framed response (size prefix included): response header v0
            and a v0 body with error UNSUPPORTED_VERSION (35) and the
            supported APIs.
    """
    body = {
        "error_code": UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in supported],
    }
    return encode_response(API_VERSIONS, 0, correlation_id, body)


@attrs.frozen
class Response:
    """A completed response: the API and version it answers, and its body.

    Attributes:
        correlation_id: The request's correlation id.
        api: The API answered.
        version: The version the body was decoded with (v0 for a KIP-511
            ApiVersions answer to a version the broker lacks).
        body: The response message, an instance of ``api.response_type``
            (`kclient.protocol.messages`; the fields of other versions at
            their defaults).
    """

    correlation_id: int
    api: Api
    version: int
    body: Any


def fetch_response_bound(version: int, body: FetchRequest) -> int:
    """The most record bytes a Fetch request asks for, plus the room its
    response needs besides them.

    Args:
        version: The Fetch version (``max_bytes`` exists from v3).
        body: The request (``topics`` -> ``partitions`` ->
            ``partition_max_bytes``).

    Returns:
        ``min(max_bytes, sum of partition_max_bytes)`` plus
            `FETCH_PARTITION_OVERHEAD` per partition and
            `FETCH_TOPIC_OVERHEAD` plus the name per topic, bytes.
    """
    records = 0
    overhead = 0
    for t in body.topics:
        parts = t.partitions
        overhead += FETCH_TOPIC_OVERHEAD + len(t.topic) * 4 + FETCH_PARTITION_OVERHEAD * len(parts)
        for part in parts:
            records += max(0, part.partition_max_bytes)
    if version >= 3:
        records = min(records, max(0, body.max_bytes))
    return records + overhead


def _sent_request(api: Api, version: int, frame: bytearray) -> Any:
    """The request message a framed request carries (a Fetch written from
    a dict, read back for its response bound)."""
    data = bytes(frame)
    header = parse_request_header(memoryview(data)[4:])
    return api.request(version).decode_message(memoryview(data)[4 + header.body_offset :])


class ClientConnection:
    """Client-side protocol state for one broker connection.

    ``send(api, version, body)`` returns ``(correlation_id, frame)`` (a bytearray); feed
    received bytes to ``receive_data``; ``next_response()`` returns the next
    completed `Response` or None. Responses arrive in request order
    (Kafka answers each connection's requests in order); a response whose
    correlation id is not the oldest outstanding one raises
    `ProtocolError`. Requests sent with ``expect_response=False``
    (Produce with acks=0) are not waited for.

    Each response may be as large as the request it answers asked for:
    ``max_response_bytes`` (default `DEFAULT_RESPONSE_BYTES`, 8 MiB), plus
    `fetch_response_bound` for a Fetch. A larger size prefix raises
    `FrameTooLargeError` (naming the size, the cap and the request) as soon
    as its 4 bytes arrive; nothing of the frame is buffered. Memory follows
    the bytes received (see `FrameBuffer`), not the sizes announced.
    """

    def __init__(self, client_id: str | None = "kclient", max_response_bytes: int = DEFAULT_RESPONSE_BYTES) -> None:
        self.client_id = client_id
        self._next_id = 0
        self.max_response_bytes = max_response_bytes
        # (correlation id, api, version, the largest response accepted)
        self._in_flight: collections.deque[tuple[int, Api, int, int]] = collections.deque()
        self._frames = FrameBuffer(max_response_bytes)

    def _cap_for_head(self) -> None:
        """Set the frame buffer's cap to that of the oldest request waiting
        (the next frame answers it)."""
        self._frames.max_frame_bytes = self._in_flight[0][3] if self._in_flight else self.max_response_bytes

    def response_cap(self, api: Api, version: int, body: Body) -> int:
        """The largest response accepted to a request.

        Args:
            api: The request's API.
            version: Its version.
            body: The request message (a Fetch's bounds its answer).

        Returns:
            The cap, bytes (size prefix excluded).
        """
        if api.key == FETCH.key:
            return self.max_response_bytes + fetch_response_bound(version, body)
        return self.max_response_bytes

    @property
    def in_flight(self) -> int:
        """Number of requests awaiting a response."""
        return len(self._in_flight)

    def send(self, api: Api, version: int, body: Body, *, expect_response: bool = True) -> tuple[int, bytearray]:
        """Frame a request and expect its response.

        Args:
            api: The request's API.
            version: The version to encode.
            body: The request message (an instance of ``api.request_type``);
                a dict of its fields by name encodes the same (for callers
                speaking raw protocol).
            expect_response: False for a request the broker does not
                answer (Produce with ``acks=0``).

        Returns:
            The correlation id and the frame to write (size prefix
                included).
        """
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        data = encode_request(api, version, correlation_id, self.client_id, body)
        if expect_response:
            if type(body) is dict and api.key == FETCH.key:
                body = _sent_request(api, version, data)
            self._in_flight.append((correlation_id, api, version, self.response_cap(api, version, body)))
            if len(self._in_flight) == 1:
                self._cap_for_head()
        return correlation_id, data

    def receive_data(self, data: p.Buffer) -> None:
        self._frames.feed(data)

    @property
    def partial_response_bytes(self) -> int:
        """Bytes of a response received but not yet complete (0 between
        responses): non-zero when a peer closing now cuts a response off."""
        return self._frames.buffered

    def receive_buffer(self, min_frame_bytes: int) -> memoryview | None:
        """See `FrameBuffer.receive_buffer`: receive the rest of a large
        response straight into its final buffer, then call `received`."""
        return self._frames.receive_buffer(min_frame_bytes)

    def received(self, n: int) -> None:
        self._frames.received(n)

    def next_response(self) -> Response | None:
        """The next completed response, or ``None`` if more bytes are needed.
        Its body is the API's response message (``api.response_type``).

        Raises:
            kclient.errors.FrameTooLargeError: The next response's size
                prefix exceeds what its request asked for.
            kclient.errors.ProtocolError: Malformed bytes.
        """
        try:
            frame = self._frames.next_frame()
        except FrameTooLargeError as exc:
            what = "no request outstanding"
            if self._in_flight:
                cid, api, version, _ = self._in_flight[0]
                what = f"{api.name} v{version} (correlation id {cid})"
                if api.key == FETCH.key:
                    what += f"; a Fetch may take {exc.max_bytes - self.max_response_bytes} bytes + {self.max_response_bytes} (max_response_bytes)"
                else:
                    what += f"; max_response_bytes={self.max_response_bytes}"
            raise FrameTooLargeError(
                f"response of {exc.size} bytes exceeds the cap of {exc.max_bytes} bytes for {what}",
                size=exc.size,
                max_bytes=exc.max_bytes,
            ) from None
        if frame is None:
            return None
        if len(frame) < 4:
            raise ProtocolError("response frame shorter than its header")
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        if not self._in_flight:
            raise ProtocolError(f"response with correlation id {correlation_id} but no request outstanding")
        expected, api, version, _ = self._in_flight[0]
        if correlation_id != expected:
            raise ProtocolError(f"response correlation id {correlation_id}, expected {expected}")
        self._in_flight.popleft()
        self._cap_for_head()
        pos = 4
        if response_header_version(api, version) == 1:
            _, pos = p.read_tagged_fields(frame, pos)
        # read-only even when the frame is a bytearray (received in place):
        # byte fields handed to the application (a fetch's records) stay
        # immutable views, as they are over a bytes frame
        view = memoryview(frame).toreadonly()[pos:]
        if api.key == API_VERSIONS.key and version > 0 and len(view) >= 2 and view[0:2] == _UNSUPPORTED_VERSION_BYTES:
            # KIP-511: a broker lacking this ApiVersions version answers with
            # error UNSUPPORTED_VERSION in a v0-shaped body listing the versions it has.
            version = 0
        body = api.response(version).decode_message(view)
        return Response(correlation_id, api, version, body)
