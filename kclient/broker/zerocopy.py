"""Zero-copy responses: a response frame made of encoded bytes and
`kclient.storage.FileSlice` ranges of segment files, sent with
``os.sendfile``, as Kafka does (Kafka documentation
https://kafka.apache.org/documentation/#maximizingefficiency, "Efficiency":
zero-copy with sendfile; and
https://kafka.apache.org/documentation/#networklayer, "Network Layer").

`encode_spliced_response` encodes a response message whose ``records``
fields hold `FileSlice` objects (a ``FetchResponse`` of Fetch v4+, stored
bytes unchanged) with the API's declarative schema: every slice contributes
its int32 length prefix (``len(slice)``, exactly the bytes that will be
sent) to the encoded bytes, and its data is left in the file. The result
is a `SplicedResponse`: ``[bytes, FileSlice, bytes, FileSlice, ...]``
whose total length is in the frame's size field.

`SplicedResponse.send` writes the parts in order to a trio socket
stream: bytes with ``send``, slices with
`FileSlice.transfer_to` (``os.sendfile`` from the segment file to the
socket, ``pread`` + ``write`` where ``sendfile`` is unavailable), waiting
with ``trio.lowlevel.wait_writable`` whenever the socket buffer is full
(``BlockingIOError``) and resuming at the byte where the partial send
stopped. If a file turns out shorter than its slice promised, the frame
cannot be completed: `SpliceError` is raised and the caller must
close the connection.

The slices are owned by the response from encoding on: `release`
gives them back (idempotent); call it after sending and on every error or
cancellation path (``with`` does it).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import trio

from kclient.protocol.connection import new_buffer, response_header_version
from kclient.protocol.messages.fetch import FetchResponse, PartitionData
from kclient.protocol.schema import Api
from kclient.storage import FileSlice

_SIZE = struct.Struct(">i")

#: Slices shorter than this (bytes) are read into the response bytes
#: instead: for a few KB one ``send`` (one syscall, one TCP segment) costs
#: less than ``send`` + ``sendfile``.
SENDFILE_MIN_BYTES = 16 * 1024


class SpliceError(ConnectionError):
    """A response frame could not be completed (a segment file held fewer
    bytes than its slice promised); the connection must be closed."""


class _SpliceBuffer(bytearray):
    """A bytearray that, when a `FileSlice` is appended to it with
    ``+=`` (as the schema's bytes writer does after writing the length
    prefix), records the slice and its position instead of copying data."""

    def __init__(self, initial: bytes = b"") -> None:
        super().__init__(initial)
        self.splices: list[tuple[int, FileSlice]] = []

    def __iadd__(self, other: Any) -> _SpliceBuffer:  # type: ignore[misc]  # also takes a FileSlice, unlike +
        if isinstance(other, FileSlice):
            if other.length:
                self.splices.append((len(self), other))
            return self
        return bytearray.__iadd__(self, other)

    def __delitem__(self, key: Any) -> None:
        # A schema writer cuts the buffer back to where a struct began when
        # a value does not fit: forget the slices appended after that.
        bytearray.__delitem__(self, key)
        end = len(self)
        self.splices = [(pos, piece) for pos, piece in self.splices if pos <= end]


def iter_slices(body: object) -> Iterator[FileSlice]:
    """Every `FileSlice` held anywhere in a response body (nested
    messages, dicts and lists), in encoding order."""
    return iter(_slices(body))


def _slices(body: object) -> list[FileSlice]:
    """`iter_slices` as a list: one pass, no generator per level (a Fetch
    response for 2,048 partitions has some 20,000 values to look at). A
    ``FetchResponse`` (the one message with records) is read directly."""
    out: list[FileSlice] = []
    if type(body) is FetchResponse:
        for topic in body.responses:
            for partition in topic.partitions:
                records = partition.records
                if isinstance(records, FileSlice):
                    out.append(records)
    elif isinstance(body, FileSlice):
        out.append(body)
    else:
        _collect(body, out)
    return out


def _collect(container: object, out: list[FileSlice]) -> None:
    """The slices in a dict, a list or a message (its attributes in
    declaration order, the encoding order), depth first."""
    values: Any
    kind = type(container)
    if isinstance(container, dict):
        values = container.values()
    elif isinstance(container, list):
        values = container
    elif attrs.has(kind):
        values = [getattr(container, a.name) for a in attrs.fields(kind)]
    else:
        return
    for value in values:
        kind = type(value)
        if kind is int or kind is str or kind is bytes or value is None:
            continue
        if isinstance(value, FileSlice):
            out.append(value)
        else:
            _collect(value, out)


def release_slices(body: object) -> None:
    """Release every `FileSlice` in a response body (idempotent)."""
    for piece in _slices(body):
        piece.release()


class SplicedResponse:
    """One response frame as ``parts``: ``bytes``/``bytearray`` and non-empty
    `FileSlice` objects, in wire order; ``size`` is the frame's
    total length in bytes including its 4-byte size prefix. Owns the
    slices (see the module docstring)."""

    def __init__(self, parts: Sequence[bytes | bytearray | FileSlice]) -> None:
        self.parts = parts
        self.size = sum(len(p) for p in parts)

    @property
    def slices(self) -> list[FileSlice]:
        """The file slices among the parts."""
        return [p for p in self.parts if isinstance(p, FileSlice)]

    def to_bytes(self) -> bytes:
        """The whole frame read into memory (the copying path; for tests
        and for transports without a file descriptor)."""
        return b"".join(p.read() if isinstance(p, FileSlice) else p for p in self.parts)

    async def send(self, stream: trio.SocketStream) -> None:
        """Write the frame to ``stream``'s socket.

        Bytes go with ``send``, slices with ``os.sendfile`` (see the module
        docstring). Does not release the slices.

        Args:
            stream: A connected socket stream.

        Raises:
            SpliceError: A file ends early.
            OSError: The peer went away (``BrokenPipeError``,
                ``ConnectionResetError``).
        """
        sock = stream.socket
        fd = sock.fileno()
        for part in self.parts:
            if isinstance(part, FileSlice):
                await _send_slice(sock, fd, part)
            elif part:
                await _send_bytes(sock, part)

    def release(self) -> None:
        """Release every slice (idempotent)."""
        for part in self.parts:
            if isinstance(part, FileSlice):
                part.release()

    def __enter__(self) -> SplicedResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


async def _send_bytes(sock: Any, data: bytes | bytearray) -> None:
    # No MSG_MORE / TCP_CORK: measured on Linux 6.18 loopback, corking the
    # header made every response after the first wait ~200 ms (the cork
    # timer) before its first byte; TCP_NODELAY plus a separate small
    # segment for the header costs nothing measurable.
    view = memoryview(data)
    while view:
        sent = await sock.send(view)
        view = view[sent:]


async def _send_slice(sock: Any, fd: int, piece: FileSlice) -> None:
    offset = 0
    total = piece.length
    with piece.hold():  # one descriptor for the whole loop (segment files open lazily)
        while offset < total:
            try:
                sent = piece.transfer_to(fd, offset)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            if sent == 0:
                raise SpliceError(f"{piece.path} ended {total - offset} bytes before the end of its slice {piece!r}")
            offset += sent
            if offset < total:
                # The socket buffer is probably full now: yield to the other
                # connections before trying again.
                await trio.lowlevel.checkpoint()
    await trio.lowlevel.checkpoint_if_cancelled()


def encode_spliced_response(
    api: Api, version: int, correlation_id: int, body: object, *, min_sendfile_bytes: int = SENDFILE_MIN_BYTES
) -> bytes | bytearray | SplicedResponse:
    """Frame a response whose ``records`` fields may hold `FileSlice` objects.

    Size, response header, body by the schema. Slices of at least
    ``min_sendfile_bytes`` stay in their files; shorter ones are read
    (``pread``) into the bytes and released. On an error every slice is
    released before it propagates.

    Args:
        api: The response's API.
        version: The API version.
        correlation_id: The request's correlation id.
        body: The response message (a ``FetchResponse``; or a dict of
            field values by name).
        min_sendfile_bytes: Smallest slice, in bytes, worth a ``sendfile``.

    Returns:
        The frame's bytes (``bytes`` or ``bytearray``) when no slice stays
            (every slice is then released),
            else a `SplicedResponse` owning the slices that stay.

    Raises:
        ValueError: The body does not fit the schema.
        OSError: Reading a short slice failed.
    """
    try:
        # A Fetch answer for many partitions holds mostly short slices:
        # read them in first, so that the common frame is encoded into a
        # plain bytearray (no Python hook on each of its writes).
        inlined, left, empty = _inline_short_slices(body, min_sendfile_bytes) if type(body) is FetchResponse else (False, True, [])
        out: bytearray = _SpliceBuffer(b"\x00\x00\x00\x00") if left else bytearray(b"\x00\x00\x00\x00")
        out += _SIZE.pack(correlation_id)
        if response_header_version(api, version) == 1:
            out.append(0)
        try:
            api.response(version).write(out, body)
        finally:
            for partition, piece in empty:  # (the body keeps its released empty slices)
                partition.records = piece  # type: ignore[assignment]  # (a FileSlice, as the fetch handler put it)
        if not left:
            _SIZE.pack_into(out, 0, len(out) - 4)
            return out if inlined else bytes(out)
        assert isinstance(out, _SpliceBuffer)
        slices = _slices(body)
        if [s for _, s in out.splices] != [p for p in slices if p.length]:
            raise ValueError("the schema writer did not append every file slice with +=")
    except BaseException:
        release_slices(body)
        raise
    for piece in slices:
        if not piece.length:
            piece.release()
    data_bytes = sum(s.length for _, s in out.splices)
    _SIZE.pack_into(out, 0, len(out) - 4 + data_bytes)
    if not out.splices:
        return bytes(out)
    try:
        parts = _assemble(out, min_sendfile_bytes)
    except BaseException:
        release_slices(body)
        raise
    if len(parts) == 1:
        return parts[0]  # type: ignore[return-value]  # every slice was read in
    return SplicedResponse(parts)


def _inline_short_slices(body: FetchResponse, min_sendfile_bytes: int) -> tuple[bool, bool, list[tuple[PartitionData, FileSlice]]]:
    """Replace each slice of ``body`` shorter than ``min_sendfile_bytes`` by
    its bytes (read, then released). An empty slice is released and
    replaced by ``b""`` for the encoding only: the caller puts it back. A
    slice whose file ends early raises `SpliceError` and stays in ``body``.

    Returns:
        ``(whether any bytes were read in, whether any slice is left,
            the empty slices' partitions and slices)``.
    """
    inlined = left = False
    empty: list[tuple[PartitionData, FileSlice]] = []
    for topic in body.responses:
        for partition in topic.partitions:
            piece = partition.records
            if not isinstance(piece, FileSlice):
                continue
            n = piece.length
            if n >= min_sendfile_bytes:
                left = True
                continue
            if not n:
                piece.release()
                partition.records = b""
                empty.append((partition, piece))
                continue
            data = bytearray(n)
            got = piece.readinto(data)
            if got != n:
                raise SpliceError(f"{piece.path} ended {n - got} bytes before the end of its slice {piece!r}")
            inlined = True
            partition.records = data
            piece.release()
    return inlined, left, empty


def _assemble(out: _SpliceBuffer, min_sendfile_bytes: int) -> list[bytearray | FileSlice]:
    """The frame's parts: each run of encoded bytes and short slices as one
    buffer, the short slices read (``preadv``) straight into their place
    and released, and the long slices kept for ``sendfile``. A buffer is
    sized once: no copy of a slice's bytes but the read itself."""
    encoded = memoryview(out)
    try:
        # Cut the frame at the long slices; each run is (start, end) of the
        # encoded bytes plus the short slices within it.
        runs: list[tuple[int, int, list[tuple[int, FileSlice]], FileSlice | None]] = []
        start = 0
        short: list[tuple[int, FileSlice]] = []
        for pos, piece in out.splices:
            if piece.length >= min_sendfile_bytes:
                runs.append((start, pos, short, piece))
                start, short = pos, []
            else:
                short.append((pos, piece))
        runs.append((start, len(out), short, None))
        parts: list[bytearray | FileSlice] = []
        for start, end, short, long_piece in runs:
            size = end - start + sum(piece.length for _, piece in short)
            buf = new_buffer(size)
            view = memoryview(buf)
            at = 0  # where the next bytes go in buf
            cut = start  # the encoded bytes before cut are in buf
            for pos, piece in short:
                view[at : at + pos - cut] = encoded[cut:pos]
                at += pos - cut
                cut = pos
                got = piece.readinto(view[at : at + piece.length])
                if got != piece.length:
                    raise SpliceError(f"{piece.path} ended {piece.length - got} bytes before the end of its slice {piece!r}")
                piece.release()
                at += got
            view[at:] = encoded[cut:end]
            view.release()
            if buf:
                parts.append(buf)
            if long_piece is not None:
                parts.append(long_piece)
        return parts
    finally:
        encoded.release()


__all__ = ["SpliceError", "SplicedResponse", "encode_spliced_response", "iter_slices", "release_slices"]
