"""Configs through the admin client: DescribeConfigs (key 32, KIP-133) and
IncrementalAlterConfigs (key 44, KIP-339), as Kafka's
``Admin.describeConfigs`` and ``Admin.incrementalAlterConfigs``.

A `ConfigResource` names a topic, a broker or a broker's loggers. Topic
resources go to any broker (a Kafka 4 broker forwards the change to its
controller; a ZooKeeper-mode broker writes ``/config/topics/<topic>``);
broker and broker-logger resources go to the broker they name (a broker
resource with an empty name, the cluster-wide default, to any broker).
Kafka protocol guide:
https://kafka.apache.org/protocol#The_Messages_DescribeConfigs and
https://kafka.apache.org/protocol#The_Messages_IncrementalAlterConfigs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from kclient.client.cluster import Cluster
from kclient.errors import NONE, error_for_code
from kclient.net.connection import BrokerConnection
from kclient.protocol.messages import DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from kclient.protocol.messages.alter_configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterableConfigOperation,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    IncrementalAlterConfigsResponse,
)
from kclient.protocol.messages.describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
)

__all__ = ["AlterConfigOp", "ConfigEntry", "ConfigResource", "ConfigSynonym", "describe_configs", "incremental_alter_configs"]

#: ``ConfigResource.type`` names -> the protocol's ``resource_type``.
RESOURCE_TYPES = {"topic": RESOURCE_TOPIC, "broker": RESOURCE_BROKER, "broker_logger": RESOURCE_BROKER_LOGGER}

#: DescribeConfigs v1+ ``config_source`` values -> Kafka's
#: ``ConfigEntry.ConfigSource`` names.
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}

#: ``AlterConfigOp.op`` names -> IncrementalAlterConfigs ``config_operation``.
OPERATIONS = {"set": OP_SET, "delete": OP_DELETE, "append": OP_APPEND, "subtract": OP_SUBTRACT}


def _resource_type(value: str) -> str:
    if value not in RESOURCE_TYPES:
        raise ValueError(f"ConfigResource type must be one of {', '.join(RESOURCE_TYPES)}, not {value!r}")
    return value


def _operation(value: str) -> str:
    if value not in OPERATIONS:
        raise ValueError(f"AlterConfigOp op must be one of {', '.join(OPERATIONS)}, not {value!r}")
    return value


@attrs.frozen
class ConfigResource:
    """What configs belong to (Kafka's ``ConfigResource``).

    Attributes:
        type: ``"topic"``, ``"broker"`` or ``"broker_logger"``.
        name: The topic name, or the broker id as a string (``""`` for the
            cluster-wide broker default).
    """

    type: str = attrs.field(converter=_resource_type)
    name: str = attrs.field(converter=str)


@attrs.frozen
class ConfigSynonym:
    """A source of a config's value, in the order the broker applies them
    (Kafka's ``ConfigEntry.ConfigSynonym``, KIP-226).

    Attributes:
        name: The config's name at that level (``log.retention.hours``).
        value: Its value there.
        source: Its `CONFIG_SOURCES` name.
    """

    name: str
    value: str | None
    source: str


@attrs.frozen
class ConfigEntry:
    """One config as DescribeConfigs describes it (Kafka's ``ConfigEntry``).

    Attributes:
        name: The config name (``retention.ms``).
        value: Its value; None when it is sensitive (a password) or unset.
        source: Where the value comes from: ``DYNAMIC_TOPIC_CONFIG`` (a
            topic override), ``STATIC_BROKER_CONFIG`` (server.properties),
            ``DEFAULT_CONFIG``, ... (`CONFIG_SOURCES`).
        is_default: The value is the default (``source`` is
            ``DEFAULT_CONFIG``).
        read_only: It cannot be changed at run time.
        is_sensitive: Its value is never shown.
        synonyms: Where the value could come from, highest precedence
            first (`ConfigSynonym`; asked for with ``include_synonyms``).
    """

    name: str
    value: str | None
    source: str
    is_default: bool
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()


@attrs.frozen
class AlterConfigOp:
    """One change of IncrementalAlterConfigs (Kafka's ``AlterConfigOp``).

    Attributes:
        name: The config name.
        value: The value to set, append or subtract; None to delete.
        op: ``"set"`` (default), ``"delete"`` (back to the default),
            ``"append"`` / ``"subtract"`` (list configs such as
            ``cleanup.policy``).
    """

    name: str
    value: str | None = None
    op: str = attrs.field(default="set", converter=_operation)


def _entry(raw: DescribeConfigsResourceResult, version: int) -> ConfigEntry:
    if version == 0:
        source = "DEFAULT_CONFIG" if raw.is_default else "UNKNOWN"
    else:
        source = CONFIG_SOURCES.get(raw.config_source, "UNKNOWN")
    synonyms = tuple(ConfigSynonym(y.name, y.value, CONFIG_SOURCES.get(y.source, "UNKNOWN")) for y in (raw.synonyms or ()))
    return ConfigEntry(raw.name, raw.value, source, source == "DEFAULT_CONFIG", bool(raw.read_only), bool(raw.is_sensitive), synonyms)


async def _connection_for(cluster: Cluster, resource: ConfigResource) -> BrokerConnection:
    if resource.type != "topic" and resource.name:
        await cluster.refresh_metadata((), allow_auto_create=False)
        return await cluster.broker_connection(int(resource.name))
    return await cluster.any_connection()


def _raise(code: int, message: str | None, resource: ConfigResource, what: str) -> None:
    if code != NONE:
        raise error_for_code(code)(f"{what} {resource.type} {resource.name!r}: {message or error_for_code(code).name}")


async def describe_configs(
    cluster: Cluster, resources: Sequence[ConfigResource], names: Sequence[str] | None = None, *, include_synonyms: bool = False
) -> dict[ConfigResource, dict[str, ConfigEntry]]:
    """DescribeConfigs for each resource, at the broker that serves it.

    Args:
        cluster: The client's cluster view.
        resources: The resources.
        names: Only these configs; None for all of them.
        include_synonyms: Also list each config's synonyms (DescribeConfigs v1+).

    Returns:
        ``{resource: {config name: ConfigEntry}}``.

    Raises:
        UnknownTopicOrPartitionError: 3, a topic that does not exist.
        InvalidRequestError: 42, e.g. a broker resource naming another broker.
        BrokerResponseError: The resource's other error.
        KafkaConnectionError: The broker could not be reached.
    """
    out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
    for resource in resources:
        conn = await _connection_for(cluster, resource)
        version = conn.version_for(DESCRIBE_CONFIGS)
        body = DescribeConfigsRequest(
            resources=[
                DescribeConfigsResource(
                    resource_type=RESOURCE_TYPES[resource.type], resource_name=resource.name, configuration_keys=None if names is None else list(names)
                )
            ],
            include_synonyms=include_synonyms,
            include_documentation=False,
        )
        response: DescribeConfigsResponse = await conn.request(DESCRIBE_CONFIGS, body, version=version)
        [result] = response.results
        _raise(result.error_code, result.error_message, resource, "DescribeConfigs of")
        out[resource] = {e.name: e for e in sorted((_entry(c, version) for c in result.configs), key=lambda e: e.name)}
    return out


async def incremental_alter_configs(cluster: Cluster, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], *, validate_only: bool = False) -> None:
    """IncrementalAlterConfigs for each resource, at the broker that serves it.

    Args:
        cluster: The client's cluster view.
        changes: ``{resource: [AlterConfigOp, ...]}``.
        validate_only: Only check the changes.

    Raises:
        InvalidConfigurationError: 40, an unknown config name (or, on some
            brokers, a bad value).
        InvalidRequestError: 42, a bad value or an operation the config
            does not allow.
        UnknownTopicOrPartitionError: 3, a topic that does not exist.
        BrokerResponseError: The resource's other error.
        KafkaConnectionError: The broker could not be reached.
    """
    for resource, ops in changes.items():
        conn = await _connection_for(cluster, resource)
        body = IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsResource(
                    resource_type=RESOURCE_TYPES[resource.type],
                    resource_name=resource.name,
                    configs=[AlterableConfigOperation(name=op.name, config_operation=OPERATIONS[op.op], value=None if op.op == "delete" else op.value) for op in ops],
                )
            ],
            validate_only=validate_only,
        )
        response: IncrementalAlterConfigsResponse = await conn.request(INCREMENTAL_ALTER_CONFIGS, body, version=conn.version_for(INCREMENTAL_ALTER_CONFIGS))
        [result] = response.responses
        _raise(result.error_code, result.error_message, resource, "IncrementalAlterConfigs of")
