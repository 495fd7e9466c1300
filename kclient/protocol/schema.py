"""Declarative message schemas, one definition per API for all its versions.

A schema is a list of `Field` objects, each with the versions it exists
in (``"3+"``, ``"0-2"``), the way Kafka's own message JSON files
(``clients/src/main/resources/common/message/*.json``) describe them. A schema
is compiled once per version into a `StructCodec` that encodes a
``dict`` to bytes and decodes bytes to a ``dict``. In flexible versions
(KIP-482) strings, bytes and arrays take their compact forms and every struct
ends with a tagged-field section; unknown tagged fields are skipped on read.

Pure: no I/O.
"""

from __future__ import annotations

import struct
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import attrs

from kclient.errors import ProtocolError
from kclient.protocol import primitives as p
from kclient.protocol.primitives import Buffer, Reader, Writer

#: A request or response body as the codec takes it: an instance of the
#: API's message class (`Api.request_type` / `Api.response_type`), or a
#: dict of the same fields by name.
Body: TypeAlias = Any


def parse_versions(spec: str) -> tuple[int, int]:
    """Parse a JSON-schema version spec into an inclusive range.

    ``"3+"`` -> (3, 32767); ``"0-2"`` -> (0, 2); ``"5"`` -> (5, 5);
    ``"none"`` -> (1, 0) (an empty range).

    Args:
        spec: The spec, as the Kafka message JSON files write it.

    Returns:
        ``(first, last)``, both inclusive.
    """
    if spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), 0x7FFF)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


@attrs.frozen
class Field:
    """One field of a request or response.

    ``type`` is a primitive name (``int8 int16 int32 int64 uint32 float64 bool
    uuid string nullable_string bytes nullable_bytes records``), a list of
    Fields (an array of structs), ``("array", "<primitive>")``, or
    ``("struct", fields)`` / ``("nullable_struct", fields)`` (one struct,
    such as ConsumerGroupHeartbeat's ``Assignment``; a nullable one is
    preceded by a one-byte marker, -1 for null).
    ``versions`` says in which versions the field is present; ``default`` is
    used when encoding a dict that lacks the field.
    """

    name: str
    type: Any
    versions: str = "0+"
    default: Any = None
    #: Whether Kafka lets the value be null (arrays; the string and bytes
    #: types say it themselves). Declared by the message classes
    #: (``list[T] | None``).
    nullable: bool = attrs.field(default=False, eq=False)
    #: For an array of structs declared by a message class: the class of
    #: its items (the codec reads them into it); for a single struct
    #: (``("struct", fields)``), its class.
    struct_type: Any = attrs.field(default=None, eq=False)

    def present_in(self, version: int) -> bool:
        lo, hi = parse_versions(self.versions)
        return lo <= version <= hi


#: The value a field of each wire type takes when a class does not give
#: one (Kafka's defaults: zero, empty, false).
_TYPE_DEFAULTS: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint32": 0,
    "float64": 0.0,
    "bool": False,
    "uuid": None,
    "string": "",
    "nullable_string": None,
    "bytes": b"",
    "nullable_bytes": None,
    "records": None,
}


def _annotation_parts(hint: Any) -> tuple[Any, list[Any]]:
    """A type hint without its ``Annotated`` layers, and their metadata."""
    metadata: list[Any] = []
    while typing.get_origin(hint) is typing.Annotated:
        metadata.extend(hint.__metadata__)
        hint = hint.__origin__
    return hint, metadata


def _wire_type(hint: Any, where: str) -> tuple[Any, bool, str | None, Any]:
    """``(Field type, nullable, versions, extra)`` of one annotation; extra
    is the item class of an array of structs, or a string's nullable
    versions (`kclient.protocol.types.NullableVersions`)."""
    from kclient.protocol.types import NullableVersions, Versions

    bare, metadata = _annotation_parts(hint)
    versions = next((m.spec for m in metadata if isinstance(m, Versions)), None)
    nullable_versions = next((m.spec for m in metadata if isinstance(m, NullableVersions)), None)
    names = [m for m in metadata if isinstance(m, str)]
    if names:
        return names[-1], False, versions, nullable_versions
    nullable = False
    args = typing.get_args(bare)
    if args and type(None) in args and typing.get_origin(bare) is not list:
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"{where}: a union other than T | None")
        bare, nullable = rest[0], True
        inner, more = _annotation_parts(bare)
        versions = versions or next((m.spec for m in more if isinstance(m, Versions)), None)
        bare = inner
    found = _composite_type(bare, nullable)
    if found is None:
        raise TypeError(f"{where}: {hint!r} is no Kafka type (see kclient.protocol.types)")
    return found[0], nullable, versions, found[1]


