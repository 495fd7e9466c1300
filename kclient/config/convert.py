"""Converters and validators of property values, shared by every config.

A converter turns a value as given (a string read from a file, or a typed
Python value) into the stored value and raises ``ValueError`` /
``TypeError`` on a bad one; a validator checks a converted value and raises
``ValueError``. `kclient.config.base.prop` wraps both so that a failure
becomes a `ConfigError` naming the property.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from kclient.protocol.records import codecs as _codecs

__all__ = [
    "COMPRESSION_CODECS",
    "HostPort",
    "Listener",
    "SameAs",
    "at_least",
    "enum_choice",
    "not_empty",
    "one_of",
    "port_number",
    "same_as",
    "to_acks",
    "to_bool",
    "to_codec",
    "to_encoding",
    "to_host_ports",
    "to_int",
    "to_list",
    "to_listeners",
    "to_optional_int",
    "to_optional_plugin",
    "to_optional_str",
    "to_plugin",
    "to_str",
]

#: ``(host, port)``, as parsed from ``"host:port"`` (IPv6 as ``"[::1]:9092"``).
HostPort = tuple[str, int]
#: ``(listener name, host, port)``, as parsed from ``"PLAINTEXT://host:port"``;
#: an empty host means every interface.
Listener = tuple[str, str, int]

#: Compression codec names and the ids Kafka puts in a batch's attributes
#: (the table is owned by `kclient.protocol.records.codecs`).
COMPRESSION_CODECS: dict[str, int] = dict(_codecs.BY_NAME)


# --------------------------------------------------------------------------
# Converters (value -> stored value; ValueError/TypeError on a bad one)
# --------------------------------------------------------------------------

_INT = re.compile(r"[+-]?[0-9]+")


def to_int(value: Any) -> int:
    """An integer, or its decimal text (``"-12"``); a boolean is refused.

    Raises:
        TypeError: A boolean.
        ValueError: Anything else that is no integer.
    """
    if isinstance(value, bool):
        raise TypeError("expected an integer, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT.fullmatch(value.strip()):
        return int(value.strip())
    raise ValueError("expected an integer")


def to_optional_int(value: Any) -> int | None:
    """`to_int`, with None or blank text as None."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return to_int(value)


def to_bool(value: Any) -> bool:
    """A boolean, or ``"true"`` / ``"false"`` in any case.

    Raises:
        ValueError: Any other value.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("expected true or false")


def to_str(value: Any) -> str:
    """A string, stripped of surrounding blanks.

    Raises:
        TypeError: Not a string.
    """
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {type(value).__name__}")
    return value.strip()


def to_optional_str(value: Any) -> str | None:
    """`to_str`, with None or blank text as None."""
    if value is None:
        return None
    text = to_str(value)
    return text or None


def to_list(value: Any) -> tuple[str, ...]:
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


def enum_choice(*choices: str, synonyms: Mapping[str, str] | None = None) -> Callable[[Any], str]:
    """A converter to one of ``choices`` (case-insensitive text).

    Args:
        choices: The allowed values, lower case.
        synonyms: Other spellings and the choice each stands for.

    Returns:
        A converter raising ValueError for any other value, naming every
        accepted spelling, synonyms with the choice they stand for
        (``expected one of smallest, largest, earliest (= smallest),
        latest (= largest)``).
    """
    synonyms = dict(synonyms or {})
    names = ", ".join([*choices, *(f"{other} (= {choice})" for other, choice in synonyms.items())])

    def convert(value: Any) -> str:
        if isinstance(value, str):
            text = value.strip().lower()
            text = synonyms.get(text, text)
            if text in choices:
                return text
        raise ValueError(f"expected one of {names}")

    return convert


def list_of(convert_one: Callable[[Any], str]) -> Callable[[Any], tuple[str, ...]]:
    """A converter of a comma-separated list (or an iterable of strings),
    each item converted by ``convert_one``, duplicates dropped, order kept.

    Args:
        convert_one: The converter of one item (e.g. an `enum_choice`).

    Returns:
        A converter to a non-empty tuple, raising ValueError naming the
        bad item.
    """

    def convert(value: Any) -> tuple[str, ...]:
        result: list[str] = []
        for item in to_list(value):
            try:
                one = convert_one(item)
            except ValueError as exc:
                raise ValueError(f"{item!r}: {exc}") from None
            if one not in result:
                result.append(one)
        if not result:
            raise ValueError("expected at least one value")
        return tuple(result)

    return convert


def _split_host_port(text: str) -> HostPort:
    text = text.strip()
    if text.startswith("["):  # [IPv6]:port
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or ":" in host and not text.startswith("["):
        raise ValueError(f"{text!r} is not host:port")
    return host, port_number(port)


def port_number(value: Any) -> int:
    """A TCP port, 0..65535 (0: any free port).

    Raises:
        ValueError: Not an integer, or out of range.
    """
    port = to_int(value)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is out of range 0..65535")
    return port


def to_host_ports(value: Any) -> tuple[HostPort, ...]:
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
            result.append((item[0], port_number(item[1])))
        else:
            raise ValueError(f"{item!r} is not host:port")
    if not result:
        raise ValueError("expected at least one host:port")
    return tuple(result)


_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?:\[(?P<ip6>[^\]]*)\]|(?P<host>[^:/]*)):(?P<port>-?[0-9]+)")


def to_listeners(value: Any) -> tuple[Listener, ...]:
    """``"PLAINTEXT://host:9092,..."`` -> ``(("PLAINTEXT", "host", 9092), ...)``.

    Only the syntax is checked here; which security protocol each name
    stands for (``listener.security.protocol.map``) is checked by
    `BrokerConfig`, through `kclient.security.settings.parse_listeners`
    (KIP-103)."""
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
            name, host, port = str(item[0]).upper(), to_str(item[1]), item[2]
        else:
            raise ValueError(f"{item!r} is not NAME://host:port")
        if any(name == seen for seen, _, _ in result):
            raise ValueError(f"listener {name} is given twice; each listener needs its own name")
        result.append((name, host, port_number(port)))
    return tuple(result)


def to_plugin(value: Any) -> Any:
    """A dotted class path (stripped, non-empty) or any object, stored as given."""
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", text):
            raise ValueError("expected a dotted class path such as package.module.ClassName")
        return text
    if value is None:
        raise ValueError("expected a dotted class path, a class or an instance")
    return value


def to_optional_plugin(value: Any) -> Any:
    """`to_plugin`, with None or blank text as None."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return to_plugin(value)


