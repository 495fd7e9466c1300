"""The declaration machinery every config class is built from.

A config class is a frozen attrs class whose attributes are declared with
`prop`: one line per Kafka property, giving its dotted name, a converter,
a default, an optional validator and the older spellings (aliases) that mean
the same thing. `_KafkaConfig` (the shared base class) reads that table
to build a config from Kafka property names (`from_properties`), from a
``.properties`` file plus ``--override`` style entries (`from_file`), and
to turn one back into property names (`as_properties`).

Every converter and validator failure becomes a `ConfigError` naming the
property (and the alias it was given as) and the value. An unknown key is
a `ConfigError` too, naming the closest known name ("did you mean ..."),
as confluent-kafka and kafka-python refuse unknown keys (Kafka 0.8 only
logged it); with ``strict=False`` (`from_properties`, `from_file`,
`with_properties`) it is logged as a warning and ignored instead.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

import attrs

from kclient.config.files import load_properties, parse_overrides
from kclient.errors import ConfigError

__all__ = ["Property", "REQUIRED", "prop"]

# Every module of the package logs as "kclient.config", the logger name
# the config code has always used.
log = logging.getLogger("kclient.config")

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

    Read a class's table with ``SomeConfig.properties()``.

    Attributes:
        name: The Kafka dotted name.
        convert: Turns a string or a typed value into the stored value,
            raising ``ValueError``/``TypeError`` on a bad one.
        default: The stored default: `REQUIRED` if there is none, an
            ``attrs.Factory`` if it depends on other fields.
        validate: Checks the converted value, raising ``ValueError``; or None.
        aliases: Older spellings of ``name`` (0.7 names, newer client names).
        secret: The value is a password: never echoed in errors or reprs.
    """

    name: str
    convert: Callable[[Any], Any]
    default: Any = REQUIRED
    validate: Callable[[Any], None] | None = None
    aliases: tuple[str, ...] = ()
    secret: bool = False

    def error(self, value: Any, why: str) -> ConfigError:
        """A `ConfigError` naming this property, ``value`` and ``why``.

        Args:
            value: The offending value, as given (not shown for a secret).
            why: What is wrong with it.

        Returns:
            The error (not raised).
        """
        shown = "" if self.secret else f" {value!r}"
        return ConfigError(f"Invalid value{shown} for configuration {self.name}: {why}")


def prop(
    name: str,
    convert: Callable[[Any], Any],
    default: Any = REQUIRED,
    validate: Callable[[Any], None] | None = None,
    *,
    aliases: Iterable[str] = (),
    secret: bool = False,
) -> Any:
    """Declare a config attribute for Kafka property ``name``.

    Args:
        name: The Kafka dotted property name.
        convert: Value as given -> stored value; raises ``ValueError``,
            ``TypeError`` or ``LookupError`` on a bad one.
        default: The default; `REQUIRED` (missing -> ``ConfigError("Missing
            required configuration ...")``) or an
            ``attrs.Factory(..., takes_self=True)`` computed from earlier fields.
        validate: Checks the converted value, raising ``ValueError``; or None.
        aliases: Other spellings of the same property.
        secret: A password: left out of the config's ``repr`` and never
            echoed in a `ConfigError`.

    Returns:
        An ``attrs.field`` whose converter and validator raise `ConfigError`
        naming ``name`` and the offending value, and whose metadata holds
        the `Property` row.
    """
    spec = Property(name, convert, default, validate, tuple(aliases), secret)

    def converter(value: Any) -> Any:
        if value is REQUIRED:
            raise ConfigError(f"Missing required configuration {name}")
        try:
            return convert(value)
        except ConfigError:
            raise
        except (TypeError, ValueError, LookupError) as exc:
            raise spec.error(value, str(exc)) from None

    def validator(_instance: Any, _attribute: attrs.Attribute[Any], value: Any) -> None:
        if validate is None:
            return
        try:
            validate(value)
        except (TypeError, ValueError) as exc:
            raise spec.error(value, str(exc)) from None

    return attrs.field(
        default=default, converter=converter, validator=validator, metadata={_META: spec}, repr=not secret
    )


