"""Java ``.properties`` files and ``key=value`` override lists.

The file format is the one of ``java.util.Properties.load`` (see
https://docs.oracle.com/javase/8/docs/api/java/util/Properties.html#load-java.io.Reader-),
parsed with the ``jproperties`` library; overrides follow Kafka's
``kafka-server-start.sh server.properties --override key=value``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import jproperties

from kclient.errors import ConfigError

__all__ = ["load_properties", "parse_overrides"]


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java ``.properties`` file into ``{key: value}`` (strings).

    Parsed with ``jproperties`` (``#``/``!`` comments, ``=``/``:``/space
    separators, line continuations, ``\\u0041``-style escapes). The file is decoded
    as UTF-8, falling back to ISO-8859-1 (Java's ``Properties.load``
    encoding) if it is not valid UTF-8.

    Args:
        path: The file.

    Returns:
        Every key and its value, both strings.

    Raises:
        ConfigError: The file cannot be read or parsed.
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

    Args:
        overrides: The entries (a single string counts as one entry).

    Returns:
        ``{key: value}``.

    Raises:
        ConfigError: An entry without ``=`` or with an empty key.
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
