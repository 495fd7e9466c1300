"""Apache Kafka itself for tests: `KafkaProcess` runs one real Kafka broker
as a Java subprocess, `KafkaCluster` runs several, and `kafka_tool` runs
one of Kafka's command-line tools (``kafka-topics``, ``kafka-console-consumer``,
``kafka-consumer-groups``, ...) against any broker, the bundled one included.

The jars come from Maven Central through the poms shipped with kclient
(`kclient.testing.maven`): Kafka 4.x (``release="4"``) runs in KRaft mode,
each node a combined broker and controller, its storage formatted with a
cluster id first (``kafka-storage format``, KIP-631); Kafka 3.9
(``release="3.9"``), the last release with ZooKeeper mode, registers in a
`kclient.testing.ZooKeeperProcess` (KIP-500 and KIP-833 explain why 4.0
dropped it)::

    from kclient.testing import KafkaProcess

    with KafkaProcess() as kafka:                      # Kafka 4.x, KRaft, PLAINTEXT
        producer = Producer({"bootstrap.servers": kafka.bootstrap})
        ...

    with ZooKeeperProcess() as zk, KafkaProcess("3.9", zookeeper=zk.connect) as kafka:
        ...

Secured listeners take the same `kclient.testing.TestCertificates` and
user lists as the bundled broker (``listeners=("PLAINTEXT", "SSL",
"SASL_SSL")``); SCRAM users are created with Kafka's own tooling
(``kafka-storage format --add-scram`` in KRaft mode, ``kafka-configs
--alter --add-config SCRAM-SHA-256=[...]`` in ZooKeeper mode). The JVM
takes seconds to start: start one per test module or session.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kclient.testing.maven import jars, require_java
from kclient.testing.process import BrokerProcessError, ServerGroup, ServerProcess, cleanup_all, free_port, wait_for
from kclient.testing.security import TestCertificates, security_properties

__all__ = [
    "KAFKA_RELEASES",
    "KAFKA_TOOLS",
    "KafkaCluster",
    "KafkaProcess",
    "kafka_classpath",
    "kafka_tool",
    "kafka_tool_command",
    "kafka_version",
    "random_cluster_id",
]

log = logging.getLogger("kclient.testing")

#: Release names -> the jar set (`kclient.testing.maven.JAR_SETS`) holding it.
KAFKA_RELEASES: dict[str, str] = {"4": "kafka-4", "3.9": "kafka-3.9"}

_KAFKA_4_TOOLS: dict[str, str] = {
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
}

#: Kafka's command-line tools by script name -> main class, per release
#: (the ``bin/*.sh`` scripts of Kafka's distribution run these classes).
#: Kafka 3.9 differs where 4.0 moved a Scala tool of ``kafka_2.13`` to
#: ``kafka-tools``, and has no ``kafka-storage`` here (ZooKeeper mode).
KAFKA_TOOLS: dict[str, dict[str, str]] = {
    "4": _KAFKA_4_TOOLS,
    "3.9": {
        **{name: main for name, main in _KAFKA_4_TOOLS.items() if name != "kafka-storage"},
        "kafka-configs": "kafka.admin.ConfigCommand",
        "kafka-console-producer": "kafka.tools.ConsoleProducer",
        "kafka-acls": "kafka.admin.AclCommand",
    },
}

#: Broker settings for a small test broker (on top of Kafka's defaults):
#: internal topics with one replica where the cluster is one node, no
#: first-join delay, and quick shutdown.
KAFKA_DEFAULTS: dict[str, str] = {
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "log.flush.interval.messages": "9223372036854775807",
    "controlled.shutdown.enable": "true",
}

#: JVM options for a test broker: a small heap, started quickly.
DEFAULT_JVM_OPTIONS: tuple[str, ...] = ("-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true")

_SLF4J = ("-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")


def kafka_classpath(release: str = "4") -> list[str]:
    """The jars of a Kafka release (broker, clients and tools), fetched
    from Maven Central on first use.

    Args:
        release: ``"4"`` or ``"3.9"`` (`KAFKA_RELEASES`).

    Returns:
        Jar paths.

    Raises:
        ValueError: An unknown release.
        kclient.testing.maven.JavaUnavailableError: Java 17+ is missing.
        kclient.testing.maven.JarFetchError: Maven failed.
    """
    if release not in KAFKA_RELEASES:
        raise ValueError(f"unknown Kafka release {release!r}; kclient.testing runs {', '.join(KAFKA_RELEASES)}")
    return jars(KAFKA_RELEASES[release])


def kafka_version(release: str = "4") -> str:
    """The exact Kafka version a release name stands for (``"4.4.0"``),
    read from the jar names.

    Args:
        release: ``"4"`` or ``"3.9"``.

    Returns:
        The version of its ``kafka-clients`` jar.
    """
    for jar in kafka_classpath(release):
        match = re.fullmatch(r"kafka-clients-(.+)\.jar", Path(jar).name)
        if match:
            return match[1]
    raise BrokerProcessError(f"no kafka-clients jar among the Kafka {release} jars")


def random_cluster_id() -> str:
    """A new Kafka cluster id: 16 random bytes, URL-safe base64 without
    padding (Kafka's ``Uuid``, what ``kafka-storage random-uuid`` prints),
    never starting with ``-`` (Kafka's ``Uuid.randomUuid`` draws again
    then too: such an id reads as an option on a command line, and
    ``kafka-storage format --cluster-id -...`` fails)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not cluster_id.startswith("-"):
            return cluster_id


def _java_command(release: str, main_class: str, jvm_options: Sequence[str] = ()) -> list[str]:
    java = require_java()
    return [java, *jvm_options, *_SLF4J, "-cp", os.pathsep.join(kafka_classpath(release)), main_class]


def kafka_tool(
    name: str,
    *args: str,
    release: str = "4",
    input: str | bytes | None = None,
    timeout: float = 120.0,
    check: bool = True,
    log_level: str = "warn",
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools to completion.

    Args:
        name: The script's name (``"kafka-topics"``; `KAFKA_TOOLS`).
        *args: Its arguments, as for the script
            (``"--bootstrap-server", broker.bootstrap, "--list"``).
        release: Whose tools: ``"4"`` or ``"3.9"``.
        input: Its standard input (text), or None for none.
        timeout: Seconds before it is killed.
        check: Raise when it exits with a non-zero status.
        log_level: SLF4J level of what it logs to stderr.
        env: Extra environment variables.

    Returns:
        The finished process (``stdout``, ``stderr`` as text).

    Raises:
        KeyError: No such tool in that release.
        subprocess.CalledProcessError: It failed and ``check`` is set
            (``stdout`` and ``stderr`` are on the exception).
        subprocess.TimeoutExpired: It ran longer than ``timeout``.
    """
    try:
        main_class = KAFKA_TOOLS[release][name]
    except KeyError:
        raise KeyError(f"Kafka {release} has no tool {name!r} here; the tools are {', '.join(sorted(KAFKA_TOOLS.get(release, {})))}") from None
    command = _java_command(release, main_class, ("-Xmx512m", "-XX:TieredStopAtLevel=1", f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}"))
    text_input = input.decode("utf-8") if isinstance(input, bytes) else input
    result = subprocess.run(
        [*command, *args],
        input=text_input if text_input is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    if check and result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, [name, *args], result.stdout, result.stderr)
    return result


def kafka_tool_command(name: str, *args: str, release: str = "4", log_level: str = "warn") -> list[str]:
    """The command line of one of Kafka's tools, to run it yourself (in the
    background, interrupted with SIGINT, ...).

    Args:
        name: The script's name (`KAFKA_TOOLS`).
        *args: Its arguments.
        release: ``"4"`` or ``"3.9"``.
        log_level: SLF4J level of what it logs to stderr.

    Returns:
        ``[java, options..., main class, *args]``.
    """
    main_class = KAFKA_TOOLS[release][name]
    return [*_java_command(release, main_class, ("-Xmx512m", f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}")), *args]


class KafkaProcess(ServerProcess):
    """One Apache Kafka broker as a Java subprocess on loopback.

    Kafka 4.x (``release="4"``) runs in KRaft mode as a combined broker and
    controller (``process.roles=broker,controller``) whose storage is
    formatted before the first start; Kafka 3.9 (``release="3.9"``) runs
    in ZooKeeper mode and needs ``zookeeper``. Use as a context manager, or
    `start`, `stop` (`kill` for SIGKILL), `cleanup`; `start` again
    restarts it on the same data and ports.

    Args:
        release: ``"4"`` (KRaft) or ``"3.9"`` (ZooKeeper mode).
        zookeeper: ``host:port[/chroot]`` for Kafka 3.9 (required there,
            refused for 4).
        node_id: ``node.id`` (KRaft) or ``broker.id``.
        host: Loopback address every listener binds and advertises.
        listeners: The client listeners, as for
            `kclient.testing.security_properties` (``"PLAINTEXT"``,
            ``"SSL"``, ``"SASL_SSL"``, ``"NAME:PROTOCOL"``); PLAINTEXT is
            always there (inter-broker traffic and the tools use it).
        certificates: For SSL / SASL_SSL listeners.
        plain_users: SASL/PLAIN user -> password.
        scram_users: SASL/SCRAM user -> password, created for both
            SCRAM-SHA-256 and SCRAM-SHA-512 with Kafka's own tools.
        properties: More ``server.properties`` settings (they win).
        jvm_options: The JVM's options (heap, GC).
        quorum: For `KafkaCluster`: ``node id -> controller port`` of every
            KRaft voter (default: this node alone).
        cluster_id: The KRaft cluster id (default a new one).
        startup_timeout: Seconds to wait until it serves.

    Raises:
        ValueError: A bad combination (3.9 without ``zookeeper``, ...).
    """

    NAME = "the Kafka broker"
    LOG_NAME = "Kafka"

    def __init__(
        self,
        release: str = "4",
        *,
        zookeeper: str | None = None,
        node_id: int = 1,
        host: str = "127.0.0.1",
        listeners: Iterable[str] = ("PLAINTEXT",),
        certificates: TestCertificates | None = None,
        plain_users: Mapping[str, str] | None = None,
        scram_users: Mapping[str, str] | None = None,
        properties: Mapping[str, Any] | None = None,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
        quorum: Mapping[int, int] | None = None,
        cluster_id: str | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        if release not in KAFKA_RELEASES:
            raise ValueError(f"unknown Kafka release {release!r}; kclient.testing runs {', '.join(KAFKA_RELEASES)}")
        if release == "3.9" and not zookeeper:
            raise ValueError("Kafka 3.9 runs in ZooKeeper mode here: pass zookeeper='host:port[/chroot]'")
        if release != "3.9" and zookeeper:
            raise ValueError("Kafka 4 has no ZooKeeper mode (KIP-833): run release='3.9' for it")
        super().__init__(host=host, port=0, startup_timeout=startup_timeout, workdir_prefix="kclient-kafka-", output_name="kafka.out")
        self.release = release
        self.zookeeper = zookeeper
        self.node_id = node_id
        entries = [entry.upper() for entry in listeners]
        if not any(entry.partition(":")[0] == "PLAINTEXT" for entry in entries):
            entries.insert(0, "PLAINTEXT")
        self.listener_entries = tuple(entries)
        self.certificates = certificates
        self.plain_users = dict(plain_users or {})
        self.scram_users = dict(scram_users or {})
        self.extra_properties = {k: str(v) for k, v in (properties or {}).items()}
        self.jvm_options = tuple(jvm_options)
        self.cluster_id = cluster_id or random_cluster_id()
        assert self._workdir is not None
        self.log_dir = self._workdir / "logs"
        self.config_path = self._workdir / "server.properties"
        # Ports are chosen once, so a restart comes back where clients expect it.
        self.ports: dict[str, int] = {entry.partition(":")[0]: free_port(host) for entry in self.listener_entries}
        if release == "3.9":
            self.controller_port = None
            self.quorum: dict[int, int] = {}
        else:
            self.quorum = dict(quorum) if quorum is not None else {node_id: free_port(host)}
            self.controller_port = self.quorum[node_id]
        self._formatted = False
        self._scram_created = False

    # ------------------------------------------------------------ addresses

    @property
    def bootstrap(self) -> str:
        """``"host:port"`` of the PLAINTEXT listener (``bootstrap.servers``)."""
        return f"{self.host}:{self.ports['PLAINTEXT']}"

    def bootstrap_for(self, listener: str) -> str:
        """``"host:port"`` of one listener.

        Args:
            listener: Its name (``"SSL"``, ``"SASL_SSL"``).

        Raises:
            KeyError: No such listener.
        """
        return f"{self.host}:{self.ports[listener.upper()]}"

    @property
    def version(self) -> str:
        """The exact Kafka version (``"4.4.0"``)."""
        return kafka_version(self.release)

    def broker_properties(self) -> dict[str, str]:
        """Every ``server.properties`` setting this broker starts with."""
        listener_specs = [e if ":" in e else f"{e}:{e}" for e in self.listener_entries]
        props = security_properties(
            self.certificates,
            listeners=listener_specs,
            host=self.host,
            plain_users=self.plain_users or None,
        )
        names = [spec.partition(":")[0] for spec in listener_specs]
        listeners = [f"{name}://{self.host}:{self.ports[name]}" for name in names]
        props["advertised.listeners"] = ",".join(listeners)
        protocol_map = props["listener.security.protocol.map"].split(",")
        if self.release != "3.9":
            listeners.append(f"CONTROLLER://{self.host}:{self.controller_port}")
            protocol_map.append("CONTROLLER:PLAINTEXT")
        props["listeners"] = ",".join(listeners)
        props["listener.security.protocol.map"] = ",".join(protocol_map)
        props["inter.broker.listener.name"] = "PLAINTEXT"
        if any(p in ("SASL_PLAINTEXT", "SASL_SSL") for p in (s.partition(":")[2] for s in listener_specs)):
            mechanisms = props["sasl.enabled.mechanisms"].split(",")
            for spec in listener_specs:
                name, _, protocol = spec.partition(":")
                if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
                    continue
                for mechanism in mechanisms:
                    if mechanism.startswith("SCRAM-"):
                        props[f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"] = (
                            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                        )
            props["sasl.enabled.mechanisms"] = ",".join(m for m in mechanisms if m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
        replicas = str(min(3, max(1, len(self.quorum) or 1)))
        props.update(KAFKA_DEFAULTS)
        props.update(
            {
                "log.dirs": str(self.log_dir),
                "offsets.topic.replication.factor": replicas,
                "transaction.state.log.replication.factor": replicas,
                "transaction.state.log.min.isr": "1",
            }
        )
        if self.release == "3.9":
            props.update({"broker.id": str(self.node_id), "zookeeper.connect": self.zookeeper or ""})
        else:
            props.update(
                {
                    "process.roles": "broker,controller",
                    "node.id": str(self.node_id),
                    "controller.quorum.voters": ",".join(f"{n}@{self.host}:{p}" for n, p in sorted(self.quorum.items())),
                    "controller.listener.names": "CONTROLLER",
                    "share.coordinator.state.topic.replication.factor": replicas,
                    "share.coordinator.state.topic.min.isr": "1",
                }
            )
        props.update(self.extra_properties)
        return props

    # ------------------------------------------------------------ lifecycle

    def command(self) -> list[str]:
        """The java command line of the broker.

        Raises:
            kclient.testing.maven.JavaUnavailableError: Java 17+ is missing.
        """
        return [*_java_command(self.release, "kafka.Kafka", self.jvm_options), str(self.config_path)]

    def start(self) -> KafkaProcess:
        """Write ``server.properties`` (and format the KRaft storage on the
        first start), start the broker and wait until it answers Metadata
        naming itself; SCRAM users are created on the first start.

        Returns:
            ``self``.

        Raises:
            BrokerProcessError: It exited or did not serve within
                ``startup_timeout`` seconds (the message holds its log's tail).
        """
        self.launch()
        self.wait_ready()
        return self

    def launch(self) -> None:
        """Start the subprocess without waiting for it (`KafkaCluster`
        launches every voter before waiting: a KRaft quorum needs a
        majority up to elect its controller). Follow with `wait_ready`."""
        if self.running:
            raise BrokerProcessError(f"{self.NAME} is already running")
        self._prepare()
        self._output_file = open(self.output_path, "ab")
        self._proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, **self._popen_kwargs())

    def wait_ready(self) -> KafkaProcess:
        """Wait until the launched broker serves (see `start`).

        Returns:
            ``self``.
        """
        try:
            self._port = self._wait_ready(None)
        except BaseException:
            self._kill()
            self._proc = None
            raise
        log.info("%s pid %d %s", self.LOG_NAME, self._proc.pid if self._proc else -1, self._started_message())
        if self.scram_users and not self._scram_created:
            if self.release == "3.9":
                for user, password in self.scram_users.items():
                    kafka_tool(
                        "kafka-configs",
                        "--bootstrap-server",
                        self.bootstrap,
                        "--alter",
                        "--entity-type",
                        "users",
                        "--entity-name",
                        user,
                        "--add-config",
                        f"SCRAM-SHA-256=[password={password}],SCRAM-SHA-512=[password={password}]",
                        release=self.release,
                    )
            self._scram_created = True
        return self

    def _started_message(self) -> str:
        return f"(Kafka {self.release}, node {self.node_id}) serving on {self.bootstrap}"

    def _prepare(self) -> int | None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        props = self.broker_properties()
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        if self.release != "3.9" and not self._formatted:
            args = ["format", "--config", str(self.config_path), "--cluster-id", self.cluster_id, "--ignore-formatted"]
            for user, password in self.scram_users.items():
                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                    args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
            result = kafka_tool("kafka-storage", *args, release=self.release, check=False)
            if result.returncode != 0:
                raise BrokerProcessError(f"kafka-storage format failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
            self._formatted = True
        return None

    def _wait_ready(self, port: int | None) -> int:
        from kclient.errors import KafkaError
        from kclient.tools.common import fetch_metadata

        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        address = [(self.host, self.ports["PLAINTEXT"])]
        while True:
            if self._proc.poll() is not None:
                raise BrokerProcessError(
                    f"Kafka {self.release} exited with status {self._proc.returncode} before serving; its log:\n{self.output()[-6000:]}"
                )
            try:
                metadata = fetch_metadata(address, [], timeout_ms=2000)
                if self.node_id in metadata.brokers:
                    return self.ports["PLAINTEXT"]
            except (KafkaError, OSError):
                pass
            if time.monotonic() > deadline:
                raise BrokerProcessError(f"Kafka {self.release} did not serve within {self.startup_timeout}s; its log:\n{self.output()[-6000:]}")
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> int | None:
        """Stop the broker with SIGTERM (a controlled shutdown), SIGKILL
        after ``timeout`` seconds; its data and ports are kept.

        Args:
            timeout: Seconds to wait after SIGTERM.

        Returns:
            The exit status, or None if it was not running.
        """
        return super().stop(timeout)

    def __repr__(self) -> str:
        state = self.bootstrap if self.running else "stopped"
        return f"<KafkaProcess {self.release} node {self.node_id} {state}>"


class KafkaCluster(ServerGroup):
    """``brokers`` Apache Kafka brokers (node ids 1..N) on loopback; a
    context manager. Kafka 4 nodes are each broker and KRaft voter (a
    three-node quorum survives one node's loss); Kafka 3.9 brokers share a
    ZooKeeper (started here unless given).

    Args:
        brokers: How many.
        release: ``"4"`` or ``"3.9"``.
        zookeeper: For 3.9: a ``host:port`` connect string; None starts a
            `kclient.testing.ZooKeeperProcess` (stopped with the cluster).
        properties: Settings for every broker (``default.replication.factor``
            defaults to ``min(3, brokers)``).
        **kwargs: Passed to each `KafkaProcess` (listeners, certificates,
            users, jvm_options, startup_timeout).

    Raises:
        BrokerProcessError: A broker did not start in time.
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        release: str = "4",
        zookeeper: str | None = None,
        properties: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.release = release
        self._own_zookeeper: Any = None
        self._zookeeper = zookeeper
        props = {
            "default.replication.factor": str(min(3, brokers)),
            "min.insync.replicas": "1",
            **{k: str(v) for k, v in (properties or {}).items()},
        }
        self._props = props
        self._kwargs = kwargs
        self._count = brokers
        self.brokers: dict[int, KafkaProcess] = {}

    def start(self) -> KafkaCluster:
        """Start every broker and wait until each serves.

        Returns:
            ``self``.
        """
        if self.release == "3.9" and self._zookeeper is None:
            from kclient.testing.zookeeper import ZooKeeperProcess

            self._own_zookeeper = ZooKeeperProcess().start()
            self._zookeeper = self._own_zookeeper.connect + "/kafka-" + uuid.uuid4().hex[:8]
        host = self._kwargs.get("host", "127.0.0.1")
        quorum = {n: free_port(host) for n in range(1, self._count + 1)} if self.release != "3.9" else None
        cluster_id = random_cluster_id()
        for node in range(1, self._count + 1):
            self.brokers[node] = KafkaProcess(
                self.release,
                zookeeper=self._zookeeper if self.release == "3.9" else None,
                node_id=node,
                properties=self._props,
                quorum=quorum,
                cluster_id=cluster_id,
                **self._kwargs,
            )
        try:
            with ThreadPoolExecutor(max_workers=self._count) as pool:
                list(pool.map(lambda b: b.launch(), self.brokers.values()))
                list(pool.map(lambda b: b.wait_ready(), self.brokers.values()))
            self.wait_for_brokers(set(self.brokers))
        except BaseException:
            self.cleanup()
            raise
        return self

    @property
    def zookeeper_connect(self) -> str | None:
        """``host:port/chroot`` of the ZooKeeper the Kafka 3.9 brokers
        register in (for ZooKeeper-coordinated consumers); None for Kafka 4."""
        return self._zookeeper if self.release == "3.9" else None

    @property
    def bootstrap(self) -> str:
        """Every running broker's PLAINTEXT ``host:port``, comma-separated."""
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running)

    def bootstrap_for(self, listener: str) -> str:
        """Every running broker's ``host:port`` for one listener."""
        return ",".join(b.bootstrap_for(listener) for b in self.brokers.values() if b.running)

    def broker(self, node_id: int) -> KafkaProcess:
        """One broker by node id."""
        return self.brokers[node_id]

    def kill(self, node_id: int) -> None:
        """SIGKILL one broker (a crash; its data stays for a restart)."""
        self.brokers[node_id].kill()

    def restart(self, node_id: int) -> KafkaProcess:
        """Start a stopped or killed broker again on its data and ports."""
        broker = self.brokers[node_id]
        broker.start()
        return broker

    def wait_for_brokers(self, node_ids: set[int], timeout: float = 60.0) -> None:
        """Wait until every running broker's Metadata lists exactly ``node_ids``.

        Raises:
            BrokerProcessError: Not within ``timeout`` seconds.
        """
        from kclient.errors import KafkaError
        from kclient.tools.common import fetch_metadata

        deadline = time.monotonic() + timeout
        while True:
            try:
                if all(
                    set(fetch_metadata([(b.host, b.ports["PLAINTEXT"])], [], timeout_ms=2000).brokers) == node_ids
                    for b in self.brokers.values()
                    if b.running
                ):
                    return
            except (KafkaError, OSError):
                pass
            if time.monotonic() > deadline:
                raise BrokerProcessError(f"the Kafka brokers did not all list brokers {sorted(node_ids)} within {timeout}s")
            time.sleep(0.2)

    def partition_info(self, topic: str, partition: int = 0, node_id: int | None = None) -> Any:
        """One partition as a broker's Metadata describes it (each KRaft
        broker answers from its own copy of the metadata log, so brokers
        may briefly disagree).

        Args:
            topic: The topic.
            partition: The partition.
            node_id: Ask this broker; None asks the running brokers in
                turn and takes the first answer naming the partition.

        Returns:
            A `kclient.client.cluster.PartitionInfo` (``leader`` -1 for
            none), or None when no broker asked knows the partition.
        """
        from kclient.errors import KafkaError
        from kclient.tools.common import fetch_metadata

        brokers = [self.brokers[node_id]] if node_id is not None else list(self.brokers.values())
        for b in brokers:
            if not b.running:
                continue
            try:
                for p in fetch_metadata([(b.host, b.ports["PLAINTEXT"])], [topic], timeout_ms=2000).partitions_for(topic):
                    if p.partition == partition:
                        return p
            except (KafkaError, OSError):
                continue
        return None

    def leader(self, topic: str, partition: int = 0) -> int:
        """The current leader's node id of one partition (from Metadata).

        Raises:
            BrokerProcessError: No running broker names a leader.
        """
        for b in self.brokers.values():
            info = self.partition_info(topic, partition, b.node_id) if b.running else None
            if info is not None and info.leader >= 0:
                leader: int = info.leader
                return leader
        raise BrokerProcessError(f"no running broker names a leader of {topic}-{partition}")

    def isr(self, topic: str, partition: int = 0) -> list[int]:
        """The partition's in-sync replicas from a running broker's
        Metadata (empty when no broker knows the partition)."""
        info = self.partition_info(topic, partition)
        return sorted(info.isr) if info is not None else []

    def _agreed(self, topic: str, partition: int) -> Any:
        """The partition as every running broker describes it, when they
        all agree on its leader and ISR; else None."""
        seen = set()
        info = None
        for b in self.brokers.values():
            if not b.running:
                continue
            info = self.partition_info(topic, partition, b.node_id)
            if info is None:
                return None
            seen.add((info.leader, tuple(sorted(info.isr))))
        return info if len(seen) == 1 else None

    def wait_for_leader(self, topic: str, partition: int = 0, *, exclude: Iterable[int] = (), timeout: float = 60.0) -> int:
        """Wait until every running broker's Metadata names the same leader
        of the partition, not one of ``exclude`` (a killed leader stays
        named until the controller fences it: ``broker.session.timeout.ms``
        in KRaft mode, the ZooKeeper session in ZooKeeper mode).

        Args:
            topic: The topic.
            partition: The partition.
            exclude: Node ids that do not count (the old leader).
            timeout: Seconds to wait.

        Returns:
            The leader's node id.

        Raises:
            BrokerProcessError: Not within ``timeout`` seconds.
        """
        excluded = set(exclude)

        def probe() -> int | None:
            info = self._agreed(topic, partition)
            return info.leader if info is not None and info.leader >= 0 and info.leader not in excluded else None

        return wait_for(probe, timeout, f"{topic}-{partition} to have a leader not in {sorted(excluded)}")

    def wait_for_isr(self, topic: str, partition: int, isr: Iterable[int], timeout: float = 60.0) -> list[int]:
        """Wait until every running broker's Metadata shows exactly ``isr``
        (any order) as the partition's in-sync replicas, and a leader.

        Returns:
            The ISR, sorted.

        Raises:
            BrokerProcessError: Not within ``timeout`` seconds.
        """
        want = sorted(set(isr))

        def probe() -> list[int] | None:
            info = self._agreed(topic, partition)
            return want if info is not None and info.leader >= 0 and sorted(info.isr) == want else None

        return wait_for(probe, timeout, f"{topic}-{partition} to have ISR {want}")

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None, config: Mapping[str, Any] | None = None, *, timeout: float = 60.0) -> None:
        """Create a topic with kclient's AdminClient (CreateTopics) and wait
        until every running broker shows each partition with a leader and
        every replica in sync. Args as `kclient.testing.cluster.Cluster.create_topic`
        (no ``replica_assignment``; ``timeout`` 60 s by default).

        Raises:
            BrokerResponseError: Kafka refused (`TopicAlreadyExistsError`, ...).
            BrokerProcessError: Not in sync within ``timeout`` seconds.
        """
        from kclient.client.admin import AdminClient, NewTopic

        rf = min(3, len(self.brokers)) if replication_factor is None else replication_factor
        topic = NewTopic(name, partitions, rf, config={k: str(v) for k, v in (config or {}).items()})
        with AdminClient({"bootstrap.servers": self.bootstrap}) as admin:
            admin.create_topics([topic], timeout_ms=int(timeout * 1000))
        for p in range(partitions):
            info = wait_for(functools.partial(self._agreed, name, p), timeout, f"every broker to know {name}-{p}")
            self.wait_for_isr(name, p, info.replicas, timeout=timeout)

    def cleanup(self) -> None:
        """Stop every broker, delete their data, stop an own ZooKeeper."""
        cleanup_all(list(self.brokers.values()))
        self._stop_own_zookeeper()

    def __repr__(self) -> str:
        return f"<KafkaCluster Kafka {self.release} nodes {sorted(self.brokers)}>"