def _composite_type(bare: Any, nullable: bool) -> tuple[Any, Any] | None:
    """``(Field type, struct class or None)`` of an array (``list[T]``) or
    a single struct (an ``attrs`` class), or None for anything else."""
    if typing.get_origin(bare) is list:
        (item,) = typing.get_args(bare)
        item_bare, item_meta = _annotation_parts(item)
        item_names = [m for m in item_meta if isinstance(m, str)]
        if item_names:
            return ("array", item_names[-1]), None
        if attrs.has(item_bare):
            return fields_of(item_bare), item_bare
    if isinstance(bare, type) and attrs.has(bare):
        return ("nullable_struct" if nullable else "struct", fields_of(bare)), bare
    return None


_FIELDS_CACHE: dict[type, tuple[Field, ...]] = {}


def fields_of(cls: type) -> tuple[Field, ...]:
    """The schema of a message class: one `Field` per attribute, in order.

    The wire type comes from the annotation (`kclient.protocol.types`),
    the versions from its `kclient.protocol.types.Versions`, the default
    from the attribute's default when it differs from the type's own.

    Args:
        cls: An ``attrs`` class declared with `kclient.protocol.types`.

    Returns:
        The fields, as a schema's ``request_fields`` / ``response_fields``.

    Raises:
        TypeError: An attribute whose annotation is no Kafka type.
    """
    cached = _FIELDS_CACHE.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for attribute in attrs.fields(cls):
        kind, nullable, versions, extra = _wire_type(hints[attribute.name], f"{cls.__name__}.{attribute.name}")
        struct_type = extra if isinstance(extra, type) else None
        nullable_versions = extra if isinstance(extra, str) else None
        default = attribute.default
        if isinstance(default, attrs.Factory) or (isinstance(kind, str) and type(default) is type(_TYPE_DEFAULTS.get(kind)) and default == _TYPE_DEFAULTS.get(kind)):  # type: ignore[arg-type]
            default = None
        versions = versions or "0+"
        if nullable_versions is not None:
            # A string before ``nullable_versions``, a nullable one from it.
            first, last = parse_versions(versions)
            null_first, _ = parse_versions(nullable_versions)
            if null_first > first:
                out.append(Field(attribute.name, "string", f"{first}-{null_first - 1}", None))
            out.append(Field(attribute.name, kind, nullable_versions if last == 0x7FFF else f"{null_first}-{last}", None))
            continue
        out.append(Field(attribute.name, kind, versions, default, nullable=nullable, struct_type=struct_type))
    result = tuple(out)
    _FIELDS_CACHE[cls] = result
    return result


_PRIMITIVES: dict[str, tuple[Writer, Reader, Any]] = {
    "int8": (p.write_int8, p.read_int8, 0),
    "int16": (p.write_int16, p.read_int16, 0),
    "int32": (p.write_int32, p.read_int32, 0),
    "int64": (p.write_int64, p.read_int64, 0),
    "uint32": (p.write_uint32, p.read_uint32, 0),
    "float64": (p.write_float64, p.read_float64, 0.0),
    "bool": (p.write_bool, p.read_bool, False),
    "uuid": (p.write_uuid, p.read_uuid, None),
}


def _non_null(reader: Reader, what: str) -> Reader:
    def read(buf: Buffer, pos: int) -> tuple[Any, int]:
        value, pos = reader(buf, pos)
        if value is None:
            raise ProtocolError(f"null {what} where a value is required")
        return value, pos

    return read


def _null_checked(writer: Writer, what: str) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        if value is None:
            raise ValueError(f"{what} may not be null")
        writer(out, value)

    return write


def _primitive(name: str, flexible: bool) -> tuple[Writer, Reader, Any]:
    if name in _PRIMITIVES:
        return _PRIMITIVES[name]
    w: Writer
    r: Reader
    if name in ("string", "nullable_string"):
        w, r = (p.write_compact_string, p.read_compact_string) if flexible else (p.write_string, p.read_string)
        if name == "string":
            return _null_checked(w, "string"), _non_null(r, "string"), ""
        return w, r, None
    if name in ("bytes", "nullable_bytes", "records"):
        w, r = (p.write_compact_bytes, p.read_compact_bytes) if flexible else (p.write_bytes, p.read_bytes)
        if name == "bytes":
            return _null_checked(w, "bytes"), _non_null(r, "bytes"), b""
        return w, r, None
    raise ValueError(f"unknown primitive type {name!r}")


