"""The lifecycle shared by the test servers: a subprocess with a temporary
working directory, its log captured to a file, started and waited for until
it serves, stopped with SIGTERM (SIGKILL after a timeout) or killed with
SIGKILL, and cleaned up.

`ServerProcess` is the base class of `kclient.testing.BrokerProcess` and
`kclient.testing.ZooKeeperProcess`; a subclass says how to build its
command line, what to prepare before each start and how to tell that the
server is ready.
"""

from __future__ import annotations

import abc
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["BrokerProcessError", "ServerProcess", "ServerGroup", "cleanup_all", "free_port", "wait_for"]

# The package has always logged as "kclient.testing".
log = logging.getLogger("kclient.testing")

_S = TypeVar("_S", bound="ServerProcess")
_T = TypeVar("_T")
_G = TypeVar("_G", bound="ServerGroup")


class BrokerProcessError(RuntimeError):
    """A test server subprocess did not start (the message holds the tail
    of its log) or did not stop."""


def free_port(host: str) -> int:
    """A TCP port free on ``host`` right now (the OS picks it).

    Args:
        host: The address to bind.

    Returns:
        The port number; another process may take it before it is used.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(probe: Callable[[], _T | None], timeout: float, what: str) -> _T:
    """Call ``probe`` every 0.1 s until it returns a value other than None.

    Args:
        probe: The condition; None while it does not hold yet.
        timeout: Seconds to keep trying.
        what: What is waited for (for the error message).

    Returns:
        The first value ``probe`` returned that is not None.

    Raises:
        BrokerProcessError: ``timeout`` seconds passed first.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise BrokerProcessError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def cleanup_all(servers: Collection[ServerProcess]) -> None:
    """Stop ``servers`` and delete their data, in parallel (`ServerProcess.cleanup`).

    Args:
        servers: The servers (may be empty).
    """
    with ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
        list(pool.map(lambda server: server.cleanup(), servers))


class ServerGroup(abc.ABC):
    """Servers run together (a test cluster), with the ZooKeeper the group
    started itself, if any (``_own_zookeeper``, stopped by
    `_stop_own_zookeeper`); a context manager: `start` on entry, `cleanup`
    on exit. Subclasses implement both."""

    _own_zookeeper: ServerProcess | None = None

    @abc.abstractmethod
    def start(self: _G) -> _G:
        """Start the servers.

        Returns:
            ``self``.
        """

    @abc.abstractmethod
    def cleanup(self) -> None:
        """Stop the servers and delete their data."""

    def _stop_own_zookeeper(self) -> None:
        if self._own_zookeeper is not None:
            self._own_zookeeper.cleanup()
            self._own_zookeeper = None

    def __enter__(self: _G) -> _G:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.cleanup()