class _KafkaConfig:
    """Shared constructors of the config classes (not public on its own)."""

    __slots__ = ()

    #: Kafka properties this config accepts and ignores quietly (logged at
    #: debug level) because they make no sense for kclient.
    IGNORED: ClassVar[frozenset[str]] = frozenset()

    #: Modern Kafka names that look like one of this config's properties but
    #: do not mean the same thing, with the reason and what to set instead.
    #: Given one, the config raises a `ConfigError` giving that reason (with
    #: ``strict=False``: logs it as a warning and ignores the key), rather
    #: than guessing.
    NOT_MAPPED: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def properties(cls) -> dict[str, Property]:
        """The config table: attribute name -> `Property`, in order."""
        return {f.name: f.metadata[_META] for f in attrs.fields(cls) if _META in f.metadata}  # type: ignore[arg-type]

    @classmethod
    def from_properties(
        cls: type[_C], source: Mapping[str, Any] | str | os.PathLike[str] | _C, *, strict: bool = True
    ) -> _C:
        """Build a config from Kafka property names.

        Aliases map to the same attribute; when both a name and its alias
        are given the canonical name wins (a differing alias is logged and
        ignored). An unknown key raises `ConfigError` naming the closest
        known property (``did you mean 'x.y'?``); with ``strict=False`` it
        is logged as a warning with the same text and ignored (the escape
        hatch for a properties file shared by several clients).

        Args:
            source: A mapping ``{"dotted.name": value}`` (values as strings,
                as in a file, or as typed Python values), the path of a
                ``.properties`` file, or an instance of this class (returned
                as is).
            strict: True (the default): raise `ConfigError` for a key this
                config does not know (or knows not to map, see
                `NOT_MAPPED`). False: log a warning and ignore it.

        Returns:
            The config.

        Raises:
            ConfigError: A missing required property, a bad value, an
                unreadable file, or (unless ``strict=False``) an unknown key.
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
        kwargs, used = cls._kwargs_from(source, with_keys=True, strict=strict)
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            raise _name_alias(exc, used) from exc.__cause__

    @classmethod
    def from_file(
        cls: type[_C], path: str | os.PathLike[str] | None, overrides: Iterable[str] = (), *, strict: bool = True
    ) -> _C:
        """Build a config from a ``.properties`` file plus ``key=value`` overrides.

        Mirrors ``kafka-server-start.sh server.properties --override k=v ...``:
        the file is read first, then each override replaces or adds one
        property.

        Args:
            path: The ``.properties`` file, or ``None`` for no file.
            overrides: ``"key=value"`` entries, applied in order.
            strict: Refuse unknown keys (the default), as in
                `from_properties`; False logs and ignores them.

        Returns:
            The config.

        Raises:
            ConfigError: A missing file, an override without ``=``, any
                bad value, or (unless ``strict=False``) an unknown key.
        """
        props: dict[str, Any] = dict(load_properties(path)) if path is not None else {}
        props.update(parse_overrides(overrides))
        return cls.from_properties(props, strict=strict)

    def with_properties(self: _C, changes: Mapping[str, Any], *, strict: bool = True) -> _C:
        """A copy with some Kafka properties changed.

        Args:
            changes: ``{"dotted.name": value}``; aliases are accepted.
            strict: Refuse unknown keys (the default), as in
                `from_properties`; False logs and ignores them.

        Returns:
            A new config of the same class.

        Raises:
            ConfigError: A bad value, or (unless ``strict=False``) an
                unknown key.
        """
        kwargs, used = type(self)._kwargs_from(changes, with_keys=True, strict=strict)
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
    def known_names(cls) -> list[str]:
        """Every property name this config accepts: canonical names, then aliases."""
        table = cls.properties().values()
        return [spec.name for spec in table] + [alias for spec in table for alias in spec.aliases]

    @classmethod
    def select_known(cls, source: Mapping[str, Any], *, origin: str = "") -> dict[str, Any]:
        """The entries of ``source`` this config takes, for a properties
        file shared by several clients (``client.properties`` given to a
        command-line tool's ``--command-config``).

        As Kafka's clients log "The configuration 'x' was supplied but isn't
        a known config" for such a file, each other key is logged as a
        warning (with the "did you mean" hint) and left out.

        Args:
            source: ``{"dotted.name": value}``.
            origin: Where ``source`` came from, for the warning
                (``"--command-config client.properties"``).

        Returns:
            The entries whose key is a name or alias of this config, or one
            it knows and ignores (`IGNORED`), in their order.
        """
        known = {*cls.known_names(), *cls.IGNORED}
        kept: dict[str, Any] = {}
        for key, value in source.items():
            if isinstance(key, str) and key.strip() in known:
                kept[key] = value
            else:
                where = f"{origin}: " if origin else ""
                log.warning("%s%s (ignored)", where, cls.unknown_key_message(str(key)))
        return kept

    @classmethod
    def canonical_name(cls, key: str) -> str | None:
        """The canonical Kafka name of ``key`` (itself or one of its aliases).

        Args:
            key: A property name, canonical or alias.

        Returns:
            The name ``key`` stands for, or None if this config does not
            take it.
        """
        key = key.strip()
        for spec in cls.properties().values():
            if key == spec.name or key in spec.aliases:
                return spec.name
        return None

    @classmethod
    def unknown_key_message(cls, key: str) -> str:
        """What is wrong with ``key``, a name this config does not take.

        Args:
            key: The property name as given.

        Returns:
            ``"'key' is not a known config for Cls"`` followed by
            ``"; did you mean 'closest'?"`` when a known name (canonical or
            alias, by ``difflib.get_close_matches``) is close; for a name in
            `NOT_MAPPED`, the reason it is not mapped instead.
        """
        reason = cls.NOT_MAPPED.get(key)
        if reason is not None:
            return f"{key!r} is not supported by {cls.__name__}: {reason}"
        text = f"{key!r} is not a known config for {cls.__name__}"
        close = difflib.get_close_matches(key, cls.known_names(), n=1)
        if close:
            text += f"; did you mean {close[0]!r}?"
        return text

    @classmethod
    def _kwargs_from(cls, source: Mapping[str, Any], with_keys: bool = False, strict: bool = True) -> Any:
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
                elif strict:
                    raise ConfigError(cls.unknown_key_message(key))
                else:
                    log.warning("%s (ignored)", cls.unknown_key_message(key))
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
            return type(exc)(f"{text} (given as {alias})")
    return exc


def _warn_shadowed(lost_key: str, lost_value: Any, won_key: str, won_value: Any) -> None:
    if lost_value != won_value:
        log.warning("%s=%r is ignored in favour of %s=%r", lost_key, lost_value, won_key, won_value)
