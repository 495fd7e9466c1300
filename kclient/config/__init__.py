"""Configuration objects built from Kafka's dotted property names.

Three frozen attrs classes, `ProducerConfig`, `ConsumerConfig`
and `BrokerConfig`, hold validated settings under snake_case attribute
names. Each attribute is declared with `prop`, one line per Kafka
property: the Kafka name, a converter, a default, an optional validator and
the older spellings (aliases) that mean the same thing. That declaration is
the whole table; nothing is hand-written per key.

Build a config in any of these ways:

- ``ProducerConfig(metadata_broker_list="h1:9092", producer_type="async")``,
  the attrs constructor with snake_case keyword arguments;
- ``ProducerConfig.from_properties({"metadata.broker.list": "h1:9092"})``,
  from a mapping of Kafka property names (values may be strings, as read
  from a file, or typed Python values);
- ``ProducerConfig.from_properties("producer.properties")`` or
  ``BrokerConfig.from_file("server.properties", ["port=9093"])``, from a Java
  ``.properties`` file (parsed with ``jproperties``) plus ``key=value``
  overrides, the way Kafka's start scripts take ``--override``.

Every value is converted and checked on construction: a value of the wrong
type, out of range or not one of the allowed choices raises
`ConfigError` naming the property and the value. Keys
no config knows are logged as a warning (``"'x.y' is not a known config ..."``)
and ignored, as Kafka does.

Sources: the producer, consumer and broker property tables of Kafka 0.8
(``ProducerConfig.scala``, ``ConsumerConfig.scala``, ``KafkaConfig.scala``)
with the 0.7 spellings of the producer's queue settings; see also
``shared/PROTOCOL-NOTES.md`` ("Classic client config names").
"""

from __future__ import annotations

import codecs
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

import attrs
import jproperties

from kclient.errors import ConfigError

__all__ = [
    "BrokerConfig",
    "COMPRESSION_CODECS",
    "ConsumerConfig",
    "HostPort",
    "Listener",
    "ProducerConfig",
    "Property",
    "REQUIRED",
    "TIMESTAMP_TYPES",
    "TOPIC_CONFIGS",
    "load_properties",
    "load_topic_configs",
    "message_format_magic",
    "parse_kafka_version",
    "parse_overrides",
    "prop",
]

log = logging.getLogger(__name__)

#: ``(host, port)``, as parsed from ``"host:port"`` (IPv6 as ``"[::1]:9092"``).
HostPort = tuple[str, int]
#: ``(listener name, host, port)``, as parsed from ``"PLAINTEXT://host:port"``;
#: an empty host means every interface.
Listener = tuple[str, str, int]

#: Compression codec names and the ids Kafka puts in a batch's attributes.
COMPRESSION_CODECS: dict[str, int] = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

_META = "kclient.property"
_C = TypeVar("_C", bound="_KafkaConfig")


class _Required:
    """The default of a property that has none; see `REQUIRED`."""

    _instance: ClassVar[_Required | None] = None

    def __new__(cls) -> _Required:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of a property that must be given (``metadata.broker.list``).
REQUIRED: Any = _Required()


# --------------------------------------------------------------------------
# The declaration mechanism
# --------------------------------------------------------------------------


@attrs.frozen
class Property:
    """One row of a config table: how a Kafka property maps to an attribute.

    ``name`` is the Kafka dotted name, ``aliases`` older spellings of it
    (0.7 names, newer client names), ``convert`` turns a string or a typed
    value into the stored value (raising ``ValueError``/``TypeError`` on a bad
    one), ``validate`` checks the converted value (raising ``ValueError``),
    ``default`` is the stored default (`REQUIRED` if there is none, an
    ``attrs.Factory`` if it depends on other fields) and ``doc`` is a short
    description. Read a class's table with ``SomeConfig.properties()``.
    """

    name: str
    convert: Callable[[Any], Any]
    default: Any = REQUIRED
    validate: Callable[[Any], None] | None = None
    aliases: tuple[str, ...] = ()

    def error(self, value: Any, why: str) -> ConfigError:
        """A `ConfigError` naming this property, ``value`` and ``why``."""
        return ConfigError(f"Invalid value {value!r} for configuration {self.name}: {why}")


def prop(
    name: str,
    convert: Callable[[Any], Any],
    default: Any = REQUIRED,
    validate: Callable[[Any], None] | None = None,
    *,
    aliases: Iterable[str] = (),
) -> Any:
    """Declare a config attribute for Kafka property ``name``.

    Returns an ``attrs.field`` whose converter and validator raise
    `ConfigError` naming ``name`` and the offending value, and whose
    metadata holds the `Property` row. ``default`` may be
    `REQUIRED` (missing -> ``ConfigError("... is required")``) or an
    ``attrs.Factory(..., takes_self=True)`` computed from earlier fields.
    """
    spec = Property(name, convert, default, validate, tuple(aliases))

    def converter(value: Any) -> Any:
        if value is REQUIRED:
            raise ConfigError(f"Missing required configuration {name}")
        try:
            return convert(value)
        except ConfigError:
            raise
        except (TypeError, ValueError, LookupError) as exc:
            raise spec.error(value, str(exc)) from None

    def validator(_instance: Any, _attribute: attrs.Attribute, value: Any) -> None:
        if validate is None:
            return
        try:
            validate(value)
        except (TypeError, ValueError) as exc:
            raise spec.error(value, str(exc)) from None

    return attrs.field(default=default, converter=converter, validator=validator, metadata={_META: spec})


