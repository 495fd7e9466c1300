"""The poll consumer's configuration: a `kclient.config.ConsumerConfig`
built with today's KafkaConsumer defaults where they differ from Kafka
0.8's, without ``group.id`` when the application only assigns
partitions (``assign``), and with the key / value deserializers loaded.

Defaults that differ from the 0.8 `ConsumerConnector`'s (KafkaConsumer
configs, https://kafka.apache.org/documentation/#consumerconfigs):
``auto.commit.interval.ms`` 5000 (not 60000), ``fetch.max.wait.ms`` 500
(not 100), ``session.timeout.ms`` 45000 (Kafka 3.0's, KIP-735; not
10000). The group is always coordinated by a broker: the 0.8 ZooKeeper
settings (``zookeeper.connect``, ``group.coordination``, ...) are refused.

``group.instance.id`` (static membership, KIP-345) needs a ``group.id`` and
is checked as Kafka's ``JoinGroupRequest.validateGroupInstanceId`` checks
it: at most 249 characters of ASCII letters, digits, ``.``, ``_`` and
``-``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kclient.client.consumer.poll.protocol_settings import check_group_protocol_settings
from kclient.client.serde import decoder_function
from kclient.config import ConsumerConfig
from kclient.config.convert import to_bool
from kclient.errors import ConfigError
from kclient.plugins import resolve_dotted

#: Defaults of the poll consumer where KafkaConsumer's differ from Kafka
#: 0.8's, by canonical property name.
MODERN_DEFAULTS: dict[str, Any] = {
    "auto.commit.interval.ms": 5000,
    "fetch.wait.max.ms": 500,
    "session.timeout.ms": 45000,
}

#: Properties of the 0.8 ConsumerConnector that mean nothing to the poll
#: consumer, with what to do instead.
CONNECTOR_ONLY: dict[str, str] = {
    "zookeeper.connect": "the poll Consumer's group is coordinated by the brokers: set bootstrap.servers",
    "group.coordination": "the poll Consumer's group is always coordinated by a broker",
    "queued.max.message.chunks": "max.poll.records bounds what one poll returns",
    "num.consumer.fetchers": "the poll Consumer fetches from each leader broker in turn",
    "offsets.storage": "the poll Consumer's offsets are always in Kafka",
    "dual.commit.enabled": "the poll Consumer's offsets are always in Kafka",
    "rebalance.max.retries": "the poll Consumer rejoins until its poll timeout ends",
    "rebalance.backoff.ms": "the poll Consumer rejoins on its next poll",
    "rebalance.timeout.ms": "the poll Consumer's rebalance timeout is max.poll.interval.ms (KIP-62)",
    "consumer.id": "the group coordinator hands out the member id",
}

#: Kafka's legal ``group.instance.id`` (and topic name) characters, and
#: the longest one.
_LEGAL_INSTANCE_ID = re.compile(r"[a-zA-Z0-9._-]+")
MAX_INSTANCE_ID_LENGTH = 249

#: The ``group.id`` the config carries when none was given (never sent:
#: `PollSettings.group_id` is None then).
_NO_GROUP = "kclient-no-group"


@attrs.frozen
class PollSettings:
    """What the poll consumer runs with.

    Attributes:
        config: The validated config.
        group_id: The ``group.id``, or None when none was given (only
            ``assign`` works then, as in Kafka).
        key_decoder: Applied to each key (None keeps bytes).
        value_decoder: Applied to each value (None keeps bytes).
        offset_reset: ``auto.offset.reset``: ``earliest``, ``latest`` or
            ``none`` (raise `NoOffsetForPartitionError`).
    """

    config: ConsumerConfig
    group_id: str | None
    offset_reset: str = "latest"
    key_decoder: Callable[[Any], Any] | None = None
    value_decoder: Callable[[Any], Any] | None = None


def check_group_instance_id(instance_id: str | None, group_id: str | None) -> None:
    """Refuse a ``group.instance.id`` Kafka would refuse (KIP-345).

    Args:
        instance_id: ``group.instance.id`` (None: a dynamic member).
        group_id: ``group.id`` (None when none was given).

    Raises:
        ConfigError: set without a ``group.id``, longer than 249
            characters, or with a character other than ASCII letters,
            digits, ``.``, ``_`` and ``-``.
    """
    if instance_id is None:
        return
    if group_id is None:
        raise ConfigError("group.instance.id (static membership) needs a group.id")
    if len(instance_id) > MAX_INSTANCE_ID_LENGTH:
        raise ConfigError(f"Invalid value {instance_id!r} for configuration group.instance.id: longer than {MAX_INSTANCE_ID_LENGTH} characters")
    if not _LEGAL_INSTANCE_ID.fullmatch(instance_id):
        raise ConfigError(
            f"Invalid value {instance_id!r} for configuration group.instance.id: "
            "only ASCII letters, digits, '.', '_' and '-' are allowed"
        )


def _decoder(value: Any, name: str) -> Callable[[Any], Any] | None:
    if isinstance(value, str):
        value = resolve_dotted(value)
    try:
        return decoder_function(value, name)
    except TypeError as exc:
        raise ConfigError(f"Invalid value {value!r} for configuration {name}: {exc}") from None


#: ``auto.offset.reset`` as the poll consumer names it, by ConsumerConfig's value.
_RESET_NAMES = {"smallest": "earliest", "largest": "latest"}
#: The ``auto.offset.reset`` values the poll consumer takes.
_RESETS = frozenset({"earliest", "latest", "none", "smallest", "largest"})


def _from_mapping(source: Mapping[str, Any]) -> tuple[ConsumerConfig, str | None, str | None]:
    props = {str(k).strip(): v for k, v in source.items()}
    # ``none`` is the poll consumer's alone (the 0.8 connector has no such
    # policy), so it is taken here and not passed on.
    reset = props.get("auto.offset.reset")
    if reset is not None and (not isinstance(reset, str) or reset.strip().lower() not in _RESETS):
        raise ConfigError(
            f"Invalid value {reset!r} for configuration auto.offset.reset: expected one of earliest, latest, none "
            "(smallest and largest, Kafka 0.8's names for earliest and latest, are accepted too)"
        )
    no_reset = isinstance(reset, str) and reset.strip().lower() == "none"
    if no_reset:
        del props["auto.offset.reset"]
    for key in props:
        canonical = ConsumerConfig.canonical_name(key)
        if canonical in CONNECTOR_ONLY:
            raise ConfigError(f"{key!r} is not a setting of kclient.Consumer: {CONNECTOR_ONLY[canonical]}")
    check_group_protocol_settings(props)
    given = {ConsumerConfig.canonical_name(k) for k in props}
    merged = {k: v for k, v in MODERN_DEFAULTS.items() if k not in given}
    merged.update(props)
    merged["group.coordination"] = "broker"
    group_id = props.get("group.id")
    group = None if group_id is None or not str(group_id).strip() else str(group_id).strip()
    if group is None:
        auto_commit = [v for k, v in props.items() if ConsumerConfig.canonical_name(k) == "auto.commit.enable"]
        if auto_commit and to_bool(auto_commit[0]):
            raise ConfigError("enable.auto.commit cannot be set to true when no group.id is given (there is no group to commit to)")
        merged["group.id"] = _NO_GROUP
        merged.setdefault("client.id", "kclient-consumer")
    if not merged.get("bootstrap.servers"):
        raise ConfigError("Missing required configuration bootstrap.servers")
    return ConsumerConfig.from_properties(merged), group, "none" if no_reset else None


def poll_settings(source: ConsumerConfig | Mapping[str, Any]) -> PollSettings:
    """The settings of a poll consumer.

    Args:
        source: Kafka property names (``bootstrap.servers`` required,
            ``group.id`` required to ``subscribe`` or ``commit``), or a
            `ConsumerConfig` with ``group.coordination=broker`` (used as it
            is: the 0.8 defaults it holds stay).

    Returns:
        The `PollSettings`.

    Raises:
        ConfigError: a missing or bad property (a ``group.instance.id``
            without ``group.id``, `check_group_instance_id`), a 0.8
            ConsumerConnector setting (``zookeeper.connect``...), or a
            deserializer that cannot be loaded.
    """
    group: str | None
    reset: str | None
    if isinstance(source, ConsumerConfig):
        if source.group_coordination != "broker":
            raise ConfigError("kclient.Consumer needs group.coordination=broker (set bootstrap.servers, not zookeeper.connect)")
        config, group, reset = source, source.group_id, None
    elif isinstance(source, Mapping):
        config, group, reset = _from_mapping(source)
    else:
        raise ConfigError(f"kclient.Consumer takes a mapping of Kafka properties or a ConsumerConfig, not {type(source).__name__}")
    check_group_instance_id(config.group_instance_id, group)
    return PollSettings(
        config,
        group,
        reset or _RESET_NAMES[config.auto_offset_reset],
        _decoder(config.key_deserializer, "key.deserializer"),
        _decoder(config.value_deserializer, "value.deserializer"),
    )


__all__ = ["CONNECTOR_ONLY", "MAX_INSTANCE_ID_LENGTH", "MODERN_DEFAULTS", "PollSettings", "check_group_instance_id", "poll_settings"]
