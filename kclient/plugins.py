"""Loading plug-ins named by config properties.

Kafka names plug-ins by class (``serializer.class``, ``partitioner.class``,
0.7's ``event.handler`` and ``callback.handler``). kclient accepts, for each:

- a dotted path ``"package.module.ClassName"`` (``"kclient.DefaultEncoder"``
  works too: the longest importable module prefix is imported and the rest is
  looked up as attributes);
- a class, which is instantiated;
- an instance, which is used as is.

Keyword arguments given to `load_plugin` are passed to the class's
constructor when it accepts them (by name, or through ``**kwargs``) and
silently left out otherwise. By convention the clients pass ``config=`` (the
`ProducerConfig`), the way Kafka 0.8 hands every
plug-in its properties, so a plug-in that wants settings takes a ``config``
keyword and one that does not can ignore it.
"""

from __future__ import annotations

import abc
import importlib
import importlib.util
import inspect
from typing import Any, ClassVar, TypeVar

from kclient.errors import ConfigError

__all__ = ["PluginInterface", "load_plugin", "resolve_dotted"]

T = TypeVar("T")


class PluginInterface(abc.ABC):  # noqa: B024  ABCMeta for __subclasshook__; each interface declares its abstract method
    """Base of the plug-in interfaces (`kclient.Encoder`, `kclient.Decoder`,
    `kclient.Partitioner`): duck-typed abstract classes.

    An interface names its one method in ``plugin_method``; any class with a
    callable attribute of that name then counts as a subclass of the
    interface for ``isinstance`` / ``issubclass`` (so plug-ins need not
    inherit from it). Subclasses of an interface (``DefaultEncoder``, ...)
    check by inheritance as usual.
    """

    #: The method that makes a class count as this interface ("" for none).
    plugin_method: ClassVar[str] = ""

    @classmethod
    def __subclasshook__(cls, other: type) -> Any:
        if "plugin_method" in cls.__dict__ and cls.plugin_method:
            return callable(getattr(other, cls.plugin_method, None)) or NotImplemented
        return NotImplemented


def resolve_dotted(path: str) -> Any:
    """Import the object named by ``"package.module.Name[.Attr...]"``.

    Tries the longest prefix that is a module, then follows the remaining
    parts with ``getattr``.

    Args:
        path: The dotted path.

    Returns:
        The object it names.

    Raises:
        kclient.errors.ConfigError: No prefix is an importable module,
            importing the module itself fails (the original error is
            chained), or an attribute is missing.
    """
    parts = path.strip().split(".")
    if not all(part.isidentifier() for part in parts):
        raise ConfigError(f"Cannot load {path!r}: not a dotted path such as package.module.ClassName")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):  # a parent is not a package, or is missing
            spec = None
        except Exception as exc:  # a parent package raised while importing
            raise ConfigError(f"Cannot load {path!r}: importing {module_name} failed: {exc!r}") from exc
        if spec is None:
            continue
        try:
            obj: Any = importlib.import_module(module_name)
        except Exception as exc:
            raise ConfigError(f"Cannot load {path!r}: importing {module_name} failed: {exc!r}") from exc
        for i, attr in enumerate(parts[cut:], start=cut):
            try:
                obj = getattr(obj, attr)
            except AttributeError:
                owner = ".".join(parts[:i])
                raise ConfigError(f"Cannot load {path!r}: {owner} has no attribute {attr!r}") from None
        return obj
    raise ConfigError(f"Cannot load {path!r}: no module named {parts[0]!r}")


def _accepted_kwargs(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return kwargs
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {k: v for k, v in kwargs.items() if k in names}


def load_plugin(value: Any, base_class: type[T], /, *, property_name: str | None = None, **kwargs: Any) -> T:
    """Turn a plug-in property value into an instance of ``base_class``.

    Args:
        value: A dotted path (imported with `resolve_dotted`; if it names a
            class the class is instantiated, otherwise the object must be an
            instance already), a class (instantiated with those ``kwargs``
            its constructor accepts) or an instance (returned unchanged).
        base_class: The class the plug-in must be an instance of.
        property_name: The configuration property, only for error messages.
        **kwargs: Offered to the constructor; those it does not accept are
            left out.

    Returns:
        The plug-in instance.

    Raises:
        kclient.errors.ConfigError: The import fails, the class is not a
            subclass of ``base_class``, the object is not an instance of it,
            or the constructor raises (the original error is chained).
    """
    where = f" for {property_name}" if property_name else ""
    expected = f"{base_class.__module__}.{base_class.__qualname__}"
    obj = value
    if isinstance(obj, str):
        try:
            obj = resolve_dotted(obj)
        except ConfigError as exc:
            raise ConfigError(f"{exc}{where}") from exc.__cause__
    if isinstance(obj, type):
        if not issubclass(obj, base_class):
            raise ConfigError(f"{value!r}{where} is not a subclass of {expected}")
        try:
            obj = obj(**_accepted_kwargs(obj, kwargs))
        except Exception as exc:
            raise ConfigError(f"Cannot instantiate {obj.__qualname__}{where}: {exc!r}") from exc
    if not isinstance(obj, base_class):
        raise ConfigError(f"{value!r}{where} is not a {expected} (got {type(obj).__name__})")
    return obj
