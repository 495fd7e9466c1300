"""Shared set-up of the broker-coordinated group tests: a bundled broker
whose group coordinator answers quickly (no initial rebalance delay, short
session timeouts allowed, a small offsets topic), the same for Apache
Kafka 4.x, and the poll consumer's settings those tests run with."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from helpers.skips import require
from kclient.testing import KafkaProcess, java_unavailable_reason


def group_broker_properties(partitions: int) -> dict[str, Any]:
    """Properties of a bundled broker for group tests: auto-created topics
    get ``partitions`` partitions, ``__consumer_offsets`` 3, the first
    rebalance is not delayed and session timeouts down to 1 s are allowed."""
    return {
        "num.partitions": partitions,
        "offsets.topic.num.partitions": 3,
        "offsets.topic.replication.factor": 1,
        "group.initial.rebalance.delay.ms": 0,
        "group.min.session.timeout.ms": 1000,
    }


def poll_settings(bootstrap: str, group: str | None, **extra: Any) -> dict[str, Any]:
    """A `kclient.Consumer` config for tests: from the earliest offset,
    no auto-commit, quick heartbeats (classic protocol) and fetch waits;
    ``group`` None leaves ``group.id`` out (assign only); ``extra``
    overrides any of them."""
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "fetch.max.wait.ms": 100,
    }
    if group is not None:
        base["group.id"] = group
    if extra.get("group.protocol") == "consumer":  # the coordinator rules the session (KIP-848)
        del base["session.timeout.ms"], base["heartbeat.interval.ms"]
    base.update(extra)
    return base


@contextlib.contextmanager
def group_kafka(partitions: int, **extra: Any) -> Iterator[KafkaProcess]:
    """Apache Kafka 4.x (KRaft, one node) for group tests: auto-created
    topics get ``partitions`` partitions, no initial rebalance delay, a
    one-replica offsets topic; ``extra`` adds or overrides properties.
    Skips (`helpers.skips.require`) without Java 17+."""
    require(java_unavailable_reason(), name="Java 17+", needs="needs Apache Kafka (Java 17+)")
    props = {"num.partitions": partitions, "offsets.topic.replication.factor": 1, "group.initial.rebalance.delay.ms": 0, **extra}
    with KafkaProcess("4", properties=props) as proc:
        yield proc
