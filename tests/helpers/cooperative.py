"""Cooperative-sticky group members for the KIP-429 tests: a kclient
poll-consumer member in its own thread recording what its polls return
(and how much while it rejoins), a writer producing without pause, a
confluent-kafka (librdkafka) cooperative-sticky member, and Kafka's
``kafka-verifiable-consumer`` with ``CooperativeStickyAssignor`` (its
assignment followed incrementally)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from helpers.groups import poll_settings
from kclient import Consumer, ConsumerRebalanceListener, Producer, ProducerData, TopicPartition
from kclient.client.consumer.poll.group import Phase

DEADLINE = 90.0


class Calls(ConsumerRebalanceListener):
    """The listener calls of one member, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.calls.append(("revoked", sorted(tp.partition for tp in revoked)))

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.calls.append(("assigned", sorted(tp.partition for tp in assigned)))

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.calls.append(("lost", sorted(tp.partition for tp in lost)))

    def kinds(self, kind: str) -> list[list[int]]:
        return [parts for k, parts in self.calls if k == kind]


class Member(threading.Thread):
    """A cooperative-sticky kclient member polling in its own thread until
    `stop` (``hold`` set: it stays in the group but stops polling). It
    records every ``(partition, offset)`` its polls return, and how many
    records polls returned while the member was rejoining."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.settings = poll_settings(
            bootstrap, group,
            **{"partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": True, "auto.commit.interval.ms": 200},
        )
        self.topic = topic
        self.listener = Calls()
        self.records: list[tuple[int, int]] = []
        self.while_rejoining = 0
        self.partitions: set[int] = set()
        self.error: BaseException | None = None
        self.halt = threading.Event()
        self.hold = threading.Event()
        self.lock = threading.Lock()
        self.started_polling = threading.Event()

    def run(self) -> None:
        try:
            consumer = Consumer(self.settings)
            try:
                consumer.subscribe([self.topic], listener=self.listener)
                driver = consumer._core._driver  # the member's own view of its rebalance phase
                while not self.halt.is_set():
                    if self.hold.is_set():
                        self.halt.wait(0.05)
                        continue
                    self.started_polling.set()
                    got = consumer.poll(timeout_ms=100)
                    rejoining = driver is not None and driver.phase in (Phase.JOINING, Phase.JOINED)
                    with self.lock:
                        self.records.extend((r.partition, r.offset) for r in got)
                        if rejoining:
                            self.while_rejoining += len(got)
                    self.partitions = {tp.partition for tp in consumer.assignment()}
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def consumed(self) -> list[tuple[int, int]]:
        with self.lock:
            return list(self.records)

    def stop(self) -> None:
        self.halt.set()
        self.join(DEADLINE)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


class Writer(threading.Thread):
    """Produces one record to every partition in turn until `stop`,
    keeping the ``(partition, offset)`` of each acknowledged one."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(name="writer", daemon=True)
        self.props = {"metadata.broker.list": bootstrap, "producer.type": "sync", "request.required.acks": 1}
        self.topic = topic
        self.partitions = partitions
        self.sent = [0] * partitions
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Producer(self.props) as producer:
                while not self.halt.is_set():
                    for p in range(self.partitions):
                        producer.send([ProducerData(self.topic, None, [f"{p}-{self.sent[p]}".encode()], partition=p)])
                        self.sent[p] += 1
        except BaseException as exc:
            self.error = exc

    def acknowledged(self) -> set[tuple[int, int]]:
        return {(p, o) for p in range(self.partitions) for o in range(self.sent[p])}

    def stop(self) -> None:
        self.halt.set()
        self.join(DEADLINE)
        assert not self.is_alive() and self.error is None, self.error



class LibrdkafkaMember(threading.Thread):
    """A confluent-kafka (librdkafka) consumer with
    ``partition.assignment.strategy=cooperative-sticky`` polling in its own
    thread until `stop`, auto-committing every 200 ms (and at close); it
    records every ``(partition, offset)`` it reads and its assignment."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name="librdkafka", daemon=True)
        self.settings = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "cooperative-sticky",
            "auto.commit.interval.ms": 200,
            "topic.metadata.refresh.interval.ms": 1000,
        }
        self.topic = topic
        self.records: list[tuple[int, int]] = []
        self.partitions: set[int] = set()
        self.error: BaseException | None = None
        self.halt = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        from confluent_kafka import Consumer as ConfluentConsumer

        try:
            consumer = ConfluentConsumer(self.settings)
            try:
                consumer.subscribe([self.topic])
                while not self.halt.is_set():
                    msg = consumer.poll(0.1)
                    if msg is not None and not msg.error():
                        with self.lock:
                            self.records.append((msg.partition(), msg.offset()))
                    self.partitions = {tp.partition for tp in consumer.assignment()}
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def consumed(self) -> list[tuple[int, int]]:
        with self.lock:
            return list(self.records)

    def stop(self) -> None:
        self.halt.set()
        self.join(DEADLINE)
        assert not self.is_alive(), "the librdkafka member did not stop"
        if self.error is not None:
            raise self.error


class JavaMember:
    """Kafka's ``kafka-verifiable-consumer`` (Kafka 4's Java KafkaConsumer,
    classic protocol, ``CooperativeStickyAssignor``, a synchronous commit
    after each poll) as a subprocess. With cooperative rebalancing its
    ``partitions_revoked`` / ``partitions_assigned`` events are increments:
    `partitions` follows them."""

    def __init__(self, bootstrap: str, group: str, topic: str, workdir: Path) -> None:
        from kclient.testing import kafka_tool_command

        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stderr_path = workdir / "verifiable-consumer.stderr"
        self._stderr = open(self.stderr_path, "wb")
        args = [
            "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group, "--reset-policy", "earliest", "--verbose",
            "--session-timeout", "6000", "--assignment-strategy", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
        ]
        self.proc = subprocess.Popen(kafka_tool_command("kafka-verifiable-consumer", *args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                with self.lock:
                    self.events.append(event)

    def changes(self) -> list[tuple[str, list[int]]]:
        """The listener calls: ``(revoked | assigned, partitions)``."""
        with self.lock:
            return [
                (e["name"].split("_")[1], sorted(p["partition"] for p in e["partitions"]))
                for e in self.events
                if e.get("name") in ("partitions_assigned", "partitions_revoked")
            ]

    @property
    def partitions(self) -> set[int]:
        owned: set[int] = set()
        for kind, parts in self.changes():
            owned = owned | set(parts) if kind == "assigned" else owned - set(parts)
        return owned

    def consumed(self) -> list[tuple[int, int]]:
        with self.lock:
            return [(e["partition"], e["offset"]) for e in self.events if e.get("name") == "record_data"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(DEADLINE)
        self._stderr.close()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]


__all__ = ["Calls", "JavaMember", "LibrdkafkaMember", "Member", "Writer"]
