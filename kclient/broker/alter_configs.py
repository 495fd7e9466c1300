"""AlterConfigs (key 33, v0-1; KIP-133) and IncrementalAlterConfigs (key
44, v0; KIP-339): changing a topic's configs.

Kafka protocol guide, "AlterConfigs" and "IncrementalAlterConfigs"
(https://kafka.apache.org/protocol#The_Messages_AlterConfigs). As Kafka's
ZooKeeper-mode ``ZkAdminManager``, any broker serves them:

* a TOPIC (2) resource: AlterConfigs replaces the topic's overrides with
  the configs given; IncrementalAlterConfigs applies each operation to
  them: SET, DELETE (back to the broker default), APPEND / SUBTRACT (list
  configs only: ``cleanup.policy``, starting from its effective value). The
  result is validated (`validate_topic_configs`): an unknown name or a
  bad value gets INVALID_CONFIG (as Apache Kafka 3.9 and 4.x answer both
  APIs), nothing is written. Unless
  ``validate_only``, a cluster broker writes ``/config/topics/<topic>`` and
  a ``/config/changes`` notification (`kclient.broker.config_changes`) that
  makes every broker apply the configs; a standalone broker keeps them in
  memory and applies them at once. An unknown topic gets
  UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION;
* a BROKER (4) resource: kclient changes no broker config at run time, so
  any config given gets INVALID_REQUEST (as Kafka answers for a config
  that is not dynamic); another broker's id INVALID_REQUEST;
* a BROKER_LOGGER (8) resource (IncrementalAlterConfigs, this broker's
  id): SET gives a logger a level (log4j names: TRACE, DEBUG, INFO, WARN,
  ERROR, FATAL, OFF), DELETE gives it back its parent's; AlterConfigs
  refuses it with INVALID_REQUEST, as Kafka does;
* any other resource type gets INVALID_REQUEST.

Each resource is answered on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs
import trio

from kclient.broker.config_changes import notify_topic_change
from kclient.broker.metadata_cache import MetadataCache
from kclient.broker.state import TopicOverrides
from kclient.broker.topic_configs import (
    TOPIC_CONFIG_DEFS,
    topic_defaults,
    validate_topic_configs,
)
from kclient.broker.zk_topics import (
    decode_topic_config,
    encode_topic_config,
    topic_config_path,
)
from kclient.config import BrokerConfig
from kclient.errors import (
    INVALID_CONFIG,
    INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION,
    NONE,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    InvalidTopicError,
    KafkaError,
)
from kclient.protocol.messages.alter_configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterableConfig,
    AlterableConfigOperation,
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kclient.protocol.messages.describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
)
from kclient.storage import validate_topic_name

if TYPE_CHECKING:
    from kclient.zk.client import ZkClient

__all__ = ["ConfigAlterer", "validate_topic_configs"]

log = logging.getLogger("kclient.broker")

#: log4j level names -> Python logging levels.
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


class _ResourceError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.frozen
class _Alteration:
    """What a request asks of one resource: its new ``configs``
    (AlterConfigs, which replace every dynamic config) or the
    ``operations`` on them (IncrementalAlterConfigs); one of the two is
    None."""

    resource_type: int
    resource_name: str
    configs: list[AlterableConfig] | None
    operations: list[AlterableConfigOperation] | None
    validate_only: bool


def _incremental(config: BrokerConfig, current: dict[str, str | None], ops: list[AlterableConfigOperation]) -> dict[str, str | None]:
    """``current`` overrides with IncrementalAlterConfigs' operations
    applied (APPEND / SUBTRACT start from the broker default of ``config``
    when the topic has no override)."""
    result = dict(current)
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise _ResourceError(INVALID_REQUEST, "Error due to duplicate config keys")
    for op in ops:
        name, kind, value = op.name, op.config_operation, op.value
        if kind == OP_SET:
            result[name] = value
        elif kind == OP_DELETE:
            result.pop(name, None)
        elif kind in (OP_APPEND, OP_SUBTRACT):
            d = TOPIC_CONFIG_DEFS.get(name)
            if d is None or d.type != "LIST":
                raise _ResourceError(INVALID_CONFIG, f"Config value append/subtract is not allowed for config key: {name}")
            now = result.get(name, topic_defaults(config)[name]) or ""
            items = [i.strip() for i in now.split(",") if i.strip()]
            given = [i.strip() for i in (value or "").split(",") if i.strip()]
            if kind == OP_APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            result[name] = ",".join(items)
        else:
            raise _ResourceError(INVALID_REQUEST, f"Unknown config operation {kind} for config key: {name}")
    return result


def _alter_loggers(configs: list[AlterableConfigOperation], *, validate_only: bool) -> None:
    changes = []
    for op in configs:
        name, kind, value = op.name, op.config_operation, op.value
        if kind == OP_SET:
            level = _LEVELS.get((value or "").strip().upper())
            if level is None:
                raise _ResourceError(INVALID_CONFIG, f"Cannot set the log level of {name} to {value} as it is not a supported log level. Valid log levels are {', '.join(_LEVELS)}")
        elif kind == OP_DELETE:
            if name == "root":
                raise _ResourceError(INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
            level = logging.NOTSET
        else:
            raise _ResourceError(INVALID_REQUEST, f"Operation {kind} is not allowed for the BROKER_LOGGER resource")
        changes.append((logging.getLogger() if name == "root" else logging.getLogger(name), level))
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(level)
            log.info("logger %s: level set to %s", logger.name, logging.getLevelName(logger.getEffectiveLevel()))


class ConfigAlterer:
    """Answers AlterConfigs and IncrementalAlterConfigs (see the module
    docstring; the config half of Kafka's ``ZkAdminManager``).

    Args:
        config: The broker's configuration (topic config defaults).
        broker_id: This broker's id.
        metadata_cache: Which topics exist.
        topic_overrides: Where a standalone broker keeps a topic's configs.
        topic_config_changed: Awaited with a topic's name once its new
            configs are stored, to apply them to this broker's replicas
            (`kclient.broker.replica_manager.ReplicaManager.topic_config_changed`).
        zk: The ZooKeeper session, or None for a standalone broker.
    """

    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        metadata_cache: MetadataCache,
        topic_overrides: TopicOverrides,
        topic_config_changed: Callable[[str], Awaitable[None]],
        *,
        zk: ZkClient | None = None,
    ) -> None:
        self.config = config
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.topic_overrides = topic_overrides
        self.topic_config_changed = topic_config_changed
        self.zk = zk

    async def alter_configs(self, body: AlterConfigsRequest, version: int) -> AlterConfigsResponse:
        """Answer AlterConfigs v0-1 (KIP-133; see the module docstring):
        each resource's dynamic configs replaced by the request's.

        Args:
            body: The AlterConfigs request.
            version: Its version (0-1; the answer is the same).

        Returns:
            One answer per resource, in request order.
        """
        only = body.validate_only
        return AlterConfigsResponse(responses=[await self._answer(_Alteration(r.resource_type, r.resource_name, r.configs, None, only)) for r in body.resources])

    async def incremental_alter_configs(self, body: IncrementalAlterConfigsRequest, version: int) -> IncrementalAlterConfigsResponse:
        """Answer IncrementalAlterConfigs v0 (KIP-339; see the module
        docstring): SET / DELETE / APPEND / SUBTRACT on each resource's
        dynamic configs.

        Args:
            body: The IncrementalAlterConfigs request.
            version: Its version (0).

        Returns:
            One answer per resource, in request order.
        """
        only = body.validate_only
        return IncrementalAlterConfigsResponse(responses=[await self._answer(_Alteration(r.resource_type, r.resource_name, None, r.configs, only)) for r in body.resources])

    async def _answer(self, change: _Alteration) -> AlterConfigsResourceResponse:
        """One resource's answer to ``change``."""
        rtype, name = change.resource_type, change.resource_name
        entry = AlterConfigsResourceResponse(error_code=NONE, error_message=None, resource_type=rtype, resource_name=name)
        try:
            await self._alter_resource(change)
        except _ResourceError as exc:
            entry.error_code, entry.error_message = exc.code, exc.message
        except KafkaError as exc:  # ZooKeeper unreachable
            log.warning("altering the configs of %r failed: %s", name, exc)
            entry.error_code, entry.error_message = UNKNOWN_SERVER_ERROR, str(exc)
        if entry.error_code != NONE:
            api = "AlterConfigs" if change.operations is None else "IncrementalAlterConfigs"
            log.info("%s of resource %d %r: error %d %s", api, rtype, name, entry.error_code, entry.error_message)
        return entry

    async def _alter_resource(self, change: _Alteration) -> None:
        """Alter one resource; raises `_ResourceError` for its error."""
        rtype, name, operations = change.resource_type, change.resource_name, change.operations
        if rtype == RESOURCE_TOPIC:
            await self._alter_topic(name, change.configs, operations, validate_only=change.validate_only)
        elif rtype == RESOURCE_BROKER:
            self._check_broker_id(name, allow_empty=True)
            given = change.configs or operations
            if given:
                names = ", ".join(sorted({c.name for c in given}))
                raise _ResourceError(INVALID_REQUEST, f"Cannot update these configs dynamically: {names}")
        elif rtype == RESOURCE_BROKER_LOGGER and operations is not None:
            self._check_broker_id(name, allow_empty=False)
            _alter_loggers(operations, validate_only=change.validate_only)
        elif rtype == RESOURCE_BROKER_LOGGER:
            raise _ResourceError(INVALID_REQUEST, "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER")
        else:
            raise _ResourceError(INVALID_REQUEST, f"Unsupported resource type: {rtype}")

    async def _current_overrides(self, topic: str) -> dict[str, str | None]:
        """The topic's dynamic overrides: ZooKeeper's in a cluster, the
        broker's memory on its own."""
        zk = self.zk
        if zk is None:
            return dict(self.topic_overrides.get(topic))
        data = await trio.to_thread.run_sync(zk.get, topic_config_path(topic))
        try:
            return dict(decode_topic_config(data))
        except ValueError:
            return {}

    async def _alter_topic(
        self, topic: str, configs: list[AlterableConfig] | None, operations: list[AlterableConfigOperation] | None, *, validate_only: bool
    ) -> None:
        try:
            validate_topic_name(topic)
        except InvalidTopicError as exc:
            raise _ResourceError(INVALID_TOPIC_EXCEPTION, str(exc)) from None
        if not self.metadata_cache.has_topic(topic):
            raise _ResourceError(UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        if operations is not None:
            new = _incremental(self.config, await self._current_overrides(topic), operations)
        else:
            new = {c.name: c.value for c in configs or ()}
        code, message = validate_topic_configs(new)
        if code != NONE:
            raise _ResourceError(code, message or "")
        if validate_only:
            return
        checked = {name: value for name, value in new.items() if value is not None}  # none is null once valid
        zk = self.zk
        if zk is None:
            self.topic_overrides.set(topic, checked)
        else:

            def write() -> None:
                zk.write_persistent(topic_config_path(topic), encode_topic_config(checked))
                notify_topic_change(zk, topic)

            await trio.to_thread.run_sync(write)
        log.info("topic %s: configs altered to %s", topic, checked)
        await self.topic_config_changed(topic)

    def _check_broker_id(self, name: str, *, allow_empty: bool) -> None:
        if not name and allow_empty:
            return
        try:
            broker_id = int(name)
        except ValueError:
            raise _ResourceError(INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
        if broker_id != self.broker_id:
            raise _ResourceError(INVALID_REQUEST, f"Unexpected broker id, expected {self.broker_id}, but received {name}")