def _read_items(item_r: Reader, buf: Buffer, pos: int, n: int) -> tuple[list[Any], int]:
    """``n`` items read with ``item_r`` from ``pos``: (list, next position).
    Each item takes at least one byte, so a count larger than the bytes left
    is refused before anything is allocated."""
    if n > len(buf) - pos:
        raise ProtocolError(f"array of {n} items cannot fit in {len(buf) - pos} bytes")
    items: list[Any] = []
    append = items.append
    for _ in range(n):
        v, pos = item_r(buf, pos)
        append(v)
    return items, pos

def _single_struct(struct_w: Writer, struct_r: Reader, nullable: bool) -> tuple[Writer, Reader]:
    """A writer and reader for one struct field (not an array). A nullable
    struct is preceded by a marker byte, -1 for null and 1 for a struct, as
    Kafka's generated messages write it."""

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            if not nullable:
                raise ValueError("struct may not be null")
            out.append(0xFF)
            return
        if type(value) is not dict and not attrs.has(type(value)):
            raise TypeError(f"expected a struct, not {type(value).__name__}")
        if nullable:
            out.append(1)
        struct_w(out, value)

    def read(buf: Buffer, pos: int) -> tuple[Any, int]:
        if nullable:
            marker, pos = p.read_int8(buf, pos)
            if marker < 0:
                return None, pos
        return struct_r(buf, pos)

    return write, read


def _array(item_w: Writer, item_r: Reader, flexible: bool) -> tuple[Writer, Reader]:
    write: Writer
    read: Reader
    if flexible:

        def write(out: bytearray, values: Any) -> None:
            if values is None:
                out.append(0)
                return
            p.write_uvarint(out, len(values) + 1)
            for v in values:
                item_w(out, v)

        def read(buf: Buffer, pos: int) -> tuple[Any, int]:
            n, pos = p.read_uvarint(buf, pos)
            if n == 0:
                return None, pos
            n -= 1
            return _read_items(item_r, buf, pos, n)

    else:

        def write(out: bytearray, values: Any) -> None:
            if values is None:
                out += b"\xff\xff\xff\xff"
                return
            out += p.INT32.pack(len(values))
            for v in values:
                item_w(out, v)

        def read(buf: Buffer, pos: int) -> tuple[Any, int]:
            n, pos = p.read_int32(buf, pos)
            if n < 0:
                if n != -1:
                    raise ProtocolError(f"bad array length {n}")
                return None, pos
            return _read_items(item_r, buf, pos, n)

    return write, read


_MISSING = object()


#: ``struct`` codes of the fixed-size primitives: consecutive fields of
#: these types are packed and unpacked with one ``struct`` call.
_FIXED_CODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint32": "I", "float64": "d", "bool": "?"}