class _KafkaConfig:
    """Shared constructors of the config classes (not public on its own)."""

    __slots__ = ()

    #: Kafka properties this config accepts and ignores quietly (logged at
    #: debug level) because they make no sense for kclient.
    IGNORED: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def properties(cls) -> dict[str, Property]:
        """The config table: attribute name -> `Property`, in order."""
        return {f.name: f.metadata[_META] for f in attrs.fields(cls) if _META in f.metadata}  # type: ignore[arg-type]

    @classmethod
    def from_properties(cls: type[_C], source: Mapping[str, Any] | str | os.PathLike[str] | _C) -> _C:
        """Build a config from Kafka property names.

        ``source`` is a mapping ``{"dotted.name": value}`` (values as strings,
        as in a file, or as typed Python values), the path of a ``.properties``
        file, or an instance of this class (returned as is). Aliases map to
        the same attribute; when both a name and its alias are given the
        canonical name wins (a differing alias is logged and ignored).
        Unknown keys are logged as a warning and ignored.

        Raises `ConfigError` for a missing required property, a bad
        value, or an unreadable file.
        """
        if isinstance(source, cls):
            return source
        if isinstance(source, (str, os.PathLike)):
            source = load_properties(source)
        if not isinstance(source, Mapping):
            raise ConfigError(
                f"{cls.__name__}.from_properties expects a mapping, a path or a {cls.__name__}, "
                f"not {type(source).__name__}"
            )
        kwargs, used = cls._kwargs_from(source, with_keys=True)
        try:
            return cls(**kwargs)  # type: ignore[call-arg]
        except ConfigError as exc:
            raise _name_alias(exc, used) from exc.__cause__

    @classmethod
    def from_file(
        cls: type[_C], path: str | os.PathLike[str] | None, overrides: Iterable[str] = ()
    ) -> _C:
        """Build a config from a ``.properties`` file plus ``key=value`` overrides.

        Mirrors ``kafka-server-start.sh server.properties --override k=v ...``:
        the file is read first (``path`` may be ``None`` for no file), then
        each override replaces or adds one property. Raises
        `ConfigError` for a missing file, an override without ``=``,
        or any bad value.
        """
        props: dict[str, Any] = dict(load_properties(path)) if path is not None else {}
        props.update(parse_overrides(overrides))
        return cls.from_properties(props)

    def with_properties(self: _C, changes: Mapping[str, Any]) -> _C:
        """A copy with some Kafka properties changed (dotted names, aliases ok)."""
        kwargs, used = type(self)._kwargs_from(changes, with_keys=True)
        try:
            return attrs.evolve(self, **kwargs)  # type: ignore[misc]
        except ConfigError as exc:
            raise _name_alias(exc, used) from exc.__cause__

    def as_properties(self) -> dict[str, Any]:
        """The config as ``{"kafka.name": value}`` with stored (typed) values.

        ``type(c).from_properties(c.as_properties()) == c`` holds.
        """
        return {spec.name: getattr(self, attr) for attr, spec in self.properties().items()}

    @classmethod
    def _kwargs_from(cls, source: Mapping[str, Any], with_keys: bool = False) -> Any:
        table = cls.properties()
        by_name: dict[str, tuple[str, int]] = {}
        for attr, spec in table.items():
            for rank, key in enumerate((spec.name, *spec.aliases)):
                by_name[key] = (attr, rank)
        chosen: dict[str, tuple[int, str, Any]] = {}
        for key, value in source.items():
            if not isinstance(key, str):
                raise ConfigError(f"Configuration names must be strings, not {key!r}")
            key = key.strip()
            if key not in by_name:
                if key in cls.IGNORED:
                    log.debug("%s: %s is not used by kclient; ignored", cls.__name__, key)
                else:
                    log.warning("%r is not a known config for %s; ignored", key, cls.__name__)
                continue
            attr, rank = by_name[key]
            previous = chosen.get(attr)
            if previous is None or rank < previous[0]:
                if previous is not None:
                    _warn_shadowed(previous[1], previous[2], key, value)
                chosen[attr] = (rank, key, value)
            else:
                _warn_shadowed(key, value, previous[1], previous[2])
        kwargs = {attr: value for attr, (_, _, value) in chosen.items()}
        if not with_keys:
            return kwargs
        used = {table[attr].name: key for attr, (rank, key, _) in chosen.items() if rank}
        return kwargs, used


def _name_alias(exc: ConfigError, used_aliases: Mapping[str, str]) -> ConfigError:
    """Add "(given as <alias>)" to ``exc`` when the property was spelled by an alias."""
    text = str(exc)
    for canonical, alias in used_aliases.items():
        if f"configuration {canonical}:" in text:
            return ConfigError(f"{text} (given as {alias})")
    return exc


def _warn_shadowed(lost_key: str, lost_value: Any, won_key: str, won_value: Any) -> None:
    if lost_value != won_value:
        log.warning("%s=%r is ignored in favour of %s=%r", lost_key, lost_value, won_key, won_value)


# --------------------------------------------------------------------------
# Files and overrides
# --------------------------------------------------------------------------


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java ``.properties`` file into ``{key: value}`` (strings).

    Parsed with ``jproperties`` (``#``/``!`` comments, ``=``/``:``/space
    separators, line continuations, ``\\u0041``-style escapes). The file is decoded
    as UTF-8, falling back to ISO-8859-1 (Java's ``Properties.load``
    encoding) if it is not valid UTF-8. Raises `ConfigError` if the
    file cannot be read or parsed.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ConfigError(f"Cannot read properties file {os.fspath(path)!r}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("iso-8859-1")
    parsed = jproperties.Properties()
    try:
        parsed.load(text)
    except Exception as exc:  # jproperties raises its own ParseError and others
        raise ConfigError(f"Cannot parse properties file {os.fspath(path)!r}: {exc}") from exc
    return {key: parsed[key].data for key in parsed}


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """Parse ``["key=value", ...]`` (Kafka's ``--override``) into a dict.

    Splits on the first ``=``; key and value are stripped; later entries win.
    Raises `ConfigError` for an entry without ``=`` or with an empty key.
    """
    if isinstance(overrides, str):
        overrides = [overrides]
    result: dict[str, str] = {}
    for item in overrides:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"Invalid override {item!r}: expected key=value")
        result[key.strip()] = value.strip()
    return result


# --------------------------------------------------------------------------
# Converters (value -> stored value; ValueError/TypeError on a bad one)
# --------------------------------------------------------------------------

