"""kclient: a Python client SDK for the Kafka protocol, with a bundled
reference broker.

The classic API with Python names (the producer and consumer APIs of the
Kafka 0.8 documentation, https://kafka.apache.org/082/documentation.html,
"API Design"):

- `Producer` (sync and async modes) with `ProducerData`,
  pluggable `Encoder` (and the consumer's `Decoder`), `Partitioner`, `EventHandler` and
  `CallbackHandler`; configured by `ProducerConfig` or Kafka's
  dotted property names. Per-record delivery results: ``send(data,
  callback=...)`` and ``send_with_result`` (`RecordFuture`,
  `RecordMetadata`).
- `SimpleConsumer` with `FetchRequest` and
  `OffsetRequest`; fetches return `ByteBufferMessageSet`.
- ``statistics()`` snapshots: `ProducerStatistics`, `ConsumerStatistics`
  (with `PartitionStatistics` and each partition's lag).
- `Consumer`, the modern consumer (Kafka's ``KafkaConsumer``):
  ``subscribe`` / ``assign``, ``poll`` returning `ConsumerRecord` lists,
  ``commit`` / ``committed``, ``seek``, ``pause`` / ``resume``, with
  `TopicPartition`, `OffsetAndMetadata`, `OffsetAndTimestamp`,
  `ConsumerGroupMetadata` and a `ConsumerRebalanceListener`; its trio twin
  `TrioConsumer`.
- `ConsumerConnector` (built directly or by ``Consumer.create``), the
  high-level consumer, its group coordinated through ZooKeeper or a
  broker's group coordinator, its offsets in ZooKeeper or Kafka:
  ``create_message_streams`` / ``create_message_streams_by_filter``
  (`Whitelist`, `Blacklist`) give `KafkaStream`
  iterators of `MessageAndMetadata`.
- The trio API underneath: `TrioProducer`, `TrioSimpleConsumer`,
  `TrioConsumer`.
- `AdminClient` with `NewTopic` (configured by `AdminConfig`): create,
  delete, list and describe topics (KIP-4).
- Test helpers: `BrokerProcess`, `ZooKeeperProcess` and `Cluster` (a
  real multi-broker cluster; from `kclient.testing`).
- Errors named after Kafka error codes, all under `KafkaError`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> module, sorted by name (`__all__` lists them in this order).
# Loaded on first use (PEP 562) so that importing the pure protocol layer does
# not pull in trio, threads or the broker.
_EXPORTS = {
    "AccessControlEntry": "kclient.acl",
    "AccessControlEntryFilter": "kclient.acl",
    "AclBinding": "kclient.acl",
    "AclBindingFilter": "kclient.acl",
    "AclOperation": "kclient.acl",
    "AclPermissionType": "kclient.acl",
    "AdminClient": "kclient.client.admin",
    "AdminConfig": "kclient.config",
    "AuthenticationError": "kclient.errors",
    "Blacklist": "kclient.client.consumer.group.streams",
    "BrokerConfig": "kclient.config",
    "BrokerProcess": "kclient.testing",
    "BrokerResponseError": "kclient.errors",
    "ByteBufferMessageSet": "kclient.client.consumer.message_set",
    "CallbackHandler": "kclient.client.producer.callbacks",
    "ClientForkedError": "kclient.errors",
    "ClientSecurity": "kclient.security.settings",
    "Cluster": "kclient.testing",
    "ClusterAuthorizationFailedError": "kclient.errors",
    "CommitFailedError": "kclient.client.consumer.poll.errors",
    "ConfigError": "kclient.errors",
    "Consumer": "kclient.client.consumer.poll.consumer",
    "ConsumerConfig": "kclient.config",
    "ConsumerConnector": "kclient.client.consumer.group.connector",
    "ConsumerGroupMetadata": "kclient.client.consumer.poll.types",
    "ConsumerRebalanceFailedError": "kclient.errors",
    "ConsumerRebalanceListener": "kclient.client.consumer.poll.types",
    "ConsumerRecord": "kclient.client.consumer.poll.types",
    "ConsumerStatistics": "kclient.client.consumer.statistics",
    "ConsumerTimeoutError": "kclient.errors",
    "CorruptRecordError": "kclient.errors",
    "Decoder": "kclient.client.serde",
    "DefaultDecoder": "kclient.client.serde",
    "DefaultEncoder": "kclient.client.serde",
    "DefaultEventHandler": "kclient.client.producer.event_handler",
    "DefaultPartitioner": "kclient.client.producer.partitioner",
    "Encoder": "kclient.client.serde",
    "EventHandler": "kclient.client.producer.event_handler",
    "FailedToSendMessageError": "kclient.errors",
    "FetchRequest": "kclient.client.consumer.simple",
    "GroupAuthorizationFailedError": "kclient.errors",
    "Header": "kclient.protocol.records",
    "IllegalStateError": "kclient.errors",
    "InvalidReplicationFactorError": "kclient.errors",
    "InvalidTopicError": "kclient.errors",
    "KafkaConnectionError": "kclient.errors",
    "KafkaError": "kclient.errors",
    "KafkaStorageError": "kclient.errors",
    "KafkaStream": "kclient.client.consumer.group.streams",
    "KafkaTimeoutError": "kclient.errors",
    "LeaderNotAvailableError": "kclient.errors",
    "LoopClosedError": "kclient.errors",
    "Message": "kclient.client.consumer.message_set",
    "MessageAndMetadata": "kclient.client.consumer.group.streams",
    "MessageAndOffset": "kclient.client.consumer.message_set",
    "MessageSizeTooLargeError": "kclient.errors",
    "MultiFetchResponse": "kclient.client.consumer.message_set",
    "NewTopic": "kclient.client.admin",
    "NoBrokersAvailableError": "kclient.errors",
    "NoOffsetForPartitionError": "kclient.client.consumer.poll.errors",
    "NotControllerError": "kclient.errors",
    "NotLeaderForPartitionError": "kclient.errors",
    "NotSupportedError": "kclient.errors",
    "OffsetAndMetadata": "kclient.client.consumer.poll.types",
    "OffsetAndTimestamp": "kclient.client.consumer.poll.types",
    "OffsetOutOfRangeError": "kclient.errors",
    "OffsetRequest": "kclient.client.consumer.simple",
    "PartitionStatistics": "kclient.client.consumer.statistics",
    "Partitioner": "kclient.client.producer.partitioner",
    "PatternType": "kclient.acl",
    "Producer": "kclient.client.producer.producer",
    "ProducerClosedError": "kclient.errors",
    "ProducerConfig": "kclient.config",
    "ProducerData": "kclient.client.producer.data",
    "ProducerFencedError": "kclient.errors",
    "ProducerStatistics": "kclient.client.producer.producer",
    "ProtocolError": "kclient.errors",
    "QueueFullError": "kclient.errors",
    "RecordFuture": "kclient.client.producer.delivery",
    "RecordMetadata": "kclient.client.producer.delivery",
    "ResourcePattern": "kclient.acl",
    "ResourcePatternFilter": "kclient.acl",
    "ResourceType": "kclient.acl",
    "SaslAuthenticationFailedError": "kclient.errors",
    "SecurityDisabledError": "kclient.errors",
    "SimpleConsumer": "kclient.client.consumer.simple",
    "SslAuthenticationError": "kclient.errors",
    "StringDecoder": "kclient.client.serde",
    "StringEncoder": "kclient.client.serde",
    "TimestampType": "kclient.client.consumer.poll.types",
    "TopicAlreadyExistsError": "kclient.errors",
    "TopicAuthorizationFailedError": "kclient.errors",
    "TopicFilter": "kclient.client.consumer.group.streams",
    "TopicPartition": "kclient.client.consumer.poll.types",
    "TransactionAbortableError": "kclient.errors",
    "TransactionalIdAuthorizationFailedError": "kclient.errors",
    "TrioConsumer": "kclient.client.consumer.poll.core",
    "TrioProducer": "kclient.client.producer.core",
    "TrioSimpleConsumer": "kclient.client.consumer.simple",
    "UnknownTopicOrPartitionError": "kclient.errors",
    "UnstableOffsetCommitError": "kclient.errors",
    "UnsupportedSaslMechanismError": "kclient.errors",
    "UnsupportedVersionError": "kclient.errors",
    "WakeupError": "kclient.client.consumer.poll.errors",
    "Whitelist": "kclient.client.consumer.group.streams",
    "ZkTimeoutError": "kclient.errors",
    "ZooKeeperError": "kclient.errors",
    "ZooKeeperProcess": "kclient.testing",
}


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'kclient' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from kclient.acl import (
        AccessControlEntry,
        AccessControlEntryFilter,
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kclient.client.admin import AdminClient, NewTopic
    from kclient.client.consumer.group.connector import ConsumerConnector
    from kclient.client.consumer.group.streams import Blacklist, KafkaStream, MessageAndMetadata, TopicFilter, Whitelist
    from kclient.client.consumer.message_set import ByteBufferMessageSet, Message, MessageAndOffset, MultiFetchResponse
    from kclient.client.consumer.poll.consumer import Consumer
    from kclient.client.consumer.poll.core import TrioConsumer
    from kclient.client.consumer.poll.errors import CommitFailedError, NoOffsetForPartitionError, WakeupError
    from kclient.client.consumer.poll.types import (
        ConsumerGroupMetadata,
        ConsumerRebalanceListener,
        ConsumerRecord,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        TimestampType,
        TopicPartition,
    )
    from kclient.client.consumer.simple import FetchRequest, OffsetRequest, SimpleConsumer, TrioSimpleConsumer
    from kclient.client.consumer.statistics import ConsumerStatistics, PartitionStatistics
    from kclient.client.producer.callbacks import CallbackHandler
    from kclient.client.producer.core import TrioProducer
    from kclient.client.producer.data import ProducerData
    from kclient.client.producer.delivery import RecordFuture, RecordMetadata
    from kclient.client.producer.event_handler import DefaultEventHandler, EventHandler
    from kclient.client.producer.partitioner import DefaultPartitioner, Partitioner
    from kclient.client.producer.producer import Producer, ProducerStatistics
    from kclient.client.serde import Decoder, DefaultDecoder, DefaultEncoder, Encoder, StringDecoder, StringEncoder
    from kclient.config import AdminConfig, BrokerConfig, ConsumerConfig, ProducerConfig
    from kclient.errors import (
        AuthenticationError,
        BrokerResponseError,
        ClientForkedError,
        ClusterAuthorizationFailedError,
        ConfigError,
        ConsumerRebalanceFailedError,
        ConsumerTimeoutError,
        CorruptRecordError,
        FailedToSendMessageError,
        GroupAuthorizationFailedError,
        IllegalStateError,
        InvalidReplicationFactorError,
        InvalidTopicError,
        KafkaConnectionError,
        KafkaError,
        KafkaStorageError,
        KafkaTimeoutError,
        LeaderNotAvailableError,
        LoopClosedError,
        MessageSizeTooLargeError,
        NoBrokersAvailableError,
        NotControllerError,
        NotLeaderForPartitionError,
        NotSupportedError,
        OffsetOutOfRangeError,
        ProducerClosedError,
        ProducerFencedError,
        ProtocolError,
        QueueFullError,
        SaslAuthenticationFailedError,
        SecurityDisabledError,
        SslAuthenticationError,
        TopicAlreadyExistsError,
        TopicAuthorizationFailedError,
        TransactionAbortableError,
        TransactionalIdAuthorizationFailedError,
        UnknownTopicOrPartitionError,
        UnstableOffsetCommitError,
        UnsupportedSaslMechanismError,
        UnsupportedVersionError,
        ZkTimeoutError,
        ZooKeeperError,
    )
    from kclient.protocol.records import Header
    from kclient.security.settings import ClientSecurity
    from kclient.testing import BrokerProcess, Cluster, ZooKeeperProcess

__all__ = list(_EXPORTS)
