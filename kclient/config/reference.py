"""The configuration reference page, rendered from the config declarations.

Every row comes from the `prop` declarations of `ProducerConfig`,
`ConsumerConfig`, `BrokerConfig` and `AdminConfig`: the Kafka name, the aliases, the
default, the unit (when the name says it: ``.ms`` or ``.bytes``) and the
attribute's docstring. ``docs/configuration.md`` is this module's output,
committed; a test regenerates it and fails when the two differ. Regenerate
with::

    python -m kclient.config.reference > docs/configuration.md
"""

from __future__ import annotations

import ast
import enum
import html
import inspect
import itertools
import sys
import textwrap
from typing import Any

import attrs

from kclient.config.admin import AdminConfig
from kclient.config.base import REQUIRED, Property, _KafkaConfig
from kclient.config.broker import SECURITY_PREFIXES, BrokerConfig
from kclient.config.consumer import ConsumerConfig
from kclient.config.convert import SameAs
from kclient.config.producer import ProducerConfig

__all__ = ["CHANGES_FROM_0_8", "CONFIG_CLASSES", "REGENERATE", "field_docs", "render_class", "render_page", "unit_of"]

#: The config classes the reference page documents, in page order.
CONFIG_CLASSES: tuple[type[_KafkaConfig], ...] = (ProducerConfig, ConsumerConfig, BrokerConfig, AdminConfig)

#: The command that rewrites the committed page.
REGENERATE = "python -m kclient.config.reference > docs/configuration.md"


def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of ``cls`` and its bases, as one-line text.

    An attribute docstring is the string literal right after the attribute's
    declaration (``name: T = prop(...)`` then ``\"\"\"Doc.\"\"\"``), the
    convention mkdocstrings and Sphinx read.

    Args:
        cls: A config class.

    Returns:
        ``{attribute name: docstring with whitespace collapsed}``; a subclass
        overrides its bases.
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not attrs.has(klass):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def unit_of(name: str) -> str:
    """The unit a property's name states: ``ms``, ``bytes`` or ``""``.

    Args:
        name: A Kafka property name.

    Returns:
        ``"ms"`` for ``*.ms``, ``"bytes"`` for ``*.bytes``, else ``""``.
    """
    if name.endswith(".ms"):
        return "ms"
    if name.endswith(".bytes"):
        return "bytes"
    return ""


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, tuple):
        parts = [f"{v[0]}:{v[1]}" if isinstance(v, tuple) and len(v) == 2 else _format_value(v) for v in value]
        return ",".join(parts)
    return str(value)


def _format_default(spec: Property, table: dict[str, Property]) -> str:
    default = spec.default
    if default is REQUIRED:
        return "**required**"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        factory = default.factory
        if isinstance(factory, SameAs):
            return f"same as `{table[factory.attribute].name}`"
        return "computed"
    if default is None:
        return "*(unset)*"
    if spec.secret:
        return "*(secret)*"
    text = _format_value(default)
    if text == "":
        return '`""`' if isinstance(default, str) else "*(empty)*"
    return code_name(text) if "." in text and " " not in text else f"`{text}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def code_name(name: str) -> str:
    """A dotted name as inline code that a narrow table cell wraps only
    after a dot, never mid-word.

    Args:
        name: A property name or dotted value (``metadata.broker.list``).

    Returns:
        HTML: ``<code>metadata.<wbr>broker.<wbr>list</code>`` (escaped).
    """
    return "<code>" + html.escape(name).replace(".", ".<wbr>") + "</code>"


def render_class(cls: type[_KafkaConfig]) -> str:
    """One config class's section: a heading and a Markdown table.

    Columns: property, aliases, default, unit (from the name), description
    (the attribute docstring); the class's own properties first, then the
    inherited (security) ones. Below the table, the modern names the class
    deliberately does not map (``NOT_MAPPED``) and the Kafka names it
    accepts and ignores (``IGNORED``), if any.

    Args:
        cls: A config class built with `prop`.

    Returns:
        Markdown, ending with a newline.
    """
    table = cls.properties()
    docs = field_docs(cls)
    lines = [
        f"## {cls.__name__}",
        "",
        f"`{cls.__module__.rsplit('.', 1)[0]}.{cls.__name__}`.",
        "",
        "| Property | Aliases | Default | Unit | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    own = set(getattr(cls, "__annotations__", {}))
    order = [attr for attr in table if attr in own] + [attr for attr in table if attr not in own]
    for attr in order:
        spec = table[attr]
        aliases = ", ".join(code_name(a) for a in spec.aliases)
        lines.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    code_name(spec.name),
                    aliases,
                    _format_default(spec, table),
                    unit_of(spec.name),
                    docs.get(attr, ""),
                )
            )
            + " |"
        )
    if cls.NOT_MAPPED:
        lines += ["", "Modern names deliberately **not** mapped (an error, or a warning with `strict=False`):", ""]
        lines += [f"- `{name}`: {_cell(why)}." for name, why in sorted(cls.NOT_MAPPED.items())]
    if cls is BrokerConfig:
        prefixes = ", ".join(f"`{p}*`" for p in SECURITY_PREFIXES)
        lines += ["", f"Every {prefixes} property is kept verbatim in `security_config`."]
    if cls.IGNORED:
        lines += ["", "Kafka properties accepted and ignored quietly (they make no sense for kclient):", ""]
        lines.append(", ".join(f"`{name}`" for name in sorted(cls.IGNORED)) + ".")
    return "\n".join(lines) + "\n"