_INT = re.compile(r"[+-]?[0-9]+")


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError("expected an integer, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT.fullmatch(value.strip()):
        return int(value.strip())
    raise ValueError("expected an integer")


def _to_optional_int(value: Any) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _to_int(value)


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("expected true or false")


def _to_str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {type(value).__name__}")
    return value.strip()


def _to_optional_str(value: Any) -> str | None:
    if value is None:
        return None
    text = _to_str(value)
    return text or None


def _to_list(value: Any) -> tuple[str, ...]:
    """``"a, b,c"`` or an iterable of strings -> ``("a", "b", "c")``."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    result = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"expected strings, not {type(item).__name__}")
        if item.strip():
            result.append(item.strip())
    return tuple(result)


def _enum(*choices: str, synonyms: Mapping[str, str] | None = None) -> Callable[[Any], str]:
    names = ", ".join(choices)
    synonyms = dict(synonyms or {})

    def convert(value: Any) -> str:
        if isinstance(value, str):
            text = value.strip().lower()
            text = synonyms.get(text, text)
            if text in choices:
                return text
        raise ValueError(f"expected one of {names}")

    return convert


def _split_host_port(text: str) -> HostPort:
    text = text.strip()
    if text.startswith("["):  # [IPv6]:port
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or ":" in host and not text.startswith("["):
        raise ValueError(f"{text!r} is not host:port")
    return host, _port(port)


def _port(value: Any) -> int:
    port = _to_int(value)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is out of range 0..65535")
    return port


def _to_host_ports(value: Any) -> tuple[HostPort, ...]:
    """``"h1:9092,h2:9093"`` or ``[("h1", 9092), "h2:9093"]`` -> tuple of pairs."""
    items: Iterable[Any] = value.split(",") if isinstance(value, str) else value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], int):
        items = [value]
    result: list[HostPort] = []
    for item in items:
        if isinstance(item, str):
            if item.strip():
                result.append(_split_host_port(item))
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str) and item[0]:
            result.append((item[0], _port(item[1])))
        else:
            raise ValueError(f"{item!r} is not host:port")
    if not result:
        raise ValueError("expected at least one host:port")
    return tuple(result)


_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?:\[(?P<ip6>[^\]]*)\]|(?P<host>[^:/]*)):(?P<port>-?[0-9]+)")
_SECURE = {"SSL", "SASL_SSL", "SASL_PLAINTEXT"}


def _to_listeners(value: Any) -> tuple[Listener, ...]:
    """``"PLAINTEXT://host:9092,..."`` -> ``(("PLAINTEXT", "host", 9092), ...)``."""
    if value is None:
        return ()
    items: Iterable[Any] = value.split(",") if isinstance(value, str) else value
    result: list[Listener] = []
    for item in items:
        if isinstance(item, str):
            if not item.strip():
                continue
            m = _LISTENER.fullmatch(item.strip())
            if m is None:
                raise ValueError(f"{item.strip()!r} is not NAME://host:port")
            name, host, port = m["name"].upper(), m["ip6"] if m["ip6"] is not None else m["host"], m["port"]
        elif isinstance(item, (tuple, list)) and len(item) == 3:
            name, host, port = str(item[0]).upper(), _to_str(item[1]), item[2]
        else:
            raise ValueError(f"{item!r} is not NAME://host:port")
        if name in _SECURE:
            raise ValueError(f"listener {name} is not supported: kclient's broker speaks PLAINTEXT only")
        result.append((name, host, _port(port)))
    return tuple(result)


def _to_plugin(value: Any) -> Any:
    """A dotted class path (stripped, non-empty) or any object, stored as given."""
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", text):
            raise ValueError("expected a dotted class path such as package.module.ClassName")
        return text
    if value is None:
        raise ValueError("expected a dotted class path, a class or an instance")
    return value


def _to_optional_plugin(value: Any) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _to_plugin(value)


def _to_codec(value: Any) -> str:
    """Codec name (none, gzip, snappy, lz4, zstd) or its id 0..4 -> name."""
    if isinstance(value, bool):
        raise TypeError("expected a codec name or id")
    if isinstance(value, int) or isinstance(value, str) and value.strip().isdigit():
        number = int(value)
        for name, codec_id in COMPRESSION_CODECS.items():
            if codec_id == number:
                return name
        raise ValueError("expected a codec id 0..4")
    return _enum(*COMPRESSION_CODECS, synonyms={"uncompressed": "none"})(value)


def _to_acks(value: Any) -> int:
    if isinstance(value, str) and value.strip().lower() == "all":
        return -1
    return _to_int(value)


def _to_encoding(value: Any) -> str:
    text = _to_str(value)
    codecs.lookup(text)  # LookupError -> ConfigError
    return text


# --------------------------------------------------------------------------
# Message formats: Kafka version strings, timestamp types, per-topic configs
# --------------------------------------------------------------------------

_KAFKA_VERSION = re.compile(r"([0-9]+)\.([0-9]+)(?:\.([0-9]+))?(?:\.[0-9]+)?(?:-IV[0-9]+)?")

#: Timestamp types of ``log.message.timestamp.type`` / ``message.timestamp.type``
#: (Kafka's ``TimestampType`` names).
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

#: Per-topic settings a ``topic.config.file`` may give, each the topic-level
#: name of a broker property: ``message.format.version`` overrides
#: ``log.message.format.version``, ``message.timestamp.type`` overrides
#: ``log.message.timestamp.type``.
TOPIC_CONFIGS = ("message.format.version", "message.timestamp.type")


def parse_kafka_version(value: Any) -> tuple[int, int, int]:
    """A Kafka release as ``(major, minor, patch)``.

    Accepts Kafka's spellings of ``log.message.format.version`` /
    ``inter.broker.protocol.version`` (``"0.8.2"``, ``"0.10.0"``,
    ``"0.10.2-IV0"``, ``"0.11.0"``, ``"2.8"``, ``"3.0-IV1"``, also
    ``"0.10.0.1"``, whose fourth part is ignored as Kafka does) and
    kafka-python's ``api_version`` tuples (``(0, 10)``, ``(0, 8, 2)``).
    A missing patch is 0. Raises ValueError for anything else, or for a
    release before 0.8.0 (no message format of this protocol).
    """
    if isinstance(value, (tuple, list)):
        if not 2 <= len(value) <= 4 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise ValueError("expected a Kafka version such as 0.10.2 or (0, 10, 2)")
        parts = tuple(value[:3]) + (0,) * (3 - len(value[:3]))
    elif isinstance(value, str):
        m = _KAFKA_VERSION.fullmatch(value.strip())
        if m is None:
            raise ValueError("expected a Kafka version such as 0.8.2, 0.10.2-IV0, 0.11.0 or 2.8")
        parts = (int(m[1]), int(m[2]), int(m[3] or 0))
    else:
        raise TypeError(f"expected a Kafka version string, not {type(value).__name__}")
    if parts < (0, 8, 0):
        raise ValueError("Kafka versions before 0.8.0 are not supported")
    return parts  # type: ignore[return-value]


def message_format_magic(version: Any) -> int:
    """The message format (magic) a Kafka release writes, for
    ``log.message.format.version`` / topic ``message.format.version``:
    0.8.x and 0.9.x -> 0 (message set v0), 0.10.x (all its IV steps) -> 1
    (message set v1, KIP-31/32), 0.11.0 and later -> 2 (record batch v2,
    KIP-98). Source: Kafka's ``ApiVersion`` / ``RecordVersion`` table.
    ``version`` as `parse_kafka_version` takes it; raises ValueError
    for a bad one."""
    parts = parse_kafka_version(version)
    if parts < (0, 10, 0):
        return 0
    if parts < (0, 11, 0):
        return 1
    return 2


def _to_format_version(value: Any) -> str:
    """A Kafka version string (kept as given, stripped) that
    `message_format_magic` understands."""
    text = _to_str(value)
    message_format_magic(text)
    return text


def _to_timestamp_type(value: Any) -> str:
    """``CreateTime`` or ``LogAppendTime`` (any case) -> Kafka's spelling."""
    if isinstance(value, str):
        for name in TIMESTAMP_TYPES:
            if value.strip().lower() == name.lower():
                return name
    raise ValueError(f"expected one of {', '.join(TIMESTAMP_TYPES)}")


def _to_api_version(value: Any) -> tuple[int, int, int] | None:
    """``auto`` / empty / None -> None; else a Kafka version -> tuple."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto")):
        return None
    return parse_kafka_version(value)


def load_topic_configs(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """Read a ``topic.config.file``: a ``.properties`` file of lines
    ``<topic>.<config>=<value>`` where ``<config>`` is one of
    `TOPIC_CONFIGS` (a topic name may itself hold dots: the config
    name is matched at the end of the key). Returns ``{topic: {config:
    value}}`` with values normalised (``message.timestamp.type`` in Kafka's
    spelling, ``message.format.version`` as given). Keys naming another
    topic config are logged as a warning and ignored. Raises
    `ConfigError` naming the key for an unreadable file, an empty
    topic name or a bad value."""
    result: dict[str, dict[str, str]] = {}
    for key, value in load_properties(path).items():
        key = key.strip()
        for name in TOPIC_CONFIGS:
            if key.endswith("." + name):
                topic = key[: -len(name) - 1]
                break
        else:
            log.warning("%s: %r is not a topic config kclient knows (%s); ignored", os.fspath(path), key, ", ".join(TOPIC_CONFIGS))
            continue
        if not topic:
            raise ConfigError(f"Invalid key {key!r} in topic config file {os.fspath(path)!r}: no topic name")
        try:
            normalised = _to_format_version(value) if name == "message.format.version" else _to_timestamp_type(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"Invalid value {value!r} for {key} in topic config file {os.fspath(path)!r}: {exc}") from None
        result.setdefault(topic, {})[name] = normalised
    return result


def _check_topic_config_file(value: Any) -> None:
    if value is not None:
        load_topic_configs(value)  # ConfigError names the file and key


# --------------------------------------------------------------------------
# Validators (converted value -> None; ValueError on a bad one)
# --------------------------------------------------------------------------


def _at_least(low: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value is not None and value < low:
            raise ValueError(f"must be at least {low}")

    return check


def _one_of(*allowed: Any) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(map(str, allowed))}")

    return check


def _not_empty(value: Any) -> None:
    if not value:
        raise ValueError("must not be empty")


def _same_as(attribute: str) -> Any:
    return attrs.Factory(lambda self: getattr(self, attribute), takes_self=True)


# --------------------------------------------------------------------------
# The configs
# --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ProducerConfig(_KafkaConfig):
    """Settings of a `Producer` (Kafka 0.8 producer names).

    Build with ``ProducerConfig(metadata_broker_list="host:9092", ...)`` or
    ``ProducerConfig.from_properties({"metadata.broker.list": "host:9092"})``
    (or a ``.properties`` path). The 0.7 spellings ``queue.time``,
    ``queue.size``, ``queue.enqueueTimeout.ms`` and ``batch.size`` (a count of
    messages, as in 0.7) are aliases, as are the newer client names
    ``bootstrap.servers``, ``acks`` and ``compression.type``.

    Deliberate deviation: ``request.required.acks`` defaults to **1** (the
    leader acknowledged the write) rather than the 0.8 default 0 (no
    acknowledgement), so that a default producer learns about failures.

    Plug-in properties (``serializer.class``, ``key.serializer.class``,
    ``partitioner.class``, ``event.handler``, ``callback.handler``) take a
    dotted class path or an already-built class or instance, stored as given;
    `kclient.plugins.load_plugin` turns them into instances.

    Raises `ConfigError` naming the property for a bad value, and if
    ``producer.type=async`` with ``batch.num.messages`` larger than
    ``queue.buffering.max.messages``, or ``enable.idempotence=true`` without
    ``request.required.acks=-1``.
    """

    metadata_broker_list: tuple[HostPort, ...] = prop(
        "metadata.broker.list", _to_host_ports, aliases=["bootstrap.servers"]
    )
    """Bootstrap brokers, ``"host:port,host:port"`` -> ``(("host", port), ...)``. Required."""
    producer_type: str = prop("producer.type", _enum("sync", "async"), "sync")
    """``"sync"``: ``send`` waits for the acknowledgement; ``"async"``: ``send`` enqueues."""
    request_required_acks: int = prop("request.required.acks", _to_acks, 1, _one_of(-1, 0, 1), aliases=["acks"])
    """0 no acknowledgement, 1 the leader wrote it, -1 (``all``) every in-sync replica did."""
    request_timeout_ms: int = prop("request.timeout.ms", _to_int, 10000, _at_least(1))
    """How long the broker may wait to satisfy ``request.required.acks`` (ms)."""
    serializer_class: Any = prop("serializer.class", _to_plugin, "kclient.DefaultEncoder")
    """Encoder of message values: dotted class path, class or instance."""
    key_serializer_class: Any = prop("key.serializer.class", _to_optional_plugin, _same_as("serializer_class"))
    """Encoder of keys; defaults to (and ``None`` means) ``serializer.class``."""
    serializer_encoding: str = prop("serializer.encoding", _to_encoding, "utf-8")
    """Text encoding a `StringEncoder` uses (Kafka's default UTF8)."""
    partitioner_class: Any = prop("partitioner.class", _to_plugin, "kclient.DefaultPartitioner")
    """Partitioner: dotted class path, class or instance."""
    compression_codec: str = prop("compression.codec", _to_codec, "none", aliases=["compression.type"])
    """``none``, ``gzip``, ``snappy``, ``lz4`` or ``zstd`` (ids 0-4 accepted on input)."""
    compressed_topics: tuple[str, ...] = prop("compressed.topics", _to_list, ())
    """Topics to compress; empty means every topic when a codec is set."""
    message_send_max_retries: int = prop("message.send.max.retries", _to_int, 3, _at_least(0), aliases=["retries"])
    """Retries of a failed send before `FailedToSendMessageError`."""
    retry_backoff_ms: int = prop("retry.backoff.ms", _to_int, 100, _at_least(0))
    """Pause before each retry, after refreshing metadata (ms)."""
    topic_metadata_refresh_interval_ms: int = prop("topic.metadata.refresh.interval.ms", _to_int, 600000)
    """Periodic metadata refresh (ms); negative: refresh only after a failure."""
    client_id: str = prop("client.id", _to_str, "")
    """Sent with every request, for the broker's logs and quotas."""
    queue_buffering_max_ms: int = prop("queue.buffering.max.ms", _to_int, 5000, _at_least(0), aliases=["queue.time"])
    """Async: longest time a message waits in the queue before its batch is sent (ms)."""
    queue_buffering_max_messages: int = prop(
        "queue.buffering.max.messages", _to_int, 10000, _at_least(1), aliases=["queue.size"]
    )
    """Async: capacity of the queue, in messages."""
    queue_enqueue_timeout_ms: int = prop(
        "queue.enqueue.timeout.ms", _to_int, -1, _at_least(-1), aliases=["queue.enqueueTimeout.ms"]
    )
    """Async, full queue: -1 block until there is room, 0 drop at once
    (`QueueFullError`), >0 wait that many ms then drop."""
    batch_num_messages: int = prop("batch.num.messages", _to_int, 200, _at_least(1), aliases=["batch.size"])
    """Async: messages per batch (0.7's ``batch.size`` is this count, not bytes)."""
    send_buffer_bytes: int = prop("send.buffer.bytes", _to_int, 102400, _at_least(-1))
    """Socket send buffer (bytes); -1 leaves the OS default."""
    event_handler: Any = prop("event.handler", _to_optional_plugin, None)
    """EventHandler replacing the default pipeline (0.7); ``None`` for the default."""
    callback_handler: Any = prop("callback.handler", _to_optional_plugin, None)
    """CallbackHandler with enqueue/dequeue/before-send hooks (0.7); ``None`` for none."""
    enable_idempotence: bool = prop("enable.idempotence", _to_bool, False)
    """Get a producer id (InitProducerId) and number batches so retries do not duplicate."""
    max_request_size: int = prop("max.request.size", _to_int, 1048576, _at_least(1))
    """Largest produce request the producer builds (bytes)."""
    max_in_flight_requests_per_connection: int = prop("max.in.flight.requests.per.connection", _to_int, 1, _at_least(1))
    """Async mode: batches the ProducerSendThread may have sent and not yet
    had acknowledged (Kafka's property of the same name). 1 (the default)
    keeps Kafka 0.8's one-batch-at-a-time order guarantee even across
    retries; more pipelines Produce requests for throughput, and a retried
    batch may then land after a later one, as in Kafka."""
    api_version: tuple[int, int, int] | None = prop("api.version", _to_api_version, None)
    """Cap on the Produce version, and with it the message format, as a Kafka
    release (kafka-python's ``api_version``): ``auto`` / ``None`` (default)
    takes the highest the broker advertises; ``0.8.2`` (also
    ``0.8.0``/``0.8.1``) -> Produce v0, ``0.9`` -> Produce v1, both with
    message set v0; ``0.10`` -> Produce v2 with message set v1; ``0.11`` and
    later -> Produce v3+ with record batch v2 (``2.1`` for zstd). Metadata is
    still negotiated with ApiVersions. Stored as ``(major, minor, patch)``."""

    def __attrs_post_init__(self) -> None:
        if self.key_serializer_class is None:
            object.__setattr__(self, "key_serializer_class", self.serializer_class)
        if self.producer_type == "async" and self.batch_num_messages > self.queue_buffering_max_messages:
            raise ConfigError(
                f"Invalid value {self.batch_num_messages} for configuration batch.num.messages: "
                f"must not exceed queue.buffering.max.messages={self.queue_buffering_max_messages}"
            )
        if self.enable_idempotence and self.request_required_acks != -1:
            raise ConfigError(
                f"Invalid value {self.request_required_acks} for configuration request.required.acks: "
                "must be -1 (all) when enable.idempotence=true"
            )

    @property
    def is_async(self) -> bool:
        """``producer.type == "async"``."""
        return self.producer_type == "async"

    def codec_for(self, topic: str) -> str:
        """The codec name to use for ``topic`` (0.8 rule).

        ``compression.codec`` if it is not ``none`` and ``compressed.topics``
        is empty or lists ``topic``; otherwise ``"none"``.
        """
        if self.compression_codec == "none":
            return "none"
        if not self.compressed_topics or topic in self.compressed_topics:
            return self.compression_codec
        return "none"


@attrs.frozen(kw_only=True)
class ConsumerConfig(_KafkaConfig):
    """Settings of the high-level consumer (Kafka 0.8 consumer names and defaults).

    ``group.id`` and ``zookeeper.connect`` are required, as in Kafka 0.8.
    ``client.id`` defaults to ``group.id``. ``auto.offset.reset`` also accepts
    ``earliest``/``latest`` and stores them as ``smallest``/``largest``.
    Raises `ConfigError` naming the property for a bad value, and if
    ``socket.timeout.ms`` is smaller than ``fetch.wait.max.ms`` (Kafka's own
    check: a long poll must not outlive the socket timeout).
    """

    group_id: str = prop("group.id", _to_str, validate=_not_empty)
    """Consumer group the consumer joins. Required."""
    zookeeper_connect: str = prop("zookeeper.connect", _to_str, validate=_not_empty)
    """ZooKeeper ensemble, ``"host:port,host:port/chroot"``. Required."""
    consumer_id: str | None = prop("consumer.id", _to_optional_str, None)
    """Member id in the group; ``None`` generates ``<group>_<host>-<ms>-<random>``."""
    client_id: str = prop("client.id", _to_str, _same_as("group_id"))
    """Sent with every request; defaults to ``group.id``."""
    socket_timeout_ms: int = prop("socket.timeout.ms", _to_int, 30000, _at_least(1))
    """Network request timeout (ms)."""
    socket_receive_buffer_bytes: int = prop("socket.receive.buffer.bytes", _to_int, 65536, _at_least(-1))
    """Socket receive buffer (bytes); -1 leaves the OS default."""
    fetch_message_max_bytes: int = prop("fetch.message.max.bytes", _to_int, 1048576, _at_least(1))
    """Bytes asked for per partition per fetch; must exceed the largest message."""
    num_consumer_fetchers: int = prop("num.consumer.fetchers", _to_int, 1, _at_least(1))
    """Fetcher tasks per consumer."""
    auto_commit_enable: bool = prop("auto.commit.enable", _to_bool, True)
    """Commit consumed offsets periodically."""
    auto_commit_interval_ms: int = prop("auto.commit.interval.ms", _to_int, 60000, _at_least(0))
    """Period of the automatic commit (ms)."""
    queued_max_message_chunks: int = prop("queued.max.message.chunks", _to_int, 2, _at_least(1))
    """Fetched chunks buffered per stream."""
    rebalance_max_retries: int = prop("rebalance.max.retries", _to_int, 4, _at_least(0))
    """Rebalance attempts before giving up."""
    rebalance_backoff_ms: int = prop("rebalance.backoff.ms", _to_int, 2000, _at_least(0))
    """Pause between rebalance attempts (ms)."""
    refresh_leader_backoff_ms: int = prop("refresh.leader.backoff.ms", _to_int, 200, _at_least(0))
    """Pause before looking for a lost partition leader again (ms)."""
    fetch_min_bytes: int = prop("fetch.min.bytes", _to_int, 1, _at_least(0))
    """Least data a fetch answer should carry (bytes)."""
    fetch_wait_max_ms: int = prop("fetch.wait.max.ms", _to_int, 100, _at_least(0))
    """Longest the broker waits for ``fetch.min.bytes`` (ms)."""
    auto_offset_reset: str = prop(
        "auto.offset.reset",
        _enum("smallest", "largest", synonyms={"earliest": "smallest", "latest": "largest"}),
        "largest",
    )
    """Where to start without a committed offset: ``smallest`` or ``largest``."""
    consumer_timeout_ms: int = prop("consumer.timeout.ms", _to_int, -1, _at_least(-1))
    """Iterator timeout without a message (ms); -1 waits forever."""
    exclude_internal_topics: bool = prop("exclude.internal.topics", _to_bool, True)
    """Hide internal topics (``__consumer_offsets``) from wildcard subscriptions."""
    offsets_storage: str = prop("offsets.storage", _enum("zookeeper", "kafka"), "zookeeper")
    """Where offsets are committed: ``zookeeper`` or ``kafka``."""
    dual_commit_enabled: bool = prop("dual.commit.enabled", _to_bool, True)
    """With ``offsets.storage=kafka``, commit to ZooKeeper too (migration)."""
    partition_assignment_strategy: str = prop(
        "partition.assignment.strategy", _enum("range", "roundrobin"), "range"
    )
    """How partitions are spread over the group's streams."""
    zookeeper_session_timeout_ms: int = prop("zookeeper.session.timeout.ms", _to_int, 6000, _at_least(1))
    """ZooKeeper session timeout (ms)."""
    zookeeper_connection_timeout_ms: int = prop("zookeeper.connection.timeout.ms", _to_int, 6000, _at_least(1))
    """Longest wait to connect to ZooKeeper (ms)."""
    zookeeper_sync_time_ms: int = prop("zookeeper.sync.time.ms", _to_int, 2000, _at_least(0))
    """How far a ZooKeeper follower may lag the leader (ms)."""

    def __attrs_post_init__(self) -> None:
        if self.socket_timeout_ms < self.fetch_wait_max_ms:
            raise ConfigError(
                f"Invalid value {self.socket_timeout_ms} for configuration socket.timeout.ms: "
                f"must be at least fetch.wait.max.ms={self.fetch_wait_max_ms}"
            )


_WILDCARD_HOSTS = {"", "0.0.0.0", "::"}


@attrs.frozen(kw_only=True)
class BrokerConfig(_KafkaConfig):
    """Settings of the bundled broker (Kafka ``server.properties`` names).

    Build with ``BrokerConfig.from_file("server.properties", ["port=9093"])``
    (the ``kafka-server-start.sh ... --override`` way),
    ``BrokerConfig.from_properties(mapping)`` or ``BrokerConfig(port=0, ...)``.
    ``log.dir`` is an alias of ``log.dirs`` (which wins when both are given)
    and ``node.id`` of ``broker.id``. Kafka properties that make no sense for
    kclient (thread counts, replication factors, KRaft settings, ...) are
    accepted and ignored quietly.

    Where it listens and what it advertises (see `listen_host`,
    `listen_port`, `advertised_host`, `advertised_port`):
    the first of ``listeners`` if given, else ``host.name``/``port``; it
    advertises ``advertised.listeners``, else ``advertised.host.name`` /
    ``advertised.port``, else the listening address. Deviation from Kafka:
    when listening on every interface the advertised host defaults to
    ``127.0.0.1`` (Kafka advertises the machine's canonical host name).
    ``port=0`` asks for a free port; the broker then advertises the port it
    got (`advertised_port` is 0 in that case).

    ``advertised.port`` is stored as ``advertised_port_number`` because
    ``advertised_port`` is the resolved value.
    """

    IGNORED: ClassVar[frozenset[str]] = frozenset(
        {
            "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
            "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
            "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
            "transaction.state.log.min.isr",
            "group.initial.rebalance.delay.ms", "default.replication.factor",
            "num.replica.fetchers", "log.cleaner.enable", "share.coordinator.state.topic.replication.factor",
            "share.coordinator.state.topic.min.isr", "process.roles", "controller.quorum.voters",
            "controller.quorum.bootstrap.servers", "controller.listener.names",
            "inter.broker.listener.name", "listener.security.protocol.map",
            "delete.topic.enable",
        }
    )

    broker_id: int = prop("broker.id", _to_int, 0, _at_least(0), aliases=["node.id"])
    """Id of this broker in the cluster."""
    port: int = prop("port", _port, 9092)
    """Port to listen on when ``listeners`` is not given; 0 picks a free one."""
    host_name: str = prop("host.name", _to_str, "")
    """Address to bind when ``listeners`` is not given; empty: every interface."""
    listeners: tuple[Listener, ...] = prop("listeners", _to_listeners, ())
    """``"PLAINTEXT://host:port,..."`` -> ``(("PLAINTEXT", host, port), ...)``; overrides host.name/port."""
    advertised_listeners: tuple[Listener, ...] = prop("advertised.listeners", _to_listeners, ())
    """Addresses given to clients in Metadata; overrides advertised.host.name/port."""
    advertised_host_name: str | None = prop("advertised.host.name", _to_optional_str, None)
    """Host given to clients in Metadata; ``None``: derived from the listening address."""
    advertised_port_number: int | None = prop(
        "advertised.port", lambda v: None if _to_optional_int(v) is None else _port(v), None
    )
    """Port given to clients in Metadata (``advertised.port``); ``None``: the listening port."""
    log_dirs: tuple[str, ...] = prop("log.dirs", _to_list, ("/tmp/kafka-logs",), _not_empty, aliases=["log.dir"])
    """Directories holding the partition logs (``"a,b"`` -> ``("a", "b")``)."""
    num_partitions: int = prop("num.partitions", _to_int, 1, _at_least(1))
    """Partitions of an auto-created topic."""
    log_segment_bytes: int = prop("log.segment.bytes", _to_int, 1073741824, _at_least(14))
    """A segment rolls when it would grow past this size (bytes)."""
    log_index_interval_bytes: int = prop("log.index.interval.bytes", _to_int, 4096, _at_least(0))
    """Bytes of log between two offset index entries."""
    log_index_size_max_bytes: int = prop("log.index.size.max.bytes", _to_int, 10485760, _at_least(4))
    """Largest offset index file (bytes); a full index rolls the segment."""
    log_flush_interval_messages: int = prop(
        "log.flush.interval.messages", _to_int, 9223372036854775807, _at_least(1)
    )
    """fsync a log after this many messages (Kafka's default: never)."""
    log_flush_interval_ms: int | None = prop("log.flush.interval.ms", _to_optional_int, None, _at_least(0))
    """fsync a log when its oldest unflushed message is this old (ms); ``None``: never."""
    log_flush_scheduler_interval_ms: int | None = prop(
        "log.flush.scheduler.interval.ms", _to_optional_int, None, _at_least(1)
    )
    """How often (ms) the broker applies ``log.flush.interval.ms`` to every
    log; ``None`` (default): ``log.flush.interval.ms`` itself, clamped to
    10..1000 ms (see `flush_scheduler_interval_ms`). Deviation: Kafka's
    default is Long.MaxValue, which never runs the time-based flush."""
    log_flush_offset_checkpoint_interval_ms: int = prop(
        "log.flush.offset.checkpoint.interval.ms", _to_int, 60000, _at_least(1)
    )
    """How often (ms) each log dir's ``recovery-point-offset-checkpoint`` is
    rewritten (only when a recovery point moved)."""
    log_roll_ms: int | None = prop("log.roll.ms", _to_optional_int, None, _at_least(1))
    """Roll the active segment once its first batch is this old (ms);
    ``None``: ``log.roll.hours``."""
    log_roll_hours: int = prop("log.roll.hours", _to_int, 168, _at_least(1))
    """Roll the active segment once its first batch is this old (hours)."""
    log_retention_ms: int | None = prop("log.retention.ms", _to_optional_int, None, _at_least(-1))
    """Delete segments older than this (ms); wins over the minutes and hours
    settings; -1 keeps them forever; ``None``: ``log.retention.minutes``."""
    log_retention_minutes: int | None = prop("log.retention.minutes", _to_optional_int, None, _at_least(-1))
    """Delete segments older than this (minutes); wins over hours; -1 keeps
    them forever; ``None``: ``log.retention.hours``."""
    log_retention_hours: int = prop("log.retention.hours", _to_int, 168, _at_least(-1))
    """Delete segments older than this (hours); -1 keeps them forever."""
    log_retention_bytes: int = prop("log.retention.bytes", _to_int, -1, _at_least(-1))
    """Delete old segments while a partition is larger than this (bytes); -1: no limit."""
    log_retention_check_interval_ms: int = prop("log.retention.check.interval.ms", _to_int, 300000, _at_least(1))
    """How often (ms) the broker applies the retention settings to every log."""
    auto_create_topics_enable: bool = prop("auto.create.topics.enable", _to_bool, True)
    """Create unknown topics when a client asks for their metadata."""
    message_max_bytes: int = prop("message.max.bytes", _to_int, 1048588, _at_least(0))
    """Largest record batch the broker accepts (bytes)."""
    socket_request_max_bytes: int = prop("socket.request.max.bytes", _to_int, 104857600, _at_least(1))
    """Largest request frame the broker reads (bytes); larger closes the connection."""
    max_connections: int = prop("max.connections", _to_int, 2147483647, _at_least(0))
    """Most client connections served at once; a connection beyond it is
    closed at once with a WARNING (Kafka instead delays accepting it)."""
    zookeeper_connect: str | None = prop("zookeeper.connect", _to_optional_str, None)
    """ZooKeeper ensemble to register with; ``None``: standalone broker."""
    zookeeper_session_timeout_ms: int = prop("zookeeper.session.timeout.ms", _to_int, 6000, _at_least(1))
    """ZooKeeper session timeout (ms)."""
    zookeeper_connection_timeout_ms: int = prop("zookeeper.connection.timeout.ms", _to_int, 6000, _at_least(1))
    """Longest wait to connect to ZooKeeper (ms)."""
    log_message_format_version: str = prop("log.message.format.version", _to_format_version, "3.0")
    """Message format the broker stores, as a Kafka release (``0.8.2`` -> v0,
    ``0.10.0``/``0.10.2-IV0`` -> v1, ``0.11.0``/``2.8``/``3.0`` -> v2; see
    `message_format_magic`). Appends in another format are converted,
    as Kafka 2.x does. Overridden per topic by ``message.format.version`` in
    ``topic.config.file``."""
    log_message_timestamp_type: str = prop("log.message.timestamp.type", _to_timestamp_type, "CreateTime")
    """``CreateTime`` keeps the producer's timestamps; ``LogAppendTime`` makes
    the broker stamp every appended batch (v1/v2) with its clock. Overridden
    per topic by ``message.timestamp.type`` in ``topic.config.file``."""
    topic_config_file: str | None = prop("topic.config.file", _to_optional_str, None, _check_topic_config_file)
    """A ``.properties`` file of per-topic overrides, one
    ``<topic>.message.format.version=...`` or
    ``<topic>.message.timestamp.type=...`` per line (read when the broker
    starts; see `load_topic_configs`). ``None``: no overrides."""

    @property
    def flush_scheduler_interval_ms(self) -> int | None:
        """Period (ms) of the broker's time-based flush task: ``None`` when
        ``log.flush.interval.ms`` is not set (nothing to schedule), else
        ``log.flush.scheduler.interval.ms`` if given, else
        ``log.flush.interval.ms`` clamped to 10..1000 ms. A system crash
        then loses at most about ``log.flush.interval.ms`` plus this period
        of acknowledged appends."""
        if self.log_flush_interval_ms is None:
            return None
        if self.log_flush_scheduler_interval_ms is not None:
            return self.log_flush_scheduler_interval_ms
        return min(1000, max(10, self.log_flush_interval_ms))

    @property
    def message_format_magic(self) -> int:
        """The magic (0, 1 or 2) ``log.message.format.version`` stands for."""
        return message_format_magic(self.log_message_format_version)

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """The per-topic overrides of ``topic.config.file``
        (``{topic: {config: value}}``, see `load_topic_configs`);
        empty without a file. Reads the file on every call; raises
        `ConfigError` if it is unreadable or holds a bad value."""
        if self.topic_config_file is None:
            return {}
        return load_topic_configs(self.topic_config_file)

    @property
    def listen_host(self) -> str:
        """Address to bind: the first listener's host, else ``host.name``;
        ``"0.0.0.0"`` when that is empty (every interface)."""
        host = self.listeners[0][1] if self.listeners else self.host_name
        return host or "0.0.0.0"

    @property
    def listen_port(self) -> int:
        """Port to bind: the first listener's port, else ``port`` (0 = any free port)."""
        return self.listeners[0][2] if self.listeners else self.port

    @property
    def advertised_host(self) -> str:
        """Host given to clients in Metadata: ``advertised.listeners``, else
        ``advertised.host.name``, else the listening host, with
        ``"127.0.0.1"`` in place of a wildcard address."""
        if self.advertised_listeners and self.advertised_listeners[0][1] not in _WILDCARD_HOSTS:
            return self.advertised_listeners[0][1]
        if self.advertised_host_name:
            return self.advertised_host_name
        host = self.listen_host
        return "127.0.0.1" if host in _WILDCARD_HOSTS else host

    @property
    def advertised_port(self) -> int:
        """Port given to clients in Metadata: ``advertised.listeners``, else
        ``advertised.port``, else `listen_port` (0: use the bound port)."""
        if self.advertised_listeners:
            return self.advertised_listeners[0][2]
        if self.advertised_port_number is not None:
            return self.advertised_port_number
        return self.listen_port
