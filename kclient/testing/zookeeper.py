"""A real ZooKeeper server for tests: `ZooKeeperProcess` runs it as a Java
subprocess, `zookeeper_unavailable_reason` says why it cannot run here.

The server is ZooKeeper's standalone ``ZooKeeperServerMain`` configured with
a ``zoo.cfg`` (see the ZooKeeper Administrator's Guide,
https://zookeeper.apache.org/doc/current/zookeeperAdmin.html); readiness is
asked with the ``srvr`` four-letter word.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from pathlib import Path

from kclient.testing.process import BrokerProcessError, ServerProcess, free_port

__all__ = [
    "ZOOKEEPER_JAR_DIRS",
    "ZooKeeperProcess",
    "ZooKeeperUnavailableError",
    "four_letter_word",
    "zookeeper_classpath",
    "zookeeper_unavailable_reason",
]


class ZooKeeperUnavailableError(BrokerProcessError):
    """Java or the ZooKeeper jars are not installed (the message says which
    and where it looked)."""


#: Where `ZooKeeperProcess` looks for jars (in order): ``$ZOOKEEPER_HOME``
#: (``lib/*.jar`` and ``*.jar``, a ZooKeeper tarball), then Debian's
#: ``zookeeper`` package (``/usr/share/java``, ``/usr/share/zookeeper``).
ZOOKEEPER_JAR_DIRS = ("/usr/share/java", "/usr/share/zookeeper", "/usr/share/zookeeper/lib")

_ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"

log = logging.getLogger("kclient.testing")


def _find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def _pyspark_jars() -> Path | None:
    """pyspark's ``jars/`` directory when it ships ZooKeeper (Spark 4 does)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "jars"
        if any(folder.glob("zookeeper-3*.jar")):
            return folder
    return None