def _generate(
    compiled: list[tuple[Any, ...]],
    kinds: list[Any],
    flexible: bool,
    write_fields: Writer,
    read_fields: Reader,
    message: type | None = None,
    absent: Sequence[tuple[str, Any, bool]] = (),
    read_message_fields: Reader | None = None,
) -> tuple[Writer, Reader, Reader | None]:
    """A writer and readers for one struct, generated as Python source the
    way ``attrs`` and ``dataclasses`` generate their methods: no loop over
    the fields, one ``struct`` call for each run of consecutive fixed-size
    fields (a Fetch response's partition header is one ``pack``).

    The writer takes a dict or an instance of ``message``; the reader gives
    a dict; with ``message``, a second reader gives an instance of it (the
    fields of other versions, ``absent``, set to their defaults). They give
    the bytes and values of ``write_fields`` / ``read_fields`` /
    ``read_message_fields`` (the one-field-at-a-time references). On any
    error they start the struct again with the reference, so the error
    raised, and its message naming the field, are the reference's own;
    ``out`` is cut back to where the struct began.
    """
    ns: dict[str, Any] = {
        "slow_write": write_fields,
        "slow_read": read_fields,
        "slow_read_message": read_message_fields,
        "TAGS": p.read_tagged_fields,
        "NEW": object.__new__,
        "C": message,
        "dict": dict,
    }
    w_dict: list[str] = []
    w_obj: list[str] = []
    r_lines: list[str] = []
    ro_lines: list[str] = []
    i = 0
    n = len(compiled)
    while i < n:
        j = i
        while j < n and kinds[j] in _FIXED_CODES:
            j += 1
        if j > i:  # a run of fixed-size fields i .. j-1
            st = struct.Struct(">" + "".join(_FIXED_CODES[k] for k in kinds[i:j]))
            ns[f"P{i}"], ns[f"U{i}"] = st.pack, st.unpack_from
            for k in range(i, j):
                ns[f"D{k}"] = compiled[k][3]
            w_dict.append(f"out += P{i}({', '.join(f'get({compiled[k][0]!r}, D{k})' for k in range(i, j))})")
            w_obj.append(f"out += P{i}({', '.join(f'value.{compiled[k][0]}' for k in range(i, j))})")
            targets = "".join(f"v{k}, " for k in range(i, j))
            for lines, slow in ((r_lines, "slow_read"), (ro_lines, "slow_read_message")):
                lines.append(f"if pos + {st.size} > len(buf): return {slow}(buf, start)")
                lines.append(f"{targets}= U{i}(buf, pos)")
                lines.append(f"pos += {st.size}")
            i = j
            continue
        name, w, r, default = compiled[i][:4]
        ns[f"W{i}"], ns[f"R{i}"], ns[f"D{i}"] = w, r, default
        ns[f"RO{i}"] = compiled[i][4] if len(compiled[i]) > 4 and compiled[i][4] is not None else r
        w_dict.append(f"W{i}(out, get({name!r}, D{i}))")
        w_obj.append(f"W{i}(out, value.{name})")
        r_lines.append(f"v{i}, pos = R{i}(buf, pos)")
        ro_lines.append(f"v{i}, pos = RO{i}(buf, pos)")
        i += 1
    if flexible:
        w_dict.append("out.append(0)")
        w_obj.append("out.append(0)")
        r_lines.append("_, pos = TAGS(buf, pos)")
        ro_lines.append("_, pos = TAGS(buf, pos)")
    result = ", ".join(f"{compiled[k][0]!r}: v{k}" for k in range(n))
    sets = [f"o.{compiled[k][0]} = v{k}" for k in range(n)]
    for a, (name, default, factory) in enumerate(absent):
        ns[f"A{a}"] = default
        sets.append(f"o.{name} = A{a}()" if factory else f"o.{name} = A{a}")

    def block(lines: list[str], indent: str) -> str:
        return "\n".join(indent + line for line in lines) or indent + "pass"

    source = (
        "def write(out, value):\n"
        "    start = len(out)\n"
        "    try:\n"
        "        if type(value) is dict:\n"
        "            get = value.get\n"
        f"{block(w_dict, '            ')}\n"
        "        else:\n"
        f"{block(w_obj, '            ')}\n"
        "    except Exception:\n"
        "        del out[start:]\n"
        "        try:\n"
        "            slow_write(out, value)\n"
        "        except BaseException:\n"
        "            del out[start:]\n"
        "            raise\n"
        "\n"
        "def read(buf, pos):\n"
        "    start = pos\n"
        f"{block(r_lines, '    ')}\n"
        f"    return {{{result}}}, pos\n"
    )
    if message is not None:
        source += (
            "\n"
            "def read_message(buf, pos):\n"
            "    start = pos\n"
            f"{block(ro_lines, '    ')}\n"
            "    o = NEW(C)\n"
            f"{block(sets, '    ')}\n"
            "    return o, pos\n"
        )
    exec(compile(source, "<kclient.protocol.schema generated codec>", "exec"), ns)
    return ns["write"], ns["read"], ns.get("read_message")


def _message_defaults(message: type) -> dict[str, tuple[Any, bool]]:
    """``{attribute: (default or factory, is a factory)}`` of a message class."""
    out: dict[str, tuple[Any, bool]] = {}
    for a in attrs.fields(message):
        if isinstance(a.default, attrs.Factory):  # type: ignore[arg-type]
            out[a.name] = (a.default.factory, True)
        else:
            out[a.name] = (a.default, False)
    return out


