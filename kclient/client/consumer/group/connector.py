"""ConsumerConnector: the high-level, ZooKeeper-coordinated consumer of
Kafka 0.8 (Kafka 0.8 documentation: section 5.1 "API Design", "Consumer
APIs", https://kafka.apache.org/08/documentation.html#apidesign; section 5.5 "Distribution", "Consumers and Consumer Groups",
"Consumer registration algorithm", "Consumer rebalancing algorithm",
https://kafka.apache.org/08/documentation.html#distributionimpl).

```python
with ConsumerConnector({"group.id": "g", "zookeeper.connect": zk,
                        "auto.offset.reset": "smallest"}) as connector:
    streams = connector.create_message_streams({"events": 2})
    for m in streams["events"][0]:
        print(m.topic, m.partition, m.offset, m.key, m.message)
```

What happens, in the terms of section 5.5 (the parts live in
`kclient.client.consumer.group.registration` (steps 1-2),
`kclient.client.consumer.group.offsets` (step 4),
`kclient.client.consumer.group.core` (rebalance, commit, fetchers) and
`kclient.client.consumer.fetcher` (step 3)):

1. Registration: the consumer writes the ephemeral
   ``/consumers/<group>/ids/<consumer_id>`` with
   ``{"version":1,"subscription":{topic: streams},"pattern":"static",
   "timestamp":"<ms>"}`` (``white_list`` / ``black_list`` and
   ``{regex: streams}`` for a topic filter), then watches the group's ids,
   ``/brokers/ids`` and ``/brokers/topics`` (a new topic matters only if it
   is subscribed or matches the filter); every change triggers a rebalance.
2. Rebalance: for each subscribed topic, the sorted partitions of
   ``/brokers/topics/<topic>`` are split over the group's sorted consumer
   threads ``<consumer_id>-<n>`` by range, the first
   ``partitions % threads`` threads taking one extra partition
   (`kclient.zk.paths.range_assignment`; with
   ``partition.assignment.strategy=roundrobin``, Kafka 0.8.2's round-robin
   over every subscribed partition,
   `kclient.client.consumer.group.assignors.zk_roundrobin_assignment`).
   If the result is what this
   consumer already owns, nothing changes. Otherwise the fetchers stop, the
   streams' queues are cleared, offsets are committed (with
   ``auto.commit.enable``), this consumer's owner nodes are deleted, and the
   new partitions are claimed with ephemeral
   ``/consumers/<group>/owners/<topic>/<p>`` nodes holding the thread id.
   A claim that meets another consumer's node fails the attempt: the
   claims are undone and the whole rebalance is retried after
   ``rebalance.backoff.ms``, at most ``rebalance.max.retries`` times, then
   `ConsumerRebalanceFailedError` is raised (from
   ``create_message_streams``, or on the streams for a background
   rebalance).
3. Fetching starts at the offsets in ``/consumers/<group>/offsets/<topic>/<p>``
   (the next offset to consume); a partition without one starts per
   ``auto.offset.reset`` (`kclient.client.consumer.fetcher`).
4. Offsets: the offset after the last message each stream handed to the
   application is committed to ZooKeeper by `ConsumerConnector.commit_offsets`,
   every ``auto.commit.interval.ms`` and at shutdown (both with
   ``auto.commit.enable``). Delivery is at least once: after a rebalance
   or a crash, messages after the last commit are delivered again.

The connector runs one trio loop in a background thread
(`kclient.sync.LoopThread`): the rebalance task, the fetchers and
the auto-commit task live there; ZooKeeper calls run in worker threads and
kazoo's watch callbacks are handed to the loop with
``TrioToken.run_sync_soon`` (`kclient.zk.client.TrioZk`).

Offsets (``offsets.storage``; Kafka 0.8.2 documentation, "Offset
management" and "Migrating offsets from ZooKeeper to Kafka",
https://kafka.apache.org/082/documentation.html#distributionimpl):
``zookeeper`` (the default) keeps them as in step 4; ``kafka`` commits and
fetches them through the group's coordinator (FindCoordinator,
OffsetCommit, OffsetFetch: `kclient.client.consumer.group.coordinator`),
retrying while the coordinator loads its ``__consumer_offsets`` partition
or moves; with ``dual.commit.enabled=true`` (the default, as in Kafka
0.8.2) each commit goes to Kafka and then ZooKeeper, and a read takes the
larger of the two offsets. The migration: run the group with
``offsets.storage=kafka`` and ``dual.commit.enabled=true``, restart every
consumer that way, then set ``dual.commit.enabled=false`` and restart
again; no record is read twice or skipped.

Group coordination without ZooKeeper (``group.coordination=broker``, the
default when ``bootstrap.servers`` is set and ``zookeeper.connect`` is
not): the same connector and streams, with membership and assignment done
by a broker's group coordinator as Kafka's own consumers do
(`kclient.client.consumer.group.broker_core`): this works on clusters that
give clients no ZooKeeper access, and a kclient member can share a group
with any other Kafka consumer (Java, librdkafka, kafka-python, aiokafka).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kclient.client.consumer.group.broker_core import BrokerGroupCore
from kclient.client.consumer.group.core import ConnectorCore
from kclient.client.consumer.group.registration import default_consumer_id
from kclient.client.consumer.group.streams import (
    Blacklist,
    KafkaStream,
    MessageAndMetadata,
    TopicFilter,
    Whitelist,
)
from kclient.client.consumer.statistics import ConsumerStatistics, StatisticsReporter
from kclient.client.loop_closer import LoopClientCloser
from kclient.client.serde import decoder_function
from kclient.config import ConsumerConfig
from kclient.errors import ConfigError, IllegalStateError
from kclient.sync import ClosingClient, LoopThread, track

log = logging.getLogger(__name__)

Decoder = Any


class ConsumerConnector(ClosingClient):
    """The high-level consumer (Kafka 0.8's ``ConsumerConnector``; see the
    module docstring for the algorithm).

    ``config`` is a `kclient.config.ConsumerConfig` or a mapping of
    Kafka property names (``group.id`` required, with ``zookeeper.connect``
    or, for ``group.coordination=broker``, ``bootstrap.servers``;
    ``offsets.storage`` (``zookeeper`` | ``kafka``), ``dual.commit.enabled``,
    ``offsets.channel.backoff.ms``, ``offsets.channel.socket.timeout.ms``,
    ``offsets.commit.max.retries``, ``partition.assignment.strategy``
    (``range`` or ``roundrobin``),
    ``session.timeout.ms``, ``heartbeat.interval.ms``,
    ``rebalance.timeout.ms``, ``metadata.max.age.ms``;
    ``consumer.id``, ``auto.commit.enable``, ``auto.commit.interval.ms``
    (ms), ``auto.offset.reset`` (``smallest`` | ``largest``),
    ``consumer.timeout.ms`` (ms, -1 = wait forever),
    ``fetch.message.max.bytes`` (bytes per partition per fetch),
    ``fetch.wait.max.ms``, ``fetch.min.bytes``,
    ``queued.max.message.chunks``, ``rebalance.max.retries``,
    ``rebalance.backoff.ms``, ``refresh.leader.backoff.ms``,
    ``zookeeper.session.timeout.ms``, ``zookeeper.connection.timeout.ms``,
    ``socket.timeout.ms``, ``client.id``, ``exclude.internal.topics``).
    ``num.consumer.fetchers`` is accepted but there is always one fetch loop
    per leader broker; ``zookeeper.sync.time.ms`` and
    ``socket.receive.buffer.bytes`` are accepted and unused.

    The constructor connects to ZooKeeper (ZooKeeper coordination); with
    broker coordination the group is joined by ``create_message_streams``.

    Args:
        config: the configuration (above).
        statistics_callback: called with a `statistics` snapshot every
            ``statistics.interval.ms`` (librdkafka's ``stats_cb``), on a
            thread of its own, until `shutdown`.

    Raises:
        ConfigError: a bad value (the property is named), only one of
            ``statistics.interval.ms`` > 0 and ``statistics_callback``, or
            ``group.instance.id`` (static membership is the poll
            ``kclient.Consumer``'s).
        ZkTimeoutError: ZooKeeper did not answer within
            ``zookeeper.connection.timeout.ms``.

    Use as a context manager or call `shutdown`. A connector that is never
    shut down does not keep the interpreter alive (its thread is a daemon
    thread); at interpreter exit kclient's exit hook (`kclient.sync`, run
    before the interpreter joins the application's threads) shuts it down
    as `shutdown` does: it commits the consumed offsets (with
    ``auto.commit.enable``), deletes its ``/consumers/<group>/ids`` and
    owner nodes (leaves the group) and ends the streams, which releases an
    application thread still iterating one. Garbage-collected while open,
    it emits ``ResourceWarning: unclosed <ConsumerConnector ...>`` and is
    shut down in the background.
    """

    def __init__(self, config: ConsumerConfig | Mapping[str, Any], *, statistics_callback: Callable[[ConsumerStatistics], object] | None = None) -> None:
        if not isinstance(config, ConsumerConfig):
            if not isinstance(config, Mapping):
                raise ConfigError(f"ConsumerConnector takes a ConsumerConfig or a mapping of properties, not {type(config).__name__}")
            config = ConsumerConfig.from_properties(config)
        if config.group_instance_id is not None:
            raise ConfigError("group.instance.id (static membership, KIP-345) is a setting of the poll consumer, kclient.Consumer, not of the ConsumerConnector")
        broker_coordinated = config.group_coordination == "broker"
        if (config.statistics_interval_ms > 0) != (statistics_callback is not None):
            raise ConfigError("statistics.interval.ms > 0 and statistics_callback go together (librdkafka's statistics.interval.ms and stats_cb)")
        self.config = config
        self.consumer_id = config.consumer_id or default_consumer_id(config.group_id)
        self._core: ConnectorCore | BrokerGroupCore = BrokerGroupCore(config, self.consumer_id) if broker_coordinated else ConnectorCore(config, self.consumer_id)
        self._streams_created = False
        self._loop = LoopThread(name=f"kclient-consumer-{self.consumer_id}")
        with self._loop.closing_on_error():
            self._loop.call(self._core.start, self._loop.nursery)
        # At exit: bounded by the session timeout (after it, ZooKeeper or the
        # group coordinator drops the member anyway), plus the socket timeout
        # for the fetchers to stop.
        session_ms = config.session_timeout_ms if broker_coordinated else config.zookeeper_session_timeout_ms
        bound = (session_ms + config.socket_timeout_ms) / 1000
        reporter = None
        if statistics_callback is not None:
            reporter = StatisticsReporter(config.statistics_interval_ms, statistics_callback, self._core.fetch_statistics.snapshot, f"kclient-consumer-{self.consumer_id}-stats")
        self._closer = LoopClientCloser(
            f"<ConsumerConnector {self.consumer_id} group={config.group_id!r}>",
            bound,
            self._loop,
            self._core.shutdown,  # commit with auto.commit.enable, release the partitions, leave the group
            reporter=reporter,
            abort_note="stopped without committing or leaving its group",
            logger=log,
        )
        track(self._closer)

    @property
    def group_id(self) -> str:
        """The consumer group (``group.id``)."""
        return self.config.group_id

    def create_message_streams(
        self,
        topic_count_map: Mapping[str, int],
        key_decoder: Decoder = None,
        value_decoder: Decoder = None,
    ) -> dict[str, list[KafkaStream]]:
        """Streams over the partitions of the given topics (Kafka's
        ``createMessageStreams``). Each stream is one consumer thread
        ``<consumer_id>-<n>`` of the range assignment. Registers the
        consumer and rebalances before returning.

        Args:
            topic_count_map: ``{topic: number of streams}``.
            key_decoder: decodes keys: a `kclient.client.serde.Decoder`
                (any object with ``from_bytes``), a callable, or None for
                bytes.
            value_decoder: decodes values, likewise.

        Returns:
            ``{topic: [KafkaStream, ...]}``.

        Raises:
            ConsumerRebalanceFailedError: the partitions cannot be claimed.
            ValueError: a bad map.
            IllegalStateError: streams were created already (once per
                connector, as in Kafka) or the connector is shut down.
        """
        if not topic_count_map:
            raise ValueError("topic_count_map is empty: name at least one topic")
        counts: dict[str, int] = {}
        for topic, n in topic_count_map.items():
            if not isinstance(topic, str) or not topic:
                raise ValueError(f"bad topic name {topic!r}")
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"the number of streams for {topic!r} must be an int >= 1, not {n!r}")
            counts[topic] = n
        names = [f"{self.consumer_id}-{t}-{i}" for t, n in counts.items() for i in range(n)]
        streams = self._create(counts, None, sum(counts.values()), names, key_decoder, value_decoder)
        result: dict[str, list[KafkaStream]] = {}
        base = 0
        for topic, n in counts.items():
            result[topic] = streams[base : base + n]
            base += n
        return result

    def create_message_streams_by_filter(
        self,
        topic_filter: TopicFilter,
        num_streams: int = 1,
        key_decoder: Decoder = None,
        value_decoder: Decoder = None,
    ) -> list[KafkaStream]:
        """Streams over every topic ``topic_filter`` allows, now and as
        topics appear (Kafka's ``createMessageStreamsByFilter``; the
        consumer watches ``/brokers/topics``). Stream ``n`` gets thread
        ``<consumer_id>-<n>``'s partitions of every matching topic.

        Args:
            topic_filter: a `Whitelist` or `Blacklist`.
            num_streams: how many streams.
            key_decoder: as for `create_message_streams`.
            value_decoder: as for `create_message_streams`.

        Returns:
            The ``num_streams`` streams.

        Raises:
            TypeError: ``topic_filter`` is not a TopicFilter.
            ConsumerRebalanceFailedError: as for `create_message_streams`.
            ValueError: a bad ``num_streams``.
            IllegalStateError: as for `create_message_streams`.
        """
        if not isinstance(topic_filter, TopicFilter):
            raise TypeError(f"topic_filter must be a Whitelist or Blacklist, not {topic_filter!r}")
        if not isinstance(num_streams, int) or isinstance(num_streams, bool) or num_streams < 1:
            raise ValueError(f"num_streams must be an int >= 1, not {num_streams!r}")
        names = [f"{self.consumer_id}-{i}" for i in range(num_streams)]
        return self._create({topic_filter.regex: num_streams}, topic_filter, num_streams, names, key_decoder, value_decoder)

    def _create(
        self, subscription: dict[str, int], topic_filter: TopicFilter | None, count: int, names: list[str], key_decoder: Decoder, value_decoder: Decoder
    ) -> list[KafkaStream]:
        if self._closer.closed:
            raise IllegalStateError("the connector is shut down")
        if self._streams_created:
            raise IllegalStateError("create_message_streams / create_message_streams_by_filter may be called only once per ConsumerConnector")
        kd = decoder_function(key_decoder, "key_decoder")
        vd = decoder_function(value_decoder, "value_decoder")
        self._streams_created = True
        core = self._core
        core.subscribe(subscription, topic_filter, kd, vd)

        def make() -> list[KafkaStream]:
            return core.make_streams(self._loop, count, self.config.queued_max_message_chunks, names)

        streams: list[KafkaStream] = self._loop.call_sync(make)
        self._loop.call(core.register_and_rebalance)
        return streams

    def commit_offsets(self) -> None:
        """Commit the offset after the last message each stream has handed
        out, for every partition this consumer owns, to
        ``/consumers/<group>/offsets/<topic>/<partition>`` (section 5.5
        "Consumer Offsets"), to the group coordinator (``offsets.storage=kafka``
        or broker coordination) or to both (``dual.commit.enabled``).

        Raises:
            ZooKeeperError: ZooKeeper failed.
            BrokerResponseError: the coordinator refused the commit (named
                after the Kafka error code, e.g. `IllegalGenerationError`
                after a rebalance), after retrying what can be retried.
            KafkaConnectionError: no coordinator could be reached.
            IllegalStateError: the connector is shut down.
        """
        if self._closer.closed:
            raise IllegalStateError("the connector is shut down")
        self._loop.call(self._core.commit)

    def statistics(self) -> ConsumerStatistics:
        """What this consumer's fetchers fetched so far, and the lag of each
        partition it fetched since it was built (the high watermark minus
        the next offset to fetch; fetched messages wait in the streams'
        queues until the application reads them). Counted as
        `kclient.SimpleConsumer.statistics` counts. Callable from any
        thread, also after `shutdown`.

        Returns:
            A `kclient.ConsumerStatistics`.
        """
        return self._core.fetch_statistics.snapshot()

    def owned_partitions(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): stream index}`` this consumer owns now."""
        owned: dict[tuple[str, int], int] = self._loop.call_sync(self._core.owned_partitions)
        return owned

    def shutdown(self) -> None:
        """Stop fetching, commit (with ``auto.commit.enable``), release the
        partitions, leave the group (the ephemeral nodes go, the other
        consumers rebalance) and end every stream's iteration. Idempotent.

        A connector still open at interpreter exit is shut down the same way
        by kclient's exit hook (bounded by ``zookeeper.session.timeout.ms`` +
        ``socket.timeout.ms``); one garbage-collected while open emits
        ``ResourceWarning`` and is shut down in the background."""
        self._closer.close()

    close = shutdown

    def __repr__(self) -> str:
        return f"<ConsumerConnector {self.consumer_id} group={self.config.group_id!r}>"


class Consumer:
    """Kafka 0.8's ``kafka.consumer.Consumer`` factory (Kafka 0.8
    documentation, section 5.1 "API Design", "Consumer APIs":
    ``ConsumerConnector connector = Consumer.create(consumerConfig)``)."""

    @staticmethod
    def create(config: ConsumerConfig | Mapping[str, Any], **kwargs: Any) -> ConsumerConnector:
        """Create a high-level consumer.

        Args:
            config: A `kclient.config.ConsumerConfig` or a mapping of Kafka
                property names (see `ConsumerConnector`).
            **kwargs: Passed to `ConsumerConnector` (``statistics_callback``).

        Returns:
            The `ConsumerConnector`.

        Raises:
            ConfigError: a bad or missing property.
            ZkTimeoutError: ZooKeeper did not answer (ZooKeeper coordination).
        """
        return ConsumerConnector(config, **kwargs)


__all__ = ["Blacklist", "Consumer", "ConsumerConnector", "KafkaStream", "MessageAndMetadata", "TopicFilter", "Whitelist", "default_consumer_id"]
