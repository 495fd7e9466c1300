"""What the broker's components share: its identity, its logs and the
topic configs it holds itself.

As the fields of Kafka's ``BrokerServer`` that every component is given a
piece of: `BrokerState` holds the config, the `kclient.storage.LogManager`,
the broker's identity (broker id, cluster id, advertised address), the
producer id allocator, the `kclient.broker.append_notifier.AppendNotifier`
and the `TopicOverrides` (each topic's static configs and `TopicFormat`).
It builds no component: `kclient.broker.components.BrokerComponents`
wires the replica manager, topic admin and group coordinator from its
parts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from kclient.broker.append_notifier import AppendNotifier
from kclient.broker.meta import META_FILE, ProducerIdAllocator, load_or_create_meta
from kclient.clock import now_ms
from kclient.config import BrokerConfig, message_format_magic
from kclient.errors import ConfigError
from kclient.protocol.records import codecs
from kclient.storage import LogConfig, LogManager

__all__ = ["BrokerState", "TopicFormat", "TopicOverrides", "topic_codec"]

log = logging.getLogger("kclient.broker")


def topic_codec(compression_type: str) -> int | None:
    """A topic's ``compression.type`` as a codec id.

    Args:
        compression_type: The config value (``producer``, ``uncompressed``,
            ``gzip``, ...).

    Returns:
        None for ``producer`` (or a value that is no codec: logged),
            `kclient.protocol.records.codecs.NONE` for ``uncompressed``, else
            the codec's id.
    """
    if compression_type == "uncompressed":
        return codecs.NONE
    try:
        return None if compression_type == "producer" else codecs.codec_id(compression_type)
    except (ValueError, KeyError):
        log.warning("compression.type %r is no codec: batches are kept as the producer sent them", compression_type)
        return None


@attrs.frozen
class TopicFormat:
    """How a topic stores records: ``magic`` 0, 1 or 2 (topic
    ``message.format.version``, else ``log.message.format.version``) and
    ``log_append_time`` (topic ``message.timestamp.type``, else
    ``log.message.timestamp.type``, is LogAppendTime) and ``codec`` (topic
    ``compression.type`` as a codec id, None for ``producer``: the batches
    are kept in the producer's codec)."""

    magic: int = 2
    log_append_time: bool = False
    codec: int | None = None


class TopicOverrides:
    """The topic-level configs this broker holds itself, and each topic's
    `TopicFormat`.

    The static overrides are ``topic.config.file``'s entries, the configs
    of topics created or altered on a standalone broker and
    ``__consumer_offsets``' own; in a cluster ZooKeeper's
    ``/config/topics/<topic>`` adds to them
    (`kclient.broker.replica_manager.ReplicaManager.topic_config`).
    Trio-thread only.

    Args:
        config: The broker's configuration (``topic.config.file`` and the
            broker-wide message format and timestamp type).
    """

    def __init__(self, config: BrokerConfig) -> None:
        self._configs: dict[str, dict[str, str]] = config.topic_configs()
        self._default_format = TopicFormat(config.message_format_magic, config.log_message_timestamp_type == "LogAppendTime")
        self._formats: dict[str, TopicFormat] = {}

    def get(self, topic: str) -> dict[str, str]:
        """A copy of ``topic``'s static overrides (empty if none)."""
        return dict(self._configs.get(topic, {}))

    def set(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replace ``topic``'s static overrides with ``configs``."""
        self._configs[topic] = dict(configs)

    def update(self, topic: str, configs: Mapping[str, str]) -> None:
        """Add ``configs`` to ``topic``'s static overrides."""
        self._configs.setdefault(topic, {}).update(configs)

    def remove(self, topic: str) -> None:
        """Forget ``topic``'s static overrides (it was deleted)."""
        self._configs.pop(topic, None)

    def format(self, topic: str, overrides: Mapping[str, str] | None = None) -> TopicFormat:
        """The `TopicFormat` of ``topic``: the broker's
        ``log.message.format.version`` / ``log.message.timestamp.type``,
        overridden by the topic's configs.

        Args:
            topic: The topic.
            overrides: The topic's configs as just read (``topic.config.file``
                and ZooKeeper's ``/config/topics/<topic>``; the replica
                manager passes them when it applies a topic's configs):
                the format is computed from them and kept. None: the kept
                format, else one from the static overrides alone.

        Returns:
            The topic's format.
        """
        fmt = self._formats.get(topic) if overrides is None else None
        if fmt is None:
            override = self._configs.get(topic, {}) if overrides is None else overrides
            fmt = self._default_format
            if "message.format.version" in override:
                fmt = attrs.evolve(fmt, magic=message_format_magic(override["message.format.version"]))
            if "message.timestamp.type" in override:
                fmt = attrs.evolve(fmt, log_append_time=override["message.timestamp.type"] == "LogAppendTime")
            if "compression.type" in override:
                fmt = attrs.evolve(fmt, codec=topic_codec(override["compression.type"]))
            self._formats[topic] = fmt
        return fmt

    def forget_format(self, topic: str) -> None:
        """Drop the kept `TopicFormat` of ``topic`` (its configs changed)."""
        self._formats.pop(topic, None)


class BrokerState:
    """The broker's identity and shared resources (see the module
    docstring).

    Build it with `open`; `close` flushes and closes the logs.

    Args:
        config: The broker's configuration.
        logs: Its log manager.
        cluster_id: The cluster id (``meta.properties``).
        advertised_host: The host given to clients in Metadata.
        advertised_port: The port given to clients in Metadata.
    """

    def __init__(
        self,
        config: BrokerConfig,
        logs: LogManager,
        *,
        cluster_id: str,
        advertised_host: str,
        advertised_port: int,
    ) -> None:
        self.config = config
        self.logs = logs
        self.cluster_id = cluster_id
        #: True while the cluster id is the one this start made up (no
        #: ``meta.properties`` before): ZooKeeper's ``/cluster/id`` replaces it.
        self.cluster_id_is_new = False
        self.broker_id: int = config.broker_id
        self.advertised_host = advertised_host
        self.advertised_port = advertised_port
        self.log_dirs = list(logs.log_dirs)
        self.message_max_bytes: int = config.message_max_bytes
        self.producer_ids = ProducerIdAllocator(self.log_dirs[0])
        #: transactional id -> (producer id, epoch) handed out (InitProducerId).
        self.transactional_ids: dict[str, tuple[int, int]] = {}
        self.appends = AppendNotifier()
        #: Each topic's static configs and `TopicFormat`.
        self.topic_overrides = TopicOverrides(config)
        #: The wall clock in ms (`kclient.clock.now_ms`) the components read:
        #: LogAppendTime, ISR lag, group and offset times.
        self.clock: Callable[[], int] = now_ms
        self._closed = False

    @property
    def advertised_address(self) -> tuple[str, int]:
        """``(host, port)`` of the first listener, as clients are told."""
        return (self.advertised_host, self.advertised_port)

    @classmethod
    def open(cls, config: BrokerConfig, *, advertised_host: str, advertised_port: int) -> BrokerState:
        """Open the logs and read (or create) the cluster id.

        The logs under ``config.log_dirs`` get their settings from
        `kclient.storage.LogConfig.from_broker_config` (segment, index, roll,
        flush and retention properties); the cluster id is in the first log
        dir's ``meta.properties``. What recovery truncated is logged at WARNING
        per partition (``recovered <topic>-<p>: truncated N bytes``); a clean
        start at INFO.

        Args:
            config: The broker's configuration.
            advertised_host: The host given to clients in Metadata.
            advertised_port: The port given to clients in Metadata.

        Returns:
            The broker's state.

        Raises:
            kclient.errors.ConfigError: Inconsistent metadata.
            OSError: An unusable directory.
        """
        log_dirs: list[str | os.PathLike[str]] = list(config.log_dirs)
        if not log_dirs:
            raise ConfigError("log.dirs is empty")
        meta_is_new = not (Path(log_dirs[0]) / META_FILE).exists()
        cluster_id = load_or_create_meta(log_dirs[0], config.broker_id)
        log_config = LogConfig.from_broker_config(config)
        logs = LogManager(log_dirs, log_config, default_num_partitions=config.num_partitions)
        for (topic, partition), cut in sorted(logs.recovery_truncated_bytes().items()):
            log.warning("recovered %s-%d: truncated %d bytes", topic, partition, cut)
        if logs.clean_shutdown_dirs:
            log.info("clean shutdown marker found in %s: recovery skipped", ", ".join(map(str, logs.clean_shutdown_dirs)))
        state = cls(config, logs, cluster_id=cluster_id, advertised_host=advertised_host, advertised_port=advertised_port)
        state.cluster_id_is_new = meta_is_new
        return state

    def close(self) -> None:
        """Flush and close every log (idempotent)."""
        if not self._closed:
            self._closed = True
            self.logs.close()
