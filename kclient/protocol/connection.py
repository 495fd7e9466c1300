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

import attrs

from kclient.errors import UNSUPPORTED_VERSION, ProtocolError
from kclient.protocol import primitives as p
from kclient.protocol.messages import API_VERSIONS, APIS
from kclient.protocol.schema import Api

_SIZE = struct.Struct(">i")
_UNSUPPORTED_VERSION_BYTES = struct.pack(">h", UNSUPPORTED_VERSION)  # int16 error_code first in the body
_REQ_HEAD = struct.Struct(">hhi")
DEFAULT_MAX_FRAME = 100 * 1024 * 1024


class FrameBuffer:
    """Accumulates received bytes and yields complete frames (without their
    4-byte size). A size below 0 or above ``max_frame_bytes`` raises
    `ProtocolError` before any of the frame is buffered."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_frame_bytes = max_frame_bytes
        # A large frame being received in place (see receive_buffer): its
        # final buffer and how many of its bytes have arrived. While it is
        # set, _buf holds only bytes that come after it.
        self._big: bytearray | None = None
        self._big_fill = 0

    def feed(self, data) -> None:
        """Add received bytes."""
        big = self._big
        if big is not None:
            take = min(len(data), len(big) - self._big_fill)
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
        receiving ``n`` bytes into the view, call `received`.

        Args:
            min_frame_bytes: Only frames of at least this many bytes (size
                prefix excluded) are received in place.

        Returns:
            A writable view of the missing bytes of the frame now being
                received, inside the ``bytearray`` that `next_frame` will
                return; ``None`` when the frame's size is not known yet, it is
                smaller than ``min_frame_bytes`` or already complete (use `feed`
                then).
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
            big = self._big = bytearray(size)
            big[:have] = memoryview(buf)[pos + 4 :]
            self._big_fill = have
            buf.clear()
            self._pos = 0
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
            return len(self._big)
        if self.buffered < 4:
            return None
        return _SIZE.unpack_from(self._buf, self._pos)[0]

    def next_frame(self) -> bytes | bytearray | None:
        """The next complete frame, or None if more bytes are needed (a
        ``bytearray`` when it was received in place, else ``bytes``)."""
        big = self._big
        if big is not None:
            if self._big_fill < len(big):
                return None
            self._big = None  # handed over: never written or resized again
            return big
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, pos)
        if size < 0 or size > self.max_frame_bytes:
            raise ProtocolError(f"frame size {size} outside 0..{self.max_frame_bytes}")
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


def encode_request(api: Api, version: int, correlation_id: int, client_id: str | None, body: dict) -> bytearray:
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


def parse_request_header(frame) -> RequestHeader:
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


def decode_request(header: RequestHeader, frame) -> dict:
    """Decode a request body with the schema for ``header``'s API version.

    Args:
        header: The frame's header, from `parse_request_header`.
        frame (bytes | bytearray | memoryview): The same bytes that were
            given to `parse_request_header`.

    Returns:
        Field values by name.

    Raises:
        ValueError: kclient does not implement that API or version.
        kclient.errors.ProtocolError: The body bytes are malformed.
    """
    api = APIS.get(header.api_key)
    if api is None:
        raise ValueError(f"unknown api key {header.api_key}")
    return api.request(header.api_version).decode(memoryview(frame)[header.body_offset :])


def encode_response(api: Api, version: int, correlation_id: int, body: dict) -> bytes:
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
    """A completed response: the API and version it answers, and its body."""

    correlation_id: int
    api: Api
    version: int
    body: dict


class ClientConnection:
    """Client-side protocol state for one broker connection.

    ``send(api, version, body)`` returns ``(correlation_id, frame)`` (a bytearray); feed
    received bytes to ``receive_data``; ``next_response()`` returns the next
    completed `Response` or None. Responses arrive in request order
    (Kafka answers each connection's requests in order); a response whose
    correlation id is not the oldest outstanding one raises
    `ProtocolError`. Requests sent with ``expect_response=False``
    (Produce with acks=0) are not waited for.
    """

    def __init__(self, client_id: str | None = "kclient", max_frame_bytes: int = DEFAULT_MAX_FRAME) -> None:
        self.client_id = client_id
        self._next_id = 0
        self._in_flight: collections.deque[tuple[int, Api, int]] = collections.deque()
        self._frames = FrameBuffer(max_frame_bytes)

    @property
    def in_flight(self) -> int:
        """Number of requests awaiting a response."""
        return len(self._in_flight)

    def send(self, api: Api, version: int, body: dict, *, expect_response: bool = True) -> tuple[int, bytearray]:
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        data = encode_request(api, version, correlation_id, self.client_id, body)
        if expect_response:
            self._in_flight.append((correlation_id, api, version))
        return correlation_id, data

    def receive_data(self, data) -> None:
        self._frames.feed(data)

    def receive_buffer(self, min_frame_bytes: int) -> memoryview | None:
        """See `FrameBuffer.receive_buffer`: receive the rest of a large
        response straight into its final buffer, then call `received`."""
        return self._frames.receive_buffer(min_frame_bytes)

    def received(self, n: int) -> None:
        self._frames.received(n)

    def next_response(self) -> Response | None:
        frame = self._frames.next_frame()
        if frame is None:
            return None
        if len(frame) < 4:
            raise ProtocolError("response frame shorter than its header")
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        if not self._in_flight:
            raise ProtocolError(f"response with correlation id {correlation_id} but no request outstanding")
        expected, api, version = self._in_flight[0]
        if correlation_id != expected:
            raise ProtocolError(f"response correlation id {correlation_id}, expected {expected}")
        self._in_flight.popleft()
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
        body = api.response(version).decode(view)
        return Response(correlation_id, api, version, body)
