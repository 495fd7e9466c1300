"""The JVM set-up behind the ZooKeeper, Apache Kafka and Spark tests
(`kclient.testing.maven`, `kclient.testing.kafka`): Java is checked with one
clear line, jar sets are fetched by Maven from the shipped poms (Maven itself
from Maven Central when ``mvn`` is absent), and Kafka's test broker keeps
its data and ports across a restart and a SIGKILL."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers.skips import require

from kclient import FetchRequest, Producer, ProducerData, SimpleConsumer
from kclient.testing import KafkaProcess, java_unavailable_reason, kafka_tool, maven
from kclient.testing.kafka import random_cluster_id

ROOT = Path(__file__).resolve().parent.parent


def _fake_java(tmp_path: Path, version_line: str) -> Path:
    """A JAVA_HOME whose bin/java prints ``version_line`` as ``java -version`` does."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return home


@pytest.mark.parametrize(
    "line,major",
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "25" 2025-09-16', 25),
        ('java version "1.8.0_402"', 8),
        ('openjdk version "11.0.22" 2024-01-16', 11),
    ],
)
def test_java_major_version_reads_every_version_style(tmp_path, line, major):
    home = _fake_java(tmp_path, line)
    assert maven.java_major_version(str(home / "bin" / "java")) == major


def test_old_or_missing_java_is_one_line_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, 'openjdk version "11.0.22" 2024-01-16')))
    reason = maven.java_unavailable_reason()
    assert reason is not None and "Java 11" in reason and "17+" in reason and "\n" not in reason
    with pytest.raises(maven.JavaUnavailableError, match="Java 11"):
        maven.require_java()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    reason = maven.java_unavailable_reason()
    assert reason is not None and reason.startswith("Java 17+ is not installed") and "openjdk-17-jre-headless" in reason


def test_make_demo_and_test_stop_at_once_without_java(tmp_path):
    """Both commands stop before building anything, with one line that says
    what is missing and how to get it."""
    require(None if shutil.which("make") else "make is not on PATH", name="make", needs="needs make")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("make", "sh", "bash", "env"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    (bin_dir / "python3").symlink_to(sys.executable)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "VENV": str(tmp_path / "venv-never-made")}
    for target in ("demo", "test"):
        result = subprocess.run(["make", "-s", "-C", str(ROOT), target, f"VENV={tmp_path / 'venv-never-made'}"], capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode != 0
        ours = [line for line in result.stderr.splitlines() if not line.startswith("make")]
        assert len(ours) == 1, result.stderr
        assert ours[0].startswith("Java 17+ is not installed") and "apt-get install openjdk-17-jre-headless" in ours[0]
        assert not (tmp_path / "venv-never-made").exists()


@pytest.mark.unit
def test_unknown_or_uncached_jar_sets_are_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("KCLIENT_JVM_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="the sets are .*kafka-4"):
        maven.jars("kafka-5")
    with pytest.raises(maven.JarFetchError, match=r"python -m kclient.testing.maven kafka-3.9"):
        maven.jars("kafka-3.9", fetch=False)


def test_a_changed_pom_is_fetched_again(tmp_path, monkeypatch):
    """The cache remembers which pom it was fetched for: a stale stamp means
    the set is not used until fetched again."""
    require(java_unavailable_reason(), name="Java 17+", needs="needs Java")
    monkeypatch.setenv("KCLIENT_JVM_CACHE", str(tmp_path / "cache"))
    first = maven.jars("spark-kafka")
    names = {Path(j).name for j in first}
    assert any(re.fullmatch(r"spark-sql-kafka-0-10_2\.13-[\d.]+\.jar", n) for n in names) and any(n.startswith("kafka-clients-") for n in names)
    # Spark's own jars come with pyspark: the set holds only the connector's extras.
    assert not any(n.startswith(("scala-library", "hadoop-client", "spark-core")) for n in names)
    stamp = tmp_path / "cache" / "spark-kafka" / ".kclient-pom-sha256"
    stamp.write_text("0" * 64 + "\n")
    with pytest.raises(maven.JarFetchError):
        maven.jars("spark-kafka", fetch=False)
    assert {Path(j).name for j in maven.jars("spark-kafka")} == names


def test_maven_itself_is_fetched_when_mvn_is_absent(tmp_path, monkeypatch):
    """On a machine with Java but no Maven, the jar sets still come: Apache
    Maven's own distribution is fetched from Maven Central (SHA-512 checked)."""
    java = maven.find_java()
    require(java_unavailable_reason(), name="Java 17+", needs="needs Java")
    assert java is not None
    # Every command of the system's bin directories but mvn.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for entry in Path(folder).iterdir() if Path(folder).is_dir() else ():
            if entry.name not in ("mvn", "mvnDebug") and not (bin_dir / entry.name).exists():
                (bin_dir / entry.name).symlink_to(entry)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("MAVEN_HOME", raising=False)
    monkeypatch.setenv("JAVA_HOME", str(Path(os.path.realpath(java)).parent.parent))
    monkeypatch.setenv("KCLIENT_JVM_CACHE", str(tmp_path / "cache"))
    assert shutil.which("mvn") is None
    found = maven.jars("spark-kafka")
    assert any(Path(j).name.startswith("spark-sql-kafka-0-10") for j in found)
    assert (tmp_path / "cache" / f"apache-maven-{maven.MAVEN_VERSION}" / "bin" / "mvn").is_file()


@pytest.mark.unit
def test_kafka_process_arguments_are_checked():
    with pytest.raises(ValueError, match="ZooKeeper mode"):
        KafkaProcess("3.9")
    with pytest.raises(ValueError, match="KIP-833"):
        KafkaProcess("4", zookeeper="127.0.0.1:2181")
    with pytest.raises(ValueError, match="unknown Kafka release"):
        KafkaProcess("2.8")
    with pytest.raises(KeyError, match="kafka-topics"):
        kafka_tool("kafka-no-such-tool")


@pytest.mark.unit
def test_cluster_ids_are_kafka_uuids():
    ids = {random_cluster_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", i) for i in ids)


def _read_all(kafka: KafkaProcess, topic: str) -> list[bytes]:
    with SimpleConsumer(kafka.host, kafka.port, so_timeout_ms=10_000, buffer_size=1 << 16, client_id="jvm-setup") as consumer:
        return [m.message.payload for m in consumer.fetch(FetchRequest(topic, 0, 0, 1 << 20))]


def test_kafka_keeps_its_data_and_port_across_stop_and_sigkill():
    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka (Java 17+)")
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    with KafkaProcess() as kafka:
        bootstrap = kafka.bootstrap
        conf = {"bootstrap.servers": bootstrap, "request.required.acks": -1}
        with Producer(conf) as producer:
            producer.send(ProducerData(topic, None, [b"before-stop"]))
        kafka.stop()
        assert not kafka.running
        kafka.start()
        assert kafka.bootstrap == bootstrap
        with Producer(conf) as producer:
            producer.send(ProducerData(topic, None, [b"before-kill"]))
        kafka.kill()
        kafka.start()
        assert _read_all(kafka, topic) == [b"before-stop", b"before-kill"]
        listed = kafka_tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--list").stdout.split()
        assert topic in listed
