"""Helpers for tests (yours and kclient's): run the bundled broker on a free
loopback port with a temporary log directory, and a real ZooKeeper server
(`ZooKeeperProcess`) for the ZooKeeper-based consumer.

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
    fresh temporary directory, deleted by `cleanup` (pass a path to
    keep the data). ``properties``:
    more ``server.properties`` settings (``{"num.partitions": 4}``), applied
    as ``--override`` after the defaults above. ``config_file``: a
    ``server.properties`` file passed to the broker first (the overrides
    still win). ``startup_timeout``:
    seconds to wait for the broker to listen. ``verbose``: run it with ``-v``.

    The broker's stderr (its log) goes to `output_path` (read it with
    `output`). Use as a context manager, or call `start`,
    `stop` and finally `cleanup`; `start` may be called
    again after `stop` to restart on the same logs (the port is then
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
        """The bound port. Raises `BrokerProcessError` if not started."""
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

        Raises `BrokerProcessError` (with the broker's log) if it
        exits or does not print its listening line within
        ``startup_timeout`` seconds.
        """
        if self.running:
            raise BrokerProcessError("the broker is already running")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the directory holding the kclient package
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
        The log directory is kept, so `start` can bring the broker
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
        kept, so `start` brings the broker back and runs recovery."""
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


class ZooKeeperUnavailableError(BrokerProcessError):
    """Java or the ZooKeeper jars are not installed (the message says which
    and where it looked)."""


#: Where `ZooKeeperProcess` looks for jars (in order): ``$ZOOKEEPER_HOME``
#: (``lib/*.jar`` and ``*.jar``, a ZooKeeper tarball), then Debian's
#: ``zookeeper`` package (``/usr/share/java``, ``/usr/share/zookeeper``).
ZOOKEEPER_JAR_DIRS = ("/usr/share/java", "/usr/share/zookeeper", "/usr/share/zookeeper/lib")

_ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


def _find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def zookeeper_classpath() -> list[str]:
    """The jars needed to run a ZooKeeper server (zookeeper, zookeeper-jute,
    slf4j-api and a binding, and the optional helpers ZooKeeper 3.5+ loads),
    found in ``$ZOOKEEPER_HOME`` or `ZOOKEEPER_JAR_DIRS`. Raises
    `ZooKeeperUnavailableError` if ``zookeeper.jar`` is not found."""
    dirs: list[Path] = []
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        dirs += [Path(home) / "lib", Path(home)]
    dirs += [Path(d) for d in ZOOKEEPER_JAR_DIRS]
    # Tarball layout: every jar of lib/ plus the zookeeper jars beside it.
    if home and (Path(home) / "lib").is_dir():
        jars = sorted(str(p) for d in (Path(home) / "lib", Path(home)) for p in d.glob("*.jar"))
        if any("zookeeper" in Path(j).name for j in jars):
            return jars

    def find(*names: str) -> str | None:
        for name in names:
            for d in dirs:
                path = d / name
                if path.is_file():
                    return str(path)
        return None

    main = find("zookeeper.jar")
    if main is None:
        raise ZooKeeperUnavailableError(
            "ZooKeeper is not installed: no zookeeper.jar in "
            + ", ".join(str(d) for d in dirs)
            + " (Debian/Ubuntu: apt-get install zookeeper; or set ZOOKEEPER_HOME)"
        )
    classpath = [main]
    for names in (
        ("zookeeper-jute.jar",),
        ("slf4j-api.jar",),
        ("slf4j-simple.jar", "slf4j-nop.jar", "slf4j-log4j12.jar"),
        ("commons-io.jar",),
        ("metrics-core.jar",),
        ("netty-handler.jar",),
        ("netty-common.jar",),
        ("netty-transport.jar",),
        ("netty-buffer.jar",),
        ("netty-resolver.jar",),
        ("netty-codec.jar",),
        ("netty-transport-native-epoll.jar",),
        ("netty-transport-native-unix-common.jar",),
    ):
        jar = find(*names)
        if jar is not None:
            classpath.append(jar)
    return classpath


def zookeeper_unavailable_reason() -> str | None:
    """Why `ZooKeeperProcess` cannot run here (no java, no
    ZooKeeper jars), or None if it can."""
    if _find_java() is None:
        return "java is not installed (needed to run ZooKeeper; Debian/Ubuntu: apt-get install zookeeper)"
    try:
        zookeeper_classpath()
    except ZooKeeperUnavailableError as exc:
        return str(exc)
    return None


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``, ``stat``) and
    return the answer (``"imok"`` for a healthy server). Raises OSError if
    nothing listens."""
    import socket

    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperProcess:
    """A real ZooKeeper server (standalone, ``ZooKeeperServerMain``) as a
    Java subprocess on a free loopback port with a temporary data directory.

    Needs ``java`` and ZooKeeper's jars (`zookeeper_classpath`; the
    Debian ``zookeeper`` package provides both). ``host``: loopback
    address (default ``127.0.0.1``); ``port``: 0 (default) for a free port;
    ``tick_time_ms``: ZooKeeper's ``tickTime`` (sessions may last 2..20
    ticks; the default 500 allows 1-10 s sessions, Kafka's default 6 s
    included); ``max_session_timeout_ms``: ``maxSessionTimeout``;
    ``startup_timeout``: seconds to wait until ``srvr`` reports the
    server's mode (``ruok`` says ``imok`` earlier, before it serves).

    Use as a context manager, or `start`, `stop`,
    `cleanup`. `connect` is the ``zookeeper.connect`` string;
    `connect_string` adds a chroot. The server's log goes to
    `output_path`. `start` raises
    `ZooKeeperUnavailableError` when java or the jars are missing,
    `BrokerProcessError` if the server does not come up.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tick_time_ms: int = 500,
        max_session_timeout_ms: int = 60000,
        startup_timeout: float = 60.0,
    ) -> None:
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.startup_timeout = startup_timeout
        self._workdir = Path(tempfile.mkdtemp(prefix="kclient-zookeeper-"))
        self.data_dir = self._workdir / "data"
        self.config_path = self._workdir / "zoo.cfg"
        self.output_path = self._workdir / "zookeeper.out"
        self._proc: subprocess.Popen[bytes] | None = None
        self._output_file: Any = None

    @property
    def port(self) -> int:
        """The client port. Raises `BrokerProcessError` if not started."""
        if self._port is None:
            raise BrokerProcessError("ZooKeeper is not running")
        return self._port

    @property
    def connect(self) -> str:
        """``"host:port"``, for ``zookeeper.connect``."""
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """``"host:port/chroot"`` (kclient creates a missing chroot node)."""
        return self.connect + (("/" + chroot.strip("/")) if chroot.strip("/") else "")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def output(self) -> str:
        """What the server has logged so far."""
        try:
            return self.output_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def command(self) -> list[str]:
        """The java command line (raises `ZooKeeperUnavailableError`)."""
        java = _find_java()
        if java is None:
            raise ZooKeeperUnavailableError("java is not installed (needed to run ZooKeeper)")
        return [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            os.pathsep.join(zookeeper_classpath()),
            _ZK_MAIN,
            str(self.config_path),
        ]

    def start(self) -> ZooKeeperProcess:
        """Write ``zoo.cfg``, start the server and wait until it serves
        (``srvr`` four-letter word); returns ``self``. A port taken between choosing and
        binding it is retried with another free port."""
        if self.running:
            raise BrokerProcessError("ZooKeeper is already running")
        command = self.command()
        attempts = 1 if self._requested_port else 3
        for attempt in range(attempts):
            port = self._requested_port or _free_port(self.host)
            self._write_config(port)
            self._output_file = open(self.output_path, "ab")
            self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._output_file, stderr=subprocess.STDOUT)
            try:
                self._wait_ready(port)
            except BrokerProcessError:
                self._kill()
                self._proc = None
                if attempt + 1 < attempts and "Address already in use" in self.output():
                    continue
                raise
            except BaseException:
                self._kill()
                self._proc = None
                raise
            self._port = port
            log.info("ZooKeeper pid %d serving on %s", self._proc.pid, self.connect)
            return self
        raise AssertionError("unreachable")

    def _write_config(self, port: int) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={self.data_dir}",
                    f"clientPort={port}",
                    f"clientPortAddress={self.host}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat",
                    "autopurge.purgeInterval=0",
                    "",
                ]
            ),
            encoding="utf-8",
        )

    def _wait_ready(self, port: int) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                raise BrokerProcessError(
                    f"ZooKeeper exited with status {self._proc.returncode} before serving; its log:\n{self.output()[-4000:]}"
                )
            try:
                # "ruok" answers imok before the server serves requests;
                # "srvr" reports its mode only once it does.
                if "Mode:" in four_letter_word(self.host, port, "srvr", timeout=1.0):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BrokerProcessError(
                    f"ZooKeeper did not serve within {self.startup_timeout}s; its log:\n{self.output()[-4000:]}"
                )
            time.sleep(0.1)

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` s); the
        data directory is kept. Returns the exit status."""
        status = None
        if self._proc is not None:
            proc = self._proc
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            status = proc.returncode
            self._proc = None
        if self._output_file is not None:
            self._output_file.close()
            self._output_file = None
        self._port = None
        return status

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if self._output_file is not None:
            self._output_file.close()
            self._output_file = None

    def cleanup(self) -> None:
        """Stop the server and delete its temporary directory."""
        self.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperProcess:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = self.connect if self._port is not None else "stopped"
        return f"<ZooKeeperProcess {state}>"


@contextlib.asynccontextmanager
async def run_broker(config: Any = None, **properties: Any) -> AsyncIterator[Any]:
    """Run a `kclient.broker.Broker` inside the current trio task
    for the body of an ``async with``; yields the started broker (its
    ``port`` is bound). ``config``: a `kclient.config.BrokerConfig`;
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


__all__ = [
    "BrokerProcess",
    "BrokerProcessError",
    "ZooKeeperProcess",
    "ZooKeeperUnavailableError",
    "four_letter_word",
    "run_broker",
    "zookeeper_classpath",
    "zookeeper_unavailable_reason",
]