class ServerProcess(abc.ABC):
    """A server run as a subprocess for tests (base class).

    The subprocess's log goes to `output_path` (read it with `output`).
    Use as a context manager, or call `start`, `stop` (or `kill`) and
    finally `cleanup`; `start` may be called again after `stop` to restart
    on the same data.

    Subclasses set `NAME` and `LOG_NAME` and implement `command`,
    `_prepare` and `_wait_ready`; they may override `_popen_kwargs`,
    `_start_attempts`, `_retry_start` and `_address`.

    Args:
        host: Address the server binds.
        port: 0 for a free port, or a fixed one.
        startup_timeout: Seconds to wait until the server is ready.
        workdir_prefix: Prefix of the temporary working directory; ``None``
            for no working directory (the output then goes to a temporary
            file of its own).
        output_name: Name of the output file inside the working directory
            (without one, its suffix is the temporary file's suffix).
        output_prefix: Prefix of that temporary output file.
    """

    #: How messages name the server (``"the broker is not running"``).
    NAME = "the server"
    #: How log lines name the server (``"broker pid 12 ..."``).
    LOG_NAME = "server"

    def __init__(
        self,
        *,
        host: str,
        port: int,
        startup_timeout: float,
        workdir_prefix: str | None,
        output_name: str,
        output_prefix: str = "kclient-",
    ) -> None:
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._output_file: Any = None
        self._workdir = Path(tempfile.mkdtemp(prefix=workdir_prefix)) if workdir_prefix is not None else None
        if self._workdir is not None:
            self.output_path = self._workdir / output_name
        else:
            fd, name = tempfile.mkstemp(prefix=output_prefix, suffix=Path(output_name).suffix)
            os.close(fd)
            self.output_path = Path(name)

    # ------------------------------------------------------------ state

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            BrokerProcessError: The server is not running.
        """
        if self._port is None:
            raise BrokerProcessError(f"{self.NAME} is not running")
        return self._port

    @property
    def pid(self) -> int | None:
        """The subprocess id, or None when not running."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the subprocess is alive."""
        return self._proc is not None and self._proc.poll() is None

    def output(self) -> str:
        """What the server has logged so far."""
        try:
            return self.output_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    # ------------------------------------------------------------ subclass hooks

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The command line that starts the server."""

    def _address(self) -> str:
        """``host:port`` of the running server, for log lines."""
        return f"{self.host}:{self.port}"

    def _start_attempts(self) -> int:
        """How many times `start` may launch the server."""
        return 1

    def _retry_start(self) -> bool:
        """Whether a failed launch (not the last) is worth another attempt."""
        return False

    @abc.abstractmethod
    def _prepare(self) -> int | None:
        """Get ready to launch (directories, config files); returns the port
        the server will bind when it is chosen here, else None."""

    def _popen_kwargs(self) -> dict[str, Any]:
        """Where the subprocess's stdout and stderr go, and its environment."""
        return {"stdout": self._output_file, "stderr": subprocess.STDOUT}

    @abc.abstractmethod
    def _wait_ready(self, port: int | None) -> int:
        """Wait until the server serves; returns the port it bound.

        Raises:
            BrokerProcessError: It exited or was not ready in time.
        """

    # ------------------------------------------------------------ lifecycle

    def start(self: _S) -> _S:
        """Start the server and wait until it serves; returns ``self``.

        Returns:
            ``self``, running, with `port` bound.

        Raises:
            BrokerProcessError: It is already running, or it exited or was
                not ready within ``startup_timeout`` seconds (the message
                holds the tail of its log).
        """
        if self.running:
            raise BrokerProcessError(f"{self.NAME} is already running")
        command = self.command()
        attempts = self._start_attempts()
        for attempt in range(attempts):
            port = self._prepare()
            self._output_file = open(self.output_path, "ab")
            self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, **self._popen_kwargs())
            try:
                self._port = self._wait_ready(port)
            except BrokerProcessError:
                self._kill()
                self._proc = None
                if attempt + 1 < attempts and self._retry_start():
                    continue
                raise
            except BaseException:
                self._kill()
                self._proc = None
                raise
            log.info("%s pid %d %s", self.LOG_NAME, self._proc.pid, self._started_message())
            return self
        raise AssertionError("unreachable")

    def _started_message(self) -> str:
        return f"serving on {self._address()}"

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the server with SIGTERM (a clean shutdown), killing it if it
        has not exited after ``timeout`` seconds. Its data is kept, so
        `start` can bring it back on the same data.

        Args:
            timeout: Seconds to wait after SIGTERM before SIGKILL.

        Returns:
            The exit status, or None if it was not running.
        """
        status = None
        if self._proc is not None:
            proc = self._proc
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    log.warning("%s pid %d ignored SIGTERM for %ss; killing it", self.LOG_NAME, proc.pid, timeout)
                    self._kill()
            status = proc.returncode
            self._close_pipes()
            self._proc = None
        self._port = None
        return status

    def kill(self) -> None:
        """Kill the server with SIGKILL (``kill -9``): no shutdown, no
        flush — a simulated crash. Its data is kept, so `start` brings it
        back (and runs its recovery)."""
        self._kill()
        self._proc = None
        self._port = None

    def cleanup(self) -> None:
        """Stop the server, then delete the temporary directory this object
        made, or just the output file when there is none. Called by
        ``__exit__``."""
        self.stop()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        else:
            self.output_path.unlink(missing_ok=True)

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            self._close_pipes()

    def _close_pipes(self) -> None:
        if self._proc is not None and self._proc.stdout is not None:
            self._proc.stdout.close()
        if self._output_file is not None:
            self._output_file.close()
            self._output_file = None

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.cleanup()
