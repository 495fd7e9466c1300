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

import json
import logging
from typing import TYPE_CHECKING, Any

import trio

from kclient.broker.config_changes import notify_topic_change
from kclient.broker.topic_admin import TOPIC_CONFIG_PATH
from kclient.broker.topic_configs import TOPIC_CONFIG_DEFS, topic_defaults
from kclient.config.formats import TIMESTAMP_TYPES, message_format_magic
from kclient.errors import (
    INVALID_CONFIG,
    INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION,
    NONE,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    ConfigError,
    InvalidTopicError,
    KafkaError,
)
from kclient.protocol.messages.alter_configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
)
from kclient.protocol.messages.describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
)
from kclient.storage import LogConfig, validate_topic_name
from kclient.storage.log import parse_cleanup_policy

if TYPE_CHECKING:
    from kclient.broker.handlers import BrokerState

__all__ = ["alter_configs", "validate_topic_configs"]

log = logging.getLogger("kclient.broker")

_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: log4j level names -> Python logging levels.
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


class _ResourceError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _check_value(name: str, value: str) -> None:
    """Raise ValueError when ``value`` is not valid for topic config ``name``."""
    kind = TOPIC_CONFIG_DEFS[name].type
    if name == "message.timestamp.type":
        if value not in TIMESTAMP_TYPES:
            raise ValueError(f"expected one of {', '.join(TIMESTAMP_TYPES)}")
    elif name == "message.format.version":
        message_format_magic(value)
    elif name == "compression.type":
        if value not in _COMPRESSION_TYPES:
            raise ValueError(f"expected one of {', '.join(_COMPRESSION_TYPES)}")
    elif kind == "BOOLEAN":
        if value.strip().lower() not in ("true", "false"):
            raise ValueError("Expected value to be either true or false")
    elif kind in ("INT", "LONG", "SHORT", "DOUBLE"):
        # Kafka's ConfigDef.parseType wording.
        try:
            number = float(value.strip()) if kind == "DOUBLE" else int(value.strip())
        except ValueError:
            raise ValueError(f"Not a number of type {kind}") from None
        if name == "min.insync.replicas" and number < 1:
            raise ValueError("Value must be at least 1")
    elif kind == "LIST":
        parse_cleanup_policy(value)


def validate_topic_configs(configs: dict[str, str]) -> tuple[int, str | None]:
    """Check a topic's complete set of overrides.

    Args:
        configs: Topic config name -> value.

    Returns:
        ``(NONE, None)``, or ``(INVALID_CONFIG, message)`` for a name that
        is no topic config or a bad value (as Kafka's ``LogConfig.validate``,
        whose ConfigException Kafka 3.9 and 4.x answer with INVALID_CONFIG).
    """
    for name in configs:
        if name not in TOPIC_CONFIG_DEFS:
            return INVALID_CONFIG, f"Unknown topic config name: {name}"
    for name, value in configs.items():
        if value is None:
            return INVALID_CONFIG, f"Invalid value null for configuration {name}"
        try:
            _check_value(name, value)
        except (ValueError, ConfigError) as exc:
            return INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {exc}"
    try:
        LogConfig().with_topic_overrides(configs)
    except ConfigError as exc:
        return INVALID_CONFIG, str(exc)
    return NONE, None


async def _current_overrides(state: BrokerState, topic: str) -> dict[str, str]:
    """The topic's dynamic overrides: ZooKeeper's in a cluster, the
    broker's memory on its own."""
    zk = state.replica_manager.zk
    if zk is None:
        return dict(state.topic_configs.get(topic, {}))
    data = await trio.to_thread.run_sync(zk.get, f"{TOPIC_CONFIG_PATH}/{topic}")
    try:
        return {str(k): str(v) for k, v in json.loads(data or b"{}").get("config", {}).items()}
    except (ValueError, AttributeError):
        return {}


