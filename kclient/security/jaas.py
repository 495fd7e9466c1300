"""Kafka's ``sasl.jaas.config`` values: one JAAS login module,
``<LoginModule> <flag> key=value ... ;``.

The tokenizer follows the rules of Kafka's ``JaasConfig`` (KIP-85, dynamic
JAAS configuration for clients): quoted values in ``"`` or ``'``, ``//``
and ``/* */`` comments, Java string escapes. No maintained Python library
parses JAAS, hence this small one. Errors name the property and never echo
values (they hold passwords).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs

from kclient.errors import ConfigError

__all__ = [
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "JaasEntry",
    "jaas_plain_users",
    "jaas_username_password",
    "parse_jaas_config",
]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAVA_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@attrs.frozen
class JaasEntry:
    """One login module of a JAAS configuration.

    Attributes:
        login_module: The class name, e.g. `PLAIN_LOGIN_MODULE`.
        control_flag: ``required``, ``requisite``, ``sufficient`` or
            ``optional`` (lower case).
        options: ``key=value`` options (values hidden from ``repr``: they
            hold passwords).
    """

    login_module: str
    control_flag: str
    options: Mapping[str, str] = attrs.field(repr=lambda opts: "{" + ", ".join(f"{k!r}: ***" for k in opts) + "}")


def _jaas_tokens(text: str, prop: str) -> Iterator[tuple[str, str]]:
    """Yield ``(kind, value)``: kind ``"word"``, ``"quoted"`` or the
    character ``"="`` / ``";"``. Rules of Kafka's JaasConfig tokenizer:
    bytes up to space are blanks, ``"`` and ``'`` quote (Java escapes),
    ``/`` starts a comment (``//`` and ``/* */`` too), ``=`` and ``;`` are
    single-character tokens, everything else builds words."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    raise ConfigError(f"Invalid value for configuration {prop}: unterminated /* comment")
                i = end + 2
            else:  # "//" or a lone "/": comment to the end of the line
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
        elif c in "=;":
            yield c, c
            i += 1
        elif c in "\"'":
            out: list[str] = []
            i += 1
            while True:
                if i >= n or text[i] in "\r\n":
                    raise ConfigError(f"Invalid value for configuration {prop}: unterminated quoted value")
                ch = text[i]
                if ch == c:
                    i += 1
                    break
                if ch == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    if nxt in "01234567":
                        j = i + 1
                        while j < n and j < i + 4 and text[j] in "01234567":
                            j += 1
                        out.append(chr(int(text[i + 1 : j], 8) & 0xFF))
                        i = j
                        continue
                    out.append(_JAVA_ESCAPES.get(nxt, nxt))
                    i += 2
                    continue
                out.append(ch)
                i += 1
            yield "quoted", "".join(out)
        else:
            start = i
            while i < n and text[i] > " " and text[i] not in "=;\"'/":
                i += 1
            yield "word", text[start:i]


def parse_jaas_config(text: str, prop: str = "sasl.jaas.config") -> JaasEntry:
    """Parse a ``sasl.jaas.config`` value: exactly one login module.

    Format (Kafka's JaasConfig, KIP-85): ``<LoginModuleClass> <flag>
    (<key>=<value>)* ;`` where a value is a word or a quoted string, e.g.
    ``org.apache.kafka.common.security.plain.PlainLoginModule required
    user_alice="alice-secret";``.

    Args:
        text: The property value.
        prop: The property name, for errors (e.g.
            ``listener.name.sasl_ssl.plain.sasl.jaas.config``).

    Returns:
        The entry.

    Raises:
        ConfigError: naming ``prop`` (and never echoing values, which hold
            passwords) for an empty value, a missing or unknown control
            flag, a key without a value, a repeated key, a missing ``;`` or
            more than one login module.
    """
    if not isinstance(text, str):
        raise ConfigError(f"Invalid value for configuration {prop}: expected a string")

    def bad(why: str) -> ConfigError:
        return ConfigError(f"Invalid value for configuration {prop}: {why}")

    tokens = list(_jaas_tokens(text, prop))
    if not tokens:
        raise bad("login module not specified")
    entries: list[JaasEntry] = []
    pos = 0
    while pos < len(tokens):
        kind, module = tokens[pos]
        if kind != "word":
            raise bad("expected a login module class name")
        pos += 1
        if pos >= len(tokens) or tokens[pos][0] != "word":
            raise bad(f"login module control flag not specified for {module}")
        flag = tokens[pos][1].lower()
        if flag not in _CONTROL_FLAGS:
            raise bad(f"invalid login module control flag {tokens[pos][1]!r} (expected one of {', '.join(_CONTROL_FLAGS)})")
        pos += 1
        options: dict[str, str] = {}
        while pos < len(tokens) and tokens[pos][0] != ";":
            kind, key = tokens[pos]
            if kind not in ("word", "quoted"):
                raise bad("expected an option name")
            if pos + 2 >= len(tokens) or tokens[pos + 1][0] != "=" or tokens[pos + 2][0] not in ("word", "quoted"):
                raise bad(f"value not specified for key {key!r}")
            if key in options:
                raise bad(f"key {key!r} is given twice")
            options[key] = tokens[pos + 2][1]
            pos += 3
        if pos >= len(tokens):
            raise bad("entry not terminated by a semicolon")
        pos += 1  # ";"
        entries.append(JaasEntry(module, flag, options))
    if len(entries) != 1:
        raise bad(f"expected one login module, found {len(entries)}")
    return entries[0]


def jaas_plain_users(entry: JaasEntry, prop: str = "sasl.jaas.config") -> dict[str, str]:
    """The broker's PLAIN users: the ``user_<name>="<password>"`` options of
    a PlainLoginModule entry (KIP-43).

    Args:
        entry: A parsed entry.
        prop: The property it came from, for errors.

    Returns:
        User name -> password (may be empty: nobody can log in).

    Raises:
        ConfigError: the entry is not a PlainLoginModule.
    """
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise ConfigError(f"Invalid value for configuration {prop}: expected {PLAIN_LOGIN_MODULE}, found {entry.login_module}")
    return {key[len("user_") :]: value for key, value in entry.options.items() if key.startswith("user_") and len(key) > 5}


def jaas_username_password(entry: JaasEntry, prop: str = "sasl.jaas.config") -> tuple[str, str]:
    """The ``username`` and ``password`` options of a PlainLoginModule or
    ScramLoginModule entry (a Java client's ``sasl.jaas.config``, or a
    broker's own inter-broker identity).

    Args:
        entry: A parsed entry.
        prop: The property it came from, for errors.

    Returns:
        ``(username, password)``.

    Raises:
        ConfigError: another login module, or ``username`` / ``password``
            missing or empty.
    """
    if entry.login_module not in (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE):
        raise ConfigError(
            f"Invalid value for configuration {prop}: expected {PLAIN_LOGIN_MODULE} or {SCRAM_LOGIN_MODULE}, "
            f"found {entry.login_module}"
        )
    for key in ("username", "password"):
        if not entry.options.get(key):
            raise ConfigError(f"Invalid value for configuration {prop}: option {key} is missing or empty")
    return entry.options["username"], entry.options["password"]
