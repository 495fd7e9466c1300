"""Kafka's ``LineMessageReader`` (``kafka-console-producer.sh``'s
``--property`` values, Kafka 3.2): one record per input line.

A line is ``[HEADERS<headers.delimiter>][KEY<key.separator>]VALUE``:

- ``parse.headers=true`` (KIP-798): the part before the first
  ``headers.delimiter`` (default a tab) holds the headers,
  ``h1:v1,h2:v2``: pairs split at each ``headers.separator`` (default
  ``,``), a pair's key and value at its first ``headers.key.separator``
  (default ``:``);
- ``parse.key=true``: the part before the next ``key.separator`` (default
  a tab) is the key;
- ``null.marker`` (KIP-810, no default): a key, value or header value equal
  to it is null (a header key may not be).

A line without a delimiter it needs, or a header pair without its key
separator, is an error, unless ``ignore.error=true``: then the line has no
headers / no key (the whole rest is the value) and the pair is a header
with a null value. Separators are literal strings (Kafka's
``headers.separator`` is a regular expression; a literal one means the
same).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from kclient.errors import ConfigError
from kclient.tools.common import property_bool

__all__ = ["LineReader", "LineRecord"]

#: One record: key (None: null), value (None: null), headers (``(key,
#: value)`` pairs, a None value for a null one).
LineRecord = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


class LineReader:
    """Kafka's ``LineMessageReader``: turns input lines into records (see
    the module docstring).

    Args:
        properties: The ``--property`` values: ``parse.key``,
            ``key.separator``, ``parse.headers``, ``headers.delimiter``,
            ``headers.separator``, ``headers.key.separator``,
            ``null.marker``, ``ignore.error``.

    Raises:
        ConfigError: An empty separator, or two that Kafka requires to
            differ (the headers delimiter, the headers separator, the
            header key separator; the null marker and each separator).
    """

    def __init__(self, properties: Mapping[str, str]) -> None:
        self.parse_key = property_bool(properties, "parse.key")
        self.parse_headers = property_bool(properties, "parse.headers")
        self.ignore_error = property_bool(properties, "ignore.error")
        separators = {
            "key.separator": properties.get("key.separator", "\t"),
            "headers.delimiter": properties.get("headers.delimiter", "\t"),
            "headers.separator": properties.get("headers.separator", ","),
            "headers.key.separator": properties.get("headers.key.separator", ":"),
        }
        for name, value in separators.items():
            if not value:
                raise ConfigError(f"--property {name} must not be empty")
        marker = properties.get("null.marker")
        _check_distinct(separators, marker)
        self.key_separator = separators["key.separator"].encode("utf-8")
        self.headers_delimiter = separators["headers.delimiter"].encode("utf-8")
        self.headers_separator = separators["headers.separator"].encode("utf-8")
        self.headers_key_separator = separators["headers.key.separator"].encode("utf-8")
        self.null_marker = marker.encode("utf-8") if marker is not None else None

    def records(self, stream: Iterable[bytes]) -> Iterator[LineRecord]:
        """The records of a binary stream, one per line.

        Args:
            stream: The input lines, each with its line ending
                (``sys.stdin.buffer``, or
                `kclient.tools.console_producer.read_lines`).

        Yields:
            ``(key, value, headers)`` (see `LineRecord`); the key is None
            without ``parse.key``, the headers empty without
            ``parse.headers``.

        Raises:
            ConfigError: A line without a delimiter it needs, or a header
                pair without its key separator (unless ``ignore.error``);
                a header key equal to ``null.marker``.
        """
        for number, raw in enumerate(stream, 1):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            yield self.record(line, number)

    def record(self, line: bytes, number: int) -> LineRecord:
        """One line's record (``line`` without its line ending; ``number``
        counts from 1, for error messages)."""
        rest = line
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            text, rest = self._split(rest, self.headers_delimiter, "headers delimiter", line, number)
            if text is not None and text != self.null_marker:
                headers = self._headers(text, number)
        key = None
        if self.parse_key:
            key, rest = self._split(rest, self.key_separator, "key separator", line, number)
        return self._nullable(key), self._nullable(rest), headers

    def _split(self, text: bytes, separator: bytes, what: str, line: bytes, number: int) -> tuple[bytes | None, bytes]:
        head, found, tail = text.partition(separator)
        if found:
            return head, tail
        if self.ignore_error:
            return None, text
        raise ConfigError(f"No {what} found on line number {number}: '{line.decode('utf-8', 'replace')}'")

    def _headers(self, text: bytes, number: int) -> list[tuple[str, bytes | None]]:
        headers: list[tuple[str, bytes | None]] = []
        for pair in text.split(self.headers_separator):
            key, found, value = pair.partition(self.headers_key_separator)
            if not found:
                if not self.ignore_error:
                    raise ConfigError(f"No header key separator found in pair '{pair.decode('utf-8', 'replace')}' on line number {number}")
                headers.append((pair.decode("utf-8", "replace"), None))
                continue
            if key == self.null_marker:
                raise ConfigError(f"Header keys should not be equal to the null marker '{key.decode('utf-8', 'replace')}' as they can't be null")
            headers.append((key.decode("utf-8", "replace"), self._nullable(value)))
        return headers

    def _nullable(self, value: bytes | None) -> bytes | None:
        return None if value is None or value == self.null_marker else value


def _check_distinct(separators: Mapping[str, str], marker: str | None) -> None:
    """Kafka's checks: the headers' three separators differ, and the null
    marker is none of the separators."""
    pairs = [("headers.delimiter", "headers.separator"), ("headers.delimiter", "headers.key.separator"), ("headers.separator", "headers.key.separator")]
    for a, b in pairs:
        if separators[a] == separators[b]:
            raise ConfigError(f"--property {a} and {b} may not be equal")
    for name, value in separators.items():
        if marker is not None and marker == value:
            raise ConfigError(f"--property null.marker and {name} may not be equal")