def to_codec(value: Any) -> str:
    """Codec name (none, gzip, snappy, lz4, zstd) or its id 0..4 -> name."""
    if isinstance(value, bool):
        raise TypeError("expected a codec name or id")
    if isinstance(value, int) or isinstance(value, str) and value.strip().isdigit():
        name = _codecs.NAMES.get(int(value))
        if name is None:
            raise ValueError(f"expected a codec id {min(_codecs.NAMES)}..{max(_codecs.NAMES)}")
        return name
    return enum_choice(*COMPRESSION_CODECS, synonyms={"uncompressed": "none"})(value)


def to_acks(value: Any) -> int:
    """``request.required.acks`` / ``acks``: ``all`` means -1 (every
    in-sync replica, as Kafka's producer reads it), else an int.

    Args:
        value: ``"all"``, ``-1``, ``0``, ``1`` or their text.

    Returns:
        -1, 0 or 1 (other ints pass through; the config's validator
            checks the range).

    Raises:
        TypeError, ValueError: not ``all`` and not an int.
    """
    if isinstance(value, str) and value.strip().lower() == "all":
        return -1
    return to_int(value)


def to_encoding(value: Any) -> str:
    """A Python text codec name (``serializer.encoding``, default UTF-8).

    Args:
        value: The name, e.g. ``"utf-8"``.

    Returns:
        The name as given.

    Raises:
        LookupError: Python knows no codec of that name.
    """
    text = to_str(value)
    codecs.lookup(text)  # LookupError -> ConfigError
    return text


# --------------------------------------------------------------------------
# Validators (converted value -> None; ValueError on a bad one)
# --------------------------------------------------------------------------


def at_least(low: int) -> Callable[[Any], None]:
    """A validator: the converted value is ``low`` or more (None passes).

    Args:
        low: The smallest value allowed.

    Returns:
        ``check(value)``, raising ValueError ("must be at least low").
    """
    def check(value: Any) -> None:
        if value is not None and value < low:
            raise ValueError(f"must be at least {low}")

    return check


def one_of(*allowed: Any) -> Callable[[Any], None]:
    """A validator: the converted value is one of ``allowed``.

    Args:
        *allowed: The values allowed.

    Returns:
        ``check(value)``, raising ValueError naming the values allowed.
    """
    def check(value: Any) -> None:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(map(str, allowed))}")

    return check


def not_empty(value: Any) -> None:
    """A validator: the converted value is not empty.

    Args:
        value: A string, tuple or list.

    Raises:
        ValueError: it is empty.
    """
    if not value:
        raise ValueError("must not be empty")


@attrs.frozen
class SameAs:
    """Default factory: the value of another attribute (``attribute``),
    kept inspectable so the configuration reference can say which."""

    attribute: str

    def __call__(self, config: Any) -> Any:
        return getattr(config, self.attribute)


def same_as(attribute: str) -> Any:
    """A property's default: the value of another property of the same
    config (``key.serializer.class`` defaults to ``serializer.class``).

    Args:
        attribute: The other property's attribute name.

    Returns:
        An ``attrs.Factory`` over `SameAs`, which the configuration
            reference renders as "same as ...".
    """
    return attrs.Factory(SameAs(attribute), takes_self=True)
