"""Ctrl-C (SIGINT) and SIGTERM in the console tools: a request to stop,
acted on where the tool can stop without losing track of a record.

Python turns SIGINT into a KeyboardInterrupt raised at whatever bytecode the
main thread runs next. In a tool that reads lines and sends them, or fetches
records and prints them, that point may lie between reading two lines from
stdin and sending them, inside ``Producer.send`` after the record was
queued, inside the final ``close()`` (which then abandons what is queued),
or between printing a record and counting it: lines vanish and the
``Processed a total of N messages`` line goes missing or is wrong (issue 27).
Kafka's console tools stop through a JVM shutdown hook instead: the signal
asks the tool to stop, and the tool finishes what it holds first.

`ShutdownSignals` does that for kclient's tools. Installed (in the main
thread), SIGINT and SIGTERM are recorded (`requested`) and wake
`wait_readable`, and what else they do depends on the mode the tool is in:

- `HOLD` (the default): signals are only recorded; the tool looks at
  `requested` where it can stop cleanly, and reports what it did.
- `STOP` (`stopping`): the first signal only asks to stop, as in `HOLD`
  (the tool stops after sending every line it read, after counting every
  record it printed); a second one raises KeyboardInterrupt, for a user
  who does not want to wait (a send or a close that hangs on an
  unreachable broker).
- `RAISE` (`raising`): a signal raises KeyboardInterrupt at once, as
  Python's default handler does (SIGINT is handed back to it), for phases
  with nothing to lose: connecting, looking up offsets. Entering it after a
  signal raises at once.

`kclient.cli.main` installs one before it parses the command line, so a
signal that arrives while the tool starts is not lost either; a tool's
``run`` uses that one through `shutdown_signals` (or installs its own when
called directly).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, Literal

__all__ = ["HOLD", "RAISE", "STOP", "ShutdownSignals", "shutdown_signals"]

Mode = Literal["stop", "raise", "hold"]

#: Signals are only recorded (the default).
HOLD: Mode = "hold"
#: The first signal asks to stop; the next ones raise KeyboardInterrupt.
STOP: Mode = "stop"
#: Every signal raises KeyboardInterrupt at once.
RAISE: Mode = "raise"

#: The signals a tool stops on.
SIGNALS = (signal.SIGINT, signal.SIGTERM)

_installed: ShutdownSignals | None = None


class ShutdownSignals:
    """SIGINT and SIGTERM as a request to stop (see the module docstring).

    Use as a context manager (`install` on entry, `uninstall` on exit); only
    the main thread can install it. Not installed (another thread), it
    records nothing and its modes change nothing: SIGINT keeps raising
    KeyboardInterrupt in the main thread, as without it.
    """

    def __init__(self) -> None:
        #: The signal numbers received, in order.
        self.received: list[int] = []
        self.mode: Mode = HOLD
        self._installed = False
        self._previous: dict[int, Any] = {}
        self._previous_wakeup = -1
        self._read_fd = self._write_fd = -1

    @property
    def requested(self) -> bool:
        """True once a stop was asked for (a signal was received)."""
        return bool(self.received)

    @property
    def installed(self) -> bool:
        """True while the handlers are installed."""
        return self._installed

    def install(self) -> bool:
        """Install the handlers and the wake-up descriptor.

        Returns:
            True if installed; False in a thread other than the main thread
            (signal handlers can be set only there).
        """
        if self._installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            return False
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._previous_wakeup = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        self._installed = True
        return True

    def uninstall(self) -> None:
        """Give the signals back to the handlers they had before `install`."""
        if not self._installed:
            return
        self._installed = False
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        signal.set_wakeup_fd(self._previous_wakeup)
        for fd in (self._read_fd, self._write_fd):
            os.close(fd)
        self._read_fd = self._write_fd = -1

    def __enter__(self) -> ShutdownSignals:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        repeated = self.requested
        self.received.append(signum)
        if self.mode == RAISE or (self.mode == STOP and repeated):
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def _in_mode(self, mode: Mode) -> Iterator[None]:
        previous, self.mode = self.mode, mode
        try:
            yield
        finally:
            self.mode = previous

    @contextlib.contextmanager
    def raising(self) -> Iterator[None]:
        """The `RAISE` mode for the ``with`` block: a signal raises
        KeyboardInterrupt at once. SIGINT goes back to Python's own handler
        meanwhile (so that ``trio.run`` in this thread defers it to a safe
        point, as it does without us) and the wake-up descriptor is unset
        (``trio.run`` sets its own).

        Raises:
            KeyboardInterrupt: On entry, if a stop was already asked for;
                in the block, on a signal.
        """
        if not self._installed:
            yield
            return
        if self.requested:
            raise KeyboardInterrupt
        before = len(self.received)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        try:
            with self._in_mode(RAISE):
                yield
        except KeyboardInterrupt:
            if len(self.received) == before:  # Python's SIGINT handler raised it
                self.received.append(signal.SIGINT)
            raise
        finally:
            signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
            signal.signal(signal.SIGINT, self._handle)

    def held(self) -> contextlib.AbstractContextManager[None]:
        """The `HOLD` mode (the default) for the ``with`` block: signals
        are only recorded."""
        return self._in_mode(HOLD)

    def stopping(self) -> contextlib.AbstractContextManager[None]:
        """The `STOP` mode for the ``with`` block: the first signal is only
        recorded, the next ones raise KeyboardInterrupt."""
        return self._in_mode(STOP)

    def wait_readable(self, fd: int) -> bool:
        """Block until ``fd`` is readable or a stop is asked for.

        Args:
            fd: A file descriptor select() can wait on (a pipe, a
                terminal, a file, a socket).

        Returns:
            True when ``fd`` is readable (and no stop was asked for), False
            once a stop was asked for.
        """
        while not self.requested:
            waited = [fd, self._read_fd] if self._installed else [fd]
            ready, _, _ = select.select(waited, [], [])
            if self._read_fd in ready:
                self._drain()
                # The signal's Python handler runs before the loop's test.
                continue
            return True
        return False

    def _drain(self) -> None:
        try:
            while os.read(self._read_fd, 512):
                pass
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                raise


@contextlib.contextmanager
def shutdown_signals() -> Iterator[ShutdownSignals]:
    """The process's `ShutdownSignals` for the ``with`` block: the one
    `kclient.cli.main` installed, else a new one installed for the block
    (in the main thread; elsewhere an inactive one).

    Yields:
        The ShutdownSignals, in the `HOLD` mode.
    """
    if _installed is not None and _installed.installed:
        with _installed.held():
            yield _installed
        return
    with ShutdownSignals() as signals, installed_as_current(signals):
        yield signals


@contextlib.contextmanager
def installed_as_current(signals: ShutdownSignals) -> Iterator[ShutdownSignals]:
    """Make ``signals`` the one `shutdown_signals` gives in the ``with``
    block (`kclient.cli.main` wraps a tool's run in it).

    Args:
        signals: An installed ShutdownSignals.

    Yields:
        ``signals``.
    """
    global _installed
    previous, _installed = _installed, signals
    try:
        yield signals
    finally:
        _installed = previous

