"""The poll consumer's pure parts (issue 27): `TopicPartition` and the
other value types, argument forms, settings (modern defaults, refused 0.8
settings, ``auto.offset.reset=none``), the subscription state, the
records of a fetched set (timestamp type, leader epoch, headers) and the
listener calls. Nothing here starts a process or opens a connection."""

from __future__ import annotations

import inspect
import re

import pytest

import kclient
from kclient import (
    ConfigError,
    Consumer,
    ConsumerRebalanceListener,
    IllegalStateError,
    OffsetAndMetadata,
    TimestampType,
    TopicPartition,
)
from kclient.client.consumer.group.connector import Consumer as ConnectorFactory
from kclient.client.consumer.message_set import ByteBufferMessageSet
from kclient.client.consumer.poll.arguments import offsets_of, partitions_of, timeout_seconds, topics_or_pattern
from kclient.client.consumer.poll.config import MODERN_DEFAULTS, poll_settings
from kclient.client.consumer.poll.group import ASSIGNED, LOST, REVOKED, ListenerCall
from kclient.client.consumer.poll.records import batch_facts, consumer_records
from kclient.client.consumer.poll.subscription import EARLIEST, SubscriptionState
from kclient.client.serde import StringDecoder
from kclient.protocol.records import Header, build_batch

pytestmark = pytest.mark.unit

BOOT = {"bootstrap.servers": "localhost:1"}


def test_topic_partition_is_equal_by_topic_and_partition_only():
    assert TopicPartition("t", 1, 5) == TopicPartition("t", 1)
    assert {TopicPartition("t", 1, 5): "x"}[TopicPartition("t", 1)] == "x"
    assert TopicPartition("t", 1).offset == -1001
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)]) == [
        TopicPartition("a", 1), TopicPartition("a", 2), TopicPartition("b", 0),
    ]
    assert str(TopicPartition("t", 3)) == "t-3" and TopicPartition("t", 3).key == ("t", 3)
    assert partitions_of([("t", 0), TopicPartition("u", 1, 7)]) == [TopicPartition("t", 0), TopicPartition("u", 1)]
    with pytest.raises(TypeError):
        partitions_of(["t"])


def test_argument_forms():
    assert topics_or_pattern("t") == ["t"]
    assert topics_or_pattern(["a", "b"]) == ["a", "b"]
    assert topics_or_pattern("^ev.*").pattern == "^ev.*"
    pattern = re.compile("x+")
    assert topics_or_pattern(pattern) is pattern
    with pytest.raises(ValueError):
        topics_or_pattern(["^a", "b"])
    with pytest.raises(ValueError):
        topics_or_pattern([])
    assert offsets_of({TopicPartition("t", 0): 5, ("t", 1): OffsetAndMetadata(7, "m")}) == {
        TopicPartition("t", 0): OffsetAndMetadata(5), TopicPartition("t", 1): OffsetAndMetadata(7, "m"),
    }
    assert offsets_of([TopicPartition("t", 2, 9)]) == {TopicPartition("t", 2): OffsetAndMetadata(9)}
    with pytest.raises(ValueError):
        offsets_of([TopicPartition("t", 2)])
    assert timeout_seconds(1500, None, 0) == 1.5
    assert timeout_seconds(None, 2.0, 0) == 2.0
    assert timeout_seconds(None, None, 250) == 0.25
    with pytest.raises(TypeError):
        timeout_seconds(1, 1, 0)


