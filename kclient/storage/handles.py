"""Lazily opened segment files and the bounded cache of their descriptors.

A broker with thousands of partitions cannot keep every segment file open:
three files per segment (``.log``, ``.index``, ``.timeindex``) would need
6,000 descriptors for 2,000 partitions, far above the common
``ulimit -n 1024``. Kafka opens inactive segments and their indexes lazily
since 2.x (KAFKA-7283, "reduce the amount of time the broker spends
loading indexes": ``LazyIndex`` opens and mmaps an index file on its first
use). Here every segment file is a `CachedFile`: it holds no descriptor
until it is used, and a used one stays open only while it is among the
most recently used idle files of the process-wide `FileHandleCache`.

A user *pins* a file for the duration of an I/O call (`CachedFile.use`),
or for longer when a descriptor must stay valid across calls (a
``sendfile`` loop over a slice, `kclient.storage.FileSlice.hold`). A
pinned descriptor is never closed by the cache; once the last pin goes the
file joins the least-recently-used list of idle files and the oldest idle
descriptors beyond the cache's capacity are closed. The next use opens the
file again, by its current name (`CachedFile.rename` follows a segment
renamed ``*.deleted``).

The capacity needs no configuration: half of the process's soft
``RLIMIT_NOFILE`` (what ``ulimit -n`` sets), leaving the other half for
sockets and pinned files. An ``EMFILE`` while opening closes every idle
descriptor and tries once more.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

try:
    import resource
except ImportError:  # pragma: no cover - not a POSIX system
    resource = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

#: Idle descriptors kept when the descriptor limit is unknown or unlimited.
_UNLIMITED_CAPACITY = 65536
_MIN_CAPACITY = 16


def default_capacity() -> int:
    """How many idle segment descriptors the process keeps open.

    Returns:
        Half the soft ``RLIMIT_NOFILE`` (at least 16; 65,536 when the limit
            is unlimited or unknown).
    """
    if resource is None:
        return _UNLIMITED_CAPACITY
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return _UNLIMITED_CAPACITY
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return _UNLIMITED_CAPACITY
    return max(_MIN_CAPACITY, soft // 2)


class FileHandleCache:
    """A least-recently-used list of idle open `CachedFile` descriptors.

    Thread-safe: one lock guards every `CachedFile`'s descriptor and pin
    count, so a descriptor is never closed while pinned.

    Args:
        capacity: The most idle descriptors kept open; default
            `default_capacity`.
    """

    def __init__(self, capacity: int | None = None) -> None:
        self._lock = threading.Lock()
        self._idle: OrderedDict[CachedFile, None] = OrderedDict()
        self._capacity = default_capacity() if capacity is None else max(0, int(capacity))
        self._open = 0
        self.opened = 0  # files opened over the cache's life
        self.evicted = 0  # idle descriptors closed for room

    @property
    def capacity(self) -> int:
        """The most idle descriptors kept open."""
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        with self._lock:
            self._capacity = max(0, int(value))
            self._evict(self._capacity)

    @property
    def open_count(self) -> int:
        """Descriptors open now (idle and pinned)."""
        return self._open

    @property
    def idle_count(self) -> int:
        """Open descriptors no one uses now."""
        return len(self._idle)

    def close_idle(self) -> int:
        """Close every idle descriptor.

        Returns:
            How many were closed.
        """
        with self._lock:
            return self._evict(0)

    # ------------------------------------------------------------ internals (lock held)

    def _evict(self, keep: int) -> int:
        closed = 0
        while len(self._idle) > keep:
            f, _ = self._idle.popitem(last=False)
            fd, f._fd = f._fd, None
            if fd is not None:
                self._close_fd(fd)
                self.evicted += 1
                closed += 1
        return closed

    def _close_fd(self, fd: int) -> None:
        self._open -= 1
        try:
            os.close(fd)
        except OSError:
            logger.exception("could not close descriptor %d", fd)

    def open_new(self, path: str | os.PathLike[str], flags: int) -> int:
        """``os.open`` a file that the caller then hands to a `CachedFile`
        (``fd=``), closing idle descriptors and retrying once if the
        process is out of them.

        Args:
            path: The file.
            flags: ``os.open`` flags (``O_CREAT | O_EXCL`` for a new segment).

        Returns:
            The descriptor.

        Raises:
            OSError: The open failed.
        """
        with self._lock:
            return self._os_open(path, flags)

    def _os_open(self, path: str | os.PathLike[str], flags: int) -> int:
        try:
            return os.open(path, flags, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE) or not self._idle:
                raise
            logger.warning("out of descriptors opening %s: closing %d idle segment files", path, len(self._idle))
            self._evict(0)
            return os.open(path, flags, 0o644)

    def _open_file(self, f: CachedFile) -> int:
        fd = self._os_open(f._path, f._flags)
        self._open += 1
        self.opened += 1
        return fd

    def _pin(self, f: CachedFile) -> int:
        with self._lock:
            if f._closed:
                raise ValueError(f"{f._path} is closed")
            fd = f._fd
            if fd is None:
                fd = f._fd = self._open_file(f)
            elif f._pins == 0:
                self._idle.pop(f, None)
            f._pins += 1
            return fd

    def _unpin(self, f: CachedFile) -> None:
        with self._lock:
            if f._pins <= 0:
                raise RuntimeError(f"{f._path}: unpinned more often than pinned")
            f._pins -= 1
            if f._pins or f._fd is None:
                return
            if f._closed or not f._linger:
                fd, f._fd = f._fd, None
                self._close_fd(fd)
                return
            idle = self._idle
            idle[f] = None
            if len(idle) > self._capacity:
                self._evict(self._capacity)

    def _adopt(self, f: CachedFile, fd: int) -> None:
        with self._lock:
            f._fd = fd
            self._open += 1
            self.opened += 1
            if not f._linger:
                f._fd = None
                self._close_fd(fd)
                return
            self._idle[f] = None
            self._evict(self._capacity)

    def _drop(self, f: CachedFile) -> bool:
        with self._lock:
            if f._pins or f._fd is None:
                return False
            self._idle.pop(f, None)
            fd, f._fd = f._fd, None
            self._close_fd(fd)
            return True

    def _close(self, f: CachedFile) -> None:
        with self._lock:
            f._closed = True
            if f._pins == 0 and f._fd is not None:
                self._idle.pop(f, None)
                fd, f._fd = f._fd, None
                self._close_fd(fd)

    def _rename(self, f: CachedFile, new: Path) -> None:
        with self._lock:  # no open in between can see the old name vanish
            try:
                os.replace(f._path, new)
            except FileNotFoundError:
                pass
            f._path = new


_default_cache: FileHandleCache | None = None
_default_lock = threading.Lock()


def default_cache() -> FileHandleCache:
    """The process-wide cache every segment file uses (made on first use,
    sized by `default_capacity` at that moment)."""
    global _default_cache
    cache = _default_cache
    if cache is None:
        with _default_lock:
            if _default_cache is None:
                _default_cache = FileHandleCache()
            cache = _default_cache
    return cache


class CachedFile:
    """One file opened on demand through a `FileHandleCache`.

    Args:
        path: The file.
        create: Open with ``O_CREAT`` (index files); without it a missing
            file raises ``FileNotFoundError`` on use.
        linger: Keep the descriptor among the cache's idle ones after use;
            ``False`` closes it when the last pin goes (files used rarely,
            such as indexes, whose entries live in memory).
        fd: A descriptor already open on ``path`` (from creating the
            file), handed to the cache as idle.
        cache: The cache; default `default_cache`.
    """

    __slots__ = ("_path", "_flags", "_linger", "_cache", "_fd", "_pins", "_closed", "__weakref__")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        linger: bool = True,
        fd: int | None = None,
        cache: FileHandleCache | None = None,
    ) -> None:
        self._path = Path(path)
        self._linger = linger
        self._flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self._cache = cache if cache is not None else default_cache()
        self._fd: int | None = None
        self._pins = 0
        self._closed = False
        if fd is not None:
            self._cache._adopt(self, fd)

    @property
    def path(self) -> Path:
        """The file's current name."""
        return self._path

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is open now."""
        return self._fd is not None

    @property
    def pins(self) -> int:
        """How many users hold the descriptor now."""
        return self._pins

    def pin(self) -> int:
        """Open the file if needed and keep it open until `unpin`.

        Returns:
            The descriptor, valid until the matching `unpin`.

        Raises:
            ValueError: The file was closed.
            OSError: Opening failed.
        """
        return self._cache._pin(self)

    def unpin(self) -> None:
        """Give back a `pin`; the descriptor may then be closed."""
        self._cache._unpin(self)

    def write_at(self, data: bytes | bytearray | memoryview, position: int) -> None:
        """``os.pwrite`` all of ``data`` at byte ``position``, the file
        pinned meanwhile; on failure the file is truncated back to
        ``position`` and the error raised (a segment's append).

        Args:
            data: The bytes.
            position: Where they go in the file, in bytes.

        Raises:
            ValueError: The file was closed.
            OSError: Opening or writing failed.
        """
        cache = self._cache
        fd = cache._pin(self)
        try:
            written = os.pwrite(fd, data, position)
            if written < len(data):  # a short write: write the rest
                view = memoryview(data)
                while written < len(view):
                    written += os.pwrite(fd, view[written:], position + written)
        except BaseException:
            try:
                os.ftruncate(fd, position)
            except OSError:
                logger.exception("%s: could not truncate back to %d bytes after a failed write", self._path, position)
            raise
        finally:
            cache._unpin(self)

    def use(self) -> CachedFile:
        """The descriptor, pinned for a ``with`` block
        (``with f.use() as fd:``).

        Returns:
            This file, a context manager whose ``__enter__`` pins (opening
                the file if needed; ``ValueError`` once closed, ``OSError``
                if opening fails) and returns the descriptor, and whose
                ``__exit__`` unpins.
        """
        return self

    def __enter__(self) -> int:
        return self._cache._pin(self)

    def __exit__(self, *exc_info: object) -> None:
        self._cache._unpin(self)

    def drop(self) -> bool:
        """Close the descriptor now if no one uses it; the file stays
        usable (the next use opens it again).

        Returns:
            Whether a descriptor was closed.
        """
        return self._cache._drop(self)

    def rename(self, path: str | os.PathLike[str]) -> None:
        """Rename the file (``os.replace``); a missing file is not an error.

        Open descriptors stay valid and later opens use the new name.

        Args:
            path: The new name.
        """
        self._cache._rename(self, Path(path))

    def close(self) -> None:
        """Close the descriptor now, or when the last pin goes; later uses
        raise ``ValueError``. Idempotent."""
        self._cache._close(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._fd is not None else "idle-closed")
        return f"CachedFile({str(self._path)!r}, {state}, pins={self._pins})"
