"""DescribeConfigs (key 32, v0-3): the configs of a topic, of this broker
and of its loggers.

Kafka protocol guide, "DescribeConfigs"
(https://kafka.apache.org/protocol#The_Messages_DescribeConfigs); KIP-133
(the API), KIP-226 (``config_source`` and synonyms, v1), KIP-569
(``config_type`` and documentation, v3). As Kafka's ``ConfigHelper``:

* a TOPIC (2) resource lists every topic config of
  `kclient.broker.topic_configs.TOPIC_CONFIG_DEFS` with its effective value:
  the topic's override (CreateTopics configs; ZooKeeper's
  ``/config/topics/<topic>`` in a cluster; ``topic.config.file``) with
  source DYNAMIC_TOPIC_CONFIG, else the broker property that gives its
  default (``log.retention.ms`` -> ``retention.ms``): STATIC_BROKER_CONFIG
  when set, else DEFAULT_CONFIG. A topic this broker's metadata does not
  know gets UNKNOWN_TOPIC_OR_PARTITION, an illegal name
  INVALID_TOPIC_EXCEPTION;
* a BROKER (4) resource named by this broker's id lists every broker
  property (`kclient.config.BrokerConfig`) and every security property
  given, read-only (kclient changes no broker config at run time);
  passwords, keys and JAAS configs are sensitive and have a null value.
  Another broker's id, or a name that is not an integer, gets
  INVALID_REQUEST; the empty name (the cluster-wide dynamic defaults) an
  empty list, as there are none;
* a BROKER_LOGGER (8) resource named by this broker's id lists the root
  logger and the ``kclient`` loggers with their effective levels (log4j
  names: WARNING is ``WARN``), source DYNAMIC_BROKER_LOGGER_CONFIG;
* any other resource type gets INVALID_REQUEST.

``configuration_keys`` null or empty asks for all configs, else only the
names listed. Synonyms (v1+, when ``include_synonyms``) list the override
and the broker properties behind a value, most precise first, as Kafka
does (its quirk included: a ``log.retention.hours`` default is not a
synonym of ``retention.ms``, which Kafka derives from
``log.retention.ms``).

Deviation: Kafka calls a broker property STATIC_BROKER_CONFIG when
``server.properties`` names it; kclient's config does not remember which
properties were given, so a property is "set" when its value differs from
its default.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from kclient.broker.topic_configs import (
    BROKER_SYNONYM_GROUPS,
    CONFIG_TYPES,
    TOPIC_CONFIG_DEFS,
    kafka_string,
    topic_defaults,
)
from kclient.config.base import REQUIRED
from kclient.errors import (
    INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
    InvalidTopicError,
)
from kclient.protocol.messages.describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kclient.storage import validate_topic_name

if TYPE_CHECKING:
    from kclient.broker.metadata_cache import MetadataCache
    from kclient.config import BrokerConfig

__all__ = [
    "DEFAULT_CONFIG",
    "DYNAMIC_BROKER_LOGGER_CONFIG",
    "DYNAMIC_TOPIC_CONFIG",
    "STATIC_BROKER_CONFIG",
    "BrokerConfigView",
    "ConfigHelper",
    "is_sensitive",
]

log = logging.getLogger("kclient.broker")

#: ``config_source`` values (v1+; Kafka's ``DescribeConfigsResponse.ConfigSource``).
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6

#: Kafka's PASSWORD-typed security properties (values never shown).
_PASSWORD_CONFIGS = (
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates",
    "sasl.jaas.config",
)

#: Python level names -> log4j's (what Kafka's loggers report).
_LOG4J_LEVELS = {"WARNING": "WARN", "CRITICAL": "FATAL", "NOTSET": "ALL"}


def is_sensitive(name: str) -> bool:
    """Whether broker property ``name`` holds a secret: Kafka's
    PASSWORD-typed ``ssl.*`` / ``sasl.*`` properties, also under a
    ``listener.name.<listener>.[<mechanism>.]`` prefix (KIP-103), and
    anything named ``*.password`` or ``*secret*``.

    Args:
        name: A broker property name.

    Returns:
        True when its value must not be shown.
    """
    return (
        any(name == p or name.endswith("." + p) for p in _PASSWORD_CONFIGS)
        or name.endswith(".password")
        or "secret" in name
    )


def _config_type(value: Any, name: str) -> str:
    """The Kafka type name of a broker property, from its stored value."""
    if is_sensitive(name):
        return "PASSWORD"
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, float):
        return "DOUBLE"
    if isinstance(value, (tuple, list)):
        return "LIST"
    if isinstance(value, int):
        return "LONG" if name.endswith(".ms") or not -(2**31) <= value < 2**31 else "INT"
    return "STRING"


@attrs.frozen
class BrokerConfigView:
    """A broker config as DescribeConfigs reports it.

    Attributes:
        values: Every property (declared ones and the security properties
            given) -> its value as Kafka prints it.
        types: Property -> Kafka type name.
        static: The properties set (differing from their defaults, and every
            security property) -> value.
        defaults: Properties with a default -> the default as printed, with
            Kafka's defaults of the broker properties behind topic configs
            that kclient does not declare (``compression.type``, ...).
    """

    values: dict[str, str | None]
    types: dict[str, str]
    static: dict[str, str | None]
    defaults: dict[str, str | None]

    @classmethod
    def of(cls, config: Any) -> BrokerConfigView:
        """The view of a `kclient.config.BrokerConfig`."""
        values: dict[str, str | None] = {}
        types: dict[str, str] = {}
        static: dict[str, str | None] = {}
        defaults: dict[str, str | None] = {}
        for attr, spec in type(config).properties().items():
            value = getattr(config, attr)
            values[spec.name] = kafka_string(value)
            types[spec.name] = "PASSWORD" if spec.secret else _config_type(value if value is not None else spec.default, spec.name)
            default = spec.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory(config) if default.takes_self else default.factory()
            if default is REQUIRED:
                static[spec.name] = values[spec.name]
                continue
            try:
                default = spec.convert(default) if default is not None else None
            except (TypeError, ValueError, LookupError):
                pass
            if default is not None:
                defaults[spec.name] = kafka_string(default)
            if value != default:
                static[spec.name] = values[spec.name]
        for name, value in config.security_properties.items():
            values[name] = static[name] = value
            types[name] = _config_type(value, name)
        for d in TOPIC_CONFIG_DEFS.values():
            if d.fallback is not None and d.broker_name not in values:
                defaults[d.broker_name] = d.fallback
        return cls(values, types, static, defaults)

    def synonyms(self, name: str) -> list[DescribeConfigsSynonym]:
        """The synonyms of broker property ``name`` (Kafka's
        ``configSynonyms``): the set ones of its synonym group, then those
        with a default, dropping any before ``name`` itself."""
        group = next((g for g in BROKER_SYNONYM_GROUPS if name in g), (name,))
        found = [(n, self.static[n], STATIC_BROKER_CONFIG) for n in group if n in self.static]
        found += [(n, self.defaults[n], DEFAULT_CONFIG) for n in group if n in self.defaults]
        while found and found[0][0] != name:
            found.pop(0)
        return [DescribeConfigsSynonym(name=n, value=None if is_sensitive(n) else v, source=s) for n, v, s in found]


def _entry(
    name: str, value: str | None, source: int, synonyms: list[DescribeConfigsSynonym], *, read_only: bool, sensitive: bool, type_: str, doc: str | None
) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=name,
        value=None if sensitive else value,
        read_only=read_only,
        is_default=source == DEFAULT_CONFIG,
        config_source=source,
        is_sensitive=sensitive,
        synonyms=synonyms,
        config_type=CONFIG_TYPES[type_],
        documentation=doc,
    )


class _RequestError(Exception):
    """A resource's error: ``(code, message)``."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _broker_id(own_id: int, name: str, *, allow_empty: bool) -> bool:
    """Check a BROKER / BROKER_LOGGER resource name: True for this broker,
    False for the empty name (when allowed); raises `_RequestError` else."""
    if not name:
        if allow_empty:
            return False
        raise _RequestError(INVALID_REQUEST, "Broker id must not be empty")
    try:
        broker_id = int(name)
    except ValueError:
        raise _RequestError(INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != own_id:
        expected = f"{own_id} or empty string" if allow_empty else str(own_id)
        raise _RequestError(INVALID_REQUEST, f"Unexpected broker id, expected {expected}, but received {name}")
    return True


_broker_docs: dict[str, str] | None = None


def _broker_documentation(name: str) -> str | None:
    """The documentation of broker property ``name``: its attribute
    docstring in `kclient.config.BrokerConfig`."""
    global _broker_docs
    if _broker_docs is None:
        from kclient.config import BrokerConfig
        from kclient.config.reference import field_docs

        docs = field_docs(BrokerConfig)
        _broker_docs = {spec.name: docs.get(attr, "") for attr, spec in BrokerConfig.properties().items()}
    return _broker_docs.get(name) or None


def _broker_entries(view: BrokerConfigView, synonyms: bool, documentation: bool) -> list[DescribeConfigsResourceResult]:
    entries = []
    for name in sorted(view.values):
        syns = view.synonyms(name)
        sensitive = view.types[name] == "PASSWORD"
        entries.append(
            _entry(
                name,
                view.values[name],
                syns[0].source if syns else DEFAULT_CONFIG,
                syns if synonyms else [],
                read_only=True,
                sensitive=sensitive,
                type_=view.types[name],
                doc=_broker_documentation(name) if documentation else None,
            )
        )
    return entries


def _logger_entries() -> list[DescribeConfigsResourceResult]:
    names = ["root"] + sorted(n for n in logging.Logger.manager.loggerDict if n == "kclient" or n.startswith("kclient."))
    entries = []
    for name in names:
        logger = logging.getLogger() if name == "root" else logging.getLogger(name)
        level = logging.getLevelName(logger.getEffectiveLevel())
        entries.append(
            _entry(name, _LOG4J_LEVELS.get(level, level), DYNAMIC_BROKER_LOGGER_CONFIG, [], read_only=False, sensitive=False, type_="STRING", doc=None)
        )
    return entries


class ConfigHelper:
    """Answers DescribeConfigs (see the module docstring; Kafka's
    ``ConfigHelper``).

    Args:
        config: The broker's configuration.
        broker_id: This broker's id.
        metadata_cache: Which topics exist.
        topic_config: Awaited with a topic's name: its overrides
            (`kclient.broker.replica_manager.ReplicaManager.topic_config`).
    """

    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        metadata_cache: MetadataCache,
        topic_config: Callable[[str], Awaitable[dict[str, str]]],
    ) -> None:
        self.config = config
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.topic_config = topic_config

    async def describe_configs(self, body: DescribeConfigsRequest, version: int) -> DescribeConfigsResponse:
        """Answer DescribeConfigs v0-3 (see the module docstring).

        Args:
            body: The request.
            version: The request version.

        Returns:
            The response.
        """
        synonyms = version >= 1 and body.include_synonyms
        documentation = version >= 3 and body.include_documentation
        view = BrokerConfigView.of(self.config)
        results = []
        for resource in body.resources:
            rtype, name = resource.resource_type, resource.resource_name
            result = DescribeConfigsResult(error_code=NONE, error_message=None, resource_type=rtype, resource_name=name)
            results.append(result)
            try:
                entries = await self._entries(rtype, name, view, synonyms, documentation)
            except _RequestError as exc:
                log.info("DescribeConfigs of resource %d %r: error %d %s", rtype, name, exc.code, exc.message or "")
                result.error_code, result.error_message = exc.code, exc.message
                continue
            keys = resource.configuration_keys
            if keys:
                wanted = set(keys)
                entries = [e for e in entries if e.name in wanted]
            result.configs = entries
        return DescribeConfigsResponse(results=results)

    async def _entries(self, rtype: int, name: str, view: BrokerConfigView, synonyms: bool, documentation: bool) -> list[DescribeConfigsResourceResult]:
        """One resource's config entries; raises `_RequestError`."""
        if rtype == RESOURCE_TOPIC:
            return await self._topic_entries(name, view, synonyms, documentation)
        if rtype == RESOURCE_BROKER:
            return _broker_entries(view, synonyms, documentation) if _broker_id(self.broker_id, name, allow_empty=True) else []
        if rtype == RESOURCE_BROKER_LOGGER:
            _broker_id(self.broker_id, name, allow_empty=False)
            return _logger_entries()
        raise _RequestError(INVALID_REQUEST, f"Unsupported resource type: {rtype}")

    async def _topic_entries(self, topic: str, view: BrokerConfigView, synonyms: bool, documentation: bool) -> list[DescribeConfigsResourceResult]:
        try:
            validate_topic_name(topic)
        except InvalidTopicError as exc:
            raise _RequestError(INVALID_TOPIC_EXCEPTION, str(exc)) from None
        if not self.metadata_cache.has_topic(topic):
            raise _RequestError(UNKNOWN_TOPIC_OR_PARTITION, None)
        overrides = await self.topic_config(topic)
        defaults = topic_defaults(self.config)
        entries = []
        for name, d in TOPIC_CONFIG_DEFS.items():
            syns = view.synonyms(d.broker_name)
            value = defaults[name]
            if name in overrides:
                value = overrides[name]
                syns.insert(0, DescribeConfigsSynonym(name=name, value=value, source=DYNAMIC_TOPIC_CONFIG))
            entries.append(
                _entry(
                    name,
                    value,
                    syns[0].source if syns else DEFAULT_CONFIG,
                    syns if synonyms else [],
                    read_only=False,
                    sensitive=False,
                    type_=d.type,
                    doc=d.doc if documentation else None,
                )
            )
        return entries