def test_settings_take_modern_defaults_and_refuse_connector_settings():
    settings = poll_settings({**BOOT, "group.id": "g"})
    config = settings.config
    assert config.auto_commit_interval_ms == MODERN_DEFAULTS["auto.commit.interval.ms"] == 5000
    assert config.fetch_wait_max_ms == 500 and config.session_timeout_ms == 45000
    assert config.max_poll_records == 500 and config.max_poll_interval_ms == 300000
    assert settings.group_id == "g" and settings.offset_reset == "latest"
    # A value given under an alias wins over the modern default.
    assert poll_settings({**BOOT, "group.id": "g", "fetch.max.wait.ms": 20}).config.fetch_wait_max_ms == 20
    assert poll_settings({**BOOT, "auto.offset.reset": "earliest"}).offset_reset == "earliest"
    assert poll_settings({**BOOT, "auto.offset.reset": "none"}).offset_reset == "none"
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        poll_settings({**BOOT, "group.id": "g", "zookeeper.connect": "zk:2181"})
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        poll_settings({"group.id": "g"})
    with pytest.raises(ConfigError, match="max.poll.records"):
        poll_settings({**BOOT, "max.poll.records": 0})
    with pytest.raises(ConfigError, match="expected one of earliest, latest, none"):
        poll_settings({**BOOT, "auto.offset.reset": "beginning"})
    with pytest.raises(ConfigError, match="did you mean 'auto.offset.reset'"):
        poll_settings({**BOOT, "auto.offset.rest": "earliest"})
    strategy = poll_settings({**BOOT, "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor"})
    assert strategy.config.partition_assignment_strategy == ("roundrobin",)
    upgrade = poll_settings({**BOOT, "partition.assignment.strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor, range"})
    assert upgrade.config.partition_assignment_strategy == ("cooperative-sticky", "range")
    assert poll_settings({**BOOT, "partition.assignment.strategy": ["roundrobin", "range"]}).config.partition_assignment_strategy == ("roundrobin", "range")
    with pytest.raises(ConfigError, match="'sticky': expected one of range, roundrobin, cooperative-sticky"):
        poll_settings({**BOOT, "partition.assignment.strategy": "range,sticky"})
    with pytest.raises(ConfigError, match="partition.assignment.strategy.*at least one"):
        poll_settings({**BOOT, "partition.assignment.strategy": " , "})


def test_settings_from_a_consumer_config():
    from kclient import ConsumerConfig

    config = ConsumerConfig.from_properties({**BOOT, "group.id": "g"})
    settings = poll_settings(config)
    assert settings.config is config and settings.group_id == "g" and settings.offset_reset == "latest"
    with pytest.raises(ConfigError, match="group.coordination=broker"):
        poll_settings(ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "zk:2181"}))
    with pytest.raises(ConfigError, match="mapping"):
        poll_settings("bootstrap.servers=x:1")


def test_settings_without_group_and_with_deserializers():
    settings = poll_settings({**BOOT, "key.deserializer": "kclient.StringDecoder", "value.deserializer": lambda b: b[::-1]})
    assert settings.group_id is None
    assert settings.key_decoder is not None and settings.key_decoder(b"k") == "k"
    assert settings.value_decoder is not None and settings.value_decoder(b"ab") == b"ba"
    assert poll_settings({**BOOT, "value.deserializer": StringDecoder()}).value_decoder(b"v") == "v"
    with pytest.raises(ConfigError, match="enable.auto.commit cannot be set to true"):
        poll_settings({**BOOT, "enable.auto.commit": "true"})
    with pytest.raises(ConfigError, match="value.deserializer"):
        poll_settings({**BOOT, "value.deserializer": object()})


def test_consumer_names_and_the_seed_factory():
    assert kclient.Consumer is Consumer
    assert isinstance(inspect.getattr_static(Consumer, "create"), staticmethod)
    assert inspect.signature(Consumer.create).return_annotation in ("ConsumerConnector", kclient.ConsumerConnector)
    assert isinstance(inspect.getattr_static(ConnectorFactory, "create"), staticmethod)
    for name in ("TopicPartition", "ConsumerRecord", "OffsetAndMetadata", "ConsumerRebalanceListener", "TrioConsumer", "NoOffsetForPartitionError", "CommitFailedError"):
        assert name in kclient.__all__ and getattr(kclient, name) is not None
    with pytest.raises(ConfigError):  # before any thread starts
        Consumer({"group.id": "g"})


def test_subscription_state():
    subs = SubscriptionState()
    subs.subscribe(["a"])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        subs.assign_from_user([TopicPartition("a", 0)])
    subs.assign_from_subscribed([TopicPartition("a", 1), TopicPartition("a", 0)])
    assert subs.assigned() == [TopicPartition("a", 0), TopicPartition("a", 1)]
    assert subs.missing_positions() == subs.assigned() and subs.fetchable() == []
    subs.seek(TopicPartition("a", 0), 10)
    subs.request_reset(TopicPartition("a", 1), EARLIEST)
    assert subs.fetchable() == [TopicPartition("a", 0)] and subs.awaiting_reset() == {TopicPartition("a", 1): EARLIEST}
    subs.set_paused(TopicPartition("a", 0), True)
    assert subs.fetchable() == [] and subs.paused() == [TopicPartition("a", 0)]
    assert subs.all_consumed() == {TopicPartition("a", 0): OffsetAndMetadata(10)}
    with pytest.raises(IllegalStateError, match="No current assignment"):
        subs.seek(TopicPartition("b", 0), 1)
    subs.unsubscribe()
    subs.assign_from_user([TopicPartition("b", 0)])
    assert subs.assigned() == [TopicPartition("b", 0)] and not subs.auto_assigned


