"""A byte range of one segment file, for zero-copy fetch responses.

`kclient.storage.Log.read_slice` returns a `FileSlice`: the
``.log`` file descriptor, the byte position and length of the batches to
send, and the partition's offsets at read time. The broker hands the range
to ``os.sendfile`` (as Kafka does with ``FileChannel.transferTo``; Kafka
documentation https://kafka.apache.org/documentation/#maximizingefficiency,
"Efficiency") so record data goes from the page cache to the socket without
passing through Python.

The slice holds a reference on its segment: the file's bytes stay
readable until `FileSlice.release`, even if retention deletes the segment
meanwhile (the file is then renamed ``*.deleted`` and unlinked on the last
release). It does not hold a descriptor: the file is opened through the
process-wide cache of `kclient.storage.handles` for each `FileSlice.read`
/ `FileSlice.transfer_to`, or once for a whole ``sendfile`` loop with
`FileSlice.hold`, so a fetch of thousands of partitions does not need
thousands of descriptors at once. Use it as a context manager.
"""

from __future__ import annotations

import errno
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kclient.storage.handles import CachedFile
    from kclient.storage.segment import LogSegment

_SENDFILE_FALLBACK_ERRNOS = {errno.EINVAL, errno.ENOSYS, getattr(errno, "EOPNOTSUPP", -1), getattr(errno, "ENOTSUP", -1)}
_FALLBACK_CHUNK = 256 * 1024


#: ``os.preadv`` where the platform has it (Linux, the BSDs; not macOS).
_preadv = getattr(os, "preadv", None)


