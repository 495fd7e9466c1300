"""ProducerData: the value the Producer sends (Kafka 0.8's
``ProducerData<K,V>``; Kafka 0.8 documentation, section 5.1 "API Design").

Its own small module so that every layer of the send path (the blocking
Producer, the EventHandler on the trio side) can use the type without
importing each other.
"""

from __future__ import annotations

from operator import itemgetter
from time import time_ns
from typing import Any

from kclient._accel import speedups as _speedups
from kclient.client.value_tuple import ValueTuple

__all__ = ["ProducerData"]


def _to_messages(value: Any) -> tuple[Any, ...]:
    if type(value) is tuple:
        return value
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        raise TypeError(
            f"ProducerData.messages must be a list of messages, not a single {type(value).__name__}; wrap it: messages=[value]"
        )
    return tuple(value)


class ProducerData(ValueTuple):
    """Messages for one topic, all with the same key (Kafka 0.8's
    ``ProducerData<K,V>(topic, key, data)``).

    ``topic``: str; ``key``: any value the ``key.serializer.class`` Encoder
    accepts (bytes with the default one) or None (the partitioner then picks
    a random partition); ``messages``: the values (stored as a tuple; each
    goes through ``serializer.class``; None is sent as a null value without
    calling the Encoder). All messages of one ProducerData go to the same
    partition. ``timestamp_ms``: the records' CreateTime (ms since the
    epoch); None lets the producer use the time of the ``send`` call.
    ``partition``: an explicit partition number, which bypasses
    ``partitioner.class`` (None: the partitioner decides); a number the
    topic does not have fails the send. ``headers``: record headers given
    to every message, a sequence of ``(str, bytes | None)`` pairs or
    `Header` values (record batch v2 only; KIP-82).

    An immutable value: a tuple underneath, so that the async producer's
    per-record path (construct, stamp, enqueue) stays cheap. Raises
    TypeError when ``messages`` is a single bytes/str value.
    """

    __slots__ = ()

    def __new__(
        cls,
        topic: str,
        key: Any = None,
        messages: Any = (),
        timestamp_ms: int | None = None,
        partition: int | None = None,
        headers: Any = (),
    ) -> ProducerData:
        if type(messages) is list:  # the usual [value]
            messages = tuple(messages)
        elif type(messages) is not tuple:
            messages = _to_messages(messages)
        if headers and type(headers) is not tuple:
            headers = tuple(headers)
        return tuple.__new__(cls, (topic, key, messages, timestamp_ms, partition, headers or ()))

    topic = property(itemgetter(0), doc="The topic (str).")
    key = property(itemgetter(1), doc="The key, before the key encoder, or None.")
    messages = property(itemgetter(2), doc="The values (tuple).")
    timestamp_ms = property(itemgetter(3), doc="CreateTime in ms since the epoch, or None for the send time.")
    partition = property(itemgetter(4), doc="The explicit partition, or None to let the partitioner choose.")
    headers = property(itemgetter(5), doc="Record headers (tuple of (str, bytes | None) pairs or Header).")

    def __repr__(self) -> str:
        extra = (f", partition={self[4]!r}" if self[4] is not None else "") + (f", headers={self[5]!r}" if self[5] else "")
        return f"ProducerData(topic={self[0]!r}, key={self[1]!r}, messages={self[2]!r}, timestamp_ms={self[3]!r}{extra})"

    def _stamped(self, timestamp_ms: int) -> ProducerData:
        """A copy with ``timestamp_ms`` set (cheap: skips the converter)."""
        return new_tuple(ProducerData, (self[0], self[1], self[2], timestamp_ms, self[4], self[5]))


#: ``new_tuple(cls, items)``: a ProducerData-like value (``cls``, a tuple
#: subclass) built from its fields without the constructor's checks (the
#: send path's cheap copy; ``items`` must already be in canonical form).
new_tuple = tuple.__new__


def py_stamped(d: ProducerData) -> ProducerData:
    """A copy of ``d`` with ``timestamp_ms`` set to now (the pure twin of
    the compiled ``stamped``).

    Args:
        d: The item to stamp (a ProducerData or a subclass with the same
            first six fields).

    Returns:
        The copy, ``timestamp_ms`` in ms since the epoch.
    """
    return new_tuple(type(d), (d[0], d[1], d[2], time_ns() // 1_000_000, d[4], d[5]))


#: ``stamped(d)``: a copy of ``d`` (an exact ProducerData) with
#: ``timestamp_ms`` set to now. Compiled when available.
stamped = py_stamped
#: The pure-Python ``ProducerData.__new__`` (the compiled one hands it the
#: rare shapes).
py_new = ProducerData.__new__

if _speedups is not None:
    # The compiled constructor and stamp (same values; tests/test_speedups.py
    # compares them with the pure ones above, which take the rare shapes).
    _speedups.set_data_fallback(py_new, ProducerData)
    ProducerData.__new__ = staticmethod(_speedups.new_data)  # type: ignore[method-assign]
    stamped = _speedups.stamped