def zookeeper_classpath() -> list[str]:
    """The jars needed to run a ZooKeeper server.

    Looked for in this order: ``$ZOOKEEPER_HOME`` (a ZooKeeper tarball:
    every jar of ``lib/`` and beside it); the ``zookeeper`` jar set
    fetched from Maven Central by `kclient.testing.maven` (ZooKeeper 3.9
    with an SLF4J binding; fetched on first use); pyspark's ``jars/``
    (Spark 4 ships ZooKeeper 3.9 and everything its server needs); Debian's
    ``zookeeper`` package (`ZOOKEEPER_JAR_DIRS`).

    Returns:
        The jar paths.

    Raises:
        ZooKeeperUnavailableError: None of these has ``zookeeper.jar``.
    """
    from kclient.testing.maven import JarFetchError, JavaUnavailableError, jars

    dirs: list[Path] = []
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        dirs += [Path(home) / "lib", Path(home)]
    dirs += [Path(d) for d in ZOOKEEPER_JAR_DIRS]
    # Tarball layout: every jar of lib/ plus the zookeeper jars beside it.
    if home and (Path(home) / "lib").is_dir():
        tarball = sorted(str(p) for d in (Path(home) / "lib", Path(home)) for p in d.glob("*.jar"))
        if any("zookeeper" in Path(j).name for j in tarball):
            return tarball
    try:
        return jars("zookeeper")
    except (JarFetchError, JavaUnavailableError) as exc:
        log.warning("ZooKeeper's jars from Maven Central: %s; trying pyspark's and Debian's", exc)
    spark_jars = _pyspark_jars()
    if spark_jars is not None:
        wanted = ("zookeeper-", "slf4j-api-", "log4j-", "commons-io-", "commons-cli-", "netty-", "metrics-core-", "audience-annotations-")
        return sorted(str(p) for p in spark_jars.glob("*.jar") if p.name.startswith(wanted))

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
    """Why `ZooKeeperProcess` cannot run here.

    Returns:
        What is missing (java, the ZooKeeper jars), or None if it can run.
    """
    if _find_java() is None:
        return "java is not installed (needed to run ZooKeeper; Debian/Ubuntu: apt-get install zookeeper)"
    try:
        zookeeper_classpath()
    except ZooKeeperUnavailableError as exc:
        return str(exc)
    return None


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command and return the answer.

    Args:
        host: The server's address.
        port: Its client port.
        word: ``ruok``, ``srvr`` or ``stat`` (the ones `ZooKeeperProcess`
            allows).
        timeout: Socket timeout in seconds.

    Returns:
        The answer (``"imok"`` for ``ruok`` on a healthy server).

    Raises:
        OSError: Nothing listens, or the exchange failed.
    """
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperProcess(ServerProcess):
    """A real ZooKeeper server (standalone, ``ZooKeeperServerMain``) as a
    Java subprocess on a free loopback port with a temporary data directory.

    Needs ``java`` and ZooKeeper's jars (`zookeeper_classpath`; the
    Debian ``zookeeper`` package provides both).

    Use as a context manager, or `start`, `stop`, `cleanup`. `connect` is
    the ``zookeeper.connect`` string; `connect_string` adds a chroot. The
    server's log goes to `output_path`.

    Args:
        host: Loopback address to bind.
        port: 0 for a free port, or a fixed one.
        tick_time_ms: ZooKeeper's ``tickTime`` (sessions may last 2..20
            ticks; the default 500 allows 1-10 s sessions, Kafka's default
            6 s included).
        max_session_timeout_ms: ZooKeeper's ``maxSessionTimeout``.
        startup_timeout: Seconds to wait until ``srvr`` reports the
            server's mode (``ruok`` says ``imok`` earlier, before it serves).
    """

    NAME = "ZooKeeper"
    LOG_NAME = "ZooKeeper"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tick_time_ms: int = 500,
        max_session_timeout_ms: int = 60000,
        startup_timeout: float = 60.0,
    ) -> None:
        super().__init__(
            host=host,
            port=port,
            startup_timeout=startup_timeout,
            workdir_prefix="kclient-zookeeper-",
            output_name="zookeeper.out",
        )
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        assert self._workdir is not None
        self.data_dir = self._workdir / "data"
        self.config_path = self._workdir / "zoo.cfg"

    @property
    def connect(self) -> str:
        """``"host:port"``, for ``zookeeper.connect``."""
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """``"host:port/chroot"`` (kclient creates a missing chroot node).

        Args:
            chroot: The chroot path, with or without slashes; empty for none.

        Returns:
            The ``zookeeper.connect`` string.
        """
        return self.connect + (("/" + chroot.strip("/")) if chroot.strip("/") else "")

    def command(self) -> list[str]:
        """The java command line.

        Raises:
            ZooKeeperUnavailableError: Java or the jars are missing.
        """
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
        (``srvr`` four-letter word). A port taken between choosing and
        binding it is retried with another free port.

        Returns:
            ``self``, with `port` and `connect` set.

        Raises:
            ZooKeeperUnavailableError: Java or the jars are missing.
            BrokerProcessError: It is already running, or it exited or did
                not serve within ``startup_timeout`` seconds.
        """
        return super().start()

    def cleanup(self) -> None:
        """Stop the server and delete its temporary directory."""
        super().cleanup()

    # ------------------------------------------------------------ hooks

    def _address(self) -> str:
        return self.connect

    def _start_attempts(self) -> int:
        return 1 if self._requested_port else 3

    def _retry_start(self) -> bool:
        return "Address already in use" in self.output()

    def _prepare(self) -> int:
        port = self._requested_port or free_port(self.host)
        self._write_config(port)
        return port

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

    def _wait_ready(self, port: int | None) -> int:
        assert self._proc is not None and port is not None
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
                    return port
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BrokerProcessError(
                    f"ZooKeeper did not serve within {self.startup_timeout}s; its log:\n{self.output()[-4000:]}"
                )
            time.sleep(0.1)

    def __repr__(self) -> str:
        state = self.connect if self._port is not None else "stopped"
        return f"<ZooKeeperProcess {state}>"
