"""How the ``kclient`` tools word what they report on stderr: an error
that ends a command (`error_message`) and a set of line numbers
(`line_ranges`)."""

from __future__ import annotations

from collections.abc import Iterable

from kclient.errors import BrokerResponseError, ConfigError, KafkaError, ZooKeeperError

__all__ = ["error_message", "line_ranges"]


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line (the first line; the type name
    when the message is empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def error_message(exc: BaseException) -> str:
    """The one line a tool prints for an error.

    A configuration or ZooKeeper error: the message; an OS error: its text
    without the ``[Errno N]`` (and the file it names). Another Kafka error:
    its class name and message; a broker's error code is not repeated (the
    class is named after it: ``TopicAlreadyExistsError: ...``, not
    ``TopicAlreadyExistsError: [Error 36] TOPIC_ALREADY_EXISTS: ...``).

    Args:
        exc: The error.

    Returns:
        The message, one line.
    """
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f": {exc.filename!r}" if exc.filename is not None else "")
    text = _one_line(exc)
    if isinstance(exc, (ConfigError, ZooKeeperError)) or not isinstance(exc, KafkaError):
        return text
    if isinstance(exc, BrokerResponseError):
        text = text.removeprefix(f"[Error {exc.code}] {exc.name}").removeprefix(":").strip() or exc.name
    return f"{type(exc).__name__}: {text}"


def line_ranges(numbers: Iterable[int]) -> str:
    """Line numbers as ranges: ``1-3,7,9-10``.

    Args:
        numbers: The numbers (any order, repeats allowed).

    Returns:
        The ranges, ascending, comma-separated; empty for no numbers.
    """
    ranges: list[list[int]] = []
    for n in sorted(set(numbers)):
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