class FileSlice:
    """Bytes ``position`` .. ``position + length`` of a segment's ``.log``
    file, plus the partition's ``high_watermark``, ``log_start_offset`` and
    ``log_end_offset`` when the read was made (offsets, not bytes).

    ``fd`` is the file descriptor while the slice is held (`hold`; -1 for
    an empty slice); ``path`` the file (``None`` when empty). The range starts at a batch boundary
    and may end inside a batch (clients drop a partial last batch, as the
    "Reads" part of Kafka's "Log" documentation describes). The bytes never change while the slice is held (segments
    are append-only). Not thread-safe: one consumer per slice.

    Call `release` (or use ``with``) when done; a slice that is
    garbage-collected unreleased releases itself with a
    ``ResourceWarning``.
    """

    __slots__ = ("_segment", "_file", "_fd", "_holds", "path", "position", "length", "high_watermark", "log_start_offset", "log_end_offset")

    def __init__(
        self,
        segment: LogSegment | None,
        position: int,
        length: int,
        high_watermark: int,
        log_start_offset: int,
        log_end_offset: int,
    ) -> None:
        """Wrap a byte range of a segment's ``.log`` file.

        Args:
            segment: A segment on which the caller has taken a reference
                (`LogSegment.try_acquire`) that the slice now owns, or ``None``
                for an empty slice.
            position: Start of the range in the file (bytes).
            length: Length of the range (bytes).
            high_watermark: The partition's high watermark (an offset).
            log_start_offset: The partition's log start offset.
            log_end_offset: The partition's log end offset.
        """
        self._segment = segment
        self._file = segment.log_file if segment is not None else None
        self._fd = -1
        self._holds = 0
        self.path = segment.log_path if segment is not None else None
        self.position = position
        self.length = length if segment is not None else 0
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset

    @classmethod
    def empty(cls, high_watermark: int, log_start_offset: int, log_end_offset: int) -> FileSlice:
        """A slice of no bytes (a read at the log end offset)."""
        return cls(None, 0, 0, high_watermark, log_start_offset, log_end_offset)

    # ------------------------------------------------------------ access

    @property
    def fd(self) -> int:
        """The ``.log`` file descriptor to ``os.sendfile`` from, while the
        slice is held (`hold`).

        Returns:
            The descriptor; -1 when the slice is empty.

        Raises:
            ValueError: The slice was released, or is not held.
        """
        if self._file is None:
            return -1
        if self._segment is None:
            raise ValueError("file slice was released")
        if not self._holds:
            raise ValueError("file slice is not held: use hold()")
        return self._fd

    def _use(self) -> CachedFile:
        """The file, to pin for one call (``with self._use() as fd``)."""
        if self._segment is None or self._file is None:
            raise ValueError("file slice was released")
        return self._file

    @property
    def held(self) -> bool:
        """Whether `hold` keeps the descriptor open now."""
        return self._holds > 0

    @contextmanager
    def hold(self) -> Iterator[int]:
        """Keep the file's descriptor open for a ``with`` block (a
        ``sendfile`` loop that waits for the socket between calls).

        Yields:
            The descriptor (-1 for an empty slice).

        Raises:
            ValueError: The slice was released.
            OSError: The file could not be opened.
        """
        if self._file is None:
            yield -1
            return
        if self._segment is None:
            raise ValueError("file slice was released")
        fd = self._file.pin()
        self._fd = fd
        self._holds += 1
        try:
            yield fd
        finally:
            self._holds -= 1
            if not self._holds:
                self._fd = -1
            self._file.unpin()

    def fileno(self) -> int:
        """Same as `fd`."""
        return self.fd

    @property
    def released(self) -> bool:
        """Whether `release` was called (always ``True`` for an empty
        slice, which holds nothing)."""
        return self._segment is None

    def __len__(self) -> int:
        return self.length

    def read(self, offset: int = 0, size: int | None = None) -> bytes:
        """Read the slice's bytes into new ``bytes`` (with `readinto`).

        Args:
            offset: Where to start, in bytes from the start of the slice.
            size: The most bytes to read (default: to the end of the slice).

        Returns:
            The bytes read.

        Raises:
            ValueError: The slice was released.
        """
        end = self.length if size is None else min(self.length, offset + max(0, size))
        if offset < 0 or offset >= end:
            return b""
        out = bytearray(end - offset)
        got = self.readinto(out, offset)
        del out[got:]  # the file is shorter than promised: return what is there
        return bytes(out)

    def readinto(self, buffer: memoryview | bytearray, offset: int = 0) -> int:
        """Read slice bytes straight into ``buffer`` (``os.preadv``, no
        intermediate ``bytes``).

        Args:
            buffer: Where the bytes go; up to ``len(buffer)`` are read.
            offset: Where to start, in bytes from the start of the slice.

        Returns:
            The number of bytes read: ``min(len(buffer), length - offset)``,
                or fewer if the file is shorter than the slice promised.

        Raises:
            ValueError: The slice was released.
        """
        want = min(len(buffer), self.length - offset)
        if offset < 0 or want <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        got = 0
        try:
            with self._use() as fd:
                while got < want:
                    start = self.position + offset + got
                    if _preadv is not None:
                        n = _preadv(fd, [view[got:want]], start)
                    else:  # no preadv (macOS): read, then copy
                        data = os.pread(fd, want - got, start)
                        n = len(data)
                        view[got : got + n] = data
                    if not n:
                        break  # the file is shorter than promised
                    got += n
        finally:
            view.release()
        return got

    def transfer_to(self, out_fd: int, offset: int = 0, count: int | None = None) -> int:
        """Send slice bytes to a file descriptor with one ``os.sendfile`` call.

        Falls back to ``os.pread`` + ``os.write`` where ``sendfile`` is
        unavailable or refuses the descriptors.

        Args:
            out_fd: The destination descriptor, usually a socket.
            offset: Where to start, in bytes from the start of the slice.
            count: The most bytes to send (default: to the end of the slice).

        Returns:
            The number of bytes sent (0 at the end).

        Raises:
            BlockingIOError: A non-blocking ``out_fd`` is not writable: wait
                until it is and call again with the new offset.
        """
        end = self.length if count is None else min(self.length, offset + max(0, count))
        if offset >= end:
            return 0
        n = end - offset
        with self._use() as fd:
            sendfile: Callable[[int, int, int, int], int] | None = getattr(os, "sendfile", None)
            if sendfile is not None:
                try:
                    return sendfile(out_fd, fd, self.position + offset, n)
                except OSError as exc:
                    if isinstance(exc, BlockingIOError) or exc.errno not in _SENDFILE_FALLBACK_ERRNOS:
                        raise
            data = os.pread(fd, min(n, _FALLBACK_CHUNK), self.position + offset)
        if not data:
            return 0
        return os.write(out_fd, data)

    # ------------------------------------------------------------ lifetime

    def release(self) -> None:
        """Give the segment reference back (the file may then be closed and,
        if deleted, unlinked). Idempotent. A `hold` in progress keeps its
        descriptor until it ends."""
        seg, self._segment = self._segment, None
        if seg is not None:
            seg.release()

    def __enter__(self) -> FileSlice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            if self._segment is not None:
                warnings.warn(f"unreleased FileSlice of {self.path}", ResourceWarning, stacklevel=1)
                self.release()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return (
            f"FileSlice({str(self.path)!r}, position={self.position}, length={self.length}, "
            f"hw={self.high_watermark}, log_start={self.log_start_offset}, log_end={self.log_end_offset})"
        )