class StructCodec:
    """A schema compiled for one version: `write` / `encode` a dict or a
    message, `read` / `decode` bytes into a dict, `read_message` /
    `decode_message` into the message class.

    Args:
        fields: The schema's fields (those absent in ``version`` are left
            out).
        version: The version to compile for.
        flexible: Whether ``version`` is flexible (KIP-482).
        generated: Use writers and readers generated for this struct
            (the default); ``False`` runs one field at a time at every
            level, the reference the generated ones are tested against.
        message: The struct's message class (`kclient.protocol.types`),
            which `read_message` builds; None: dicts only.
    """

    def __init__(self, fields: Sequence[Field], version: int, flexible: bool, *, generated: bool = True, message: type | None = None) -> None:
        self.version = version
        self.flexible = flexible
        self.message = message
        compiled: list[tuple[str, Writer, Reader, Any, Reader | None]] = []
        for f in fields:
            if not f.present_in(version):
                continue
            w, r, default, ro = _compile_type(f.type, version, flexible, generated, f.struct_type)
            compiled.append((f.name, w, r, f.default if f.default is not None else default, ro))
        self._fields = compiled
        #: names of the fields present in this version
        self.names = tuple(name for name, _, _, _, _ in compiled)
        self._absent: tuple[tuple[str, Any, bool], ...] = ()
        if message is not None:
            defaults = _message_defaults(message)
            self._absent = tuple((name, *defaults[name]) for name in defaults if name not in self.names)
        self._write: Writer
        self._read: Reader
        self._read_message: Reader | None
        if generated:
            kinds = [f.type if isinstance(f.type, str) else None for f in fields if f.present_in(version)]
            self._write, self._read, self._read_message = _generate(
                compiled,
                kinds,
                flexible,
                self._write_fields,
                self._read_fields,
                message,
                self._absent,
                self._read_message_fields if message is not None else None,
            )
        else:  # one field at a time, at every level: the reference the tests compare with
            self._write, self._read = self._write_fields, self._read_fields
            self._read_message = self._read_message_fields if message is not None else None

    def write(self, out: bytearray, value: Any) -> None:
        """Append the encoding of ``value`` (a dict, or an instance of the
        message class) to ``out``.

        Raises:
            ValueError: A value does not fit its field (the message names
                the field); ``out`` is then left as it was (``generated``
                codecs).
        """
        self._write(out, value)

    def read(self, buf: Buffer, pos: int) -> tuple[dict[str, Any], int]:
        """Decode a struct at ``pos``.

        Returns:
            (tuple[dict, int]): Field values by name and the offset after the
                struct.

        Raises:
            kclient.errors.ProtocolError: Truncated or malformed bytes.
        """
        return self._read(buf, pos)

    def read_message(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        """Decode a struct at ``pos`` into the message class.

        Returns:
            The message (the fields of other versions at their defaults)
            and the offset after the struct.

        Raises:
            kclient.errors.ProtocolError: Truncated or malformed bytes.
            TypeError: The codec has no message class.
        """
        if self._read_message is None:
            raise TypeError("this codec was compiled without a message class")
        return self._read_message(buf, pos)

    def _write_fields(self, out: bytearray, value: Any) -> None:
        """`write` one field at a time: the reference the generated
        writer is checked against, and the path that names the field of a
        value that does not fit."""
        get: Callable[[str, Any], Any]
        if type(value) is dict:
            get = value.get
        else:

            def get(name: str, default: Any) -> Any:
                return getattr(value, name, default)

        for name, w, _, default, _ in self._fields:
            v = get(name, _MISSING)
            if v is _MISSING:
                v = default
            try:
                w(out, v)
            except (ValueError, TypeError, OverflowError) as exc:
                raise ValueError(f"field {name!r}: {exc}") from None
            except Exception as exc:  # struct.error
                raise ValueError(f"field {name!r}: {exc}") from None
        if self.flexible:
            out.append(0)

    def _read_fields(self, buf: Buffer, pos: int) -> tuple[dict[str, Any], int]:
        """`read` one field at a time: the reference the generated reader
        is checked against, and the path that reports truncated bytes."""
        result = {}
        for name, _, r, _, _ in self._fields:
            result[name], pos = r(buf, pos)
        if self.flexible:
            _, pos = p.read_tagged_fields(buf, pos)
        return result, pos

    def _read_message_fields(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        """`read_message` one field at a time (the reference)."""
        assert self.message is not None
        o: Any = object.__new__(self.message)
        for name, _, r, _, ro in self._fields:
            value, pos = (ro or r)(buf, pos)
            setattr(o, name, value)
        for name, default, factory in self._absent:
            setattr(o, name, default() if factory else default)
        if self.flexible:
            _, pos = p.read_tagged_fields(buf, pos)
        return o, pos

    def encode(self, value: Any) -> bytes:
        """The encoding of ``value`` (a dict or a message) as bytes."""
        out = bytearray()
        self.write(out, value)
        return bytes(out)

    def decode(self, buf: Buffer) -> dict[str, Any]:
        """Decode a whole buffer as one struct.

        Returns:
            Field values by name.

        Raises:
            kclient.errors.ProtocolError: Malformed bytes, or bytes left after
                the struct.
        """
        value, pos = self.read(buf, 0)
        if pos != len(buf):
            raise ProtocolError(f"{len(buf) - pos} unexpected trailing bytes")
        return value

    def decode_message(self, buf: Buffer) -> Any:
        """Decode a whole buffer as one struct, into the message class.

        Returns:
            The message.

        Raises:
            kclient.errors.ProtocolError: Malformed bytes, or bytes left after
                the struct.
            TypeError: The codec has no message class.
        """
        value, pos = self.read_message(buf, 0)
        if pos != len(buf):
            raise ProtocolError(f"{len(buf) - pos} unexpected trailing bytes")
        return value


def _compile_type(t: Any, version: int, flexible: bool, generated: bool, struct_type: type | None = None) -> tuple[Writer, Reader, Any, Reader | None]:
    """``(writer, dict reader, default, message reader or None)`` of a field type."""
    if isinstance(t, str):
        w, r, default = _primitive(t, flexible)
        return w, r, default, None
    if isinstance(t, tuple) and t[0] == "array":
        iw, ir, _, _ = _compile_type(t[1], version, flexible, generated)
        w, r = _array(iw, ir, flexible)
        return w, r, [], None
    if isinstance(t, tuple) and t and t[0] in ("struct", "nullable_struct"):
        nullable = t[0] == "nullable_struct"
        one = StructCodec(t[1], version, flexible, generated=generated, message=struct_type)
        w, r = _single_struct(one._write, one._read, nullable)
        ro = _single_struct(one._write, one._read_message, nullable)[1] if one._read_message is not None else None
        return w, r, None if nullable else {}, ro
    if isinstance(t, (list, tuple)):
        sub = StructCodec(t, version, flexible, generated=generated, message=struct_type)
        w, r = _array(sub._write, sub._read, flexible)
        ro = _array(sub._write, sub._read_message, flexible)[1] if sub._read_message is not None else None
        return w, r, [], ro
    raise ValueError(f"bad field type {t!r}")


@attrs.frozen
class Api:
    """One Kafka API: its key, the versions kclient implements, the first
    flexible version, and the request/response field lists."""

    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int
    #: The request body's message class (`kclient.protocol.types`), or None
    #: for a schema given as ``request_fields`` only.
    request_type: type | None = attrs.field(default=None, kw_only=True)
    #: The response body's message class, or None.
    response_type: type | None = attrs.field(default=None, kw_only=True)
    request_fields: tuple[Field, ...] = attrs.field(
        default=attrs.Factory(lambda self: fields_of(self.request_type) if self.request_type is not None else (), takes_self=True),
        kw_only=True,
    )
    response_fields: tuple[Field, ...] = attrs.field(
        default=attrs.Factory(lambda self: fields_of(self.response_type) if self.response_type is not None else (), takes_self=True),
        kw_only=True,
    )
    _cache: dict[tuple[str, int], StructCodec] = attrs.field(factory=dict, eq=False, repr=False)

    def flexible(self, version: int) -> bool:
        return version >= self.flexible_from

    def _codec(self, kind: str, version: int) -> StructCodec:
        key = (kind, version)
        codec = self._cache.get(key)
        if codec is None:
            if not self.min_version <= version <= self.max_version:
                raise ValueError(f"{self.name} v{version} is not implemented ({self.min_version}-{self.max_version})")
            fields = self.request_fields if kind == "request" else self.response_fields
            message = self.request_type if kind == "request" else self.response_type
            codec = StructCodec(fields, version, self.flexible(version), message=message)
            self._cache[key] = codec
        return codec

    def request(self, version: int) -> StructCodec:
        """The request codec for ``version``; ValueError if not implemented."""
        return self._codec("request", version)

    def response(self, version: int) -> StructCodec:
        """The response codec for ``version``; ValueError if not implemented."""
        return self._codec("response", version)
