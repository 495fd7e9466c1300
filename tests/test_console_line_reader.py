"""`kclient.tools.line_reader.LineReader` (Kafka 3.2's LineMessageReader:
parse.key, parse.headers, null.marker, ignore.error) and
`kclient.tools.console_producer.Deliveries` in process: no broker."""

from __future__ import annotations

import pytest

from kclient.errors import ConfigError
from kclient.tools.console_producer import Deliveries
from kclient.tools.line_reader import LineReader

pytestmark = pytest.mark.unit


def read(lines: list[bytes], **properties: str) -> list:
    return list(LineReader(properties).records(lines))


def test_plain_lines_are_values():
    assert read([b"a\n", b"b\r\n", b"c"]) == [(None, b"a", []), (None, b"b", []), (None, b"c", [])]


def test_headers_then_key_then_value():
    props = {"parse.headers": "true", "parse.key": "true"}
    assert read([b"h1:v1,h2:v2\tk\tv\tmore\n"], **props) == [(b"k", b"v\tmore", [("h1", b"v1"), ("h2", b"v2")])]
    assert read([b"h1:\tk\tv\n"], **props) == [(b"k", b"v", [("h1", b"")])]


def test_custom_separators():
    props = {"parse.headers": "true", "headers.delimiter": "|", "headers.separator": ";", "headers.key.separator": "="}
    assert read([b"a=1;b=x=y|value\n"], **props) == [(None, b"value", [("a", b"1"), ("b", b"x=y")])]


def test_null_marker():
    props = {"parse.headers": "true", "parse.key": "true", "null.marker": "N"}
    assert read([b"N\tN\tN\n", b"h:N\tk\tv\n"], **props) == [(None, None, []), (b"k", b"v", [("h", None)])]
    with pytest.raises(ConfigError, match="Header keys should not be equal to the null marker 'N'"):
        read([b"N:v\tk\tv\n"], **props)


def test_errors_and_ignore_error():
    with pytest.raises(ConfigError, match="No headers delimiter found on line number 2: 'plain'"):
        read([b"h:v\tx\n", b"plain\n"], **{"parse.headers": "true"})
    with pytest.raises(ConfigError, match="No header key separator found in pair 'bare' on line number 1"):
        read([b"bare\tx\n"], **{"parse.headers": "true"})
    ignoring = {"parse.headers": "true", "parse.key": "true", "ignore.error": "true"}
    assert read([b"plain\n", b"bare\tvalue\n"], **ignoring) == [(None, b"plain", []), (None, b"value", [("bare", None)])]


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"headers.delimiter": ","}, "headers.delimiter and headers.separator may not be equal"),
        ({"headers.delimiter": ":"}, "headers.delimiter and headers.key.separator may not be equal"),
        ({"headers.separator": ":"}, "headers.separator and headers.key.separator may not be equal"),
        ({"null.marker": "\t"}, "null.marker and key.separator may not be equal"),
        ({"key.separator": ""}, "key.separator must not be empty"),
    ],
)
def test_separator_checks(properties, message):
    with pytest.raises(ConfigError, match=message):
        LineReader(properties)


def test_deliveries_name_every_line_not_acknowledged():
    deliveries = Deliveries()
    callbacks = []
    for number in range(1, 6):
        deliveries.read = number
        if number < 5:  # line 5: read, never handed to the producer
            callbacks.append(deliveries.sending(number))
    callbacks[0](object(), None)
    callbacks[2](None, RuntimeError("broker gone"))
    assert deliveries.not_delivered() == [2, 3, 4, 5]
    callbacks[1](object(), None)
    callbacks[3](object(), None)
    report = deliveries.report()
    assert report is not None and report.lost_messages == 2
    assert str(report) == "2 of 5 lines read were not delivered (lines 3,5): broker gone"
    done = Deliveries()
    done.read = 1
    done.sending(1)(object(), None)
    assert done.report() is None