def render_page() -> str:
    """The whole configuration reference page (``docs/configuration.md``).

    Returns:
        Markdown: an introduction, then `render_class` of each of
        `CONFIG_CLASSES`.
    """
    intro = f"""# Configuration reference

<!-- Generated from the config declarations in kclient/config/; do not edit.
     Regenerate with: {REGENERATE} -->

Every property of `ProducerConfig`, `ConsumerConfig`, `BrokerConfig` and
`AdminConfig`
(`kclient.config`), generated from the same declarations the configs are
built from. Build a config from these names with
`ProducerConfig.from_properties({{"bootstrap.servers": "localhost:9092"}})`,
from a `.properties` file with `ProducerConfig.from_properties(path)`, or
with snake_case keyword arguments (`ProducerConfig(metadata_broker_list=...)`).

- **Aliases** are other spellings with the same meaning: Kafka 0.7 names and
  the modern client names. When a property is given under both its name
  and an alias, the name wins and a differing alias is logged as a warning.
- **Unit** is the one the name states (`.ms`, `.bytes`).
- An **unknown key** raises `ConfigError` naming the closest known
  property (`did you mean 'linger.ms'?`).
  `from_properties(..., strict=False)` (also `from_file` and
  `with_properties`) logs it as a warning and ignores it instead.
- A value of the wrong type, out of range or not one of the choices raises
  `ConfigError` naming the property (and the alias it was given as), and
  says which values are accepted.
"""
    return "\n".join([intro, CHANGES_FROM_0_8, *(render_class(cls) for cls in CONFIG_CLASSES)])


#: The section of the page on what behaves differently from Kafka 0.8's
#: configs, whose names and defaults kclient otherwise keeps.
CHANGES_FROM_0_8 = """## What changed from Kafka 0.8

kclient keeps Kafka 0.8's property names and defaults, with these
exceptions:

- **Linger.** The async producer's `queue.buffering.max.ms` defaults to
  **5 ms**, Kafka 4.0's `linger.ms` default (KIP-1030), not 0.8's 5000 ms:
  an async send is acknowledged at once, not seconds later. `linger.ms` and
  0.7's `queue.time` still set it. Given under several of these names with
  different values, `queue.buffering.max.ms` wins over `queue.time`, which
  wins over `linger.ms`, and a warning names the value ignored. Set
  `queue.buffering.max.ms=5000` for the 0.8 behaviour. `console-producer`
  and the Spark sink use the same default.
- **Unknown keys are errors.** A key a config does not know (a typo such as
  `auto.offset.rest`, or a modern name kclient does not map, such as
  `delivery.timeout.ms`) raises `ConfigError` with a "did you mean" suggestion, for
  `ProducerConfig`, `ConsumerConfig`, `AdminConfig` and `BrokerConfig`
  alike, wherever a config is built from property names: the clients'
  constructors given a mapping or a `.properties` path, `from_properties`,
  `from_file`, `with_properties`, `kclient broker server.properties`, and
  the Spark source's and sink's `kafka.*` options. Kafka 0.8 logged a
  warning and ignored the key, so a typo silently kept the default.
- **The escape hatch.** `from_properties(..., strict=False)` (also
  `from_file` and `with_properties`) logs the warning and ignores the key,
  as 0.8 did; pass the config it returns to a client
  (`Producer(ProducerConfig.from_properties(props, strict=False))`). The
  Spark source and sink take the option `failOnUnknownOptions=false`. The
  command-line tools read a properties file shared by several clients
  (`--command-config` of `topics` and `configs`) as Kafka's tools do: keys
  the tool's client does not take are logged and left out.
- **Bad choices say what is accepted.** `auto.offset.reset=beginning` fails
  with "expected one of smallest, largest, earliest (= smallest), latest
  (= largest)": Kafka's modern `earliest` and `latest` and the 0.8 names
  are accepted.
- **Acks.** `request.required.acks` defaults to 1 (the leader wrote it),
  not 0.8's 0, so that a default producer learns about failures.
"""


def main() -> None:
    """Write the page to standard output."""
    sys.stdout.write(render_page())


if __name__ == "__main__":
    main()
