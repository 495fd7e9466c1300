"""Encoders (``serializer.class``) turn message values and keys into bytes;
decoders do the reverse for consumers.

Kafka 0.8's ``kafka.serializer`` has the same four pieces: ``Encoder`` with
``toBytes``, ``DefaultEncoder`` (bytes as they are), ``StringEncoder``
(``serializer.encoding``, UTF8 by default) and the matching decoders. Here
the encoder method is ``to_message(value) -> bytes | None``, as Kafka
0.8's producer API names it (Kafka 0.8 documentation, section 5.1 "API
Design", https://kafka.apache.org/08/documentation.html#apidesign). ``None`` always stays ``None``: it is a null key or a null
value (a tombstone), not an empty one.
"""

from __future__ import annotations

import abc
import codecs
from collections.abc import Callable
from typing import Any, ClassVar

from kclient.plugins import PluginInterface

__all__ = ["Decoder", "DefaultDecoder", "DefaultEncoder", "Encoder", "StringDecoder", "StringEncoder", "decoder_function"]


class Encoder(PluginInterface):
    """Serializes a message value or key to bytes.

    Subclasses implement `to_message`. Any class defining a
    ``to_message`` method counts as an Encoder for ``isinstance`` checks, so
    plug-ins need not inherit from this class. Plug-ins named by class path
    are built with no arguments, or with ``config=`` (the ProducerConfig) if
    their constructor takes it (see `kclient.plugins`).
    """

    #: True if `to_message` returns every value it is given unchanged,
    #: so the pipeline may skip calling it. False for the provided encoders,
    #: which check types to give clear errors.
    passthrough: ClassVar[bool] = False
    plugin_method = "to_message"

    @abc.abstractmethod
    def to_message(self, value: Any) -> bytes | None:
        """Serialize one value or key.

        Args:
            value: What the application passed in `ProducerData`.

        Returns:
            The bytes to send, or ``None`` for a null key / value.
        """


def _encoding(encoding: str | None, config: Any) -> str:
    """The text encoding of a String encoder/decoder: ``encoding``, else the
    config's ``serializer_encoding``, else UTF-8. Raises ``LookupError`` for
    an unknown one."""
    if encoding is None:
        encoding = getattr(config, "serializer_encoding", None) or "utf-8"
    codecs.lookup(encoding)
    return encoding


class DefaultEncoder(Encoder):
    """Bytes in, bytes out: ``bytes`` is returned as is, ``bytearray`` and
    ``memoryview`` are copied to ``bytes`` (so later changes to the buffer do
    not change a queued message), ``None`` stays ``None``. Anything else
    raises ``TypeError`` suggesting `StringEncoder` or a custom one."""

    def to_message(self, value: Any) -> bytes | None:
        """Pass bytes through.

        Args:
            value: ``bytes``, ``bytearray``, ``memoryview`` or ``None``.

        Returns:
            ``value`` as ``bytes`` (a copy for the mutable types), or ``None``.

        Raises:
            TypeError: ``value`` is not bytes-like.
        """
        if type(value) is bytes or value is None:
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        hint = "; use serializer.class=kclient.StringEncoder for str" if isinstance(value, str) else ""
        raise TypeError(
            f"DefaultEncoder sends bytes as they are; cannot send a {type(value).__name__}{hint} "
            "or set serializer.class / key.serializer.class to an Encoder for this type"
        )


class StringEncoder(Encoder):
    """``str`` -> bytes in ``encoding`` (default UTF-8; Kafka's property
    ``serializer.encoding``, read from ``config`` when ``encoding`` is not
    given). Bytes-like values pass through as bytes, ``None`` stays ``None``;
    anything else raises ``TypeError``. An unknown encoding raises
    ``LookupError`` at construction."""

    def __init__(self, encoding: str | None = None, *, config: Any = None) -> None:
        self.encoding = _encoding(encoding, config)

    def to_message(self, value: Any) -> bytes | None:
        """Encode a ``str`` in `encoding`.

        Args:
            value: A ``str``, bytes-like (passed through) or ``None``.

        Returns:
            The encoded bytes, or ``None``.

        Raises:
            TypeError: ``value`` is neither str nor bytes-like.
            UnicodeEncodeError: ``value`` cannot be encoded in `encoding`.
        """
        if isinstance(value, str):
            return value.encode(self.encoding)
        if value is None or type(value) is bytes:
            return value
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"StringEncoder encodes str; cannot send a {type(value).__name__}")

    def __repr__(self) -> str:
        return f"StringEncoder(encoding={self.encoding!r})"


class Decoder(PluginInterface):
    """Deserializes message bytes for a consumer (Kafka's ``Decoder.fromBytes``).

    Any class defining ``from_bytes`` counts as a Decoder for ``isinstance``.
    """

    plugin_method = "from_bytes"

    @abc.abstractmethod
    def from_bytes(self, data: bytes | None) -> Any:
        """Deserialize one value or key.

        Args:
            data: The bytes as stored, or ``None`` for a null.

        Returns:
            The application's value (``None`` for a null).
        """


class DefaultDecoder(Decoder):
    """Returns the bytes as they are (``None`` stays ``None``)."""

    def from_bytes(self, data: bytes | None) -> bytes | None:
        """Return the bytes unchanged.

        Args:
            data: The bytes as stored, or ``None``.

        Returns:
            ``data``.
        """
        return data


class StringDecoder(Decoder):
    """Bytes -> ``str`` in ``encoding`` (default UTF-8, or ``config``'s
    ``serializer_encoding``); ``None`` stays ``None``; undecodable bytes
    raise ``UnicodeDecodeError``."""

    def __init__(self, encoding: str | None = None, *, config: Any = None) -> None:
        self.encoding = _encoding(encoding, config)

    def from_bytes(self, data: bytes | None) -> str | None:
        """Decode bytes in `encoding`.

        Args:
            data: The bytes as stored, or ``None``.

        Returns:
            The text, or ``None``.

        Raises:
            UnicodeDecodeError: ``data`` is not valid in `encoding`.
        """
        return None if data is None else bytes(data).decode(self.encoding)


def decoder_function(decoder: Any, what: str) -> Callable[[Any], Any] | None:
    """The function the consumer applies to each key or value.

    Args:
        decoder: ``None`` (bytes as they are), a `Decoder` (any object, or
            class built with no arguments, with ``from_bytes``) or a plain
            callable.
        what: the argument's name, for the error message.

    Returns:
        ``from_bytes`` or the callable; ``None`` for bytes as they are
        (``None`` or a `DefaultDecoder`), so the consumer skips the call.

    Raises:
        TypeError: ``decoder`` is none of these.
    """
    if decoder is None:
        return None
    if isinstance(decoder, type):
        decoder = decoder()
    from_bytes = getattr(decoder, "from_bytes", None)
    if from_bytes is not None:
        return None if type(decoder) is DefaultDecoder else from_bytes
    if callable(decoder):
        function: Callable[[Any], Any] = decoder
        return function
    raise TypeError(f"{what} must be a Decoder (with from_bytes), a callable or None, not {decoder!r}")