def _incremental(state: BrokerState, current: dict[str, str], ops: list[dict]) -> dict[str, str]:
    result = dict(current)
    names = [op["name"] for op in ops]
    if len(set(names)) != len(names):
        raise _ResourceError(INVALID_REQUEST, "Error due to duplicate config keys")
    for op in ops:
        name, kind, value = op["name"], op["config_operation"], op["value"]
        if kind == OP_SET:
            result[name] = value
        elif kind == OP_DELETE:
            result.pop(name, None)
        elif kind in (OP_APPEND, OP_SUBTRACT):
            d = TOPIC_CONFIG_DEFS.get(name)
            if d is None or d.type != "LIST":
                raise _ResourceError(INVALID_CONFIG, f"Config value append/subtract is not allowed for config key: {name}")
            now = result.get(name, topic_defaults(state.config)[name])
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


async def _alter_topic(state: BrokerState, topic: str, configs: list[dict], *, incremental: bool, validate_only: bool) -> None:
    try:
        validate_topic_name(topic)
    except InvalidTopicError as exc:
        raise _ResourceError(INVALID_TOPIC_EXCEPTION, str(exc)) from None
    if not state.metadata_cache.has_topic(topic):
        raise _ResourceError(UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
    if incremental:
        new = _incremental(state, await _current_overrides(state, topic), configs)
    else:
        new = {c["name"]: c["value"] for c in configs}
    code, message = validate_topic_configs(new)
    if code != NONE:
        raise _ResourceError(code, message or "")
    if validate_only:
        return
    zk = state.replica_manager.zk
    if zk is None:
        state.topic_configs[topic] = new
    else:

        def write() -> None:
            zk.write_persistent(f"{TOPIC_CONFIG_PATH}/{topic}", json.dumps({"version": 1, "config": new}).encode())
            notify_topic_change(zk, topic)

        await trio.to_thread.run_sync(write)
    log.info("topic %s: configs altered to %s", topic, new)
    await state.replica_manager.topic_config_changed(topic)


def _check_broker_id(state: BrokerState, name: str, *, allow_empty: bool) -> None:
    if not name and allow_empty:
        return
    try:
        broker_id = int(name)
    except ValueError:
        raise _ResourceError(INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != state.broker_id:
        raise _ResourceError(INVALID_REQUEST, f"Unexpected broker id, expected {state.broker_id}, but received {name}")


def _alter_loggers(configs: list[dict], *, validate_only: bool) -> None:
    changes = []
    for op in configs:
        name, kind, value = op["name"], op["config_operation"], op["value"]
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


async def alter_configs(state: BrokerState, body: dict, version: int, *, incremental: bool) -> dict:
    """Answer AlterConfigs v0-1 or IncrementalAlterConfigs v0 (see the
    module docstring).

    Args:
        state: The broker's state.
        body: The decoded request.
        version: The request version.
        incremental: IncrementalAlterConfigs (else AlterConfigs).

    Returns:
        The response body.
    """
    validate_only = bool(body.get("validate_only"))
    responses = []
    for resource in body["resources"]:
        rtype, name, configs = resource["resource_type"], resource["resource_name"], resource["configs"] or []
        entry: dict[str, Any] = {"error_code": NONE, "error_message": None, "resource_type": rtype, "resource_name": name}
        try:
            if rtype == RESOURCE_TOPIC:
                await _alter_topic(state, name, configs, incremental=incremental, validate_only=validate_only)
            elif rtype == RESOURCE_BROKER:
                _check_broker_id(state, name, allow_empty=True)
                if configs:
                    names = ", ".join(sorted({c["name"] for c in configs}))
                    raise _ResourceError(INVALID_REQUEST, f"Cannot update these configs dynamically: {names}")
            elif rtype == RESOURCE_BROKER_LOGGER and incremental:
                _check_broker_id(state, name, allow_empty=False)
                _alter_loggers(configs, validate_only=validate_only)
            elif rtype == RESOURCE_BROKER_LOGGER:
                raise _ResourceError(INVALID_REQUEST, "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER")
            else:
                raise _ResourceError(INVALID_REQUEST, f"Unsupported resource type: {rtype}")
        except _ResourceError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        except KafkaError as exc:  # ZooKeeper unreachable
            log.warning("altering the configs of %r failed: %s", name, exc)
            entry.update(error_code=UNKNOWN_SERVER_ERROR, error_message=str(exc))
        if entry["error_code"] != NONE:
            log.info("%s of resource %d %r: error %d %s", "IncrementalAlterConfigs" if incremental else "AlterConfigs", rtype, name, entry["error_code"], entry["error_message"])
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}
