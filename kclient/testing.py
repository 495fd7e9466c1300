"""Helpers for tests (yours and kclient's): run the bundled broker on a free
loopback port with a temporary log directory.

Blocking, in a subprocess (works from any test framework)::

    from kclient.testing import BrokerProcess

    with BrokerProcess() as broker:
        producer = Producer({"metadata.broker.list": broker.bootstrap})
        ...

In-process, for trio code::

    async with run_broker() as broker:   # a started kclient.broker.Broker
        ... broker.port ...
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

import trio

log = logging.getLogger(__name__)

_LISTENING = re.compile(rb"kclient broker listening on (?P<host>\S+):(?P<port>\d+)")


class BrokerProcessError(RuntimeError):
    """The broker subprocess did not start (the message holds the tail of
    its log) or did not stop."""


class BrokerProcess:
    """The bundled broker (``python -m kclient broker``) as a subprocess.

    ``host``: loopback address to bind and advertise (default
    ``127.0.0.1``). ``port``: 0 (default) for a free port chosen by the OS,
    or a fixed one. ``log_dir``: where the partition logs go; default a
    fresh temporary directory, deleted by :meth:`cleanup` (pass a path to
    keep the data). ``properties``:
    more ``server.properties`` settings (``{"num.partitions": 4}``), applied
    as ``--override`` after the defaults above. ``config_file``: a
    ``server.properties`` file passed to the broker first (the overrides
    still win). ``startup_timeout``:
    seconds to wait for the broker to listen. ``verbose``: run it with ``-v``.

    The broker's stderr (its log) goes to :attr:`output_path` (read it with
    :meth:`output`). Use as a context manager, or call :meth:`start`,
    :meth:`stop` and finally :meth:`cleanup`; :meth:`start` may be called
    again after :meth:`stop` to restart on the same logs (the port is then
    chosen anew unless fixed).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_dir: str | os.PathLike[str] | None = None,
        properties: Mapping[str, Any] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        verbose: bool = False,
        python: str = sys.executable,
    ) -> None:
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="kclient-broker-")) if log_dir is None else None
        self.log_dir: Path = Path(log_dir) if log_dir is not None else self._workdir / "logs"  # type: ignore[operator]
        self.properties = dict(properties or {})
        self.config_file = config_file
        self.startup_timeout = startup_timeout
        self.verbose = verbose
        self.python = python
        self._proc: subprocess.Popen[bytes] | None = None
        self._output_file: Any = None
        if self._workdir is not None:
            self.output_path = self._workdir / "broker.out"
        else:
            fd, name = tempfile.mkstemp(prefix="kclient-broker-", suffix=".out")
            os.close(fd)
            self.output_path = Path(name)

    # ------------------------------------------------------------ properties

    @property
    def port(self) -> int:
        """The bound port. Raises :class:`BrokerProcessError` if not started."""
        if self._port is None:
            raise BrokerProcessError("the broker is not running")
        return self._port

    @property
    def bootstrap(self) -> str:
        """``"host:port"``, for ``metadata.broker.list`` / ``bootstrap_servers``."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The subprocess id, or None when not running."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the subprocess is alive."""
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        """The command line used to start the broker."""
        cmd = [self.python, "-m", "kclient"]
        if self.verbose:
            cmd.append("-v")
        cmd.append("broker")
        if self.config_file is not None:
            cmd.append(os.fspath(self.config_file))
        settings: dict[str, Any] = {
            "host.name": self.host,
            "port": self._requested_port,
            "log.dirs": str(self.log_dir),
        }
        settings.update(self.properties)
        for key, value in settings.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def output(self) -> str:
        """What the broker has logged so far (its stderr)."""
        try:
            return self.output_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    # ------------------------------------------------------------ lifecycle

    def start(self) -> BrokerProcess:
        """Start the broker and wait until it listens; returns ``self``.

        Raises :class:`BrokerProcessError` (with the broker's log) if it
        exits or does not print its listening line within
        ``startup_timeout`` seconds.
        """
        if self.running:
            raise BrokerProcessError("the broker is already running")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        self._output_file = open(self.output_path, "ab")
        self._proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._output_file,
            env=env,
        )
        try:
            self._port = self._wait_listening()
        except BaseException:
            self._kill()
            raise
        log.info("broker pid %d listening on %s", self._proc.pid, self.bootstrap)
        return self

    def _wait_listening(self) -> int:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        deadline = time.monotonic() + self.startup_timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(stdout, selectors.EVENT_READ)
            while True:
                m = _LISTENING.search(buf)
                if m:
                    return int(m["port"])
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrokerProcessError(
                        f"broker did not listen within {self.startup_timeout}s; its log:\n{self.output()[-4000:]}"
                    )
                if sel.select(timeout=min(left, 0.5)):
                    chunk = os.read(stdout.fileno(), 4096)
                    if not chunk:
                        self._proc.wait(timeout=5)
                        raise BrokerProcessError(
                            f"broker exited with status {self._proc.returncode} before listening; "
                            f"its log:\n{self.output()[-4000:]}"
                        )
                    buf += chunk

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the broker with SIGTERM (a clean shutdown that flushes its
        logs), killing it if it has not exited after ``timeout`` seconds.
        The log directory is kept, so :meth:`start` can bring the broker
        back on the same data. Returns the exit status (None if it was not
        running)."""
        status = None
        if self._proc is not None:
            proc = self._proc
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    log.warning("broker pid %d ignored SIGTERM for %ss; killing it", proc.pid, timeout)
                    self._kill()
            status = proc.returncode
            self._close_pipes()
            self._proc = None
        self._port = None
        return status

    def kill(self) -> None:
        """Kill the broker with SIGKILL (``kill -9``): no shutdown, no flush,
        no clean-shutdown marker — a simulated crash. The log directory is
        kept, so :meth:`start` brings the broker back and runs recovery."""
        self._kill()
        self._proc = None
        self._port = None

    def cleanup(self) -> None:
        """Stop the broker, then delete the temporary directory this object
        made (logs and broker output), or just the output file when the
        caller gave ``log_dir``. Called by ``__exit__``."""
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

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = f"{self.bootstrap}" if self._port is not None else "stopped"
        return f"<BrokerProcess {state} log_dir={str(self.log_dir)!r}>"


@contextlib.asynccontextmanager
async def run_broker(config: Any = None, **properties: Any) -> AsyncIterator[Any]:
    """Run a :class:`kclient.broker.Broker` inside the current trio task
    for the body of an ``async with``; yields the started broker (its
    ``port`` is bound). ``config``: a :class:`kclient.config.BrokerConfig`;
    default one on ``127.0.0.1``, a free port and a temporary log
    directory (deleted afterwards). ``properties``: Kafka property names with
    dots replaced by underscores (``num_partitions=4``), applied on top.
    """
    from kclient.broker import Broker
    from kclient.config import BrokerConfig

    tmp = None
    if config is None:
        tmp = tempfile.mkdtemp(prefix="kclient-broker-")
        config = BrokerConfig.from_properties({"host.name": "127.0.0.1", "port": 0, "log.dirs": tmp})
    if properties:
        config = config.with_properties({k.replace("_", "."): v for k, v in properties.items()})
    broker = Broker(config)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.serve)
            try:
                yield broker
            finally:
                broker.stop()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["BrokerProcess", "BrokerProcessError", "run_broker"]