def test_records_carry_timestamp_type_leader_epoch_and_headers():
    first = build_batch([(b"k0", b"v0", 1000, [Header("h", b"1")]), (None, b"v1", 1001)], base_offset=5, partition_leader_epoch=3)
    second = build_batch([(b"k2", None, 2000)], base_offset=7, timestamp_type_log_append=True)
    buffer = first + second
    facts = batch_facts(buffer)
    assert [(f.last_offset, f.timestamp_type, f.leader_epoch) for f in facts] == [
        (6, TimestampType.CREATE_TIME, 3), (7, TimestampType.LOG_APPEND_TIME, None),
    ]
    records = consumer_records(ByteBufferMessageSet("t", 2, buffer, 6), StringDecoder().from_bytes, None)
    assert [(r.offset, r.key, r.value, r.timestamp_type, r.leader_epoch) for r in records] == [
        (6, None, b"v1", TimestampType.CREATE_TIME, 3), (7, "k2", None, TimestampType.LOG_APPEND_TIME, None),
    ]
    # One batch: every record built in one pass (shared timestamp type and epoch).
    same = consumer_records(ByteBufferMessageSet("t", 2, first, 5), StringDecoder().from_bytes, StringDecoder().from_bytes)
    assert [(r.offset, r.key, r.value, r.timestamp, r.timestamp_type, r.leader_epoch) for r in same] == [
        (5, "k0", "v0", 1000, TimestampType.CREATE_TIME, 3), (6, None, "v1", 1001, TimestampType.CREATE_TIME, 3),
    ]
    every = consumer_records(ByteBufferMessageSet("t", 2, buffer, 5), None, None)
    assert every[0].headers == (Header("h", b"1"),) and every[0].topic_partition == TopicPartition("t", 2)


def test_listener_calls():
    seen = []

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            seen.append(("revoked", revoked))

        def on_partitions_assigned(self, assigned):
            seen.append(("assigned", assigned))

    tps = (TopicPartition("t", 0),)
    for kind in (REVOKED, ASSIGNED, LOST):
        ListenerCall(kind, tps).invoke(Listener())
    ListenerCall(REVOKED, tps).invoke(None)
    # Kafka's default on_partitions_lost calls on_partitions_revoked.
    assert seen == [("revoked", list(tps)), ("assigned", list(tps)), ("revoked", list(tps))]


def test_timeouts_are_kafka_timeout_errors():
    import trio
    import trio.testing

    from kclient import KafkaTimeoutError
    from kclient.client.consumer.poll.core import within

    async def main() -> None:
        with pytest.raises(KafkaTimeoutError, match="commit did not complete within 1500 ms"):
            with within(1.5, "commit"):
                await trio.sleep(10)
        with within(1.5, "fast"):
            await trio.sleep(1)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_async_commits_run_in_order_and_auto_commit_rebalance_errors_are_quiet(caplog):
    import logging

    import trio

    from kclient.client.consumer.poll.auto_commit import PendingCommits, commit_logged
    from kclient.errors import NotCoordinatorError, RebalanceInProgressError

    tp = TopicPartition("t", 0)
    sent: list[int] = []

    async def commit(offsets) -> None:
        await trio.sleep(0.001 * (5 - offsets[tp].offset))  # later commits would finish first if run at once
        sent.append(offsets[tp].offset)

    async def failing(error):
        async def commit_fails(offsets) -> None:
            raise error

        return commit_fails

    async def main() -> None:
        pending = PendingCommits()
        async with trio.open_nursery() as nursery:
            for offset in range(5):
                pending.start(nursery, commit, {tp: OffsetAndMetadata(offset)}, None)
            assert pending.in_flight == 5
            assert await pending.wait(60)
        assert sent == [0, 1, 2, 3, 4] and pending.in_flight == 0
        with caplog.at_level(logging.INFO, logger="kclient.consumer"):
            await commit_logged(await failing(RebalanceInProgressError("rebalancing")), {tp: OffsetAndMetadata(1)}, None, auto=True)
            await commit_logged(await failing(RebalanceInProgressError("rebalancing")), {tp: OffsetAndMetadata(1)}, None)
            await commit_logged(await failing(NotCoordinatorError("moved")), {tp: OffsetAndMetadata(1)}, None, auto=True)

    trio.run(main)
    levels = [(r.levelname, r.getMessage().split(" of ")[0]) for r in caplog.records]
    assert levels == [("INFO", "auto-commit"), ("WARNING", "asynchronous commit"), ("WARNING", "auto-commit")]
