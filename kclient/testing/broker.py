"""The bundled broker for tests: `BrokerProcess` runs it as a subprocess,
`run_broker` inside the current trio task."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import resource
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import trio

from kclient.testing.process import BrokerProcessError, ServerProcess

__all__ = ["BrokerProcess", "run_broker"]

_LISTENING = re.compile(rb"kclient broker listening on (?P<host>\S+):(?P<port>\d+)")
#: One listener's line (``... (NAME)``); the broker prints them all in one write.
_LISTENER_LINE = re.compile(rb"kclient broker listening on (?P<host>\S+):(?P<port>\d+)(?: \((?P<name>[A-Za-z0-9_]+)\))?\n")


def _limit_open_files(limit: int) -> None:
    """Set ``RLIMIT_NOFILE`` in the forked child before it runs the broker."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


class BrokerProcess(ServerProcess):
    """The bundled broker (``python -m kclient broker``) as a subprocess.

    The broker's stderr (its log) goes to `output_path` (read it with
    `output`). Use as a context manager, or call `start`,
    `stop` and finally `cleanup`; `start` may be called
    again after `stop` to restart on the same logs (the port is then
    chosen anew unless fixed).

    Args:
        host: Loopback address to bind and advertise.
        port: 0 for a free port chosen by the OS, or a fixed one.
        log_dir: Where the partition logs go; default a fresh temporary
            directory, deleted by `cleanup` (pass a path to keep the data).
        properties: More ``server.properties`` settings
            (``{"num.partitions": 4}``), applied as ``--override`` after the
            defaults above.
        config_file: A ``server.properties`` file passed to the broker
            first (the overrides still win).
        startup_timeout: Seconds to wait for the broker to listen.
        keep_port: Restart (`start` after `stop` or `kill`) on the port
            of the first start instead of a new free one, as a restarted
            broker of a cluster does; its address in ZooKeeper and in the
            clients' metadata stays the same.
        verbose: Run it with ``-v``.
        python: The Python interpreter that runs it.
        max_open_files: Start it with this soft and hard ``RLIMIT_NOFILE``
            (what ``ulimit -n`` sets), to check that it serves within a
            descriptor budget; ``None`` inherits this process's limit.
    """

    NAME = "the broker"
    LOG_NAME = "broker"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_dir: str | os.PathLike[str] | None = None,
        properties: Mapping[str, Any] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        keep_port: bool = False,
        verbose: bool = False,
        python: str = sys.executable,
        max_open_files: int | None = None,
    ) -> None:
        super().__init__(
            host=host,
            port=port,
            startup_timeout=startup_timeout,
            workdir_prefix="kclient-broker-" if log_dir is None else None,
            output_name="broker.out",
            output_prefix="kclient-broker-",
        )
        self.log_dir: Path = Path(log_dir) if log_dir is not None else self._workdir / "logs"  # type: ignore[operator]
        self.properties = dict(properties or {})
        self.config_file = config_file
        self.keep_port = keep_port
        self.verbose = verbose
        self.python = python
        self.max_open_files = max_open_files
        self._ports: dict[str, int] = {}

    @property
    def bootstrap(self) -> str:
        """``"host:port"`` of the first listener, for ``metadata.broker.list``
        / ``bootstrap_servers``."""
        return f"{self.host}:{self.port}"

    @property
    def ports(self) -> dict[str, int]:
        """Listener name -> bound port, for every listener (KIP-103), in the
        order of ``listeners``; ``{"PLAINTEXT": port}`` without ``listeners``.

        Raises:
            BrokerProcessError: The broker is not running.
        """
        self.port  # noqa: B018  the property raises when the broker is not running
        return dict(self._ports)

    def bootstrap_for(self, listener_name: str) -> str:
        """``"host:port"`` of one listener, e.g. ``bootstrap_for("SASL_SSL")``.

        Args:
            listener_name: The listener's name (any case).

        Returns:
            The address to connect to.

        Raises:
            KeyError: No such listener.
            BrokerProcessError: The broker is not running.
        """
        ports = self.ports
        name = listener_name.upper()
        if name not in ports:
            raise KeyError(f"no listener {name}; the broker has {', '.join(ports)}")
        return f"{self.host}:{ports[name]}"

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

    def start(self) -> BrokerProcess:
        """Start the broker and wait until it listens.

        Returns:
            ``self``, with `port` and `bootstrap` set.

        Raises:
            BrokerProcessError: It is already running, or it exited or did
                not print its listening line within ``startup_timeout``
                seconds (the message holds its log).
        """
        super().start()
        if self.keep_port:
            self._requested_port = self.port
        return self

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the broker with SIGTERM (a clean shutdown that flushes its
        logs), killing it if it has not exited after ``timeout`` seconds.
        The log directory is kept, so `start` can bring the broker back on
        the same data.

        Args:
            timeout: Seconds to wait after SIGTERM before SIGKILL.

        Returns:
            The exit status, or None if it was not running.
        """
        return super().stop(timeout)

    def kill(self) -> None:
        """Kill the broker with SIGKILL (``kill -9``): no shutdown, no flush,
        no clean-shutdown marker — a simulated crash. The log directory is
        kept, so `start` brings the broker back and runs recovery."""
        super().kill()

    def cleanup(self) -> None:
        """Stop the broker, then delete the temporary directory this object
        made (logs and broker output), or just the output file when the
        caller gave ``log_dir``. Called by ``__exit__``."""
        super().cleanup()

    # ------------------------------------------------------------ hooks

    def _address(self) -> str:
        return self.bootstrap

    def _started_message(self) -> str:
        return f"listening on {self.bootstrap}"

    def _prepare(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)

    def _popen_kwargs(self) -> dict[str, Any]:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the directory holding the kclient package
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        kwargs: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": self._output_file, "env": env}
        if self.max_open_files is not None:
            kwargs["preexec_fn"] = functools.partial(_limit_open_files, self.max_open_files)
        return kwargs

    def _wait_ready(self, port: int | None) -> int:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        deadline = time.monotonic() + self.startup_timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(stdout, selectors.EVENT_READ)
            while True:
                m = _LISTENING.search(buf)
                if m and buf.endswith(b"\n"):
                    lines = list(_LISTENER_LINE.finditer(buf))
                    self._ports = {(line["name"] or b"PLAINTEXT").decode(): int(line["port"]) for line in lines}
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

    def __repr__(self) -> str:
        state = f"{self.bootstrap}" if self._port is not None else "stopped"
        return f"<BrokerProcess {state} log_dir={str(self.log_dir)!r}>"


@contextlib.asynccontextmanager
async def run_broker(config: Any = None, **properties: Any) -> AsyncIterator[Any]:
    """Run a `kclient.broker.Broker` inside the current trio task for the
    body of an ``async with``.

    Args:
        config: A `kclient.config.BrokerConfig`; default one on
            ``127.0.0.1``, a free port and a temporary log directory
            (deleted afterwards).
        **properties: Kafka property names with dots replaced by
            underscores (``num_partitions=4``), applied on top.

    Yields:
        The started broker (its ``port`` is bound).
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
